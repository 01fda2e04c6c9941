"""The person's controls (stop, pause, resume, skip, back, retry, restart, start, list, status) acted on a run.

Rules of this module
--------------------
* A message that is a control (``control.parse``: the whole message, word for word) is decided here, in the first
  hook call that sees it, so the call answering it already shows the result; a pressed control comes through
  ``engine.press``.
* Each control is one handler in ``_CONTROLS`` and one audit event (``CONTROL_EVENTS``) naming what the person
  wrote; a control with no run to act on gets a one-line answer.
"""

from __future__ import annotations

from typing import Any, Iterable

from . import control
from .message import allowed
from .model import Plan
from .state import emit, problem_with_values, push_path
from .routing import reachable, select_edge
from .run import Effects, Observation, Offer, Run, _alive, _finish, _listing, _plan_by_id
from .fork import stop_branches
from .traversal import _follow, _settle, _stall, absorb_finished
from .evidence import _linear_advance
from .gates import match_answer, take_option
from .new_message import _activate, _asked_for


# ── the user's controls ─────────────────────────────────────────────────────
# A message that is a control (control.parse: the whole message, word for word) is decided here, in the
# first hook call that sees it, so the call answering it already shows the result.  Each control is one
# audit event naming what the user wrote; a control with no run to act on gets a one-line answer.

CONTROL_EVENTS = {k.name: k.event for k in control.CONTROLS.values()}


def _steer(plans: Iterable[Plan], run: Run | None, obs: Observation, fx: Effects) -> tuple[bool, Run | None]:
    """(whether the new message is a control, the run after it)."""
    if run is not None and run.state.get("message_monologue") == obs.message_id:
        return False, run  # this message was decided in an earlier hook call
    ctl = control.parse(obs.user_message, obs.asked)
    if ctl is None or (ctl.kind == "resume" and not (run is not None and run.state.get("paused"))):
        return False, run  # "continue the workflow" with nothing paused: an ordinary "go on"
    if ctl.kind == "start":
        return _start_named(plans, run, obs, fx, ctl)
    if ctl.kind == "list":
        _answer(run, fx, fx.texts.workflow_list(_listing(plans, obs.allowed_plans), len(_listing(plans, None))))
    elif run is None:
        if ctl.kind == "back" and ctl.target and not ctl.explicit:
            return False, None  # "go back to the office": not about a workflow
        _answer(None, fx, fx.texts.no_run_answer(ctl.kind))
        fx.log("info", f"[HTN] The user said {ctl.said!r}: no workflow is active, nothing to do")
    elif ctl.kind == "restart":
        run = _restart(plans, run, obs, ctl)
    elif not _CONTROLS[ctl.kind](run, ctl):
        return False, run
    fx.control = ctl.kind
    if run is None:
        return True, None
    run.state["message_monologue"] = obs.message_id
    if ctl.kind in ("list", "status"):
        _said(run, ctl)
    return True, _alive(run)


def _answer(run: Run | None, fx: Effects, text: str) -> None:
    """What the model reads about a control: above the current step, or alone when no run goes on."""
    if run is None or run.fx.ended:
        fx.context = text if fx.context is None else text + "\n\n" + fx.context
    else:
        fx.notice = text if not fx.notice else fx.notice + "\n\n" + text


def _said(run: Run, ctl: control.Control, **fields: Any) -> None:
    """The one audit event of a control, naming what the user wrote (or pressed: ``by``); and its log line."""
    if ctl.by:
        fields["by"] = ctl.by
    emit(run.state, CONTROL_EVENTS[ctl.kind], node=run.state["current_node"], said=ctl.said, **fields)
    how = "pressed" if ctl.by == "button" else "said"
    run.fx.log("info", f"[HTN] Workflow '{run.plan.name}': the user {how} {ctl.said!r} ({ctl.kind})")


