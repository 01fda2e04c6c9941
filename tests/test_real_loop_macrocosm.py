"""A plan's parallel branches in Agent-Zero's real message loop (`make real-loop`): on v1.x each branch runs in a
subordinate agent of its own, at the same time, driven by the pack's hooks in that agent's own loop; the model is
scripted per agent (`branch_replies`) and may take its time per call (`chat_delay`).  On v0.9.x the branches run
one after another in the chat, with one log line.  Without trees every test here is skipped (tests/a0real.py).
The same behaviour with the stand-in: tests/hosts/test_parallel_branches.py."""

import json
from pathlib import Path

import pytest

from a0real import A0Copy, respond, terminal
from test_parallel_branches import checks_plan
from test_real_loop import WARM_UP, types, verdicts

BRANCHES = ("lint", "types", "tests")
ASK = "run the release checks in {p}"


def project(tree: A0Copy, failing: tuple = ()) -> Path:
    """Three checks as scripts; those in ``failing`` exit 1."""
    folder = tree.root / "usr" / "workdir" / "release"
    folder.mkdir(parents=True, exist_ok=True)
    for b in BRANCHES:
        (folder / f"{b}.sh").write_text(f'echo "{b}: {"2 problems" if b in failing else "clean"}"\n'
                                        f"exit {1 if b in failing else 0}\n")
    return folder


def library(tree: A0Copy, p: Path, policy: str = "all", retries: int = 1, **fan_in) -> dict:
    """The checks plan with the project's commands, written where the runs read it (GRAPH_ENGINE_LIBRARY)."""
    plan = checks_plan(policy, **fan_in)
    nodes = plan["graph"]["nodes"]
    nodes["prepare"].update(action=f"List {p}", tool="code_execution_tool", tool_hint=f"ls {p}")
    for b in BRANCHES:
        nodes[b].update(action=f"Run the {b} check", tool_hint=f"cd {p} && sh {b}.sh", max_retries=retries)
    nodes["report"].update(action="Print the summary", tool="code_execution_tool",
                           tool_hint='echo "release checks: done"')
    path = tree.root.parent / "macrocosm_library.json"
    path.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"release_checks": plan}}))
    return {"GRAPH_ENGINE_LIBRARY": str(path)}


def check(p: Path, b: str, attempt: int = 1) -> str:
    """A branch agent's check (each attempt worded differently: Agent-Zero refuses a reply repeated word for word)."""
    return terminal(f'cd {p} && sh {b}.sh; echo "[exit:$?]"' + ("" if attempt == 1 else f" # attempt {attempt}"),
                    f"Run the {b} check" + ("" if attempt == 1 else " again"))


def branch_script(p: Path, answers: dict | None = None) -> dict:
    """Each branch: its check, the check again (judged only when the first failed: a fresh shell's first command
    can come back before its output on a busy machine), then its answer."""
    return {b: [check(p, b), check(p, b, 2), respond((answers or {}).get(b, f"{b}: done"))] for b in BRANCHES}


def parent_start(p: Path) -> list[str]:
    return [terminal(f"ls {p}", "List the folder"), respond("lint.sh, types.sh and tests.sh."),
            terminal(f"ls {p}", "Prepare")]


def needs_subordinates(tree: A0Copy) -> None:
    if tree.layout != "new":
        pytest.skip("Agent-Zero v0.9.x runs a chat's branches one after another "
                    "(test_on_v09_the_branches_run_one_after_another_with_one_log_line)")


def calls_of(run) -> list[dict]:
    return run.raw["calls"]


def branch_calls(run) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for c in calls_of(run):
        if c.get("branch"):
            out.setdefault(c["branch"], []).append(c)
    return out


def audit(tree: A0Copy, chat_id: str, branches: bool = False) -> list[dict]:
    """The chat's audit events: its runs' logs (``branches``: the branches' own logs instead), in file order."""
    folder = tree.root / "usr" / "graph_engine" / "runs" / chat_id
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if bool(lines and lines[0].get("by") == "branch") == branches:
            out += lines
    return out


def joined(events: list[dict]) -> dict:
    found = [e for e in events if e.get("type") == "parallel_joined"]
    assert len(found) == 1, types(events)
    return found[0]


