"""Workflows proposed in an Agent-Zero chat: the ``graph_workflow`` tool the agent calls, the person's answer to a
proposal (typed, or pressed in the component), a plan pasted in the chat, and "save this workflow".

A proposal waits in the chat's data (``PENDING_KEY``: Agent-Zero saves it with the chat), as text; the agent is
not held while it waits.  What was approved (or started by the agent) is handed to the next hook call on the
agent (``OFFER_ATTR``) and taken by its step (``engine.Offer``), so a run starts, or changes, only inside a pass
as every run does.  The tool's own result is never a step's evidence (``reading`` sets it aside).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import branches, cards, keeping, lines, pressed, reading
from ...boundary import settings
from ...core import control, engine
from ...core.message import allowed
from ...core.state import DATA_KEY
from ...session import composing
from ...session.runtime import Runtime
from ...texts import render

PENDING_KEY = "graph_engine_proposal"  # agent data (saved with the chat): the proposal waiting for the person
OFFER_ATTR = "_graph_engine_offer"  # on the agent: an approved proposal (or a plan the agent started) for the next pass
TOOL = reading.COMPOSE_TOOL
METHODS = ("propose", "amend", "start", "status", "save")


def pending(agent: Any) -> dict | None:
    value = keeping.data_of(agent, PENDING_KEY)
    return value if isinstance(value, dict) else None


def _keep(agent: Any, value: dict | None) -> None:
    old = pending(agent)
    if value is not None and old is not None and old.get("id") != value.get("id"):
        _card(agent, old, None, "replaced")  # one proposal waits per chat: the newer one
    try:
        agent.set_data(PENDING_KEY, value)
    except Exception:  # noqa: BLE001
        pass


def _card(agent: Any, waiting: dict, plan: Any, status: str, answer: dict | None = None) -> None:
    """The proposal's card in the chat's log (made, or updated in place)."""
    if plan is None:
        from ...authoring import compose
        plan = compose.check(waiting["source"].get("text", ""), waiting["source"].get("format", "")).plan
    if plan is not None:
        cards.show_proposal(agent, str(waiting.get("id", "")), plan, status, str(waiting.get("by", "agent")),
                            str(waiting["source"].get("text", "")), answer)


def wanted(agent: Any, words: str) -> bool:
    """This pass has something to do here although no run goes on and no plan's phrase is in the words: an offer
    waits, or the words answer a proposal, paste a plan or ask to save the last one."""
    if agent.__dict__.get(OFFER_ATTR) is not None:
        return True
    if not words:
        return False
    return pending(agent) is not None or composing.is_plan_text(words) or composing.save_asked(words)[0]


def read(rt: Runtime, agent: Any, obs: engine.Observation, state: dict | None) -> str:
    """Before the step: the offer waiting on the agent goes into ``obs.offer``; new words that answer a proposal,
    paste a plan or ask to save one are handled here (and decided: no hook reads them as a request).  Returns what
    the call this hook reaches is told ("" for nothing)."""
    offer = agent.__dict__.pop(OFFER_ATTR, None)
    if isinstance(offer, engine.Offer):
        obs.offer = offer
        return ""
    if obs.output is not None and obs.output.tool == "response" and pending(agent) is not None:
        obs.output = None  # the agent's answer while a proposal waits asks the person about it: no step's result
    words = obs.user_message.strip()
    if not words or obs.control_seen == obs.message_id:
        return ""
    told = _answered(rt, agent, obs, words)
    if told is None and composing.is_plan_text(words):
        told = _pasted(rt, agent, words, state)
    if told is None:
        asked, name = composing.save_asked(words)
        told = _save(rt, agent, state, name) if asked else None
    if told is None:
        return ""
    obs.control_seen = obs.message_id  # decided: neither hook of this pass matches these words to a plan
    setattr(agent, reading.CONTROL_ATTR, obs.message_id)
    return told


def _answered(rt: Runtime, agent: Any, obs: engine.Observation, words: str) -> str | None:
    waiting = pending(agent)
    verdict = composing.answer_of(words) if waiting is not None else ""
    if not verdict:
        return None
    _keep(agent, None)
    name = str(waiting.get("name", "the workflow"))
    if verdict == "reject":
        _card(agent, waiting, None, "rejected")
        lines.log(agent, "info", f"[HTN] The proposed workflow '{name}' was rejected by the person; it does not run")
        return render.control_line(f"The person rejected the proposed workflow '{name}'; it does not run. Ask what "
                                   "they want instead, or go on without a workflow.")
    offer, why = composing.offer_of(rt, waiting, composing.APPROVED_BY_WORDS)
    if offer is None:
        lines.log(agent, "warning", f"[HTN] The proposed workflow '{name}' was approved but cannot start: {why}; "
                                    "propose it again")
        return render.control_line(f"The proposed workflow '{name}' cannot start: {why}. Propose it again.")
    obs.offer = offer
    _card(agent, waiting, offer.plan, "approved")
    return ""


def _pasted(rt: Runtime, agent: Any, words: str, state: dict | None) -> str:
    answer, waiting, proposal = composing.propose(rt, words, request="", running=state, by="person")
    if waiting is None:
        lines.log(agent, "info", f"[HTN] The plan pasted in the chat was not accepted "
                                 f"({len(proposal.problems)} problem{'' if len(proposal.problems) == 1 else 's'})")
        return render.control_line("The person pasted a workflow that does not pass its checks; tell them what to "
                                   "fix:\n" + answer.split("\n", 1)[-1])
    _keep(agent, waiting)
    _card(agent, waiting, proposal.plan, "proposed")
    lines.log(agent, "info", f"[HTN] Workflow '{waiting['name']}' pasted in the chat ({waiting['steps']} steps): it "
                             "waits for approval (Approve, or \"go ahead\"; \"no\" rejects it)")
    return render.control_line(f"The person pasted the workflow '{waiting['name']}'; it passed its checks. Ask them "
                               "to approve it (the Approve button, or \"go ahead\") before any of its steps.")


def _last_run(agent: Any, state: dict | None) -> dict | None:
    for run in (state, getattr(agent, "_htn_last_run", None), keeping.data_of(agent, DATA_KEY)):
        if isinstance(run, dict) and isinstance(run.get("source"), dict):
            return run
    return None


def _save(rt: Runtime, agent: Any, state: dict | None, name: str) -> str:
    run = _last_run(agent, state)
    if run is None:
        return render.control_line("There is no proposed workflow in this chat to save; only a workflow written in "
                                   "the chat is saved this way (the library's plans are saved already).")
    if run.get("status") != "completed":
        return render.control_line(f"The workflow '{run.get('plan_name')}' is {run.get('status', 'active')}; it is "
                                   "saved once a run of it has completed.")
    plan = rt.lookup(run.get("plan_id", ""), run.get("plan_version", "")) or rt.adopt_source(run)
    if plan is None:
        return render.control_line("The workflow's text no longer passes its checks, so it was not saved.")
    source = run["source"]
    saved, said = composing.save(rt, source, str(source.get("request", "")), name)
    what = f"The workflow '{plan.name}' was {said}" if saved else f"The workflow '{plan.name}' was not saved: {said}"
    lines.log(agent, "info" if saved else "warning", f"[HTN] {what}")
    return render.control_line(f"{what}. Tell the person.")


async def tool_call(agent: Any, method: str, args: Any, runtime_of: Any) -> str:
    """The ``graph_workflow`` tool's work: what the agent reads as its result.  Never raises."""
    try:
        cfg = settings.current(agent)
        rt = runtime_of(cfg)
        with rt.warming:
            rt.library.refresh()
        args = args if isinstance(args, dict) else {}
        method = (method or str(args.get("method", "")) or "status").strip().lower()
        if method not in METHODS:
            return f"Unknown method '{method[:40]}' of {TOOL}: use {TOOL}:{', '.join(METHODS)}."
        state = _live(agent)
        if branches.branch_of(agent) is not None:  # a subordinate running one branch of the chat's workflow
            return "You run one branch of a workflow: go on with its current step; the workflow is not changed here."
        if method in ("propose", "amend"):
            return _propose(rt, agent, cfg, args, state, method == "amend")
        if method == "start":
            return _start(rt, agent, str(args.get("name", "") or args.get("plan", "")), state)
        if method == "save":
            return _save(rt, agent, state, str(args.get("name", ""))).split("] ", 1)[-1]
        return _status(rt, agent, state)
    except Exception as exc:  # noqa: BLE001 - the agent's loop goes on; the tool says what failed
        lines.log(agent, "error", f"[HTN] The {TOOL} tool failed ({type(exc).__name__}: {exc}); nothing changed. "
                                  "Please report it")
        return f"The workflow tool failed ({type(exc).__name__}); nothing changed. Go on without it."


