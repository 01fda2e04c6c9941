"""A parallel node's branches run at the same time, each by a subordinate agent of its own (the stand-in: the
pack's hooks and Agent-Zero's pass order, subordinates as `call_subordinate` makes them, a model scripted per
branch that takes its time).  The same behaviour in Agent-Zero's real loop: tests/test_real_loop_macrocosm.py."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenario import events, use_library

from graph_engine.core.state import DATA_KEY
from graph_engine.tools.standin import BranchModel, Reply, Session, cmd

PASS, FAIL = '"[exit:0]"', '"[exit:1]"'
BRANCHES = ("lint", "types", "tests")


def checks_plan(policy: str = "all", **fan_in) -> dict:
    """Prepare, then three independent checks in parallel, then a report; the fan-in routes per ``policy``."""
    def check(name, command):
        return {"type": "task", "name": name, "action": command, "tool": "code_execution_tool",
                "verify": {"type": "exit_code_zero"}, "max_retries": 0}
    return {"name": "Release Checks", "triggers": ["run the release checks"], "trigger_threshold": 1, "graph": {
        "start": "start",
        "nodes": {"start": {"type": "start"},
                  "prepare": {"type": "task", "name": "Prepare", "action": "ls", "verify": {"type": "any_output"}},
                  "fan": {"type": "parallel", "name": "All checks"},
                  "lint": check("Lint", "ruff check ."), "types": check("Type check", "mypy ."),
                  "tests": check("Unit tests", "pytest -q"),
                  "join": {"type": "fan_in", "name": "Checks joined", "fan_in_policy": policy, **fan_in},
                  "report": {"type": "task", "name": "Report", "action": "summarise", "verify": {"type": "any_output"}},
                  "done": {"type": "exit"}, "stuck": {"type": "escalate", "reason": "the checks failed"}},
        "edges": [{"from": "start", "to": "prepare"}, {"from": "prepare", "to": "fan"},
                  *[{"from": "fan", "to": b} for b in ("lint", "types", "tests")],
                  *[{"from": b, "to": "join"} for b in ("lint", "types", "tests")],
                  {"from": "join", "to": "report", "condition": "on_success"},
                  {"from": "join", "to": "stuck", "condition": "on_fail"},
                  {"from": "report", "to": "done"}]}}


def status(code: int) -> Reply:
    return cmd(f"check; echo \"[exit:{code}]\"", f"ran\n[exit:{code}]")


def branch_replies(failing: tuple = ()) -> dict:
    return {b: [status(1 if b in failing else 0), Reply(final=f"{b}: {'failed' if b in failing else 'clean'}")]
            for b in ("lint", "types", "tests")}


def at_fork(monkeypatch, tmp_path, plan=None, model=None) -> Session:
    """A run of the checks plan whose first step passed: the pass that judges it reaches the parallel node."""
    use_library(monkeypatch, tmp_path, {"checks": plan or checks_plan()})
    s = Session()
    s.agent.context.model = model or BranchModel(branch_replies(), delay=0.01)
    s.user("run the release checks")
    s.run_pass(cmd("ls", "README.md"))
    return s


def kinds(s: Session) -> list[str]:
    return [e["type"] for e in events(s)]


def test_three_branches_run_at_once_and_the_parent_waits_without_a_model_call(monkeypatch, tmp_path):
    model = BranchModel(branch_replies(), delay=0.02)
    s = at_fork(monkeypatch, tmp_path, model=model)
    record = s.run_pass(Reply(warning="x"))  # this pass judges 'Prepare'; the fork runs inside its hook call
    starts = [i for i, (_, what) in enumerate(model.calls) if what == "start"]
    first_end = next(i for i, (_, what) in enumerate(model.calls) if what == "end")
    assert {b for b, what in model.calls[:first_end] if what == "start"} == {"lint", "types", "tests"}
    assert len(starts) == 6  # two calls per branch: the check, then the answer; none by the parent meanwhile
    shown = record.prompt_extras["htn_active_plan"]
    assert "Current step: Report" in shown  # the same call is shown the step after the fan-in
    assert "The branches met at 'Checks joined' (every branch must succeed): it routes on success." in shown
    assert "- 'Lint': success; last check: Lint: passed, exit status 0; its answer: lint: clean" in shown
    assert all("[BRANCH: " in p[0] and "Current step: " in p[0] for p in model.prompts.values())
    assert all("[BRANCH DONE: " in p[1] for p in model.prompts.values())
    state = s.state
    assert state["current_node"] == "report" and state["fork"] is None
    assert state["steps_completed"] == ["prepare", "lint", "types", "tests"] and state["total_steps"] == 5
    order = kinds(s)
    assert order.index("parallel_started") < order.index("branch_started") < order.index("parallel_joined")
    branch_lines = [e for e in events(s) if e.get("branch")]
    assert {e["branch"] for e in branch_lines if e["type"] == "node_verified"} == {"lint", "types", "tests"}
    joined = events(s, "parallel_joined")[0]
    assert joined["outcomes"] == {"lint": "success", "types": "success", "tests": "success"} and joined["passed"]
    card = next(e for e in s.log.entries if e["heading"].startswith("Workflow: Release Checks"))
    drawing, run = json.loads("".join(card["kvps"]["graph"])), json.loads(card["kvps"]["graph_run"])
    ids = [n[0] for n in drawing["nodes"]]
    taken = {(ids[drawing["edges"][i][0]], ids[drawing["edges"][i][1]]) for i in run["taken"]}
    assert {("fan", b) for b in ("lint", "types", "tests")} | {(b, "join") for b in ("lint", "types", "tests")} \
        <= taken  # the component draws the edges each branch took


@pytest.mark.parametrize("policy, fan_in, failing, route", [
    ("all", {}, ("types",), "stuck"), ("any", {}, ("types",), "report"), ("any", {}, ("lint", "types", "tests"), "stuck"),
    ("quorum", {"quorum": 2}, ("types",), "report"), ("quorum", {"quorum": 3}, ("types",), "stuck"),
    ("required", {"required": ["lint", "tests"]}, ("types",), "report"),
    ("required", {"required": ["types"]}, ("types",), "stuck")])
def test_the_fan_in_routes_on_its_policy(monkeypatch, tmp_path, policy, fan_in, failing, route):
    model = BranchModel(branch_replies(failing), delay=0.0)
    s = at_fork(monkeypatch, tmp_path, plan=checks_plan(policy, **fan_in), model=model)
    record = s.run_pass(Reply(warning="x"))
    joined = events(s, "parallel_joined")[0]
    assert joined["failed"] == list(failing) and joined["policy"] == policy
    if route == "report":
        assert s.state["current_node"] == "report" and "it routes on success" in record.prompt_extras["htn_active_plan"]
    else:
        assert s.agent._htn_last_run["status"] == "escalated"  # (kept on the agent for this pass: the supervisor)
        assert "it routes on fail" in record.prompt_extras["htn_active_plan"]
        assert "[WORKFLOW ESCALATED: Release Checks]" in record.prompt_extras["htn_active_plan"]


def kill(agent, prompt):
    """The process stops here (a restart during a branch's model call): every task of the loop is cancelled, so
    nothing after this point is written, as after a kill."""
    import asyncio
    for task in asyncio.all_tasks():
        task.cancel()
    return Reply(final="never read")


def test_a_restart_mid_branch_resumes_that_branch_where_it_was_and_judges_nothing_twice(monkeypatch, tmp_path):
    import asyncio
    plan = checks_plan()
    plan["graph"]["nodes"]["lint"]["max_retries"] = 1
    first = BranchModel({"lint": [status(1), kill], **{b: branch_replies()[b] for b in ("types", "tests")}},
                        delay={"lint": 0.05})
    s = at_fork(monkeypatch, tmp_path, plan=plan, model=first)
    with pytest.raises(asyncio.CancelledError):
        s.run_pass(Reply(warning="x"))
    after = s.restarted(s.saved)  # the chat as saved at the end of the pass before; the checkpoint is newer
    again = BranchModel({"lint": [status(0), Reply(final="lint: clean on the second attempt")]})
    after.agent.context.model = again
    after.nudge()
    record = after.run_pass(Reply(warning="x"))
    assert [b for b, what in again.calls if what == "start"] == ["lint", "lint"]  # only the branch without an outcome
    assert "[WORKFLOW RESUMED: Release Checks]" in again.prompts["lint"][0]
    assert "Current step: Lint (attempt 2 of 2)" in again.prompts["lint"][0]  # its attempt count kept
    state = after.state
    assert state["current_node"] == "report" and "Current step: Report" in record.prompt_extras["htn_active_plan"]
    lint = [(e["outcome"], e.get("evidence_sha256")) for e in events(after, "node_verified") if e["node"] == "lint"]
    assert [o for o, _ in lint] == ["fail", "success"] and len({d for _, d in lint}) == 2  # each result judged once
    starts = [e for e in events(after, "branch_started") if e["branch"] == "lint"]
    assert [e.get("again", False) for e in starts] == [False, True]
    assert events(after, "parallel_joined")[0]["outcomes"] == {"lint": "success", "types": "success",
                                                              "tests": "success"}


def test_stop_the_workflow_while_branches_run_stops_every_branch(monkeypatch, tmp_path):
    from graph_engine.tools.standin import UserMessage

    def person_says_stop(agent, prompt):
        agent.intervention = UserMessage(message="stop the workflow")  # sent to the agent streaming now: a branch
        return status(0)

    model = BranchModel({"tests": [person_says_stop, Reply(final="x")],
                         "lint": [status(0), Reply(final="x")], "types": [status(0), Reply(final="x")]},
                        delay={"tests": 0.0, "lint": 0.3, "types": 0.3})
    s = at_fork(monkeypatch, tmp_path, model=model)
    s.run_pass(Reply(warning="x"))  # the fork: the person's words reach the parent, which stops every branch
    # left for the parent's loop: Agent-Zero's handle_intervention after the hooks puts it in history, and the pass
    # makes no model call
    assert s.history[-1] == {"ai": False, "content": {"user_intervention": "stop the workflow"}}
    assert s.agent.intervention is None
    calls = len(model.calls)
    assert {b for b, what in model.calls if what == "start"} == {"lint", "types", "tests"}
    record = s.run_pass(Reply(final="Stopped."))
    assert "[WORKFLOW STOPPED by the user: Release Checks]" in record.prompt_extras["htn_active_plan"]
    stopped = events(s, "plan_stopped")
    assert stopped and {"lint", "types"} <= set(stopped[0]["branches"])  # (tests may have finished meanwhile)
    assert len(model.calls) == calls  # no branch called the model again
    assert [what for b, what in model.calls if b == "lint"] == ["start", "end"]  # stopped during its first call
    last = s.agent._htn_last_run
    status_of = {b["id"]: b["status"] for b in last["fork"]["branches"]}
    assert status_of["lint"] == status_of["types"] == "stopped" and status_of["tests"] in ("success", "stopped")


def test_max_parallel_bounds_the_branches_running_at_once(monkeypatch, tmp_path):
    plan = checks_plan()
    plan["graph"]["nodes"]["fan"]["max_parallel"] = 1
    model = BranchModel(branch_replies(), delay=0.01)
    s = at_fork(monkeypatch, tmp_path, plan=plan, model=model)
    s.run_pass(Reply(warning="x"))
    running, most = 0, 0
    for _, what in model.calls:
        running += 1 if what == "start" else -1
        most = max(most, running)
    assert most == 1 and s.state["current_node"] == "report"
    order = [b for b, what in model.calls if what == "start"]
    assert order == ["lint", "lint", "types", "types", "tests", "tests"]  # one branch after another, in edge order


def test_a_branch_retries_and_escalates_within_itself_and_the_policy_decides(monkeypatch, tmp_path):
    plan = checks_plan("any")
    plan["graph"]["nodes"]["types"]["max_retries"] = 1
    plan["graph"]["nodes"]["stuck_types"] = {"type": "escalate", "reason": "mypy keeps failing", "pace_level": "alternate"}
    plan["graph"]["edges"].remove({"from": "types", "to": "join"})
    plan["graph"]["edges"] += [{"from": "types", "to": "join", "condition": "on_success"},
                               {"from": "types", "to": "stuck_types", "condition": "on_exhaust"}]
    model = BranchModel({**branch_replies(), "types": [status(1), cmd("mypy --strict .; echo \"[exit:$?]\"",
                                                                      "[exit:2]"), Reply(final="types: gave up")]})
    s = at_fork(monkeypatch, tmp_path, plan=plan, model=model)
    record = s.run_pass(Reply(warning="x"))
    assert "Current step: Type check (attempt 2 of 2)" in model.prompts["types"][1]
    assert "[BRANCH ENDED: Type check] Outcome: escalated (mypy keeps failing (PACE alternate))" in \
        model.prompts["types"][2]
    joined = events(s, "parallel_joined")[0]
    assert joined["outcomes"]["types"] == "escalated" and joined["passed"]  # any: the other two succeeded
    assert s.state["current_node"] == "report" and getattr(s.agent, "_org_pace_level", "") == ""
    assert "- 'Type check': escalated (mypy keeps failing (PACE alternate))" in record.prompt_extras["htn_active_plan"]


@pytest.mark.parametrize("how", ["node", "setting", "v0.9"])
def test_sequential_mode_runs_the_branches_one_after_another_in_the_chat(monkeypatch, tmp_path, how):
    plan = checks_plan()
    if how == "node":
        plan["graph"]["nodes"]["fan"]["sequential"] = True
    elif how == "setting":
        monkeypatch.setenv("GRAPH_ENGINE_PARALLEL_BRANCHES", "off")
    use_library(monkeypatch, tmp_path, {"checks": plan})
    s = Session(layout="old" if how == "v0.9" else "new")
    s.agent.context.model = model = BranchModel(branch_replies())
    s.user("run the release checks")
    s.run_pass(cmd("ls", "README.md"))
    shown = [s.run_pass(status(0)).prompt_extras.get("htn_active_plan", "") for _ in range(4)]
    assert model.calls == []  # no subordinate
    assert ["Current step: Lint" in shown[0], "Current step: Type check" in shown[1],
            "Current step: Unit tests" in shown[2], "Current step: Report" in shown[3]] == [True] * 4
    said = [t for t in s.log.texts() if "run one after another" in t]
    if how == "node":
        assert said == []  # the plan asked for it: nothing to say
    else:
        why = {"setting": "the parallel_branches setting is off", "v0.9": "Agent-Zero v0.9.x runs one agent of a "
                                                                          "chat at a time"}[how]
        assert said == [f"[HTN] Workflow 'Release Checks': the branches of 'All checks' run one after another in "
                        f"this chat ({why})"]


def test_a_dot_plan_says_the_same_with_attributes_and_keeps_them_on_export():
    from graph_engine.authoring.dot import parse
    from graph_engine.authoring.dot_plan import to_dot, to_plan
    from graph_engine.core.model import compile_plan
    src = """digraph checks {
      graph [goal="Release checks", triggers="run the release checks"]
      start [shape=Mdiamond]
      done [shape=Msquare]
      fan [shape=component, label="All checks", max_parallel=2]
      lint [label="Lint", prompt="ruff check .", verify="exit_code_zero"]
      tests [label="Tests", prompt="pytest -q", verify="exit_code_zero"]
      join [shape=tripleoctagon, fan_in_policy="required", required="tests"]
      start -> fan
      fan -> lint
      fan -> tests
      lint -> join
      tests -> join
      join -> done
    }"""
    pid, raw, found = to_plan(parse(src))
    assert found == []
    plan = compile_plan(pid, raw)
    assert plan.fan_in_of == {"fan": "join"} and plan.nodes["fan"].max_parallel == 2
    assert plan.nodes["join"].fan_in_policy == "required" and plan.nodes["join"].required == ("tests",)
    assert plan.success_path == ("lint", "tests")  # both branches count as steps
    again = compile_plan(pid, to_plan(parse(to_dot(pid, raw)))[1])
    assert (again.nodes["fan"], again.nodes["join"]) == (plan.nodes["fan"], plan.nodes["join"])


def test_a_fan_in_policy_the_language_lacks_disables_that_plan_alone():
    from graph_engine.core.model import PlanError, compile_plan
    with pytest.raises(PlanError, match="unknown fan-in policy 'most'.*use one of all, any, quorum, required"):
        compile_plan("c", checks_plan("most"))
    with pytest.raises(PlanError, match="the required policy names no branch"):
        compile_plan("c", checks_plan("required"))


def test_the_card_and_the_component_show_the_branches_side_by_side_while_they_run(monkeypatch, tmp_path):
    seen = {}

    def look(agent, prompt):  # the tests branch's second call: lint and tests are done, types still at its step
        card = next(e for e in agent.context.log.entries if e["heading"].startswith("Workflow: Release Checks"))
        seen.update(card=json.loads(json.dumps(card)))  # as it is now (the item changes in place)
        return Reply(final="tests: clean")

    model = BranchModel({"lint": [status(0), Reply(final="lint: clean")],
                         "types": [status(0), Reply(final="types: clean")],
                         "tests": [status(0), look]}, delay={"lint": 0.0, "types": 0.3, "tests": 0.1})
    s = at_fork(monkeypatch, tmp_path, model=model)
    s.run_pass(Reply(warning="x"))
    card = seen["card"]
    assert card["heading"] == "Workflow: Release Checks: All checks"
    assert card["kvps"]["Branches"] == "Lint: success · Type check: at Type check · Unit tests: success"
    lines = card["content"].splitlines()
    assert "[done] 2. Lint" in lines and "[current] 3. Type check (its branch is running)" in lines
    assert "Branches, each in a subordinate agent, at once: Lint: success; Type check: at Type check; " \
           "Unit tests: success" in lines
    run = json.loads(card["kvps"]["graph_run"])
    drawing = json.loads("".join(card["kvps"]["graph"]))  # the drawing travels in chunks
    marks = dict(zip([n[0] for n in drawing["nodes"]], run["marks"]))
    assert (marks["lint"], marks["types"], marks["tests"], marks["fan"]) == ("d", "c", "d", "c")
    assert run["branches"] == [["Lint", "success", "", ""], ["Type check", "running", "Type check", ""],
                               ["Unit tests", "success", "", ""]]


def test_the_salute_report_lists_the_branches():
    from datetime import datetime, timezone

    from graph_engine.session.salute import build_report
    state = {"plan_name": "Release Checks", "status": "active", "total_steps": 5, "steps_completed": ["prepare"],
             "current_node": "fan", "events": [],
             "fork": {"node": "fan", "fan_in": "join", "max_parallel": 4, "branches": [
                 {"id": "lint", "run": "r1", "status": "success", "state": {}, "answer": "", "reason": "", "seen": 0},
                 {"id": "types", "run": "r2", "status": "running", "state": {"current_node": "types",
                                                                             "status": "active"},
                  "answer": "", "reason": "", "seen": 0}]}}
    report = build_report(state=state, pace_level="primary", role={}, org={}, agent_number=0, bst_domain="",
                          now=datetime.now(timezone.utc))
    assert [(b["id"], b["status"]) for b in report["activity"]["workflow_branches"]] == [("lint", "success"),
                                                                                         ("types", "running")]


# ── a restored fork is parsed, not trusted ──────────────────────────────────


def saved_mid_fork(monkeypatch, tmp_path) -> tuple[Session, dict]:
    """The state the chat holds while the branches run (lint at its step, the others done) when the process stops:
    what its last save and its checkpoint hold."""
    model = BranchModel({"lint": [kill], **{b: branch_replies()[b] for b in ("types", "tests")}},
                        delay={"lint": 0.05})
    s = at_fork(monkeypatch, tmp_path, model=model)
    import asyncio
    with pytest.raises(asyncio.CancelledError):
        s.run_pass(Reply(warning="x"))
    return s, json.loads(json.dumps(s.agent.get_data(DATA_KEY)))


def branch(saved: dict, bid: str) -> dict:
    return next(b for b in saved["fork"]["branches"] if b["id"] == bid)


FORK_DAMAGE = [
    (lambda s: branch(s, "lint").update(status="sleeping"), "field 'fork' is missing or not null or {node, fan_in"),
    (lambda s: s["fork"].update(fan_in="report"), "field 'fork' names 'fan' and 'report', not a parallel node"),
    (lambda s: branch(s, "lint")["state"].update(current_node="nowhere"),
     "field 'fork' branch 'lint': field 'current_node' names node 'nowhere'"),
    (lambda s: branch(s, "lint").update(id="report"), "field 'fork' branch 'report' is not a branch of 'fan'"),
    (lambda s: branch(s, "lint").update(run="elsewhere"), "field 'fork' branch 'lint' is not the run it names"),
    (lambda s: branch(s, "lint")["state"].update(turn=-1), "field 'fork' branch 'lint': field 'turn' is -1"),
    (lambda s: branch(s, "lint")["state"].pop("branch"), "field 'fork' is missing or not null or {node, fan_in"),
    (lambda s: s.update(fork=None), "field 'current_node' is 'fan', a parallel node, where a run does not rest"),
]


@pytest.mark.parametrize("edit, said", FORK_DAMAGE, ids=[said[:50] for _, said in FORK_DAMAGE])
def test_a_restored_fork_with_an_impossible_value_is_rejected_naming_it(monkeypatch, tmp_path, edit, said):
    s, saved = saved_mid_fork(monkeypatch, tmp_path)
    edit(saved)
    after = s.restarted({**s.saved, DATA_KEY: saved})
    after.agent.context.model = BranchModel({})
    after.nudge()
    after.run_pass(Reply(warning="x"))
    warnings = [t for t in after.log.texts("warning") if "Ignored an unusable workflow state" in t]
    assert len(warnings) == 1 and said in warnings[0], warnings
    assert [t for t in after.log.texts("error") if "Workflow engine error" in t] == []
    assert after.agent.context.model.calls == []  # no branch agent for a state that cannot be trusted


def test_a_restored_fork_as_saved_resumes(monkeypatch, tmp_path):
    s, saved = saved_mid_fork(monkeypatch, tmp_path)
    after = s.restarted({**s.saved, DATA_KEY: saved})
    after.agent.context.model = model = BranchModel({"lint": [status(0), Reply(final="lint: clean")]})
    after.nudge()
    after.run_pass(Reply(warning="x"))
    assert [b for b, what in model.calls if what == "start"] == ["lint", "lint"]
    assert after.state["current_node"] == "report"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(["status", "seen", "answer", "run", "id", "state.current_node",
                                                   "state.status", "state.turn", "state.seq", "fork.max_parallel",
                                                   "fork.fan_in", "fork.branches"]),
                                  st.integers(-2, 99) | st.sampled_from(["lint", "types", "join", "fan", "nowhere",
                                                                         "running", "success", "pending", ""])
                                  | st.none() | st.lists(st.none(), max_size=2)), min_size=1, max_size=3))
def test_a_fork_the_parser_accepts_is_one_the_engine_runs(monkeypatch, tmp_path, changes):
    s, saved = saved_mid_fork(monkeypatch, tmp_path)
    for key, value in changes:
        lint = next((b for b in saved["fork"]["branches"] or () if isinstance(b, dict) and b.get("id") == "lint"),
                    None) if isinstance(saved["fork"].get("branches"), list) else None
        if key.startswith("fork."):
            saved["fork"][key[5:]] = value
        elif lint is not None and key.startswith("state.") and isinstance(lint.get("state"), dict):
            lint["state"][key[6:]] = value
        elif lint is not None and not key.startswith("state."):
            lint[key] = value
    after = s.restarted({**s.saved, DATA_KEY: saved})
    after.agent.context.model = BranchModel({"lint": [status(0), Reply(final="lint: clean")]})
    after.nudge()
    after.run_pass(Reply(warning="x"))
    assert [t for t in after.log.texts("error") if "Workflow engine error" in t] == []
    rejected = [t for t in after.log.texts("warning") if "Ignored an unusable workflow state" in t]
    assert rejected or after.state is None or after.state["current_node"] in ("report", "fan")


# ── what can go wrong with a branch's agent ─────────────────────────────────


def test_a_branch_agent_that_raises_fails_its_branch_alone(monkeypatch, tmp_path):
    def broken(agent, prompt):
        raise RuntimeError("the model server went away")

    model = BranchModel({**branch_replies(), "types": [broken]})
    s = at_fork(monkeypatch, tmp_path, plan=checks_plan("any"), model=model)
    record = s.run_pass(Reply(warning="x"))
    joined = events(s, "parallel_joined")[0]
    assert joined["outcomes"] == {"lint": "success", "types": "fail", "tests": "success"} and joined["passed"]
    returned = [e for e in events(s, "branch_returned") if e["branch"] == "types"]
    assert returned[0]["reason"] == "its agent failed (RuntimeError: the model server went away)"
    assert "- 'Type check': fail (its agent failed (RuntimeError: the model server went away))" in \
        record.prompt_extras["htn_active_plan"]
    assert [t for t in s.log.texts() if "Branch 'Type check'" in t] == [
        "[HTN] Branch 'Type check' of workflow 'Release Checks' ended: fail"]
    assert [t for t in s.log.texts("error") if "Workflow engine error" in t] == []


def test_a_branch_agent_that_answers_too_early_is_told_to_go_on_then_its_branch_fails(monkeypatch, tmp_path):
    early = [Reply(final="types: I think it is fine."), Reply(final="types: really fine."),
             Reply(final="types: fine, I said.")]
    model = BranchModel({**branch_replies(), "types": early})
    s = at_fork(monkeypatch, tmp_path, plan=checks_plan("any"), model=model)
    s.run_pass(Reply(warning="x"))
    assert [what for b, what in model.calls if b == "types"].count("start") == 3  # its answer, then two reminders
    types_agent_saw = model.prompts["types"]
    assert all("Current step: Type check" in p for p in types_agent_saw)
    returned = [e for e in events(s, "branch_returned") if e["branch"] == "types"][0]
    assert returned["outcome"] == "fail" and returned["reason"] == \
        "its agent answered before the branch reached the fan-in"
    assert returned["answer"] == "types: fine, I said."


def test_a_stopped_chat_stops_its_branches_agents(monkeypatch, tmp_path):
    """Agent-Zero stops the chat's task (the person's stop button, a reset): the hook waiting for the branches is
    cancelled, and so is every branch's agent."""
    import asyncio
    left = {}

    def stop_the_chat(agent, prompt):
        for task in asyncio.all_tasks():
            if task.get_coro().__name__ == "execute":  # the chat agent's hook call (the stand-in runs it so)
                task.cancel()
        left["tasks"] = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return status(0)

    model = BranchModel({**branch_replies(), "tests": [stop_the_chat]}, delay={"lint": 0.5, "types": 0.5})
    s = at_fork(monkeypatch, tmp_path, model=model)
    with pytest.raises(asyncio.CancelledError):
        s.run_pass(Reply(warning="x"))
    assert left["tasks"] and all(t.done() for t in left["tasks"])
    assert [b for b, what in model.calls if what == "end"].count("lint") == 1  # cut short: no second call
    assert "lint" not in [e.get("branch") for e in events(s, "branch_returned")]


