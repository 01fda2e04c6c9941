"""DOT (Attractor subset): the parser, the mapping to plans, export, inspect, validate, render, and plans
written in DOT running inside Agent-Zero."""

import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenario import exit_ok, started, verdicts

from graph_engine.tools import cli
from graph_engine.authoring.dot import DotSyntaxError, Duration, parse
from graph_engine.authoring.dot_plan import load_dot_plan, to_dot
from graph_engine.authoring.library import load_library_file
from graph_engine.core.model import compile_plan
from graph_engine.tools.standin import LIBRARY, Reply

# ── the parser: every construct ─────────────────────────────────────────────


def test_constructs():
    g = parse('''// a pipeline
digraph Demo {
    graph [goal="Ship it", label="Demo"];
    rankdir = LR
    node [shape=box, timeout=15m]
    edge [weight=2]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    a [label="A", prompt="Do \\"A\\"\\n\\ttwice \\\\ now", max_retries=3, ratio=0.75, enabled=true, off=false]
    b [label="B", fidelity=summary:high, tool_hooks.pre="echo hi", url="http://x/y"]  /* trailing
       block comment */
    subgraph cluster_review {
        label = "Code Review"
        node [thread_id="review"]
        c [label="C", class="slow"]
    }
    d [label="multi
line"]
    start -> a -> b -> exit [label="next", weight=5];
    b -> c -> d
    d -> exit [condition="on_success"]
    t1 [timeout=250ms] t2 [timeout=900s] t3 [timeout=2h] t4 [timeout=1d]
}''')
    assert g.name == "Demo" and g.attrs == {"goal": "Ship it", "label": "Demo", "rankdir": "LR"}
    a = g.nodes["a"].attrs
    assert a["prompt"] == 'Do "A"\n\ttwice \\ now' and a["max_retries"] == 3 and a["ratio"] == 0.75
    assert a["enabled"] is True and a["off"] is False and a["timeout"] == Duration(900_000, "15m")
    assert g.nodes["b"].attrs["fidelity"] == "summary:high" and g.nodes["b"].attrs["tool_hooks.pre"] == "echo hi"
    assert g.nodes["b"].attrs["url"] == "http://x/y"  # '//' inside a string is not a comment
    c = g.nodes["c"].attrs
    assert c["thread_id"] == "review" and c["class"] == "slow,code-review" and c["shape"] == "box"
    assert "thread_id" not in g.nodes["d"].attrs  # subgraph defaults stay in the subgraph
    assert g.nodes["d"].attrs["label"] == "multi\nline" and g.nodes["d"].line == 17
    chain = [(e.src, e.dst, e.attrs) for e in g.edges[:3]]
    assert chain == [("start", "a", {"weight": 5, "label": "next"}), ("a", "b", {"weight": 5, "label": "next"}),
                     ("b", "exit", {"weight": 5, "label": "next"})]
    assert (g.edges[3].src, g.edges[3].dst, g.edges[3].attrs) == ("b", "c", {"weight": 2})
    assert [g.nodes[f"t{i}"].attrs["timeout"].ms for i in range(1, 5)] == [250, 900_000, 7_200_000, 86_400_000]
    assert (g.edges[0].line, g.edges[0].col) == (19, 11)


@pytest.mark.parametrize("src, line, col, message", [
    ("graph G { a }", 1, 1, "undirected 'graph' is not supported; use 'digraph'"),
    ("strict digraph G { a }", 1, 1, "'strict' graphs are not supported; remove 'strict'"),
    ("digraph G {\n  a -- b\n}", 2, 5, "undirected edge '--': this format has directed edges only (use '->')"),
    ("digraph G { a }\ndigraph H { b }", 2, 1, "more than one graph in the file; keep one digraph per file"),
    ("digraph G {\n  a [label=<<b>x</b>>]\n}", 2, 12, "HTML labels (<...>) are not supported; use a quoted string"),
    ("digraph G { a:n -> b }", 1, 14, "ports are not supported ('a:n'); connect nodes, not ports (write a)"),
    ('digraph G { "a b" -> c }', 1, 13, "quoted node ids are not supported; write an identifier"),
    ("digraph G { 9lives }", 1, 13, "invalid node id '9lives': use letters, digits and '_', not starting with a "
                                    "digit"),
    ('digraph G {\n  a [label="open\n}\n', 2, 12, "unterminated string: '\"' without a closing '\"'"),
    ("digraph G {\n  /* never closed\n}", 2, 3, "unterminated comment: '/*' without '*/'"),
    ("digraph G { a [label=] }", 1, 22, "missing value: found ']'"),
    ("digraph G { a [label] }", 1, 21, "attribute 'label' has no value: write label=..."),
    ("digraph G { a }\nextra", 2, 1, "junk after the graph: 'extra'"),
    ("digraph G { a -> }", 1, 18, "expected a node id after '->', found '}'"),
    ("digraph G { a ", 1, 15, "expected '}' to close the digraph, found the end of the file"),
    ("digraph G { a @ b }", 1, 15, "unexpected character '@'"),
])
def test_rejections_with_line_and_column(src, line, col, message):
    with pytest.raises(DotSyntaxError) as err:
        parse(src)
    assert (err.value.line, err.value.col, err.value.message) == (line, col, message)


