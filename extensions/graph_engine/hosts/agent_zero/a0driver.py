"""Agent-Zero's real message loop in this process, with only the model scripted.

Used by the self-test (`selftest.py`, inside the user's own Agent-Zero) and by the project's real-loop suite.
It imports the Agent-Zero tree at `a0_root` (either layout) and runs its own `AgentContext`: prompt building,
history, tools (the real terminal), extensions and chat persistence are Agent-Zero's. What is scripted:

- the chat and utility model calls, at LiteLLM's boundary: `models.acompletion` is wrapped so that LiteLLM
  itself answers with `mock_response=<the scripted reply>`; each chat call's messages are recorded;
- embeddings: deterministic vectors from a hash of the text (nothing is loaded, nothing is sent);
- memory: the run uses its own memory folder (`usr/memory/<name>`), removed by `Session.close`.

A scripted chat reply is the model's raw text, or `HANG` (the call never returns: the process is stopped
as a restart would stop it). Nothing is sent to any model. Extension files are untouched; the two hooks of
this pack are timed per call. The agents that run a parallel node's branches are scripted per branch
(`branch_replies`, by the branch's first node id), and each chat call may take its time (`chat_delay`, seconds, or
{branch id: seconds} with "" for the chat's own agent); each call records its agent, branch, start and end.

    python -m graph_engine.hosts.agent_zero.a0driver --a0-root DIR --script SCRIPT.json --out RESULT.json
SCRIPT.json: {"replies": [...],
              "turns": [{"user": "text", "say": {"after_calls": N, "text": TEXT}} | {"nudge": true} |
                        {"load": CHAT_ID} | {"wait": SECONDS} | {"write": PATH, "text": TEXT}],
              "branch_replies": {BRANCH: [...]}, "chat_delay": SECONDS | {BRANCH or "": SECONDS},
              "context_window": TOKENS, "utility_reply": "text", "timeout": SECONDS per turn,
              "utility_rules": [{"marker": "text in the call", "reply": "text", "delay": SECONDS,
                                 "raise": "message"}]  (all optional)}
A utility call whose messages hold a rule's marker is answered by that rule (the first that fits: after
``delay`` seconds, its ``reply``, or an exception with the ``raise`` message); any other by ``utility_reply``.
A turn's ``say`` is written by the person while the agent works, once ``after_calls`` chat calls have started
(Agent-Zero takes it as an intervention).
``by_step`` makes a model that reads its prompt: {"steps": {STEP NAME: REPLY}, "paused": REPLY, "other": REPLY}
answers a call whose newest message shows "Current step: STEP NAME" with that reply, one that shows the workflow
paused with "paused", any other with "other" ("{n}" in a reply is the call's number, so no reply repeats one
word for word); it is used once the call's queue (replies, or the branch's) is empty.  ``record_judged`` records
every result the engine judges: its step, verdict, branch, and the result's text and reply (``judged`` in the
result), read in this process where the engine's step judges it.
"""

import argparse
import hashlib
import json
import os
import re
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

HOOK_FILES = {"_15_htn_plan_selector": "selector", "_75_graph_workflow_context": "companion"}
HANG = "HANG"  # a scripted reply: the call never returns (a restart during the LLM call)
EMBED_DIM = 64
NUDGE_TEXT = "Nudged - continue"


