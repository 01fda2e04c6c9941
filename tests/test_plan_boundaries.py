"""The plan boundary: whatever a library file or a .dot file beside it holds, the load finishes, and only the
plan at fault is disabled, with one line naming the file, the plan and the fix.

Each case is loaded both ways a user meets it: by the running engine (``LibraryCache``, what the Agent-Zero
hooks hold) and by ``graph-engine validate`` (the CLI's loader); both must agree.
"""

import json
import os

import pytest

from graph_engine import lint
from graph_engine.catalogue import LibraryCache
from graph_engine.tools.inputs import CliError, load_library


def good_plan(name="Good", trigger="tidy the garden"):
    return {"name": name, "triggers": [trigger], "trigger_threshold": 1,
            "steps": [{"name": "rake", "verify": {"type": "any_output"}}]}


def write_library(folder, plans, dots=None, raw_text=None):
    path = folder / "lib.json"
    path.write_text(raw_text if raw_text is not None else json.dumps({"plans": plans}))
    for name, text in (dots or {}).items():
        (folder / name).write_text(text)
    return path


def both_loads(path):
    """(plans the engine runs, its problem lines), and the same from the CLI's loader."""
    cat, lines = LibraryCache(str(path), recheck_seconds=0, background=False).refresh()
    engine = (sorted(cat.library().plans) if cat is not None else None, lines)
    lib = load_library(str(path))
    return engine, (sorted(lib.plans), list(lib.problems))


def counting_possible_edges(monkeypatch):
    """Count the lint's edge look-ups: the measure of its work (a wall clock would fail on a busy machine)."""
    calls = [0]
    real = lint.possible_edges

    def counted(*args):
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(lint, "possible_edges", counted)
    return calls


# ── bounded walks ───────────────────────────────────────────────────────────


def test_a_pass_through_node_with_two_edges_back_to_itself_lints_at_once(tmp_path, monkeypatch):
    calls = counting_possible_edges(monkeypatch)
    path = write_library(tmp_path, {"good": good_plan()}, dots={
        "p.dot": 'digraph p { start -> start [condition="x"]  start -> start  n0 -> start }'})
    (engine_plans, engine_lines), (cli_plans, cli_lines) = both_loads(path)
    assert engine_plans == cli_plans == ["good"]
    assert any("p.dot" in line for line in engine_lines)
    assert calls[0] < 500  # following every path: 2^64


def test_a_json_checkpoint_with_two_edges_to_itself_disables_only_its_plan(tmp_path, monkeypatch):
    calls = counting_possible_edges(monkeypatch)
    loop = {"name": "Loop", "triggers": ["spin around"], "trigger_threshold": 1, "graph": {
        "start": "s", "nodes": {"s": {"type": "start"}, "c": {"type": "checkpoint"}, "t": {"type": "task"},
                                "end": {"type": "exit"}},
        "edges": [{"from": "s", "to": "c"}, {"from": "c", "to": "c"}, {"from": "c", "to": "c"},
                  {"from": "c", "to": "t"}, {"from": "t", "to": "end"}]}}
    path = write_library(tmp_path, {"loop": loop, "good": good_plan()})
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == ["good"]
    assert any("plan 'loop' is disabled" in line for line in engine_lines)
    assert calls[0] < 500


def decision_chain(k):
    lines = ["digraph chain { start [shape=Mdiamond] exit [shape=Msquare] start -> d0"]
    for i in range(k):
        nxt = f"d{i + 1}" if i + 1 < k else "work"
        lines.append(f'd{i} [shape=diamond] d{i} -> {nxt} [condition="context.lang=python"] '
                     f'd{i} -> {nxt} [condition="context.lang!=python"]')
    lines.append('work [prompt="write it"] work -> exit }')
    return "\n".join(lines)


def test_thirty_decisions_in_a_row_lint_with_work_linear_in_their_number(tmp_path, monkeypatch):
    calls = counting_possible_edges(monkeypatch)
    path = write_library(tmp_path, {"good": good_plan()}, dots={"chain.dot": decision_chain(30)})
    (engine_plans, _), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans and "good" in engine_plans
    assert calls[0] < 50 * 30  # each path through the chain: 2^30


def test_lint_work_grows_linearly_with_a_plan_of_5000_nodes(monkeypatch):
    from graph_engine.dot import parse
    from graph_engine.dot_plan import to_plan
    from graph_engine.library import check_plan

    def chain(n):
        body = " ".join(f'n{i} [prompt="step {i}"] n{i} -> {f"n{i + 1}" if i + 1 < n else "exit"}' for i in range(n))
        _, raw, _ = to_plan(parse(f"digraph big {{ start [shape=Mdiamond] exit [shape=Msquare] start -> n0 {body} }}"))
        return raw

    counts = []
    for n in (500, 5000):
        calls = counting_possible_edges(monkeypatch)
        checked = check_plan("big", chain(n), None)
        assert checked.usable, checked.diagnostics
        counts.append(calls[0])
    assert counts[1] <= 12 * counts[0]  # ten times the nodes: about ten times the work
