"""Plans start for the way people ask: matching by meaning through both extension files (the stand-in), with
and without the belief-state tracker, and without the model."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenario import crash

from graph_engine import meaning
from graph_engine.library import load_library_file
from graph_engine.matching import best_match
from graph_engine.tools.standin import LIBRARY, BeliefStateTracker, Reply, Session

ASKED = "the nightly export dies with a ZeroDivisionError, make it work again"  # no trigger phrase of any plan
PLANS = list(load_library_file(str(LIBRARY)).plans.values())


class NoTracker(BeliefStateTracker):
    """Stock Agent-Zero: no belief-state tracker, so no domain."""

    def run(self, agent, message):
        agent.__dict__.setdefault("_bst_store", {}).pop("__bst_belief_state__", None)


def told(record) -> str:
    return record.prompt_extras.get("htn_active_plan", "")


@pytest.mark.parametrize("bst", [BeliefStateTracker(), NoTracker()], ids=["tracker", "stock"])
def test_a_request_in_everyday_words_starts_its_plan_in_the_first_call(bst):
    s = Session(bst=bst)
    s.user(ASKED)
    first = s.run_pass(crash())
    assert told(first).startswith("[WORKFLOW: Bug Fix Workflow] step 1 of 5")
    line = next(t for t in s.log.texts("info") if "Graph plan activated" in t)
    assert "matched by meaning: " in line and "like the example '" in line
    activated = next(e for e in s.state["events"] if e["type"] == "plan_activated")
    assert activated["triggers"] == [] and activated["meaning"]["example"] in PLANS[0].examples


@pytest.mark.parametrize("message", ["what does git rebase actually do?", "hi there, how are you?",
                                     "the branch manager called me today"])
def test_a_question_a_greeting_or_a_mention_starts_nothing(message):
    s = Session(bst=NoTracker())
    s.user(message)
    assert told(s.run_pass(Reply(final="..."))) == "" and s.state is None


def test_the_org_filter_has_the_last_word():
    """The companion starts what the meaning decides; the selector, knowing the org role, withdraws it."""
    s = Session(bst=NoTracker(), allowed_plans=["git_feature_branch"])
    s.user(ASKED)
    s.run_pass(Reply(final="..."))
    assert s.state is None
    assert any("withdrawn: the active org role does not allow this plan" in t for t in s.log.texts("info"))


def test_a_run_in_progress_is_switched_by_a_request_for_another_plan_in_everyday_words():
    s = Session()
    s.user("fix the bug in /tmp/test.py")
    s.run_pass(crash())
    assert s.state["plan_id"] == "bugfix_workflow"
    s.user("bump numpy to the newest release and make sure nothing broke")
    record = s.run_pass(Reply(final="..."))
    assert s.state["plan_id"] == "dependency_update"
    assert "[WORKFLOW ENDED: Bug Fix Workflow]" in told(record) or "Dependency Update" in told(record)


def test_without_the_model_the_engine_matches_by_words_and_says_so_once(monkeypatch):
    monkeypatch.setattr(meaning, "_LOADED", [(None, "matching by words only: wordllama is not installed "
                                                    "(pip install wordllama to match requests by meaning)")])
    monkeypatch.setattr(meaning, "_SAID", [])
    monkeypatch.setattr(meaning, "_INDEXES", {})
    s = Session(bst=NoTracker())
    s.user(ASKED)
    s.run_pass(Reply(final="..."))
    assert s.state is None  # no phrase names a plan: nothing starts
    s.user("fix the bug in /tmp/test.py")
    assert told(s.run_pass(crash())).startswith("[WORKFLOW: Bug Fix Workflow]")  # phrases still work
    lines = [t for t in s.log.texts() if "matching by words only" in t]
    assert len(lines) == 1 and "pip install wordllama" in lines[0]
    assert best_match(PLANS, ASKED, "", None) is None


def test_the_scores_are_kept_by_content_and_the_index_by_plans():
    index = meaning.index_of(PLANS)
    assert meaning.index_of(list(PLANS)) is index  # the same plan objects: the same index
    again = load_library_file(str(LIBRARY)).plans.values()
    other = meaning.index_of(list(again))
    assert other is not index and all(a is b for a, b in zip(other.plans, index.plans))  # vectors by content
    v = index.verdict(ASKED)
    assert v.ranked[0].plan_id == "bugfix_workflow" and v.ranked[0].total >= meaning.THRESHOLD
    assert index.verdict(ASKED) is v  # the second hook of a pass asks again: kept
    assert index.verdict(ASKED, ["git_merge_pr"]).ranked == ()  # nothing it allows could start: nothing scored
    full = index.verdict(ASKED, ["git_merge_pr"], full=True)
    assert [s.plan_id for s in full.ranked] == ["git_merge_pr"]
    assert index.verdict(ASKED, ["git_merge_pr"]) is full  # a full verdict answers the next question too


@given(st.text(alphabet=st.characters(categories=("Cs", "Ll", "Lu", "Zs", "Nd", "Po", "Cc", "Lo")), max_size=300))
@settings(max_examples=150, deadline=None)
def test_any_text_is_matched_without_raising(message):
    """Lone surrogates, control characters, any script: the tokenizer refuses a lone surrogate, so it is read as
    '?' rather than raising out of the pass."""
    best_match(PLANS, message, "", None)
    best_match(PLANS, message, None, None)


def test_a_lone_surrogate_is_read_and_the_request_still_starts_its_plan():
    m = best_match(PLANS, "the nightly export dies \ud800 with a ZeroDivisionError, make it work again", "", None)
    assert m is not None and m.plan.id == "bugfix_workflow"


@pytest.mark.parametrize("strong, limit", [(False, meaning.VETO), (True, meaning.STRONG_VETO)])
def test_the_domain_counts_against_the_models_veto_of_a_phrase_match(strong, limit):
    """A match by phrases that the model scores just under its limit is a mention, unless the belief-state domain
    is one of the plan's: that is evidence worth the same bonus as when meaning decides ("there is a bug in the
    notes app" with the bugfix domain); with the domain no nearer than the bonus, the veto stands."""
    def verdict(total):
        return meaning.Verdict((meaning.Scores("p", total, "fix the bug in utils.py", 0.5),), model=True,
                               taught=frozenset({"p"}))
    just_under = verdict(limit - meaning.BONUS / 2)
    assert just_under.mention("p", strong=strong)
    assert not just_under.mention("p", strong=strong, domain_agrees=True)
    far_under = verdict(limit - meaning.BONUS * 2)
    assert far_under.mention("p", strong=strong, domain_agrees=True)
    assert not verdict(limit + 0.01).mention("p", strong=strong)
