"""A new user message, through the real hook order: the plan reaches the very call that carries the message,
a new request replaces the old plan in that same call, and the shapes the real loop gives (a tool result
beside a new message, an intervention, a response mid-plan, warnings, compression) keep the run in place
without judging anything twice."""

import json

from scenario import IDLE, crash, events, exit_ok, started, told, verdicts

from graph_engine.hosts.agent_zero import adapter
from graph_engine.tools.standin import FIXTURES, BeliefStateTracker, Reply, Session, cmd

BUG = "fix the bug in /tmp/test.py"
ISOLATE = cmd("grep -n divide /tmp/test.py", "3:    return a / b")


class FixedDomain(BeliefStateTracker):
    """The belief-state tracker, answering one domain for every message."""

    def __init__(self, domain: str) -> None:
        super().__init__()
        self.domain = domain

    def classify(self, message: str) -> str:
        return self.domain


# ── the plan in the first call ──────────────────────────────────────────────


def test_the_first_call_after_a_decisive_message_carries_the_plan_and_its_result_is_judged():
    s = Session()
    s.user(BUG)
    first = s.run_pass(crash())
    assert told(first).startswith("[WORKFLOW: Bug Fix Workflow] step 1 of 5")
    assert "Current step: Reproduce the issue" in told(first)
    s.run_pass(IDLE)
    assert verdicts(s) == [("reproduce", "success")] and s.state["current_node"] == "isolate"


def test_the_first_call_on_the_old_layout_carries_the_plan_too():
    s = Session(layout="old")
    s.user(BUG)
    assert "Current step: Reproduce the issue" in told(s.run_pass(crash()))
    s.run_pass(IDLE)
    assert verdicts(s) == [("reproduce", "success")]


def test_a_message_only_its_domain_confirms_starts_one_call_later_and_that_call_is_not_evidence():
    s = Session()
    s.user("there is a bug in the notes app")  # one weak phrase + the bugfix domain; its meaning alone is not enough
    first = s.run_pass(crash())
    assert told(first) == "" and s.state["plan_id"] == "bugfix_workflow"
    second = s.run_pass(crash())
    assert "Current step: Reproduce the issue" in told(second) and verdicts(s) == []
    s.run_pass(IDLE)
    assert verdicts(s) == [("reproduce", "success")]


def test_the_selector_withdraws_a_plan_the_org_filter_does_not_allow():
    s = Session(allowed_plans=["git_feature_branch"])  # the dispatcher sets it in before_main_llm_call
    s.user(BUG)
    first = s.run_pass(crash())
    assert "Current step: Reproduce the issue" in told(first)  # decided on the phrases, before the filter
    assert s.state is None and s.agent.get_data("graph_engine_state") is None  # nothing lingers
    last = s.agent._htn_last_run
    assert last["status"] == "withdrawn" and last["events"][-1]["type"] == "plan_withdrawn"
    assert any("withdrawn: the active org role does not allow this plan" in t for t in s.log.texts("info"))
    second = s.run_pass(IDLE)
    assert told(second).startswith("[WORKFLOW WITHDRAWN: Bug Fix Workflow]") and "\n" not in told(second)
    assert verdicts(s) == [] and s.state is None  # call 0's output was not judged by anything


def test_the_selector_switches_when_the_domain_prefers_another_plan():
    # both plans are named decisively; the companion takes the first named, the domain favours the other
    s = Session(bst=FixedDomain("docker_ops"))
    s.user("fix the bug: the docker build breaks on alpine")
    first = s.run_pass(crash())
    assert "[WORKFLOW: Bug Fix Workflow]" in told(first)
    assert s.state["plan_id"] == "docker_build_deploy"
    assert s.agent._htn_last_run["plan_id"] == "bugfix_workflow"
    assert s.agent._htn_last_run["status"] == "withdrawn"
    second = s.run_pass(cmd("cat Dockerfile", "FROM python:3.12-slim"))
    assert told(second).startswith("[WORKFLOW WITHDRAWN: Bug Fix Workflow]")
    assert "[WORKFLOW: Docker Build and Deploy]" in told(second)
    s.run_pass(IDLE)
    assert verdicts(s) == [("check_dockerfile", "success")]  # the crash shown under the bug fix is not evidence


