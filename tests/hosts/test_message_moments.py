"""A message the person writes while the agent works, at every moment of a pass Agent-Zero can take it, with and
without branches running: each result is judged once, against the step its call was shown, and no step passes
whose command never ran.  The stand-in takes the message where Agent-Zero's ``handle_intervention`` does
(``standin.MOMENTS``); the same moments in Agent-Zero's real loop: tests/test_real_loop_moments.py.

The model here reads its prompt: it runs the command of the step it was shown, whose output says which step it was
for (``done:<step>``), and each step's check asks for its own words, so a result judged against another step
would fail it; a call shown no step answers the person's question."""

import hashlib
import re

import pytest
from scenario import events, use_library

from graph_engine.core.verify import Evidence, judged_text
from graph_engine.tools.standin import MOMENTS, BranchModel, Reply, Session, UserMessage, _so_far, cmd, terminal

QUESTION = "also, which python version is installed?"
STEPS = ("prepare", "lint_1", "lint_2", "lint_3", "report")
BRANCHES = ("lint", "types", "tests")


def step(node: str, name: str, check: str = "own words") -> dict:
    """A step whose check asks for its own words (a result issued for another step fails it), or for exit status
    0 (any command's result passes it: the case where a foreign result would fake the step)."""
    verify = {"type": "output_contains", "value": f"done:{node}"} if check == "own words" else \
        {"type": "exit_code_zero"}
    return {"type": "task", "name": name, "action": f"run {node}", "tool": "code_execution_tool", "verify": verify,
            "max_retries": 1}


def chain_plan(check: str = "own words") -> dict:
    """Five steps in a row."""
    names = {n: n.replace("_", " ").title() for n in STEPS}
    nodes = {"start": {"type": "start"}, "done": {"type": "exit"},
             "stuck": {"type": "escalate", "reason": "a step failed"},
             **{n: step(n, names[n], check) for n in STEPS}}
    order = ["start", *STEPS, "done"]
    edges = [{"from": a, "to": b, "condition": "on_success" if a in STEPS else "always"}
             for a, b in zip(order, order[1:])]
    edges += [{"from": n, "to": "stuck", "condition": "on_exhaust"} for n in STEPS]
    return {"name": "Lint Chain", "triggers": ["run the lint chain"], "trigger_threshold": 1,
            "graph": {"start": "start", "nodes": nodes, "edges": edges}}


def fork_plan(check: str = "own words") -> dict:
    """Prepare, three checks at the same time, then a report."""
    nodes = {"start": {"type": "start"}, "prepare": step("prepare", "Prepare", check),
             "fan": {"type": "parallel", "name": "All checks"},
             **{b: step(b, b.title(), check) for b in BRANCHES},
             "join": {"type": "fan_in", "name": "Checks joined"}, "report": step("report", "Report", check),
             "done": {"type": "exit"}, "stuck": {"type": "escalate", "reason": "the checks failed"}}
    edges = [{"from": "start", "to": "prepare"}, {"from": "prepare", "to": "fan", "condition": "on_success"},
             *[{"from": "fan", "to": b} for b in BRANCHES], *[{"from": b, "to": "join"} for b in BRANCHES],
             {"from": "join", "to": "report", "condition": "on_success"},
             {"from": "join", "to": "stuck", "condition": "on_fail"},
             {"from": "report", "to": "done", "condition": "on_success"},
             {"from": "prepare", "to": "stuck", "condition": "on_exhaust"},
             {"from": "report", "to": "stuck", "condition": "on_exhaust"}]
    return {"name": "Release Checks", "triggers": ["run the release checks"], "trigger_threshold": 1,
            "graph": {"start": "start", "nodes": nodes, "edges": edges}}


class Model:
    """Runs the command of the step its prompt shows; every reply is new, and what each was issued for is kept."""

    def __init__(self, names: dict[str, str]) -> None:
        self.by_name = {name: node for node, name in names.items()}
        self.issued: dict[str, tuple[str, str]] = {}  # the hash a judged result of the call has -> (step, output)
        self.count = 0

    def __call__(self, prompt: str, state=None) -> Reply:
        self.count += 1
        found = re.search(r"^Current step: (.+?)(?: \(attempt .*)?$", prompt, re.MULTILINE)
        node = self.by_name.get(found.group(1)) if found and "[WORKFLOW PAUSED" not in prompt else None
        if node is None:  # no step shown: the person's question is answered
            reply = cmd(f"python3 --version  # {self.count}", "Python 3.11.7\n[exit:0]")
        else:
            reply = cmd(f"run {node}  # {self.count}", f"working on {node}\ndone:{node} [exit:0]")
        self.issued[_hash(reply)] = (node or "", reply.output)
        cut = Reply(tool=reply.tool, code=reply.code, output=_so_far(reply.output))  # the output while it runs
        self.issued[_hash(cut)] = (node or "", cut.output)
        return reply


