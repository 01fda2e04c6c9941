"""The session's side of the port, generated: whatever a host hands it (a saved state of any shape, any words, any
answer about a path), one pass never raises, never blocks, saves either no run or a state the core can parse, and
says why it refused a state in one warning line."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import event, given, settings as hsettings, strategies as st

from graph_engine.core.engine import PROMPTS_AFTER, Observation
from graph_engine.core.message import CallOutput
from graph_engine.core.state import parse as parse_state
from graph_engine.session import passes
from graph_engine.session.runtime import Runtime
from graph_engine.texts import render
from scenario import fix_loop_plan

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=30)


class Recorder:
    """A host that hands the session what the test gives it and records what comes back."""

    def __init__(self, raw: Any, words: str, output: CallOutput | None, seen: str) -> None:
        self.raw, self.words, self.output, self.seen = raw, words, output, seen
        self.saved: list[Any] = []
        self.lines: list[tuple[str, str]] = []
        self.shown: list[str] = []

    def load_state(self) -> Any:
        return self.raw

    def read_pass(self, state: Any) -> Observation | None:
        return Observation(hook=PROMPTS_AFTER, monologue="m", iteration=1, user_message=self.words,
                           output=self.output, reply_mark="r1", global_turn=2, now=1.0)

    def look(self, path: str) -> str:
        return self.seen

    def log(self, level: str, text: str) -> None:
        self.lines.append((level, text))

    def save_state(self, state: Any, ended: Any) -> None:
        self.saved.append(state)

    def inject(self, text: str) -> None:
        self.shown.append(text)

    def set_pace(self, level: str) -> None:
        pass

    def report(self, request: dict) -> None:
        pass


def runtime(folder) -> Runtime:
    path = folder / "library.json"
    path.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"loop": fix_loop_plan()}}))
    return Runtime(str(path), str(folder))


def a_started_state(folder) -> dict:
    host = Recorder(None, "loop please", None, "")
    asyncio.run(passes.run_pass(host, runtime(folder), render))
    return host.saved[-1]


@hsettings(max_examples=40)
@given(raw=json_values, words=st.text(max_size=60), text=st.text(max_size=200), seen=st.text(max_size=20))
def test_any_state_words_or_answers_make_one_pass_that_saves_a_state_the_core_can_parse(tmp_path_factory, raw, words,
                                                                                         text, seen):
    folder = tmp_path_factory.mktemp("port")
    host = Recorder(raw, words, CallOutput("reply", "code_execution_tool", text), seen)
    asyncio.run(passes.run_pass(host, runtime(folder), render))
    assert not [text for level, text in host.lines if level == "error"]
    for state in host.saved:
        assert state is None or parse_state(json.loads(json.dumps(state)))[0] is not None


@hsettings(max_examples=30)
@given(key=st.sampled_from(["current_node", "turn", "status", "plan_id", "events", "node_state", "seq"]),
       value=json_values)
def test_a_started_state_with_one_field_spoiled_is_refused_in_one_line_or_run(tmp_path_factory, key, value):
    folder = tmp_path_factory.mktemp("spoiled")
    state = a_started_state(folder)
    state[key] = value
    host = Recorder(state, "", None, "")
    asyncio.run(passes.run_pass(host, runtime(folder), render))
    refused = [text for level, text in host.lines if "Ignored an unusable workflow state" in text]
    assert len(refused) <= 1
    event("refused" if refused else "run on")
    if refused:
        assert host.saved[0] is None  # the host is told there is no run
