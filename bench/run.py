"""Benchmarks: `make bench` prints a table and writes bench/results.json.

Everything is measured the way Agent-Zero runs the engine: both extension files loaded by path, their
``execute`` awaited inside one event loop, pass after pass, with the loop data shapes of the real captures.
Timings are wall-clock (time.perf_counter_ns) of the two hook calls of each pass, nothing else.
"""

from __future__ import annotations

import asyncio
import gc
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

from graph_engine import adapter  # noqa: E402
from graph_engine import standin as a0  # noqa: E402
from graph_engine.library import build_library  # noqa: E402

TARGETS = {"per_pass_median_us": 30.0, "flatness": 0.25, "library_load_ms": 50.0, "dot_parse_200_nodes_ms": 20.0}
OUTPUTS = json.loads((ROOT / "fixtures" / "check_outputs.json").read_text())["cases"]
MESSAGE = "fix the bug in /tmp/calc.py: average([]) crashes with ZeroDivisionError"


def filler(n: int) -> list[dict]:
    """A history of n messages in the captured shapes: replies, tool results, a few user messages."""
    out: list[dict] = [{"ai": True, "content": a0.tool_reply("response", text="Hello!")}]
    i = 0
    while len(out) < n:
        i += 1
        out.append({"ai": True, "content": a0.tool_reply("code_execution_tool", f"ls -la /srv/{i}")})
        out.append({"ai": False, "content": {"tool_name": "code_execution_tool",
                                             "tool_result": a0.terminal(f"file_{i}.txt\nnotes_{i}.md")}})
        if i % 25 == 0:
            out.append({"ai": False, "content": {"user_message": f"keep going with item {i}"}})
    return out[:n]


class Driver:
    """Drives passes of one chat: a scripted model answers each shown step with a realistic passing output."""

    def __init__(self, history_len: int, plan: str = "bugfix_workflow", message: str = MESSAGE) -> None:
        a0.install_framework("new")
        self.agent = a0.Agent()
        self.companion = a0.load_extension_class(a0.COMPANION)(self.agent)
        self.selector = a0.load_extension_class(a0.SELECTOR)(self.agent)
        self.bst = a0.BeliefStateTracker()
        self.history = filler(history_len)
        self.history_len = history_len
        self.plan, self.message = plan, message
        self.loop: a0.LoopData | None = None

    def _reply(self) -> tuple[dict, dict]:
        state = getattr(self.agent, "_htn_state", None)
        node = state["current_node"] if state and state.get("status") == "active" else None
        case = next((c for c in OUTPUTS if c["plan"] == self.plan and c["node"] == node and c["expect"] == "pass"),
                    OUTPUTS[0])
        reply = {"ai": True, "content": a0.tool_reply("code_execution_tool", case["command"])}
        result = {"ai": False, "content": {"tool_name": "code_execution_tool", "tool_result": a0.terminal(case["output"])}}
        return reply, result

    async def hooks(self) -> int:
        """The next pass's two hook calls, in Agent-Zero's order; returns the nanoseconds they took."""
        loop = self.loop
        assert loop is not None
        loop.iteration += 1
        loop.params_temporary = {}
        loop.history_output = self.history
        t0 = time.perf_counter_ns()
        await self.companion.execute(loop_data=loop)
        loop.extras_temporary.clear()
        await self.selector.execute(loop_data=loop)
        return time.perf_counter_ns() - t0

    async def one_pass(self) -> int:
        """One pass; returns the nanoseconds spent in the two hooks (negative: a pass that started a run)."""
        state = getattr(self.agent, "_htn_state", None)
        starting = self.loop is None or state is None or state.get("status") != "active"
        if starting:
            self.history.append({"ai": False, "content": {"user_message": self.message}})
            self.loop = a0.LoopData(user_message=a0.UserMessage(self.message))
            self.bst.run(self.agent, self.message)
        spent = await self.hooks()
        if starting:
            spent = -spent
        reply, result = self._reply()
        self.history.append(reply)
        self.history.append(result)
        if len(self.history) > self.history_len:
            del self.history[1:3]
        return spent


def per_pass(history_len: int, passes: int, warmup: int = 200, driver: Driver | None = None,
             starts: list[float] | None = None) -> list[float]:
    """Microseconds per pass with an active run; passes that started a run go to ``starts``."""
    driver = driver or Driver(history_len)

    async def run() -> list[float]:
        for _ in range(warmup):
            await driver.one_pass()
        gc.collect()
        active: list[float] = []
        while len(active) < passes:
            ns = await driver.one_pass()
            (active if ns >= 0 else starts if starts is not None else []).append(abs(ns) / 1000)
        return active

    return asyncio.run(run())


def idle_pass_us(passes: int) -> float:
    """Passes of a chat in which no plan is active (the common case): both hooks, as Agent-Zero calls them."""
    driver = Driver(2000, message="hello there, how are you today?")

    async def run() -> list[float]:
        await driver.one_pass()  # the user's message: matched against every plan, none starts
        out = []
        for _ in range(passes):
            out.append(await driver.hooks() / 1000)
            driver.history.append({"ai": True, "content": a0.tool_reply("code_execution_tool", "ls")})
            driver.history.append({"ai": False, "content": {"tool_name": "code_execution_tool",
                                                            "tool_result": a0.terminal("x")}})
            del driver.history[1:3]
        return out

    return statistics.median(asyncio.run(run()))


