"""A restored state is parsed, not trusted: every field and every event is checked against the plan version it
names and read into a new value; the stored value is never changed; one warning names the field.  The same for a
state the previous linear selector left, of any shape."""

import copy
import json
import os

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from scenario import IDLE, crash, started

from graph_engine.core.state import DATA_KEY, parse
from graph_engine.tools.standin import Reply, Session, cmd

ISOLATE = cmd("grep -n divide /tmp/test.py", "3:    return a / b")
ENGINE_ERRORS = "Workflow engine error"


def mid_run() -> Session:
    """A bug-fix run mid-way (at 'isolate', events of several kinds), its state saved with the chat."""
    s = started()
    s.run_pass(crash())
    s.run_pass(ISOLATE)
    s.run_pass(Reply(final="Cause found."))
    return s


def restore(s: Session, saved) -> Session:
    s.agent.set_data(DATA_KEY, saved)
    s = s.restarted()
    s.user("ok, go on")
    s.run_pass(IDLE)
    return s


def edited(edit) -> tuple[Session, dict]:
    s = mid_run()
    saved = json.loads(json.dumps(s.agent.get_data(DATA_KEY)))
    edit(saved)
    return s, saved


def rejection(s: Session) -> str:
    assert [t for t in s.log.texts("error") if ENGINE_ERRORS in t] == []
    warnings = [t for t in s.log.texts("warning") if "Ignored an unusable workflow state" in t]
    assert len(warnings) == 1 and s.state is None, (warnings, s.state)
    assert s.agent._htn_last_run["status"] == "rejected"
    return warnings[0]


def put(key, value):
    def edit(state):
        state[key] = value
    return edit


def put_event(field, value):
    def edit(state):
        state["events"][-1][field] = value
    return edit


def done_of(n):
    def edit(state):
        state["steps_completed"] = ["reproduce"] * n
        state["current_step"] = n
    return edit


# (how the saved state is damaged) -> the words the one warning says
DAMAGE = [
    (put("parallel", -1), "field 'parallel' is missing or not a list of {node, pending, failed[, items, values]} frames"),
    (put("context", ""), "field 'context' is missing or not a dict of names and JSON values"),
    (put_event("node", []), ".node' is [], not a str"),
    (done_of(7), "field 'current_step' is 7, past total_steps 5"),
    (done_of(2), "field 'steps_completed' lists 2 step(s), 1 different, of 5"),
    (put("max_turns", 10 ** 9), "field 'max_turns' is 1000000000, past the plan's ceiling of"),
    (put("stale_after_turns", 10 ** 6), "field 'stale_after_turns' is 1000000, past the plan's ceiling of"),
    (put("current_node", "decide_approach"), "field 'current_node' is 'decide_approach', a decision node, where a "
                                             "run does not rest"),
    (put("current_node", "done"), "field 'current_node' is 'done', an exit node"),
    (put("mode", "linear"), "field 'mode' is 'linear', plan 'bugfix_workflow' is a graph plan"),
    (put("outcome", {"status": "maybe"}), "field 'outcome.status' is 'maybe', not one of success"),
    (put("outcome", {"weather": "fine"}), "field 'outcome' is missing or not a dict of status"),
    (put("gate_jumps", {"fix": 3}), "field 'gate_jumps' names 'fix', which is not a goal gate"),
    (put("gate_jumps", {"fix": -1}), "field 'gate_jumps.fix' is -1, not between 0 and 8"),
    (put("held", "yes"), "field 'held' is missing or not a bool"),
    (put("provisional", {"key": 1}), "field 'provisional' is missing or not a dict of key and started"),
    (put("escalation", {"node": 5}), "field 'escalation' is missing or not a dict of node, reason"),
    (put("checkpoint", "fix"), "field 'checkpoint' names 'fix', a task node, not a checkpoint node"),
    (put("steps_completed", [0, 1]), "field 'steps_completed' holds 0, not a step of plan 'bugfix_workflow'"),
    (put("steps_failed", ["nowhere"]), "field 'steps_failed' holds 'nowhere', not a step of plan"),
    (put("completed_nodes", 99), "field 'completed_nodes' is 99, past total_nodes"),
    (put("total_nodes", 3), "field 'total_nodes' is 3, plan 'bugfix_workflow' has"),
    (put("status", "sleeping"), "field 'status' is 'sleeping', not one of active"),
    (put("last_outcome", "meh"), "field 'last_outcome' is 'meh', not one of"),
    (put("turns_since_transition", 14), "field 'turns_since_transition' is 14, past turn"),
    (put("notice_turn", 40), "field 'notice_turn' is 40, past the next turn"),
    (put("context", {str(i): "x" for i in range(40)}), "field 'context' holds 40 names, over the limit of 32"),
    (put("shown", [["a", "b"]] * 9), "field 'shown' holds 9 entries, over the limit of 4"),
    (put_event("turn", 999), "field 'events' holds an event of turn 999"),
    (put_event("seq", "7"), "]' is not an event with a type, a seq and a turn"),
    (put_event("to", "nowhere"), "field 'events' names node 'nowhere'"),
    (put_event("captured", {"a": 1}), ".captured' is {\"a\": 1}, not a dict of names and text"),
    (put("visited", {"fix": {"attempts": 0, "failures": 0, "outcome": "great"}}), "field 'visited' entry 'fix'"),
    (put("note", float("nan")), "field 'note' is nan, not a finite number"),
    (put("turn", 10 ** 30), "field 'turn' is an integer of 100 bits, over 64"),
    (put("parallel", [{"node": "fix", "pending": [], "failed": []}]), "field 'parallel' names 'fix', a task node"),
]


