"""A large library, loaded lazily and reloaded incrementally, gives the plans, findings and matches of a full
load; matching through the trigger index gives what a scan of every plan gives."""

import json
import os
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scenario import TRIGGER_CASES, ready

from graph_engine.hosts.agent_zero import adapter, reading

from graph_engine.session import catalogue
from graph_engine.matching import decide, words as matching
from graph_engine.session.catalogue import Catalogue, LibraryCache, common_prefix, common_suffix, scan_document
from graph_engine.authoring.library import check_document, load_library_file
from graph_engine.matching.decide import best_match
from graph_engine.matching.words import TriggerIndex, normalise, request_text, score_plan
from graph_engine.tools.standin import LIBRARY, Session, cmd, shipped_copies



def big_document(copies: int = 10, broken: bool = True) -> dict:
    """Copies of the shipped plans with distinct ids and triggers; with ``broken``: a plan with a schema error,
    one with a lint error, one that shares a trigger with another."""
    doc = shipped_copies(copies)
    plans = doc["plans"]
    if broken and copies >= 5:
        plans["bugfix_workflow_1"]["trigger_threshold"] = "two"  # schema
        del plans["git_merge_pr_2"]["graph"]["edges"][-1]  # lint or compile
        plans["codegen_module_3"]["triggers"].append(plans["codegen_module_4"]["triggers"][0])  # shared phrase
    return doc


def write(path, doc, indent=2) -> str:
    text = json.dumps(doc, indent=indent)
    path.write_text(text)
    bump(path)
    return text


def bump(path):
    st_ = path.stat()
    os.utime(path, ns=(st_.st_mtime_ns + 10**9, st_.st_mtime_ns + 10**9))


def lazy(path) -> LibraryCache:
    return LibraryCache(str(path), recheck_seconds=0, eager_plans=5, background=False)


def same_library(got, want) -> None:
    assert list(got.plans) == list(want.plans)
    assert [p.version for p in got.plans.values()] == [p.version for p in want.plans.values()]
    assert got.diagnostics == want.diagnostics and got.problems == want.problems
    assert dict(got.worst_case_turns) == dict(want.worst_case_turns)


ALL_MESSAGES = [c["message"] for c in TRIGGER_CASES] + [f"{c['message']} 4" for c in TRIGGER_CASES]  # and a number
MESSAGES = ALL_MESSAGES[::9]  # every ninth (`make test`); the deep run reads them all


def same(match) -> str:
    """The plan a match names; matched by meaning, the plan it copies (copies differ only in their phrases)."""
    return match.plan.id if match.hits else match.plan.id.rsplit("_", 1)[0]


@pytest.mark.parametrize("messages", [pytest.param(MESSAGES, id="sample"),
                                      pytest.param(ALL_MESSAGES, id="all", marks=pytest.mark.deep)])
def test_a_lazy_load_matches_and_reports_as_a_full_load(tmp_path, messages):
    path = tmp_path / "htn_plan_library.json"
    doc = big_document()
    write(path, doc)
    cache = lazy(path)
    cat, problems = cache.refresh()
    assert isinstance(cat, Catalogue) and cat.checked == {} and problems == []  # nothing checked yet
    full = check_document(json.loads(path.read_text()), str(path))
    assert cat.meaning_index(wait=True)[0] is not None  # what the background thread builds first
    edge = []
    plans = list(full.plans.values())
    for message in messages:  # matching checks only the plans it needs, and skips the broken ones
        for domain in ("", "bugfix", "git_ops", None):
            got, want = cat.best(message, domain, None), best_match(plans, message, domain, None)
            if (got and (same(got), got.score, got.hits, got.first)) != \
                    (want and (same(want), want.score, want.hits, want.first)):
                edge.append((message, domain))
    # The one difference allowed: a message scored by meaning within a hair of the threshold, since the lazy
    # index reads the plans with errors too (they are passed over), and so the rarity of each word differs.
    # (Of the copies of one plan, texts alike but for their phrases, meaning may choose any: a tie.)
    index = decide.index_for(plans)
    for message, domain in edge:
        verdict = index.verdict(request_text(normalise(message)))
        best, _ = verdict.adjusted(lambda pid: full.plans[pid].domains, domain)[0]
        assert abs(best - verdict.constants["threshold"]) < 0.5, (message, domain, best)
    assert len({m.rsplit(" ", 1)[0] for m, _ in edge}) < len(messages) / 40  # a few messages only
    assert 0 < len(cat.checked) < len(doc["plans"])
    same_library(cat.library(), full)
    assert set(cat.take_problems() + problems) == set(full.problems)  # every finding was reported, once


