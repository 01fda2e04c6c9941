"""Controls the person presses in the web UI's workflow component, applied at once through the pack's API, whatever
the agent is doing: between passes, while the model's call runs, while the tool runs, with branches running.  The
run changes when the control is pressed, the audit log says it was pressed, the model is told at its next call,
and the result in flight is judged against the step its call was shown or set aside, never against the step the
control moved to.  The same controls in Agent-Zero's real web UI: tests/test_real_ui_controls.py."""

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from scenario import BUG_MESSAGE, crash, events, exit_ok, told, use_library, verdicts
from test_control import ISOLATE, at_test_step
from test_parallel_branches import BRANCHES, checks_plan, status

from graph_engine.hosts.agent_zero import adapter, pressed
from graph_engine.tools.standin import SELECTOR, BranchModel, Reply, Session, cmd

ROUTE = {"stop": "stop the workflow", "pause": "pause the workflow", "resume": "resume the workflow",
         "skip": "skip this step", "retry": "retry this step", "restart": "restart the workflow"}


def press(s: Session, kind: str, node: str = "", run: str | None = None, rid: str = "r1") -> dict:
    """What the API handler does: the control handed to the chat's agent; its answer."""
    body = {"context": s.agent.context.id, "run": run or (s.state or {}).get("run_id", "none"), "control": kind,
            "node": node, "id": rid}
    return asyncio.run(adapter.control_api(body, lambda cid: s.agent.context, str(SELECTOR)))


def queued(s: Session, kind: str, node: str = "") -> pressed.Pressed:
    """Pressed while the agent's hook call waits (inside its event loop): queued as the handler queues it."""
    p = pressed.parse({"run": s.state["run_id"], "control": kind, "node": node, "id": "q1"})
    assert pressed.queue(s.agent, p)
    adapter._apply_when_free(s.agent, str(SELECTOR))
    return p


def card(s: Session) -> dict:
    item = next(i for i in reversed(s.log.logs) if i.heading.startswith("Workflow: "))
    return item.kvps


# ── between passes (the agent idle) ────────────────────────────────────────


def test_stop_pressed_between_passes_stops_the_run_at_once_and_the_next_call_is_told():
    s = at_test_step()
    answer = press(s, "stop")
    assert answer["status"] == "applied" and answer["ok"] and answer["text"].startswith("Stopped at Test the fix")
    assert s.state is None and s.agent._htn_last_run["status"] == "stopped"  # at once, before any pass
    stopped = events(s, "plan_stopped")
    assert stopped[-1]["by"] == "button" and stopped[-1]["said"] == "stop the workflow"
    assert card(s)["Status"] == "stopped"
    s.user("what now?")
    record = s.run_pass(Reply(final="It is stopped."))
    assert told(record).startswith("[WORKFLOW STOPPED by the user: Bug Fix Workflow]")
    s.user("and now?")
    assert "[WORKFLOW STOPPED" not in told(s.run_pass(Reply(final="ok")))  # told once


@pytest.mark.parametrize("kind, then", [("skip", "verify_no_regression"), ("retry", "test"), ("pause", "test")])
def test_a_control_pressed_between_passes_changes_the_run_and_the_next_call_shows_it(kind, then):
    s = at_test_step()
    answer = press(s, kind)
    assert answer["status"] == "applied", answer
    assert s.state["current_node"] == then
    assert [e for e in events(s) if e.get("by") == "button"][-1]["said"] == ROUTE[kind]
    s.user("go on")
    shown = told(s.run_pass(Reply(final="ok")))
    if kind == "pause":
        assert shown.startswith("[WORKFLOW PAUSED by the user: ") and "Current step" not in shown
    else:
        assert shown.startswith("[WORKFLOW CONTROL] ") and "Current step:" in shown


def test_back_pressed_names_its_step_by_id():
    s = at_test_step()
    answer = press(s, "back", node="reproduce")
    assert answer["status"] == "applied" and answer["text"].startswith("Back at 'Reproduce the issue'")
    assert s.state["current_node"] == "reproduce" and events(s, "jumped_back")[-1]["by"] == "button"


