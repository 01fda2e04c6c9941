"""Every lint rule, table-driven: a minimal plan that triggers it and a near miss that must not.

Most rows are DOT plans built from one clean plan (BASE) by adding or replacing lines; a row's findings come from
``graph-engine validate`` (``cli.validate_files``), the same code path as the command and as a reload inside
Agent-Zero.  DOT findings must carry the line and column of what they name."""

import json
from pathlib import Path

import pytest

from graph_engine.authoring.library import load_library_file
from graph_engine.authoring.lint import RULES
from graph_engine.tools import cli

BASE = {
    "graph": 'graph [triggers="lint me", trigger_threshold=1]',
    "start": "start [shape=Mdiamond]",
    "exit": "exit [shape=Msquare]",
    "stuck": 'stuck [type="escalate", reason="stuck"]',
    "t": 't [prompt="Run the tests", verify="exit_code_zero"]',
    "e1": "start -> t",
    "e2": 't -> exit [condition="on_success"]',
    "e3": 't -> stuck [condition="on_exhaust"]',
}


def dot(replace: dict | None = None, add: tuple = ()) -> str:
    """BASE with some lines replaced (None drops the line) and some added."""
    lines = {**BASE, **(replace or {})}
    body = [v for v in lines.values() if v is not None] + list(add)
    return "digraph p {\n" + "".join(f"  {line}\n" for line in body) + "}\n"


DECISION = ('t -> d [condition="on_success"]', "d [shape=diamond]")
ROUTE = ('detect [prompt="Find the language", verify="any_output", verify.capture="(?P<lang>python|js)"]',
         'route [shape=diamond]', 'py [prompt="pytest"]', 'js [prompt="npm test"]',
         'detect -> route [condition="on_success"]', 'detect -> stuck [condition="on_exhaust"]',
         'route -> py [condition="outcome=success && context.lang=python"]',
         'route -> js [condition="outcome=success && context.lang=js"]', 'route -> stuck [condition="on_fail"]',
         "py -> exit", "js -> exit")
ROUTE_BASE = {"e1": "start -> detect", "t": None, "e2": None, "e3": None}

FAN_OUT = ('find [prompt="List the failing files", verify="any_output", verify.capture="(?s)(?P<files>.+)"]',
           'fix [prompt="Fix $item", verify="exit_code_zero", verify.capture="passed=(?P<passed>[0-9]+)"]',
           "join [shape=tripleoctagon]", 'find -> fan [condition="on_success"]', 'find -> stuck [condition="on_exhaust"]',
           "fan -> fix", 'fix -> join [condition="on_success"]', 'fix -> stuck [condition="on_exhaust"]',
           'join -> exit [condition="on_success"]', 'join -> stuck [condition="on_fail"]')
