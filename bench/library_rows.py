"""The rows of the plan library: its load in a fresh process, the schema, matching a new message against 10,
1,000 and 10,000 plans (each large library probed in fresh processes of ``bench/run.py --library-probe``), a
reload; and of the authoring side: the picture of a finished run, the DOT parser."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from chat_driver import NOTHING, ROOT, median_us
from graph_engine.authoring.library import build_library
from graph_engine.tools import standin as a0
from reference import calibration_us, json_parse_ms

RUN = Path(__file__).resolve().with_name("run.py")  # the entry point, which runs a probe in a fresh process
# requests that no phrase names (matched by meaning) and messages that ask for nothing: the matching rows
EVERYDAY = [("the tests in test_api.py are red, get them green again", "api_integration"),
            ("upgrade numpy to 2.1 and check nothing broke", ""),
            ("put the frontend in a container and run it on port 8080", "docker_ops"),
            ("my branch is way behind main, bring it up to date", "git_ops"),
            ("the weather report says it will rain all weekend", ""),
            ("we moved to a bigger office last spring", "")]


def library_load_ms() -> dict[str, float]:
    """Cold (fresh process) load + schema + lint of the shipped library (wall-clock, and CPU time of the
    thread), the engine's import, and the calibration workload in the same process (medians of 7 processes)."""
    import subprocess

    code = ("import sys,time;sys.path.insert(0,%r);t0=time.perf_counter();"
            "from graph_engine.authoring.library import load_library_file;t=time.perf_counter();c=time.thread_time();"
            "load_library_file(%r);cpu=time.thread_time()-c;done=time.perf_counter();sys.path.insert(0,%r);"
            "from reference import calibration_us;print((done-t)*1000,(t-t0)*1000,cpu*1000,calibration_us())") % (
                str(ROOT / "extensions"), str(a0.LIBRARY), str(ROOT / "bench"))
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split()
            for _ in range(7)]
    keys = ("load_ms", "import_ms", "load_cpu_ms", "calibration_us")
    return {k: statistics.median(float(r[i]) for r in runs) for i, k in enumerate(keys)}


def full_check_1000_ms() -> float:
    """Every plan of a 1,000-plan library compiled and linted up front (what `validate` does)."""
    doc = a0.shipped_copies(100)
    t = time.perf_counter()
    lib = build_library(doc, str(ROOT / "plan_library" / "x.json"))
    spent = (time.perf_counter() - t) * 1000
    assert len(lib.plans) == 1000, lib.problems[:3]
    return spent


def match_messages(copies: int) -> list[tuple[str, str]]:
    """(message, its belief-state domain): one naming a plan of a copy for each shipped plan, and some that
    name none."""
    doc = json.loads(a0.LIBRARY.read_text())
    named = [(f"please {plan['triggers'][0]} {(k * 37) % copies} in /srv/app and tell me when it is done",
              (plan.get("domains") or [""])[0]) for k, plan in enumerate(doc["plans"].values())]
    return named + [(NOTHING, "conversational"), ("what is a docker volume?", "docker"),
                    ("thanks, that looks good", "conversational"),
                    ("fix the bug in calc.py, average of an empty list crashes", "bugfix")]


def library_probe(path: str, copies: int, settle: bool) -> dict[str, float]:
    """Run in a fresh process (``bench/run.py --library-probe``): the library as Agent-Zero's first pass
    meets it: loaded, then a message matched (its plan compiled then); then matching times; then, after the
    background thread checked everything, a reload after one plan's name changed."""
    from graph_engine.session.catalogue import LibraryCache

    messages = match_messages(copies)
    t, cpu = time.perf_counter(), time.thread_time()
    cache = LibraryCache(path, recheck_seconds=0, background=settle)
    lib, _ = cache.refresh()
    first = lib.best(*messages[0], None)
    out = {"first_match_cpu_ms": (time.thread_time() - cpu) * 1000, "first_match_ms": (time.perf_counter() - t) * 1000}
    assert first is not None, "the first message matched nothing"
    t = time.perf_counter()
    assert lib.meaning_index(wait=True)[0] is not None, "no meaning model"  # the background thread's first task
    out["meaning_index_ms"] = (time.perf_counter() - t) * 1000
    messages = messages + EVERYDAY
    if settle:
        t = time.perf_counter()
        lib.settle()  # the rest of what the background thread does (it may still be running: same lock)
        out["settled_ms"] = (time.perf_counter() - t) * 1000
    for text, domain in messages:
        lib.best(text, domain, None)  # the plans these messages match: compiled before the timing
    per_message = [median_us(lambda t=text, d=domain: fresh(lib) and lib.best(t, d, None), 200) / 1000
                   for text, domain in messages]
    out["match_ms"] = statistics.median(per_message)
    out["match_max_ms"] = max(per_message)
    out["calibration_us"] = calibration_us()  # the references, in the same process
    out["json_parse_ms"] = json_parse_ms(path)
    if settle:
        doc = json.loads(Path(path).read_text())
        pid = next(iter(doc["plans"]))
        doc["plans"][pid]["name"] += " (edited)"
        Path(path).write_text(json.dumps(doc, indent=2))
        stamp = os.stat(path).st_mtime_ns + 10**9
        os.utime(path, ns=(stamp, stamp))
        cache.background = False  # the reload's own work, timed in this thread (a running engine does it in one)
        t, cpu = time.perf_counter(), time.thread_time()
        lib, _ = cache.refresh()
        edited = lib.get(pid)
        out["reload_cpu_ms"] = (time.thread_time() - cpu) * 1000
        out["reload_ms"] = (time.perf_counter() - t) * 1000
        assert edited is not None and edited.name.endswith("(edited)") and lib.reparsed == 1, lib.reparsed
    return out


