"""Controls the person presses in the workflow component of Agent-Zero's web UI (v1.x), on their way to the run.

A button of the component calls the pack's API handler (the plugin's ``api/workflow_control.py``), never the chat
input: Agent-Zero's page queues a message typed while the agent works until the agent stops, so a control sent as
words would arrive after the run it was meant for.  The handler hands the control to the chat's agent here: it
is queued on the agent (``Pressed``), and applied on the chat's event loop (the one the agent's passes run on, so
no pass is half-way through the run's state meanwhile) by ``adapter.apply_pressed``: at once between two passes,
or, when a hook call of the agent is waiting (for the utility model, or for branches running in subordinate
agents), by that hook call as soon as it wakes.  The handler waits a moment for the answer (applied, or why
not) and gives it to the page; the run's card carries it too.

This module holds the queue and the request's parsing; it applies nothing itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ...core.control import CANONICAL

KINDS = ("stop", "pause", "resume", "skip", "retry", "back", "restart", "approve", "edit", "reject", "save")
PROPOSING = ("approve", "edit", "reject")  # the controls of a workflow proposed in the chat (its id is the "run")
MAX_TEXT = 64 * 1024  # an edited plan's text
STOPS_BRANCHES = ("stop", "pause", "back", "restart")  # what stops the agents of branches running at once
WAKES = ("resume", "skip", "back", "retry", "restart", "approve")  # what an idle chat's agent goes on with at once
LABELS = {"stop": "Stop", "pause": "Pause", "resume": "Resume", "skip": "Skip step", "retry": "Retry step",
          "back": "Back to a step", "restart": "Restart", "approve": "Approve", "edit": "Edit", "reject": "Reject",
          "save": "Save as a plan"}
QUEUE_ATTR = "_graph_engine_pressed"  # on the chat's agent: the controls pressed and not applied yet
WAITING_ATTR = "_graph_engine_waiting"  # on the chat's agent: a hook call waits, and applies them when it wakes
ANSWER_WAIT = 3.0  # seconds the API handler waits for the answer before it says "pending"
MAX_QUEUED = 32  # controls queued on one agent at most (a page that presses faster is refused)
_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")
_RUN = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NODE = re.compile(r"[^\x00-\x1f]{1,200}")
_lock = threading.Lock()


@dataclass
class Pressed:
    """One control pressed in the page: what, on which run, and the answer the API handler waits for."""

    kind: str
    run: str
    node: str = ""
    id: str = ""
    text: str = ""  # an edited plan (edit)
    at: float = field(default_factory=time.time)
    answer: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)

    @property
    def said(self) -> str:
        """The words a person would type for it (the audit event's ``said``)."""
        if self.kind == "back":
            return "go back to a step"
        return CANONICAL.get(self.kind, LABELS.get(self.kind, self.kind).lower())

    def settle(self, answer: dict[str, Any]) -> None:
        if not self.answer.done():
            self.answer.set_result(answer)


def parse(body: Any) -> Pressed | str:
    """The request's body read into a Pressed, or why it is refused (a short sentence for the person)."""
    if not isinstance(body, dict):
        return "the request is not a JSON object"
    kind, run, node, rid, text = (body.get(k) for k in ("control", "run", "node", "id", "text"))
    if kind not in KINDS:
        return f"unknown control {str(kind)[:40]!r} (one of {', '.join(KINDS)})"
    if not isinstance(run, str) or not _RUN.fullmatch(run):
        return "the request names no run"
    if rid is not None and (not isinstance(rid, str) or not _ID.fullmatch(rid)):
        return "the request id must be 1 to 40 letters, digits, '-' or '_'"
    if kind == "back" and not (isinstance(node, str) and _NODE.fullmatch(node)):
        return "going back needs the step to go back to"
    if kind == "edit" and not (isinstance(text, str) and 0 < len(text) <= MAX_TEXT):
        return f"an edit needs the plan's text (at most {MAX_TEXT // 1024} KiB)"
    return Pressed(kind=kind, run=run, node=node if kind == "back" else "", id=rid or "",
                   text=text if kind == "edit" else "")


def answer(p: Pressed, status: str, text: str, run: str = "") -> dict[str, Any]:
    """The answer the page shows: {ok, id, control, status (applied | refused | pending), text, run}."""
    return {"ok": status != "refused", "id": p.id, "control": p.kind, "status": status, "text": text,
            "run": run or p.run}


def queue(agent: Any, p: Pressed) -> bool:
    """Queue a control on the chat's agent; False when too many wait already."""
    with _lock:
        waiting = agent.__dict__.setdefault(QUEUE_ATTR, [])
        if len(waiting) >= MAX_QUEUED:
            return False
        waiting.append(p)
        return True


def take(agent: Any) -> list[Pressed]:
    """The controls queued on the agent, oldest first, taken off the queue."""
    with _lock:
        waiting = agent.__dict__.get(QUEUE_ATTR)
        if not waiting:
            return []
        taken, waiting[:] = list(waiting), []
        return taken


def pending(agent: Any, kinds: tuple[str, ...] = KINDS) -> bool:
    """A control of one of ``kinds`` waits on the agent (a cheap look: no lock)."""
    waiting = getattr(agent, "__dict__", {}).get(QUEUE_ATTR)
    return bool(waiting) and any(p.kind in kinds for p in list(waiting))


def chat_loop(context: Any) -> asyncio.AbstractEventLoop | None:
    """The event loop the chat's agent runs on (Agent-Zero v1.x runs every chat's task on one loop thread, named
    after the context's class), or None for a host without one."""
    task = getattr(context, "task", None)
    loop = getattr(getattr(task, "event_loop_thread", None), "loop", None)
    if isinstance(loop, asyncio.AbstractEventLoop) and loop.is_running():
        return loop
    try:
        from helpers.defer import EventLoopThread  # Agent-Zero v1.x
    except ImportError:
        return None
    try:
        loop = EventLoopThread(type(context).__name__).loop
    except Exception:  # noqa: BLE001 - a framework of another shape: applied where it was pressed
        return None
    return loop if isinstance(loop, asyncio.AbstractEventLoop) else None


def on_loop(loop: asyncio.AbstractEventLoop | None, job: Callable[[], None]) -> None:
    """Run ``job`` on the chat's loop (soon), or here when there is none."""
    if loop is None or not loop.is_running():
        job()
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        job()
    else:
        loop.call_soon_threadsafe(job)


async def wait_for(p: Pressed, seconds: float = ANSWER_WAIT) -> dict[str, Any]:
    """The control's answer, or "pending" when it has not come within ``seconds`` (it still comes, on the card)."""
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(p.answer)), seconds)
    except asyncio.TimeoutError:
        return answer(p, "pending", "Waiting for the agent to take it.")


def wake_text(kind: str) -> str:
    """The system message an idle chat's agent is woken with after a control (not a request from the person)."""
    return (f"The person pressed \"{LABELS[kind]}\" in the workflow component. The workflow's text below says what "
            "changed: go on with its current step.")
