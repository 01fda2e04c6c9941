"""The step function: (plans, state, observation) -> (state', effects).

Rules of this module
--------------------
* Everything that changes a run's state lives here and in the layers below it
  (see "Layers").  No I/O: no Agent-Zero, no files, no clock, no logging.
  What must happen outside (log a line, inject text, set a PACE level, write
  a report) comes back as ``Effects``.
* What a node kind does is read from its row (``kinds.NODE_KINDS``, the
  settle handlers in ``traversal.SETTLE``); the texts are worded by the
  ``texts_port.Texts`` the host passes in.
* This module does not know which Agent-Zero hook called it; it knows only the
  observation's ``hook`` name and what that implies for timing.

Theory of operation
-------------------
Agent-Zero runs passes.  Pass *k* of a monologue builds a prompt (the
``message_loop_prompts_after`` hook is the last moment to add text that reaches
this pass's LLM call), then calls ``before_main_llm_call`` (text added there
reaches only call *k+1*), then calls the model; the tool's result lands in
history and is visible at pass *k+1*.

So every pass key ``"<monologue>:<k>"`` names one LLM call.  The engine
records in ``state["shown"]`` which node's instructions were in the prompt of
which call, and in ``state["consumed"]`` which calls' outputs were already
judged.  The output of call *k* (read at pass *k+1*) is evidence only if call
*k* was shown the node that is current now and it was not judged before.  A
message the person writes while the agent works can end a pass before its call
replies: the output read next is then an earlier call's, so it is taken for
call *k*'s only when the model's newest reply changed since pass *k*
(``Observation.reply_mark``, noted in ``state["reply_seen"]``).
Anything else (results from before activation, from an earlier user message,
re-read after history compression, a wrong tool) changes nothing but counters.

Each pass is counted once (``state["last_pass"]``), whichever hook sees it
first, and then: judge evidence -> follow edges -> settle on a task or a
terminal node -> (on a new user message) keep, switch or end the run -> check
staleness and the turn ceiling -> render the context.

Layers
------
The engine is split by layer, each importing only those before it: ``run`` (the records) < ``fork`` (a fork's
branches as the host reports them) < ``traversal`` (outcomes, edges, settling, ends) < ``evidence`` (judging an
output) and ``gates`` (the person's answers) < ``new_message`` (keep, switch, start or end on a new message) <
``steering`` (the controls) < this module (the step).  Every name the host, the tools and the tests use is
importable from here.
"""

from __future__ import annotations

from typing import Any, Iterable

from . import control
from .model import Plan
from .texts_port import Texts
from .state import emit, record_shown
# the layers below; what the host, the tools and the tests use from them is importable from here too
from .run import _alive, BEFORE_MAIN, Effects, Observation, Offer, PlanLookup, PRESSED, PROMPTS_AFTER, Run
from .fanout import agent_fit
from .fork import branch_progress, branch_returned, branch_started, fan_in_passes, stop_branches
from .traversal import (apply_outcome, _check_limits, _end, _fork, _join_when_done, _rest, SETTLE, _settle,
                        _update_context)
from .evidence import _judge, _linear_verdict
from .gates import answer_human, _gate_started, _gate_timeout, human_options, match_answer, take_option
from .new_message import decide, Decision, _on_message
from .steering import _answer, amend_problem, CONTROL_EVENTS, _CONTROLS, _restart, _steer, _take_offer


def step(plans: Iterable[Plan], lookup: PlanLookup, state: dict[str, Any] | None,
         obs: Observation, texts: Texts) -> tuple[dict[str, Any] | None, Effects]:
    """Advance one hook call.  ``plans``: the current library; ``lookup`` finds a run's plan version; ``texts``:
    what words the texts the model and the person read (the host's ``render``: this module imports none)."""
    fx = Effects(texts=texts, library=plans)
    run = _resume(lookup, state, fx)
    if run is not None:
        run.now, run.concurrent, run.serial_reason = obs.now, obs.concurrent, obs.serial_reason
        _judge(run, obs, _tick(run, obs))
        _join_when_done(run)
        _gate_timeout(run, obs)
        run = _alive(run)
    paused = False
    if obs.offer is not None and not (run and run.state.get("branch")):
        run = _take_offer(run, obs, fx)
    if obs.user_message.strip() and obs.control_seen != obs.message_id and not (run and run.state.get("branch")):
        steered, run = _steer(plans, run, obs, fx)
        if not steered:
            run, paused = _on_message(plans, run, obs, fx)
    if run is not None and not run.state.get("paused"):
        _check_limits(run)
        run = _alive(run)
    if run is None:
        return None, fx
    return _render(run, obs, fx, paused)


