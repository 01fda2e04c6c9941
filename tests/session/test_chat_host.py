"""The terminal chat host (hosts/chat) at its own boundary: the file it keeps the chat in may be anything, its
command line runs a plan end to end, and a run it kept resumes in a new process."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys

from hypothesis import given, strategies as st

from graph_engine.hosts.chat import chat
from graph_engine.hosts.chat.chat import ChatHost, Reply, scripted
from graph_engine.session.runtime import Runtime
from scenario import fix_loop_plan

PASS = 'true; echo "[exit:$?]"'


def library(folder) -> str:
    path = folder / "library.json"
    path.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"loop": fix_loop_plan()}}))
    return str(path)


def chat_in(folder, replies: list[Reply], state_file: str = "") -> tuple[ChatHost, list[str]]:
    lines: list[str] = []
    host = ChatHost(Runtime(library(folder), str(folder / "home")), scripted(replies), state_file, str(folder),
                    out=lines.append)
    return host, lines


def test_a_plan_runs_to_its_end_and_its_audit_log_is_written(tmp_path):
    host, lines = chat_in(tmp_path, [Reply("echo fixed"), Reply(PASS), Reply(text="Fixed.")])
    assert asyncio.run(host.say("loop please")) == "Fixed."
    assert host.state is None and host.last_run["status"] == "completed"
    logs = list((tmp_path / "home").rglob("*.jsonl"))
    assert len(logs) == 1
    types = [json.loads(line)["type"] for line in logs[0].read_text().splitlines()]
    assert types[0] == "plan_activated" and types[-1] == "plan_completed" and types.count("node_verified") == 2
    assert any(line.startswith("[WORKFLOW: Loop] step 1 of 2") for line in lines)


def test_a_new_process_on_the_same_file_resumes_the_run(tmp_path):
    state_file = str(tmp_path / "chat.json")
    host, _ = chat_in(tmp_path, [Reply("echo fixed"), Reply(text="Now the test.")], state_file)
    asyncio.run(host.say("loop please"))
    assert host.state["current_node"] == "test"
    again, lines = chat_in(tmp_path, [Reply("echo fixed"), Reply(PASS), Reply(text="Done.")], state_file)
    asyncio.run(again.say("go on"))
    assert any("resumed at 'Test'" in line for line in lines)  # its answer then failed the test: fix, test again
    assert again.last_run["status"] == "completed"


def test_a_fifo_a_folder_or_torn_json_as_the_saved_chat_is_one_warning_and_no_run(tmp_path):
    fifo, folder, torn = tmp_path / "fifo", tmp_path / "folder", tmp_path / "torn.json"
    os.mkfifo(fifo)
    folder.mkdir()
    torn.write_text('{"run": {"plan_id": "loop", "cur')
    for path in (fifo, folder, torn):
        host, lines = chat_in(tmp_path, [Reply(text="Hi.")], str(path))
        assert host.state is None and [line for line in lines if line.startswith("[warning]")] == [
            f"[warning] [HTN] The saved chat {path} cannot be read ({_why(lines)}); no run resumes"]


def _why(lines: list[str]) -> str:
    return lines[0].split("cannot be read (", 1)[1].rsplit("); no run resumes", 1)[0]


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                       max_size=6), max_leaves=30)


@given(run=json_values, result=json_values)
def test_any_saved_chat_is_refused_or_run_and_a_new_request_still_starts(tmp_path_factory, run, result):
    folder = tmp_path_factory.mktemp("chat")
    state_file = folder / "chat.json"
    state_file.write_text(json.dumps({"run": run, "result": result}))
    host, lines = chat_in(folder, [Reply("echo fixed"), Reply(text="ok")], str(state_file))
    asyncio.run(host.say("loop please"))
    assert not [line for line in lines if line.startswith("[error]")]
    assert host.state is not None and host.state["plan_id"] == "loop"


def test_the_command_line_runs_a_script_against_messages_on_stdin(tmp_path, monkeypatch, capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"command": "echo fixed"}, {"command": PASS}, {"text": "Fixed."}]))
    monkeypatch.setattr(sys, "stdin", io.StringIO("loop please\n"))
    assert chat.main(["--library", library(tmp_path), "--script", str(script), "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "[WORKFLOW COMPLETE: Loop]" in out and out.rstrip().endswith("[model] Fixed.")
