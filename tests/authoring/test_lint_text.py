"""The lint of what the page shows: markup (text_markup), direction controls (text_bidi) and invisible characters
(text_invisible) in a plan's names, descriptions, escalation reasons, check wording and edge labels.  Warnings: the
plan still loads and runs, and the warning names the plan, the field and the fix."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scenario import use_library

from graph_engine.authoring.library import check_document
from graph_engine.authoring.lint import BIDI
from graph_engine.tools.standin import FIXTURES, Session, cmd

TEXT_RULES = ("text_markup", "text_bidi", "text_invisible")


def plan_with(**texts) -> dict:
    """The clean fixture's plan with texts put in its fields: plan, plan_description, name, description, reason,
    describe, label."""
    plan = json.loads((FIXTURES / "lint" / "clean.json").read_text())["plans"]["p"]
    nodes, edges = plan["graph"]["nodes"], plan["graph"]["edges"]
    plan["name"] = texts.get("plan", plan["name"])
    plan["description"] = texts.get("plan_description", "")
    nodes["t"].update(name=texts.get("name", "Run the tests"), description=texts.get("description", ""))
    nodes["t"]["verify"]["describe"] = texts.get("describe", "the tests pass")
    nodes["stuck"]["reason"] = texts.get("reason", "stuck")
    edges[1]["label"] = texts.get("label", "")
    return plan


def text_findings(plan: dict) -> list:
    lib = check_document({"plans": {"p": plan}}, "lib.json")
    assert list(lib.plans) == ["p"]  # warnings: the plan loads
    return [d for d in lib.diagnostics if d.rule in TEXT_RULES]


def test_every_field_the_page_shows_is_read_and_named():
    bad = "<b>x</b>"
    found = text_findings(plan_with(plan=bad, plan_description=bad, name=bad, description=bad, reason=bad,
                                    describe=bad, label=bad))
    assert sorted((d.message.split(" holds ")[0], d.node, d.edge) for d in found) == [
        ("the check's wording (verify.describe)", "t", None), ("the edge's label", None, "t -> done"),
        ("the escalation reason", "stuck", None), ("the plan's description", None, None),
        ("the plan's name", None, None), ("the step's description", "t", None), ("the step's name", "t", None)]
    assert {(d.rule, d.severity, d.plan) for d in found} == {("text_markup", "warning", "p")}
    assert all(d.fix for d in found)


@pytest.mark.parametrize("text, rules", [
    ('Evil <img src=x onerror="window.__xss=1">', {"text_markup"}), ("</b>", {"text_markup"}),
    ("a &amp; b", {"text_markup"}), ("&#60;", {"text_markup"}), ("icon://bug", {"text_markup"}),
    ("img://x", {"text_markup"}), ("![x](https://example.com/x.png)", {"text_markup"}),
    ("[docs](https://example.com)", {"text_markup"}),
    ("a < b and x & y", set()), ("[A] Approve", set()), ("3<4", set()),
    ("stuck at \u202etxt.exe", {"text_bidi"}), ("\u2067isolated\u2069", {"text_bidi"}), ("mark\u200f", {"text_bidi"}),
    ("zero\u200bwidth", {"text_invisible"}), ("\ufeffbom", {"text_invisible"}), ("soft\u00adhyphen", {"text_invisible"}),
    ("\x1b[31mred", {"text_invisible"}),
    ("\u05e9\u05dc\u05d5\u05dd", set()), ("dev \U0001f469\u200d\U0001f4bb", set()), ("two\nlines", set()),
    ("<b>\u202e\u200b", set(TEXT_RULES)),
])
def test_each_kind_of_text_has_its_rule(text, rules):
    assert {d.rule for d in text_findings(plan_with(description=text))} == rules


def test_a_finding_quotes_no_character_a_terminal_would_hide():
    found = text_findings(plan_with(name="[a\u202eb](x)"))
    assert {d.rule for d in found} == {"text_markup", "text_bidi"}
    markup = next(d for d in found if d.rule == "text_markup")
    assert "'[a\\u202eb](x)'" in markup.message
    bidi = next(d for d in found if d.rule == "text_bidi")
    assert "U+202E (RIGHT-TO-LEFT OVERRIDE)" in bidi.message
    assert not any(c in d.text() for d in found for c in BIDI)


@given(st.text(min_size=1).filter(str.strip))
def test_any_name_gives_printable_findings_and_a_loaded_plan(name):
    for d in text_findings(plan_with(name=name, plan=name, label=name)):
        assert d.text().isprintable(), d.text()


def test_the_plan_runs_and_the_warning_reaches_the_chat(monkeypatch, tmp_path):
    name = 'Evil <img src=x onerror="window.__xss=1">'
    plan = plan_with(plan=name)
    plan["triggers"] = ["lint me now please"]
    path = use_library(monkeypatch, tmp_path, {"p": plan})
    s = Session()
    s.user("lint me now please")
    s.run_pass(cmd("ls", "x"))
    assert s.state["plan_name"] == name
    assert [w for w in s.log.texts("warning") if "[text_markup]" in w] == [
        f"[HTN] {path}: warning [text_markup] plan 'p': the plan's name holds an HTML tag '<img': the page shows it "
        "as text, and the model, which reads it, may repeat it where the page renders markup (fix: write plain "
        "words (e.g. 'the img tag' for <img>, 'and' for &amp;))"]
