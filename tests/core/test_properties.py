"""Property-based tests: random valid plans driven by random sequences of Agent-Zero passes.

Profiles (tests/conftest.py): "ci" (the default, used by `make test`: 150 examples per property) and
"long" (HYPOTHESIS_PROFILE=long: 2,000 examples, for local runs).
"""

import json
import os
import shutil
import tempfile

from hypothesis import assume, given, target
from hypothesis import strategies as st

from graph_engine.hosts.agent_zero import adapter
from graph_engine.session.audit import read_lines
from graph_engine.authoring.library import check_document
from graph_engine.tools.standin import Reply, Session, cmd
from graph_engine.core.state import MAX_EVENTS, MAX_PATH, parse


TRIGGER = "run the random plan"
VERIFY = [{"type": "any_output"}, {"type": "exit_code_zero"}, {"type": "output_contains", "value": "ok"},
          {"type": "output_matches", "value": r"^ok\b", "fail_if": r"^FAIL"}]


@st.composite
def graph_plans(draw):
    """Valid graph plans: forward success routes, retry routes anywhere (bounded loops), decisions, escalations."""
    n = draw(st.integers(1, 10))
    tasks = [f"t{i}" for i in range(n)]
    nodes = {"start": {"type": "start"}, "done": {"type": "exit", "name": "Done"},
             "stuck": {"type": "escalate", "reason": "stuck", "pace_level": draw(st.sampled_from(
                 ["alternate", "contingent", "emergency"]))}}
    edges = [{"from": "start", "to": "t0"}]
    if draw(st.booleans()):
        nodes["cp"] = {"type": "checkpoint", "name": "saved"}
        edges = [{"from": "start", "to": "cp"}, {"from": "cp", "to": "t0"}]
    for i, t in enumerate(tasks):
        retries = draw(st.integers(0, 3))
        nodes[t] = {"type": "task", "name": f"Task {i}", "verify": draw(st.sampled_from(VERIFY)),
                    "max_retries": retries}
        forward = tasks[i + 1:] + ["done"]
        target = forward[0]  # the next task (so every node is reachable); other routes are random
        if draw(st.integers(0, 3)) == 0:  # a decision after the task
            d = f"d{i}"
            nodes[d] = {"type": "decision", "description": "route on the outcome"}
            edges += [{"from": t, "to": d, "condition": "always"}]
            if retries:
                edges.append({"from": t, "to": d, "condition": "on_retry"})
            edges += [{"from": d, "to": target, "condition": "on_success"},
                      {"from": d, "to": draw(st.sampled_from(tasks)), "condition": "on_retry"},
                      {"from": d, "to": "stuck", "condition": "on_exhaust"}]
            continue
        edges.append({"from": t, "to": target, "condition": "on_success"})
        if retries and draw(st.booleans()):
            edges.append({"from": t, "to": draw(st.sampled_from(tasks)), "condition": "on_retry"})
        edges.append({"from": t, "to": draw(st.sampled_from(["stuck", "done"] + forward)),
                      "condition": draw(st.sampled_from(["on_exhaust", "on_fail"]))})
    if not any(e["to"] == "stuck" for e in edges):
        del nodes["stuck"]  # an escalation nothing leads to would be unreachable
    return {"name": "Random", "domains": ["bugfix"], "triggers": [TRIGGER], "trigger_threshold": 1,
            "stale_after_turns": draw(st.integers(2, 20)), "graph": {"start": "start", "nodes": nodes, "edges": edges}}


@st.composite
def linear_plans(draw):
    steps = [{"name": f"Step {i}", "verify": draw(st.sampled_from(VERIFY)),
              "on_fail": draw(st.sampled_from(["warn", "block", "skip", "abort"]))}
             for i in range(draw(st.integers(1, 5)))]
    return {"name": "Random linear", "triggers": [TRIGGER], "trigger_threshold": 1,
            "stale_after_turns": draw(st.integers(2, 6)), "steps": steps}


ACTIONS = st.lists(st.sampled_from(["pass", "pass", "pass", "pass", "fail", "fail", "fail", "warning", "small_talk",
                                    "trigger",
                                    "other_domain", "compress", "restart", "response"]), min_size=1, max_size=120)


def reply_for(action: str) -> Reply:
    if action == "pass":
        return cmd('run; echo "[exit:$?]"', "ok done\n[exit:0]")
    if action == "fail":
        return cmd('run; echo "[exit:$?]"', "FAIL: broken\n[exit:1]")
    if action == "response":
        return Reply(final="Here is where things stand.")
    return Reply(warning="You have misformatted your message.")


