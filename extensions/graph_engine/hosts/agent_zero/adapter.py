"""The Agent-Zero shell around the engine: read one hook call, run ``engine.step``, apply effects.

Used by both extension files.  ``run_hook`` never raises: any failure becomes
one log line naming what failed and where, and the agent's loop goes on.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import json
import os
import re
import sys
import threading
import time
import traceback
import uuid
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from . import branches, page, pressed

from ...session import asking
from ...texts import card, render, view
from ...core import control, engine
from ...boundary import settings
from ...session.audit import checkpoint_path, read_checkpoint, read_lines, replace_file
from ...session import passes
from ...session.runtime import Runtime
from .history import (CallOutput, from_framework, new_intervention, newest_call_output, reply_before_user_message,
                      user_words)
from ...matching import second
from ...core.model import Plan
from ...core.plain import as_text
from ...boundary.reading import file_fact, read_regular
from ...authoring.render_graph import picture_setting, run_picture
from ...session.salute import build_report, write_report
from ...core.state import DATA_KEY, STATUSES, is_legacy_linear, logged, migrate_legacy, pictured, upgrade

CONTEXT_KEY = "htn_active_plan"
STATE_ATTR = "_htn_state"
PACE_ATTR = "_org_pace_level"
LIBRARY_NAME = "htn_plan_library.json"
MONOLOGUE_KEY = "graph_engine_monologue"
SEEN_KEY = "graph_engine_seen"  # in a monologue's params_persistent: a hook call of this pack has seen it
COMPANION_ATTR = "_graph_engine_companion"  # (loop data, iteration) of the pass the companion last handled
CHECKED_ATTR = "_graph_engine_written"  # the state object this module last wrote (its shape is known good)
SPOOL_KEY = "graph_engine_audit_spool"  # agent data, saved with the chat: audit lines not written yet
MAX_SPOOL_LINES = 2_000
MAX_FULL_OUTPUT = 4 * 1024 * 1024
MAX_ITERATION = 10 ** 9
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
ENDED = tuple(x for x in STATUSES if x != "active")
CONTROL_ATTR = "_graph_engine_control"  # the message (observation's message_id) last taken as a user's control
CARD_ATTR = "_graph_engine_card"  # [run id, log item, what it shows, the heading, content and kvps sent] of the run's card; False: cards are off
TOLD_ATTR = "_graph_engine_told"  # what the next call is told of a run a pressed control ended between passes
WAKER_ATTR = "_graph_engine_waker"  # the task that goes on with an idle chat after a pressed control


_SELECTOR_FILE = str(Path(__file__).resolve().parents[2] / "python" / "before_main_llm_call" / "_15_htn_plan_selector.py")
_runtimes: dict[str, Runtime] = {}
_located: dict[str, str] = {}  # extension file -> the library beside it (looked up once per process)
_by_settings: dict[tuple[str, Any], Runtime] = {}  # (extension file, a hook call's settings) -> its runtime
_making = threading.Lock()  # a runtime is made once, when the warm-up thread and a pass ask at the same time


def locate_library(ext_file: str) -> str:
    """The library next to the drop-in extension, wherever this pack is installed."""
    env = os.environ.get("GRAPH_ENGINE_LIBRARY")
    if env:
        return env
    here = Path(ext_file).resolve().parent
    roots = here.parents[2:3]  # the repository, or the plugin's root (none for a folder near "/")
    for candidate in (here / LIBRARY_NAME, here.parent / "before_main_llm_call" / LIBRARY_NAME,
                      *(root / "plan_library" / LIBRARY_NAME for root in roots)):
        if candidate.is_file():
            return str(candidate)
    return str(here.parent / "before_main_llm_call" / LIBRARY_NAME)


def runtime_for(ext_file: str, cfg: settings.Settings = settings.DEFAULTS) -> Runtime:
    """The runtime of the library these settings select: the environment's, the chat's project's, the
    plugin setting's, else the one beside the extension files (one runtime per library and plan limit)."""
    if not _runtimes:
        _located.clear()  # the runtimes were dropped (a new process, as tests model it): look again
        _by_settings.clear()
    elif cfg is not settings.DEFAULTS:
        known = _by_settings.get((ext_file, cfg))  # the settings of a hook call: read from the environment too
        if known is not None:
            return known
    path = (os.environ.get("GRAPH_ENGINE_LIBRARY") or cfg.project_library or cfg.library_path
            or _located.get(ext_file) or _located.setdefault(ext_file, locate_library(ext_file)))
    key = f"{path}|{cfg.max_plans}"
    rt = _runtimes.get(key)
    if rt is None:
        with _making:
            rt = _runtimes.get(key) or _runtimes.setdefault(key, Runtime(path, os.environ.get("A0_ROOT", "/a0")))
    if cfg is not settings.DEFAULTS:
        if len(_by_settings) >= 64:
            _by_settings.clear()
        _by_settings[(ext_file, cfg)] = rt
    return rt


async def run_hook(agent: Any, loop_data: Any, hook: str, ext_file: str, runtime: Runtime | None = None) -> None:
    """One hook call from an extension file.  Never raises (but for the task's own cancellation): a fault in
    reading the settings or finding the runtime is caught like one in the engine.  The only wait is the utility
    model's answer, for a new message the local matching cannot settle, bounded by the settings' timeout."""
    rt, token = runtime, None
    try:
        if _companion_handled(agent, loop_data, hook):
            return  # this pass is judged and shown, and its settings, library and spool were seen by the
            # companion's call; what this hook would render reaches only the next call, which the companion renders
        cfg = settings.current(agent, _display.submit)
        token = settings.ACTIVE.set(cfg)
        rt = runtime or runtime_for(ext_file, cfg)
        for line in cfg.problems:
            _log_once(rt, agent, "warning", line)
        told = getattr(agent, TOLD_ATTR, None)
        if told:
            setattr(agent, TOLD_ATTR, None)
        unread = _unread_request(loop_data)
        if unread:  # the monologue's own message, which no hook read: decided first, as its first pass would have
            await _decide(rt, agent, loop_data, hook, cfg, _prepare(rt, agent, loop_data, hook, cfg, request=unread),
                          unread)
        prepared = _prepare(rt, agent, loop_data, hook, cfg)
        if prepared is None:  # most passes: no run, and no message that could start one
            if hook == engine.PROMPTS_AFTER:  # the selector's call of this pass would find the same: it returns
                setattr(agent, COMPANION_ATTR, (loop_data, _iteration(loop_data)))
        elif prepared.question is None:
            _step(rt, agent, loop_data, hook, prepared)
        else:
            await _decide(rt, agent, loop_data, hook, cfg, prepared)
        if branches.waiting(getattr(agent, STATE_ATTR, None)) and branches.branch_of(agent) is None:
            await _run_branches(rt, agent, loop_data, hook, cfg)
        if told:
            _tell(loop_data, told)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - the agent's loop must go on
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        where = f"{Path(frame.filename).name}:{frame.lineno}" if frame else "?"
        _log_once(rt or _NO_RUNTIME, agent, "error",
                  f"[HTN] Workflow engine error ({type(exc).__name__} at {where}: {exc}); the engine skipped this "
                  "hook call, the agent continues. Please report it.", key=f"{type(exc).__name__}:{where}:{exc}")
    finally:
        if token is not None:
            settings.ACTIVE.reset(token)


async def _decide(rt: Runtime, agent: Any, loop_data: Any, hook: str, cfg: settings.Settings,
                  prepared: "_Pass | None", request: str | None = None) -> None:
    """Ask the utility model when the local matching cannot settle the new message, then step the pass read
    (``prepared``; ``request``: the monologue's own message, read late)."""
    if prepared is None:
        return
    if prepared.question is not None:
        agent.__dict__[pressed.WAITING_ATTR] = True  # a control pressed meanwhile waits for this call
        try:
            match = await asking.ask(agent, prepared.question, cfg.utility_timeout,
                                     lambda level, text: _log(agent, level, text))
        finally:
            agent.__dict__[pressed.WAITING_ATTR] = False
        if pressed.pending(agent):  # pressed while the utility model answered: applied first, the pass read again
            apply_pressed(agent, rt)
            told = getattr(agent, TOLD_ATTR, None)
            setattr(agent, TOLD_ATTR, None)  # it ended the run: this pass's call is told, not a later one
            again = _prepare(rt, agent, loop_data, hook, cfg, request=request)
            if again is not None:
                again.obs.match = match
                _step(rt, agent, loop_data, hook, again)
            if told:
                _tell(loop_data, told)
            return
        prepared.obs.match = match
    _step(rt, agent, loop_data, hook, prepared)


