"""Each tool result is evidence at most once, and only for the step its call was shown."""

import json

import pytest

from graph_engine.tools.standin import Reply, Session, cmd, terminal
from scenario import crash, events, started, use_library, verdicts

WARNING = Reply(warning="You have misformatted your message. Follow system prompt instructions.")
ISOLATE = cmd("grep -n divide /tmp/test.py", "3:    return a / b")


def test_result_from_before_activation_is_not_evidence():
    s = Session()
    s.user("there is a bug in the notes app")  # one phrase: the plan starts once the domain confirms it
    first = s.run_pass(crash())  # call 0 never saw the plan, although its output would pass 'reproduce'
    assert first.prompt_extras == {} and s.state["plan_id"] == "bugfix_workflow"
    s.run_pass(cmd("echo hi", "hi"))
    assert verdicts(s) == []
    assert s.state["current_node"] == "reproduce"


def test_passes_without_a_new_result_change_only_counters():
    s = started()
    s.run_pass(crash())
    s.run_pass(WARNING)  # reproduce judged here, once
    before = json.loads(json.dumps(s.state))
    s.run_pass(WARNING)  # nothing new: the same crash output is still the newest result in history
    s.run_pass(WARNING)
    assert verdicts(s) == [("reproduce", "success")]
    after = s.state
    assert after["current_node"] == before["current_node"] == "isolate"
    assert after["visited"] == before["visited"] and after["events"] == before["events"]
    assert after["turn"] == before["turn"] + 2
    assert after["turns_since_transition"] == before["turns_since_transition"] + 2


def test_compressed_newest_result_is_judged_once():
    s = started()
    s.run_pass(crash())
    # compression turns the newest result into a JSON string before the next pass reads it
    newest = s.history[-1]
    s.history[-1] = {"ai": False, "content": json.dumps(
        {"tool_name": newest["content"]["tool_name"],
         "tool_result": "Traceback<<\n20 CHARACTERS REMOVED TO SAVE SPACE\n>>[exit:1]\n" + "root@vm:/a0#"})}
    s.run_pass(ISOLATE)
    assert verdicts(s) == [("reproduce", "success")]


def test_history_shrinking_never_counts_a_result_twice():
    s = started()
    s.run_pass(crash())
    s.run_pass(ISOLATE)  # reproduce judged
    # older messages of the topic go into a summary: fewer tool results than before
    s.history[2:-2] = [{"ai": False, "content": {"messages_summary": "earlier messages condensed"}}]
    s.run_pass(WARNING)  # isolate judged on the grep output
    s.run_pass(WARNING)
    assert verdicts(s) == [("reproduce", "success"), ("isolate", "success")]


def test_full_output_is_read_back_from_the_saved_file(tmp_path):
    saved = tmp_path / "5.txt"
    saved.write_text("Traceback (most recent call last):\nZeroDivisionError\n[exit:1]\n")
    s = started()
    s.run_pass(crash())
    s.history[-1] = {"ai": False, "content": json.dumps(
        {"tool_name": "code_execution_tool", "tool_result": "Trace<<\n99 CHARACTERS REMOVED TO SAVE SPACE\n>>",
         "file": str(saved)})}
    s.run_pass(WARNING)
    assert events(s, "node_verified")[0]["reason"] == "found 'Traceback (most recent call last)'"


def test_wrong_tool_and_unknown_tool_are_not_evidence():
    s = started()
    s.run_pass(Reply(tool="memory_load", output="Traceback: remembered error"))
    s.run_pass(Reply(tool="no_such_tool", output="Tool no_such_tool not found. Available tools: ..."))
    s.run_pass(WARNING)
    assert verdicts(s) == []
    ignored = events(s, "evidence_ignored")
    assert [e["reason"] for e in ignored] == ["step expects tool code_execution_tool", "unknown tool"]


def test_selector_alone_is_late_but_never_judges_the_wrong_step():
    s = started(companion=False)
    # call 1 is shown 'reproduce' (injected at pass 0); its crash output completes reproduce at pass 2.
    # call 2 was built before that, so it still shows 'reproduce': its empty output must not fail 'isolate'.
    s.run_pass(crash())
    s.run_pass(Reply(code="true", output=terminal("")))
    s.run_pass(ISOLATE)
    s.run_pass(WARNING)
    assert verdicts(s) == [("reproduce", "success"), ("isolate", "success")]
    shown = [r.prompt_extras.get("htn_active_plan", "").splitlines()[:1] for r in s.records]
    assert shown[0] == [] and all(x and x[0].startswith("[WORKFLOW") for x in shown[1:])


