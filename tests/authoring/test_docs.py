"""The plan-authoring reference agrees with the schema, the model and the lint."""

import json
import re

from graph_engine.tools import cli
from graph_engine.authoring.lint import RULES
from graph_engine.core.model import CONDITIONS, NODE_TYPES, ON_FAIL_ACTIONS, PACE_LEVELS, VERIFY_TYPES
from graph_engine.authoring.schema import find_schema, load_schema
from graph_engine.tools.standin import ROOT

DOC = (ROOT / "docs" / "plan-authoring.md").read_text()
SCHEMA = load_schema(find_schema())


def schema_properties(node, found=None):
    found = set() if found is None else found
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties":
                found.update(value)
            schema_properties(value, found)
    elif isinstance(node, list):
        for item in node:
            schema_properties(item, found)
    return found


def test_every_schema_property_is_documented():
    props = schema_properties(SCHEMA)
    assert {"triggers", "strong_triggers", "fail_if", "continue_on_fail", "on_fail"} <= props
    missing = sorted(p for p in props if f"`{p}`" not in DOC and f"`graph.{p}`" not in DOC)
    assert missing == []


def test_every_node_type_condition_check_pace_level_and_rule_is_documented():
    names = (*NODE_TYPES, *CONDITIONS, *VERIFY_TYPES, *ON_FAIL_ACTIONS, *PACE_LEVELS, *RULES)
    assert [n for n in names if f"`{n}`" not in DOC] == []


def test_the_schema_enums_match_the_model():
    defs = SCHEMA["$defs"]
    assert tuple(defs["node"]["properties"]["type"]["enum"]) == NODE_TYPES
    assert tuple(defs["edge"]["properties"]["condition"]["anyOf"][0]["enum"]) == CONDITIONS
    assert tuple(defs["verify"]["properties"]["type"]["enum"]) == VERIFY_TYPES
    assert tuple(defs["step"]["properties"]["on_fail"]["enum"]) == ON_FAIL_ACTIONS
    assert tuple(defs["node"]["properties"]["pace_level"]["enum"]) == PACE_LEVELS


def test_the_worked_example_is_the_example_file_and_validates_as_shown(capsys):
    block = re.search(r"```json\n(.*?)```", DOC, re.S).group(1)
    example = ROOT / "docs" / "example_library.json"
    assert json.loads(block) == json.loads(example.read_text())
    assert cli.main(["validate", str(example)]) == 0
    out = capsys.readouterr().out
    assert "ok      plan 'make_tests_pass': every run ends within 50 turns" in out
    assert "0 error(s), 0 warning(s) in 1 file(s)" in out


def test_the_readme_is_short_and_every_link_of_the_docs_resolves():
    """The README says what the pack is, the two commands and where to read on (at most 250 lines); every
    relative link of the README and docs/ names a file that exists."""
    readme = ROOT / "README.md"
    assert len(readme.read_text().splitlines()) <= 250
    for page in (readme, *(ROOT / "docs").glob("*.md")):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), (page.name, target)


def test_the_readme_layout_names_every_module():
    """The Layout paragraph of docs/development.md lists the runtime package's modules and the tooling's."""
    readme = (ROOT / "docs" / "development.md").read_text()
    layout = readme[readme.index("Layout: `extensions/`"):]
    layout = layout[:layout.index("`plan_library/`")]
    package = ROOT / "extensions" / "graph_engine"
    folders = sorted(str(p.parent.relative_to(package)) for p in [*package.glob("*/__init__.py"),
                                                                   *package.glob("*/*/__init__.py")])
    modules = [p.stem for p in [*package.glob("*/*.py"), *package.glob("*/*/*.py")] if not p.stem.startswith("__")]
    assert modules and [m for m in modules if f"`{m}`" not in layout] == []
    assert [f for f in folders if f"{f}/`" not in layout] == []


def test_the_readme_counts_the_shipped_plans_and_the_matching_doc_the_labelled_set():
    plans = json.loads((ROOT / "plan_library" / "htn_plan_library.json").read_text())["plans"]
    spelled = {8: "Eight", 9: "Nine", 10: "Ten", 11: "Eleven", 12: "Twelve"}
    assert f"{spelled.get(len(plans), len(plans))} plans ship" in (ROOT / "README.md").read_text()
    cases = json.loads((ROOT / "fixtures" / "trigger_cases.json").read_text())
    cases = cases["cases"] if isinstance(cases, dict) else cases
    doc = (ROOT / "docs" / "matching.md").read_text()
    assert f"holds {len(cases):,} messages" in doc
    assert f"{sum(c.get('written') == 'blind' for c in cases):,} were written" in doc
    for split in ("held_out", "fresh"):
        assert f"{sum(c.get('split') == split for c in cases):,} (`\"split\": \"{split}\"`)" in doc