def _unread_request(loop_data: Any) -> str:
    """The monologue's own message, when no hook has read it: a message the person wrote while the agent started
    (Agent-Zero took it before the monologue's first pass built its prompt) ended that pass before any hook ran, so
    this later pass is the first to see the monologue.  "" otherwise (and for the Nudge).  The first hook call of a
    monologue names it, so later passes pay one dictionary lookup."""
    store = getattr(loop_data, "params_persistent", None)
    if not isinstance(store, dict) or SEEN_KEY in store:
        return ""
    store[SEEN_KEY] = True  # seen from here on
    if _iteration(loop_data) == 0 or MONOLOGUE_KEY in store:
        return ""
    words = user_words(getattr(loop_data, "user_message", None))
    return "" if not words or from_framework(words) else words


async def _run_branches(rt: Runtime, agent: Any, loop_data: Any, hook: str, cfg: settings.Settings) -> None:
    """The run rests on a fork: its branches run in subordinate agents while this hook call waits (the parent
    spends no model call), then the same pass is stepped again, so the fan-in routes and this call's context
    shows the step after it; unless the person said "stop the workflow" meanwhile (the parent's loop takes it)."""
    state = getattr(agent, STATE_ATTR)
    plan = rt.lookup(state["plan_id"], state.get("plan_version", ""))
    if plan is None:
        return  # the engine ends the run on its next pass, with its own message

    def reported() -> None:
        if getattr(agent, STATE_ATTR, None) is state:
            _written(rt, agent, state)

    def press_now() -> bool:
        """Controls pressed while the branches run: those that leave them be are applied now; True when one that
        stops their agents waits (branches.run stops them, and it is applied below)."""
        if pressed.pending(agent, pressed.STOPS_BRANCHES):
            return True
        if pressed.pending(agent):
            apply_pressed(agent, rt)
        return False

    agent.__dict__[pressed.WAITING_ATTR] = True
    try:
        why = await branches.run(agent, state, plan, STATE_ATTR, reported, lambda level, text: _log(agent, level, text),
                                 press_now)
    finally:
        agent.__dict__[pressed.WAITING_ATTR] = False
    if why == "pressed":  # stop, pause, go back or restart: the branches' agents are stopped; this call is told
        apply_pressed(agent, rt, loop_data, hook)
        return
    if why:
        return
    if getattr(agent, STATE_ATTR, None) is not state:
        return
    prepared = _prepare(rt, agent, loop_data, hook, cfg, joined=True)
    if prepared is not None:
        _step(rt, agent, loop_data, hook, prepared)


# ── controls pressed in the web UI (host/pressed.py) ───────────────────────


async def control_api(body: Any, find_context: Callable[[str], Any], ext_file: str) -> dict[str, Any]:
    """The API handler's work: a control pressed in the component, handed to the chat's agent and applied on the
    chat's event loop; the answer (applied, refused with why, or pending), for the page.  Never raises."""
    p = pressed.parse(body)
    if isinstance(p, str):
        return {"ok": False, "status": "refused", "text": f"Not sent: {p}."}
    try:
        context = find_context(str(body.get("context", ""))[:100])
        agent = getattr(context, "agent0", None)
        if agent is None:
            return pressed.answer(p, "refused", "This chat is not open in Agent-Zero any more.")
        if not pressed.queue(agent, p):
            return pressed.answer(p, "refused", "Too many controls are waiting; try again in a moment.")
        pressed.on_loop(pressed.chat_loop(context), lambda: _apply_when_free(agent, ext_file))
        return await pressed.wait_for(p)
    except Exception as exc:  # noqa: BLE001 - the page gets one line, Agent-Zero goes on
        return pressed.answer(p, "refused", f"Not applied: the workflow engine failed ({type(exc).__name__}: {exc}).")


def _apply_when_free(agent: Any, ext_file: str) -> None:
    """On the chat's loop: apply what was pressed, unless a hook call of the agent waits (it applies it on waking)."""
    if agent.__dict__.get(pressed.WAITING_ATTR):
        return
    apply_pressed(agent, None, ext_file=ext_file)


def apply_pressed(agent: Any, rt: Runtime | None = None, loop_data: Any = None, hook: str = "",
                  ext_file: str = "") -> None:
    """Apply the controls pressed on the agent, in order: between the agent's passes (``hook`` ""), or in a hook
    call that waited (its call is shown the result).  Each gets its answer; never raises."""
    token = None
    taken = pressed.take(agent)
    if not taken:
        return
    try:
        cfg = settings.current(agent, _display.submit)
        token = settings.ACTIVE.set(cfg)
        rt = rt or runtime_for(ext_file or _SELECTOR_FILE, cfg)
        for p in taken:
            p.settle(_apply_one(rt, agent, p, loop_data, hook, cfg))
    except Exception as exc:  # noqa: BLE001 - the agent's loop must go on
        for p in taken:
            p.settle(pressed.answer(p, "refused", f"Not applied: the workflow engine failed ({type(exc).__name__})."))
        _log_once(rt or _NO_RUNTIME, agent, "error", f"[HTN] Workflow engine error ({type(exc).__name__}: {exc}) "
                  "while applying a control pressed in the web UI; nothing changed. Please report it.",
                  key=f"pressed:{type(exc).__name__}")
    finally:
        if token is not None:
            settings.ACTIVE.reset(token)


def _apply_one(rt: Runtime, agent: Any, p: pressed.Pressed, loop_data: Any, hook: str,
               cfg: settings.Settings) -> dict[str, Any]:
    with rt.warming:  # the warm-up thread is loading the library: wait for it, as a pass does
        library, _ = rt.library.refresh()
    plans = library if library is not None else ()
    state = _pressed_state(rt, agent)
    if state is None or state.get("run_id") != p.run:
        return pressed.answer(p, "refused", "This workflow is no longer running.")
    ctl = control.Control(p.kind, p.said, node=p.node, by="button")
    obs = _pressed_observation(agent, loop_data, hook, state, cfg)
    new_state, fx = engine.press(plans, rt.lookup, state, ctl, obs, render, p.id)
    _apply(rt, agent, loop_data, new_state, fx)
    now_state = new_state if new_state is not None else fx.final_state or state
    said = now_state.get("pressed") or {}
    if fx.control and new_state is None and fx.context and not hook:
        setattr(agent, TOLD_ATTR, fx.context)  # the run ended between passes: the next call is told
    if fx.control and p.kind in pressed.WAKES and new_state is not None and not hook:
        _go_on_when_idle(agent, p.kind, new_state)
    return pressed.answer(p, said.get("status", "refused"), said.get("text", ""), now_state.get("run_id", ""))


def _pressed_state(rt: Runtime, agent: Any) -> dict | None:
    """The chat's run as its next pass would take it (restored from the chat's data after a restart), or None."""
    raw = getattr(agent, STATE_ATTR, None)
    restored = raw is None
    if restored:
        raw = _saved_state(agent)
        if raw is None:
            return None
        raw = _newest_record(rt, agent, raw)
    state = raw if raw is getattr(agent, CHECKED_ATTR, None) else passes.trusted(rt, raw)[0]
    if not isinstance(state, dict) or state.get("status", "active") != "active" or state.get("branch"):
        return None
    if restored:
        state = _reconcile(rt, agent, upgrade(state))
        state = _resume(rt, agent, state) if state is not None else None
    return state


