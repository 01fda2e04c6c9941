"""Pictures a person can read: every edge shows its condition, one arrow per pair of nodes, a run's path with
its counts, and (drawn by Graphviz) edge labels that do not overlap each other on the shipped plans."""

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from graph_engine.tools import cli
from graph_engine.authoring.render_graph import mermaid, picture
from graph_engine.tools.standin import LIBRARY

RAW = json.loads(LIBRARY.read_text())["plans"]
ARROW = re.compile(r'^    (\w+) -> (\w+) \[label="([^"]*)"', re.MULTILINE)


@pytest.mark.parametrize("plan_id", list(RAW))
def test_every_edge_shows_its_condition_on_one_arrow_per_pair(plan_id):
    dot = picture(plan_id, RAW[plan_id])
    arrows = {(a, b): label.split("\\n") for a, b, label in ARROW.findall(dot)}
    pairs = {(e["from"], e["to"]) for e in RAW[plan_id]["graph"]["edges"]}
    assert len(ARROW.findall(dot)) == len(pairs) == len(arrows)  # no duplicate arrows
    for e in RAW[plan_id]["graph"]["edges"]:
        cond = e.get("condition", "always")
        assert any(line.endswith(cond) or line.endswith(f"({cond})") for line in arrows[(e["from"], e["to"])]), e
    text = mermaid(plan_id, RAW[plan_id])
    assert all(e.get("condition", "always") in text for e in RAW[plan_id]["graph"]["edges"])


def test_a_run_is_highlighted_with_its_counts(tmp_path, capsys):
    run = tmp_path / "state.json"
    run.write_text(json.dumps({"plan_id": "bugfix_workflow", "events": [
        {"type": "plan_activated", "node": "start", "seq": 1},
        {"type": "node_entered", "node": "start", "seq": 2},
        {"type": "edge_followed", "from": "start", "to": "reproduce", "condition": "always", "seq": 3},
        {"type": "node_entered", "node": "reproduce", "seq": 4},
        {"type": "edge_followed", "from": "reproduce", "to": "gather_context", "condition": "on_retry", "seq": 5},
        {"type": "node_entered", "node": "gather_context", "seq": 6},
        {"type": "edge_followed", "from": "gather_context", "to": "reproduce", "condition": "on_success", "seq": 7},
        {"type": "node_entered", "node": "reproduce", "seq": 8}]}))
    assert cli.main(["render", str(LIBRARY), "--plan", "bugfix_workflow", "--trace", str(run)]) == 0
    dot = capsys.readouterr().out
    assert re.search(r'^    reproduce \[label="Reproduce the issue\\nup to 3 attempts\\n× 2\\nthe run is here"', dot, re.M)
    assert re.search(r'^    start \[label="Start\\n× 1"', dot, re.M)  # entered once, not twice
    assert 'not reproduced yet (on_retry) × 1' in dot


def _boxes(svg: str) -> list[tuple[float, float, float, float, str]]:
    """Approximate boxes of the edge labels Graphviz placed (x, y, width, height, text)."""
    out = []
    for g in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}g"):
        if g.get("class") != "edge":
            continue
        for t in g.iter("{http://www.w3.org/2000/svg}text"):
            size = float(t.get("font-size", "9"))
            width = 0.5 * size * len(t.text or "")  # Helvetica: about half an em per character
            out.append((float(t.get("x")) - width / 2, float(t.get("y")) - size, width, size, t.text or ""))
    return out


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
@pytest.mark.parametrize("plan_id", list(RAW))
def test_edge_labels_do_not_overlap(plan_id):
    svg = subprocess.run(["dot", "-Tsvg"], input=picture(plan_id, RAW[plan_id]).encode(), capture_output=True,
                         check=True).stdout.decode()
    boxes = _boxes(svg)
    assert len(boxes) >= len(RAW[plan_id]["graph"]["edges"]) - 2  # every label was placed
    for i, (x1, y1, w1, h1, t1) in enumerate(boxes):
        for x2, y2, w2, h2, t2 in boxes[i + 1:]:
            overlap = x1 < x2 + w2 and x2 < x1 + w1 and y1 < y2 + h2 and y2 < y1 + h1
            same_arrow = abs(y1 - y2) == h1 and abs(x1 + w1 / 2 - x2 - w2 / 2) < 1  # lines of one label
            assert not overlap or same_arrow, (t1, t2)


def test_failure_routes_are_dashed_whether_shorthands_or_attractor_expressions():
    raw = {"name": "P", "graph": {"start": "a", "nodes": {"a": {"type": "task", "name": "A"}, "b": {"type": "exit"},
                                                          "c": {"type": "exit"}, "d": {"type": "exit"}},
                                  "edges": [{"from": "a", "to": "b", "condition": "outcome=success"},
                                            {"from": "a", "to": "c", "condition": "outcome=fail"},
                                            {"from": "a", "to": "d", "condition": "on_exhaust"}]}}
    dot = picture("p", raw)
    dashed = {(a, b) for a, b in re.findall(r"^    (\w+) -> (\w+) \[.*style=dashed", dot, re.MULTILINE)}
    assert dashed == {("a", "c"), ("a", "d")}
