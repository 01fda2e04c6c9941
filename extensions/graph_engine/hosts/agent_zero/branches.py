"""A fork's branches, run at the same time, each by a subordinate agent of its own (Agent-Zero v1.x).

The engine forks a run at a parallel node (``engine._fork``) and keeps each branch's state in the parent's
``fork``; this module starts the branches' agents and waits for them, in the hook call of the parent that met
the fork, so the parent spends no model call meanwhile (an ``await`` on the event loop: every other chat goes
on).  A branch's agent is ``Agent(number + 1, config, context)`` as ``call_subordinate`` makes one, started with
the branch's assignment and driven by the pack's own hooks, which run the branch's state like any run (checks,
retries, escalation); each of its passes is reported to the parent (``engine.branch_progress``), and its final
answer when its monologue returns (``engine.branch_returned``).  At most ``max_parallel`` run at once.

What the person writes while branches run goes to the parent (a branch's agent passes an intervention up): "stop
the workflow" stops every branch's agent at once; anything else waits for the branches and is then taken as
usual.  A branch's agent that answers before its branch is done is told to go on, twice at most; one that
raises fails its branch.  Never raises but for the parent's own cancellation, which stops the branches.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import importlib
import inspect
import sys
from typing import Any, Callable

from ...core import control, engine
from ...core.kinds import BRANCH_OUTCOMES
from ...texts import render

BRANCH_ATTR = "_graph_engine_branch"  # on a branch's agent: (the parent agent, the branch id)
NUDGES = 2  # times a branch's agent that answered too early is told to go on
POLL = 0.05  # seconds between two looks at the parent's pending message while branches run
SUPERIOR = "_superior"  # Agent.DATA_NAME_SUPERIOR in both layouts

MODEL_KEY = "_graph_engine_model"  # on a branch's agent: the chat model settings of the preset its branch names
STATE_ATTR_KEY = "_graph_engine_state_attr"  # on a branch's agent: the attribute its run state is in
AFTER_END_KEY = "_graph_engine_calls_after_end"  # on a branch's agent: its model calls since its branch ended
MAX_CALLS_AFTER_END = 3  # model calls a branch's agent may make after its branch ended before it is stopped

_CLASSES: dict[type, type] = {}


class Overdue(asyncio.CancelledError):
    """A branch's agent kept calling its model after its branch was done: its monologue is ended."""


class Supervised(asyncio.CancelledError):
    """A manager stopped its child (its stop condition held, or its cycles ran out): the child's monologue ends at
    its next model call."""


def _decided(agent: Any) -> str:
    """Why a branch's agent must stop now: its branch has an outcome in the parent's fork already ("" when not)."""
    mine = branch_of(agent)
    if mine is None:
        return ""
    fork = getattr(mine[0], agent.__dict__.get(STATE_ATTR_KEY, "_htn_state"), None)
    fork = fork.get("fork") if isinstance(fork, dict) else None
    for b in fork.get("branches", ()) if isinstance(fork, dict) else ():
        if b.get("id") == mine[1] and b.get("status") in BRANCH_OUTCOMES and b.get("status") != "stopped":
            return str(b.get("reason", ""))
    return ""


def unable(agent: Any) -> str:
    """Why this host cannot run branches in subordinate agents at once ("" when it can)."""
    if "helpers.extension" not in sys.modules:
        return "Agent-Zero v0.9.x runs one agent of a chat at a time"
    cls = type(agent)
    module = sys.modules.get(cls.__module__)
    if not (inspect.iscoroutinefunction(getattr(cls, "monologue", None))
            and callable(getattr(cls, "hist_add_user_message", None)) and hasattr(module, "UserMessage")
            and hasattr(agent, "config") and hasattr(agent, "context") and isinstance(getattr(agent, "number", 0), int)):
        return f"this agent ({cls.__name__}) cannot make subordinate agents"
    return ""


