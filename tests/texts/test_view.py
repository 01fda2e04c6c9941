"""The workflow component's data (texts/view.py): what Agent-Zero v1.x's web UI draws, from the run's state."""

import json

import pytest

from scenario import crash, exit_fail, exit_ok, fix_loop_plan, started, use_library

from graph_engine.authoring.library import load_library_file
from graph_engine.core import control
from graph_engine.core.model import compile_plan
from graph_engine.core.state import new_state
from graph_engine.hosts.agent_zero import adapter
from graph_engine.texts import view
from graph_engine.tools.standin import LIBRARY

SHIPPED = list(load_library_file(str(LIBRARY)).plans.values())
WORD = {letter: word for word, letter in view.MARKS.items()}


def drawing_of(kvps):
    """The drawing as the web UI extension reads it: its chunks joined, one JSON value."""
    chunks = kvps[view.KEY]
    assert isinstance(chunks, list) and all(isinstance(c, str) and len(c) <= view.MAX_JSON for c in chunks)
    return json.loads("".join(chunks))


def merged(kvps):
    """The two values in one, as the web UI extension joins them: each node with its mark, each edge with taken."""
    drawing, run = drawing_of(kvps), json.loads(kvps[view.RUN_KEY])
    assert len(run["marks"]) == len(drawing["nodes"])
    return {**run, "plan": drawing["plan"],
            "nodes": [[*n, WORD[m]] for n, m in zip(drawing["nodes"], run["marks"])],
            "edges": [[drawing["nodes"][a][0], drawing["nodes"][b][0], c, i in run["taken"]]
                      for i, (a, b, c) in enumerate(drawing["edges"])]}


def data_of(s):
    plan = next(iter(adapter._runtimes.values())).lookup(s.state["plan_id"], s.state["plan_version"])
    return merged(view.view(plan, s.state, "primary")), plan


def marks(d):
    return {n[0]: n[3] for n in d["nodes"]}


def chain(n: int) -> dict:
    """A chain of n - 3 task nodes (n nodes in all), each with a loop back and a shared escalation (a hub)."""
    nodes = {"start": {"type": "start"}, "stuck": {"type": "escalate", "name": "Stuck", "reason": "stuck"},
             "done": {"type": "exit", "name": "Done"}}
    tasks = n - 3
    edges = [{"from": "start", "to": "t0"}]
    for i in range(tasks):
        nodes[f"t{i}"] = {"type": "task", "name": f"Step {i}", "verify": {"type": "any_output"}, "max_retries": 1}
        edges += [{"from": f"t{i}", "to": f"t{i + 1}" if i + 1 < tasks else "done", "condition": "on_success"},
                  {"from": f"t{i}", "to": "stuck", "condition": "on_exhaust"}]
        if i:
            edges.append({"from": f"t{i}", "to": f"t{i - 1}", "condition": "on_retry"})
    return {"name": f"Chain of {n}", "graph": {"start": "start", "nodes": nodes, "edges": edges}}


def at_step(plan, k: int, failed_first: tuple[int, ...] = ()) -> dict:
    """A run of a chain plan at its task k, the tasks before it done (those in ``failed_first`` after a failure)."""
    state = new_state(plan, "m", "m:0", 0)
    done = [f"t{i}" for i in range(k)]
    state.update(current_node=f"t{k}", path=(["start"] + done + [f"t{k}"])[-50:], steps_completed=done,
                 current_step=k, visited={
                     **{nid: {"outcome": "success", "attempts": 1 + (i in failed_first), "completed": True,
                              "failures": int(i in failed_first)} for i, nid in enumerate(done)},
                     f"t{k}": {"outcome": "pending", "attempts": 0, "failures": 0}})
    return state


def test_a_new_run_shows_its_current_step_and_the_controls_that_apply():
    d, plan = data_of(started())
    assert d["plan"] == "Bug Fix Workflow" and d["status"] == "active" and d["step"] == "step 1 of 5"
    assert marks(d)["reproduce"] == "current" and sum(m == "current" for m in marks(d).values()) == 1
    assert marks(d)["start"] == "passed"  # the run began there
    assert [c[1] for c in d["controls"]] == ["stop", "pause", "skip", "restart"]  # no retry at a first attempt
    assert [c[3] for c in d["controls"]] == ["stop the workflow", "pause the workflow", "skip this step",
                                             "restart the workflow"]  # the words a person types for each
    assert "window" not in d  # a small plan is drawn whole


def test_steps_done_failed_and_taken_edges_follow_the_run():
    s = started()
    for reply in (crash(), exit_ok("the division at line 2"), exit_ok("guarded")):  # each judged a pass later
        s.run_pass(reply)
    d, plan = data_of(s)  # reproduce and isolate done, fix current
    m = marks(d)
    assert m["reproduce"] == m["isolate"] == "done" and m["fix"] == "current"
    assert m["start"] == m["decide_approach"] == "passed"  # the decision the run went through is marked
    assert m["gather_context"] == m["escalate_stuck"] == "pending"
    taken = {(a, b) for a, b, _, t in d["edges"] if t}
    assert ("reproduce", "isolate") in taken and not any(b == "gather_context" for _, b in taken)
    back = [c for c in d["controls"] if c[1] == "back"]
    assert [(c[3], c[2]) for c in back] == [("go back to the 'Reproduce the issue' step", "reproduce"),
                                            ("go back to the 'Isolate the root cause' step", "isolate")]
    assert [control.parse(c[3]).target for c in back] == ["reproduce the issue", "isolate the root cause"]
    assert [control.parse(c[3]).kind for c in d["controls"]] == [c[1] for c in d["controls"]]
    assert d["check"]["step"] == "Isolate the root cause" and d["check"]["outcome"] == "success"