def test_three_branches_run_in_their_own_agents_at_the_same_time(a0_tree):
    needs_subordinates(a0_tree)
    p = project(a0_tree)
    run = a0_tree.run([WARM_UP, ASK.format(p=p)],
                      parent_start(p) + [terminal('echo "release checks: done"', "Summary"),
                                         respond("All three checks passed.")],
                      branch_replies=branch_script(p, {b: f"{b}: clean, nothing to fix" for b in BRANCHES}),
                      chat_delay={b: 1.0 for b in BRANCHES}, env=library(a0_tree, p))
    assert run.overrun == 0, [c["branch"] for c in calls_of(run)]
    by_branch = branch_calls(run)
    assert set(by_branch) == set(BRANCHES)
    assert {c["agent"] for b in by_branch.values() for c in b} == {1}  # subordinates of the chat's agent 0
    first_starts = [calls[0]["start"] for calls in by_branch.values()]
    first_end = min(c["at"] for calls in by_branch.values() for c in calls)
    assert max(first_starts) < first_end  # all three started before any finished
    spans = [(min(c["start"] for c in cs), max(c["at"] for c in cs)) for cs in by_branch.values()]
    parent = [c for c in calls_of(run) if not c["branch"]]
    assert not [c for c in parent if min(s for s, _ in spans) < c["start"] < max(e for _, e in spans)]  # it waited
    summary = next(m for m in run.calls if "The branches met at" in m)
    assert "Current step: Report" in summary and "(every branch must succeed): it routes on success" in summary
    assert "- 'Lint': success; last check: Lint: passed, exit status 0; its answer: lint: clean, nothing to fix" \
        in summary
    events = audit(a0_tree, run.chat_id)
    assert joined(events)["outcomes"] == {b: "success" for b in BRANCHES}
    copied = {e["branch"] for e in events if e.get("type") == "node_verified" and e.get("branch")}
    assert copied == set(BRANCHES)  # every branch's checks, in the parent's log too
    runs = {e.get("branch_run") for e in events if e.get("type") == "branch_started"}
    folder = a0_tree.root / "usr" / "graph_engine" / "runs" / run.chat_id
    assert all((folder / f"{r}.jsonl").is_file() for r in runs) and len(runs) == 3  # each branch's own log
    assert types(events)[-1] == "plan_completed" and a0_tree.state(run.chat_id) is None
    assert "did not close" not in json.dumps(a0_tree.chat(run.chat_id))  # each branch's terminal was closed


@pytest.mark.parametrize("policy, fan_in, route", [("all", {}, "stuck"), ("any", {}, "report"),
                                                   ("quorum", {"quorum": 2}, "report"),
                                                   ("required", {"required": ["types"]}, "stuck")])
def test_a_failing_branch_and_the_fan_in_policy(a0_tree, policy, fan_in, route):
    needs_subordinates(a0_tree)
    p = project(a0_tree, failing=("types",))
    end = ([terminal('echo "release checks: done"', "Summary"), respond("Done: one check failed, the rest passed.")]
           if route == "report" else [respond("The type check failed twice: 2 problems; how should I go on?")])
    run = a0_tree.run([WARM_UP, ASK.format(p=p)], parent_start(p) + end, branch_replies=branch_script(p),
                      env=library(a0_tree, p, policy, **fan_in))
    assert run.overrun == 0
    events = audit(a0_tree, run.chat_id)
    verdict = joined(events)
    assert verdict["outcomes"] == {"lint": "success", "types": "fail", "tests": "success"}
    assert verdict["passed"] is (route == "report")
    assert [v for v in verdicts(events, "types")] == ["fail", "fail"]  # its retry, within its own agent
    if route == "report":
        assert types(events)[-1] == "plan_completed"
    else:
        assert types(events)[-1] == "plan_escalated"
        shown = next(m for m in run.last_user if "WORKFLOW ESCALATED" in m)
        assert "it routes on fail" in shown and "- 'Type check': fail (exit status 1)" in shown


