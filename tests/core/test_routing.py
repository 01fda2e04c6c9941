"""Routing: each step of the edge-selection order, captures routing a decision, goal gates, human gates."""

import pytest
from scenario import events, exit_fail, exit_ok, started, use_library, verdicts

from graph_engine.core.model import compile_plan
from graph_engine.core.routing import ConditionError, evaluate, parse_condition, select_edge
from graph_engine.tools.standin import Reply, cmd


def plan_with(edges, node_type="task", extra_nodes=None):
    nodes = {"start": {"type": "start"}, "n": {"type": node_type, "verify": {"type": "any_output"}},
             "a": {"type": "task"}, "b": {"type": "task"}, "c": {"type": "task"}, "done": {"type": "exit"}}
    if node_type != "task":
        nodes["n"].pop("verify")
    nodes.update(extra_nodes or {})
    return compile_plan("p", {"name": "P", "graph": {"start": "start", "nodes": nodes, "edges": [
        {"from": "start", "to": "n"}, *[dict(e, **{"from": "n"}) for e in edges]]}})


def target(plan, outcome, context=None, kind="task"):
    edge, why, stay = select_edge(plan, "n", outcome, context or {}, kind)
    return "stay" if stay else (edge.dst if edge else None)


def test_conditions_parse_and_evaluate():
    clauses = parse_condition("outcome=success && context.lang=python && preferred_label!=Skip")
    assert evaluate(clauses, {"status": "success"}, {"lang": "python"})
    assert not evaluate(clauses, {"status": "success"}, {"lang": "Python"})  # exact, case-sensitive
    assert not evaluate(clauses, {"status": "success", "preferred_label": "Skip"}, {"lang": "python"})
    assert evaluate(parse_condition("context.missing="), {}, {})  # a missing key reads as ""
    for bad in ("ready", "outcome=maybe", "colour=red", "outcome==success"):
        with pytest.raises(ConditionError):
            parse_condition(bad)


def test_step_1_matching_conditional_edges_by_weight_then_expressions_then_target():
    """Spec 3.3: 'SORT edges BY (weight DESCENDING, to_node ASCENDING)' among the edges whose condition matches;
    a shorthand (this pack's) comes after an expression."""
    p = plan_with([{"to": "b", "condition": "on_success"}, {"to": "c", "condition": "outcome=success"},
                   {"to": "a", "condition": "outcome=success && context.fast=yes"}])
    assert target(p, {"status": "success"}) == "c"  # an expression beats a shorthand
    assert target(p, {"status": "success"}, {"fast": "yes"}) == "a"  # both expressions match: the target id
    p = plan_with([{"to": "z", "condition": "outcome=success && context.fast=yes"},
                   {"to": "c", "condition": "outcome=success"}], extra_nodes={"z": {"type": "task"}})
    assert target(p, {"status": "success"}, {"fast": "yes"}) == "c"  # more clauses do not win, the id does
    p = plan_with([{"to": "b", "condition": "on_success", "weight": 2}, {"to": "a", "condition": "outcome=success"}])
    assert target(p, {"status": "success"}) == "b"  # weight first
    p = plan_with([{"to": "b", "condition": "outcome=success"}, {"to": "a", "condition": "outcome!=fail"}])
    assert target(p, {"status": "success"}) == "a"  # then the target id


def test_step_2_a_retry_without_a_route_stays():
    p = plan_with([{"to": "a", "condition": "on_success"}, {"to": "b"}])
    assert target(p, {"status": "retry"}) == "stay"
    assert target(p, {"status": "fail"}) == "b"  # an exhausted failure falls through to the unconditional edge


def test_steps_3_to_5_unconditional_edges():
    p = plan_with([{"to": "a", "label": "[A] Approve"}, {"to": "b", "label": "F) Fix", "weight": 1},
                   {"to": "c", "label": "Cancel"}], node_type="human")
    assert target(p, {"status": "success", "preferred_label": "approve"}, kind="human") == "a"
    assert target(p, {"status": "success", "preferred_label": " fix "}, kind="human") == "b"
    assert target(p, {"status": "success", "suggested_next_ids": ["x", "c"]}, kind="human") == "c"
    assert target(p, {"status": "success"}, kind="human") == "b"  # highest weight
    p = plan_with([{"to": "b"}, {"to": "a"}])
    assert target(p, {"status": "success"}) == "a"  # equal weights: lexical target id


def test_step_6_no_edge():
    p = plan_with([{"to": "a", "condition": "on_success"}])
    assert target(p, {"status": "fail"}) is None and target(p, {"status": "skipped"}) is None


