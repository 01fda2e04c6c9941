"""The trigger golden set (fixtures/trigger_cases.json) against the bundled library."""

import json

from graph_engine.tools import cli
from graph_engine.library import load_library_file
from graph_engine.tools.standin import FIXTURES, LIBRARY, BeliefStateTracker
from graph_engine.tools.triggers import REQUIRED_ACCURACY, load_cases, report

CASES = load_cases(str(FIXTURES / "trigger_cases.json"))
PLANS = list(load_library_file(str(LIBRARY)).plans.values())


def test_the_golden_set_is_large_and_covers_every_plan_and_the_named_cases():
    assert len(CASES) >= 80
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
    bst = BeliefStateTracker()
    assert [c["domain"] for c in CASES] == [bst.classify(c["message"]) for c in CASES]


def test_every_case_of_the_bundled_set_is_right():
    rep = report(PLANS, CASES)
    assert rep["wrong"] == [] and rep["accuracy"] == 1.0 >= REQUIRED_ACCURACY
    assert rep["negatives_activated"] == []
    assert rep["collisions"] == []


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


def test_triggers_command(capsys):
    assert cli.main(["triggers"]) == 0
    out = capsys.readouterr().out
    assert "correct" in out and "expected -> chosen" in out and "no trigger phrase collides" in out
    assert cli.main(["triggers", "--json"]) == 0
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
