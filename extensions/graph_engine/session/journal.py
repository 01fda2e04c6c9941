"""The checkpoint's journal: a run's state since its last snapshot, one small record per pass.

A run's checkpoint (see audit.py) is a snapshot of its state, written now and then, and a journal of records
appended after it, one per pass that wrote audit lines.  A record names the ``audit_seq`` it starts from
(``base``) and the one it reaches; replaying the records in order over the snapshot gives the state as of the
newest audit line.  A record costs what a pass adds, not what the run holds: the three fields that grow with
a long run are said by what changed, every other field (each bounded by the state's limits) whole.

* ``visited``: entries are added (at the end: a dict keeps its insertion order) or changed, never removed; a
  pass whose events are all of the ``ORDINARY`` kinds changes only the entries of the nodes its events name
  and of the current node before and after it;
* ``steps_completed``: such a pass only appends to it;
* ``events``: new events are appended (their ``seq`` one after another), the oldest dropped past MAX_EVENTS.

For any other pass ``record`` answers None, and a full snapshot is written instead.
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

from ..core.state import MAX_EVENTS

# the events of a pass that changes visited entries only of the nodes they name, and steps_completed only by
# appending: judging a step, routing on, passing through start, checkpoint and decision nodes, a restart
ORDINARY = frozenset(("node_verified", "retry_triggered", "partial_accepted", "route_stalled", "edge_followed",
                      "node_entered", "checkpoint_reached", "decision_routed", "evidence_ignored", "run_resumed"))
NAMING = ("node", "from", "to")  # the fields in which those events name nodes
GROWING = ("visited", "steps_completed", "events")  # said by what changed; the other fields whole


class Mark(NamedTuple):
    """What a record needs to know of the state the journal replays to."""

    seq: int
    audit_seq: int
    current_node: str
    visited: int  # its number of entries
    steps: int  # the length of steps_completed
    last_step: Any  # its last item


def mark(state: dict[str, Any]) -> Mark | None:
    """The state's mark, or None for a state of another shape (its checkpoint is then a snapshot each time)."""
    try:
        done = state["steps_completed"]
        return Mark(state["seq"], state["audit_seq"], state["current_node"], len(state["visited"]), len(done),
                    done[-1] if done else None)
    except (KeyError, TypeError):
        return None


def record(before: Mark, state: dict[str, Any]) -> dict[str, Any] | None:
    """What brings the state marked ``before`` to ``state``, as a record for ``apply``; None when a record
    cannot say it (a pass with an event of another kind, events dropped before they were recorded, a list that
    did not only grow): then only a full snapshot can."""
    try:
        return _record(before, state)
    except (AttributeError, KeyError, TypeError, IndexError):  # a state of an unexpected shape: a snapshot
        return None


def _record(before: Mark, state: dict[str, Any]) -> dict[str, Any] | None:
    events = state["events"]
    start = len(events)
    while start and events[start - 1]["seq"] > before.seq:
        start -= 1
    new = events[start:]
    if not new or new[0]["seq"] != before.seq + 1 or state["seq"] != before.seq + len(new):
        return None  # nothing to say, or events were dropped before they were recorded
    if not ORDINARY.issuperset([e["type"] for e in new]):
        return None
    visited, done = state["visited"], state["steps_completed"]
    added = len(visited) - before.visited
    if added < 0 or len(done) < before.steps or (before.steps and done[before.steps - 1] != before.last_step):
        return None
    names = list(itertools.islice(reversed(visited), added))[::-1]  # the entries added, in their order
    names += (before.current_node, state["current_node"], *(e[k] for e in new for k in NAMING if k in e))
    rest = state.copy()
    for key in GROWING:
        del rest[key]
    return {"base": before.audit_seq, "audit_seq": state["audit_seq"], "set": rest,
            "visited": {nid: visited[nid] for nid in names if nid in visited},
            "steps_completed": done[before.steps:], "events": new}


def apply(state: dict[str, Any], rec: Any) -> bool:
    """Replay one record over ``state`` in place; False (``state`` unchanged) when it does not follow it."""
    if not (isinstance(rec, dict) and isinstance(rec.get("base"), int) and rec["base"] == state.get("audit_seq")
            and isinstance(rec.get("set"), dict) and isinstance(rec.get("visited"), dict)
            and isinstance(rec.get("steps_completed"), list) and isinstance(rec.get("events"), list)
            and isinstance(state.get("visited"), dict) and isinstance(state.get("steps_completed"), list)
            and isinstance(state.get("events"), list)):
        return False
    for key in [k for k in state if k not in GROWING and k not in rec["set"]]:
        del state[key]  # a field the pass removed
    state.update((k, v) for k, v in rec["set"].items() if k not in GROWING)
    state["visited"].update(rec["visited"])
    state["steps_completed"].extend(rec["steps_completed"])
    events = state["events"]
    events.extend(rec["events"])
    if len(events) > MAX_EVENTS:
        del events[: len(events) - MAX_EVENTS]
    return True
