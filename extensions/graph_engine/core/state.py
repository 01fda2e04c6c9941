"""Traversal state: one JSON-safe dict, its creation, its bounds, and migration of older states.

The dict is what ``agent._htn_state`` holds.  The org supervisor and SALUTE
reports read ``plan_name``, ``current_step``, ``total_steps``,
``steps_completed`` (its length) and ``turns_since_progress``; everything else
is the engine's own.  Every key is named and documented in ``records.RunState``
(a test checks it against SHAPES); a fork is ``records.Fork``.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable, Iterator

from .kinds import LAST_OUTCOMES, NODE_KINDS, NODE_OUTCOMES, OUTCOMES, RUN_STATUSES, NodeKind
from .model import Node, Plan
from .fanout import first_of
from .records import Fork, RunState
from .routing import reachable
from .plain import NotPlain, as_text, copy_plain

SCHEMA = "graph_engine.core.state/2"
OLDER_SCHEMAS = ("graph_engine.core.state/1",)
DATA_KEY = "graph_engine_state"  # agent data key: no leading "_", so Agent-Zero saves it with the chat
MAX_EVENTS = 50
MAX_PATH = 50
MAX_SHOWN = 4
MAX_CONSUMED = 8


def new_state(plan: Plan, monologue: str, pass_key: str, global_turn: int) -> RunState:
    return {
        "schema": SCHEMA,
        "run_id": uuid.uuid4().hex[:12],
        "status": "active",
        "plan_id": plan.id,
        "plan_name": plan.name,
        "plan_version": plan.version,
        "mode": plan.mode,
        "domain": plan.domains[0] if plan.domains else "",
        "current_step": 0,
        "total_steps": plan.total_steps,
        "steps_completed": [],
        "steps_failed": [],
        "turns_since_progress": 0,
        "stale_after_turns": plan.stale_after_turns,
        "max_turns": plan.max_turns,
        "current_node": plan.start,
        "visited": {},
        "path": [],
        "path_len": 0,
        "total_nodes": len(plan.task_ids),
        "completed_nodes": 0,
        "started_turn": global_turn,
        "turn": 0,
        "turns_since_transition": 0,
        "events": [],
        "seq": 0,
        "last_outcome": "",
        "last_failure": "",
        "route_note": "",
        "stalled": "",
        "last_pass": pass_key,
        "message_monologue": monologue,
        "shown": [],
        "consumed": [],
        "notice": "",
        "notice_turn": 0,
        "checkpoint": "",
        "escalation": None,
        "audit_seq": 0,
        "context": {},
        "outcome": {},
        "provisional": None,  # {"key", "started"}: decided from trigger phrases alone, the selector confirms
        **control_fields(),
    }


def branch_state(plan: Plan, parent: dict[str, Any], fork_node: str, fan_in: str, first: str, branch_id: str = "",
                 item: str | None = None) -> dict[str, Any]:
    """The run of one branch of a fork: the parent's plan version from the branch's first node up to the fan-in
    (``branch``: which run, fork and branch it is), driven by a subordinate agent of its own.  A branch over a
    list's item (``branch_id`` ``first#n``) has the item in its ``branch`` and its context."""
    state = new_state(plan, "", "", 0)
    branch_id = branch_id or first
    mine = {"parent": parent.get("run_id", ""), "id": branch_id, "fork": fork_node, "fan_in": fan_in}
    if item is not None:
        mine["item"] = item
        state["context"] = {"item": item}
    state.update(current_node=first, max_turns=parent.get("max_turns", 0) or plan.max_turns, branch=mine)
    emit(state, "plan_activated", node=first, plan=plan.id, version=plan.version, triggers=[], by="branch",
         branch=branch_id, parent=parent.get("run_id", ""), **({"item": item} if item is not None else {}))
    push_path(state, first)
    emit(state, "node_entered", node=first)
    return state