@pytest.mark.parametrize("edit, said", DAMAGE, ids=[said[:60] for _, said in DAMAGE])
def test_a_restored_state_with_an_impossible_value_is_rejected_naming_it(edit, said):
    s, saved = edited(edit)
    kept = json.dumps(saved)
    s = restore(s, saved)
    warning = rejection(s)
    assert said in warning, warning
    assert "in the chat's saved graph_engine_state (" in warning
    assert json.dumps(saved) == kept  # the stored value is as it was


def test_restoring_reads_the_state_into_a_new_value_and_leaves_the_stored_one_alone():
    s = mid_run()
    saved = json.loads(json.dumps(s.agent.get_data(DATA_KEY)))
    kept = copy.deepcopy(saved)
    s = restore(s, saved)
    assert s.state is not None and s.state is not saved and s.state["status"] == "active"
    assert saved == kept  # the resumed run's events went into the new value
    assert s.state["events"][-1]["seq"] > kept["seq"]


def test_the_parser_copies_and_names_the_first_bad_event():
    s = mid_run()
    state = s.agent.get_data(DATA_KEY)
    parsed, problem = parse(state)  # the plan-free rules
    assert problem == "" and parsed == state and parsed is not state and parsed["events"] is not state["events"]
    bad = dict(state, events=state["events"][:3] + [{"type": "x", "seq": 99, "turn": 0, "node": {"a": [1]}}])
    assert parse(bad) == (None, "field 'events[3].node' is {\"a\": [1]}, not a str")


@pytest.mark.parametrize("value, said", [
    ({"k": {1: 2}}, "field 'context.k' has a key of type int; keys must be text"),
    (None, "field 'context' is missing or not a dict of names and JSON values"),
])
def test_values_json_cannot_hold_are_refused_before_any_rule(value, said):
    state = mid_run().agent.get_data(DATA_KEY)
    assert parse(dict(state, context=value)) == (None, said)


def test_a_state_that_holds_itself_or_nests_deep_is_refused_not_recursed():
    state = json.loads(json.dumps(mid_run().agent.get_data(DATA_KEY)))
    state["context"] = {"loop": state}
    assert parse(state) == (None, "field 'context.loop' holds itself (a cycle)")
    deep = inner = []
    for _ in range(5000):
        inner.append([])
        inner = inner[0]
    assert parse(dict(state, context={"x": deep}))[1].endswith("is nested more than 32 levels deep")


# ── the previous linear selector's state ────────────────────────────────────


LEGACY_LINEAR = {"plan_id": "legacy", "plan_name": "Legacy", "current_step": 1, "total_steps": 3,
                 "steps_completed": [0], "turns_since_progress": 1}


def legacy_session(folder, old: dict) -> Session:
    from graph_engine.hosts.agent_zero import adapter
    path = folder / "htn_plan_library.json"
    steps = [{"name": f"Step {i}", "verify": {"type": "any_output"}} for i in range(3)]
    plan = {"name": "Legacy", "triggers": ["legacy please"], "trigger_threshold": 1, "steps": steps}
    path.write_text(json.dumps({"plans": {"legacy": plan}}))
    os.environ["GRAPH_ENGINE_LIBRARY"] = str(path)  # the fixture's monkeypatch removes it after the test
    adapter._runtimes.clear()
    s = Session()
    s.agent._htn_state = old
    s.user("hello")
    s.run_pass(Reply(final="hi"))
    assert [t for t in s.log.texts("error") if ENGINE_ERRORS in t] == []
    return s


