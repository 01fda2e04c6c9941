"""The user steers a run from the chat, through the stand-in's real hook order: the golden set of control
messages and near misses (fixtures/control_messages.json) at 100%, then each control's behaviour: the call
that answers it shows the result, the card and the audit log follow, and no control ever raises."""

import json

import pytest
from hypothesis import given, strategies as st
from test_routing import review_plan
from scenario import BUG_MESSAGE, IDLE, crash, events, exit_ok, told, use_library, verdicts

from graph_engine.hosts.agent_zero import adapter, reading

from graph_engine.core import control, state as state_mod
from graph_engine.session.audit import read_lines
from graph_engine.tools.standin import FIXTURES, Reply, Session, cmd

GOLDEN = json.loads((FIXTURES / "control_messages.json").read_text())
ISOLATE = cmd("grep -n divide /tmp/test.py", "3:    return a / b")
ANSWERS = ("[WORKFLOW CONTROL] ", "[WORKFLOW STOPPED by the user: ", "[WORKFLOW PAUSED by the user: ",
           "[WORKFLOW STATUS: ", "[WORKFLOWS you can run: ")


def at_test_step(final: str = "The fix is in; testing next.", **kwargs) -> Session:
    """A chat whose Bug Fix Workflow run stands at 'Test the fix' (3 of 5 steps done), its monologue ended
    with the agent's reply ``final``."""
    s = Session(**kwargs)
    s.user(BUG_MESSAGE)
    s.run_pass(crash())
    s.run_pass(ISOLATE)
    s.run_pass(exit_ok())
    s.run_pass(Reply(final=final))
    assert s.state["current_node"] == "test" and len(s.state["steps_completed"]) == 3
    return s


def say(s: Session, message: str, reply: Reply | None = None):
    s.user(message)
    return s.run_pass(reply or Reply(final="ok"))


def said_events(s: Session) -> list[dict]:
    runs = [s.state or {}, getattr(s.agent, "_htn_last_run", None) or {}]
    return [e for r in runs for e in r.get("events", []) if "said" in e]


# ── the golden set ──────────────────────────────────────────────────────────


@pytest.mark.parametrize("case", GOLDEN["controls"], ids=lambda c: c["message"])
def test_each_control_message_is_read_as_its_control(case):
    ctl = control.parse(case["message"])
    assert ctl is not None and ctl.kind == case["control"]
    if "target" in case:
        assert ctl.target == case["target"]


@pytest.mark.parametrize("case", GOLDEN["controls"], ids=lambda c: c["message"])
def test_each_control_message_is_answered_in_the_call_that_carries_it(case):
    s = at_test_step()
    if "after" in case:
        say(s, case["after"])
    record = say(s, case["message"])
    assert told(record).startswith(ANSWERS), told(record)
    if "note" not in case:  # a refusal changes nothing; a control that acts is one event naming the words in
        runs = [s.state or {}, getattr(s.agent, "_htn_last_run", None) or {}]  # each run it touches
        per_run = [[e["said"] for e in r.get("events", []) if e.get("said") != case.get("after")
                    and "said" in e] for r in runs]
        assert [case["message"]] in per_run and all(len(p) <= 1 for p in per_run), per_run


@pytest.mark.parametrize("message", GOLDEN["near_misses"])
def test_a_near_miss_is_no_control(message):
    s = at_test_step()
    before = s.state["current_node"]
    record = say(s, message)
    assert not told(record).startswith(ANSWERS), told(record)
    assert said_events(s) == []
    assert s.state is None or s.state["current_node"] == before or s.state["plan_id"] != "bugfix_workflow"


@pytest.mark.parametrize("message", GOLDEN["near_misses"])
def test_a_near_miss_without_a_run_gets_no_answer(message):
    s = Session()
    s.user(message)
    record = s.run_pass(Reply(final="ok"))
    assert not told(record).startswith(ANSWERS)


