"""A parallel node over a list found at run time: one branch per item, each by a subordinate agent told its item
(or one after another in the chat), and a fan-in that merges what they captured through its reducers (the
stand-in: the pack's hooks and Agent-Zero's pass order, subordinates as `call_subordinate` makes them)."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenario import events, use_library

from graph_engine.authoring.lint import lint_plan
from graph_engine.core.fanout import MAX_ITEM, items
from graph_engine.core.model import PlanError, compile_plan
from graph_engine.tools.standin import BranchModel, Reply, Session, cmd


def fix_plan(policy: str = "all", **fan) -> dict:
    """Find the failing test files (a list, one per line), fix each in a branch of its own, then report."""
    return {"name": "Fix Each File", "triggers": ["fix each failing file"], "trigger_threshold": 1, "graph": {
        "start": "start",
        "nodes": {"start": {"type": "start"},
                  "find": {"type": "task", "name": "Find failing files", "action": "list them",
                           "tool_hint": "pytest -q --co", "verify": {"type": "any_output",
                                                                     "capture": "(?s)FAILING:\\n(?P<files>.*)"}},
                  "fan": {"type": "parallel", "name": "Each file", "over": "files", **fan},
                  "fix": {"type": "task", "name": "Fix one file", "action": "Fix the tests in $item",
                          "tool": "code_execution_tool", "tool_hint": "pytest $item", "max_retries": 0,
                          "verify": {"type": "exit_code_zero", "capture": "passed=(?P<passed>\\d+)"}},
                  "join": {"type": "fan_in", "name": "Files fixed", "fan_in_policy": policy,
                           "reduce": {"passed": "sum"}},
                  "report": {"type": "task", "name": "Report", "action": "summarise", "verify": {"type": "any_output"}},
                  "done": {"type": "exit"}, "stuck": {"type": "escalate", "reason": "a file stays broken"}},
        "edges": [{"from": "start", "to": "find"}, {"from": "find", "to": "fan"}, {"from": "fan", "to": "fix"},
                  {"from": "fix", "to": "join"},
                  {"from": "join", "to": "report", "condition": "on_success"},
                  {"from": "join", "to": "stuck", "condition": "on_fail"}, {"from": "report", "to": "done"}]}}


def fixed(passed: int, code: int = 0) -> Reply:
    return cmd("pytest", f"passed={passed}\n[exit:{code}]")


def at_fork(monkeypatch, tmp_path, listing: str, plan=None, model=None, layout="new") -> Session:
    """A run whose first step listed ``listing``: the next pass judges it and reaches the parallel node."""
    use_library(monkeypatch, tmp_path, {"fix": plan or fix_plan()})
    s = Session(layout=layout)
    s.agent.context.model = model or BranchModel({})
    s.user("fix each failing file")
    s.run_pass(cmd("pytest -q", f"FAILING:\n{listing}"))
    return s


def test_one_branch_per_item_each_agent_told_its_item_and_the_values_merged(monkeypatch, tmp_path):
    model = BranchModel({f"fix#{n}": [fixed(n * 10), Reply(final=f"file {n} fixed")] for n in (1, 2, 3)},
                        delay=0.01)
    s = at_fork(monkeypatch, tmp_path, "tests/test_a.py\ntests/test b.py\n\n  tests/test_c.py  \n", model=model)
    record = s.run_pass(Reply(warning="x"))
    assert {b for b, what in model.calls if what == "start"} == {"fix#1", "fix#2", "fix#3"}
    first = model.prompts["fix#2"][0]
    assert "[BRANCH: Fix one file #2]" in first and "This branch's item: tests/test b.py" in first
    assert "Action: Fix the tests in tests/test b.py" in first
    assert "Command: pytest 'tests/test b.py'" in first  # quoted for the shell: the model runs it as written
    started = events(s, "parallel_started")[0]
    assert started["branches"] == ["fix#1", "fix#2", "fix#3"] and started["over"] == "files"
    assert started["items"] == ["tests/test_a.py", "tests/test b.py", "tests/test_c.py"]
    assert s.state["current_node"] == "report"
    assert s.state["context"]["passed"] == "60"  # sum over the branches
    assert "item" not in s.state["context"]  # the branches' own
    shown = record.prompt_extras["htn_active_plan"]
    assert "- 'Fix one file #2' (item: tests/test b.py): success" in shown
    verified = [e["branch"] for e in events(s, "node_verified") if e.get("branch")]
    assert sorted(verified) == ["fix#1", "fix#2", "fix#3"]


def test_the_merge_follows_branch_order_not_the_order_they_finish(monkeypatch, tmp_path):
    plan = fix_plan()
    plan["graph"]["nodes"]["join"]["reduce"] = {"passed": "append"}
    model = BranchModel({f"fix#{n}": [fixed(n), Reply(final="ok")] for n in (1, 2, 3)},
                        delay={"fix#1": 0.06, "fix#2": 0.03, "fix#3": 0.0})
    s = at_fork(monkeypatch, tmp_path, '["x", "y", "z"]', plan=plan, model=model)
    s.run_pass(Reply(warning="x"))
    assert json.loads(s.state["context"]["passed"]) == ["1", "2", "3"]


def test_an_empty_list_runs_no_branch_and_the_fan_in_routes_on_its_policy(monkeypatch, tmp_path):
    model = BranchModel({})
    s = at_fork(monkeypatch, tmp_path, "[]", model=model)
    record = s.run_pass(Reply(warning="x"))
    assert model.calls == [] and s.state["current_node"] == "report"
    assert "No branch ran ('files' held no item): 'Files fixed' routes on success." in \
        record.prompt_extras["htn_active_plan"]
    assert s.state["context"]["passed"] == "0"  # the sum over no branch
    (tmp_path / "any").mkdir()
    s2 = at_fork(monkeypatch, tmp_path / "any", "[]", plan=fix_plan("any"), model=BranchModel({}))
    s2.run_pass(Reply(warning="x"))
    assert (s2.state or s2.agent._htn_last_run)["status"] == "escalated"  # any: no branch succeeded


def test_a_list_over_max_items_is_refused_with_the_reason_and_no_branch_runs(monkeypatch, tmp_path):
    model = BranchModel({})
    s = at_fork(monkeypatch, tmp_path, "\n".join(f"f{n}.py" for n in range(4)), plan=fix_plan(max_items=3),
                model=model)
    s.run_pass(Reply(warning="x"))
    assert model.calls == []
    why = "'files' holds 4 items, over the parallel node's max_items of 3; raise max_items (at most 100) or narrow " \
          "the list the step captures"
    assert f"[HTN] Workflow 'Fix Each File': 'Each file' runs no branch: {why}" in s.log.texts()
    assert (s.state or s.agent._htn_last_run)["status"] == "escalated"  # the fan-in's fail route
    assert events(s, "parallel_started")[0]["reason"] == why


def test_one_after_another_each_item_has_its_own_attempts_and_the_values_merge(monkeypatch, tmp_path):
    plan = fix_plan()
    plan["graph"]["nodes"]["fix"]["max_retries"] = 1
    use_library(monkeypatch, tmp_path, {"fix": plan})
    s = Session(layout="old")  # Agent-Zero v0.9.x: one agent of a chat at a time
    s.user("fix each failing file")
    s.run_pass(cmd("pytest -q", "FAILING:\na.py\nb.py"))
    first = s.run_pass(fixed(1, code=1))  # a.py fails once, then passes
    assert "This branch's item: a.py" in first.prompt_extras["htn_active_plan"]
    assert "Command: pytest a.py" in first.prompt_extras["htn_active_plan"]
    retry = s.run_pass(fixed(1))
    assert "(attempt 2 of 2)" in retry.prompt_extras["htn_active_plan"]
    second = s.run_pass(fixed(4))
    shown = second.prompt_extras["htn_active_plan"]
    assert "This branch's item: b.py" in shown and "Command: pytest b.py" in shown
    assert "(attempt 1 of 2)" in shown  # b.py's own budget, not what a.py spent
    report = s.run_pass(Reply(final="both fixed"))
    assert "Current step: Report" in report.prompt_extras["htn_active_plan"]
    assert s.state["context"]["passed"] == "5" and "item" not in s.state["context"]
    assert events(s, "parallel_joined")[0]["passed"] is True


def test_a_restart_mid_branch_resumes_the_item_branch(monkeypatch, tmp_path):
    import asyncio

    def kill(agent, prompt):
        for task in asyncio.all_tasks():
            task.cancel()
        return Reply(final="never read")

    model = BranchModel({"fix#1": [fixed(1), Reply(final="ok")], "fix#2": [kill]}, delay={"fix#2": 0.02})
    s = at_fork(monkeypatch, tmp_path, "a.py\nb.py", model=model)
    with pytest.raises(asyncio.CancelledError):
        s.run_pass(Reply(warning="x"))
    after = s.restarted(s.saved)
    again = BranchModel({"fix#2": [fixed(2), Reply(final="b fixed")]})
    after.agent.context.model = again
    after.nudge()
    after.run_pass(Reply(warning="x"))
    assert [b for b, what in again.calls if what == "start"] == ["fix#2", "fix#2"]
    assert "This branch's item: b.py" in again.prompts["fix#2"][0]
    assert after.state["current_node"] == "report" and after.state["context"]["passed"] == "3"


@pytest.mark.parametrize("change, rule, said", [
    (lambda g: g["edges"].append({"from": "fan", "to": "report"}), "fan_out", "has 2 edges"),
    (lambda g: g["nodes"]["fan"].update(over="nosuch"), "fan_out", "no step captures 'nosuch'"),
    (lambda g: g["nodes"]["join"].update(fan_in_policy="required", required=["fix"]), "fan_out",
     "names required branches"),
    (lambda g: g["nodes"]["report"].update(over="files"), "fan_out", "only a parallel node fans out"),
    (lambda g: g["nodes"]["join"].update(reduce={"nosuch": "sum"}), "reducer", "'nosuch', which no step"),
    (lambda g: g["nodes"]["report"].update(reduce={"passed": "sum"}), "reducer", "only a fan-in merges"),
    (lambda g: g["nodes"]["join"].update(reduce={"passed": "avg"}), "reducer", "unknown reducer 'avg'"),
    (lambda g: g["nodes"]["fan"].update(max_items=101), "schema", "over 100"),
])
def test_the_lint_refuses_a_fan_out_or_a_reducer_that_cannot_work(change, rule, said):
    plan = fix_plan()
    change(plan["graph"])
    assert any(rule == r and said in message for r, message in errors(plan)), errors(plan)


def errors(raw: dict) -> list[tuple[str, str]]:
    try:
        plan = compile_plan("fix", raw)
    except PlanError as exc:
        return [(exc.rule, exc.problem)]
    return [(d.rule, d.message) for d in lint_plan(plan).errors]


def test_the_example_plan_lints_clean():
    assert errors(fix_plan()) == []


def test_a_dot_plan_says_the_same_and_keeps_it_on_export():
    from graph_engine.authoring.dot import parse
    from graph_engine.authoring.dot_plan import to_dot, to_plan
    plan = compile_plan("fix", fix_plan())
    back = compile_plan("fix", to_plan(parse(to_dot("fix", fix_plan())))[1])
    for nid in ("fan", "join"):
        assert (back.nodes[nid].over, back.nodes[nid].max_items, back.nodes[nid].reduce) == \
            (plan.nodes[nid].over, plan.nodes[nid].max_items, plan.nodes[nid].reduce)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2_000) | st.lists(st.text(max_size=400), max_size=30).map(json.dumps),
       st.integers(min_value=1, max_value=100))
def test_any_captured_value_gives_bounded_items_or_a_reason(value, limit):
    found, problem = items(value, "files", limit)
    assert bool(found) + bool(problem) <= 1
    assert len(found) <= limit and all(0 < len(x) <= MAX_ITEM and x == " ".join(x.split()) for x in found)
    assert not problem or "'files'" in problem
