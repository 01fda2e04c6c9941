"""The workflow card: what a person watching Agent-Zero's chat sees of a run.

One log item per run, made from the run's state alone (``facts``), the same facts the SALUTE report gives the
org supervisor, so what the person reads and what the supervisor reads never disagree.  Pure: the adapter
creates the item once and updates it in place.
"""

from __future__ import annotations

from typing import Any

from .model import Plan
from .render import plural, progress, steps_done

REASON_SHOWN = 160
HEADING = "Workflow"
ROUTE_WORDS = {"on_retry": "failed", "on_fail": "failed", "on_exhaust": "failed with no attempts left"}
ENDINGS = ("plan_completed", "plan_escalated", "plan_expired", "plan_ended", "plan_aborted", "plan_withdrawn",
           "state_rejected")


def facts(plan: Plan | None, state: dict[str, Any], pace_level: str = "") -> dict[str, Any]:
    """The run's facts, counted the one way every text counts them (the card's table, the SALUTE report)."""
    total = _int(state.get("total_steps"))
    done = steps_done(state)
    current = state.get("current_node", "")
    node = plan.nodes.get(current) if plan is not None and isinstance(current, str) else None
    escalation = state.get("escalation") if isinstance(state.get("escalation"), dict) else {}
    index = plan.success_index.get(node.id) if plan is not None and node is not None else None
    return {
        "plan": str(state.get("plan_name", "")), "run": str(state.get("run_id", "")),
        "status": str(state.get("status", "active")), "done": done, "total": total,
        "current_step": _int(state.get("current_step")),  # what the supervisor reads (graph plans: steps done)
        "progress": round(done / total, 2) if total else 0.0,
        "node": current if isinstance(current, str) else "", "current": node.name if node is not None else "",
        "step": "" if node is None or node.type != "task" else
                (f"step {index + 1} of {total}" if index is not None else "extra step"),
        "attempt": _attempt(node, _entry(state, node)) if node is not None else "",
        "pace_level": escalation.get("pace_level") or pace_level or "primary",
        "turns_since_progress": _int(state.get("turns_since_progress")),
    }


def text(plan: Plan | None, state: dict[str, Any], pace_level: str = "", picture: str = "") -> tuple[str, str, dict]:
    """(heading, content, key-value table) of the card."""
    f = facts(plan, state, pace_level)
    lines = _steps(plan, state) if plan is not None and f["status"] != "rejected" else []
    verdict = _last(state, "node_verified")
    if verdict:
        lines.append(f"Last check: {_name(plan, verdict.get('node', ''))}: {verdict.get('outcome')}, "
                     f"{_short(str(verdict.get('reason', '')))}")
    route = _route(plan, state)
    if route:
        lines.append(f"Route: {route}")
    outcome = _outcome(plan, state, f)
    if outcome:
        lines.append(f"Outcome: {outcome}")
    if picture:
        lines.append(f"Picture of the run: {picture}")
    where = f"{f['step']}: {f['current']}" if f["step"] else f["current"] or f["node"]
    kvps = {"Plan": f["plan"], "Run": f["run"], "Step": where or "-",
            "Done": f"{f['done']} of {plural(f['total'], 'step')}", "Attempt": f["attempt"] or "-",
            "PACE level": f["pace_level"], "Status": f["status"]}
    now = where if f["status"] == "active" else (f"escalated to PACE level {f['pace_level']}"
                                                  if f["status"] == "escalated" else f["status"])
    return f"{HEADING}: {f['plan']}: {now}", "\n".join(lines), kvps