# ── the spec's kinds of pipeline ────────────────────────────────────────────

LINEAR = '''digraph Simple {
    graph [goal="Run tests and report", triggers="run the smoke pipeline", trigger_threshold=1]
    rankdir=LR
    node [shape=box, timeout="900s"]
    start     [shape=Mdiamond, label="Start"]
    exit      [shape=Msquare, label="Exit"]
    run_tests [label="Run Tests", prompt="Run the test suite and report results", verify="exit_code_zero",
               max_retries=1]
    report    [label="Report", prompt="Summarize the results for: $goal"]
    stuck     [type="escalate", reason="tests keep failing", pace_level="alternate"]
    start -> run_tests -> report -> exit
    run_tests -> stuck [condition="outcome=fail"]
}'''

BRANCHING = '''digraph Branch {
    graph [goal="Implement and validate a feature", default_max_retry=2]
    node [shape=box]
    start     [shape=Mdiamond]
    exit      [shape=Msquare]
    plan      [label="Plan", prompt="Plan the implementation"]
    implement [label="Implement", prompt="Implement the plan", verify="exit_code_zero"]
    validate  [label="Validate", prompt="Run tests", verify="exit_code_zero", goal_gate=true, retry_target="implement"]
    gate      [shape=diamond, label="Tests passing?"]
    stuck     [type="escalate", reason="validation keeps failing"]
    start -> plan -> implement -> validate -> gate
    plan -> stuck [condition="on_fail"]
    implement -> stuck [condition="on_fail"]
    gate -> exit [label="Yes", condition="outcome=success"]
    gate -> implement [label="No", condition="on_retry"]
    gate -> stuck [condition="on_exhaust"]
}'''

HUMAN = '''digraph Review {
    graph [triggers="review the release", trigger_threshold=1]
    start [shape=Mdiamond]
    exit  [shape=Msquare]
    review_gate [shape=hexagon, label="Review Changes"]
    ship [label="Ship", prompt="Ship it"]
    start -> review_gate
    review_gate -> ship [label="[A] Approve"]
    review_gate -> exit [label="[F] Fix"]
    ship -> exit
}'''

STYLESHEET = '''digraph Styled {
    graph [triggers="style it", trigger_threshold=1, model_stylesheet="* { llm_model: claude-sonnet-4-5; } .code { llm_model: gpt-5; }"]
    start [shape=Mdiamond]
    exit [shape=Msquare]
    work [label="Work", prompt="Do it", class="code", llm_model="x", thread_id="t1", fidelity="full"]
    start -> work -> exit
}'''


def findings(text: str, tmp_path, name="plan.dot") -> list[dict]:
    path = tmp_path / name
    path.write_text(text)
    return [d.to_json() for d in cli.validate_files([str(path)]) if d.severity != "info"]


def test_linear_example_maps_to_a_runnable_plan(tmp_path):
    pid, plan, found = load_dot_plan(LINEAR)
    assert pid == "Simple" and found == []
    compiled = compile_plan(pid, plan)
    assert compiled.success_path == ("run_tests", "report")
    assert compiled.nodes["report"].action == "Summarize the results for: Run tests and report"  # $goal
    assert compiled.nodes["run_tests"].verify.type == "exit_code_zero" and compiled.nodes["run_tests"].max_retries == 1
    assert [(e.src, e.dst, e.condition) for e in compiled.out_edges["run_tests"]] == [
        ("run_tests", "report", "always"), ("run_tests", "stuck", "outcome=fail")]
    assert plan["graph"]["nodes"]["run_tests"]["_attractor"] == {"timeout": "900s"}  # kept, not dropped
    assert plan["_attractor"] == {"rankdir": "LR"}


