"""The budgets of ``make bench``, each a ratio to a figure of the same run, and the table of a results dict:
printed by ``bench/run.py`` and written into docs/performance.md."""

from __future__ import annotations

import statistics
from typing import Callable

import tables
from chat_driver import ROOT

# Budgets.  Every budget is a ratio to a workload measured in the same run, so that a slow or a busy machine
# moves both sides (this machine's speed varies up to 3x between runs): the calibration row (a fixed
# pure-Python workload), the machine's own JSON parse of the same library file, or LangGraph driving the same
# graph.  The absolute figures stay in the table as figures.
TARGETS = {
    "judged_per_langgraph": 0.1,  # a judged pass <= 1/10 of LangGraph's in-memory pass on the same graph
    "no_result_per_calibration": 4.0,  # a pass with an active run and no new result <= 4x the calibration row
    "new_message_per_calibration": 3.0,  # a new message that starts nothing <= 3x the calibration workload (its
    # request text, control form and language read: 1.5x before the language was read for the utility model)
    "idle_per_calibration": 0.75,  # a pass with no run and no new message <= 0.75x the calibration workload
    "flatness": 1.25,  # slowest / fastest over history length, and over plan size
    "library_load_per_calibration": 5000.0,  # the shipped library, fresh process (50 ms at 10 µs)
    "library_1000_first_match_per_json": 5.0,  # a 1,000-plan library: load to the first pass that can match,
    "library_1000_reload_per_json": 1.0,  # ... reload after one plan changed: to json.loads of the same file
    "meaning_message_per_judged": 2.0,  # a new message the meaning matcher scores and that asks for nothing
    # costs at most two judged passes (every plan scored by its learned class and by its own text)
    "match_10_per_calibration": 100.0,  # matching a new message against the shipped library (10 plans), by
    # words and meaning (1 ms at 10 µs)
    "match_1000_per_calibration": 2000.0,  # ... against 1,000 plans (20 ms at 10 µs: the 24 nearest plans scored
    # in full by their own text, so that any plan, taught or not, can start)
    "match_10000_per_calibration": 10000.0,  # ... against 10,000 (100 ms at 10 µs; paid once, for a new message)
    "dot_parse_200_nodes_per_calibration": 2000.0,  # (20 ms at 10 µs)
    "cli_version_per_calibration": 10_000.0,  # `graph-engine --version`, a fresh process, in CPU time (0.1 s at
    # 10 µs): nothing but the command line imported
    "cli_help_per_calibration": 10_000.0,  # `graph-engine --help` (0.1 s at 10 µs)
    "cli_explain_per_calibration": 50_000.0,  # `graph-engine triggers --explain MESSAGE` (0.5 s at 10 µs)
    "cli_validate_per_calibration": 300_000.0,  # `graph-engine validate` of the shipped library with one plan
    # added (3 s at 10 µs): every example of every plan routed
    "big_result_per_1mb": 1.25,  # a judged pass whose tool result is 100 MB, or nested 100,000 deep, <= 1.25x one
    # whose result is 1 MB
}


README = ROOT / "docs" / "performance.md"
README_START, README_END = "<!-- bench:start -->", "<!-- bench:end -->"


def _flat(d: dict[str, float]) -> float:
    return max(d.values()) / min(d.values())


def ratios(r: dict) -> dict[str, float]:
    """Each timed budget's ratio, from figures of the same run (the fresh-process rows: of the same
    processes).  A budget whose reference was not measured (LangGraph not installed) has no ratio."""
    calibration, small, large = r["calibration_us"], r["library_1000"], r["library_10000"]
    beside = r["calibration_beside_us"]
    out = {
        "no_result_per_calibration": r["per_pass_no_result_us"] / beside["no_result"],
        "new_message_per_calibration": r["new_message_pass_us"] / beside["new_message"],
        "idle_per_calibration": r["idle_pass_us"]["median"] / beside["idle"],
        "library_load_per_calibration": r["library_load_cpu_ms"] * 1000 / r["library_load_calibration_us"],
        "library_1000_first_match_per_json": small["first_match_cpu_ms"] / small["json_parse_ms"],
        "library_1000_reload_per_json": small["reload_cpu_ms"] / small["json_parse_ms"],
        "meaning_message_per_judged": r["meaning_message_pass_us"] / r["per_pass_us"]["median"],
        "match_10_per_calibration": max(r["match_10_ms"]) * 1000 / calibration,
        "match_1000_per_calibration": small["match_max_ms"] * 1000 / small["calibration_us"],
        "match_10000_per_calibration": large["match_max_ms"] * 1000 / large["calibration_us"],
        "dot_parse_200_nodes_per_calibration": r["dot_parse_200_nodes_cpu_ms"] * 1000 / calibration,
        "big_result_per_1mb": max(r["per_pass_us_by_result"].values()) / r["per_pass_us_by_result"]["1 MB"],
        **{f"cli_{name}_per_calibration": r["cli"][f"{name}_cpu_ms"] * 1000 / r["cli"]["calibration_us"]
           for name in ("version", "help", "explain", "validate")},
    }
    side = r["langgraph"]
    if side.get("installed"):
        out["judged_per_langgraph"] = side["graph_engine_us"] / side["langgraph_memory_us"]
    return out


