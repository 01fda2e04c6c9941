"""The labelled set (fixtures/trigger_cases.json) against the bundled library, taught and untaught."""

import json

import pytest

from graph_engine.authoring.library import load_library_file
from graph_engine.matching import second, shipped
from graph_engine.matching.decide import best_match
from graph_engine.matching.words import normalise, trigger_hits
from graph_engine.tools import cli, triggers
from graph_engine.tools.standin import FIXTURES, LIBRARY, BeliefStateTracker
from graph_engine.tools.triggers import load_cases, met, report

CASES = load_cases(str(FIXTURES / "trigger_cases.json"))
ASKED = "the nightly export dies with a ZeroDivisionError, make it work again"  # no trigger phrase of any plan
PLANS = list(load_library_file(str(LIBRARY)).plans.values())
NOT_REQUESTS = [m["text"] for m in json.load(open(shipped.NOT_REQUESTS))["messages"]]


def test_the_golden_set_is_large_and_covers_every_plan_and_the_named_cases():
    assert len(CASES) >= 400
    held = [c for c in CASES if c.get("split") == "held_out"]
    assert len(held) >= 80 and {c["expect"] for c in held} == {p.id for p in PLANS} | {None}
    assert len({c["message"] for c in CASES}) == len(CASES)  # no message twice
    taught = {e.lower() for p in PLANS for e in p.examples + p.not_examples} | {m.lower() for m in NOT_REQUESTS}
    # the tuning cases teach the matcher (a request: an example of its plan; the rest: a not-request); the cases
    # held out and the fresh ones never do (letter case aside, as the matcher reads them)
    assert all(c["message"].lower() in taught for c in CASES if "split" not in c)
    assert not taught & {c["message"].lower() for c in CASES if "split" in c}
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


ANSWERS = triggers.load_answers(str(FIXTURES / "utility_answers.json"))
# the tuning split by the shipped classes (the deep run learns folds); the untaught library also as the host runs it
REPORT = report(PLANS, CASES, folds=False, answers=ANSWERS)


def test_the_labelled_set_figures_of_the_cases_that_taught_nothing():
    """Requests that start the right plan and false activations, with the tracker's domain and without one, on
    the cases the matcher never learned from (floors from the measured figures: a change that loses requests or
    starts plans for small talk fails)."""
    figs = REPORT["figures"]["taught"]
    for split, recall, false in (("held_out", 0.92, 0), ("fresh", 0.97, 6)):
        for key in ("with_domain", "without_domain"):
            assert figs[split][key]["recall"] >= recall, (split, key)
            assert figs[split][key]["false_activations"] <= false, (split, key)


def test_untaught_plans_are_matched_by_their_own_text():
    """Every plan's examples and not-examples removed: each plan is matched by its name, description, phrases and
    steps (floors from the measured figures; the required 85 % and 2 % are not reached by the local stage alone:
    the README says so, and what the utility model adds)."""
    figs = REPORT["figures"]["untaught"]["all"]
    assert figs["with_domain"]["recall"] >= 0.70 and figs["with_domain"]["false_rate"] <= 0.035
    assert figs["without_domain"]["recall"] >= 0.58 and figs["without_domain"]["false_rate"] <= 0.03
    assert REPORT["required"]["met"]["untaught"] == met(REPORT["figures"]["untaught"]["all"], "untaught")


def test_untaught_plans_start_as_the_host_runs_them_with_the_utility_model():
    """The untaught library as Agent-Zero runs it: the messages the host asks about (``asking.why_ask``) take the
    recorded answer of a utility model to the very question it would send.  Every question has its answer (a
    change to the wording, the plans' descriptions or when the host asks needs new answers: `graph-engine
    triggers --questions`), and the figures reach the required 85 % / 2 % with the domain and without."""
    rep = REPORT
    assert {key: a["unanswered"] for key, a in rep["asked"].items()} == {"with_domain": 0, "without_domain": 0}
    assert all(a["asked"] >= 1000 for a in rep["asked"].values())
    assert rep["required"]["met"]["untaught_asked"], rep["figures"]["untaught_asked"]["all"]
    local = rep["figures"]["untaught"]["all"]["with_domain"]
    assert rep["figures"]["untaught_asked"]["all"]["with_domain"]["recall"] > local["recall"] + 0.2


def test_an_unrecorded_question_leaves_the_local_decision():
    figs = report(PLANS, CASES[:300], folds=False, answers={})
    assert figs["figures"]["untaught_asked"] == figs["figures"]["untaught"]
    assert all(a["asked"] > 0 and a["unanswered"] == a["asked"] for a in figs["asked"].values())


def test_the_named_requests_of_the_issue_start_their_plan_with_and_without_a_domain():
    """Requests asked in other words than any phrase, with the tracker's domain, without one and with the domain
    not known yet."""
    for message, plan, domains in [("the tests in test_api.py are red, get them green again", "bugfix_workflow",
                                    ("bugfix", "", None)),
                                   ("upgrade numpy to 2.1 and check nothing broke", "dependency_update",
                                    ("bugfix", "", None)),
                                   (ASKED, "bugfix_workflow", ("bugfix", "", None))]:
        for domain in domains:
            m = best_match(PLANS, message, domain, None)
            assert m is not None and m.plan.id == plan and m.meaning is not None, (message, domain)
            assert m.why().startswith("matched by meaning: ") and "like the text '" in m.why()