# rule -> (a plan that triggers it, a near miss that must not); a plan is DOT text or ("json", library)
# or ("folder", library, dot text)
TABLE = {
    "syntax": ("digraph p {\n  a -- b\n}\n", dot()),
    "start_node": (dot(add=("begin [shape=Mdiamond]", "begin -> t")),
                   dot({"start": 'start [label="Begin"]'})),  # a start named only by its id is recognised
    "terminal_node": (dot(add=("end [shape=Msquare]", 't -> end [condition="on_success", weight=1]')),
                      dot({"exit": 'exit [label="Exit"]'})),  # likewise an exit
    "reachability": (dot(add=('orphan [prompt="x"]', "orphan -> exit")),
                     dot(add=('extra [prompt="x"]', 't -> extra [condition="on_retry"]', "extra -> exit"))),
    "start_no_incoming": (dot(add=('t -> start [condition="on_retry"]',)), dot()),
    "exit_no_outgoing": (dot(add=("exit -> t",)), dot()),
    "dead_end": (dot(add=('lonely [prompt="x"]', 't -> lonely [condition="on_retry"]')),
                 dot(add=('lonely [prompt="x"]', 't -> lonely [condition="on_retry"]', "lonely -> exit"))),
    "duplicate_condition": (dot(add=('t -> stuck [condition="on_success"]',)),
                            dot(add=('t -> stuck [condition="on_success", weight=1]',))),
    "decision_branches": (dot({"e2": DECISION[0]}, (DECISION[1], "d -> exit")),
                          dot({"e2": DECISION[0]}, (DECISION[1], 'd -> exit [condition="on_success"]',
                                                    'd -> stuck [condition="on_fail"]'))),
    "failure_unrouted": (dot({"e3": 't -> stuck [condition="on_retry"]'}), dot()),
    "stall_possible": (dot(ROUTE_BASE, ROUTE), dot(ROUTE_BASE, ROUTE + ("route -> py",))),
    "failure_as_success": (dot({"e2": "t -> exit", "e3": None, "stuck": None}),
                           dot({"e2": "t -> exit", "e3": None, "stuck": None,
                                "t": 't [prompt="Run", verify="exit_code_zero", continue_on_fail=true]'})),
    "cycle_unbounded": (dot({"e2": 't -> u [condition="on_success"]'}, ('u [prompt="x"]', "u -> t")),
                        dot({"t": 't [prompt="Run", verify="exit_code_zero", max_retries=2]'},
                            ('u [prompt="x"]', 't -> u [condition="on_retry"]', "u -> t"))),
    "escalate_reason": (dot({"stuck": 'stuck [type="escalate"]'}), dot()),
    "pace_level": (dot({"stuck": 'stuck [type="escalate", reason="r", pace_level="whenever"]'}),
                   dot({"stuck": 'stuck [type="escalate", reason="r", pace_level="primary"]'})),
    "no_triggers": (dot({"graph": None}), dot()),
    "threshold_unreachable": (dot({"graph": 'graph [triggers="lint me", trigger_threshold=3]'}), dot()),
    "trigger_overlap": (dot({"graph": 'graph [triggers="lint me, lint me now", trigger_threshold=1]'}), dot()),
    "schema": (dot({"t": 't [prompt="Run", verify="exit_code_zero", max_retries="many"]'}),
               dot({"t": 't [prompt="Run", verify="exit_code_zero", max_retries="2"]'})),  # typed by its key
    "regex_invalid": (dot({"t": 't [prompt="Run", verify="output_matches", verify.value="("]'}),
                      dot({"t": 't [prompt="Run", verify="output_matches", verify.value="ok"]'})),
    "regex_unsafe": (dot({"t": 't [prompt="Run", verify="output_matches", verify.value="(a+)+$"]'}),
                     dot({"t": 't [prompt="Run", verify="output_matches", verify.value="a+$"]'})),
    "regex_slow": (dot({"t": 't [prompt="Run", verify="output_matches", verify.value=".*=.*x"]'}),
                   dot({"t": 't [prompt="Run", verify="output_matches", verify.value="[^=]*=[^x]*x"]'})),
    "type_known": (dot({"t": 't [prompt="Run", verify="exit_code_zero", type="mystery"]'}),
                   dot({"t": 't [prompt="Run", verify="exit_code_zero", type="tool"]'})),
    "manager_child": (dot({"t": 't [label="Watch", shape=house]', "e2": 't -> exit [condition="on_success"]',
                            "e3": 't -> stuck [condition="on_fail"]'}),
                      dot({"t": 't [label="Watch", shape=house, manager.child="other"]',
                           "e2": 't -> exit [condition="on_success"]', "e3": 't -> stuck [condition="on_fail"]'})),
    "condition_syntax": (dot({"e2": 't -> exit [condition="ready"]'}),
                         dot({"e2": 't -> exit [condition="outcome=success"]'})),
    "retry_target_exists": (dot({"t": 't [prompt="Run", verify="exit_code_zero", retry_target="nowhere"]'}),
                            dot({"t": 't [prompt="Run", verify="exit_code_zero", retry_target="t"]'})),
    "goal_gate_has_retry": (dot({"t": 't [prompt="Run", verify="exit_code_zero", goal_gate=true]'}),
                            dot({"t": 't [prompt="Run", verify="exit_code_zero", goal_gate=true, '
                                      'retry_target="t"]'})),
    "prompt_on_llm_nodes": (dot({"t": 't [verify="exit_code_zero"]'}),
                            dot({"t": 't [label="Run the tests", verify="exit_code_zero"]'})),
    "stylesheet_syntax": (dot({"graph": 'graph [triggers="lint me", trigger_threshold=1, '
                                        'model_stylesheet="* { llm_model gpt }"]'}),
                          dot({"graph": 'graph [triggers="lint me", trigger_threshold=1, '
                                        'model_stylesheet="* { llm_model: gpt; }"]'})),
    "fidelity_valid": (dot({"t": 't [prompt="Run", verify="exit_code_zero", fidelity="everything"]'}),
                       dot({"t": 't [prompt="Run", verify="exit_code_zero", fidelity="summary:high"]'})),
    "human_options": (dot({"e2": 't -> gate [condition="on_success"]'},
                          ('gate [shape=hexagon, label="Ship it?"]', 'gate -> exit [label="[Y] Yes"]', "gate -> t")),
                      dot({"e2": 't -> gate [condition="on_success"]'},
                          ('gate [shape=hexagon, label="Ship it?"]', 'gate -> exit [label="[Y] Yes"]',
                           'gate -> t [label="[N] No"]'))),
    "parallel_branches": (dot({"e1": "start -> fan", "e2": None, "e3": None},
                              ("fan [shape=component]", "fan -> t", 'u [prompt="u", verify="exit_code_zero"]',
                               "fan -> u", "join [shape=tripleoctagon]", 't -> join [condition="on_success"]',
                               't -> stuck [condition="on_exhaust"]', 'u -> join [condition="on_success"]',
                               'u -> stuck [condition="on_exhaust"]', 'join -> exit [condition="on_success"]',
                               'join -> stuck [condition="on_fail"]')), dot()),
    "fan_in_policy": (dot({"e1": "start -> fan", "e2": None, "e3": None},
                          ("fan [shape=component]", "fan -> t", 'u [prompt="u", verify="exit_code_zero"]',
                           "fan -> u", "join [shape=tripleoctagon, fan_in_policy=quorum, quorum=3]",
                           't -> join [condition="on_success"]', 't -> stuck [condition="on_exhaust"]',
                           'u -> join [condition="on_success"]', 'u -> stuck [condition="on_exhaust"]',
                           'join -> exit [condition="on_success"]', 'join -> stuck [condition="on_fail"]')),
                      dot({"e1": "start -> fan", "e2": None, "e3": None},
                          ("fan [shape=component]", "fan -> t", 'u [prompt="u", verify="exit_code_zero"]',
                           "fan -> u", 'join [shape=tripleoctagon, fan_in_policy=required, required="u"]',
                           't -> join [condition="on_success"]', 't -> stuck [condition="on_exhaust"]',
                           'u -> join [condition="on_success"]', 'u -> stuck [condition="on_exhaust"]',
                           'join -> exit [condition="on_success"]', 'join -> stuck [condition="on_fail"]'))),
    "fan_out": (dot({"e1": "start -> find", "e2": None, "e3": None}, FAN_OUT + ("fan [shape=component, over=nosuch]",)),
                dot({"e1": "start -> find", "e2": None, "e3": None}, FAN_OUT + ("fan [shape=component, over=files]",))),
    "reducer": (dot({"e1": "start -> find", "e2": None, "e3": None},
                    FAN_OUT + ("fan [shape=component, over=files]", 'join [reduce="passed:avg"]')),
                dot({"e1": "start -> find", "e2": None, "e3": None},
                    FAN_OUT + ("fan [shape=component, over=files]", 'join [reduce="passed:sum"]'))),
    # what the page shows: markup, direction controls and invisible characters in names, reasons and labels
    "text_markup": (dot({"t": 't [label="Run <b>the</b> tests", prompt="Run", verify="exit_code_zero"]'}),
                    dot({"t": 't [label="Run the tests (a < b, x & y)", prompt="Run", verify="exit_code_zero"]',
                         "e2": 't -> exit [condition="on_success", label="[A] Approve"]'})),
    "text_bidi": (dot({"stuck": 'stuck [type="escalate", reason="stuck at \u202etxt.exe"]'}),
                  dot({"stuck": 'stuck [type="escalate", reason="\u05e0\u05ea\u05e7\u05e2 (stuck)"]'})),
    "text_invisible": (dot({"e2": 't -> exit [condition="on_success", label="do\u200bne"]'}),
                       dot({"e2": 't -> exit [condition="on_success", label="done \U0001f469\u200d\U0001f4bb"]'})),
}