@pytest.mark.parametrize("case", GOLDEN["answers"], ids=lambda c: c["message"])
def test_a_one_word_answer_to_the_agents_question_is_an_answer(case):
    assert control.parse(case["message"], asked=True) is None
    s = at_test_step(final=case["question"])
    record = say(s, case["message"])
    assert not told(record).startswith(ANSWERS), told(record)
    assert said_events(s) == []
    assert s.state is not None and s.state["current_node"] == "test" and not s.state.get("paused")


@pytest.mark.parametrize("case", GOLDEN["controls_after_a_question"], ids=lambda c: c["message"])
def test_a_control_that_says_workflow_or_step_acts_after_a_question(case):
    assert control.parse(case["message"], asked=True).kind == case["control"]
    s = at_test_step(final=case["question"])
    record = say(s, case["message"])
    assert told(record).startswith(ANSWERS), told(record)
    assert [e["said"] for e in said_events(s)] == [case["message"]]


def test_every_canonical_form_still_acts_after_a_question():
    for kind, form in control.CANONICAL.items():
        said = form.replace("<step>", "the fix step").replace("<plan name>", "Bug Fix")
        assert control.parse(said, asked=True).kind == kind, said


def test_without_a_question_the_one_word_controls_still_act():
    s = at_test_step(final="The fix is in; testing next.")
    record = say(s, "stop")
    assert told(record).startswith("[WORKFLOW STOPPED by the user: ")


def test_start_with_no_name_says_which_workflows_exist():
    s = at_test_step()
    record = say(s, "start the .* workflow")
    assert "named ''" not in told(record) and told(record).startswith(ANSWERS), told(record)
    assert "list workflows" in told(record)


def test_the_golden_set_covers_every_control_and_the_canonical_forms():
    kinds = {c["control"] for c in GOLDEN["controls"]}
    assert kinds == set(control.KINDS)
    messages = {c["message"] for c in GOLDEN["controls"]}
    for kind, form in control.CANONICAL.items():
        assert kind in ("back", "start") or form in messages, form
        assert control.parse(form.replace("<step>", "the fix step").replace("<plan name>", "Bug Fix")).kind == kind


# ── stop ────────────────────────────────────────────────────────────────────


def test_stop_ends_the_run_in_the_call_that_answers_it_with_no_pace_change():
    s = at_test_step()
    s.agent._org_pace_level = "primary"
    record = say(s, "stop the workflow")
    assert told(record).startswith("[WORKFLOW STOPPED by the user: Bug Fix Workflow]")
    assert "Stopped at: Test the fix (3 of 5 steps done)" in told(record)
    assert s.state is None and s.agent.get_data("graph_engine_state") is None
    last = s.agent._htn_last_run
    assert last["status"] == "stopped" and last["events"][-1]["type"] == "plan_stopped"
    assert last["events"][-1]["said"] == "stop the workflow"
    assert s.agent._org_pace_level == "primary"
    cards = [i for i in s.log.logs if i.heading.startswith("Workflow: Bug Fix Workflow")]
    assert len(cards) == 1  # the run's one card, updated in place
    assert cards[0].heading.endswith(": stopped")
    assert 'stopped by the user, who said "stop the workflow"' in cards[0].content
    assert not s.log.texts("error")


def test_stop_said_while_the_tool_runs_ends_the_run_in_the_next_call():
    s = at_test_step()
    s.user("go on")
    s.run_pass(cmd("pytest -q", "1 passed"), intervention="stop the workflow")
    record = s.run_pass(Reply(final="Stopped."))
    assert told(record).startswith("[WORKFLOW STOPPED by the user: ")
    assert s.agent._htn_last_run["status"] == "stopped"


def test_a_control_is_decided_once_per_message():
    s = at_test_step()
    say(s, "workflow status")
    assert len(said_events(s)) == 1
    assert sum("the user said 'workflow status'" in t for t in s.log.texts("info")) == 1


@pytest.mark.parametrize("message", ["stop the workflow", "pause the workflow", "skip this step", "go back",
                                     "retry this step", "restart the workflow", "workflow status"])
