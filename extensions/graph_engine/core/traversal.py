"""Traversal: a judged outcome routes the run along its plan's edges, and the run settles on a node.

Rules of this module
--------------------
* What a node does when the run reaches it is its kind's handler in ``SETTLE`` (one per row of
  ``kinds.NODE_KINDS``; a test checks the two agree); no code here tests a node's kind by its name.
* Ending a run (completed, escalated, ended, expired, a branch's end) is decided here; what the model and the person
  read about it is worded by the texts (``run.fx.texts``).

Theory of operation
-------------------
``apply_outcome`` records a step's outcome (``kinds.STEP_OUTCOMES``) and routes it (``routing.select_edge``);
``_follow`` moves the run along an edge and ``_settle`` passes through start, checkpoint, decision and fan-in nodes
until a task, a human gate or an end.  A parallel node forks (``_fork``) where the host runs branches at once,
else its branches run one after another up to their fan-in (``_start_branches``, ``_next_branch``); a fork joins
when every branch has an outcome (``_join_when_done``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from .kinds import STEP_OUTCOMES
from .model import Edge, Node
from .records import Branch, Fork
from .state import MAX_CONTEXT_KEYS, MAX_GATE_JUMPS, branch_outcome, branch_state, child_state, emit, push_path
from .routing import STATUS_OF, select_edge
from .run import Effects, Run, _finish, _plan_by_id
from .fork import _end_reason, fan_in_passes
from .fanout import ITEM, agent_fit, branch_id, first_of, inside, items, over_list, reduced


MAX_SETTLE_STEPS = 64


# ── graph traversal ─────────────────────────────────────────────────────────


MAX_CONTEXT_VALUE = 4_000  # characters of a captured value kept (a list a fan-out reads is one)


def apply_outcome(run: Run, node: Node, status: str, reason: str, digest: str = "",
                  captured: dict[str, str] | None = None, preferred_label: str = "",
                  suggested: Sequence[str] = ()) -> None:
    """A task's result: a check's verdict, or an outcome scripted by `graph-engine simulate`.

    ``status``: success or partial_success (passed), fail or retry (failed: the retry budget decides
    whether it is a retry or exhausted), skipped (neither: no progress, only unconditional edges)."""
    s = run.state
    captured = captured or {}
    v = s["visited"].setdefault(node.id, {"outcome": "pending", "attempts": 0, "failures": 0})
    v["attempts"] += 1
    passed = STEP_OUTCOMES[status].passed
    shown = "success" if passed else ("skipped" if status == "skipped" else "fail")
    extra: dict[str, Any] = {"evidence_sha256": digest} if digest else {}
    if captured:
        extra["captured"] = captured
    emit(s, "node_verified", node=node.id, outcome=shown, reason=reason, **extra)
    _update_context(run, captured, f"'{node.name}'")
    routed = status
    if passed:
        v["outcome"] = "success"
        s["last_outcome"], s["last_failure"] = "success", ""
        _count_progress(run, node)
    elif status == "skipped":
        v["outcome"] = "skipped"
        s["last_outcome"] = "success"
    else:
        v["failures"] += 1
        s["last_failure"] = reason
        if v["failures"] <= node.max_retries:
            s["last_outcome"], routed = "retry", "retry"
            emit(s, "retry_triggered", node=node.id, attempt=v["failures"] + 1, of=node.max_retries + 1)
        elif node.allow_partial:  # the retries are spent and a partial result is accepted: on along success
            v["outcome"] = "partial_success"
            s["last_outcome"], s["last_failure"], routed = "success", "", "partial_success"
            emit(s, "partial_accepted", node=node.id, reason=reason)
            _count_progress(run, node)
        else:
            v["outcome"] = "fail"
            s["last_outcome"], routed = "exhausted", "fail"
            if node.id not in s["steps_failed"]:
                s["steps_failed"].append(node.id)
    outcome = {"status": routed, "preferred_label": preferred_label, "suggested_next_ids": list(suggested)}
    _route(run, node, outcome, reason)
    if routed == "partial_success" and not s.get("route_note"):
        s["route_note"] = (f"'{node.name}' did not pass its check ({reason}) in {v['attempts']} attempts; it is "
                           "accepted as partly done and the workflow goes on.")


def _update_context(run: Run, captured: Mapping[str, Any], where: str) -> None:
    """Captured (or merged) values into the run's context, each at most MAX_CONTEXT_VALUE characters (a longer
    one is cut, with a log line) and at most MAX_CONTEXT_KEYS names (a new one past it is left out, with a line)."""
    if not captured:
        return
    s = run.state
    ctx = s.setdefault("context", {})
    for key, value in captured.items():
        if key not in ctx and len(ctx) >= MAX_CONTEXT_KEYS:
            run.fx.log("warning", f"[HTN] Workflow '{run.plan.name}': the value '{key}' from {where} is not kept: the "
                                  f"run holds {MAX_CONTEXT_KEYS} values already; capture fewer names")
            continue
        if isinstance(value, str) and len(value) > MAX_CONTEXT_VALUE:
            run.fx.log("warning", f"[HTN] Workflow '{run.plan.name}': the value '{key}' from {where} is "
                                  f"{len(value):,} characters; its first {MAX_CONTEXT_VALUE:,} are kept (capture "
                                  "less: a list over it cannot fan out whole)")
            value = value[:MAX_CONTEXT_VALUE]
        ctx[key] = value


def _route(run: Run, node: Node, outcome: dict[str, Any], reason: str) -> None:
    """Follow the edge the outcome selects (routing.select_edge), stay for a retry in place, or stall."""
    run.state["outcome"] = dict(outcome)
    edge, _, stay = select_edge(run.plan, node.id, outcome, run.state.get("context", {}), "task", explain=False)
    if stay:
        return  # a retry without an on_retry route: the step is retried in place
    if edge is None:
        _stall(run, node, outcome["status"], reason)
        return
    _follow(run, edge)
    _settle(run)


def _count_progress(run: Run, node: Node) -> None:
    """Real progress: a task node completed for the first time in this run."""
    s = run.state
    entry = s["visited"][node.id]
    if entry.get("completed"):
        return
    entry["completed"] = True  # O(1) "first time" test
    s["completed_nodes"] += 1  # every task node, extra steps included
    s["turns_since_progress"] = 0
    if node.id in run.plan.success_index:  # a step: steps_completed keeps their order for the supervisor
        s["steps_completed"].append(node.id)
        s["current_step"] = min(len(s["steps_completed"]), run.plan.total_steps)


def _stall(run: Run, node: Node, outcome: str, reason: str) -> None:
    s = run.state
    s["stalled"] = (f"step '{node.name}' ended with outcome '{outcome}' ({reason}) and no edge leaves it for "
                    "that outcome; stop and tell the user what failed")
    emit(s, "route_stalled", node=node.id, outcome=outcome, reason=reason)
    run.fx.log("warning", f"[HTN] Workflow '{run.plan.name}' stalled at '{node.id}': no edge for outcome "
                          f"'{outcome}' ({reason}); add an edge for it in plan '{run.plan.id}'")


def _follow(run: Run, edge: Edge) -> None:
    s = run.state
    emit(s, "edge_followed", **{"from": edge.src, "to": edge.dst, "condition": edge.condition})
    s["current_node"] = edge.dst
    s["turns_since_transition"] = 0
    s["stalled"] = ""
    s["route_note"] = ""
    push_path(s, edge.dst)
    entry = s["visited"].setdefault(edge.dst, {"outcome": "pending", "attempts": 0, "failures": 0})
    entry["outcome"] = "pending"  # budgets stay: they are per node per run
    emit(s, "node_entered", node=edge.dst)


def _settle(run: Run) -> None:
    """Pass through start, checkpoint and decision nodes until a task, a human gate or a terminal node; a branch's
    own run ends at its fan-in, and a parallel node forks when the host runs branches at once.  What a node does
    when the run reaches it is its kind's handler in ``SETTLE``."""
    stop = (run.state.get("branch") or {}).get("fan_in")
    for _ in range(MAX_SETTLE_STEPS):
        node = run.node
        if node.id == stop:
            failed = run.state.get("last_outcome") in ("retry", "exhausted")
            _branch_end(run, "fail" if failed else "success", run.state.get("last_failure", "") if failed else "")
            return
        if not SETTLE[node.type](run, node):
            return
    _stall(run, run.node, "loop", f"more than {MAX_SETTLE_STEPS} pass-through nodes in a row")