def test_a_restart_mid_branch_resumes_it_and_judges_nothing_twice(a0_tree):
    needs_subordinates(a0_tree)
    p = project(a0_tree)
    env = library(a0_tree, p)
    failed_first = terminal(f'cd {p} && sh lint.sh --strict-missing; false; echo "[exit:$?]"', "Run the lint check")
    first = a0_tree.run([WARM_UP, ASK.format(p=p)], parent_start(p),
                        branch_replies={**branch_script(p), "lint": [failed_first, "HANG"]},
                        chat_delay={"lint": 4.0}, env=env)
    assert first.hung
    before = audit(a0_tree, first.chat_id)
    assert verdicts(before, "lint") == ["fail"] and sorted(e["branch"] for e in before
                                                           if e.get("type") == "branch_returned") == ["tests", "types"]
    second = a0_tree.run([{"load": first.chat_id}, {"nudge": True}],
                         [terminal('echo "release checks: done"', "Summary"), respond("All checks passed.")],
                         branch_replies={"lint": [check(p, "lint", 2), respond("lint: clean on the second attempt")]},
                         env=env)
    assert second.overrun == 0
    lint_calls = branch_calls(second)
    assert list(lint_calls) == ["lint"]  # only the branch without an outcome runs again
    shown = lint_calls["lint"][0]["messages"]
    text = "\n".join(m["content"] for m in shown)
    assert "[WORKFLOW RESUMED: Release Checks]" in text and "Current step: Lint (attempt 2 of 2)" in text
    events = audit(a0_tree, first.chat_id)
    lint = [e for e in events if e.get("type") == "node_verified" and e.get("node") == "lint"]
    assert [e["outcome"] for e in lint] == ["fail", "success"] and len({e["evidence_sha256"] for e in lint}) == 2
    assert [bool(e.get("again")) for e in events if e.get("type") == "branch_started" and e["branch"] == "lint"] == \
        [False, True]
    assert joined(events)["outcomes"] == {b: "success" for b in BRANCHES}
    assert types(events)[-1] == "plan_completed"


def test_stop_the_workflow_while_branches_run_stops_them_all(a0_tree):
    needs_subordinates(a0_tree)
    p = project(a0_tree)
    turn = {"user": ASK.format(p=p), "say": {"after_calls": 5, "text": "stop the workflow"}}
    run = a0_tree.run([WARM_UP, turn], parent_start(p) + [respond("Stopped, as you asked.")],
                      branch_replies=branch_script(p), chat_delay={b: 3.0 for b in BRANCHES}, env=library(a0_tree, p))
    events = audit(a0_tree, run.chat_id)
    stop = [e for e in events if e.get("type") == "plan_stopped"]
    assert len(stop) == 1 and sorted(stop[0]["branches"]) == sorted(BRANCHES) and stop[0]["said"] == \
        "stop the workflow"
    assert "[WORKFLOW STOPPED by the user: Release Checks]" in run.last_user[-1]
    assert not [e for e in events if e.get("type") == "node_verified" and e.get("branch")]  # none got as far
    assert not [c for c in calls_of(run) if c["branch"]]  # each branch was stopped during its first model call
    assert "did not close" not in json.dumps(a0_tree.chat(run.chat_id))
    assert a0_tree.state(run.chat_id) is None


def test_on_v09_the_branches_run_one_after_another_with_one_log_line(a0_tree):
    if a0_tree.layout == "new":
        pytest.skip("v1.x runs the branches in subordinate agents (the tests above)")
    p = project(a0_tree)
    replies = parent_start(p) + [check(p, b) for b in BRANCHES] + [
        terminal('echo "release checks: done"', "Summary"), respond("All three checks passed.")]
    run = a0_tree.run([WARM_UP, ASK.format(p=p)], replies, env=library(a0_tree, p))
    assert run.overrun == 0 and not branch_calls(run)
    events = audit(a0_tree, run.chat_id)
    assert [e["type"] for e in events if e["type"].startswith("parallel_")] == [
        "parallel_started", "parallel_branch", "parallel_branch", "parallel_joined"]
    assert types(events)[-1] == "plan_completed"
    logs = json.dumps(a0_tree.chat(run.chat_id).get("log", a0_tree.chat(run.chat_id)))
    assert logs.count("run one after another in this chat (Agent-Zero v0.9.x runs one agent of a chat at a time)") == 1


