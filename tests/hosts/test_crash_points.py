"""Exactly once across any crash: the process stops at every write of a run's files (before it, inside it, after
it), Agent-Zero restarts from the chat it saved last and the Nudge goes on; each result is judged once, the
audit log holds seqs 1..N without a repeat or a gap, and the run ends as it ends without the crash."""

import os

import pytest
from scenario import BUG_MESSAGE, IDLE, FixtureModel, crash, message_for

from graph_engine.hosts.agent_zero import adapter

from graph_engine.session import audit
from graph_engine.session.audit import read_lines
from graph_engine.core.state import DATA_KEY
from graph_engine.tools.standin import Session

PLAN = "bugfix_workflow"
FAILURES = {"reproduce": 1, "test": 1}


class Crash(BaseException):
    """The process stops (no handler of the engine catches it: it is no Exception)."""


class Writes:
    """audit._write, counting the writes of a run's files; at write number ``at`` the process stops: before it
    (nothing written), inside it (half written) or after it (all written)."""

    def __init__(self, at: int | None = None, cut: str = "before") -> None:
        self.at, self.cut, self.count = at, cut, 0

    def __call__(self, fd: int, data: bytes) -> int:
        n = self.count
        self.count += 1
        if n == self.at:
            self.at = None  # once: the restarted process writes as usual
            if self.cut == "inside":
                os.write(fd, data[: max(1, len(data) // 2)])
            elif self.cut == "after":
                os.write(fd, data)
            raise Crash
        return os.write(fd, data)


def run(writes: Writes, limit: int = 80, layout: str = "new") -> tuple[Session, int]:
    """The bug fix, driven to its end by the fixture model on one layout (v1.x "new", v0.9.x "old"); a crash
    restarts Agent-Zero from its last saved chat, and the person nudges it.  Returns the session and how many
    crashes there were."""
    model = FixtureModel(PLAN, FAILURES)
    s = Session(layout=layout)
    s.user(message_for(PLAN))
    crashes, reply = 0, IDLE
    for _ in range(limit):
        try:
            s.run_pass(reply)
        except Crash:
            crashes += 1
            for rt in __import__("graph_engine.hosts.agent_zero.adapter", fromlist=["_runtimes"])._runtimes.values():
                rt.audit.close_all()  # the stopped process's descriptors
            saved = s.saved
            s = s.restarted(saved)
            if saved.get(DATA_KEY):
                s.nudge()  # the run goes on from what was saved
            else:
                s.user(message_for(PLAN))  # stopped before anything of the run was saved: the person asks again
            reply = IDLE  # the call that was being made never returned
            continue
        last = getattr(s.agent, "_htn_last_run", None)
        if s.state is None and last is not None and last.get("status") != "active":
            break
        if not s.monologue_open:
            s.user("continue")
        reply = model
    return s, crashes


def log_of(s: Session) -> list[dict]:
    last = s.agent._htn_last_run
    root = os.path.join(os.environ["A0_ROOT"], "usr", "graph_engine", "runs")
    return list(read_lines(os.path.join(root, s.agent.context.id, f"{last['run_id']}.jsonl")))


def verdicts(events: list[dict]) -> list[tuple]:
    return [(e["node"], e["outcome"], e.get("evidence_sha256")) for e in events if e["type"] == "node_verified"]


@pytest.fixture(params=["new", "old"])
def layout(request):
    return request.param


@pytest.fixture
def baseline(monkeypatch, layout):
    writes = Writes()
    monkeypatch.setattr(audit, "_write", writes)
    s, crashes = run(writes, layout=layout)
    events = log_of(s)
    assert crashes == 0 and events[-1]["type"] == "plan_completed"
    return events, writes.count


def check(events: list[dict], base: list[dict]) -> None:
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), seqs  # no repeat, no gap
    assert verdicts(events) == verdicts(base)  # each result judged once, as without the crash
    assert events[-1]["type"] == "plan_completed"
    # what a restart adds: that it resumed, and that the result already judged was not judged again
    said = ("run_resumed", "evidence_ignored")
    assert [e["type"] for e in events if e["type"] not in said] == [e["type"] for e in base if e["type"] not in said]


@pytest.mark.parametrize("cut", ["before", "inside", "after"])
def test_a_stop_at_any_write_judges_nothing_twice_and_loses_nothing(baseline, monkeypatch, cut, layout):
    base, total = baseline
    assert total >= 12  # every pass writes its checkpoint, then its lines
    for at in range(total):
        writes = Writes(at, cut)
        monkeypatch.setattr(audit, "_write", writes)
        s, crashes = run(writes, layout=layout)
        assert crashes == 1, (at, cut)
        try:
            check(log_of(s), base)
        except AssertionError as exc:
            raise AssertionError(f"stopped {cut} write {at} of {total}: {exc}") from None


def damage(path: str, how: str) -> None:
    if how == "folder":
        os.remove(path)
        os.mkdir(path)
    elif how == "fifo":
        os.remove(path)
        os.mkfifo(path)
    else:
        blob = open(path, "rb").read()
        open(path, "wb").write({"emptied": b"", "half": blob[: len(blob) // 2], "garbage": b'{"run_id": 7,'}[how])


@pytest.mark.parametrize("how", ["emptied", "half", "garbage", "folder", "fifo"])
def test_a_damaged_checkpoint_behind_its_log_ends_the_run_instead_of_judging_again(how):
    """The chat was saved before the pass that judged a result; the checkpoint that held it is damaged by hand.
    Resuming from the chat would judge that result again and write its seqs twice: the run ends instead, with
    one line naming the checkpoint, and the log goes on from its last seq."""
    model = FixtureModel(PLAN, FAILURES)
    s = Session()
    s.user(message_for(PLAN))
    s.run_pass(IDLE)
    s.run_pass(model)  # judges the first result
    root = os.path.join(os.environ["A0_ROOT"], "usr", "graph_engine", "runs", s.agent.context.id)
    run_id = s.state["run_id"]
    s = s.stopped_during_call()  # that pass's hooks ran (a result judged); the chat on disk is the one before
    damage(os.path.join(root, f"{run_id}.state.json"), how)
    s.nudge()
    s.run_pass(IDLE)
    events = list(read_lines(os.path.join(root, f"{run_id}.jsonl")))
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1))
    assert events[-1]["type"] == "state_rejected" and "judge those results again" in events[-1]["reason"]
    judged = [e["evidence_sha256"] for e in events if e["type"] == "node_verified"]
    assert len(judged) == len(set(judged))
    warnings = [t for t in s.log.texts("warning") if f"{run_id}.state.json" in t]
    assert len(warnings) == 1 and "cannot be read" in warnings[0]
    assert s.state is None


def test_a_checkpoint_that_cannot_be_written_keeps_the_lines_with_the_chat_until_it_can():
    model = FixtureModel(PLAN, FAILURES)
    s = Session()
    s.user(message_for(PLAN))
    s.run_pass(IDLE)
    root = os.path.join(os.environ["A0_ROOT"], "usr", "graph_engine", "runs", s.agent.context.id)
    run_id = s.state["run_id"]
    checkpoint = os.path.join(root, f"{run_id}.state.json")
    os.remove(checkpoint)
    os.mkdir(checkpoint)  # a folder in its place: it cannot be written
    for rt in __import__("graph_engine.hosts.agent_zero.adapter", fromlist=["_runtimes"])._runtimes.values():
        rt.audit.close_all()  # (so that the next pass writes a new snapshot)
    s.run_pass(model)
    s.run_pass(model)
    lines = [t for t in s.log.texts("warning") if "cannot be written" in t]
    assert len(lines) == 1 and checkpoint in lines[0]
    logged = list(read_lines(os.path.join(root, f"{run_id}.jsonl")))
    assert logged[-1]["seq"] < s.state["seq"]  # the log is not ahead of a checkpoint
    s = s.restarted()  # the chat was saved with its spool
    os.rmdir(checkpoint)
    s.nudge()
    s.run_pass(IDLE)
    events = list(read_lines(os.path.join(root, f"{run_id}.jsonl")))
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert s.state is not None and s.state["status"] == "active"


def test_chats_dropped_with_active_runs_leave_no_file_open():
    """Stand-in chats whose runs are still active when their runtime is dropped (as each test drops it): the
    audit log's descriptors close with it, so the count of open files stays flat."""
    import gc

    def count() -> int:
        gc.collect()
        return len(os.listdir("/proc/self/fd"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc/self/fd: descriptors are not counted on this system")
    before = None
    for i in range(40):
        s = Session()
        s.agent.context.id = f"leak{i}"
        s.user(BUG_MESSAGE)
        s.run_pass(crash())
        assert s.state["status"] == "active"
        adapter._runtimes.clear()
        del s
        if i == 4:
            before = count()
    assert count() <= before + 2