def test_a_control_with_no_run_gets_a_one_line_answer(message):
    s = Session()
    record = say(s, message)
    assert told(record).startswith("[WORKFLOW CONTROL] No workflow is active") and "\n" not in told(record)
    assert s.state is None and not s.log.texts("error") and not s.log.texts("warning")


# ── pause and resume ────────────────────────────────────────────────────────


def test_while_paused_no_step_is_shown_no_result_judged_and_no_turn_counted():
    s = at_test_step()
    record = say(s, "pause the workflow", cmd("pytest -q", "1 passed"))
    assert told(record).startswith("[WORKFLOW PAUSED by the user: Bug Fix Workflow]")
    assert "Current step" not in told(record)
    turn = s.state["turn"]
    for _ in range(40):  # more than the plan's stale limit
        record = s.run_pass(cmd("pytest -q", "1 passed"))
        assert "Current step" not in told(record)
    s.run_pass(Reply(final="done"))
    assert s.state["status"] == "active" and s.state["turn"] == turn
    assert verdicts(s)[-1][0] == "fix"  # the paused calls' results were not judged
    record = say(s, "resume the workflow", cmd('pytest -q; echo "[exit:$?]"', "1 passed\n[exit:0]"))
    assert told(record).startswith("[WORKFLOW CONTROL] Resumed by the user")
    assert "Current step: Test the fix" in told(record)
    s.run_pass(Reply(final="done"))
    assert verdicts(s)[-1] == ("test", "success")


def test_a_paused_run_stays_paused_after_a_restart():
    s = at_test_step()
    say(s, "pause the workflow")
    s = s.restarted()
    s.user("what time is it?")
    record = s.run_pass(Reply(final="noon"))
    assert "[WORKFLOW PAUSED by the user: " in told(record) and "Current step" not in told(record)
    assert s.state["paused"] is True


def test_continue_the_workflow_with_nothing_paused_is_an_ordinary_go_on():
    s = at_test_step()
    record = say(s, "continue the workflow")
    assert "Current step: Test the fix" in told(record) and said_events(s) == []


# ── skip ────────────────────────────────────────────────────────────────────


def test_skip_marks_the_step_skipped_and_follows_its_success_route():
    s = at_test_step()
    record = say(s, "skip this step")
    assert told(record).startswith("[WORKFLOW CONTROL] Skipped by the user: 'Test the fix' is marked skipped")
    assert "Current step: Check for regressions" in told(record) and "Test the fix [SKIPPED]" in told(record)
    assert s.state["steps_skipped"] == ["test"] and "test" not in s.state["steps_completed"]
    card = [i for i in s.log.logs if i.heading.startswith("Workflow: Bug Fix Workflow")][-1]
    assert "[skipped] 4. Test the fix" in card.content
    log = s.agent.context.id
    lines = list(read_lines(adapter.runtime_for(str(adapter.Path("x"))).audit.path(log, s.state["run_id"])))
    assert [e["said"] for e in lines if e["type"] == "step_skipped"] == ["skip this step"]


def goal_gate_plan():
    return {"name": "Gated", "triggers": ["gated please"], "trigger_threshold": 1, "graph": {
        "start": "check",
        "nodes": {"check": {"type": "task", "name": "Check", "verify": {"type": "exit_code_zero"},
                            "goal_gate": True},
                  "stuck": {"type": "escalate", "reason": "the check failed"},
                  "done": {"type": "exit", "name": "Done"}},
        "edges": [{"from": "check", "to": "done", "condition": "on_success"},
                  {"from": "check", "to": "stuck", "condition": "on_exhaust"}]}}


def test_a_goal_gate_the_user_skipped_says_so_when_reached(monkeypatch, tmp_path):
    use_library(monkeypatch, tmp_path, {"g": goal_gate_plan()})
    s = Session()
    s.user("gated please")
    s.run_pass(IDLE)
    record = say(s, "skip this step")
    last = s.agent._htn_last_run
    assert last["status"] == "aborted" and "goal gate 'Check' is not satisfied (the user skipped it)" in told(record)