def _pressed_observation(agent: Any, loop_data: Any, hook: str, state: dict, cfg: settings.Settings
                         ) -> engine.Observation:
    """The observation a pressed control is applied with: the hook call's own, or (between passes) one that names
    the run's last pass, so that the next pass counts and judges as it would have."""
    concurrent, why = _concurrent(agent, cfg)
    if hook:
        obs = observe(agent, loop_data, hook)
        obs.user_message, obs.output = "", None
    else:
        monologue, _, iteration = str(state.get("last_pass", "")).rpartition(":")
        seen = state.get("reply_seen")
        obs = engine.Observation(hook=engine.PRESSED, monologue=monologue,
                                 iteration=int(iteration) if iteration.isdigit() else 0,
                                 reply_mark=seen[1] if isinstance(seen, list) and len(seen) == 3 else None,
                                 global_turn=int(state.get("started_turn", 0)) + int(state.get("turn", 0)))
    obs.now, obs.concurrent, obs.serial_reason = now(), concurrent, why
    return obs


def _tell(loop_data: Any, text: str) -> None:
    """What a pressed control did between passes, above whatever this call is shown."""
    extras = getattr(loop_data, "extras_temporary", None)
    if isinstance(extras, dict):
        shown = extras.get(CONTEXT_KEY)
        extras[CONTEXT_KEY] = text if not shown else f"{text}\n\n{shown}"


WAKE_POLL = 0.25  # seconds between two looks at whether the chat's agent is at work
WAKE_LIMIT = 3600.0  # the longest a control waits for the agent's work to end before it stops looking


def _go_on_when_idle(agent: Any, kind: str, state: dict) -> None:
    """A control that moves the run on (resume, skip, go back, retry, restart) pressed while the chat's agent is
    idle, or while it finishes a turn that will not see it: once the agent is idle and no call has been told of it,
    the agent is woken, as Agent-Zero's Nudge wakes it, with a system message (not a request of the person's)."""
    context = getattr(agent, "context", None)
    loop = pressed.chat_loop(context)
    if loop is None or not callable(getattr(context, "communicate", None)):
        return
    run_id, turn = state.get("run_id"), state.get("turn")

    async def wake() -> None:
        waited = 0.0
        while _working(context) and waited < WAKE_LIMIT:
            await asyncio.sleep(WAKE_POLL)
            waited += WAKE_POLL
        current = getattr(agent, STATE_ATTR, None)
        if _working(context) or not (isinstance(current, dict) and current.get("run_id") == run_id
                                     and current.get("turn") == turn and current.get("status") == "active"):
            return  # a call has been told, or the run changed meanwhile
        try:
            cls = sys.modules[type(agent).__module__].UserMessage
            context.communicate(cls(message=json.dumps({"system_message": pressed.wake_text(kind)}),
                                    attachments=[]))
        except Exception as exc:  # noqa: BLE001 - the run waits for the person's next message instead
            _log(agent, "warning", f"[HTN] The agent could not be told to go on after a control ({type(exc).__name__}: "
                                   f"{exc}); it goes on with the person's next message")

    old = getattr(agent, WAKER_ATTR, None)
    if old is not None and not old.done():
        old.cancel()
    setattr(agent, WAKER_ATTR, asyncio.run_coroutine_threadsafe(wake(), loop))


def _working(context: Any) -> bool:
    running = getattr(context, "is_running", None)
    try:
        return bool(running()) if callable(running) else False
    except Exception:  # noqa: BLE001 - a context that cannot say is taken as idle
        return False


def _branch_reported(rt: Runtime, mine: tuple[Any, str], state: dict | None) -> None:
    """A pass of a branch's agent (``mine``: its parent agent and branch id): the branch's state goes to the
    parent's fork (engine.branch_progress), and the parent's state is written."""
    parent, branch_id = mine
    parent_state = getattr(parent, STATE_ATTR, None)
    if state is not None and isinstance(parent_state, dict) and engine.branch_progress(parent_state, branch_id, state):
        _written(rt, parent, parent_state)


def _written(rt: Runtime, agent: Any, state: dict) -> None:
    """A run's state changed outside its own pass (a branch's): its audit lines and checkpoint, the chat's data and
    its card are written."""
    _audit(rt, agent, state)
    _save(agent, state)
    _card(rt, agent, state)


class _LoggedOnce:
    """What a hook call that found no runtime logs through: the one-time messages already said."""

    def __init__(self) -> None:
        self.logged_once: set[str] = set()

    def once(self, key: str) -> bool:
        new = key not in self.logged_once
        self.logged_once.add(key)
        return new


_NO_RUNTIME: Any = _LoggedOnce()


def warm_up(agent: Any, ext_file: str) -> None:
    """The warm-up thread (the agent_init extension, when Agent-Zero creates a chat's agent): load and check the
    library this agent's settings select, compile its check patterns and build its meaning index, so that the
    chat's first message finds them ready.  A pass that comes meanwhile waits for the load (``Runtime.warming``)
    and decides exactly as without a warm-up.  Never raises: a fault is one log line, and the first pass loads
    the library itself."""
    rt = None
    try:
        cfg = settings.current(agent)
        settings.ACTIVE.set(cfg)  # this thread's own context: the library's checks read the settings
        rt = runtime_for(ext_file, cfg)
        with rt.warming:
            library, problems = rt.library.refresh()
            rt.held.extend(problems)  # said by the first pass, in the chat, as that pass would have said them
            if library is not None and hasattr(library, "warm"):
                library.warm()
        _display.start()  # the thread a pass would start (pictures, settings re-read off the loop)
    except Exception as exc:  # noqa: BLE001 - the first pass does the work instead
        _log_once(rt or _NO_RUNTIME, agent, "warning",
                  f"[HTN] The workflow engine's warm-up failed ({type(exc).__name__}: {exc}); the first message "
                  "loads the plan library instead. Please report it", key=f"warm-up:{type(exc).__name__}")


class _Pass:
    """What a hook call read before the step: the library, the state to run, the observation, and the question
    for the utility model (None: none)."""

    __slots__ = ("library", "state", "obs", "question")

    def __init__(self, library: Any, state: dict | None, obs: engine.Observation, question: Any) -> None:
        self.library, self.state, self.obs, self.question = library, state, obs, question


def _prepare(rt: Runtime, agent: Any, loop_data: Any, hook: str, cfg: settings.Settings,
             joined: bool = False, request: str | None = None) -> _Pass | None:
    """What the step needs: the library, the state, the observation (``request``: the monologue's own message,
    read at a later pass than its first)."""
    library = passes.refresh(rt, lambda level, text: _log(agent, level, text),
                             lambda level, text: _log_once(rt, agent, level, text))
    if isinstance(getattr(agent, "data", None), dict) and agent.data.get(SPOOL_KEY):
        _flush_spool(rt, agent)  # lines a folder refused earlier: written by the first pass that can
    raw_state = getattr(agent, STATE_ATTR, None)
    restored = False
    if raw_state is None:
        raw_state = _saved_state(agent)
        restored = raw_state is not None
        if restored:
            raw_state = _newest_record(rt, agent, raw_state)
    if raw_state is None and not _may_start(rt, library, loop_data, request):
        return None  # no run, and no user message that could start one: nothing can happen in this pass
    problems = []
    obs = observe(agent, loop_data, hook, raw_state, problems, request)
    for line in problems:
        _log_once(rt, agent, "warning", line)
    if joined or (isinstance(raw_state, dict) and raw_state.get("branch")):
        obs.user_message = ""  # a branch's agent takes no message; a pass stepped again has decided its own
    obs.concurrent, obs.serial_reason = _concurrent(agent, cfg)
    if _ended_this_pass(raw_state, obs):
        return None  # an escalated run stays readable for the rest of the pass in which it ended
    source = f"the chat's saved {DATA_KEY}" if restored else f"agent.{STATE_ATTR}"
    state = _usable_state(rt, agent, raw_state, obs, source)
    if state is not None and restored:
        state = _reconcile(rt, agent, state)
    if state is not None and restored:
        state = _resume(rt, agent, state)
    passes.read_facts(rt, obs, state, file_fact)
    question = passes.matched(library, agent, obs, state is not None, cfg.utility_model)
    return _Pass(library, state, obs, question)