def test_decisions_route_on_the_previous_tasks_outcome():
    p = plan_with([{"to": "a", "condition": "on_success"}, {"to": "b", "condition": "on_retry"},
                   {"to": "c", "condition": "on_fail"}], node_type="decision")
    assert [target(p, {"status": s}, kind="decision") for s in ("success", "retry", "fail")] == ["a", "c", "c"]


# ── captures route a decision (in Agent-Zero) ───────────────────────────────


def detect_plan():
    return {"name": "Test by language", "triggers": ["run the right tests"], "trigger_threshold": 1, "graph": {
        "start": "detect",
        "nodes": {
            "detect": {"type": "task", "name": "Detect the language",
                       "verify": {"type": "any_output", "capture": r"(?P<lang>python|node)"}},
            "which": {"type": "decision", "description": "Python or JavaScript?"},
            "pytest": {"type": "task", "name": "Run pytest", "verify": {"type": "exit_code_zero"}},
            "nodetest": {"type": "task", "name": "Run node --test", "verify": {"type": "exit_code_zero"}},
            "unknown": {"type": "escalate", "reason": "no known language"},
            "done": {"type": "exit"}},
        "edges": [
            {"from": "detect", "to": "which", "condition": "on_success"},
            {"from": "detect", "to": "unknown", "condition": "on_exhaust"},
            {"from": "which", "to": "pytest", "condition": "outcome=success && context.lang=python"},
            {"from": "which", "to": "nodetest", "condition": "outcome=success && context.lang=node"},
            {"from": "which", "to": "unknown", "condition": "on_fail"},
            {"from": "which", "to": "unknown"},
            {"from": "pytest", "to": "done", "condition": "on_success"},
            {"from": "pytest", "to": "unknown", "condition": "on_exhaust"},
            {"from": "nodetest", "to": "done", "condition": "on_success"},
            {"from": "nodetest", "to": "unknown", "condition": "on_exhaust"}]}}


@pytest.mark.parametrize("listing, branch", [("setup.py\npython 3.11", "pytest"), ("package.json\nnode v20", "nodetest"),
                                             ("Makefile\nREADME", None)])
def test_a_captured_value_routes_the_decision(monkeypatch, tmp_path, listing, branch):
    use_library(monkeypatch, tmp_path, {"lang": detect_plan()})
    s = started("run the right tests")
    s.run_pass(cmd("ls; head -1 .tool-versions", listing))
    s.run_pass(Reply(warning="x"))
    if branch is None:
        assert s.state["status"] == "escalated"
        return
    assert s.state["current_node"] == branch
    assert s.state["context"]["lang"] == listing.split()[-2]
    assert events(s, "node_verified")[0]["captured"] == {"lang": listing.split()[-2]}


# ── goal gates ──────────────────────────────────────────────────────────────


def gate_plan(retry_target="build"):
    return {"name": "Gated", "triggers": ["gated please"], "trigger_threshold": 1, "graph": {
        "start": "build",
        "nodes": {"build": {"type": "task", "verify": {"type": "exit_code_zero"}},
                  "check": {"type": "task", "verify": {"type": "exit_code_zero"}, "goal_gate": True,
                            "max_retries": 1, "continue_on_fail": True, **({"retry_target": retry_target}
                                                                            if retry_target else {})},
                  "stuck": {"type": "escalate", "reason": "x"},
                  "done": {"type": "exit"}},
        "edges": [{"from": "build", "to": "check", "condition": "on_success"},
                  {"from": "build", "to": "stuck", "condition": "on_exhaust"},
                  {"from": "check", "to": "done"}]}}


def test_an_unsatisfied_goal_gate_jumps_to_its_retry_target(monkeypatch, tmp_path):
    use_library(monkeypatch, tmp_path, {"g": gate_plan()})
    s = started("gated please")
    s.run_pass(exit_ok())      # build
    s.run_pass(exit_fail())    # check fails (retry in place)
    s.run_pass(exit_fail())    # check exhausted: always -> done, but the gate is not satisfied
    s.run_pass(Reply(warning="x"))
    assert s.state["current_node"] == "build"
    assert [e["node"] for e in events(s, "goal_gate_unsatisfied")] == ["check"]
    s.run_pass(exit_ok())      # build again
    s.run_pass(exit_ok())      # check passes now
    s.run_pass(Reply(warning="x"))
    assert s.agent._htn_last_run["events"][-1]["type"] == "plan_completed"


