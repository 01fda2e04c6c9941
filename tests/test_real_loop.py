"""The pack in Agent-Zero's real message loop (`make real-loop`): real trees from $A0_TREES, the pack installed
by its own installer, Agent-Zero's own prompt building, history, terminal, extensions and persistence; only
the model's replies are scripted.  Without trees every test here is skipped (one line says how to run them)."""

import json
import shutil
from pathlib import Path

import pytest

from a0real import A0Copy, respond, terminal
from graph_engine.tools.standin import COMPANION
from graph_engine.tools.standin import WARM_UP as WARM_UP_FILE

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


WARM_UP = "hello! what is in my work folder?"


def bug_run(tree: A0Copy, p: Path, replies: list[str], more: tuple = (), **kwargs):
    """The bug report, after a first exchange that runs one shell command with no workflow: Agent-Zero's first
    command in a fresh shell can return before its output (the shell's first prompt is taken for the end),
    a race of the real terminal on a busy machine that would make the judged first step vary from run to
    run.  The returned run's calls start with the bug report's."""
    run = tree.run([WARM_UP, BUG_REPORT.format(p=p), *more],
                   [terminal(f"ls {p}", "List the folder"), respond("calc.py and test_calc.py."), *replies], **kwargs)
    assert "[WORKFLOW" not in run.calls[0] + run.calls[1]
    run.calls, run.last_user = run.calls[2:], run.last_user[2:]
    return run


def verdicts(events: list[dict], node: str) -> list[str]:
    return [e.get("outcome", "") for e in events if e.get("type") == "node_verified" and e.get("node") == node]


def types(events: list[dict]) -> list[str]:
    return [e.get("type", "") for e in events]


def test_bug_fix_completes(a0_tree):
    p = project(a0_tree)
    replies = [run_tests(p, "Reproduce"), isolate(p), fix(p), run_tests(p), run_tests(p, "Regressions"),
               respond("Fixed: divide() returns 0.0 for a zero divisor; the tests pass.")]
    run = bug_run(a0_tree, p, replies)
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


def fail_fix(p: Path, attempt: int = 1) -> str:
    """A fix that fails (each attempt worded differently: Agent-Zero refuses a reply repeated word for word)."""
    return terminal(f"sed -i 's|no such text {attempt}||' {p}/calc.py && false; echo \"[exit:$?]\"",
                    f"Try fix {attempt}")


def test_restart_during_a_call_judges_each_result_once_and_resumes(a0_tree):
    """Stopped during an LLM call, loaded again in a new process and nudged (the web UI's Nudge): the result
    judged before the stop is not judged again, and the next call says the run resumed and shows its step."""
    p = project(a0_tree)
    first = bug_run(a0_tree, p, [run_tests(p, "Reproduce"), isolate(p), fail_fix(p), "HANG"])
    assert first.hung and len(first.calls) == 4
    assert "Current step: Implement the fix (attempt 2 of 3)" in first.last_user[3]
    before = verdicts(a0_tree.audit(first.chat_id), "fix")
    assert before == ["fail"]
    second = a0_tree.run([{"load": first.chat_id}, {"nudge": True}],
                         [fix(p), run_tests(p), run_tests(p, "Regressions"), respond("Fixed.")])
    assert second.overrun == 0
    resumed = second.last_user[0]
    assert "[WORKFLOW RESUMED" in resumed and "PAUSED" not in resumed
    assert "Current step: Implement the fix (attempt 2 of 3)" in resumed
    events = a0_tree.audit(first.chat_id)
    fix_checks = [e for e in events if e.get("type") == "node_verified" and e.get("node") == "fix"]
    assert [e["outcome"] for e in fix_checks] == ["fail", "success"]
    assert len({e.get("evidence_sha256") for e in fix_checks}) == 2
    assert types(events)[-1] == "plan_completed"
    assert (p / "calc.py").read_text() == FIXED