def _stop(run: Run, ctl: control.Control) -> bool:
    absorb_finished(run)  # the branch steps that passed count in the summary
    stopped = stop_branches(run.state)
    _said(run, ctl, **({"branches": stopped} if stopped else {}))
    run.state["status"] = "stopped"
    _finish(run, "stopped", run.fx.texts.stopped_notice(run.state, run.plan))
    return True


def _pause(run: Run, ctl: control.Control) -> bool:
    if run.state.get("paused"):
        _answer(run, run.fx, run.fx.texts.control_line(f"'{run.plan.name}' is already paused; say \"resume the "
                                                 "workflow\" to go on."))
        return True
    run.state["paused"] = True
    _said(run, ctl)
    return True


def _resume_paused(run: Run, ctl: control.Control) -> bool:
    s = run.state
    s["paused"] = False
    gate = s.get("gate")
    if gate:  # a gate's timer does not run while the run is paused
        gate["turn"], gate["at"] = s["turn"], run.now
    _said(run, ctl)
    _answer(run, run.fx, run.fx.texts.control_line(f"Resumed by the user: '{run.plan.name}' goes on at the current "
                                             "step below."))
    return True


def _skip(run: Run, ctl: control.Control) -> bool:
    s, node = run.state, run.node
    if node.kind.forks:
        _answer(run, run.fx, run.fx.texts.control_line(f"'{node.name}' runs its branches in subordinate agents and "
                                                       "cannot be skipped; say \"stop the workflow\" to stop them all."))
        return True
    if node.kind.asks:
        edge = match_answer(run.plan, node, node.default_choice) if node.default_choice else None
        if edge is None:
            _answer(run, run.fx, run.fx.texts.control_line(f"'{node.name}' is a question for the user and has no default "
                                                     "option, so it cannot be skipped: ask it again with its options."))
            return True
        _said(run, ctl)
        take_option(run, node, edge, ctl.said, "skipped by the user")
        _answer(run, run.fx, run.fx.texts.control_line(f"Skipped by the user: the question '{node.name}' took its default "
                                                 f"option '{edge.label or edge.dst}'."))
        return True
    key: str | int = s["current_step"] if run.plan.mode == "linear" else node.id
    if key not in s.setdefault("steps_skipped", []):
        s["steps_skipped"].append(key)
    s["visited"].setdefault(node.id, {"outcome": "pending", "attempts": 0, "failures": 0})["outcome"] = "skipped"
    _said(run, ctl)
    s["last_failure"] = ""
    if run.plan.mode == "linear":
        _linear_advance(run, int(s["current_step"]))
    else:
        s["outcome"], s["last_outcome"] = {"status": "success"}, "success"
        edge, _, _ = select_edge(run.plan, node.id, {"status": "success"}, s.get("context", {}), "task",
                                 explain=False)
        if edge is None:
            _stall(run, node, "success", "skipped by the user")
        else:
            _follow(run, edge)
            _settle(run)
    _answer(run, run.fx, run.fx.texts.skipped_note(node.name, "the workflow follows its success route"))
    return True


def _back(run: Run, ctl: control.Control) -> bool:
    plan, s = run.plan, run.state
    if ctl.node:  # a step pressed in the web UI: named by its id
        found = [ctl.node] if ctl.node in plan.nodes and plan.nodes[ctl.node].kind.rests else []
    elif ctl.target:
        found = control.find_steps(plan, ctl.target)
    else:  # "go back": the step before the current one
        found = [n for n in reversed(s.get("path", [])) if n != s["current_node"]
                 and plan.nodes[n].kind.rests][:1]
    if len(found) != 1:
        if not found and not ctl.explicit and ctl.target:
            return False  # "redo the dishes": names no step, not said as one
        _answer(run, run.fx, run.fx.texts.no_such_step(plan, ctl.target, found))
        return True
    target = found[0]
    here = plan.success_index.get(s["current_node"])
    there = plan.success_index.get(target)
    if here is not None and there is not None and there > here:
        _answer(run, run.fx, run.fx.texts.control_line(f"'{plan.nodes[target].name}' comes after the current step; a run "
                                                 "goes back only (say \"skip this step\" to move on)."))
        return True
    _said(run, ctl, to=target, reopened=_reopen(run, target))
    s["current_node"] = target
    s["turns_since_transition"], s["stalled"], s["last_failure"] = 0, "", ""
    s["outcome"], s["last_outcome"], s["gate"], s["route_note"] = {}, "", None, ""
    push_path(s, target)
    emit(s, "node_entered", node=target)
    _answer(run, run.fx, run.fx.texts.back_note(plan.nodes[target].name))
    return True


