"""Hostile and broken inputs: nothing crashes the loop, nothing is lost silently, each message says what and where.

Every test drives the extension files through the Agent-Zero stand-in and pins the exact log line.
"""

import json
import os

import pytest
from scenario import BUG_MESSAGE, events, exit_ok, fix_loop_plan, started, use_library, verdicts

from graph_engine.tools.standin import LIBRARY, Reply, Session, cmd

ENGINE_ERRORS = "Workflow engine error"


def no_engine_errors(s: Session) -> None:
    assert [t for t in s.log.texts("error") if ENGINE_ERRORS in t] == []


def library_file(monkeypatch, tmp_path, text: str | bytes):
    path = tmp_path / "htn_plan_library.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(path))
    return path


# ── the plan library ────────────────────────────────────────────────────────


@pytest.mark.parametrize("content, line", [
    ("{nope", "not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)); "
              "fix the syntax; no plans are active until it is fixed"),
    ("", "the file is empty; write a JSON object with a 'plans' object; no plans are active until it is fixed"),
    (b"\xff\xfe{}", "not valid JSON (not UTF-8 text at byte 0); fix the syntax; no plans are active until it is "
                     "fixed"),
    ("[1, 2]", "the library must be a JSON object with a 'plans' object, got list; no plans are active until it is "
               "fixed"),
    ('{"plans": ["a"]}', "'plans' must be an object keyed by plan id (add \"plans\": {...}); no plans are active "
                         "until it is fixed"),
])
def test_unusable_library_files(monkeypatch, tmp_path, content, line):
    path = library_file(monkeypatch, tmp_path, content)
    s = Session()
    s.user(BUG_MESSAGE)
    s.run_pass(cmd("ls", "x"))
    s.run_pass(cmd("ls", "x"))
    no_engine_errors(s)
    assert s.log.texts("warning") == [f"[HTN] {path}: {line}"]  # once, not every pass
    assert s.state is None


def test_library_with_wrong_types_disables_only_the_bad_plan(monkeypatch, tmp_path):
    good = fix_loop_plan()
    path = use_library(monkeypatch, tmp_path, {"loop": good, "bad": {"name": 7, "triggers": "x", "steps": {}}})
    s = started("loop please")
    no_engine_errors(s)
    assert s.state["plan_id"] == "loop"
    assert f"[HTN] {path}: plan 'bad' is disabled, the others keep working: [schema] plans.bad.name: must be of " \
           f"type string, got integer (fix: see the field in docs/plan-authoring.md) (and 2 more: run graph-engine " \
           f"validate {path})" in s.log.texts("warning")


def test_a_library_of_10000_plans_loads_its_first_1000_and_says_so(monkeypatch, tmp_path):
    plans = {}
    for i in range(10_000):
        plan = fix_loop_plan()
        plan["triggers"] = [f"loop number {i}"]
        plans[f"p{i}"] = plan
    path = use_library(monkeypatch, tmp_path, plans)
    s = started("loop number 999 please")
    no_engine_errors(s)
    assert s.state["plan_id"] == "p999"
    assert f"[HTN] {path}: warning [schema] the library: the library has 10000 plans, over the limit of 1000; " \
           f"only the first 1000 are loaded (fix: split the library, or raise GRAPH_ENGINE_MAX_PLANS)" \
           in s.log.texts("warning")
    s.user("loop number 1000 please")
    s.run_pass(Reply(warning="x"))
    assert s.state["plan_id"] == "p999"  # p1000 was not loaded: small talk keeps the run


def test_node_ids_that_are_python_or_json_specials(monkeypatch, tmp_path):
    ids = ["__proto__", "constructor", "__class__", "null", "true", "None", "__init__", "toString"]
    nodes = {"start": {"type": "start"}, "done": {"type": "exit"}, "stuck": {"type": "escalate", "reason": "x"}}
    edges = [{"from": "start", "to": ids[0]}]
    for a, b in zip(ids, ids[1:] + ["done"]):
        nodes[a] = {"type": "task", "name": f"Step {a}", "verify": {"type": "exit_code_zero"}}
        edges += [{"from": a, "to": b, "condition": "on_success"}, {"from": a, "to": "stuck", "condition": "on_exhaust"}]
    use_library(monkeypatch, tmp_path, {"__proto__": {"name": "Specials", "triggers": ["special ids"],
                                                      "trigger_threshold": 1,
                                                      "graph": {"start": "start", "nodes": nodes, "edges": edges}}})
    s = started("special ids please")
    for _ in range(len(ids) + 1):
        s.run_pass(exit_ok())
    no_engine_errors(s)
    assert [n for n, _ in verdicts(s)] == ids and s.agent._htn_last_run["events"][-1]["type"] == "plan_completed"


