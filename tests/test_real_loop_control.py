"""The user steers a run in Agent-Zero's real message loop (`make real-loop`): stop, go back, skip and start
by name, each said as a chat message; the call that answers it already shows the result.  Without trees every
test here is skipped (see tests/a0real.py)."""

from a0real import respond
from test_real_loop import bug_run, fix, isolate, project, run_tests, types, verdicts


def said(events: list[dict], etype: str) -> list[str]:
    return [e.get("said", "") for e in events if e.get("type") == etype]


def said_at_isolate(tree, message: str, answer: str):
    """A bug fix run (after the first exchange of ``bug_run``) whose first monologue ends at 'Isolate the root
    cause'; then the user says `message`."""
    p = project(tree)
    run = bug_run(tree, p, [run_tests(p, "Reproduce"), respond("Reproduced; isolating the cause next."),
                            respond(answer)], more=(message,))
    assert run.overrun == 0 and len(run.calls) == 3
    assert "Current step: Isolate the root cause" in run.last_user[1]
    return run


def test_stop_the_workflow_ends_the_run_in_the_call_that_answers_it(a0_tree):
    run = said_at_isolate(a0_tree, "stop the workflow", "The workflow is stopped.")
    answer = run.last_user[2]
    assert "[WORKFLOW STOPPED by the user: Bug Fix Workflow]" in answer
    assert "Stopped at: Isolate the root cause (1 of 5 steps done)" in answer and "Current step" not in answer
    events = a0_tree.audit(run.chat_id)
    assert types(events)[-1] == "plan_stopped" and said(events, "plan_stopped") == ["stop the workflow"]
    assert a0_tree.state(run.chat_id) is None  # nothing left active in the saved chat


def test_go_back_to_the_reproduce_step_shows_that_step_as_current(a0_tree):
    p = project(a0_tree)
    run = bug_run(a0_tree, p, [run_tests(p, "Reproduce"), isolate(p), fix(p), respond("Fixed; testing next."),
                               run_tests(p, "Reproduce again"), respond("Reproduced again.")],
                  more=("go back to the reproduce step",))
    assert run.overrun == 0 and len(run.calls) == 6
    assert "Current step: Test the fix" in run.last_user[3]
    answer = run.last_user[4]
    assert "Back to 'Reproduce the issue' at the user's request" in answer
    assert "Current step: Reproduce the issue (attempt 1 of 3)" in answer
    events = a0_tree.audit(run.chat_id)
    jumps = [e for e in events if e.get("type") == "jumped_back"]
    assert [(e["said"], e["node"], e["to"]) for e in jumps] == [("go back to the reproduce step", "test",
                                                                  "reproduce")]
    # the next result is judged against the reproduce step: the bug is fixed by now, so it does not show
    assert verdicts(events, "reproduce") == ["success", "fail"]
    assert a0_tree.state(run.chat_id)["current_node"] == "gather_context"


def test_skip_this_step_moves_on(a0_tree):
    run = said_at_isolate(a0_tree, "skip this step", "Skipped; fixing next.")
    answer = run.last_user[2]
    assert "Skipped by the user: 'Isolate the root cause' is marked skipped, not done" in answer
    assert "Current step: Implement the fix" in answer and "Isolate the root cause [SKIPPED]" in answer
    events = a0_tree.audit(run.chat_id)
    assert said(events, "step_skipped") == ["skip this step"]
    state = a0_tree.state(run.chat_id)
    assert state["current_node"] == "fix" and state["steps_skipped"] == ["isolate"]


def test_start_the_git_feature_branch_workflow_starts_it(a0_tree):
    run = a0_tree.run(["start the Git Feature Branch workflow"], [respond("Starting the Git Feature Branch.")])
    assert run.overrun == 0 and len(run.calls) == 1
    answer = run.last_user[0]
    assert "Started by the user: 'Git Feature Branch'" in answer
    assert "[WORKFLOW: Git Feature Branch] step 1 of 5" in answer and "Current step: Check the working tree" in answer
    state = a0_tree.state(run.chat_id)
    assert state["plan_id"] == "git_feature_branch" and state["status"] == "active"
    activated = [e for e in a0_tree.audit(run.chat_id) if e.get("type") == "plan_activated"]
    assert [(e["plan"], e.get("said")) for e in activated] == [("git_feature_branch",
                                                                "start the Git Feature Branch workflow")]



def asked_at_isolate(tree, message: str):
    """A bug fix run whose first monologue ends at 'Isolate the root cause' with the agent asking the user a
    question; then the user says ``message``."""
    p = project(tree)
    run = bug_run(tree, p, [run_tests(p, "Reproduce"),
                            respond("Reproduced. Should I put the zero check at the start or the end of divide()?"),
                            respond("Understood.")], more=(message,))
    assert run.overrun == 0 and len(run.calls) == 3
    return run


def test_a_one_word_answer_to_the_agents_question_is_no_control(a0_tree):
    run = asked_at_isolate(a0_tree, "end")
    answer = run.last_user[2]
    assert "WORKFLOW STOPPED" not in answer and "[WORKFLOW CONTROL]" not in answer
    assert "Current step: Isolate the root cause" in answer  # the run goes on, its step shown
    events = a0_tree.audit(run.chat_id)
    assert "plan_stopped" not in types(events) and said(events, "plan_stopped") == []
    state = a0_tree.state(run.chat_id)
    assert state["status"] == "active" and state["current_node"] == "isolate"


def test_after_a_question_stop_the_workflow_still_stops(a0_tree):
    run = asked_at_isolate(a0_tree, "stop the workflow")
    assert "[WORKFLOW STOPPED by the user: Bug Fix Workflow]" in run.last_user[2]
    assert said(a0_tree.audit(run.chat_id), "plan_stopped") == ["stop the workflow"]