@pytest.mark.parametrize("where", ["checkpoint", "lines"])
@pytest.mark.parametrize("cut", ["before", "inside", "after"])
def test_a_kill_at_a_write_of_the_judging_pass_judges_each_result_once(a0_tree, where, cut):
    """The process killed at a write of the pass that judges the failed fix (its checkpoint, then its audit
    lines; before, halfway through or after the write), loaded again and nudged: each result is judged once,
    the audit log holds seqs 1..N without a repeat or a gap, and the run completes as it does without the kill."""
    p = project(a0_tree)
    counted = bug_run(a0_tree, p, [run_tests(p, "Reproduce"), isolate(p), fail_fix(p), "HANG"])
    writes = counted.raw["writes"]  # the judging pass writes its checkpoint, then its lines: the last two
    assert counted.hung and writes >= 4
    shutil.rmtree(a0_tree.root / "usr" / "graph_engine" / "runs")  # this run was only counted
    project(a0_tree)  # the bug back, as before the counted run
    at = writes - 2 if where == "checkpoint" else writes - 1
    first = bug_run(a0_tree, p, [run_tests(p, "Reproduce"), isolate(p), fail_fix(p), "HANG"],
                    stop_at_write={"at": at, "cut": cut})
    assert not first.hung and len(first.calls) == 3  # killed in the hooks before the fourth call
    second = a0_tree.run([{"load": first.chat_id}, {"nudge": True}],
                         [fix(p), run_tests(p), run_tests(p, "Regressions"), respond("Fixed.")])
    assert second.overrun == 0
    events = a0_tree.audit(first.chat_id)
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    fix_checks = [e for e in events if e.get("type") == "node_verified" and e.get("node") == "fix"]
    assert [e["outcome"] for e in fix_checks] == ["fail", "success"]
    assert len({e.get("evidence_sha256") for e in fix_checks}) == 2
    assert types(events)[-1] == "plan_completed"
    assert (p / "calc.py").read_text() == FIXED


def test_a_bug_that_never_gets_fixed_escalates(a0_tree):
    p = project(a0_tree)
    replies = [run_tests(p, "Reproduce"), isolate(p), fail_fix(p, 1), fail_fix(p, 2), fail_fix(p, 3),
               respond("I could not fix it; the fix keeps failing.")]
    run = bug_run(a0_tree, p, replies)
    assert run.overrun == 0
    assert "Implement the fix (attempt 3 of 3)" in run.last_user[4]
    assert "[WORKFLOW ESCALATED: Bug Fix Workflow]" in run.last_user[5]
    events = a0_tree.audit(run.chat_id)
    assert verdicts(events, "fix") == ["fail", "fail", "fail"]
    assert len({e["evidence_sha256"] for e in events if e.get("node") == "fix" and "evidence_sha256" in e}) == 3
    assert types(events)[-1] == "plan_escalated"
    assert a0_tree.state(run.chat_id) is None


def test_a_misformatted_reply_changes_nothing(a0_tree):
    p = project(a0_tree)
    replies = [run_tests(p, "Reproduce"), "Sure, I will look at the file now.", isolate(p), fix(p), run_tests(p),
               run_tests(p, "Regressions"), respond("Fixed.")]
    run = bug_run(a0_tree, p, replies)
    assert run.overrun == 0
    assert "misformat" in run.calls[2].lower()  # Agent-Zero's own warning is in history
    assert "Current step: Isolate the root cause (attempt 1 of 2)" in run.last_user[1]
    assert "Current step: Isolate the root cause (attempt 1 of 2)" in run.last_user[2]
    events = a0_tree.audit(run.chat_id)
    assert verdicts(events, "isolate") == ["success"] and types(events)[-1] == "plan_completed"