def _reopen(run: Run, target: str) -> list[str]:
    """The target and the steps after it are pending again, with fresh attempts; what was reopened."""
    plan, s = run.plan, run.state
    if plan.mode == "linear":
        idx = plan.success_index[target]
        for key in ("steps_completed", "steps_failed", "steps_skipped"):
            s[key] = [i for i in s.get(key, []) if isinstance(i, int) and i < idx]
        s["current_step"], s["completed_nodes"] = idx, len(s["steps_completed"])
        reopened = list(plan.success_path[idx:])
    else:
        after = reachable([target], {nid: [e.dst for e in edges] for nid, edges in plan.out_edges.items()})
        order = plan.success_index
        cut = order.get(target, min((order[n] for n in after if n in order), default=len(order)))
        reopened = sorted(n for n in after if order.get(n, cut) >= cut)
        gone = set(reopened)
        for key in ("steps_completed", "steps_failed", "steps_skipped"):
            s[key] = [n for n in s.get(key, []) if n not in gone]
        s["current_step"] = min(len(s["steps_completed"]), plan.total_steps)
        s["parallel"], s["fork"] = [], None  # a jump leaves any branches under way
        for n in ("gate_jumps", "attempts_restored"):
            if isinstance(s.get(n), dict):
                s[n] = {k: v for k, v in s[n].items() if k not in gone}
            elif isinstance(s.get(n), list):
                s[n] = [k for k in s[n] if k not in gone]
    gone = set(reopened)
    s["path"] = [n for n in s["path"] if n not in gone]  # the trail shows what stays done (path_len counts on)
    for nid in reopened:
        if nid in s["visited"]:
            s["visited"][nid] = {"outcome": "pending", "attempts": 0, "failures": 0}
    s["visited"].setdefault(target, {"outcome": "pending", "attempts": 0, "failures": 0})
    if plan.mode != "linear":
        s["completed_nodes"] = sum(1 for e in s["visited"].values() if e.get("completed"))
    return [n for n in reopened if n in s["visited"]][:20]


def _retry(run: Run, ctl: control.Control) -> bool:
    s, node = run.state, run.node
    if not node.kind.judged:
        what = "runs its branches in subordinate agents" if node.kind.forks else "is a question for the user"
        _answer(run, run.fx, run.fx.texts.control_line(f"'{node.name}' {what}; it has no attempts to give back."))
        return True
    given = s.setdefault("attempts_restored", [])
    if node.id in given:
        _answer(run, run.fx, run.fx.texts.control_line(f"'{node.name}' already had its attempts given back once; say "
                                                 f"\"go back to {node.name}\" to start it afresh."))
        return True
    given.append(node.id)
    entry = s["visited"].setdefault(node.id, {"outcome": "pending", "attempts": 0, "failures": 0})
    entry["failures"], entry["outcome"] = 0, "pending"
    s["steps_failed"] = [n for n in s["steps_failed"] if n != node.id and n != s["current_step"]]
    s["stalled"], s["last_failure"] = "", ""
    _said(run, ctl)
    _answer(run, run.fx, run.fx.texts.control_line(f"Retried at the user's request: '{node.name}' has its attempts back "
                                             "(once per step)."))
    return True


