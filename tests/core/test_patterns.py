"""No check can hang Agent-Zero: unsafe patterns are refused at load, and every search has a time bound,
with the ``regex`` package (a timeout) and without it (a cap on the text scanned)."""

import itertools

import pytest

from graph_engine.core import patterns
from graph_engine.core.model import PlanError, compile_plan
from graph_engine.core.verify import Evidence, check
from graph_engine.tools.standin import Session, cmd
from scenario import events, use_library

ADVERSARIAL = ["a" * 40 + "!", "a" * 5_000 + "!", "a" * 100_000, "a=" * 50_000, ("ab" * 2_000 + "\n") * 50]


@pytest.fixture(params=["regex", "fallback"])
def mode(request, monkeypatch):
    """Each test runs with the regex package's timeout, and again with the fallback (re and a scan cap)."""
    if request.param == "regex":
        pytest.importorskip("regex")
    monkeypatch.setattr(patterns, "use_regex", request.param == "regex")
    return request.param


class Searches:
    """Every search a check makes, as the bound saw it: (characters given, characters scanned, cap, timeout).
    The bounds are checked, not the clock: a busy machine makes no test fail."""

    def __init__(self, monkeypatch) -> None:
        self.seen: list[tuple[int, int, int, float | None]] = []
        cut, regex_for = patterns._head_and_tail, patterns._regex_for

        def head_and_tail(text: str, cap: int) -> str:
            out = cut(text, cap)
            self.seen.append((len(text), len(out), cap, None))  # a regex search adds its timeout next
            return out

        def compiled(pattern):
            rx = regex_for(pattern)
            return None if rx is None else Timed(rx, self)

        monkeypatch.setattr(patterns, "_head_and_tail", head_and_tail)
        monkeypatch.setattr(patterns, "_regex_for", compiled)

    def assert_bounded(self, mode: str) -> None:
        for given, scanned, cap, timeout in self.seen:
            assert scanned <= cap + 1 and scanned <= given + 1, (given, scanned, cap)
            if mode == "regex":
                assert cap == patterns.BOUNDED_CHARS and timeout == patterns.TIMEOUT, (cap, timeout)
            else:
                assert cap <= patterns.FALLBACK_CHARS and timeout is None, (cap, timeout)


class Timed:
    """A compiled ``regex`` pattern that notes the timeout each search is given."""

    def __init__(self, rx, searches: Searches) -> None:
        self.rx, self.searches = rx, searches

    def search(self, text, timeout=None):
        seen = self.searches.seen
        seen[-1] = seen[-1][:3] + (timeout,)  # the text was cut just before this call
        return self.rx.search(text, timeout=timeout)


@pytest.fixture
def searches(monkeypatch):
    return Searches(monkeypatch)


def plan_with(pattern: str) -> dict:
    return {"name": "P", "triggers": ["check the pattern"], "trigger_threshold": 1, "graph": {
        "start": "t", "nodes": {
            "t": {"type": "task", "name": "Check", "verify": {"type": "output_matches", "value": pattern}},
            "bad": {"type": "escalate", "reason": "the check failed"},
            "done": {"type": "exit"}},
        "edges": [{"from": "t", "to": "done", "condition": "on_success"},
                  {"from": "t", "to": "bad", "condition": "on_exhaust"}]}}


@pytest.mark.parametrize("pattern", ["((a+))+$", "(?:(a+))+$", "((a|a))+$", "(a+)+$", "(a|aa)+$", "(a?){25}a{25}",
                                     "a*a*b", r".*\s*x", r"(\w+\s?)*x"])
def test_the_issues_patterns_and_their_kin_are_refused_at_load(pattern):
    with pytest.raises(PlanError) as refused:
        compile_plan("p", plan_with(pattern))
    assert refused.value.rule == "regex_unsafe" and "can backtrack for minutes" in refused.value.problem


def generated_patterns() -> list[str]:
    """Cores wrapped in up to three groups (capturing or not), quantified, anchored or not: the dangerous ones
    (a quantified core, overlapping alternatives, an optional core) and safe kin that must stay fast."""
    cores = ["a+", "a*", "a|a", "a|aa", "a?", "aa*", "a{1,30}", "ab", "a|b", "x?a", "[ab]"]
    out = []
    for core, depth, group, outer in itertools.product(cores, (1, 3), ("(", "(?:"), ("+", "*", "{2,40}")):
        out.append(group * depth + core + ")" * depth + outer + "$")
    return out


