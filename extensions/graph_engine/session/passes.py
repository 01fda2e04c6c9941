"""One pass of a session, whatever the host: refresh the library, restore and trust the state, read the pass, read
the facts the step needs, match the new words (asking the utility model when matching cannot settle them), step,
apply the effects.

``run_pass`` is the whole pass for a host that has one hook per pass (``hosts/chat``).  Agent-Zero's port has two
hooks per pass, restores from a chat's saved data and its audit log, and runs branches in subordinate agents; it
calls the same pieces (``refresh``, ``trusted``, ``read_facts``, ``matched``, ``apply``) around its own reading.
The core decides; this module only orders the calls and never raises for a bad input: a state that cannot be
trusted is one warning and no run, a utility model that fails leaves matching's own decision.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

from ..boundary import settings
from ..core import engine
from ..core.kinds import CHECKS
from ..core.state import is_legacy_linear, upgrade
from ..core.state import parse as parse_state
from ..matching.words import is_continuation, names_plan
from . import asking
from .port import Host, RunState
from .runtime import Runtime

MAX_STANDING = 32  # the library's problems told to each chat that meets it
_WRITTEN: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()  # host -> the state run_pass saved
Say = Callable[[str, str], None]  # (level, text)


def refresh(rt: Runtime, log: Say, log_once: Say) -> Any:
    """The library in use (reloaded when its files changed; None when none loads), its problems said: once to each
    chat (``log_once``), a recovery and the audit log's notes as they come (``log``)."""
    with rt.warming:  # the warm-up thread is loading the library: this pass waits for it
        library, problems = rt.library.refresh()
    if rt.held:
        problems, rt.held = [*rt.held, *problems], []
    if rt.library.recovered:  # good again after a fault: say so, and forget what was said, so that a fault
        rt.library.recovered = False  # that comes back is reported again
        rt.logged_once.clear()
        count = len(library) if library is not None else 0
        log("info", f"[HTN] The plan library {rt.library.path} loads again ({count} plan{'' if count == 1 else 's'})")
    if library is not rt.standing_of:  # a new version of the library: what was said of the old one is past
        rt.standing_of, rt.standing = library, []
    if problems:
        rt.standing = (rt.standing + [f"[HTN] {line}" for line in problems])[-MAX_STANDING:]
    for line in rt.standing:
        log_once("warning", line)
    while rt.audit.notes:
        log("warning", f"[HTN] Audit log {rt.audit.notes.pop(0)}")
    return library


def trusted(rt: Runtime, raw: Any) -> tuple[RunState | None, str]:
    """A state the session did not write itself, read into a new value: its shape, every counter, and every node
    it names in the plan version it ran (``state.parse``); the stored value is left as it was."""
    state, problem = parse_state(raw)
    if state is None or state.get("status", "active") != "active":
        return state, problem
    rt.adopt_source(state)  # a plan proposed in the chat: compiled again from the text the run stored
    plan = rt.lookup(state["plan_id"], state["plan_version"])
    if plan is None or (state["plan_version"] and plan.version != state["plan_version"]):
        return state, ""  # the plan (version) is gone: the engine ends the run with its own message
    return parse_state(state, plan)


def read_facts(rt: Runtime, obs: engine.Observation, state: RunState | None, look: Callable[[str], str]) -> None:
    """What the step needs read before it (the core reads nothing): whether the new words only say "go on" or name
    the running plan, and what the running step's check names on the disk (``look``: the host's eyes)."""
    if obs.user_message.strip():
        obs.continuation = is_continuation(obs.user_message)
    if state is None:
        return
    plan = rt.lookup(state.get("plan_id", ""), state.get("plan_version", ""))
    if plan is None:
        return
    if obs.user_message.strip():
        obs.names_run_plan = names_plan(plan, obs.user_message)
    node = plan.nodes.get(state.get("current_node", ""))
    check = node.verify if node is not None else None
    if check is not None and check.value and CHECKS[check.type].looks_at_path:
        obs.files = {check.value: look(check.value)}


def matched(library: Any, asker: Any, obs: engine.Observation, running: bool, ask: bool) -> asking.Question | None:
    """The new words matched for this pass (``obs.match``), and the question for the utility model (None: none).
    ``asker`` keeps the answer for the message (and has ``call_utility_model`` when the host has one)."""
    if not obs.user_message.strip() or obs.control_seen == obs.message_id or library is None:
        return None
    obs.matched = True
    obs.match, question = asking.match_message(library, asker, obs.user_message, obs.message_id,
                                               obs.domain if obs.domain_known else None, obs.allowed_plans, running,
                                               ask)
    return question


def apply(host: Host, state: RunState | None, fx: engine.Effects) -> None:
    """The step's effects, in the order a reader of the host sees them: the lines, the PACE level, the state (and
    the run that ended: a host's view of it shows the new level), the report, then the text of the model's next
    call."""
    for level, text in fx.logs:
        host.log(level, text)
    if fx.pace_level:
        host.set_pace(fx.pace_level)
    host.save_state(state, fx.final_state)
    if fx.report is not None:
        host.report(fx.report)
    if fx.context is not None:
        host.inject(fx.context)


async def run_pass(host: Host, rt: Runtime, texts: Any, cfg: settings.Settings = settings.DEFAULTS) -> None:
    """One whole pass for a host with one hook per pass.  A state the host kept is trusted only after parsing; the
    utility model is asked at most once per message, within ``cfg.utility_timeout``."""
    def once(level: str, text: str) -> None:
        if rt.once(f"{id(host)}|{text}"):
            host.log(level, text)

    library = refresh(rt, host.log, once)
    raw = host.load_state()
    obs = host.read_pass(raw)
    if obs is None:
        return
    state = raw if raw is not None and raw is _WRITTEN.get(host) else _restored(rt, host, raw, texts)
    read_facts(rt, obs, state, host.look)
    question = matched(library, host, obs, state is not None, cfg.utility_model)
    if question is not None:
        obs.match = await asking.ask(host, question, cfg.utility_timeout, host.log)
    new_state, fx = engine.step(library if library is not None else (), rt.lookup, state, obs, texts)
    apply(host, new_state, fx)
    _WRITTEN[host] = new_state


def _restored(rt: Runtime, host: Host, raw: Any, texts: Any) -> RunState | None:
    """The state to run when it is not the one this session saved last (a restart, a state someone else wrote):
    ``raw`` parsed into a new value, the run told it resumed; or None (no run, a run that ended, or one that cannot
    be trusted: one warning, and the host is told there is no run)."""
    if raw is None:
        return None
    if is_legacy_linear(raw):
        host.log("warning", "[HTN] A state left by the linear selector is continued only in Agent-Zero; no workflow "
                            "is active")
        host.save_state(None, None)
        return None
    state, problem = trusted(rt, raw)
    if state is None or state.get("status", "active") != "active":
        if state is None:
            host.log("warning", f"[HTN] Ignored an unusable workflow state ({problem}); no workflow is active")
        host.save_state(None, None)
        return None
    state = upgrade(state)
    plan = rt.lookup(state["plan_id"], state.get("plan_version", ""))
    if plan is not None and state["current_node"] in plan.nodes:  # (else the engine ends it with its message)
        state = engine.resumed(plan, state, texts)
        host.log("info", f"[HTN] Workflow '{state.get('plan_name', plan.name)}' resumed at "
                         f"'{plan.nodes[state['current_node']].name}' (turn {state.get('turn', 0)}, attempt counts kept)")
    return state