def _move(run: Run, node: Node, edge: Edge | None) -> bool:
    """Follow the edge a pass-through node chose (True: settle on), or stall there when it chose none."""
    if edge is None:
        _stall(run, node, run.state.get("last_outcome") or "success", "pass-through node without a route")
        return False
    _follow(run, edge)
    return True


def _rest(run: Run, node: Node) -> bool:
    """A task or a human gate: the run waits there for a result or an answer."""
    return False


def _pass_on(run: Run, node: Node) -> bool:
    edge, _, _ = select_edge(run.plan, node.id, {"status": "success"}, run.state.get("context", {}), "pass",
                             explain=False)
    return _move(run, node, edge)


def _record_checkpoint(run: Run, node: Node) -> bool:
    run.state["checkpoint"] = node.id
    emit(run.state, "checkpoint_reached", node=node.id, name=node.name)
    return _pass_on(run, node)


def _decide(run: Run, node: Node) -> bool:
    s = run.state
    last = s.get("last_outcome") or "success"
    outcome = dict(s.get("outcome") or {}, status=STATUS_OF.get(last, "success"))
    emit(s, "decision_routed", node=node.id, outcome=last)
    edge, _, _ = select_edge(run.plan, node.id, outcome, s.get("context", {}), "decision", explain=False)
    if not _move(run, node, edge):
        return False
    s["route_note"] = run.fx.texts.decision_note(run.plan, node, edge)
    return True