def test_branching_example_validates(tmp_path):
    found = findings(BRANCHING, tmp_path)
    assert all(d["severity"] == "warning" for d in found), found
    pid, plan, _ = load_dot_plan(BRANCHING)
    assert plan["graph"]["nodes"]["plan"]["max_retries"] == 2  # the legacy alias default_max_retry


def test_a_human_gate_plan_validates(tmp_path):
    assert [d for d in findings(HUMAN, tmp_path) if d["severity"] == "error"] == []
    pid, plan, _ = load_dot_plan(HUMAN)
    assert plan["graph"]["nodes"]["review_gate"]["type"] == "human"


def test_stylesheet_and_fidelity_are_validated_and_kept(tmp_path):
    assert findings(STYLESHEET, tmp_path) == []
    bad = STYLESHEET.replace("llm_model: gpt-5; }", "llm_model gpt-5 }").replace('"full"', '"everything"')
    rules = sorted(d["rule"] for d in findings(bad, tmp_path))
    assert rules == ["fidelity_valid", "stylesheet_syntax"]
    _, plan, _ = load_dot_plan(STYLESHEET)
    work = plan["graph"]["nodes"]["work"]
    assert work["_attractor"] == {"class": "code"}  # the rest has a meaning here: a branch agent's settings
    assert (work["llm_model"], work["thread_id"], work["fidelity"]) == ("x", "t1", "full")
    _, plan, _ = load_dot_plan(bad)
    assert plan["graph"]["nodes"]["work"]["_attractor"]["fidelity"] == "everything"  # warned, kept, not used


def test_undeclared_nodes_bad_conditions_and_bad_retry_targets(tmp_path):
    src = '''digraph Bad {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    a [label="A", verify="any_output", retry_target="nowhere"]
    start -> a -> exit
    a -> ghost [condition="ready"]
}'''
    found = {(d["rule"], d["severity"], d["line"], d["col"]) for d in findings(src, tmp_path)}
    # an edge declares its nodes (Graphviz, and the spec's own human-gate example): 'ghost' is a task without a
    # prompt that leads nowhere
    assert ("prompt_on_llm_nodes", "warning", 6, 10) in found and ("dead_end", "error", 6, 10) in found
    assert ("condition_syntax", "error", 6, 7) in found and ("retry_target_exists", "warning", 4, 5) in found
    assert not any(rule == "edge_target_exists" for rule, *_ in found)


def test_a_syntax_error_is_a_finding_with_its_position(tmp_path):
    (f,) = findings("digraph G {\n  a -- b\n}", tmp_path)
    assert (f["rule"], f["line"], f["col"]) == ("syntax", 2, 5)


# ── export and round trip ───────────────────────────────────────────────────


def comparable(plan):
    nodes = {nid: (n.type, n.name, n.action, n.tool, n.tool_hint, n.max_retries, n.pace_level, n.reason,
                   n.description, n.continue_on_fail, n.verify and (n.verify.type, n.verify.value, n.verify.fail_if))
             for nid, n in plan.nodes.items()}
    return (plan.name, plan.description, plan.domains, plan.triggers, plan.strong_triggers, plan.trigger_threshold,
            plan.stale_after_turns, plan.max_turns, plan.start, nodes,
            [(e.src, e.dst, e.condition, e.label) for e in plan.edges], plan.success_path)


@pytest.mark.parametrize("plan_id", list(json.loads(LIBRARY.read_text())["plans"]))
def test_every_shipped_plan_round_trips_through_dot(plan_id):
    raw = json.loads(LIBRARY.read_text())["plans"][plan_id]
    pid, back, found = load_dot_plan(to_dot(plan_id, raw))
    assert pid == plan_id and found == []
    assert comparable(compile_plan(pid, back)) == comparable(compile_plan(plan_id, raw))


