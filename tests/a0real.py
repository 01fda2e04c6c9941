"""The real-loop harness: the pack installed into a fresh copy of a real Agent-Zero tree, run by Agent-Zero's
own message loop with only the model scripted (see `graph_engine.hosts.agent_zero.a0driver`).

    tree = A0Copy.fresh(source_tree, tmp_path)      # a copy of the tree, its environment ready
    tree.install()                                  # the pack's own installer (plugin=True: the v1.x plugin)
    run = tree.run(["fix the bug ..."], replies=[terminal(...), respond(...)])   # one Agent-Zero process
    # turns: a text is a user message, {"nudge": True} the web UI's Nudge, {"load": chat_id} loads the saved
    # chats as Agent-Zero does at start-up; a reply "HANG" is a call that never returns (the process stops
    # there, as a restart would stop it); context_window=N sets the chat model's context length (history is
    # compressed past 0.7 of it); env=... adds environment variables to the Agent-Zero process; a parallel node's
    # branch agents answer from branch_replies={branch id: [...]}, each chat call after chat_delay seconds (or
    # {branch id: seconds}, "" for the chat's own agent); run.raw["calls"] says which agent made each call, when
    run.calls[0]                                    # the text the first chat call received
    tree.state(run.chat_id), tree.audit(run.chat_id)  # the saved run state, the audit log's events
    run.hook_seconds("companion")                   # the hook's time per call

Trees come from `$A0_TREES` (folders holding agent.py); without them every test using the `a0_tree` fixture
is skipped, and the run's summary says once how to run them (SKIP_LINE). conftest.py loads this module as a
pytest plugin, so the fixtures `a0_source` (each source tree) and `a0_tree` (a fresh installed copy of it) are
available to every test file.
"""

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

import a0env
from graph_engine.tools.standin import SELECTOR, COMPANION

REPO = Path(__file__).resolve().parent.parent
INSTALLER = REPO / "install_graph_engine.sh"
SKIP_LINE = ("real Agent-Zero trees not found: set A0_TREES to a folder holding them (git archive of "
             "agent0ai/agent-zero tags v1.7 and v0.9.8.2) and run `make real-loop`")
RUN_TIMEOUT = 900


def reply(tool: str, headline: str = "", **args) -> str:
    """A well-formed model reply that calls `tool` with `args`."""
    return json.dumps({"thoughts": [headline or f"use {tool}"], "headline": headline or tool,
                       "tool_name": tool, "tool_args": args})


def terminal(code: str, headline: str = "") -> str:
    return reply("code_execution_tool", headline, runtime="terminal", code=code, session=0)


def respond(text: str) -> str:
    return reply("response", "Answer", text=text)


CHAIN = ("prepare", "lint_1", "lint_2", "lint_3", "report")  # the lint chain's steps, in order
CHAIN_NAMES = {n: n.replace("_", " ").title() for n in CHAIN}


def lint_chain_library(path: Path, hint: Callable[[str], str], max_retries: int) -> dict:
    """Writes a library of one plan, "Lint Chain": the steps of CHAIN in a row, each checked by its exit status,
    its command ``hint(step)``; the environment that makes Agent-Zero's pack read it."""
    nodes = {"start": {"type": "start"}, "done": {"type": "exit"},
             "stuck": {"type": "escalate", "reason": "a step failed"}}
    for n in CHAIN:
        nodes[n] = {"type": "task", "name": CHAIN_NAMES[n], "action": f"Run {n}", "tool": "code_execution_tool",
                    "tool_hint": hint(n), "verify": {"type": "exit_code_zero"}, "max_retries": max_retries}
    order = ["start", *CHAIN, "done"]
    edges = [{"from": a, "to": b, "condition": "on_success" if a in CHAIN else "always"}
             for a, b in zip(order, order[1:])]
    edges += [{"from": n, "to": "stuck", "condition": "on_exhaust"} for n in CHAIN]
    plan = {"name": "Lint Chain", "triggers": ["run the lint chain"], "trigger_threshold": 1,
            "graph": {"start": "start", "nodes": nodes, "edges": edges}}
    path.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"lint_chain": plan}}))
    return {"GRAPH_ENGINE_LIBRARY": str(path)}


@dataclass
class Run:
    chat_id: str
    calls: list[str]            # per chat call, the whole prompt as text (system + history)
    last_user: list[str]        # per chat call, the last user-side message (where [EXTRAS] goes)
    timings: list[dict]
    outcomes: list
    hung: bool
    overrun: int
    stderr: str = ""
    raw: dict = field(default_factory=dict)

    def hook_seconds(self, hook: str) -> list[float]:
        return [t["seconds"] for t in self.timings if t["hook"] == hook]