def _hash(reply: Reply) -> str:
    """The evidence hash the engine records for this reply's result (engine._judge)."""
    evidence = Evidence(tool=reply.tool, text=reply.output, reply=reply.raw())
    digest = hashlib.sha256(judged_text(evidence).encode("utf-8", "surrogatepass"))
    digest.update(b"\0" + reply.raw().encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def judged_right(s: Session, model: Model) -> list[tuple[str, str]]:
    """Every verdict of the run (branches' included): (step, outcome); asserts each was on a result of a call
    shown that step, and that no result was judged twice."""
    verdicts = [e for e in events(s) if e["type"] == "node_verified" and e.get("evidence_sha256")]
    hashes = [e["evidence_sha256"] for e in verdicts]
    assert len(hashes) == len(set(hashes)), "a result was judged twice"
    for e in verdicts:
        issued_for, _ = model.issued.get(e["evidence_sha256"], ("?", ""))
        assert issued_for == e["node"], f"{e['node']} judged on a result issued for {issued_for or 'no step'}"
    return [(e["node"], e["outcome"]) for e in verdicts]


def ended(s: Session) -> bool:
    """A run started and has ended."""
    return s.state is None and getattr(s.agent, "_htn_last_run", None) is not None


def run_to_the_end(s: Session, model: Model, limit: int = 30) -> None:
    for _ in range(limit):
        if ended(s):
            return
        s.run_pass(model)


def done(s: Session) -> dict:
    last = s.agent._htn_last_run
    return {"status": last["status"], "completed": last["steps_completed"]}


CHECKS = ("own words", "exit status")
DEEP = pytest.mark.deep  # (make test-deep) the whole grid; make test says each moment at one place of a run


def grid(places: list, quick_place, checks=CHECKS, quick_checks=CHECKS) -> list:
    """(moment, place, check) for every moment; the places and checks other than the quick ones are deep."""
    return [pytest.param(m, p, c, marks=() if p == quick_place and c in quick_checks else DEEP,
                         id=f"{m}-{p}-{c.replace(' ', '_')}")
            for m in MOMENTS for p in places for c in checks]


@pytest.mark.parametrize("moment, at_pass, check", grid([0, 1, 2, 3], 2))
def test_a_message_at_any_moment_of_a_pass_never_fakes_a_step(monkeypatch, tmp_path, moment, at_pass, check):
    """The message comes in the pass of step ``at_pass``, at ``moment``: every step still passes on its own
    command's result, once, and the run completes as if the message had come between two steps."""
    use_library(monkeypatch, tmp_path, {"chain": chain_plan(check)})
    model = Model({n: n.replace("_", " ").title() for n in STEPS})
    s = Session()
    s.user("run the lint chain")
    for k in range(6):
        if k == at_pass:
            s.run_pass(model, intervention=QUESTION, at=moment)
        else:
            s.run_pass(model)
    run_to_the_end(s, model)
    verdicts = judged_right(s, model)
    assert done(s) == {"status": "completed", "completed": list(STEPS)}
    assert [n for n, o in verdicts if o == "success"] == list(STEPS)  # each step passed once, on its own result
    assert [o for _, o in verdicts if o != "success"] == []  # and none failed on a cut or foreign result


def test_a_message_that_cuts_a_command_short_does_not_fail_its_step(monkeypatch, tmp_path):
    """The command's output so far lacks the step's words: that is no failure; the step is shown again, and its
    attempt count is as before."""
    use_library(monkeypatch, tmp_path, {"chain": chain_plan()})
    model = Model({n: n.replace("_", " ").title() for n in STEPS})
    s = Session()
    s.user("run the lint chain")
    s.run_pass(model)  # prepare shown, its command run
    s.run_pass(model)  # prepare passed, lint_1 shown, its command run
    s.run_pass(model, intervention=QUESTION, at="during_tool")  # lint_1 passed, lint_2's command cut short
    record = s.run_pass(model)
    ignored = events(s, "evidence_ignored")
    assert ignored and ignored[-1]["node"] == "lint_2" and "cut it short" in ignored[-1]["reason"]
    assert s.state["visited"]["lint_2"]["failures"] == 0 and s.state["current_node"] == "lint_2"
    assert "[WORKFLOW PAUSED" in record.prompt_extras["htn_active_plan"]  # this call answers the person
    record = s.run_pass(model)  # (the terminal still runs the cut command: it refuses the answer's command)
    assert "Current step: Lint 2 (attempt 1 of 2)" in record.prompt_extras["htn_active_plan"]
    record = s.run_pass(model)  # refused again: that command never ran, so it is no failure either
    shown = record.prompt_extras["htn_active_plan"]
    assert shown.startswith("[WORKFLOW NOTE] Your last command did not run: the terminal was still running")
    assert "Current step: Lint 2 (attempt 1 of 2)" in shown
    assert "did not run" in events(s, "evidence_ignored")[-1]["reason"]
    s.run_pass(model)
    assert s.state["current_node"] == "lint_3" and s.state["visited"]["lint_2"]["failures"] == 0


def test_a_call_that_made_no_reply_leaves_the_step_it_was_shown_unjudged(monkeypatch, tmp_path):
    """The message comes during the model's call: the next pass finds the previous call's result newest in
    history; it is not taken for the result of the call that never replied."""
    use_library(monkeypatch, tmp_path, {"chain": chain_plan()})
    model = Model({n: n.replace("_", " ").title() for n in STEPS})
    s = Session()
    s.user("run the lint chain")
    s.run_pass(model)  # prepare shown
    s.run_pass(model, intervention=QUESTION, at="during_call")  # prepare passed, lint_1 shown; no reply
    s.run_pass(model)
    assert [(n, o) for n, o in judged_right(s, model)] == [("prepare", "success")]
    ignored = events(s, "evidence_ignored")
    assert ignored and "made no reply" in ignored[-1]["reason"]


# ── with branches running ───────────────────────────────────────────────────


def fork_session(monkeypatch, tmp_path, says_at: int | None, check: str = "own words"
                 ) -> tuple[Session, Model, BranchModel]:
    """The release checks up to the fork; the person writes during the branches' call ``says_at``."""
    use_library(monkeypatch, tmp_path, {"checks": fork_plan(check)})
    model = Model({"prepare": "Prepare", "report": "Report", **{b: b.title() for b in BRANCHES}})
    calls = {"n": 0}

    def branch_reply(branch):
        def reply(agent, prompt):
            calls["n"] += 1
            if calls["n"] == says_at:  # Agent-Zero sets it on the agent streaming now: a branch's
                agent.intervention = UserMessage(message=QUESTION)
            found = re.search(r"^Current step: (.+?)(?: \(attempt .*)?$", prompt, re.MULTILINE)
            if found is None:
                return Reply(final=f"{branch}: done")
            return model(prompt)
        return reply

    branches = BranchModel({b: [branch_reply(b)] * 4 for b in BRANCHES}, delay=0.01)
    s = Session()
    s.agent.context.model = branches
    s.user("run the release checks")
    return s, model, branches


@pytest.mark.parametrize("says_at, check", [pytest.param(n, c, marks=() if n == 2 else DEEP)
                                            for n in (1, 2, 4) for c in CHECKS])
def test_a_message_while_branches_run_never_fakes_the_step_after_them(monkeypatch, tmp_path, says_at, check):
    """The person writes while the three branches work: the step after the fan-in (Report) is shown, the pass
    ends before its call (the message), and Report passes only on its own command's result."""
    s, model, _ = fork_session(monkeypatch, tmp_path, says_at, check)
    run_to_the_end(s, model)
    verdicts = judged_right(s, model)
    assert done(s) == {"status": "completed", "completed": ["prepare", "lint", "types", "tests", "report"]}
    assert sorted(n for n, o in verdicts if o == "success") == sorted(["prepare", *BRANCHES, "report"])
    assert [o for _, o in verdicts if o != "success"] == []


@pytest.mark.parametrize("moment, at_pass, check", grid([0, 1, 2], 1, quick_checks=("exit status",)))
def test_a_message_around_a_fork_never_fakes_a_step(monkeypatch, tmp_path, moment, at_pass, check):
    """The message comes in the parent's passes before the fork (0: Prepare shown; 1: Prepare judged, the fork
    met) or after it (2: Report), at every moment."""
    s, model, _ = fork_session(monkeypatch, tmp_path, None, check)
    for k in range(4):
        if ended(s):
            break
        s.run_pass(model, intervention=QUESTION if k == at_pass else "", at=moment)
    run_to_the_end(s, model)
    verdicts = judged_right(s, model)
    assert done(s) == {"status": "completed", "completed": ["prepare", "lint", "types", "tests", "report"]}
    assert [o for _, o in verdicts if o != "success"] == []


def test_the_model_reading_the_prompt_is_what_the_checks_need():
    """The scenario's own premise: a result issued for one step fails another step's check."""
    model = Model({"lint_2": "Lint 2", "lint_3": "Lint 3"})
    reply = model("Current step: Lint 2 (attempt 1 of 2)\n")
    assert "done:lint_2" in reply.output and "done:lint_3" not in terminal(reply.output)


class ResetOnly(Reply):
    """A call that only resets Agent-Zero's terminal (code_execution_tool with runtime "reset")."""

    def raw(self) -> str:
        return '{"thoughts": ["reset"], "headline": "Reset", "tool_name": "code_execution_tool", ' \
               '"tool_args": {"runtime": "reset", "session": 0}}'


def test_a_call_that_only_resets_the_terminal_is_no_result_of_the_step(monkeypatch, tmp_path):
    use_library(monkeypatch, tmp_path, {"chain": chain_plan("exit status")})
    model = Model({n: n.replace("_", " ").title() for n in STEPS})
    s = Session()
    s.user("run the lint chain")
    s.run_pass(model)  # prepare shown, its command run
    s.run_pass(ResetOnly(output="Terminal session has been reset."))  # prepare passed; lint_1 shown, a reset made
    s.run_pass(model)
    assert events(s, "evidence_ignored")[-1]["reason"] == "the call only reset the terminal"
    assert s.state["current_node"] == "lint_1" and s.state["visited"]["lint_1"]["failures"] == 0
