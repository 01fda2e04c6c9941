"""An Agent-Zero stand-in built from the real shapes in fixtures/agent_zero/ (tests and the demo).

It reproduces what the engine depends on (CONTRACT.md sections 1-5):
* the extension loader: files run with ``spec_from_file_location``, not on
  ``sys.path``, the class used is the last ``Extension`` subclass by name;
* one pass: iteration += 1 -> message_loop_prompts_after -> the prompt is built
  from extras (then ``extras_temporary`` is cleared) -> before_main_llm_call
  (belief-state tracker, org dispatcher, then ours) -> the model's reply ->
  the tool result appended to history;
* history items shaped exactly like the captures (tool results with the shell
  prompt line, ``system_warning`` items, compressed JSON strings).
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import importlib.util
import json
import os
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .plugins_dialog import flat_yaml

ROOT = Path(__file__).resolve().parents[3]  # the repository (and the plugin's root)
EXT_DIR = ROOT / "extensions" / "python"  # the hook folders, as Agent-Zero v1.x lays them out
SELECTOR = EXT_DIR / "before_main_llm_call" / "_15_htn_plan_selector.py"
COMPANION = EXT_DIR / "message_loop_prompts_after" / "_75_graph_workflow_context.py"
WARM_UP = EXT_DIR / "agent_init" / "_90_graph_engine_warm_up.py"
LIBRARY = ROOT / "plan_library" / "htn_plan_library.json"
FIXTURES = ROOT / "fixtures"
PROMPT_LINE = "root@vm:/a0/usr/workdir#"
# what Agent-Zero's terminal answers a command while an earlier one still runs (fw.code.info.md around
# fw.code.running.md): the command is not run
TERMINAL_BUSY = ("\n\n[SYSTEM: Terminal session 0 might be still running. Check previous outputs and decide whether to "
                 "reset and continue or wait for more output is needed.]")
BUSY_CALLS = 2  # commands the terminal refuses after a message cut one short (it runs on meanwhile)
NUDGE = '{\n  "system_message": "Nudged - continue",\n}\n'  # the user message the Nudge adds (fw.msg_nudge.md)


# ── the framework's base class, on either layout ────────────────────────────


class Extension:
    def __init__(self, agent: Any, **kwargs: Any) -> None:
        self.agent = agent
        self.kwargs = kwargs

    async def execute(self, **kwargs: Any) -> Any:  # pragma: no cover - overridden
        return None


COPY_EXAMPLES = 48


def shipped_copies(copies: int) -> dict[str, Any]:
    """A large library: copies of the shipped plans with distinct ids and triggers (copy 7 of a plan is
    ``<id>_7``, each of its trigger phrases with " 7" appended), each with the first ``COPY_EXAMPLES`` of its
    examples (what an author writes; the shipped plans also list the labelled set's tuning requests)."""
    doc = json.loads(LIBRARY.read_text())
    plans = {}
    for i in range(copies):
        for pid, plan in doc["plans"].items():
            copy = json.loads(json.dumps(plan))
            copy["examples"] = copy.get("examples", [])[:COPY_EXAMPLES]
            copy["triggers"] = [f"{t} {i}" for t in copy["triggers"]]
            copy["strong_triggers"] = [f"{t} {i}" for t in copy.get("strong_triggers", [])]
            plans[f"{pid}_{i}"] = copy
    return {"_meta": {"version": "2.0"}, "plans": plans}


def install_framework(layout: str = "new") -> None:
    """Make ``helpers.extension`` (new) or ``python.helpers.extension`` (old) importable, not both."""
    for name in ("helpers", "helpers.extension", "helpers.plugins", "helpers.projects", "python", "python.helpers",
                 "python.helpers.extension"):
        sys.modules.pop(name, None)
    module = types.ModuleType("extension")
    module.Extension = Extension
    if layout == "new":
        pkg = types.ModuleType("helpers")
        pkg.__path__ = []
        pkg.extension = module
        sys.modules.update({"helpers": pkg, "helpers.extension": module})
    else:
        top, sub = types.ModuleType("python"), types.ModuleType("python.helpers")
        top.__path__, sub.__path__ = [], []
        top.helpers, sub.extension = sub, module
        sys.modules.update({"python": top, "python.helpers": sub, "python.helpers.extension": module})
        sys.modules["helpers"] = None  # type: ignore[assignment]  # import helpers -> ImportError


def load_extension_class(path: Path) -> type:
    """Agent-Zero's loader: run the file by path, pick the last Extension subclass by name."""
    spec = importlib.util.spec_from_file_location(path.stem, str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    classes = [obj for obj in vars(module).values()
               if isinstance(obj, type) and issubclass(obj, Extension) and obj is not Extension]
    if len(classes) != 1:
        raise AssertionError(f"{path.name}: expected exactly one Extension subclass, found {classes}")
    return sorted(classes, key=lambda c: c.__name__)[-1]


def install_plugin_helpers(a0_root: Path) -> None:
    """Agent-Zero v1.x's ``helpers.plugins.get_plugin_config`` and ``helpers.projects`` for a tree at
    ``a0_root``, in v1.7's order (``find_plugin_assets``): a plugin's config is the first of the project's
    ``.a0proj/agents/<profile>/plugins/<name>/config.json`` (an agent with a profile) or the project's
    ``.a0proj/plugins/<name>/config.json`` (one without), ``usr/agents/<profile>/...``, the plugin's own
    ``config.json``, else its ``default_config.yaml``; a chat's project is its context's ``project`` data, its
    folder ``usr/projects/<name>``.  Call it after ``Session()`` (which sets up the framework's modules
    afresh)."""
    plugins, projects = types.ModuleType("helpers.plugins"), types.ModuleType("helpers.projects")

    def get_project_folder(name: str) -> str:
        return str(a0_root / "usr" / "projects" / name)

    def get_context_project_name(context: Any) -> str | None:
        return context.get_data("project")

    def get_plugin_config(name: str, agent: Any = None) -> dict[str, Any] | None:
        project = get_context_project_name(agent.context) if agent is not None else None
        profile = getattr(getattr(agent, "config", None), "profile", "") or ""
        places = []
        if project:
            meta = Path(get_project_folder(project)) / ".a0proj"
            places += [meta / "agents" / profile / "plugins" / name] if profile else [meta / "plugins" / name]
        places += [a0_root / "usr" / "agents" / profile / "plugins" / name] if profile else []
        places += [a0_root / "usr" / "plugins" / name]
        for place in places:
            if (place / "config.json").is_file():
                return json.loads((place / "config.json").read_text())
        default = a0_root / "usr" / "plugins" / name / "default_config.yaml"
        return flat_yaml(default.read_text()) if default.is_file() else None

    plugins.get_plugin_config = get_plugin_config
    projects.get_project_folder, projects.get_context_project_name = get_project_folder, get_context_project_name
    sys.modules.update({"helpers.plugins": plugins, "helpers.projects": projects})


# ── agent, log, loop data ───────────────────────────────────────────────────


class _SecretsManager:
    """What Agent-Zero's log asks about every string it shows: the chat's secrets, to mask them."""

    def __init__(self) -> None:
        self.secrets: dict[str, str] = {}  # none configured: the common case

    def mask_values(self, text: str) -> str:
        for key, value in sorted(self.secrets.items(), key=lambda kv: len(kv[1]), reverse=True):
            text = text.replace(value, f"§§secret({key})")
        return text


_SECRETS: dict[tuple[str, ...], _SecretsManager] = {}
_EXTENSION_CLASSES: dict[tuple[Any, str], list] = {}  # Agent-Zero caches each extension point's classes
_CACHE_LOCK = threading.RLock()
_CURRENT_CONTEXT: contextvars.ContextVar[Any] = contextvars.ContextVar("current_context", default=None)


def _extension_point(agent: Any, point: str, data: dict) -> None:
    """An extension point Agent-Zero calls around an ``@extensible`` function: its debug switch read, its
    classes looked up in a locked cache (the entry's time touched), each run with the call's data."""
    int(os.getenv("EXTENSIONS_LOG", "0"))
    with _CACHE_LOCK:
        entry = _EXTENSION_CLASSES.setdefault((agent, point), [[], 0.0])
        entry[1] = time.time()
    for cls in entry[0]:
        cls(agent=agent).execute(data=data)


def _extensible(func: Callable[..., Any]) -> Callable[..., Any]:
    """Agent-Zero's ``@extensible`` (helpers/extension.py): on every call, the extension points' paths made
    from the function's module and qualified name, the agent looked for in the arguments, the points called
    before and after the function."""
    def call(*args: Any, **kwargs: Any) -> Any:
        parts = [p for p in func.__module__.split(".") if p] + [p for p in func.__qualname__.split(".") if p]
        base = os.path.join("_functions", *parts)
        agent = next((a for a in args if isinstance(a, Agent)), kwargs.get("agent"))
        data = {"args": args, "kwargs": kwargs, "result": None, "exception": None}
        _extension_point(agent, os.path.join(base, "start"), data)
        data["result"] = func(*args, **kwargs)
        _extension_point(agent, os.path.join(base, "end"), data)
        return data["result"]
    return call


@_extensible
def secrets_manager(context: Any) -> _SecretsManager:
    """Agent-Zero's ``get_secrets_manager`` (helpers/secrets.py): the chat's project looked up, one manager
    per set of secrets files."""
    context = context or _CURRENT_CONTEXT.get()
    files = ["usr/secrets.env"]
    project = getattr(context, "project", "") if context is not None else ""
    if project:
        files.append(os.path.join("usr", "projects", project, "secrets.env"))
    return _SECRETS.setdefault(tuple(files), _SecretsManager())


def _masked(value: Any, context: Any) -> Any:
    """Agent-Zero's log masks every string it stores, recursively (helpers/log.py ``_mask_recursive``): one
    secrets-manager lookup per string, per dict and per list."""
    manager = secrets_manager(context)
    if isinstance(value, str):
        return manager.mask_values(value)
    if isinstance(value, dict):
        return {k: _masked(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, context) for v in value]
    return value


class LogItem:
    """Agent-Zero's log item (helpers/log.py, python/helpers/log.py): a numbered entry the UI shows, changed in
    place through ``update`` while the log it belongs to was not reset."""

    def __init__(self, log: "Log", no: int, type: str) -> None:
        self.log, self.no, self.guid = log, no, log.guid
        self.type, self.heading, self.content = type, "", ""
        self.kvps: dict[str, Any] = {}
        self.update_progress = "persistent"  # Agent-Zero's default, also for an item restored with a chat

    def update(self, type: str | None = None, heading: str | None = None, content: str | None = None,
               kvps: Any = None, update_progress: str | None = None, **kwargs: Any) -> None:
        if self.guid != self.log.guid:
            return  # the log was reset: Agent-Zero drops the update
        self.log._update(self, type, heading, content, kvps, kwargs, update_progress)


class Log:
    """Agent-Zero's log, with the work it does for each ``log()`` and ``update()`` (v1.7 helpers/log.py): under
    a lock, every string masked for secrets (``_masked``), the key-value pairs deep-copied, the change counted
    in ``updates`` (what the web UI polls), and the progress bar's text (``progress``: the heading of the newest
    item that feeds it, which the web UI writes into ``#progress-bar`` as HTML)."""

    def __init__(self) -> None:
        self.guid = "log-1"
        self.logs: list[LogItem] = []
        self.updates: list[int] = []  # item numbers, once per log() and per update(), as Agent-Zero counts
        self.context: Any = None
        self._lock = threading.RLock()
        self.progress, self.progress_no = "Waiting for input", 0

    def log(self, type: str = "info", heading: str = "", content: str = "", kvps: Any = None,
            update_progress: str | None = None, **kwargs: Any) -> LogItem:
        with self._lock:
            item = LogItem(self, len(self.logs), type)
            self.logs.append(item)
        self._update(item, type, heading or "", content or "", dict(kvps or {}), kwargs, update_progress)
        return item

    def _update(self, item: LogItem, type: str | None, heading: str | None, content: str | None, kvps: Any,
                extra: dict[str, Any], update_progress: str | None = None) -> None:
        heading = _masked(heading, self.context)[:120] if heading is not None else None
        content = _masked(content, self.context) if content is not None else None
        kvps = _masked(copy.deepcopy(dict(kvps)), self.context) if kvps is not None else None
        extra = _masked(copy.deepcopy(extra), self.context) if extra else {}
        with self._lock:
            item.type = type if type is not None else item.type
            item.heading = heading if heading is not None else item.heading
            item.content = content if content is not None else item.content
            if kvps is not None:
                item.kvps = kvps
            item.kvps.update(extra)
            item.update_progress = update_progress if update_progress is not None else item.update_progress
            self.updates.append(item.no)
            if item.heading and item.update_progress != "none" and item.no >= self.progress_no:
                self.progress = item.heading  # as Agent-Zero: the newest item with a heading that feeds it
                self.progress_no = item.no if item.update_progress == "persistent" else -1

    def restored(self) -> "Log":
        """The log as Agent-Zero rebuilds it from chat.json: new items numbered in order, with their kvps."""
        log = type(self)()
        log.guid = self.guid
        for i, old in enumerate(self.logs):
            item = LogItem(log, i, old.type)
            item.heading, item.content, item.kvps = old.heading, old.content, json.loads(json.dumps(old.kvps))
            log.logs.append(item)
            log.updates.append(i)
        return log

    def reset(self) -> None:
        self.guid = f"log-{int(self.guid.split('-')[1]) + 1}"
        self.logs, self.updates = [], []
        self.progress, self.progress_no = "Waiting for input", 0

    @property
    def entries(self) -> list[dict[str, Any]]:
        return [{"type": i.type, "heading": i.heading, "content": i.content, "kvps": i.kvps} for i in self.logs]

    def texts(self, level: str | None = None) -> list[str]:
        return [e["content"] for e in self.entries if level is None or e["type"] == level]


class LineLog(Log):
    """A log whose ``log`` returns nothing: a logger of another shape (no item to update)."""

    def log(self, type: str = "info", heading: str = "", content: str = "", kvps: Any = None,  # type: ignore[override]
            **kwargs: Any) -> None:
        super().log(type, heading, content, kvps, **kwargs)


class Context:
    def __init__(self, ctx_id: str = "IDrobAgr") -> None:
        self.id = ctx_id
        self.log = Log()
        self.data: dict[str, Any] = {}  # the chat's data: "project" is the project it is in (v1.x)
        self.hooks: tuple[list[type], list[type]] = ([], [])  # the pack's hook classes (the Session's)
        self.model: Any = None  # the subordinate agents' scripted model (BranchModel)
        self.agent0: Any = None  # the chat's own agent (the first agent made for it)

    def get_data(self, key: str) -> Any:
        return self.data.get(key)


MAX_SUBORDINATE_PASSES = 40


@dataclasses.dataclass
class AgentConfig:
    """Agent-Zero's ``AgentConfig``, the part the pack reads: the agent profile (``call_subordinate``'s)."""

    profile: str = ""


class Agent:
    """Agent-Zero's ``Agent(number, config, context)``: its data, and for a subordinate (``call_subordinate``) its
    own history and ``monologue``: passes in Agent-Zero's order, the pack's hooks around each call of the context's
    scripted model (``BranchModel``), until a final response."""

    def __init__(self, number: int = 0, config: Any = None, context: "Context | None" = None) -> None:
        config = AgentConfig() if config is None else config
        self.number = number
        self.config = config
        self.context = context or Context()
        if self.context.agent0 is None:
            self.context.agent0 = self
        self.data: dict[str, Any] = {}
        self.history: list[dict[str, Any]] = []
        self.last_user_message: UserMessage | None = None
        self.intervention: Any = None  # a message the person wrote while the agent works (Agent-Zero's)

    def get_data(self, key: str) -> Any:
        return self.data.get(key)

    def set_data(self, key: str, value: Any) -> None:
        self.data[key] = value

    def hist_add_user_message(self, message: "UserMessage", intervention: bool = False) -> None:
        self.history.append({"ai": False, "content": {"user_intervention" if intervention else "user_message":
                                                      message.text}})
        self.last_user_message = message

    async def call_chat_model(self, prompt: str) -> "Reply":
        return await self.context.model(self, prompt)

    async def monologue(self) -> str:
        prompts_after, before_main = self.context.hooks
        loop = LoopData(user_message=self.last_user_message)
        for _ in range(MAX_SUBORDINATE_PASSES):
            loop.iteration += 1
            loop.params_temporary = {}
            loop.history_output = [dict(h) for h in self.history]
            for cls in prompts_after:
                await cls(self).execute(loop_data=loop)
            extras = {**loop.extras_persistent, **loop.extras_temporary}
            loop.extras_temporary.clear()
            for cls in before_main:
                await cls(self).execute(loop_data=loop)
            reply = await self.call_chat_model(extras.get("htn_active_plan", ""))
            raw = reply.raw()
            loop.last_response = raw
            self.history.append({"ai": True, "content": raw})
            if reply.final:
                return reply.final
            if reply.warning:
                self.history.append({"ai": False, "content": {"system_warning": reply.warning}})
            else:
                self.history.append({"ai": False, "content": {"tool_name": reply.tool, "tool_result": reply.output}})
        return ""


class BranchModel:
    """The model of a chat's subordinate agents, scripted per branch: ``replies[branch id]`` are its replies in
    order (a Reply, or a function of (agent, prompt) giving one), each after ``delay`` seconds; a branch whose
    replies ran out answers "Done.".  ``calls`` records (branch, "start" | "end", the prompt) in the order they
    happened, ``prompts[branch]`` what each call was shown.  ``delay`` may be a dict: seconds per branch."""

    def __init__(self, replies: dict[str, list[Any]], delay: Any = 0.0) -> None:
        self.replies = {k: list(v) for k, v in replies.items()}
        self.delay = delay
        self.calls: list[tuple[str, str]] = []
        self.prompts: dict[str, list[str]] = {}

    async def __call__(self, agent: Any, prompt: str) -> "Reply":
        branch = (agent.__dict__.get("_graph_engine_branch") or (None, "?"))[1]
        self.calls.append((branch, "start"))
        self.prompts.setdefault(branch, []).append(prompt)
        try:
            await asyncio.sleep(self.delay.get(branch, 0.0) if isinstance(self.delay, dict) else self.delay)
        finally:
            self.calls.append((branch, "end"))
        queue = self.replies.get(branch) or []
        reply = queue.pop(0) if queue else Reply(final="Done.")
        return reply(agent, prompt) if callable(reply) else reply


class UtilityModel:
    """Agent-Zero's utility model (``agent.call_utility_model``), scripted: ``answer`` is the reply, or a function of
    (system, message) giving it; ``delay`` seconds pass before it answers; ``fail`` is raised instead.  Each call's
    (system, message) is recorded."""

    def __init__(self, answer: Any = "none", delay: float = 0.0, fail: BaseException | None = None) -> None:
        self.answer, self.delay, self.fail = answer, delay, fail
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, system: str, message: str, callback: Any = None, background: bool = False) -> Any:
        self.calls.append((system, message))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        return self.answer(system, message) if callable(self.answer) else self.answer


class UserMessage:
    """``loop_data.user_message``: ``.output()`` gives the captured shape (and Agent-Zero's ``UserMessage(message=,
    attachments=)``, which a subordinate is given)."""

    def __init__(self, text: str = "", message: str = "", attachments: Any = None) -> None:
        self.text = text or message
        self.message = self.text

    def output(self) -> list[dict[str, Any]]:
        return [{"ai": False, "content": {"user_message": self.text}}]


@dataclass
class LoopData:
    iteration: int = -1
    history_output: list[dict[str, Any]] = field(default_factory=list)
    extras_temporary: dict[str, Any] = field(default_factory=dict)
    extras_persistent: dict[str, Any] = field(default_factory=dict)
    params_temporary: dict[str, Any] = field(default_factory=dict)
    params_persistent: dict[str, Any] = field(default_factory=dict)
    last_response: str = ""
    user_message: UserMessage | None = None
    current_tool: Any = None


# ── the neighbouring layers ─────────────────────────────────────────────────


class BeliefStateTracker:
    """The _11_ tracker's domain classification: substring trigger scores, first best domain wins."""

    def __init__(self, taxonomy_path: Path = FIXTURES / "bst_slot_taxonomy.json") -> None:
        self.taxonomy = json.loads(taxonomy_path.read_text())

    def classify(self, message: str) -> str:
        text = message.lower()
        min_len = self.taxonomy["global"].get("min_trigger_word_length", 3)
        scores = {}
        for name, domain in self.taxonomy["domains"].items():
            if name == "conversational":
                continue
            triggers = domain.get("triggers", [])
            hits = sum(1 for t in triggers if len(t) >= min_len and t in text)
            if hits:
                scores[name] = hits + 0.1 * sum(len(t.split()) for t in triggers if t in text)
        return max(scores, key=lambda k: scores[k]) if scores else ""

    def run(self, agent: Agent, message: str) -> None:
        domain = self.classify(message)
        store = agent.__dict__.setdefault("_bst_store", {})
        if domain:
            store["__bst_belief_state__"] = {"domain": domain}
        else:
            store.pop("__bst_belief_state__", None)


# ── replies the scripted model gives ────────────────────────────────────────


def tool_reply(tool: str, code: str = "", **args: Any) -> str:
    tool_args = {"runtime": "terminal", "session": 0, "code": code} if tool == "code_execution_tool" else args
    return json.dumps({"thoughts": ["scripted"], "headline": f"Scripted call of {tool}", "tool_name": tool,
                       "tool_args": tool_args}, indent=4)


@dataclass
class Reply:
    """One scripted model turn: a tool call and what the tool returns, a warning, or a final response."""

    tool: str = "code_execution_tool"
    code: str = ""
    output: str = ""  # the tool's text before Agent-Zero adds the prompt line
    thoughts: str = ""
    warning: str = ""  # instead of a tool result: a system_warning (misformatted reply)
    final: str = ""  # the response tool: ends the monologue

    def raw(self) -> str:
        if self.warning:
            return "I am not sending JSON at all."
        if self.final:
            return json.dumps({"thoughts": [self.thoughts or "done"], "headline": "Responding",
                               "tool_name": "response", "tool_args": {"text": self.final}}, indent=4)
        data = json.loads(tool_reply(self.tool, self.code))
        if self.thoughts:
            data["thoughts"] = [self.thoughts]
        return json.dumps(data, indent=4)


def _so_far(output: str) -> str:
    """A command's output while it still runs: what it printed before its last line (the exit status it echoes
    at the end and the shell's prompt line are not there yet)."""
    lines = [line for line in output.strip("\n").splitlines() if line.strip() != PROMPT_LINE]
    return "\n" + "\n".join(lines[:-1]) if len(lines) > 1 else ""


def terminal(text: str) -> str:
    """What code_execution_tool returns: the screen text and the shell prompt line."""
    body = text if text.strip() else ""
    if not body:
        return "[SYSTEM: No output returned. Consider double-checking the command.]"
    return "\n" + body.rstrip("\n") + "\n" + PROMPT_LINE


# ── the driver ──────────────────────────────────────────────────────────────

# The moments of a pass at which Agent-Zero takes a message the person wrote while the agent works (its
# ``handle_intervention`` calls, in the order of a pass): before the prompt is built (message_loop_start), after the
# hooks (before_main_llm_call), during the model's call (its stream), after the call (the reply kept, no tool), while
# the tool runs (its output so far kept as its result), after the tool (the result complete), and before the next
# pass (the same history as after the tool).
MOMENTS = ("before_prompt", "after_hooks", "during_call", "after_call", "during_tool", "after_tool", "before_next")


@dataclass
class PassRecord:
    iteration: int
    prompt_extras: dict[str, Any]  # what the LLM call of this pass received
    reply: Reply | None
    state_after: dict[str, Any] | None


class Session:
    """Runs passes in Agent-Zero's order with the extensions loaded as Agent-Zero loads them."""

    def __init__(self, *, companion: bool = True, selector: bool = True, layout: str = "new",
                 agent: Agent | None = None, bst: BeliefStateTracker | None = None,
                 allowed_plans: Any = "unset", wait_for_display: bool = True, warm_up: bool = False,
                 utility: UtilityModel | None = None) -> None:
        install_framework(layout)
        self.wait_for_display = wait_for_display  # each pass ends when the pictures it started are drawn
        self.layout = layout
        self.agent = agent or Agent()
        if utility is not None:
            self.agent.call_utility_model = utility  # type: ignore[attr-defined]
        self.bst = bst or BeliefStateTracker()
        self.allowed_plans = allowed_plans
        self.prompts_after = [load_extension_class(COMPANION)(self.agent)] if companion else []
        self.before_main = [load_extension_class(SELECTOR)(self.agent)] if selector else []
        self.agent.context.hooks = ([type(e) for e in self.prompts_after], [type(e) for e in self.before_main])
        self.history: list[dict[str, Any]] = [{"ai": True, "content": tool_reply("response", text="Hello!")}]
        self.loop: LoopData | None = None
        self.busy = 0  # commands the terminal will refuse (a command cut short still runs)
        self.records: list[PassRecord] = []
        self.monologue_open = False
        self.saved: dict[str, Any] = {}
        if warm_up:  # agent_init: called as each layout calls it (v1.x: not awaited; v0.9.x: awaited)
            done = load_extension_class(WARM_UP)(self.agent).execute()
            if layout == "old":
                asyncio.run(done)
            else:
                assert done is None, "agent_init extensions must not return an awaitable on v1.x"

    # a user message opens a monologue (a new LoopData)
    def user(self, text: str) -> None:
        self.history.append({"ai": False, "content": {"user_message": text}})
        self.loop = LoopData(user_message=UserMessage(text), history_output=[])
        self.monologue_open = True
        self._user_text = text

    def run_pass(self, reply: Reply | Callable[[str, dict | None], Reply] | None,
                 intervention: str = "", at: str = "after_tool",
                 during: Callable[[str], None] | None = None) -> PassRecord:
        """One pass.  ``reply`` may be a function of (the workflow text in the prompt, the state): a model
        that reads its prompt before answering.  ``intervention``: the person writes while the agent works, and
        Agent-Zero takes it at the moment ``at`` (one of MOMENTS) as its ``handle_intervention`` does: what the
        pass produced so far stays in history (a reply given, a tool's output so far), the message follows as a
        ``user_intervention``, and the rest of the pass does not happen; the monologue goes on with the next pass.
        ``during(moment)`` is called at each moment of the pass (the tests press a control there)."""
        assert self.loop is not None and self.monologue_open, "call user() first"
        assert at in MOMENTS, at
        loop = self.loop
        loop.iteration += 1
        loop.params_temporary = {}
        cut = intervention if intervention else ""
        moment = self._moment(during, cut, at)
        if moment("before_prompt"):
            return self._cut_pass(loop, {}, None, cut)
        loop.history_output = [dict(h) for h in self.history]
        self._call(self.prompts_after, loop)
        prompt_extras = {**loop.extras_persistent, **loop.extras_temporary}
        loop.extras_temporary.clear()
        if loop.iteration == 0:
            self.bst.run(self.agent, self._user_text)
        if self.allowed_plans != "unset":
            self.agent.set_data("_org_htn_allowed_plans", self.allowed_plans)
        self._call(self.before_main, loop)
        pending = getattr(self.agent, "intervention", None)  # said while a hook waited (branches running)
        if pending is not None:
            self.agent.intervention = None
            return self._cut_pass(loop, prompt_extras, None, getattr(pending, "message", str(pending)))
        if moment("after_hooks") or moment("during_call"):
            return self._cut_pass(loop, prompt_extras, None, cut)
        if callable(reply):
            reply = reply(prompt_extras.get("htn_active_plan", ""), getattr(self.agent, "_htn_state", None))
        if reply is not None:
            if moment("after_call"):
                self._ai(loop, reply.raw())  # handle_intervention(agent_response): the reply is kept, no tool runs
                return self._cut_pass(loop, prompt_extras, reply, cut)
            if not reply.final and not reply.warning and moment("during_tool"):
                self._ai(loop, reply.raw())  # the tool's output so far (the command still runs) is kept
                if _so_far(reply.output):
                    self.history.append({"ai": False, "content": {"tool_name": reply.tool,
                                                                  "tool_result": _so_far(reply.output)}})
                self.busy = BUSY_CALLS  # the cut command runs on: the terminal refuses the next commands
                return self._cut_pass(loop, prompt_extras, reply, cut)
            self._model(loop, reply)
            moment("after_tool")
        if cut and at in ("after_tool", "before_next"):
            self.history.append({"ai": False, "content": {"user_intervention": cut}})
            self.monologue_open = True
        return self._end_pass(loop, prompt_extras, reply)

    def _moment(self, during: Callable[[str], None] | None, cut: str, at: str) -> Callable[[str], bool]:
        """Each moment of the pass: the tests' callback runs there; True where the person's message cuts the
        pass (the moments after the tool are taken by the next check, after the pass)."""
        def moment(name: str) -> bool:
            if during is not None:
                during(name)
            return bool(cut) and name == at and at not in ("after_tool", "before_next")
        return moment

    def _cut_pass(self, loop: LoopData, prompt_extras: dict[str, Any], reply: Reply | None, words: str) -> PassRecord:
        """Agent-Zero's handle_intervention: the message goes to history and the pass ends (InterventionException)."""
        self.history.append({"ai": False, "content": {"user_intervention": words}})
        self.monologue_open = True
        return self._end_pass(loop, prompt_extras, reply)

    def _ai(self, loop: LoopData, raw: str) -> None:
        loop.last_response = raw  # hist_add_ai_response
        self.history.append({"ai": True, "content": raw})

    def _end_pass(self, loop: LoopData, prompt_extras: dict[str, Any], reply: Reply | None) -> PassRecord:
        cards = sys.modules.get("graph_engine.hosts.agent_zero.cards")
        if self.wait_for_display and cards is not None:
            cards.wait_for_display()  # drawn off the loop: waited for here, so that tests see them
        self.saved = self._saved_data()  # message_loop_end: Agent-Zero saves the chat at the end of a pass
        state = getattr(self.agent, "_htn_state", None)
        record = PassRecord(loop.iteration, prompt_extras, reply, json.loads(json.dumps(state)) if state else None)
        self.records.append(record)
        return record

    def _model(self, loop: LoopData, reply: Reply) -> None:
        raw = reply.raw()
        loop.last_response = raw  # a new reply is a new object (its text may repeat: the tests' replies do)
        self.history.append({"ai": True, "content": raw})
        if reply.final:
            self.monologue_open = False
        elif reply.warning:
            self.history.append({"ai": False, "content": {"system_warning": reply.warning}})
        elif self.busy and reply.tool == "code_execution_tool":  # Agent-Zero's terminal still runs a cut command
            self.busy -= 1
            self.history.append({"ai": False, "content": {"tool_name": reply.tool, "tool_result": TERMINAL_BUSY}})
        else:
            self.history.append({"ai": False, "content": {"tool_name": reply.tool,
                                                          "tool_result": reply.output}})

    def _call(self, extensions: list[Any], loop: LoopData) -> None:
        for ext in extensions:
            asyncio.run(ext.execute(loop_data=loop))

    def _saved_data(self) -> dict[str, Any]:
        return json.loads(json.dumps({k: v for k, v in self.agent.data.items() if not k.startswith("_")}))

    def restarted(self, saved: dict[str, Any] | None = None) -> "Session":
        """Agent-Zero restarted (or the chat was reloaded): a new process, the agent rebuilt from chat.json.

        Only data keys without a leading "_" survive (JSON round trip); attributes such as
        ``_htn_state`` are gone; the chat history is restored.  ``saved``: the data as last saved (default:
        as it is now)."""
        saved = self._saved_data() if saved is None else saved
        agent = Agent(self.agent.number)
        agent.context.id = self.agent.context.id
        agent.context.log = self.agent.context.log.restored()  # the chat's log is saved with it
        agent.data = saved
        adapter = sys.modules.get("graph_engine.hosts.agent_zero.adapter")
        if adapter is not None:
            adapter._runtimes.clear()  # module-level caches do not survive a new process
        new = Session(companion=bool(self.prompts_after), selector=bool(self.before_main), layout=self.layout,
                      agent=agent, bst=self.bst, allowed_plans=self.allowed_plans,
                      wait_for_display=self.wait_for_display)
        new.history = json.loads(json.dumps(self.history))
        return new

    def stopped_during_call(self) -> "Session":
        """Agent-Zero stopped during an LLM call and started again: the hooks of the pass ran, its call never
        returned, and the chat on disk is the one saved at the end of the pass before."""
        saved = self.saved
        self.run_pass(None)
        return self.restarted(saved)

    def nudge(self) -> None:
        """The web UI's Nudge after a stop: a new user message holding Agent-Zero's fw.msg_nudge.md."""
        self.user(NUDGE)

    # helpers for assertions
    @property
    def state(self) -> dict[str, Any] | None:
        return getattr(self.agent, "_htn_state", None)

    @property
    def log(self) -> Log:
        return self.agent.context.log

    def last_prompt(self) -> str:
        return self.records[-1].prompt_extras.get("htn_active_plan", "") if self.records else ""


def ok(text: str) -> Reply:
    """A terminal call whose output passes most checks."""
    return Reply(code="true", output=terminal(text))


def cmd(code: str, output: str) -> Reply:
    return Reply(code=code, output=terminal(output))