def branch_of(agent: Any) -> tuple[Any, str] | None:
    """(the parent agent, the branch id) of a branch's agent, else None."""
    found = getattr(agent, "__dict__", {}).get(BRANCH_ATTR)
    return found if isinstance(found, tuple) and len(found) == 2 else None


def waiting(state: Any) -> bool:
    """The run rests on a fork whose branches are not all done, and may run them now (not paused, not a start
    the selector has yet to confirm)."""
    return (isinstance(state, dict) and bool(state.get("fork")) and state.get("status", "active") == "active"
            and not state.get("paused") and not state.get("provisional")
            and any(b["status"] in ("pending", "running") for b in state["fork"]["branches"]))


def _branch_class(cls: type) -> type:
    """The parent's agent class, for a branch's agent: what the person writes to it goes to the parent."""
    found = _CLASSES.get(cls)
    if found is None:
        def _get(self: Any) -> Any:
            return None

        def _set(self: Any, message: Any) -> None:
            mine = branch_of(self)
            if message is not None and mine is not None:
                mine[0].intervention = message

        members: dict[str, Any] = {
            "intervention": property(_get, _set, doc="a branch's agent takes no message: the parent does"),
            "__module__": cls.__module__}
        if inspect.iscoroutinefunction(getattr(cls, "call_chat_model", None)):
            async def call_chat_model(self: Any, *args: Any, **kwargs: Any) -> Any:
                """Its model, until it has made MAX_CALLS_AFTER_END calls since its branch ended without
                answering: a model that never answers must not keep the chat's agent waiting for ever."""
                current = getattr(self, self.__dict__.get(STATE_ATTR_KEY, "_htn_state"), None)
                if isinstance(current, dict) and "child" in (current.get("branch") or {}):
                    why = _decided(self)
                    if why:
                        raise Supervised(why)
                if not (isinstance(current, dict) and current.get("status", "active") == "active"):
                    calls = self.__dict__[AFTER_END_KEY] = self.__dict__.get(AFTER_END_KEY, 0) + 1
                    if calls > MAX_CALLS_AFTER_END:
                        raise Overdue(f"{MAX_CALLS_AFTER_END} model calls after its branch was done, no answer")
                return await super(found, self).call_chat_model(*args, **kwargs)
            members["call_chat_model"] = call_chat_model
        if callable(getattr(cls, "get_chat_model", None)):
            def get_chat_model(self: Any, *args: Any, **kwargs: Any) -> Any:
                """The model of the preset its branch names (llm_model), else the chat's."""
                built = _built_model(self.__dict__.get(MODEL_KEY))
                return built if built is not None else super(found, self).get_chat_model(*args, **kwargs)
            members["get_chat_model"] = get_chat_model
        found = _CLASSES[cls] = type(f"Branch{cls.__name__}", (cls,), members)
    return found


def _subordinate(parent: Any, branch_id: str, state_attr: str, fit: dict[str, str], model: dict | None) -> Any:
    """A branch's agent, as call_subordinate makes one: the parent's settings with the branch's agent profile, and
    the chat model of the preset it names (``model``)."""
    config = parent.config
    if fit.get("profile"):
        try:
            config = dataclasses.replace(config, profile=fit["profile"])
        except TypeError:  # not a dataclass: a copy with the profile set
            config = copy.copy(config)
            config.profile = fit["profile"]
    sub = _branch_class(type(parent))(parent.number + 1, config, parent.context)
    sub.__dict__[BRANCH_ATTR] = (parent, branch_id)
    sub.__dict__[STATE_ATTR_KEY] = state_attr
    if model:
        sub.__dict__[MODEL_KEY] = model
    try:
        sub.set_data(SUPERIOR, parent)
    except Exception:  # noqa: BLE001 - an agent without data: the branch runs all the same
        pass
    return sub


