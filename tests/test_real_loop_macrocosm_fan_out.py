"""Branches over a list found at run time, in Agent-Zero's real message loop (`make real-loop`): a step lists the
project's text files as JSON, a parallel node over that list gives each file a subordinate agent of its own (v1.x),
made with the developer profile and told its item; each counts its file's words on the real terminal, the fan-in
sums what they captured, and a decision routes on the total.  On v0.9.x the items run one after another in the
chat.  A kill during the fan-out resumes with each result judged once.  The same with the stand-in:
tests/hosts/test_fan_out.py."""

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
                          "profile": "developer",
                          "tool": "code_execution_tool", "tool_hint": f"cd {p} && wc -w < $item", "max_retries": 1,
                          "verify": {"type": "exit_code_zero", "capture": "(?m)^(?P<words>[0-9]+)$"}},
                "join": {"type": "fan_in", "name": "Counted", "reduce": {"words": "sum"}},
                "total": {"type": "decision", "name": "Six words?"},
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
                          {"from": "join", "to": "total", "condition": "on_success"},
                          {"from": "total", "to": "report", "condition": "outcome=success && context.words=6"},
                          {"from": "total", "to": "stuck", "condition": "outcome=success && context.words!=6"},
                          {"from": "total", "to": "stuck", "condition": "on_fail"},
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
            assert "Agent Zero 'Master Developer'" in first  # the developer profile's prompts
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
    assert "plan_completed" in types(events)
    routed = next(e for e in events if e["type"] == "edge_followed" and e.get("from") == "total")
    assert routed["to"] == "report"  # the summed value (1 + 2 + 3 words) decided the route
    captured = [e["captured"]["words"] for e in events if e["type"] == "node_verified" and "words" in
                (e.get("captured") or {})]
    assert sorted(captured) == ["1", "2", "3"]  # the real wc's counts, each judged once


def test_a_kill_while_the_list_fans_out_resumes_the_item_left_and_judges_each_result_once(a0_tree):
    if a0_tree.layout != "new":
        return  # (v0.9.x runs the items in the chat: tests/test_real_loop.py covers its restarts)
    p = project(a0_tree)
    names = sorted(FILES)
    env = library(a0_tree, p)
    first = a0_tree.run([WARM_UP, ASK], parent_start(p),
                        branch_replies={"count#1": [count(p, names[0]), count(p, names[0], 2), respond("done")],
                                        "count#2": ["HANG"],
                                        "count#3": [count(p, names[2]), count(p, names[2], 2), respond("done")]},
                        chat_delay={"count#2": 3.0}, env=env)
    assert first.hung
    second = a0_tree.run([{"load": first.chat_id}, {"nudge": True}],
                         [terminal('echo "counted"', "Report"), respond("Six words in all.")],
                         branch_replies={"count#2": [count(p, names[1]), count(p, names[1], 2), respond("done")]},
                         env=env)
    assert second.overrun == 0 and list(branch_calls(second)) == ["count#2"]  # only the item left
    assert f"This branch's item: {names[1]}" in _text(branch_calls(second)["count#2"][0]["messages"])
    events = [e for e in audit(a0_tree, first.chat_id) if e.get("plan", "count_each") == "count_each"]
    counted = [e for e in events if e["type"] == "node_verified" and e.get("node") == "count" and e.get("branch")]
    assert sorted(e["branch"] for e in counted) == ["count#1", "count#2", "count#3"]  # each judged once
    assert len({e["evidence_sha256"] for e in counted}) == 3
    assert joined(events)["passed"] is True and "plan_completed" in types(events)