_UNABLE: dict[tuple[type, bool], str] = {}  # (agent class, v1.x layout) -> why it cannot run branches at once


def _concurrent(agent: Any, cfg: settings.Settings) -> tuple[bool, str]:
    """(whether a parallel node's branches run at once here, why not)."""
    if branches.branch_of(agent) is not None:
        return False, "a branch's own agent runs no branches of its own"
    if not cfg.parallel_branches:
        return False, "the parallel_branches setting is off"
    key = (type(agent), "helpers.extension" in sys.modules)
    why = _UNABLE.get(key)
    if why is None:
        why = _UNABLE.setdefault(key, branches.unable(agent))
    return not why, why


def _step(rt: Runtime, agent: Any, loop_data: Any, hook: str, p: _Pass) -> None:
    plans = p.library if p.library is not None else ()  # a catalogue: matched through its trigger index
    new_state, fx = engine.step(plans, rt.lookup, p.state, p.obs, render)
    if fx.control:  # decided once: the other hook of this pass leaves the message alone
        setattr(agent, CONTROL_ATTR, p.obs.message_id)
    _apply(rt, agent, loop_data, new_state, fx)
    if hook == engine.PROMPTS_AFTER:
        setattr(agent, COMPANION_ATTR, (loop_data, p.obs.iteration))


def _may_start(rt: Runtime, library: Any, loop_data: Any, request: str | None = None) -> bool:
    """A pass with no run: is there a new user message in which a trigger phrase may be found?  (Most
    messages name no plan: such a pass reads the message's words and the trigger index, nothing else.)"""
    if library is None:
        return False
    if request is not None:
        words = request
    elif _iteration(loop_data) > 0:
        words = new_intervention(_history(loop_data))
    else:  # the monologue's message, read once for both hooks
        message, seen = getattr(loop_data, "user_message", None), rt.message_words  # one read: agents of
        if seen[0] is not message:  # other chats may replace it meanwhile
            seen = rt.message_words = (message, user_words(message))
        words = seen[1]
    return bool(words) and (library.may_start(words) or _is_control(rt, words) or not _reads_as_english(rt, words))


def _reads_as_english(rt: Runtime, words: str) -> bool:
    """Whether the local matcher reads the words (else the utility model may); read once for both hooks."""
    seen = rt.english_words
    if seen[0] is not words:
        seen = rt.english_words = (words, second.reads_as_english(words))
    return seen[1]


def _is_control(rt: Runtime, words: str) -> bool:
    """Whether the words are one of the user's controls; read once for both hooks of a pass."""
    seen = rt.control_words
    if seen[0] is not words:
        seen = rt.control_words = (words, control.parse(words) is not None)
    return seen[1]


def _companion_handled(agent: Any, loop_data: Any, hook: str) -> bool:
    """before_main_llm_call after the companion handled the same pass (not the pass of a new message): it stepped
    the pass, or found nothing that could happen in it (no run, no message that could start one), which the selector
    would find too, as it reads the same history and, past a monologue's first pass, no domain.  (A pass is its
    loop data, which is the monologue's, and its iteration.)"""
    if hook != engine.BEFORE_MAIN:
        return False
    seen = getattr(agent, COMPANION_ATTR, None)
    if not isinstance(seen, tuple):
        return False  # no companion has handled a pass of this agent
    iteration = _iteration(loop_data)
    return iteration > 0 and seen[0] is loop_data and seen[1] == iteration


# ── reading ─────────────────────────────────────────────────────────────────


def observe(agent: Any, loop_data: Any, hook: str, state: Any = None,
            problems: list[str] | None = None, request: str | None = None) -> engine.Observation:
    iteration = _iteration(loop_data)
    monologue = _monologue_id(loop_data)
    history = _history(loop_data)
    output = None
    if not _pass_already_seen(state, f"{monologue}:{iteration}"):  # the other hook judged it this pass
        output = newest_call_output(history) if iteration > 0 else reply_before_user_message(history)
    if request is not None:  # the monologue's message, read late: no hook knows its domain now
        words, key, known = request, "", False
    elif iteration == 0:  # the monologue's message; the tracker classifies it in before_main_llm_call
        words, key, known = user_words(getattr(loop_data, "user_message", None)), "", hook == engine.BEFORE_MAIN
    else:  # an intervention the user wrote while the agent worked: no hook knows its domain
        words = new_intervention(history)
        key, known = (f"{monologue}~{zlib.crc32(words.encode('utf-8', 'replace')):08x}" if words else ""), False
    if words and from_framework(words):  # the Nudge: the run goes on, as after any pass without new words
        words, key = "", ""
    return engine.Observation(
        hook=hook,
        monologue=monologue,
        iteration=iteration,
        user_message=words,
        message_key=key,
        domain_known=known,
        domain=_bst_domain(agent, problems) if known else "",
        allowed_plans=_allowed_plans(agent, problems) if words else None,
        output=_full_output(output),
        reply_mark=_reply_mark(loop_data),
        global_turn=_global_turn(agent, (monologue, iteration)),
        pace_level=_pace_at_pass_start(agent, (monologue, iteration)),
        control_seen=_text_attr(agent, CONTROL_ATTR) if words else "",
        now=now(),
        asked=bool(words) and iteration == 0 and _asked_user(history),
    )


MAX_MARKED = 65_536  # characters of a reply its mark reads (with its length and its object)


def _reply_mark(loop_data: Any) -> str | None:
    """Names the model's newest reply, ``loop_data.last_response`` (Agent-Zero sets it as it adds a reply to history,
    on both layouts): a new reply is a new object, so its mark differs even when its text repeats; a call that made
    no reply leaves the mark as it was.  None when the loop data has none (another host)."""
    reply = getattr(loop_data, "last_response", None)
    if not isinstance(reply, str):
        return None
    crc = zlib.crc32(reply[:MAX_MARKED].encode("utf-8", "surrogatepass"))
    return f"{id(reply):x}:{len(reply):x}:{crc:08x}"


def _asked_user(history: Any) -> bool:
    """Whether the agent's reply before the user's message asked the user something (a "?" in its response):
    the message is then an answer, a control only when it says so (control.parse)."""
    before = reply_before_user_message(history)
    return before is not None and before.tool == "response" and ("?" in before.text or "？" in before.text)