def profiles(agent: Any) -> list[str] | None:
    """The agent profiles of the running Agent-Zero, the chat's project's included (None: it cannot say)."""
    try:
        subagents = importlib.import_module("helpers.subagents")
        project = None
        try:
            project = importlib.import_module("helpers.projects").get_context_project_name(agent.context)
        except Exception:  # noqa: BLE001 - no project: the global profiles
            pass
        return sorted(subagents.get_agents_dict(project))
    except Exception:  # noqa: BLE001 - an Agent-Zero without profiles to list
        return None


def preset_model(name: str) -> tuple[dict | None, str]:
    """(the chat model settings of the model preset named ``name``, by its name or its chat model's name; or None,
    why not)."""
    try:
        presets = importlib.import_module("plugins._model_config.helpers.model_config").get_presets()
    except Exception as exc:  # noqa: BLE001 - an Agent-Zero without model presets
        return None, f"this Agent-Zero has no model presets ({type(exc).__name__})"
    names = []
    for p in presets if isinstance(presets, list) else ():
        chat = p.get("chat") if isinstance(p, dict) else None
        if isinstance(chat, dict) and name in (p.get("name"), chat.get("name")):
            return chat, ""
        names.append(str(p.get("name", "")) if isinstance(p, dict) else "")
    return None, f"no model preset is named '{name}' or has it as its chat model (presets: {', '.join(names) or 'none'})"


def _built_model(settings: Any) -> Any:
    """The chat model of a preset's settings, as Agent-Zero's model configuration builds it; None when it cannot."""
    if not isinstance(settings, dict):
        return None
    try:
        config = importlib.import_module("plugins._model_config.helpers.model_config")
        models = importlib.import_module("models")
        mc = config.build_model_config(settings, models.ModelType.CHAT)
        return models.get_chat_model(mc.provider, mc.name, model_config=mc, **mc.build_kwargs())
    except Exception:  # noqa: BLE001 - the chat's model then (its settings were checked when the branch began)
        return None


def _chat_so_far(parent: Any) -> str:
    try:
        return str(parent.history.output_text(human_label="user", ai_label="assistant"))
    except Exception:  # noqa: BLE001 - a history without text: the assignment alone
        return ""


def _message(agent: Any, text: str) -> Any:
    cls = sys.modules[type(agent).__module__].UserMessage
    try:
        return cls(message=text, attachments=[])
    except TypeError:
        return cls(text)


def _said(message: Any) -> str:
    text = getattr(message, "message", message)
    return text if isinstance(text, str) else ""


