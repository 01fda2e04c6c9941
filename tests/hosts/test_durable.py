"""Durable runs: restart and resume, the audit log, SALUTE on every ending, PACE emergency, the supervisor."""

import hashlib
import json
import os
import time

import pytest
from scenario import IDLE, FixtureModel, events, exit_ok, fix_loop_plan, message_for, use_library

from graph_engine.session.audit import read_lines, replay_path
from graph_engine.tools.standin import FIXTURES, Agent, Reply, Session, cmd
from graph_engine.core.state import DATA_KEY

ROLES = FIXTURES / "organizations" / "roles"


def start(plan: str, agent: Agent | None = None) -> Session:
    s = Session(agent=agent)
    s.user(message_for(plan))
    s.run_pass(IDLE)  # the first call produced no tool result
    return s


def drive(s: Session, model, restart_at: int | None, continue_at: int, limit: int = 60) -> Session:
    """Run passes; at pass ``continue_at`` the user writes "continue" (after a restart when asked)."""
    for n in range(limit):
        if s.state is None or s.state["status"] != "active":
            break
        if n == continue_at:
            if restart_at == n:
                s = s.restarted()
            s.user("continue")
        elif not s.monologue_open:
            s.user("thanks")
        s.run_pass(model)
    return s


def comparable(state: dict) -> list[dict]:
    return [{k: v for k, v in e.items() if k not in ("seq", "cost_ms")} for e in state["events"]
            if e["type"] != "run_resumed"]


@pytest.mark.parametrize("at", [1, 4, 7])
def test_kill_and_resume_matches_an_uninterrupted_run(at):
    failures = {"reproduce": 1, "test": 1}
    a = drive(start("bugfix_workflow"), FixtureModel("bugfix_workflow", failures), None, at)
    b = drive(start("bugfix_workflow"), FixtureModel("bugfix_workflow", failures), at, at)
    ra, rb = a.agent._htn_last_run, b.agent._htn_last_run
    assert ra["events"][-1]["type"] == rb["events"][-1]["type"] == "plan_completed"
    assert rb["path"] == ra["path"] and rb["visited"] == ra["visited"] and rb["turn"] == ra["turn"]
    assert comparable(rb) == comparable(ra)
    assert [e["type"] for e in rb["events"]].count("run_resumed") == 1


def test_resume_tells_the_model_and_the_log_and_keeps_retry_counts():
    s = start("bugfix_workflow")
    model = FixtureModel("bugfix_workflow", {"reproduce": 1})
    for _ in range(3):
        s.run_pass(model)
    s.run_pass(Reply(final="Pausing here."))  # the last result before the restart was judged
    before = json.loads(json.dumps(s.state))
    assert before["visited"]["reproduce"]["failures"] == 1
    s = s.restarted()
    assert getattr(s.agent, "_htn_state", None) is None and s.agent.get_data(DATA_KEY)["run_id"] == before["run_id"]
    s.user("continue please")
    record = s.run_pass(model)
    told = record.prompt_extras["htn_active_plan"]
    assert told.startswith("[WORKFLOW RESUMED: Bug Fix Workflow]") and "[WORKFLOW: Bug Fix Workflow]" in told
    assert any("resumed at" in t and "attempt counts kept" in t for t in s.log.texts("info"))
    assert s.state["visited"]["reproduce"]["failures"] == 1 and s.state["current_node"] == before["current_node"]
    s.run_pass(model)
    assert "[WORKFLOW RESUMED" not in s.last_prompt()  # said once


def test_subordinate_agents_keep_separate_states():
    main = start("bugfix_workflow", Agent(0))
    sub = start("git_feature_branch", Agent(1))
    main.run_pass(FixtureModel("bugfix_workflow"))
    sub.run_pass(FixtureModel("git_feature_branch"))
    main2, sub2 = main.restarted(), sub.restarted()
    assert main2.agent.get_data(DATA_KEY)["plan_id"] == "bugfix_workflow"
    assert sub2.agent.get_data(DATA_KEY)["plan_id"] == "git_feature_branch"
    for s in (main2, sub2):
        s.user("continue")
        s.run_pass(Reply(final="ok"))
    assert main2.state["plan_id"] == "bugfix_workflow" and sub2.state["plan_id"] == "git_feature_branch"
    assert main2.state["run_id"] != sub2.state["run_id"]