def test_the_background_thread_reports_every_finding(tmp_path):
    path = tmp_path / "htn_plan_library.json"
    write(path, big_document())
    cache = LibraryCache(str(path), recheck_seconds=3600, eager_plans=5)
    cat, said = cache.refresh()
    deadline = time.monotonic() + 60
    while not cat.settled and time.monotonic() < deadline:
        time.sleep(0.02)
    said += cache.refresh()[1]  # the lines found since: handed out on the next pass
    assert cat.settled and sorted(said) == sorted(load_library_file(str(path)).problems)
    assert cache.refresh()[1] == []


def test_an_edit_inside_one_plan_is_read_and_checked_alone(tmp_path):
    path = tmp_path / "htn_plan_library.json"
    doc = big_document()
    text = write(path, doc)
    cache = lazy(path)
    cat, _ = cache.refresh()
    cat.settle()
    before = dict(cat.checked)
    old_plan = cat.get("bugfix_workflow_5")
    at = [m.start() for m in re.finditer('"name": "Bug Fix Workflow"', text)][5]  # the 6th copy's name
    edited = text[:at] + text[at:].replace('"Bug Fix Workflow"', '"Bug Fix Workflow, edited"', 1)
    path.write_text(edited)
    bump(path)
    again, problems = cache.refresh()
    assert again is cat and cat.reparsed == 1
    changed = [pid for pid in before if cat.checked.get(pid) is not before[pid]]
    assert changed == ["bugfix_workflow_5"] and cat.get("bugfix_workflow_5").name == "Bug Fix Workflow, edited"
    assert cache.plan_version("bugfix_workflow_5", old_plan.version) is old_plan  # a run started on it keeps it
    same_library(cat.library(), load_library_file(str(path)))


def test_an_edit_that_breaks_a_plan_or_shares_a_phrase_is_reported(tmp_path):
    path = tmp_path / "htn_plan_library.json"
    doc = big_document(broken=False)
    write(path, doc)
    cache = lazy(path)
    cat, _ = cache.refresh()
    cat.settle()
    cat.take_problems()
    for pid in ("docker_build_deploy_2", "git_feature_branch_3"):  # one edit at a time
        if pid == "docker_build_deploy_2":
            doc["plans"][pid]["triggers"].append(doc["plans"]["api_integration_7"]["triggers"][0])
        else:
            doc["plans"][pid]["trigger_threshold"] = 0
        text = json.dumps(doc, indent=2)
        path.write_text(text)
        bump(path)
        cat, problems = cache.refresh()
        assert cat.reparsed == 1
        if pid == "docker_build_deploy_2":
            assert any("'integrate with 7' is listed by docker_build_deploy_2, api_integration_7" in p for p in problems), problems
        else:
            assert any("plan 'git_feature_branch_3' is disabled" in p for p in problems), problems
    same_library(cat.library(), load_library_file(str(path)))
    assert cat.get("git_feature_branch_3") is None


@pytest.mark.parametrize("edit", ["meta", "rename", "add", "remove", "two plans"])
def test_other_edits_load_whole_and_check_only_what_changed(tmp_path, edit):
    path = tmp_path / "htn_plan_library.json"
    doc = big_document()
    write(path, doc)
    cache = lazy(path)
    cat, _ = cache.refresh()
    cat.settle()
    if edit == "meta":
        doc["_meta"]["version"] = "2.1"
    elif edit == "rename":
        doc["plans"]["renamed"] = doc["plans"].pop("api_integration_0")
    elif edit == "add":
        doc["plans"]["extra"] = json.loads(json.dumps(doc["plans"]["api_integration_0"]))
    elif edit == "remove":
        del doc["plans"]["api_integration_0"]
    else:
        doc["plans"]["api_integration_1"]["name"] = "A"
        doc["plans"]["api_integration_8"]["name"] = "B"
    write(path, doc)
    new, _ = cache.refresh()
    assert new is not cat and new.reparsed == 0
    kept = [pid for pid, c in new.checked.items() if cat.checked.get(pid) is c]
    unchanged = [pid for pid in doc["plans"] if pid in cat.raws and cat.raws[pid] == doc["plans"][pid]]
    assert sorted(kept) == sorted(unchanged)
    same_library(new.library(), load_library_file(str(path)))


