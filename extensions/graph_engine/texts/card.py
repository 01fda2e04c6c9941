"""The workflow card: what a person watching Agent-Zero's chat sees of a run.

One log item per run, made from the run's state alone (``facts``), the same facts the SALUTE report gives the
org supervisor, so what the person reads and what the supervisor reads never disagree.  Pure: the adapter
creates the item once and updates it in place.  The state is one the adapter validated (or the record of a
rejected one, which holds only its run id, plan and end): fields may be missing, never of the wrong type.
"""

from __future__ import annotations

from typing import Any

from ..core.control import CONTROLS
from ..core.kinds import ENDINGS
from ..core.model import Node, Plan
from . import render
from ..core.state import branch_outcome
from .render import plural, progress, steps_done

REASON_SHOWN = 160
MAX_LISTED = 12  # a plan with more steps lists the ones around the current step
AROUND = 3  # steps listed before and after the current one in a long plan
HEADING = "Workflow"
ROUTE_WORDS = {"on_retry": "failed", "on_fail": "failed", "on_exhaust": "failed with no attempts left"}
STEERING = "Steer it from the chat: " + ", ".join(f'"{k.canonical}"' for k in CONTROLS.values() if k.on_card)
NO_ENTRY: dict[str, Any] = {}


def facts(plan: Plan | None, state: dict[str, Any], pace_level: str = "") -> dict[str, Any]:
    """The run's facts, counted the one way every text counts them (the card's table, the SALUTE report)."""
    total = state.get("total_steps", 0)
    done = steps_done(state)
    current = state.get("current_node", "")
    node = plan.nodes.get(current) if plan is not None else None
    step = attempt = ""
    if node is not None and node.kind.judged:
        index = plan.success_index.get(current)
        step = f"step {index + 1} of {total}" if index is not None else "extra step"
        attempt = _attempt(node, state)
    return {
        "plan": state.get("plan_name", ""), "run": state.get("run_id", ""), "status": state.get("status", "active"),
        "done": done, "total": total, "progress": round(done / total, 2) if total else 0.0,
        "current_step": state.get("current_step", 0),  # what the supervisor reads (graph plans: steps done)
        "node": current, "current": node.name if node is not None else "", "step": step, "attempt": attempt,
        "pace_level": (state.get("escalation") or NO_ENTRY).get("pace_level") or pace_level or "primary",
        "turns_since_progress": state.get("turns_since_progress", 0),
        "branches": branch_facts(plan, state),
    }


def branch_facts(plan: Plan | None, state: dict[str, Any]) -> list[dict[str, Any]]:
    """The branches running at once (a fork), side by side: each one's name, status, step and attempt."""
    fork = state.get("fork")
    if not isinstance(fork, dict):
        return []
    out = []
    for b in fork.get("branches", ()):
        sub = b.get("state") if isinstance(b.get("state"), dict) else NO_ENTRY
        node = plan.nodes.get(sub.get("current_node", "")) if plan is not None else None
        running = b.get("status") in ("pending", "running")
        status = b.get("status", "")
        if running and sub.get("status", "active") != "active":  # its steps are done; its agent is answering
            status, running = branch_outcome(sub), False
        out.append({"id": b.get("id", ""), "name": _branch_name(plan, b.get("id", ""), sub), "status": status,
                    "at": node.id if node is not None and running and node.kind.judged else "",
                    "step": node.name if node is not None and running and node.kind.judged else "",
                    "attempt": _attempt(node, sub) if node is not None and running and node.kind.judged else "",
                    "reason": _short(b.get("reason", ""))})
    return out


def branch_marks(state: dict[str, Any]) -> tuple[set[str], set[str], set[str]]:
    """(nodes a running branch is at, nodes its branches completed, nodes whose last check failed there)."""
    fork = state.get("fork")
    at, done, failed = set(), set(), set()
    for b in fork.get("branches", ()) if isinstance(fork, dict) else ():
        sub = b.get("state") if isinstance(b.get("state"), dict) else NO_ENTRY
        if b.get("status") in ("pending", "running") and sub.get("status", "active") == "active":
            at.add(sub.get("current_node", ""))
        for nid, entry in (sub.get("visited") or NO_ENTRY).items():
            if entry.get("completed"):
                done.add(nid)
            elif entry.get("failures", 0) > 0:
                failed.add(nid)
    return at, done, failed


