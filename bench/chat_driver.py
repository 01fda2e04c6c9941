"""The chat every pass row runs: a scripted model answers each step the engine shows with a realistic passing
output of fixtures/check_outputs.json, both extension files' hooks awaited as Agent-Zero awaits them; and the
ways of timing it (pass after pass, drivers in alternating batches, samples beside the calibration workload).
Imported by ``bench/run.py``, which puts ``extensions/`` and ``bench/`` on the path."""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Awaitable, Callable

from graph_engine.hosts.agent_zero import adapter
from graph_engine.tools import standin as a0
from reference import calibration_samples

ROOT = Path(__file__).resolve().parent.parent
NOTHING = "write a haiku about autumn leaves"  # a new message that starts no plan
CHAT = "the weather report says it will rain all weekend"  # ... that the meaning matcher scores first
OUTPUTS = json.loads((ROOT / "fixtures" / "check_outputs.json").read_text())["cases"]
MESSAGE = "fix the bug in /tmp/calc.py: average([]) crashes with ZeroDivisionError"


def passing_case(plan: str, node: str | None) -> dict | None:
    """The replay: the first realistic passing output of fixtures/check_outputs.json for a plan's step."""
    return next((c for c in OUTPUTS if c["plan"] == plan and c["node"] == node and c["expect"] == "pass"), None)


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

    def __init__(self, history_len: int, plan: str = "bugfix_workflow", message: str = MESSAGE,
                 real_pacing: bool = False) -> None:
        a0.install_framework("new")
        self.real_pacing = real_pacing
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
        case = passing_case(self.plan, node) or OUTPUTS[0]
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
        if self.real_pacing:  # as in the real loop, where passes are seconds apart: the library file is
            for rt in adapter._runtimes.values():  # looked at for changes on every pass (at most once a second)
                rt.library._checked_at = -1e18
        t0 = time.perf_counter_ns()
        await self.companion.execute(loop_data=loop)
        loop.extras_temporary.clear()
        await self.selector.execute(loop_data=loop)
        spent = time.perf_counter_ns() - t0
        return spent

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


def beside_calibration(sample: Callable[[], Awaitable[float | None]], passes: int) -> tuple[float, float]:
    """Median microseconds of ``passes`` samples (None: not a sample) and of the calibration workload, run in
    alternating batches: both sides of a budget see the same moments of a busy machine."""
    async def run() -> tuple[float, float]:
        out: list[float] = []
        calibration: list[float] = []
        while len(out) < passes:
            for _ in range(50):
                value = await sample()
                if value is not None:
                    out.append(value)
            calibration += calibration_samples(50)
        return statistics.median(out), statistics.median(calibration)

    gc.collect()
    return asyncio.run(run())


def median_us(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1000


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