class Script:
    """The scripted model: hands out the chat replies in order and records what each call received."""

    def __init__(self, replies: list[str], utility_reply: str = "[]", utility_rules: list[dict] | None = None,
                 branch_replies: dict | None = None, chat_delay=0.0, by_step: dict | None = None):
        self.by_step = by_step or {}
        self.replies = list(replies)
        self.branch_replies = {k: list(v) for k, v in (branch_replies or {}).items()}
        self.chat_delay = chat_delay
        self.started = 0  # chat calls started
        self.utility_reply = utility_reply
        self.utility_rules = list(utility_rules or [])
        self.utility_asked: list[dict] = []  # the utility calls a rule answered: {"marker", "at"}
        self.calls: list[dict] = []   # chat calls: {"messages": [{"role", "content"}], "reply", "at"}
        self.utility_calls = 0
        self.overrun = 0              # chat calls after the script ran out (answered with a final response)
        self.hung = threading.Event()

    def utility_rule(self, messages: list) -> dict | None:
        text = "\n".join(m["content"] for m in _plain(messages))
        for rule in self.utility_rules:
            if rule.get("marker", "\0") in text:
                self.utility_asked.append({"marker": rule["marker"], "at": time.perf_counter()})
                return rule
        return None

    def delay(self, branch: str) -> float:
        if isinstance(self.chat_delay, dict):
            return float(self.chat_delay.get(branch, 0.0))
        return float(self.chat_delay or 0.0)

    def chat(self, messages: list, agent=None, branch: str = "", start: float = 0.0, model: str = "") -> str:
        queue = self.branch_replies.get(branch) if branch else self.replies
        if queue:
            reply = queue.pop(0)
        elif self.by_step:
            reply = self.read_prompt(_plain(messages)).replace("{n}", str(len(self.calls) + 1))
        else:
            self.overrun += 1
            reply = json.dumps({"thoughts": ["the script is over"], "headline": "Done",
                                "tool_name": "response", "tool_args": {"text": "Done."}})
        self.calls.append({"messages": _plain(messages), "reply": reply, "at": time.perf_counter(),
                           "start": start or time.perf_counter(), "branch": branch,
                           "agent": getattr(agent, "number", 0), "agent_id": id(agent), "model": model})
        return reply


    def read_prompt(self, messages: list[dict]) -> str:
        """The reply of a model that does what the newest message shows (``by_step``)."""
        newest = next((m["content"] for m in reversed(messages) if m["role"] in ("user", "human")), "")
        shown = re.findall(r"Current step: (.+?)(?: \(attempt [^)]*\))?(?=\\n|\n|\"|$)", newest)  # (the
        # extras are a JSON block: the workflow's text is a JSON string there, its line breaks written \n)
        if shown and shown[-1] in self.by_step.get("steps", {}) and "[WORKFLOW PAUSED" not in newest:
            reply = self.by_step["steps"][shown[-1]]
            if "Your last command did not run" in newest:  # as the workflow's note says: the terminal reset first
                data = json.loads(reply)
                data["tool_args"]["reset"] = True
                reply = json.dumps(data)
            return reply
        if "[WORKFLOW PAUSED" in newest and "paused" in self.by_step:
            return self.by_step["paused"]
        return self.by_step.get("other") or json.dumps({"thoughts": ["nothing to do"], "headline": "Done",
                                                        "tool_name": "response", "tool_args": {"text": "Done."}})


def _plain(messages) -> list[dict]:
    out = []
    for m in messages or []:
        content = m.get("content") if isinstance(m, dict) else getattr(m, "content", "")
        if isinstance(content, list):  # multimodal parts: keep the text
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append({"role": m.get("role", "") if isinstance(m, dict) else "", "content": str(content)})
    return out


def _caller() -> tuple[str, object]:
    """("chat" or "utility", the agent whose call it is)."""
    frame = sys._getframe(1)
    for _ in range(60):
        if frame is None:
            break
        name = frame.f_code.co_name
        if name in ("call_chat_model", "call_utility_model"):
            return ("chat" if name == "call_chat_model" else "utility"), frame.f_locals.get("self")
        frame = frame.f_back
    return "utility", None


def _branch(agent) -> str:
    """The branch id of an agent that runs a parallel node's branch (graph_engine.hosts.agent_zero.branches), else ""."""
    found = getattr(agent, "__dict__", {}).get("_graph_engine_branch")
    return found[1] if isinstance(found, tuple) and len(found) == 2 else ""


def _vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8", "replace")).digest() * 2
    return [(b - 127.5) / 127.5 for b in digest[:EMBED_DIM]]


class _Embedded:
    def __init__(self, texts):
        self.data = [{"embedding": _vector(t), "index": i} for i, t in enumerate(texts)]