def test_a_plan_that_begins_with_its_branches_runs_them_once_the_selector_confirms_it(monkeypatch, tmp_path):
    plan = checks_plan()
    plan["graph"]["edges"] = [e for e in plan["graph"]["edges"] if e["from"] not in ("start", "prepare")]
    plan["graph"]["edges"].insert(0, {"from": "start", "to": "fan"})
    del plan["graph"]["nodes"]["prepare"]
    use_library(monkeypatch, tmp_path, {"checks": plan})
    s = Session()
    s.agent.context.model = model = BranchModel(branch_replies())
    s.user("could you run the release checks for me before lunch")  # trigger phrases: the selector confirms
    first = s.run_pass(Reply(code='echo "[waiting for the branches]"', output="[waiting for the branches]"))
    shown = first.prompt_extras["htn_active_plan"]
    assert "Run exactly this command and nothing else: echo \"[waiting for the branches]\"" in shown
    assert len([c for c in model.calls if c[1] == "start"]) == 6  # run in the same pass, once confirmed
    second = s.run_pass(cmd("echo report", "report"))
    assert "Current step: Report" in second.prompt_extras["htn_active_plan"]
    assert "The branches met at 'Checks joined'" in second.prompt_extras["htn_active_plan"]
    assert [e["type"] for e in events(s, "evidence_ignored")] == []  # the wait command was no step's evidence