def test_the_words_decide_first_and_the_org_filter_has_the_last_word():
    m = best_match(PLANS, ASKED, "", None)
    others = [p.id for p in PLANS if p.id != m.plan.id]
    assert best_match(PLANS, ASKED, "", others) is None or best_match(PLANS, ASKED, "", others).plan.id != m.plan.id
    assert best_match(PLANS, ASKED, "", []) is None
    assert best_match(PLANS, "fix the bug in /tmp/test.py", "", None).hits  # phrases, not meaning


def test_explain_says_what_decided(capsys):
    assert cli.main(["triggers", "--explain", ASKED]) == 0
    out = capsys.readouterr().out
    assert "chosen: bugfix_workflow: matched by meaning: " in out and "nearest text" in out
    assert cli.main(["triggers", "--explain", "what does git rebase do?", "--json"]) == 0
    ex = json.loads(capsys.readouterr().out)
    assert ex["chosen"] is None and ex["request_text"] == "" and "asks for no work now" in ex["why"]


def test_explain_never_says_phrases_decide_when_meaning_undid_them(capsys):
    """A phrase that names a plan in a message meaning reads as a mention: the explanation says the phrase was
    undone, not that it decides."""
    message = "help me refactor my weekly schedule so I have more time for the gym"
    assert cli.main(["triggers", "--explain", message, "--json"]) == 0
    ex = json.loads(capsys.readouterr().out)
    assert ex["chosen"] is None
    assert "decide" not in ex["why"] and "mention, not a request" in ex["why"] and "'refactor'" in ex["why"]


def test_every_plan_has_a_mention_that_starts_nothing_and_requests_that_start_it():
    """Mentioning a topic is not asking for a workflow: each plan has mentions that contain its own trigger
    phrases (only the way they are asked keeps them from starting it) and requests that start it."""
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
    asked = []

    def kept(plans, cases, folds=True, progress=None, answers=None, targets=True):
        asked.append((folds, targets))
        return REPORT if cases == CASES and answers == ANSWERS and [p.version for p in plans] == \
            [p.version for p in PLANS] else full(plans, cases, folds, answers=answers, targets=targets)

    monkeypatch.setattr(triggers, "report", kept)
    code = cli.main(["triggers"])
    assert code == (0 if all(REPORT["required"]["met"][k] for k in REPORT["required"]["counted"]) else 1)
    assert REPORT["required"]["counted"] == ["taught", "untaught_asked"]
    out = capsys.readouterr().out
    assert "correct" in out and "expected -> chosen" in out and "no trigger phrase collides" in out
    assert "held_out" in out and "requests that start the right plan" in out
    assert "the library as it is" in out and "own text alone" in out and "recorded answers" in out
    assert cli.main(["triggers", "--quick", "--json"]) == code  # --quick: the default, still accepted
    rep = json.loads(capsys.readouterr().out)
    assert rep["cases"] == len(CASES) and "bugfix_workflow" in rep["confusion"]
    # the shipped set, judged by its targets; the five folds only when asked for
    assert asked == [(False, True), (False, True)]
    monkeypatch.setattr(triggers, "report", lambda *a, **kw: asked.append((kw["folds"], kw["targets"])) or REPORT)
    cli.main(["triggers", "--folds"])
    assert asked[-1] == (True, True)


def write_cases(tmp_path, cases, name="cases.json"):
    path = tmp_path / name
    path.write_text(json.dumps(cases))
    return str(path)


USERS = [{"message": "fix the failing test in parser", "expect": "bugfix_workflow"},
         {"message": "upgrade numpy to 2.1 and check nothing broke", "expect": "dependency_update", "domain": None},
         {"message": "what's the weather like?", "expect": None}]