def test_old_layout_loads_and_runs():
    s = started(layout="old")
    s.run_pass(crash())
    s.run_pass(WARNING)
    assert verdicts(s) == [("reproduce", "success")]


def test_manual_step_passes_only_on_confirmation_in_the_final_response(monkeypatch, tmp_path):
    plan = {"name": "Report", "triggers": ["write the report"], "trigger_threshold": 1, "graph": {
        "start": "report",
        "nodes": {"report": {"type": "task", "name": "Report findings", "tool": "response",
                             "verify": {"type": "manual"}, "max_retries": 3},
                  "stop": {"type": "escalate", "name": "No report", "reason": "no confirmed report"},
                  "done": {"type": "exit", "name": "Done"}},
        "edges": [{"from": "report", "to": "done", "condition": "on_success"},
                  {"from": "report", "to": "stop", "condition": "on_exhaust"}]}}
    use_library(monkeypatch, tmp_path, {"report": plan})
    s = started("please write the report")
    s.run_pass(Reply(final="Here is the report.", thoughts="answering"))  # no confirmation
    s.user("thanks")
    s.run_pass(Reply(final="You're welcome"))
    assert verdicts(s) == [("report", "fail")]
    assert s.state["current_node"] == "report"
    s.user("and finish it")
    s.run_pass(WARNING)  # this call is shown 'report' again (pass 0 companion)
    s.run_pass(Reply(final="Findings: ... STEP COMPLETE"))
    s.user("ok")
    s.run_pass(Reply(final="bye"))
    assert verdicts(s)[-1] == ("report", "success") and s.state is None


# ── a new user message while a run is active ────────────────────────────────


def test_small_talk_keeps_the_run():
    s = started()
    s.run_pass(Reply(final="On it"))
    s.user("thanks, take your time")
    s.run_pass(WARNING)
    assert s.state is not None and s.state["plan_id"] == "bugfix_workflow"


def test_message_matching_another_plan_switches_in_the_call_that_carries_it():
    s = started()
    s.run_pass(Reply(final="On it"))
    s.user("actually, refactor and clean up utils.py first")
    told = s.run_pass(WARNING).prompt_extras["htn_active_plan"]
    assert s.state["plan_id"] == "refactor_safe"
    assert any("ended: the new message matches plan 'Safe Refactor'" in t for t in s.log.texts("info"))
    assert s.agent._htn_last_run["events"][-1]["type"] == "plan_ended"
    assert told.startswith("[WORKFLOW ENDED: Bug Fix Workflow]")
    assert "[WORKFLOW: Safe Refactor]" in told and "Current step: Reproduce the issue" not in told
    assert "[WORKFLOW ENDED" not in s.run_pass(WARNING).prompt_extras["htn_active_plan"]  # said once


def test_message_in_a_domain_the_plan_does_not_cover_ends_it():
    s = started()
    s.run_pass(Reply(final="On it"))
    s.user("explain what a monad is")  # analysis
    s.run_pass(WARNING)
    assert s.state is None
    assert any("'analysis', which this plan does not cover" in t for t in s.log.texts("info"))
    s.run_pass(Reply(final="A monad is ..."))
    assert "[WORKFLOW ENDED: Bug Fix Workflow]" in s.records[-1].prompt_extras["htn_active_plan"]


# ── matching ────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("message, plan", [
    ("fix the bug in /tmp/test.py", "bugfix_workflow"),
    ("I need to fix a bug in the login module", "bugfix_workflow"),
    ("please debug this script, it crashes", "bugfix_workflow"),
    ("recommend a good debugger", None),
    ("my printer is broken, what brand should I buy", None),
    ("what's the weather like?", None),
    ("an error in floating point, why?", None),
])
def test_matching_against_the_bundled_library(message, plan):
    s = Session()
    s.user(message)
    s.run_pass(Reply(final="ok"))
    assert (s.state or {}).get("plan_id") == plan


def test_word_boundaries_and_deterministic_ties(monkeypatch, tmp_path):
    from graph_engine.matching.decide import best_match
    from graph_engine.core.model import compile_plan

    def plan(pid, triggers):
        return compile_plan(pid, {"triggers": triggers, "trigger_threshold": 1,
                                  "steps": [{"name": "x", "verify": {"type": "any_output"}}]})

    a, b = plan("b_plan", ["deploy"]), plan("a_plan", ["deploy"])
    assert best_match([a, b], "Deploy it now", "", None).plan.id == "a_plan"
    assert best_match([a, b], "redeployment", "", None) is None
    longer = plan("z_plan", ["deploy now"])
    assert best_match([a, longer], "deploy now please", "", None).plan.id == "z_plan"


