"""A fork's branches as the host reports them: each branch's start, its passes and its agent's answer, and a
fan-in's policy over their outcomes.  The layer above (``traversal``) forks a run and joins it.

Rules of this module
--------------------
* Everything here reads and writes only the parent state's ``fork`` and its events; it never moves a run.
* A fan-in's verdict is its policy's row (``kinds.FAN_IN_POLICIES``); this module names no policy.
"""

from __future__ import annotations

from typing import Any

from .kinds import BRANCH_OUTCOMES, ENDINGS, FAN_IN_POLICIES
from .model import Node
from .records import Branch, Fork
from .routing import evaluate, parse_condition
from .state import branch_outcome, emit


# ── parallel branches at the same time (a fork) ────────────────────────────
# Where the host runs subordinate agents at once (Observation.concurrent), a parallel node forks: each branch
# (each outgoing edge, up to the fan-in they all meet at, Plan.fan_in_of) becomes a run of its own, the branch's
# state (state.branch_state), kept in the parent's ``fork`` and driven by its own subordinate agent, which the
# host starts, at most ``max_parallel`` at once.  The parent rests on the parallel node meanwhile; the host
# reports each branch's passes (branch_progress: its new events are copied into the parent's, in order) and its
# agent's final answer (branch_returned).  When every branch has an outcome the fan-in routes the parent on its
# policy (fan_in_passes), and the parent's next step is shown each branch's outcome, last check and answer.

MAX_ANSWER = 2_000  # characters of a branch agent's final answer kept in the parent's state


def fan_in_passes(node: Node, outcomes: dict[str, str]) -> bool:
    """Whether a fan-in routes on success, given each branch's outcome: its policy's row (kinds.FAN_IN_POLICIES)."""
    return FAN_IN_POLICIES[node.fan_in_policy].met(outcomes, node.quorum, node.required)


def _end_reason(sub: dict[str, Any]) -> str:
    end = next((e for e in reversed(sub.get("events") or ()) if e.get("type") in ENDINGS), None)
    return str(end.get("reason", "")) if end else ""


def _branch_of(state: dict[str, Any], branch_id: str) -> Branch | None:
    fork = Fork.from_json(state.get("fork")) if isinstance(state, dict) else None
    return fork.branch(branch_id) if fork else None


def branch_started(state: dict[str, Any], branch_id: str) -> tuple[dict[str, Any], bool] | None:
    """The host starts the subordinate agent of a branch: (its state, whether it was started before: a restart
    stopped its first agent), or None when the branch has an outcome already (or is no branch of the fork)."""
    b = _branch_of(state, branch_id)
    if b is None or b["status"] in BRANCH_OUTCOMES:
        return None
    again = b["status"] == "running"
    b["status"] = "running"
    emit(state, "branch_started", node=branch_id, branch=branch_id, branch_run=b["run"], **({"again": True} if again else {}))
    return b["state"], again


def branch_progress(state: dict[str, Any], branch_id: str, sub: dict[str, Any]) -> bool:
    """A pass of a branch's agent: its state is kept in the parent's fork, and its new events are copied into the
    parent's (each with ``branch``), so the parent's audit log holds every branch's lines in the order they came.
    False when ``sub`` is not that branch's run."""
    b = _branch_of(state, branch_id)
    if b is None or not isinstance(sub, dict) or sub.get("run_id") != b["run"]:
        return False
    seen = b.get("seen", 0)
    for event in sub.get("events") or ():
        if event.get("seq", 0) > seen and event.get("type") not in ENDINGS and event.get("type") != "plan_activated" \
                and not (event.get("type") == "node_entered" and event.get("node") == (sub.get("branch") or {}).get("fan_in")):
            emit(state, event["type"], **{k: v for k, v in event.items() if k not in ("type", "seq", "turn")},
                 branch=branch_id)
    b["seen"], b["state"] = max(seen, sub.get("seq", 0)), sub
    _supervise(state, b)
    return True


def _supervise(state: dict[str, Any], b: Branch) -> None:
    """A manager's look at its child after each of the child's passes: its stop condition (on the child's context,
    ``stack.child.status`` and ``stack.child.turn``) stops it with success, its ``max_cycles`` passes with fail.
    The host stops the child's agent once its branch has an outcome."""
    sub = b["state"]
    mine = sub.get("branch") or {}
    if "child" not in mine or b["status"] in BRANCH_OUTCOMES or sub.get("status", "active") != "active":
        return
    turn = sub.get("turn", 0)
    seen = {**(sub.get("context") or {}), "stack.child.status": "running", "stack.child.turn": str(turn)}
    stop = mine.get("stop", "")
    if stop and evaluate(parse_condition(stop), {"status": ""}, seen):
        outcome, reason = "success", f"its stop condition held ({stop})"
    elif turn >= int(mine.get("max_cycles", "0") or 0) > 0:
        outcome, reason = "fail", f"the child ran {turn} passes, the manager's max_cycles, without completing"
    else:
        return
    b["status"], b["reason"] = outcome, reason
    emit(state, "branch_returned", node=b["id"], branch=b["id"], outcome=outcome, reason=reason, answer="",
         by="manager")


def branch_returned(state: dict[str, Any], branch_id: str, sub: dict[str, Any] | None, answer: str,
                    problem: str = "") -> str:
    """A branch's agent answered (its monologue returned), or failed (``problem``): the branch's outcome, recorded
    once; "" when it had one already."""
    b = _branch_of(state, branch_id)
    if b is None or b["status"] in BRANCH_OUTCOMES:
        return ""
    if sub is not None:
        branch_progress(state, branch_id, sub)
    outcome = branch_outcome(b["state"]) if isinstance(b.get("state"), dict) else ""
    reason = _end_reason(b["state"]) if outcome else (problem or "its agent answered before the branch reached "
                                                                 "the fan-in")
    b["status"], b["reason"], b["answer"] = outcome or "fail", reason, answer[:MAX_ANSWER]
    emit(state, "branch_returned", node=branch_id, branch=branch_id, outcome=b["status"], reason=reason,
         answer=answer[:200])
    return b["status"]


def stop_branches(state: dict[str, Any]) -> list[str]:
    """The person stopped the workflow: every branch without an outcome is stopped (the host stops its agent)."""
    fork = Fork.from_json(state.get("fork"))
    return fork.stop() if fork else []
