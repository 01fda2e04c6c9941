"""The Attractor spec, item by item: each test quotes the sentence of the spec (or of the CLI contract) it checks.

The CLI is driven through ``cli.main`` exactly as typed; every verb's ``--json`` output is checked against its
definition in ``tests/cli_json.schema.json``.  Plans written in DOT also run in the Agent-Zero stand-in, the
code path Agent-Zero uses."""

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenario import exit_fail, exit_ok, started, verdicts

from graph_engine.authoring.dot import DotSyntaxError, parse
from graph_engine.tools import cli
from graph_engine.tools.standin import LIBRARY, Reply

jsonschema = pytest.importorskip("jsonschema")
SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "cli_json.schema.json").read_text())
DOCS = (Path(__file__).resolve().parents[2] / "docs" / "plan-authoring.md").read_text()

SPEC_STYLESHEET = '''digraph Pipeline {
    graph [
        goal="Implement feature X",
        model_stylesheet="
            * { llm_model: claude-sonnet-4-5; llm_provider: anthropic; }
            .code { llm_model: claude-opus-4-6; llm_provider: anthropic; }
            #critical_review { llm_model: gpt-5.2; llm_provider: openai; reasoning_effort: high; }
        "
    ]

    start [shape=Mdiamond]
    exit  [shape=Msquare]

    plan            [label="Plan", class="planning"]
    implement       [label="Implement", class="code"]
    critical_review [label="Critical Review", class="code"]

    start -> plan -> implement -> critical_review -> exit
}
'''

SMOKE = '''digraph test_pipeline {
    graph [goal="Create a hello world Python script"]

    start       [shape=Mdiamond]
    plan        [shape=box, prompt="Plan how to create a hello world script for: $goal"]
    implement   [shape=box, prompt="Write the code based on the plan", goal_gate=true]
    review      [shape=box, prompt="Review the code for correctness"]
    done        [shape=Msquare]

    start -> plan
    plan -> implement
    implement -> review [condition="outcome=success"]
    implement -> plan   [condition="outcome=fail", label="Retry"]
    review -> done      [condition="outcome=success"]
    review -> implement [condition="outcome=fail", label="Fix"]
}
'''

REVIEW = '''digraph Review {
    graph [triggers="review my changes", trigger_threshold=1]
    start [shape=Mdiamond, label="Start"]
    exit  [shape=Msquare, label="Exit"]
    review_gate [shape=hexagon, label="Review Changes", type="wait.human"]
    ship_it [prompt="Ship it"]
    fixes [prompt="Fix what the review found"]
    start -> review_gate
    review_gate -> ship_it [label="[A] Approve"]
    review_gate -> fixes   [label="[F] Fix"]
    ship_it -> exit
    fixes -> review_gate
}
'''


ANY_EXIT = -1


def cli_json(capsys, *args: str, code: int = 0):
    got = cli.main([*args, "--json"])
    assert got == code or (code == ANY_EXIT and got in (0, 1)), capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def conforms(data, verb: str) -> None:
    schema = {"$schema": SCHEMA["$schema"], "$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{verb}"}
    jsonschema.validate(data, schema)


def write(tmp_path: Path, text: str, name: str = "plan.dot") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ── 1. the CLI contract: every verb takes --json, and its shape is the schema's ──


def test_every_verb_accepts_json():
    """The CLI contract: 'every verb takes --json'."""
    sub = next(a for a in cli.parser()._actions if a.dest == "command")
    for verb, p in sub.choices.items():
        assert "--json" in p._option_string_actions, verb


def test_json_of_every_verb_follows_its_schema(capsys, tmp_path):
    dot = write(tmp_path, SMOKE)
    conforms(cli_json(capsys, "validate", dot), "validate")
    conforms(cli_json(capsys, "validate", str(LIBRARY)), "validate")
    conforms(cli_json(capsys, "inspect", dot), "inspect")
    conforms(cli_json(capsys, "inspect", write(tmp_path, "digraph G {\n  a [x=]\n}", "bad.dot"), code=2),
             "inspect_error")
    conforms(cli_json(capsys, "select", dot, "--from", "implement", "--outcome", '{"status": "fail"}'), "select")
    conforms(cli_json(capsys, "simulate", dot, "--outcomes", "{}"), "simulate")
    from graph_engine.tools.triggers import REQUIRED  # exit 1 while the labelled set misses its targets
    rep = cli_json(capsys, "triggers", "--quick", code=ANY_EXIT)
    conforms(rep, "triggers")
    assert set(rep["required"]["kinds"]) == set(REQUIRED)
    conforms(cli_json(capsys, "build-matcher", "--check"), "build-matcher")
    conforms(cli_json(capsys, "prompts", "--plan", "git_merge_pr"), "prompts")
    conforms(cli_json(capsys, "export", "--plan", "git_merge_pr"), "picture")
    conforms(cli_json(capsys, "render", dot, "--format", "mermaid"), "picture")
    out = tmp_path / "p.dot"
    conforms(cli_json(capsys, "render", dot, "--format", "dot", "--output", str(out)), "picture")
    demo = cli_json(capsys, "demo", "--out", str(tmp_path / "demo"))
    conforms(demo, "demo")
    assert demo["completed"] is True and demo["audit_log"].endswith(".jsonl")
    conforms(cli_json(capsys, "explain", demo["audit_log"]), "explain")