def _branch_out(run: Run, node: Node) -> bool:
    """A parallel node: fork when the host runs branches at once, else the branches one after another; over a list
    with no item (or one it cannot fan out), straight to the fan-in."""
    if over_list(run.plan, node):
        found, problem = _branches(run, node)
        if not found:
            return _fan_out_nothing(run, node, problem)
    if _forks(run, node):
        _fork(run, node)
        return False
    return _move(run, node, _start_branches(run, node))


def _manage(run: Run, node: Node) -> bool:
    """A manager node: its child plan runs in a subordinate agent (a fork of one branch, the child's own run),
    supervised at each of its passes (fork._supervise); the node routes when the child is done.  Without
    subordinates at once, or without the child plan, it routes on fail with the reason."""
    s = run.state
    child = _plan_by_id(run.fx.library or (), node.child) if node.child else None
    why = ""
    if not run.concurrent or s.get("branch"):
        why = "a manager runs its child in a subordinate agent, which this host does not run at once" + (
            f" ({run.serial_reason})" if run.serial_reason else "")
    elif child is None:
        why = f"no plan '{node.child}' in the library (or it is disabled)"
    elif child.id == run.plan.id or child.mode != "graph":
        why = f"plan '{node.child}' cannot be its child" + (" (a plan does not manage itself)"
                                                             if child.id == run.plan.id else " (a linear plan)")
    if why:
        run.fx.log("warning", f"[HTN] Workflow '{run.plan.name}': '{node.name}' runs no child: {why}")
        s["outcome"], s["last_outcome"], s["last_failure"] = {"status": "fail"}, "exhausted", why
        emit(s, "decision_routed", node=node.id, outcome="exhausted")
        edge, _, _ = select_edge(run.plan, node.id, {"status": "fail"}, s.get("context", {}), "decision",
                                 explain=False)
        return _move(run, node, edge)
    sub = Run(plan=child, state=child_state(child, s, node), fx=Effects(texts=run.fx.texts))
    _settle(sub)
    run.fx.logs.extend(sub.fx.logs)
    b: Branch = {"id": node.id, "run": sub.state["run_id"], "status": branch_outcome(sub.state) or "pending",
                 "state": sub.state, "answer": "", "reason": _end_reason(sub.state), "seen": 0}
    s["fork"] = Fork(node.id, node.id, 1, [b]).to_json()
    emit(s, "parallel_started", node=node.id, branches=[node.id], concurrent=True, max_parallel=1, child=child.id)
    s["turns_since_transition"], s["route_note"] = 0, ""
    return False