def test_a_state_saved_by_the_previous_version_is_migrated_on_resume():
    s = start("bugfix_workflow")
    saved = s.agent.get_data(DATA_KEY)
    saved["schema"] = "graph_engine.core.state/1"
    for key in ("run_id", "status", "notice", "notice_turn", "checkpoint", "escalation", "audit_seq"):
        saved.pop(key)
    s = s.restarted()
    s.user("continue")
    s.run_pass(Reply(final="ok"))
    assert s.state["schema"] == "graph_engine.core.state/2" and s.state["status"] == "active"
    assert [e["source"] for e in events(s, "state_migrated")] == ["graph_engine.core.state/1"]


def test_a_garbage_saved_state_is_logged_and_set_aside():
    s = start("bugfix_workflow")
    s.agent.set_data(DATA_KEY, {"plan_id": 3})
    s = s.restarted()
    s.user("hello")
    s.run_pass(Reply(final="hi"))
    assert s.state is None and s.agent._htn_state_rejected == {"plan_id": 3}
    assert any("Ignored an unusable workflow state in the chat's saved graph_engine_state" in t
               for t in s.log.texts("warning"))


def test_checkpoint_nodes_are_saved_and_named_in_the_audit_log(monkeypatch, tmp_path):
    plan = fix_loop_plan()
    plan["graph"]["nodes"]["saved"] = {"type": "checkpoint", "name": "fix applied"}
    plan["graph"]["edges"][0] = {"from": "fix", "to": "saved", "condition": "on_success"}
    plan["graph"]["edges"].append({"from": "saved", "to": "test"})
    use_library(monkeypatch, tmp_path, {"loop": plan})
    s = Session()
    s.user("loop please")
    s.run_pass(IDLE)
    s.run_pass(exit_ok("edited"))
    s.run_pass(exit_ok())
    assert s.state["checkpoint"] == "saved" and s.agent.get_data(DATA_KEY)["checkpoint"] == "saved"
    lines = list(read_lines(audit_file(tmp_path, s)))
    assert [(e["node"], e["name"]) for e in lines if e["type"] == "checkpoint_reached"] == [("saved", "fix applied")]


# ── the audit log ───────────────────────────────────────────────────────────


def audit_file(tmp_path, s: Session):
    state = s.state or s.agent._htn_last_run
    return tmp_path / "a0" / "usr" / "graph_engine" / "runs" / s.agent.context.id / f"{state['run_id']}.jsonl"


def test_audit_lines_parse_carry_the_fields_and_replay_the_path(tmp_path):
    s = start("bugfix_workflow")
    model = FixtureModel("bugfix_workflow", {"reproduce": 1, "test": 1})
    s = drive(s, model, None, continue_at=-1)
    final = s.agent._htn_last_run
    path = audit_file(tmp_path, s)
    raw = path.read_text().splitlines()

    def one_each(pairs):  # a key written twice in a line (a head field repeated by an event) is a defect
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), keys
        return dict(pairs)

    lines = [json.loads(x, object_pairs_hook=one_each) for x in raw]
    assert [e["seq"] for e in lines] == [e["seq"] for e in final["events"]]  # every event, once, in order
    assert lines[0]["type"] == "plan_activated" and lines[0]["triggers"]
    assert all(line["time"].endswith("+00:00") and len(line["time"]) == 29 for line in lines)
    for line in lines:
        assert {"time", "chat", "agent", "run", "plan", "version", "type", "turn", "seq"} <= set(line)
        assert line["chat"] == "IDrobAgr" and line["agent"] == 0 and line["plan"] == "bugfix_workflow"
        assert line["version"] == final["plan_version"] and line["run"] == final["run_id"]
    verified = [e for e in lines if e["type"] == "node_verified"]
    assert all(len(e["evidence_sha256"]) == 64 and e["reason"] for e in verified)
    edges = [e for e in lines if e["type"] == "edge_followed"]
    assert {"from", "to", "condition"} <= set(edges[0])
    assert replay_path(lines) == final["path"]