# ── select ──────────────────────────────────────────────────────────────────


def test_select_prints_target_and_why(capsys, tmp_path):
    """The CLI contract: 'select FILE --from NODE --outcome JSON [--context JSON] [--json] prints
    {"target": id or null, "why": [...]}; without --json readable text.'"""
    dot = write(tmp_path, SMOKE)
    out = cli_json(capsys, "select", dot, "--from", "implement", "--outcome", '{"status": "fail"}')
    assert out["target"] == "plan" and {"to": "plan", "condition": "outcome=fail", "weight": 0,
                                        "verdict": "taken: best matching conditional edge"} in out["why"]
    # the spec's status file names the status 'outcome', in any letter case
    assert cli_json(capsys, "select", dot, "--from", "review", "--outcome", '{"outcome": "SUCCESS"}')["target"] == "done"
    assert cli.main(["select", dot, "--from", "review", "--outcome", "fail"]) == 0
    assert capsys.readouterr().out.startswith("review -> implement via outcome=fail")


def test_select_a_null_target_is_an_answer(capsys, tmp_path):
    """Spec 3.3: 'IF edges is empty: RETURN NONE' -- null is the answer, printed with exit 0."""
    dot = write(tmp_path, SMOKE)
    out = cli_json(capsys, "select", dot, "--from", "implement", "--outcome", '{"status": "skipped"}')
    assert out["target"] is None
    assert cli.main(["select", dot, "--from", "implement", "--outcome", '{"status": "skipped"}']) == 0
    assert "(none: no edge for outcome 'skipped'" in capsys.readouterr().out


def test_select_applies_context_updates_before_choosing(capsys, tmp_path):
    """Spec 3.2: 'Step 4: Apply context updates from outcome' comes before 'Step 6: Select next edge'."""
    dot = write(tmp_path, '''digraph c {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    a [prompt="a"]
    b [prompt="b"]
    start -> a
    a -> b [condition="context.tests_passed=true"]
    a -> exit
    b -> exit
}''')
    args = ("select", dot, "--from", "a", "--outcome")
    assert cli_json(capsys, *args, '{"status": "success"}')["target"] == "exit"
    assert cli_json(capsys, *args, '{"status": "success", "context_updates": {"tests_passed": "true"}}')["target"] \
        == "b"
    # a JSON true compares as "true" (the condition's literal), in select and in simulate
    assert cli_json(capsys, *args, '{"status": "success", "context_updates": {"tests_passed": true}}')["target"] \
        == "b"
    out = cli_json(capsys, "simulate", dot, "--outcomes", '{"a": [{"status": "success", "context_updates": '
                   '{"tests_passed": true, "count": 3}}]}')
    assert out["node_sequence"] == ["start", "a", "b", "exit"]
    assert (out["context"]["tests_passed"], out["context"]["count"]) == ("true", "3")
    # 10.4: "context.*" keys are looked up as written, then without the prefix
    assert cli_json(capsys, *args, '{"status": "success"}', "--context", '{"context.tests_passed": "true"}')[
        "target"] == "b"


# ── inspect ─────────────────────────────────────────────────────────────────


def test_inspect_carries_the_lint_findings_of_validate(capsys, tmp_path):
    """The CLI contract: 'inspect FILE.dot --json includes "diagnostics": the same lint findings as validate,
    each with rule, severity, message, line, col, and for edge rules the edge (from, to)'."""
    dot = write(tmp_path, SMOKE.replace('review -> done      [condition="outcome=success"]',
                                        'review -> done      [condition="outcome=success"]\n    done -> plan\n'
                                        '    orphan [prompt="x"]\n    orphan -> done'))
    shown = cli_json(capsys, "inspect", dot)["diagnostics"]
    validated = [d for d in cli_json(capsys, "validate", dot, code=1) if d["rule"] != "check_time"]
    assert shown == validated
    rules = {d["rule"]: d for d in shown}
    assert {"exit_no_outgoing", "reachability"} <= set(rules)
    assert (rules["exit_no_outgoing"]["from"], rules["exit_no_outgoing"]["to"]) == ("done", "plan")
    assert all({"rule", "severity", "message", "line", "col"} <= set(d) for d in shown)