def test_the_selector_confirms_what_the_phrases_decided():
    s = Session()
    s.user(BUG)
    s.run_pass(crash())
    assert s.state["provisional"] is None and s.state["status"] == "active"
    assert not [e for e in events(s) if e["type"] in ("plan_withdrawn", "plan_ended")]


# ── a new message while a run is active ─────────────────────────────────────


def test_a_new_request_replaces_the_old_plan_in_the_same_call():
    s = started()
    s.run_pass(crash())
    s.run_pass(ISOLATE)
    s.run_pass(Reply(final="I found the cause; shall I fix it?"))
    s.user("never mind that, create a new branch called feature/login")
    record = s.run_pass(cmd("git status", "On branch main\nnothing to commit, working tree clean"))
    text = told(record)
    assert text.startswith("[WORKFLOW ENDED: Bug Fix Workflow]")
    assert "[WORKFLOW: Git Feature Branch] step 1 of 5" in text and "Current step: Check the working tree" in text
    assert "Current step: Implement the fix" not in text and "<< CURRENT" not in text.split("[WORKFLOW: Git")[0]
    s.run_pass(IDLE)
    assert s.state["plan_id"] == "git_feature_branch" and verdicts(s)[-1] == ("check_status", "success")


def test_an_undecided_message_shows_no_old_step_and_the_selector_ends_the_run():
    s = started()
    s.run_pass(Reply(final="On it"))
    s.user("explain what a monad is")  # no phrase; its domain (analysis) is not the plan's
    record = s.run_pass(Reply(final="A monad is ..."))
    assert told(record).startswith("[WORKFLOW PAUSED: Bug Fix Workflow]") and "Current step" not in told(record)
    assert s.state is None and s.agent._htn_last_run["status"] == "ended"
    s.user("thanks")
    assert told(s.run_pass(Reply(final="You're welcome"))) == ""  # the paused step never comes back


def test_small_talk_pauses_one_call_and_the_run_goes_on():
    s = started()
    s.run_pass(Reply(final="On it"))
    s.user("thanks, take your time")
    paused = s.run_pass(Reply(final="Sure."))
    assert told(paused).startswith("[WORKFLOW PAUSED") and s.state["plan_id"] == "bugfix_workflow"
    s.user("it happens only on tuesdays")  # a follow-up no plan names: paused once more, then the step
    assert told(s.run_pass(IDLE)).startswith("[WORKFLOW PAUSED")
    record = s.run_pass(crash())
    assert "Current step: Reproduce the issue" in told(record)
    s.run_pass(IDLE)
    assert verdicts(s) == [("reproduce", "success")]


def test_a_follow_up_that_means_the_running_plan_keeps_its_step_in_the_call_that_carries_it():
    """A follow-up whose meaning is the running plan's (no phrase of any plan in it) is decided at once: the
    run goes on and the call that carries the message shows the step, not a pause."""
    s = started()
    for rt in adapter._runtimes.values():  # meaning decides it: its index built, as the warm-up leaves it
        rt.library.current.meaning_index(wait=True)
    s.run_pass(Reply(final="On it"))
    s.user("the crash happens with an empty list")
    record = s.run_pass(crash())
    assert "Current step: Reproduce the issue" in told(record) and s.state["plan_id"] == "bugfix_workflow"


def test_a_continuation_keeps_the_step_in_the_call_that_carries_it():
    s = started()
    s.run_pass(Reply(final="Shall I start by reproducing it?"))
    s.user("Yes, go ahead.")
    record = s.run_pass(crash())
    assert "Current step: Reproduce the issue" in told(record)
    s.run_pass(IDLE)
    assert verdicts(s) == [("reproduce", "success")]


# ── the shapes the real loop gives ──────────────────────────────────────────


