"""The pack in Agent-Zero's real message loop (`make real-loop`): real trees from $A0_TREES, the pack installed
by its own installer, Agent-Zero's own prompt building, history, terminal, extensions and persistence; only
the model's replies are scripted.  Without trees every test here is skipped (one line says how to run them)."""

import json
from pathlib import Path

import pytest

from a0real import A0Copy, respond, terminal

BUG_REPORT = "fix the bug in {p}/calc.py: divide(1, 0) crashes with ZeroDivisionError"
CALC = "def divide(a, b):\n    return a / b\n"
FIXED = "def divide(a, b):\n    return a / b if b else 0.0\n"
TEST = ("from calc import divide\n"
        "assert divide(6, 3) == 2\n"
        "assert divide(1, 0) == 0.0\n"
        "print('2 passed')\n")


def project(tree: A0Copy) -> Path:
    """A small project with the bug, in the tree's work folder (where Agent-Zero's terminal starts)."""
    folder = tree.root / "usr" / "workdir" / "calc"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "calc.py").write_text(CALC)
    (folder / "test_calc.py").write_text(TEST)
    return folder


def run_tests(p: Path, headline: str = "Run the tests") -> str:
    return terminal(f'cd {p} && python3 test_calc.py; echo "[exit:$?]"', headline)


def isolate(p: Path) -> str:
    return terminal(f"grep -n -A2 'def divide' {p}/calc.py", "Find the division")


def fix(p: Path) -> str:
    return terminal(f"sed -i 's|return a / b$|return a / b if b else 0.0|' {p}/calc.py; echo \"[exit:$?]\"",
                    "Guard the division")


def verdicts(events: list[dict], node: str) -> list[str]:
    return [e.get("outcome", "") for e in events if e.get("type") == "node_verified" and e.get("node") == node]


def types(events: list[dict]) -> list[str]:
    return [e.get("type", "") for e in events]


def test_bug_fix_completes(a0_tree):
    p = project(a0_tree)
    replies = [run_tests(p, "Reproduce"), isolate(p), fix(p), run_tests(p), run_tests(p, "Regressions"),
               respond("Fixed: divide() returns 0.0 for a zero divisor; the tests pass.")]
    run = a0_tree.run([BUG_REPORT.format(p=p)], replies)
    assert run.overrun == 0 and len(run.calls) == 6
    assert "[WORKFLOW: Bug Fix Workflow] step 1 of 5" in run.last_user[0]  # the plan reaches the first call
    assert "Current step: Reproduce the issue" in run.last_user[0]
    assert "Current step: Implement the fix" in run.last_user[2]
    events = a0_tree.audit(run.chat_id)
    assert verdicts(events, "reproduce") == ["success"]
    assert verdicts(events, "fix") == ["success"] and verdicts(events, "test") == ["success"]
    assert types(events)[-1] == "plan_completed"
    assert (p / "calc.py").read_text() == FIXED  # the real terminal ran the fix
    assert a0_tree.state(run.chat_id) is None  # nothing left active in the saved chat