def _json_plan(**graph_changes) -> dict:
    plan = {"name": "P", "triggers": ["lint me"], "trigger_threshold": 1,
            "graph": {"start": "s", "nodes": {"s": {"type": "start"}, "t": {"type": "task", "action": "Run",
                                                                             "verify": {"type": "exit_code_zero"}},
                                               "x": {"type": "exit"}, "esc": {"type": "escalate", "reason": "r"}},
                      "edges": [{"from": "s", "to": "t"}, {"from": "t", "to": "x", "condition": "on_success"},
                                {"from": "t", "to": "esc", "condition": "on_exhaust"}]}}
    plan["graph"].update(graph_changes)
    return plan


TABLE["edge_target_exists"] = (
    ("json", {"plans": {"p": _json_plan(edges=[{"from": "s", "to": "t"}, {"from": "t", "to": "ghost"},
                                               {"from": "t", "to": "x", "condition": "on_success"},
                                               {"from": "t", "to": "esc", "condition": "on_exhaust"}])}}),
    ("json", {"plans": {"p": _json_plan()}}))
TABLE["duplicate_trigger"] = (
    ("json", {"plans": {"p": _json_plan(), "q": _json_plan()}}),
    ("json", {"plans": {"p": _json_plan(), "q": dict(_json_plan(), triggers=["lint you"])}}))