def test_a_small_library_or_one_with_dot_plans_is_checked_whole(tmp_path):
    cache = LibraryCache(str(LIBRARY), recheck_seconds=0)
    cat, problems = cache.refresh()
    assert cat.settled and len(cat.checked) == 10 and problems == []
    path = tmp_path / "htn_plan_library.json"
    write(path, big_document(2))
    (tmp_path / "smoke.dot").write_text('digraph smoke { graph [triggers="smoke it"]\n start [shape=Mdiamond]\n'
                                        ' exit [shape=Msquare]\n start -> exit }\n')
    cat, _ = LibraryCache(str(path), recheck_seconds=0, eager_plans=5).refresh()
    assert cat.settled
    same_library(cat.library(), load_library_file(str(path)))


def test_a_run_starts_from_a_lazy_library_in_agent_zero(monkeypatch, tmp_path):
    path = tmp_path / "htn_plan_library.json"
    write(path, big_document())
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(path))
    monkeypatch.setattr(catalogue, "EAGER_PLANS", 5)
    monkeypatch.setattr(Catalogue, "start", lambda self: None)  # no background thread: only what is needed
    s = Session()
    s.user("Fix the bug 7 in /tmp/calc.py: it crashes with ZeroDivisionError")
    s.run_pass(cmd("ls", "x"))
    assert s.state["plan_id"] == "bugfix_workflow_7"
    cat = next(iter(adapter._runtimes.values())).library.current
    assert len(cat.checked) <= 3  # the plans the message matched, no more


# ── the index gives what a scan gives ───────────────────────────────────────


WORDS = ["fix", "the", "bug", "deploy", "c++", "e-mail", "über", "naïve", "x_y", "42", "pr", "it's", "go", "ß"]
phrase = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
plan_spec = st.tuples(st.lists(phrase, max_size=4), st.lists(phrase, max_size=2),
                      st.sampled_from([(), ("bugfix",), ("bugfix", "git_ops")]), st.integers(1, 3))
message = st.lists(st.sampled_from(WORDS + ["and", "then", ",", ".", "?", "what is", "  ", "\t", "DEPLOY"]),
                   max_size=12).map(" ".join)


class Head:
    def __init__(self, pid, spec):
        weak, strong, self.domains, self.trigger_threshold = spec
        self.id, self.triggers, self.strong_triggers = pid, tuple(weak), tuple(strong)


def reference_hits(phrases, text):
    """The regular expression every phrase used to be searched with."""
    return tuple(t for t in phrases if t and re.search(
        r"(?<![\w])" + r"\s+".join(re.escape(w) for w in t.split()) + r"(?![\w])", text))


@given(specs=st.lists(plan_spec, min_size=1, max_size=8), text=message, domain=st.sampled_from(["", "bugfix", None]))
def test_the_trigger_index_finds_every_plan_a_scan_finds(specs, text, domain):
    heads = [Head(f"p{i}", spec) for i, spec in enumerate(specs)]
    index = TriggerIndex()
    for h in heads:
        index.add(h.id, h.triggers + h.strong_triggers)
    words = request_text(normalise(text))
    scanned = [h.id for h in heads if score_plan(h, words, domain)]
    assert set(scanned) <= index.candidates(words)
    for h in heads:
        assert matching.trigger_hits(h.triggers, words) == reference_hits(h.triggers, words)
    for h in heads[:2]:  # removing a plan takes all of its phrases out
        index.remove(h.id)
        assert h.id not in index.candidates(words)


@given(doc=st.dictionaries(st.sampled_from(["_meta", "plans", "x"]),
                           st.one_of(st.integers(), st.text(max_size=5),
                                     st.dictionaries(st.text(max_size=4), st.lists(st.integers(), max_size=2),
                                                     max_size=4)), max_size=3),
       indent=st.sampled_from([None, 0, 2, "\t"]))