class Checked:
    """Runs the passes and checks every invariant after each one."""

    def __init__(self, plan: dict, actions: list[str]) -> None:
        self.tmp = tempfile.mkdtemp(prefix="ge-prop-")
        self.lib_path = os.path.join(self.tmp, "htn_plan_library.json")
        with open(self.lib_path, "w") as fh:
            json.dump({"_meta": {"version": "2.0"}, "plans": {"p": plan}}, fh)
        os.environ["GRAPH_ENGINE_LIBRARY"] = self.lib_path
        os.environ["A0_ROOT"] = os.path.join(self.tmp, "a0")
        os.environ["GRAPH_ENGINE_PICTURE"] = "mermaid"  # the pictures are tested elsewhere: no Graphviz per run here
        adapter._runtimes.clear()
        lib = check_document({"plans": {"p": plan}}, self.lib_path)
        self.worst = lib.worst_case_turns.get("p")
        self.plan = lib.plans.get("p")
        self.actions = actions
        self.results_given = 0
        self.most_events = 0
        self.session = Session()

    def __enter__(self) -> "Checked":
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)  # every example leaves nothing in the temp folder

    def run(self) -> None:
        s = self.session
        s.user(TRIGGER)
        s.run_pass(cmd("ls", "x"))  # the first call is shown the plan: its output is a result too
        self.results_given += 1
        self.check(s.records[-1])
        for action in self.actions:
            if action == "restart":
                s = self.session = s.restarted()
                s.user("continue")
            elif action in ("small_talk", "trigger", "other_domain") or not s.monologue_open:
                s.user({"trigger": TRIGGER, "other_domain": "merge the branch feature/x into main"}.get(
                    action, "thanks, go on"))
            elif action == "compress":
                for item in s.history[-3:]:
                    content = item.get("content")
                    if isinstance(content, dict) and "tool_result" in content:
                        item["content"] = json.dumps({"tool_name": content["tool_name"], "tool_result":
                                                      content["tool_result"][:4] + "\n... 99 CHARACTERS REMOVED"})
                continue
            reply = reply_for(action if action in ("pass", "fail", "response") else "warning")
            self.results_given += action in ("pass", "fail", "response")  # a response is a call's output too
            s.run_pass(reply)
            self.check(s.records[-1])
        target(float(self.most_events), label="events in one run")  # steer towards long runs

    def check(self, record) -> None:
        s = self.session
        errors = [t for t in s.log.texts("error") if "Workflow engine error" in t]
        assert errors == [], errors  # execute never raised
        state = s.state
        for st_ in (state, getattr(s.agent, "_htn_last_run", None)):
            if st_ is None:
                continue
            parsed, problem = parse(st_, self.plan)  # every state the engine writes is one a restore accepts
            assert problem == "" and parsed == st_ and parsed is not st_, problem
            assert json.loads(json.dumps(st_)) == st_  # JSON-safe, round-trips
            events = st_["events"]
            self.most_events = max(self.most_events, st_["seq"])
            assert len(events) <= MAX_EVENTS and len(st_["path"]) <= MAX_PATH
            assert [e["seq"] for e in events] == sorted({e["seq"] for e in events})  # chronological, no repeats
            assert [e["turn"] for e in events] == sorted(e["turn"] for e in events)
            if self.worst is not None:
                assert st_["turn"] <= self.worst + 1, (st_["turn"], self.worst)
        if state is not None and state.get("status") == "active" and self.plan is not None:
            shown = dict(map(tuple, state["shown"]))
            key = f"{s.loop.params_persistent.get('graph_engine_monologue')}:{record.iteration}"
            text = record.prompt_extras.get("htn_active_plan", "")
            if key in shown and text and not state.get("held") and "[WORKFLOW ENDED" not in text:
                if shown[key]:  # the call was shown that step
                    assert self.plan.nodes[shown[key]].name in text, (shown[key], text)
                else:  # the call was shown no step (paused): none of its output is evidence
                    assert "Current step:" not in text, text
        newest = state if state is not None else getattr(s.agent, "_htn_last_run", None)
        if newest is not None and newest.get("run_id") and "plan_name" in newest:  # the card shows the run as it is
            cards = [i for i in s.log.logs if i.heading.startswith("Workflow:") and i.kvps["Run"] == newest["run_id"]]
            assert len(cards) == 1, len(cards)
            assert cards[0].kvps["Status"] == newest["status"]
            assert cards[0].kvps["Done"].startswith(f"{len(newest['steps_completed'])} of {newest['total_steps']} ")
        verified = 0
        runs = os.path.join(self.tmp, "a0", "usr", "graph_engine", "runs")
        for folder, _, files in os.walk(runs):
            for f in (f for f in files if f.endswith(".jsonl")):
                verified += sum(1 for e in read_lines(os.path.join(folder, f)) if e["type"] == "node_verified")
        assert verified <= self.results_given  # each call's output is judged at most once


@given(plan=graph_plans(), actions=ACTIONS)
def test_graph_plans_hold_every_invariant(plan, actions):
    lib = check_document({"plans": {"p": plan}})
    assume("p" in lib.plans)  # the generator makes valid plans; lint decides
    with Checked(plan, actions) as checked:
        checked.run()


@given(plan=linear_plans(), actions=ACTIONS)
def test_linear_plans_hold_every_invariant(plan, actions):
    with Checked(plan, actions) as checked:
        checked.run()


@given(plan=graph_plans())
def test_generated_graph_plans_pass_the_lint(plan):
    lib = check_document({"plans": {"p": plan}})
    assert list(lib.plans) == ["p"], [d.text() for d in lib.diagnostics if d.severity == "error"]
    assert lib.worst_case_turns["p"] is not None


@given(plan=graph_plans(), fails=st.integers(0, 50))
def test_every_run_ends_within_the_worst_case(plan, fails):
    """A model that keeps failing, or keeps passing, still sees the run end by the lint's bound."""
    with Checked(plan, ["fail"] * fails + ["pass"] * 400) as checked:
        s = checked.session
        s.user(TRIGGER)
        s.run_pass(cmd("ls", "x"))
        passes = 0
        for action in checked.actions:
            if s.state is None or s.state["status"] != "active":
                break
            s.run_pass(reply_for(action))
            passes += 1
        assert s.state is None or s.state["status"] != "active"
        assert passes <= checked.worst + 1