def test_inspect_types_every_value(capsys, tmp_path):
    """Spec 2.4 'Duration | Integer + unit suffix | 900s, 15m, 2h, 250ms, 1d' and the CLI contract 'durations
    ... are {"duration_ms": N, "raw": "900s"}, also for qualified keys such as manager.poll_interval'."""
    dot = write(tmp_path, '''digraph T {
    graph [goal="g", default_max_retries="2"]
    node [timeout="900s"]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    a [prompt="a", timeout=250ms, manager.poll_interval="45s", max_retries="3", goal_gate="true", ratio=0.5,
       label=42, note="2h later"]
    b [prompt="b", timeout="2m", other.wait="1h", retry_target="a", weight_hint="7", stay="1d"]
    start -> a -> b -> exit [weight="5", loop_restart=false]
}''')
    out = cli_json(capsys, "inspect", dot)
    a, b = out["nodes"]["a"]["attrs"], out["nodes"]["b"]["attrs"]
    assert a["timeout"] == {"duration_ms": 250, "raw": "250ms"}
    assert a["manager.poll_interval"] == {"duration_ms": 45_000, "raw": "45s"}
    assert (a["max_retries"], a["goal_gate"], a["ratio"], a["label"], a["note"]) == (3, True, 0.5, "42", "2h later")
    assert b["timeout"] == {"duration_ms": 120_000, "raw": "2m"} and b["other.wait"] == {"duration_ms": 3_600_000,
                                                                                            "raw": "1h"}
    assert b["stay"] == {"duration_ms": 86_400_000, "raw": "1d"} and b["weight_hint"] == "7"
    assert out["nodes"]["start"]["attrs"]["timeout"] == {"duration_ms": 900_000, "raw": "900s"}
    assert out["graph"]["attrs"]["default_max_retries"] == 2
    assert out["edges"][0]["attrs"] == {"weight": 5, "loop_restart": False}


def test_subgraph_defaults_and_derived_class(capsys, tmp_path):
    """Spec 2.10: 'Here `Plan` inherits `thread_id="loop-a"` and `timeout="900s"`, while `Implement` inherits
    `thread_id` but overrides `timeout`' and '`label="Loop A"` yields class `loop-a`' ('lowercasing the label,
    replacing spaces with hyphens, and stripping non-alphanumeric characters (except hyphens)')."""
    dot = write(tmp_path, '''digraph Sub {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    subgraph cluster_loop {
        label = "Loop A"
        node [thread_id="loop-a", timeout="900s"]

        Plan      [label="Plan next step"]
        Implement [label="Implement", timeout="1800s"]
    }
    subgraph cluster_b {
        graph [label="Build/Test & Ship"]
        Check [label="Check", class="critical"]
    }
    Outside [label="Outside"]
    start -> Plan -> Implement -> Check -> Outside -> exit
}''')
    nodes = {k: v["attrs"] for k, v in cli_json(capsys, "inspect", dot)["nodes"].items()}
    assert (nodes["Plan"]["thread_id"], nodes["Plan"]["timeout"]["raw"]) == ("loop-a", "900s")
    assert (nodes["Implement"]["thread_id"], nodes["Implement"]["timeout"]["raw"]) == ("loop-a", "1800s")
    assert nodes["Plan"]["class"] == "loop-a" and nodes["Check"]["class"] == "critical,buildtest--ship"
    assert "thread_id" not in nodes["Outside"] and "class" not in nodes["Outside"]


def test_label_defaults_to_the_id_and_goal_is_expanded(capsys, tmp_path):
    """Spec 2.6: 'label | String | node ID' and 'prompt ... Supports $goal variable expansion.'"""
    out = cli_json(capsys, "inspect", write(tmp_path, SMOKE))
    assert out["nodes"]["plan"]["attrs"]["label"] == "plan"
    assert out["nodes"]["plan"]["attrs"]["prompt"] == ("Plan how to create a hello world script for: Create a hello "
                                                       "world Python script")


def test_the_spec_stylesheet_example(capsys, tmp_path):
    """Spec 8.6: '`plan` gets `claude-sonnet-4-5` from the `*` rule ... `implement` gets `claude-opus-4-6` from
    the `.code` rule ... `critical_review` gets `gpt-5.2` from the `#critical_review` rule (highest
    specificity), overriding the `.code` class match.'"""
    nodes = cli_json(capsys, "inspect", write(tmp_path, SPEC_STYLESHEET))["nodes"]
    assert nodes["plan"]["attrs"]["llm_model"] == "claude-sonnet-4-5"
    assert nodes["implement"]["attrs"]["llm_model"] == "claude-opus-4-6"
    crit = nodes["critical_review"]["attrs"]
    assert (crit["llm_model"], crit["llm_provider"], crit["reasoning_effort"]) == ("gpt-5.2", "openai", "high")
    assert nodes["implement"]["from_stylesheet"] == ["llm_model", "llm_provider"]