def _render(run: Run, obs: Observation, fx: Effects, paused: bool) -> tuple[dict[str, Any], Effects]:
    """What the call this hook reaches reads about the live run, and which step it was shown (``paused``: a new
    message not decided yet, so no step)."""
    _gate_started(run, obs)
    if fx.notice:  # shown until the first call after it has seen it (this one, when this hook reaches it)
        run.state["notice"] = fx.notice
        run.state["notice_turn"] = run.state["turn"] + (0 if obs.hook == PROMPTS_AFTER else 1)
    _hold_on_emergency(run, obs)
    target = obs.pass_key if obs.hook == PROMPTS_AFTER else obs.next_pass_key
    if run.state.get("paused") or paused:  # no step in this call, and its output is not evidence (a step an earlier
        record_shown(run.state, target, "")  # hook showed this call, for want of a companion, is taken back)
    if run.state.get("paused"):  # paused by the user
        fx.context = fx.texts.user_paused(run.plan, run.state)
        if run.state.get("notice") and run.state["turn"] <= run.state.get("notice_turn", 1):
            fx.context = run.state["notice"] + "\n\n" + fx.context
        return run.state, fx
    if paused:  # a new message not decided yet
        fx.context = fx.texts.paused_notice(run.state)
        return run.state, fx
    fx.context = shown_text(run)
    if run.state.get("notice"):
        if run.state["turn"] <= run.state.get("notice_turn", 1):  # until the first call after it has seen it
            fx.context = run.state["notice"] + "\n\n" + fx.context
        else:
            run.state["notice"] = ""
    record_shown(run.state, target, run.state["current_node"])
    return run.state, fx


def press(plans: Iterable[Plan], lookup: PlanLookup, state: dict[str, Any], ctl: control.Control,
          obs: Observation, texts: Texts, request: str = "") -> tuple[dict[str, Any] | None, Effects]:
    """A control the person pressed in the web UI, applied at once: between the agent's passes (``obs.hook`` is
    PRESSED: the model is told at its next call; ``obs`` names the run's last pass), or in a hook call that waited
    (for the utility model, or for branches): the call it reaches is shown the result.  ``fx.control`` names the
    control when it changed the run; ``fx.refused`` says why it did not (the model is not told of a refusal: the
    person sees it where they pressed).  A result in flight when it came is judged against the step its call was
    shown, or set aside (``_judge``), never against a step the control moved to.  The answer the person reads
    (``request`` names their press) is kept in the run's ``pressed``."""
    fx = Effects(texts=texts, library=plans)
    run = _resume(lookup, state, fx)
    if run is None:
        return None, fx
    run.now, run.concurrent, run.serial_reason = obs.now, obs.concurrent, obs.serial_reason
    seq = state.get("seq", 0)
    if ctl.kind == "restart":
        run = _restart(plans, run, obs, ctl)
    elif ctl.kind == "resume" and not state.get("paused"):
        _answer(run, fx, fx.texts.control_line(f"'{run.plan.name}' is not paused; it goes on at its current step."))
    elif ctl.kind in _CONTROLS:
        _CONTROLS[ctl.kind](run, ctl)
    event = CONTROL_EVENTS[ctl.kind]
    if any(e.get("seq", 0) > seq and e.get("type") == event for e in state.get("events") or ()):
        fx.control = ctl.kind
    else:
        fx.refused = (fx.notice or fx.context or "").split("] ", 1)[-1]
        fx.notice = ""
    run = _alive(run) if run is not None else None
    kept = run.state if run is not None else fx.final_state or state
    plan = run.plan if run is not None else lookup(kept.get("plan_id", ""), kept.get("plan_version", ""))
    kept["pressed"] = {"id": request, "control": ctl.kind, "status": "applied" if fx.control else "refused",
                       "text": texts.pressed_answer(ctl.kind, bool(fx.control), fx.refused, plan, kept)}
    if run is None:
        return None, fx
    if obs.hook != PRESSED:
        return _render(run, obs, fx, False)
    if fx.notice:  # the first call after it reads it
        run.state["notice"], run.state["notice_turn"] = fx.notice, run.state["turn"] + 1
    return run.state, fx


def resumed(plan: Plan, state: dict[str, Any], texts: Texts) -> dict[str, Any]:
    """A run restored after a restart or a chat reload: the event, and the notice its next call is shown."""
    emit(state, "run_resumed", node=state["current_node"], turn_saved=state.get("turn", 0))
    state["notice"] = texts.resumed_notice(state, plan)
    state["notice_turn"] = state.get("turn", 0) + 1
    return state


