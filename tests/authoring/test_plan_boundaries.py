"""The plan boundary: whatever a library file or a .dot file beside it holds, the load finishes, and only the
plan at fault is disabled, with one line naming the file, the plan and the fix.

Each case is loaded both ways a user meets it: by the running engine (``LibraryCache``, what the Agent-Zero
hooks hold) and by ``graph-engine validate`` (the CLI's loader); both must agree.
"""

import json
import os

import pytest

from graph_engine.authoring import lint

from graph_engine.core import routing
from graph_engine.session.catalogue import LibraryCache
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
    plans = sorted(cat.library().plans) if cat is not None else None  # a large library: every plan checked
    engine = (plans, lines + (cat.take_problems() if cat is not None else []))
    lib = load_library(str(path))
    return engine, (sorted(lib.plans), list(lib.problems))


def counting_possible_edges(monkeypatch):
    """Count the lint's edge look-ups: the measure of its work (a wall clock would fail on a busy machine)."""
    calls = [0]
    real = routing.possible_edges

    def counted(*args):
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(routing, "possible_edges", counted)
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
    from graph_engine.authoring.dot import parse
    from graph_engine.authoring.dot_plan import to_plan
    from graph_engine.authoring.library import check_plan

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


# ── one validator: jsonschema ───────────────────────────────────────────────


def graph_plan(edge_extra=None, trigger="fix the bug"):
    edge = {"from": "work", "to": "end", **(edge_extra or {})}
    return {"name": "Graph", "triggers": [trigger], "trigger_threshold": 1, "graph": {
        "start": "s", "nodes": {"s": {"type": "start"}, "work": {"type": "task"}, "end": {"type": "exit"}},
        "edges": [{"from": "s", "to": "work"}, edge]}}


def test_an_edge_weight_is_accepted_in_json_and_dot(tmp_path):
    path = write_library(tmp_path, {"weighted": graph_plan({"weight": 1}), "good": good_plan()},
                         dots={"w.dot": 'digraph w { start [shape=Mdiamond] exit [shape=Msquare] '
                                        'start -> B B [prompt="b"] B -> C [weight=3] C [prompt="c"] C -> exit }'})
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == ["good", "w", "weighted"]
    assert not [line for line in engine_lines if "disabled" in line or "not loaded" in line]


def test_a_400_digit_weight_disables_only_its_plan_and_says_why(tmp_path):
    path = write_library(tmp_path, {}, raw_text='{"plans": {"heavy": %s, "good": %s}}' % (
        json.dumps(graph_plan({"weight": 0})).replace('"weight": 0', '"weight": ' + "9" * 400),
        json.dumps(good_plan())))
    (engine_plans, engine_lines), (cli_plans, cli_lines) = both_loads(path)
    assert engine_plans == cli_plans == ["good"]
    line, = [x for x in engine_lines if "'heavy'" in x]
    assert f"{path}: plan 'heavy' is disabled" in line and "plans.heavy.graph.edges[1].weight" in line
    assert "must be between -1,000,000,000 and 1,000,000,000, got a number of 400 digits" in line


def test_without_jsonschema_one_line_says_the_schema_check_is_off_and_the_compiler_still_refuses(
        tmp_path, monkeypatch):
    import graph_engine.authoring.library as library

    monkeypatch.setattr(library, "jsonschema_available", lambda: False)
    bad = dict(good_plan("Bad", "break things"), steps=[{"name": 3, "verify": "yes"}])
    path = write_library(tmp_path, {"bad": bad, "good": good_plan()})
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == ["good"]
    off = [line for line in engine_lines if "jsonschema is not installed" in line]
    assert len(off) == 1 and "pip install jsonschema" in off[0]
    assert any("plan 'bad' is disabled" in line for line in engine_lines)


# ── one way to read a library ───────────────────────────────────────────────

ODD_VALUES = {  # what a plan's "_note" holds -> whether the plan still loads
    "NaN": False, "Infinity": False, "-Infinity": False, "18446744073709551616": True, "9" * 4301: False,
    '"\\ud800"': False, '"\\ud83d\\ude00"': True, "[" * 1000 + "]" * 1000: False, "[" * 50 + "]" * 50: True,
}