def test_a_control_that_changes_nothing_is_refused_with_why_and_the_model_is_not_told():
    s = at_test_step()
    answer = press(s, "resume")
    assert answer["status"] == "refused" and not answer["ok"] and "not paused" in answer["text"]
    assert s.state["notice"] == ""
    answer = press(s, "back", node="verify_no_regression")  # a later step
    assert answer["status"] == "refused" and "comes after the current step" in answer["text"]
    assert s.state["current_node"] == "test"


def test_a_control_for_a_run_that_ended_is_refused():
    s = at_test_step()
    old = s.state["run_id"]
    assert press(s, "stop")["status"] == "applied"
    answer = press(s, "skip", run=old)
    assert answer["status"] == "refused" and answer["text"] == "This workflow is no longer running."


def test_restart_pressed_starts_a_new_run_and_names_it():
    s = at_test_step()
    old = s.state["run_id"]
    answer = press(s, "restart")
    assert answer["status"] == "applied" and answer["run"] == s.state["run_id"] != old
    assert s.state["current_node"] == "reproduce" and s.agent._htn_last_run["run_id"] == old


def test_the_answer_is_on_the_card_for_the_page():
    s = at_test_step()
    press(s, "pause", rid="abc-1")
    run = json.loads(card(s)["graph_run"])
    assert run["answer"] == {"id": "abc-1", "control": "pause", "status": "applied",
                             "text": "Paused at 'Test the fix'. The agent is told at its next step."}
    assert run["paused"] is True


def test_a_control_pressed_after_a_restart_applies_to_the_run_saved_with_the_chat():
    s = at_test_step()
    s = s.restarted()
    assert getattr(s.agent, "_htn_state", None) is None
    answer = press(s, "skip", run=s.agent.data["graph_engine_state"]["run_id"])
    assert answer["status"] == "applied" and s.state["current_node"] == "verify_no_regression"
    assert [e["type"] for e in events(s)][-6:].count("run_resumed") == 1


# ── while the agent works ──────────────────────────────────────────────────


@pytest.mark.parametrize("moment", ["after_hooks", "during_call", "during_tool", "after_tool"])
@pytest.mark.parametrize("kind", ["skip", "back", "restart", "stop"])
def test_a_control_pressed_while_the_agent_works_never_judges_the_result_in_flight_against_its_new_step(
        moment, kind):
    """The run stands at 'Test the fix'; the model's call for it is under way (or its command runs) when the
    control is pressed: the run moves at once, and the test's result, when it comes, is not judged against the
    step the control moved to."""
    s = at_test_step()
    s.user("go on")
    answers = []

    def at(name):
        if name == moment:
            answers.append(press(s, kind, node="isolate" if kind == "back" else ""))
    s.run_pass(cmd("pytest -q; echo \"[exit:$?]\"", "1 passed\n[exit:0]"), during=at)
    assert answers and answers[0]["status"] == "applied"
    moved = s.state["current_node"] if s.state else None
    record = s.run_pass(cmd("true # next", "ok"))
    judged = [(n, o) for n, o in verdicts(s)]
    assert ("verify_no_regression", "success") not in judged and ("isolate", "success") not in judged[2:]
    if kind == "stop":
        assert told(record).startswith("[WORKFLOW STOPPED by the user: ")
    else:
        assert s.state["current_node"] == moved and "Current step:" in told(record)
        assert not [e for e in events(s, "node_verified") if e["turn"] == s.state["turn"]]
        ignored = events(s, "evidence_ignored")
        assert kind == "restart" or (ignored and "moved" in ignored[-1]["reason"])


def test_pause_then_resume_pressed_while_the_model_works_judges_the_result_against_its_own_step():
    s = at_test_step()
    s.user("go on")

    def at(name):
        if name == "during_call":
            assert press(s, "pause")["status"] == "applied"
            assert press(s, "resume")["status"] == "applied"
    s.run_pass(cmd("pytest -q; echo \"[exit:$?]\"", "1 passed\n[exit:0]"), during=at)
    s.run_pass(cmd("true # next", "ok"))
    assert verdicts(s)[-1] == ("test", "success")  # issued for 'Test the fix', which is current again