class A0Copy:
    """A fresh copy of one Agent-Zero tree, with the Python environment built from its requirements."""

    def __init__(self, source: Path, root: Path, python: Path):
        self.source, self.root, self.python = source, root, python
        self.layout = a0env.layout(source)

    @classmethod
    def fresh(cls, source: Path, dest: Path) -> "A0Copy":
        python = a0env.ensure_env(source)
        root = dest / source.name
        shutil.copytree(source, root, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        return cls(source, root, python)

    # ── the pack ────────────────────────────────────────────────────────────
    def install(self, plugin: bool = False, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        """install_graph_engine.sh into this copy, with the copy's environment as the framework's Python."""
        args = ["bash", str(INSTALLER), "--a0-root", str(self.root), "--yes", "--python", str(self.python)]
        args += ["--plugin"] if plugin else []
        env = {**os.environ, "GRAPH_ENGINE_INSTALL_PYTHON": str(self.python)}
        done = subprocess.run(args + list(extra), capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, f"install failed:\n{done.stdout}\n{done.stderr}"
        return done

    def installed(self, name: str) -> Path:
        """The installed copy of a pack file (SELECTOR, COMPANION or a graph_engine module) in the tree."""
        found = sorted(p for p in self.root.rglob(name) if "backups" not in p.parts)
        assert found, f"{name} is not installed in {self.root}"
        return found[0]

    def package_home(self) -> Path:
        return self.installed("a0driver.py").parents[3]  # <home>/graph_engine/hosts/agent_zero/a0driver.py

    # ── one Agent-Zero process ──────────────────────────────────────────────
    def run(self, turns: list, replies: list[str], context_window: int | None = None,
            utility_reply: str = "[]", env: dict | None = None, timeout: float = 600,
            utility_rules: list[dict] | None = None, stop_at_write: dict | None = None,
            branch_replies: dict | None = None, chat_delay=0.0, **script) -> Run:
        """Run `turns` (a text is a user message; {"nudge": True}; {"load": chat_id}) in one process.
        ``utility_rules``: utility calls holding a rule's marker get its answer; ``script``: the driver's other
        keys (``by_step``, ``record_judged``; see graph_engine.hosts.agent_zero.a0driver)."""
        work = self.root.parent / f"run-{len(list(self.root.parent.glob('run-*')))}"
        work.mkdir()
        spec = {"turns": [{"user": t} if isinstance(t, str) else t for t in turns], "replies": replies,
                "context_window": context_window, "utility_reply": utility_reply, "timeout": timeout,
                "utility_rules": utility_rules or [], "stop_at_write": stop_at_write,
                "branch_replies": branch_replies or {}, "chat_delay": chat_delay, **script}
        (work / "script.json").write_text(json.dumps(spec))
        environ = {**os.environ, "PYTHONPATH": str(self.package_home()), "A0_ROOT": str(self.root),
                   "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
        environ.pop("GRAPH_ENGINE_RUNS_DIR", None)
        done = subprocess.run([str(self.python), "-m", "graph_engine.hosts.agent_zero.a0driver", "--a0-root", str(self.root),
                               "--script", str(work / "script.json"), "--out", str(work / "out.json")],
                              capture_output=True, text=True, env=environ, cwd=self.root, timeout=RUN_TIMEOUT)
        out = work / "out.json"
        assert out.is_file(), f"the Agent-Zero process ended without a result (exit {done.returncode}):\n" \
                              f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
        raw = json.loads(out.read_text())
        return Run(raw["chat_id"], [_text(c["messages"]) for c in raw["calls"]],
                   [_last_user(c["messages"]) for c in raw["calls"]], raw["timings"], raw["outcomes"],
                   raw["hung"], raw["overrun"], done.stderr, raw)

    # ── what the run left ───────────────────────────────────────────────────
    def chat(self, chat_id: str) -> dict:
        return json.loads((self.root / "usr" / "chats" / chat_id / "chat.json").read_text())

    def state(self, chat_id: str) -> dict | None:
        """The run state saved with the chat (agent 0's data, as Agent-Zero wrote it)."""
        agents = self.chat(chat_id).get("agents", [])
        return agents[0].get("data", {}).get("graph_engine_state") if agents else None

    def audit(self, chat_id: str) -> list[dict]:
        """Every audit-log event of the chat's runs, in file order."""
        folder = self.root / "usr" / "graph_engine" / "runs" / chat_id
        events = []
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return events


def _text(messages: list[dict]) -> str:
    return "\n".join(m["content"] for m in messages)


def _last_user(messages: list[dict]) -> str:
    users = [m["content"] for m in messages if m["role"] in ("user", "human")]
    return users[-1] if users else ""


def source_trees() -> list[Path]:
    root = a0env.trees_root()
    return a0env.trees(root) if root else []


def tree_params() -> list:
    found = source_trees()
    if not found:
        return [pytest.param(None, id="no-trees", marks=pytest.mark.skip(reason=SKIP_LINE))]
    return [pytest.param(t, id=t.name) for t in found]


def pytest_terminal_summary(terminalreporter):
    skipped = terminalreporter.stats.get("skipped", [])
    if any("no-trees" in getattr(r, "nodeid", "") for r in skipped):
        terminalreporter.write_line(f"real-loop tests skipped: {SKIP_LINE}")


@pytest.fixture(params=tree_params())
def a0_source(request) -> Path:
    return request.param


@pytest.fixture
def a0_tree(a0_source, tmp_path) -> A0Copy:
    """A fresh copy of each real tree with the pack installed by its own installer (default layout)."""
    tree = A0Copy.fresh(a0_source, tmp_path)
    tree.install()
    return tree
