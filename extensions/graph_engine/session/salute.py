"""SALUTE reports in the org kernel's schema (``orgkernel:salute_report`` v1.0).

``build_report`` is pure; ``write_report`` puts it where the org dispatcher puts
its own: ``reports/{role_id}_latest.json`` plus an archive copy whose name never
collides with an existing one (a numeric suffix is added inside the same second).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import Any

from ..texts.card import facts

STATE_BY_PACE = {"primary": "active", "alternate": "error_recovery", "contingent": "escalating",
                 "emergency": "aborted"}
HEALTH_BY_PACE = {"primary": "nominal", "alternate": "degraded", "contingent": "critical", "emergency": "critical"}
ACTIVITY_EVENTS = 5


def build_report(*, state: dict[str, Any], pace_level: str, role: dict[str, Any], org: dict[str, Any],
                 agent_number: int, bst_domain: str, now: datetime, status_state: str = "") -> dict[str, Any]:
    f = facts(None, state, pace_level)  # the card's facts: the person and the supervisor read the same
    return {
        "_schema": "orgkernel:salute_report",
        "_version": "1.0",
        "status": {
            "state": status_state or STATE_BY_PACE.get(pace_level, "active"),
            "progress": f["progress"],
            "pace_level": f["pace_level"],
            "health": HEALTH_BY_PACE.get(pace_level, "nominal"),
        },
        "activity": {
            "current_task": f["plan"] or bst_domain or "idle",
            "bst_domain": bst_domain,
            "htn_plan": f["plan"],
            "htn_step": f["current_step"],
            "htn_total_steps": f["total"],
            "current_tool": "",
            "iterations_on_current_step": f["turns_since_progress"],
            "workflow_node": f["node"],
            "workflow_events": list(state.get("events", [])[-ACTIVITY_EVENTS:]),
            "workflow_branches": [{k: b[k] for k in ("id", "name", "status", "step")} for b in f["branches"]],
        },
        "location": {"working_directory": "", "files_modified": [], "files_read": [], "resources_claimed": []},
        "unit": {
            "role_id": _text(role, "role_id") or "unknown",
            "role_name": _text(role, "role_name"),
            "agent_number": agent_number,
            "reports_to": _text(role.get("chain_of_command"), "reports_to"),
            "organization": _text(org, "org_id"),
        },
        "time": {
            "timestamp": now.isoformat(),
            "task_started": None,
            "elapsed_seconds": 0,
            "turns_elapsed": state.get("turn", 0),
            "turns_since_progress": f["turns_since_progress"],
            "context_turns_remaining": None,
        },
        "environment": {
            "model": "", "context_fill_pct": 0.0, "context_tokens_used": 0, "context_tokens_max": 0,
            "gpu_available": False, "tool_failures_consecutive": 0, "tool_failures_total": 0,
            "memory_fragments_stored": 0,
        },
    }


def _text(data: Any, key: str) -> str:
    """A text field of the org kernel's role or org file; anything else there reads as ""."""
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, str) else ""


def write_report(reports_dir: str, role_id: str, report: dict[str, Any], now: datetime | None = None) -> str:
    """Write latest + a never-colliding archive copy; return the archive path."""
    now = now or datetime.now(timezone.utc)
    archive_dir = os.path.join(reports_dir, "archive")
    os.makedirs(archive_dir, exist_ok=True)
    blob = json.dumps(report, indent=2, default=str).encode("utf-8")
    latest = os.path.join(reports_dir, f"{role_id}_latest.json")
    tmp = latest + f".tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(blob)
    os.replace(tmp, latest)
    stem = f"{role_id}_{now.strftime('%Y%m%d_%H%M%S')}"
    for n in range(1000):
        path = os.path.join(archive_dir, f"{stem}.json" if n == 0 else f"{stem}_{n}.json")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        return path
    raise OSError(f"{archive_dir}: 1000 reports named {stem}*; clean the archive")