def test_history_compression_mid_run_judges_nothing_twice(a0_tree):
    p = project(a0_tree)
    noisy = f"seq 1 6000; cd {p} && python3 test_calc.py; echo \"[exit:$?]\""
    replies = [terminal(noisy, "Reproduce with context"), isolate(p), fix(p), terminal(noisy, "Test"),
               run_tests(p, "Regressions"), respond("Fixed.")]
    run = bug_run(a0_tree, p, replies, context_window=8000, timeout=240,
                      utility_reply="The agent reproduced the failure and is fixing calc.py.")
    assert run.overrun == 0
    assert any("CHARACTERS REMOVED" in c or "messages_summary" in c for c in run.calls[2:])  # compressed
    events = a0_tree.audit(run.chat_id)
    judged = [(e["node"], e["outcome"]) for e in events if e.get("type") == "node_verified"]
    assert judged == [("reproduce", "success"), ("isolate", "success"), ("fix", "success"), ("test", "success"),
                      ("verify_no_regression", "success")]
    assert types(events)[-1] == "plan_completed"


def test_a_new_request_mid_run_ends_the_run_and_starts_its_plan(a0_tree):
    p = project(a0_tree)
    replies = [run_tests(p, "Reproduce"), respond("Reproduced; shall I go on?"),
               terminal(f"cd {p} && git init -q . && git checkout -b feature/login; echo \"[exit:$?]\""),
               respond("Branch created.")]
    run = bug_run(a0_tree, p, replies, more=("create a new branch called feature/login in " + str(p),))
    assert run.overrun == 0
    assert "Current step: Isolate the root cause" in run.last_user[1]
    switched = run.last_user[2]
    assert "[WORKFLOW ENDED: Bug Fix Workflow]" in switched and "[WORKFLOW: Git Feature Branch]" in switched
    assert "Isolate the root cause" not in switched.split("[WORKFLOW: Git Feature Branch]")[1]


def test_small_talk_gets_no_workflow(a0_tree):
    run = a0_tree.run(["hello! how are you today?"], [respond("I am fine, thank you.")])
    assert run.overrun == 0 and len(run.calls) == 1
    assert "[WORKFLOW" not in run.calls[0]
    assert a0_tree.state(run.chat_id) is None and a0_tree.audit(run.chat_id) == []
    assert len(run.hook_seconds("companion")) == len(run.hook_seconds("selector")) == 1


def test_installed_as_a_plugin_the_plan_reaches_the_first_call(a0_source, tmp_path):
    if (a0_source / "python" / "extensions").is_dir():
        pytest.skip("the plugin form needs the v1.x layout")
    tree = A0Copy.fresh(a0_source, tmp_path)
    tree.install(plugin=True)
    assert "usr/plugins/" in str(tree.installed(COMPANION.name))
    p = project(tree)
    run = bug_run(tree, p, [run_tests(p, "Reproduce"), respond("Reproduced.")])
    assert "[WORKFLOW: Bug Fix Workflow] step 1 of 5" in run.last_user[0]
    assert verdicts(tree.audit(run.chat_id), "reproduce") == ["success"]


def test_the_warm_up_loads_the_library_when_the_chat_opens(a0_tree):
    """agent_init/_90_graph_engine_warm_up.py, installed by the installer: by the time a person has typed the
    first message, the engine is imported and the library loaded; the message then starts its plan as usual."""
    assert a0_tree.installed(WARM_UP_FILE.name).read_bytes() == WARM_UP_FILE.read_bytes()
    p = project(a0_tree)
    run = a0_tree.run([{"wait": 3}, BUG_REPORT.format(p=p)],
                      [run_tests(p, "Reproduce"), respond("The division by zero is reproduced.")])
    assert run.raw["waited"] == [{"engine_imported": True, "libraries_loaded": 1}]
    assert "[WORKFLOW: Bug Fix Workflow] step 1 of 5" in run.last_user[0]
    said = json.dumps(a0_tree.chat(run.chat_id))
    assert "warm-up failed" not in said and "Workflow engine not loaded" not in said
