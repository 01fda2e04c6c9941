"""The scenarios, run over every host of the session: Agent-Zero's port (its hook files in the stand-in of
Agent-Zero's loop) and the terminal chat (``hosts/chat``).  Each scenario is a conversation (the person's messages,
the shell commands the model runs for each, really run by bash) and what must come of it: the verdicts in order, how
the run ended, the PACE level.  Both hosts must also show each model call the same workflow text: a host is a port,
not a second engine."""

from __future__ import annotations

import asyncio
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from graph_engine.hosts.chat.chat import ChatHost, Reply
from graph_engine.session.runtime import Runtime
from graph_engine.tools.standin import Reply as A0Reply, Session, cmd
from scenario import fix_loop_plan, told, use_library
from test_routing import review_plan

FIX = "echo fixed"
PASS = 'true; echo "[exit:$?]"'
FAIL = 'echo "AssertionError: 1 != 0"; false; echo "[exit:$?]"'


@dataclass
class Scenario:
    name: str
    turns: list[tuple[str, list[str]]]  # (the person's message, the commands the model runs before it answers)
    verdicts: list[tuple[str, str]]
    ended: str  # the run's status at the end ("active": still running)
    pace: str = ""
    restart_before: tuple[int, ...] = ()  # the host restarts (a new process) before these turns
    plans: dict[str, Any] = field(default_factory=lambda: {"loop": fix_loop_plan()})  # "{work}": the work folder


def file_plan() -> dict:
    """A step whose check looks at the disk: the host is asked what it sees at the path."""
    return {"name": "Make the report", "triggers": ["make the report"], "trigger_threshold": 1, "graph": {
        "start": "make",
        "nodes": {"make": {"type": "task", "name": "Write report.txt",
                           "verify": {"type": "file_exists", "value": "{work}/report.txt"}, "max_retries": 1},
                  "stuck": {"type": "escalate", "reason": "No report"}, "done": {"type": "exit"}},
        "edges": [{"from": "make", "to": "done", "condition": "on_success"},
                  {"from": "make", "to": "stuck", "condition": "on_exhaust"}]}}


def linear_plan() -> dict:
    """A plan of the linear selector's kind (``steps``)."""
    return {"name": "Deploy", "triggers": ["deploy the site"], "trigger_threshold": 1,
            "steps": [{"name": "Build", "verify": {"type": "exit_code_zero"}},
                      {"name": "Publish", "verify": {"type": "any_output"}}]}


SCENARIOS = [
    Scenario("passes every step", [("loop please", [FIX, PASS])], [("fix", "success"), ("test", "success")], "completed"),
    Scenario("retries after a failed test", [("loop please", [FIX, FAIL, FIX, PASS])],
             [("fix", "success"), ("test", "fail"), ("fix", "success"), ("test", "success")], "completed"),
    Scenario("escalates when the retries run out", [("loop please", [FIX, FAIL, FIX, FAIL])],
             [("fix", "success"), ("test", "fail"), ("fix", "success"), ("test", "fail")], "escalated", pace="contingent",
             plans={"loop": fix_loop_plan(max_retries=1)}),
    # the model's answer to the person ends its turn: it is the result of the step it was shown (no exit status)
    Scenario("resumes after a restart", [("loop please", [FIX]), ("go on", [FIX, PASS])],
             [("fix", "success"), ("test", "fail"), ("fix", "success"), ("test", "success")], "completed",
             restart_before=(1,)),
    Scenario("stops on the person's word", [("loop please", [FIX]), ("stop the workflow", [])],
             [("fix", "success"), ("test", "fail")], "stopped"),
    Scenario("starts nothing for a message no plan fits", [("what is the capital of France?", [])], [], ""),
    Scenario("routes on the person's answer at a human gate", [("review the release", [PASS]), ("a", [PASS])],
             [("build", "success"), ("ship", "success")], "completed", plans={"r": review_plan()}),
    Scenario("judges a file check by what the host sees", [("make the report", ["ls", "echo ok > report.txt"])],
             [("make", "fail"), ("make", "success")], "completed", plans={"f": file_plan()}),
    Scenario("runs a linear plan", [("deploy the site", [PASS, FIX])], [("step_1", "success"), ("step_2", "success")],
             "completed", plans={"d": linear_plan()}),
]


def shell(command: str, cwd: Path) -> str:
    done = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


