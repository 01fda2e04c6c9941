"""Branches over a list found at run time, in Agent-Zero's real message loop (`make real-loop`): a step lists the
project's text files as JSON, a parallel node over that list gives each file a subordinate agent of its own (v1.x)
told its item, each counts its file's words on the real terminal, and the fan-in sums what they captured.  On
v0.9.x the items run one after another in the chat.  The same with the stand-in: tests/hosts/test_fan_out.py."""

import json
from pathlib import Path

from a0real import A0Copy, _text, respond, terminal
from test_real_loop import WARM_UP, types
from test_real_loop_macrocosm import audit, branch_calls, calls_of, joined

FILES = {"alpha.txt": "one two three", "beta notes.txt": "four five", "gamma.txt": "six"}
ASK = "count the words of each text file in the notes project"


def project(tree: A0Copy) -> Path:
    folder = tree.root / "usr" / "workdir" / "notes"
    folder.mkdir(parents=True, exist_ok=True)
    for name, words in FILES.items():
        (folder / name).write_text(words + "\n")
    return folder


LIST = ("cd {p} && python3 -c \"import glob, json; print('FILES=' + json.dumps(sorted(glob.glob('*.txt'))))\"")


def library(tree: A0Copy, p: Path) -> dict:
    plan = {"name": "Count Each File", "triggers": ["count the words of each text file"], "trigger_threshold": 1,
            "graph": {"start": "start", "nodes": {
                "start": {"type": "start"},
                "find": {"type": "task", "name": "List the files", "action": "List the text files",
                         "tool": "code_execution_tool", "tool_hint": LIST.format(p=p),
                         "verify": {"type": "exit_code_zero", "capture": "FILES=(?P<files>\\[[^\\n]*\\])"}},
                "fan": {"type": "parallel", "name": "Each file", "over": "files", "max_parallel": 3},
                "count": {"type": "task", "name": "Count one file", "action": "Count the words of $item",
                          "tool": "code_execution_tool", "tool_hint": f"cd {p} && wc -w < $item", "max_retries": 1,
                          "verify": {"type": "exit_code_zero", "capture": "(?m)^(?P<words>[0-9]+)$"}},
                "join": {"type": "fan_in", "name": "Counted", "reduce": {"words": "sum"}},
                "report": {"type": "task", "name": "Report", "action": "Print the total",
                           "tool": "code_execution_tool", "tool_hint": 'echo "counted"',
                           "verify": {"type": "any_output"}},
                "done": {"type": "exit"}, "stuck": {"type": "escalate", "reason": "a file could not be counted"}},
                "edges": [{"from": "start", "to": "find"},
                          {"from": "find", "to": "fan", "condition": "on_success"},
                          {"from": "find", "to": "stuck", "condition": "on_exhaust"},
                          {"from": "fan", "to": "count"},
                          {"from": "count", "to": "join", "condition": "on_success"},
                          {"from": "count", "to": "stuck", "condition": "on_exhaust"},
                          {"from": "join", "to": "report", "condition": "on_success"},
                          {"from": "join", "to": "stuck", "condition": "on_fail"},
                          {"from": "report", "to": "done", "condition": "on_success"},
                          {"from": "report", "to": "stuck", "condition": "on_exhaust"}]}}
    path = tree.root.parent / "fan_out_library.json"
    path.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"count_each": plan}}))
    return {"GRAPH_ENGINE_LIBRARY": str(path)}


def count(p: Path, name: str, attempt: int = 1) -> str:
    quoted = f"'{name}'" if " " in name else name
    return terminal(f'cd {p} && wc -w < {quoted}; echo "[exit:$?]"' + ("" if attempt == 1 else " # again"),
                    f"Count {name}" + ("" if attempt == 1 else " again"))


def parent_start(p: Path) -> list[str]:
    return [terminal(f"ls {p}", "List the folder"), respond("Three text files."),
            terminal(LIST.format(p=p) + '; echo "[exit:$?]"', "List the files")]


def test_one_subordinate_per_file_found_at_run_time_and_the_counts_summed(a0_tree):
    p = project(a0_tree)
    names = sorted(FILES)
    if a0_tree.layout == "new":
        branches = {f"count#{n}": [count(p, name), count(p, name, 2), respond(f"{name}: counted")]
                    for n, name in enumerate(names, 1)}
        replies = parent_start(p) + [terminal('echo "counted"', "Report"), respond("Six words in all.")]
        run = a0_tree.run([WARM_UP, ASK], replies, branch_replies=branches,
                          chat_delay={b: 0.5 for b in branches}, env=library(a0_tree, p))
        by_branch = branch_calls(run)
        assert set(by_branch) == set(branches), [c["branch"] for c in calls_of(run)]
        for n, name in enumerate(names, 1):
            first = _text(by_branch[f"count#{n}"][0]["messages"])
            assert f"This branch's item: {name}" in first
            quoted = f"'{name}'" if " " in name else name
            assert f"Command: cd {p} && wc -w < {quoted}" in first  # the item, quoted for the shell
        assert max(cs[0]["start"] for cs in by_branch.values()) < min(c["at"] for cs in by_branch.values()
                                                                       for c in cs)  # at the same time
    else:
        replies = parent_start(p) + [count(p, name) for name in names] + [
            terminal('echo "counted"', "Report"), respond("Six words in all.")]
        run = a0_tree.run([WARM_UP, ASK], replies, env=library(a0_tree, p))
        assert not branch_calls(run)
        for name in names:
            assert any(f"This branch's item: {name}" in m for m in run.calls)
    assert run.overrun == 0
    events = [e for e in audit(a0_tree, run.chat_id) if e.get("plan", "count_each") == "count_each"]
    started = next(e for e in events if e["type"] == "parallel_started")
    assert started["items"] == names and started["over"] == "files"
    assert joined(events)["passed"] is True
    if a0_tree.layout == "new":  # the fan-in's evidence: each branch's outcome by its item
        summary = next(m for m in run.calls if "Current step: Report" in m)
        assert "- 'Count one file #2' (item: beta notes.txt): success" in summary
    assert types(events)[-1] == "plan_completed"
    captured = [e["captured"]["words"] for e in events if e["type"] == "node_verified" and "words" in
                (e.get("captured") or {})]
    assert sorted(captured) == ["1", "2", "3"]  # the real wc's counts, each judged once
