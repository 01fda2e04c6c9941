"""Plans start for the way people ask: matching by meaning through both extension files (the stand-in), with
and without the belief-state tracker, without the model, and for a plan that was never taught."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenario import crash, ready, told

from graph_engine.authoring.library import load_library_file
from graph_engine.matching import decide, shipped, vectors
from graph_engine.matching.decide import Scores, Verdict, best_match
from graph_engine.tools.standin import LIBRARY, BeliefStateTracker, Reply, Session

ASKED = "the nightly export dies with a ZeroDivisionError, make it work again"  # no trigger phrase of any plan
PLANS = list(load_library_file(str(LIBRARY)).plans.values())
CONSTANTS = shipped.load(vectors.encoder().np)[0].constants


class NoTracker(BeliefStateTracker):
    """Stock Agent-Zero: no belief-state tracker, so no domain."""

    def run(self, agent, message):
        agent.__dict__.setdefault("_bst_store", {}).pop("__bst_belief_state__", None)


@pytest.mark.parametrize("bst", [BeliefStateTracker(), NoTracker()], ids=["tracker", "stock"])
def test_a_request_in_everyday_words_starts_its_plan_in_the_first_call(bst):
    s = ready(Session(bst=bst))
    s.user(ASKED)
    first = s.run_pass(crash())
    assert told(first).startswith("[WORKFLOW: Bug Fix Workflow] step 1 of 5")
    line = next(t for t in s.log.texts("info") if "Graph plan activated" in t)
    assert "matched by meaning: " in line and "like the text '" in line and " ms)" in line
    activated = next(e for e in s.state["events"] if e["type"] == "plan_activated")
    assert activated["triggers"] == [] and activated["stage"] == "meaning" and activated["cost_ms"] > 0
    assert activated["meaning"]["example"] in (PLANS[0].name, *PLANS[0].examples)


@pytest.mark.parametrize("message", ["what does git rebase actually do?", "hi there, how are you?",
                                     "the branch manager called me today"])
def test_a_question_a_greeting_or_a_mention_starts_nothing(message):
    s = ready(Session(bst=NoTracker()))
    s.user(message)
    assert told(s.run_pass(Reply(final="..."))) == "" and s.state is None


def test_the_org_filter_has_the_last_word():
    """A request for a plan the org role does not allow starts nothing (not the next plan it resembles)."""
    s = ready(Session(bst=NoTracker(), allowed_plans=["git_feature_branch"]))
    s.user(ASKED)
    s.run_pass(Reply(final="..."))
    assert s.state is None


def test_a_run_in_progress_is_switched_by_a_request_for_another_plan_in_everyday_words():
    s = ready(Session())
    s.user("fix the bug in /tmp/test.py")
    s.run_pass(crash())
    assert s.state["plan_id"] == "bugfix_workflow"
    s.user("bump numpy to the newest release and make sure nothing broke")
    record = s.run_pass(Reply(final="..."))
    assert s.state["plan_id"] == "dependency_update"
    assert "[WORKFLOW ENDED: Bug Fix Workflow]" in told(record) or "Dependency Update" in told(record)


def test_a_pass_never_waits_for_meaning_it_decides_by_phrases_meanwhile(monkeypatch):
    """The first message, before the index is built: phrases decide, and a message no phrase names starts
    nothing yet (the pass does not wait); once the index is built, meaning decides as usual."""
    from graph_engine.session import catalogue
    monkeypatch.setattr(catalogue.Catalogue, "meaning_index",  # the thread never finishes
                        lambda self, wait=False: (None, "the meaning model is loading"))
    s = Session(bst=NoTracker())
    s.user(ASKED)
    assert told(s.run_pass(Reply(final="..."))) == "" and s.state is None
    s.user("fix the bug in /tmp/test.py")
    assert told(s.run_pass(crash())).startswith("[WORKFLOW: Bug Fix Workflow]")  # phrases still work


def test_without_the_model_the_engine_matches_by_phrases_and_says_so(monkeypatch):
    monkeypatch.setattr(vectors, "_LOADED", [(None, "matching by meaning is off: wordllama is not installed "
                                                    "(pip install wordllama in Agent-Zero's Python); requests "
                                                    "start by their phrases and the utility model")])
    s = ready(Session(bst=NoTracker()))
    s.user(ASKED)
    s.run_pass(Reply(final="..."))
    assert s.state is None  # no phrase names a plan: nothing starts
    s.user("fix the bug in /tmp/test.py")
    assert told(s.run_pass(crash())).startswith("[WORKFLOW: Bug Fix Workflow]")  # phrases still work
    lines = [t for t in s.log.texts() if "matching by meaning is off" in t]
    assert len(lines) == 1 and "pip install wordllama" in lines[0]
    assert best_match(PLANS, ASKED, "", None) is None


def test_the_index_is_kept_by_plans_and_a_verdict_by_message():
    index = decide.index_for(PLANS)
    assert decide.index_for(PLANS) is index and decide.index_for(list(PLANS)) is index  # the same plan objects
    v = index.verdict(ASKED)
    assert v.ranked[0].plan_id == "bugfix_workflow" and v.ranked[0].learned
    assert v.ranked[0].total >= CONSTANTS["threshold"]
    assert index.verdict(ASKED) is v  # the second hook of a pass asks again: kept
    only = index.verdict(ASKED, ["git_merge_pr"])
    assert [s.plan_id for s in only.ranked] == ["git_merge_pr"] and only.ranked[0].total < CONSTANTS["threshold"]


@given(st.text(alphabet=st.characters(categories=("Cs", "Ll", "Lu", "Zs", "Nd", "Po", "Cc", "Lo")), max_size=300))
@settings(max_examples=100, deadline=None)
def test_any_text_is_matched_without_raising(message):
    """Lone surrogates, control characters, any script: the tokenizer refuses a lone surrogate, so it is read as
    '?' rather than raising out of the pass."""
    best_match(PLANS, message, "", None)
    best_match(PLANS, message, None, None)


def test_a_lone_surrogate_is_read_and_the_request_still_starts_its_plan():
    m = best_match(PLANS, "the nightly export dies \ud800 with a ZeroDivisionError, make it work again", "", None)
    assert m is not None and m.plan.id == "bugfix_workflow"


@pytest.mark.parametrize("strong, limit", [(False, "veto"), (True, "strong_veto")])
def test_the_domain_counts_against_the_models_veto_of_a_phrase_match(strong, limit):
    """A match by phrases that the model scores just under its limit is a mention, unless the belief-state domain
    is one of the plan's: that is evidence worth the same bonus as when meaning decides ("there is a bug in the
    notes app" with the bugfix domain); with the domain no nearer than the bonus, the veto stands."""
    bonus = CONSTANTS["bonus"]

    def verdict(total):
        return Verdict((Scores("p", total, "fix the bug in utils.py", 0.5, bonus, True),), CONSTANTS)
    just_under = verdict(CONSTANTS[limit] - bonus / 2)
    assert just_under.mention("p", strong=strong)
    assert not just_under.mention("p", strong=strong, domain_agrees=True)
    far_under = verdict(CONSTANTS[limit] - bonus * 2)
    assert far_under.mention("p", strong=strong, domain_agrees=True)
    assert not verdict(CONSTANTS[limit] + 0.01).mention("p", strong=strong)


