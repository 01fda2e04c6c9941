"""The Agent-Zero port: one hook call of a pass read into the session's pieces (``session.passes``), the step, and
its effects applied through ``Port``; controls pressed in the web UI; a fork's branches run while the hook waits.

Used by the three hook files through ``graph_engine_loader``.  ``run_hook`` never raises: any failure becomes one
log line naming what failed and where, and the agent's loop goes on.  What it reads is in ``reading``, how a run is
kept (the agent, the chat's data, the audit log) in ``keeping``, the run's card and picture in ``cards``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Callable

from . import cards, keeping, lines, reading
from . import branches, composed, pressed
from ...boundary import settings
from ...boundary.reading import file_fact
from ...core import control, engine
from ...core.state import DATA_KEY, upgrade
from ...session import asking
from ...session import passes
from ...session.runtime import Runtime
from ...texts import render


CONTEXT_KEY = "htn_active_plan"
LIBRARY_NAME = "htn_plan_library.json"

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
        if reading.companion_handled(agent, loop_data, hook):
            return  # this pass is judged and shown, and its settings, library and spool were seen by the
            # companion's call; what this hook would render reaches only the next call, which the companion renders
        cfg = settings.current(agent, cards.display.submit)
        token = settings.ACTIVE.set(cfg)
        rt = runtime or runtime_for(ext_file, cfg)
        for line in cfg.problems:
            lines.log_once(rt, agent, "warning", line)
        told = getattr(agent, TOLD_ATTR, None)
        if told:
            setattr(agent, TOLD_ATTR, None)
        unread = reading.unread_request(loop_data)
        if unread:  # the monologue's own message, which no hook read: decided first, as its first pass would have
            await _decide(rt, agent, loop_data, hook, cfg, _prepare(rt, agent, loop_data, hook, cfg, request=unread),
                          unread)
        prepared = _prepare(rt, agent, loop_data, hook, cfg)
        if prepared is None:  # most passes: no run, and no message that could start one
            if hook == engine.PROMPTS_AFTER:  # the selector's call of this pass would find the same: it returns
                setattr(agent, reading.COMPANION_ATTR, (loop_data, reading.iteration_of(loop_data)))
        elif prepared.question is None:
            _step(rt, agent, loop_data, hook, prepared)
        else:
            await _decide(rt, agent, loop_data, hook, cfg, prepared)
        if branches.waiting(getattr(agent, keeping.STATE_ATTR, None)) and branches.branch_of(agent) is None:
            await _run_branches(rt, agent, loop_data, hook, cfg)
        if told:
            _tell(loop_data, told)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - the agent's loop must go on
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        where = f"{Path(frame.filename).name}:{frame.lineno}" if frame else "?"
        lines.log_once(rt or lines.NO_RUNTIME, agent, "error",
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
                                     lambda level, text: lines.log(agent, level, text))
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


async def _run_branches(rt: Runtime, agent: Any, loop_data: Any, hook: str, cfg: settings.Settings) -> None:
    """The run rests on a fork: its branches run in subordinate agents while this hook call waits (the parent
    spends no model call), then the same pass is stepped again, so the fan-in routes and this call's context
    shows the step after it; unless the person said "stop the workflow" meanwhile (the parent's loop takes it)."""
    state = getattr(agent, keeping.STATE_ATTR)
    plan = rt.lookup(state["plan_id"], state.get("plan_version", ""))
    if plan is None:
        return  # the engine ends the run on its next pass, with its own message

    def reported() -> None:
        if getattr(agent, keeping.STATE_ATTR, None) is state:
            keeping.written(rt, agent, state)

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
        why = await branches.run(agent, state, plan, keeping.STATE_ATTR, reported, lambda level, text: lines.log(agent, level, text),
                                 press_now)
    finally:
        agent.__dict__[pressed.WAITING_ATTR] = False
    if why == "pressed":  # stop, pause, go back or restart: the branches' agents are stopped; this call is told
        apply_pressed(agent, rt, loop_data, hook)
        return
    if why:
        return
    if getattr(agent, keeping.STATE_ATTR, None) is not state:
        return
    prepared = _prepare(rt, agent, loop_data, hook, cfg, joined=True)
    if prepared is not None:
        _step(rt, agent, loop_data, hook, prepared)


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


async def tool_call(agent: Any, method: str, args: Any, ext_file: str) -> str:
    """The ``graph_workflow`` tool (the plugin's ``tools/graph_workflow.py``): what the agent reads.  Never raises."""
    return await composed.tool_call(agent, method, args, lambda cfg: runtime_for(ext_file, cfg))


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
        cfg = settings.current(agent, cards.display.submit)
        token = settings.ACTIVE.set(cfg)
        rt = rt or runtime_for(ext_file or _SELECTOR_FILE, cfg)
        for p in taken:
            p.settle(_apply_one(rt, agent, p, loop_data, hook, cfg))
    except Exception as exc:  # noqa: BLE001 - the agent's loop must go on
        for p in taken:
            p.settle(pressed.answer(p, "refused", f"Not applied: the workflow engine failed ({type(exc).__name__})."))
        lines.log_once(rt or lines.NO_RUNTIME, agent, "error", f"[HTN] Workflow engine error ({type(exc).__name__}: {exc}) "
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
    if p.kind in (*pressed.PROPOSING, "save"):  # a proposed workflow's card; Save on a written workflow's
        answer, told = (composed.save_pressed if p.kind == "save" else composed.pressed_proposal)(rt, agent, p)
        if told and not hook:
            setattr(agent, TOLD_ATTR, told)
        elif told:
            _tell(loop_data, told)
        if p.kind == "approve" and answer["status"] == "applied" and not hook:
            _go_on_when_idle(agent, p.kind, None)
        return answer
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
    raw = getattr(agent, keeping.STATE_ATTR, None)
    restored = raw is None
    if restored:
        raw = keeping.saved_state(agent)
        if raw is None:
            return None
        raw = keeping.newest_record(rt, agent, raw)
    state = raw if raw is getattr(agent, keeping.CHECKED_ATTR, None) else passes.trusted(rt, raw)[0]
    if not isinstance(state, dict) or state.get("status", "active") != "active" or state.get("branch"):
        return None
    if restored:
        state = keeping.reconcile(rt, agent, upgrade(state))
        state = keeping.resume(rt, agent, state) if state is not None else None
    return state


def _pressed_observation(agent: Any, loop_data: Any, hook: str, state: dict, cfg: settings.Settings
                         ) -> engine.Observation:
    """The observation a pressed control is applied with: the hook call's own, or (between passes) one that names
    the run's last pass, so that the next pass counts and judges as it would have."""
    concurrent, why = _concurrent(agent, cfg)
    if hook:
        obs = reading.observe(agent, loop_data, hook)
        obs.user_message, obs.output = "", None
    else:
        monologue, _, iteration = str(state.get("last_pass", "")).rpartition(":")
        seen = state.get("reply_seen")
        obs = engine.Observation(hook=engine.PRESSED, monologue=monologue,
                                 iteration=int(iteration) if iteration.isdigit() else 0,
                                 reply_mark=seen[1] if isinstance(seen, list) and len(seen) == 3 else None,
                                 global_turn=int(state.get("started_turn", 0)) + int(state.get("turn", 0)))
    obs.now, obs.concurrent, obs.serial_reason = reading.now(), concurrent, why
    return obs


def _tell(loop_data: Any, text: str) -> None:
    """What a pressed control did between passes, above whatever this call is shown."""
    extras = getattr(loop_data, "extras_temporary", None)
    if isinstance(extras, dict):
        shown = extras.get(CONTEXT_KEY)
        extras[CONTEXT_KEY] = text if not shown else f"{text}\n\n{shown}"


WAKE_POLL = 0.25  # seconds between two looks at whether the chat's agent is at work

WAKE_LIMIT = 3600.0  # the longest a control waits for the agent's work to end before it stops looking


def _go_on_when_idle(agent: Any, kind: str, state: dict | None) -> None:
    """A control that moves the run on (resume, skip, go back, retry, restart; approve: a proposed workflow, no run
    yet, ``state`` None) pressed while the chat's agent is idle, or while it finishes a turn that will not see it:
    once the agent is idle and no call has been told of it (or taken the approved workflow), the agent is woken, as
    Agent-Zero's Nudge wakes it, with a system message (not a request of the person's)."""
    context = getattr(agent, "context", None)
    loop = pressed.chat_loop(context)
    if loop is None or not callable(getattr(context, "communicate", None)):
        return
    run_id, turn = (state.get("run_id"), state.get("turn")) if state is not None else (None, None)

    async def wake() -> None:
        waited = 0.0
        while _working(context) and waited < WAKE_LIMIT:
            await asyncio.sleep(WAKE_POLL)
            waited += WAKE_POLL
        current = getattr(agent, keeping.STATE_ATTR, None)
        if state is None:
            if _working(context) or agent.__dict__.get(composed.OFFER_ATTR) is None:
                return  # a pass took the approved workflow meanwhile
        elif _working(context) or not (isinstance(current, dict) and current.get("run_id") == run_id
                                       and current.get("turn") == turn and current.get("status") == "active"):
            return  # a call has been told, or the run changed meanwhile
        try:
            cls = sys.modules[type(agent).__module__].UserMessage
            context.communicate(cls(message=json.dumps({"system_message": pressed.wake_text(kind)}),
                                    attachments=[]))
        except Exception as exc:  # noqa: BLE001 - the run waits for the person's next message instead
            lines.log(agent, "warning", f"[HTN] The agent could not be told to go on after a control ({type(exc).__name__}: "
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
    parent_state = getattr(parent, keeping.STATE_ATTR, None)
    if state is not None and isinstance(parent_state, dict) and engine.branch_progress(parent_state, branch_id, state):
        keeping.written(rt, parent, parent_state)


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
        cards.display.start()  # the thread a pass would start (pictures, settings re-read off the loop)
    except Exception as exc:  # noqa: BLE001 - the first pass does the work instead
        lines.log_once(rt or lines.NO_RUNTIME, agent, "warning",
                  f"[HTN] The workflow engine's warm-up failed ({type(exc).__name__}: {exc}); the first message "
                  "loads the plan library instead. Please report it", key=f"warm-up:{type(exc).__name__}")


class _Pass:
    """What a hook call read before the step: the library, the state to run, the observation, and the question
    for the utility model (None: none)."""

    __slots__ = ("library", "state", "obs", "question", "told")

    def __init__(self, library: Any, state: dict | None, obs: engine.Observation, question: Any,
                 told: str = "") -> None:
        self.library, self.state, self.obs, self.question, self.told = library, state, obs, question, told


def _prepare(rt: Runtime, agent: Any, loop_data: Any, hook: str, cfg: settings.Settings,
             joined: bool = False, request: str | None = None) -> _Pass | None:
    """What the step needs: the library, the state, the observation (``request``: the monologue's own message,
    read at a later pass than its first)."""
    library = passes.refresh(rt, lambda level, text: lines.log(agent, level, text),
                             lambda level, text: lines.log_once(rt, agent, level, text))
    if isinstance(getattr(agent, "data", None), dict) and agent.data.get(keeping.SPOOL_KEY):
        keeping.flush_spool(rt, agent)  # lines a folder refused earlier: written by the first pass that can
    raw_state = getattr(agent, keeping.STATE_ATTR, None)
    restored = False
    if raw_state is None:
        raw_state = keeping.saved_state(agent)
        restored = raw_state is not None
        if restored:
            raw_state = keeping.newest_record(rt, agent, raw_state)
    if raw_state is None:
        words = reading.new_words(rt, loop_data, request)
        if not reading.may_start(rt, library, words) and not composed.wanted(agent, words):
            return None  # no run, and no user message that could start one: nothing can happen in this pass
    problems = []  # a branch's agent takes no message; a pass stepped again has decided its own
    quiet = joined or (isinstance(raw_state, dict) and bool(raw_state.get("branch")))
    obs = reading.observe(agent, loop_data, hook, raw_state, problems, request, quiet, _concurrent(agent, cfg))
    for line in problems:
        lines.log_once(rt, agent, "warning", line)
    if keeping.ended_this_pass(raw_state, obs):
        return None  # an escalated run stays readable for the rest of the pass in which it ended
    source = f"the chat's saved {DATA_KEY}" if restored else f"agent.{keeping.STATE_ATTR}"
    state = keeping.usable_state(rt, agent, raw_state, obs, source)
    if state is not None and restored:
        state = keeping.reconcile(rt, agent, state)
    if state is not None and restored:
        state = keeping.resume(rt, agent, state)
    told = "" if quiet else composed.read(rt, agent, obs, state)
    passes.read_facts(rt, obs, state, file_fact)
    question = passes.matched(library, agent, obs, state is not None, cfg.utility_model)
    return _Pass(library, state, obs, question, told)


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
        setattr(agent, reading.CONTROL_ATTR, p.obs.message_id)
    _apply(rt, agent, loop_data, new_state, fx)
    if p.told:  # what the person's words about a proposed workflow did
        _tell(loop_data, p.told)
    if hook == engine.PROMPTS_AFTER:
        setattr(agent, reading.COMPANION_ATTR, (loop_data, p.obs.iteration))


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
        raw = getattr(self.agent, keeping.STATE_ATTR, None)
        return raw if raw is not None else keeping.saved_state(self.agent)

    def read_pass(self, state: Any) -> engine.Observation | None:
        return reading.observe(self.agent, self.loop_data, engine.PROMPTS_AFTER, state)

    def look(self, path: str) -> str:
        return file_fact(path)

    def log(self, level: str, text: str) -> None:
        lines.log(self.agent, level, text)

    def save_state(self, state: dict | None, ended: dict | None) -> None:
        """The state on the agent (the supervisor reads an escalation in the pass it ended) and in the chat's data,
        the audit log and checkpoint, the run's card (and its picture when it ended), a branch's parent told."""
        rt, agent = self.rt, self.agent
        if ended is not None:
            setattr(agent, "_htn_last_run", ended)
            keeping.audit(rt, agent, ended)
        if state is None:
            keeping.clear_state(agent)
            if ended is not None and ended.get("status") == "escalated":
                setattr(agent, keeping.STATE_ATTR, ended)
        else:
            setattr(agent, keeping.STATE_ATTR, state)
            setattr(agent, keeping.CHECKED_ATTR, state)
            keeping.audit(rt, agent, state)
        keeping.save(agent, state)
        if ended is not None and (state is None or ended.get("run_id") != state.get("run_id")):
            cards.show(rt, agent, ended)
            cards.draw_later(rt, agent, ended)
        if state is not None:
            cards.show(rt, agent, state)
        mine = branches.branch_of(agent)
        if mine is not None:
            _branch_reported(rt, mine, state if state is not None else ended)

    def inject(self, text: str) -> None:
        extras = getattr(self.loop_data, "extras_temporary", None)
        if isinstance(extras, dict):
            extras[CONTEXT_KEY] = text

    def set_pace(self, level: str) -> None:
        setattr(self.agent, reading.PACE_ATTR, level)

    def report(self, request: dict[str, Any]) -> None:
        keeping.salute(self.rt, self.agent, request)


IMPORTED = True  # the module's last line: one that another thread is still importing lacks it (the loaders check)