def child_state(child: Plan, parent: dict[str, Any], manager: Node) -> dict[str, Any]:
    """The run of a manager node's child plan, driven by a subordinate agent of its own and supervised by the
    parent at each of its passes (``branch``: which run and manager, the child plan, its stop condition and
    cycles); it ends at its own exit or escalation, as a branch does."""
    state = new_state(child, "", "", 0)
    state.update(branch={"parent": parent.get("run_id", ""), "id": manager.id, "fork": manager.id, "fan_in": "",
                         "child": child.id, "stop": manager.stop_condition, "max_cycles": str(manager.max_cycles)})
    emit(state, "plan_activated", node=child.start, plan=child.id, version=child.version, triggers=[], by="manager",
         branch=manager.id, parent=parent.get("run_id", ""))
    push_path(state, child.start)
    emit(state, "node_entered", node=child.start)
    return state


def branch_outcome(sub: dict[str, Any]) -> str:
    """A branch's run's outcome once it ended (its ``branch_finished`` event; "fail" without one), else ""."""
    if sub.get("status", "active") == "active":
        return ""
    end = next((e for e in reversed(sub.get("events") or ()) if e.get("type") == "branch_finished"), None)
    return str(end.get("outcome", "fail")) if end else "fail"


# ── the fields the user's controls keep (see control.py and engine's "the user's controls") ─────────────


def control_fields() -> dict[str, Any]:
    """A new run's values of the fields the user's controls and timed human gates keep."""
    return {
        "paused": False,  # "pause the workflow": no step shown, nothing judged, no turn counted
        "steps_skipped": [],  # steps the user skipped (node ids; step indexes in a linear plan), not done
        "attempts_restored": [],  # steps whose attempts "retry this step" gave back (once each)
        "gate": None,  # the human gate waiting now: {"node", "path_len", "turn", "at" (seconds since the epoch)}
    }


def upgrade(state: dict[str, Any]) -> dict[str, Any]:
    """Bring a state written by an earlier version of this pack to the current schema, in place."""
    if state.get("schema") == SCHEMA:
        return state
    old = state.get("schema")
    state.setdefault("run_id", uuid.uuid4().hex[:12])
    state.setdefault("status", "active")
    for key, default in (("notice", ""), ("notice_turn", 0), ("checkpoint", ""), ("escalation", None),
                         ("audit_seq", 0)):
        state.setdefault(key, default)
    state["schema"] = SCHEMA
    emit(state, "state_migrated", node=state.get("current_node", ""), source=old)
    return state


def emit(state: dict[str, Any], etype: str, **fields: Any) -> dict[str, Any]:
    """Append a typed event; the list keeps the newest MAX_EVENTS."""
    seq = state["seq"] = state.get("seq", 0) + 1
    event = {"type": etype, "turn": state.get("turn", 0), "seq": seq}
    if fields:
        event.update(fields)
    events = state.get("events")
    if events is None:
        events = state["events"] = []
    events.append(event)
    if len(events) > MAX_EVENTS:
        del events[: len(events) - MAX_EVENTS]
    return event


def logged(state: dict[str, Any], seq: int) -> None:
    """The host wrote (or kept with the chat) the run's audit lines up to ``seq``."""
    state["audit_seq"] = seq


def pictured(state: dict[str, Any], path: str) -> None:
    """The host drew the picture of the ended run at ``path``."""
    state["picture"] = path


def push_path(state: dict[str, Any], node_id: str) -> None:
    path = state.setdefault("path", [])
    path.append(node_id)
    state["path_len"] = state.get("path_len", 0) + 1
    if len(path) > MAX_PATH:
        del path[: len(path) - MAX_PATH]


def remember(state: dict[str, Any], key: str, item: Any, limit: int) -> None:
    items = state.setdefault(key, [])
    items.append(item)
    if len(items) > limit:
        del items[: len(items) - limit]


def record_shown(state: dict[str, Any], pass_key: str, node_id: str) -> None:
    """Note which node's instructions are in the prompt of the call made at ``pass_key`` ("": none, the call was
    shown no step)."""
    shown = state.get("shown")
    if shown is None:
        shown = state["shown"] = []
    for i in range(len(shown) - 1, -1, -1):
        if shown[i][0] == pass_key:
            del shown[i]
    shown.append([pass_key, node_id])
    if len(shown) > MAX_SHOWN:
        del shown[: len(shown) - MAX_SHOWN]


def shown_node(state: dict[str, Any], pass_key: str) -> str | None:
    for key, node in state.get("shown", []):
        if key == pass_key:
            return node
    return None