Row = tuple[str, str, str, bool | None]


def rows(r: dict) -> list[Row]:
    """(measure, figure, budget, met: None for a figure that is only reported) for a results dict: the
    printed table and the README's."""
    ratio = ratios(r)

    def budget(key: str, what: str) -> tuple[str, bool]:
        return f"<= {TARGETS[key]:g}x {what} ({ratio[key]:.3g}x)", ratio[key] <= TARGETS[key]

    return pass_table_rows(r, budget) + library_table_rows(r, budget)[:-1] + cli_table_rows(r, budget) + \
        library_table_rows(r, budget)[-1:]  # the calibration row last


def _us(v: float) -> str:
    return f"{v:.1f} µs"


def _ms(v: float) -> str:
    return f"{v:.1f} ms" if v < 100 else f"{v:,.0f} ms"


def langgraph_table_rows(side: dict, budget: Callable[[str, str], tuple[str, bool]]) -> list[Row]:
    """LangGraph's pass and the judged pass beside it; one row that says it is not installed."""
    if side.get("installed"):
        return [
            (f"LangGraph {side['version']}, the same bug-fix graph and replay: pass, in-memory saver / SQLite",
             f"{side['langgraph_memory_us']:,.0f} / {side['langgraph_sqlite_us']:,.0f} µs", "reported", None),
            ("judged pass beside it (alternating batches), without / with the card's log update",
             f"{side['graph_engine_us']:.1f} / {side['graph_engine_card_us']:.1f} µs",
             *budget("judged_per_langgraph", "LangGraph's in-memory pass, without"))]
    return [("LangGraph, the same bug-fix graph and replay (`pip install -e '.[bench]'`)",
             "not installed", "judged pass <= 0.1x its in-memory pass", None)]


def pass_table_rows(r: dict, budget: Callable[[str, str], tuple[str, bool]]) -> list[Row]:
    """The table's rows of passes: the judged pass, its parts, each other kind of pass, the flatness rows."""
    us = _us
    hist, nodes = r["per_pass_us_by_history"], r["per_pass_us_by_nodes"]
    parts, inside = r["judged_pass_parts_us"], r["in_pass_costs_us"]
    langgraph = langgraph_table_rows(r["langgraph"], budget)
    return [
        ("judged pass (active run, new tool result, both hooks): median / p99",
         f"{r['per_pass_us']['median']:.0f} / {r['per_pass_us']['p99']:.0f} µs", "reported", None),
        *langgraph,
        ("  its parts alone: " + ", ".join(parts), " / ".join(f"{v:.1f}" for v in parts.values())
         + f" µs (sum {sum(parts.values()):.1f})", "reported", None),
        ("  inside the pass, switched off one at a time: " + ", ".join(inside),
         " / ".join(f"{v:.1f}" for v in inside.values()) + " µs", "reported", None),
        ("pass with an active run and no new result", us(r["per_pass_no_result_us"]),
         *budget("no_result_per_calibration", "the calibration row")),
        ("a new user message that starts nothing (both hooks)", us(r["new_message_pass_us"]),
         *budget("new_message_per_calibration", "the calibration row")),
        ("a new message that asks for nothing, scored by meaning first (both hooks)",
         us(r["meaning_message_pass_us"]), *budget("meaning_message_per_judged", "the judged pass")),
        ("pass with no run and no new message (most passes of a chat)", us(r["idle_pass_us"]["median"]),
         *budget("idle_per_calibration", "the calibration row")),
        ("a pass that starts a run (matching + activation)", f"{r['activation_pass_us']['median']:.0f} µs",
         "reported", None),
        ("judged pass after 20 ms of other work, caches cold and the library looked at, as in the real loop",
         us(r["cold_pass_us"]), "reported", None),
        ("  the library file looked at for changes (every pass of the real loop; here once a second)",
         us(r["library_look_us"]), "reported", None),
        ("the pass that ends a run (its picture drawn off the loop) / a middle pass of the same runs",
         f"{r['ending_pass_us']['median']:.0f} / {r['ending_pass_us']['middle']:.0f} µs", "reported", None),
        ("judged pass by history length 100 / 1,000 / 10,000 messages",
         " / ".join(f"{v:.0f}" for v in hist.values()) + " µs",
         f"slowest <= {TARGETS['flatness']}x fastest ({_flat(hist):.2f}x)", _flat(hist) <= TARGETS["flatness"]),
        ("judged pass by plan size 10 / 500 / 5,000 nodes", " / ".join(f"{v:.0f}" for v in nodes.values()) + " µs",
         f"slowest <= {TARGETS['flatness']}x fastest ({_flat(nodes):.2f}x)", _flat(nodes) <= TARGETS["flatness"]),
        ("judged pass by tool result: " + " / ".join(r["per_pass_us_by_result"]),
         " / ".join(f"{v:,.0f}" for v in r["per_pass_us_by_result"].values()) + " µs",
         *budget("big_result_per_1mb", "the 1 MB pass")),
    ]