@pytest.mark.parametrize("with_dot", [False, True], ids=["json alone", "with a .dot beside it"])
@pytest.mark.parametrize("value", ODD_VALUES, ids=lambda v: v[:24])
def test_an_odd_json_value_is_read_the_same_everywhere_and_disables_at_most_its_plan(tmp_path, value, with_dot):
    odd = json.dumps(dict(good_plan("Odd", "odd words"), _note=0)).replace('"_note": 0', f'"_note": {value}')
    dots = {"d.dot": 'digraph d { start [shape=Mdiamond] exit [shape=Msquare] start -> t t [prompt="t"] '
                     't -> exit }'} if with_dot else None
    path = write_library(tmp_path, {}, dots=dots, raw_text='{"plans": {"odd": %s, "good": %s}}' % (
        odd, json.dumps(good_plan())))
    (engine_plans, engine_lines), (cli_plans, cli_lines) = both_loads(path)
    assert engine_plans == cli_plans
    assert ("odd" in engine_plans) == ODD_VALUES[value]
    assert "good" in engine_plans and ("d" in engine_plans) == with_dot
    if not ODD_VALUES[value]:
        line, = [x for x in engine_lines if "'odd'" in x]
        assert f"{path}: plan 'odd' is disabled" in line and "plans.odd" in line and "(fix: " in line


def test_a_byte_order_mark_is_skipped_by_every_reader(tmp_path):
    path = tmp_path / "lib.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"plans": {"good": good_plan()}}).encode())
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == ["good"] and engine_lines == []


def test_of_duplicate_keys_the_last_counts_everywhere(tmp_path):
    text = '{"plans": {"p": %s, "p": %s}}' % (json.dumps(good_plan("First")), json.dumps(good_plan("Second")))
    path = write_library(tmp_path, {}, raw_text=text)
    cat, _ = LibraryCache(str(path), recheck_seconds=0, background=False).refresh()
    assert cat.get("p").name == load_library(str(path)).plans["p"].name == "Second"


def test_a_plan_nested_1000_deep_in_a_large_library_disables_only_that_plan(tmp_path):
    plans = {f"p{i}": good_plan(f"P{i}", f"task number {i}") for i in range(40)}  # loaded lazily
    text = json.dumps({"plans": plans}).replace('"name": "P7"', '"name": "P7", "_note": ' + "[" * 1000 + "]" * 1000)
    path = write_library(tmp_path, {}, raw_text=text)
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == sorted(set(plans) - {"p7"})
    assert any("plan 'p7' is disabled" in line and "nested" in line for line in engine_lines)


# ── a .dot beside the library ───────────────────────────────────────────────


def test_a_dot_file_with_a_json_plans_id_is_refused_naming_both_files_and_the_json_plan_works(tmp_path):
    dot = ('digraph bugfix { start [shape=Mdiamond] exit [shape=Msquare] start -> t t [prompt="t"] '
           't -> exit }')
    path = write_library(tmp_path, {"bugfix": good_plan("Bugfix", "fix the bug"), "good": good_plan()},
                         dots={"bugfix.dot": dot})
    (engine_plans, engine_lines), (cli_plans, cli_lines) = both_loads(path)
    assert engine_plans == cli_plans == ["bugfix", "good"]
    line, = [x for x in engine_lines if "bugfix.dot" in x]
    assert f"DOT file {tmp_path / 'bugfix.dot'} is not loaded, the others keep working" in line
    assert f"already defined in {path}" in line and "1:1" in line and "rename the digraph" in line
    assert line in cli_lines


def test_two_dot_files_with_one_digraph_name_the_first_loads_and_the_second_names_it(tmp_path):
    dot = 'digraph twin { start [shape=Mdiamond] exit [shape=Msquare] start -> t t [prompt="t"] t -> exit }'
    path = write_library(tmp_path, {"good": good_plan()}, dots={"a.dot": dot, "b.dot": dot})
    (engine_plans, engine_lines), _ = both_loads(path)
    assert engine_plans == ["good", "twin"]
    line, = [x for x in engine_lines if "b.dot" in x]
    assert f"already defined in {tmp_path / 'a.dot'}" in line


def test_subgraphs_nested_10000_deep_refuse_only_their_file_with_the_depth(tmp_path):
    dot = "digraph deep { " + "subgraph { " * 10_000 + "a" + " }" * 10_000 + " }"
    path = write_library(tmp_path, {"good": good_plan()}, dots={"deep.dot": dot})
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == ["good"]
    line, = [x for x in engine_lines if "deep.dot" in x]
    assert "is not loaded" in line and "nested more than 64 deep" in line


# ── only regular files, with a size limit ───────────────────────────────────


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_a_library_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    path = tmp_path / "lib.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path = "/dev/zero"
    cat, lines = LibraryCache(str(path), recheck_seconds=0, background=False).refresh()
    assert cat is None and len(lines) == 1 and "no plans are active" in lines[0]
    with pytest.raises(CliError, match="folder|FIFO|device"):
        load_library(str(path))


def test_a_dot_file_that_is_a_fifo_is_refused_and_the_library_loads(tmp_path):
    path = write_library(tmp_path, {"good": good_plan()})
    os.mkfifo(tmp_path / "pipe.dot")
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == ["good"]
    assert any("pipe.dot" in line and "FIFO" in line for line in engine_lines)


