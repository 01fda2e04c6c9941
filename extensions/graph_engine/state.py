"""Traversal state: one JSON-safe dict, its creation, its bounds, and migration of older states.

The dict is what ``agent._htn_state`` holds.  The org supervisor and SALUTE
reports read ``plan_name``, ``current_step``, ``total_steps``,
``steps_completed`` (its length) and ``turns_since_progress``; everything else
is the engine's own.
"""

from __future__ import annotations

import uuid
from typing import Any

from .model import Plan

SCHEMA = "graph_engine.state/2"
OLDER_SCHEMAS = ("graph_engine.state/1",)
DATA_KEY = "graph_engine_state"  # agent data key: no leading "_", so Agent-Zero saves it with the chat
MAX_EVENTS = 50
MAX_PATH = 50
MAX_SHOWN = 4
MAX_CONSUMED = 8


def new_state(plan: Plan, monologue: str, pass_key: str, global_turn: int) -> dict[str, Any]:
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


# ── the fields the user's controls keep (see control.py and engine's "the user's controls") ─────────────


def control_fields() -> dict[str, Any]:
    """A new run's values of the fields the user's controls and timed human gates keep."""
    return {
        "paused": False,  # "pause the workflow": no step shown, nothing judged, no turn counted
        "steps_skipped": [],  # steps the user skipped (node ids; step indexes in a linear plan), not done
        "attempts_restored": [],  # steps whose attempts "retry this step" gave back (once each)
        "gate": None,  # the human gate waiting now: {"node", "path_len", "turn", "at" (seconds since the epoch)}
    }


def problem_with_controls(state: dict[str, Any]) -> str:
    """Why the control fields of a state cannot be trusted, or "".  A state saved before they existed has
    none of them: each missing one reads as its new-run value."""
    paused = state.get("paused", False)
    if not isinstance(paused, bool):
        return "field 'paused' is not true or false"
    for key in ("steps_skipped", "attempts_restored"):
        value = state.get(key, [])
        if not isinstance(value, list) or not all(isinstance(x, (str, int)) and not isinstance(x, bool)
                                                  for x in value):
            return f"field '{key}' is not a list of step ids"
    gate = state.get("gate")
    if gate is None:
        return ""
    if not isinstance(gate, dict) or not isinstance(gate.get("node"), str) or \
            not all(isinstance(gate.get(k), int) and not isinstance(gate.get(k), bool) and gate[k] >= 0
                    for k in ("path_len", "turn")) or \
            not isinstance(gate.get("at"), (int, float)) or isinstance(gate.get("at"), bool):
        return "field 'gate' is not {node, path_len, turn, at}"
    return ""


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
    """Note which node's instructions are in the prompt of the call made at ``pass_key``."""
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


# ── checking and migrating a state found on the agent ───────────────────────

# field -> accepted types: the whole shape, so a damaged state is refused instead of failing later
FIELDS: dict[str, tuple[type, ...]] = {
    "plan_id": (str,), "plan_name": (str,), "plan_version": (str,), "mode": (str,), "domain": (str,),
    "current_step": (int,), "total_steps": (int,), "steps_completed": (list,), "steps_failed": (list,),
    "turns_since_progress": (int,), "stale_after_turns": (int,), "max_turns": (int,), "current_node": (str,),
    "visited": (dict,), "path": (list,), "path_len": (int,), "total_nodes": (int,), "completed_nodes": (int,),
    "started_turn": (int,), "turn": (int,), "turns_since_transition": (int,), "events": (list,), "seq": (int,),
    "last_outcome": (str,), "last_failure": (str,), "route_note": (str,), "stalled": (str,), "last_pass": (str,),
    "message_monologue": (str,), "shown": (list,), "consumed": (list,),
}
FIELDS_V2: dict[str, tuple[type, ...]] = {
    "run_id": (str,), "status": (str,), "notice": (str,), "notice_turn": (int,), "checkpoint": (str,),
    "escalation": (dict, type(None)), "audit_seq": (int,),
}
STATUSES = ("active", "escalated", "completed", "expired", "ended", "aborted", "withdrawn", "stopped")


def problem_with(state: Any) -> str:
    """Why a value cannot be used as a current state, or "" when it can."""
    if not isinstance(state, dict):
        return f"expected a dict, found {type(state).__name__}"
    schema = state.get("schema")
    if schema not in (SCHEMA, *OLDER_SCHEMAS):
        return f"unknown state schema {schema!r} (this version reads {SCHEMA})"
    fields = FIELDS if schema != SCHEMA else {**FIELDS, **FIELDS_V2}
    for key, kinds in fields.items():
        value = state.get(key)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            return f"field '{key}' is missing or not a {kinds[0].__name__}"
    if schema == SCHEMA and state["status"] not in STATUSES:
        return f"field 'status' is {state['status']!r}, not one of {', '.join(STATUSES)}"
    for nid, entry in state["visited"].items():
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), int) and not isinstance(entry.get(k), bool)
                                                  for k in ("attempts", "failures")):
            return f"field 'visited' entry {nid!r} is not {{outcome, attempts, failures}}"
    if not all(isinstance(e, dict) and isinstance(e.get("type"), str) and isinstance(e.get("seq"), int)
               for e in state["events"]):
        return "field 'events' holds an entry without a type and a seq"
    if not all(isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) for y in x) for x in state["shown"]):
        return "field 'shown' is not a list of [pass, node] pairs"
    if not all(isinstance(x, str) for x in state["path"] + state["consumed"]):
        return "field 'path' or 'consumed' holds something other than text"
    return problem_with_controls(state) or problem_with_values(state)