class Session:
    """One Agent-Zero process's view: a context, the scripted model, hook timings. Blocking calls."""

    def __init__(self, a0_root: str, script: Script, context_window: int | None = None):
        self.root = Path(a0_root).resolve()
        self.script = script
        self.timings: list[dict] = []   # {"hook", "seconds", "iteration"}
        self.sent: list[float] = []  # time.perf_counter() when each user message was sent
        self.memory_subdir = "graph_engine_run_" + uuid.uuid4().hex[:8]
        self.context = None
        os.chdir(self.root)
        if str(self.root) not in sys.path:
            sys.path.insert(0, str(self.root))
        os.environ.setdefault("A0_ROOT", str(self.root))
        self.new = (self.root / "helpers" / "extension.py").is_file()
        self.logs_before = {str(p) for p in (self.root / "logs").glob("*")}
        self._as_in_container()
        self._patch_models()
        self._patch_memory()
        self._patch_extensions()
        if context_window:
            self._patch_context_window(context_window)
        import agent as a0_agent
        self.a0 = a0_agent
        self.persist = self._helper("persist_chat")

    def _helper(self, name: str):
        import importlib
        return importlib.import_module(("helpers." if self.new else "python.helpers.") + name)

    def _as_in_container(self) -> None:
        """Run as Agent-Zero runs in its container (`--dockerized=true`): the terminal is this machine's shell."""
        runtime = self._helper("runtime")
        sys.argv = [sys.argv[0], "--dockerized=true"]
        runtime.args.clear()
        runtime.initialize()
        if self.root != Path("/a0"):  # a tree elsewhere (a copy under test): its own usr/workdir, not /a0's
            files = self._helper("files")
            files.get_abs_path_dockerized = files.get_abs_path

    # ── the scripted boundary ──────────────────────────────────────────────
    def _patch_models(self) -> None:
        import models
        real = models.acompletion
        script = self.script

        async def scripted(*args, **kwargs):
            kind, agent = _caller()
            if kind == "chat":
                branch, start = _branch(agent), time.perf_counter()
                script.started += 1
                if script.delay(branch):
                    import asyncio
                    await asyncio.sleep(script.delay(branch))
                reply = script.chat(kwargs.get("messages"), agent, branch, start, str(kwargs.get("model", "")))
                if reply == HANG:
                    script.hung.set()
                    import asyncio
                    while True:  # the call never returns; the process is stopped from outside
                        await asyncio.sleep(3600)
            else:
                script.utility_calls += 1
                reply = script.utility_reply
                rule = script.utility_rule(kwargs.get("messages"))
                if rule is not None:
                    if rule.get("delay"):
                        import asyncio
                        await asyncio.sleep(float(rule["delay"]))
                    if rule.get("raise"):
                        raise RuntimeError(rule["raise"])
                    reply = rule.get("reply", reply)
            for key in ("api_key", "api_base", "base_url"):
                kwargs.pop(key, None)
            return await real(*args, mock_response=reply, **kwargs)

        models.acompletion = scripted
        models.embedding = lambda model=None, input=(), **kw: _Embedded(list(input))
        models.LocalSentenceTransformerWrapper = models.LiteLLMEmbeddingWrapper  # no weights are loaded

    def _patch_memory(self) -> None:
        import importlib
        for name in ("plugins._memory.helpers.memory", "python.helpers.memory"):
            try:
                module = importlib.import_module(name)
            except Exception:
                continue
            subdir = self.memory_subdir
            module.get_agent_memory_subdir = lambda agent, _s=subdir: _s
            if hasattr(module, "get_context_memory_subdir"):
                module.get_context_memory_subdir = lambda context, _s=subdir: _s

    def _patch_context_window(self, tokens: int) -> None:
        """The chat model's context length as its settings would give it (history is compressed past 0.7 of it)."""
        import importlib
        if self.new:
            config = importlib.import_module("plugins._model_config.helpers.model_config")
            real = config.get_chat_model_config

            def chat_config(*args, **kwargs):
                return {**real(*args, **kwargs), "ctx_length": tokens}
            config.get_chat_model_config = chat_config
            self._helper("history").get_chat_model_config = chat_config
        else:
            settings = self._helper("settings")
            real_settings = settings.get_settings
            settings.get_settings = lambda: {**real_settings(), "chat_model_ctx_length": tokens}

    def _patch_extensions(self) -> None:
        ext = self._helper("extension")
        real = ext._get_extensions
        timings = self.timings

        def timed(cls, hook: str):
            if getattr(cls.execute, "_graph_engine_timed", False):
                return
            original = cls.execute

            async def execute(inner, *args, **kwargs):
                started = time.perf_counter()
                try:
                    return await original(inner, *args, **kwargs)
                finally:
                    loop_data = kwargs.get("loop_data")
                    timings.append({"hook": hook, "seconds": time.perf_counter() - started,
                                    "iteration": getattr(loop_data, "iteration", None)})
            execute._graph_engine_timed = True
            cls.execute = execute

        def get_extensions(folder):
            classes = real(folder)
            for cls in classes:
                hook = HOOK_FILES.get(cls.__module__.split(".")[-1])
                if hook:
                    timed(cls, hook)
            return classes

        ext._get_extensions = get_extensions

    # ── the chat ───────────────────────────────────────────────────────────
    def start(self) -> str:
        import initialize
        config = initialize.initialize_agent()
        self.context = self.a0.AgentContext(config=config)
        return self.context.id

    def load(self, chat_id: str) -> None:
        """Load the saved chats as Agent-Zero does at start-up, and take `chat_id`."""
        self.persist.load_tmp_chats()
        self.context = self.a0.AgentContext.get(chat_id)
        if self.context is None:
            raise RuntimeError(f"chat {chat_id} was not loaded from {self.root / 'usr' / 'chats'}")

    def send(self, text: str, timeout: float = 600, say: dict | None = None) -> object:
        self.sent.append(time.perf_counter())
        task = self.context.communicate(self.a0.UserMessage(message=text, attachments=[]))
        return self._wait(task, timeout, say)

    def nudge(self, timeout: float = 600) -> object:
        return self._wait(self.context.nudge(), timeout)

    def _wait(self, task, timeout: float, say: dict | None = None) -> object:
        deadline = time.monotonic() + timeout
        while not task.is_ready():
            if self.script.hung.is_set():
                return HANG
            if say and self.script.started >= int(say.get("after_calls", 0)):
                self.sent.append(time.perf_counter())
                self.context.communicate(self.a0.UserMessage(message=say["text"], attachments=[]))
                say = None
            if time.monotonic() > deadline:
                raise TimeoutError(f"the message loop did not finish within {timeout:.0f} s")
            time.sleep(0.02)
        return task.result_sync()

    def agent_data(self) -> dict:
        return dict(self.context.agent0.data) if self.context else {}

    def scratch_paths(self) -> list[Path]:
        """What this process adds to the tree: its chat, its memory folder, its console log file."""
        paths = [self.root / "usr" / "memory" / self.memory_subdir]
        if self.context is not None:
            paths.append(self.root / "usr" / "chats" / self.context.id)
        log_file = getattr(self._helper("print_style").PrintStyle, "log_file_path", None)
        if log_file and Path(log_file).is_file() and log_file not in self.logs_before:
            paths.append(Path(log_file))
        return paths

    def close(self, remove_chat: bool = True) -> None:
        """Remove what this run left in the tree: its chat and console log (when asked) and its memory folder."""
        import shutil
        paths = self.scratch_paths()
        if self.context is not None and remove_chat:
            try:
                self.context.kill_process()
            except Exception:
                pass
            self.persist.remove_chat(self.context.id)
            self.a0.AgentContext.remove(self.context.id)
        for path in paths if remove_chat else paths[:1]:  # the memory folder always goes
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            elif path.is_file():
                path.unlink()


