"""The regex prefilter never changes an answer: prefilter.search(p, t) is exactly p.search(t)."""

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph_engine.core import patterns, prefilter
from graph_engine.authoring.library import load_library_file
from graph_engine.tools.standin import LIBRARY, ROOT, terminal

OUTPUTS = [c["output"] for c in json.loads((ROOT / "fixtures" / "check_outputs.json").read_text())["cases"]]


def same(pattern, text):
    """The prefilter's answer is the pattern's own (run as the engine runs it: patterns.search, bounded)."""
    fast, slow = prefilter.search(pattern, text), patterns.search(pattern, text)
    return (fast and (fast.span(), fast.groupdict())) == (slow and (slow.span(), slow.groupdict()))


def library_patterns():
    out = []
    for plan in load_library_file(str(LIBRARY)).plans.values():
        for node in plan.nodes.values():
            v = node.verify
            if v is not None:
                out += [p for p in (v.pattern, v.fail_pattern, v.capture_pattern) if p is not None]
    return out


def test_every_shipped_pattern_gives_the_same_answer_on_every_realistic_output():
    patterns = library_patterns()
    assert len(patterns) > 30
    for pattern in patterns:
        for text in OUTPUTS:
            for variant in (text, terminal(text)):
                assert same(pattern, variant), (pattern.pattern, text[:80])


def test_failure_patterns_are_skipped_on_a_passing_output():
    """The point of it: a fail_if such as '\\b\\d+ (failed|errors?)\\b|^FAILED |^Traceback' needs text a
    passing pytest run does not print."""
    fail = re.compile(r"\b\d+ (failed|errors?)\b|^FAILED |^Traceback \(most recent call last\)", re.M)
    assert prefilter.required_literals(fail) == ("FAILED ", "Traceback (most recent call last)", "error", "failed")
    passing = "tests/test_calc.py ......  [100%]\n6 passed in 0.03s\n[exit:0]"
    assert prefilter.search(fail, passing) is None and all(p not in passing for p in prefilter.required_literals(fail))
    filtered = [p for p in library_patterns() if prefilter.required_literals(p)]
    assert len(filtered) >= 0.9 * len(library_patterns())  # all but the case-insensitive one


@pytest.mark.parametrize("pattern,need", [
    (r"a*", None),  # matches the empty string: nothing is needed
    (r"(?i)error", None),  # case-insensitive: substring tests are unsafe with Unicode case folding
    (r"x(?i:abc)", ("x",)),  # the case-insensitive group is not used
    (r"(abc)+x", ("abc",)),  # a repeat that must occur once
    (r"(abc)?x", ("x",)),  # ... and one that need not
    (r"ab|c", ("ab", "c")),
    (r"a|\d", None),  # an alternative that needs no literal text
    (r"(?=error)\w+", None),  # look-arounds are not relied on
    (r"(?>abc)d", ("abc",)),  # atomic groups are read like groups; the longer piece is kept
])
def test_required_literals(pattern, need):
    assert prefilter.required_literals(re.compile(pattern, re.M)) == need


ALPHABET = "abcAB :-[]0\n"
atoms = st.one_of(
    st.sampled_from(["a", "b", "c", "A", "ab", "abc", " ", ":", r"\[", r"\]", "0", r"\d", r"\s", r"\w", ".", "[ab]",
                     "[^a]", "^", "$", r"\b", r"\B", r"\n"]),
)


def wrap(children):
    return st.one_of(
        st.tuples(children, children).map(lambda t: t[0] + t[1]),
        st.tuples(children, children).map(lambda t: f"{t[0]}|{t[1]}"),
        children.map(lambda c: f"({c})"),
        children.map(lambda c: f"(?:{c})"),
        children.map(lambda c: f"(?>{c})"),
        children.map(lambda c: f"(?i:{c})"),
        children.map(lambda c: f"(?={c})"),
        children.map(lambda c: f"(?!{c})"),
        st.tuples(children, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "*?", "+?", "++", "?+"])).map(
            lambda t: f"(?:{t[0]}){t[1]}"),
    )


regexes = st.recursive(atoms, wrap, max_leaves=8)


@given(regexes, st.text(alphabet=ALPHABET, max_size=40), st.sampled_from([re.M, re.M | re.S, 0]))
def test_the_prefilter_never_changes_an_answer(source, text, flags):
    try:
        pattern = re.compile(source, flags)
    except re.error:
        return
    need = prefilter.required_literals(pattern)
    match = pattern.search(text)
    if match is not None and need is not None:
        assert any(piece in text for piece in need), (source, text, need)
    assert same(pattern, text)


@given(regexes, st.data())
def test_text_that_the_pattern_matches_contains_a_required_piece(source, data):
    """Texts drawn to match the pattern (hypothesis builds them from the regex) always contain a piece."""
    try:
        pattern = re.compile(source)
        strategy = st.from_regex(pattern)
        strategy.validate()
    except Exception:  # noqa: BLE001 - a pattern re or hypothesis does not handle: nothing to check
        return
    need = prefilter.required_literals(pattern)
    if need is None:
        return
    text = data.draw(strategy)
    assert pattern.search(text) is not None
    assert any(piece in text for piece in need), (source, text, need)