def text(plan: Plan | None, state: dict[str, Any], pace_level: str = "", picture: str = "") -> tuple[str, str, dict]:
    """(heading, content, key-value table) of the card."""
    f = facts(plan, state, pace_level)
    status = f["status"]
    lines = _steps(plan, state) if plan is not None and status != "rejected" else []
    verdict, after, end = _scan(state.get("events") or ())
    if verdict is not None:
        lines.append(f"Last check: {_name(plan, verdict['node'])}: {verdict['outcome']}, "
                     f"{_short(verdict.get('reason', ''))}")
        route = _route(plan, state["events"][after + 1:], state["events"][:after])
        if route:
            lines.append(f"Route: {route}")
    if status != "active":
        lines.append(f"Outcome: {_outcome(plan, state, f, end or NO_ENTRY)}")
    if picture:
        lines.append(f"Picture of the run: {picture}")
    if f["branches"]:
        lines.append("Branches, each in a subordinate agent, at once: " + "; ".join(_branch_words(b)
                                                                                for b in f["branches"]))
    if status == "active" and plan is not None:
        if state.get("paused"):
            lines.append("Paused by the user: no step is shown until \"resume the workflow\"")
        lines.append(STEERING)
    where = f"{f['step']}: {f['current']}" if f["step"] else f["current"] or f["node"]
    kvps = {"Plan": f["plan"], "Run": f["run"], "Step": where or "-",
            "Done": f"{f['done']} of {plural(f['total'], 'step')}", "Attempt": f["attempt"] or "-",
            "PACE level": f["pace_level"], "Status": status}
    if f["branches"]:
        kvps["Branches"] = " · ".join(_branch_words(b) for b in f["branches"])
    now = where if status == "active" else (f"escalated to PACE level {f['pace_level']}" if status == "escalated"
                                            else status)
    return f"{HEADING}: {f['plan']}: {now}", "\n".join(lines), kvps


def _branch_words(b: dict[str, Any]) -> str:
    if b["step"]:
        return f"{b['name']}: at {b['step']}" + (f" (attempt {b['attempt']})" if b["attempt"] else "")
    return f"{b['name']}: {b['status']}" + (f" ({b['reason']})" if b["reason"] and b["status"] != "success" else "")


def _steps(plan: Plan, state: dict[str, Any]) -> list[str]:
    """The steps of the success path with their marks (a long plan: the steps around the current one); an
    extra step the run is on is listed below them.  Costs the same for a plan of 10 steps or 5,000."""
    current = state.get("current_node", "")
    active = state.get("status", "active") == "active"
    path, total = plan.success_path, len(plan.success_path)
    lo, hi = 0, total
    if total > MAX_LISTED:
        centre = plan.success_index.get(current, min(steps_done(state), total - 1))
        lo = max(0, min(centre - AROUND, total - 2 * AROUND - 1))
        hi = min(total, lo + 2 * AROUND + 1)
    done, failed = _marks(plan, state, path[lo:hi])
    skipped = {path[i] if isinstance(i, int) and i < total else i for i in state.get("steps_skipped", ())}
    at = set()
    if state.get("fork"):  # the branches' own runs say where they are
        at, more_done, more_failed = branch_marks(state)
        done, failed = done | more_done, (failed | more_failed) - more_done
    lines = [f"[...] steps 1 to {lo} not listed"] if lo else []
    for i in range(lo, hi):
        nid = path[i]
        node = plan.nodes[nid]
        if nid == current and active:
            extra = _attempt(node, state)
            lines.append(f"[current] {i + 1}. {node.name}" + (f" (attempt {extra})" if extra else ""))
        elif nid in at and active:
            lines.append(f"[current] {i + 1}. {node.name} (its branch is running)")
        else:
            mark = 'done' if nid in done else 'skipped' if nid in skipped else 'failed' if nid in failed else 'pending'
            lines.append(f"[{mark}] {i + 1}. {node.name}")
    if hi < total:
        lines.append(f"[...] steps {hi + 1} to {total} not listed")
    node = plan.nodes.get(current)
    if active and node is not None and node.kind.judged and current not in plan.success_index:
        extra = _attempt(node, state)
        lines.append(f"[current] extra step: {node.name}" + (f" (attempt {extra})" if extra else ""))
    return lines