def test_stylesheet_specificity_order_and_explicit_attributes(capsys, tmp_path):
    """Spec 8.3: 'Later rules of equal specificity override earlier ones. Explicit node attributes always override
    stylesheet values'; 11.10: 'Selectors by shape name work' and 'Specificity order: universal < shape < class
    < ID'."""
    dot = write(tmp_path, '''digraph S {
    graph [model_stylesheet="#b { llm_model: by-id; } .c { llm_model: by-class; } box { llm_model: by-shape; }
           * { llm_model: any; reasoning_effort: low; } .c { llm_model: later-class; }
           diamond { llm_provider: p-shape; }", llm_provider="graph-default"]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    a [prompt="a"]
    b [prompt="b", class="c"]
    c [prompt="c", class="c"]
    d [prompt="d", llm_model="mine", reasoning_effort="medium"]
    g [shape=diamond]
    start -> a -> b -> c -> d -> g -> exit
}''')
    nodes = {k: v["attrs"] for k, v in cli_json(capsys, "inspect", dot)["nodes"].items()}
    assert nodes["a"]["llm_model"] == "by-shape" and nodes["b"]["llm_model"] == "by-id"
    assert nodes["c"]["llm_model"] == "later-class" and nodes["g"]["llm_model"] == "any"
    assert (nodes["d"]["llm_model"], nodes["d"]["reasoning_effort"]) == ("mine", "medium")
    assert nodes["g"]["llm_provider"] == "p-shape" and nodes["a"]["llm_provider"] == "graph-default"  # 8.5 step 3


@pytest.mark.parametrize("sheet", ["* { llm_model gpt }", "* { colour: red; }", ".Upper { llm_model: x; }",
                                   "* { llm_model: x", "* llm_model: x; }"])
def test_a_bad_stylesheet_is_an_error(sheet, capsys, tmp_path):
    """Spec 7.2: 'stylesheet_syntax | ERROR | The model_stylesheet attribute must parse as valid stylesheet
    rules.'"""
    dot = write(tmp_path, SMOKE.replace('graph [goal="Create a hello world Python script"]',
                                        f'graph [model_stylesheet="{sheet}"]'))
    found = [d for d in cli_json(capsys, "validate", dot, code=1) if d["rule"] == "stylesheet_syntax"]
    assert len(found) == 1 and found[0]["severity"] == "error" and "model_stylesheet at character" in \
        found[0]["message"]


# ── 2. lint rules with the spec's ids and meaning ───────────────────────────


def lint(capsys, tmp_path, text: str) -> list[dict]:
    """The findings of ``graph-engine validate --json`` on a DOT plan, without the info lines."""
    cli.main(["validate", write(tmp_path, text), "--json"])
    return [d for d in json.loads(capsys.readouterr().out) if d["severity"] != "info"]


def test_start_and_exit_named_by_id_are_recognised(capsys, tmp_path):
    """Spec 7.2: 'start_node | ERROR | Pipeline must have exactly one start node (shape=Mdiamond or id matching
    start/Start)' and 'terminal_node | ERROR | ... exactly one terminal node (shape=Msquare or id matching
    exit/end)'."""
    text = '''digraph ids {
    graph [triggers="by id", trigger_threshold=1]
    start [label="Begin"]
    a [prompt="a"]
    end
    start -> a -> end
}'''
    assert [d["rule"] for d in lint(capsys, tmp_path, text)] == []
    nodes = cli_json(capsys, "inspect", str(tmp_path / "plan.dot"))["nodes"]
    assert (nodes["start"]["handler_type"], nodes["end"]["handler_type"]) == ("start", "exit")
    two = text.replace("a [prompt=\"a\"]", "a [prompt=\"a\"]\n    fin [shape=Msquare]\n    a -> fin")
    (d,) = [d for d in lint(capsys, tmp_path, two) if d["rule"] == "terminal_node"]
    assert d["message"].startswith("2 exit nodes (fin, end)") and d["node"] == "end"
    none = text.replace("    end\n", "").replace("start -> a -> end", "start -> a")
    assert [d["message"][:12] for d in lint(capsys, tmp_path, none) if d["rule"] == "terminal_node"] == ["0 exit nodes"]


def test_reachability_is_checked_whatever_else_is_wrong(capsys, tmp_path):
    """Spec 7.2: 'reachability | ERROR | All nodes must be reachable from the start node via BFS/DFS traversal'
    -- also when the plan has other errors, and for a cluster that only leads into the exit."""
    text = SMOKE.replace('review -> done      [condition="outcome=success"]',
                         'review -> done      [condition="outcome=success"]\n'
                         '    x [prompt="x"]\n    y [prompt="y"]\n    x -> y -> done\n'
                         '    review -> done [condition="outcome=maybe"]\n    done -> review')
    found = lint(capsys, tmp_path, text)
    assert {(d["rule"], d["node"]) for d in found if d["rule"] == "reachability"} == {("reachability", "x"),
                                                                                      ("reachability", "y")}
    assert {"condition_syntax", "exit_no_outgoing"} <= {d["rule"] for d in found}
    lines = text.splitlines()
    for d in found:
        assert d["line"] and lines[d["line"] - 1][d["col"] - 1:]  # a real place in the file


