"""The step function: (plans, state, observation) -> (state', effects).

Rules of this module
--------------------
* Everything that changes a run's state lives here.  No I/O: no Agent-Zero, no
  files, no clock, no logging.  What must happen outside (log a line, inject
  text, set a PACE level, write a report) comes back as ``Effects``.
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
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from . import control
from .message import CallOutput, Match, allowed, domain_leaves_plan
from .kinds import BRANCH_OUTCOMES, ENDINGS, FAN_IN_POLICIES, STEP_OUTCOMES
from .model import Edge, Node, Plan
from .texts_port import Texts
from .state import (MAX_CONSUMED, MAX_CONTEXT_KEYS, MAX_GATE_JUMPS, branch_outcome, branch_state, emit, new_state,
                    push_path, record_shown, remember, shown_node)
from .routing import STATUS_OF, accelerator, choice_key, normalise_label, reachable, select_edge
from .verify import Evidence, Verdict, capture, check, did_not_run, judged_text, only_resets

PROMPTS_AFTER = "prompts_after"
BEFORE_MAIN = "before_main"
MAX_SETTLE_STEPS = 64
MAX_REPLY_HASHED = 100_000


@dataclass(slots=True)
class Observation:
    """What the adapter read from one Agent-Zero hook call."""

    hook: str
    monologue: str
    iteration: int
    user_message: str = ""  # the user's new words at this pass: a message (iteration 0) or an intervention
    message_key: str = ""  # names that message, so it is decided once ("" = the monologue's own message)
    domain_known: bool = False  # the belief-state tracker has classified this message (before_main, iteration 0)
    domain: str = ""
    allowed_plans: Sequence[str] | None = None
    output: CallOutput | None = None  # what the previous LLM call produced
    global_turn: int = 0
    pace_level: str = ""  # the org kernel's PACE level as read at the start of this pass
    control_seen: str = ""  # the message (``message_id``) an earlier hook call of this pass took as a control
    now: float = 0.0  # seconds since the epoch, for human gates with a timeout (0: the time is not known)
    matched: bool = False  # the host matched the new message for this hook call (``match``, None: no plan)
    match: Match | None = None
    asked: bool = False  # the agent's reply before this message asked the user a question (control.parse)
    continuation: bool = False  # the new words only say "go on" (``matching.words.is_continuation``)
    names_run_plan: bool = False  # they name the running plan by one of its trigger phrases
    files: dict[str, str] = field(default_factory=dict)  # what the host saw of the paths the current check names
    reply_mark: str | None = None  # names the model's newest reply (a new reply, a new mark); None: not known
    concurrent: bool = False  # the host runs a parallel node's branches at once, each in a subordinate agent
    serial_reason: str = ""  # why it does not (said once, when a run meets a parallel node)

    @property
    def pass_key(self) -> str:
        return f"{self.monologue}:{self.iteration}"

    @property
    def message_id(self) -> str:
        return self.message_key or self.monologue

    @property
    def next_pass_key(self) -> str:
        return f"{self.monologue}:{self.iteration + 1}"


@dataclass(slots=True)
class Effects:
    logs: list[tuple[str, str]] = field(default_factory=list)  # (level, text)
    context: str | None = None
    pace_level: str | None = None
    report: dict[str, Any] | None = None
    ended: str = ""  # "completed" | "escalated" | "expired" | "aborted" | "ended" | "withdrawn" | "stopped" | ""
    notice: str = ""  # why an earlier run ended, shown above a newly started run's context
    final_state: dict[str, Any] | None = None  # the state of a run that ended in this call
    control: str = ""  # the user's control decided in this call (control.KINDS), "" for none
    refused: str = ""  # a pressed control that changed nothing: why (press)
    texts: Texts = None  # type: ignore[assignment]  # given to ``step`` (the host's ``texts.render``): this module
    # words nothing itself

    def log(self, level: str, text: str) -> None:
        self.logs.append((level, text))


PlanLookup = Callable[[str, str], Plan | None]  # (plan_id, version) -> plan


@dataclass(slots=True)
class Run:
    """A state together with the plan version it runs, for the duration of one step."""

    plan: Plan
    state: dict[str, Any]
    fx: Effects
    now: float = 0.0  # the observation's time (human gates with a timeout)
    concurrent: bool = False  # the observation's: a parallel node forks into subordinate agents
    serial_reason: str = ""  # the observation's: why not

    @property
    def node(self) -> Node:
        return self.plan.nodes[self.state["current_node"]]


def step(plans: Iterable[Plan], lookup: PlanLookup, state: dict[str, Any] | None,
         obs: Observation, texts: Texts) -> tuple[dict[str, Any] | None, Effects]:
    """Advance one hook call.  ``plans``: the current library; ``lookup`` finds a run's plan version; ``texts``:
    what words the texts the model and the person read (the host's ``render``: this module imports none)."""
    fx = Effects(texts=texts)
    run = _resume(lookup, state, fx)
    if run is not None:
        run.now, run.concurrent, run.serial_reason = obs.now, obs.concurrent, obs.serial_reason
        _judge(run, obs, _tick(run, obs))
        _join_when_done(run)
        _gate_timeout(run, obs)
        run = _alive(run)
    paused = False
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


PRESSED = "pressed"  # the hook name of a control pressed between the agent's passes


def press(plans: Iterable[Plan], lookup: PlanLookup, state: dict[str, Any], ctl: control.Control,
          obs: Observation, texts: Texts, request: str = "") -> tuple[dict[str, Any] | None, Effects]:
    """A control the person pressed in the web UI, applied at once: between the agent's passes (``obs.hook`` is
    PRESSED: the model is told at its next call; ``obs`` names the run's last pass), or in a hook call that waited
    (for the utility model, or for branches): the call it reaches is shown the result.  ``fx.control`` names the
    control when it changed the run; ``fx.refused`` says why it did not (the model is not told of a refusal: the
    person sees it where they pressed).  A result in flight when it came is judged against the step its call was
    shown, or set aside (``_judge``), never against a step the control moved to.  The answer the person reads
    (``request`` names their press) is kept in the run's ``pressed``."""
    fx = Effects(texts=texts)
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


def _finish(run: Run, how: str, context: str) -> None:
    run.fx.ended = how
    run.fx.context = context
    run.fx.final_state = run.state


def _alive(run: Run) -> Run | None:
    return None if run.fx.ended else run


# ── evidence ────────────────────────────────────────────────────────────────


def _judge(run: Run, obs: Observation, key: str) -> None:
    out, s = obs.output, run.state
    if out is None or not key or key in s.get("consumed", []):
        return
    remember(s, "consumed", key, MAX_CONSUMED)
    node = run.node
    shown = shown_node(s, key)
    if shown != node.id or not node.kind.judged:  # that call was not shown this node: not evidence
        was = run.plan.nodes.get(shown) if shown else None
        if was is not None and was.kind.judged:  # it was shown a step the run has left since (a control moved it)
            emit(s, "evidence_ignored", node=shown, tool=out.tool,
                 reason=f"issued for '{shown}'; the run has moved to '{node.id}' since")
        return
    if out.not_found or (node.tool and out.tool != node.tool):
        emit(s, "evidence_ignored", node=node.id, tool=out.tool,
             reason="unknown tool" if out.not_found else f"step expects tool {node.tool}")
        return
    if did_not_run(out.text):  # no verdict on a command that never ran: the step is shown again, and why
        emit(s, "evidence_ignored", node=node.id, tool=out.tool,
             reason="the terminal was still running an earlier command, so this call's command did not run")
        s["notice"], s["notice_turn"] = run.fx.texts.terminal_busy(), s["turn"]
        return
    if out.tool == "code_execution_tool" and only_resets(out.reply):
        emit(s, "evidence_ignored", node=node.id, tool=out.tool, reason="the call only reset the terminal")
        return
    evidence = Evidence(tool=out.tool, text=out.text, reply=out.reply, truncated=out.truncated, files=obs.files)
    text = judged_text(evidence)  # cleaned once: the check, the capture and the hash read the same text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass"))  # the hash of text + NUL + reply
    digest.update(b"\0" + out.reply[:MAX_REPLY_HASHED].encode("utf-8", "surrogatepass"))
    sha = digest.hexdigest()
    if _judged_already(s, obs, key, sha):
        return
    verdict = check(node.verify, evidence, text)
    if out.interrupted and not verdict.ok:  # the person's message may have cut the command short: no failure
        emit(s, "evidence_ignored", node=node.id, tool=out.tool,
             reason=f"a message came while the command ran, which may have cut it short ({verdict.reason}); "
                    "the step is shown again, its attempt unspent")
        return
    if verdict.too_slow:
        run.fx.log("warning", f"[HTN] Plan '{run.plan.id}': the check of step '{node.name}' took too long on a "
                              f"{len(text):,}-character output and counts as failed; simplify its pattern in the "
                              "plan library (graph-engine validate names the slow ones)")
    s["judged"] = [key, sha]
    if run.plan.mode == "linear":
        _linear_verdict(run, node, verdict, sha)
    else:
        _graph_verdict(run, node, verdict, sha, capture(node.verify, evidence, text))


def _judged_already(s: dict[str, Any], obs: Observation, key: str, digest: str) -> bool:
    """At a monologue's first pass the newest result in history is attributed to the previous monologue's
    last call.  When that call never returned (Agent-Zero stopped during it: a restart, then the Nudge), the
    newest result is still the one an earlier call produced and this run judged: not evidence again."""
    judged = s.get("judged")
    if obs.iteration != 0 or not isinstance(judged, list) or len(judged) != 2:
        return False
    if judged[1] != digest or judged[0] == key:
        return False
    emit(s, "evidence_ignored", node=s["current_node"], tool=obs.output.tool if obs.output else "",
         reason=f"the result of call {judged[0]}, already judged; call {key} returned nothing")
    return True


# ── graph traversal ─────────────────────────────────────────────────────────


MAX_CONTEXT_VALUE = 200


def _graph_verdict(run: Run, node: Node, verdict: Verdict, digest: str, captured: dict[str, str]) -> None:
    apply_outcome(run, node, "success" if verdict.ok else "fail", verdict.reason, digest=digest, captured=captured)


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
    _update_context(s, captured)
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


def _update_context(s: dict[str, Any], captured: dict[str, str]) -> None:
    if not captured:
        return
    ctx = s.setdefault("context", {})
    for key, value in captured.items():
        if key in ctx or len(ctx) < MAX_CONTEXT_KEYS:
            ctx[key] = value[:MAX_CONTEXT_VALUE]


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
    """A parallel node: fork when the host runs branches at once, else the branches one after another."""
    if _forks(run, node):
        _fork(run, node)
        return False
    return _move(run, node, _start_branches(run, node))


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


# ── human gates ─────────────────────────────────────────────────────────────


def human_options(plan: Plan, node: Node) -> list[Edge]:
    return list(plan.out_edges.get(node.id, ()))


def match_answer(plan: Plan, node: Node, answer: str) -> Edge | None:
    """The option an answer names: its accelerator key, its label, or its target id (any letter case)."""
    text = " ".join(answer.strip().lower().split()).rstrip(".!")
    if not text:
        return None
    said = {text, normalise_label(text)}  # "A", "approve" or the option as written: "[A] Approve"
    for edge in human_options(plan, node):
        key = accelerator(edge.label)
        if said & {k for k in (key, normalise_label(edge.label), edge.dst.lower()) if k}:
            return edge
    return None


def answer_human(run: Run, answer: str) -> None:
    s, node = run.state, run.node
    entry = s["visited"].setdefault(node.id, {"outcome": "pending", "attempts": 0, "failures": 0})
    entry["attempts"] += 1
    edge = match_answer(run.plan, node, answer)
    how = "answer"
    if edge is None:
        entry["failures"] += 1
        if entry["failures"] < 2:
            s["route_note"] = f"The answer {answer[:80]!r} matches no option; ask again, naming the options."
            emit(s, "human_reasked", node=node.id, answer=answer[:200])
            return
        edge = match_answer(run.plan, node, node.default_choice) if node.default_choice else None
        how = "default choice"
        if edge is None:
            emit(s, "human_unanswered", node=node.id, answer=answer[:200])
            _end(run, "ENDED", f"the answers to '{node.name}' matched none of its options and it has no default "
                               "choice")
            return
    take_option(run, node, edge, answer, how)


def take_option(run: Run, node: Node, edge: Edge, answer: str, how: str) -> None:
    """A human gate's option is taken (``how``: answer, default choice, timeout default, skipped by the user)."""
    s = run.state
    s["visited"].setdefault(node.id, {"outcome": "pending", "attempts": 0, "failures": 0})["outcome"] = "success"
    s["gate"] = None
    emit(s, "human_answered", node=node.id, answer=answer[:200], choice=edge.label or edge.dst, by=how)
    _update_context(s, {"human.gate.selected": choice_key(edge.label, edge.dst),
                        "human.gate.label": edge.label or edge.dst})
    s["outcome"] = {"status": "success", "preferred_label": edge.label}
    s["last_outcome"] = "success"
    _follow(run, edge)
    _settle(run)


# ── parallel branches, one after another ────────────────────────────────────
# Where the host cannot run branches at once (or the parallel node says ``sequential``), the run's own agent
# runs the branches (its outgoing edges, in the order they are listed) one after another.  A branch ends when
# the run reaches a fan-in node; the fan-in then starts the next branch, and after the last one routes on
# "success" when its policy holds (fan_in_passes: a branch failed when its last check did), else on "fail".
# A branch that reaches an exit or an escalation ends the run there.


def _start_branches(run: Run, node: Node) -> Edge | None:
    s = run.state
    branches = [e.dst for e in run.plan.out_edges.get(node.id, ())]
    if not branches:
        return None
    if run.serial_reason and not node.sequential and not s.get("branch") and node.id in run.plan.fan_in_of:
        run.fx.log("info", f"[HTN] Workflow '{run.plan.name}': the branches of '{node.name}' run one after another "
                           f"in this chat ({run.serial_reason})")
    branches = list(dict.fromkeys(branches))
    s.setdefault("parallel", []).append({"node": node.id, "pending": branches[1:], "failed": []})
    emit(s, "parallel_started", node=node.id, branches=branches)
    return Edge(src=node.id, dst=branches[0], condition="branch")


def _next_branch(run: Run, node: Node) -> Edge | None:
    s = run.state
    frames = s.get("parallel") or []
    if not frames:  # a fan-in reached without a parallel node: pass straight on
        edge, _, _ = select_edge(run.plan, node.id, {"status": "success"}, s.get("context", {}), "decision")
        return edge
    frame = frames[-1]
    branches = list(dict.fromkeys(e.dst for e in run.plan.out_edges.get(frame["node"], ())))
    at = len(branches) - len(frame["pending"]) - 1  # the branch that just reached the fan-in
    if s.get("last_outcome") in ("retry", "exhausted") and 0 <= at < len(branches):
        frame["failed"].append(branches[at])
    if frame["pending"]:
        nxt = frame["pending"].pop(0)
        emit(s, "parallel_branch", node=frame["node"], branch=nxt)
        return Edge(src=node.id, dst=nxt, condition="branch")
    frames.pop()
    outcomes = {b: "fail" if b in frame["failed"] else "success" for b in branches}
    passed = fan_in_passes(node, outcomes)
    status = "success" if passed else "fail"
    emit(s, "parallel_joined", node=node.id, failed=frame["failed"], policy=node.fan_in_policy, passed=passed)
    s["last_outcome"] = "success" if passed else "exhausted"
    edge, _, _ = select_edge(run.plan, node.id, {"status": status}, s.get("context", {}), "decision")
    return edge



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


def _forks(run: Run, node: Node) -> bool:
    return (run.concurrent and not node.sequential and not run.state.get("branch")
            and node.id in run.plan.fan_in_of)


def _fork(run: Run, node: Node) -> None:
    s, plan = run.state, run.plan
    fan_in = plan.fan_in_of[node.id]
    branches = []
    for first in dict.fromkeys(e.dst for e in plan.out_edges.get(node.id, ())):
        edge = next(e for e in plan.out_edges[node.id] if e.dst == first)
        emit(s, "edge_followed", **{"from": node.id, "to": first, "condition": edge.condition, "branch": first})
        sub = Run(plan=plan, state=branch_state(plan, s, node.id, fan_in, first), fx=Effects(texts=run.fx.texts))
        _settle(sub)  # a branch may begin with a decision, or meet the fan-in at once
        run.fx.logs.extend(sub.fx.logs)
        branches.append({"id": first, "run": sub.state["run_id"], "status": branch_outcome(sub.state) or "pending",
                         "state": sub.state, "answer": "", "reason": _end_reason(sub.state), "seen": 0})
    s["fork"] = {"node": node.id, "fan_in": fan_in, "max_parallel": node.max_parallel, "branches": branches}
    emit(s, "parallel_started", node=node.id, branches=[b["id"] for b in branches], concurrent=True,
         max_parallel=node.max_parallel)
    s["turns_since_transition"], s["route_note"] = 0, ""


def _branch_end(run: Run, outcome: str, reason: str) -> None:
    """A branch's own run ends: at its fan-in, an exit, an escalation, or a limit.  Its agent is told to answer."""
    s = run.state
    name = run.plan.nodes[s["branch"]["id"]].name
    emit(s, "branch_finished", node=s["current_node"], outcome=outcome, reason=reason)
    s["status"] = {"success": "completed", "escalated": "escalated", "expired": "expired"}.get(outcome, "ended")
    run.fx.log("info" if outcome == "success" else "warning",
               f"[HTN] Branch '{name}' of workflow '{run.plan.name}' finished: {outcome}"
               + (f" ({reason})" if reason else ""))
    _finish(run, s["status"], run.fx.texts.branch_done_notice(run.plan, s, outcome, reason))


def _end_reason(sub: dict[str, Any]) -> str:
    end = next((e for e in reversed(sub.get("events") or ()) if e.get("type") in ENDINGS), None)
    return str(end.get("reason", "")) if end else ""


def _branch_of(state: dict[str, Any], branch_id: str) -> dict[str, Any] | None:
    fork = state.get("fork") if isinstance(state, dict) else None
    return next((b for b in fork["branches"] if b["id"] == branch_id), None) if fork else None


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
    return True


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
    stopped = []
    for b in (state.get("fork") or {}).get("branches", ()):
        if b["status"] not in BRANCH_OUTCOMES:
            b["status"], b["reason"] = "stopped", "stopped by the user"
            stopped.append(b["id"])
    return stopped


def _join_when_done(run: Run) -> None:
    """The fork's branches all have an outcome: the fan-in routes.  A fork the host can no longer run at once (the
    setting turned off, or a host without subordinates) runs its branches one after another from the start."""
    fork = run.state.get("fork")
    if not fork or run.state.get("status", "active") != "active":
        return
    if not run.concurrent:
        run.state["fork"] = None
        edge = _start_branches(run, run.plan.nodes[fork["node"]])
        if edge is not None:
            _follow(run, edge)
            _settle(run)
        return
    if all(b["status"] in BRANCH_OUTCOMES for b in fork["branches"]):
        _join(run, fork)


def _join(run: Run, fork: dict[str, Any]) -> None:
    s, plan = run.state, run.plan
    fan_in = plan.nodes[fork["fan_in"]]
    outcomes = {b["id"]: b["status"] for b in fork["branches"]}
    passed = fan_in_passes(fan_in, outcomes)
    for b in fork["branches"]:
        _absorb(run, b.get("state"))
    s["fork"] = None
    emit(s, "parallel_joined", node=fan_in.id, failed=[i for i, o in outcomes.items() if o != "success"],
         outcomes=outcomes, policy=fan_in.fan_in_policy, passed=passed)
    _follow(run, Edge(src=fork["node"], dst=fan_in.id, condition="branches"))
    status = "success" if passed else "fail"
    s["outcome"], s["last_outcome"] = {"status": status}, "success" if passed else "exhausted"
    s["last_failure"] = "" if passed else run.fx.texts.fan_in_failure(plan, fan_in, outcomes)
    note = run.fx.texts.fan_in_note(plan, fan_in, fork["branches"], passed)
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
    _update_context(s, sub.get("context") or {})


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
    run.fx.log("info", f"[HTN] Workflow '{run.plan.name}' completed at '{node.name}': "
                       f"{run.fx.texts.progress(s)} in {run.fx.texts.plural(s['turn'], 'turn')}")
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


# ── linear plans: the old selector's rules ──────────────────────────────────


def _linear_verdict(run: Run, node: Node, verdict: Verdict, digest: str) -> None:
    s = run.state
    idx = int(s["current_step"])
    emit(s, "node_verified", node=node.id, outcome="success" if verdict.ok else "fail", reason=verdict.reason,
         evidence_sha256=digest)
    if verdict.ok:
        s["steps_completed"].append(idx)
        s["last_failure"] = ""
        run.fx.log("info", f"[HTN] Step {idx + 1} verified: {node.name}")
        _linear_advance(run, idx)
        return
    s["last_failure"] = verdict.reason
    if node.on_fail == "skip":
        s["steps_failed"].append(idx)
        run.fx.log("warning", f"[HTN] Step {idx + 1} skipped after failed verification: {verdict.reason}")
        _linear_advance(run, idx)
    elif node.on_fail == "abort":
        s["steps_failed"].append(idx)
        emit(s, "plan_aborted", node=node.id, reason=verdict.reason)
        s["status"] = "aborted"
        run.fx.log("warning", f"[HTN] Plan aborted: step '{node.name}' failed verification: {verdict.reason}")
        _finish(run, "aborted", f"[ACTIVE PLAN: {s['plan_name']}]\nPlan aborted: step {idx + 1} ({node.name}) "
                                f"failed verification: {verdict.reason}")
    else:
        run.fx.log("warning", f"[HTN] Step {idx + 1} failed verification ({node.on_fail}): {verdict.reason}")


def _linear_advance(run: Run, idx: int) -> None:
    s = run.state
    s["current_step"] = idx + 1
    s["turns_since_progress"] = 0
    s["completed_nodes"] = len(s["steps_completed"])
    if s["current_step"] >= s["total_steps"]:
        _complete(run, run.plan.nodes["done"])
        return
    edge = Edge(src=f"step_{idx + 1}", dst=f"step_{idx + 2}", condition="on_success")
    _follow(run, edge)


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


def _asked_for(plan: Plan) -> Match:
    """The match of a plan the user started by name: no phrase, no meaning score."""
    return Match(plan=plan, score=0, hits=(), domain_ok=True)


def _activate(match: Match, obs: Observation, fx: Effects, said: str = "") -> Run | None:
    """A new run of ``match.plan``: matched by its trigger phrases or by meaning, or asked for by the user by
    name (``said``: the user's words)."""
    plan, hits = match.plan, match.hits
    state = new_state(plan, obs.monologue, obs.pass_key, obs.global_turn)
    state["reply_seen"] = [obs.pass_key, obs.reply_mark, ""]  # results from before it are no evidence for it
    run = Run(plan=plan, state=state, fx=fx, now=obs.now, concurrent=obs.concurrent, serial_reason=obs.serial_reason)
    why = {} if match.meaning is None else {"meaning": {"score": round(match.meaning.total, 3),
                                                       "example": match.meaning.example}}
    by = {"by": "user", "said": said} if said else {"stage": match.stage, "cost_ms": match.cost_ms}
    emit(state, "plan_activated", node=plan.start, plan=plan.id, version=plan.version, triggers=list(hits), **why,
         **by)
    push_path(state, plan.start)
    emit(state, "node_entered", node=plan.start)
    kind = "Graph" if plan.mode == "graph" else "Linear"
    reason = f"the user said {said!r}" if said else match.why()
    fx.log("info", f"[HTN] {kind} plan activated: {plan.name} ({fx.texts.plural(plan.total_steps, 'step')}; {reason})")
    if plan.mode == "graph":
        _settle(run)  # may end at once: an exit or escalation right after start
    return _alive(run)


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


def _status(run: Run, ctl: control.Control) -> bool:
    _answer(run, run.fx, run.fx.texts.status_text(run.plan, run.state))
    return True


_CONTROLS = {"stop": _stop, "pause": _pause, "resume": _resume_paused, "skip": _skip, "back": _back,
             "retry": _retry, "status": _status}


def _gate_timeout(run: Run, obs: Observation) -> None:
    """A human gate with a timeout that passed without an answer: its default option is taken and recorded as
    such; a gate without one escalates.  (Checked when a pass comes: Agent-Zero runs no pass on its own.)"""
    s, node = run.state, run.node
    gate = s.get("gate")
    if not node.kind.asks or s.get("paused") or not gate or gate.get("node") != node.id:
        return
    turns, seconds = s["turn"] - gate["turn"], obs.now - gate["at"] if obs.now and gate["at"] else 0.0
    if node.timeout_turns and turns >= node.timeout_turns:
        waited = run.fx.texts.plural(turns, "turn")
    elif node.timeout and seconds >= node.timeout:
        waited = run.fx.texts.duration(seconds)
    else:
        return
    edge = match_answer(run.plan, node, node.default_choice) if node.default_choice else None
    if edge is None:
        emit(s, "human_timed_out", node=node.id, waited=waited)
        _escalate(run, node, f"no answer to '{node.name}' within {waited}, and it has no default option")
        return
    emit(s, "human_timed_out", node=node.id, waited=waited, default=edge.label or edge.dst)
    run.fx.log("info", f"[HTN] Workflow '{run.plan.name}': no answer to '{node.name}' within {waited}; its default "
                       f"option '{edge.label or edge.dst}' was taken")
    take_option(run, node, edge, "", "timeout default")
    s["route_note"] = (f"No answer to '{node.name}' came within {waited}: its default option "
                       f"'{edge.label or edge.dst}' was taken.")


def _gate_started(run: Run, obs: Observation) -> None:
    """Start the clock of a human gate the run has just reached (each arrival at it is a new wait)."""
    s, node = run.state, run.node
    if not node.kind.asks or not (node.timeout or node.timeout_turns):
        return
    gate = s.get("gate")
    if not gate or gate.get("node") != node.id or gate.get("path_len") != s["path_len"]:
        s["gate"] = {"node": node.id, "path_len": s["path_len"], "turn": s["turn"], "at": obs.now}


def _listing(plans: Iterable[Plan], allowed_plans: Sequence[str] | None) -> list[tuple[str, str, tuple[str, ...]]]:
    """(id, name, trigger phrases) of the plans the library holds and the org filter allows, in file order."""
    listing = getattr(plans, "listing", None)
    rows = listing() if callable(listing) else [(p.id, p.name, p.strong_triggers + p.triggers) for p in plans]
    return [row for row in rows if allowed(row[0], allowed_plans)]


def _plan_by_id(plans: Iterable[Plan], plan_id: str) -> Plan | None:
    get = getattr(plans, "get", None)
    if callable(get):
        return get(plan_id)
    return next((p for p in plans if p.id == plan_id), None)


SETTLE: dict[str, Callable[[Run, Node], bool]] = {
    "start": _pass_on, "task": _rest, "decision": _decide, "escalate": _reach_escalation, "exit": _reach_exit,
    "checkpoint": _record_checkpoint, "human": _rest, "parallel": _branch_out, "fan_in": _meet,
}
"""What a node of each kind does when the run reaches it (kinds.NODE_KINDS has a row for each, and a test checks
that every row has its handler): True when the run moved on and settling goes on, False when it rests there or
the run ended."""