def _restart(plans: Iterable[Plan], run: Run, obs: Observation, ctl: control.Control) -> Run | None:
    """A new run of the same plan (the library's current version) from its start; the old run ends, stopped."""
    old, fx = run.state, run.fx
    _said(run, ctl)
    old["status"] = "stopped"
    _finish(run, "stopped", None)
    fx.ended = ""
    new = _activate(_asked_for(_plan_by_id(plans, run.plan.id) or run.plan), obs, fx, ctl.said)
    if new is not None:
        old["events"][-1]["new_run"] = new.state["run_id"]
        _answer(new, fx, run.fx.texts.control_line(f"Restarted by the user: a new run of '{run.plan.name}' starts at its "
                                             f"first step (the previous run had {run.fx.texts.progress(old)})."))
    return new


def _start_named(plans: Iterable[Plan], run: Run | None, obs: Observation, fx: Effects,
                 ctl: control.Control) -> tuple[bool, Run | None]:
    """'start the <plan name> workflow': that plan now, whatever the triggers say, within the org's filter."""
    listing = _listing(plans, None)
    ids = control.find_plans([(pid, name) for pid, name, _ in listing], ctl.target, exact_only=not ctl.explicit)
    if not ids and not ctl.explicit:
        return False, run  # "run the tests": an ordinary request
    fx.control = ctl.kind
    names = {pid: name for pid, name, _ in listing}
    plan = _plan_by_id(plans, ids[0]) if len(ids) == 1 else None
    if len(ids) != 1:
        refusal = fx.texts.no_such_plan(ctl.target, [names[i] for i in ids])
    elif not allowed(ids[0], obs.allowed_plans):
        refusal = fx.texts.control_line(f"Not started: the active org role does not allow '{names[ids[0]]}' "
                                      f"(allowed: {', '.join(obs.allowed_plans or ()) or 'none'}). Tell the user.")
    elif plan is None:
        refusal = fx.texts.control_line(f"Not started: '{names[ids[0]]}' has errors and is disabled (`graph-engine "
                                      "validate` names them). Tell the user.")
    elif run is not None and run.plan.id == plan.id:
        refusal = fx.texts.control_line(f"'{plan.name}' is already running; say \"restart the workflow\" to start "
                                      "it again.")
    else:
        refusal = ""
    if refusal:
        fx.log("info", f"[HTN] The user said {ctl.said!r}: {refusal.split('] ', 1)[-1]}")
        _answer(run, fx, refusal)
        if run is not None:
            run.state["message_monologue"] = obs.message_id
        return True, run
    replaced = ""
    if run is not None:
        emit(run.state, "plan_ended", node=run.state["current_node"], said=ctl.said,
             reason=f"the user started '{plan.name}'")
        run.state["status"] = "ended"
        run.fx.log("info", f"[HTN] Workflow '{run.plan.name}' ended: the user started '{plan.name}'")
        _finish(run, "ended", None)
        replaced = run.plan.name
        fx.context, fx.ended = None, ""
    new = _activate(_asked_for(plan), obs, fx, ctl.said)
    if new is None:
        return True, None
    new.state["message_monologue"] = obs.message_id
    _answer(new, fx, fx.texts.started_note(plan.name, replaced))
    return True, new


def _take_offer(run: Run | None, obs: Observation, fx: Effects) -> Run | None:
    """A plan proposed in the chat and approved (``obs.offer``): started, ending the run that goes on; or, as an
    amendment, the running run moved to it at its current step.  The message that approved it is decided."""
    offer = obs.offer
    assert offer is not None
    if offer.amend:
        run = _amend(run, offer, fx)
    else:
        replaced = ""
        if run is not None:
            emit(run.state, "plan_ended", node=run.state["current_node"],
                 reason=f"the proposed workflow '{offer.plan.name}' was started")
            run.state["status"] = "ended"
            run.fx.log("info", f"[HTN] Workflow '{run.plan.name}' ended: the proposed workflow '{offer.plan.name}' "
                               "was started")
            _finish(run, "ended", None)
            replaced = run.plan.name
            fx.context, fx.ended = None, ""
        run = _activate(_asked_for(offer.plan), obs, fx, composed=offer.by)
        if run is not None:
            if offer.source:
                run.state["source"] = dict(offer.source)
            instead = f" It replaces '{replaced}', which ended." if replaced else ""
            what = "the proposed workflow" if offer.source else "the plan"
            _answer(run, fx, fx.texts.control_line(f"Started {what} '{offer.plan.name}' ({offer.by}).{instead}"))
        elif fx.final_state is not None and offer.source:
            fx.final_state["source"] = dict(offer.source)
    if run is not None and obs.user_message.strip():
        run.state["message_monologue"] = obs.message_id
    return run