def library_table_rows(r: dict, budget: Callable[[str, str], tuple[str, bool]]) -> list[Row]:
    """The table's rows of the library, matching, the picture, the DOT parser, the state and the calibration."""
    us, ms = _us, _ms
    small, large = r["library_1000"], r["library_10000"]
    pictures = " / ".join(f"{k} {v:.2f} ms" for k, v in r["picture_ms"].items())
    return [
        ("shipped library: load + schema + lint (fresh process, after import)", ms(r["library_load_ms"]),
         *budget("library_load_per_calibration", "that process's calibration, in CPU time")),
        ("engine import in a fresh process", ms(r["engine_import_ms"]), "reported", None),
        ("jsonschema: its import (part of the engine's) / both validators built (once per schema file)",
         f"{r['schema_ms']['import_ms']:.1f} / {r['schema_ms']['validators_ms']:.1f} ms", "reported", None),
        ("schema check of the shipped library's 10 plans (jsonschema)", ms(r["schema_ms"]["check_shipped_ms"]),
         "reported", None),
        ("1,000 plans: load to the first matched message (fresh process)", ms(small["first_match_ms"]),
         *budget("library_1000_first_match_per_json", "json.loads of the file, in CPU time")),
        ("1,000 plans: reload after one plan changed (that plan checked again; off the passes, in a thread)", ms(small["reload_ms"]),
         *budget("library_1000_reload_per_json", "json.loads of the file, in CPU time")),
        ("1,000 plans: json.loads of the library file (7 MB), CPU time, fastest of 5", ms(small["json_parse_ms"]),
         "reported", None),
        ("10 plans (shipped): match a new message by words and meaning, median / slowest of 10 messages",
         f"{statistics.median(r['match_10_ms']):.3f} / {max(r['match_10_ms']):.3f} ms",
         *budget("match_10_per_calibration", "the calibration row")),
        ("1,000 plans: match a new message by words and meaning, median / slowest of 20 messages",
         f"{small['match_ms']:.3f} / {small['match_max_ms']:.3f} ms",
         *budget("match_1000_per_calibration", "that process's calibration")),
        ("10,000 plans: match a new message by words and meaning, median / slowest of 20 messages",
         f"{large['match_ms']:.3f} / {large['match_max_ms']:.3f} ms",
         *budget("match_10000_per_calibration", "that process's calibration")),
        ("10,000 plans: load to the first matched message (fresh process)", ms(large["first_match_ms"]),
         "reported", None),
        ("meaning index built (model loaded, plans embedded): 1,000 / 10,000 plans, fresh process",
         f"{small['meaning_index_ms']:,.0f} / {large['meaning_index_ms']:,.0f} ms", "reported", None),
        ("1,000 plans: every plan checked (the background thread after a load)", ms(small["settled_ms"]),
         "reported", None),
        ("1,000 plans: every plan checked up front (validate)", ms(r["library_1000_plans_load_ms"]),
         "reported", None),
        ("picture of a finished bug-fix run", pictures, "reported", None),
        ("DOT parse, 200 nodes / 250 edges (label and prompt per node)", ms(r["dot_parse_200_nodes_ms"]),
         *budget("dot_parse_200_nodes_per_calibration", "the calibration row, in CPU time")),
        ("state size after 10,000 passes of a looping plan", f"{r['state_bytes_after_10000_passes']:,} bytes",
         "bounded (< 64 kB)", r["state_bytes_after_10000_passes"] < 64_000),
        ("calibration: a fixed pure-Python workload (the machine's speed)", us(r["calibration_us"]),
         "reported", None),
    ]


def cli_table_rows(r: dict, budget: Callable[[str, str], tuple[str, bool]]) -> list[Row]:
    """The command line's rows (``cli_rows``): each command's CPU time in a fresh process."""
    cli, what = r["cli"], "the calibration row beside it, in CPU time"
    return [
        ("graph-engine --version (fresh process, CPU time)", _ms(cli["version_cpu_ms"]),
         *budget("cli_version_per_calibration", what)),
        ("graph-engine --help (fresh process, CPU time)", _ms(cli["help_cpu_ms"]),
         *budget("cli_help_per_calibration", what)),
        ("graph-engine triggers --explain MESSAGE, shipped library (fresh process, CPU time)",
         _ms(cli["explain_cpu_ms"]), *budget("cli_explain_per_calibration", what)),
        ("graph-engine validate, the shipped library with one plan added (fresh process, CPU time)",
         _ms(cli["validate_cpu_ms"]), *budget("cli_validate_per_calibration", what)),
    ]


def readme_table(r: dict) -> str:
    """The README's figures, made from bench/results.json alone (a test checks the README shows them)."""
    m = r["machine"]
    return tables.markdown(README_START, README_END, f"Figures of `make bench` on {m['date']}: Python {m['python']}, "
                           f"{m['cpus']} CPUs, {r['per_pass_us']['passes']:,} measured passes.", rows(r))


def write_readme(r: dict) -> None:
    tables.replace_between(README, README_START, README_END, readme_table(r))

