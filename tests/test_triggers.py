"""The trigger golden set (fixtures/trigger_cases.json) against the bundled library."""

import json

from graph_engine.tools import cli, triggers
from graph_engine.library import load_library_file
from graph_engine.tools.standin import FIXTURES, LIBRARY, BeliefStateTracker
from graph_engine.matching import best_match
from graph_engine.not_requests import MESSAGES
from graph_engine.tools.triggers import MAX_FALSE_ACTIVATIONS, REQUIRED_ACCURACY, load_cases, met, report

CASES = load_cases(str(FIXTURES / "trigger_cases.json"))
ASKED = "the nightly export dies with a ZeroDivisionError, make it work again"  # no trigger phrase of any plan
PLANS = list(load_library_file(str(LIBRARY)).plans.values())


def test_the_golden_set_is_large_and_covers_every_plan_and_the_named_cases():
    assert len(CASES) >= 400
    held = [c for c in CASES if c.get("split") == "held_out"]
    assert len(held) >= 80 and {c["expect"] for c in held} == {p.id for p in PLANS} | {None}
    assert len({c["message"] for c in CASES}) == len(CASES)  # no message twice
    examples = {e.lower() for p in PLANS for e in p.examples + p.not_examples} | {m.lower() for m in MESSAGES}
    # the tuning cases teach the model (a request: an example of its plan; the rest: a not-request); the cases
    # held out and the fresh ones never do (letter case aside, as the model reads them)
    assert all(c["message"].lower() in examples for c in CASES if "split" not in c)
    assert not examples & {c["message"].lower() for c in CASES if "split" in c}
    assert {c["expect"] for c in CASES} == {p.id for p in PLANS} | {None}
    by_message = {c["message"]: c["expect"] for c in CASES}
    for message, plan in [("fix the bug in /tmp/test.py", "bugfix_workflow"),
                          ("I need to fix a bug in the login module", "bugfix_workflow"),
                          ("create a new branch called feature/login", "git_feature_branch"),
                          ("recommend a good debugger", None), ("my printer is broken, what brand should I buy", None),
                          ("merge these two python dicts", None), ("sales broken down by region", None),
                          ("what's the weather like?", None)]:
        assert by_message[message] == plan


def test_recorded_domains_are_what_the_tracker_gives():
    """The domains are the stand-in tracker's, except in the messages written blind: their writer gave the domain
    a tracker would usually give, a wrong one or none (about one in six each)."""
    bst = BeliefStateTracker()
    ours = [c for c in CASES if c.get("written") != "blind"]
    assert [c["domain"] for c in ours] == [bst.classify(c["message"]) for c in ours]
    blind = [c for c in CASES if c.get("written") == "blind"]
    assert len(blind) >= 1000 and sum(c.get("split") == "fresh" for c in blind) >= 400


REPORT = report(PLANS, CASES)


def test_a_message_the_model_learned_from_is_scored_by_a_model_that_never_saw_it():
    sets = triggers.unseen(PLANS, CASES)
    folds = {id(plans) for plans, _ in sets}
    assert len(folds) == triggers.FOLDS + 1  # five folds, and the library as it is for the cases it never saw
    for c, (plans, left_out) in zip(CASES, sets):
        texts = {t for p in plans for t in p.examples + p.not_examples}
        assert c["message"] not in texts
        assert (c["message"].lower() in left_out) == ("split" not in c)
        if "split" in c:
            assert plans is PLANS
    # a fold leaves out only its own cases: the others still teach it
    plans, left_out = next(s for c, s in zip(CASES, sets) if "split" not in c)
    assert 0.1 < len(left_out) / sum("split" not in c for c in CASES) < 0.3
    assert sum(len(p.examples) for p in plans) > sum(len(p.examples) for p in PLANS) * 0.8


def test_the_cases_written_for_the_trigger_phrases_all_still_start_their_plan():
    """The first part of the set (written with the phrases in mind) stays right with the domain: matching by
    meaning only adds starts that the phrases did not decide."""
    first = {c["message"] for c in [c for c in CASES if "split" not in c][:158]}
    assert len(first) == 158 and REQUIRED_ACCURACY <= 1.0
    assert [w for w in REPORT["wrong"] if w["message"] in first] == []  # each scored by a model that never saw it
    assert REPORT["collisions"] == []


def test_the_labelled_set_figures():
    """Requests that start the right plan and false activations, with the tracker's domain and without one
    (floors from the measured figures: a change that loses requests or starts plans for small talk fails)."""
    figs = REPORT["figures"]
    assert REPORT["matching"].startswith("by trigger phrases, then by meaning")
    for split, recall, false in (("tune", 0.97, 3), ("held_out", 0.92, 0), ("fresh", 0.97, 6), ("all", 0.97, 9)):
        for key in ("with_domain", "without_domain"):
            assert figs[split][key]["recall"] >= recall, (split, key)
            assert figs[split][key]["false_activations"] <= false, (split, key)
    assert figs["all"]["with_domain"]["recall"] >= figs["all"]["without_domain"]["recall"]  # the domain helps
    assert REPORT["required"]["met"] == met(figs["all"])