def test_a_goal_gate_without_a_target_ends_the_plan(monkeypatch, tmp_path):
    use_library(monkeypatch, tmp_path, {"g": gate_plan(retry_target="")})
    s = started("gated please")
    for reply in (exit_ok(), exit_fail(), exit_fail(), Reply(warning="x")):
        s.run_pass(reply)
    assert s.state is None and s.agent._htn_last_run["status"] == "aborted"
    assert any("goal gate 'check' is not satisfied and names no retry target" in t for t in s.log.texts("info"))


# ── human gates in chat ─────────────────────────────────────────────────────


def review_plan(default=""):
    return {"name": "Release review", "triggers": ["review the release"], "trigger_threshold": 1, "graph": {
        "start": "build",
        "nodes": {"build": {"type": "task", "name": "Build", "verify": {"type": "exit_code_zero"}},
                  "ask": {"type": "human", "name": "Review", "description": "Ship the release or fix it first?",
                          **({"default_choice": default} if default else {})},
                  "ship": {"type": "task", "name": "Ship", "verify": {"type": "exit_code_zero"}},
                  "fix": {"type": "task", "name": "Fix", "verify": {"type": "exit_code_zero"}},
                  "stuck": {"type": "escalate", "reason": "x"},
                  "done": {"type": "exit"}},
        "edges": [{"from": "build", "to": "ask", "condition": "on_success"},
                  {"from": "build", "to": "stuck", "condition": "on_exhaust"},
                  {"from": "ask", "to": "ship", "label": "[A] Approve"},
                  {"from": "ask", "to": "fix", "label": "[F] Fix first"},
                  {"from": "ship", "to": "done", "condition": "on_success"},
                  {"from": "ship", "to": "stuck", "condition": "on_exhaust"},
                  {"from": "fix", "to": "ask", "condition": "on_success"},
                  {"from": "fix", "to": "stuck", "condition": "on_exhaust"}]}}


def at_the_gate(monkeypatch, tmp_path, default=""):
    use_library(monkeypatch, tmp_path, {"r": review_plan(default)})
    s = started("review the release")
    s.run_pass(exit_ok())                      # build passes -> the gate
    record = s.run_pass(Reply(final="Ship the release or fix it first? [A] Approve / [F] Fix first"))
    told = record.prompt_extras["htn_active_plan"]
    assert "Question for the user: Ship the release or fix it first?" in told
    assert "Options: [A] Approve; [F] Fix first" in told and "using the response tool, and stop" in told
    return s


@pytest.mark.parametrize("answer, node", [("a", "ship"), ("F", "fix"), ("approve", "ship"), ("Fix first.", "fix")])
def test_the_answer_routes_by_key_or_label(monkeypatch, tmp_path, answer, node):
    s = at_the_gate(monkeypatch, tmp_path)
    s.user(answer)
    s.run_pass(Reply(warning="x"))
    assert s.state["current_node"] == node and s.state["plan_id"] == "r"
    assert events(s, "human_answered")[0]["answer"] == answer


def test_an_unmatched_answer_is_asked_again_then_the_default_is_taken(monkeypatch, tmp_path):
    s = at_the_gate(monkeypatch, tmp_path, default="F")
    s.user("hmm, not sure")
    record = s.run_pass(Reply(final="Please choose: [A] Approve / [F] Fix first"))
    assert s.state["current_node"] == "ask" and "matches no option; ask again" in record.prompt_extras[
        "htn_active_plan"]
    s.user("whatever")
    s.run_pass(Reply(warning="x"))
    assert s.state["current_node"] == "fix" and events(s, "human_answered")[0]["by"] == "default choice"


def test_without_a_default_two_misses_end_the_plan(monkeypatch, tmp_path):
    s = at_the_gate(monkeypatch, tmp_path)
    for answer in ("maybe", "later"):
        s.user(answer)
        s.run_pass(Reply(final="ok"))
    assert s.state is None
    assert any("the answers to 'Review' matched none of its options and it has no default choice" in t
               for t in s.log.texts("info"))


def test_human_gate_loop_back_and_finish(monkeypatch, tmp_path):
    s = at_the_gate(monkeypatch, tmp_path)
    s.user("f")
    s.run_pass(exit_ok("fixed"))               # fix
    s.run_pass(Reply(final="Ship now? [A] Approve / [F] Fix first"))
    s.user("A")
    s.run_pass(exit_ok("shipped"))             # ship
    s.run_pass(Reply(warning="x"))
    assert [n for n, _ in verdicts(s)] == ["build", "fix", "ship"]
    assert s.agent._htn_last_run["events"][-1]["type"] == "plan_completed"


# ── parallel branches, one after another ────────────────────────────────────


