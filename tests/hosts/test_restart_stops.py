"""Agent-Zero stopped during an LLM call, the chat loaded again, then the web UI's Nudge (as the real loop does
it: tests/test_real_loop.py): each result is judged once, and the next call says the run resumed."""

import json
import os
from pathlib import Path

from scenario import FixtureModel, started

from graph_engine.session.audit import read_lines
from graph_engine.tools.standin import NUDGE, Session


def audit_events() -> list[dict]:
    runs = Path(os.environ["A0_ROOT"]) / "usr" / "graph_engine" / "runs"
    return [e for path in sorted(runs.rglob("*.jsonl")) for e in read_lines(str(path))]


def at_first_failed_fix() -> tuple[Session, FixtureModel]:
    """A bug-fix run whose first fix just failed: its result is in history, not judged yet."""
    s, model = started(), FixtureModel("bugfix_workflow", {"fix": 1})
    while model.failed.get("fix", 0) < 1:
        s.run_pass(model)
    return s, model


def test_a_result_judged_before_a_stop_is_not_judged_again_after_the_nudge():
    s, model = at_first_failed_fix()
    s = s.stopped_during_call()  # this pass's hooks judged the result; the chat on disk is older
    fix_checks = [e for e in audit_events() if e["type"] == "node_verified" and e["node"] == "fix"]
    assert [e["outcome"] for e in fix_checks] == ["fail"]
    s.nudge()
    record = s.run_pass(model)
    assert "Implement the fix (attempt 2 of 3)" in record.prompt_extras["htn_active_plan"]
    s.run_pass(model)
    fix_checks = [e for e in audit_events() if e["type"] == "node_verified" and e["node"] == "fix"]
    assert [e["outcome"] for e in fix_checks] == ["fail", "success"]
    assert len({e["evidence_sha256"] for e in fix_checks}) == 2
    seqs = [e["seq"] for e in audit_events()]
    assert seqs == sorted(set(seqs))  # the run's log goes on from where it was, no number given twice


def test_the_result_seen_again_after_the_nudge_is_not_attributed_to_the_call_that_never_returned():
    s, model = at_first_failed_fix()
    s.run_pass(None)  # this pass's call never returns; the chat holds the state as the hooks left it
    s = s.restarted()
    s.nudge()
    s.run_pass(model)  # the newest result in history is still the failed fix, judged already
    fix_checks = [e for e in audit_events() if e["type"] == "node_verified" and e["node"] == "fix"]
    assert [e["outcome"] for e in fix_checks] == ["fail"]
    assert s.state["visited"]["fix"]["failures"] == 1
    assert any(e["type"] == "evidence_ignored" and "already judged" in e["reason"] for e in audit_events())


def test_the_nudge_is_not_a_new_request_the_next_call_says_the_run_resumed_and_shows_its_step():
    s, model = at_first_failed_fix()
    s.run_pass(None)
    s = s.restarted()
    s.nudge()
    told = s.run_pass(model).prompt_extras["htn_active_plan"]
    assert told.startswith("[WORKFLOW RESUMED: Bug Fix Workflow]")
    assert "Current step: Implement the fix" in told and "PAUSED" not in told


def test_a_nudge_without_a_restart_shows_the_step_again():
    s, model = at_first_failed_fix()
    s.run_pass(None)
    s.nudge()
    told = s.run_pass(model).prompt_extras["htn_active_plan"]
    assert told.startswith("[WORKFLOW: Bug Fix Workflow]") and "Current step: Implement the fix" in told



def log_cut_to(log: Path, seq: int) -> None:
    """The run's audit log as a stop before its lines were written leaves it: its lines up to ``seq``."""
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(line for line in lines if json.loads(line)["seq"] <= seq))


def test_a_damaged_checkpoint_behind_which_the_log_went_on_ends_the_run_and_repeats_no_seq():
    """The chat's state is behind the log (the stop came after the pass's lines) and the checkpoint that held the
    rest is damaged: resuming would judge that result again, so the run ends, said once, its log going on."""
    s, model = at_first_failed_fix()
    s = s.stopped_during_call()
    runs = Path(os.environ["A0_ROOT"]) / "usr" / "graph_engine" / "runs"
    checkpoint = next(runs.rglob("*.state.json"))
    checkpoint.write_text('{"run_id": "%s", "audit_seq": 999, "schema": "nonsense"}'
                          % s.agent.get_data("graph_engine_state")["run_id"])
    s.nudge()
    s.run_pass(model)
    assert s.state is None and s.agent._htn_last_run["events"][-1]["type"] == "state_rejected"
    warned = [t for t in s.log.texts("warning") if "resuming would judge those results again" in t]
    assert len(warned) == 1 and "send the request again" in warned[0]
    seqs = [e["seq"] for e in read_lines(str(next(runs.rglob("*.jsonl"))))]
    assert seqs == list(range(1, len(seqs) + 1))  # no seq twice, none missing


def test_a_checkpoint_cut_short_by_a_stop_mid_write_is_passed_over_and_the_chat_s_state_is_used():
    """The checkpoint is written over in place, before the pass's audit lines: a stop during that write leaves
    the start of the new text over the end of the old one, which does not parse, and the lines unwritten; the
    run resumes from the chat's state, which the log agrees with."""
    s, model = at_first_failed_fix()
    saved_seq = s.agent.get_data("graph_engine_state")["audit_seq"]
    s = s.stopped_during_call()
    runs = Path(os.environ["A0_ROOT"]) / "usr" / "graph_engine" / "runs"
    checkpoint = next(runs.rglob("*.state.json"))
    whole = checkpoint.read_bytes()
    checkpoint.write_bytes(whole[: len(whole) // 2] + whole)  # a longer text cut off by the old one's end
    log_cut_to(next(runs.rglob("*.jsonl")), saved_seq)
    s.nudge()
    told = s.run_pass(model).prompt_extras["htn_active_plan"]
    assert "[WORKFLOW RESUMED: Bug Fix Workflow]" in told and "Current step: Implement the fix" in told
    assert not s.log.texts("error")
    assert len([t for t in s.log.texts("warning") if "cannot be read" in t and "checkpoint" in t]) == 1
    seqs = [e["seq"] for e in read_lines(str(next(runs.rglob("*.jsonl"))))]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_checkpoint_written_again_replaces_a_longer_one_whole(tmp_path):
    from graph_engine.session.audit import checkpoint_path, read_checkpoint, write_checkpoint

    log = str(tmp_path / "run.jsonl")
    write_checkpoint(log, {"run_id": "r", "notes": "x" * 5000})
    write_checkpoint(log, {"run_id": "r", "seq": 2})
    assert read_checkpoint(log) == {"run_id": "r", "seq": 2}  # without the truncate, the old tail would remain
    assert b"xxxx" not in Path(checkpoint_path(log)).read_bytes()