def test_the_picture_of_the_run_draws_each_branch_it_ran(monkeypatch, tmp_path):
    monkeypatch.setenv("GRAPH_ENGINE_PICTURE", "mermaid")
    s = at_fork(monkeypatch, tmp_path, plan=checks_plan("any"), model=BranchModel(branch_replies(("types",))))
    s.run_pass(Reply(warning="x"))
    s.run_pass(cmd("echo report", "report"))
    s.run_pass(Reply(final="Done."))
    picture = open(s.agent._htn_last_run["picture"]).read()
    for b in ("lint", "types", "tests"):  # each branch's way, drawn as taken once (==>), its nodes entered once
        assert f'fan ==>|"always x1"| {b}' in picture and f'{b} ==>|"always x1"| join' in picture, picture
    assert 'join["Checks joined x1"]' in picture and 'report ==>|"always x1"| done' in picture


class Terminal:
    """Agent-Zero's terminal session as its code execution tool keeps it (``_cet_state.shells[n].session``)."""

    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def opens_a_terminal(opened: list, then: Reply):
    def reply(agent, prompt):
        from types import SimpleNamespace
        terminal = Terminal()
        opened.append(terminal)
        agent.set_data("_cet_state", SimpleNamespace(shells={0: SimpleNamespace(session=terminal)}))
        return then
    return reply