def test_condition_syntax_names_every_bad_edge(capsys, tmp_path):
    """Spec 7.2: 'condition_syntax | ERROR | Edge condition expressions must parse correctly (valid operators and
    keys).'"""
    text = SMOKE.replace('condition="outcome=success", label', 'condition="result=ok", label').replace(
        '[condition="outcome=fail", label="Retry"]', '[condition="outcome==fail", label="Retry"]').replace(
        'review -> done      [condition="outcome=success"]', 'review -> done      [condition="outcome>1"]')
    found = [d for d in lint(capsys, tmp_path, text) if d["rule"] == "condition_syntax"]
    assert sorted(d["edge"] for d in found) == ["implement -> plan", "review -> done"]
    assert all(d["edge"] in d["message"] for d in found)


@pytest.mark.parametrize("rule, change", [
    ("type_known", ('plan        [shape=box,', 'plan        [type="teleport", shape=box,')),
    ("fidelity_valid", ('plan        [shape=box,', 'plan        [fidelity="everything", shape=box,')),
    ("retry_target_exists", ('plan        [shape=box,', 'plan        [retry_target="nowhere", shape=box,')),
])
def test_these_are_warnings_as_the_spec_says(rule, change, capsys, tmp_path):
    """Spec 7.2: 'type_known | WARNING', 'fidelity_valid | WARNING', 'retry_target_exists | WARNING'."""
    text = SMOKE.replace(*change)
    found = [d for d in lint(capsys, tmp_path, text) if d["rule"] == rule]
    assert [d["severity"] for d in found] == ["warning"]
    assert cli.main(["validate", str(tmp_path / "plan.dot")]) == 0  # a warning does not refuse the plan
    capsys.readouterr()


def test_a_node_with_no_way_out_is_an_error(capsys, tmp_path):
    """The issue: 'A node that is not an exit and has no way out: an error.'"""
    text = SMOKE.replace("review -> implement", "review -> stop")
    (d,) = [d for d in lint(capsys, tmp_path, text) if d["rule"] == "dead_end"]
    assert d["node"] == "stop" and d["severity"] == "error"


# the two stalls the spec cannot see (the docs: "the lint refuses plans where this can happen")
CONTEXT_ONLY = '''digraph ctx {
    graph [triggers="route by language", trigger_threshold=1]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    stuck [type="escalate", reason="stuck"]
    detect [prompt="Find the language", verify="any_output"]
    route [shape=diamond]
    py [prompt="pytest"]
    js [prompt="npm test"]
    start -> detect
    detect -> route [condition="on_success"]
    detect -> stuck [condition="on_exhaust"]
    route -> py [condition="outcome=success && context.lang=python"]
    route -> js [condition="outcome=success && context.lang=js"]
    route -> stuck [condition="on_fail"]
    py -> exit
    js -> exit
}'''
RETRY_LOOP = '''digraph loop {
    graph [triggers="loop the tests", trigger_threshold=1]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    stuck [type="escalate", reason="stuck"]
    t [prompt="Run the tests", verify="exit_code_zero", max_retries=2]
    d [shape=diamond]
    start -> t
    t -> exit [condition="outcome=success"]
    t -> d [condition="outcome=retry"]
    t -> stuck [condition="outcome=fail"]
    d -> t [condition="outcome=success"]
    d -> stuck [condition="outcome=fail"]
}'''


@pytest.mark.parametrize("text, node, outcomes", [
    (CONTEXT_ONLY, "route", {"detect": [{"status": "success", "context_updates": {"lang": "go"}}]}),
    (RETRY_LOOP, "d", {"t": [{"status": "fail"}]}),
])
def test_the_lint_refuses_every_plan_a_run_would_stall_on(text, node, outcomes, capsys, tmp_path):
    """docs/plan-authoring.md: 'else no edge: the run stalls (one warning; the lint refuses plans where this can
    happen).'  Each plan the lint refuses here is one a run stalls on, shown by simulating it."""
    assert "the lint refuses plans where this can happen" in DOCS
    (d,) = [d for d in lint(capsys, tmp_path, text) if d["rule"] == "stall_possible"]
    assert d["node"] == node and d["severity"] == "error"
    assert cli.main(["simulate", str(tmp_path / "plan.dot"), "--outcomes", json.dumps(outcomes)]) == 2  # refused
    capsys.readouterr()
    out = cli_json(capsys, "simulate", str(tmp_path / "plan.dot"), "--allow-invalid", "--outcomes",
                   json.dumps(outcomes), code=1)
    assert out["end"] == "stalled" and out["node_sequence"][-1] == node and out["final_status"] == "fail"


def test_a_fallback_edge_or_complementary_conditions_remove_the_stall(capsys, tmp_path):
    """The near misses: an unconditional fallback, or key=v and key!=v, route every value."""
    fallback = CONTEXT_ONLY.replace("    py -> exit", "    route -> py\n    py -> exit")
    complement = CONTEXT_ONLY.replace("context.lang=js", "context.lang!=python")
    retry_ok = RETRY_LOOP.replace('d -> t [condition="outcome=success"]', 'd -> t [condition="outcome=retry"]')
    for text in (fallback, complement, retry_ok):
        assert [d for d in lint(capsys, tmp_path, text) if d["rule"] == "stall_possible"] == []


