"""The core driven directly, h11-style: ``step(plans, lookup, state, observation, texts) -> (state, effects)``,
with no Agent-Zero, no stand-in, no file and no model.  What the host would read (the match, the last call's
output, what the disk holds for a ``file_exists`` check) is put in the observation by the test."""

import copy

import pytest

from scenario import fix_loop_plan

from graph_engine.core import engine
from graph_engine.core.message import CallOutput, Match
from graph_engine.core.model import compile_plan
from graph_engine.texts import render

PLAN = compile_plan("loop", fix_loop_plan(max_retries=1))
FILE_PLAN = compile_plan("made", {
    "name": "Make a file", "triggers": ["make the file"], "trigger_threshold": 1,
    "graph": {"start": "write", "nodes": {
        "write": {"type": "task", "name": "Write it", "verify": {"type": "file_exists", "value": "/w/out.txt"}},
        "done": {"type": "exit", "name": "Done"}},
        "edges": [{"from": "write", "to": "done", "condition": "on_success"}]}})


def lookup_of(*plans):
    return lambda pid, version: next((p for p in plans if p.id == pid), None)


def said(text, plan=None, monologue="m1"):
    """The first hook call of a monologue whose message the host matched to ``plan`` (None: to no plan)."""
    match = Match(plan=plan, score=1, hits=("loop please",), domain_ok=True) if plan else None
    return engine.Observation(hook=engine.PROMPTS_AFTER, monologue=monologue, iteration=0, user_message=text,
                              matched=True, match=match, domain_known=True, domain="bugfix")


def after(iteration, output, monologue="m1", **facts):
    """A later hook call of the monologue, carrying what the previous model call produced."""
    return engine.Observation(hook=engine.PROMPTS_AFTER, monologue=monologue, iteration=iteration,
                              output=output, **facts)


def ran(code_output):
    return CallOutput(reply='{"tool_name": "code_execution_tool"}', tool="code_execution_tool", text=code_output)


def step(state, obs, plan=PLAN):
    return engine.step([plan], lookup_of(plan), copy.deepcopy(state), obs, render)


def test_a_matched_message_starts_the_run_and_its_first_step_is_shown():
    state, fx = step(None, said("loop please", PLAN))
    assert state["plan_id"] == "loop" and state["current_node"] == "fix" and state["status"] == "active"
    assert fx.context.startswith("[WORKFLOW: Loop]") and "Fix" in fx.context
    assert [e["type"] for e in state["events"]][:1] == ["plan_activated"]


def test_a_message_the_host_matched_to_nothing_starts_nothing():
    state, fx = step(None, said("what is a loop?"))
    assert state is None and fx.context is None


def test_the_output_of_the_call_shown_a_step_is_judged_and_the_run_moves():
    state, _ = step(None, said("loop please", PLAN))
    state, fx = step(state, after(1, ran("patched")))
    assert state["current_node"] == "test"
    state, fx = step(state, after(2, ran("1 failed\n[exit:1]")))
    assert state["current_node"] == "fix"  # on_retry
    verdicts = [(e["node"], e["outcome"]) for e in state["events"] if e["type"] == "node_verified"]
    assert verdicts == [("fix", "success"), ("test", "fail")]


def test_the_same_output_is_never_judged_twice():
    state, _ = step(None, said("loop please", PLAN))
    once, _ = step(state, after(1, ran("patched")))
    again, _ = step(once, after(1, ran("patched")))  # the same call read again (a second hook, a restart)
    assert again["current_node"] == once["current_node"] == "test"
    assert sum(e["type"] == "node_verified" for e in again["events"]) == 1


def test_exhausted_retries_escalate_with_the_pace_level_as_an_effect():
    state, _ = step(None, said("loop please", PLAN))
    fx = None
    for i, out in enumerate(["patched", "[exit:1]", "patched", "[exit:1]"], start=1):
        state, fx = step(state, after(i, ran(out)))
    assert state is None and fx.ended == "escalated" and fx.pace_level == "contingent"
    assert fx.final_state["status"] == "escalated"


@pytest.mark.parametrize("fact, ok", [("file", True), ("missing", False), ("dir", False), (None, False)])
def test_a_file_check_judges_what_the_host_saw_not_the_disk(fact, ok):
    state, _ = step(None, said("make the file", FILE_PLAN), FILE_PLAN)
    files = {"/w/out.txt": fact} if fact else {}
    state, fx = step(state, after(1, ran("written"), files=files), FILE_PLAN)
    verdict = next(e for e in (state or fx.final_state)["events"] if e["type"] == "node_verified")
    assert (verdict["outcome"] == "success") is ok


def test_a_go_on_keeps_the_run_and_a_stop_ends_it_with_what_was_said():
    state, _ = step(None, said("loop please", PLAN))
    kept, _ = step(state, engine.Observation(hook=engine.PROMPTS_AFTER, monologue="m2", iteration=0,
                                             user_message="ok go on", continuation=True, matched=True,
                                             domain_known=True, domain="conversational"))
    assert kept["plan_id"] == "loop" and kept["current_node"] == "fix"
    stopped, fx = step(kept, engine.Observation(hook=engine.PROMPTS_AFTER, monologue="m3", iteration=0,
                                                user_message="stop the workflow", matched=True))
    assert stopped is None and fx.ended == "stopped" and fx.control == "stop"
    assert fx.final_state["events"][-1]["type"] == "plan_stopped"


def test_the_step_leaves_the_state_it_was_given_untouched():
    state, _ = step(None, said("loop please", PLAN))
    before = copy.deepcopy(state)
    engine.step([PLAN], lookup_of(PLAN), state, after(1, ran("patched")), render)
    assert state != before  # the step works on the state it is given: the host passes its own copy ...
    fresh = copy.deepcopy(before)
    engine.step([PLAN], lookup_of(PLAN), fresh, after(1, ran("patched")), render)
    assert fresh == state  # ... and the same inputs give the same state: nothing else is read