def parallel_plan():
    return {"name": "Checks", "triggers": ["run all checks"], "trigger_threshold": 1, "graph": {
        "start": "fan",
        "nodes": {"fan": {"type": "parallel", "name": "All checks"},
                  "lint": {"type": "task", "name": "Lint", "verify": {"type": "exit_code_zero"}},
                  "types": {"type": "task", "name": "Type check", "verify": {"type": "exit_code_zero"}},
                  "join": {"type": "fan_in"},
                  "stuck": {"type": "escalate", "reason": "a check failed"},
                  "done": {"type": "exit"}},
        "edges": [{"from": "fan", "to": "lint"}, {"from": "fan", "to": "types"},
                  {"from": "lint", "to": "join"}, {"from": "types", "to": "join"},
                  {"from": "join", "to": "done", "condition": "on_success"},
                  {"from": "join", "to": "stuck", "condition": "on_fail"}]}}


@pytest.mark.parametrize("second, end", [(exit_ok, "plan_completed"), (exit_fail, "plan_escalated")])
def test_branches_run_in_order_and_the_fan_in_routes_on_all_of_them(monkeypatch, tmp_path, second, end):
    monkeypatch.setenv("GRAPH_ENGINE_PARALLEL_BRANCHES", "off")  # one after another (at once: tests/host)
    use_library(monkeypatch, tmp_path, {"c": parallel_plan()})
    s = started("run all checks")
    assert s.state["current_node"] == "lint"
    s.run_pass(exit_ok())
    s.run_pass(second())
    s.run_pass(Reply(warning="x"))
    assert [n for n, _ in verdicts(s)] == ["lint", "types"]
    final = s.agent._htn_last_run["events"]
    assert [e["type"] for e in final if e["type"].startswith("parallel_")] == [
        "parallel_started", "parallel_branch", "parallel_joined"]
    assert final[-1]["type"] == end


def test_a_new_request_at_a_human_gate_starts_that_plan(monkeypatch, tmp_path):
    import json as _json
    from graph_engine.tools.standin import LIBRARY
    plans = _json.loads(LIBRARY.read_text())["plans"]
    plans["r"] = review_plan()
    use_library(monkeypatch, tmp_path, plans)
    s = started("review the release")
    s.run_pass(exit_ok())
    s.run_pass(Reply(final="Ship the release or fix it first? [A] Approve / [F] Fix first"))
    s.user("actually, fix the bug in /tmp/calc.py first")
    s.run_pass(Reply(warning="x"))
    assert s.state["plan_id"] == "bugfix_workflow" and events(s, "human_reasked") == []


def test_explain_shows_the_human_gate_answer(monkeypatch, tmp_path, capsys):
    from graph_engine.tools import cli
    s = at_the_gate(monkeypatch, tmp_path)
    s.user("F")
    s.run_pass(Reply(warning="x"))
    state = tmp_path / "state.json"
    state.write_text(__import__("json").dumps(s.state))
    library = tmp_path / "htn_plan_library.json"
    assert cli.main(["explain", str(state), "--library", str(library)]) == 0
    out = capsys.readouterr().out
    assert "ask  human gate (answer 'F' picked '[F] Fix first' by answer)" in out
    assert "[F] Fix first -> fix                      taken" in out
    assert "[A] Approve -> ship                     not chosen" in out


def test_the_engines_remembered_routes_equal_a_fresh_selection_and_never_depend_on_context():
    """The hot path (explain=False) remembers routes per (node, kind, status); every remembered route must be
    what a fresh selection gives, for every node of the shipped plans, and context-dependent nodes are
    never remembered."""
    from graph_engine.authoring.library import load_library_file
    from graph_engine.core.routing import STATUSES
    from graph_engine.tools.standin import LIBRARY

    for plan in load_library_file(str(LIBRARY)).plans.values():
        for node_id in plan.nodes:
            for kind in ("task", "decision", "pass"):
                for status in STATUSES:
                    fresh = select_edge(plan, node_id, {"status": status}, {}, kind)
                    fast = select_edge(plan, node_id, {"status": status}, {}, kind, explain=False)
                    again = select_edge(plan, node_id, {"status": status}, {}, kind, explain=False)
                    assert (fast[0], fast[2]) == (again[0], again[2]) == (fresh[0], fresh[2]), (plan.id, node_id)
    p = plan_with([{"to": "a", "condition": "context.lang=python"}, {"to": "b", "condition": "always"}])
    for lang, want in (("python", "a"), ("js", "b"), ("python", "a")):
        edge, _, _ = select_edge(p, "n", {"status": "success"}, {"lang": lang}, "task", explain=False)
        assert edge.dst == want
    edge, _, _ = select_edge(p, "n", {"status": "success", "preferred_label": ""}, {}, "task", explain=False)
    assert edge.dst == "b"
    q = plan_with([{"to": "a", "condition": "always", "label": "Alpha"}, {"to": "b", "condition": "always",
                                                                         "label": "Beta", "weight": 1}])
    assert select_edge(q, "n", {"status": "success"}, {}, "task", explain=False)[0].dst == "b"
    assert select_edge(q, "n", {"status": "success", "preferred_label": "Alpha"}, {}, "task",
                       explain=False)[0].dst == "a"  # a preferred label is never answered from memory