def _amend(run: Run | None, offer: Offer, fx: Effects) -> Run | None:
    """The running run moved to a new version of its plan at its current step, every step done and every verdict
    kept; refused (one line, the run goes on unchanged) when the new version cannot carry the run on."""
    new = offer.plan
    if run is None:
        fx.log("info", f"[HTN] The change to '{new.name}' was not applied: no workflow is running")
        fx.context = fx.texts.control_line(f"The change to '{new.name}' was not applied: no workflow is running.")
        return None
    cur = run.state["current_node"]
    why = amend_problem(run.plan, run.state, new)
    if why:
        fx.log("info", f"[HTN] The change to '{run.plan.name}' was not applied: {why}")
        _answer(run, fx, fx.texts.control_line(f"The change to '{run.plan.name}' was not applied: {why}. The run "
                                               "goes on unchanged."))
        return run
    s = run.state
    old_version = s.get("plan_version", "")
    s.update(_moved_to(new))
    if offer.source:
        s["source"] = dict(offer.source)
    emit(s, "plan_amended", node=cur, version=new.version, reason=f"from version {old_version} ({offer.by})")
    fx.log("info", f"[HTN] Workflow '{new.name}' amended at '{new.nodes[cur].name}' ({offer.by}; version "
                   f"{old_version} -> {new.version}, steps done kept)")
    run = Run(plan=new, state=s, fx=fx, now=run.now, concurrent=run.concurrent, serial_reason=run.serial_reason)
    _answer(run, fx, fx.texts.control_line(f"The workflow '{new.name}' was changed ({offer.by}); it goes on at "
                                           f"'{new.nodes[cur].name}' with the steps done so far kept."))
    return run


def amend_problem(old: Plan, state: dict, new: Plan) -> str:
    """Why ``new`` cannot carry the run of ``old`` on from where ``state`` is ("" when it can)."""
    cur = state.get("current_node", "")
    if cur not in new.nodes:
        return f"it drops the current step '{old.nodes[cur].name if cur in old.nodes else cur}'"
    if new.nodes[cur].kind.name != old.nodes[cur].kind.name:
        return (f"it makes the current step '{cur}' a {new.nodes[cur].kind.name} node (it is a "
                f"{old.nodes[cur].kind.name})")
    if state.get("fork") or state.get("parallel"):
        return "branches are running; change the plan after they meet"
    gone = [n for n in state.get("visited", {}) if n not in new.nodes]
    if gone:
        return f"it drops step '{gone[0]}', which the run has visited"
    return problem_with_values(dict(state, **_moved_to(new)), new)


def _moved_to(new: Plan) -> dict[str, Any]:
    """What a run's state says of its plan, for ``new``."""
    return {"plan_id": new.id, "plan_name": new.name, "plan_version": new.version, "total_steps": new.total_steps,
            "total_nodes": len(new.task_ids)}


def _status(run: Run, ctl: control.Control) -> bool:
    _answer(run, run.fx, run.fx.texts.status_text(run.plan, run.state))
    return True


_CONTROLS = {"stop": _stop, "pause": _pause, "resume": _resume_paused, "skip": _skip, "back": _back,
             "retry": _retry, "status": _status}