# ── parsing a state found on the agent ──────────────────────────────────────
# A state this process did not write itself (restored with the chat, or left on the agent by another layer) is
# read into a NEW value, every field checked against the plan version it names; the stored value is never
# changed.  The first problem found is the answer, naming the field.  To add a field: one row in SHAPES (its
# type; OPTIONAL when older states may lack it), and a rule in _value_rules or, when its value depends on the
# plan, in _plan_rules.  A field SHAPES does not name is carried over as plain JSON (bounded by copy_plain).

Shape = tuple[str, Callable[[Any], bool]]  # (what the value must be, the test)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _texts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


TEXT: Shape = ("a str", lambda v: isinstance(v, str))
INT: Shape = ("an int", _is_int)
LIST: Shape = ("a list", lambda v: isinstance(v, list))
DICT: Shape = ("a dict", lambda v: isinstance(v, dict))
TEXTS: Shape = ("a list of text", _texts)
STEP_IDS: Shape = ("a list of step ids", lambda v: isinstance(v, list) and all(isinstance(x, str) or _is_int(x)
                                                                             for x in v))

OUTCOME_KEYS = {"status": TEXT, "preferred_label": TEXT, "suggested_next_ids": TEXTS}
ESCALATION_KEYS = {"node": TEXT, "reason": TEXT, "pace_level": TEXT, "turn": INT}


def _fork_fits(v: Any) -> bool:
    """Null, or a fork of its shape (records.Fork.fits) whose every branch's run has a state's shape."""
    return v is None or (Fork.fits(v) and all(problem_with(b["state"]) == "" for b in v["branches"]))


def _keys_of(kinds: dict[str, Shape]) -> Callable[[Any], bool]:
    """A dict whose keys are among ``kinds``, each value of its shape."""
    return lambda v: isinstance(v, dict) and all(k in kinds and kinds[k][1](x) for k, x in v.items())