# ── never break the agent ───────────────────────────────────────────────────


def test_broken_library_logs_once_and_the_agent_continues(monkeypatch, tmp_path):
    path = tmp_path / "htn_plan_library.json"
    path.write_text("{not json")
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(path))
    s = Session()
    s.user("fix the bug in /tmp/test.py")
    for _ in range(3):
        s.run_pass(cmd("ls", "x"))
    lines = [t for t in s.log.texts("warning") if "not valid JSON" in t]
    assert len(lines) == 1 and str(path) in lines[0] and "fix the syntax" in lines[0]
    assert s.state is None


def test_bad_plan_is_disabled_and_the_others_work(monkeypatch, tmp_path):
    good = {"name": "Good", "triggers": ["good one"], "trigger_threshold": 1,
            "steps": [{"name": "x", "verify": {"type": "any_output"}}]}
    bad = {"name": "Bad", "graph": {"start": "a", "nodes": {"a": {"type": "task"}},
                                    "edges": [{"from": "a", "to": "nowhere"}]}}
    use_library(monkeypatch, tmp_path, {"good": good, "bad": bad})
    s = started("the good one please")
    assert s.state["plan_id"] == "good"
    warning = [t for t in s.log.texts("warning") if "plan 'bad'" in t]
    assert warning == [f"[HTN] {tmp_path / 'htn_plan_library.json'}: plan 'bad' is disabled, the others keep "
                       "working: [edge_target_exists] plans.bad.graph.edges[0].to: names no node ('nowhere') "
                       "(fix: point 'to' at a declared node)"]


@pytest.mark.parametrize("garbage", ["nonsense", 42, {"plan_id": 7}, ["a"]])
def test_garbage_state_is_reported_and_kept_aside(garbage):
    s = Session()
    s.agent._htn_state = garbage
    s.user("hello there")
    s.run_pass(Reply(final="hi"))
    assert s.state is None and s.agent._htn_state_rejected == garbage
    assert any("Ignored an unusable workflow state in agent._htn_state" in t for t in s.log.texts("warning"))


def test_old_selector_state_is_migrated_or_ended_with_a_log_line(monkeypatch):
    from scenario import LEGACY
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(LEGACY))
    s = Session()
    s.agent._htn_state = {"plan_id": "git_feature_branch", "plan_name": "Git Feature Branch", "current_step": 1,
                          "steps_completed": [0], "steps_failed": [], "total_steps": 5,
                          "turns_since_progress": 2, "stale_after_turns": 10}
    s.user("ok continue")
    s.run_pass(cmd("git checkout -b feature/x main", "Switched to a new branch 'feature/x'"))
    s.run_pass(WARNING)
    assert s.state["current_step"] == 2 and s.state["steps_completed"] == [0, 1]
    assert any("Continued plan 'Git Feature Branch'" in t for t in s.log.texts("info"))


def test_old_selector_state_for_a_plan_now_a_graph_ends_cleanly():
    s = Session()
    s.agent._htn_state = {"plan_id": "bugfix_workflow", "plan_name": "Bug Fix Workflow", "current_step": 2,
                          "steps_completed": [0, 1], "steps_failed": [], "total_steps": 5}
    s.user("ok continue")
    s.run_pass(Reply(final="x"))
    assert s.state is None
    assert any("left by the previous selector at step 3: the plan is now a different plan" in t
               for t in s.log.texts("warning"))


def test_an_internal_error_is_caught_and_logged_once(monkeypatch):
    from graph_engine.core import engine

    def boom(*args, **kwargs):
        raise RuntimeError("simulated fault")

    monkeypatch.setattr(engine, "step", boom)
    s = Session()
    s.user("fix the bug in /tmp/test.py")
    s.run_pass(cmd("ls", "x"))
    s.run_pass(cmd("ls", "x"))
    errors = s.log.texts("error")
    assert len(errors) == 1 and "RuntimeError at test_in_step.py" in errors[0] and "the agent continues" in errors[0]


def test_second_hook_of_a_pass_does_not_read_the_result_again(monkeypatch):
    from graph_engine.hosts.agent_zero import reading
    s = started()
    s.run_pass(crash())
    reads = []
    real = reading.newest_call_output
    monkeypatch.setattr(reading, "newest_call_output", lambda h: reads.append(1) or real(h))
    s.run_pass(WARNING)
    assert len(reads) == 1 and verdicts(s) == [("reproduce", "success")]