def test_a_failed_attempt_offers_a_retry_and_an_ended_run_offers_nothing(monkeypatch, tmp_path):
    use_library(monkeypatch, tmp_path, {"loop": fix_loop_plan(max_retries=2)})
    s = started("loop please")
    for reply in (exit_ok("patched"), exit_fail(), exit_ok("patched again")):  # fix, test failed, fix again
        s.run_pass(reply)
    d, _ = data_of(s)
    assert marks(d)["fix"] == "current" and marks(d)["test"] == "failed"
    s.run_pass(exit_ok())
    d, _ = data_of(s)
    assert marks(d)["test"] == "current" and d["attempt"] == "2 of 3"
    assert "retry" in [c[1] for c in d["controls"]]  # a step with an attempt used can have them back
    s.run_pass(exit_ok())
    ended = s.agent._htn_last_run
    plan = compile_plan("loop", fix_loop_plan(max_retries=2))
    done = merged(view.view(plan, ended, "", "/a0/usr/graph_engine/runs/c/r.svg"))
    assert done["status"] == "completed" and done["controls"] == [] and done["picture"].endswith("r.svg")
    assert marks(done)["test"] == "recovered"  # it failed, then passed: not a clean pass
    assert marks(done)["fix"] == "done" and marks(done)["done"] == "reached"
    assert merged(view.view(plan, ended, "", "/a0/r.mmd"))["picture"] == ""  # only a picture a browser opens


def test_going_back_leaves_the_steps_after_it_unmarked():
    s = started()
    for reply in (crash(), exit_ok("the division at line 2")):
        s.run_pass(reply)
    s.user("go back to the reproduce step")
    s.run_pass(exit_ok())
    d, _ = data_of(s)
    m = marks(d)
    assert m["reproduce"] == "current" and m["start"] == "passed"
    assert m["isolate"] == m["decide_approach"] == m["fix"] == "pending"


@pytest.mark.parametrize("plan", SHIPPED, ids=lambda p: p.id)
def test_every_shipped_plan_is_drawn_and_fits_a_log_item(plan):
    data = view.view(plan, new_state(plan, "m", "m:0", 0))
    assert set(data) == {view.KEY, view.RUN_KEY} and len(data[view.RUN_KEY]) <= view.MAX_JSON
    d = merged(data)
    assert [n[0] for n in d["nodes"]] == list(plan.nodes) and len(d["edges"]) == len(plan.edges)
    assert all(n[1] == plan.nodes[n[0]].name for n in d["nodes"])  # names whole: the browser wraps them


@pytest.mark.parametrize("size", [40, 100, 500])
def test_a_large_plan_travels_in_chunks_and_shows_the_steps_around_the_current_one(size):
    plan = compile_plan("chain", chain(size))
    k = (size - 3) // 2
    data = view.view(plan, at_step(plan, k, failed_first=(k - 1,)))
    drawing, run = drawing_of(data), json.loads(data[view.RUN_KEY])
    assert len(drawing["nodes"]) == size and len(drawing["edges"]) == len(plan.edges)
    assert len(data[view.KEY]) == -(-len("".join(data[view.KEY])) // view.MAX_JSON)  # as few chunks as fit
    window = run["window"]
    ids = [drawing["nodes"][i][0] for i in window]
    assert len(window) == view.WINDOW and window == sorted(window)
    assert {f"t{k - 1}", f"t{k}", f"t{k + 1}", "stuck"} <= set(ids)  # the steps around it and where it escalates
    if size <= view.FULL_MARKS:
        assert len(run["marks"]) == size
        shown = dict(zip([n[0] for n in drawing["nodes"]], run["marks"]))
    else:  # the window's marks only: a pass costs the same whatever the plan's size
        assert len(run["marks"]) == len(window)
        shown = dict(zip(ids, run["marks"]))
    assert shown[f"t{k}"] == "c" and shown[f"t{k - 1}"] == "e" and shown[f"t{k - 2}"] == "d"
    assert shown[f"t{k + 1}"] == "p"
    back = [c[2] for c in run["controls"] if c[1] == "back"]
    assert back == [f"t{i}" for i in range(k - view.BACK_MAX, k)]  # the latest steps done, a bounded list
    assert len(data[view.RUN_KEY]) < 2_000


def test_the_window_is_walked_from_the_current_step_not_through_a_hub():
    plan = compile_plan("chain", chain(500))
    run = json.loads(view.view(plan, at_step(plan, 3))[view.RUN_KEY])
    ids = {list(plan.nodes)[i] for i in run["window"]}
    assert {"start", "t0", "t3", "t10", "stuck"} <= ids and not {"t22", "t490"} & ids


def test_a_plan_too_large_to_draw_keeps_the_text_card():
    plan = compile_plan("big", chain(view.MAX_NODES + 1))
    assert view.view(plan, new_state(plan, "m", "m:0", 0)) == {}
    assert view.view(None, {"status": "active"}) == {}
    steps = [{"name": f"Step {i}", "verify": {"type": "any_output"}} for i in range(view.FOLD_AT + 10)]
    linear = compile_plan("linear", {"name": "Long linear", "steps": steps})
    run = json.loads(view.view(linear, new_state(linear, "m", "m:0", 0))[view.RUN_KEY])
    assert run["marks"][0] == "c" and len(run["window"]) == view.WINDOW  # a long linear plan is folded too
