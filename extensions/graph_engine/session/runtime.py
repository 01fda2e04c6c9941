"""What a session keeps for the life of its process: the plan library in use (reloaded when its files change),
the audit log's folder, and the one-time lines already said.  One per library; any host makes one."""

from __future__ import annotations

import os
import threading
from typing import Any

from ..core.model import Plan
from .audit import AuditLog, runs_dir
from .catalogue import LibraryCache

MAX_LOGGED_ONCE = 4096  # (chat, warning) pairs said
MAX_COMPOSED = 256  # plans proposed in the chat and approved, kept for their runs (the oldest go first)


class Runtime:
    """Process-wide: the library cache, the audit log and the set of one-time messages already logged."""

    def __init__(self, library_path: str, a0_root: str = "/a0") -> None:
        self.library = LibraryCache(library_path)
        self.a0_root = a0_root
        self.logged_once: set[str] = set()
        self.message_words: tuple[Any, str] = (None, "")  # the last user message object read and its words
        self.control_words: tuple[Any, bool] = (None, False)  # the last words read as a control, or not
        self.english_words: tuple[Any, bool] = (None, True)  # the last words read for their language
        self.audit = AuditLog(runs_dir(a0_root))
        self.warming = threading.Lock()  # held by the warm-up thread while it loads the library: a pass waits
        self.held: list[str] = []  # problem lines the warm-up's load found, said by the next pass
        self.standing: list[str] = []  # the problems of the library version in use, told to each chat once
        self.standing_of: Any = None  # that version
        self.composed: dict[tuple[str, str], Plan] = {}  # (plan id, version) -> a plan proposed in a chat

    def adopt(self, plan: Plan) -> None:
        """A plan proposed in a chat and approved: its runs find it by id and version (before the library's)."""
        self.composed.pop((plan.id, plan.version), None)
        self.composed[(plan.id, plan.version)] = plan
        while len(self.composed) > MAX_COMPOSED:
            self.composed.pop(next(iter(self.composed)))

    def adopt_source(self, state: Any) -> Plan | None:
        """The proposed plan a state carries the text of (``source``), compiled again (after a restart) and adopted
        when it is the version the state ran; None when the state carries none or it does not compile to it."""
        if not isinstance(state, dict) or not isinstance(state.get("source"), dict):
            return None
        key = (state.get("plan_id"), state.get("plan_version"))
        if key in self.composed:
            return self.composed[key]
        from ..authoring import compose
        source = state["source"]
        proposal = compose.check(source.get("text", ""), str(source.get("format", "")))
        plan = proposal.plan if proposal.ok else None
        if plan is None or (plan.id, plan.version) != key:
            return None
        self.adopt(plan)
        return plan

    @property
    def org_dir(self) -> str:
        return os.path.join(self.a0_root, "usr", "organizations")

    def lookup(self, plan_id: str, version: str) -> Plan | None:
        composed = self.composed.get((plan_id, version)) if self.composed else None
        if composed is not None:
            return composed
        library = self.library.current
        current = library.get(plan_id) if library is not None else None
        if current is not None and (not version or current.version == version):
            return current
        return self.library.plan_version(plan_id, version) or current

    def once(self, key: str) -> bool:
        """True the first time ``key`` is seen (then remembered, up to MAX_LOGGED_ONCE keys)."""
        if key in self.logged_once:
            return False
        if len(self.logged_once) >= MAX_LOGGED_ONCE:
            self.logged_once.clear()
        self.logged_once.add(key)
        return True
