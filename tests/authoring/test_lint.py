"""Lint and schema: one fixture per rule, the JSON report, the validator agreement, the CLI exit codes."""

import json
from pathlib import Path

import pytest

from graph_engine.tools import cli
from graph_engine.authoring.library import check_document
from graph_engine.authoring.lint import RULES
from graph_engine.authoring.schema import find_schema, load_schema, validate_document
from graph_engine.tools.standin import FIXTURES, LIBRARY

LINT = FIXTURES / "lint"
# <rule>.json, dot/<rule>.dot (apart: validate reads the .dot files beside a library) or <rule>/
RULE_FILES = sorted([p for p in LINT.iterdir() if p.stem not in ("clean", "dot")] + list((LINT / "dot").glob("*.dot")),
                    key=lambda p: p.stem)


def findings(path: Path) -> list[dict]:
    if path.is_dir():  # a library folder: a JSON library and DOT plans beside it
        from graph_engine.authoring.library import load_library_file
        return [d.to_json() for d in load_library_file(str(path / "htn_plan_library.json")).diagnostics]
    return [d.to_json() for d in cli.validate_files([str(path)]) if d.rule not in ("worst_case_turns", "check_time")]


def test_every_rule_has_a_fixture():
    assert sorted(p.stem for p in RULE_FILES) == sorted(RULES)


@pytest.mark.parametrize("path", RULE_FILES, ids=[p.stem for p in RULE_FILES])
def test_rule_fixture_triggers_its_rule(path):
    found = findings(path)
    hits = [d for d in found if d["rule"] == path.stem]
    assert hits, found
    d = hits[0]
    assert d["severity"] == RULES[path.stem][0] and d["message"] and d["fix"]
    assert d["plan"] in ("p", "q") or (path.stem == "syntax" and d["plan"] == str(path)) or \
        (path.stem == "duplicate_plan" and d["plan"] == d["file"])  # a refused file is named by its path
    base = {"rule", "severity", "plan", "node", "edge", "message", "fix"} | ({"from", "to"} if d["edge"] else set())
    assert set(d) == (base | {"line", "col", "file"} if path.suffix == ".dot" or path.is_dir() else base)
    if d["edge"]:
        assert d["edge"] == f"{d['from']} -> {d['to']}"


def test_clean_fixture_and_shipped_library_have_no_findings():
    assert findings(LINT / "clean.json") == []
    assert findings(LIBRARY) == []


def test_a_plan_with_a_lint_error_is_disabled_and_the_others_load():
    doc = json.loads((LINT / "cycle_unbounded.json").read_text())
    doc["plans"]["ok"] = json.loads((LINT / "clean.json").read_text())["plans"]["p"]
    doc["plans"]["ok"]["triggers"] = ["other words"]
    lib = check_document(doc, "lib.json")
    assert list(lib.plans) == ["ok"]
    assert lib.problems == ("lib.json: plan 'p' is disabled, the others keep working: [cycle_unbounded] the loop "
                            "through t, u can repeat without spending a retry budget (fix: give a node in the loop "
                            "max_retries and send its on_retry edge around the loop and its on_exhaust edge out of "
                            "it)",)


def test_worst_case_turns_counts_retry_budgets_and_the_ceiling():
    doc = json.loads((LINT / "clean.json").read_text())
    plan = doc["plans"]["p"]
    plan["stale_after_turns"] = 4
    assert check_document(doc).worst_case_turns["p"] == 4  # one visit of one task
    plan["graph"]["nodes"]["t"]["max_retries"] = 2
    plan["graph"]["edges"].append({"from": "t", "to": "t2", "condition": "on_retry"})
    plan["graph"]["nodes"]["t2"] = {"type": "task", "verify": {"type": "any_output"}}
    plan["graph"]["edges"] += [{"from": "t2", "to": "t", "condition": "on_success"},
                               {"from": "t2", "to": "stuck", "condition": "on_exhaust"}]
    # the default ceiling: (3 attempts of t + 1 of t2) x 4 turns
    assert check_document(doc).worst_case_turns["p"] == (3 + 1) * 4
    plan["max_turns"] = 100  # the structure: (2 retries + 1) x chain of 2 free steps (t2 -> t) x 4 turns
    assert check_document(doc).worst_case_turns["p"] == 3 * 2 * 4
    plan["max_turns"] = 10
    assert check_document(doc).worst_case_turns["p"] == 10


def test_schema_problems_name_their_json_paths():
    schema = load_schema(find_schema())
    bad = {"_meta": {"version": 2}, "junk": 1, "plans": {
        "a b": {"name": "", "steps": [], "graph": {}, "trigers": []},
        "p": {"name": "x", "graph": {"start": "s", "nodes": {"s": {"type": "bogus", "max_retries": -1, "verify": {
            "type": "output_matches", "flags": "x", "extra": 1}}}, "edges": [{"from": "s"}]}}}}
    found = validate_document(bad, schema)
    assert len(found) >= 10
    paths = {p.path for p in found}
    assert {"plans.p.graph.nodes.s.type", "plans.a b.trigers", "plans.p.graph.edges[0]", "junk"} <= paths


def test_schema_errors_name_the_plan_and_the_json_path():
    doc = json.loads((LINT / "schema.json").read_text())
    (d,) = [x for x in check_document(doc).diagnostics if x.rule == "schema"]
    assert d.plan == "p" and d.message.startswith("plans.p.graph.nodes.t.max_retry: unknown field")


def test_validate_exit_codes_and_json(capsys):
    assert cli.main(["validate", str(LIBRARY)]) == 0
    assert "0 error(s), 0 warning(s)" in capsys.readouterr().out
    assert cli.main(["validate", "--json", str(LINT / "dead_end.json"), str(LIBRARY)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert {"rule": "dead_end", "severity": "error", "plan": "p", "node": "t2", "edge": None,
            "message": "task node has no outgoing edge",
            "fix": "add an edge to the next node, an escalation or an exit"} in report
    assert sum(1 for d in report if d["rule"] == "worst_case_turns") == 10


def test_validate_reports_unreadable_and_broken_files(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    assert cli.main(["validate", "--json", str(broken), str(tmp_path / "missing.json"), str(LIBRARY)]) == 2
    out, err = capsys.readouterr()
    assert sum(1 for d in json.loads(out) if d["rule"] == "worst_case_turns") == 10  # the readable one is checked
    assert err.splitlines() == [f"graph-engine validate: {broken}: not valid JSON (Expecting property name enclosed "
                                "in double quotes: line 1 column 2 (char 1)); fix the syntax",
                                f"graph-engine validate: {tmp_path / 'missing.json'}: no such plan library"]


def test_validate_reads_the_dot_plans_beside_a_library(tmp_path, capsys):
    lib = tmp_path / "htn_plan_library.json"
    lib.write_text((LINT / "clean.json").read_text())
    (tmp_path / "broken.dot").write_text("digraph Broken { a -- b }")
    assert cli.main(["validate", str(lib)]) == 1
    assert "broken.dot:1:" in capsys.readouterr().out