def _iteration(loop_data: Any) -> int:
    """The pass number (0 = the monologue's first pass); a value of another type, or past any monologue's
    length, reads as 0."""
    value = getattr(loop_data, "iteration", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_ITERATION else 0


def _history(loop_data: Any) -> list:
    """``history_output`` as a list (Agent-Zero gives one; anything else reads as no history)."""
    value = getattr(loop_data, "history_output", None)
    return value if isinstance(value, list) else list(value) if isinstance(value, tuple) else []


def now() -> float:
    """Seconds since the epoch: the clock human gates with a timeout are measured by."""
    return time.time()


def _text_attr(agent: Any, name: str) -> str:
    value = getattr(agent, name, "")
    return value if isinstance(value, str) else ""


def _saved_state(agent: Any) -> Any:
    """The state Agent-Zero restored with the chat, when the attribute was lost (restart, chat reload)."""
    try:
        saved = agent.get_data(DATA_KEY)
    except Exception:  # noqa: BLE001 - an agent without data has nothing saved
        return None
    if isinstance(saved, dict) and saved.get("status", "active") in ENDED:
        return None  # the last run of the chat, ended: kept for the record only
    return saved


def _newest_record(rt: Runtime, agent: Any, saved: Any) -> Any:
    """The run as its audit log's checkpoint has it, when that is newer than the state saved with the chat:
    Agent-Zero saves the chat at the end of a pass, so a stop during the LLM call loses what this pass's hooks
    did (a result judged, a step moved on), while the audit lines and the checkpoint beside them were written
    before the hook returned."""
    if not isinstance(saved, dict) or not isinstance(saved.get("run_id"), str):
        return saved
    path = rt.audit.path(_chat_id(agent), saved["run_id"])
    newer = read_checkpoint(path)
    if newer is None and os.path.lexists(checkpoint_path(path)):
        _log_once(rt, agent, "warning", f"[HTN] The checkpoint of run {saved['run_id']} at {checkpoint_path(path)} "
                                        "cannot be read (damaged, cut short or not a regular file); the run continues "
                                        "from the chat's saved state, unless that is behind its audit log",
                  key=f"checkpoint-read:{path}")
    if (not isinstance(newer, dict) or newer.get("run_id") != saved["run_id"]
            or not isinstance(newer.get("audit_seq"), int) or not isinstance(saved.get("audit_seq", 0), int)
            or newer["audit_seq"] <= saved.get("audit_seq", 0)):
        return saved
    checked, problem = passes.trusted(rt, newer)
    if checked is None:
        _log_once(rt, agent, "warning", f"[HTN] The audit log's checkpoint of run {saved['run_id']} is not usable "
                                        f"({problem}); the run continues from the chat's saved state")
        return saved
    _log(agent, "info", f"[HTN] Workflow '{saved.get('plan_name', saved.get('plan_id', ''))}': the chat was saved "
                        f"before its last {newer['audit_seq'] - saved.get('audit_seq', 0)} audit event(s); the run "
                        "continues from the audit log's checkpoint")
    return checked


def _logged_seq(rt: Runtime, agent: Any, run_id: str) -> int:
    """The last seq the run's audit log holds (0: no log, or one that cannot be read, said once)."""
    path = rt.audit.path(_chat_id(agent), run_id)
    try:
        return rt.audit.last_seq(path)
    except OSError as exc:
        _log_once(rt, agent, "warning", f"[HTN] Audit log {path} cannot be read ({exc.strerror or exc}); the run "
                                        "continues, and its lines are kept with the chat", key=f"audit:{path}")
        return 0


def _reconcile(rt: Runtime, agent: Any, state: dict) -> dict | None:
    """A restored run against its audit log, which holds each judged result once: a state that is behind its log
    would judge those results again, so it ends the run (one warning; the end continues the log's seqs); the
    lines a stop kept out of the log are written from the state."""
    logged = _logged_seq(rt, agent, state["run_id"])
    have = state.get("audit_seq", 0)
    if logged > have:
        _reject(rt, agent, state, f"its saved state stops at audit event {have}, its audit log at {logged}: the "
                                  "checkpoint that held the rest is missing or damaged, and resuming would judge "
                                  "those results again; send the request again to start it anew",
                "the chat's saved state")
        return None
    if logged < have:
        taken = rt.audit.take(state, _chat_id(agent), int(getattr(agent, "number", 0) or 0), after=logged)
        if taken is not None:
            try:
                rt.audit.write(taken[0], taken[1])
            except OSError as exc:
                _spool_warning(rt, agent, taken[0], exc)
                _keep(rt, agent, _spool_of(agent) or [], [taken[0], taken[1].decode("utf-8", "replace"), False])
    return state


def _resume(rt: Runtime, agent: Any, state: dict) -> dict | None:
    plan = rt.lookup(state["plan_id"], state.get("plan_version", ""))
    if plan is None or state["current_node"] not in plan.nodes:
        return state  # the engine ends it with a clear message
    state = engine.resumed(plan, state, render)
    _log(agent, "info", f"[HTN] Workflow '{state.get('plan_name', plan.name)}' resumed at "
                        f"'{plan.nodes[state['current_node']].name}' after a restart or chat reload "
                        f"(turn {state.get('turn', 0)}, attempt counts kept)")
    return state


def _ended_this_pass(state: Any, obs: engine.Observation) -> bool:
    return (isinstance(state, dict) and state.get("status") == "escalated"
            and state.get("last_pass") == obs.pass_key)


def _pace_at_pass_start(agent: Any, key: tuple[str, int]) -> str:
    """The PACE level as the first hook of this pass read it (the dispatcher may recompute it mid-pass)."""
    seen = getattr(agent, "_graph_engine_pace", None)
    if isinstance(seen, list) and len(seen) == 2 and seen[0] == key and isinstance(seen[1], str):
        return seen[1]
    level = getattr(agent, PACE_ATTR, "")
    level = level if isinstance(level, str) else ""
    setattr(agent, "_graph_engine_pace", [key, level])
    return level


def _pass_already_seen(state: Any, pass_key: str) -> bool:
    return isinstance(state, dict) and state.get("last_pass") == pass_key


def _monologue_id(loop_data: Any) -> str:
    store = getattr(loop_data, "params_persistent", None)
    if not isinstance(store, dict):
        return f"m{id(loop_data):x}"
    mono = store.get(MONOLOGUE_KEY)
    if not isinstance(mono, str):
        mono = store[MONOLOGUE_KEY] = uuid.uuid4().hex[:10]
    return mono


def _global_turn(agent: Any, key: tuple[str, int]) -> int:
    seen = getattr(agent, "_graph_engine_pass", None)
    if not isinstance(seen, list) or len(seen) != 2 or not isinstance(seen[1], int):
        seen = [None, 0]
    if seen[0] != key:
        seen = [key, int(seen[1]) + 1]
        setattr(agent, "_graph_engine_pass", seen)
    return seen[1]


def _bst_domain(agent: Any, problems: list[str] | None = None) -> str:
    store = getattr(agent, "_bst_store", None)
    if store is not None and not isinstance(store, dict) and problems is not None:
        problems.append(f"[HTN] agent._bst_store is a {type(store).__name__}, not a dict; the belief-state domain "
                        "reads as empty until the _11_ tracker stores a dict")
    belief = store.get("__bst_belief_state__") if isinstance(store, dict) else None
    domain = belief.get("domain", "") if isinstance(belief, dict) else ""
    if not isinstance(domain, str):
        if problems is not None:
            problems.append(f"[HTN] agent._bst_store['__bst_belief_state__']['domain'] is a "
                            f"{type(domain).__name__}, not text; the domain reads as empty")
        return ""
    return domain


def _allowed_plans(agent: Any, problems: list[str] | None = None) -> tuple[str, ...] | None:
    try:
        value = agent.get_data("_org_htn_allowed_plans")
    except Exception:  # noqa: BLE001 - an agent without data means "no filter"
        return None
    if value is None:
        return None
    if isinstance(value, (list, tuple, set)):
        return tuple(v for v in value if isinstance(v, str))
    if problems is not None:
        problems.append(f"[HTN] _org_htn_allowed_plans is a {type(value).__name__}, not a list of plan ids; no plan "
                        "may start until the org dispatcher sets a list (or None for no filter)")
    return ()  # a filter of the wrong type allows nothing rather than everything


def _full_output(out: CallOutput | None) -> CallOutput | None:
    """A result shortened by compression is read back from the file Agent-Zero saved, when it can be."""
    if out is None or not out.truncated or not out.file:
        return out
    try:  # only a regular file: a FIFO named there would block the hook
        blob = read_regular(out.file, MAX_FULL_OUTPUT, "tool result", prefix=True)
    except ValueError:
        return out
    text = blob.decode("utf-8", errors="replace")
    return CallOutput(reply=out.reply, tool=out.tool, text=text, file=out.file, not_found=out.not_found)


def _usable_state(rt: Runtime, agent: Any, raw: Any, obs: engine.Observation, source: str) -> dict | None:
    """The state to run: the one this module wrote last pass as it is, else ``raw`` read into a new value
    (restored, migrated, set by others), or None (rejected with one warning, or a run that ended)."""
    if raw is None:
        return None
    if is_legacy_linear(raw):
        return _migrate(rt, agent, raw, obs, source)
    if raw is getattr(agent, CHECKED_ATTR, None):
        state, problem = raw, ""
    else:
        state, problem = passes.trusted(rt, raw)
    if state is None:
        _reject(rt, agent, raw, problem, source)
        return None
    if state.get("status", "active") != "active":
        if source != f"agent.{STATE_ATTR}" and isinstance(state.get("run_id"), str):  # ended before a restart
            _reconcile(rt, agent, state)  # (its last lines, when the stop came before they were written)
            setattr(agent, "_htn_last_run", state)
        _clear_state(agent)  # a run that ended in an earlier pass
        return None
    return upgrade(state)


def _reject(rt: Runtime, agent: Any, raw: Any, problem: str, source: str) -> None:
    """A state that cannot be trusted ends its run: one warning naming where it was found and why, an end
    event in the run's audit log, and the last-run record."""
    _log(agent, "warning", f"[HTN] Ignored an unusable workflow state in {source} ({problem}): {_excerpt(raw)}; it "
                           "was kept in agent._htn_state_rejected and no workflow is active")
    setattr(agent, "_htn_state_rejected", raw)
    run_id = raw.get("run_id") if isinstance(raw, dict) else None
    plan_id = raw.get("plan_id") if isinstance(raw, dict) else None
    end = {"type": "state_rejected", "turn": 0, "seq": 1, "reason": f"{problem} (in {source})"}
    record = {"status": "rejected", "reason": end["reason"], "run_id": run_id if isinstance(run_id, str) else "",
              "plan_id": plan_id if isinstance(plan_id, str) else "", "events": [end]}
    seq, turn = (_count(raw.get(k)) if isinstance(raw, dict) else None for k in ("seq", "turn"))
    if record["run_id"] and seq is not None:  # the run's own log ends with the rejection, in sequence
        seq = max(seq, _logged_seq(rt, agent, record["run_id"]))  # (after what the log holds: no seq twice)
        end["seq"], end["turn"] = seq + 1, turn or 0
        version = raw.get("plan_version")
        _audit(rt, agent, dict(record, plan_version=version if isinstance(version, str) else "", audit_seq=seq))
    setattr(agent, "_htn_last_run", record)
    if record["run_id"]:  # the run's card says it ended, and why
        name = raw.get("plan_name")
        _card(rt, agent, dict(record, plan_name=name if isinstance(name, str) else record["plan_id"]), search=True)
    _clear_state(agent)


def _count(value: Any) -> int | None:
    """A counter read from a state that was refused: a whole number of 0 up to 2^63, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 63 else None


def _migrate(rt: Runtime, agent: Any, raw: dict, obs: engine.Observation, source: str) -> dict | None:
    plan = rt.lookup(raw["plan_id"], "")
    name = raw["plan_name"] if isinstance(raw.get("plan_name"), str) else raw["plan_id"]
    if plan is not None and plan.mode == "linear" and plan.total_steps == raw.get("total_steps", plan.total_steps):
        state, problem = migrate_legacy(raw, plan, obs.monologue, obs.pass_key, obs.global_turn)
        if state is None:
            _reject(rt, agent, raw, f"a previous selector's state: {problem}", source)
            return None
        _log(agent, "info", f"[HTN] Continued plan '{name}' from the previous selector's state "
                            f"at step {state['current_step'] + 1}")
        return state
    why = "no longer in the library" if plan is None else "now a different plan (graph or other steps)"
    _log(agent, "warning", f"[HTN] Ended plan '{name}' left by the previous selector at step "
                           f"{max(0, raw['current_step']) + 1}: the plan is {why}; send the request again "
                           f"to start it under the graph engine")
    setattr(agent, "_htn_state_rejected", raw)
    _clear_state(agent)
    return None


def _excerpt(value: Any) -> str:
    text = json.dumps(value[:201]) if isinstance(value, str) else as_text(value, 201)
    return text[:200] + ("..." if len(text) > 200 else "")


# ── applying ────────────────────────────────────────────────────────────────


def _apply(rt: Runtime, agent: Any, loop_data: Any, state: dict | None, fx: engine.Effects) -> None:
    passes.apply(Port(rt, agent, loop_data), state, fx)


class Port:
    """Agent-Zero as the session's host (``session.port.Host``) for one hook call: the agent, its loop data and the
    runtime of its library.  The hook calls read the pass themselves (two hooks per pass, ``_prepare``); the
    effects go through here."""

    __slots__ = ("rt", "agent", "loop_data")

    def __init__(self, rt: Runtime, agent: Any, loop_data: Any) -> None:
        self.rt, self.agent, self.loop_data = rt, agent, loop_data

    def load_state(self) -> Any:
        raw = getattr(self.agent, STATE_ATTR, None)
        return raw if raw is not None else _saved_state(self.agent)

    def read_pass(self, state: Any) -> engine.Observation | None:
        return observe(self.agent, self.loop_data, engine.PROMPTS_AFTER, state)

    def look(self, path: str) -> str:
        return file_fact(path)

    def log(self, level: str, text: str) -> None:
        _log(self.agent, level, text)

    def save_state(self, state: dict | None, ended: dict | None) -> None:
        """The state on the agent (the supervisor reads an escalation in the pass it ended) and in the chat's data,
        the audit log and checkpoint, the run's card (and its picture when it ended), a branch's parent told."""
        rt, agent = self.rt, self.agent
        if ended is not None:
            setattr(agent, "_htn_last_run", ended)
            _audit(rt, agent, ended)
        if state is None:
            _clear_state(agent)
            if ended is not None and ended.get("status") == "escalated":
                setattr(agent, STATE_ATTR, ended)
        else:
            setattr(agent, STATE_ATTR, state)
            setattr(agent, CHECKED_ATTR, state)
            _audit(rt, agent, state)
        _save(agent, state)
        if ended is not None and (state is None or ended.get("run_id") != state.get("run_id")):
            _card(rt, agent, ended)
            _draw_later(rt, agent, ended)
        if state is not None:
            _card(rt, agent, state)
        mine = branches.branch_of(agent)
        if mine is not None:
            _branch_reported(rt, mine, state if state is not None else ended)

    def inject(self, text: str) -> None:
        extras = getattr(self.loop_data, "extras_temporary", None)
        if isinstance(extras, dict):
            extras[CONTEXT_KEY] = text

    def set_pace(self, level: str) -> None:
        setattr(self.agent, PACE_ATTR, level)

    def report(self, request: dict[str, Any]) -> None:
        _report(self.rt, self.agent, request)


def _clear_state(agent: Any) -> None:
    if getattr(agent, STATE_ATTR, None) is not None:
        setattr(agent, STATE_ATTR, None)
    _save(agent, None)


def _save(agent: Any, state: dict | None) -> None:
    """Keep the live state in the agent's data: Agent-Zero writes it to chat.json every pass."""
    try:
        if state is not None or agent.get_data(DATA_KEY) is not None:
            agent.set_data(DATA_KEY, state)
    except Exception:  # noqa: BLE001 - an agent without data cannot persist; the run still works in memory
        pass


def _audit(rt: Runtime, agent: Any, state: dict) -> None:
    """Write the run's checkpoint, then its new audit lines (a log is never ahead of its checkpoint: see audit.py);
    lines that cannot be written, or whose checkpoint cannot be, go to the spool saved with the chat, so the
    state never counts a line as written that is not in a file or in the spool."""
    taken = rt.audit.take(state, _chat_id(agent), int(getattr(agent, "number", 0) or 0))
    if taken is None:
        return
    path, blob, seq = taken
    logged(state, seq)  # from here the lines are in the file, or in the spool
    done = state.get("status", "active") != "active"
    problem = rt.audit.checkpoint(path, state)
    if problem and done:
        problem = ""  # an ended run is resumed by nobody: its last lines need no checkpoint before them
    if problem:
        _log_once(rt, agent, "warning", f"[HTN] Audit log not written: the checkpoint of run {state.get('run_id')} "
                                        f"at {checkpoint_path(path)} cannot be written ({problem}); the workflow "
                                        "continues, and its lines are kept with the chat and written once it can be "
                                        "(make its folder writable and the file a regular one)",
                  key=f"checkpoint:{path}")
        spool = _spool_of(agent) or []
    else:
        spool = _flush_spool(rt, agent)  # what waited for a checkpoint or a writable folder: written first
        if not spool:
            try:
                rt.audit.write(path, blob, done)
                return
            except OSError as exc:
                _spool_warning(rt, agent, path, exc)
    _keep(rt, agent, spool or [], [path, blob.decode("utf-8", "replace"), done])


def _spool_warning(rt: Runtime, agent: Any, path: str, exc: OSError) -> None:
    _log_once(rt, agent, "warning", f"[HTN] Audit log {path} not written ({exc.strerror or exc}); the workflow "
                                    "continues, and its lines are kept with the chat and written once it can be",
              key=f"audit:{path}")


def _spool_of(agent: Any) -> list | None:
    try:
        spool = agent.get_data(SPOOL_KEY)
    except Exception:  # noqa: BLE001 - an agent without data has no spool
        return None
    return spool if isinstance(spool, list) else None


def _flush_spool(rt: Runtime, agent: Any) -> list | None:
    """Write the spooled lines, oldest first, as far as the folder allows; the rest stays spooled."""
    try:
        spool = agent.get_data(SPOOL_KEY)
    except Exception:  # noqa: BLE001 - an agent without data has no spool
        return None
    if not spool:
        return None
    if not isinstance(spool, list):
        _log(agent, "warning", f"[HTN] The saved audit spool ({SPOOL_KEY}) is not a list; it was set aside in "
                               "agent._graph_engine_spool_rejected")
        setattr(agent, "_graph_engine_spool_rejected", spool)
        agent.set_data(SPOOL_KEY, None)
        return None
    lines = 0
    while spool:
        entry = spool[0]
        try:
            path, text, done = entry
            rt.audit.write(str(path), str(text).encode("utf-8"), bool(done))
        except (TypeError, ValueError):
            pass  # a damaged entry: dropped below
        except OSError as exc:
            _spool_warning(rt, agent, str(path), exc)
            break
        else:
            lines += str(text).count("\n")
        spool.pop(0)
    agent.set_data(SPOOL_KEY, spool or None)
    if lines:
        for key in [k for k in rt.logged_once if k.split("|", 1)[-1].startswith("audit:")]:
            rt.logged_once.discard(key)  # a new failure is said again
        _log(agent, "info", f"[HTN] Audit log: {lines} line(s) kept while {rt.audit.root} could not be written "
                            "are written now")
    return spool


def _keep(rt: Runtime, agent: Any, spool: list, entry: list) -> None:
    spool.append(entry)
    total = sum(str(e[1]).count("\n") for e in spool if isinstance(e, list) and len(e) == 3)
    dropped = 0
    while total > MAX_SPOOL_LINES and len(spool) > 1:
        lost = spool.pop(0)
        n = str(lost[1]).count("\n") if isinstance(lost, list) and len(lost) == 3 else 0
        total, dropped = total - n, dropped + n
    if dropped:
        _log(agent, "warning", f"[HTN] Audit log: {dropped} line(s) dropped: {rt.audit.root} has not been writable "
                               f"for more than {MAX_SPOOL_LINES} lines; the newest are kept with the chat")
    try:
        agent.set_data(SPOOL_KEY, spool)
    except Exception:  # noqa: BLE001 - an agent without data cannot keep them: said once
        _log_once(rt, agent, "warning", f"[HTN] Audit log: {total} line(s) could not be written nor kept",
                  key="audit:nodata")


def _report(rt: Runtime, agent: Any, request: dict) -> None:
    """An immediate SALUTE report, when the org kernel is active and the role's doctrine asks for it."""
    if not os.path.isfile(os.path.join(rt.org_dir, "active.json")):
        return
    role = getattr(agent, "_org_active_role", None)
    role = role if isinstance(role, dict) else {}
    doctrine = role.get("doctrine") if isinstance(role.get("doctrine"), dict) else {}
    if doctrine.get(f"report_on_{request.get('on', 'failure')}", True) is False:
        return
    org = getattr(agent, "_org_active", None)
    org = org if isinstance(org, dict) else {}
    level = request.get("pace_level") or getattr(agent, PACE_ATTR, "") or "primary"
    level = level if isinstance(level, str) else "primary"
    report = build_report(state=request["state"], pace_level=level, role=role, org=org,
                          agent_number=int(getattr(agent, "number", 0) or 0), bst_domain=_bst_domain(agent),
                          now=datetime.now(timezone.utc), status_state=request.get("status_state", ""))
    try:
        role_id = report["unit"]["role_id"]  # a file name: no folder parts
        path = write_report(os.path.join(rt.org_dir, "reports"), role_id if SAFE_NAME.fullmatch(role_id) else
                            "unknown", report)
    except OSError as exc:
        _log(agent, "warning", f"[HTN] SALUTE report not written to {rt.org_dir}/reports ({exc}); "
                               "check the folder is writable")
        return
    _log(agent, "info", f"[HTN] SALUTE report written: {path}")


# ── the workflow card and the picture of a run ──────────────────────────────


def _card(rt: Runtime, agent: Any, state: dict, picture: str = "", search: bool = False) -> None:
    """Create the run's card, or update it in place when what it shows changed; a log without Agent-Zero's
    item API turns cards off with one warning.  ``search``: the card may be one restored with the chat's log."""
    shown = getattr(agent, CARD_ATTR, None)
    if shown is False or not settings.active("card") or state.get("branch"):
        return  # (a branch is shown on its parent's card)
    run_id = state.get("run_id", "")
    picture = picture or state.get("picture", "")
    pace = getattr(agent, PACE_ATTR, "")
    signature = (state.get("seq"), state.get("status"), pace if isinstance(pace, str) else "", picture,
                 state.get("pressed"))
    same_run = isinstance(shown, list) and len(shown) == 4 and shown[0] == run_id
    if same_run and shown[2] == signature and _still_logged(agent, shown[1]):
        return  # nothing changed: nothing to do
    plan = rt.lookup(state.get("plan_id", ""), state.get("plan_version", ""))
    heading, content, kvps = _card_parts(plan, state, pace if isinstance(pace, str) else "", picture)
    if same_run:
        item = shown[1]
    elif search or any(isinstance(e, dict) and e.get("type") == "run_resumed" for e in state.get("events") or ()):
        item = _logged_card(agent, run_id)  # the card Agent-Zero restored with the chat
    else:
        item = None  # a run started in this process: a new card
    try:
        if item is not None and _still_logged(agent, item):
            _update_card(item, heading, content, kvps, shown[3] if same_run else None)
        else:
            item = page.log(agent.context.log, _card_type(kvps), heading, content, kvps)
            if picture_setting() != "off":
                _display.start()  # the run's picture will need it: started now, not in the pass that ends it
        if not callable(getattr(item, "update", None)):
            raise TypeError(f"log() returned {type(item).__name__}, which has no update method")
    except Exception as exc:  # noqa: BLE001 - a log API of another shape: no card, the loop goes on
        setattr(agent, CARD_ATTR, False)
        _log(agent, "warning", f"[HTN] Workflow card turned off for this agent: Agent-Zero's log API is not the "
                               f"one expected ({type(exc).__name__}: {exc}); the workflow goes on and its log "
                               "lines are still written")
        return
    setattr(agent, CARD_ATTR, [run_id, item, signature, (heading, content, kvps)])


def _update_card(item: Any, heading: str, content: str, kvps: dict, sent: tuple | None) -> None:
    """Update the card with what changed since ``sent`` (what this process last gave it): Agent-Zero's log
    masks every string it is given for secrets, each through an ``@extensible`` lookup (about 10 µs each in
    the real loop), so unchanged texts and key-value pairs are not sent again (pairs given as keywords are
    merged into the item's table, in both Agent-Zero layouts)."""
    if sent is None or set(sent[2]) != set(kvps):
        page.update(item, type=_card_type(kvps), heading=heading, content=content, kvps=kvps)
        return
    changed = {k: v for k, v in kvps.items() if sent[2][k] != v}
    page.update(item, type=_card_type(kvps), heading=None if heading == sent[0] else heading,
                content=None if content == sent[1] else content, **changed)


def _card_parts(plan: Plan | None, state: dict, pace: str, picture: str) -> tuple[str, str, dict]:
    """The card's heading, text and table; on v1.x the table also carries the data the pack's web UI extension
    draws the run from."""
    heading, content, kvps = card.text(plan, state, pace, picture)
    if "helpers.extension" in sys.modules:
        kvps = {**kvps, **view.view(plan, state, pace, picture)}
    return heading, content, kvps


def _card_type(kvps: dict) -> str:
    """The card's log item type: the component's, when it carries the component's data; else a plain info item."""
    return view.TYPE if view.KEY in kvps else "info"


def _still_logged(agent: Any, item: Any) -> bool:
    """False when the chat's log was reset since the item was made (its updates would go nowhere)."""
    logs = getattr(getattr(getattr(agent, "context", None), "log", None), "logs", None)
    no = getattr(item, "no", None)
    if not isinstance(logs, list) or not isinstance(no, int):
        return True  # a log that does not say: trust the item
    return 0 <= no < len(logs) and logs[no] is item


def _logged_card(agent: Any, run_id: str) -> Any:
    """After a restart or a chat reload, the card Agent-Zero restored with the chat's log, found by run id."""
    logs = getattr(getattr(getattr(agent, "context", None), "log", None), "logs", None)
    for item in reversed(logs if isinstance(logs, list) else []):
        kvps = getattr(item, "kvps", None)
        if isinstance(kvps, dict) and kvps.get("Run") == run_id and \
                str(getattr(item, "heading", "")).startswith(card.HEADING):
            return item
    return None


DRAW_POLL = 0.05  # seconds between two looks of the drawing thread at its list of pictures to draw


class _Display:
    """One background thread that draws the pictures of ended runs, in order: Graphviz takes tens of
    milliseconds, and the pass that ends a run does not wait for it.  The pass only appends to a list; the
    thread looks at it every DRAW_POLL seconds and takes a picture at least DRAW_POLL seconds old, so that no
    pass wakes it: a thread woken mid-pass takes the interpreter from the loop (1-5 ms a pass measured in the
    real loop on a busy machine, when the card's updates went to a woken thread; they stay in the pass)."""

    def __init__(self) -> None:
        self.jobs: collections.deque = collections.deque()
        self.pending = 0  # appended and not yet done
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def start(self) -> None:
        """Start the thread when it is not running (starting one waits for it: 1-10 ms on a busy machine, so
        the pass that makes a run's card starts it, not the pass that ends the run)."""
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._work, name="graph-engine display", daemon=True)
                self.thread.start()

    def submit(self, job: Any, *args: Any) -> None:
        with self.lock:
            self.pending += 1
            self.jobs.append((time.monotonic(), job, args))
        self.start()

    def _work(self) -> None:
        while True:
            time.sleep(DRAW_POLL)
            while self.jobs and time.monotonic() - self.jobs[0][0] >= DRAW_POLL:
                _, job, args = self.jobs.popleft()
                try:
                    job(*args)
                except Exception:  # noqa: BLE001 - each job logs its own failures; the thread goes on
                    pass
                finally:
                    with self.lock:
                        self.pending -= 1

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.pending and time.monotonic() < deadline:
            time.sleep(0.005)
        return not self.pending