def shown_text(run: Run) -> str:
    """What the model reads about a live run: its current step, or the hold notice under PACE emergency."""
    return run.fx.texts.hold(run.plan, run.state) if run.state.get("held") else run.fx.texts.context(run.plan, run.state)


# ── resuming and counting ───────────────────────────────────────────────────


def _resume(lookup: PlanLookup, state: dict[str, Any] | None, fx: Effects) -> Run | None:
    if state is None:
        return None
    plan = lookup(state["plan_id"], state.get("plan_version", ""))
    if plan is None or state["current_node"] not in plan.nodes:
        what = "is no longer in the library" if plan is None else f"has no node '{state['current_node']}'"
        reason = f"plan '{state['plan_id']}' {what}"
        fx.log("warning", f"[HTN] Workflow '{state.get('plan_name', state['plan_id'])}' ended: {reason}; "
                          "start it again with a new request once the library has it")
        emit(state, "plan_ended", node=state["current_node"], reason=reason)  # the run's end, in its log too
        state["status"] = "ended"
        fx.context = fx.texts.ended_notice(state, "ENDED", reason, plan)
        fx.ended = "ended"
        fx.final_state = state
        return None
    return Run(plan=plan, state=state, fx=fx)


def _tick(run: Run, obs: Observation) -> str:
    """Count the pass once; return the key of the call whose output this pass may judge."""
    s = run.state
    previous = s.get("last_pass", "")
    seen = s.get("reply_seen")
    if previous == obs.pass_key:  # the other hook of this pass: the call the first one found
        same = isinstance(seen, list) and seen[0] == obs.pass_key
        return "" if s.get("paused") else seen[2] if same else _call_before(obs, previous)
    s["last_pass"] = obs.pass_key
    key = _producing_call(s, obs, previous, seen)
    s["reply_seen"] = [obs.pass_key, obs.reply_mark, key]
    if s.get("paused"):
        return ""  # paused: no turn counts toward expiry, and nothing is judged
    s["turn"] += 1
    s["turns_since_transition"] = s.get("turns_since_transition", 0) + 1
    s["turns_since_progress"] = s.get("turns_since_progress", 0) + 1
    return key


def _call_before(obs: Observation, previous: str) -> str:
    """The call made at the pass before this one: the previous iteration's, or at a monologue's first pass the
    previous monologue's last call (its response reply, or a tool result a stop left)."""
    if obs.iteration > 0:
        return f"{obs.monologue}:{obs.iteration - 1}"
    return previous if previous.split(":", 1)[0] != obs.monologue else ""


def _producing_call(s: dict[str, Any], obs: Observation, previous: str, seen: Any) -> str:
    """The call whose reply is the newest in history now, or "" when no call replied since this run's last pass.

    The host marks the model's newest reply (``Observation.reply_mark``); this run noted the mark its last pass saw
    (``reply_seen``).  A message the person writes while the agent works can end a pass after its hooks ran and
    before its call replied (Agent-Zero's handle_intervention, during the call or just before it): the newest
    reply, and the result after it, are then still those of an earlier call, already judged or never shown this
    step.  A pass whose hooks did not run made no call, so a new reply is the call of the last pass that ran them."""
    if obs.iteration == 0 or obs.reply_mark is None or not (isinstance(seen, list) and seen[0] == previous
                                                            and seen[1] is not None):
        return _call_before(obs, previous)
    if previous.split(":", 1)[0] != obs.monologue:
        return _call_before(obs, previous)
    if seen[1] != obs.reply_mark:
        return previous
    if obs.output is not None:
        emit(s, "evidence_ignored", node=s["current_node"], tool=obs.output.tool,
             reason=f"call {previous} made no reply (a message came first); the newest result is an earlier call's")
    return ""


def _hold_on_emergency(run: Run, obs: Observation) -> None:
    """PACE emergency: stop telling the model to execute steps; tell it to stop and report instead."""
    s = run.state
    if obs.pace_level == "emergency" and not s.get("held"):
        s["held"] = True
        emit(s, "emergency_hold", node=s["current_node"])
        run.fx.log("warning", f"[HTN] Workflow '{run.plan.name}' on hold: PACE level is emergency; "
                              "the model is told to stop and report")
    elif obs.pace_level != "emergency" and s.get("held") and obs.pace_level:
        s["held"] = False
        emit(s, "emergency_released", node=s["current_node"], pace_level=obs.pace_level)