async def run(parent: Any, state: dict[str, Any], plan: Any, state_attr: str, reported: Callable[[], None],
              log: Callable[[str, str], None], pressed: Callable[[], bool] = lambda: False) -> str:
    """Run the fork's branches that have no outcome; return "stopped" when the person's "stop the workflow" came
    meanwhile (their agents are stopped, the message is left for the parent's loop), "pressed" when a control
    pressed in the web UI that ends or suspends them came (``pressed()`` says so; their agents are stopped, the
    caller applies it), else "".  ``reported`` is called after each change of the parent's state (it saves and
    writes it); ``log`` says one line."""
    fork = state["fork"]
    gate = asyncio.Semaphore(max(1, int(fork.get("max_parallel", 1))))
    fork_node = plan.nodes.get(fork.get("node", ""))
    limit = fork_node.timeout if fork_node is not None else 0.0  # seconds each branch's agent may take (0: none)
    tasks: dict[str, asyncio.Task] = {}
    threads: dict[str, asyncio.Lock] = {}  # thread_id -> its turn: the branches of one thread take turns
    shared: dict[str, Any] = {}  # thread_id -> the one agent its branches run in
    known = profiles(parent) if any(engine.agent_fit(plan, fork["node"], b["id"])["profile"]
                                    for b in fork["branches"]) else None

    async def one(branch_id: str) -> None:
        fit = engine.agent_fit(plan, fork["node"], branch_id)
        thread = fit["thread_id"]
        async with (threads.setdefault(thread, asyncio.Lock()) if thread else contextlib.nullcontext()):
            async with gate:
                await branch(branch_id, fit, thread)

    async def branch(branch_id: str, fit: dict[str, str], thread: str) -> None:
        name = render.branch_name(plan, branch_id)
        started = engine.branch_started(state, branch_id)
        if started is None:
            return
        sub_state, again = started
        if sub_state.get("status", "active") != "active":  # it ended before a restart stopped its agent
            engine.branch_returned(state, branch_id, sub_state, "", "")
            reported()
            return
        if fit["profile"] and known is not None and fit["profile"] not in known:
            why = f"'{fit['profile']}' is no agent profile of this Agent-Zero (its profiles: {', '.join(known)})"
            engine.branch_returned(state, branch_id, None, "", why)
            log("warning", f"[HTN] Branch '{name}' of workflow '{plan.name}' did not start: {why}; fix the plan's "
                           "profile")
            reported()
            return
        model = None
        if fit["llm_model"]:
            model, why = preset_model(fit["llm_model"])
            if model is None:
                log("warning", f"[HTN] Branch '{name}' of workflow '{plan.name}' runs with the chat's model: {why}")
        if again:  # its agent was stopped (a restart): a new one goes on where the branch was
            engine.resumed(plan, sub_state, render)
        reported()
        sub = shared.get(thread) if thread else None
        if sub is None:
            sub = _subordinate(parent, branch_id, state_attr, fit, model)
            if thread:
                shared[thread] = sub
        else:  # the thread's agent, which ran its branches before this one, runs this one too
            sub.__dict__[BRANCH_ATTR] = (parent, branch_id)
            sub.__dict__.pop(AFTER_END_KEY, None)
        setattr(sub, state_attr, sub_state)
        sub.hist_add_user_message(_message(parent, render.branch_assignment(
            plan, sub_state, state, fit["fidelity"], _chat_so_far(parent) if fit["fidelity"] == "full" else "")))
        try:
            if limit:
                answer, problem = await asyncio.wait_for(_converse(sub, plan, state_attr, parent), limit)
            else:
                answer, problem = await _converse(sub, plan, state_attr, parent)
        except asyncio.TimeoutError:  # (its model never answered, or the branch took too long)
            answer, problem = "", f"no answer within {limit:g} s (the parallel node's timeout)"
            log("warning", f"[HTN] Branch '{name}' of workflow '{plan.name}': no "
                           f"answer within {limit:g} s; its agent was stopped and the branch fails")
        except Supervised as stopped:  # (raised by its own model call: its manager stopped it)
            answer, problem = "", ""
            log("info", f"[HTN] Workflow '{plan.name}': '{name}' stopped its child's agent: {stopped}")
        except Overdue:  # (raised by its own model calls: not a cancellation of this task)
            answer, problem = "", "its agent did not answer"
            log("warning", f"[HTN] Branch '{name}' of workflow '{plan.name}': its "
                           f"agent made {MAX_CALLS_AFTER_END} model calls after the branch was done without "
                           "answering; it was stopped, and the branch keeps its outcome")
        finally:  # done, failed or stopped: its terminals end with it (a thread's, after its last branch)
            if not thread:
                await _release(sub, log)
        final = _final(sub, state_attr, sub_state)
        outcome = engine.branch_returned(state, branch_id, final, answer if isinstance(answer, str) else "",
                                         problem)
        reported()
        if outcome and outcome != "success":
            log("warning", f"[HTN] Branch '{name}' of workflow '{plan.name}' "
                           f"ended: {outcome}")

    try:
        for b in fork["branches"]:
            if b["status"] in ("pending", "running"):
                tasks[b["id"]] = asyncio.ensure_future(one(b["id"]))
        while tasks and not all(t.done() for t in tasks.values()):
            await asyncio.wait(list(tasks.values()), timeout=POLL)
            for b in fork["branches"]:  # a manager stopped its child (its stop condition, its cycles)
                task = tasks.get(b["id"])
                if task is not None and not task.done() and b["status"] in BRANCH_OUTCOMES:
                    task.cancel()
                    log("info", f"[HTN] Workflow '{plan.name}': '{render.branch_name(plan, b['id'])}' stopped its "
                                f"child's agent: {b['reason']}")
            pending = getattr(parent, "intervention", None)
            if pending is not None and getattr(control.parse(_said(pending)), "kind", "") == "stop":
                await _cancel(tasks)
                log("info", f"[HTN] Workflow '{plan.name}': the user said {_said(pending)!r}; every branch's agent "
                            "was stopped")
                return "stopped"
            if pressed():
                await _cancel(tasks)
                log("info", f"[HTN] Workflow '{plan.name}': a control pressed in the web UI stopped every branch's "
                            "agent")
                return "pressed"
        for t in tasks.values():
            if not t.cancelled() and t.exception() is not None:
                exc = t.exception()
                log("warning", f"[HTN] A branch of workflow '{plan.name}' could not be run ({type(exc).__name__}: "
                               f"{exc}); it counts as failed")
                for b in fork["branches"]:
                    if tasks.get(b["id"]) is t:
                        engine.branch_returned(state, b["id"], None, "", f"it could not be run ({exc})")
        reported()
        return ""
    except BaseException:  # cancelled (Agent-Zero's stop), or a fault here: no branch's agent is left running
        await _cancel(tasks)
        raise
    finally:
        for sub in shared.values():
            await _release(sub, log)