def _record_judged(changed: Callable[[list], None] | None = None) -> list[dict]:
    """Every result the engine's step judges, as it judges it: {node, outcome, branch, text, reply} (``changed`` is
    called with the list after each)."""
    from graph_engine.core import engine
    judged: list[dict] = []
    judge = engine._judge

    def recorded(run, obs, key):
        seq = run.state.get("seq", 0)
        judge(run, obs, key)
        for event in run.state.get("events") or ():
            if event.get("seq", 0) > seq and event.get("type") == "node_verified" and obs.output is not None:
                judged.append({"node": event["node"], "outcome": event["outcome"],
                               "branch": (run.state.get("branch") or {}).get("id", ""),
                               "text": obs.output.text[-2000:], "reply": obs.output.reply[-2000:]})
                if changed is not None:
                    changed(judged)
    engine._judge = recorded
    return judged


def _result(session: Session, chat_id: str, outcome: list, waited: list) -> dict:
    return {"chat_id": chat_id, "calls": session.script.calls, "utility_calls": session.script.utility_calls,
            "judged": getattr(session, "judged", []),
            "utility_asked": session.script.utility_asked,
            "overrun": session.script.overrun, "timings": session.timings, "outcomes": outcome,
            "hung": session.script.hung.is_set(), "waited": waited, "sent": session.sent}


