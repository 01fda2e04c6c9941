"""A manager node (Attractor's manager loop, DOT shape=house): its child plan runs in a subordinate agent, the
manager looks at the child after each of the child's passes (its stop condition, its cycles), stops it when
they say, and routes on how it went (the stand-in: the pack's hooks, subordinates as `call_subordinate` makes
them, a model scripted per branch)."""

import asyncio

import pytest
from scenario import events, use_library

from graph_engine.tools.standin import BranchModel, Reply, Session, cmd


def parent_plan(**manager) -> dict:
    return {"name": "Release", "triggers": ["cut the release"], "trigger_threshold": 1, "graph": {
        "start": "start",
        "nodes": {"start": {"type": "start"},
                  "watch": {"type": "manager", "name": "Watch the fix", "child": "fix_tests", **manager},
                  "report": {"type": "task", "name": "Report", "action": "summarise", "verify": {"type": "any_output"}},
                  "done": {"type": "exit"}, "stuck": {"type": "escalate", "reason": "the fix did not land"}},
        "edges": [{"from": "start", "to": "watch"},
                  {"from": "watch", "to": "report", "condition": "on_success"},
                  {"from": "watch", "to": "stuck", "condition": "on_fail"},
                  {"from": "report", "to": "done", "condition": "on_success"},
                  {"from": "report", "to": "stuck", "condition": "on_exhaust"}]}}


def child_plan() -> dict:
    def task(name, hint, capture=None):
        verify = {"type": "exit_code_zero", **({"capture": capture} if capture else {})}
        return {"type": "task", "name": name, "action": name, "tool": "code_execution_tool", "tool_hint": hint,
                "verify": verify, "max_retries": 0}
    return {"name": "Fix Tests", "triggers": ["fix the failing tests now"], "trigger_threshold": 1, "graph": {
        "start": "start",
        "nodes": {"start": {"type": "start"}, "run": task("Run the tests", "pytest -q", "tests=(?P<tests>\\w+)"),
                  "fix": task("Fix them", "make fix"), "exit": {"type": "exit"},
                  "stuck": {"type": "escalate", "reason": "cannot fix"}},
        "edges": [{"from": "start", "to": "run"}, {"from": "run", "to": "fix", "condition": "on_success"},
                  {"from": "run", "to": "stuck", "condition": "on_exhaust"},
                  {"from": "fix", "to": "exit", "condition": "on_success"},
                  {"from": "fix", "to": "stuck", "condition": "on_exhaust"}]}}


def ran(code: int, words: str = "tests=red") -> Reply:
    return cmd("run", f"{words}\n[exit:{code}]")


def started(monkeypatch, tmp_path, model, layout="new", **manager) -> Session:
    """The request's pass decides the run (its step reaches the call after it); the next pass meets the manager."""
    use_library(monkeypatch, tmp_path, {"release": parent_plan(**manager), "fix_tests": child_plan()})
    s = Session(layout=layout)
    s.agent.context.model = model
    s.user("cut the release")
    return s


def through(s: Session):
    """The pass that meets the manager (its hook waits for the child), then the call after it, which reads the
    manager's verdict."""
    s.run_pass(Reply(warning="x"))
    return s.run_pass(Reply(warning="y"))


def test_the_child_runs_its_plan_in_a_subordinate_and_the_manager_routes_on_its_completion(monkeypatch, tmp_path):
    model = BranchModel({"watch": [ran(0), ran(0, "fixed"), Reply(final="both steps done")]}, delay=0.01)
    s = started(monkeypatch, tmp_path, model)
    record = through(s)
    assert [b for b, what in model.calls if what == "start"] == ["watch"] * 3
    first = model.prompts["watch"][0]
    assert "[WORKFLOW: Fix Tests]" in first and "Current step: Run the tests" in first
    shown = record.prompt_extras["htn_active_plan"]
    assert "Current step: Report" in shown
    assert "The child workflow 'Fix Tests' of 'Watch the fix' ended: success" in shown
    assert "its answer: both steps done" in shown and "'Watch the fix' routes on success" in shown
    child_checks = [(e["node"], e["branch"]) for e in events(s, "node_verified") if e.get("branch")]
    assert child_checks == [("run", "watch"), ("fix", "watch")]  # the child's lines in the parent's log
    assert s.state["context"]["tests"] == "red"  # its captured values come back