def interleaved(drivers: dict[str, Driver], passes: int, batch: int = 50, warmup: int = 200) -> dict[str, float]:
    """Median per-pass time of several drivers measured in alternating batches, so that a change in the
    machine's load during the run does not show up as a difference between them."""
    async def run() -> dict[str, float]:
        for d in drivers.values():
            for _ in range(warmup):
                await d.one_pass()
        times: dict[str, list[float]] = {k: [] for k in drivers}
        while min(len(v) for v in times.values()) < passes:
            for key, d in drivers.items():
                for _ in range(batch):
                    ns = await d.one_pass()
                    if ns >= 0:
                        times[key].append(ns / 1000)
        return {k: statistics.median(v) for k, v in times.items()}

    gc.collect()
    return asyncio.run(run())


def big_plan(n_nodes: int) -> dict:
    """A chain of n task nodes, each with a retry budget, a loop back and an escalation."""
    nodes = {"start": {"type": "start"}, "stuck": {"type": "escalate", "reason": "stuck"}, "done": {"type": "exit"}}
    edges = [{"from": "start", "to": "t0"}]
    for i in range(n_nodes):
        nodes[f"t{i}"] = {"type": "task", "name": f"Step {i}", "verify": {"type": "any_output"}}
        nxt = f"t{i + 1}" if i + 1 < n_nodes else "done"
        edges += [{"from": f"t{i}", "to": nxt, "condition": "on_success"},
                  {"from": f"t{i}", "to": "stuck", "condition": "on_exhaust"}]
    return {"name": "Long chain", "domains": ["bugfix"], "triggers": ["run the long chain"], "trigger_threshold": 1,
            "stale_after_turns": 1_000_000, "max_turns": 10_000_000,
            "graph": {"start": "start", "nodes": nodes, "edges": edges}}


def per_pass_by_nodes(sizes: tuple[int, ...], passes: int) -> dict[str, float]:
    """One library holding a chain plan per size; each driver runs its own plan, measured interleaved."""
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / "lib.json"
        plans = {}
        for n in sizes:
            plan = big_plan(n)
            plan["triggers"] = [f"run the chain of {n}"]
            plans[f"chain{n}"] = plan
        lib.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": plans}))
        os.environ["GRAPH_ENGINE_LIBRARY"] = str(lib)
        adapter._runtimes.clear()
        try:
            drivers = {}
            for n in sizes:
                d = Driver(2000, plan=f"chain{n}", message=f"run the chain of {n} please")
                d._reply = lambda: ({"ai": True, "content": a0.tool_reply("code_execution_tool", "ls")},  # type: ignore
                                    {"ai": False, "content": {"tool_name": "code_execution_tool",
                                                              "tool_result": a0.terminal("out")}})
                drivers[str(n)] = d
            return interleaved(drivers, passes)
        finally:
            os.environ.pop("GRAPH_ENGINE_LIBRARY", None)
            adapter._runtimes.clear()


def library_load_ms() -> tuple[float, float]:
    """Cold (fresh process) load + schema + lint of the shipped library, and a 1,000-plan library."""
    import subprocess

    code = ("import sys,time;sys.path.insert(0,%r);t0=time.perf_counter();"
            "from graph_engine.library import load_library_file;t=time.perf_counter();"
            "load_library_file(%r);print((time.perf_counter()-t)*1000, (t-t0)*1000)") % (
                str(ROOT / "extensions"), str(a0.LIBRARY))
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split()
            for _ in range(7)]
    cold = [float(r[0]) for r in runs]
    imports = [float(r[1]) for r in runs]
    doc = json.loads(a0.LIBRARY.read_text())
    plans = {}
    for i in range(100):
        for pid, plan in doc["plans"].items():
            copy = json.loads(json.dumps(plan))
            copy["triggers"] = [f"{t} {i}" for t in copy["triggers"]]
            copy["strong_triggers"] = [f"{t} {i}" for t in copy.get("strong_triggers", [])]
            plans[f"{pid}_{i}"] = copy
    t = time.perf_counter()
    lib = build_library({"_meta": {"version": "2.0"}, "plans": plans}, str(ROOT / "plan_library" / "x.json"))
    big = (time.perf_counter() - t) * 1000
    assert len(lib.plans) == 1000, lib.problems[:3]
    return statistics.median(cold), big, statistics.median(imports)