def _meet(run: Run, node: Node) -> bool:
    return _move(run, node, _next_branch(run, node))


def _reach_exit(run: Run, node: Node) -> bool:
    """An exit: a branch's own run ends there; the run completes when its goal gates hold (else it goes back)."""
    if run.state.get("branch"):
        _branch_end(run, "success", f"the branch reached the exit '{node.name}'")
        return False
    if _goal_gates_hold(run, node):
        _complete(run, node)
    return not (run.fx.ended or run.node.kind.rests)


def _reach_escalation(run: Run, node: Node) -> bool:
    _escalate(run, node)
    return False


# ── parallel branches, one after another ────────────────────────────────────
# Where the host cannot run branches at once (or the parallel node says ``sequential``), the run's own agent
# runs the branches (its outgoing edges, in the order they are listed) one after another.  A branch ends when
# the run reaches a fan-in node; the fan-in then starts the next branch, and after the last one routes on
# "success" when its policy holds (fan_in_passes: a branch failed when its last check did), else on "fail".
# A branch that reaches an exit or an escalation ends the run there.


def _branches(run: Run, node: Node) -> tuple[list[tuple[str, str, str | None]], str]:
    """(branch id, first node, item or None) for each branch of a parallel node, in order: its edges' targets, or
    over a list one branch of its one edge per item; ([], why) when the list cannot fan out."""
    firsts = list(dict.fromkeys(e.dst for e in run.plan.out_edges.get(node.id, ())))
    if not over_list(run.plan, node):
        return [(f, f, None) for f in firsts], ""
    found, problem = items((run.state.get("context") or {}).get(node.over), node.over, node.max_items)
    return [(branch_id(firsts[0], n), firsts[0], item) for n, item in enumerate(found, 1)], problem


def _start_branches(run: Run, node: Node) -> Edge | None:
    s = run.state
    branches, _ = _branches(run, node)
    if not branches:
        return None
    fitted = any(v for b, _, _ in branches for v in agent_fit(run.plan, node.id, b).values())
    if (run.serial_reason and not node.sequential and not s.get("branch") and node.id in run.plan.fan_in_of) \
            or (fitted and not s.get("branch")):
        why = f" ({run.serial_reason})" if run.serial_reason and not node.sequential else ""
        run.fx.log("info", f"[HTN] Workflow '{run.plan.name}': the branches of '{node.name}' run one after another "
                           f"in this chat{why}" + ("; their profile, llm_model, fidelity and thread_id apply to "
                                                    "subordinate agents only" if fitted else ""))
    ids = [b for b, _, _ in branches]
    frame: dict[str, Any] = {"node": node.id, "pending": ids[1:], "failed": []}
    if over_list(run.plan, node):
        frame["items"] = {b: item for b, _, item in branches}
    s.setdefault("parallel", []).append(frame)
    emit(s, "parallel_started", node=node.id, branches=ids, **_over(node, branches))
    _enter_branch(run, frame, ids[0])
    return Edge(src=node.id, dst=branches[0][1], condition="branch")


def _over(node: Node, branches: list[tuple[str, str, str | None]]) -> dict[str, Any]:
    return {"over": node.over, "items": [item for _, _, item in branches]} if node.over and any(
        item is not None for _, _, item in branches) else {}


def _enter_branch(run: Run, frame: dict[str, Any], bid: str) -> None:
    """A branch run in the run's own chat begins: its item is the context's ``item``, the values its fan-in
    merges start empty, and a branch over a list's item starts its steps' attempts afresh."""
    s, plan = run.state, run.plan
    ctx = s.setdefault("context", {})
    fan_in = plan.nodes.get(plan.fan_in_of.get(frame["node"], ""))
    for name, _ in fan_in.reduce if fan_in is not None else ():
        ctx.pop(name, None)
    if "items" in frame:
        ctx[ITEM] = frame["items"][bid]
        if bid != next(iter(frame["items"])) and fan_in is not None:
            for nid in inside(plan, first_of(plan, bid), fan_in.id):
                if nid in s["visited"]:
                    s["visited"][nid].update(attempts=0, failures=0)