def test_the_stop_condition_stops_the_child_at_the_pass_it_holds(monkeypatch, tmp_path):
    model = BranchModel({"watch": [ran(0, "tests=green"), ran(0, "never judged"), Reply(final="x")]}, delay=0.01)
    s = started(monkeypatch, tmp_path, model, stop_condition="context.tests=green")
    s.run_pass(Reply(warning="x"))
    assert [b for b, what in model.calls if what == "start"] == ["watch"]  # stopped before its next call
    returned = events(s, "branch_returned")[0]
    assert returned["outcome"] == "success" and returned["reason"] == "its stop condition held (context.tests=green)"
    assert s.state["current_node"] == "report"
    assert any("'Watch the fix' stopped its child's agent: its stop condition held" in t for t in s.log.texts())


def test_max_cycles_stops_a_child_that_does_not_finish_and_the_manager_fails(monkeypatch, tmp_path):
    model = BranchModel({"watch": [ran(0), Reply(warning="thinking"), Reply(warning="still"), Reply(final="x")]},
                        delay=0.01)
    s = started(monkeypatch, tmp_path, model, max_cycles=2)
    record = through(s)
    returned = events(s, "branch_returned")[0]
    assert returned["outcome"] == "fail" and "the manager's max_cycles" in returned["reason"]
    assert (s.state or s.agent._htn_last_run)["status"] == "escalated"
    assert "[WORKFLOW ESCALATED: Release]" in record.prompt_extras["htn_active_plan"]


def test_a_missing_child_or_a_host_without_subordinates_routes_on_fail_with_one_line(monkeypatch, tmp_path):
    s = started(monkeypatch, tmp_path, BranchModel({}), child="nosuch")
    s.run_pass(Reply(warning="x"))
    assert (s.state or s.agent._htn_last_run)["status"] == "escalated"
    assert "[HTN] Workflow 'Release': 'Watch the fix' runs no child: no plan 'nosuch' in the library (or it is " \
           "disabled)" in s.log.texts()
    (tmp_path / "old").mkdir()
    old = started(monkeypatch, tmp_path / "old", BranchModel({}), layout="old")
    old.run_pass(Reply(warning="x"))
    said = [t for t in old.log.texts() if "runs no child" in t]
    assert said and "Agent-Zero v0.9.x runs one agent of a chat at a time" in said[0]


def test_a_restart_mid_child_resumes_it_and_judges_nothing_twice(monkeypatch, tmp_path):
    def kill(agent, prompt):
        for task in asyncio.all_tasks():
            task.cancel()
        return Reply(final="never read")

    plan = parent_plan()
    plan["graph"]["nodes"]["prep"] = {"type": "task", "name": "Prepare", "action": "ls",
                                      "verify": {"type": "any_output"}}
    plan["graph"]["edges"][0] = {"from": "start", "to": "prep"}
    plan["graph"]["edges"].append({"from": "prep", "to": "watch"})
    use_library(monkeypatch, tmp_path, {"release": plan, "fix_tests": child_plan()})
    s = Session()
    s.agent.context.model = BranchModel({"watch": [ran(0), kill]}, delay=0.01)
    s.user("cut the release")
    s.run_pass(Reply(warning="x"))  # shows 'Prepare'
    s.run_pass(cmd("ls", "README.md"))  # its command
    with pytest.raises(asyncio.CancelledError):
        s.run_pass(Reply(warning="y"))  # judges it, meets the manager: the child's second call stops all
    after = s.restarted(s.saved)
    again = BranchModel({"watch": [ran(0, "fixed"), Reply(final="done")]})
    after.agent.context.model = again
    after.nudge()
    after.run_pass(Reply(warning="x"))
    assert not [t for t in after.log.texts() if "unusable" in t]
    assert "Current step: Fix them" in again.prompts["watch"][0]  # where the child was
    assert after.state["current_node"] == "report"
    assert [e["node"] for e in events(after, "node_verified") if e.get("branch")] == ["run", "fix"]
