"""The workflow component's data: what Agent-Zero's web UI draws in place of the text card (v1.x).

Two values per run, made from the run's state alone, as the card is.  The drawing (``graph``), the same on every
pass of a plan version: each node's id, name and kind and each edge's ends (their places in the node list) and
condition, as JSON cut into chunks of at most MAX_JSON characters (Agent-Zero keeps 5,000 characters of each
value of a log item, and of each element of a list), so a plan of up to MAX_NODES nodes travels whole; the
browser lays it out (it measures the labels at the page's font).  The run (``graph_run``), a few hundred bytes:
each node's mark (one letter each, MARKS) in the drawing's order, the edges the run took (their places), the
facts of the card (step, attempt, last check, PACE level, status) and the controls that apply now, each with its
kind and the exact words a person would type.  A plan of FOLD_AT nodes or more is shown folded: the run names
the WINDOW nodes around the current step (``window``, places in the drawing); above FULL_MARKS nodes the marks
are those of the window's nodes only, so a pass costs the same for a plan of 40 nodes or 1,000.  The card's
text stays the log item's content: the component's text alternative, and all a v0.9.x chat or a UI without the
extension shows.  Pure.

Marks: ``c`` current, ``d`` done, ``e`` done after a failed check (failed, then passed), ``v`` passed (a node the
run went through that is not a step it did: start, a decision, a checkpoint, a fork; a node on the run's path),
``s`` skipped, ``f`` failed, ``r`` where an ended run stopped, ``p`` not reached.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

try:  # optional speed-up (a pass's run value in 2 µs instead of 8); the standard library is enough
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

from ..core.control import CONTROLS
from ..core.kinds import node_kind
from ..core.model import Plan
from .card import NO_ENTRY, _attempt, _marks, _scan, _short, branch_marks, facts
from .render import steps_done

VERSION = 2
MAX_NODES = 1_000  # a larger plan is shown by its text card alone
FOLD_AT = 40  # a plan of this many nodes or more is shown folded: the neighbourhood of the current step
FULL_MARKS = 200  # up to this many nodes a pass sends every node's mark; above it, the window's only
WINDOW = 16  # nodes in the neighbourhood of the current step
HUB = 8  # a node with more neighbours than this is shown in a window, not walked through (a shared escalation)
BACK_MAX = 6  # steps done offered to go back to: the latest ones before the current step
BACK_SCAN = 60  # success-path places looked at for them
MAX_JSON = 4_800  # Agent-Zero keeps 5,000 characters of a log item's value (of each element of a list)
TYPE = "graph_workflow"  # the log item's type, which the pack's web UI extension draws
KEY = "graph"  # the log item's value that holds the plan's drawing (a list of chunks): the same on every pass
RUN_KEY = "graph_run"  # the value that holds where the run is: small, and the only one a pass changes
MARKS = {"current": "c", "done": "d", "recovered": "e", "passed": "v", "skipped": "s", "failed": "f",
         "reached": "r", "pending": "p"}


@dataclass(frozen=True)
class Skeleton:
    """What a plan version draws the same on every pass, computed once."""
    chunks: tuple[str, ...]  # the drawing's JSON, cut into values Agent-Zero keeps whole
    order: tuple[str, ...]  # the node ids in the drawing's order
    place: dict[str, int]  # node id -> its place in ``order``
    edges: dict[tuple[str, str], tuple[int, ...]]  # (from, to) -> the places of the edges between them
    near: tuple[tuple[int, ...], ...]  # each node's neighbours (either direction), by place
    windows: dict[tuple[str, ...], tuple[list[int], tuple[str, ...]]]  # the window around each node (its places
    # and ids; made with the skeleton) and around the steps branches are at (made when first needed)
    backs: dict[str, list[str]]  # the "go back" controls made so far, by step


def view(plan: Plan | None, state: dict[str, Any], pace_level: str = "", picture: str = "") -> dict[str, Any]:
    """The component's data: {KEY: the plan's drawing (JSON in chunks), RUN_KEY: the run on it (JSON)}; {} when
    the plan is unknown or too large to draw (the text card stays).  The drawing is the same list of strings on
    every pass of a plan version, so Agent-Zero's log, which masks every value it is sent, is sent it once per
    card and then only the run's few hundred bytes."""
    if plan is None or len(plan.nodes) > MAX_NODES or state.get("status") == "rejected":
        return {}
    sk = _skeleton(plan)
    f = facts(plan, state, pace_level)
    current = f["node"]
    at: set[str] = set()
    if f["branches"]:  # branches running at once: each one's step is current
        at = branch_marks(state)[0]
    window, shown = _window(sk, current, at) if len(sk.order) >= FOLD_AT else (None, sk.order)
    if len(sk.order) <= FULL_MARKS:
        shown = sk.order
    path = state.get("path") or []
    if len(shown) < len(sk.order):  # a window: the edges taken lately are the ones it can show
        path = path[-(WINDOW // 2):]
    pairs = zip(path, path[1:])
    if plan.fan_in_of:  # branches run at once: the edges they took are in the events (each with its branch)
        pairs = {*pairs, *((e.get("from"), e.get("to")) for e in state.get("events") or ()
                           if e.get("type") == "edge_followed")}
    taken: set[int] = set()
    for pair in pairs:
        hit = sk.edges.get(pair)
        if hit:
            taken.update(hit)
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
        "marks": marks(plan, state, shown, f["status"] == "active", at),
        "taken": sorted(taken),
        "controls": _controls(plan, state, sk),
    }
    if window is not None:
        run["window"] = window
    if state.get("pressed"):  # the answer to the last control pressed in the page
        run["answer"] = state["pressed"]
    if f["branches"]:
        run["branches"] = [[b["name"], b["status"], b["step"], b["attempt"]] for b in f["branches"]]
    out = _json(run)
    return {KEY: list(sk.chunks), RUN_KEY: out} if sk.chunks and len(out) <= MAX_JSON else {}


def marks(plan: Plan, state: dict[str, Any], shown: tuple[str, ...], active: bool, at: set[str] = frozenset()
          ) -> str:
    """One letter (MARKS) per node of ``shown``: where the run is, what it did and what it went through (one look
    per node: a pass pays for the nodes shown, not for the plan)."""
    current = state.get("current_node", "")
    visited = state.get("visited") or NO_ENTRY
    if plan.mode == "linear" or at:  # steps counted by index, or branches whose own runs say what they did
        done, failed = _marks(plan, state, shown)
        if at:
            _, more_done, more_failed = branch_marks(state)
            done, failed = done | more_done, (failed | more_failed) - more_done
    else:
        done = failed = None
    exhausted = state.get("steps_failed") or ()
    skipped = {plan.success_path[i] if isinstance(i, int) and i < len(plan.success_path) else i
               for i in state.get("steps_skipped") or ()} or NO_ENTRY
    passed = _passed(plan, state, 2 * WINDOW if len(shown) < len(plan.nodes) else 0)
    if not active:
        at = frozenset()
        current_if_active, current_if_ended = "", current
    else:
        current_if_active, current_if_ended = current, ""
    out = []
    for nid in shown:
        entry = visited.get(nid)
        if entry is None and done is None:  # never entered, or entered and left without a check (the usual)
            out.append("c" if nid == current_if_active or nid in at else "s" if nid in skipped else
                       "f" if nid in exhausted else "r" if nid == current_if_ended else "v" if nid in passed else "p")
            continue
        entry = entry or NO_ENTRY
        if nid == current_if_active or nid in at:
            out.append("c")
        elif entry.get("completed") if done is None else nid in done:
            out.append("e" if entry.get("failures", 0) > 0 else "d")
        elif nid in skipped:
            out.append("s")
        elif (entry.get("attempts", 0) > 0 or nid in exhausted) if failed is None else nid in failed:
            out.append("f")
        elif nid == current_if_ended:
            out.append("r")
        else:
            out.append("v" if nid in passed else "p")
    return "".join(out)


def _passed(plan: Plan, state: dict[str, Any], recent: int = 0) -> set[str]:
    """The nodes the run went through: its start, and every node on its path (the newest MAX_PATH, or the newest
    ``recent`` for a window around the current step; a step gone back over leaves it), the branches' paths
    included."""
    passed = {plan.start, *(state.get("path") or ())[-recent:]}
    fork = state.get("fork")
    for b in fork.get("branches", ()) if isinstance(fork, dict) else ():
        sub = b.get("state") if isinstance(b.get("state"), dict) else NO_ENTRY
        passed.update(sub.get("path") or ())
    return passed


def _window(sk: Skeleton, current: str, at: set[str]) -> tuple[list[int], tuple[str, ...]]:
    """(places, ids) of the WINDOW nodes nearest the current step (and the steps branches are at)."""
    key = (current, *sorted(at)) if at else (current,)
    found = sk.windows.get(key)
    if found is None:
        if len(sk.windows) >= 2 * MAX_NODES:  # (one per node, and one per set of steps branches were at)
            for k in [k for k in sk.windows if len(k) > 1 or k[0] not in sk.place]:
                del sk.windows[k]
        found = sk.windows[key] = _around(sk, [sk.place[n] for n in key if n in sk.place] or [0])
    return found


def _around(sk: Skeleton, seeds: list[int]) -> tuple[list[int], tuple[str, ...]]:
    """The WINDOW nodes nearest ``seeds``, nearest first by edges in either direction; a hub (a node with more
    than HUB neighbours, such as an escalation every step shares) is shown but not walked through."""
    seen = dict.fromkeys(seeds)
    frontier = list(seen)
    while frontier and len(seen) < WINDOW:
        nxt = []
        for i in frontier:
            near = sk.near[i]
            if len(near) > HUB and i not in seeds:
                continue
            for j in near:
                if j not in seen:
                    seen[j] = None
                    nxt.append(j)
                    if len(seen) >= WINDOW:
                        break
            if len(seen) >= WINDOW:
                break
        frontier = nxt
    places = sorted(seen)
    return places, tuple(sk.order[i] for i in places)


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


def controls(plan: Plan, state: dict[str, Any]) -> list[list[str]]:
    """The controls that apply to the run now, each [label, kind (core.control's), node id (the step to go back
    to, else ""), the words a person types for it]: the steps to go back to are the latest BACK_MAX done before
    the current step (a bounded look, whatever the plan's size)."""
    return _controls(plan, state, _skeleton(plan))


def _controls(plan: Plan, state: dict[str, Any], sk: Skeleton) -> list[list[str]]:
    if state.get("status", "active") != "active":
        saved = (state.get("pressed") or {}).get("control") == "save" and state["pressed"].get("status") == "applied"
        if state.get("status") == "completed" and state.get("source") and not saved:  # a workflow written in the chat
            return [["Save as a plan", "save", "", "save this workflow"]]
        return []
    said = _SAID
    if state.get("paused"):
        return [["Resume", "resume", "", said["resume"]], ["Stop", "stop", "", said["stop"]]]
    out = [["Stop", "stop", "", said["stop"]], ["Pause", "pause", "", said["pause"]]]
    node = plan.nodes.get(state.get("current_node", ""))
    if node is not None and node.kind.rests:
        out.append(["Skip step", "skip", "", said["skip"]])
    attempt = _attempt(node, state) if node is not None and node.kind.judged else ""
    if attempt and not attempt.startswith("1 "):  # an attempt used: the step can have them back
        out.append(["Retry step", "retry", "", said["retry"]])
    out.append(["Restart", "restart", "", said["restart"]])
    backs = sk.backs
    for nid in _back_targets(plan, state):
        entry = backs.get(nid)
        if entry is None:  # in the words that stay a control after the agent asked a question
            name = plan.nodes[nid].name
            entry = backs[nid] = ["Back to " + name, "back", nid, said["back"].replace("<step>", f"the '{name}' step")]
        out.append(entry)
    return out


def _back_targets(plan: Plan, state: dict[str, Any]) -> list[str]:
    """The latest BACK_MAX steps of the success path done before where the run is, in the path's order."""
    path, current = plan.success_path, state.get("current_node", "")
    end = plan.success_index.get(current)
    if end is None:  # an extra step, or a node off the path: after the last path step the run went through
        end = next((plan.success_index[n] + 1 for n in reversed(state.get("path") or ()) if n in plan.success_index),
                   min(steps_done(state), len(path)))
    if plan.mode == "linear":  # the old selector's state counts steps by index
        near = path[max(0, end - BACK_SCAN):end]
        done, _ = _marks(plan, state, near)
        return [n for n in near if n in done and n != current][-BACK_MAX:]
    visited, out = state.get("visited") or NO_ENTRY, []
    for j in range(end - 1, max(-1, end - 1 - BACK_SCAN), -1):
        if visited.get(path[j], NO_ENTRY).get("completed") and path[j] != current:
            out.append(path[j])
            if len(out) == BACK_MAX:
                break
    return out[::-1]


_SKELETONS: dict[tuple[str, str], Skeleton] = {}  # what a plan version draws the same on every pass


def _skeleton(plan: Plan) -> Skeleton:
    """The drawing of a plan version and the indexes a pass looks things up in, computed once: a pass pays for
    the run's marks only.  No chunks when the drawing is too large (more than MAX_NODES nodes)."""
    key = (plan.id, plan.version)
    found = _SKELETONS.get(key)
    if found is None:
        if len(_SKELETONS) >= 64:
            _SKELETONS.pop(next(iter(_SKELETONS)))
        order = tuple(plan.nodes)
        place = {nid: i for i, nid in enumerate(order)}
        drawing = _json({"v": VERSION, "plan": plan.name,
                         "nodes": [[nid, _short(n.name), node_kind(n.type).name] for nid, n in plan.nodes.items()],
                         "edges": [[place[e.src], place[e.dst], e.condition] for e in plan.edges]})
        edges: dict[tuple[str, str], tuple[int, ...]] = {}
        near: list[dict[int, None]] = [{} for _ in order]
        for i, e in enumerate(plan.edges):
            edges[(e.src, e.dst)] = (*edges.get((e.src, e.dst), ()), i)
            a, b = place[e.src], place[e.dst]
            if a != b:
                near[a][b] = near[b][a] = None
        chunks = tuple(drawing[i:i + MAX_JSON] for i in range(0, len(drawing), MAX_JSON))
        found = Skeleton(chunks if len(order) <= MAX_NODES else (), order, place, edges,
                         tuple(tuple(n) for n in near), {}, {})
        if FOLD_AT <= len(order) <= MAX_NODES:  # each node's window, once: a pass looks it up
            for nid, i in place.items():
                found.windows[(nid,)] = _around(found, [i])
        _SKELETONS[key] = found
    return found


PROPOSAL_STATUSES = ("proposed", "approved", "rejected", "replaced")
SOURCE_KEY = "graph_source"  # a proposed workflow's text, in chunks (the component's Edit shows it)
PROPOSAL_CONTROLS = [["Approve", "approve", "", "go ahead"], ["Edit", "edit", "", ""], ["Reject", "reject", "", "no"]]


def proposal_view(plan: Plan, proposal: str, status: str, source: str, answer: dict[str, str] | None = None
                  ) -> dict[str, Any]:
    """The component's data for a workflow proposed in the chat (``status``: PROPOSAL_STATUSES): its graph, every
    step not reached, the Approve, Edit and Reject controls while it waits, and its text (``SOURCE_KEY``)."""
    sk = _skeleton(plan)
    if not sk.chunks:
        return {}
    run = {"v": VERSION, "run": proposal, "status": status, "paused": False, "step": "", "current": "",
           "attempt": "", "pace": "primary", "done": 0, "total": len(plan.task_ids), "check": None, "said": "",
           "picture": "", "marks": MARKS["pending"] * len(sk.order), "taken": [],
           "controls": PROPOSAL_CONTROLS if status == "proposed" else []}
    if answer:
        run["answer"] = answer
    out = _json(run)
    if len(out) > MAX_JSON:
        return {}
    return {KEY: list(sk.chunks), RUN_KEY: out,
            SOURCE_KEY: [source[i:i + MAX_JSON] for i in range(0, len(source), MAX_JSON)] or [""]}