@pytest.mark.parametrize("stopped", [False, True])
def test_a_branch_agents_terminals_close_when_it_is_done_or_stopped(monkeypatch, tmp_path, stopped):
    from graph_engine.tools.standin import UserMessage
    opened: list = []

    def open_fail_and_stop(agent, prompt):
        agent.intervention = UserMessage(message="stop the workflow")
        return opens_a_terminal(opened, status(1))(agent, prompt)

    plan = checks_plan()
    plan["graph"]["nodes"]["lint"]["max_retries"] = 1
    if stopped:  # lint opens its terminal, fails, the person says stop; lint is cut short in its second call
        replies = {"lint": [open_fail_and_stop, status(0)], "types": [status(0)], "tests": [status(0)]}
        delay = {"lint": 0.2, "types": 0.6, "tests": 0.6}
    else:
        replies = {b: [opens_a_terminal(opened, status(0)), Reply(final=f"{b}: clean")] for b in BRANCHES}
        delay = 0.0
    model = BranchModel(replies, delay=delay)
    s = at_fork(monkeypatch, tmp_path, plan=plan, model=model)
    s.run_pass(Reply(warning="x"))
    assert len(opened) == (1 if stopped else 3) and all(t.closed for t in opened)
    if stopped:
        assert s.history[-1] == {"ai": False, "content": {"user_intervention": "stop the workflow"}}
        assert not events(s, "parallel_joined")