@pytest.mark.parametrize("pattern, problem", [
    ("(a+)+$", "a quantifier inside a quantified group, such as (a+)+, can backtrack for minutes on a long output "
               "(fix: remove the outer quantifier or make the inner group match one thing)"),
    ("(a|aa)+$", "repeated alternatives that can match the same text, such as (a|aa)+, can backtrack for minutes on "
                 "a long output (fix: match the alternatives once, e.g. (a|b) without + or *, or use a character "
                 "class [ab]+)"),
    (r"(\w+\s?)*x", "a quantifier inside a quantified group, such as (a+)+, can backtrack for minutes on a long "
                    "output (fix: remove the outer quantifier or make the inner group match one thing)"),
])
def test_catastrophic_regex_is_refused_at_load(monkeypatch, tmp_path, pattern, problem):
    plan = fix_loop_plan()
    plan["graph"]["nodes"]["test"]["verify"] = {"type": "output_matches", "value": pattern}
    path = use_library(monkeypatch, tmp_path, {"loop": plan})
    s = Session()
    s.user("loop please")
    s.run_pass(cmd("x", "a" * 50_000 + "!"))
    assert s.log.texts("warning") == [f"[HTN] {path}: plan 'loop' is disabled, the others keep working: "
                                      f"[regex_unsafe] plans.loop.graph.nodes.test.verify.value: {problem}"]


# ── tool results and user messages ──────────────────────────────────────────


@pytest.mark.parametrize("output, verdict", [
    ("x" * (50 * 1024 * 1024) + "\n[exit:0]", ("test", "success")),  # 50 MB
    ("ok\x00\x00binary\x00\n[exit:0]", ("test", "success")),  # NUL bytes
    ("bad \udcff\udcfe surrogates\n[exit:1]", ("test", "fail")),  # invalid UTF-8, as Python decodes it
    ("\x1b[31m1 failed\x1b[0m, \x1b[32m4 passed\x1b[0m\n\x1b[1m[exit:1]\x1b[0m", ("test", "fail")),  # ANSI
])
def test_hostile_tool_results_are_judged(monkeypatch, tmp_path, output, verdict):
    use_library(monkeypatch, tmp_path, {"loop": fix_loop_plan()})
    s = started("loop please")
    s.run_pass(exit_ok("edited"))
    s.run_pass(cmd("run", output))
    s.run_pass(Reply(warning="x"))
    no_engine_errors(s)
    assert verdicts(s)[-1] == verdict
    lines = (tmp_path / "a0" / "usr" / "graph_engine" / "runs" / "IDrobAgr").glob("*.jsonl")
    assert all(json.loads(x) for f in lines for x in f.read_text(errors="replace").splitlines())


def test_ansi_coloured_pytest_summary_passes_a_summary_check(monkeypatch, tmp_path):
    plan = fix_loop_plan()
    plan["graph"]["nodes"]["test"]["verify"] = {"type": "output_matches", "value": r"^=+ \d+ passed"}
    use_library(monkeypatch, tmp_path, {"loop": plan})
    s = started("loop please")
    s.run_pass(exit_ok("edited"))
    s.run_pass(cmd("pytest", "\x1b[32m============ \x1b[32m\x1b[1m5 passed\x1b[0m\x1b[32m in 0.03s\x1b[0m ===="))
    s.run_pass(Reply(warning="x"))
    assert verdicts(s)[-1] == ("test", "success")


def test_a_1mb_user_message(monkeypatch, tmp_path):
    s = Session()
    s.user(BUG_MESSAGE + " " + "lorem ipsum " * 90_000)
    s.run_pass(cmd("ls", "x"))
    no_engine_errors(s)
    assert s.state["plan_id"] == "bugfix_workflow"


# ── what other layers leave on the agent ────────────────────────────────────


@pytest.mark.parametrize("garbage, problem", [
    ("a string", "expected a dict, found str"),
    ({"schema": "graph_engine.core.state/2", "plan_id": "bugfix_workflow"}, "field 'plan_name' is missing or not a str"),
    ({"schema": "graph_engine.core.state/99"}, "unknown state schema 'graph_engine.core.state/99' (this version reads "
                                          "graph_engine.core.state/2)"),
])
def test_garbage_state_is_logged_with_what_and_where(garbage, problem):
    s = Session()
    s.agent._htn_state = garbage
    s.user("hello")
    s.run_pass(Reply(final="hi"))
    no_engine_errors(s)
    excerpt = json.dumps(garbage)
    assert s.log.texts("warning") == [f"[HTN] Ignored an unusable workflow state in agent._htn_state ({problem}): "
                                      f"{excerpt}; it was kept in agent._htn_state_rejected and no workflow is active"]
    assert s.agent._htn_state_rejected == garbage