def test_the_scanner_reads_what_json_reads_and_where_each_plan_lies(doc, indent):
    text = json.dumps(doc, indent=indent)
    data, spans = scan_document(text)
    assert data == json.loads(text)
    for pid, (a, b) in spans.items():
        assert json.loads(text[a:b]) == data["plans"][pid]


@given(a=st.text(max_size=300), b=st.text(max_size=300))
def test_common_prefix_and_suffix(a, b):
    p = common_prefix(a, b)
    assert a[:p] == b[:p] and (p == min(len(a), len(b)) or a[p] != b[p])
    s = common_suffix(a, b, p)
    assert p + s <= min(len(a), len(b)) and a[len(a) - s:] == b[len(b) - s:]
    assert s == min(len(a), len(b)) - p or a[len(a) - s - 1] != b[len(b) - s - 1]


def test_validate_reports_every_finding_and_the_five_slowest_plans(tmp_path, capsys):
    from graph_engine.tools import cli

    path = tmp_path / "htn_plan_library.json"
    doc = big_document()
    for plan in doc["plans"].values():  # (each example is matched against the library: a few are enough here)
        plan["examples"], plan["not_examples"] = plan.get("examples", [])[:3], plan.get("not_examples", [])[:2]
    write(path, doc)
    assert cli.main(["validate", str(path)]) == 1  # the broken plans are errors
    out = capsys.readouterr().out
    full = load_library_file(str(path))
    for d in full.diagnostics:
        assert d.text() in out
    times = [float(m) for m in re.findall(r"^  time    plan '[\w]+': checked in ([\d.]+) ms \(one of the 5 slowest of "
                                          r"100 plans\)$", out, re.M)]
    assert len(times) == 5 and times == sorted(times, reverse=True)
    assert cli.main(["validate", str(path), "--json"]) == 1
    slow = [d for d in json.loads(capsys.readouterr().out) if d["rule"] == "check_time"]
    assert len(slow) == 5 and all(d["severity"] == "info" for d in slow)


# ── a message that starts nothing ───────────────────────────────────────────


@given(specs=st.lists(plan_spec, min_size=1, max_size=8), text=message)
def test_may_start_says_no_only_when_no_plan_can_match(specs, text):
    raws = {f"p{i}": {"triggers": list(weak), "strong_triggers": list(strong), "domains": list(domains),
                      "trigger_threshold": threshold} for i, (weak, strong, domains, threshold) in enumerate(specs)}
    cat = Catalogue("lib.json", {}, raws, [], None)
    # by phrases: meaning is off here (test_a_message_that_starts_nothing_reads_only_the_message covers may_start
    # with meaning)
    cat._meaning_off = "off for this test"
    words = request_text(normalise(text))
    can = any(score_plan(h, words, domain) for h in cat.heads.values() for domain in ("", "bugfix", "git_ops", None))
    first = cat.may_start(text)
    assert cat.may_start(text) == first  # the second hook's answer is the first's
    if can:
        assert first
    if not first:  # a plan filed later may match the same message: it is asked again
        cat._file("late", catalogue.Head("late", (words.split()[0],) if words else ("zzz",), (), (), 1))
        assert cat.may_start(text) == bool(words)


def test_a_message_that_starts_nothing_reads_only_the_message(monkeypatch):
    """Both hooks of such a pass read the message's words once and the trigger index; no observation is made
    (no pass counted, no monologue id drawn), and the next message that names a plan still starts it."""
    observed, real_observe = [], reading.observe
    monkeypatch.setattr(reading, "observe", lambda *a, **k: observed.append(a[2]) or real_observe(*a, **k))
    ready(Session())  # another chat of the process loaded the library and the meaning model (until the model is
    observed.clear()  # loaded, the utility model may decide a message)
    s = Session()
    for text in ("write a haiku about autumn leaves", "what is a docker volume?", "thanks, that is all"):
        s.user(text)
        s.run_pass(cmd("ls", "x"))
        assert observed == [] and s.state is None
        assert reading.MONOLOGUE_KEY not in s.loop.params_persistent
        assert getattr(s.agent, "_graph_engine_pass", None) is None
    s.user("Fix the bug in /tmp/calc.py: average([]) crashes with ZeroDivisionError")
    s.run_pass(cmd("ls", "x"))
    assert s.state is not None and s.state["plan_id"] == "bugfix_workflow"
    assert observed[:2] == ["prompts_after", "before_main"]