# ── go back, retry ──────────────────────────────────────────────────────────


def test_go_back_makes_the_step_current_with_fresh_attempts_and_reopens_the_steps_after_it():
    s = at_test_step()
    record = say(s, "go back to the reproduce step")
    assert told(record).startswith("[WORKFLOW CONTROL] Back to 'Reproduce the issue'")
    assert "Current step: Reproduce the issue (attempt 1 of 3)" in told(record)
    assert "step 1 of 5 (0 of 5 steps done)" in told(record)
    st = s.state
    assert st["current_node"] == "reproduce" and st["steps_completed"] == [] and st["current_step"] == 0
    assert all(st["visited"][n]["attempts"] == 0 for n in ("reproduce", "isolate", "fix"))
    jump = events(s, "jumped_back")[-1]
    assert jump["said"] == "go back to the reproduce step" and jump["to"] == "reproduce"
    assert jump["node"] == "test" and {"isolate", "fix", "test"} <= set(jump["reopened"])
    s.user("go on")
    s.run_pass(crash())  # the model runs the step it was shown: judged against it
    s.run_pass(Reply(final="reproduced"))
    assert verdicts(s)[-1] == ("reproduce", "success") and s.state["current_node"] == "isolate"


def test_back_to_the_fix_and_redo_name_the_step_by_its_words():
    for message in ("back to the fix", "redo the fix", "go back"):
        s = at_test_step()
        record = say(s, message)
        assert "Current step: Implement the fix" in told(record), message


def test_go_back_to_a_step_the_plan_does_not_have_lists_its_steps():
    s = at_test_step()
    record = say(s, "go back to the deploy step")
    assert told(record).startswith("[WORKFLOW CONTROL] No step of 'Bug Fix Workflow' is named 'deploy'")
    assert "Current step: Test the fix" in told(record)


def test_retry_gives_the_attempts_back_once():
    s = at_test_step()
    s.user("go on")
    s.run_pass(cmd('pytest; echo "[exit:$?]"', "1 failed\n[exit:1]"))
    s.run_pass(Reply(final="failed"))
    assert s.state["visited"]["test"]["failures"] == 1 or s.state["current_node"] == "fix"
    s.state["current_node"] = "test"  # (the plan routes a failed test back to the fix; stand on the test)
    record = say(s, "retry this step")
    assert told(record).startswith("[WORKFLOW CONTROL] Retried at the user's request: 'Test the fix'")
    assert s.state["visited"]["test"]["failures"] == 0 and events(s, "attempts_restored")[-1]["node"] == "test"
    record = say(s, "retry this step")
    assert "already had its attempts given back once" in told(record)
    assert len(events(s, "attempts_restored")) == 1


# ── restart, start by name, list, status ────────────────────────────────────


def test_restart_starts_a_new_run_of_the_same_plan():
    s = at_test_step()
    old = s.state["run_id"]
    record = say(s, "restart the workflow")
    assert "Restarted by the user" in told(record) and "Current step: Reproduce the issue" in told(record)
    assert s.state["run_id"] != old and s.state["plan_id"] == "bugfix_workflow"
    assert s.agent._htn_last_run["status"] == "stopped"
    assert s.agent._htn_last_run["events"][-1]["new_run"] == s.state["run_id"]
    assert events(s, "plan_activated")[-1]["said"] == "restart the workflow"


def test_start_by_name_starts_that_plan_whatever_the_triggers_say():
    s = at_test_step()
    record = say(s, "start the Git Feature Branch workflow")
    assert told(record).startswith("[WORKFLOW CONTROL] Started by the user: 'Git Feature Branch'")
    assert "Current step: Check the working tree" in told(record)
    assert s.state["plan_id"] == "git_feature_branch"
    assert s.agent._htn_last_run["status"] == "ended" and s.agent._htn_last_run["plan_id"] == "bugfix_workflow"


def test_start_by_name_with_no_run():
    s = Session()
    record = say(s, "use the docker build and deploy workflow")
    assert s.state["plan_id"] == "docker_build_deploy" and "Started by the user" in told(record)


