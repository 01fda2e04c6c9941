"""The utility model's second opinion in Agent-Zero's real message loop (`make real-loop`), both layouts: the
model is scripted at LiteLLM's boundary, and the pack's question is told from Agent-Zero's own utility calls (chat
names, memory) by its text.  Without trees every test here is skipped (see tests/a0real.py)."""

import pytest

from a0real import respond

QUESTION = "Reply with exactly one label"  # in the pack's question (matching.second.SYSTEM), in no A0 prompt
GERMAN = "Bitte behebe den Fehler in der Datei rechner.py, sie stürzt bei einer Division durch null ab"
CLOSE = "gimme a java class Matrix with add, multiply, transpose"


def activated(tree, run) -> list[dict]:
    return [e for e in tree.audit(run.chat_id) if e.get("type") == "plan_activated"]


def test_a_german_request_starts_its_plan_through_the_utility_model(a0_tree):
    run = a0_tree.run([GERMAN], [respond("Ich sehe mir den Fehler an.")],
                      utility_rules=[{"marker": QUESTION, "reply": "bugfix_workflow"}])
    assert run.overrun == 0 and len(run.raw["utility_asked"]) == 1  # one question for the message
    assert "[WORKFLOW: Bug Fix Workflow] step 1 of 5" in run.last_user[0]  # the first call already shows it
    [event] = activated(a0_tree, run)
    assert event["plan"] == "bugfix_workflow" and event["stage"] == "utility model"


def test_a_close_call_is_settled_by_the_utility_model(a0_tree):
    run = a0_tree.run([CLOSE], [respond("Writing the class.")],
                      utility_rules=[{"marker": QUESTION, "reply": "codegen_module"}])
    assert len(run.raw["utility_asked"]) == 1
    [event] = activated(a0_tree, run)
    assert event["plan"] == "codegen_module" and event["stage"] == "utility model"


@pytest.mark.parametrize("rule", [{"delay": 30, "reply": "bugfix_workflow"}, {"raise": "the provider is down"},
                                  {"reply": "Sure! I would pick the bug fix workflow for this."}],
                         ids=["timeout", "exception", "garbage"])
def test_no_usable_answer_leaves_the_local_decision_and_the_loop_goes_on(a0_tree, rule):
    run = a0_tree.run([GERMAN], [respond("Okay.")], env={"GRAPH_ENGINE_UTILITY_TIMEOUT": "2"},
                      utility_rules=[{"marker": QUESTION, **rule}])
    assert run.overrun == 0 and len(run.calls) == 1  # the chat model was called: the loop went on
    assert len(run.raw["utility_asked"]) == 1 and activated(a0_tree, run) == []
    assert "[WORKFLOW" not in run.last_user[0]
    if "delay" in rule:  # the hook waited for the timeout, not for the answer
        assert max(run.hook_seconds("companion")) < 15
