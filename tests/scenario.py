"""Small builders shared by the behaviour tests."""

import json
from pathlib import Path
from typing import Any

from graph_engine.tools.standin import FIXTURES, Reply, Session, cmd

OUTPUTS = json.loads((FIXTURES / "check_outputs.json").read_text())["cases"]
TRIGGER_CASES = json.loads((FIXTURES / "trigger_cases.json").read_text())["cases"]

LEGACY = FIXTURES / "legacy_linear_htn_plan_library.json"
BUG_MESSAGE = "fix the bug in /tmp/test.py"


def use_library(monkeypatch, tmp_path: Path, plans: dict[str, Any]) -> Path:
    path = tmp_path / "htn_plan_library.json"
    path.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": plans}))
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(path))
    return path


def library_edited() -> None:
    """The engine notices the edited library file now and loads it, as its thread does beside the passes (the
    next pass takes it)."""
    from graph_engine.hosts.agent_zero import adapter
    for rt in adapter._runtimes.values():
        rt.library._checked_at = -1e18
        rt.library.refresh()
        rt.library.wait_loaded()


def events(session: Session, etype: str | None = None) -> list[dict]:
    state = session.state or getattr(session.agent, "_htn_last_run", None) or {}
    return [e for e in state.get("events", []) if etype is None or e["type"] == etype]


def verdicts(session: Session) -> list[tuple[str, str]]:
    return [(e["node"], e["outcome"]) for e in events(session, "node_verified")]


IDLE = Reply(warning="You have misformatted your message. Follow system prompt instructions.")


def told(record) -> str:
    """The workflow text a model call received (the companion's prompt extra)."""
    return record.prompt_extras.get("htn_active_plan", "")


def ready(s: Session) -> Session:
    """The library loaded and its meaning index built, as the warm-up leaves them before the first message."""
    from graph_engine.hosts.agent_zero import adapter
    s.user("hello")
    s.run_pass(Reply(final="hi"))
    for rt in adapter._runtimes.values():
        rt.library.current.meaning_index(wait=True)
    return s


def started(message: str = BUG_MESSAGE, **kwargs: Any) -> Session:
    """A session whose first pass activated a plan; the model's first call produced no tool result (a
    misformatted reply), so the next call is the first whose result is judged."""
    session = Session(**kwargs)
    session.user(message)
    session.run_pass(IDLE)
    return session


def exit_ok(text: str = "") -> Reply:
    return cmd('run; echo "[exit:$?]"', (text + "\n" if text else "") + "[exit:0]")


def exit_fail(text: str = "Error: still broken") -> Reply:
    return cmd('run; echo "[exit:$?]"', text + "\n[exit:1]")


def crash() -> Reply:
    return cmd('python3 /tmp/test.py; echo "[exit:$?]"',
               "Traceback (most recent call last):\nZeroDivisionError: division by zero\n[exit:1]")


def fix_loop_plan(max_retries: int = 2) -> dict:
    """test -> fix -> test, bounded by test's budget; exhausted -> escalate."""
    return {
        "name": "Loop",
        "domains": ["bugfix"],
        "triggers": ["loop please"],
        "trigger_threshold": 1,
        "stale_after_turns": 30,
        "graph": {
            "start": "fix",
            "nodes": {
                "fix": {"type": "task", "name": "Fix", "verify": {"type": "any_output"}},
                "test": {"type": "task", "name": "Test", "verify": {"type": "exit_code_zero"},
                         "max_retries": max_retries},
                "stuck": {"type": "escalate", "name": "Stuck", "reason": "Tests keep failing",
                          "pace_level": "contingent"},
                "done": {"type": "exit", "name": "Done"},
            },
            "edges": [
                {"from": "fix", "to": "test", "condition": "on_success"},
                {"from": "fix", "to": "stuck", "condition": "on_exhaust"},
                {"from": "test", "to": "done", "condition": "on_success"},
                {"from": "test", "to": "fix", "condition": "on_retry"},
                {"from": "test", "to": "stuck", "condition": "on_exhaust"},
            ],
        },
    }


def message_for(plan: str) -> str:
    """A golden-set message that starts the plan."""
    return next(c["message"] for c in TRIGGER_CASES if c["expect"] == plan)


class FixtureModel:
    """A scripted model that answers each step it is shown with a realistic output from the check fixtures.

    ``failures[node]`` = how many visits of that node get a failing output first."""

    def __init__(self, plan: str, failures: dict[str, int] | None = None) -> None:
        self.plan = plan
        self.failures = dict(failures or {})
        self.failed: dict[str, int] = {}

    def __call__(self, prompt: str, state: dict | None) -> Reply:
        if state is None or state.get("status") != "active":
            return Reply(final="Done.")
        if "[WORKFLOW" not in prompt:  # a call not shown the plan (it started one call late): no tool result
            return IDLE
        node = state["current_node"]
        fail = self.failed.get(node, 0) < self.failures.get(node, 0)
        if fail:
            self.failed[node] = self.failed.get(node, 0) + 1
        want = "fail" if fail else "pass"
        case = next(c for c in OUTPUTS if c["plan"] == self.plan and c["node"] == node and c["expect"] == want)
        if case["command"] == "(response tool)":
            return Reply(final=case["output"])
        return cmd(case["command"], case["output"])