STEPS = 3  # steps per branch in the timed plan


def timed_library(tree: A0Copy, p: Path) -> dict:
    """The checks plan with three steps in each branch (the branch's check, then two more commands)."""
    plan = checks_plan()
    nodes, edges = plan["graph"]["nodes"], plan["graph"]["edges"]
    for b in BRANCHES:
        nodes[b].update(action=f"Run the {b} check", tool_hint=f"cd {p} && sh {b}.sh", max_retries=1)
        edges.remove({"from": b, "to": "join"})
        last = b
        for i in range(2, STEPS + 1):
            nodes[f"{b}_{i}"] = {"type": "task", "name": f"{b} step {i}", "tool": "code_execution_tool",
                                 "tool_hint": f'echo "{b} step {i}"', "verify": {"type": "any_output"}}
            edges.append({"from": last, "to": f"{b}_{i}"})
            last = f"{b}_{i}"
        edges.append({"from": last, "to": "join"})
    nodes["prepare"].update(tool="code_execution_tool", tool_hint=f"ls {p}")
    nodes["report"].update(tool="code_execution_tool", tool_hint='echo "release checks: done"')
    path = tree.root.parent / "macrocosm_timed.json"
    path.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"release_checks": plan}}))
    return {"GRAPH_ENGINE_LIBRARY": str(path)}


def steps_of(p: Path, b: str) -> list[str]:
    return [check(p, b)] + [terminal(f'echo "{b} step {i}"', f"{b} step {i}") for i in range(2, STEPS + 1)]


def wall_time(tree: A0Copy, parallel: bool) -> float:
    """A three-branch run (three steps a branch) with a model that takes 1 s per call, from the request to the
    last model call's answer."""
    p = project(tree)
    env = {**timed_library(tree, p), "GRAPH_ENGINE_PARALLEL_BRANCHES": "on" if parallel else "off"}
    middle = [] if parallel else [r for b in BRANCHES for r in steps_of(p, b)]
    replies = parent_start(p) + middle + [terminal('echo "release checks: done"', "Summary"), respond("Done.")]
    run = tree.run([WARM_UP, ASK.format(p=p)], replies, env=env, chat_delay=1.0,
                   branch_replies={b: steps_of(p, b) + [respond(f"{b}: clean")] for b in BRANCHES} if parallel else {})
    events = audit(tree, run.chat_id)
    assert run.overrun == 0 and types(events)[-1] == "plan_completed"
    assert sum(1 for e in events if e.get("type") == "node_verified" and e.get("outcome") == "success") >= 3 * STEPS
    return max(c["at"] for c in calls_of(run)) - run.raw["sent"][1]


def test_wall_time_of_three_branches_parallel_against_sequential(a0_tree):
    """Parallel: each branch's agent makes its three steps' calls and its answer, the three at once; sequential: the
    chat's own agent makes the nine calls one after another.  The figures go to build/macrocosm_wall_time.json."""
    import os
    needs_subordinates(a0_tree)
    load_before = os.getloadavg()[0]
    sequential = wall_time(a0_tree, parallel=False)
    parallel = wall_time(a0_tree, parallel=True)
    load_after = os.getloadavg()[0]
    out = Path(__file__).resolve().parent.parent / "build" / "macrocosm_wall_time.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"tree": a0_tree.source.name, "model_seconds_per_call": 1.0,
                               "sequential_s": round(sequential, 2), "parallel_s": round(parallel, 2),
                               "speed_up": round(sequential / parallel, 2), "cpus": os.cpu_count(),
                               "load_1min": [round(load_before, 2), round(load_after, 2)]}, indent=1))
    print(f"three branches, 1 s per model call: sequential {sequential:.1f} s, parallel {parallel:.1f} s, load "
          f"{load_before:.1f} to {load_after:.1f} on {os.cpu_count()} CPUs")
    assert parallel < sequential