async def _converse(sub: Any, plan: Any, state_attr: str, parent: Any) -> tuple[Any, str]:
    """The branch's agent works until its branch is done (told to go on when it answers before): (its last
    answer, why it failed or "")."""
    answer, problem = "", ""
    for attempt in range(NUDGES + 1):
        try:
            answer = await sub.monologue()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the branch fails, the others go on
            return answer, f"its agent failed ({type(exc).__name__}: {exc})"
        current = getattr(sub, state_attr, None)
        if not (isinstance(current, dict) and current.get("status", "active") == "active"):
            break
        if attempt < NUDGES:
            node = plan.nodes.get(current.get("current_node", ""))
            sub.hist_add_user_message(_message(parent, render.branch_not_done(plan, current, node)))
    return answer, problem


RELEASE_SECONDS = 5.0  # the longest a branch's terminals are waited for as they close


async def _release(sub: Any, log: Callable[[str, str], None]) -> None:
    """Close the terminals a branch's agent opened (Agent-Zero keeps them in its ``_cet_state``): a stopped branch's
    command must not run on, and a finished one leaves no shell behind.  Never raises."""
    try:
        state = sub.get_data("_cet_state")
        shells = list(getattr(state, "shells", {}).values())
    except Exception:  # noqa: BLE001 - an agent without data opened none
        return
    for shell in shells:
        try:
            await asyncio.wait_for(asyncio.shield(shell.session.close()), RELEASE_SECONDS)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - one line, the others are closed all the same
            log("warning", f"[HTN] A branch's terminal did not close ({type(exc).__name__}: {exc}); it may run on "
                           "until Agent-Zero restarts")


def _final(sub: Any, state_attr: str, started: dict[str, Any]) -> dict[str, Any] | None:
    """The branch's state when its agent returned: the one it holds, or the one it ended with."""
    current = getattr(sub, state_attr, None)
    if isinstance(current, dict):
        return current
    last = getattr(sub, "_htn_last_run", None)
    if isinstance(last, dict) and last.get("run_id") == started.get("run_id"):
        return last
    return None


async def _cancel(tasks: dict[str, asyncio.Task]) -> None:
    for t in tasks.values():
        t.cancel()
    if tasks:
        await asyncio.wait(list(tasks.values()), timeout=5)
