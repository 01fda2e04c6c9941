"""The run's card in the chat's log (updated in place; on v1.x it carries the workflow component's data) and the
picture of a run that ended, drawn off the chat's event loop."""

from __future__ import annotations

import collections
import contextvars
import os
import sys
import threading
import time
from typing import Any

from . import lines, reading
from . import page
from ...authoring.render_graph import picture_setting, run_picture
from ...boundary import settings
from ...core.model import Plan
from ...core.state import pictured
from ...session.audit import read_lines, replace_file
from ...session.runtime import Runtime
from ...texts import card, view


CARD_ATTR = "_graph_engine_card"  # [run id, log item, what it shows, the heading, content and kvps sent] of the run's card; False: cards are off


def show(rt: Runtime, agent: Any, state: dict, picture: str = "", search: bool = False) -> None:
    """Create the run's card, or update it in place when what it shows changed; a log without Agent-Zero's
    item API turns cards off with one warning.  ``search``: the card may be one restored with the chat's log."""
    shown = getattr(agent, CARD_ATTR, None)
    if shown is False or not settings.active("card") or state.get("branch"):
        return  # (a branch is shown on its parent's card)
    run_id = state.get("run_id", "")
    picture = picture or state.get("picture", "")
    pace = getattr(agent, reading.PACE_ATTR, "")
    signature = (state.get("seq"), state.get("status"), pace if isinstance(pace, str) else "", picture,
                 state.get("pressed"))
    same_run = isinstance(shown, list) and len(shown) == 4 and shown[0] == run_id
    if same_run and shown[2] == signature and still_logged(agent, shown[1]):
        return  # nothing changed: nothing to do
    plan = rt.lookup(state.get("plan_id", ""), state.get("plan_version", ""))
    heading, content, kvps = card_parts(plan, state, pace if isinstance(pace, str) else "", picture)
    if same_run:
        item = shown[1]
    elif search or any(isinstance(e, dict) and e.get("type") == "run_resumed" for e in state.get("events") or ()):
        item = logged_card(agent, run_id)  # the card Agent-Zero restored with the chat
    else:
        item = None  # a run started in this process: a new card
    try:
        if item is not None and still_logged(agent, item):
            update_card(item, heading, content, kvps, shown[3] if same_run else None)
        else:
            item = page.log(agent.context.log, card_type(kvps), heading, content, kvps)
            if picture_setting() != "off":
                display.start()  # the run's picture will need it: started now, not in the pass that ends it
        if not callable(getattr(item, "update", None)):
            raise TypeError(f"log() returned {type(item).__name__}, which has no update method")
    except Exception as exc:  # noqa: BLE001 - a log API of another shape: no card, the loop goes on
        setattr(agent, CARD_ATTR, False)
        lines.log(agent, "warning", f"[HTN] Workflow card turned off for this agent: Agent-Zero's log API is not the "
                               f"one expected ({type(exc).__name__}: {exc}); the workflow goes on and its log "
                               "lines are still written")
        return
    setattr(agent, CARD_ATTR, [run_id, item, signature, (heading, content, kvps)])


def update_card(item: Any, heading: str, content: str, kvps: dict, sent: tuple | None) -> None:
    """Update the card with what changed since ``sent`` (what this process last gave it): Agent-Zero's log
    masks every string it is given for secrets, each through an ``@extensible`` lookup (about 10 µs each in
    the real loop), so unchanged texts and key-value pairs are not sent again (pairs given as keywords are
    merged into the item's table, in both Agent-Zero layouts)."""
    if sent is None or set(sent[2]) != set(kvps):
        page.update(item, type=card_type(kvps), heading=heading, content=content, kvps=kvps)
        return
    changed = {k: v for k, v in kvps.items() if sent[2][k] != v}
    page.update(item, type=card_type(kvps), heading=None if heading == sent[0] else heading,
                content=None if content == sent[1] else content, **changed)


def card_parts(plan: Plan | None, state: dict, pace: str, picture: str) -> tuple[str, str, dict]:
    """The card's heading, text and table; on v1.x the table also carries the data the pack's web UI extension
    draws the run from."""
    heading, content, kvps = card.text(plan, state, pace, picture)
    if "helpers.extension" in sys.modules:
        kvps = {**kvps, **view.view(plan, state, pace, picture)}
    return heading, content, kvps


def card_type(kvps: dict) -> str:
    """The card's log item type: the component's, when it carries the component's data; else a plain info item."""
    return view.TYPE if view.KEY in kvps else "info"


def still_logged(agent: Any, item: Any) -> bool:
    """False when the chat's log was reset since the item was made (its updates would go nowhere)."""
    logs = getattr(getattr(getattr(agent, "context", None), "log", None), "logs", None)
    no = getattr(item, "no", None)
    if not isinstance(logs, list) or not isinstance(no, int):
        return True  # a log that does not say: trust the item
    return 0 <= no < len(logs) and logs[no] is item


def logged_card(agent: Any, run_id: str) -> Any:
    """After a restart or a chat reload, the card Agent-Zero restored with the chat's log, found by run id."""
    logs = getattr(getattr(getattr(agent, "context", None), "log", None), "logs", None)
    for item in reversed(logs if isinstance(logs, list) else []):
        kvps = getattr(item, "kvps", None)
        if isinstance(kvps, dict) and kvps.get("Run") == run_id and \
                str(getattr(item, "heading", "")).startswith(card.HEADING):
            return item
    return None