def _next_branch(run: Run, node: Node) -> Edge | None:
    s = run.state
    frames = s.get("parallel") or []
    if not frames:  # a fan-in reached without a parallel node: pass straight on
        edge, _, _ = select_edge(run.plan, node.id, {"status": "success"}, s.get("context", {}), "decision")
        return edge
    frame = frames[-1]
    branches = list(frame["items"]) if "items" in frame else list(
        dict.fromkeys(e.dst for e in run.plan.out_edges.get(frame["node"], ())))
    at = len(branches) - len(frame["pending"]) - 1  # the branch that just reached the fan-in
    if s.get("last_outcome") in ("retry", "exhausted") and 0 <= at < len(branches):
        frame["failed"].append(branches[at])
    ctx = s.setdefault("context", {})
    if node.reduce and 0 <= at < len(branches):
        frame.setdefault("values", {})[branches[at]] = {k: ctx[k] for k, _ in node.reduce if k in ctx}
    if frame["pending"]:
        nxt = frame["pending"].pop(0)
        emit(s, "parallel_branch", node=frame["node"], branch=nxt)
        _enter_branch(run, frame, nxt)
        return Edge(src=node.id, dst=first_of(run.plan, nxt), condition="branch")
    frames.pop()
    if "items" in frame:
        ctx.pop(ITEM, None)
    if node.reduce:
        _update_context(run, reduced(node, [(b, frame.get("values", {}).get(b, {})) for b in branches]),
                        f"the fan-in '{node.name}'")
    outcomes = {b: "fail" if b in frame["failed"] else "success" for b in branches}
    passed = fan_in_passes(node, outcomes)
    status = "success" if passed else "fail"
    emit(s, "parallel_joined", node=node.id, failed=frame["failed"], policy=node.fan_in_policy, passed=passed)
    s["last_outcome"] = "success" if passed else "exhausted"
    edge, _, _ = select_edge(run.plan, node.id, {"status": status}, s.get("context", {}), "decision")
    return edge


def _fan_out_nothing(run: Run, node: Node, problem: str) -> bool:
    """A parallel node over a list with no item, or with a list it cannot fan out (``problem``): no branch runs;
    the fan-in routes at once, on its policy over no branch (all: success; any, quorum, majority: fail), or on
    fail with the reason."""
    s, plan = run.state, run.plan
    fan_in = plan.nodes[plan.fan_in_of[node.id]]
    emit(s, "parallel_started", node=node.id, branches=[], over=node.over, items=[],
         **({"reason": problem} if problem else {}))
    if problem:
        run.fx.log("warning", f"[HTN] Workflow '{plan.name}': '{node.name}' runs no branch: {problem}")
    _follow(run, Edge(src=node.id, dst=fan_in.id, condition="branches"))
    if fan_in.reduce:
        _update_context(run, reduced(fan_in, []), f"the fan-in '{fan_in.name}'")
    passed = not problem and fan_in_passes(fan_in, {})
    status = "success" if passed else "fail"
    emit(s, "parallel_joined", node=fan_in.id, failed=[], outcomes={}, policy=fan_in.fan_in_policy, passed=passed)
    s["outcome"], s["last_outcome"] = {"status": status}, "success" if passed else "exhausted"
    s["last_failure"] = "" if passed else (problem or run.fx.texts.fan_in_failure(plan, fan_in, {}))
    s["route_note"] = run.fx.texts.fan_in_note(plan, fan_in, [], passed, problem or f"'{node.over}' held no item")
    emit(s, "decision_routed", node=fan_in.id, outcome=s["last_outcome"])
    edge, _, _ = select_edge(plan, fan_in.id, {"status": status}, s.get("context", {}), "decision", explain=False)
    if edge is None:
        _stall(run, fan_in, status, s["last_failure"] or "no branch ran")
        return False
    note = s["route_note"]
    _follow(run, edge)
    s["route_note"] = note
    return True


