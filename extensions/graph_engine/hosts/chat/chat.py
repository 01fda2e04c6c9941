"""A terminal chat in which a model runs a plan's steps as shell commands: the session's port (``session.port.Host``)
and nothing of Agent-Zero.  A chat kept in a file resumes in a new process; the audit log goes where the runtime's does."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from ...boundary.reading import ReadError, file_fact, read_regular
from ...core.engine import PROMPTS_AFTER, Observation
from ...core.message import CallOutput
from ...session import passes
from ...session.runtime import Runtime
from ...texts import render

TOOL = "code_execution_tool"  # the tool name plans name for a shell command
MAX_PASSES = 50  # passes of one message before the host ends them (a model that never answers)
MAX_FILE = 16 * 1024 * 1024  # bytes of a saved chat or a script the host reads


@dataclass
class Reply:
    """What the model did in one call: a shell command to run, or (``command`` empty) its answer to the person."""

    command: str = ""
    text: str = ""


Model = Callable[[str, str], Reply]  # (the person's request, the workflow text this call is shown) -> its reply


class ChatHost:
    """One chat: the person's messages in, the model's passes, the engine's text shown to each call."""

    def __init__(self, rt: Runtime, model: Model, state_file: str = "", cwd: str = ".",
                 out: Callable[[str], None] = print) -> None:
        self.rt, self.model, self.state_file, self.cwd, self.out = rt, model, state_file, cwd, out
        self.last_run: dict | None = None  # the last run that ended here
        self.words, self.shown, self.monologue, self.iteration, self.replies = "", "", "", 0, 0
        saved = self._read_file()
        self.state: Any = saved.get("run")
        result = saved.get("result")  # the newest result, not judged yet (the model answered, then a restart)
        self.output = CallOutput(*map(str, result[:3])) if isinstance(result, list) and len(result) >= 3 else None

    async def say(self, words: str) -> str:
        """The person's message: passes until the model answers; returns its answer."""
        self.words, self.monologue = words, uuid.uuid4().hex[:10]
        for self.iteration in range(MAX_PASSES):
            self.shown = ""  # each call is shown what this pass injects, nothing older
            await passes.run_pass(self, self.rt, render)
            reply = self.model(words, self.shown)
            self.replies, self.words = self.replies + 1, ""
            self.out(f"[model] {reply.command or reply.text}")
            if not reply.command:  # its answer is the result of the step it was shown, judged with the next message
                self.output = CallOutput(f"{self.replies}:{reply.text}", "response", reply.text)
                self._write_file()
                return reply.text
            self.output = CallOutput(f"{self.replies}:{reply.command}", TOOL, self._run(reply.command))
        return ""

    # ── the port ──
    def load_state(self) -> Any:
        return self.state

    def read_pass(self, state: Any) -> Observation | None:
        seen = isinstance(state, dict) and state.get("last_pass") == f"{self.monologue}:{self.iteration}"
        output = None if seen else self.output  # (a result is judged once)
        return Observation(hook=PROMPTS_AFTER, monologue=self.monologue, iteration=self.iteration,
                           user_message=self.words, output=output, reply_mark=str(self.replies),
                           global_turn=self.replies + 1, now=time.time(),
                           serial_reason="this chat runs branches one after another")

    def look(self, path: str) -> str:
        return file_fact(os.path.join(self.cwd, path))

    def log(self, level: str, text: str) -> None:
        self.out(f"[{level}] {text}")

    def save_state(self, state: dict | None, ended: dict | None) -> None:
        for done in filter(None, (ended, state)):
            try:
                self.rt.audit.append(done, "chat", 0)
            except OSError as exc:
                self.log("warning", f"[HTN] Audit log not written ({exc}); the run goes on")
        self.state, self.last_run = state, ended or self.last_run
        self._write_file()

    def inject(self, text: str) -> None:
        self.shown = text
        self.out(text)

    def set_pace(self, level: str) -> None:
        self.out(f"[pace] {level}")  # no org here: the level and the report are lines

    def report(self, request: dict[str, Any]) -> None:
        self.out(f"[report] {request.get('on', '')}")

    # ── the chat's own work ──
    def _run(self, command: str) -> str:
        done = subprocess.run(["bash", "-c", command], cwd=self.cwd, capture_output=True, text=True, timeout=600)
        self.out(done.stdout + done.stderr)
        return done.stdout + done.stderr

    def _read_file(self) -> dict:
        if not self.state_file or not os.path.lexists(self.state_file):
            return {}
        try:
            saved = json.loads(read_regular(self.state_file, MAX_FILE, "saved chat"))
            return saved if isinstance(saved, dict) else {}
        except (ReadError, ValueError) as exc:
            self.log("warning", f"[HTN] The saved chat {self.state_file} cannot be read ({exc}); no run resumes")
            return {}

    def _write_file(self) -> None:
        if self.state_file:
            out = self.output
            with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(os.path.abspath(self.state_file)),
                                             delete=False) as f:
                json.dump({"run": self.state, "result": [out.reply, out.tool, out.text] if out else None}, f)
            os.replace(f.name, self.state_file)


def scripted(replies: list[Reply]) -> Model:
    """A model that gives ``replies`` in order, whatever it is shown (then answers "done")."""
    queue = list(replies)
    return lambda words, shown: queue.pop(0) if queue else Reply(text="done")


def main(argv: list[str] | None = None) -> int:
    """A terminal chat: each line of stdin is a message; the model's replies are a JSON list of {"command": ...}
    or {"text": ...} (--script)."""
    import argparse, asyncio, sys  # noqa: E401 - the command line's alone
    ap = argparse.ArgumentParser(prog="python -m graph_engine.hosts.chat", description=main.__doc__.splitlines()[0])
    for name in ("--library", "--script"):
        ap.add_argument(name, required=True)
    ap.add_argument("--state", default="", help="a file the chat is kept in (resumed by the next run)")
    ap.add_argument("--home", default=".", help="where the audit log goes (<home>/usr/graph_engine/runs)")
    args = ap.parse_args(argv)
    replies = [Reply(**r) for r in json.loads(read_regular(args.script, MAX_FILE, "script"))]
    host = ChatHost(Runtime(args.library, args.home), scripted(replies), args.state)
    for line in filter(str.strip, sys.stdin):
        asyncio.run(host.say(line.strip()))
    return 0