def _live(agent: Any) -> dict | None:
    state = getattr(agent, keeping.STATE_ATTR, None)
    return state if isinstance(state, dict) and state.get("status", "active") == "active" else None


def _request(agent: Any, args: dict) -> str:
    given = args.get("request")
    if isinstance(given, str) and given.strip():
        return given
    try:
        message = getattr(agent, "last_user_message", None)
        content = getattr(message, "content", None)
        if isinstance(content, dict):
            content = content.get("user_message", "")
        return content if isinstance(content, str) else ""
    except Exception:  # noqa: BLE001
        return ""


def _propose(rt: Runtime, agent: Any, cfg: settings.Settings, args: dict, state: dict | None, amend: bool) -> str:
    text = args.get("plan", args.get("workflow"))
    answer, waiting, proposal = composing.propose(rt, text, str(args.get("format", "") or ""), _request(agent, args),
                                                  state, amend, "agent")
    if waiting is None:
        count = len(proposal.problems)
        lines.log(agent, "info", f"[HTN] A proposed workflow was not accepted ({count or 1} problem"
                                 f"{'' if count == 1 else 's'}); the agent was told what to fix")
        return answer
    if cfg.run_proposed:
        offer, why = composing.offer_of(rt, waiting, composing.RUN_WITHOUT_ASKING)
        if offer is None:
            return f"Not started: {why}."
        agent.__dict__[OFFER_ATTR] = offer
        lines.log(agent, "info", f"[HTN] Workflow '{waiting['name']}' proposed by the agent: it runs without asking "
                                 "(the run_proposed setting is on)")
        what = "The change" if amend else f"The workflow '{waiting['name']}'"
        return f"{what} passed its checks and takes effect now: the workflow's next step follows."
    _keep(agent, waiting)
    _card(agent, waiting, proposal.plan, "proposed")
    if state is not None and not amend:  # approved, it ends the run that goes on
        proposal = replace(proposal, notes=(f"Approved, it replaces the running workflow "
                                            f"'{state.get('plan_name', '')}', which ends.", *proposal.notes))
    what = "A change to the running workflow" if amend else f"Workflow '{waiting['name']}'"
    lines.log(agent, "info", f"[HTN] {what} proposed by the agent ({waiting['steps']} steps): it waits for the "
                             "person's approval (Approve, or \"go ahead\"; \"no\" rejects it)")
    return composing.waiting_text(waiting, proposal.notes)