def _forks(run: Run, node: Node) -> bool:
    return (run.concurrent and not node.sequential and not run.state.get("branch")
            and node.id in run.plan.fan_in_of)


def _fork(run: Run, node: Node) -> None:
    s, plan = run.state, run.plan
    fan_in = plan.fan_in_of[node.id]
    branches: list[Branch] = []
    found, _ = _branches(run, node)
    for bid, first, item in found:
        edge = next(e for e in plan.out_edges[node.id] if e.dst == first)
        emit(s, "edge_followed", **{"from": node.id, "to": first, "condition": edge.condition, "branch": bid})
        sub = Run(plan=plan, state=branch_state(plan, s, node.id, fan_in, first, bid, item),
                  fx=Effects(texts=run.fx.texts))
        _settle(sub)  # a branch may begin with a decision, or meet the fan-in at once
        run.fx.logs.extend(sub.fx.logs)
        branches.append({"id": bid, "run": sub.state["run_id"], "status": branch_outcome(sub.state) or "pending",
                         "state": sub.state, "answer": "", "reason": _end_reason(sub.state), "seen": 0})
    s["fork"] = Fork(node.id, fan_in, node.max_parallel, branches).to_json()
    emit(s, "parallel_started", node=node.id, branches=[b["id"] for b in branches], concurrent=True,
         max_parallel=node.max_parallel, **_over(node, found))
    s["turns_since_transition"], s["route_note"] = 0, ""


def _branch_end(run: Run, outcome: str, reason: str) -> None:
    """A branch's own run ends: at its fan-in, an exit, an escalation, or a limit.  Its agent is told to answer."""
    s = run.state
    name = run.fx.texts.branch_name(run.plan, s["branch"]["id"])
    emit(s, "branch_finished", node=s["current_node"], outcome=outcome, reason=reason)
    s["status"] = {"success": "completed", "escalated": "escalated", "expired": "expired"}.get(outcome, "ended")
    run.fx.log("info" if outcome == "success" else "warning",
               f"[HTN] Branch '{name}' of workflow '{run.plan.name}' finished: {outcome}"
               + (f" ({reason})" if reason else ""))
    _finish(run, s["status"], run.fx.texts.branch_done_notice(run.plan, s, outcome, reason))


def _join_when_done(run: Run) -> None:
    """The fork's branches all have an outcome: the fan-in routes.  A fork the host can no longer run at once (the
    setting turned off, or a host without subordinates) runs its branches one after another from the start."""
    fork = Fork.from_json(run.state.get("fork"))
    if not fork or run.state.get("status", "active") != "active":
        return
    if not run.concurrent and run.plan.nodes[fork.node].kind.manages:  # (the child stays where it was)
        run.state["fork"] = None
        _manage(run, run.plan.nodes[fork.node]) and _settle(run)
        return
    if not run.concurrent:
        run.state["fork"] = None
        edge = _start_branches(run, run.plan.nodes[fork.node])
        if edge is not None:
            _follow(run, edge)
            _settle(run)
        return
    if fork.joined():
        _join(run, fork)


def _join(run: Run, fork: Fork) -> None:
    s, plan = run.state, run.plan
    fan_in = plan.nodes[fork.fan_in]
    outcomes = fork.outcomes()
    passed = fan_in_passes(fan_in, outcomes)
    for b in fork.branches:
        if fork.fan_in == fork.node:  # a manager's child runs another plan: only its captured values come back
            _update_context(run, ((b.get("state") or {}).get("context") or {}), f"the child of '{fan_in.name}'")
        else:
            _absorb(run, b.get("state"))
    count_branch_turns(s, fork.branches)
    if fan_in.reduce:
        _update_context(run, reduced(fan_in, [(b["id"], (b.get("state") or {}).get("context") or {})
                                              for b in fork.branches]), f"the fan-in '{fan_in.name}'")
    s["fork"] = None
    emit(s, "parallel_joined", node=fan_in.id, failed=[i for i, o in outcomes.items() if o != "success"],
         outcomes=outcomes, policy=fan_in.fan_in_policy, passed=passed)
    if fork.fan_in != fork.node:  # (a manager routes from itself)
        _follow(run, Edge(src=fork.node, dst=fan_in.id, condition="branches"))
    status = "success" if passed else "fail"
    s["outcome"], s["last_outcome"] = {"status": status}, "success" if passed else "exhausted"
    s["last_failure"] = "" if passed else run.fx.texts.fan_in_failure(plan, fan_in, outcomes)
    note = run.fx.texts.fan_in_note(plan, fan_in, fork.branches, passed)
    emit(s, "decision_routed", node=fan_in.id, outcome=s["last_outcome"])
    edge, _, _ = select_edge(plan, fan_in.id, {"status": status}, s.get("context", {}), "decision", explain=False)
    if edge is None:
        _stall(run, fan_in, status, s["last_failure"] or "the branches joined")
    else:
        _follow(run, edge)
        _settle(run)
    if run.fx.ended:
        run.fx.context = note + "\n\n" + (run.fx.context or "")
    else:  # shown above the next step until the first call after the join has seen it
        run.fx.notice = note if not run.fx.notice else run.fx.notice + "\n\n" + note