def _engine_loaded() -> dict:
    """What of the engine this process holds (after a wait: what the warm-up did before the message)."""
    adapter = sys.modules.get("graph_engine.hosts.agent_zero.adapter")
    runtimes = getattr(adapter, "_runtimes", {}) if adapter is not None else {}
    return {"engine_imported": adapter is not None,
            "libraries_loaded": sum(rt.library.current is not None for rt in list(runtimes.values()))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graph_engine.hosts.agent_zero.a0driver")
    parser.add_argument("--a0-root", required=True)
    parser.add_argument("--script", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    spec = json.loads(Path(args.script).read_text())
    out = Path(args.out).resolve()
    session = Session(args.a0_root, Script(spec.get("replies", []), spec.get("utility_reply", "[]"),
                                           spec.get("utility_rules"), spec.get("branch_replies"),
                                           spec.get("chat_delay") or 0.0, spec.get("by_step")),
                      context_window=spec.get("context_window"))
    if spec.get("record_judged"):
        session.judged = _record_judged()
    chat_id, outcomes, waited = "", [], []
    writes = _count_writes(spec.get("stop_at_write"), lambda: out.write_text(
        json.dumps(_result(session, chat_id, outcomes, waited))))
    for turn in spec.get("turns", []):
        if "load" in turn:
            chat_id = turn["load"]
            session.load(chat_id)
            continue
        if session.context is None:
            chat_id = session.start()
        if "wait" in turn:  # the chat is open and the person has not written yet
            time.sleep(float(turn["wait"]))
            waited.append(_engine_loaded())
            continue
        if "write" in turn:  # a person saves a file (the plan library, say) while Agent-Zero runs
            target = Path(turn["write"])
            edited = target.with_name(target.name + ".saving")
            edited.write_text(turn["text"], encoding="utf-8")
            os.replace(edited, target)
            continue
        timeout = float(spec.get("timeout") or 600)
        result = session.nudge(timeout) if turn.get("nudge") else session.send(turn["user"], timeout, turn.get("say"))
        outcomes.append(result if isinstance(result, str) or result is None else str(result))
        out.write_text(json.dumps(dict(_result(session, chat_id, outcomes, waited), writes=writes[0])))
        if result == HANG:
            sys.stdout.flush()
            os._exit(0)  # stopped during the LLM call: nothing after this point is saved
    wait_for_pictures()
    session.close(remove_chat=False)
    out.write_text(json.dumps(_result(session, chat_id, outcomes, waited)))
    sys.stdout.flush()
    os._exit(0)  # Agent-Zero's background threads do not end by themselves


def _count_writes(stop: dict | None, save: Callable[[], None]) -> list[int]:
    """Every write of a run's files counted (``graph_engine.session.audit._write``); with ``stop`` ({"at": N, "cut":
    "before" | "inside" | "after"}) the process stops at write number N, as a kill -9 would: before it, halfway
    through it or right after it (the crash-point tests of the real loop)."""
    from graph_engine.session import audit
    count = [0]
    plain = audit._write

    def write(fd: int, data: bytes) -> int:
        n = count[0]
        count[0] += 1
        if stop is not None and n == stop.get("at"):
            if stop.get("cut") == "inside":
                os.write(fd, data[: max(1, len(data) // 2)])
            elif stop.get("cut") == "after":
                os.write(fd, data)
            save()
            sys.stdout.flush()
            os._exit(137)
        return plain(fd, data)

    audit._write = write
    return count


def wait_for_pictures() -> None:
    """The pictures of ended runs are drawn off the loop: wait for them before the process ends or they are
    looked for (the engine's adapter, as the extension files loaded it)."""
    cards = sys.modules.get("graph_engine.hosts.agent_zero.cards")
    if cards is not None and hasattr(cards, "wait_for_display"):
        cards.wait_for_display()


if __name__ == "__main__":
    sys.exit(main())