def test_the_generated_family_holds_both_kinds():
    refused = [p for p in generated_patterns() if patterns.unsafe(p)[0]]
    assert 0 < len(refused) < len(generated_patterns())
    assert all(not patterns.unsafe(p)[0] for p in generated_patterns() if p.count("ab") or p.count("a|b)"))


@pytest.mark.parametrize("pattern", generated_patterns())
def test_every_generated_pattern_is_refused_or_searched_within_its_bound(pattern, mode, searches):
    try:
        plan = compile_plan("p", plan_with(pattern))
    except PlanError as exc:
        assert exc.rule == "regex_unsafe"
        return
    verify = plan.nodes["t"].verify
    for text in ADVERSARIAL:
        check(verify, Evidence(tool="code_execution_tool", text=text))
    searches.assert_bounded(mode)


@pytest.mark.parametrize("pattern", [".*x", "a.*b.*c", r"(?s).*=.*z", r"\w*\d"])
def test_patterns_the_load_check_lets_through_are_bounded_on_a_long_line(pattern, mode, searches):
    verify = compile_plan("p", plan_with(pattern)).nodes["t"].verify
    for text in ("a" * 1_000_000, "a=" * 500_000):
        verdict = check(verify, Evidence(tool="code_execution_tool", text=text))
        if mode == "regex" and verdict.too_slow:
            assert not verdict.ok and verdict.reason.startswith("pattern took too long")
    searches.assert_bounded(mode)  # (a literal the output lacks skips the search: prefilter)


def test_a_check_that_runs_out_of_time_fails_and_the_plan_is_named_in_the_log(monkeypatch, tmp_path):
    pytest.importorskip("regex")
    monkeypatch.setattr(patterns, "use_regex", True)
    use_library(monkeypatch, tmp_path, {"slow": plan_with(r"\w*\d")})
    s = Session()
    s.user("check the pattern now")
    s.run_pass(cmd("cat big.min.js", "a" * 1_000_000))  # one long line: \w*\d is quadratic on it
    s.run_pass(cmd("true", "ok"))
    (verdict,) = [e for e in events(s, "node_verified")]
    assert verdict["outcome"] == "fail" and verdict["reason"].startswith("pattern took too long (/\\w*\\d/ ran over")
    assert s.agent._htn_last_run["events"][-1]["type"] == "plan_escalated"  # the failure route was followed
    warned = [t for t in s.log.texts("warning") if "Plan 'slow': the check of step 'Check' took too long" in t]
    assert warned and "simplify its pattern" in warned[0]


def test_without_the_regex_package_the_scan_is_capped(monkeypatch):
    monkeypatch.setattr(patterns, "use_regex", False)
    verify = compile_plan("p", plan_with("^ZZ$")).nodes["t"].verify
    middle = "a\n" * 20_000 + "ZZ\n" + "a\n" * 20_000  # far from both ends
    assert not check(verify, Evidence(tool="t", text=middle)).ok
    assert check(verify, Evidence(tool="t", text="a\n" * 20_000 + "ZZ\n")).ok  # the tail is scanned


def test_the_shipped_patterns_pass_the_load_check_and_agree_in_both_modes(monkeypatch):
    import json
    from graph_engine.tools.standin import FIXTURES, LIBRARY, terminal
    from graph_engine.authoring.library import load_library_file
    plans = load_library_file(str(LIBRARY)).plans  # every shipped plan loads: none is refused
    assert len(plans) == 10
    cases = json.loads((FIXTURES / "check_outputs.json").read_text())["cases"]
    for case in cases:
        node = plans[case["plan"]].nodes[case["node"]]
        answers = set()
        for use in (True, False):
            monkeypatch.setattr(patterns, "use_regex", use)
            answers.add(check(node.verify, Evidence(tool=node.tool, text=terminal(case["output"]))).ok)
        assert answers == {case["expect"] == "pass"}, case["note"]