def test_evidence_hash_is_the_hash_of_what_was_judged(monkeypatch, tmp_path):
    use_library(monkeypatch, tmp_path, {"loop": fix_loop_plan()})
    s = Session()
    s.user("loop please")
    s.run_pass(IDLE)
    reply = exit_ok("edited")
    s.run_pass(reply)
    s.run_pass(Reply(warning="misformatted"))
    (e,) = events(s, "node_verified")
    assert s.history[-3]["content"]["tool_result"] == "\nedited\n[exit:0]\nroot@vm:/a0/usr/workdir#"
    judged = "\nedited\n[exit:0]"  # what the check read: the shell prompt line is not part of the output
    assert e["evidence_sha256"] == hashlib.sha256((judged + "\0" + reply.raw()).encode()).hexdigest()


def test_audit_retention_keeps_the_newest_runs_of_a_chat(monkeypatch, tmp_path):
    monkeypatch.setenv("GRAPH_ENGINE_RUNS_KEEP", "5")
    chat = tmp_path / "a0" / "usr" / "graph_engine" / "runs" / "IDrobAgr"
    chat.mkdir(parents=True)
    for i in range(8):
        (chat / f"old{i}.jsonl").write_text("{}\n")
        os.utime(chat / f"old{i}.jsonl", (time.time() - 100 + i,) * 2)
    stale = tmp_path / "a0" / "usr" / "graph_engine" / "runs" / "other_chat"
    stale.mkdir()
    (stale / "ancient.jsonl").write_text("{}\n")
    os.utime(stale / "ancient.jsonl", (time.time() - 40 * 86400,) * 2)
    start("bugfix_workflow")
    names = sorted(p.name for p in chat.glob("*.jsonl"))  # run logs (the new run's checkpoint is beside its log)
    assert len(names) == 5 and "old7.jsonl" in names and "old0.jsonl" not in names
    assert sorted(p.name for p in chat.glob("*.state.json")) == [n.replace(".jsonl", ".state.json") for n in names
                                                                 if not n.startswith("old")]
    assert not stale.exists()  # older than 30 days, and its chat folder left empty


def test_an_unwritable_audit_folder_is_said_once_and_nothing_is_lost(monkeypatch, tmp_path):
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the runs folder should be")
    monkeypatch.setenv("GRAPH_ENGINE_RUNS_DIR", str(blocker / "runs"))
    s = start("bugfix_workflow")
    model = FixtureModel("bugfix_workflow")
    s.run_pass(model)
    s.run_pass(model)
    said = [t for t in s.log.texts("warning") if "Audit log not written" in t]
    assert len(said) == 1 and str(blocker / "runs") in said[0]
    blocker.unlink()
    s.run_pass(model)
    lines = list(read_lines(str(blocker / "runs" / "IDrobAgr" / f"{s.state['run_id']}.jsonl")))
    assert [e["seq"] for e in lines] == [e["seq"] for e in s.state["events"]]


