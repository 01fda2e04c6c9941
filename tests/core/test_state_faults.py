"""A restored state is validated, not trusted; a run that ends for any reason leaves its end in its audit log
and in the last-run record; every new library fault is reported, and its recovery said."""

import json
import os
import time

import pytest
from scenario import IDLE, FixtureModel, crash, exit_fail, fix_loop_plan, library_edited, message_for, started, use_library

from graph_engine.session.audit import read_lines
from graph_engine.core.state import DATA_KEY
from graph_engine.tools.standin import Reply, Session, cmd

ISOLATE = cmd("grep -n divide /tmp/test.py", "3:    return a / b")


def audit_of(tmp_path, run_id: str) -> list[dict]:
    files = list((tmp_path / "a0" / "usr" / "graph_engine" / "runs").rglob(f"{run_id}.jsonl"))
    return [e for f in files for e in read_lines(str(f))]


def restored_with(edit) -> Session:
    """A bug-fix run mid-way, its saved state edited as a corrupted chat.json would hold it, then restored."""
    s = started()
    s.run_pass(crash())
    s.run_pass(ISOLATE)
    s.run_pass(Reply(final="Cause found."))
    saved = json.loads(json.dumps(s.agent.get_data(DATA_KEY)))
    edit(saved)
    s.agent.set_data(DATA_KEY, saved)
    s = s.restarted()
    s.user("ok, go on")
    s.run_pass(IDLE)
    return s


def set_in(path: str, value):
    def edit(state):
        *keys, last = path.split(".")
        target = state
        for k in keys:
            target = target[k]
        target[last] = value
    return edit


@pytest.mark.parametrize("path, value, said", [
    ("visited.reproduce.attempts", -4, "field 'visited.reproduce.attempts' is -4, below zero"),
    ("visited.reproduce.failures", -4, "field 'visited.reproduce.failures' is -4, below zero"),
    ("turn", -96, "field 'turn' is -96, below zero"),
    ("current_step", 9, "field 'current_step' is 9, past total_steps 5"),
    ("visited.reproduce.failures", 2, "field 'visited.reproduce' counts 1 attempt(s) and 2 failure(s)"),
    ("current_node", "fix_it", "field 'current_node' names node 'fix_it', which plan 'bugfix_workflow' does not have"),
    ("path", ["start", "nowhere"], "field 'path' names node 'nowhere'"),
    ("audit_seq", 999, "field 'audit_seq' is 999, past seq"),
    ("total_steps", 7, "field 'total_steps' is 7, plan 'bugfix_workflow' has 5"),
])
def test_a_restored_state_with_a_bad_value_is_rejected_naming_the_field_and_the_key(path, value, said):
    s = restored_with(set_in(path, value))
    assert s.state is None
    warning = [t for t in s.log.texts("warning") if "Ignored an unusable workflow state" in t]
    assert len(warning) == 1 and "in the chat's saved graph_engine_state (" in warning[0] and said in warning[0]
    last = s.agent._htn_last_run
    assert last["status"] == "rejected" and said in last["reason"] and last["events"][-1]["type"] == "state_rejected"


def test_events_out_of_order_are_rejected():
    def swap(state):
        state["events"][0]["seq"], state["events"][1]["seq"] = state["events"][1]["seq"], state["events"][0]["seq"]
    s = restored_with(swap)
    assert "field 'events' is out of order" in s.agent._htn_last_run["reason"]


def test_the_rejected_runs_audit_log_ends_with_the_rejection(tmp_path):
    s = restored_with(set_in("turn", -96))
    run_id = s.agent._htn_last_run["run_id"]
    lines = audit_of(tmp_path, run_id)
    assert lines[-1]["type"] == "state_rejected" and "turn" in lines[-1]["reason"]
    assert [e["seq"] for e in lines] == list(range(1, lines[-1]["seq"] + 1))  # continuous: nothing lost


def test_a_negative_attempt_count_is_never_shown_to_the_model():
    s = restored_with(set_in("visited.reproduce.attempts", -4))
    shown = s.records[-1].prompt_extras.get("htn_active_plan", "")
    assert "-4" not in shown and "attempt -" not in shown


@pytest.mark.parametrize("change", ["plan", "node"])
def test_a_run_whose_plan_or_node_vanished_ends_in_its_log_and_its_record(monkeypatch, tmp_path, change):
    plan = fix_loop_plan()
    path = use_library(monkeypatch, tmp_path, {"loop": plan})
    s = started("loop please")
    s.run_pass(exit_fail())  # the fix step fails once: the run is at 'fix' still
    run_id = s.state["run_id"]
    data = json.loads(path.read_text())
    if change == "plan":
        data["plans"] = {"other": dict(plan, triggers=["other words"])}
    else:
        del data["plans"]["loop"]["graph"]["nodes"]["fix"]
        data["plans"]["loop"]["graph"]["start"] = "test"
        data["plans"]["loop"]["graph"]["edges"] = [e for e in data["plans"]["loop"]["graph"]["edges"]
                                                   if "fix" not in (e["from"], e["to"])]
        data["plans"]["loop"]["graph"]["edges"].append({"from": "test", "to": "test", "condition": "on_retry"})
    path.write_text(json.dumps(data))
    os.utime(path, (time.time() + 5, time.time() + 5))
    s = s.restarted()  # the old plan version is not known to the new process
    s.user("ok, go on")
    s.run_pass(IDLE)
    last = s.agent._htn_last_run
    assert last["status"] == "ended" and last["events"][-1]["type"] == "plan_ended"
    assert audit_of(tmp_path, run_id)[-1]["type"] == "plan_ended"
    reason = last["events"][-1]["reason"]
    assert reason == ("plan 'loop' is no longer in the library" if change == "plan" else "plan 'loop' has no node 'fix'")


@pytest.mark.parametrize("failures, end, status", [({}, "plan_completed", "completed"),
                                                   ({"reproduce": 3}, "plan_escalated", "escalated")])
def test_completed_and_escalated_runs_end_in_their_log_and_record(tmp_path, failures, end, status):
    s = Session()
    s.user(message_for("bugfix_workflow"))
    model = FixtureModel("bugfix_workflow", failures)
    for _ in range(40):
        s.run_pass(model)
        if s.state is None or s.state["status"] != "active":
            break
        if not s.monologue_open:
            s.user("ok, go on")
    last = s.agent._htn_last_run
    assert last["status"] == status and audit_of(tmp_path, last["run_id"])[-1]["type"] == end


# ── the library: every new fault is reported ────────────────────────────────


def test_a_library_that_breaks_recovers_and_breaks_again_is_reported_each_time(monkeypatch, tmp_path):
    path = use_library(monkeypatch, tmp_path, {"loop": fix_loop_plan()})
    good = path.read_text()
    s = Session()
    s.user("loop please")

    def rewrite(text: str, at: float) -> None:
        path.write_text(text)
        os.utime(path, (at, at))
        library_edited()  # looked at now (once a second otherwise), and loaded
        s.run_pass(IDLE)

    now = time.time()
    rewrite("{broken", now + 10)
    rewrite(good, now + 20)
    rewrite("{broken", now + 30)
    broken = [t for t in s.log.texts("warning") if "not valid JSON" in t]
    assert len(broken) == 2  # the same fault, reported again after a recovery
    again = [t for t in s.log.texts("info") if "loads again" in t]
    assert again == [f"[HTN] The plan library {path} loads again (1 plan)"]
