"""The plan language's kinds are declared once (graph_engine.core.kinds, control.CONTROLS) and everything else reads them."""

import ast
import dataclasses
import json
import re

import pytest

from graph_engine.texts import card, render

from graph_engine.core import control, engine, kinds, routing, verify

from graph_engine.authoring import dot_plan, dot_spec, lint, render_graph
from graph_engine.core.model import compile_plan
from graph_engine.tools import tables
from graph_engine.tools.standin import ROOT

PACKAGE = ROOT / "extensions" / "graph_engine"


def test_the_schema_enums_and_the_docs_tables_are_what_make_tables_writes():
    assert tables.stale() == [], "run make tables"


def test_a_changed_table_makes_the_generated_files_stale(tmp_path, monkeypatch):
    for rel in [tables.SCHEMA, *(where for where, _ in tables.DOCS.values())]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text())
    monkeypatch.setitem(tables.ENUMS, ("$defs", "verify", "properties", "type"), (*kinds.VERIFY_TYPES, "new_check"))
    monkeypatch.setitem(kinds.CHECKS, "new_check", kinds.Check("new_check", "it is new", doc="it is new"))
    assert sorted(tables.stale(tmp_path)) == ["docs/plan-authoring.md", "plan_library/plan_library.schema.json"]
    enum = json.loads(tables.outputs(tmp_path)[tables.SCHEMA])["$defs"]["verify"]["properties"]["type"]["enum"]
    assert enum[-1] == "new_check"


def _emitted_names():
    """Every event name the package writes: emit(..., "name"), the controls' events, the rejected state's line."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "emit":
                for arg in node.args[1:2]:
                    if isinstance(arg, ast.Constant):
                        names.add(arg.value)
                    elif isinstance(arg, ast.IfExp):
                        names.update(a.value for a in (arg.body, arg.orelse) if isinstance(a, ast.Constant))
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and k.value == "type" and isinstance(v, ast.Constant) \
                            and isinstance(v.value, str) and v.value.endswith(("_rejected",)):
                        names.add(v.value)
    return names | set(engine.CONTROL_EVENTS.values())


def test_every_event_written_is_declared_and_every_declared_event_is_written():
    written = _emitted_names()
    assert written - set(kinds.EVENTS) == set()
    assert set(kinds.EVENTS) - written == set()


def test_the_events_that_end_a_run_are_the_card_and_the_pictures_endings():
    assert render_graph.ENDINGS is kinds.ENDINGS
    assert {"plan_completed", "plan_escalated", "plan_stopped", "state_rejected"} <= kinds.ENDINGS
    assert not {"plan_paused", "node_verified", "plan_activated"} & kinds.ENDINGS


def test_every_check_has_a_judge_and_every_judge_a_check():
    judges = {name[len("_judge_"):] for name in vars(verify) if name.startswith("_judge_")}
    assert judges == set(kinds.CHECKS)


@pytest.mark.parametrize("check", list(kinds.CHECKS.values()), ids=lambda c: c.name)
def test_a_check_compiles_as_its_row_says(check):
    def plan(verify):
        node = {"type": "task", "name": "a", "verify": verify}
        return {"name": "p", "graph": {"start": "a", "nodes": {"a": node, "x": {"type": "exit"}},
                                       "edges": [{"from": "a", "to": "x", "condition": "on_success"}]}}

    value = "a+b" if check.regex else "x"
    node = compile_plan("p", plan({"type": check.name, "value": value})).nodes["a"]
    assert node.verify.describe() == check.says.format(v=value)
    assert (node.verify.pattern is not None) == check.regex
    if check.needs_value:
        with pytest.raises(ValueError, match="needs a value"):
            compile_plan("p", plan({"type": check.name}))
    fail_if = plan({"type": check.name, "value": value, "fail_if": "boom"})
    if check.reads_output:
        assert compile_plan("p", fail_if).nodes["a"].verify.fail_if == "boom"
    else:
        with pytest.raises(ValueError, match="does not read the output"):
            compile_plan("p", fail_if)


def test_a_check_that_reads_the_exit_status_has_the_model_print_it(monkeypatch):
    """Declared in the check's row, not known by name: a new check that reads the status gets the echo too."""
    monkeypatch.setitem(kinds.CHECKS, "status_new", kinds.Check("status_new", "new", reads_status=True))
    node = compile_plan("p", {"name": "p", "graph": {"start": "a", "nodes": {
        "a": {"type": "task", "name": "a", "tool": "code_execution_tool", "tool_hint": "make test",
              "verify": {"type": "any_output"}},
        "x": {"type": "exit"}}, "edges": [{"from": "a", "to": "x", "condition": "on_success"}]}}).nodes["a"]
    for name, says in (("status_new", True), ("exit_code_zero", True), ("any_output", False)):
        shown = render.command_text(dataclasses.replace(node, verify=dataclasses.replace(node.verify, type=name)))
        assert shown == "make test" + (render.EXIT_SUFFIX if says else ""), name