# ── a plan written without examples ─────────────────────────────────────────

RELEASE = {
    "name": "Release a Python package",
    "description": "Publish a new version of a Python package: bump the version, run the tests, build the wheel "
                   "and the sdist, upload them to PyPI and tag the release in git.",
    "domains": ["dependency_mgmt"], "triggers": ["release", "publish to pypi", "new version", "upload to pypi"],
    "steps": [{"name": "Bump the version", "action": "Set the new version number in pyproject.toml",
               "verify": {"type": "any_output"}},
              {"name": "Run the tests", "action": "Run the test suite before releasing",
               "verify": {"type": "exit_code_zero"}},
              {"name": "Build the distributions", "action": "Build the wheel and the sdist with python -m build",
               "verify": {"type": "exit_code_zero"}},
              {"name": "Upload to PyPI", "action": "Upload the files in dist/ with twine",
               "verify": {"type": "exit_code_zero"}},
              {"name": "Tag the release", "action": "Create and push a git tag for the version",
               "verify": {"type": "exit_code_zero"}}],
}
# ten everyday requests for it, written for this test from the plan's name and description
RELEASE_REQUESTS = [
    "ship version 1.4 of mylib to pypi",
    "can you cut a new release of the package?",
    "time to publish 2.0.0 of the sdk, do the whole thing",
    "push a new release of our python library to PyPI please",
    "bump the version to 0.9.1 and upload it",
    "we need a release of the package today with the fixes from this week",
    "make a release: version 3.2, build the wheel and put it on pypi",
    "please do the 1.0 release of acme-utils",
    "release the package, minor version bump",
    "publish the latest version of the client library to the package index",
]


def test_a_plan_without_examples_starts_for_everyday_requests(tmp_path):
    """Matched by its own text (name, description, phrases, steps): at least 8 of 10 everyday requests start it,
    and messages that ask for nothing or for another plan's job do not."""
    lib = json.loads(LIBRARY.read_text())
    lib["plans"]["python_release"] = RELEASE
    path = tmp_path / "htn_plan_library.json"
    path.write_text(json.dumps(lib))
    plans = list(load_library_file(str(path)).plans.values())
    started = [m for m in RELEASE_REQUESTS if (got := best_match(plans, m, "", None)) and got.plan.id == "python_release"]
    assert len(started) >= 8, sorted(set(RELEASE_REQUESTS) - set(started))
    for message in ("what is pypi?", "the 1.4 release went out yesterday, all good", "thanks!"):
        assert best_match(plans, message, "", None) is None, message
    assert best_match(plans, "fix the bug in /tmp/test.py", "", None).plan.id == "bugfix_workflow"