@pytest.mark.parametrize("change", [{"steps_completed": None}, {"steps_failed": None}, {"turns_since_progress": None},
                                    {"steps_completed": [0, 0, 7, -1]}, {"current_step": 99}])
def test_a_previous_selector_state_with_nulls_or_odd_steps_migrates(tmp_path, change):
    s = legacy_session(tmp_path, dict(LEGACY_LINEAR, **change))
    assert s.state is not None and s.state["plan_id"] == "legacy"
    assert parse(s.state)[1] == ""
    assert any("Continued plan 'Legacy' from the previous selector's state" in t for t in s.log.texts("info"))


@pytest.mark.parametrize("change, said", [
    ({"steps_completed": "0,1"}, "field 'steps_completed' is '0,1', not a list of step numbers"),
    ({"steps_failed": [[1]]}, "field 'steps_failed' is [[1]], not a list of step numbers"),
    ({"turns_since_progress": "many"}, "field 'turns_since_progress' is 'many', not a count of turns"),
    ({"turns_since_progress": -3}, "field 'turns_since_progress' is -3, not a count of turns"),
])
def test_a_previous_selector_state_of_another_shape_is_rejected_naming_the_field(tmp_path, change, said):
    s = legacy_session(tmp_path, dict(LEGACY_LINEAR, **change))
    warning = [t for t in s.log.texts("warning") if "Ignored an unusable workflow state" in t]
    assert s.state is None and len(warning) == 1 and f"(a previous selector's state: {said})" in warning[0]


@given(old=st.dictionaries(st.sampled_from(["plan_id", "plan_name", "current_step", "total_steps",
                                            "steps_completed", "steps_failed", "turns_since_progress"]),
                           st.none() | st.booleans() | st.integers(-5, 10) | st.text(max_size=3)
                           | st.lists(st.integers(-2, 5) | st.none(), max_size=4)))
def test_a_previous_selector_state_of_any_shape_migrates_or_is_rejected(tmp_path_factory, old):
    s = legacy_session(tmp_path_factory.mktemp("legacy"), dict(old, plan_id=old.get("plan_id") or "legacy"))
    assert s.state is None or parse(s.state)[1] == ""


# ── generated: what the parser accepts, the engine runs ────────────────────

NODES = ["start", "reproduce", "gather_context", "isolate", "decide_approach", "fix", "test", "done",
         "escalate_stuck", "nowhere"]
PLAUSIBLE = (st.integers(-3, 60) | st.sampled_from([10 ** 9, 5, 0]) | st.sampled_from(NODES)
             | st.sampled_from(["active", "ended", "success", "retry", "exhausted", "fail", "graph", "linear", ""])
             | st.lists(st.sampled_from(NODES), max_size=6) | st.booleans() | st.none()
             | st.dictionaries(st.sampled_from(NODES), st.integers(-1, 9), max_size=3)
             | st.fixed_dictionaries({"status": st.sampled_from(["success", "fail", "odd"])}))


@given(changes=st.lists(st.tuples(st.sampled_from(["current_node", "current_step", "steps_completed",
                                                   "steps_failed", "turn", "turns_since_transition", "max_turns",
                                                   "stale_after_turns", "visited", "path", "context", "outcome",
                                                   "parallel", "gate_jumps", "held", "checkpoint", "last_outcome",
                                                   "completed_nodes", "seq", "audit_seq", "mode", "status",
                                                   "escalation", "provisional", "event.node", "event.to"]),
                                  PLAUSIBLE), min_size=1, max_size=3))
def test_a_state_the_parser_accepts_is_one_the_engine_runs(changes):
    s = mid_run()
    saved = json.loads(json.dumps(s.agent.get_data(DATA_KEY)))
    for key, value in changes:
        if key.startswith("event."):
            saved["events"][-1][key[6:]] = value
        else:
            saved[key] = value
    s = restore(s, saved)
    event("accepted" if s.state is not None else "rejected")
    for reply in (crash(), ISOLATE, IDLE):
        if s.state is None or not s.monologue_open:
            break
        s.run_pass(reply)
    assert [t for t in s.log.texts("error") if ENGINE_ERRORS in t] == []


