"""The port: what a host gives a session, and nothing else.

A host is where the agent lives (Agent-Zero's message loop, a terminal chat, a test).  One pass of a session
(``passes.run_pass``) asks its host, in this order: the run's saved state (``load_state``), what this pass
observed (``read_pass``: one complete ``Observation``), what the current check names on the disk (``look``), the
utility model's answer to a question about a new message (``call_utility_model``, optional); then it hands back the
step's effects: the log lines (``log``), the run's new state (``save_state``), the text the model's next call is
shown (``inject``), a PACE level (``set_pace``) and a status report (``report``).  Every method is called on the
host's own event loop and must not block it; ``call_utility_model`` is the only one awaited, bounded by the
session's timeout.

A host that runs a parallel node's branches at once says so in the observation (``concurrent``); one that does
not runs them one after another in its own agent, as the engine then asks.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..core.engine import Observation

RunState = dict[str, Any]  # a run's state, JSON-safe (core/state.py: its keys and their rules)


@runtime_checkable
class Host(Protocol):
    """What a session needs of the place the agent runs."""

    def load_state(self) -> Any:
        """The run's state as the host kept it (a restored copy is parsed by the session), or None."""

    def read_pass(self, state: Any) -> Observation | None:
        """This pass as the host saw it: the person's new words, the newest tool result, the pass's identity and
        the clock.  ``state``: the state ``load_state`` gave (a host that reads a result once per pass checks it
        against ``state["last_pass"]``).  None: nothing can happen in this pass (no run, no new words)."""

    def look(self, path: str) -> str:
        """What the host sees at ``path`` for a ``file_exists`` check (``boundary.reading.file_fact``)."""

    def log(self, level: str, text: str) -> None:
        """One line for the person ("info", "warning" or "error")."""

    def save_state(self, state: RunState | None, ended: RunState | None) -> None:
        """The run's new state (None: no run now); ``ended``: the state of a run that ended in this pass."""

    def inject(self, text: str) -> None:
        """The workflow text the model's next call is shown (replacing what this pass showed before)."""

    def set_pace(self, level: str) -> None:
        """The PACE level the run escalated to."""

    def report(self, request: dict[str, Any]) -> None:
        """A status report the engine asks for (``Effects.report``); a host without an org may do nothing."""


class Asker(Protocol):
    """A host with a utility model (``asking.ask`` keeps the answer on the same object, by the message's id)."""

    async def call_utility_model(self, *, system: str, message: str) -> str: ...
