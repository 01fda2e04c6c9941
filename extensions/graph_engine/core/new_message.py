"""A new user message: keep the run, answer its gate, end it, switch to another plan or start one.

Rules of this module
--------------------
* A message is decided once (``state["message_monologue"]``), by ``decide``'s rules; the host matched it before the
  step (``Observation.match``), and this module matches nothing itself.
* With the domain unknown, what the trigger phrases decide is provisional; the selector's pass confirms or undoes it
  (``_confirm``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .message import Match, allowed, domain_leaves_plan
from .model import Plan
from .state import emit, new_state, push_path
from .run import Effects, Observation, Run, _alive, _finish
from .traversal import _end, _settle
from .gates import answer_human, match_answer


# ── a new user message ──────────────────────────────────────────────────────


@dataclass(slots=True)
class Decision:
    """What a new user message does: ``keep`` the run, ``answer`` its human gate, ``end`` it, ``switch`` to
    another plan, ``start`` one, ``none``; or ``undecided`` while the belief-state domain is not known."""

    kind: str
    match: Match | None = None
    reason: str = ""


ANSWER_WORDS = 3  # a message this short after the agent asked the user something is the answer


def answers_question(obs: Observation) -> bool:
    """The message answers the question the agent's last reply asked ("end", "the new one"): the run goes on."""
    return obs.asked and 0 < len(obs.user_message.split()) <= ANSWER_WORDS


def decide(plans: Iterable[Plan], run: Run | None, obs: Observation) -> Decision:
    """The rules of a new message.  With the domain unknown (the companion, or an intervention) only what the
    trigger phrases decide on their own is decided; the rest waits for the selector, which knows the domain."""
    text, known = obs.user_message, obs.domain_known
    human = run is not None and run.node.kind.asks
    if human and match_answer(run.plan, run.node, text) is not None:
        return Decision("answer")
    if run is not None and not human and (obs.continuation or answers_question(obs)):
        return Decision("keep")
    match = obs.match  # as the host matched it for this hook call, with the domain this hook knows
    if run is None:
        return Decision("start", match) if match else Decision("none" if known else "undecided")
    if match is not None and match.plan.id != run.plan.id:
        if not known and obs.names_run_plan:  # both plans named: the domain may prefer the old one
            return Decision("undecided")
        return Decision("switch", match, f"the new message matches plan '{match.plan.name}'")
    if human:  # no option named and no other plan: an answer that matches no option (asked again)
        return Decision("answer")
    if match is not None:
        return Decision("keep", match)  # the same plan asked for again
    if not known:
        return Decision("undecided")
    if domain_leaves_plan(run.plan, obs.domain):
        return Decision("end", reason=f"the new message is about '{obs.domain}', which this plan does not cover")
    return Decision("keep")  # small talk or a follow-up: the run continues


def _on_message(plans: Iterable[Plan], run: Run | None, obs: Observation, fx: Effects) -> tuple[Run | None, bool]:
    """Decide a new user message once; (the run after it, whether this call must show no step yet)."""
    key = obs.message_id
    if run is not None and run.state.get("message_monologue") == key:
        prov = run.state.get("provisional")
        if obs.domain_known and isinstance(prov, dict) and prov.get("key") == key:
            return _confirm(plans, run, obs, fx, bool(prov.get("started"))), False
        return run, False  # decided in an earlier hook call
    d = decide(plans, run, obs)
    if d.kind == "undecided":
        if run is not None and obs.iteration > 0:  # an intervention: no later hook knows more; the run goes on
            run.state["message_monologue"] = key
        return run, run is not None
    if run is not None:
        run.state["message_monologue"] = key
    provisional = obs.iteration == 0 and not obs.domain_known  # the selector confirms it in this same pass
    if d.kind == "answer":
        if provisional and match_answer(run.plan, run.node, obs.user_message) is None:
            run.state["provisional"] = {"key": key, "started": False}  # a plan its domain confirms may take over
        answer_human(run, obs.user_message.strip())
        return _alive(run), False
    if d.kind == "end":
        _end(run, "ENDED", d.reason)
        return None, False
    if d.kind == "keep":
        if provisional and d.match is not None:
            run.state["provisional"] = {"key": key, "started": False}
        return run, False
    if d.kind == "switch":
        _end(run, "ENDED", d.reason)
        fx.notice, fx.context, fx.ended = fx.context or "", None, ""
    if d.match is None:
        return None, False
    new = _activate(d.match, obs, fx)
    if new is not None:
        new.state["message_monologue"] = key
        if provisional:
            new.state["provisional"] = {"key": key, "started": True}
    return new, False


