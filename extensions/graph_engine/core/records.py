"""A run's state, typed: every key of the JSON-safe dict Agent-Zero keeps with the chat, and a fork as one object.

Rules of this module
--------------------
* The state stays a plain dict that round-trips through JSON (Agent-Zero persists it; states saved by older
  versions must still load): ``RunState`` only names and documents its keys, for readers and type checkers;
  ``state.SHAPES`` checks a restored one, key by key.
* A fork (``state["fork"]``) is read into a ``Fork`` and written back with ``to_json``: its shape, its rules and
  its serialisation live together here.  Its branches are the same dicts as in the state (a branch's agent's host
  reads them), so changing a branch through the ``Fork`` changes the state.

Pure data, no I/O; it reads only the kinds' tables.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, TypedDict

from .kinds import BRANCH_OUTCOMES

BRANCH_STATUSES = ("pending", "running", *BRANCH_OUTCOMES)


class RunState(TypedDict, total=False):
    """Every key of a run's state (``state.new_state`` writes the first group; the rest come later or are optional,
    as ``state.OPTIONAL`` says).  The org supervisor and SALUTE read ``plan_name``, ``current_step``,
    ``total_steps``, ``steps_completed`` and ``turns_since_progress``; everything else is the engine's own."""

    schema: str  # state.SCHEMA (older ones are upgraded: state.upgrade)
    run_id: str  # twelve hex digits naming this run (its audit log's file name)
    status: str  # kinds.RUN_STATUSES: active until the run ends
    plan_id: str  # the plan the run follows
    plan_name: str  # its name, for the texts and the supervisor
    plan_version: str  # the version (a hash of the plan) the run follows: a changed plan ends the run
    mode: str  # "graph" or "linear" (a linear plan keeps the old selector's rules)
    domain: str  # the plan's first domain ("" for none)
    current_step: int  # a linear plan's step index; in a graph, the steps counted done
    total_steps: int  # the steps on the plan's success path
    steps_completed: list[Any]  # steps done: node ids (step indexes in a linear plan)
    steps_failed: list[Any]  # steps whose attempts ran out (the same ids)
    turns_since_progress: int  # turns since a step was last done (staleness of a linear plan)
    stale_after_turns: int  # turns without a step change after which the run expires
    max_turns: int  # the run's ceiling of turns
    current_node: str  # where the run is
    visited: dict[str, dict[str, Any]]  # node id -> {outcome (kinds.NODE_OUTCOMES), attempts, failures, ...}
    path: list[str]  # the newest nodes entered (at most state.MAX_PATH)
    path_len: int  # how many nodes were entered in all
    total_nodes: int  # the plan's task nodes
    completed_nodes: int  # the steps done, as the card counts them
    started_turn: int  # the agent's global turn when the run started
    turn: int  # passes counted for this run (each pass once, whichever hook sees it first)
    turns_since_transition: int  # turns since the run last moved (staleness of a graph plan)
    events: list[dict[str, Any]]  # the newest events (kinds.EVENTS; at most state.MAX_EVENTS)
    seq: int  # the last event's number
    last_outcome: str  # kinds.LAST_OUTCOMES: how the last judged step went, as decisions read it
    last_failure: str  # why the last check failed ("" after a pass)
    route_note: str  # a line about the last route, shown with the next step
    stalled: str  # why the run cannot route on ("" when it can)
    last_pass: str  # the key "<monologue>:<iteration>" of the pass counted last
    message_monologue: str  # the user message decided last (Observation.message_id)
    shown: list[list[str]]  # [pass key, node id] pairs: which node each recent call was shown
    consumed: list[str]  # the calls whose outputs were judged already
    notice: str  # a notice shown above the step until ``notice_turn``
    notice_turn: int  # the last turn the notice is shown
    checkpoint: str  # the last checkpoint node passed
    escalation: dict[str, Any] | None  # {node, reason, pace_level, turn} once the run escalated
    audit_seq: int  # the last event the host wrote to the audit log
    context: dict[str, Any]  # values captured from outputs (verify.capture), read by edge conditions
    outcome: dict[str, Any]  # the last routed outcome: {status (kinds.OUTCOMES), preferred_label, suggested_next_ids}
    provisional: dict[str, Any] | None  # {key, started}: decided from trigger phrases alone, the selector confirms
    paused: bool  # "pause the workflow": no step shown, nothing judged, no turn counted
    steps_skipped: list[Any]  # steps the user skipped (not done)
    attempts_restored: list[Any]  # steps whose attempts "retry this step" gave back (once each)
    gate: dict[str, Any] | None  # the human gate waiting now: {node, path_len, turn, at (seconds since the epoch)}
    parallel: list[dict[str, Any]]  # branches run one after another: {node, pending, failed} frames, innermost last
    gate_jumps: dict[str, int]  # goal gate id -> jumps back to its retry target
    held: bool  # PACE emergency: the model is told to stop and report
    branch: dict[str, str]  # a branch's own run: {parent (run id), id (first node; "first#n" over a list), fork, fan_in[, item]}
    fork: dict[str, Any] | None  # branches running at once: Fork.to_json()
    branch_turns: int  # the turns its branches' own agents took (``turn`` counts the run's own)
    picture: str  # where the host drew the ended run's picture
    reply_seen: list[Any]  # [pass key, the newest reply's mark then (or null), the call that pass judges]
    pressed: dict[str, str]  # the answer to the last control pressed in the web UI: {id, control, status, text}
    source: dict[str, str]  # a plan proposed in the chat: {format (dot | json), text, request}, compiled on a restart


