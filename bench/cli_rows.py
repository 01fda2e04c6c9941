"""The rows of the command line a plan author runs: ``graph-engine --version``, ``--help``, ``triggers --explain``
and ``validate`` of the shipped library with one plan added, each the CPU time (user + system) of a fresh
process, the fastest of a few; the calibration workload is measured between them, in the same run.
``bench/run.py --cli`` measures these rows alone and puts them into bench/results.json."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from reference import calibration_us

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "plan_library" / "htn_plan_library.json"
EXPLAINED = "fix the failing test in parser"
COMMANDS = {"version": ["--version"], "help": ["--help"], "explain": ["triggers", "--explain", EXPLAINED],
            "validate": ["validate", "{library}"]}


def added_plan() -> dict[str, Any]:
    """A plan an author adds beside the shipped ones: the bug-fix graph, its own name, phrases and examples."""
    plan = json.loads(LIBRARY.read_text())["plans"]["bugfix_workflow"]
    plan.update(name="Docs Fix", description="Fix a typo or a wrong sentence in the project documentation",
                triggers=["fix the docs typo"], domains=["docs"], not_examples=["what is a typo?"],
                examples=["the README says install with pip3 but it should be pip, fix that",
                          "correct the spelling mistakes in docs/usage.md"])
    plan.pop("strong_triggers", None)
    return plan


def cpu_ms(argv: list[str]) -> float:
    """The CPU time of one fresh ``graph-engine ARGV`` process (children's rusage, user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "graph_engine.tools", *argv], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(ROOT / "extensions")))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000


def cli_cpu_ms(runs: int = 5) -> dict[str, float]:
    """Per command, the fastest of ``runs`` fresh processes (milliseconds of CPU), the commands in turns; the
    calibration's median beside them."""
    with tempfile.TemporaryDirectory() as tmp:
        doc = json.loads(LIBRARY.read_text())
        doc["plans"]["docs_fix"] = added_plan()
        library = Path(tmp) / "htn_plan_library.json"
        library.write_text(json.dumps(doc, indent=2))
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        calibration = [calibration_us()]
        for _ in range(runs):
            for name, argv in COMMANDS.items():
                times[name].append(cpu_ms([a.replace("{library}", str(library)) for a in argv]))
            calibration.append(calibration_us())
    out = {f"{name}_cpu_ms": round(min(found), 1) for name, found in times.items()}
    out["calibration_us"] = round(statistics.median(calibration), 2)
    return out
