"""Every check of the bundled plans against realistic tool outputs (fixtures/check_outputs.json)."""

import json

import pytest

from graph_engine.authoring.library import load_library_file
from graph_engine.tools.standin import FIXTURES, LIBRARY, terminal
from graph_engine.core.verify import Evidence, check

CASES = json.loads((FIXTURES / "check_outputs.json").read_text())["cases"]
PLANS = load_library_file(str(LIBRARY)).plans


@pytest.mark.parametrize("case", CASES, ids=[f"{c['plan']}.{c['node']}:{c['note'][:40]}" for c in CASES])
def test_check_gives_the_expected_verdict(case):
    node = PLANS[case["plan"]].nodes[case["node"]]
    text = case["output"] if node.tool == "response" else terminal(case["output"])
    verdict = check(node.verify, Evidence(tool=node.tool, text=text, reply=case.get("reply", "")))
    assert verdict.ok == (case["expect"] == "pass"), f"{case['command']!r}: {verdict.reason}"


def test_every_task_node_has_a_passing_and_a_failing_output():
    covered = {(c["plan"], c["node"], c["expect"]) for c in CASES}
    missing = [f"{p.id}.{n.id}:{want}" for p in PLANS.values() for n in p.nodes.values() if n.type == "task"
               for want in (("pass", "fail") if n.verify else ("pass",)) if (p.id, n.id, want) not in covered]
    assert missing == []
