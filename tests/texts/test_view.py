"""The workflow component's data (texts/view.py): what Agent-Zero v1.x's web UI draws, from the run's state."""

import json

import pytest

from scenario import crash, exit_fail, exit_ok, fix_loop_plan, started, use_library

from graph_engine.authoring.library import load_library_file
from graph_engine.core import control
from graph_engine.core.model import compile_plan
from graph_engine.core.state import new_state
from graph_engine.host import adapter
from graph_engine.texts import view
from graph_engine.tools.standin import LIBRARY

SHIPPED = list(load_library_file(str(LIBRARY)).plans.values())


def merged(kvps):
    """The two values in one, as the web UI extension joins them: each node with its mark, each edge with taken."""
    drawing, run = json.loads(kvps[view.KEY]), json.loads(kvps[view.RUN_KEY])
    marks = {letter: word for word, letter in view.MARKS.items()}
    assert len(run["marks"]) == len(drawing["nodes"])
    return {**run, "plan": drawing["plan"],
            "nodes": [[*n, marks[m]] for n, m in zip(drawing["nodes"], run["marks"])],
            "edges": [[*e, i in run["taken"]] for i, e in enumerate(drawing["edges"])]}


def data_of(s):
    plan = next(iter(adapter._runtimes.values())).lookup(s.state["plan_id"], s.state["plan_version"])
    return merged(view.view(plan, s.state, "primary")), plan


def marks(d):
    return {n[0]: n[5] for n in d["nodes"]}


def test_a_new_run_shows_its_current_step_and_the_controls_that_apply():
    d, plan = data_of(started())
    assert d["plan"] == "Bug Fix Workflow" and d["status"] == "active" and d["step"] == "step 1 of 5"
    assert marks(d)["reproduce"] == "current" and sum(m == "current" for m in marks(d).values()) == 1
    assert [c[1] for c in d["controls"]] == ["stop the workflow", "pause the workflow", "skip this step",
                                             "restart the workflow"]  # no retry at a first attempt, nothing to go back to


def test_steps_done_failed_and_taken_edges_follow_the_run():
    s = started()
    for reply in (crash(), exit_ok("the division at line 2"), exit_ok("guarded")):  # each judged a pass later
        s.run_pass(reply)
    d, plan = data_of(s)  # reproduce and isolate done, fix current
    m = marks(d)
    assert m["reproduce"] == m["isolate"] == "done" and m["fix"] == "current"
    taken = {(a, b) for a, b, _, t in d["edges"] if t}
    assert ("reproduce", "isolate") in taken and not any(b == "gather_context" for _, b in taken)
    back = [c for c in d["controls"] if c[2]]
    assert [(c[1], c[2]) for c in back] == [("go back to the 'Reproduce the issue' step", "reproduce"),
                                            ("go back to the 'Isolate the root cause' step", "isolate")]
    assert [control.parse(c[1]).target for c in back] == ["reproduce the issue", "isolate the root cause"]
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
    assert "retry this step" in [c[1] for c in d["controls"]]  # a step with an attempt used can have them back
    s.run_pass(exit_ok())
    ended = s.agent._htn_last_run
    plan = compile_plan("loop", fix_loop_plan(max_retries=2))
    done = merged(view.view(plan, ended, "", "/a0/usr/graph_engine/runs/c/r.svg"))
    assert done["status"] == "completed" and done["controls"] == [] and done["picture"].endswith("r.svg")
    assert merged(view.view(plan, ended, "", "/a0/r.mmd"))["picture"] == ""  # only a picture a browser opens


@pytest.mark.parametrize("plan", SHIPPED, ids=lambda p: p.id)
def test_every_shipped_plan_is_laid_out_and_fits_a_log_item(plan):
    data = view.view(plan, new_state(plan, "m", "m:0", 0))
    assert set(data) == {view.KEY, view.RUN_KEY} and all(len(v) <= view.MAX_JSON for v in data.values())
    nodes = merged(data)["nodes"]
    places = [(n[3], n[4]) for n in nodes]
    assert len(set(places)) == len(places) == len(plan.nodes)  # every node in a place of its own
    assert dict(zip([n[0] for n in nodes], places))[plan.start] == (0, 0)


def test_a_plan_too_large_to_draw_keeps_the_text_card():
    steps = [{"name": f"Step {i}", "verify": {"type": "any_output"}} for i in range(view.MAX_NODES + 1)]
    plan = compile_plan("big", {"name": "Big", "steps": steps})
    assert view.view(plan, new_state(plan, "m", "m:0", 0)) == {}
    assert view.view(None, {"status": "active"}) == {}