def test_validate_dev_zero_is_refused_without_reading(capsys):
    from graph_engine.tools import cli

    assert cli.main(["validate", "/dev/zero"]) == 2
    assert "device" in capsys.readouterr().err


# ── Attractor details ───────────────────────────────────────────────────────


def test_inspect_shows_a_nodes_default_shape(capsys, tmp_path):
    from graph_engine.tools import cli

    path = tmp_path / "p.dot"
    path.write_text('digraph p { start [shape=Mdiamond] exit [shape=Msquare] work [prompt="w"] '
                    'start -> work -> exit }')
    assert cli.main(["inspect", str(path), "--json"]) == 0
    nodes = json.loads(capsys.readouterr().out)["nodes"]
    assert nodes["work"]["attrs"]["shape"] == "box" and nodes["start"]["attrs"]["shape"] == "Mdiamond"


def test_condition_syntax_names_each_bad_edge_even_beside_a_schema_error(tmp_path):
    plan = graph_plan()
    plan["name"] = 3  # a schema error: the plan is not compiled
    plan["graph"]["edges"] = [{"from": "s", "to": "work", "condition": "outcome==success"},
                              {"from": "work", "to": "end", "condition": "lang ~ python"}]
    path = write_library(tmp_path, {"p": plan, "good": good_plan()})
    lib = load_library(str(path))
    bad = sorted(d.edge for d in lib.diagnostics if d.rule == "condition_syntax")
    assert bad == ["s -> work", "work -> end"] and sorted(lib.plans) == ["good"]


def partial_plan(edges):
    return {"name": "Partial", "triggers": ["try it"], "trigger_threshold": 1, "graph": {
        "start": "s", "nodes": {"s": {"type": "start"}, "x": {"type": "exit"},
                                "t": {"type": "task", "action": "try", "max_retries": 1, "allow_partial": True,
                                      "verify": {"type": "exit_code_zero"}},
                                "salvage": {"type": "task", "action": "keep what works"}},
        "edges": [{"from": "s", "to": "t"}, {"from": "salvage", "to": "x"}] + edges}}


def test_allow_partial_spent_retries_take_the_partial_success_edge_as_the_engine_does():
    """Spec 3.5-3.6: retries spent with allow_partial give PARTIAL_SUCCESS; an edge naming it is taken, else the
    success route. The lint's route and the model's 'paths forward' follow the engine."""
    from graph_engine.authoring.library import check_document
    from graph_engine.texts.render import _paths_forward

    raw = partial_plan([{"from": "t", "to": "x", "condition": "outcome=success"},
                        {"from": "t", "to": "salvage", "condition": "outcome=partial_success"}])
    lib = check_document({"plans": {"p": raw}})
    plan = lib.plans["p"]
    assert lint.transitions(plan)["t"]["exhausted"] == ("salvage",)
    assert _paths_forward(plan, plan.nodes["t"], 1) == [
        "  If the check passes → finish (x)", "  If it fails → the step counts as partly done, then salvage"]


def test_allow_partial_with_a_sure_partial_edge_is_not_refused_as_a_stall():
    from graph_engine.authoring.library import check_document

    raw = partial_plan([{"from": "t", "to": "x", "condition": "outcome=success && context.lang=python"},
                        {"from": "t", "to": "x", "condition": "outcome=success && context.lang!=python"},
                        {"from": "t", "to": "salvage", "condition": "outcome=partial_success"}])
    lib = check_document({"plans": {"p": raw}})
    assert list(lib.plans) == ["p"], [d.text() for d in lib.diagnostics]
    raw["graph"]["edges"] = raw["graph"]["edges"][:3] + [  # the partial route needs a context value
        {"from": "t", "to": "salvage", "condition": "outcome=partial_success && context.keep=yes"}]
    raw["graph"]["edges"][1]["condition"] = "outcome=success && context.lang=ruby"
    lib = check_document({"plans": {"p": raw}})
    assert any(d.rule == "stall_possible" and "'partial'" in d.message for d in lib.diagnostics)


@pytest.mark.parametrize("depth", [100, 1000, 5000])
def test_a_deep_value_at_the_librarys_top_level_is_one_finding_and_every_plan_loads(tmp_path, depth):
    text = '{"_meta": {"version": "2", "note": %s}, "plans": %s}' % ("[" * depth + "]" * depth,
                                                                    json.dumps({"good": good_plan()}))
    path = write_library(tmp_path, {}, raw_text=text)
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == ["good"]
    line, = [x for x in engine_lines if "nested" in x]
    assert line.startswith(f"{path}: the library's top level is invalid: [schema] _meta")