def test_the_named_requests_of_the_issue_start_their_plan_with_and_without_a_domain():
    """The issue's two examples (now examples of their plans) and a request asked in other words, with the
    tracker's domain, without one and with the domain not known yet."""
    for message, plan, domains in [("the tests in test_api.py are red, get them green again", "bugfix_workflow",
                                    ("bugfix", "", None)),
                                   ("upgrade numpy to 2.1 and check nothing broke", "dependency_update",
                                    ("bugfix", "", None)),
                                   (ASKED, "bugfix_workflow", ("bugfix", "", None))]:
        for domain in domains:
            m = best_match(PLANS, message, domain, None)
            assert m is not None and m.plan.id == plan and m.meaning is not None, (message, domain)
            assert m.why().startswith("matched by meaning: ") and "like the example '" in m.why()


def test_the_words_decide_first_and_the_org_filter_has_the_last_word():
    m = best_match(PLANS, ASKED, "", None)
    others = [p.id for p in PLANS if p.id != m.plan.id]
    assert best_match(PLANS, ASKED, "", others) is None or best_match(PLANS, ASKED, "", others).plan.id != m.plan.id
    assert best_match(PLANS, ASKED, "", []) is None
    assert best_match(PLANS, "fix the bug in /tmp/test.py", "", None).hits  # phrases, not meaning


def test_explain_and_calibrate(capsys):
    assert cli.main(["triggers", "--explain", ASKED]) == 0
    out = capsys.readouterr().out
    assert "chosen: bugfix_workflow: matched by meaning: " in out and "nearest text" in out
    assert cli.main(["triggers", "--explain", "what does git rebase do?", "--json"]) == 0
    ex = json.loads(capsys.readouterr().out)
    assert ex["chosen"] is None and ex["request_text"] == "" and "only asks about a topic" in ex["why"]
    assert cli.main(["triggers", "--calibrate", "--json"]) == 0
    cal = json.loads(capsys.readouterr().out)
    assert cal["found"] and cal["bound"] <= MAX_FALSE_ACTIVATIONS
    from graph_engine import meaning
    assert cal["model"] and cal["constants"] == triggers.thresholds(True) == {  # the shipped constants are calibrated
        "threshold": meaning.THRESHOLD, "bonus": meaning.BONUS, "likeness": meaning.LIKENESS}


def test_every_plan_has_a_mention_that_starts_nothing_and_requests_that_start_it():
    """Mentioning a topic is not asking for a workflow: each plan has mentions that contain its own trigger
    phrases (only the way they are asked keeps them from starting it) and requests that start it."""
    from graph_engine.matching import normalise, trigger_hits
    for plan in PLANS:
        paired = [c for c in CASES if c.get("about") == plan.id]
        named = [c for c in paired if c["expect"] is None and trigger_hits(plan.all_triggers, normalise(c["message"]))]
        requests = [c for c in paired if c["expect"] == plan.id]
        assert len(named) >= 1 and len(requests) >= 2, plan.id


def test_the_named_mentions_and_requests_of_the_issue():
    by_message = {c["message"]: c["expect"] for c in CASES}
    for message, plan in [("a poem about refactoring", None), ("what is a docker volume?", None),
                          ("explain git rebase", None), ("refactor utils.py", "refactor_safe"),
                          ("build the docker image", "docker_build_deploy")]:
        assert by_message[message] == plan


def test_triggers_command(capsys, monkeypatch):
    full = triggers.report
    # REPORT is the report of the same plans and cases (made at import): the command's own part is checked here
    monkeypatch.setattr(triggers, "report", lambda plans, cases: REPORT if cases == CASES and
                        [p.version for p in plans] == [p.version for p in PLANS] else full(plans, cases))
    assert cli.main(["triggers"]) == (0 if REPORT["required"]["met"] else 1)
    out = capsys.readouterr().out
    assert "correct" in out and "expected -> chosen" in out and "no trigger phrase collides" in out
    assert "held_out" in out and "requests that start the right plan" in out
    assert cli.main(["triggers", "--json"]) == (0 if REPORT["required"]["met"] else 1)
    rep = json.loads(capsys.readouterr().out)
    assert rep["cases"] == len(CASES) and "bugfix_workflow" in rep["confusion"]


def test_collisions_are_listed(tmp_path, capsys):
    lib = json.loads(LIBRARY.read_text())
    lib["plans"]["refactor_safe"]["triggers"].append("fix the bug")
    path = tmp_path / "lib.json"
    path.write_text(json.dumps(lib))
    cli.main(["triggers", "--library", str(path)])
    out = capsys.readouterr().out
    assert "bugfix_workflow: 'fix the bug'  <->  refactor_safe: 'fix the bug'" in out


def test_the_readme_shows_the_figures_the_command_prints():
    from graph_engine.tools.standin import ROOT
    lines = (ROOT / "README.md").read_text().splitlines()
    figs = REPORT["figures"]
    for label, split in (("| tuned on (", "tune"), ("| held out (", "held_out"), ("| fresh (", "fresh"),
                         ("| all (", "all")):
        row = next(line for line in lines if line.startswith(label))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0].endswith(f"({sum(1 for c in CASES if split in ('all', triggers.split_of(c)))})")
        for cell, key in zip(cells[1:3], ("with_domain", "without_domain")):
            f = figs[split][key]
            assert cell.startswith(f"{f['right']} of {f['requests']} (") and f"{f['recall']:.1%}"[:-1] in cell
        with_d, without = (figs[split][k] for k in ("with_domain", "without_domain"))
        assert cells[3].startswith(f"{with_d['false_activations']} of {with_d['negatives']} / "
                                   f"{without['false_activations']} of {without['negatives']}")
