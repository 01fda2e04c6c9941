"""No input shape makes the engine raise inside a hook: random history items, tool results, loop data, saved
states and whatever a neighbouring extension could leave on the agent go through both extension files (as
Agent-Zero loads and calls them), and no "Workflow engine error" line appears.  The catch-all in
adapter.run_hook stays as the last guard; these tests show it is not needed."""

import asyncio
import copy
import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scenario import BUG_MESSAGE, IDLE, crash, started

from graph_engine.core.plain import as_text
from graph_engine.hosts.agent_zero.history import newest_call_output, reply_before_user_message, user_words
from graph_engine.core.state import DATA_KEY
from graph_engine.tools.standin import Reply, Session, UserMessage, cmd, tool_reply

ENGINE_ERRORS = "Workflow engine error"


class Deep(list):
    """Lists nested ``levels`` deep, with a short repr (a failing example stays printable)."""

    def __repr__(self) -> str:
        return f"deep({len(self) and self.levels})"


def deep(levels: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(levels - 1):
        value = [value]
    outer = Deep([value])
    outer.levels = levels
    return outer


def cyclic() -> dict:
    value: dict = {"tool_name": "code_execution_tool"}
    value["tool_result"] = value
    return value


class Odd:
    """An object no JSON encoder knows, whose attributes raise."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise RuntimeError(f"no {name}")

    def __repr__(self) -> str:
        return "Odd()"

    def __str__(self) -> str:
        raise RuntimeError("no text")


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                               max_size=4), max_leaves=12)
ODD = st.sampled_from([lambda: deep(5000), lambda: {(1, 2): "tuple key", 3: "int key"}, lambda: {None: 1}, Odd,
                       lambda: b"bytes", lambda: {1, 2}, lambda: float("nan"), lambda: 10 ** 400, lambda: 10 ** 5000,
                       lambda: "\udcff", lambda: "{\"tool_name\": " + "[" * 5000, cyclic]).map(lambda make: make())
ANY = JSON | ODD  # each example gets its own objects: the hooks write into some of them
TOOL_RESULT = st.fixed_dictionaries({"tool_name": ANY | st.just("code_execution_tool"), "tool_result": ANY},
                                    optional={"file": ANY})
CONTENT = (TOOL_RESULT | ANY | st.builds(as_text, TOOL_RESULT)
           | st.fixed_dictionaries({"user_message": ANY}) | st.fixed_dictionaries({"user_intervention": ANY}))
ITEM = st.fixed_dictionaries({"ai": ANY | st.booleans(), "content": CONTENT}) | ANY
HISTORY = st.lists(ITEM, max_size=6).map(lambda items: [{"ai": True, "content": tool_reply("response", text="Hi")},
                                                        *items])


@dataclass
class LoopData:
    """Loop data as another extension could leave it: any attribute of any type."""

    iteration: Any = 0
    history_output: Any = field(default_factory=list)
    extras_temporary: Any = field(default_factory=dict)
    extras_persistent: Any = field(default_factory=dict)
    params_temporary: Any = field(default_factory=dict)
    params_persistent: Any = field(default_factory=dict)
    last_response: Any = ""
    user_message: Any = None
    current_tool: Any = None


LOOP = st.builds(LoopData, iteration=st.integers(-2, 6) | ANY, history_output=HISTORY | ANY,
                 extras_temporary=st.just({}) | ANY, params_persistent=st.just({}) | ANY,
                 user_message=st.builds(UserMessage, st.sampled_from([BUG_MESSAGE, "hello", "continue"])) | ANY)

NEIGHBOURS = st.fixed_dictionaries({}, optional={
    "_graph_engine_pass": ANY | st.just([None, "x"]), "_graph_engine_pace": ANY | st.just([("m", 1), 5]),
    "_graph_engine_card": ANY | st.just([]), "_graph_engine_companion": ANY, "_bst_store": ANY,
    "_org_pace_level": ANY, "_org_active_role": ANY, "_org_active": ANY})
DATA = st.fixed_dictionaries({}, optional={"_org_htn_allowed_plans": ANY, "graph_engine_audit_spool": ANY})


@lru_cache(maxsize=1)
def saved_state() -> str:
    """A bug-fix run mid-way, as chat.json holds it."""
    s = started()
    s.run_pass(crash())
    s.run_pass(cmd("grep -n divide /tmp/test.py", "3:    return a / b"))
    return json.dumps(s.agent.get_data(DATA_KEY))


@st.composite
def states(draw):
    """A real saved state with up to three fields (or event fields) replaced by anything; or anything."""
    if draw(st.integers(0, 4)) == 0:
        return draw(ANY)
    state = json.loads(saved_state())
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(sorted(state)))
        if key == "events" and state["events"] and draw(st.booleans()):
            event = state["events"][draw(st.integers(0, len(state["events"]) - 1))]
            event[draw(st.sampled_from(sorted(event) + ["node", "to"]))] = draw(ANY)
        elif draw(st.booleans()):
            state[key] = draw(ANY)
        else:
            del state[key]
    return state


def hook_pass(s: Session, loop: Any) -> None:
    for ext in s.prompts_after + s.before_main:  # one pass, in Agent-Zero's order
        asyncio.run(ext.execute(loop_data=loop))


def engine_errors(s: Session) -> list[str]:
    return [t for t in s.log.texts("error") if ENGINE_ERRORS in t]


@given(loop=LOOP, neighbours=NEIGHBOURS, data=DATA, state=st.none() | states(), where=st.sampled_from(["attr", "data"]))
def test_no_input_shape_makes_a_hook_raise(loop, neighbours, data, state, where):
    s = Session()
    for name, value in neighbours.items():
        setattr(s.agent, name, value)
    s.agent.data.update(data)
    if state is not None:
        if where == "attr":
            s.agent._htn_state = state
        else:
            s.agent.data[DATA_KEY] = state
    hook_pass(s, loop)
    if isinstance(loop.iteration, int) and not isinstance(loop.iteration, bool):
        loop.iteration += 1
    hook_pass(s, loop)  # the pass after: whatever the first one left
    assert engine_errors(s) == []


@given(items=st.lists(st.fixed_dictionaries({"ai": ANY | st.booleans(), "content": CONTENT}), max_size=6))
def test_a_run_reads_any_history_without_an_engine_error(items):
    s = started()
    s.history.extend(items)  # items as Agent-Zero's history gives them: {"ai", "content"}, the content anything
    s.run_pass(Reply(warning="x"))
    s.run_pass(IDLE)
    assert engine_errors(s) == []


# ── the reproducers: each of these raised in history.py ────────────────────


@pytest.mark.parametrize("result", [{(1, 2): "tuple key"}, cyclic(), deep(5000), {"a": deep(3000)}, Odd()],
                         ids=["non-string key", "cycle", "deep list", "deep dict", "odd object"])
def test_a_tool_result_of_any_value_reads_as_text(result):
    history = [{"ai": True, "content": tool_reply("code_execution_tool", "ls")},
               {"ai": False, "content": {"tool_name": "code_execution_tool", "tool_result": result}}]
    out = newest_call_output(history)
    assert out is not None and out.tool == "code_execution_tool" and isinstance(out.text, str) and out.text


@pytest.mark.parametrize("content", [deep(5000), cyclic(), "{\"tool_name\": " + "[" * 100_000])
def test_a_reply_or_message_of_any_value_reads_as_text(content):
    history = [{"ai": True, "content": content}, {"ai": False, "content": {"tool_name": "t", "tool_result": "ok"}},
               {"ai": False, "content": {"user_message": content}}]
    assert newest_call_output(history[:2]) is not None
    assert reply_before_user_message(history) is not None
    assert user_words([{"content": content}]) == (content if isinstance(content, str) else "")


def test_a_tool_result_from_another_extension_with_a_dict_is_judged(monkeypatch, tmp_path):
    s = started()
    s.run_pass(crash())  # reproduce: fails, then the run waits for the next result
    s.history.append({"ai": True, "content": tool_reply("code_execution_tool", "python3 /tmp/test.py")})
    s.history.append({"ai": False, "content": {"tool_name": "code_execution_tool",
                                               "tool_result": {("exit", 1): copy.deepcopy(deep(100))}}})
    s.run_pass(IDLE)
    assert engine_errors(s) == []


def test_a_fault_before_the_engine_runs_is_one_log_line_not_an_exception(monkeypatch):
    """Reading the settings or finding the runtime is inside the hook's guard too."""
    from graph_engine.hosts.agent_zero import adapter, lines
    from graph_engine.boundary import settings
    from graph_engine.tools.standin import Session

    s = Session()

    def broken(*args, **kwargs):
        raise RuntimeError("settings store unreadable")

    monkeypatch.setattr(settings, "current", broken)
    s.user("fix the bug in /tmp/test.py")
    s.run_pass(IDLE)  # both hooks run; neither raises
    errors = [i.heading for i in s.log.logs if i.type == "error"]
    assert len(errors) == 1 and "RuntimeError" in errors[0] and "settings store unreadable" in errors[0]
    assert lines.NO_RUNTIME.logged_once or any(rt.logged_once for rt in adapter._runtimes.values())