def test_a_state_whose_node_was_deleted_ends_clearly(monkeypatch, tmp_path):
    path = use_library(monkeypatch, tmp_path, {"loop": fix_loop_plan()})
    s = started("loop please")
    s.state["current_node"] = "gone"
    s.state["plan_version"] = "000000000000"
    s.run_pass(Reply(warning="x"))
    no_engine_errors(s)
    assert s.state is None
    assert "[HTN] Workflow 'Loop' ended: plan 'loop' has no node 'gone'; start it again with a new request once the " \
           "library has it" in s.log.texts("warning")
    assert str(path)  # the library itself was fine


def test_an_old_linear_state_for_a_plan_that_is_now_a_graph(monkeypatch):
    s = Session()
    s.agent._htn_state = {"plan_id": "bugfix_workflow", "plan_name": "Bug Fix Workflow", "current_step": 2,
                          "total_steps": 5, "steps_completed": [0, 1], "turns_since_progress": 1}
    s.user("hello")
    s.run_pass(Reply(final="hi"))
    no_engine_errors(s)
    assert s.log.texts("warning") == ["[HTN] Ended plan 'Bug Fix Workflow' left by the previous selector at step 3: the "
                                      "plan is now a different plan (graph or other steps); send the request again to "
                                      "start it under the graph engine"]


def test_bst_store_of_the_wrong_type():
    s = Session()
    s.user(BUG_MESSAGE)
    s.agent._bst_store = ["not", "a", "dict"]
    s.bst.run = lambda agent, message: None  # the tracker is broken: it leaves the list
    s.run_pass(cmd("ls", "x"))
    s.run_pass(cmd("ls", "x"))
    no_engine_errors(s)
    assert s.log.texts("warning") == ["[HTN] agent._bst_store is a list, not a dict; the belief-state domain reads as "
                                      "empty until the _11_ tracker stores a dict"]
    assert s.state["plan_id"] == "bugfix_workflow"  # strong phrase: no domain needed


def test_allowed_plans_of_the_wrong_type():
    s = Session(allowed_plans="bugfix_workflow")
    s.user(BUG_MESSAGE)
    s.run_pass(cmd("ls", "x"))
    s.run_pass(cmd("ls", "x"))
    no_engine_errors(s)
    assert s.state is None
    assert s.log.texts("warning") == ["[HTN] _org_htn_allowed_plans is a str, not a list of plan ids; no plan may start "
                                      "until the org dispatcher sets a list (or None for no filter)"]


# ── file_exists ─────────────────────────────────────────────────────────────


def file_plan(path: str) -> dict:
    plan = fix_loop_plan()
    plan["graph"]["nodes"]["fix"]["verify"] = {"type": "file_exists", "value": path}
    return plan


@pytest.mark.parametrize("kind, reason", [
    ("dir", "{p} is a directory, not a file"),
    ("dangling", "{p} is a dangling symbolic link"),
    ("outside", "{p} is outside the allowed roots ({root}, set by GRAPH_ENGINE_FILE_ROOTS)"),
])
def test_file_exists_refuses_directories_dangling_links_and_paths_outside_the_roots(monkeypatch, tmp_path, kind,
                                                                                     reason):
    root = tmp_path / "work"
    root.mkdir()
    target = {"dir": root / "folder", "dangling": root / "link", "outside": tmp_path / "elsewhere.txt"}[kind]
    if kind == "dir":
        target.mkdir()
    elif kind == "dangling":
        os.symlink(root / "missing", target)
    else:
        target.write_text("x")
    monkeypatch.setenv("GRAPH_ENGINE_FILE_ROOTS", str(root))
    use_library(monkeypatch, tmp_path, {"loop": file_plan(str(target))})
    s = started("loop please")
    s.run_pass(exit_ok("done"))
    s.run_pass(Reply(warning="x"))
    assert events(s, "node_verified")[-1]["reason"] == reason.format(p=target, root=root)
    assert verdicts(s)[-1] == ("fix", "fail")


def test_file_exists_inside_the_roots_passes(monkeypatch, tmp_path):
    root = tmp_path / "work"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "out.txt").write_text("x")
    monkeypatch.setenv("GRAPH_ENGINE_FILE_ROOTS", str(root))
    use_library(monkeypatch, tmp_path, {"loop": file_plan(str(root / "sub" / "out.txt"))})
    s = started("loop please")
    s.run_pass(exit_ok("done"))
    s.run_pass(Reply(warning="x"))
    assert verdicts(s)[-1] == ("fix", "success")


def test_the_shipped_library_is_untouched_by_these_tests():
    assert json.loads(LIBRARY.read_text())["_meta"]["version"].startswith("2.")