SHAPES: dict[str, Shape] = {
    "plan_id": TEXT, "plan_name": TEXT, "plan_version": TEXT, "mode": TEXT, "domain": TEXT,
    "current_step": INT, "total_steps": INT, "steps_completed": STEP_IDS, "steps_failed": STEP_IDS,
    "turns_since_progress": INT, "stale_after_turns": INT, "max_turns": INT, "current_node": TEXT,
    "visited": DICT, "path": TEXTS, "path_len": INT, "total_nodes": INT, "completed_nodes": INT,
    "started_turn": INT, "turn": INT, "turns_since_transition": INT, "events": LIST, "seq": INT,
    "last_outcome": TEXT, "last_failure": TEXT, "route_note": TEXT, "stalled": TEXT, "last_pass": TEXT,
    "message_monologue": TEXT, "shown": ("a list of [pass, node] pairs", lambda v: isinstance(v, list) and all(
        isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) for y in x) for x in v)),
    "consumed": TEXTS,
    # schema 2
    "run_id": TEXT, "status": TEXT, "notice": TEXT, "notice_turn": INT, "checkpoint": TEXT,
    "escalation": ("a dict of node, reason, pace_level and turn, or null",
                   lambda v: v is None or _keys_of(ESCALATION_KEYS)(v)),
    "audit_seq": INT,
    "branch_turns": INT,
    # added within schema 2: optional
    "context": ("a dict of names and JSON values", lambda v: isinstance(v, dict) and all(_scalar(x)
                                                                                       for x in v.values())),
    "outcome": ("a dict of status, preferred_label and suggested_next_ids", _keys_of(OUTCOME_KEYS)),
    "provisional": ("a dict of key and started, or null", lambda v: v is None or (
        isinstance(v, dict) and set(v) == {"key", "started"} and isinstance(v["key"], str)
        and isinstance(v["started"], bool))),
    "parallel": ("a list of {node, pending, failed[, items, values]} frames", lambda v: isinstance(v, list) and all(
        isinstance(f, dict) and {"node", "pending", "failed"} <= set(f) <= {"node", "pending", "failed", "items",
                                                                           "values"}
        and isinstance(f["node"], str) and _texts(f["pending"]) and _texts(f["failed"])
        and (lambda items: isinstance(items, dict) and all(isinstance(x, str) for x in items.values()))(
            f.get("items", {}))
        and isinstance(f.get("values", {}), dict) and all(isinstance(x, dict) for x in f.get("values", {}).values())
        for f in v)),
    "gate_jumps": ("a dict of node ids and counts", lambda v: isinstance(v, dict) and all(
        _is_int(x) for x in v.values())),
    "held": ("a bool", lambda v: isinstance(v, bool)),
    "branch": ("a dict of parent, id, fork, fan_in[, item] (a branch's run), or with child, stop and max_cycles (a "
               "manager's child's run)", lambda v: isinstance(v, dict)
               and {"parent", "id", "fork", "fan_in"} <= set(v) <= {"parent", "id", "fork", "fan_in", "item", "child",
                                                                    "stop", "max_cycles"}
               and all(isinstance(x, str) for x in v.values())),
    "fork": ("null or {node, fan_in, max_parallel, branches} (branches running at once)", _fork_fits),
    "picture": TEXT,
    "reply_seen": ("[pass, the mark of the newest reply then (or null), the call that pass judges]",
                   lambda v: isinstance(v, list) and len(v) == 3 and isinstance(v[0], str)
                   and (v[1] is None or isinstance(v[1], str)) and isinstance(v[2], str)),
    "source": ("{format, text[, request]}: the text of a plan proposed in the chat (compiled again after a "
               "restart) and the request it was written for",
               lambda v: isinstance(v, dict) and {"format", "text"} <= set(v) <= {"format", "text", "request"}
               and v["format"] in ("dot", "json") and all(isinstance(x, str) for x in v.values())),
    "pressed": ("{id, control, status, text}: the answer to the last control pressed in the web UI",
                lambda v: isinstance(v, dict) and set(v) == {"id", "control", "status", "text"}
                and all(isinstance(x, str) for x in v.values())),
    # the user's controls: optional
    "paused": ("a bool", lambda v: isinstance(v, bool)),
    "steps_skipped": STEP_IDS, "attempts_restored": STEP_IDS,
    "gate": ("null or {node, path_len, turn, at} (a waiting human gate)", lambda v: v is None or (
        isinstance(v, dict) and set(v) == {"node", "path_len", "turn", "at"} and isinstance(v["node"], str)
        and _is_int(v["path_len"]) and v["path_len"] >= 0 and _is_int(v["turn"]) and v["turn"] >= 0
        and isinstance(v["at"], (int, float)) and not isinstance(v["at"], bool))),
}
SCHEMA_2_ONLY = ("run_id", "status", "notice", "notice_turn", "checkpoint", "escalation", "audit_seq")
OPTIONAL = ("branch_turns", "context", "outcome", "provisional", "parallel", "gate_jumps", "held", "picture",
            "reply_seen", "pressed",
            "source", "paused", "steps_skipped", "attempts_restored", "gate", "branch", "fork")
STATUSES = RUN_STATUSES
MAX_CONTEXT_KEYS = 32
MAX_GATE_JUMPS = 8

# event field -> its shape ("type", "seq" and "turn" are checked apart); fields not listed are plain JSON
EVENT_FIELDS: dict[str, Shape] = {
    **{k: TEXT for k in ("node", "from", "to", "at", "branch", "retry_target", "reason", "outcome", "tool",
                         "condition", "evidence_sha256", "answer", "choice", "by", "plan", "version", "source", "stage",
                         "name", "pace_level")},
    **{k: INT for k in ("attempt", "of", "turn_saved", "completed", "path_len")},
    **{k: TEXTS for k in ("branches", "failed", "triggers")},
    "captured": ("a dict of names and text", lambda v: isinstance(v, dict) and all(isinstance(x, str)
                                                                                 for x in v.values())),
}
EVENT_NODES = ("node", "from", "to", "at", "branch", "retry_target")  # the ids a plan must have


def clean_event(event: Any) -> dict[str, Any] | None:
    """An event read from a file (an audit log line, a saved state) for a reader that only looks: None when it
    is not an event (not an object, no text type), else the event without its fields of the wrong type."""
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return None
    return {k: v for k, v in event.items() if k not in EVENT_FIELDS or EVENT_FIELDS[k][1](v)}