def test_a_branch_agent_that_never_answers_is_stopped_three_calls_after_its_branch_is_done(monkeypatch, tmp_path):
    chatty = [status(0)] + [cmd(f"echo more {i}", f"more {i}") for i in range(20)]  # never the response tool
    model = BranchModel({**branch_replies(), "types": chatty})
    s = at_fork(monkeypatch, tmp_path, model=model)
    record = s.run_pass(Reply(warning="x"))
    assert [what for b, what in model.calls if b == "types"].count("start") == 1 + 3  # its step, then three more
    assert events(s, "parallel_joined")[0]["outcomes"]["types"] == "success"  # it keeps its branch's outcome
    assert s.state["current_node"] == "report" and "Current step: Report" in record.prompt_extras["htn_active_plan"]
    assert [t for t in s.log.texts("warning") if "without answering" in t] == [
        "[HTN] Branch 'Type check' of workflow 'Release Checks': its agent made 3 model calls after the branch was "
        "done without answering; it was stopped, and the branch keeps its outcome"]


def test_a_fault_while_branches_run_is_one_line_and_leaves_no_branch_agent_running(monkeypatch, tmp_path):
    """A fault in the waiting hook itself (here: reading the person's message) is one error line, the agent's loop
    goes on, and the branches' agents are stopped before the hook returns (Agent-Zero's loop would run them on)."""
    from graph_engine.hosts.agent_zero import branches
    from graph_engine.tools.standin import UserMessage
    model = BranchModel({b: [status(0), status(0), Reply(final="x")] for b in BRANCHES}, delay=0.1)
    s = at_fork(monkeypatch, tmp_path, model=model)
    left, stopped = [], []
    cancel = branches._cancel

    async def recorded(tasks):
        stopped.append(len(tasks))
        await cancel(tasks)
        left.extend(t for t in tasks.values() if not t.done())

    def broken_parse(words, *args):
        raise KeyError("broken")
    monkeypatch.setattr(branches, "_cancel", recorded)
    monkeypatch.setattr(branches.control, "parse", broken_parse)
    s.agent.intervention = UserMessage(message="how is it going?")  # the waiting loop reads it: the fault
    s.run_pass(Reply(warning="x"))  # the pass ends: the agent's loop goes on
    errors = [t for t in s.log.texts("error") if "Workflow engine error" in t]
    assert len(errors) == 1 and "KeyError" in errors[0]
    assert stopped == [3] and left == []  # all three stopped, none still running
    assert [b for b, what in model.calls if what == "start"] == ["lint", "types", "tests"]