@pytest.mark.parametrize("kind", list(kinds.NODE_KINDS.values()), ids=lambda k: k.name)
def test_a_node_kind_is_read_from_its_row_everywhere(kind):
    assert routing.route_kind(kind.name) == kind.route
    assert dot_plan.SHAPE_OF[kind.name] == kind.dot_shape
    assert dot_spec.HANDLER_TO_NODE[kind.name] == kind.name
    assert (kind.name in kinds.PASS_THROUGH) == (not kind.rests and not kind.terminal) == kind.passes
    assert (kind.name in kinds.TERMINAL) == kind.terminal == (kind.ends in kinds.RUN_STATUSES)
    shape = kind.dot_shape if kind.dot_shape in dot_spec.SHAPES else None
    if shape:  # an Attractor shape reads back as this kind
        assert dot_spec.HANDLER_TO_NODE[dot_spec.SHAPES[shape]] == kind.name


def test_every_node_kind_has_its_settle_handler_and_every_handler_a_kind():
    """What a node does when the run reaches it is looked up from its kind: a row without behaviour fails here."""
    assert set(engine.SETTLE) == set(kinds.NODE_KINDS)
    assert all(callable(handler) for handler in engine.SETTLE.values())


def test_a_resting_kind_is_where_settling_stops_and_only_there():
    assert {k for k, handler in engine.SETTLE.items() if handler is engine._rest} == set(kinds.RESTING)


def test_what_a_kinds_row_needs_of_its_nodes_is_a_lint_rule_and_a_node_field():
    from graph_engine.core.model import Node

    for kind in kinds.NODE_KINDS.values():
        for name, fix in kind.needs:
            assert f"{kind.name}_{name}" in lint.RULES and name in Node.__dataclass_fields__ and fix, kind.name


def test_a_need_added_to_a_row_is_linted(monkeypatch):
    raw = {"name": "p", "graph": {"start": "a", "nodes": {"a": {"type": "task", "name": "a"}, "x": {"type": "exit"}},
                                  "edges": [{"from": "a", "to": "x", "condition": "on_success"}]}}
    monkeypatch.setitem(lint.RULES, "exit_description", (lint.WARNING, "an exit without a description"))
    assert "exit_description" not in {d.rule for d in lint.lint_plan(compile_plan("p", raw)).diagnostics}
    monkeypatch.setitem(kinds.NODE_KINDS, "exit", dataclasses.replace(
        kinds.NODE_KINDS["exit"], needs=(("description", "say what the run achieved"),)))
    found = [d for d in lint.lint_plan(compile_plan("p", raw)).diagnostics if d.rule == "exit_description"]
    assert [(d.node, d.message, d.fix) for d in found] == [("x", "exit node has no description",
                                                              "say what the run achieved")]


def test_the_kinds_flags_name_one_kind_each_where_the_engine_needs_one():
    """The flags that stand for a kind's own behaviour are each held by exactly one row today."""
    for flag in ("judged", "asks", "forks", "joins", "begins", "decides", "checkpoints"):
        assert len([k for k in kinds.NODE_KINDS.values() if getattr(k, flag)]) == 1, flag
    assert sorted(k.ends for k in kinds.NODE_KINDS.values() if k.ends) == ["completed", "escalated"]


def _kind_tests(tree):
    """Comparisons of a node's type (``x.type``, ``ntype``) with a kind's name or a kinds set."""
    names = set(kinds.NODE_KINDS)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        left = node.left
        typed = (isinstance(left, ast.Attribute) and left.attr == "type") or \
            (isinstance(left, ast.Name) and left.id == "ntype")
        for right in node.comparators if typed else ():
            consts = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
            if any(isinstance(c, ast.Constant) and c.value in names for c in consts) or \
                    (isinstance(right, ast.Name) and right.id in ("RESTING", "TERMINAL", "PASS_THROUGH")):
                yield node.lineno


