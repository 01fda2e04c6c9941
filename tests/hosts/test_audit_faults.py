"""No audit line is lost or claimed written when it was not: an unwritable folder, a folder replaced by a file,
a folder deleted under an open file, a run that ends meanwhile, a restart in between."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from scenario import IDLE, crash, started

from graph_engine.hosts.agent_zero.keeping import SPOOL_KEY
from graph_engine.session.audit import read_lines
from graph_engine.tools.standin import ROOT, Reply, cmd

ISOLATE = cmd("grep -n divide /tmp/test.py", "3:    return a / b")


def runs(tmp_path: Path) -> Path:
    return tmp_path / "a0" / "usr" / "graph_engine" / "runs"


def logged(tmp_path: Path) -> list[dict]:
    return [e for f in sorted(runs(tmp_path).rglob("*.jsonl")) for e in read_lines(str(f))]


def seqs_of(tmp_path: Path, run_id: str) -> list[int]:
    return [e["seq"] for e in logged(tmp_path) if e["run"] == run_id]


def test_a_folder_replaced_by_a_file_keeps_the_lines_with_the_chat_and_writes_them_later(tmp_path):
    s = started()
    run_id, written = s.state["run_id"], s.state["audit_seq"]
    shutil.rmtree(runs(tmp_path))  # the lines written so far go with it (the user's doing)
    runs(tmp_path).write_text("not a folder")  # the audit folder is replaced by a file while the run's file is open
    s.run_pass(crash())
    s.run_pass(ISOLATE)
    assert s.state["audit_seq"] == s.state["seq"]  # accounted for ...
    spooled = s.agent.get_data(SPOOL_KEY)
    assert spooled and all(path.endswith(f"{run_id}.jsonl") for path, _, _ in spooled)  # ... in the spool
    warnings = [t for t in s.log.texts("warning") if "Audit log not written" in t]
    assert len(warnings) == 1 and "kept with the chat and written once it can be" in warnings[0]
    runs(tmp_path).unlink()  # the folder can be made again
    s.run_pass(IDLE)
    assert s.agent.get_data(SPOOL_KEY) is None
    assert any("are written now" in t for t in s.log.texts("info"))
    assert seqs_of(tmp_path, run_id) == list(range(written + 1, s.state["seq"] + 1))  # every later line, once


def test_a_deleted_folder_is_made_again_and_no_line_goes_into_the_deleted_file(tmp_path):
    s = started()
    run_id = s.state["run_id"]
    s.run_pass(crash())
    shutil.rmtree(runs(tmp_path))  # deleted while the run's file is open
    s.run_pass(ISOLATE)
    s.run_pass(IDLE)
    later = seqs_of(tmp_path, run_id)
    assert later and later == list(range(later[0], s.state["seq"] + 1))  # written to the new file, in order
    assert s.agent.get_data(SPOOL_KEY) is None and not [t for t in s.log.texts("warning") if "Audit" in t]


def test_the_lines_of_a_run_that_ends_meanwhile_outlive_it_and_a_restart(tmp_path):
    s = started()
    run_id, written = s.state["run_id"], s.state["audit_seq"]
    shutil.rmtree(runs(tmp_path))
    runs(tmp_path).write_text("not a folder")
    s.run_pass(Reply(final="On it"))
    s.user("explain what a monad is")  # ends the run: its last lines cannot be written
    s.run_pass(Reply(final="A monad is ..."))
    assert s.state is None and s.agent._htn_last_run["status"] == "ended"
    ended_seq = s.agent._htn_last_run["seq"]
    s = s.restarted()  # the spool is saved with the chat
    assert s.agent.get_data(SPOOL_KEY)
    runs(tmp_path).unlink()
    s.user("fix the bug in /tmp/other.py")  # the next pass of any run in this chat writes them
    s.run_pass(IDLE)
    assert seqs_of(tmp_path, run_id) == list(range(written + 1, ended_seq + 1))
    assert [e["type"] for e in logged(tmp_path) if e["run"] == run_id][-1] == "plan_ended"


AS_USER = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, os.environ["PACK"])
    from graph_engine.tools.standin import Session, Agent, cmd, Reply
    out = os.environ["OUT"]
    if os.path.exists(out):  # the second process: the chat restored, the folder writable again
        saved = json.load(open(out))
        agent = Agent()
        agent.data = saved
        s = Session(agent=agent)
        s.user("fix the bug in /tmp/other.py")
        s.run_pass(Reply(warning="x"))
    else:
        s = Session()
        s.user("fix the bug in /tmp/test.py")
        s.run_pass(cmd("python3 /tmp/test.py", "Traceback (most recent call last):\\nZeroDivisionError\\n[exit:1]"))
        s.run_pass(Reply(final="Reproduced."))
        s.user("explain what a monad is")
        s.run_pass(Reply(final="..."))
    json.dump({k: v for k, v in s.agent.data.items() if not k.startswith("_")}, open(out, "w"))
    print(json.dumps({"warnings": s.log.texts("warning"), "info": s.log.texts("info")}))
""")


def test_an_unwritable_folder_for_a_user_who_may_not_write_it():
    if os.geteuid() != 0:
        pytest.skip("needs root to run the engine as another user (an unprivileged user cannot make a folder "
                    "another user cannot write)")
    python = "/usr/bin/python3"
    probe = subprocess.run([python, "-c", "pass"], preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)),
                           capture_output=True) if os.path.exists(python) else None
    if probe is None or probe.returncode != 0:
        pytest.skip(f"{python} cannot be run by the unprivileged user 65534")
    base = Path(tempfile.mkdtemp(prefix="ge-audit-"))
    try:
        os.chmod(base, 0o755)
        folder = base / "a0" / "usr" / "graph_engine" / "runs"
        folder.mkdir(parents=True)  # root's: user 65534 may not write it
        for p in (base / "a0", base / "a0" / "usr", base / "a0" / "usr" / "graph_engine", folder):
            os.chmod(p, 0o755)
        (base / "out").mkdir(mode=0o777)
        os.chmod(base / "out", 0o777)
        env = {"PATH": "/usr/bin:/bin", "PACK": str(ROOT / "extensions"), "A0_ROOT": str(base / "a0"),
               "OUT": str(base / "out" / "chat.json"), "HOME": str(base / "out")}

        def as_user():
            r = subprocess.run([python, "-B", "-c", AS_USER], env=env, capture_output=True, text=True, timeout=60,
                               preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout.splitlines()[-1])

        first = as_user()
        assert any("Audit log not written" in w and "Permission denied" in w for w in first["warnings"])
        assert list(folder.iterdir()) == []
        saved = json.loads((base / "out" / "chat.json").read_text())
        assert saved[SPOOL_KEY] and saved.get("graph_engine_state") is None  # the run ended; its lines wait
        os.chown(folder, 65534, 65534)  # writable now
        second = as_user()
        assert any("are written now" in line for line in second["info"])
        lines = [e for f in folder.rglob("*.jsonl") for e in read_lines(str(f))]
        first_run = [e for e in lines if e["plan"] == "bugfix_workflow" and e["type"] == "plan_ended"]
        assert first_run and sorted(e["seq"] for e in lines if e["run"] == first_run[0]["run"]) == \
            list(range(1, first_run[0]["seq"] + 1))
    finally:
        shutil.rmtree(base, ignore_errors=True)
