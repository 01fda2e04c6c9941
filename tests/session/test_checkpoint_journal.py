"""The run's checkpoint as a snapshot and a journal of small records (audit.py, journal.py): what a restart
reads back is the state as of the newest audit line, after every pass of every kind of run; a pass writes what
it changed, not what the run holds; a torn record, a record of an older snapshot and a journal deleted
between passes never give a wrong state."""

import json
import os
from pathlib import Path

import pytest
from scenario import BUG_MESSAGE, crash, exit_ok, use_library
from test_control import ISOLATE, at_test_step, say
from test_plan_walks import WALKS, walk
from test_restart_stops import at_first_failed_fix

from graph_engine.session import audit
from graph_engine.session.audit import AuditLog, checkpoint_path, journal_path, read_checkpoint, read_lines
from graph_engine.tools.standin import Reply, Session


class Checked:
    """Every checkpoint written is read back at once, as a restart would read it, and compared with the state
    it was written for; counts the checkpoints written, those written as a record, and the bytes encoded."""

    def __init__(self, monkeypatch, read_back: bool = True) -> None:
        self.calls = self.records = self.encoded = 0
        self.paths: set[str] = set()
        self.differs: list[str] = []  # an assertion inside a hook would be caught by the hook: kept here
        checkpoint, append, dumps = AuditLog.checkpoint, audit._Journal.append, audit._dumps

        def checked(log: AuditLog, path: str, state: dict) -> str:
            self.calls += 1
            problem = checkpoint(log, path, state)
            if not problem:
                self.paths.add(path)
                if read_back and read_checkpoint(path) != json.loads(json.dumps(state)):
                    self.differs.append(f"{path} at audit_seq {state.get('audit_seq')}")
            return problem

        def counted_append(kept, path: str, state: dict) -> bool:
            done = append(kept, path, state)
            self.records += done
            return done

        def counted_dumps(value):
            data = dumps(value)
            self.encoded += len(data)
            return data

        monkeypatch.setattr(AuditLog, "checkpoint", checked)
        monkeypatch.setattr(audit._Journal, "append", counted_append)
        monkeypatch.setattr(audit, "_dumps", counted_dumps)

    @property
    def snapshots(self) -> int:
        return self.calls - self.records


@pytest.fixture
def checked(monkeypatch):
    checked = Checked(monkeypatch)
    yield checked
    assert checked.calls and not checked.differs, checked.differs


@pytest.mark.parametrize("plan,failures,end", WALKS)
def test_every_walk_of_the_bundled_plans_reads_back_as_its_state_after_every_pass(checked, plan, failures, end):
    walk(plan, failures)
    assert checked.records > 0 and checked.snapshots >= 2  # a run's first pass and its end are snapshots


def test_the_user_s_controls_read_back_as_the_state_after_every_pass(checked):
    s = at_test_step()
    say(s, "pause the workflow")
    say(s, "continue the workflow")
    say(s, "go back to the reproduce step", crash())
    s.run_pass(ISOLATE)  # reproduced: on to isolate
    s.run_pass(Reply(final="isolated"))  # isolated: on to the fix
    say(s, "retry this step")
    say(s, "skip this step")
    runs = Path(os.environ["A0_ROOT"]) / "usr" / "graph_engine" / "runs"
    said = [e["type"] for p in runs.rglob("*.jsonl") for e in read_lines(str(p)) if "said" in e]
    assert len(said) == 5 and s.state is not None, said
    assert checked.records > 0 and checked.snapshots >= 1 + len(said)  # the run's start, and each control


def test_a_restart_in_the_middle_of_a_run_reads_back_as_its_state_after_every_pass(checked):
    s, model = at_first_failed_fix()
    s = s.restarted()
    s.nudge()
    for _ in range(4):
        s.run_pass(model)
    assert checked.records > 0


def chain(n: int) -> dict:
    nodes = {"start": {"type": "start"}, "stuck": {"type": "escalate", "reason": "stuck"}, "done": {"type": "exit"}}
    edges = [{"from": "start", "to": "t0"}]
    for i in range(n):
        nodes[f"t{i}"] = {"type": "task", "name": f"Step {i}", "verify": {"type": "any_output"}}
        edges += [{"from": f"t{i}", "to": f"t{i + 1}" if i + 1 < n else "done", "condition": "on_success"},
                  {"from": f"t{i}", "to": "stuck", "condition": "on_exhaust"}]
    return {"name": f"Chain {n}", "domains": ["bugfix"], "triggers": [f"run the chain of {n}"],
            "trigger_threshold": 1, "stale_after_turns": 100_000, "max_turns": 100_000,
            "graph": {"start": "start", "nodes": nodes, "edges": edges}}


def encoded_per_pass(monkeypatch, tmp_path, n: int, passes: int) -> tuple[float, Checked]:
    folder = tmp_path / f"chain{n}"  # a library file of its own: the cache looks at a file's change once a second
    folder.mkdir()
    use_library(monkeypatch, folder, {f"chain{n}": chain(n)})
    checked = Checked(monkeypatch, read_back=False)
    s = Session()
    s.user(f"run the chain of {n} please")
    for _ in range(passes):
        s.run_pass(exit_ok())
        if s.state is None:
            s.user(f"run the chain of {n} please")
    assert checked.paths
    return checked.encoded / passes, checked