def _confirm(plans: Iterable[Plan], run: Run, obs: Observation, fx: Effects, started: bool) -> Run | None:
    """The selector, knowing the domain and this pass's org filter, confirms what the companion decided from
    the trigger phrases alone, or undoes it: a run started for this message is withdrawn, a kept one ends."""
    run.state["provisional"] = None
    full = obs.match
    if full is not None and full.plan.id == run.plan.id:
        return run
    if started:
        if full is not None:
            why = f"plan '{full.plan.name}' fits it better once its domain is known"
        elif not allowed(run.plan.id, obs.allowed_plans):
            why = "the active org role does not allow this plan"
        else:
            why = "its domain does not confirm this plan"
        _withdraw(run, why)
    elif full is not None:
        _end(run, "ENDED", f"the new message matches plan '{full.plan.name}'")
    elif not run.node.kind.asks and not answers_question(obs) and domain_leaves_plan(run.plan, obs.domain):
        _end(run, "ENDED", f"the new message is about '{obs.domain}', which this plan does not cover")
    else:
        return run
    if full is None:
        return None
    fx.notice, fx.context, fx.ended = fx.context or "", None, ""
    new = _activate(full, obs, fx)
    if new is not None:
        new.state["message_monologue"] = obs.message_id
    return new


def _withdraw(run: Run, reason: str) -> None:
    emit(run.state, "plan_withdrawn", node=run.state["current_node"], reason=reason)
    run.state["status"] = "withdrawn"
    run.fx.log("info", f"[HTN] Workflow '{run.plan.name}' withdrawn: {reason}")
    _finish(run, "withdrawn", run.fx.texts.withdrawn_notice(run.state, reason))


def _asked_for(plan: Plan) -> Match:
    """The match of a plan the user started by name: no phrase, no meaning score."""
    return Match(plan=plan, score=0, hits=(), domain_ok=True)


def _activate(match: Match, obs: Observation, fx: Effects, said: str = "", composed: str = "") -> Run | None:
    """A new run of ``match.plan``: matched by its trigger phrases or by meaning, asked for by the user by name
    (``said``: the user's words), or proposed in the chat and approved (``composed``: by whom, in words)."""
    plan, hits = match.plan, match.hits
    state = new_state(plan, obs.monologue, obs.pass_key, obs.global_turn)
    state["reply_seen"] = [obs.pass_key, obs.reply_mark, ""]  # results from before it are no evidence for it
    run = Run(plan=plan, state=state, fx=fx, now=obs.now, concurrent=obs.concurrent, serial_reason=obs.serial_reason)
    why = {} if match.meaning is None else {"meaning": {"score": round(match.meaning.total, 3),
                                                       "example": match.meaning.example}}
    by = ({"by": "composed", "said": composed} if composed else {"by": "user", "said": said} if said
          else {"stage": match.stage, "cost_ms": match.cost_ms})
    emit(state, "plan_activated", node=plan.start, plan=plan.id, version=plan.version, triggers=list(hits), **why,
         **by)
    push_path(state, plan.start)
    emit(state, "node_entered", node=plan.start)
    kind = "Graph" if plan.mode == "graph" else "Linear"
    reason = f"proposed in the chat, {composed}" if composed else f"the user said {said!r}" if said else match.why()
    fx.log("info", f"[HTN] {kind} plan activated: {plan.name} ({fx.texts.plural(plan.total_steps, 'step')}; {reason})")
    if plan.mode == "graph":
        _settle(run)  # may end at once: an exit or escalation right after start
    return _alive(run)