def pressed_while_the_utility_model_answers(monkeypatch, kind: str) -> tuple[Session, pressed.Pressed, object]:
    """At the test step, a message the local matching cannot settle: the hook call waits for the utility model,
    and ``kind`` is pressed meanwhile (queued as the handler queues it, not yet answered); the control and the
    pass's record."""
    s = at_test_step()
    found = []
    match_message = adapter.asking.match_message

    def a_close_call(*args, **kwargs):
        match, _ = match_message(*args, **kwargs)
        return match, "a question for the utility model"

    async def ask(agent, question, timeout, log):
        await asyncio.sleep(0)
        found.append(queued(s, kind))  # pressed while the hook call waits
        assert not found[0].answer.done()
        return None
    monkeypatch.setattr(adapter.asking, "match_message", a_close_call)
    monkeypatch.setattr(adapter.asking, "ask", ask)
    s.user("could you also look at the logging while you are at it")
    record = s.run_pass(Reply(final="ok"))
    assert found
    return s, found[0], record


def test_a_control_pressed_while_the_utility_model_answers_is_applied_when_it_has(monkeypatch):
    """The hook call waits for the utility model (a close call): a control pressed meanwhile waits for that call,
    which applies it when the answer comes, before it steps the pass."""
    s, p, _ = pressed_while_the_utility_model_answers(monkeypatch, "skip")
    assert p.answer.result()["status"] == "applied"
    assert s.state["current_node"] == "verify_no_regression"


def test_stop_pressed_while_the_utility_model_answers_is_told_to_the_call_of_that_pass(monkeypatch):
    """Stop pressed while the hook call waits for the utility model ends the run when the answer comes, and the
    model call that pass prepares is told, not a later one."""
    s, p, record = pressed_while_the_utility_model_answers(monkeypatch, "stop")
    assert p.answer.result()["status"] == "applied"
    assert s.state is None and s.agent._htn_last_run["status"] == "stopped"
    assert told(record).startswith("[WORKFLOW STOPPED by the user: Bug Fix Workflow]")
    s.user("and now?")
    assert "[WORKFLOW STOPPED" not in told(s.run_pass(Reply(final="ok")))  # told once


# ── with branches running ──────────────────────────────────────────────────


def fork(monkeypatch, tmp_path, on_call) -> tuple[Session, BranchModel, dict]:
    """The release checks at their fork, each branch's model call taking its time (lint's first); ``on_call(s, n)`` runs as the
    n-th branch reply is taken (``taken["n"]`` counts them)."""
    use_library(monkeypatch, tmp_path, {"checks": checks_plan()})
    s = Session()
    taken = {"n": 0}

    def counted(reply):
        def give(agent, prompt):
            taken["n"] += 1
            on_call(s, taken["n"])
            return reply
        return give

    model = BranchModel({b: [counted(status(0)), counted(Reply(final=f"{b}: clean"))] for b in BRANCHES},
                        delay={"lint": 0.3, "types": 0.7, "tests": 1.1})
    s.agent.context.model = model
    s.user("run the release checks")
    s.run_pass(cmd("ls", "README.md"))
    return s, model, taken


@pytest.mark.parametrize("kind", ["stop", "pause", "restart"])
def test_stop_pause_or_restart_pressed_while_branches_run_stops_every_branch_agent(monkeypatch, tmp_path, kind):
    found = []

    def on_call(s, n):
        if n == 1:
            found.append(queued(s, kind))
    s, model, taken = fork(monkeypatch, tmp_path, on_call)
    record = s.run_pass(Reply(warning="x"))  # the fork: the branches run in this hook call
    assert found and found[0].answer.result()["status"] == "applied"
    assert taken["n"] == 1  # every branch's agent stopped mid-call: no other reply was ever taken
    if kind == "stop":
        assert s.state is None and told(record).startswith("[WORKFLOW STOPPED by the user: Release Checks]")
        assert set(events(s, "plan_stopped")[0]["branches"]) <= set(BRANCHES)
    elif kind == "pause":
        assert s.state["paused"] and told(record).startswith("[WORKFLOW PAUSED by the user: ")
        assert {b["status"] for b in s.state["fork"]["branches"]} <= {"running", "success"}
    else:
        assert s.state["current_node"] == "prepare" and "Current step: Prepare" in told(record)