def test_a_branch_whose_model_never_answers_fails_at_the_parallel_nodes_timeout(monkeypatch, tmp_path):
    """The parallel node's ``timeout`` bounds each branch: a branch whose model does not answer in time is stopped
    and fails with the reason, one warning names it, and the fan-in routes on its policy (any: the others passed)."""
    plan = checks_plan("any")
    plan["graph"]["nodes"]["fan"]["timeout"] = 0.5
    model = BranchModel(branch_replies(), delay={"lint": 0.0, "types": 30.0, "tests": 0.0})
    s = at_fork(monkeypatch, tmp_path, plan=plan, model=model)
    record = s.run_pass(Reply(warning="x"))
    joined = events(s, "parallel_joined")[0]
    assert joined["outcomes"] == {"lint": "success", "types": "fail", "tests": "success"} and joined["passed"]
    returned = {e["branch"]: e for e in events(s, "branch_returned")}
    assert returned["types"]["reason"] == "no answer within 0.5 s (the parallel node's timeout)"
    assert any("Branch 'Type check' of workflow 'Release Checks': no answer within 0.5 s" in t
               for t in s.log.texts("warning"))
    assert "Current step: Report" in record.prompt_extras["htn_active_plan"]


def test_stop_counts_the_branch_steps_that_passed_and_the_completion_counts_the_branches_turns(monkeypatch,
                                                                                              tmp_path):
    from graph_engine.tools.standin import UserMessage

    def person_says_stop(agent, prompt):
        agent.intervention = UserMessage(message="stop the workflow")
        return Reply(warning="looking")  # no command: nothing of this branch is judged

    model = BranchModel({"lint": [status(0), Reply(final="lint: clean")], "tests": [person_says_stop],
                         "types": [status(0), Reply(final="x")]}, delay={"lint": 0.0, "tests": 0.2, "types": 0.4})
    s = at_fork(monkeypatch, tmp_path, model=model)
    s.run_pass(Reply(warning="x"))
    record = s.run_pass(Reply(final="Stopped."))
    shown = record.prompt_extras["htn_active_plan"]
    assert "(2 of 5 steps done)" in shown, shown  # Prepare, and the step of the branch that had finished
    done = BranchModel(branch_replies(), delay=0.0)
    (tmp_path / "again").mkdir()
    s2 = at_fork(monkeypatch, tmp_path / "again", model=done)
    s2.run_pass(Reply(warning="x"))
    s2.run_pass(cmd("summarise", "all clean"))
    s2.run_pass(Reply(final="All clean."))
    said = [t for t in s2.log.texts() if "completed at" in t]
    assert said and said[-1].endswith("5 of 5 steps done in 3 turns (and 6 turns of its branches' agents)"), said


