"""The workflow component's data: what Agent-Zero's web UI draws in place of the text card (v1.x).

Two JSON values per run, made from the run's state alone, as the card is.  The drawing (``graph``), the same on
every pass of a plan version: the plan's graph laid out (each node's row and column, computed here so the browser
only draws).  The run (``graph_run``), a few hundred bytes: each node's mark (done, failed, current, skipped,
pending, one letter each in the drawing's order), the edges the run took (their places in the drawing), the facts
of the card (step, attempt, last check, PACE level, status), the controls that apply now with the exact words a
person would type (a button sends them, so the engine has one path) and the picture of an ended run.  The card's text stays the log item's content: the component's text
alternative, and all a v0.9.x chat or a UI without the extension shows.  Pure.
"""

from __future__ import annotations

import json
from typing import Any

try:  # optional speed-up (a pass's run value in 2 µs instead of 8); the standard library is enough
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

from ..core.control import CONTROLS
from ..core.kinds import node_kind
from ..core.model import Plan
from .card import NO_ENTRY, _attempt, _marks, _scan, _short, branch_marks, facts

VERSION = 1
MAX_NODES = 40  # a larger plan is shown by its text card alone
MAX_JSON = 4_800  # Agent-Zero keeps 5,000 characters of a log item's value
TYPE = "graph_workflow"  # the log item's type, which the pack's web UI extension draws
KEY = "graph"  # the log item's value that holds the plan's drawing: the same on every pass of a plan version
RUN_KEY = "graph_run"  # the value that holds where the run is: small, and the only one a pass changes
MARKS = {"current": "c", "done": "d", "skipped": "s", "failed": "f", "reached": "r", "pending": "p"}


def view(plan: Plan | None, state: dict[str, Any], pace_level: str = "", picture: str = "") -> dict[str, str]:
    """The component's data: {KEY: the plan's drawing, RUN_KEY: the run on it}, both JSON; {} when the plan is
    unknown or too large to draw (the text card stays).  The drawing is one string per plan version, so Agent-Zero's
    log, which masks every value it is sent, is sent it once per card and then only the run's few hundred bytes."""
    if plan is None or len(plan.nodes) > MAX_NODES or state.get("status") == "rejected":
        return {}
    drawing, order, edges_of = _skeleton(plan)
    if not drawing:
        return {}
    f = facts(plan, state, pace_level)
    done, failed = _marks(plan, state, order)
    skipped = {plan.success_path[i] if isinstance(i, int) and i < len(plan.success_path) else i
               for i in state.get("steps_skipped", ())}
    active = f["status"] == "active"
    current = f["node"]
    at: set[str] = set()
    if f["branches"]:  # branches running at once: each one's step is current
        at, more_done, more_failed = branch_marks(state)
        done, failed = done | more_done, (failed | more_failed) - more_done
    marks = "".join("c" if (nid == current or nid in at) and active else "d" if nid in done else "s" if nid in skipped else
                    "f" if nid in failed else "r" if nid == current else "p" for nid in order)
    path = state.get("path") or []
    taken = {(a, b) for a, b in zip(path, path[1:])}
    if plan.fan_in_of:  # branches run at once: the edges they took are in the events (each with its branch)
        taken |= {(e.get("from"), e.get("to")) for e in state.get("events") or () if e.get("type") == "edge_followed"}
    verdict, _, end = _scan(state.get("events") or ())
    run = {
        "v": VERSION, "run": f["run"], "status": f["status"], "paused": bool(state.get("paused")),
        "step": f["step"], "current": f["current"], "attempt": f["attempt"], "pace": f["pace_level"],
        "done": f["done"], "total": f["total"],
        "check": None if verdict is None else {"step": plan.nodes[verdict["node"]].name
                                               if verdict["node"] in plan.nodes else verdict["node"],
                                               "outcome": verdict["outcome"],
                                               "reason": _short(verdict.get("reason", ""))},
        "said": _short((end or NO_ENTRY).get("said", "")),
        "picture": picture if picture.endswith(".svg") else "",
        "marks": marks, "taken": [i for i, e in enumerate(edges_of) if e in taken],
        "controls": controls(plan, state, done),
    }
    if state.get("pressed"):  # the answer to the last control pressed in the page
        run["answer"] = state["pressed"]
    if f["branches"]:
        run["branches"] = [[b["name"], b["status"], b["step"], b["attempt"]] for b in f["branches"]]
    out = _json(run)
    return {KEY: drawing, RUN_KEY: out} if len(out) <= MAX_JSON else {}


def _json(value: dict[str, Any]) -> str:
    """Compact JSON, characters as they are (orjson when present; the standard encoder for what it refuses,
    such as a lone surrogate, which it escapes)."""
    if _orjson is not None:
        try:
            return _orjson.dumps(value).decode()
        except TypeError:
            pass
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


_SAID = {name: kind.canonical for name, kind in CONTROLS.items()}


def controls(plan: Plan, state: dict[str, Any], done: set[str] | None = None) -> list[list[str]]:
    """The controls that apply to the run now: [label, the words sent, node id (a step to go back to, else "")];
    ``done``: the steps done, when the caller has them (else read from the state)."""
    if state.get("status", "active") != "active":
        return []
    said = _SAID
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
    if done is None:
        done, _ = _marks(plan, state, plan.success_path)
    for nid in plan.success_path:  # going back to a step already done (chosen on the graph), in the words that
        if nid in done and nid != state.get("current_node"):  # stay a control after the agent asked a question
            name = plan.nodes[nid].name
            out.append([f"Back to {name}", said["back"].replace("<step>", f"the '{name}' step"), nid])
    return out


_SKELETONS: dict[tuple[str, str], tuple] = {}  # what a plan version draws the same on every pass


def _skeleton(plan: Plan) -> tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(the drawing as JSON, "" when it is too large for a log item; the node ids in its order; each edge's
    (from, to) in its order) of a plan version, computed once: a pass pays for the run's marks only."""
    key = (plan.id, plan.version)
    found = _SKELETONS.get(key)
    if found is None:
        if len(_SKELETONS) >= 64:
            _SKELETONS.pop(next(iter(_SKELETONS)))
        places = _layout(plan)
        drawing = _json({"v": VERSION, "plan": plan.name,
                         "nodes": [[nid, _short(n.name)[:48], node_kind(n.type).name, *places[nid]]
                                   for nid, n in plan.nodes.items()],
                         "edges": [[e.src, e.dst, e.condition] for e in plan.edges]})
        found = _SKELETONS[key] = (drawing if len(drawing) <= MAX_JSON else "", tuple(plan.nodes),
                                   tuple((e.src, e.dst) for e in plan.edges))
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