DRAW_POLL = 0.05  # seconds between two looks of the drawing thread at its list of pictures to draw


class Display:
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


display = Display()


def wait_for_display(timeout: float = 30.0) -> bool:
    """Wait until the pictures handed to the display thread are written and named on their cards (tests, and
    a process about to exit); False when some are still pending after ``timeout`` seconds."""
    return display.wait(timeout)


def draw_later(rt: Runtime, agent: Any, state: dict) -> None:
    """Draw the picture of an ended run off the loop: Graphviz takes tens of milliseconds, and the pass that
    ends a run does not wait for it.  When the picture is written, the run's card names it."""
    plan = rt.lookup(state.get("plan_id", ""), state.get("plan_version", ""))
    if plan is None or not state.get("run_id") or picture_setting() == "off" or state.get("branch"):
        return
    shown = getattr(agent, CARD_ATTR, None)
    item = shown[1] if isinstance(shown, list) and shown[0] == state["run_id"] else None
    # the thread works on a copy (the pass goes on with the state) and in a copy of this hook call's context,
    # so that the settings the call read (the picture setting) are the ones it draws with
    display.submit(contextvars.copy_context().run, draw, rt, agent, plan, dict(state),
                    list(state.get("events") or ()), item)


def draw(rt: Runtime, agent: Any, plan: Plan, state: dict, events: list[dict], item: Any) -> None:
    """The drawing thread: write the picture, then name it on the run's card.  Never raises."""
    try:
        path = picture_file(rt, agent, plan, state, events)
        last = getattr(agent, "_htn_last_run", None)
        if path and isinstance(last, dict) and last.get("run_id") == state.get("run_id"):
            setattr(agent, "_htn_last_run", dict(last, picture=path))  # a new record: readers keep a whole one
        if path and item is not None and still_logged(agent, item):
            pace = getattr(agent, reading.PACE_ATTR, "")
            heading, content, kvps = card_parts(plan, state, pace if isinstance(pace, str) else "", path)
            page.update(item, type=card_type(kvps), heading=heading, content=content, kvps=kvps)
    except Exception as exc:  # noqa: BLE001 - a thread's failure is one log line, never a crash
        lines.log_once(rt, agent, "warning", f"[HTN] Picture of the run {state.get('run_id')} not drawn "
                                        f"({type(exc).__name__}: {exc}); `graph-engine render --trace` draws it "
                                        "from the audit log", key=f"picture-thread:{type(exc).__name__}")


def picture_file(rt: Runtime, agent: Any, plan: Plan, state: dict, events: list[dict]) -> str:
    """The picture of an ended run beside its audit log; its path, or '' when it cannot be written."""
    log_path = rt.audit.path(lines.chat_id(agent), state["run_id"])
    events = run_events(log_path, events)
    path = log_path[: -len(".jsonl")] + ".svg"
    try:
        suffix, text = run_picture(plan, events)
        path = log_path[: -len(".jsonl")] + suffix
        os.makedirs(os.path.dirname(path), exist_ok=True)
        replace_file(path, text.encode("utf-8"))
    except (OSError, ValueError) as exc:
        lines.log_once(rt, agent, "warning", f"[HTN] Picture of the run not written to {path} "
                                        f"({getattr(exc, 'strerror', None) or exc}); `graph-engine render "
                                        f"--trace` draws it from the audit log", key=f"picture:{rt.audit.root}")
        return ""
    pictured(state, path)
    return path


def run_events(log_path: str, newest: list[dict]) -> list[dict]:
    """The run's events: its audit log (every line), then those of the state's (``newest``) that are newer."""
    events: list[dict] = []
    try:
        events = list(read_lines(log_path))
    except ValueError:  # no log yet, or not a regular file
        pass
    seen = max((e.get("seq", 0) for e in events if isinstance(e.get("seq"), int)), default=0)
    return events + [e for e in newest if isinstance(e.get("seq"), int) and e["seq"] > seen]


PROPOSAL_CARDS_ATTR = "_graph_engine_proposal_cards"  # on the agent: proposal id -> its card (the newest few)


def show_proposal(agent: Any, proposal: str, plan: Plan, status: str, by: str, source: str,
                  answer: dict | None = None) -> None:
    """The card of a workflow proposed in the chat, made or updated in place: its graph, and while it waits the
    Approve, Edit and Reject buttons (v1.x).  A log without Agent-Zero's item API shows no card (the chat's lines
    say the same)."""
    if getattr(agent, CARD_ATTR, None) is False or not settings.active("card"):
        return
    heading, content, kvps = card.proposal_text(plan, proposal, status, by)
    if "helpers.extension" in sys.modules:
        kvps = {**kvps, **view.proposal_view(plan, proposal, status, source, answer)}
    known = agent.__dict__.setdefault(PROPOSAL_CARDS_ATTR, {})
    item = known.get(proposal) or logged_card(agent, proposal)
    try:
        if item is not None and still_logged(agent, item):
            update_card(item, heading, content, kvps, None)
        else:
            item = page.log(agent.context.log, card_type(kvps), heading, content, kvps)
    except Exception:  # noqa: BLE001 - no card; the lines in the chat say what happened
        return
    known[proposal] = item
    while len(known) > 8:
        known.pop(next(iter(known)))