def parse(raw: Any, plan: Plan | None = None) -> tuple[dict[str, Any] | None, str]:
    """``raw`` read into a new state the engine can trust, or (None, why).  ``plan``: the plan version the
    state names, when it is known (without it only the shape and the plan-free rules are checked)."""
    try:
        state = copy_plain(raw)
    except NotPlain as exc:
        return None, f"field '{exc.where}' {exc.problem}" if exc.where else exc.problem
    problem = problem_with(state) or problem_with_values(state, plan)
    return (None, problem) if problem else (state, "")


def problem_with(state: Any) -> str:
    """Why a value does not have the shape of a state, or "" when it has."""
    if not isinstance(state, dict):
        return f"expected a dict, found {type(state).__name__}"
    schema = state.get("schema")
    if schema not in (SCHEMA, *OLDER_SCHEMAS):
        return f"unknown state schema {_short(schema)} (this version reads {SCHEMA})"
    for key, (kind, test) in SHAPES.items():
        if key not in state and (key in OPTIONAL or (key in SCHEMA_2_ONLY and schema != SCHEMA)):
            continue
        if not test(state.get(key)):
            return f"field '{key}' is missing or not {kind}"
    for nid, entry in state["visited"].items():
        if not (isinstance(entry, dict) and all(_is_int(entry.get(k)) for k in ("attempts", "failures"))
                and entry.get("outcome", "pending") in NODE_OUTCOMES
                and isinstance(entry.get("completed", False), bool)):
            return f"field 'visited' entry {nid!r} is not {{outcome, attempts, failures}}"
    return _problem_with_events(state["events"])


def _problem_with_events(events: list) -> str:
    for i, e in enumerate(events):
        if not (isinstance(e, dict) and isinstance(e.get("type"), str) and _is_int(e.get("seq"))
                and _is_int(e.get("turn", 0))):
            return f"field 'events[{i}]' is not an event with a type, a seq and a turn"
        for key, value in e.items():
            kind = EVENT_FIELDS.get(key)
            if kind is not None and not kind[1](value):
                return f"field 'events[{i}].{key}' is {_short(value)}, not {kind[0]}"
    return ""


COUNTERS = ("current_step", "total_steps", "turns_since_progress", "stale_after_turns", "max_turns", "path_len",
            "total_nodes", "completed_nodes", "started_turn", "turn", "turns_since_transition", "seq", "audit_seq",
            "notice_turn")


def problem_with_values(state: dict[str, Any], plan: Any = None) -> str:
    """Why a state of the right shape cannot be trusted (a counter below zero or past what the run allows, a
    node the plan does not have, events out of order), or "".  ``plan``: the plan version the state names."""
    for key in COUNTERS:
        if state.get(key, 0) < 0:
            return f"field '{key}' is {state[key]}, below zero"
    problem = _first(_value_rules(state))
    if problem or plan is None:
        return problem
    return _problem_with_plan(state, plan)


def _first(problems: Iterable[str]) -> str:
    return next((p for p in problems if p), "")