class Branch(TypedDict):
    """One branch of a fork, as saved: the branch's own run and how it went."""

    id: str  # the branch's first node (one of the parallel node's edges' targets)
    run: str  # the ``run_id`` of the branch's own run
    status: str  # BRANCH_STATUSES: pending, running, then its outcome (kinds.BRANCH_OUTCOMES)
    state: dict[str, Any]  # the branch's own RunState (with ``branch``), as its agent's last pass left it
    answer: str  # the branch agent's final answer (at most fork.MAX_ANSWER characters)
    reason: str  # why the branch ended as it did ("" while it runs)
    seen: int  # the last ``seq`` of the branch's events copied into the parent's


class Fork:
    """Branches running at once from a parallel node up to the fan-in they meet at (``state["fork"]``)."""

    KEYS = ("node", "fan_in", "max_parallel", "branches")

    def __init__(self, node: str, fan_in: str, max_parallel: int, branches: list[Branch]) -> None:
        self.node, self.fan_in, self.max_parallel, self.branches = node, fan_in, max_parallel, branches

    @classmethod
    def from_json(cls, raw: Any) -> Fork | None:
        """The fork a state holds (its branches shared with the state), or None for none (null, or no state)."""
        if not isinstance(raw, dict) or not raw:
            return None
        return cls(raw["node"], raw["fan_in"], raw["max_parallel"], raw["branches"])

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "fan_in": self.fan_in, "max_parallel": self.max_parallel,
                "branches": self.branches}

    @classmethod
    def fits(cls, raw: Any) -> bool:
        """Whether a restored value has a fork's shape (each branch's own state is checked as a state apart)."""
        return (isinstance(raw, dict) and set(raw) == set(cls.KEYS) and isinstance(raw["node"], str)
                and isinstance(raw["fan_in"], str) and _count(raw["max_parallel"]) and raw["max_parallel"] >= 1
                and isinstance(raw["branches"], list) and bool(raw["branches"])
                and all(_branch_fits(b) for b in raw["branches"]))

    def branch(self, branch_id: str) -> Branch | None:
        return next((b for b in self.branches if b["id"] == branch_id), None)

    def outcomes(self) -> dict[str, str]:
        """Each branch's status by its id (an outcome once it ended)."""
        return {b["id"]: b["status"] for b in self.branches}

    def joined(self) -> bool:
        """Every branch has an outcome: the fan-in can route."""
        return all(b["status"] in BRANCH_OUTCOMES for b in self.branches)

    def stop(self) -> list[str]:
        """Every branch without an outcome is stopped (the host stops its agent); their ids."""
        stopped = []
        for b in self.branches:
            if b["status"] not in BRANCH_OUTCOMES:
                b["status"], b["reason"] = "stopped", "stopped by the user"
                stopped.append(b["id"])
        return stopped

    def misplaced(self, firsts: set[str], first_of: Callable[[str], str] = lambda b: b) -> Iterator[str]:
        """The branches that are not one of the parallel node's edges (``firsts``; ``first_of`` a branch id's first
        node) or whose run names another."""
        for b in self.branches:
            mine = b["state"]["branch"]
            if first_of(b["id"]) not in firsts or mine["id"] != b["id"] or mine["fork"] != self.node:
                yield b["id"]


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _branch_fits(b: Any) -> bool:
    return (isinstance(b, dict) and set(b) == set(Branch.__annotations__)
            and all(isinstance(b[k], str) for k in ("id", "run", "answer", "reason"))
            and b["status"] in BRANCH_STATUSES and _count(b["seen"]) and b["seen"] >= 0
            and isinstance(b["state"], dict) and isinstance(b["state"].get("branch"), dict)
            and not b["state"].get("fork"))
