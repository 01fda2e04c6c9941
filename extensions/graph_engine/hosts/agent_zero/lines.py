"""The lines the pack writes in a chat's log: one line, or one line once per chat (a warning that matters to a
chat reaches every chat)."""

from __future__ import annotations

from typing import Any

from . import page
from ...session.runtime import Runtime


class LoggedOnce:
    """What a hook call that found no runtime logs through: the one-time messages already said."""

    def __init__(self) -> None:
        self.logged_once: set[str] = set()

    def once(self, key: str) -> bool:
        new = key not in self.logged_once
        self.logged_once.add(key)
        return new


NO_RUNTIME: Any = LoggedOnce()


def chat_id(agent: Any) -> str:
    return str(getattr(getattr(agent, "context", None), "id", "") or "no-chat")


def log(agent: Any, level: str, text: str) -> None:
    try:
        page.log(agent.context.log, level, text[:120], text)
    except Exception:  # noqa: BLE001 - a missing log must not stop the agent
        pass


def log_once(rt: Runtime, agent: Any, level: str, text: str, key: str = "") -> None:
    """Said once to each chat that meets it (a warning that matters to a chat reaches every chat)."""
    if rt.once(f"{chat_id(agent)}|{key or text}"):
        log(agent, level, text)