@pytest.mark.parametrize("key", ["seq", "turn"])
def test_a_state_left_on_the_agent_with_a_huge_counter_is_rejected_and_its_log_still_ends(key):
    s = mid_run()
    state = copy.deepcopy(s.agent.get_data(DATA_KEY))
    state[key] = 10 ** 5000  # no text can even spell it
    s.agent._htn_state = state
    s.user("ok, go on")
    s.run_pass(IDLE)
    warning = [t for t in s.log.texts("warning") if "Ignored an unusable workflow state in agent._htn_state" in t]
    assert s.state is None and len(warning) == 1 and f"field '{key}' is an integer of 16,610 bits" in warning[0]
    assert [t for t in s.log.texts("error") if ENGINE_ERRORS in t] == []


_BASE: list = []


def mid_run_saved() -> tuple[dict, object]:
    """The saved state of ``mid_run`` and the plan version it names (made once)."""
    if not _BASE:
        from graph_engine.authoring.library import load_library_file
        from graph_engine.tools.standin import LIBRARY
        s = mid_run()
        saved = json.loads(json.dumps(s.agent.get_data(DATA_KEY)))
        plan = load_library_file(str(LIBRARY)).plans[saved["plan_id"]]
        assert plan.version == saved["plan_version"]
        _BASE.append((saved, plan))
    return _BASE[0]


def holds_no_impossible_value(state: dict, plan) -> None:
    """What any state the engine may run holds, checked apart from the parser's own rules."""
    from graph_engine.core.state import COUNTERS, STATUSES
    for key in COUNTERS:
        if key in state:
            assert type(state[key]) is int and 0 <= state[key] < 2 ** 63, (key, state[key])
    assert state.get("status", "active") in STATUSES
    assert state["current_node"] in plan.nodes
    if state.get("status", "active") == "active" and not state.get("stalled"):
        assert plan.nodes[state["current_node"]].type in ("task", "human"), state["current_node"]
    assert set(state["steps_completed"]) <= set(plan.success_index)
    assert len(set(state["steps_completed"])) == len(state["steps_completed"]) <= state["total_steps"]
    assert state["total_steps"] == plan.total_steps and state["current_step"] == len(state["steps_completed"])
    assert state.get("audit_seq", 0) <= state["seq"]
    seqs = [e["seq"] for e in state["events"]]
    assert seqs == sorted(set(seqs)) and all(1 <= q <= state["seq"] for q in seqs)
    for nid, entry in state["visited"].items():
        assert nid in plan.nodes
        assert type(entry["attempts"]) is int and type(entry["failures"]) is int
        assert 0 <= entry["failures"] <= entry["attempts"] <= state["turn"] + 1
    assert all(n in plan.nodes for n in state["path"]) and len(state["path"]) <= state["path_len"]
    assert state["turns_since_transition"] <= state["turn"]
    assert state["max_turns"] <= plan.max_turns and state["stale_after_turns"] <= plan.stale_after_turns


@given(changes=st.lists(st.tuples(st.sampled_from(["current_node", "current_step", "steps_completed",
                                                   "steps_failed", "turn", "turns_since_transition", "max_turns",
                                                   "stale_after_turns", "visited", "path", "path_len", "seq",
                                                   "audit_seq", "status", "total_steps", "completed_nodes",
                                                   "total_nodes", "last_outcome", "event.seq", "event.turn",
                                                   "visited.attempts", "visited.failures"]),
                                  PLAUSIBLE | st.floats(allow_nan=True) | st.text(max_size=4)),
                        min_size=1, max_size=4))
def test_a_state_the_parser_accepts_holds_no_impossible_value_and_the_stored_one_is_untouched(changes):
    base, plan = mid_run_saved()
    saved = copy.deepcopy(base)
    for key, value in changes:
        where, _, field = key.partition(".")
        if not field:
            saved[key] = value
        elif where == "event" and isinstance(saved.get("events"), list) and saved["events"] \
                and isinstance(saved["events"][-1], dict):
            saved["events"][-1][field] = value
        elif where == "visited" and isinstance(saved.get("visited"), dict) and saved["visited"]:
            entry = next(iter(saved["visited"].values()))
            if isinstance(entry, dict):
                entry[field] = value
    stored = copy.deepcopy(saved)
    state, problem = parse(saved, plan)
    assert saved == stored or saved != saved  # parsed into a new value; the stored one is as it was (NaN aside)
    event("accepted" if state is not None else "rejected")
    if state is not None:
        assert state is not saved and problem == ""
        holds_no_impossible_value(state, plan)