def _value_rules(s: dict[str, Any]) -> Iterator[str]:
    """The rules that need no plan, one problem (or "") each, in the order they are checked."""
    if s.get("status", "active") not in STATUSES:
        yield f"field 'status' is {_short(s['status'])}, not one of {', '.join(STATUSES)}"
    if s["current_step"] > s["total_steps"]:
        yield f"field 'current_step' is {s['current_step']}, past total_steps {s['total_steps']}"
    for key in ("steps_completed", "steps_failed"):
        if len(s[key]) > s["total_steps"] or len(set(s[key])) != len(s[key]):
            yield f"field '{key}' lists {len(s[key])} step(s), {len(set(s[key]))} different, of {s['total_steps']}"
    if s["completed_nodes"] > s["total_nodes"]:
        yield f"field 'completed_nodes' is {s['completed_nodes']}, past total_nodes {s['total_nodes']}"
    if s.get("audit_seq", 0) > s["seq"]:
        yield f"field 'audit_seq' is {s['audit_seq']}, past seq {s['seq']}"
    if s["last_outcome"] not in LAST_OUTCOMES:
        yield f"field 'last_outcome' is {_short(s['last_outcome'])}, not one of {', '.join(map(repr, LAST_OUTCOMES))}"
    if s.get("outcome", {}).get("status", "success") not in OUTCOMES:
        yield f"field 'outcome.status' is {_short(s['outcome']['status'])}, not one of {', '.join(OUTCOMES)}"
    if len(s.get("context", {})) > MAX_CONTEXT_KEYS:
        yield f"field 'context' holds {len(s['context'])} names, over the limit of {MAX_CONTEXT_KEYS}"
    for nid, jumps in s.get("gate_jumps", {}).items():
        if not 0 <= jumps <= MAX_GATE_JUMPS:
            yield f"field 'gate_jumps.{nid}' is {jumps}, not between 0 and {MAX_GATE_JUMPS}"
    for key, limit in (("events", MAX_EVENTS), ("path", MAX_PATH), ("shown", MAX_SHOWN), ("consumed", MAX_CONSUMED)):
        if len(s[key]) > limit:
            yield f"field '{key}' holds {len(s[key])} entries, over the limit of {limit}"
    if s["path_len"] < len(s["path"]):
        yield f"field 'path_len' is {s['path_len']}, shorter than the path's {len(s['path'])} nodes"
    if s["turns_since_transition"] > s["turn"]:
        yield f"field 'turns_since_transition' is {s['turns_since_transition']}, past turn {s['turn']}"
    if s.get("notice_turn", 0) > s["turn"] + 1:
        yield f"field 'notice_turn' is {s['notice_turn']}, past the next turn {s['turn'] + 1}"
    yield from _visited_rules(s)
    yield from _event_rules(s)
    for b in (s.get("fork") or {}).get("branches", ()):
        problem = problem_with_values(b["state"])
        if problem:
            yield f"field 'fork' branch {_short(b['id'])}: {problem}"
        if b["state"].get("run_id") != b["run"] or b["seen"] > b["state"].get("seq", 0):
            yield f"field 'fork' branch {_short(b['id'])} is not the run it names, or past its events"


def _visited_rules(s: dict[str, Any]) -> Iterator[str]:
    for nid, entry in s["visited"].items():
        for key in ("attempts", "failures"):
            if entry[key] < 0:
                yield f"field 'visited.{nid}.{key}' is {entry[key]}, below zero"
        if entry["failures"] > entry["attempts"] or entry["attempts"] > s["turn"] + 1:
            yield (f"field 'visited.{nid}' counts {entry['attempts']} attempt(s) and {entry['failures']} failure(s) "
                   f"in {s['turn']} turn(s)")


def _event_rules(s: dict[str, Any]) -> Iterator[str]:
    seqs = [e["seq"] for e in s["events"]]
    if seqs != sorted(set(seqs)) or (seqs and (seqs[-1] > s["seq"] or seqs[0] < 1)):
        yield "field 'events' is out of order or past seq"
    late = [e["turn"] for e in s["events"] if not 0 <= e.get("turn", 0) <= s["turn"]]
    if late:
        yield f"field 'events' holds an event of turn {late[0]}, outside turns 0 to {s['turn']}"


def _childs(plan: Any, event: dict[str, Any]) -> bool:
    """An event a manager's child run wrote (copied into the parent's with ``branch``): its nodes are the child's."""
    node = plan.nodes.get(event.get("branch") or "")
    return node is not None and node.kind.manages


def _problem_with_plan(state: dict[str, Any], plan: Any) -> str:
    return _first(_plan_rules(state, plan))


