"""A run's state is typed (records.RunState documents every key state.SHAPES checks) and a fork is one object
(records.Fork: its shape, its rules and its JSON together), while the saved JSON stays what it was."""

import json

import pytest

from graph_engine.core import engine, records, state
from graph_engine.core.model import compile_plan
from graph_engine.texts import render


def test_the_typed_state_names_every_key_the_parser_checks_and_no_other():
    assert set(records.RunState.__annotations__) == set(state.SHAPES) | {"schema"}


def test_a_new_run_writes_only_typed_keys():
    plan = compile_plan("p", {"name": "p", "graph": {"start": "a", "nodes": {"a": {"type": "task", "name": "a"},
                                                                          "x": {"type": "exit"}},
                                                    "edges": [{"from": "a", "to": "x"}]}})
    assert set(state.new_state(plan, "m", "m:0", 0)) <= set(records.RunState.__annotations__)


def _forked():
    from test_parallel_branches import checks_plan

    plan = compile_plan("checks", checks_plan("majority"))
    s = state.new_state(plan, "m", "m:0", 0)
    s["current_node"] = "fan"
    run = engine.Run(plan=plan, state=s, fx=engine.Effects(texts=render), concurrent=True)
    engine._fork(run, plan.nodes["fan"])
    return plan, s


def test_a_fork_reads_and_writes_the_same_json():
    _, s = _forked()
    saved = json.dumps(s["fork"])
    fork = records.Fork.from_json(json.loads(saved))
    assert json.dumps(fork.to_json()) == saved
    assert list(s["fork"]) == list(records.Fork.KEYS)
    assert [list(b) for b in s["fork"]["branches"]] == [list(records.Branch.__annotations__)] * 3


def test_a_forked_state_round_trips_through_json_and_parses():
    plan, s = _forked()
    restored, problem = state.parse(json.loads(json.dumps(s)), plan)
    assert problem == "" and restored == s


def test_the_fork_shares_its_branches_with_the_state():
    _, s = _forked()
    fork = records.Fork.from_json(s["fork"])
    assert not fork.joined()
    assert fork.stop() == ["lint", "types", "tests"]
    assert [b["status"] for b in s["fork"]["branches"]] == ["stopped"] * 3
    assert fork.joined() and fork.outcomes() == {"lint": "stopped", "types": "stopped", "tests": "stopped"}
    assert fork.stop() == []


@pytest.mark.parametrize("spoil", [
    lambda f: f.pop("fan_in"), lambda f: f.update(max_parallel=0), lambda f: f.update(branches=[]),
    lambda f: f["branches"][0].pop("seen"), lambda f: f["branches"][0].update(status="won"),
    lambda f: f["branches"][0]["state"].pop("branch"),
], ids=["no fan_in", "max_parallel 0", "no branches", "branch without seen", "unknown status", "not a branch run"])
def test_a_fork_of_another_shape_is_refused(spoil):
    plan, s = _forked()
    raw = json.loads(json.dumps(s))
    assert records.Fork.fits(raw["fork"])
    spoil(raw["fork"])
    assert not records.Fork.fits(raw["fork"])
    restored, problem = state.parse(raw, plan)
    assert restored is None and "fork" in problem


def test_a_branch_that_is_not_the_parallel_nodes_is_named():
    plan, s = _forked()
    raw = json.loads(json.dumps(s))
    raw["fork"]["branches"][1]["id"] = "report"
    assert list(records.Fork.from_json(raw["fork"]).misplaced({"lint", "types", "tests"})) == ["report"]
    assert state.parse(raw, plan)[1] == "field 'fork' branch 'report' is not a branch of 'fan'"


def test_no_fork_reads_as_none():
    assert records.Fork.from_json(None) is None and records.Fork.from_json({}) is None
