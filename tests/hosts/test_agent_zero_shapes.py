"""The stand-in and the history reader agree with the real captures in fixtures/agent_zero/."""

import json
from pathlib import Path

import pytest

from graph_engine.hosts.agent_zero.history import newest_call_output, reply_before_user_message, reply_tool_name, user_words
from graph_engine.tools.standin import FIXTURES, Reply, Session, load_extension_class, terminal

CAPTURES = FIXTURES / "agent_zero"
LAYOUTS = ["newest", "v0.9.8"]


def capture(scenario: str, layout: str, name: str) -> dict:
    return json.loads((CAPTURES / f"{scenario}.{layout}" / f"{name}.json").read_text())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_marker_set_in_before_main_reaches_only_the_next_call(layout):
    # the fact the design rests on, as the real loop showed it
    call1 = json.dumps(capture("two_tools_then_response", layout, "llm_call_01"))
    call2 = json.dumps(capture("two_tools_then_response", layout, "llm_call_02"))
    assert "HARNESS-MARKER" not in call1
    assert "HARNESS-MARKER set in before_main_llm_call at turn 1" in call2


class _Marker:
    """A before_main_llm_call extension that sets a marker, as the capture harness did."""

    async def execute(self, loop_data=None, **_):
        loop_data.extras_temporary["marker"] = f"set at {loop_data.iteration}"


def test_standin_reproduces_that_timing():
    session = Session(companion=False, selector=False)
    session.before_main.append(_Marker())
    session.user("Check the kernel name")
    first = session.run_pass(Reply(code="uname -s", output=terminal("Linux")))
    second = session.run_pass(Reply(final="done"))
    assert "marker" not in first.prompt_extras
    assert second.prompt_extras["marker"] == "set at 0"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_standin_history_items_have_the_captured_shape(layout):
    real = capture("two_tools_then_response", layout, "turn_02")["loop_data.history_output"]
    session = Session(companion=False, selector=False)
    session.user(real[1]["content"]["user_message"])
    session.run_pass(Reply(code="echo hello-from-harness && uname -s",
                           output=terminal("hello-from-harness\nLinux")))
    mine = session.history[-1]
    assert mine == real[-1]
    assert set(session.history[-2]) == set(real[-2]) and session.history[-2]["ai"] is True


@pytest.mark.parametrize("layout", LAYOUTS)
def test_newest_result_read_from_real_tool_error_capture(layout):
    history = capture("tool_error", layout, "turn_03")["loop_data.history_output"]
    out = newest_call_output(history)
    assert out.tool == "code_execution_tool"
    assert "exit=1" in out.text and reply_tool_name(out.reply) == "code_execution_tool"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_warning_pass_has_no_new_result(layout):
    history = capture("warnings", layout, "turn_03")["loop_data.history_output"]
    assert history[-1]["content"].keys() == {"system_warning"}
    assert newest_call_output(history) is None


@pytest.mark.parametrize("layout", LAYOUTS)
def test_unknown_tool_result_is_flagged(layout):
    history = capture("warnings", layout, "turn_02")["loop_data.history_output"]
    out = newest_call_output(history)
    assert out.not_found and out.tool == "no_such_tool"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_compressed_newest_result_is_still_read(layout):
    history = capture("history_compression", layout, "turn_03")["loop_data.history_output"]
    assert isinstance(history[-1]["content"], str)  # compressed into a JSON string
    out = newest_call_output(history)
    assert out.truncated and out.tool == "code_execution_tool"
    assert out.file.endswith("messages/2.txt") and "350" in out.text


@pytest.mark.parametrize("layout", LAYOUTS)
def test_first_pass_of_a_monologue_has_no_result(layout):
    history = capture("two_tools_then_response", layout, "turn_01")["loop_data.history_output"]
    assert newest_call_output(history) is None
    assert user_words([{"ai": False, "content": {"user_message": "hi there"}}]) == "hi there"


def test_previous_monologue_response_is_read_at_next_message():
    reply = json.dumps({"tool_name": "response", "tool_args": {"text": "STEP COMPLETE: all done"}})
    history = [{"ai": True, "content": reply}, {"ai": False, "content": {"user_message": "thanks"}}]
    out = reply_before_user_message(history)
    assert out.tool == "response" and "STEP COMPLETE" in out.text


def test_each_extension_file_yields_exactly_one_extension_class():
    from graph_engine.tools.standin import COMPANION, SELECTOR, install_framework
    for layout in ("new", "old"):
        install_framework(layout)
        for path in (SELECTOR, COMPANION):
            cls = load_extension_class(path)
            assert cls.__name__ in ("HTNPlanSelector", "GraphWorkflowContext")
            text = Path(path).read_text()
            assert "from __future__" not in text