def test_a_users_cases_are_reported_by_their_own_counts(tmp_path, capsys):
    """A cases file of one's own: its splits and its counts, no target of the shipped set; exit 1 when one of its
    messages does not start what it expects."""
    assert cli.main(["triggers", "--cases", write_cases(tmp_path, USERS)]) == 0
    out = capsys.readouterr().out
    assert "3/3 correct" in out and "2 of 2" in out and "0 of 1" in out
    assert "0 of 0" not in out and "at least" not in out and "held_out" not in out and "NOT met" not in out
    wrong = USERS[:2] + [dict(USERS[2], message="fix the bug in /tmp/test.py")]  # a request labelled as none
    assert cli.main(["triggers", "--cases", write_cases(tmp_path, wrong), "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["targets"] is False and rep["required"] == {}
    assert [w["message"] for w in rep["wrong"]] == ["fix the bug in /tmp/test.py"]
    assert rep["figures"]["taught"]["all"]["with_domain"]["negatives"] == 1


def test_a_null_domain_is_no_domain_and_an_empty_expect_asks_for_nothing(tmp_path, capsys):
    plain = [dict(USERS[0]), {"message": USERS[1]["message"], "expect": USERS[1]["expect"]}, dict(USERS[2])]
    spelled = [dict(USERS[0], domain=None), dict(USERS[1]), dict(USERS[2], expect="")]
    reports = []
    for i, cases in enumerate((plain, spelled)):
        assert cli.main(["triggers", "--cases", write_cases(tmp_path, cases, f"{i}.json"), "--json"]) == 0
        reports.append(json.loads(capsys.readouterr().out))
    assert reports[0] == reports[1]
    assert reports[0]["figures"]["taught"]["all"]["with_domain"]["requests"] == 2
    assert load_cases(write_cases(tmp_path, spelled))[2]["expect"] is None


def test_a_case_that_expects_a_plan_the_library_does_not_hold_is_refused(tmp_path, capsys):
    path = write_cases(tmp_path, [{"message": "fix it", "expect": "bugfix_workflw"}])
    assert cli.main(["triggers", "--cases", path]) == 2
    said = capsys.readouterr().err
    assert "case 0 expects plan 'bugfix_workflw'" in said and "did you mean 'bugfix_workflow'?" in said
    path = write_cases(tmp_path, [{"message": "fix it", "expect": 7}])
    assert cli.main(["triggers", "--cases", path]) == 2
    assert "'expect' is a plan id or null" in capsys.readouterr().err


def test_collisions_are_listed(tmp_path, capsys):
    lib = json.loads(LIBRARY.read_text())
    lib["plans"]["refactor_safe"]["triggers"].append("fix the bug")
    path = tmp_path / "lib.json"
    path.write_text(json.dumps(lib))
    cli.main(["triggers", "--library", str(path)])
    out = capsys.readouterr().out
    assert "bugfix_workflow: 'fix the bug'  <->  refactor_safe: 'fix the bug'" in out


@pytest.mark.deep
def test_the_labelled_set_figures_with_folds():
    """Each tuning case scored by learned classes that never saw it (five folds)."""
    rep = report(PLANS, CASES, folds=True)
    figs = rep["figures"]["taught"]
    for split, recall, false in (("tune", 0.97, 4), ("held_out", 0.92, 0), ("fresh", 0.97, 6), ("all", 0.97, 10)):
        for key in ("with_domain", "without_domain"):
            assert figs[split][key]["recall"] >= recall, (split, key)
            assert figs[split][key]["false_activations"] <= false, (split, key)
    assert rep["required"]["met"]["taught"]


def test_the_answers_file_is_read_as_docs_matching_md_says(tmp_path, capsys):
    """Rows by the question's hash (other keys ignored; of two rows with one hash the last counts); a label read
    as a reply is (letter case, quotes, a full stop, "label:" forgiven); a label that is none of the choices is
    no answer, as is a question without a row."""
    cases = [c for c in CASES if c.get("split") == "held_out"][:30]
    asked = triggers.questions(PLANS, cases)
    assert len(asked) >= 3 and all(q["prompt_sha256"] == second.prompt_key(q["system"], q["body"]) for q in asked)
    path = tmp_path / "answers.json"

    def figures(rows):
        path.write_text(json.dumps({"about": "recorded by hand", "answers": rows}))
        rep = report(PLANS, cases, folds=False, answers=triggers.load_answers(str(path)), targets=False)
        return rep["figures"]["untaught_asked"], {k: a["unanswered"] for k, a in rep["asked"].items()}

    plain = [{"prompt_sha256": q["prompt_sha256"], "label": "none", "message": q["message"]} for q in asked]
    nothing, unanswered = figures(plain)
    assert unanswered == {"with_domain": 0, "without_domain": 0}
    first = asked[0]["prompt_sha256"]
    spelled = [{"prompt_sha256": first, "label": "bugfix_workflow"}, {"prompt_sha256": first, "label": "Label: `NONE`."},
               *plain[1:-1], {"prompt_sha256": plain[-1]["prompt_sha256"], "label": '"None"'}]
    assert figures(spelled) == (nothing, unanswered)
    assert sum(figures(plain[1:])[1].values()) >= 1  # a question without a row
    assert sum(figures([dict(plain[0], label="no_such_plan"), *plain[1:]])[1].values()) >= 1
    path.write_text(json.dumps({"answers": [{"prompt_sha256": 7, "label": "none"}]}))
    assert cli.main(["triggers", "--answers", str(path)]) == 2
    assert 'needs {"answers": [{"prompt_sha256": ..., "label": ...}, ...]}' in capsys.readouterr().err


def test_questions_as_json_lines_and_as_one_json_list(tmp_path, capsys):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([c for c in CASES if c.get("split") == "held_out"][:30]))
    assert cli.main(["triggers", "--cases", str(path), "--questions"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert cli.main(["triggers", "--cases", str(path), "--questions", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert isinstance(listed, list) and listed == lines and len(listed) >= 3
    assert all(set(q) == {"prompt_sha256", "message", "system", "body"} and q["message"] in q["body"] for q in listed)