def _plan_rules(s: dict[str, Any], plan: Any) -> Iterator[str]:
    nodes = plan.nodes
    child = "child" in (s.get("branch") or {})  # a manager's child: its events name the manager's node as branch
    if s["mode"] != plan.mode:
        yield f"field 'mode' is {_short(s['mode'])}, plan '{plan.id}' is a {plan.mode} plan"
    named = (("current_node", [s["current_node"]]), ("visited", list(s["visited"])), ("path", s["path"]),
             ("shown", [n for _, n in s["shown"] if n]), ("checkpoint", [s["checkpoint"]] if s.get("checkpoint") else []),
             ("gate_jumps", list(s.get("gate_jumps", {}))),
             ("escalation", [s["escalation"]["node"]] if s.get("escalation") and "node" in s["escalation"] else []),
             ("parallel", [first_of(plan, n) for f in s.get("parallel", [])
                           for n in [f["node"], *f["pending"], *f["failed"]]]),
             ("events", [first_of(plan, e[k]) for e in s["events"] if not _childs(plan, e)
                         for k in EVENT_NODES if k in e and e[k] and not (k == "branch" and child)]))
    for key, ids in named:
        missing = [n for n in ids if n not in nodes]
        if missing:
            yield f"field '{key}' names node {_short(missing[0])}, which plan '{plan.id}' does not have"
    gate = s.get("gate")
    if gate is not None and gate["node"] not in nodes:
        yield f"field 'gate' names node {_short(gate['node'])}, which plan '{plan.id}' does not have"
    yield _rest_problem(s, plan)
    yield _steps_problem(s, plan)
    if s["total_nodes"] != len(plan.task_ids):
        yield f"field 'total_nodes' is {s['total_nodes']}, plan '{plan.id}' has {len(plan.task_ids)} task nodes"
    for key in ("stale_after_turns", "max_turns"):
        if s[key] > getattr(plan, key):
            yield f"field '{key}' is {s[key]}, past the plan's ceiling of {getattr(plan, key)}"
    stale = s["stale_after_turns"] or plan.stale_after_turns
    counter = "turns_since_progress" if plan.mode == "linear" else "turns_since_transition"
    if s.get("status", "active") == "active" and s[counter] > stale:
        yield f"field '{counter}' is {s[counter]}, past the {stale} turns after which the run expires"
    for nid, entry in s["visited"].items():
        node = nodes[nid]
        if node.kind.judged and entry["failures"] > node.max_retries + 1 and not _loops_back(plan, nid):
            yield (f"field 'visited.{nid}.failures' is {entry['failures']}, past the {node.max_retries + 1} "
                   "attempt(s) the step has")
    yield from _kind_rules(s, plan)
    yield from _fork_rules(s, plan)
    ceiling = s["max_turns"] or plan.max_turns
    if s["turn"] > ceiling + 1:
        yield f"field 'turn' is {s['turn']}, past the run's ceiling of {ceiling}"


def _fork_rules(s: dict[str, Any], plan: Any) -> Iterator[str]:
    """A fork names the plan's parallel node and the fan-in its branches meet at, each branch one of its edges,
    each branch's run a run of this plan that belongs to it."""
    fork, mine = Fork.from_json(s.get("fork")), s.get("branch")
    if mine is not None and "child" not in mine:  # (a manager's child runs a plan of its own)
        if first_of(plan, mine["id"]) not in plan.nodes or plan.fan_in_of.get(mine["fork"]) != mine["fan_in"]:
            yield f"field 'branch' names a branch {_short(mine['id'])} that plan '{plan.id}' does not have"
    if mine is not None and "child" in mine and mine["child"] != plan.id:
        yield f"field 'branch' names the child plan {_short(mine['child'])}, this run follows '{plan.id}'"
    if not fork:
        return
    manager = plan.nodes.get(fork.node)
    if manager is not None and manager.kind.manages:
        if fork.fan_in != fork.node or [b["id"] for b in fork.branches] != [fork.node] or \
                (fork.branches[0]["state"].get("branch") or {}).get("child") != manager.child:
            yield f"field 'fork' of the manager '{fork.node}' is not its one child's run of '{manager.child}'"
        return
    if plan.fan_in_of.get(fork.node) != fork.fan_in:
        yield f"field 'fork' names {_short(fork.node)} and {_short(fork.fan_in)}, not a parallel node and its fan-in"
        return
    for bad in fork.misplaced({e.dst for e in plan.out_edges.get(fork.node, ())}, lambda b: first_of(plan, b)):
        yield f"field 'fork' branch {_short(bad)} is not a branch of '{fork.node}'"
        return
    for b in fork.branches:
        problem = _problem_with_plan(b["state"], plan)
        if problem:
            yield f"field 'fork' branch {_short(b['id'])}: {problem}"


def _rest_problem(s: dict[str, Any], plan: Any) -> str:
    """An active run rests on a task or a human gate; on a pass-through node only when it stalled there, and on a
    parallel node while its branches run (``fork``)."""
    node = plan.nodes[s["current_node"]]
    if s.get("status", "active") != "active" or node.kind.rests:
        return ""
    if s.get("fork") and s["fork"]["node"] == node.id and (node.kind.forks or node.kind.manages):
        return ""
    if s["stalled"] and node.kind.passes:
        return ""
    return (f"field 'current_node' is '{node.id}', {_a(node.type)} node, where a run does not rest "
            f"(a run waits at a task or a human gate)")


