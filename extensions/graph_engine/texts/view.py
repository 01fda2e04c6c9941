"""The workflow component's data: what Agent-Zero's web UI draws in place of the text card (v1.x).

One JSON value per run, made from the run's state alone, as the card is: the plan's graph laid out (each node's
row and column, computed here so the browser only draws), each node's mark (done, failed, current, skipped,
pending), the edges the run took, the facts of the card (step, attempt, last check, PACE level, status), the
controls that apply now with the exact words a person would type (a button sends them, so the engine has one
path) and the picture of an ended run.  The card's text stays the log item's content: the component's text
alternative, and all a v0.9.x chat or a UI without the extension shows.  Pure.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.control import CONTROLS
from ..core.kinds import node_kind
from ..core.model import Plan
from .card import NO_ENTRY, _attempt, _marks, _scan, _short, facts

VERSION = 1
MAX_NODES = 40  # a larger plan is shown by its text card alone
MAX_JSON = 4_800  # Agent-Zero keeps 5,000 characters of a log item's value
TYPE = "graph_workflow"  # the log item's type, which the pack's web UI extension draws
KEY = "graph"  # the log item's value that holds the data


def view(plan: Plan | None, state: dict[str, Any], pace_level: str = "", picture: str = "") -> str:
    """The component's data as JSON ("" when the plan is unknown or too large to draw: the text card stays)."""
    if plan is None or len(plan.nodes) > MAX_NODES or state.get("status") == "rejected":
        return ""
    f = facts(plan, state, pace_level)
    rows, names, kinds, edges_of = _skeleton(plan)
    done, failed = _marks(plan, state, tuple(plan.nodes))
    skipped = {plan.success_path[i] if isinstance(i, int) and i < len(plan.success_path) else i
               for i in state.get("steps_skipped", ())}
    active = f["status"] == "active"
    current = f["node"]
    nodes = []
    for nid in plan.nodes:
        mark = ("current" if nid == current and active else "done" if nid in done else
                "skipped" if nid in skipped else "failed" if nid in failed else
                "reached" if nid == current else "pending")
        nodes.append([nid, names[nid], kinds[nid], rows[nid][0], rows[nid][1], mark])
    path = state.get("path") or []
    taken = {(a, b) for a, b in zip(path, path[1:])}
    edges = [[src, dst, condition, (src, dst) in taken] for src, dst, condition in edges_of]
    verdict, _, end = _scan(state.get("events") or ())
    data = {
        "v": VERSION, "plan": f["plan"], "run": f["run"], "status": f["status"], "paused": bool(state.get("paused")),
        "step": f["step"], "current": f["current"], "attempt": f["attempt"], "pace": f["pace_level"],
        "done": f["done"], "total": f["total"],
        "check": None if verdict is None else {"step": plan.nodes[verdict["node"]].name
                                               if verdict["node"] in plan.nodes else verdict["node"],
                                               "outcome": verdict["outcome"],
                                               "reason": _short(verdict.get("reason", ""))},
        "said": _short((end or NO_ENTRY).get("said", "")),
        "picture": picture if picture.endswith(".svg") else "",
        "nodes": nodes, "edges": edges, "controls": controls(plan, state),
    }
    out = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return out if len(out) <= MAX_JSON else ""


def controls(plan: Plan, state: dict[str, Any]) -> list[list[str]]:
    """The controls that apply to the run now: [label, the words sent, node id (a step to go back to, else "")]."""
    if state.get("status", "active") != "active":
        return []
    said = {name: kind.canonical for name, kind in CONTROLS.items()}
    if state.get("paused"):
        return [["Resume", said["resume"], ""], ["Stop", said["stop"], ""]]
    out = [["Stop", said["stop"], ""], ["Pause", said["pause"], ""]]
    node = plan.nodes.get(state.get("current_node", ""))
    if node is not None and node.type in ("task", "human"):
        out.append(["Skip step", said["skip"], ""])
    attempt = _attempt(node, state) if node is not None and node.type == "task" else ""
    if attempt and not attempt.startswith("1 "):  # an attempt used: the step can have them back
        out.append(["Retry step", said["retry"], ""])
    out.append(["Restart", said["restart"], ""])
    done, _ = _marks(plan, state, plan.success_path)
    for nid in plan.success_path:  # going back to a step already done (chosen on the graph), in the words that
        if nid in done and nid != state.get("current_node"):  # stay a control after the agent asked a question
            name = plan.nodes[nid].name
            out.append([f"Back to {name}", said["back"].replace("<step>", f"the '{name}' step"), nid])
    return out


_SKELETONS: dict[tuple[str, str], tuple] = {}  # what a plan version draws the same on every pass


def _skeleton(plan: Plan) -> tuple:
    """(places, short names, kinds, edges) of a plan version, computed once: a pass pays for its marks only."""
    key = (plan.id, plan.version)
    found = _SKELETONS.get(key)
    if found is None:
        if len(_SKELETONS) >= 64:
            _SKELETONS.pop(next(iter(_SKELETONS)))
        found = _SKELETONS[key] = (_layout(plan), {nid: _short(n.name)[:48] for nid, n in plan.nodes.items()},
                                   {nid: node_kind(n.type).name for nid, n in plan.nodes.items()},
                                   tuple((e.src, e.dst, e.condition) for e in plan.edges))
    return found


def _layout(plan: Plan) -> dict[str, tuple[int, int]]:
    """Each node's (row, column): rows by the shortest number of edges from the start (top to bottom, as the
    run goes), columns in the order the nodes were reached; a node no edge reaches goes below the rest."""
    rows: dict[str, int] = {plan.start: 0}
    order = [plan.start]
    for nid in order:  # breadth first: the list grows as it is read
        for e in sorted(plan.out_edges.get(nid, ()), key=lambda e: (e.dst not in plan.success_index, e.dst)):
            if e.dst not in rows:
                rows[e.dst] = rows[nid] + 1
                order.append(e.dst)
    last = max(rows.values(), default=0)
    for nid in plan.nodes:
        if nid not in rows:
            last += 1
            rows[nid] = last
    columns: dict[int, int] = {}
    out = {}
    for nid in [*order, *(n for n in plan.nodes if n not in order)]:
        row = rows[nid]
        out[nid] = (row, columns.get(row, 0))
        columns[row] = columns.get(row, 0) + 1
    return out
