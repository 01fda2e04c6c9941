"""The audit log: one JSON line per workflow event, appended per run.

Files: ``<runs dir>/<chat id>/<run id>.jsonl`` where the runs dir is
``GRAPH_ENGINE_RUNS_DIR`` or ``<Agent-Zero root>/usr/graph_engine/runs``.  Each line
is written and flushed on its own (a crash loses at most the line being
written).  A line carries the time, the chat id, the agent number, the run id,
the plan id and version hash, and the event (its type, turn, seq, node and the
event's own fields: verdict and reason with the evidence's sha256, the edge
taken with its condition, ...).  Lines that could not be written stay pending in
the state (``audit_seq``) and are written on the next call that can.

Retention: when a run file is created, the chat's folder keeps its newest
``GRAPH_ENGINE_RUNS_KEEP`` files (default 50); once per process, run files older
than ``GRAPH_ENGINE_RUNS_DAYS`` days (default 30) are deleted in every chat
folder, and chat folders left empty are removed.
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime, timezone
from typing import Any, Iterator

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
DEFAULT_KEEP = 50
DEFAULT_DAYS = 30


def runs_dir(a0_root: str) -> str:
    return os.environ.get("GRAPH_ENGINE_RUNS_DIR") or os.path.join(a0_root, "usr", "graph_engine", "runs")


def safe_name(text: str) -> str:
    return _SAFE.sub("_", text)[:80] or "unknown"


def _env_int(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        return default


class AuditLog:
    def __init__(self, root_dir: str) -> None:
        self.root = root_dir
        self._swept = False

    def path(self, chat_id: str, run_id: str) -> str:
        return os.path.join(self.root, safe_name(chat_id), f"{safe_name(run_id)}.jsonl")

    def append(self, state: dict[str, Any], chat_id: str, agent_number: int) -> int:
        """Write the state's events not written yet; return how many.  Raises OSError (nothing is lost)."""
        done = int(state.get("audit_seq", 0) or 0)
        pending = [e for e in state.get("events", []) if e.get("seq", 0) > done]
        if not pending:
            return 0
        path = self.path(chat_id, state.get("run_id", "run"))
        if not os.path.exists(path):
            self._prune(os.path.dirname(path))
            os.makedirs(os.path.dirname(path), exist_ok=True)
        head = {"chat": chat_id, "agent": agent_number, "run": state.get("run_id", ""),
                "plan": state.get("plan_id", ""), "version": state.get("plan_version", "")}
        with open(path, "a", encoding="utf-8") as fh:
            for event in pending:
                line = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **head, **event}
                fh.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
                fh.flush()
                state["audit_seq"] = event["seq"]
        return len(pending)

    def _prune(self, chat_dir: str) -> None:
        keep = _env_int("GRAPH_ENGINE_RUNS_KEEP", DEFAULT_KEEP)
        files = sorted(_run_files(chat_dir), key=lambda p: (os.path.getmtime(p), p))
        for old in files[: max(0, len(files) - (keep - 1))]:
            _unlink(old)
        if not self._swept:
            self._swept = True
            self.sweep()

    def sweep(self) -> None:
        cutoff = time.time() - _env_int("GRAPH_ENGINE_RUNS_DAYS", DEFAULT_DAYS) * 86400
        try:
            chats = [os.path.join(self.root, d) for d in os.listdir(self.root)]
        except OSError:
            return
        for chat in chats:
            if not os.path.isdir(chat):
                continue
            for path in _run_files(chat):
                try:
                    if os.path.getmtime(path) < cutoff:
                        _unlink(path)
                except OSError:
                    continue
            try:
                os.rmdir(chat)  # only succeeds when empty
            except OSError:
                pass


def _run_files(folder: str) -> list[str]:
    try:
        return [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".jsonl")]
    except OSError:
        return []


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def read_lines(path: str) -> Iterator[dict[str, Any]]:
    """The events of one run file; a torn last line (a crash mid-write) is skipped."""
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            raw = raw.strip()
            if not raw:
                continue
            try:
                yield json.loads(raw)
            except ValueError:
                continue


def replay_path(events: list[dict[str, Any]]) -> list[str]:
    """The node sequence a run took, rebuilt from its events alone."""
    path: list[str] = []
    for e in events:
        if e.get("type") == "plan_activated":
            path = [e["node"]]
        elif e.get("type") == "edge_followed":
            path.append(e["to"])
    return path
