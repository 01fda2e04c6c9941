"""The fan-out's pure parts: every reducer's merge, the item in a step's texts, a branch agent's settings and what
its fidelity tells it."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph_engine.core.fanout import agent_fit, expand, reduced
from graph_engine.core.kinds import REDUCERS
from graph_engine.core.model import compile_plan
from graph_engine.texts import render


def fan_in(**reduce) -> object:
    plan = compile_plan("p", {"name": "P", "graph": {"start": "s", "nodes": {
        "s": {"type": "start"}, "fan": {"type": "parallel"}, "a": {"type": "task", "verify": {"type": "any_output"}},
        "b": {"type": "task", "verify": {"type": "any_output"}}, "j": {"type": "fan_in", "reduce": reduce},
        "x": {"type": "exit"}}, "edges": [{"from": "s", "to": "fan"}, {"from": "fan", "to": "a"},
                                         {"from": "fan", "to": "b"}, {"from": "a", "to": "j"},
                                         {"from": "b", "to": "j"}, {"from": "j", "to": "x"}]}})
    return plan.nodes["j"]


VALUES = [("a", {"v": "3", "m": '{"x": 1, "y": 1}'}), ("b", {"m": "not json"}), ("c", {"v": "10.5", "m": '{"y": 2}'}),
          ("d", {"v": "many"})]


@pytest.mark.parametrize("how, merged", [
    ("append", '["3", "10.5", "many"]'), ("sum", "13.5"), ("max", "10.5"), ("last", "many"),
    ("per_branch", '{"a": "3", "c": "10.5", "d": "many"}')])
def test_every_reducer_merges_in_branch_order(how, merged):
    assert reduced(fan_in(v=how), VALUES) == {"v": merged}


def test_merge_joins_json_objects_a_later_branch_winning_and_leaves_out_the_rest():
    assert json.loads(reduced(fan_in(m="merge"), VALUES)["m"]) == {"x": 1, "y": 2}


def test_the_table_is_the_reducers_and_none_is_left_untested():
    assert set(REDUCERS) == {"append", "merge", "sum", "max", "last", "per_branch"}


@given(st.lists(st.tuples(st.text(max_size=5), st.dictionaries(st.sampled_from(["v"]), st.text(max_size=20))),
                max_size=8), st.sampled_from(sorted(REDUCERS)))
def test_any_values_merge_to_text(values, how):
    out = reduced(fan_in(v=how), values)
    assert isinstance(out["v"], str)


def test_item_in_a_command_is_quoted_for_the_shell_and_left_as_it_is_in_words():
    assert expand("pytest $item", "a b; rm -rf /", command=True) == "pytest 'a b; rm -rf /'"
    assert expand("Fix $item", "a b; rm -rf /") == "Fix a b; rm -rf /"
    assert expand("no item here", "x") == "no item here" and expand("$item", None) == "$item"


def branch_plan() -> object:
    return compile_plan("p", {"name": "P", "graph": {"start": "s", "nodes": {
        "s": {"type": "start"}, "prep": {"type": "task", "name": "Prepare", "verify": {"type": "any_output"}},
        "fan": {"type": "parallel", "profile": "developer", "fidelity": "full", "llm_model": "m1"},
        "a": {"type": "task", "name": "A", "profile": "hacker", "thread_id": "t", "verify": {"type": "any_output"}},
        "b": {"type": "task", "name": "B", "fidelity": "compact", "verify": {"type": "any_output"}},
        "j": {"type": "fan_in"}, "x": {"type": "exit"}},
        "edges": [{"from": "s", "to": "prep"}, {"from": "prep", "to": "fan"}, {"from": "fan", "to": "a"},
                  {"from": "fan", "to": "b"}, {"from": "a", "to": "j"}, {"from": "b", "to": "j"},
                  {"from": "j", "to": "x"}]}})


def test_a_branch_agents_settings_are_its_first_nodes_else_its_parallel_nodes():
    plan = branch_plan()
    assert agent_fit(plan, "fan", "a") == {"profile": "hacker", "llm_model": "m1", "fidelity": "full", "thread_id": "t"}
    assert agent_fit(plan, "fan", "b") == {"profile": "developer", "llm_model": "m1", "fidelity": "compact",
                                           "thread_id": ""}


@pytest.mark.parametrize("fidelity", ["full", "compact", "summary:high", "truncate", ""])
def test_what_each_fidelity_tells_a_branch_agent(fidelity):
    from graph_engine.core.state import branch_state, emit, new_state
    plan = branch_plan()
    parent = new_state(plan, "", "", 0)
    emit(parent, "node_verified", node="prep", outcome="success", reason="the command printed output")
    sub = branch_state(plan, parent, "fan", "j", "a")
    chat = "user: fix the build\nassistant: on it\n" * 400
    told = render.branch_assignment(plan, sub, parent, fidelity, chat)
    assert told.startswith("You run one branch of the workflow 'P': 'A'.")
    assert ("The chat so far (its last part, for context; act only on your branch's steps):" in told) == \
        (fidelity == "full")
    assert len(told) < render.FULL_CHAT + 1_000
    assert ("Steps of the workflow done before the branches started:\n- Prepare: passed, the command printed output"
            in told) == (fidelity in ("compact", "summary:high"))
