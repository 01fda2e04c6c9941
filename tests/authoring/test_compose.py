"""A plan proposed in the chat, checked at the boundary (authoring/compose.py): whatever arrives (any text, any JSON
value, a plan as JSON or DOT) the check never raises, answers in numbered lines when it refuses, and accepts
exactly the plans the library accepts that also have a check on every step and fit the limits.  The whole life
of a proposal in Agent-Zero's loop: tests/hosts/test_composed.py."""

import json

from hypothesis import given, strategies as st
from test_properties import graph_plans

from graph_engine.authoring import compose
from graph_engine.authoring.dot_plan import to_dot
from graph_engine.authoring.library import check_document
from graph_engine.session import composing

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=20)


def well_formed(p: compose.Proposal) -> None:
    assert p.ok == (p.plan is not None and not p.problems)
    if not p.ok:
        assert p.problems and p.problems[0].startswith("1. ")
        assert p.answer().startswith("The workflow was not accepted: ")
    else:
        assert all(n.verify is not None for n in p.plan.nodes.values() if n.kind.judged)
        assert len(p.plan.nodes) <= compose.MAX_PROPOSAL_NODES and len(p.text) <= compose.MAX_PROPOSAL_CHARS


@given(st.text(max_size=400) | st.sampled_from(["digraph", "digraph g {", "{", '{"graph": {}}', "strict digraph g {}"]))
def test_any_text_is_answered_never_raised(text):
    well_formed(compose.check(text))
    assert composing.answer_of(text) in ("approve", "reject", "")
    composing.save_asked(text)
    composing.is_plan_text(text)


@given(JSON)
def test_any_json_value_is_answered_never_raised(value):
    p = compose.check(value if isinstance(value, (str, dict)) else value)
    well_formed(p)


@given(graph_plans(), st.sampled_from(["json", "dot"]), st.booleans())
def test_a_generated_plan_is_accepted_exactly_when_the_library_and_the_composed_rules_accept_it(raw, fmt, unchecked):
    if unchecked:  # one step without a check
        task = next(n for n in raw["graph"]["nodes"].values() if n["type"] == "task")
        task.pop("verify", None)
    text = json.dumps(raw) if fmt == "json" else to_dot("random", raw)
    p = compose.check(text)
    well_formed(p)
    library_ok = "random" in check_document({"plans": {"random": raw}}).plans
    assert p.ok == (library_ok and not unchecked), p.answer()


def test_the_answers_to_a_proposal_are_whole_short_messages():
    for said in ("go ahead", "Yes", "yes, go ahead!", "OK go ahead", "approve it", "looks good", "sure, run it"):
        assert composing.answer_of(said) == "approve", said
    for said in ("no", "No thanks", "reject", "cancel", "don't run it"):
        assert composing.answer_of(said) == "reject", said
    for said in ("yes, but add a test step first", "go ahead and delete everything in /tmp", "no idea", "",
                 "what does it do?"):
        assert composing.answer_of(said) == "", said
    assert composing.save_asked("please save this workflow as Nightly photos") == (True, "Nightly photos")
    assert composing.save_asked('Save this workflow as "Photo Backup", thanks!') == (True, "Photo Backup")
    assert composing.save_asked("save this workflow") == (True, "")
    assert composing.save_asked("save the file") == (False, "")