def _marks(plan: Plan, state: dict[str, Any], shown: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """(steps done, steps whose last check failed and that are not done), among the steps shown."""
    if plan.mode == "linear":  # the old selector's state counts steps by index
        ids = plan.success_path
        return ({ids[i] for i in state.get("steps_completed", ()) if i < len(ids)},
                {ids[i] for i in state.get("steps_failed", ()) if i < len(ids)})
    visited, exhausted = state.get("visited", NO_ENTRY), state.get("steps_failed", ())
    done, failed = set(), set()
    for nid in shown:
        entry = visited.get(nid, NO_ENTRY)
        if entry.get("completed"):
            done.add(nid)
        elif entry.get("attempts", 0) > 0 or nid in exhausted:
            failed.add(nid)
    return done, failed


def _attempt(node: Node, state: dict[str, Any]) -> str:
    """'2 of 3' for a task with a retry budget, else ''."""
    if node.max_retries <= 0:
        return ""
    failures = state.get("visited", NO_ENTRY).get(node.id, NO_ENTRY).get("failures", 0)
    return f"{min(failures, node.max_retries) + 1} of {node.max_retries + 1}"


def _scan(events: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, int, dict[str, Any] | None]:
    """(the last verdict, its index, the run's end event), newest first, in one pass over the events."""
    end = None
    for i in range(len(events) - 1, -1, -1):
        kind = events[i]["type"]
        if kind == "node_verified":
            return events[i], i, end
        if end is None and kind in ENDINGS:
            end = events[i]
    return None, -1, end


def _route(plan: Plan | None, later: list[dict[str, Any]], earlier: list[dict[str, Any]]) -> str:
    """The edge taken after the last check, when it was not the plain success route."""
    hops = [e for e in later if e["type"] == "edge_followed"]
    if not hops:
        retry = next((e for e in later if e["type"] == "retry_triggered"), None)
        return "" if retry is None else (f"{_name(plan, retry['node'])} failed -> tried again (attempt "
                                         f"{retry['attempt']} of {retry['of']})")  # no edge leaves the step
    first, target = hops[0], hops[-1]["to"]
    if first["condition"] in ("on_success", "always"):
        return ""
    word = ROUTE_WORDS.get(first["condition"], f"routed on {first['condition']}")
    back = "back to " if any(e["type"] == "node_entered" and e["node"] == target for e in earlier) else ""
    return f"{_name(plan, first['from'])} {word} -> {back}{_name(plan, target)}"


def _outcome(plan: Plan | None, state: dict[str, Any], f: dict[str, Any], end: dict[str, Any]) -> str:
    status = f["status"]
    if status == "completed":
        return f"completed at {_name(plan, end.get('node', ''))} ({progress(state)})"
    if status == "stopped":
        return f"stopped by the user, who said \"{_short(end.get('said', ''))}\" ({progress(state)})"
    reason = _short(end.get("reason", "") or state.get("reason", ""))
    if status == "escalated":
        return f"escalated to PACE level {f['pace_level']}: {reason}"
    return f"{status}: {reason}"


ITEM_SHOWN = 40  # characters of a branch's item the card shows beside its name


def _branch_name(plan: Plan | None, bid: str, sub: dict[str, Any]) -> str:
    """A branch's name; one over a list's item with its number and the item ('Fix one file #2: tests/b.py')."""
    if plan is None or bid in plan.nodes:
        return _name(plan, bid)
    item = " ".join(str((sub.get("branch") or {}).get("item", "")).split())
    item = item if len(item) <= ITEM_SHOWN else item[: ITEM_SHOWN - 3] + "..."
    return render.branch_name(plan, bid) + (f": {item}" if item else "")


def _name(plan: Plan | None, nid: str) -> str:
    node = plan.nodes.get(nid) if plan is not None else None
    return node.name if node is not None else nid


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_SHOWN else text[: REASON_SHOWN - 3] + "..."


PROPOSAL_WORDS = {"proposed": "proposed, waiting for approval", "approved": "approved", "rejected": "rejected",
                  "replaced": "replaced by a newer proposal"}


def proposal_text(plan: Plan, proposal: str, status: str, by: str) -> tuple[str, str, dict]:
    """(heading, content, key-value table) of the card of a workflow proposed in the chat."""
    steps = [plan.nodes[n].name for n in plan.success_path if plan.nodes[n].kind.judged]
    lines = [f"Proposed by {'the agent' if by == 'agent' else 'the person'}: {plural(len(plan.task_ids), 'step')}"]
    lines += [f"{i}. {name}" for i, name in enumerate(steps[:MAX_LISTED], 1)]
    if status == "proposed":
        lines.append('Approve it with "go ahead" (or the Approve button); "no" rejects it')
    kvps = {"Plan": plan.name, "Run": proposal, "Status": status}
    return f"{HEADING}: {plan.name}: {PROPOSAL_WORDS.get(status, status)}", "\n".join(lines), kvps