def test_no_module_tests_a_node_kind_by_its_name():
    """What a kind does is read from its row (node.kind.<flag>, engine.SETTLE), not from a chain of type tests."""
    found = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             if path.name != "kinds.py" for line in _kind_tests(ast.parse(path.read_text()))]
    assert found == []


def test_the_chain_finder_sees_a_chain():
    tree = ast.parse('if node.type == "task" or n.type in ("human", "exit") or ntype != "fan_in":\n    pass\n'
                     'if node.type in RESTING or check.type == "file_exists":\n    pass\n')
    assert list(_kind_tests(tree)) == [1, 1, 1, 3]


def test_a_task_node_without_max_retries_gets_the_kinds_default(monkeypatch):
    """The default is the table's alone: the compiled plan and the picture drawn from the raw JSON agree."""
    raw = {"name": "p", "graph": {"start": "a", "nodes": {"a": {"type": "task", "name": "a"}, "x": {"type": "exit"}},
                                  "edges": [{"from": "a", "to": "x", "condition": "on_success"}]}}
    assert compile_plan("p", raw).nodes["a"].max_retries == kinds.NODE_KINDS["task"].retries
    monkeypatch.setitem(kinds.NODE_KINDS, "task", dataclasses.replace(kinds.NODE_KINDS["task"], retries=2))
    assert compile_plan("p", raw).nodes["a"].max_retries == 2
    assert "up to 3 attempts" in render_graph.picture("p", raw)


def test_the_docs_say_the_default_retries_the_table_gives(monkeypatch):
    """The default is written into the generated table of node types; the table of node fields points there."""
    doc = (ROOT / "docs" / "plan-authoring.md").read_text()
    assert re.search(r"^\| `max_retries` \| the node type's \(table below\) \| task \|", doc, re.M)
    assert f"| `task` | {kinds.NODE_KINDS['task'].does} | yes |  | `{kinds.NODE_KINDS['task'].retries}` |" in doc
    monkeypatch.setitem(kinds.NODE_KINDS, "task", dataclasses.replace(kinds.NODE_KINDS["task"], retries=7))
    assert "| yes |  | `7` |" in tables.node_kinds_table()


def test_the_controls_are_read_from_their_table():
    assert control.KINDS == tuple(control.CONTROLS)
    assert card.STEERING.count('"') == 2 * sum(k.on_card for k in control.CONTROLS.values())
    for k in control.CONTROLS.values():
        assert (f'"{k.canonical}"' in card.STEERING) == k.on_card
        assert engine.CONTROL_EVENTS[k.name] == k.event
        assert render.NO_RUN_VERBS.get(k.name, "") == k.verb
        assert control.parse(k.canonical.replace("<step>", "the fix").replace("<plan name>", "git")).kind == k.name
        assert k.event in kinds.EVENTS


# ── outcomes: one vocabulary (kinds.STEP_OUTCOMES) ─────────────────────────


def test_every_outcome_vocabulary_is_read_from_the_one_table():
    from graph_engine.core import state

    assert routing.STATUSES == kinds.OUTCOMES == tuple(kinds.STEP_OUTCOMES)
    assert routing.STATUS_OF is kinds.STATUS_OF
    assert routing.STATUS_OF == {"success": "success", "partial": "partial_success", "retry": "retry",
                                 "exhausted": "fail"}
    assert state.LAST_OUTCOMES is kinds.LAST_OUTCOMES == ("", "success", "retry", "exhausted")
    assert set(state.NODE_OUTCOMES) == {"pending", "success", "partial_success", "fail", "skipped"}
    for o in kinds.STEP_OUTCOMES.values():
        assert routing.TASK_SHORTHANDS[o.name] == o.task_takes and routing.DECISION_SHORTHANDS[o.name] == o.decision_takes
        assert set(o.task_takes + o.decision_takes) <= set(kinds.CONDITIONS)