_display = _Display()


def wait_for_display(timeout: float = 30.0) -> bool:
    """Wait until the pictures handed to the display thread are written and named on their cards (tests, and
    a process about to exit); False when some are still pending after ``timeout`` seconds."""
    return _display.wait(timeout)


def _draw_later(rt: Runtime, agent: Any, state: dict) -> None:
    """Draw the picture of an ended run off the loop: Graphviz takes tens of milliseconds, and the pass that
    ends a run does not wait for it.  When the picture is written, the run's card names it."""
    plan = rt.lookup(state.get("plan_id", ""), state.get("plan_version", ""))
    if plan is None or not state.get("run_id") or picture_setting() == "off" or state.get("branch"):
        return
    shown = getattr(agent, CARD_ATTR, None)
    item = shown[1] if isinstance(shown, list) and shown[0] == state["run_id"] else None
    # the thread works on a copy (the pass goes on with the state) and in a copy of this hook call's context,
    # so that the settings the call read (the picture setting) are the ones it draws with
    _display.submit(contextvars.copy_context().run, _draw, rt, agent, plan, dict(state),
                    list(state.get("events") or ()), item)


def _draw(rt: Runtime, agent: Any, plan: Plan, state: dict, events: list[dict], item: Any) -> None:
    """The drawing thread: write the picture, then name it on the run's card.  Never raises."""
    try:
        path = _picture(rt, agent, plan, state, events)
        last = getattr(agent, "_htn_last_run", None)
        if path and isinstance(last, dict) and last.get("run_id") == state.get("run_id"):
            setattr(agent, "_htn_last_run", dict(last, picture=path))  # a new record: readers keep a whole one
        if path and item is not None and _still_logged(agent, item):
            pace = getattr(agent, PACE_ATTR, "")
            heading, content, kvps = _card_parts(plan, state, pace if isinstance(pace, str) else "", path)
            page.update(item, type=_card_type(kvps), heading=heading, content=content, kvps=kvps)
    except Exception as exc:  # noqa: BLE001 - a thread's failure is one log line, never a crash
        _log_once(rt, agent, "warning", f"[HTN] Picture of the run {state.get('run_id')} not drawn "
                                        f"({type(exc).__name__}: {exc}); `graph-engine render --trace` draws it "
                                        "from the audit log", key=f"picture-thread:{type(exc).__name__}")