def count_branch_turns(s: dict[str, Any], branches: list[Branch]) -> None:
    """The turns the branches' own agents took, counted in the parent's ``branch_turns`` (its own are ``turn``)."""
    s["branch_turns"] = s.get("branch_turns", 0) + sum(
        (b.get("state") or {}).get("turn", 0) for b in branches if isinstance(b.get("state"), dict))


def absorb_finished(run: Run) -> None:
    """The person stopped the run while branches ran: the steps the branches completed count in its summary."""
    fork = Fork.from_json(run.state.get("fork"))
    for b in fork.branches if fork else ():
        _absorb(run, b.get("state"))
    if fork:
        count_branch_turns(run.state, fork.branches)


def _absorb(run: Run, sub: Any) -> None:
    """A joined branch's steps count in the parent: their outcomes, progress and captured values (the attempts
    behind them are in the branch's own log)."""
    if not isinstance(sub, dict):
        return
    s, plan = run.state, run.plan
    for nid, entry in (sub.get("visited") or {}).items():
        node = plan.nodes.get(nid)
        if node is None or not node.kind.judged or entry.get("attempts", 0) == 0:
            continue
        mine = s["visited"].setdefault(nid, {"outcome": "pending", "attempts": 0, "failures": 0})
        mine["outcome"], mine["attempts"] = entry.get("outcome", "pending"), max(mine["attempts"], 1)
        if entry.get("completed"):
            _count_progress(run, node)
        elif entry.get("outcome") == "fail" and nid not in s["steps_failed"]:
            s["steps_failed"].append(nid)
    mine = sub.get("branch") or {}
    kept = {k: v for k, v in (sub.get("context") or {}).items() if not ("item" in mine and k == ITEM)}
    _update_context(run, kept, f"the branch '{run.fx.texts.branch_name(plan, mine.get('id', ''))}'")


def _goal_gates_hold(run: Run, exit_node: Node) -> bool:
    """At an exit: every goal gate the run executed must have passed its last check; else jump to its
    retry target (node's, then fallback, then the plan's), or end the plan when there is none."""
    s = run.state
    for nid, entry in s["visited"].items():
        node = run.plan.nodes.get(nid)
        skipped = entry.get("outcome") == "skipped"
        if node is None or not node.goal_gate or (entry.get("attempts", 0) == 0 and not skipped) or \
                entry.get("outcome") in ("success", "partial_success"):
            continue
        target = (node.retry_target or node.fallback_retry_target or run.plan.retry_target
                  or run.plan.fallback_retry_target)
        jumps = s.setdefault("gate_jumps", {})
        if not target or jumps.get(nid, 0) >= min(MAX_GATE_JUMPS, node.max_retries + 1):
            why = f"goal gate '{node.name}' is not satisfied" + (" (the user skipped it)" if skipped else "") + \
                ("" if target else " and names no retry target")
            emit(s, "goal_gate_failed", node=nid, at=exit_node.id)
            _end(run, "ENDED", why)
            s["status"] = "aborted"
            return False
        jumps[nid] = jumps.get(nid, 0) + 1
        emit(s, "goal_gate_unsatisfied", node=nid, at=exit_node.id, retry_target=target,
             **({"skipped_by_user": True} if skipped else {}))
        _follow(run, Edge(src=exit_node.id, dst=target, condition="goal_gate"))
        return False
    return True