def test_a_pass_writes_as_much_in_a_long_run_of_a_large_plan_as_in_a_small_plan(monkeypatch, tmp_path):
    """What a judged pass encodes for its checkpoint, over 800 passes: a 10-step chain (a new run every 10
    passes) against a 1,000-step chain walked 800 steps (its state grows to 800 visited entries)."""
    small, _ = encoded_per_pass(monkeypatch, tmp_path, 10, 800)
    large, checked = encoded_per_pass(monkeypatch, tmp_path, 1000, 800)
    state_bytes = len(json.dumps(checked_state(checked)))
    assert state_bytes > 10 * small  # the whole state, which every pass wrote before
    assert large < 2 * small, (large, small, state_bytes)
    log = next(iter(checked.paths))
    assert os.path.getsize(journal_path(log)) <= max(audit.MIN_JOURNAL, 2 * os.path.getsize(checkpoint_path(log)))


def checked_state(checked: Checked) -> dict:
    return read_checkpoint(next(iter(checked.paths)))


def test_a_record_torn_by_a_stop_mid_write_ends_the_replay_and_the_run_resumes():
    s, model = at_first_failed_fix()
    s.run_pass(exit_ok())  # a record in the journal
    log = next((Path(os.environ["A0_ROOT"]) / "usr" / "graph_engine" / "runs").rglob("*.jsonl"))
    whole = read_checkpoint(str(log))
    assert whole["audit_seq"] == s.state["audit_seq"]
    saved = s.saved
    s.run_pass(None)
    journal = Path(journal_path(str(log)))
    text = journal.read_bytes()
    last = text.rstrip(b"\n").rfind(b"\n") + 1
    journal.write_bytes(text[: last + (len(text) - last) // 2])  # the last record cut in two
    assert read_checkpoint(str(log)) == json.loads(json.dumps(whole))  # the records before it, whole
    lines = log.read_bytes().splitlines(keepends=True)  # the record goes before the pass's audit lines: a stop
    log.write_bytes(b"".join(x for x in lines if json.loads(x)["seq"] <= whole["audit_seq"]))  # inside it left none
    s = s.restarted(saved)
    s.nudge()
    told = s.run_pass(model).prompt_extras["htn_active_plan"]
    assert "[WORKFLOW RESUMED: Bug Fix Workflow]" in told and not s.log.texts("error")


def test_records_written_after_an_older_snapshot_are_never_replayed_over_a_newer_one(tmp_path):
    log = str(tmp_path / "run.jsonl")
    state = {"seq": 1, "audit_seq": 1, "current_node": "a", "visited": {}, "steps_completed": [], "status": "active",
             "events": [{"type": "node_entered", "node": "a", "seq": 1, "turn": 0}]}
    first = AuditLog(str(tmp_path))
    assert first.checkpoint(log, state) == ""
    older = dict(state, seq=2, audit_seq=2, current_node="b", visited={"b": {"attempts": 0}},
                 events=state["events"] + [{"type": "node_entered", "node": "b", "seq": 2, "turn": 0}])
    assert first.checkpoint(log, older) == ""
    stale = Path(journal_path(log)).read_bytes()
    assert stale and read_checkpoint(log)["current_node"] == "b"
    assert AuditLog(str(tmp_path)).checkpoint(log, state) == ""  # a new process: a snapshot of state 1
    Path(journal_path(log)).write_bytes(stale)  # the older snapshot's record, base 1, put back
    assert read_checkpoint(log) == state


def test_a_journal_deleted_between_passes_is_followed_by_a_snapshot(checked):
    s, model = at_first_failed_fix()
    s.run_pass(exit_ok())
    log = next(iter(checked.paths))
    os.unlink(journal_path(log))
    snapshots = checked.snapshots
    s.run_pass(model)
    assert checked.snapshots == snapshots + 1 and os.path.exists(journal_path(log))


def test_a_run_s_journal_goes_with_its_log(monkeypatch, tmp_path):
    monkeypatch.setenv("GRAPH_ENGINE_RUNS_KEEP", "1")
    s = Session()
    s.user(BUG_MESSAGE)
    s.run_pass(crash())
    s.run_pass(ISOLATE)
    runs = Path(os.environ["A0_ROOT"]) / "usr" / "graph_engine" / "runs"
    assert list(runs.rglob("*.state.journal"))
    first = {p.name for p in runs.rglob("*") if p.is_file()}
    for _ in range(2):  # two more runs: the first one's files are past the number kept
        say(s, "stop the workflow")
        s.user(BUG_MESSAGE)
        s.run_pass(crash())
    left = {p.name for p in runs.rglob("*") if p.is_file()}
    assert not first & left  # the first run's log, snapshot and journal were deleted together


def small_state(seq: int, node: str) -> dict:
    return {"seq": seq, "audit_seq": seq, "current_node": node, "visited": {node: {"attempts": 0}},
            "steps_completed": [], "status": "active",
            "events": [{"type": "node_entered", "node": node, "seq": seq, "turn": 0}]}


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_journal_that_is_not_a_regular_file_is_never_written_and_is_said(tmp_path, kind):
    log = str(tmp_path / "run.jsonl")
    target = tmp_path / "elsewhere"
    target.write_text("keep me")
    if kind == "fifo":
        os.mkfifo(journal_path(log))
    else:
        os.symlink(target, journal_path(log))
    problem = AuditLog(str(tmp_path)).checkpoint(log, small_state(1, "a"))  # returns at once: no reader waited for
    assert problem.startswith("its journal:"), problem
    assert target.read_text() == "keep me" and read_checkpoint(log) == small_state(1, "a")