def test_start_by_name_is_refused_outside_the_org_role_s_plans():
    s = Session(allowed_plans=["bugfix_workflow"])
    s.agent.set_data("_org_htn_allowed_plans", ["bugfix_workflow"])
    record = say(s, "start the Git Feature Branch workflow")
    assert "the active org role does not allow 'Git Feature Branch'" in told(record)
    assert s.state is None


def test_list_shows_the_plans_this_agent_may_run():
    s = Session(allowed_plans=["bugfix_workflow", "git_feature_branch"])
    s.agent.set_data("_org_htn_allowed_plans", ["bugfix_workflow", "git_feature_branch"])
    text = told(say(s, "which workflows do you have"))
    assert text.startswith("[WORKFLOWS you can run: 2]")
    assert '- Bug Fix Workflow: starts on a request such as "fix the bug"' in text
    assert "8 other workflows in the library the active org role does not allow" in text


def test_status_says_where_the_run_stands():
    s = at_test_step()
    text = told(say(s, "where are we"))
    assert text.startswith("[WORKFLOW STATUS: Bug Fix Workflow]\n  Current step: Test the fix (step 4 of 5")
    assert "Done: Reproduce the issue; Isolate the root cause; Implement the fix (3 of 5 steps done)" in text
    assert "Current step: Test the fix" in text.split("\n\n", 1)[1]  # the step follows, the run goes on


# ── human gates that do not wait for ever ──────────────────────────────────


def timed_gate_plan(default="", **limit):
    plan = review_plan(default)
    plan["graph"]["nodes"]["ask"].update(limit)
    return plan


def at_timed_gate(monkeypatch, tmp_path, default="", ask: Reply = IDLE, **limit) -> Session:
    """The run reaches the gate in the third pass; ``ask``: what the model does in that pass."""
    use_library(monkeypatch, tmp_path, {"r": timed_gate_plan(default, **limit)})
    s = Session()
    s.user("review the release")
    s.run_pass(IDLE)
    s.run_pass(exit_ok())
    s.run_pass(ask)
    assert s.state["current_node"] == "ask" and s.state["gate"]["node"] == "ask"
    return s


QUESTION = Reply(final="Ship the release or fix it first? [A] Approve / [F] Fix first")


def test_a_gate_past_its_turns_takes_its_default_and_records_it(monkeypatch, tmp_path):
    s = at_timed_gate(monkeypatch, tmp_path, default="A", timeout_turns=3)
    for _ in range(3):
        record = s.run_pass(IDLE)  # the model goes on without asking
    assert "Current step: Ship" in told(record)
    assert "No answer to 'Review' came within 3 turns: its default option '[A] Approve' was taken" in told(record)
    timed = events(s, "human_timed_out")[-1]
    assert timed["waited"] == "3 turns" and timed["default"] == "[A] Approve"
    assert events(s, "human_answered")[-1]["by"] == "timeout default"


def test_a_gate_past_its_time_without_a_default_escalates(monkeypatch, tmp_path):
    clock = [1_000_000.0]
    monkeypatch.setattr(reading, "now", lambda: clock[0])
    s = at_timed_gate(monkeypatch, tmp_path, ask=QUESTION, timeout=900)
    clock[0] += 901
    record = say(s, "A")
    assert told(record).startswith("[WORKFLOW ESCALATED: Release review]")
    assert "no answer to 'Review' within 15 min, and it has no default option" in told(record)
    assert s.agent._htn_last_run["status"] == "escalated"


def test_an_answer_in_time_wins(monkeypatch, tmp_path):
    clock = [1_000_000.0]
    monkeypatch.setattr(reading, "now", lambda: clock[0])
    s = at_timed_gate(monkeypatch, tmp_path, default="F", ask=QUESTION, timeout=900)
    clock[0] += 60
    say(s, "A")
    assert events(s, "human_answered")[-1]["by"] == "answer" and s.state["current_node"] == "ship"


