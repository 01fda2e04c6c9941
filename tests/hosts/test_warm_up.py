"""The warm-up (agent_init/_90_graph_engine_warm_up.py): Agent-Zero creates a chat's agent before its first
message; the file's thread loads and checks the library, compiles its check patterns and builds its meaning
index then.  The first message is decided exactly as without it, whether it comes after the thread is done or
at once (its pass then waits); what the load found is still said in the chat, by the first pass."""

import threading

import pytest
from scenario import BUG_MESSAGE, IDLE, use_library

from graph_engine.hosts.agent_zero import adapter

from graph_engine.core import patterns, prefilter
from graph_engine.tools.standin import Session


def warm_up_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "graph-engine warm-up"]


def finished_warm_up() -> None:
    for thread in warm_up_threads():
        thread.join(60)
    assert not warm_up_threads(), "the warm-up thread did not end within 60 s"


def first_decision(session: Session) -> tuple:
    session.user(BUG_MESSAGE)
    session.run_pass(IDLE)
    state = session.state or {}
    return state.get("plan_id"), state.get("current_node"), state.get("status")


def reference_decision() -> tuple:
    decision = first_decision(Session())
    adapter._runtimes.clear()  # as a new process: the next session loads the library again
    return decision


@pytest.mark.parametrize("layout", ["new", "old"])
def test_the_library_is_loaded_before_the_first_message(layout):
    expected = reference_decision()
    session = Session(layout=layout, warm_up=True)
    finished_warm_up()
    (rt,) = adapter._runtimes.values()
    assert rt.library.current is not None, "the warm-up did not load the library"
    node_checks = [n.verify for p in rt.library.current.checked.values() if p.plan for n in p.plan.nodes.values()
                   if n.verify is not None and n.verify.pattern is not None]
    assert node_checks and all(c.pattern in prefilter._needs for c in node_checks)
    if patterns.use_regex:
        assert all((c.pattern.pattern, c.pattern.flags) in patterns._bounded for c in node_checks)
    assert first_decision(session) == expected
    assert expected[0] == "bugfix_workflow"


def test_a_message_at_once_waits_for_the_warm_up_and_gets_the_same_decision():
    expected = reference_decision()
    session = Session(warm_up=True)
    assert first_decision(session) == expected  # no join: the pass may find the thread still loading
    finished_warm_up()


def test_what_the_warm_up_load_found_is_said_by_the_first_pass(monkeypatch, tmp_path):
    use_library(monkeypatch, tmp_path, {"broken": {"name": "Broken", "steps": "not a list"}})
    session = Session(warm_up=True)
    finished_warm_up()
    assert not session.log.texts("warning"), "the warm-up spoke before the chat's first message"
    session.user("hello there")
    session.run_pass(IDLE)
    assert any("broken" in text for text in session.log.texts("warning"))


def test_a_subordinate_agent_starts_no_warm_up():
    from graph_engine.tools.standin import Agent

    Session(agent=Agent(1), warm_up=True)
    assert not warm_up_threads()
    assert not adapter._runtimes
