"""The rows of passes of each kind: idle, with no new result, opening with a new message, cold as in the real
loop, the pass that ends a run; judged passes by plan size and by tool result size; the state's size after a
plan that loops for ever."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from chat_driver import NOTHING, Driver, beside_calibration, interleaved, median_us, per_pass
from graph_engine.hosts.agent_zero import adapter, cards
from graph_engine.tools import standin as a0

HEAP = [{"role": "user" if i % 2 else "ai", "content": "x" * (i % 300), "n": i} for i in range(60_000)]


def other_work(ms: float) -> None:
    """What Agent-Zero does between two passes (110-125 ms of its own per pass: prompts, history, the model
    call's bookkeeping) as far as the CPU's caches can tell: ``ms`` milliseconds of walking a large heap."""
    t = time.perf_counter()
    while (time.perf_counter() - t) * 1000 < ms:
        json.loads(json.dumps(HEAP[::7]))


def library_look_us(reps: int = 2000) -> float:
    """Looking at the library file for changes, as the first hook of a pass does when a second has passed
    since the last look (a ``stat`` of the file and of its folder): median microseconds."""
    rt = adapter.Runtime(str(a0.LIBRARY))
    rt.library.refresh()

    def look() -> None:
        rt.library._checked_at = -1e18
        rt.library.refresh()

    return median_us(look, reps)


def cold_pass_us(passes: int, between_ms: float = 20.0) -> float:
    """The judged pass as the real loop runs it: after ``between_ms`` of other work (outside the timing), its
    code and data are no longer in the CPU's caches, and the library file is looked at for changes (at most
    once a second: on every pass of the real loop).  Median microseconds."""
    driver = Driver(2000, real_pacing=True)

    async def run() -> float:
        for _ in range(50):
            await driver.one_pass()
        out: list[float] = []
        while len(out) < passes:
            other_work(between_ms)
            ns = await driver.one_pass()
            cards.wait_for_display()  # a picture is drawn while Agent-Zero works: not in the next pass
            if ns >= 0:
                out.append(ns / 1000)
        return statistics.median(out)

    gc.collect()
    return asyncio.run(run())


def ending_pass_us(runs: int) -> dict[str, float]:
    """The pass that ends a run, its picture drawn off the loop (GRAPH_ENGINE_PICTURE as the user set it), and
    the middle passes of the same runs: medians.  The drawing is waited for after the pass, outside the
    timing, so that drawings do not pile up."""
    driver = Driver(2000)

    async def run() -> dict[str, float]:
        ends: list[float] = []
        middles: list[float] = []
        while len(ends) < runs:
            ns = await driver.one_pass()
            state = driver.agent._htn_state
            ended = state is None or state.get("status") != "active"
            if ns >= 0:
                (ends if ended else middles).append(ns / 1000)
            if ended:
                assert cards.wait_for_display(), "a picture was not drawn within 30 s"
        return {"median": statistics.median(ends), "middle": statistics.median(middles), "runs": len(ends)}

    gc.collect()
    return asyncio.run(run())


def idle_pass_us(passes: int) -> tuple[float, float]:
    """Passes of a chat in which no plan is active (the common case): both hooks, as Agent-Zero calls them."""
    driver = Driver(2000, message="hello there, how are you today?")
    asyncio.run(driver.one_pass())  # the user's message: matched against every plan, none starts

    async def sample() -> float:
        spent = await driver.hooks() / 1000
        driver.history.append({"ai": True, "content": a0.tool_reply("code_execution_tool", "ls")})
        driver.history.append({"ai": False, "content": {"tool_name": "code_execution_tool",
                                                        "tool_result": a0.terminal("x")}})
        del driver.history[1:3]
        return spent

    return beside_calibration(sample, passes)


def no_result_pass_us(passes: int) -> tuple[float, float]:
    """Passes with an active run in which the model's reply produced no tool result (a misformatted reply:
    Agent-Zero adds a system warning): nothing to judge, the step's context is shown again."""
    driver = Driver(2000)

    async def sample() -> float | None:
        state = getattr(driver.agent, "_htn_state", None)
        if state is None or state["status"] != "active":  # expired after its staleness window: restart
            await driver.one_pass()
            return None
        spent = await driver.hooks() / 1000
        driver.history.append({"ai": True, "content": "I will now run the tests."})
        driver.history.append({"ai": False, "content": {"system_warning": "You have misformatted your "
                                                                          "message. Follow system prompt."}})
        del driver.history[1:3]
        return spent

    return beside_calibration(sample, passes)


def new_message_pass_us(passes: int, base: str = NOTHING) -> tuple[float, float]:
    """Passes that open a monologue with a new user message that starts no plan (a different message each
    time, as a chat has): both hooks at iteration 0, the belief-state tracker run before, outside the timing."""
    driver = Driver(2000, message=base)
    count = iter(range(10**9))

    async def sample() -> float | None:
        i = next(count)
        text = f"{base}, number {i}"
        driver.history.append({"ai": False, "content": {"user_message": text}})
        driver.loop = a0.LoopData(user_message=a0.UserMessage(text))
        driver.bst.run(driver.agent, text)
        ns = await driver.hooks()
        assert getattr(driver.agent, "_htn_state", None) is None, "a plan started"
        driver.history.append({"ai": True, "content": a0.tool_reply("response", text="Leaves fall...")})
        del driver.history[1:3]
        return ns / 1000 if i >= 200 else None

    return beside_calibration(sample, passes)


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


BIG_LINE = "\x1b[32mINFO\x1b[0m worker 3 processed batch 1187 of the nightly import in 42 ms\n"


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


def per_pass_by_result_size(passes: int) -> dict[str, float]:
    """Judged passes whose tool result is 1 MB / 100 MB of coloured log lines (the step's passing output at
    its end), or carries a value nested 100,000 deep, measured interleaved."""
    padded: dict[tuple[int, str], str] = {}  # built once per output: the timing is of the hooks alone
    deep = _deep(100_000)

    def driver(size: int, nested: bool) -> Driver:
        d = Driver(2000)
        plain = d._reply

        def reply() -> tuple[dict, dict]:
            ask, result = plain()
            text = result["content"]["tool_result"]
            if size:
                key = (size, text)
                if key not in padded:
                    padded[key] = BIG_LINE * (size // len(BIG_LINE)) + text
                result["content"]["tool_result"] = padded[key]
            if nested:
                result["content"]["details"] = deep
            return ask, result

        d._reply = reply  # type: ignore[method-assign]
        return d

    return interleaved({"1 MB": driver(1 << 20, False), "100 MB": driver(100 << 20, False),
                        "nested 100,000 deep": driver(1 << 20, True)}, passes, batch=10, warmup=20)


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