def _complete(run: Run, node: Node) -> None:
    s = run.state
    emit(s, "plan_completed", node=node.id, completed=s["completed_nodes"], path_len=s["path_len"])
    theirs = s.get("branch_turns", 0)
    run.fx.log("info", f"[HTN] Workflow '{run.plan.name}' completed at '{node.name}': "
                       f"{run.fx.texts.progress(s)} in {run.fx.texts.plural(s['turn'], 'turn')}"
                       + (f" (and {run.fx.texts.plural(theirs, 'turn')} of its branches' agents)" if theirs else ""))
    s["status"] = "completed"
    run.fx.report = {"reason": f"completed at {node.name}", "state": s, "status_state": "complete", "on": "completion"}
    _finish(run, "completed", run.fx.texts.completed_notice(s, node.name))


def _escalate(run: Run, node: Node, reason: str = "") -> None:
    s = run.state
    reason = reason or node.reason or node.name
    if s.get("branch"):  # the fan-in's policy decides what a branch's escalation does to the run
        _branch_end(run, "escalated", f"{reason} (PACE {node.pace_level})")
        return
    emit(s, "plan_escalated", node=node.id, reason=reason, pace_level=node.pace_level)
    run.fx.log("warning", f"[HTN] Workflow '{run.plan.name}' escalated to PACE {node.pace_level} at "
                          f"{run.fx.texts.stopped_at(run.plan, s)}: {reason}")
    run.fx.pace_level = node.pace_level
    s["status"] = "escalated"
    s["escalation"] = {"node": node.id, "reason": reason, "pace_level": node.pace_level, "turn": s["turn"]}
    run.fx.report = {"reason": reason, "pace_level": node.pace_level, "state": s, "status_state": "escalating",
                     "on": "failure"}
    _finish(run, "escalated", run.fx.texts.escalated_notice(s, node, run.plan, reason))


def _end(run: Run, title: str, reason: str) -> None:
    if run.state.get("branch"):
        _branch_end(run, "expired" if title == "EXPIRED" else "fail", reason)
        return
    emit(run.state, "plan_ended" if title == "ENDED" else "plan_expired", node=run.state["current_node"],
         reason=reason)
    run.state["status"] = title.lower()
    if title == "EXPIRED":
        run.fx.report = {"reason": reason, "state": run.state, "status_state": "aborted", "on": "failure"}
    run.fx.log("info" if title == "ENDED" else "warning", f"[HTN] Workflow '{run.plan.name}' {title.lower()}: {reason}")
    _finish(run, title.lower(), run.fx.texts.ended_notice(run.state, title, reason, run.plan))


# ── limits ──────────────────────────────────────────────────────────────────


def _check_limits(run: Run) -> None:
    s = run.state
    stale = s.get("stale_after_turns") or run.plan.stale_after_turns
    if run.plan.mode == "linear":
        counter, what = s["turns_since_progress"], "no progress"
    else:
        counter, what = s["turns_since_transition"], "no step change"
    if counter > stale:
        _end(run, "EXPIRED", f"{what} for {stale} turns")
    elif s["turn"] > (s.get("max_turns") or run.plan.max_turns):
        _end(run, "EXPIRED", f"the run reached its ceiling of {s.get('max_turns') or run.plan.max_turns} turns")


SETTLE: dict[str, Callable[[Run, Node], bool]] = {
    "start": _pass_on, "task": _rest, "decision": _decide, "escalate": _reach_escalation, "exit": _reach_exit,
    "checkpoint": _record_checkpoint, "human": _rest, "parallel": _branch_out, "fan_in": _meet,
    "manager": _manage,
}
"""What a node of each kind does when the run reaches it (kinds.NODE_KINDS has a row for each, and a test checks
that every row has its handler): True when the run moved on and settling goes on, False when it rests there or
the run ended."""
