"""Graph rules not covered by the bundled plans: checkpoints, decision routes, stalls, expiry, the ceiling."""

from graph_engine.core.model import compile_plan
from graph_engine.tools.standin import Reply, cmd
from scenario import events, started, use_library, verdicts

WARNING = Reply(warning="You have misformatted your message.")


def plan(nodes, edges, **extra):
    return {"name": "Rules", "triggers": ["rules please"], "trigger_threshold": 1,
            "graph": {"start": "start", "nodes": {"start": {"type": "start"}, **nodes}, "edges": edges}, **extra}


def test_checkpoint_and_decision_route_on_failure(monkeypatch, tmp_path):
    nodes = {"probe": {"type": "task", "name": "Probe", "verify": {"type": "output_contains", "value": "yes"}},
             "cp": {"type": "checkpoint", "name": "after probe"},
             "branch": {"type": "decision", "name": "Which way", "description": "Probe said yes?"},
             "happy": {"type": "task", "name": "Happy", "verify": {"type": "any_output"}},
             "sad": {"type": "task", "name": "Sad", "verify": {"type": "any_output"}},
             "done": {"type": "exit"}}
    edges = [{"from": "start", "to": "probe"}, {"from": "probe", "to": "cp", "condition": "always"},
             {"from": "cp", "to": "branch"}, {"from": "branch", "to": "happy", "condition": "on_success"},
             {"from": "branch", "to": "sad", "condition": "on_fail"}, {"from": "happy", "to": "done"},
             {"from": "sad", "to": "done"}]
    use_library(monkeypatch, tmp_path, {"rules": plan(nodes, edges)})
    s = started("rules please")
    s.run_pass(cmd("probe", "no"))
    s.run_pass(WARNING)
    assert s.state["current_node"] == "sad"
    assert events(s, "checkpoint_reached")[0]["name"] == "after probe"
    assert 'Decision "Which way" (Probe said yes?): the last check failed → Sad' in s.last_prompt()


def without_lint(monkeypatch):
    """Load plans the lint would disable: the engine's own guards must still hold."""
    from graph_engine.authoring import library
    from graph_engine.authoring.lint import PlanReport
    monkeypatch.setattr(library, "lint_plan", lambda plan: PlanReport(plan.id, (), None))


def test_no_matching_edge_stalls_with_one_warning_and_tells_the_model(monkeypatch, tmp_path):
    without_lint(monkeypatch)  # failure_unrouted would disable this plan at load
    nodes = {"only": {"type": "task", "name": "Only", "verify": {"type": "output_contains", "value": "ok"}},
             "done": {"type": "exit"}}
    use_library(monkeypatch, tmp_path, {"rules": plan(nodes, [{"from": "start", "to": "only"},
                                                              {"from": "only", "to": "done",
                                                               "condition": "on_success"}])})
    s = started("rules please")
    s.run_pass(cmd("x", "bad"))
    s.run_pass(WARNING)
    s.run_pass(WARNING)
    stalls = [t for t in s.log.texts("warning") if "stalled at 'only'" in t]
    assert len(stalls) == 1 and "add an edge for it in plan 'rules'" in stalls[0]
    assert "STALLED: step 'Only' ended with outcome 'fail' (expected 'ok' in the output)" in s.last_prompt()


def test_graph_expires_after_stale_turns_without_a_step_change(monkeypatch, tmp_path):
    nodes = {"t": {"type": "task", "name": "T", "verify": {"type": "any_output"}}, "done": {"type": "exit"}}
    use_library(monkeypatch, tmp_path, {"rules": plan(nodes, [{"from": "start", "to": "t"},
                                                              {"from": "t", "to": "done"}],
                                                      stale_after_turns=3)})
    s = started("rules please")
    for _ in range(3):
        s.run_pass(WARNING)
    assert s.state is not None
    last = s.run_pass(WARNING)
    assert s.state is None and "no step change for 3 turns" in last.prompt_extras["htn_active_plan"]
    assert events(s, "plan_expired")


def test_turn_ceiling_ends_a_run_that_keeps_moving(monkeypatch, tmp_path):
    without_lint(monkeypatch)  # cycle_unbounded would disable this plan at load
    nodes = {"a": {"type": "task", "name": "A", "verify": {"type": "any_output"}},
             "b": {"type": "task", "name": "B", "verify": {"type": "any_output"}}, "done": {"type": "exit"}}
    edges = [{"from": "start", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "a"}]
    use_library(monkeypatch, tmp_path, {"rules": plan(nodes, edges, max_turns=6)})
    s = started("rules please")
    for _ in range(7):
        s.run_pass(cmd("x", "out"))
    assert s.state is None
    assert any("reached its ceiling of 6 turns" in t for t in s.log.texts("warning"))
    assert len(verdicts(s)) == 6  # the expiring pass still judges the call before it


def test_default_ceiling_comes_from_the_budgets():
    p = compile_plan("p", plan({"a": {"type": "task", "max_retries": 2}, "b": {"type": "task"},
                                "done": {"type": "exit"}},
                               [{"from": "start", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "done"}],
                               stale_after_turns=5))
    assert p.max_turns == (3 + 1) * 5 and p.success_path == ("a", "b") and p.total_steps == 2


def test_the_ways_forward_text_follows_the_retry_count_and_its_cache_stays_bounded():
    """The context's "If it fails" lines count the attempts left; after a node's budget they no longer change,
    and a huge budget does not make the per-plan text cache grow with every failure."""
    from graph_engine.texts import render

    def one_task(max_retries):
        return compile_plan("p", {"name": "P", "graph": {"start": "t", "nodes": {
            "t": {"type": "task", "name": "T", "verify": {"type": "any_output"}, "max_retries": max_retries},
            "stuck": {"type": "escalate", "reason": "stuck"}, "done": {"type": "exit"}}, "edges": [
            {"from": "t", "to": "done", "condition": "on_success"},
            {"from": "t", "to": "stuck", "condition": "on_exhaust"}]}})

    plan = one_task(10**9)
    state = {"current_node": "t", "current_step": 0, "completed_nodes": 0, "path": ["t"], "visited": {}}
    texts = []
    for failures in range(200):
        state["visited"]["t"] = {"outcome": "pending", "attempts": failures, "failures": failures}
        texts.append(render.graph_context(plan, state))
    assert "this step again (1000000000 attempts left)" in texts[0]
    assert "this step again (999999802 attempts left)" in texts[198]
    assert len(set(texts)) == 200  # every count is shown as it is
    assert len(plan.__dict__["_render_texts"].forward) <= render.FORWARD_CACHED + 1
    small = one_task(1)
    after = []
    for failures in (1, 2, 50):  # past the budget of one retry the ways forward are the same
        state["visited"]["t"] = {"outcome": "pending", "attempts": failures, "failures": failures}
        after.append(render.graph_context(small, state).split("Check:")[1])
    assert after[0] == after[1] == after[2] and "If it fails → escalate: stuck" in after[0]
