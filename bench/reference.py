"""The reference workloads every budget of ``bench/run.py`` is a ratio to, measured in the same run (and, for
the fresh-process rows, in the same process): the machine's speed at the time, so that a busy machine moves
both sides of a budget.  Imports nothing of the engine (the fresh-process rows time the engine's import)."""

from __future__ import annotations

import json
import re
import statistics
import time

PATTERN = re.compile(r"\b(\d+) passed\b")
TEXT = "collected 12 items\n" + "test_calc.py ........ \n" * 8 + "12 passed in 0.05s\n"


def _work() -> int:
    d = {f"k{i}": i for i in range(40)}
    return sum(d.values()) + len(f"{d['k1']}:{d['k2']}") + (PATTERN.search(TEXT) is not None)


def calibration_samples(reps: int) -> list[float]:
    """Microseconds of each of ``reps`` runs of a fixed pure-Python workload (dict building, formatting, a
    regex search): about what the linear selector this pack replaces costs per pass."""
    times = []
    for _ in range(reps):
        t = time.perf_counter_ns()
        _work()
        times.append((time.perf_counter_ns() - t) / 1000)
    return times


def calibration_us(reps: int = 2000) -> float:
    """The calibration workload's median microseconds."""
    return statistics.median(calibration_samples(reps))


def json_parse_ms(path: str, reps: int = 5) -> float:
    """The standard library's json.loads of a file's text: the CPU time of the thread, fastest of ``reps``
    (milliseconds)."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    best = float("inf")
    for _ in range(reps):
        t = time.thread_time()
        json.loads(text)
        best = min(best, time.thread_time() - t)
    return best * 1000