def test_each_branch_agent_is_made_with_its_profile_told_what_its_fidelity_says_and_threads_share_one(
        monkeypatch, tmp_path):
    plan = checks_plan()
    nodes = plan["graph"]["nodes"]
    nodes["fan"].update(profile="developer", fidelity="compact")  # every branch's, unless its first node says
    nodes["lint"].update(profile="hacker", thread_id="quick")
    nodes["types"].update(thread_id="quick", fidelity="truncate")
    seen: dict[str, dict] = {}

    def note(branch, then):
        def reply(agent, prompt):
            told = [h["content"]["user_message"] for h in agent.history if "user_message" in h["content"]]
            seen.setdefault(branch, {"profile": agent.config.profile, "agent": id(agent), "told": told[-1]})
            return then
        return reply

    model = BranchModel({b: [note(b, status(0)), Reply(final=f"{b}: clean")] for b in BRANCHES},
                        delay={"lint": 0.05, "types": 0.05, "tests": 0.2})
    s = at_fork(monkeypatch, tmp_path, plan=plan, model=model)
    s.run_pass(Reply(warning="x"))
    assert {b: v["profile"] for b, v in seen.items()} == {"lint": "hacker", "types": "hacker",  # the thread's agent
                                                          "tests": "developer"}
    assert seen["lint"]["agent"] == seen["types"]["agent"] != seen["tests"]["agent"]  # one agent for the thread
    running, overlap = set(), False
    for b, what in model.calls:
        if what == "start":
            overlap |= {b, *running} >= {"lint", "types"}
            running.add(b)
        else:
            running.discard(b)
    assert not overlap  # the thread's branches one after another; 'tests' beside them
    assert {b for b, what in model.calls[:4] if what == "start"} >= {"tests"}
    assert "Steps of the workflow done before the branches started:\n- Prepare: passed" in seen["tests"]["told"]
    assert "Steps of the workflow done" not in seen["types"]["told"]  # truncate: its assignment alone
    assert "'Type check'" in seen["types"]["told"]  # its own assignment, in the thread's agent
    assert s.state["current_node"] == "report"