TABLE["example_routing"] = (  # an example that another plan's strong phrase claims; the near miss names no phrase
    ("json", {"plans": {"p": dict(_json_plan(), examples=["lint me now", "please ship it to staging"]),
                        "q": dict(_json_plan(), name="Q", triggers=[], strong_triggers=["ship it"])}}),
    ("json", {"plans": {"p": dict(_json_plan(), examples=["lint me now", "please lint the staging code"]),
                        "q": dict(_json_plan(), name="Q", triggers=[], strong_triggers=["ship it"])}}))
TABLE["duplicate_plan"] = (("folder", {"plans": {"p": _json_plan()}}, dot()),
                           ("folder", {"plans": {"q": dict(_json_plan(), triggers=["other words"])}}, dot()))


def run(plan, tmp_path: Path) -> list[dict]:
    if isinstance(plan, str):
        path = tmp_path / "p.dot"
        path.write_text(plan)
        return [d.to_json() for d in cli.validate_files([str(path)]) if d.rule not in ("worst_case_turns",
                                                                                         "check_time")]
    if plan[0] == "json":
        path = tmp_path / "lib.json"
        path.write_text(json.dumps(plan[1]))
        return [d.to_json() for d in cli.validate_files([str(path)]) if d.rule not in ("worst_case_turns",
                                                                                         "check_time")]
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "htn_plan_library.json").write_text(json.dumps(plan[1]))
    (folder / "p.dot").write_text(plan[2])
    return [d.to_json() for d in load_library_file(str(folder / "htn_plan_library.json")).diagnostics]


def test_the_table_covers_every_rule():
    assert sorted(TABLE) == sorted(RULES)


def test_the_base_plan_is_clean(tmp_path):
    assert run(dot(), tmp_path) == []


@pytest.mark.parametrize("rule", sorted(TABLE))
def test_rule_fires_on_its_plan_with_a_position(rule, tmp_path):
    found = [d for d in run(TABLE[rule][0], tmp_path) if d["rule"] == rule]
    assert found, run(TABLE[rule][0], tmp_path)
    for d in found:
        assert d["severity"] == RULES[rule][0] and d["message"] and d["fix"] is not None
        if isinstance(TABLE[rule][0], str) or TABLE[rule][0][0] == "folder":
            assert d["line"] >= 1 and d["col"] >= 1 and d["file"].endswith(".dot")
        if d["edge"] is not None:  # an edge rule names its edge as from -> to, and carries both ends
            assert d["edge"] == f"{d['from']} -> {d['to']}"


@pytest.mark.parametrize("rule", sorted(TABLE))
def test_rule_is_silent_on_the_near_miss(rule, tmp_path):
    assert [d for d in run(TABLE[rule][1], tmp_path) if d["rule"] == rule] == []


def test_edge_findings_point_at_the_edge(tmp_path):
    """Spec 7.1: a diagnostic names 'edge : (String, String) -- related edge as (from, to)'."""
    text = dot(add=("exit -> t", 't -> start [condition="on_retry"]', 't -> exit [condition="bogus"]'))
    found = {d["rule"]: d for d in run(text, tmp_path)}
    lines = text.splitlines()
    for rule, edge in (("exit_no_outgoing", ("exit", "t")), ("start_no_incoming", ("t", "start")),
                       ("condition_syntax", ("t", "exit"))):
        d = found[rule]
        assert (d["from"], d["to"]) == edge and d["edge"] == f"{edge[0]} -> {edge[1]}"
        assert lines[d["line"] - 1][d["col"] - 1:].startswith("->")  # the column of the arrow
        assert f"{edge[0]} -> {edge[1]}" in d["message"]


def test_a_json_plan_that_does_not_compile_still_gets_every_structural_finding(tmp_path):
    """One error hides no other: both edges that name missing nodes, the bad condition and the node no path
    reaches are all reported, not only the first problem the compiler meets."""
    plan = _json_plan(edges=[{"from": "s", "to": "t"}, {"from": "t", "to": "ghost"},
                             {"from": "t", "to": "x", "condition": "outcome==success"},
                             {"from": "phantom", "to": "x"}, {"from": "t", "to": "esc", "condition": "on_exhaust"}])
    plan["graph"]["nodes"]["island"] = {"type": "task", "action": "never reached"}
    found = run(("json", {"plans": {"p": plan}}), tmp_path)
    got = sorted((d["rule"], d["edge"] or d["node"]) for d in found)
    assert got == [("condition_syntax", "t -> x"), ("edge_target_exists", "phantom -> x"),
                   ("edge_target_exists", "t -> ghost"), ("reachability", "island")]