def test_a_compressed_tool_result_whose_file_is_a_fifo_is_judged_on_its_short_text_without_blocking(tmp_path):
    from scenario import crash, events, started

    from graph_engine.tools.standin import Reply

    fifo = tmp_path / "5.txt"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    s = started()
    s.run_pass(crash())
    s.history[-1] = {"ai": False, "content": json.dumps(
        {"tool_name": "code_execution_tool", "tool_result": "Traceback (most recent call last)<<\n99 CHARACTERS "
                                                            "REMOVED TO SAVE SPACE\n>>", "file": str(fifo)})}
    s.run_pass(Reply(warning="You have misformatted your message. Follow system prompt instructions."))
    assert events(s, "node_verified")[0]["reason"] == "found 'Traceback (most recent call last)'"


def test_the_export_of_a_shipped_plan_saved_beside_the_library_leaves_every_shipped_plan_working(tmp_path, capsys):
    import shutil

    from graph_engine.tools import cli
    from graph_engine.tools.standin import LIBRARY

    path = tmp_path / "htn_plan_library.json"
    shutil.copy(LIBRARY, path)
    assert cli.main(["export", "--plan", "bugfix_workflow"]) == 0  # the shipped library
    (tmp_path / "bugfix_workflow.dot").write_text(capsys.readouterr().out)
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == sorted(json.loads(LIBRARY.read_text())["plans"])
    line, = [x for x in engine_lines if "bugfix_workflow.dot" in x]
    assert f"[duplicate_plan] digraph 'bugfix_workflow' names a plan already defined in {path}" in line


def fail_for_unlucky(monkeypatch, module, name, error):
    """Make ``module.name`` raise ``error`` for the plan or graph named 'unlucky' (a fault in the engine)."""
    real = getattr(module, name)

    def failing(item):
        if getattr(item, "id", None) == "unlucky" or getattr(item, "name", None) == "unlucky":
            raise error
        return real(item)

    monkeypatch.setattr(module, name, failing)


def test_should_checking_a_plan_fail_only_that_plan_is_disabled_with_one_line(tmp_path, monkeypatch):
    import graph_engine.authoring.library as library

    fail_for_unlucky(monkeypatch, library, "lint_plan", IndexError("a fault in the checker"))
    path = write_library(tmp_path, {"unlucky": good_plan("U", "unlucky words"), "good": good_plan()})
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == ["good"]
    line, = [x for x in engine_lines if "'unlucky'" in x]
    assert "the engine could not check this plan (IndexError: a fault in the checker)" in line


def test_should_mapping_a_dot_file_fail_only_that_file_is_refused(tmp_path, monkeypatch):
    import graph_engine.authoring.dot_plan as dot_plan

    fail_for_unlucky(monkeypatch, dot_plan, "to_plan", KeyError("a fault in the mapper"))
    ok = 'digraph {} {{ start [shape=Mdiamond] exit [shape=Msquare] start -> t t [prompt="t"] t -> exit }}'
    path = write_library(tmp_path, {"good": good_plan()},
                         dots={"a.dot": ok.format("unlucky"), "b.dot": ok.format("fine")})
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == ["fine", "good"]
    assert any("a.dot is not loaded" in x and "could not check" in x for x in engine_lines)


def test_deep_subgraphs_are_refused_after_reading_little_more_than_the_limit(monkeypatch):
    from graph_engine.authoring import dot

    calls = [0]
    real = dot._Parser.peek

    def counted(self, k=0):
        calls[0] += 1
        return real(self, k)

    monkeypatch.setattr(dot._Parser, "peek", counted)
    with pytest.raises(dot.DotSyntaxError, match="nested more than 64 deep"):
        dot.parse("digraph deep { " + "subgraph { " * 10_000 + "a" + " }" * 10_000 + " }")
    assert calls[0] < 20_000  # each level's label scan reading to the end of the file: over a million


def test_a_dot_file_over_its_size_limit_is_refused_unread_and_the_library_loads(tmp_path):
    from graph_engine.authoring.library import MAX_DOT_BYTES

    big = "digraph big { " + "// padding\n" * (MAX_DOT_BYTES // 11 + 1) + "}"
    path = write_library(tmp_path, {"good": good_plan()}, dots={"big.dot": big})
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == ["good"]
    line, = [x for x in engine_lines if "big.dot" in x]
    assert f"over the {MAX_DOT_BYTES:,} byte limit" in line and "is not loaded" in line


def test_the_issues_weight_reproducer_beside_the_shipped_library_leaves_every_plan_working(tmp_path):
    import shutil

    from graph_engine.tools.standin import LIBRARY

    path = tmp_path / "htn_plan_library.json"
    shutil.copy(LIBRARY, path)
    (tmp_path / "w.dot").write_text("digraph{B->C[weight=3]}")
    (engine_plans, engine_lines), (cli_plans, _) = both_loads(path)
    assert engine_plans == cli_plans == sorted(json.loads(LIBRARY.read_text())["plans"])
    assert engine_lines and all("w.dot" in line or "dot_plan" in line for line in engine_lines)