def test_branches_paused_by_a_button_run_again_from_their_steps_when_resumed(monkeypatch, tmp_path):
    def on_call(s, n):
        if n == 1:
            queued(s, "pause")
    s, model, _ = fork(monkeypatch, tmp_path, on_call)
    s.run_pass(Reply(warning="x"))
    assert s.state["paused"]
    model.replies = {b: [status(0), Reply(final=f"{b}: clean")] for b in BRANCHES}
    assert press(s, "resume")["status"] == "applied"
    s.user("go on")
    record = s.run_pass(Reply(warning="x"))
    assert s.state["current_node"] == "report" and "Current step: Report" in told(record)
    assert [e.get("again", False) for e in events(s, "branch_started")].count(True) >= 1


def test_skip_pressed_while_branches_run_is_refused_and_they_go_on(monkeypatch, tmp_path):
    found = []

    def on_call(s, n):
        if n == 1:
            found.append(queued(s, "skip"))
    s, _, _ = fork(monkeypatch, tmp_path, on_call)
    record = s.run_pass(Reply(warning="x"))
    answer = found[0].answer.result()
    assert answer["status"] == "refused" and "cannot be skipped" in answer["text"]
    assert s.state["current_node"] == "report" and "Current step: Report" in told(record)


# ── what the page sends ─────────────────────────────────────────────────────


@pytest.mark.parametrize("body, why", [
    ("stop", "not a JSON object"), ({"control": "explode", "run": "r"}, "unknown control"),
    ({"control": "stop"}, "names no run"), ({"control": "stop", "run": "r", "id": "<b>"}, "request id"),
    ({"control": "back", "run": "r"}, "step to go back to")])
def test_a_request_the_page_could_not_have_sent_is_refused_with_why(body, why):
    s = at_test_step()
    answer = asyncio.run(adapter.control_api(body, lambda cid: s.agent.context, str(SELECTOR)))
    assert answer["status"] == "refused" and why in answer["text"] and s.state["current_node"] == "test"


_SESSION: list = []  # one chat at 'Test the fix' for the generated bodies, made again when one changed its run


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(body=st.one_of(st.none(), st.text(max_size=20), st.dictionaries(
    st.sampled_from(["context", "run", "control", "node", "id", "x"]),
    st.one_of(st.none(), st.text(max_size=30), st.integers(), st.lists(st.text(max_size=3), max_size=3),
               st.sampled_from(["stop", "skip", "back", "test", "reproduce"])),
    max_size=6)))
def test_any_request_body_is_answered_and_never_raises(body):
    if not _SESSION or _SESSION[0].state is None or _SESSION[0].state.get("current_node") != "test":
        _SESSION[:] = [at_test_step()]
    s = _SESSION[0]
    if isinstance(body, dict) and body.get("run") == "test":
        body["run"] = s.state["run_id"]  # (the run the page names, now and then)
    before = _without_answer(s.state)
    answer = asyncio.run(adapter.control_api(body, lambda cid: s.agent.context, str(SELECTOR)))
    assert answer["status"] in ("applied", "refused") and isinstance(answer["text"], str)
    if answer["status"] == "refused":  # nothing changed but the answer kept for the page
        assert _without_answer(s.state) == before


def _without_answer(state) -> str:
    return json.dumps({k: v for k, v in (state or {}).items() if k != "pressed"}, sort_keys=True)


def test_a_chat_the_page_names_that_is_gone_is_refused():
    s = at_test_step()
    body = {"context": "gone", "run": s.state["run_id"], "control": "stop", "id": "x"}
    answer = asyncio.run(adapter.control_api(body, lambda cid: None, str(SELECTOR)))
    assert answer["status"] == "refused" and "not open" in answer["text"]