GATE_DOT = """digraph release {
  start [shape=Mdiamond]
  ask [shape=hexagon, label="Ship?", timeout="15m", human.default_choice="A", human.timeout_turns=6]
  ship [shape=box, prompt="Ship", tool_hint="make ship"]
  done [shape=Msquare]
  start -> ask
  ask -> ship [label="[A] Approve"]
  ask -> done [label="[N] Not now"]
  ship -> done
}"""


def test_a_gate_timeout_is_read_from_dot_and_from_json():
    from graph_engine.authoring.dot_plan import load_dot_plan, to_dot
    from graph_engine.core.model import PlanError, compile_plan
    plan = compile_plan("r", timed_gate_plan("A", timeout=90, timeout_turns=4))
    assert plan.nodes["ask"].timeout == 90.0 and plan.nodes["ask"].timeout_turns == 4
    with pytest.raises(PlanError):
        compile_plan("r", timed_gate_plan("A", timeout="soon"))
    pid, raw, _ = load_dot_plan(GATE_DOT)
    gate = compile_plan(pid, raw).nodes["ask"]
    assert (gate.timeout, gate.timeout_turns, gate.default_choice) == (900.0, 6, "A")
    again = compile_plan(pid, load_dot_plan(to_dot(pid, raw))[1]).nodes["ask"]  # exported and read back
    assert (again.timeout, again.timeout_turns) == (900.0, 6)


# ── the saved state ─────────────────────────────────────────────────────────


def test_the_control_fields_round_trip_and_a_damaged_one_is_refused():
    s = at_test_step()
    say(s, "skip this step")
    saved = json.loads(json.dumps(s.agent.get_data("graph_engine_state")))
    assert state_mod.problem_with(saved) == ""
    assert saved["steps_skipped"] == ["test"] and saved["paused"] is False
    for key, bad in (("paused", "yes"), ("steps_skipped", "test"), ("gate", {"node": 3})):
        assert key in state_mod.problem_with(dict(saved, **{key: bad}))
    older = {k: v for k, v in saved.items() if k not in state_mod.control_fields()}
    assert state_mod.problem_with(older) == ""  # saved before the fields existed: read as a new run's


def test_no_control_raises_on_any_state():
    for case in GOLDEN["controls"]:
        s = at_test_step()
        s.state["current_node"] = "decide" if case["control"] != "list" else "test"  # a pass-through node
        say(s, case["message"])
        assert not s.log.texts("error"), case


def test_a_gate_s_clock_does_not_run_while_the_run_is_paused(monkeypatch, tmp_path):
    s = at_timed_gate(monkeypatch, tmp_path, default="A", ask=QUESTION, timeout_turns=2)
    say(s, "pause the workflow", IDLE)
    for _ in range(5):
        s.run_pass(IDLE)
    record = say(s, "resume the workflow", IDLE)
    assert events(s, "human_timed_out") == [] and "Question for the user" in told(record)
    s.run_pass(IDLE)
    s.run_pass(IDLE)
    assert events(s, "human_timed_out")[-1]["waited"] == "2 turns" and s.state["current_node"] == "ship"


# ── any text ────────────────────────────────────────────────────────────────

CONTROL_WORDS = sorted({w for c in GOLDEN["controls"] for w in control.words(c["message"]).split()})


@given(st.lists(st.sampled_from(CONTROL_WORDS) | st.text(max_size=12), max_size=30))
def test_any_words_parse_to_a_control_or_none_and_never_raise(parts):
    ctl = control.parse(" ".join(parts))
    assert ctl is None or ctl.kind in control.KINDS


@given(st.sampled_from(GOLDEN["controls"]), st.sampled_from(["in utils.py", "and then deploy it", "when the queue is empty",
                                                             "so that the tests pass"]))
def test_a_control_inside_a_larger_request_is_none(case, tail):
    ctl = control.parse(f"{case['message'].rstrip('.!?')} {tail}")
    assert ctl is None or (ctl.kind in ("back", "start") and not ctl.explicit)  # then it must name a step or plan