def test_a_model_preset_this_agent_zero_lacks_leaves_the_chats_model_with_one_line(monkeypatch, tmp_path):
    plan = checks_plan()
    plan["graph"]["nodes"]["tests"]["llm_model"] = "gpt-5"
    s = at_fork(monkeypatch, tmp_path, plan=plan, model=BranchModel(branch_replies()))
    s.run_pass(Reply(warning="x"))
    said = [t for t in s.log.texts() if "runs with the chat's model" in t]
    assert said == ["[HTN] Branch 'Unit tests' of workflow 'Release Checks' runs with the chat's model: this "
                    "Agent-Zero has no model presets (ModuleNotFoundError)"]
    assert s.state["current_node"] == "report"


def test_on_one_agent_the_branch_agents_settings_are_said_to_apply_to_subordinates_only(monkeypatch, tmp_path):
    plan = checks_plan()
    plan["graph"]["nodes"]["fan"].update(sequential=True, profile="developer")
    use_library(monkeypatch, tmp_path, {"checks": plan})
    s = Session()
    s.user("run the release checks")
    s.run_pass(cmd("ls", "README.md"))
    s.run_pass(status(0))
    assert [t for t in s.log.texts() if "one after another" in t] == [
        "[HTN] Workflow 'Release Checks': the branches of 'All checks' run one after another in this chat; their "
        "profile, llm_model, fidelity and thread_id apply to subordinate agents only"]
