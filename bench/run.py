"""Benchmarks: `make bench` prints a table and writes bench/results.json.

Everything is measured the way Agent-Zero runs the engine: both extension files loaded by path, their
``execute`` awaited inside one event loop, pass after pass, with the loop data shapes of the real captures.
Timings are wall-clock (time.perf_counter_ns) of the two hook calls of each pass, nothing else.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "extensions"))
sys.path.insert(0, str(ROOT / "bench"))

# the rows, each group a module beside this one; the table's names are this module's too (the tests read them)
from budgets import TARGETS, rows, ratios, readme_table, write_readme  # noqa: E402,F401
from chat_driver import CHAT, Driver, interleaved, per_pass  # noqa: E402
from cli_rows import cli_cpu_ms  # noqa: E402
from graph_engine.hosts.agent_zero import adapter  # noqa: E402
from library_rows import (  # noqa: E402
    dot_parse_ms, full_check_1000_ms, library_load_ms, library_probe, library_rows, picture_ms, schema_ms,
    shipped_match_ms)
from pass_costs import in_pass_costs, judged_pass_parts_us, profile_summary, side_by_side  # noqa: E402
from pass_rows import (  # noqa: E402
    cold_pass_us, ending_pass_us, idle_pass_us, library_look_us, new_message_pass_us, no_result_pass_us,
    per_pass_by_nodes, per_pass_by_result_size, state_bytes_after)
from reference import calibration_us  # noqa: E402


def main() -> int:
    if sys.argv[1:2] == ["--library-probe"]:
        sys.path.insert(0, str(ROOT / "extensions"))
        print(json.dumps(library_probe(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "settle")))
        return 0
    if sys.argv[1:2] == ["--cli"]:
        return cli_only()
    quick = "--quick" in sys.argv
    n = 2000 if quick else 20000
    calibration = [calibration_us()]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["A0_ROOT"] = tmp  # audit logs go to a throwaway tree
        os.environ.pop("GRAPH_ENGINE_LIBRARY", None)
        picture = os.environ.get("GRAPH_ENGINE_PICTURE")
        os.environ["GRAPH_ENGINE_PICTURE"] = "off"  # per pass: a run's last pass draws no picture (own row)
        adapter._runtimes.clear()
        m = pass_figures(n)
        calibration.append(calibration_us())
        if picture is None:
            os.environ.pop("GRAPH_ENGINE_PICTURE")
        else:
            os.environ["GRAPH_ENGINE_PICTURE"] = picture
        m.update(other_figures(n))
    calibration.append(calibration_us())
    results = results_of(m, calibration)
    results["ratios"] = {k: round(v, 3) for k, v in ratios(results).items()}
    return report(results, m["profile"], quick)


def pass_figures(n: int) -> dict[str, Any]:
    """The rows of passes, ``n`` judged passes for the main row (fewer for the others), pictures off."""
    m: dict[str, Any] = {"starts": []}
    main_driver = Driver(2000)
    m["main_times"] = sorted(per_pass(2000, n, starts=m["starts"], driver=main_driver))
    while (getattr(main_driver.agent, "_htn_state", None) or {}).get("status") != "active":
        asyncio.run(main_driver.one_pass())
    m["parts"] = judged_pass_parts_us(main_driver)
    m["inside"] = in_pass_costs(n // 8)
    m["no_result"], m["no_result_calibration"] = no_result_pass_us(n // 4)
    m["new_message"], m["new_message_calibration"] = new_message_pass_us(n // 4)
    m["meaning_message"], _ = new_message_pass_us(n // 4, CHAT)
    m["idle"], m["idle_calibration"] = idle_pass_us(n // 4)
    m["by_history"] = interleaved({str(h): Driver(h) for h in (100, 1000, 10000)}, n // 4)
    m["by_nodes"] = per_pass_by_nodes((10, 500, 5000), n // 4)
    m["by_result"] = per_pass_by_result_size(n // 40)
    m["profile"] = profile_summary(n // 10)
    m["side"] = side_by_side(n // 4)
    return m


def other_figures(n: int) -> dict[str, Any]:
    """The rows after the passes: pictures (as the user set them), the ending and cold passes, the library's."""
    m: dict[str, Any] = {}
    m["pictures"] = picture_ms()
    m["ending"] = ending_pass_us(n // 40)
    m["cold_pass"] = cold_pass_us(n // 40)
    m["look"] = library_look_us()
    m["cold"] = library_load_ms()
    m["schema"] = schema_ms()
    m["libraries"] = library_rows()
    m["big"] = full_check_1000_ms()
    m["state_bytes"] = state_bytes_after(10_000)
    m["dot_ms"], m["dot_cpu_ms"] = dot_parse_ms()
    m["cli"] = cli_cpu_ms()
    return m


def cli_only() -> int:
    """``bench/run.py --cli``: the command line's rows alone (a minute, not the half hour of the rest), put into
    bench/results.json beside the other figures (each row's budget is a ratio to the calibration measured beside
    it) and into docs/performance.md's table."""
    path = ROOT / "bench" / "results.json"
    results = json.loads(path.read_text())
    results["cli"] = cli_cpu_ms()
    results["ratios"] = {k: round(v, 3) for k, v in ratios(results).items()}
    table = rows(results)
    for name, figure, target, ok in table:
        if name.startswith("graph-engine"):
            print(f"{name[:90]:<90} {figure:>12}  {target:<44} {'-' if ok is None else 'PASS' if ok else 'FAIL'}")
    results["targets_met"] = all(ok is not False for *_, ok in table)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    write_readme(results)
    print(f"written: {path.relative_to(ROOT)} and docs/performance.md")
    return 0 if results["targets_met"] else 1


def results_of(m: dict[str, Any], calibration: list[float]) -> dict[str, Any]:
    """bench/results.json's figures (without the ratios) from the measured ``m``."""
    main_times, starts, cold = m["main_times"], m["starts"], m["cold"]
    median = statistics.median(main_times)
    p99 = main_times[int(len(main_times) * 0.99) - 1]
    return {
        "per_pass_us": {"median": round(median, 2), "p99": round(p99, 2), "passes": len(main_times)},
        "judged_pass_parts_us": m["parts"],
        "in_pass_costs_us": m["inside"],
        "per_pass_no_result_us": round(m["no_result"], 2),
        "new_message_pass_us": round(m["new_message"], 2),
        "meaning_message_pass_us": round(m["meaning_message"], 2),
        "match_10_ms": [round(v, 4) for v in shipped_match_ms()],
        "calibration_beside_us": {"no_result": round(m["no_result_calibration"], 2),
                                  "new_message": round(m["new_message_calibration"], 2),
                                  "idle": round(m["idle_calibration"], 2)},
        "activation_pass_us": {"median": round(statistics.median(starts), 2), "passes": len(starts)},
        "idle_pass_us": {"median": round(m["idle"], 2)},
        "per_pass_us_by_history": {k: round(v, 2) for k, v in m["by_history"].items()},
        "per_pass_us_by_nodes": {k: round(v, 2) for k, v in m["by_nodes"].items()},
        "per_pass_us_by_result": {k: round(v, 2) for k, v in m["by_result"].items()},
        "library_load_ms": round(cold["load_ms"], 2),
        "library_load_cpu_ms": round(cold["load_cpu_ms"], 2),
        "library_load_calibration_us": round(cold["calibration_us"], 2),
        "engine_import_ms": round(cold["import_ms"], 2),
        "schema_ms": m["schema"],
        "library_1000_plans_load_ms": round(m["big"], 1),
        "library_1000": m["libraries"]["1000"],
        "library_10000": m["libraries"]["10000"],
        "langgraph": m["side"],
        "ending_pass_us": {k: round(v, 2) for k, v in m["ending"].items()},
        "cold_pass_us": round(m["cold_pass"], 2),
        "library_look_us": round(m["look"], 2),
        "picture_ms": m["pictures"],
        "dot_parse_200_nodes_ms": round(m["dot_ms"], 2),
        "dot_parse_200_nodes_cpu_ms": round(m["dot_cpu_ms"], 2),
        "state_bytes_after_10000_passes": m["state_bytes"],
        "cli": m["cli"],
        "calibration_us": round(statistics.median(calibration), 2),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                    "date": time.strftime("%Y-%m-%d")},
    }


def report(results: dict[str, Any], profile: str, quick: bool) -> int:
    """Print the table and the profile, write the results (and, unless ``quick``, the docs' table)."""
    table = rows(results)
    print(f"{'measure':<72} {'figure':>30}  {'budget':<44} met")
    for name, figure, target, ok in table:
        print(f"{name[:72]:<72} {figure:>30}  {target:<44} {'-' if ok is None else 'PASS' if ok else 'FAIL'}")
    print()
    print(profile)
    results["targets_met"] = all(ok is not False for *_, ok in table)
    out = ROOT / "bench" / ("results.local.json" if quick else "results.json")
    out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"\nwritten: {out.relative_to(ROOT)}")
    if not quick:
        write_readme(results)
        print("docs/performance.md: figures updated")
    print("all budgets met" if results["targets_met"] else "a budget is not met: see FAIL above")
    return 0 if results["targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