def _picture(rt: Runtime, agent: Any, plan: Plan, state: dict, events: list[dict]) -> str:
    """The picture of an ended run beside its audit log; its path, or '' when it cannot be written."""
    log_path = rt.audit.path(_chat_id(agent), state["run_id"])
    events = _run_events(log_path, events)
    path = log_path[: -len(".jsonl")] + ".svg"
    try:
        suffix, text = run_picture(plan, events)
        path = log_path[: -len(".jsonl")] + suffix
        os.makedirs(os.path.dirname(path), exist_ok=True)
        replace_file(path, text.encode("utf-8"))
    except (OSError, ValueError) as exc:
        _log_once(rt, agent, "warning", f"[HTN] Picture of the run not written to {path} "
                                        f"({getattr(exc, 'strerror', None) or exc}); `graph-engine render "
                                        f"--trace` draws it from the audit log", key=f"picture:{rt.audit.root}")
        return ""
    pictured(state, path)
    return path


def _run_events(log_path: str, newest: list[dict]) -> list[dict]:
    """The run's events: its audit log (every line), then those of the state's (``newest``) that are newer."""
    events: list[dict] = []
    try:
        events = list(read_lines(log_path))
    except ValueError:  # no log yet, or not a regular file
        pass
    seen = max((e.get("seq", 0) for e in events if isinstance(e.get("seq"), int)), default=0)
    return events + [e for e in newest if isinstance(e.get("seq"), int) and e["seq"] > seen]


def _chat_id(agent: Any) -> str:
    return str(getattr(getattr(agent, "context", None), "id", "") or "no-chat")


# ── logging ─────────────────────────────────────────────────────────────────


def _log(agent: Any, level: str, text: str) -> None:
    try:
        page.log(agent.context.log, level, text[:120], text)
    except Exception:  # noqa: BLE001 - a missing log must not stop the agent
        pass


def _log_once(rt: Runtime, agent: Any, level: str, text: str, key: str = "") -> None:
    """Said once to each chat that meets it (a warning that matters to a chat reaches every chat)."""
    if rt.once(f"{_chat_id(agent)}|{key or text}"):
        _log(agent, level, text)


IMPORTED = True  # the module's last line: one that another thread is still importing lacks it (the loaders check)