def test_a_library_over_its_byte_limit_is_refused_and_more_plans_allow_more_bytes(tmp_path, monkeypatch):
    from graph_engine.authoring import library

    path = tmp_path / "htn_plan_library.json"
    write(path, big_document(copies=1, broken=False))
    size = path.stat().st_size
    monkeypatch.setattr(library, "MAX_LIBRARY_BYTES", size - 1)
    monkeypatch.setattr(library, "BYTES_PER_PLAN", size // 2000 + 1)
    with pytest.raises(ValueError, match=r"over the .* byte limit .* raise GRAPH_ENGINE_MAX_PLANS"):
        library.read_library(str(path))
    monkeypatch.setenv("GRAPH_ENGINE_MAX_PLANS", "2000")  # 2,000 plans allowed: at least `size` bytes
    assert library.read_library(str(path)) == path.read_bytes()


def test_a_fault_in_the_background_thread_is_said_in_the_agents_log(tmp_path, monkeypatch):
    path = tmp_path / "htn_plan_library.json"
    write(path, big_document(broken=False))
    monkeypatch.setattr(catalogue, "BACKGROUND_DELAY", 0)
    cache = LibraryCache(str(path), recheck_seconds=3600, eager_plans=5, background=False)
    cat, _ = cache.refresh()

    def broken(self, pause=0.0):
        raise MemoryError("no room")

    monkeypatch.setattr(Catalogue, "settle", broken)
    cat._background()
    said = cache.refresh()[1]
    assert len(said) == 1 and "checking the plans in the background stopped (MemoryError: no room)" in said[0]
    assert cat.best(request_text(normalise("fix the bug 3 in calc.py")), "bugfix", None) is not None  # still works


DOT_PLAN = """digraph extra {
    graph [goal="run the extra pipeline"]
    start [shape=Mdiamond]
    work [label="Work", prompt="do the work"]
    exit [shape=Msquare]
    start -> work -> exit
}
"""


def test_the_library_folder_is_listed_again_only_when_it_changed(tmp_path, monkeypatch):
    """The library is looked at on nearly every pass of the real loop: the folder's DOT files are listed
    again when the folder's mtime moves (a file added, removed or renamed), not on every look."""
    path = tmp_path / "lib" / "htn_plan_library.json"
    path.parent.mkdir()
    path.write_text(LIBRARY.read_text())
    listings = []
    real = catalogue.dot_files
    monkeypatch.setattr(catalogue, "dot_files", lambda p: listings.append(p) or real(p))
    old = time.time_ns() - 3600 * 10**9
    os.utime(path.parent, ns=(old, old))  # changed long ago: not "recent"
    cache = LibraryCache(str(path), recheck_seconds=0, background=False)
    for _ in range(5):
        cache.refresh()
    assert len(listings) == 1
    (path.parent / "extra.dot").write_text(DOT_PLAN)
    os.utime(path.parent, ns=(old + 10**9, old + 10**9))  # the folder changed (still long ago)
    library, _ = cache.refresh()
    assert len(listings) == 2 and library.get("extra") is not None
    cache.refresh()
    assert len(listings) == 2


def test_a_meaning_index_that_cannot_be_built_leaves_matching_by_phrases_and_is_said_once(monkeypatch, tmp_path):
    from graph_engine.session.catalogue import LibraryCache
    from graph_engine.tools.standin import LIBRARY

    def broken(*args, **kwargs):
        raise RuntimeError("tokenizer file unreadable")

    monkeypatch.setattr(decide, "index_of", broken)
    lib, _ = LibraryCache(str(LIBRARY), recheck_seconds=0, background=False).refresh()
    assert lib.meaning_index(wait=True)[0] is None
    match = lib.best("fix the bug in /tmp/test.py", "bugfix", None)
    assert match is not None and match.plan.id == "bugfix_workflow"  # the phrases still decide
    assert lib.best("the weather report says it will rain", "", None) is None
    said = [line for line in lib._new if "matching requests by meaning failed" in line or "by meaning failed" in line]
    assert len(said) == 1 and "tokenizer file unreadable" in said[0]