def test_each_branch_agent_has_its_profile_and_model_preset_and_an_unknown_profile_fails_its_branch(a0_tree):
    """v1.7: 'lint' runs in a researcher, 'types' in a developer calling the model of a preset of the tree's own
    (usr/plugins/_model_config/presets.yaml), 'tests' names a profile Agent-Zero lacks: it fails at its start with
    the reason, and the 'any' fan-in goes on."""
    needs_subordinates(a0_tree)
    p = project(a0_tree)
    env = library(a0_tree, p, policy="any")
    path = Path(env["GRAPH_ENGINE_LIBRARY"])
    lib = json.loads(path.read_text())
    nodes = lib["plans"]["release_checks"]["graph"]["nodes"]
    nodes["lint"]["profile"] = "researcher"
    nodes["types"].update(profile="developer", llm_model="Branch preset")
    nodes["tests"]["profile"] = "nosuch"
    path.write_text(json.dumps(lib))
    presets = a0_tree.root / "usr" / "plugins" / "_model_config" / "presets.yaml"
    presets.parent.mkdir(parents=True, exist_ok=True)
    presets.write_text('- name: "Branch preset"\n  chat:\n    provider: "openai"\n    name: "branch-test-model"\n'
                       '    api_key: "none"\n  utility:\n    provider: "openai"\n    name: "branch-test-model"\n')
    script = branch_script(p)
    run = a0_tree.run([WARM_UP, ASK.format(p=p)],
                      parent_start(p) + [terminal('echo "release checks: done"', "Summary"), respond("Done.")],
                      branch_replies={b: script[b] for b in ("lint", "types")}, env=env)
    by_branch = branch_calls(run)
    assert set(by_branch) == {"lint", "types"}
    system = {b: cs[0]["messages"][0]["content"] for b, cs in by_branch.items()}
    assert "Agent Zero 'Deep Research'" in system["lint"] and "Master Developer" not in system["lint"]
    assert "Agent Zero 'Master Developer'" in system["types"]
    parent = [c for c in calls_of(run) if not c["branch"]]
    assert not any("Deep Research" in c["messages"][0]["content"] for c in parent)
    assert {c["model"] for c in by_branch["types"]} == {"openai/branch-test-model"}
    assert "branch-test-model" not in {c["model"] for c in by_branch["lint"] + parent}
    events = audit(a0_tree, run.chat_id)
    outcome = joined(events)["outcomes"]
    assert outcome == {"lint": "success", "types": "success", "tests": "fail"}
    reason = next(e for e in events if e.get("type") == "branch_returned" and e.get("branch") == "tests")["reason"]
    assert reason.startswith("'nosuch' is no agent profile of this Agent-Zero (its profiles: ") and \
        "researcher" in reason
    assert types(events)[-1] == "plan_completed"


def test_a_branch_whose_model_never_answers_ends_at_the_timeout_and_the_run_goes_on(a0_tree):
    """The 'tests' branch's model takes a minute per call; the parallel node's timeout (4 s) ends it with the reason,
    one log line names it, and the 'any' fan-in goes on with the other two."""
    needs_subordinates(a0_tree)
    p = project(a0_tree)
    env = library(a0_tree, p, policy="any")
    path = Path(env["GRAPH_ENGINE_LIBRARY"])
    lib = json.loads(path.read_text())
    lib["plans"]["release_checks"]["graph"]["nodes"]["fan"]["timeout"] = 4
    path.write_text(json.dumps(lib))
    run = a0_tree.run([WARM_UP, ASK.format(p=p)],
                      parent_start(p) + [terminal('echo "release checks: done"', "Summary"), respond("Done.")],
                      branch_replies=branch_script(p), chat_delay={"tests": 60.0}, env=env)
    events = audit(a0_tree, run.chat_id)
    returned = next(e for e in events if e.get("type") == "branch_returned" and e.get("branch") == "tests")
    assert returned["outcome"] == "fail" and returned["reason"] == "no answer within 4 s (the parallel node's timeout)"
    assert joined(events)["outcomes"] == {"lint": "success", "types": "success", "tests": "fail"}
    logs = json.dumps(a0_tree.chat(run.chat_id).get("log", {}))
    assert "Branch 'Unit tests' of workflow 'Release Checks': no answer within 4 s" in logs
    assert types(events)[-1] == "plan_completed"
