"""A manager node in Agent-Zero's real message loop (`make real-loop`): on v1.x its child plan runs in a subordinate
agent of its own, on the real terminal, supervised at each of the child's passes; the manager routes on how the
child went, or stops it when its stop condition holds.  On v0.9.x it routes on fail with one log line.  The same
with the stand-in: tests/hosts/test_manager.py."""

import json
from pathlib import Path

from a0real import A0Copy, respond, terminal
from test_real_loop import WARM_UP, types
from test_real_loop_macrocosm import branch_calls, calls_of

ASK = "cut the notes release"


def project(tree: A0Copy) -> Path:
    folder = tree.root / "usr" / "workdir" / "notes_release"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "VERSION").write_text("1.0\n")
    return folder


def library(tree: A0Copy, p: Path, **manager) -> dict:
    def task(name, hint, capture=None):
        verify = {"type": "exit_code_zero", **({"capture": capture} if capture else {})}
        return {"type": "task", "name": name, "action": name, "tool": "code_execution_tool", "tool_hint": hint,
                "verify": verify, "max_retries": 1}
    parent = {"name": "Notes Release", "triggers": ["cut the notes release"], "trigger_threshold": 1, "graph": {
        "start": "start",
        "nodes": {"start": {"type": "start"}, "look": task("Look at the project", f"ls {p}"),
                  "watch": {"type": "manager", "name": "Bump and check", "child": "bump_version", **manager},
                  "report": task("Report", f"cat {p}/VERSION"),
                  "done": {"type": "exit"}, "stuck": {"type": "escalate", "reason": "the bump did not land"}},
        "edges": [{"from": "start", "to": "look"}, {"from": "look", "to": "watch", "condition": "on_success"},
                  {"from": "look", "to": "stuck", "condition": "on_exhaust"},
                  {"from": "watch", "to": "report", "condition": "on_success"},
                  {"from": "watch", "to": "stuck", "condition": "on_fail"},
                  {"from": "report", "to": "done", "condition": "on_success"},
                  {"from": "report", "to": "stuck", "condition": "on_exhaust"}]}}
    child = {"name": "Bump Version", "triggers": ["bump the notes version number"], "trigger_threshold": 1, "graph": {
        "start": "start",
        "nodes": {"start": {"type": "start"},
                  "bump": task("Bump the version", f"echo 1.1 > {p}/VERSION && echo version=$(cat {p}/VERSION)",
                               "version=(?P<version>[0-9.]+)"),
                  "check": task("Check the version", f"grep -q 1.1 {p}/VERSION"),
                  "exit": {"type": "exit"}, "stuck": {"type": "escalate", "reason": "the bump failed"}},
        "edges": [{"from": "start", "to": "bump"}, {"from": "bump", "to": "check", "condition": "on_success"},
                  {"from": "bump", "to": "stuck", "condition": "on_exhaust"},
                  {"from": "check", "to": "exit", "condition": "on_success"},
                  {"from": "check", "to": "stuck", "condition": "on_exhaust"}]}}
    path = tree.root.parent / "manager_library.json"
    path.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"notes_release": parent,
                                                                          "bump_version": child}}))
    return {"GRAPH_ENGINE_LIBRARY": str(path)}