def test_a_plan_starting_at_a_task_round_trips(tmp_path):
    from scenario import fix_loop_plan
    raw = fix_loop_plan()
    pid, back, found = load_dot_plan(to_dot("loop", raw))
    assert found == [] and comparable(compile_plan(pid, back)) == comparable(compile_plan("loop", raw))


def test_export_command_and_linear_plans(capsys, tmp_path):
    assert cli.main(["export", "--plan", "git_merge_pr"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("digraph git_merge_pr {") and parse(text).nodes["merge"].attrs["verify"] == "exit_code_zero"
    lib = tmp_path / "lib.json"
    lib.write_text(json.dumps({"plans": {"lin": {"name": "L", "steps": [{"name": "s"}]}}}))
    assert cli.main(["export", "--library", str(lib), "--plan", "lin"]) == 2
    assert "is a linear plan (steps)" in capsys.readouterr().err


# ── inspect ─────────────────────────────────────────────────────────────────


def test_inspect_json(tmp_path, capsys):
    path = tmp_path / "simple.dot"
    path.write_text(LINEAR)
    assert cli.main(["inspect", "--json", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["graph"]["name"] == "Simple"
    assert out["graph"]["attrs"]["trigger_threshold"] == 1
    run = out["nodes"]["run_tests"]
    assert run["handler_type"] == "codergen" and run["node_type"] == "task"
    assert run["attrs"]["timeout"] == {"duration_ms": 900_000, "raw": "900s"} and run["attrs"]["max_retries"] == 1
    assert out["nodes"]["start"]["handler_type"] == "start" and out["nodes"]["stuck"]["node_type"] == "escalate"
    assert {"from": "run_tests", "to": "stuck", "attrs": {"condition": "outcome=fail"}, "line": 12, "col": 15} \
        in out["edges"]
    assert [d["rule"] for d in out["diagnostics"]] == ["worst_case_turns"]
    path.write_text(LINEAR.replace('timeout="900s"', "timeout=900s"))
    cli.main(["inspect", "--json", str(path)])
    assert json.loads(capsys.readouterr().out)["nodes"]["report"]["attrs"]["timeout"] == \
        {"duration_ms": 900_000, "raw": "900s"}


def test_inspect_syntax_error(tmp_path, capsys):
    path = tmp_path / "bad.dot"
    path.write_text("digraph G {\n  a -> b\n  c [x=]\n}")
    assert cli.main(["inspect", "--json", str(path)]) == 2
    assert json.loads(capsys.readouterr().out) == {"ok": False, "error": {"message": "missing value: found ']'",
                                                                          "line": 3, "col": 8}}


# ── DOT plans inside Agent-Zero ─────────────────────────────────────────────


def test_a_dot_plan_beside_the_library_runs(monkeypatch, tmp_path):
    lib = tmp_path / "htn_plan_library.json"
    shutil.copy(LIBRARY, lib)
    shutil.copy(LIBRARY.parent / "plan_library.schema.json", tmp_path / "plan_library.schema.json")
    (tmp_path / "smoke.dot").write_text(LINEAR)
    (tmp_path / "broken.dot").write_text("digraph Broken { a -- b }")
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(lib))
    s = started("run the smoke pipeline please")
    assert s.state["plan_id"] == "Simple"
    s.run_pass(exit_ok("4 passed"))
    s.run_pass(Reply(final="Report: all good"))
    s.user("thanks")
    s.run_pass(Reply(final="ok"))
    assert verdicts(s) == [("run_tests", "success"), ("report", "success")]
    assert s.agent._htn_last_run["events"][-1]["type"] == "plan_completed"
    lines = [t for t in s.log.texts("warning") if "broken.dot" in t]
    assert lines == [f"[HTN] {lib}: DOT file {tmp_path / 'broken.dot'} is not loaded, the others keep working: "
                     f"[syntax] undirected edge '--': this format has directed edges only (use '->') "
                     f"({tmp_path / 'broken.dot'}:1:20) (fix: fix the DOT syntax)"]
    assert len(load_library_file(str(lib)).plans) == 11


# ── render ──────────────────────────────────────────────────────────────────


def test_render_dot_and_mermaid_with_a_trace(tmp_path, capsys):
    state = {"events": [{"type": "plan_activated", "node": "start", "seq": 1, "turn": 0},
                        {"type": "edge_followed", "from": "start", "to": "reproduce", "condition": "always"},
                        {"type": "node_entered", "node": "reproduce"},
                        {"type": "edge_followed", "from": "reproduce", "to": "gather_context",
                         "condition": "on_retry"},
                        {"type": "node_entered", "node": "gather_context"},
                        {"type": "edge_followed", "from": "gather_context", "to": "reproduce",
                         "condition": "on_success"},
                        {"type": "node_entered", "node": "reproduce"}], "plan_id": "bugfix_workflow"}
    trace = tmp_path / "state.json"
    trace.write_text(json.dumps(state))
    assert cli.main(["render", str(LIBRARY), "--plan", "bugfix_workflow", "--format", "dot", "--trace",
                     str(trace)]) == 0
    g = parse(capsys.readouterr().out)  # the picture is valid DOT
    assert g.nodes["reproduce"].attrs["label"].endswith("× 2\nthe run is here") and g.nodes["gather_context"].attrs["label"] == \
        "Gather more context\n× 1"
    assert "×" not in g.nodes["fix"].attrs["label"] and "penwidth" not in g.nodes["fix"].attrs
    retry = next(e for e in g.edges if (e.src, e.dst) == ("reproduce", "gather_context"))
    assert retry.attrs["penwidth"] == 2.5 and retry.attrs["label"] == "not reproduced yet (on_retry) × 1"
    assert cli.main(["render", str(LIBRARY), "--plan", "bugfix_workflow", "--format", "mermaid", "--trace",
                     str(trace)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("flowchart TD") and 'reproduce["Reproduce the issue x2 (the run is here)"]' in text
    assert 'reproduce ==>|"not reproduced yet (on_retry) x1"| gather_context' in text and "class " in text


SMOKE = '''digraph smoke_test {
    graph [goal="Prove the toolchain works", label="Smoke test", triggers="run the smoke test",
           trigger_threshold=1, retry_target="implement"]
    node [shape=box]
    start     [shape=Mdiamond]
    exit      [shape=Msquare]
    implement [label="Implement", prompt="Write hello.py printing hello for: $goal", verify="exit_code_zero"]
    run       [shape=parallelogram, label="Run it", prompt="python3 hello.py", verify="output_contains",
               verify.value="hello", goal_gate=true, max_retries=1, continue_on_fail=true]
    stuck     [type="escalate", reason="the toolchain does not work"]
    start -> implement -> run -> exit
    implement -> stuck [condition="on_exhaust"]
}'''


def test_the_smoke_test_pipeline(tmp_path, capsys):
    assert findings(SMOKE, tmp_path) == []
    path = tmp_path / "smoke.dot"
    path.write_text(SMOKE)
    assert cli.main(["simulate", str(path), "--outcomes", json.dumps(
        {"run": [{"status": "fail"}, {"status": "fail"}, {"status": "success"}]}), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the goal gate failed at the exit: back to implement (the graph's retry target), then it passes
    assert out["node_sequence"] == ["start", "implement", "run", "exit", "implement", "run", "exit"]
    assert out["final_status"] == "success" and out["attempts"] == {"implement": 2, "run": 3}
    _, plan, _ = load_dot_plan(SMOKE)
    assert plan["graph"]["nodes"]["run"]["tool"] == "code_execution_tool"


def test_render_output_is_read_by_graphviz(capsys):
    if shutil.which("dot") is None:
        pytest.skip("Graphviz is not installed here (.ci/run installs it when it can)")
    import subprocess
    assert cli.main(["render", str(LIBRARY), "--plan", "bugfix_workflow", "--format", "dot"]) == 0
    text = capsys.readouterr().out
    proc = subprocess.run(["dot", "-Tjson"], input=text.encode(), capture_output=True)
    assert proc.returncode == 0, proc.stderr
    drawn = json.loads(proc.stdout)
    assert {o["name"] for o in drawn["objects"]} >= {"reproduce", "fix", "test", "done"}


def test_render_svg_needs_graphviz(capsys):
    code = cli.main(["render", str(LIBRARY), "--plan", "bugfix_workflow", "--format", "svg"])
    captured = capsys.readouterr()
    out = captured.out
    if shutil.which("dot") is None:
        assert code == 2 and "needs Graphviz's 'dot' program, which is not installed (Debian: apt-get install " \
            "graphviz)" in captured.err
    else:
        assert code == 0 and "<svg" in out


# ── random mutations of valid files: a graph or a positioned error, never anything else ──

SEED_FILES = [LINEAR, BRANCHING, HUMAN, STYLESHEET]


@settings(max_examples=max(300, settings.default.max_examples), deadline=None)
@given(base=st.sampled_from(SEED_FILES), cuts=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 12),
                                                                st.text(max_size=6)), max_size=4))
def test_mutated_dot_parses_or_fails_with_a_position_inside_the_file(base, cuts):
    text = base
    for at, drop, insert in cuts:
        at %= len(text) + 1
        text = text[:at] + insert + text[at + drop:]
    try:
        parse(text)
    except DotSyntaxError as exc:
        lines = text.split("\n")
        assert 1 <= exc.line <= len(lines), (exc.line, len(lines))
        assert 1 <= exc.col <= len(lines[exc.line - 1]) + 1, (exc.col, lines[exc.line - 1])


# ── select and simulate ─────────────────────────────────────────────────────


def test_select_names_the_edge_and_why(capsys):
    assert cli.main(["select", str(LIBRARY), "--plan", "bugfix_workflow", "--from", "test",
                     "--outcome", '{"status": "fail"}', "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target"] == "escalate_stuck" and out["condition"] == "on_exhaust"
    assert {"to": "fix", "condition": "on_retry", "weight": 0.0, "verdict": "does not match outcome 'fail'"} \
        in out["why"]
    assert cli.main(["select", str(LIBRARY), "--plan", "bugfix_workflow", "--from", "fix",
                     "--outcome", '{"status": "retry"}', "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stay"] is True  # no on_retry edge: retried in place
    assert cli.main(["select", str(LIBRARY), "--plan", "bugfix_workflow", "--from", "test",
                     "--outcome", '{"status": "fail"}']) == 0
    assert capsys.readouterr().out.startswith("test -> escalate_stuck via on_exhaust\n")


def test_select_with_context(tmp_path, capsys):
    path = tmp_path / "lang.dot"
    path.write_text('''digraph lang {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    which [shape=diamond]
    py [prompt="pytest"]
    js [prompt="node --test"]
    start -> which
    which -> py [condition="context.lang=python"]
    which -> js [condition="context.lang=node"]
    which -> exit
    py -> exit
    js -> exit
}''')
    for ctx, want in (('{"lang": "python"}', "py"), ('{"lang": "node"}', "js"), ("{}", "exit")):
        assert cli.main(["select", str(path), "--from", "which", "--outcome", '{"status": "success"}',
                         "--context", ctx, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["target"] == want


@pytest.mark.parametrize("plan_id", list(json.loads(LIBRARY.read_text())["plans"]))
def test_simulate_every_shipped_plan(plan_id, capsys):
    assert cli.main(["simulate", str(LIBRARY), "--plan", plan_id, "--outcomes", "{}", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    plan = load_library_file(str(LIBRARY)).plans[plan_id]
    assert out["final_status"] == "success" and out["end"] == "completed"
    # the spec's completed_nodes: the start and every node left, in order (the exit ends the run)
    assert out["completed_nodes"] == out["node_sequence"][:-1] and out["completed_nodes"][0] == plan.start
    assert [n for n in out["completed_nodes"] if n in plan.success_index] == list(plan.success_path)
    assert out["node_sequence"][0] == plan.start and plan.nodes[out["node_sequence"][-1]].type == "exit"


def test_simulate_scripted_failures_escalate_with_retries_counted(capsys, tmp_path):
    outcomes = {"test": [{"status": "fail"}] * 3}
    assert cli.main(["simulate", str(LIBRARY), "--plan", "bugfix_workflow", "--outcomes", json.dumps(outcomes),
                     "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["final_status"], out["end"]) == ("fail", "escalated") and out["attempts"]["test"] == 3 and out["attempts"]["fix"] == 3
    assert out["failure_reason"] == "The bug is not fixed: the fix or its tests still fail after the allowed attempts"
    assert [s["retries_left"] for s in out["steps"] if s["node"] == "test"] == [1, 0, 0]
    expect = tmp_path / "expect.json"
    expect.write_text(json.dumps([{"type": "retry_triggered", "node": "test"},
                                  {"type": "plan_escalated", "node": "escalate_stuck"}]))
    args = ["simulate", str(LIBRARY), "--plan", "bugfix_workflow", "--outcomes", json.dumps(outcomes),
            "--expect", str(expect)]
    assert cli.main(args) == 0
    capsys.readouterr()
    expect.write_text(json.dumps([{"type": "plan_completed"}]))
    assert cli.main(args) == 1
    assert 'divergence: expected event {"type": "plan_completed"} not found in order' in capsys.readouterr().out


def test_simulate_human_gates_with_answers_and_auto_approve(tmp_path, capsys):
    path = tmp_path / "review.dot"
    path.write_text(HUMAN)
    assert cli.main(["simulate", str(path), "--outcomes", "{}", "--answers", '["F"]', "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["node_sequence"] == ["start", "review_gate", "exit"] and out["final_status"] == "success"
    assert out["questions"] == [{"node": "review_gate", "question": "Review Changes",
                                 "options": ["[A] Approve", "[F] Fix"]}]
    assert cli.main(["simulate", str(path), "--outcomes", "{}", "--auto-approve", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["node_sequence"] == ["start", "review_gate", "ship", "exit"]
    assert cli.main(["simulate", str(path), "--outcomes", "{}", "--json"]) == 0
    waiting = json.loads(capsys.readouterr().out)
    assert (waiting["final_status"], waiting["end"]) == ("fail", "waiting")
    assert waiting["failure_reason"] == "human gate 'review_gate' waits for an answer (pass --answers or --auto-approve)"


def test_simulate_captures_route_a_decision(tmp_path, capsys):
    outcomes = {"detect": [{"status": "success", "context_updates": {"lang": "node"}}]}
    src = '''digraph lang {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    detect [prompt="find the language", verify="any_output"]
    which [shape=diamond]
    py [prompt="pytest", verify="exit_code_zero"]
    js [prompt="node --test", verify="exit_code_zero"]
    stuck [type="escalate", reason="x"]
    start -> detect -> which
    detect -> stuck [condition="on_exhaust"]
    which -> py [condition="outcome=success && context.lang=python"]
    which -> js [condition="outcome=success && context.lang=node"]
    which -> stuck
    py -> exit
    js -> exit
    py -> stuck [condition="on_exhaust"]
    js -> stuck [condition="on_exhaust"]
}'''
    path = tmp_path / "lang.dot"
    path.write_text(src)
    assert cli.main(["simulate", str(path), "--outcomes", json.dumps(outcomes), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["context"] == {"lang": "node", "outcome": "success"} and "js" in out["node_sequence"] and "py" not in out["node_sequence"]


def test_simulate_a_transcript_through_the_adapters(tmp_path, capsys):
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text("\n".join(json.dumps(x) for x in [
        {"user": "fix the bug in /tmp/calc.py"},
        {"tool": "code_execution_tool", "code": "python3 calc.py", "output": "Traceback (most recent call last):\n"
                                                                            "ZeroDivisionError\n[exit:1]"},
        {"tool": "code_execution_tool", "code": "cat calc.py", "output": ""},
        {"warning": "misformatted"},
    ]))
    assert cli.main(["simulate", str(LIBRARY), "--plan", "bugfix_workflow", "--transcript", str(transcript),
                     "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["final_status"] == out["end"] == "active" and out["node_sequence"][-1] == "gather_context"
    assert [(s["node"], s["outcome"]) for s in out["steps"] if s["type"] == "node_verified"] == [
        ("reproduce", "success"), ("isolate", "fail")]


def test_a_parallel_nodes_timeout_is_each_branchs_bound():
    from graph_engine.authoring.dot_plan import load_dot_plan, to_dot
    text = ('digraph p { start [shape=Mdiamond] exit [shape=Msquare] fan [shape=component, timeout="2m"] '
            'a [prompt="a", verify="exit_code_zero"] b [prompt="b", verify="exit_code_zero"] '
            'join [shape=tripleoctagon] start -> fan fan -> a fan -> b a -> join b -> join join -> exit }')
    pid, raw, found = load_dot_plan(text)
    assert raw["graph"]["nodes"]["fan"]["timeout"] == 120.0
    again = load_dot_plan(to_dot(pid, raw))[1]
    assert again["graph"]["nodes"]["fan"]["timeout"] == 120.0  # the export keeps it