# ── 3. traversal outputs as the spec defines them ───────────────────────────


def test_simulate_outputs_of_the_smoke_pipeline(capsys, tmp_path):
    """Spec 11.13: 'ASSERT outcome.status == "success"', 'ASSERT "implement" in outcome.completed_nodes', and
    3.2: 'completed_nodes.append(node.id)' for every node executed, the start first."""
    dot = write(tmp_path, SMOKE)
    out = cli_json(capsys, "simulate", dot, "--outcomes", '{"implement": [{"status": "fail"}]}')
    assert out["final_status"] == "success" and out["end"] == "completed"
    assert out["completed_nodes"] == ["start", "plan", "implement", "plan", "implement", "review"]
    assert out["context"]["graph.goal"] == "Create a hello world Python script"  # 5.1 'Mirrored from graph goal'
    assert out["context"]["outcome"] == "success"


def test_an_unsatisfied_goal_gate_without_retry_target_fails(capsys, tmp_path):
    """Spec 3.4: 'If no retry target exists at any level, the pipeline ends with a FAIL outcome.'"""
    dot = write(tmp_path, '''digraph gate {
    start [shape=Mdiamond]
    done [shape=Msquare]
    validate [prompt="Run tests", goal_gate=true, verify="exit_code_zero"]
    start -> validate -> done
}''')
    out = cli_json(capsys, "simulate", dot, "--outcomes", '{"validate": [{"status": "fail"}]}')
    assert (out["final_status"], out["end"]) == ("fail", "ended")
    assert out["failure_reason"] == "goal gate 'validate' is not satisfied and names no retry target"
    assert out["completed_nodes"] == ["start", "validate"]


PARTIAL = '''digraph partial {
    graph [triggers="try it", trigger_threshold=1]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    work [prompt="Try", verify="exit_code_zero", max_retries=1, allow_partial=true, goal_gate=true]
    report [prompt="Report"]
    bail [prompt="Give up"]
    start -> work
    work -> report [condition="outcome=success"]
    work -> bail [condition="outcome=fail"]
    report -> exit
    bail -> exit
}'''


def test_allow_partial_goes_on_along_the_success_route(capsys, tmp_path):
    """Spec 2.6: 'allow_partial | Boolean | false | Accept PARTIAL_SUCCESS when retries are exhausted instead of
    failing.'; 5.2: 'PARTIAL_SUCCESS | ... Treated as success for routing'; 3.4: a goal gate is satisfied by
    'SUCCESS or PARTIAL_SUCCESS'."""
    dot = write(tmp_path, PARTIAL)
    out = cli_json(capsys, "simulate", dot, "--outcomes", '{"work": [{"status": "retry"}, {"status": "retry"}]}')
    assert out["node_sequence"] == ["start", "work", "report", "exit"] and out["final_status"] == "success"
    without = write(tmp_path, PARTIAL.replace(", allow_partial=true", ""), "without.dot")
    out = cli_json(capsys, "simulate", without, "--outcomes", '{"work": [{"status": "retry"}, {"status": "retry"}]}')
    assert out["node_sequence"][:3] == ["start", "work", "bail"] and out["final_status"] == "fail"


def test_allow_partial_inside_agent_zero(monkeypatch, tmp_path):
    """The same plan in the Agent-Zero stand-in: the check fails twice, the run goes on to the report."""
    shutil.copy(LIBRARY.parent / "plan_library.schema.json", tmp_path / "plan_library.schema.json")
    (tmp_path / "htn_plan_library.json").write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {}}))
    (tmp_path / "partial.dot").write_text(PARTIAL)
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(tmp_path / "htn_plan_library.json"))
    s = started("please try it now")
    s.run_pass(exit_fail("Error: first try"))
    s.run_pass(exit_fail("Error: second try"))
    s.run_pass(Reply(final="Report: partly done"))  # a result is judged on the next pass, before its call
    assert verdicts(s) == [("work", "fail"), ("work", "fail")]
    assert s.state["current_node"] == "report"
    assert [e["type"] for e in s.state["events"] if e["type"] == "partial_accepted"] == ["partial_accepted"]
    shown = s.records[-1].prompt_extras["htn_active_plan"]  # what the model reads says the step is partly done
    assert "work [PARTLY DONE] → report << CURRENT" in shown and "Current step: report" in shown
    assert "step 2 of 2 (1 of 2 steps done)" in shown  # an outcome=success edge is on the success path
    assert "'work' did not pass its check (exit status 1) in 2 attempts; it is accepted as partly done and the " \
           "workflow goes on." in shown and "failed" not in shown, shown
    s.user("thanks")
    s.run_pass(Reply(final="ok"))
    assert s.agent._htn_last_run["events"][-1]["type"] == "plan_completed"  # the goal gate counts it satisfied