def parent_log(tree: A0Copy, chat_id: str) -> list[dict]:
    """The parent run's own audit log (the child's lines copied in, each with ``branch``), in its order."""
    folder = tree.root / "usr" / "graph_engine" / "runs" / chat_id
    for path in sorted(folder.glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if lines and lines[0].get("plan") == "notes_release":
            return lines
    raise AssertionError(f"no audit log of the parent run in {folder}")


def parent_start(p: Path) -> list[str]:
    """The warm-up's two replies, then the request's first step ('Look at the project')."""
    return [terminal(f"ls {p}", "Look"), respond("VERSION is there."),
            terminal(f'ls {p}; echo "[exit:$?]"', "Look at the project")]


def child_replies(p: Path, stop_early: bool = False) -> list[str]:
    bump = terminal(f'echo 1.1 > {p}/VERSION && echo version=$(cat {p}/VERSION); echo "[exit:$?]"', "Bump")
    check = terminal(f'grep -q 1.1 {p}/VERSION; echo "[exit:$?]"', "Check")
    return [bump, bump.replace("Bump", "Bump again")] if stop_early else [bump, check, respond("Bumped to 1.1.")]


def test_the_child_plan_runs_in_a_subordinate_and_the_manager_routes_on_it(a0_tree):
    p = project(a0_tree)
    parent = parent_start(p)
    if a0_tree.layout != "new":
        run = a0_tree.run([WARM_UP, ASK], parent + [respond("The release is stuck.")], env=library(a0_tree, p))
        logs = json.dumps(a0_tree.chat(run.chat_id).get("log", {}))
        assert "'Bump and check' runs no child: a manager runs its child in a subordinate agent" in logs
        assert not branch_calls(run)
        return
    run = a0_tree.run([WARM_UP, ASK], parent + [terminal(f'cat {p}/VERSION; echo "[exit:$?]"', "Report"),
                                                respond("Released 1.1.")],
                      branch_replies={"watch": child_replies(p)}, env=library(a0_tree, p))
    assert run.overrun == 0
    by_branch = branch_calls(run)
    assert set(by_branch) == {"watch"} and len(by_branch["watch"]) == 3
    assert "[WORKFLOW: Bump Version]" in json.dumps(by_branch["watch"][0]["messages"])
    assert (p / "VERSION").read_text().strip() == "1.1"  # the child's real commands ran
    events = parent_log(a0_tree, run.chat_id)
    assert [(e["node"], e["outcome"]) for e in events if e["type"] == "node_verified" and e.get("branch")] == [
        ("bump", "success"), ("check", "success")]
    joined = next(e for e in events if e["type"] == "parallel_joined")
    assert joined["outcomes"] == {"watch": "success"} and joined["passed"]
    assert any("The child workflow 'Bump Version' of 'Bump and check' ended: success" in m for m in run.calls)
    assert "plan_completed" in types(events), [(e["type"], e.get("node"), e.get("branch")) for e in events[-8:]]


def test_the_stop_condition_stops_the_child_on_the_real_loop(a0_tree):
    if a0_tree.layout != "new":
        return  # (the test above covers v0.9.x)
    p = project(a0_tree)
    parent = parent_start(p)
    run = a0_tree.run([WARM_UP, ASK], parent + [terminal(f'cat {p}/VERSION; echo "[exit:$?]"', "Report"),
                                                respond("Released 1.1.")],
                      branch_replies={"watch": child_replies(p, stop_early=True)},
                      env=library(a0_tree, p, stop_condition="context.version=1.1"))
    watch = [c for c in calls_of(run) if c["branch"] == "watch"]
    assert len(watch) == 1  # stopped before its second call
    events = parent_log(a0_tree, run.chat_id)
    returned = next(e for e in events if e["type"] == "branch_returned")
    assert returned["outcome"] == "success" and returned["reason"] == "its stop condition held (context.version=1.1)"
    assert "plan_completed" in types(events), [(e["type"], e.get("node"), e.get("branch")) for e in events[-8:]]


def test_a_child_that_runs_too_long_is_stopped_at_max_cycles_and_the_manager_fails(a0_tree):
    if a0_tree.layout != "new":
        return  # (the first test covers v0.9.x)
    p = project(a0_tree)
    parent = parent_start(p)
    run = a0_tree.run([WARM_UP, ASK], parent + [respond("The bump ran too long; it was stopped.")],
                      branch_replies={"watch": child_replies(p, stop_early=True)},
                      env=library(a0_tree, p, max_cycles=2))
    assert len([c for c in calls_of(run) if c["branch"] == "watch"]) == 1  # stopped before its second call
    events = parent_log(a0_tree, run.chat_id)
    returned = next(e for e in events if e["type"] == "branch_returned")
    assert returned["outcome"] == "fail" and "the manager's max_cycles" in returned["reason"]
    assert "plan_escalated" in types(events)
    assert any("[WORKFLOW ESCALATED: Notes Release]" in m for m in run.calls)
