"""Generated plans and DOT files at the library boundary (hypothesis): grammar-aware and mutated.

The property, for each generated file placed beside a library of known-good plans: loading it through the
running engine's cache and through `graph-engine validate` raises nothing, both loads agree on the plans that
work, and every good plan keeps working (only the bad plan or file is refused). A hang would show as a
missed deadline; the deadline is generous (a busy machine must not fail it), since the walks it guards
against take hours, not seconds.
"""

import json
import tempfile
from datetime import timedelta
from pathlib import Path
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from graph_engine.authoring import library
from graph_engine.session.catalogue import LibraryCache
from graph_engine.authoring.library import CHECK_FAILED
from graph_engine.tools.inputs import load_library
from graph_engine.tools.standin import LIBRARY

SHIPPED = json.loads(LIBRARY.read_text())["plans"]
GOOD = {pid: SHIPPED[pid] for pid in ("bugfix_workflow", "git_merge_pr")}
BOUNDARY = settings(settings.default, deadline=timedelta(seconds=20),
                    max_examples=max(30, settings.default.max_examples // 4))


def loads_agree_and_good_plans_work(text: str | None = None, dot: str | None = None) -> set[str]:
    """Write the library (``text``, or the good plans) and the DOT file, load both ways; the plans that work."""
    with tempfile.TemporaryDirectory(prefix="ge-fuzz-") as folder:
        path = Path(folder) / "lib.json"
        path.write_text(text if text is not None else json.dumps({"plans": GOOD}), encoding="utf-8",
                        errors="surrogatepass")
        if dot is not None:
            (Path(folder) / "fuzz.dot").write_text(dot, encoding="utf-8", errors="surrogatepass")
        cat, _ = LibraryCache(str(path), recheck_seconds=0, background=False).refresh()
        engine = set(cat.library().plans) if cat is not None else set()
        lib = load_library(str(path))
    assert engine == set(lib.plans)
    assert not [d for d in lib.diagnostics if CHECK_FAILED in d.message]  # the checker's last guard never fired
    return engine


# ── grammar-aware DOT files ─────────────────────────────────────────────────

IDS = st.sampled_from(["start", "exit", "end", "a", "b", "c", "d", "gate", "bugfix_workflow", "n0"])
VALUES = st.one_of(
    st.sampled_from(["Mdiamond", "Msquare", "box", "diamond", "hexagon", "component", "tripleoctagon", "house",
                     "true", "false", "0", "-1", "3", "1e16", "9" * 400, "NaN", "on_success", "on_fail",
                     "outcome=success", "outcome!=fail && context.lang=python", "context.x=", "x", "900s",
                     "exit_code_zero", "output_contains:ok", "* { llm_model: m; }", "$goal"]),
    st.text(max_size=12))
KEYS = st.sampled_from(["shape", "type", "prompt", "label", "verify", "max_retries", "allow_partial", "goal_gate",
                        "retry_target", "weight", "condition", "fidelity", "class", "timeout", "start",
                        "model_stylesheet", "triggers", "trigger_threshold", "default_max_retry", "x.y"])


def _attrs(draw) -> str:
    pairs = draw(st.lists(st.tuples(KEYS, VALUES), max_size=4))
    if not pairs:
        return ""
    return " [" + ", ".join(f'{k}={json.dumps(v, ensure_ascii=False)}' for k, v in pairs) + "]"


@st.composite
def dot_files(draw) -> str:
    """DOT text from the grammar: graph attributes, node and edge statements, chains, nested subgraphs."""
    def statements(depth: int) -> list[str]:
        out = []
        for _ in range(draw(st.integers(0, 6))):
            kind = draw(st.sampled_from(["node", "edge", "chain", "graph", "defaults", "subgraph"]))
            if kind == "node":
                out.append(draw(IDS) + _attrs(draw))
            elif kind == "edge":
                out.append(f"{draw(IDS)} -> {draw(IDS)}" + _attrs(draw))
            elif kind == "chain":
                out.append(" -> ".join(draw(st.lists(IDS, min_size=2, max_size=5))) + _attrs(draw))
            elif kind == "graph":
                out.append("graph" + (_attrs(draw) or " []"))
            elif kind == "defaults":
                out.append(draw(st.sampled_from(["node", "edge"])) + (_attrs(draw) or " []"))
            elif depth < 3:
                out.append("subgraph { " + " ".join(statements(depth + 1)) + " }")
        return out

    name = draw(st.sampled_from(["fuzz", "bugfix_workflow", "git_merge_pr", ""]))
    return f"digraph {name} {{ " + "; ".join(statements(0)) + " }"


@BOUNDARY
@given(dot=dot_files())
def test_a_generated_dot_file_disables_at_most_itself(dot):
    working = loads_agree_and_good_plans_work(dot=dot)
    assert set(GOOD) <= working


@BOUNDARY
@given(dot=dot_files(), cuts=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 12),
                                                st.text(max_size=6)), min_size=1, max_size=4))