def fresh(lib: Any) -> bool:
    """Forget the last message's meaning scores (kept for the second hook of a pass): each call is a new
    message.  The words' scores stay kept, as they do in a chat."""
    index, _ = lib.meaning_index(wait=True)
    if index is not None:
        index._last = None
    return True


def shipped_match_ms() -> list[float]:
    """Matching each message of ``match_messages`` and ``EVERYDAY`` against the shipped library (10 plans),
    through the catalogue the engine uses, its meaning index built: ms per message."""
    from graph_engine.session.catalogue import LibraryCache

    lib, _ = LibraryCache(str(a0.LIBRARY), recheck_seconds=0, background=False).refresh()
    messages = match_messages(1)[10:] + EVERYDAY
    for text, domain in messages:
        lib.best(text, domain, None)
    return [median_us(lambda t=text, d=domain: fresh(lib) and lib.best(t, d, None), 300) / 1000
            for text, domain in messages]


def schema_ms() -> dict[str, float]:
    """What the one schema validator costs: importing jsonschema and building the two validators (once per
    schema file, in a fresh process), and checking the shipped library's plans against the schema."""
    import subprocess

    code = ("import sys,time;sys.path.insert(0,%r);t0=time.perf_counter();import jsonschema;"
            "t1=time.perf_counter();from graph_engine.authoring import schema as s;p=s.load_schema(s.find_schema());"
            "t2=time.perf_counter();s._validators(p);print((t1-t0)*1000,(time.perf_counter()-t2)*1000)") % str(
                ROOT / "extensions")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split()
            for _ in range(7)]
    from graph_engine.authoring.schema import find_schema, load_schema, validate_plan

    schema = load_schema(find_schema())
    plans = json.loads(a0.LIBRARY.read_text())["plans"]
    check = median_us(lambda: [validate_plan(pid, raw, schema) for pid, raw in plans.items()], 20) / 1000
    return {"import_ms": round(statistics.median(float(r[0]) for r in runs), 2),
            "validators_ms": round(statistics.median(float(r[1]) for r in runs), 2),
            "check_shipped_ms": round(check, 2)}


def library_rows() -> dict[str, dict[str, float]]:
    """The 1,000- and 10,000-plan probes, each in fresh processes (medians of 5 and of 3)."""
    import subprocess

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for copies, settle in ((100, True), (1000, False)):
            path = Path(tmp) / f"lib{copies}.json"
            path.write_text(json.dumps(a0.shipped_copies(copies), indent=2))
            env = dict(os.environ, GRAPH_ENGINE_MAX_PLANS=str(copies * 10))
            runs = []
            for _ in range(5 if settle else 3):
                done = subprocess.run([sys.executable, str(RUN), "--library-probe", str(path), str(copies),
                                       "settle" if settle else "lazy"], capture_output=True, text=True, env=env)
                if done.returncode != 0:
                    raise RuntimeError(done.stderr)
                runs.append(json.loads(done.stdout.splitlines()[-1]))
            out[str(copies * 10)] = {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
    return out


def picture_ms() -> dict[str, float]:
    """Drawing the picture of a finished run of the bug-fix plan: Graphviz SVG (when `dot` is installed) and
    Mermaid text."""
    import shutil

    from graph_engine.authoring import render_graph
    from graph_engine.authoring.library import load_library_file

    plan = load_library_file(str(a0.LIBRARY)).plans["bugfix_workflow"]
    events = [{"type": "node_entered", "node": n, "seq": i} for i, n in enumerate(plan.success_path)]
    raw, counts = render_graph.drawable(plan), render_graph.trace_counts(events)
    out = {"mermaid": median_us(lambda: render_graph.mermaid(plan.id, raw, counts), 50) / 1000}
    if shutil.which("dot") and render_graph.picture_setting() == "auto":
        assert render_graph.run_picture(plan, events)[0] == ".svg"
        out["svg"] = median_us(lambda: render_graph.run_picture(plan, events), 7) / 1000
    return {k: round(v, 3) for k, v in out.items()}



def dot_text(n_nodes: int = 200, n_edges: int = 250) -> str:
    """A DOT plan of n nodes and n edges written the way Attractor pipelines are: a label and a prompt per
    node, conditions on the branching edges, defaults in attribute blocks, a few comments."""
    lines = ['// benchmark pipeline', 'digraph bench {', '    graph [label="Bench", goal="measure the parser"]',
             '    node [shape=box, timeout=900s]', '    start [shape=Mdiamond]', '    exit [shape=Msquare]']
    for i in range(n_nodes - 2):
        lines.append(f'    n{i} [label="Step {i}", prompt="Do step {i} for $goal"]')
    chain = ["start"] + [f"n{i}" for i in range(n_nodes - 2)] + ["exit"]
    edges = [f"    {a} -> {b}" for a, b in zip(chain, chain[1:])]
    for k in range(n_edges - len(edges)):
        edges.append(f'    n{(k * 7 + 5) % (n_nodes - 2)} -> n{(k * 3) % (n_nodes - 2)} [condition="on_retry"]')
    return "\n".join(lines + edges + ["}"]) + "\n"


def dot_parse_ms() -> tuple[float, float]:
    """Parsing a 200-node DOT plan: median wall-clock and median CPU time of the thread (milliseconds)."""
    from graph_engine.authoring import dot

    text = dot_text()
    graph = dot.parse(text)
    assert len(graph.nodes) == 200 and len(graph.edges) == 250, (len(graph.nodes), len(graph.edges))
    wall, cpu = [], []
    for _ in range(30):
        t, c = time.perf_counter(), time.thread_time()
        dot.parse(text)
        cpu.append((time.thread_time() - c) * 1000)
        wall.append((time.perf_counter() - t) * 1000)
    return statistics.median(wall), statistics.median(cpu)