def state_bytes_after(passes: int) -> int:
    """A plan that loops for ever (the budgets are huge): the state must stay bounded."""
    plan = big_plan(3)
    plan["graph"]["nodes"]["t2"]["max_retries"] = 10**9
    plan["graph"]["edges"].append({"from": "t2", "to": "t0", "condition": "on_retry"})
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / "lib.json"
        lib.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"loop": plan}}))
        os.environ["GRAPH_ENGINE_LIBRARY"] = str(lib)
        adapter._runtimes.clear()
        try:
            driver = Driver(2000, plan="loop", message="run the long chain please")

            def reply() -> tuple[dict, dict]:  # t2 always fails: its retry edge loops back to t0
                state = driver.agent._htn_state
                fail = state is not None and state.get("current_node") == "t2"
                return ({"ai": True, "content": a0.tool_reply("code_execution_tool", "ls")},
                        {"ai": False, "content": {"tool_name": "code_execution_tool",
                                                  "tool_result": a0.terminal("" if fail else "out")}})
            driver._reply = reply  # type: ignore[method-assign]
            per_pass(2000, passes, warmup=0, driver=driver)
            state = driver.agent._htn_state
            assert state is not None and state["status"] == "active", "the looping run ended"
            return len(json.dumps(state))
        finally:
            os.environ.pop("GRAPH_ENGINE_LIBRARY", None)
            adapter._runtimes.clear()


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


def dot_parse_ms() -> float:
    from graph_engine import dot

    text = dot_text()
    graph = dot.parse(text)
    assert len(graph.nodes) == 200 and len(graph.edges) == 250, (len(graph.nodes), len(graph.edges))
    times = []
    for _ in range(30):
        t = time.perf_counter()
        dot.parse(text)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> int:
    quick = "--quick" in sys.argv
    n = 2000 if quick else 20000
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["A0_ROOT"] = tmp  # audit logs go to a throwaway tree
        os.environ.pop("GRAPH_ENGINE_LIBRARY", None)
        adapter._runtimes.clear()
        starts: list[float] = []
        main_times = sorted(per_pass(2000, n, starts=starts))
        idle = idle_pass_us(n // 4)
        by_history = interleaved({str(h): Driver(h) for h in (100, 1000, 10000)}, n // 4)
        by_nodes = per_pass_by_nodes((10, 500, 5000), n // 4)
        cold, big, import_ms = library_load_ms()
        state_bytes = state_bytes_after(10_000)
        dot_ms = dot_parse_ms()
    median = statistics.median(main_times)
    p99 = main_times[int(len(main_times) * 0.99) - 1]
    results = {
        "per_pass_us": {"median": round(median, 2), "p99": round(p99, 2), "passes": len(main_times)},
        "activation_pass_us": {"median": round(statistics.median(starts), 2), "passes": len(starts)},
        "idle_pass_us": {"median": round(idle, 2)},
        "per_pass_us_by_history": {k: round(v, 2) for k, v in by_history.items()},
        "per_pass_us_by_nodes": {k: round(v, 2) for k, v in by_nodes.items()},
        "library_load_ms": round(cold, 2),
        "engine_import_ms": round(import_ms, 2),
        "library_1000_plans_load_ms": round(big, 1),
        "dot_parse_200_nodes_ms": round(dot_ms, 2),
        "state_bytes_after_10000_passes": state_bytes,
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                    "date": time.strftime("%Y-%m-%d")},
    }
    spread = lambda d: (max(d.values()) - min(d.values())) / min(d.values())  # noqa: E731
    checks = [
        ("per-pass median (us)", median, f"<= {TARGETS['per_pass_median_us']}", median <= TARGETS["per_pass_median_us"]),
        ("per-pass p99 (us)", p99, "reported", True),
        ("pass that starts a run, median (us)", statistics.median(starts), "reported", True),
        ("pass with no active run, median (us)", idle, "reported", True),
        ("by history 100/1k/10k (us)", "/".join(f"{v:.1f}" for v in by_history.values()),
         f"spread <= {TARGETS['flatness']:.0%}", spread(by_history) <= TARGETS["flatness"]),
        ("by nodes 10/500/5000 (us)", "/".join(f"{v:.1f}" for v in by_nodes.values()),
         f"spread <= {TARGETS['flatness']:.0%}", spread(by_nodes) <= TARGETS["flatness"]),
        ("library load+schema+lint, first (ms)", cold, f"<= {TARGETS['library_load_ms']}", cold <= TARGETS["library_load_ms"]),
        ("engine import, fresh process (ms)", import_ms, "reported", True),
        ("1,000-plan library (ms)", big, "reported", True),
        ("DOT parse 200 nodes/250 edges (ms)", dot_ms, f"<= {TARGETS['dot_parse_200_nodes_ms']}",
         dot_ms <= TARGETS["dot_parse_200_nodes_ms"]),
        ("state bytes after 10,000 passes", state_bytes, "bounded", state_bytes < 64_000),
    ]
    print(f"{'measure':<38} {'value':>22}  {'target':<16} ok")
    for name, value, target, ok in checks:
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        print(f"{name:<38} {shown:>22}  {target:<16} {'yes' if ok else 'NO'}")
    results["targets_met"] = all(ok for *_, ok in checks)
    out = ROOT / "bench" / ("results.local.json" if quick else "results.json")
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten: {out.relative_to(ROOT)}")
    return 0 if results["targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