def test_a_mutated_dot_file_disables_at_most_itself(dot, cuts):
    for at, drop, insert in cuts:
        at %= len(dot) + 1
        dot = dot[:at] + insert + dot[at + drop:]
    working = loads_agree_and_good_plans_work(dot=dot)
    assert set(GOOD) <= working


# ── mutated JSON plans ──────────────────────────────────────────────────────

ODD = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "9" * 4400, "18446744073709551616", "-0",
                       '"\\ud800"', '"\\udfff x"', "[" * 200 + "]" * 200, "[" * 1500 + "]" * 1500,
                       '{"a": {"a": {"a": {}}}}', "null", "true", "[]", "{}", '""', "1.5", "-7"])


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                    max_size=3), max_leaves=8)
REPLACEMENTS = st.one_of(ODD, JSON_VALUES.map(json.dumps))


def _paths(value, path=()):
    """Every place inside a JSON value, as a key path."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, path + (i,))


MARK = "\u0000MUTATED\u0000"


def _set(value, path, new):
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _set(value[path[0]], path[1:], new)
    return copy


@BOUNDARY
@given(victim=st.sampled_from(sorted(SHIPPED)), schema=st.booleans(), data=st.data())
def test_a_mutated_json_plan_disables_at_most_itself(victim, schema, data):
    """With jsonschema and without it (then the compiler's own type checks are the guard)."""
    plan = SHIPPED[victim]
    places = list(_paths(plan))
    mutated = plan
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(places))
        mutated = _set(mutated, where, MARK)
        places = list(_paths(mutated))
    others = {pid: p for pid, p in GOOD.items() if pid != victim}
    text = json.dumps({"plans": {**others, victim: mutated}}).replace(json.dumps(MARK), data.draw(REPLACEMENTS))
    with patch.object(library, "jsonschema_available", lambda: schema):
        working = loads_agree_and_good_plans_work(text=text)
    assert set(others) <= working


# ── JSON graph plans from the schema's vocabulary ───────────────────────────

NODE_IDS = st.sampled_from(["s", "a", "b", "c", "d", "end", "esc", "__proto__", "null"])
NODE_FIELDS = {
    "type": st.sampled_from(["start", "task", "decision", "escalate", "exit", "checkpoint", "human", "parallel",
                             "fan_in", "bogus"]),
    "action": st.text(max_size=10), "tool": st.sampled_from(["", "code_execution_tool", "response"]),
    "max_retries": st.one_of(st.integers(-2, 4), st.just(10**30)), "allow_partial": st.booleans(),
    "continue_on_fail": st.booleans(), "goal_gate": st.booleans(), "retry_target": NODE_IDS,
    "pace_level": st.sampled_from(["primary", "alternate", "contingent", "emergency", "x"]),
    "reason": st.text(max_size=10),
    "verify": st.fixed_dictionaries({"type": st.sampled_from(["output_contains", "output_matches", "any_output",
                                                              "exit_code_zero", "file_exists", "manual", "nope"])},
                                    optional={"value": st.sampled_from(["ok", "(a+)+$", "[", "^x", ""]),
                                              "fail_if": st.sampled_from(["FAIL", "(", ".*=.*x"])}),
}
CONDITIONS = st.sampled_from(["on_success", "on_fail", "on_retry", "on_exhaust", "always", "outcome=success",
                              "outcome=partial_success", "outcome!=fail && context.lang=python",
                              "context.lang!=python", "preferred_label=Yes", "outcome==x", "", "&&"])


@st.composite
def graph_plans(draw) -> dict:
    """Graph plans made of the schema's fields and values (and a few wrong ones): any shape of graph."""
    ids = draw(st.lists(NODE_IDS, min_size=1, max_size=7, unique=True))
    nodes = {nid: draw(st.fixed_dictionaries({}, optional=NODE_FIELDS)) for nid in ids}
    edges = [draw(st.fixed_dictionaries({"from": st.sampled_from(ids), "to": st.sampled_from(ids + ["ghost"])},
                                        optional={"condition": CONDITIONS, "label": st.sampled_from(["Yes", "[N] No"]),
                                                  "weight": st.one_of(st.integers(-3, 3), st.floats(),
                                                                      st.just(10**40))}))
             for _ in range(draw(st.integers(0, 12)))]
    return {"name": "Generated", "triggers": draw(st.lists(st.sampled_from(["run it", "fix the bug", "x"]),
                                                           max_size=2)),
            "trigger_threshold": draw(st.integers(0, 3)),
            "graph": {"start": draw(st.sampled_from(ids + ["missing"])), "nodes": nodes, "edges": edges}}


@BOUNDARY
@given(plan=graph_plans())
def test_a_generated_json_plan_disables_at_most_itself(plan):
    text = json.dumps({"plans": {**GOOD, "generated": plan}})
    working = loads_agree_and_good_plans_work(text=text)
    assert set(GOOD) <= working