def test_select_routes_a_fan_in_as_the_engine_and_the_lint_do():
    """One table says how a node's edges are read (routing.route_kind): a fan_in routes like a decision in the
    engine, the lint and `graph-engine select` alike (a failed branch: on_fail first, then on_exhaust)."""
    from graph_engine.core import routing
    from graph_engine.core.routing import route_kind
    from graph_engine.tools import simulate
    raw = parallel_plan()
    raw["graph"]["nodes"]["other"] = {"type": "exit"}
    raw["graph"]["edges"].append({"from": "join", "to": "other", "condition": "on_exhaust"})
    plan = compile_plan("c", raw)
    assert route_kind("fan_in") == "decision" and routing._kind(plan.nodes["join"]) == "decision"
    assert simulate.select(plan, "join", {"status": "fail"}, {})["target"] == "stuck"
    assert simulate.select(plan, "join", {"status": "retry"}, {})["target"] == "stuck"


# ── a run whose edges carry weight (Attractor spec 3.3, steps 1 and 4-5) ───

WEIGHTED_DOT = """digraph weighted {
  graph [goal="Route by weight", triggers="route by weight please", trigger_threshold=1]
  start [shape=Mdiamond]
  done [shape=Msquare]
  light [label="Light", prompt="ls"]
  heavy [label="Heavy", prompt="ls", verify="any_output"]
  also [label="Also", prompt="ls"]
  tie_b [label="Tie B", prompt="ls"]
  tie_a [label="Tie A", prompt="ls"]
  start -> light [weight=1]
  start -> heavy [weight=5]
  heavy -> also [condition="outcome=success", weight=1]
  heavy -> tie_b [condition="outcome=success", weight=3]
  heavy -> tie_a [condition="outcome!=fail", weight=3]
  heavy -> done [condition="outcome=fail"]
  light -> done
  also -> done
  tie_a -> done
  tie_b -> done
}
"""


def test_a_run_whose_edges_carry_weight_takes_the_heaviest_then_the_first_target_id(monkeypatch, tmp_path):
    """Unconditional edges: the heaviest; matching conditional edges: the heaviest, ties by target id (tie_a before
    tie_b though tie_b is listed first).  The engine in a run and `select` agree."""
    from graph_engine.authoring.dot import parse
    from graph_engine.authoring.dot_plan import to_plan
    from graph_engine.tools import simulate

    plan_id, raw, found = to_plan(parse(WEIGHTED_DOT))
    assert [d for d in found if d.severity == "error"] == []
    use_library(monkeypatch, tmp_path, {plan_id: raw})
    s = started("route by weight please")
    assert s.state["current_node"] == "heavy"
    s.run_pass(cmd("ls", "README.md\n"))
    s.run_pass(Reply(warning="x"))
    assert s.state["current_node"] == "tie_a"
    assert [e["to"] for e in events(s, "edge_followed")] == ["heavy", "tie_a"]
    plan = compile_plan(plan_id, raw)
    assert simulate.select(plan, "start", {"status": "success"}, {})["target"] == "heavy"
    assert simulate.select(plan, "heavy", {"status": "success"}, {})["target"] == "tie_a"


def test_the_engine_and_the_texts_read_routes_from_routing_not_from_the_linter():
    """One routing model: where an outcome leads (resolve, settle, reachable) lives in routing; the engine and the
    texts the model reads import it from there, so a pass never loads the linter."""
    import subprocess
    import sys

    code = ("import sys, graph_engine.core.engine, graph_engine.texts.render, graph_engine.texts.card; "
            "print(sorted(m for m in sys.modules if m in ('graph_engine.authoring.lint', 'graph_engine.core.routing')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['graph_engine.core.routing']"
    from graph_engine.authoring import lint
    from graph_engine.texts import render
    from graph_engine.core import routing
    assert lint.resolve is routing.resolve and render.resolve is routing.resolve