def test_a_tool_result_beside_an_intervention_is_judged_once_and_the_run_keeps_its_place():
    s = started()
    s.run_pass(crash(), intervention="also check the other call sites")  # the user writes while the tool runs
    record = s.run_pass(ISOLATE)  # the next pass of the same monologue: result + intervention arrive together
    assert verdicts(s) == [("reproduce", "success")]
    assert told(record).startswith("[WORKFLOW PAUSED")  # a new message: no step shown in its call
    s.run_pass(ISOLATE)
    s.run_pass(IDLE)
    assert verdicts(s) == [("reproduce", "success"), ("isolate", "success")]  # the paused call was not evidence


def test_an_intervention_that_asks_for_another_plan_switches_in_its_call():
    s = started()
    s.run_pass(crash(), intervention="stop, create a new branch called feature/x instead")
    record = s.run_pass(IDLE)
    ended = s.agent._htn_last_run
    assert [(e["node"], e["outcome"]) for e in ended["events"] if e["type"] == "node_verified"] == [
        ("reproduce", "success")]  # judged before the switch
    assert told(record).startswith("[WORKFLOW ENDED: Bug Fix Workflow]")
    assert "[WORKFLOW: Git Feature Branch]" in told(record) and s.state["plan_id"] == "git_feature_branch"
    s.run_pass(IDLE)
    assert s.state["plan_id"] == "git_feature_branch"  # decided once


def test_a_result_left_before_a_new_monologue_is_judged_once_at_its_first_pass():
    s = started()
    s.run_pass(crash())  # the monologue is cut short here (no response reply)
    s.user("ok, continue")
    s.run_pass(IDLE)
    s.run_pass(IDLE)
    assert verdicts(s) == [("reproduce", "success")] and s.state["current_node"] == "isolate"


def test_a_response_in_the_middle_of_a_plan_is_not_evidence_and_the_next_message_continues():
    s = started()
    s.run_pass(crash())
    s.run_pass(Reply(final="Reproduced it. Want me to continue?"))  # shown 'isolate', answered with a response
    s.user("yes")
    record = s.run_pass(ISOLATE)
    assert [e["reason"] for e in events(s, "evidence_ignored")] == ["step expects tool code_execution_tool"]
    assert "Current step: Isolate the root cause" in told(record)
    s.run_pass(IDLE)
    assert verdicts(s) == [("reproduce", "success"), ("isolate", "success")]


def test_a_misformatted_reply_and_the_real_warning_change_nothing():
    real = json.loads((FIXTURES / "agent_zero" / "warnings.newest" / "turn_03.json").read_text())
    warning = real["loop_data.history_output"][-1]["content"]["system_warning"]
    s = started()
    s.run_pass(crash())
    s.run_pass(Reply(warning=warning))
    s.run_pass(Reply(warning=warning))
    assert verdicts(s) == [("reproduce", "success")] and s.state["current_node"] == "isolate"


def test_history_compression_mid_run_as_the_real_loop_does_it():
    real = json.loads((FIXTURES / "agent_zero" / "history_compression.newest" / "turn_03.json").read_text())
    summary = real["loop_data.history_output"][2]  # {"messages_summary": ...}
    s = started()
    s.run_pass(crash())
    s.run_pass(ISOLATE)  # judged: reproduce
    s.run_pass(exit_ok("edited"))  # judged: isolate; now at 'fix'
    newest = s.history[-1]["content"]
    # the older part of the topic becomes a summary, the newest result a shortened JSON string
    s.history[2:-2] = [summary]
    s.history[-1] = {"ai": False, "content": json.dumps(
        {"tool_name": newest["tool_name"], "tool_result": "\nedi<<\n3 CHARACTERS REMOVED TO SAVE SPACE\n>>[exit:0]"
                                                          "\nroot@vm:/a0/usr/workdir#"})}
    s.run_pass(IDLE)
    s.run_pass(IDLE)
    assert verdicts(s) == [("reproduce", "success"), ("isolate", "success"), ("fix", "success")]
    assert s.state["current_node"] == "test"
