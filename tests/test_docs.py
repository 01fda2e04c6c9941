"""The plan-authoring reference agrees with the schema, the model and the lint."""

import json
import re

from graph_engine.tools import cli
from graph_engine.lint import RULES
from graph_engine.model import CONDITIONS, NODE_TYPES, ON_FAIL_ACTIONS, PACE_LEVELS, VERIFY_TYPES
from graph_engine.schema import find_schema, load_schema
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


def test_the_readme_layout_names_every_module():
    """The README's Layout paragraph lists the runtime package's modules and the tooling's, all of them."""
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("Layout: `extensions/`"):]
    layout = layout[:layout.index("`plan_library/`")]
    package = ROOT / "extensions" / "graph_engine"
    modules = [p.stem for p in (*package.glob("*.py"), *(package / "tools").glob("*.py"))
               if not p.stem.startswith("__")]
    assert [m for m in modules if f"`{m}`" not in layout] == []