COUNTERS = ("current_step", "total_steps", "turns_since_progress", "stale_after_turns", "max_turns", "path_len",
            "total_nodes", "completed_nodes", "started_turn", "turn", "turns_since_transition", "seq", "audit_seq",
            "notice_turn")


def problem_with_values(state: dict[str, Any], plan: Any = None) -> str:
    """Why a state of the right shape cannot be trusted (a counter below zero or past what the run allows, a
    node the plan does not have, events out of order), or "".  ``plan``: the plan version the state names."""
    for key in COUNTERS:
        if state.get(key, 0) < 0:
            return f"field '{key}' is {state[key]}, below zero"
    if state["current_step"] > state["total_steps"]:
        return f"field 'current_step' is {state['current_step']}, past total_steps {state['total_steps']}"
    if state.get("audit_seq", 0) > state["seq"]:
        return f"field 'audit_seq' is {state['audit_seq']}, past seq {state['seq']}"
    for nid, entry in state["visited"].items():
        for key in ("attempts", "failures"):
            if entry[key] < 0:
                return f"field 'visited.{nid}.{key}' is {entry[key]}, below zero"
        if entry["failures"] > entry["attempts"] or entry["attempts"] > state["turn"] + 1:
            return (f"field 'visited.{nid}' counts {entry['attempts']} attempt(s) and {entry['failures']} failure(s) "
                    f"in {state['turn']} turn(s)")
    seqs = [e["seq"] for e in state["events"]]
    if seqs != sorted(set(seqs)) or (seqs and seqs[-1] > state["seq"]):
        return "field 'events' is out of order or past seq"
    if plan is None:
        return ""
    return _problem_with_plan(state, plan)


def _problem_with_plan(state: dict[str, Any], plan: Any) -> str:
    nodes = plan.nodes
    for key, ids in (("current_node", [state["current_node"]]), ("visited", list(state["visited"])),
                     ("path", state["path"]), ("shown", [n for _, n in state["shown"]])):
        missing = [n for n in ids if n not in nodes]
        if missing:
            return f"field '{key}' names node '{missing[0]}', which plan '{plan.id}' does not have"
    gate = state.get("gate")
    if isinstance(gate, dict) and gate.get("node") not in nodes:
        return f"field 'gate' names node '{gate.get('node')}', which plan '{plan.id}' does not have"
    if state["total_steps"] != plan.total_steps:
        return f"field 'total_steps' is {state['total_steps']}, plan '{plan.id}' has {plan.total_steps}"
    for nid, entry in state["visited"].items():
        node = nodes[nid]
        if node.type == "task" and entry["failures"] > node.max_retries + 1 and not _loops_back(plan, nid):
            return (f"field 'visited.{nid}.failures' is {entry['failures']}, past the {node.max_retries + 1} "
                    "attempt(s) the step has")
    if state["turn"] > state.get("max_turns", plan.max_turns) + 1:
        return f"field 'turn' is {state['turn']}, past the run's ceiling of {state.get('max_turns', plan.max_turns)}"
    return ""


def _loops_back(plan: Any, node_id: str) -> bool:
    """A route leads back to the node after its budget is spent (its failures may then pass the budget)."""
    seen, todo = set(), [e.dst for e in plan.out_edges.get(node_id, ())]
    while todo:
        nid = todo.pop()
        if nid == node_id:
            return True
        if nid not in seen:
            seen.add(nid)
            todo.extend(e.dst for e in plan.out_edges.get(nid, ()))
    return False


def is_legacy_linear(state: Any) -> bool:
    """A state the previous linear selector left: plan_id + current_step, no schema."""
    return (isinstance(state, dict) and "schema" not in state and isinstance(state.get("plan_id"), str)
            and isinstance(state.get("current_step"), int))


def migrate_legacy(old: dict[str, Any], plan: Plan, monologue: str, pass_key: str, global_turn: int) -> dict:
    """Carry a previous-selector state into this engine; only for a linear plan with the same steps."""
    state = new_state(plan, monologue, pass_key, global_turn)
    step = max(0, min(int(old.get("current_step", 0)), plan.total_steps - 1))
    state["current_step"] = step
    state["current_node"] = f"step_{step + 1}"
    state["steps_completed"] = [i for i in old.get("steps_completed", []) if isinstance(i, int)]
    state["steps_failed"] = [i for i in old.get("steps_failed", []) if isinstance(i, int)]
    state["turns_since_progress"] = int(old.get("turns_since_progress", 0) or 0)
    state["completed_nodes"] = len(state["steps_completed"])
    emit(state, "state_migrated", node=state["current_node"], source="linear selector")
    return state