def test_human_gate_choice_is_in_the_context(capsys, tmp_path):
    """Spec 4.6: 'context_updates={"human.gate.selected": selected.key, "human.gate.label": selected.label}'."""
    dot = write(tmp_path, REVIEW)
    out = cli_json(capsys, "simulate", dot, "--outcomes", "{}", "--answers", '["F", "approve"]')
    assert out["node_sequence"] == ["start", "review_gate", "fixes", "review_gate", "ship_it", "exit"]
    assert out["context"]["human.gate.selected"] == "A" and out["context"]["human.gate.label"] == "[A] Approve"
    assert out["context"]["preferred_label"] == "[A] Approve" and out["final_status"] == "success"


def test_human_gate_context_inside_agent_zero(monkeypatch, tmp_path):
    shutil.copy(LIBRARY.parent / "plan_library.schema.json", tmp_path / "plan_library.schema.json")
    (tmp_path / "htn_plan_library.json").write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {}}))
    (tmp_path / "review.dot").write_text(REVIEW)
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(tmp_path / "htn_plan_library.json"))
    s = started("review my changes please")
    s.run_pass(Reply(final="Review Changes: [A] Approve or [F] Fix?"))
    s.user("F")
    s.run_pass(exit_ok())
    assert s.state["context"]["human.gate.selected"] == "F" and s.state["context"]["human.gate.label"] == "[F] Fix"


# ── 4. parse errors at the right place ──────────────────────────────────────


@pytest.mark.parametrize("src, line, col, says", [
    ("graph G {\n  a -- b\n}", 1, 1, "undirected 'graph'"),
    ("// a comment\ngraph G {\n  a -- b\n}", 2, 1, "undirected 'graph'"),
    ('digraph G {\n  a [label="x"\n  b -> c\n}', 3, 3, "expected ',' or ']'"),
    ('digraph G {\n  a [label="x"', 2, 15, "is never closed"),
    ("digraph G {\n  my-node -> b\n}", 2, 5, "'-' cannot be part of a node id"),
    ("digraph G {\n  a -> b-c\n}", 2, 9, "'-' cannot be part of a node id"),
    ("digraph G {\n  a:p1 -> b\n}", 2, 4, "ports are not supported"),
    ("digraph G {\n  a -> b:p2\n}", 2, 9, "ports are not supported"),
    ('digraph G {\n  a [shape=box timeout="9s"]\n}', 2, 16, "missing ','"),
])
def test_parse_errors_point_at_the_offending_token(src, line, col, says):
    """Spec 2.3: 'Multiple graphs, undirected graphs, and strict modifiers are rejected', 'Node IDs must match
    [A-Za-z_][A-Za-z0-9_]*', 'Commas required between attributes.'"""
    with pytest.raises(DotSyntaxError) as err:
        parse(src)
    assert (err.value.line, err.value.col) == (line, col) and says in err.value.message


def test_the_docs_lint_tables_match_the_rules():
    """Each rule the docs list is checked by test_lint_table (a plan that triggers it, a near miss that must
    not), and the severity the docs give is the one the lint reports."""
    from graph_engine.authoring.lint import RULES
    from test_lint_table import TABLE

    rows = re.findall(r"^\| `([a-z_]+)` \| (error|warning|info) \|", DOCS, re.M)
    assert {r for r, _ in rows} == set(RULES) == set(TABLE)
    assert [(r, s) for r, s in rows if RULES[r][0] != s] == []


def test_retries_on_fail_then_the_final_outcome_routes(capsys, tmp_path):
    """Spec 11.5: 'Nodes with max_retries > 0 are retried on RETRY or FAIL outcomes' and 'After retry exhaustion,
    the node's final outcome is used for edge selection'."""
    dot = write(tmp_path, '''digraph r {
    graph [default_max_retries=2]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    a [prompt="a", verify="exit_code_zero"]
    b [prompt="b"]
    c [prompt="c"]
    start -> a
    a -> b [condition="outcome=success"]
    a -> c [condition="outcome=fail"]
    b -> exit
    c -> exit
}''')
    out = cli_json(capsys, "simulate", dot, "--outcomes", '{"a": [{"status": "fail"}, {"status": "retry"}, '
                   '{"status": "success"}]}')
    assert out["attempts"]["a"] == 3 and out["node_sequence"] == ["start", "a", "b", "exit"]
    out = cli_json(capsys, "simulate", dot, "--outcomes", '{"a": [{"status": "fail"}, {"status": "fail"}, '
                   '{"status": "fail"}]}')
    assert out["attempts"]["a"] == 3 and out["node_sequence"] == ["start", "a", "c", "exit"]
    assert out["final_status"] == "success"  # the failure route reached the exit: the run itself succeeded


# ── mutated spec examples: a plan and findings, or a positioned syntax error; never an exception ──

SEEDS = [SMOKE, SPEC_STYLESHEET, REVIEW, PARTIAL, CONTEXT_ONLY, RETRY_LOOP]