def test_an_outcome_row_routes_by_the_shorthands_it_names(monkeypatch):
    """A task's failure is taken by on_exhaust before on_fail because its row lists them so."""
    raw = {"name": "p", "graph": {"start": "a", "nodes": {
        "a": {"type": "task", "name": "a", "verify": {"type": "any_output"}}, "x": {"type": "exit"},
        "e1": {"type": "escalate", "reason": "r"}, "e2": {"type": "escalate", "reason": "r"}},
        "edges": [{"from": "a", "to": "x", "condition": "on_success"}, {"from": "a", "to": "e1", "condition": "on_fail"},
                  {"from": "a", "to": "e2", "condition": "on_exhaust"}]}}
    plan = compile_plan("p", raw)
    assert routing.select_edge(plan, "a", {"status": "fail"}, {}, "task", explain=False)[0].dst == "e2"


# ── fan-in policies: each is its row (kinds.FAN_IN_POLICIES) ───────────────


def test_every_fan_in_policy_tells_the_model_what_it_needs_and_a_row_without_words_is_no_row():
    for policy in kinds.FAN_IN_POLICIES.values():
        words = policy.told.format(q=2, r="'Lint' and 'Unit tests'")
        assert words.strip() and "{" not in words, policy.name
    with pytest.raises(TypeError):
        kinds.FanInPolicy("majority", "more than half of the branches succeeded")  # no words, no test


def test_the_majority_policy_routes_on_success_when_more_than_half_of_the_branches_succeeded():
    from test_parallel_branches import checks_plan

    plan = compile_plan("checks", checks_plan("majority"))
    join = plan.nodes["join"]
    two_of_three = {"lint": "success", "types": "fail", "tests": "success"}
    one_of_three = {"lint": "success", "types": "fail", "tests": "fail"}
    assert engine.fan_in_passes(join, two_of_three) and not engine.fan_in_passes(join, one_of_three)
    assert not engine.fan_in_passes(join, {"lint": "success", "types": "fail"})  # half is not more than half
    edge, _, _ = routing.select_edge(plan, "join", {"status": "success"}, {}, "decision", explain=False)
    assert edge.dst == "report"
    edge, _, _ = routing.select_edge(plan, "join", {"status": "fail"}, {}, "decision", explain=False)
    assert edge.dst == "stuck"


def test_the_majority_policy_is_told_by_its_own_words():
    from test_parallel_branches import checks_plan

    plan = compile_plan("checks", checks_plan("majority"))
    told = render.fan_in_failure(plan, plan.nodes["join"], {"lint": "success", "types": "fail", "tests": "fail"})
    assert told == "2 branches did not succeed ('Type check', 'Unit tests'); more than half of them must succeed"


def test_a_fan_in_policy_added_as_a_row_compiles_routes_and_is_told_by_its_own_words(monkeypatch):
    from test_parallel_branches import checks_plan

    two = kinds.FanInPolicy("two", "exactly two branches succeeded", "exactly two of them must succeed",
                            lambda outcomes, quorum, required: sum(o == "success" for o in outcomes.values()) == 2)
    monkeypatch.setitem(kinds.FAN_IN_POLICIES, "two", two)
    plan = compile_plan("checks", checks_plan("two"))
    join = plan.nodes["join"]
    two_of_three = {"lint": "success", "types": "fail", "tests": "success"}
    all_three = {"lint": "success", "types": "success", "tests": "success"}
    assert engine.fan_in_passes(join, two_of_three) and not engine.fan_in_passes(join, all_three)
    told = render.fan_in_failure(plan, join, {"lint": "success", "types": "fail", "tests": "fail"})
    assert told.endswith("; exactly two of them must succeed") and "every branch" not in told


def test_a_fan_in_policy_row_writes_its_words_into_the_schema_description(monkeypatch):
    """(The schema describes every policy from its row: a new row is described with no other edit.)"""
    from graph_engine.tools import tables
    row = kinds.FanInPolicy("two", "exactly two branches succeeded", "exactly two must succeed",
                            lambda outcomes, quorum, required: sum(o == "success" for o in outcomes.values()) == 2)
    monkeypatch.setitem(kinds.FAN_IN_POLICIES, "two", row)
    assert tables.fan_in_description().endswith("; two: exactly two branches succeeded.")
    text = tables.schema_text((tables.ROOT / tables.SCHEMA).read_text(encoding="utf-8"))
    assert "two: exactly two branches succeeded" in text