def _start(rt: Runtime, agent: Any, name: str, state: dict | None) -> str:
    library = rt.library.current
    if library is None:
        return "No plan library is loaded; propose a workflow instead."
    listing = [(pid, pname) for pid, pname, _ in library.listing()]
    ids = control.find_plans(listing, control.words(name)) if name.strip() else []
    if len(ids) != 1:
        names = "; ".join(f"{pid} ({pname})" for pid, pname in listing[:40])
        return (f"No single plan is named '{name[:80]}'. The library's plans: {names}. Call {TOOL}:start with one "
                f"of these ids, or {TOOL}:propose a workflow of your own.")
    plan = library.get(ids[0])
    if plan is None:
        return f"The plan '{ids[0]}' has errors and is disabled; propose a workflow instead."
    if state is not None and state.get("plan_id") == plan.id:
        return f"'{plan.name}' is already running; go on with its current step."
    permitted = reading.allowed_plans(agent)
    if not allowed(plan.id, permitted):
        return (f"Not started: the active org role does not allow '{plan.name}' (allowed: "
                f"{', '.join(permitted or ()) or 'none'}). Tell the person.")
    agent.__dict__[OFFER_ATTR] = engine.Offer(plan=plan, source={}, by="started by the agent")
    lines.log(agent, "info", f"[HTN] The agent started the plan '{plan.name}'")
    return f"'{plan.name}' starts now: its first step follows."