@settings(max_examples=max(300, settings.default.max_examples), deadline=None)
@given(base=st.sampled_from(SEEDS), cuts=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 12),
                                                            st.sampled_from(["", "-", ":", "[", "]", ",", '"', "=",
                                                                             "{", "}", ";", "->", "*", "#", ".",
                                                                             "x", "1", "start", "exit", " "])),
                                                  max_size=4))
def test_mutated_spec_examples_map_and_lint_without_raising(base, cuts):
    from graph_engine.authoring.dot_plan import to_plan
    from graph_engine.authoring.dot_spec import view
    from graph_engine.authoring.library import check_document

    text = base
    for at, drop, insert in cuts:
        at %= len(text) + 1
        text = text[:at] + insert + text[at + drop:]
    try:
        graph = parse(text)
    except DotSyntaxError as exc:
        lines = text.split("\n")
        assert 1 <= exc.line <= len(lines) and 1 <= exc.col <= len(lines[exc.line - 1]) + 1
        return
    view(graph)
    pid, plan, found = to_plan(graph)
    assert all(d.line is not None and d.col is not None for d in found)
    check_document({"plans": {pid: plan}})


# ── the docs' claims about the lint, each with its test ─────────────────────


def test_docs_errors_disable_the_plan_and_warnings_are_logged(monkeypatch, tmp_path):
    """docs/plan-authoring.md: 'Errors disable the plan; warnings are logged.' -- inside Agent-Zero (the
    stand-in): a DOT plan with an error is not started, one with only a warning runs, and both are in the log."""
    assert "Errors disable the plan; warnings are logged." in DOCS
    shutil.copy(LIBRARY.parent / "plan_library.schema.json", tmp_path / "plan_library.schema.json")
    (tmp_path / "htn_plan_library.json").write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {}}))
    (tmp_path / "ctx.dot").write_text(CONTEXT_ONLY)  # stall_possible: an error
    (tmp_path / "review.dot").write_text(REVIEW.replace("ship_it [prompt=\"Ship it\"]\n", ""))  # a warning
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(tmp_path / "htn_plan_library.json"))
    s = started("route by language now")
    assert s.state is None  # the plan with an error never starts
    warnings = s.log.texts("warning")
    assert any("plan 'ctx' is disabled, the others keep working: [stall_possible]" in w for w in warnings)
    assert any("[prompt_on_llm_nodes] plan 'Review' node 'ship_it'" in w for w in warnings)
    s.user("review my changes please")
    s.run_pass(Reply(final="Review Changes: [A] Approve or [F] Fix?"))
    assert s.state["plan_id"] == "Review"


def test_docs_dot_findings_carry_a_position_and_name_their_edge(capsys, tmp_path):
    """docs/plan-authoring.md: 'Every finding on a DOT plan carries `file`, `line` and `col`' and 'an edge
    finding names its edge `from -> to` in `edge` and in the message, and gives both ends as `from` and
    `to`.'"""
    assert "Every finding on a DOT plan\ncarries `file`, `line` and `col`" in DOCS
    text = SMOKE.replace('review -> done      [condition="outcome=success"]',
                         'review -> done      [condition="outcome=ok"]\n    done -> plan\n    x [prompt="x"]')
    path = write(tmp_path, text)
    found = cli_json(capsys, "validate", path, code=1)
    assert found and all({"file", "line", "col"} <= set(d) for d in found)
    edges = [d for d in found if d["edge"]]
    assert {d["rule"] for d in edges} == {"condition_syntax", "exit_no_outgoing"}
    assert all(d["edge"] == f"{d['from']} -> {d['to']}" and d["edge"] in d["message"] for d in edges)


def test_docs_validate_exit_status(capsys, tmp_path):
    """docs/plan-authoring.md: 'The exit status is 0 without errors and 1 with errors.'"""
    assert "The exit status is 0 without\nerrors and 1 with errors." in DOCS
    assert cli.main(["validate", write(tmp_path, SMOKE)]) == 0
    assert cli.main(["validate", write(tmp_path, CONTEXT_ONLY, "ctx.dot")]) == 1
    capsys.readouterr()


TIE = """digraph T {
  graph [goal="g", triggers="tie me", trigger_threshold=1]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  b [prompt="B", verify="any_output"]
  a [prompt="A", verify="any_output"]
  start -> b
  start -> a
  a -> exit
  b -> exit
}
"""


def test_two_equal_unconditional_edges_warn_and_the_run_takes_the_first_target_id_as_the_spec_says(capsys, tmp_path):
    path = tmp_path / "tie.dot"
    path.write_text(TIE)
    found = cli_json(capsys, "validate", str(path), code=ANY_EXIT)
    rules = {(d["rule"], d["severity"]) for f in found["files"] for d in f["diagnostics"]} if isinstance(found, dict) \
        and "files" in found else {(d["rule"], d["severity"]) for d in found}
    assert ("duplicate_condition", "warning") in rules and not any(sev == "error" for _, sev in rules)
    run = cli_json(capsys, "simulate", str(path))
    assert run["node_sequence"] == ["start", "a", "exit"] and run["final_status"] == "success"