def _steps(plan: Plan, state: dict[str, Any]) -> list[str]:
    """Each step of the success path with its mark; an extra step the run is on is listed below them."""
    current = state.get("current_node", "")
    active = state.get("status", "active") == "active"
    done, failed = _marks(plan, state)
    lines = []
    for i, nid in enumerate(plan.success_path):
        node = plan.nodes[nid]
        if nid == current and active:
            mark, extra = "current", _attempt(node, _entry(state, node))
        else:
            mark, extra = ("done" if nid in done else "failed" if nid in failed else "pending"), ""
        lines.append(f"[{mark}] {i + 1}. {node.name}" + (f" (attempt {extra})" if extra else ""))
    node = plan.nodes.get(current) if isinstance(current, str) else None
    if active and node is not None and node.type == "task" and current not in plan.success_index:
        extra = _attempt(node, _entry(state, node))
        lines.append(f"[current] extra step: {node.name}" + (f" (attempt {extra})" if extra else ""))
    return lines


def _marks(plan: Plan, state: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(steps done, steps whose last check failed and that are not done)."""
    if plan.mode == "linear":  # the old selector's state counts steps by index
        ids = plan.success_path
        pick = lambda key: {ids[i] for i in state.get(key) or () if isinstance(i, int) and 0 <= i < len(ids)}  # noqa: E731
        return pick("steps_completed"), pick("steps_failed")
    visited = state.get("visited") if isinstance(state.get("visited"), dict) else {}
    done = {nid for nid, e in visited.items() if isinstance(e, dict) and e.get("completed")}
    failed = {nid for nid, e in visited.items() if isinstance(e, dict) and _int(e.get("attempts")) > 0}
    return done, (failed | set(state.get("steps_failed") or ())) - done


def _entry(state: dict[str, Any], node: Any) -> dict[str, Any]:
    visited = state.get("visited")
    entry = visited.get(node.id) if isinstance(visited, dict) else None
    return entry if isinstance(entry, dict) else {}


def _attempt(node: Any, entry: dict[str, Any]) -> str:
    """'2 of 3' for a task with a retry budget, else ''."""
    if node.type != "task" or node.max_retries <= 0:
        return ""
    return f"{min(_int(entry.get('failures')), node.max_retries) + 1} of {node.max_retries + 1}"


def _route(plan: Plan | None, state: dict[str, Any]) -> str:
    """The edge taken after the last check, when it was not the plain success route."""
    events = state.get("events") or []
    after = next((i for i in range(len(events) - 1, -1, -1) if events[i].get("type") == "node_verified"), None)
    if after is None:
        return ""
    hops = [e for e in events[after + 1:] if e.get("type") == "edge_followed"]
    retry = next((e for e in events[after + 1:] if e.get("type") == "retry_triggered"), None)
    if not hops and retry is not None:  # retried in place: no edge leaves the step
        return f"{_name(plan, retry.get('node', ''))} failed -> tried again (attempt {retry.get('attempt')} of " \
               f"{retry.get('of')})"
    if not hops or hops[0].get("condition") in ("on_success", "always"):
        return ""
    first, target = hops[0], hops[-1].get("to", "")
    word = ROUTE_WORDS.get(first.get("condition", ""), f"routed on {first.get('condition')}")
    back = "back to " if any(e.get("type") == "node_entered" and e.get("node") == target
                             for e in events[:after]) else ""
    return f"{_name(plan, first.get('from', ''))} {word} -> {back}{_name(plan, target)}"


def _outcome(plan: Plan | None, state: dict[str, Any], f: dict[str, Any]) -> str:
    status = f["status"]
    if status == "active":
        return ""
    end = _last(state, *ENDINGS) or {}
    if status == "completed":
        return f"completed at {_name(plan, end.get('node', ''))} ({progress(state)})"
    if status == "escalated":
        return f"escalated to PACE level {f['pace_level']}: {_short(str(end.get('reason', '')))}"
    return f"{status}: {_short(str(end.get('reason', '') or state.get('reason', '')))}"


def _last(state: dict[str, Any], *types: str) -> dict[str, Any] | None:
    events = state.get("events") or []
    for i in range(len(events) - 1, -1, -1):
        if isinstance(events[i], dict) and events[i].get("type") in types:
            return events[i]
    return None


def _name(plan: Plan | None, nid: str) -> str:
    node = plan.nodes.get(nid) if plan is not None else None
    return node.name if node is not None else nid


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_SHOWN else text[: REASON_SHOWN - 3] + "..."