def _steps_problem(s: dict[str, Any], plan: Any) -> str:
    """Steps are the success path's task ids (graph) or step numbers (linear), each within the plan."""
    if s["total_steps"] != plan.total_steps:
        return f"field 'total_steps' is {s['total_steps']}, plan '{plan.id}' has {plan.total_steps}"
    for key in ("steps_completed", "steps_failed"):
        for item in s[key]:
            ok = (0 <= item < plan.total_steps if _is_int(item) else False) if plan.mode == "linear" else \
                (item in plan.success_index if key == "steps_completed" else item in plan.nodes)
            if not ok:
                return f"field '{key}' holds {_short(item)}, not a step of plan '{plan.id}'"
    if plan.mode == "graph" and s["current_step"] != len(s["steps_completed"]):
        return (f"field 'current_step' is {s['current_step']}, but {len(s['steps_completed'])} step(s) are "
                "completed")
    return ""


def _kind_rules(s: dict[str, Any], plan: Any) -> Iterator[str]:
    """Nodes named for a purpose are nodes whose kind's row has that purpose."""
    purposes: tuple[tuple[str, list[str], Callable[[NodeKind], bool]], ...] = (
        ("checkpoint", [s["checkpoint"]] if s.get("checkpoint") else [], lambda k: k.checkpoints),
        ("parallel", [f["node"] for f in s.get("parallel", [])], lambda k: k.forks))
    for key, ids, purpose in purposes:
        for nid in ids:
            if not purpose(plan.nodes[nid].kind):
                kind = next(k.name for k in NODE_KINDS.values() if purpose(k))
                yield f"field '{key}' names '{nid}', {_a(plan.nodes[nid].type)} node, not {_a(kind)} node"
    for nid in s.get("gate_jumps", {}):
        if not plan.nodes[nid].goal_gate:
            yield f"field 'gate_jumps' names '{nid}', which is not a goal gate"
    if len(s.get("parallel", [])) > len(plan.nodes):
        yield f"field 'parallel' holds {len(s['parallel'])} frames, more than the plan has nodes"


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _short(value: Any) -> str:
    text = as_text(value) if not isinstance(value, str) else repr(value)
    return text[:80] + ("..." if len(text) > 80 else "")


def _loops_back(plan: Any, node_id: str) -> bool:
    """A route leads back to the node after its budget is spent (its failures may then pass the budget)."""
    successors = {nid: [e.dst for e in edges] for nid, edges in plan.out_edges.items()}
    return node_id in reachable(successors.get(node_id, ()), successors)


def is_legacy_linear(state: Any) -> bool:
    """A state the previous linear selector left: plan_id + current_step, no schema."""
    return (isinstance(state, dict) and "schema" not in state and isinstance(state.get("plan_id"), str)
            and _is_int(state.get("current_step")))


def migrate_legacy(old: dict[str, Any], plan: Plan, monologue: str, pass_key: str,
                   global_turn: int) -> tuple[dict[str, Any] | None, str]:
    """Carry a previous-selector state into this engine (a linear plan with the same steps) as a new state, or
    (None, why).  Missing or null lists and counters read as empty; a value of another type is refused."""
    state = new_state(plan, monologue, pass_key, global_turn)
    step = max(0, min(old["current_step"], plan.total_steps - 1))
    state["current_step"] = step
    state["current_node"] = f"step_{step + 1}"
    for key in ("steps_completed", "steps_failed"):
        items = old.get(key)
        if items is not None and not (isinstance(items, list) and all(_is_int(i) for i in items)):
            return None, f"field '{key}' is {_short(items)}, not a list of step numbers"
        state[key] = sorted({i for i in items or () if 0 <= i < plan.total_steps})
    turns = old.get("turns_since_progress")
    if turns is not None and not (_is_int(turns) and turns >= 0):
        return None, f"field 'turns_since_progress' is {_short(turns)}, not a count of turns"
    state["turns_since_progress"] = turns or 0
    state["completed_nodes"] = len(state["steps_completed"])
    emit(state, "state_migrated", node=state["current_node"], source="linear selector")
    return state, ""