class AgentZeroHost:
    """The Agent-Zero port: the pack's hook files as Agent-Zero's loop calls them (tools/standin.py)."""

    def __init__(self, plans: dict, tmp_path: Path, work: Path, monkeypatch: Any) -> None:
        use_library(monkeypatch, tmp_path, plans)
        self.cwd, self.session = work, Session()

    def say(self, words: str, commands: list[str]) -> list[str]:
        self.session.user(words)
        replies = [lambda text, state, c=c: cmd(c, shell(c, self.cwd)) for c in commands]  # run when called
        return [told(self.session.run_pass(reply)) for reply in [*replies, A0Reply(final="done")]]

    def restart(self) -> None:
        self.session = self.session.restarted()

    def run(self) -> dict | None:
        return self.session.state or getattr(self.session.agent, "_htn_last_run", None)

    def pace(self) -> str:
        return getattr(self.session.agent, "_org_pace_level", "") or ""


class TerminalChatHost:
    """The terminal chat (hosts/chat), its run kept in a file as a process would keep it."""

    def __init__(self, plans: dict, tmp_path: Path, work: Path, monkeypatch: Any) -> None:
        self.library = tmp_path / "chat_library.json"
        self.library.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": plans}))
        self.tmp, self.work, self.queue, self.shown, self.level = tmp_path, work, [], [], ""
        self.host = self._new()

    def _new(self) -> ChatHost:
        host = ChatHost(Runtime(str(self.library), str(self.tmp / "chat_home")), self._model,
                        str(self.tmp / "chat_state.json"), str(self.work), out=lambda line: None)
        host.set_pace = lambda level: setattr(self, "level", level)  # type: ignore[method-assign]
        return host

    def _model(self, words: str, shown: str) -> Reply:
        self.shown.append(shown)
        return self.queue.pop(0)

    def say(self, words: str, commands: list[str]) -> list[str]:
        self.queue, self.shown = [Reply(command=c) for c in commands] + [Reply(text="done")], []
        asyncio.run(self.host.say(words))
        return self.shown

    def restart(self) -> None:
        self.host = self._new()

    def run(self) -> dict | None:
        return self.host.state or self.host.last_run

    def pace(self) -> str:
        return self.level


HOSTS = {"agent_zero": AgentZeroHost, "chat": TerminalChatHost}


def played(host_name: str, sc: Scenario, tmp_path: Path, monkeypatch: Any) -> tuple[Any, list[list[str]]]:
    """The scenario played on one host, in a folder of its own; the commands run in ``tmp_path/work`` (one folder
    for every host, so that both are shown the same paths)."""
    (tmp_path / host_name).mkdir()
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    for old in work.iterdir():
        old.unlink()
    plans = json.loads(json.dumps(sc.plans).replace("{work}", str(work)))
    host = HOSTS[host_name](plans, tmp_path / host_name, work, monkeypatch)
    shown = []
    for i, (words, commands) in enumerate(sc.turns):
        if i in sc.restart_before:
            host.restart()
        shown.append(host.say(words, commands))
    return host, shown


@pytest.mark.parametrize("host_name", HOSTS)
@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda sc: sc.name)
def test_a_scenario_ends_the_same_on_every_host(host_name, sc, tmp_path, monkeypatch):
    host, _ = played(host_name, sc, tmp_path, monkeypatch)
    run = host.run() or {}
    assert [(e["node"], e["outcome"]) for e in run.get("events", ()) if e["type"] == "node_verified"] == sc.verdicts
    assert run.get("status", "") == sc.ended
    assert host.pace() == sc.pace


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda sc: sc.name)
def test_every_host_shows_each_call_the_same_workflow_text(sc, tmp_path, monkeypatch):
    texts = {name: played(name, sc, tmp_path, monkeypatch)[1] for name in HOSTS}
    assert texts["agent_zero"] == texts["chat"]
    if sc.verdicts:
        assert any("[WORKFLOW" in text for turn in texts["chat"] for text in turn)


def test_both_hosts_implement_the_port(tmp_path):
    from graph_engine.hosts.agent_zero.adapter import Port
    from graph_engine.session.port import Host
    rt = Runtime(str(tmp_path / "none.json"), str(tmp_path))
    assert isinstance(ChatHost(rt, lambda words, shown: Reply(text="hi")), Host)
    assert isinstance(Port(rt, object(), object()), Host)
    assert not isinstance(object(), Host)  # (the check can fail)