def _status(rt: Runtime, agent: Any, state: dict | None) -> str:
    waiting = pending(agent)
    parts = []
    if state is not None:
        plan = rt.lookup(state.get("plan_id", ""), state.get("plan_version", ""))
        parts.append(render.status_text(plan, state).split("] ", 1)[-1] if plan is not None else
                     f"Workflow '{state.get('plan_name')}' is running.")
    else:
        parts.append("No workflow is running.")
    if waiting is not None:
        parts.append(f"The proposed workflow '{waiting.get('name')}' waits for the person's approval.")
    return " ".join(parts)


def pressed_proposal(rt: Runtime, agent: Any, p: pressed.Pressed) -> tuple[dict[str, Any], str]:
    """Approve, Edit or Reject pressed on a proposal's card: (the answer for the page, what the agent's next call
    is told, "" for nothing).  Approved, it is the offer the next pass takes (the adapter wakes an idle agent)."""
    waiting = pending(agent)
    if waiting is None or waiting.get("id") != p.run:
        return pressed.answer(p, "refused", "This proposal is no longer waiting for an answer."), ""
    name = str(waiting.get("name", "the workflow"))
    if p.kind == "reject":
        _keep(agent, None)
        _card(agent, waiting, None, "rejected")
        lines.log(agent, "info", f"[HTN] The proposed workflow '{name}' was rejected by the person in the web UI; it "
                                 "does not run")
        return (pressed.answer(p, "applied", "Rejected: it does not run."),
                render.control_line(f"The person rejected the proposed workflow '{name}' in the web UI; it does not "
                                    "run. Ask what they want instead, or go on without a workflow."))
    if p.kind == "approve":
        offer, why = composing.offer_of(rt, waiting, composing.APPROVED_BY_BUTTON)
        _keep(agent, None)
        if offer is None:
            _card(agent, waiting, None, "rejected")
            return pressed.answer(p, "refused", f"It cannot start: {why}."), ""
        agent.__dict__[OFFER_ATTR] = offer
        _card(agent, waiting, offer.plan, "approved")
        lines.log(agent, "info", f"[HTN] The proposed workflow '{name}' was approved by the person in the web UI")
        return pressed.answer(p, "applied", "Approved: it starts at the agent's next step."), ""
    running = _live(agent)
    answer, changed, proposal = composing.propose(rt, p.text, "", str(waiting.get("request", "")), running,
                                                  bool(waiting.get("amend")), str(waiting.get("by", "agent")))
    if changed is None:  # the person reads the problems (the first line is worded for the agent)
        problems = answer.split("\n", 1)[-1] if proposal.problems else answer
        return pressed.answer(p, "refused", f"the edited text does not pass its checks:\n{problems}"), ""
    changed["id"] = waiting["id"]
    _keep(agent, changed)
    _card(agent, changed, proposal.plan, "proposed")
    lines.log(agent, "info", f"[HTN] The proposed workflow '{changed['name']}' was edited by the person in the web "
                             "UI; it waits for approval")
    return (pressed.answer(p, "applied", f"Changed ({changed['steps']} steps); approve it to run it."),
            render.control_line(f"The person edited the proposed workflow; it is now '{changed['name']}' "
                                f"({changed['steps']} steps) and waits for their approval."))


def save_pressed(rt: Runtime, agent: Any, p: pressed.Pressed) -> tuple[dict[str, Any], str]:
    """"Save as a plan" pressed on the card of a completed run of a workflow written in the chat: (the answer for
    the page, what the agent's next call is told).  The run's card keeps the answer (and drops the button)."""
    run = _last_run(agent, None)
    if run is None or run.get("run_id") != p.run:
        return pressed.answer(p, "refused", "Only the chat's last workflow written in the chat can be saved."), ""
    told = _save(rt, agent, None, "")
    said = told.split("] ", 1)[-1].removesuffix(" Tell the person.")
    ok = " was saved as " in said
    before = run.get("pressed") or {}
    if not (before.get("control") == "save" and before.get("status") == "applied"):  # saved once: it stays so
        run["pressed"] = {"id": p.id, "control": "save", "status": "applied" if ok else "refused", "text": said}
        cards.show(rt, agent, run)
    return pressed.answer(p, "applied" if ok else "refused", said, p.run), told