def test_a_torn_last_line_is_skipped_on_reading(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"type": "plan_activated", "node": "start"}\n{"type": "edge_fol')
    assert [e["type"] for e in read_lines(str(path))] == ["plan_activated"]


# ── SALUTE on every ending ──────────────────────────────────────────────────


def org(tmp_path, s: Session, role: str = "bugfix_specialist"):
    org_dir = tmp_path / "a0" / "usr" / "organizations"
    org_dir.mkdir(parents=True, exist_ok=True)
    (org_dir / "active.json").write_text(json.dumps({"org_id": "software_dev"}))
    s.agent._org_active_role = json.loads((ROLES / f"{role}.json").read_text())
    s.agent._org_active = {"org_id": "software_dev"}
    return org_dir / "reports"


REPORT_KEYS = {"_schema", "_version", "status", "activity", "location", "unit", "time", "environment"}


def test_completion_writes_a_complete_report(tmp_path):
    s = start("bugfix_workflow")
    reports = org(tmp_path, s)
    drive(s, FixtureModel("bugfix_workflow"), None, -1)
    latest = json.loads((reports / "bugfix_specialist_latest.json").read_text())
    assert set(latest) == REPORT_KEYS and latest["status"]["state"] == "complete"
    assert latest["status"]["progress"] == 1.0
    assert 3 <= len(latest["activity"]["workflow_events"]) <= 5
    assert latest["activity"]["workflow_events"][-1]["type"] == "plan_completed"


def test_expiry_writes_an_aborted_report(monkeypatch, tmp_path):
    plan = fix_loop_plan()
    plan["stale_after_turns"] = 2
    use_library(monkeypatch, tmp_path, {"loop": plan})
    s = Session()
    reports = org(tmp_path, s)
    s.user("loop please")
    for _ in range(4):
        s.run_pass(Reply(warning="misformatted"))
    latest = json.loads((reports / "bugfix_specialist_latest.json").read_text())
    assert latest["status"]["state"] == "aborted" and latest["activity"]["workflow_events"][-1]["type"] == "plan_expired"


def test_reports_in_the_same_second_all_survive(tmp_path):
    for _ in range(3):
        s = start("bugfix_workflow")
        reports = org(tmp_path, s)
        drive(s, FixtureModel("bugfix_workflow"), None, -1)
    archived = list((reports / "archive").iterdir())
    assert len(archived) == 3 and len({p.name for p in archived}) == 3


def test_doctrine_without_completion_reports_writes_none(tmp_path):
    s = start("bugfix_workflow")
    reports = org(tmp_path, s)
    s.agent._org_active_role["doctrine"]["report_on_completion"] = False
    drive(s, FixtureModel("bugfix_workflow"), None, -1)
    assert not reports.exists()


# ── PACE ────────────────────────────────────────────────────────────────────


def test_emergency_stops_step_instructions_until_it_lifts():
    s = start("bugfix_workflow")
    s.agent._org_pace_level = "emergency"  # as the dispatcher left it at the end of the last pass
    record = s.run_pass(Reply(final="Stopping: here is where things stand."))
    told = record.prompt_extras["htn_active_plan"]
    assert told.startswith("[WORKFLOW ON HOLD: Bug Fix Workflow]") and "PACE level: EMERGENCY" in told
    assert "Execute the current step" not in told and "Stop and report to the user" in told
    assert [e["type"] for e in events(s)].count("emergency_hold") == 1
    s.agent._org_pace_level = "alternate"
    s.user("ok, go on")
    record = s.run_pass(Reply(warning="misformatted"))
    assert "Execute the current step" in record.prompt_extras["htn_active_plan"]
    assert events(s, "emergency_released")[0]["pace_level"] == "alternate"


def test_escalation_is_recorded_where_the_supervisor_reads_it_on_that_pass(tmp_path):
    s = start("bugfix_workflow")
    reports = org(tmp_path, s)
    model = FixtureModel("bugfix_workflow", {"fix": 3})
    while s.state is not None and s.state["status"] == "active":
        s.run_pass(model)
    escalated = s.state  # the same pass: the supervisor at message_loop_end reads this
    assert escalated["status"] == "escalated" and escalated["escalation"]["pace_level"] == "contingent"
    assert escalated["escalation"]["reason"] == "The bug is not fixed: the fix or its tests still fail after the allowed attempts"
    assert s.agent._org_pace_level == "contingent"
    s.agent._org_pace_level = "primary"  # the dispatcher recomputes it on the next pass ...
    lines = list(read_lines(str(audit_file(tmp_path, s))))
    assert lines[-1]["type"] == "plan_escalated" and lines[-1]["pace_level"] == "contingent"  # ... the record stays
    assert json.loads((reports / "bugfix_specialist_latest.json").read_text())["status"]["state"] == "escalating"
    s.user("what now?")
    s.run_pass(Reply(final="It failed."))
    assert s.state is None and s.agent._htn_last_run["escalation"]["node"] == "escalate_stuck"


# ── supervisor compatibility, with the real role files ──────────────────────


def supervisor_warns(state: dict | None, role: dict) -> bool:
    """The org supervisor's stall rule (message_loop_end/_50_): it reads only these fields."""
    if not state:
        return False
    limit = role.get("doctrine", {}).get("max_turns_without_progress", 12)
    assert isinstance(state["plan_name"], str) and isinstance(state["total_steps"], int)
    assert 0 <= state["current_step"] <= state["total_steps"] and isinstance(state["steps_completed"], list)
    return state["turns_since_progress"] >= limit


@pytest.mark.parametrize("role_file", sorted(p.name for p in ROLES.glob("*.json")))
def test_stall_warnings_come_exactly_when_the_role_limit_is_crossed(role_file):
    role = json.loads((ROLES / role_file).read_text())
    limit = role["doctrine"]["max_turns_without_progress"]
    s = start("bugfix_workflow")
    seen: set[str] = set()
    since_progress = 0  # passes since a step was completed for the first time (counted here, not read)
    warnings = []

    def one_pass(reply) -> None:
        nonlocal since_progress, seen
        s.run_pass(reply)
        if s.state is None:  # the run expired: nothing left for the supervisor to read
            return
        done = set(s.state["steps_completed"])
        since_progress = 0 if done - seen else since_progress + 1
        seen = done
        warns = supervisor_warns(s.state, role)
        assert warns == (since_progress >= limit), (since_progress, s.state["turns_since_progress"])
        warnings.append(warns)

    # progress, including a test -> fix -> test retry loop shorter than the limit
    model = FixtureModel("bugfix_workflow", {"test": 2})
    for _ in range(7):
        one_pass(model)
    assert not any(warnings) and s.state["visited"]["test"]["failures"] == 2
    # then no progress at all: the model keeps replying without a usable result
    for _ in range(limit + 2):
        if s.state is None or s.state["status"] != "active":
            break
        one_pass(Reply(warning="misformatted"))
    expired = s.state is None and s.agent._htn_last_run["events"][-1]["type"] == "plan_expired"
    # the warning comes at the limit, unless the run's own staleness window (15 turns) ended it first
    assert any(warnings) if limit <= 15 else (expired and not any(warnings))


# ── graph-engine explain ────────────────────────────────────────────────────


def test_explain_reads_an_audit_log_and_names_every_candidate(tmp_path, capsys):
    from graph_engine.tools import cli
    from graph_engine.authoring.library import load_library_file
    from graph_engine.tools.standin import LIBRARY

    s = drive(start("bugfix_workflow"), FixtureModel("bugfix_workflow", {"reproduce": 1, "test": 1}), None, -1)
    path = audit_file(tmp_path, s)
    assert cli.main(["explain", "--json", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    lines = list(read_lines(str(path)))
    plan = load_library_file(str(LIBRARY)).plans["bugfix_workflow"]
    judged = [e for e in lines if e["type"] in ("node_verified", "decision_routed")]
    assert [st["node"] for st in report["steps"]] == [e["node"] for e in judged]
    followed = [(e["from"], e["to"], e["condition"]) for e in lines if e["type"] == "edge_followed"]
    taken = [(st["edge"]["from"], st["edge"]["to"], st["edge"]["condition"]) for st in report["steps"] if st["edge"]]
    assert taken == followed[1:]  # every edge after start's, each explained once
    for st in report["steps"]:
        assert sorted((c["to"], c["condition"]) for c in st["candidates"]) == \
            sorted((e.dst, e.condition) for e in plan.out_edges[st["node"]])
        assert [c["verdict"] for c in st["candidates"]].count("taken") == (1 if st["edge"] else 0)
    assert [st["outcome"] for st in report["steps"]][:1] == ["retry"]
    assert cli.main(["explain", str(path)]) == 0
    text = capsys.readouterr().out
    assert "on_retry    -> gather_context           taken" in text


def test_explain_reads_a_saved_state_and_refuses_other_files(tmp_path, capsys):
    from graph_engine.tools import cli

    s = start("bugfix_workflow")
    model = FixtureModel("bugfix_workflow")
    for _ in range(3):
        s.run_pass(model)
    saved = tmp_path / "state.json"
    saved.write_text(json.dumps(s.agent.data))
    assert cli.main(["explain", str(saved)]) == 0
    assert "reproduce  check: success" in capsys.readouterr().out
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    assert cli.main(["explain", str(other)]) == 2
    assert "neither an audit log" in capsys.readouterr().err
