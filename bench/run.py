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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "extensions"))
sys.path.insert(0, str(ROOT / "bench"))

# the rows, each group a module beside this one; the table's names are this module's too (the tests read them)
from budgets import TARGETS, rows, ratios, readme_table, write_readme  # noqa: E402,F401
from chat_driver import CHAT, Driver, interleaved, per_pass  # noqa: E402
from graph_engine.host import adapter  # noqa: E402
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
    quick = "--quick" in sys.argv
    n = 2000 if quick else 20000
    calibration = [calibration_us()]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["A0_ROOT"] = tmp  # audit logs go to a throwaway tree
        os.environ.pop("GRAPH_ENGINE_LIBRARY", None)
        picture = os.environ.get("GRAPH_ENGINE_PICTURE")
        os.environ["GRAPH_ENGINE_PICTURE"] = "off"  # per pass: a run's last pass draws no picture (own row)
        adapter._runtimes.clear()
        starts: list[float] = []
        main_driver = Driver(2000)
        main_times = sorted(per_pass(2000, n, starts=starts, driver=main_driver))
        while (getattr(main_driver.agent, "_htn_state", None) or {}).get("status") != "active":
            asyncio.run(main_driver.one_pass())
        parts = judged_pass_parts_us(main_driver)
        inside = in_pass_costs(n // 8)
        no_result, no_result_calibration = no_result_pass_us(n // 4)
        new_message, new_message_calibration = new_message_pass_us(n // 4)
        meaning_message, _ = new_message_pass_us(n // 4, CHAT)
        idle, idle_calibration = idle_pass_us(n // 4)
        by_history = interleaved({str(h): Driver(h) for h in (100, 1000, 10000)}, n // 4)
        by_nodes = per_pass_by_nodes((10, 500, 5000), n // 4)
        by_result = per_pass_by_result_size(n // 40)
        profile = profile_summary(n // 10)
        side = side_by_side(n // 4)
        calibration.append(calibration_us())
        if picture is None:
            os.environ.pop("GRAPH_ENGINE_PICTURE")
        else:
            os.environ["GRAPH_ENGINE_PICTURE"] = picture
        pictures = picture_ms()
        ending = ending_pass_us(n // 40)
        cold_pass = cold_pass_us(n // 40)
        look = library_look_us()
        cold = library_load_ms()
        schema = schema_ms()
        libraries = library_rows()
        big = full_check_1000_ms()
        state_bytes = state_bytes_after(10_000)
        dot_ms, dot_cpu_ms = dot_parse_ms()
    calibration.append(calibration_us())
    median = statistics.median(main_times)
    p99 = main_times[int(len(main_times) * 0.99) - 1]
    results = {
        "per_pass_us": {"median": round(median, 2), "p99": round(p99, 2), "passes": len(main_times)},
        "judged_pass_parts_us": parts,
        "in_pass_costs_us": inside,
        "per_pass_no_result_us": round(no_result, 2),
        "new_message_pass_us": round(new_message, 2),
        "meaning_message_pass_us": round(meaning_message, 2),
        "match_10_ms": [round(v, 4) for v in shipped_match_ms()],
        "calibration_beside_us": {"no_result": round(no_result_calibration, 2),
                                  "new_message": round(new_message_calibration, 2),
                                  "idle": round(idle_calibration, 2)},
        "activation_pass_us": {"median": round(statistics.median(starts), 2), "passes": len(starts)},
        "idle_pass_us": {"median": round(idle, 2)},
        "per_pass_us_by_history": {k: round(v, 2) for k, v in by_history.items()},
        "per_pass_us_by_nodes": {k: round(v, 2) for k, v in by_nodes.items()},
        "per_pass_us_by_result": {k: round(v, 2) for k, v in by_result.items()},
        "library_load_ms": round(cold["load_ms"], 2),
        "library_load_cpu_ms": round(cold["load_cpu_ms"], 2),
        "library_load_calibration_us": round(cold["calibration_us"], 2),
        "engine_import_ms": round(cold["import_ms"], 2),
        "schema_ms": schema,
        "library_1000_plans_load_ms": round(big, 1),
        "library_1000": libraries["1000"],
        "library_10000": libraries["10000"],
        "langgraph": side,
        "ending_pass_us": {k: round(v, 2) for k, v in ending.items()},
        "cold_pass_us": round(cold_pass, 2),
        "library_look_us": round(look, 2),
        "picture_ms": pictures,
        "dot_parse_200_nodes_ms": round(dot_ms, 2),
        "dot_parse_200_nodes_cpu_ms": round(dot_cpu_ms, 2),
        "state_bytes_after_10000_passes": state_bytes,
        "calibration_us": round(statistics.median(calibration), 2),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                    "date": time.strftime("%Y-%m-%d")},
    }
    results["ratios"] = {k: round(v, 3) for k, v in ratios(results).items()}
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
