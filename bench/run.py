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
from typing import Any, Awaitable, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "extensions"))

from graph_engine.hosts.agent_zero import adapter, cards  # noqa: E402
from graph_engine.tools import standin as a0  # noqa: E402
from graph_engine.authoring.library import build_library  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
import tables  # noqa: E402
from reference import calibration_samples, calibration_us, json_parse_ms  # noqa: E402

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
    "big_result_per_1mb": 1.25,  # a judged pass whose tool result is 100 MB, or nested 100,000 deep, <= 1.25x one
    # whose result is 1 MB
}
NOTHING = "write a haiku about autumn leaves"  # a new message that starts no plan
CHAT = "the weather report says it will rain all weekend"  # ... that the meaning matcher scores first
# requests that no phrase names (matched by meaning) and messages that ask for nothing: the matching rows
EVERYDAY = [("the tests in test_api.py are red, get them green again", "api_integration"),
            ("upgrade numpy to 2.1 and check nothing broke", ""),
            ("put the frontend in a container and run it on port 8080", "docker_ops"),
            ("my branch is way behind main, bring it up to date", "git_ops"),
            ("the weather report says it will rain all weekend", ""),
            ("we moved to a bigger office last spring", "")]
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

    return _median_us(look, reps)


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


def in_pass_costs(passes: int) -> dict[str, float]:
    """What each part costs inside a judged pass: the pass's median with the part switched off (its result
    replaced by a stored one, or its effect skipped), against the same pass with everything on, measured in
    alternating batches.  Larger than the parts alone: inside a pass each part runs with cold caches."""
    from graph_engine.session import audit
    from graph_engine.core import engine
    from graph_engine.texts import render

    context, verdicts = render.context, engine.check
    shown: dict[tuple, str] = {}
    judged: dict[int, Any] = {}

    def stored_context(plan: Any, state: dict) -> str:
        key = (plan.id, state["current_node"])
        if key not in shown:
            shown[key] = context(plan, state)
        return shown[key]

    def stored_verdict(spec: Any, evidence: Any, text: str) -> Any:
        if id(spec) not in judged:
            judged[id(spec)] = verdicts(spec, evidence, text)
        return judged[id(spec)]

    off = {
        "everything on": [],
        "card": [(adapter, "_card", lambda *a, **k: None)],
        "audit write": [(adapter, "_audit", lambda *a, **k: None)],
        "render context": [(render, "context", stored_context)],
        "check": [(engine, "check", stored_verdict), (engine, "judged_text", lambda ev: ev.text)],
    }
    drivers = {k: Driver(2000) for k in off}
    times: dict[str, list[float]] = {k: [] for k in off}

    async def run() -> None:
        rounds = 0
        while min(len(v) for v in times.values()) < passes:
            rounds += 1
            for key, driver in drivers.items():
                saved = [(mod, name, getattr(mod, name)) for mod, name, _ in off[key]]
                for mod, name, fn in off[key]:
                    setattr(mod, name, fn)
                try:
                    for _ in range(50):
                        ns = await driver.one_pass()
                        if ns >= 0 and rounds > 4:
                            times[key].append(ns / 1000)
                finally:
                    for mod, name, fn in saved:
                        setattr(mod, name, fn)

    gc.collect()
    asyncio.run(run())
    base = statistics.median(times["everything on"])
    return {k: round(base - statistics.median(v), 2) for k, v in times.items() if k != "everything on"}


def profile_summary(passes: int, top: int = 12) -> str:
    """The judged pass's top functions by own time (cProfile), one screen: where the time goes."""
    import cProfile
    import io
    import pstats

    driver = Driver(2000)
    per_pass(2000, 200, warmup=0, driver=driver)
    prof = cProfile.Profile()

    async def run() -> int:
        n = 0
        while n < passes:
            state = getattr(driver.agent, "_htn_state", None)
            if state is None or state.get("status") != "active":
                await driver.one_pass()  # a new run: not a judged pass
                continue
            reply, result = driver._reply()
            driver.history += [reply, result]
            del driver.history[1:3]
            prof.enable()
            await driver.hooks()
            prof.disable()
            n += 1
        return n

    asyncio.run(run())
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
    root = str(ROOT) + os.sep
    body = [ln.replace(root, "") for ln in lines[start:start + top + 1]]
    return "\n".join([f"Profile of {passes:,} judged passes (cProfile, top {top} by own time; the profiler "
                       "slows every call, so read the shares, not the times):"] + body)


def _median_us(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1000


def judged_pass_parts_us(driver: Driver, reps: int = 1000) -> dict[str, float]:
    """What the main parts of a judged pass cost alone, on the live run's data: reading the newest result
    from the history; checking and hashing each step's realistic passing output (median over the plan's
    steps); rendering the context at each step (median over the steps); recording three events and writing
    their audit lines; making the card's text and updating its log item.  The rest of a pass is the
    Agent-Zero glue and the state bookkeeping."""
    import hashlib

    from graph_engine.texts import card, render

    from graph_engine.hosts.agent_zero import history

    from graph_engine.core import verify
    from graph_engine.session.audit import AuditLog
    from graph_engine.core.state import emit

    state = driver.agent._htn_state
    assert state is not None and state["status"] == "active"
    plan = next(iter(adapter._runtimes.values())).lookup(state["plan_id"], state["plan_version"])
    reply, result = driver._reply()
    hist = driver.history + [reply, result]
    assert history.newest_call_output(hist) is not None
    tasks = [n for n in plan.nodes.values() if n.type == "task"]

    def judge(node: Any) -> Callable[[], None]:
        case = next(c for c in OUTPUTS if c["plan"] == plan.id and c["node"] == node.id and c["expect"] == "pass")
        out = history.newest_call_output([{"ai": True, "content": a0.tool_reply("code_execution_tool", case["command"])},
                                          {"ai": False, "content": {"tool_name": "code_execution_tool",
                                                                    "tool_result": a0.terminal(case["output"])}}])
        assert out is not None

        def run() -> None:
            ev = verify.Evidence(tool=out.tool, text=out.text, reply=out.reply)
            text = verify.judged_text(ev)
            verify.check(node.verify, ev, text)
            hashlib.sha256(text.encode("utf-8", "surrogatepass")).update(out.reply.encode())
        return run

    with tempfile.TemporaryDirectory() as tmp:
        log = AuditLog(tmp)
        fake = json.loads(json.dumps(state))

        def audit() -> None:
            emit(fake, "node_verified", node="fix", outcome="success", reason="exit status 0", evidence_sha256="0" * 64)
            emit(fake, "edge_followed", **{"from": "fix", "to": "test", "condition": "on_success"})
            emit(fake, "node_entered", node="test")
            log.append(fake, "bench", 0)

        item = driver.agent.context.log.log(type="info", heading="", content="")

        def card_update() -> None:
            heading, content, kvps = card.text(plan, state, "")
            item.update(type="info", heading=heading, content=content, kvps=kvps)

        return {
            "read newest result": round(_median_us(lambda: history.newest_call_output(hist), reps), 2),
            "check + hash": round(statistics.median(_median_us(judge(n), reps) for n in tasks), 2),
            "render context": round(statistics.median(
                _median_us(lambda n=n: render.context(plan, dict(state, current_node=n.id)), reps) for n in tasks), 2),
            "three events + audit write": round(_median_us(audit, reps), 2),
            "card text + log update": round(_median_us(card_update, reps), 2),
        }


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


def side_by_side(passes: int) -> dict[str, Any]:
    """LangGraph driving the same bug-fix plan on the same replay (bench/langgraph_side.py), one tool result
    per pass, against the engine's judged pass without and with the card's log update (LangGraph's pass
    updates no display), measured in alternating batches of about the same length (in-memory saver); then
    LangGraph with its SQLite saver on a file.  {"installed": False} without the ``bench`` extra."""
    try:
        import langgraph_side as lg
    except ImportError:
        return {"installed": False}
    from graph_engine.authoring.library import load_library_file

    plan = load_library_file(str(a0.LIBRARY)).plans["bugfix_workflow"]

    def output_for(node: str) -> dict:
        case = passing_case(plan.id, node)
        assert case is not None, node
        return {"tool": "code_execution_tool", "text": a0.terminal(case["output"]),
                "reply": a0.tool_reply("code_execution_tool", case["command"])}

    drivers = {"graph_engine": Driver(2000), "graph_engine_card": Driver(2000),
               "langgraph": lg.Driver(plan, lg.InMemorySaver(), output_for)}
    batches = {"graph_engine": 200, "graph_engine_card": 200, "langgraph": 20}  # about as long each
    times: dict[str, list[float]] = {k: [] for k in drivers}
    real_card = cards.show

    async def one(key: str) -> int:
        if key == "langgraph":
            return drivers[key].one_pass()
        if key == "graph_engine":  # the card's log update left out: LangGraph's pass updates no display
            cards.show = lambda *args, **kwargs: None
        try:
            return await drivers[key].one_pass()
        finally:
            cards.show = real_card

    async def run() -> None:
        for key in drivers:
            for _ in range(200):
                await one(key)
        while min(len(times[k]) * batches["graph_engine"] // batches[k] for k in times) < passes:
            for key, batch in batches.items():
                for _ in range(batch):
                    ns = await one(key)
                    if ns >= 0:
                        times[key].append(ns / 1000)

    gc.collect()
    asyncio.run(run())
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = lg.per_pass_us(plan, output_for, max(200, passes // 40), "sqlite", tmp)
    medians = {k: round(statistics.median(v), 2) for k, v in times.items()}
    return {"installed": True, "version": lg.version(), "graph_engine_us": medians["graph_engine"],
            "graph_engine_card_us": medians["graph_engine_card"], "langgraph_memory_us": medians["langgraph"],
            "langgraph_sqlite_us": round(sqlite["median"], 2), "passes": len(times["langgraph"])}


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
    per_message = [_median_us(lambda t=text, d=domain: fresh(lib) and lib.best(t, d, None), 200) / 1000
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
    return [_median_us(lambda t=text, d=domain: fresh(lib) and lib.best(t, d, None), 300) / 1000
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
    check = _median_us(lambda: [validate_plan(pid, raw, schema) for pid, raw in plans.items()], 20) / 1000
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
                done = subprocess.run([sys.executable, __file__, "--library-probe", str(path), str(copies),
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
    out = {"mermaid": _median_us(lambda: render_graph.mermaid(plan.id, raw, counts), 50) / 1000}
    if shutil.which("dot") and render_graph.picture_setting() == "auto":
        assert render_graph.run_picture(plan, events)[0] == ".svg"
        out["svg"] = _median_us(lambda: render_graph.run_picture(plan, events), 7) / 1000
    return {k: round(v, 3) for k, v in out.items()}


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
    }
    side = r["langgraph"]
    if side.get("installed"):
        out["judged_per_langgraph"] = side["graph_engine_us"] / side["langgraph_memory_us"]
    return out


def rows(r: dict) -> list[tuple[str, str, str, bool | None]]:
    """(measure, figure, budget, met: None for a figure that is only reported) for a results dict: the
    printed table and the README's."""
    us = lambda v: f"{v:.1f} µs"  # noqa: E731
    ms = lambda v: f"{v:.1f} ms" if v < 100 else f"{v:,.0f} ms"  # noqa: E731
    hist, nodes, ratio = r["per_pass_us_by_history"], r["per_pass_us_by_nodes"], ratios(r)
    parts, inside, side = r["judged_pass_parts_us"], r["in_pass_costs_us"], r["langgraph"]
    small, large = r["library_1000"], r["library_10000"]

    def budget(key: str, what: str) -> tuple[str, bool]:
        return f"<= {TARGETS[key]:g}x {what} ({ratio[key]:.3g}x)", ratio[key] <= TARGETS[key]

    pictures = " / ".join(f"{k} {v:.2f} ms" for k, v in r["picture_ms"].items())
    if side.get("installed"):
        langgraph = [
            (f"LangGraph {side['version']}, the same bug-fix graph and replay: pass, in-memory saver / SQLite",
             f"{side['langgraph_memory_us']:,.0f} / {side['langgraph_sqlite_us']:,.0f} µs", "reported", None),
            ("judged pass beside it (alternating batches), without / with the card's log update",
             f"{side['graph_engine_us']:.1f} / {side['graph_engine_card_us']:.1f} µs",
             *budget("judged_per_langgraph", "LangGraph's in-memory pass, without"))]
    else:
        langgraph = [("LangGraph, the same bug-fix graph and replay (`pip install -e '.[bench]'`)",
                      "not installed", "judged pass <= 0.1x its in-memory pass", None)]
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


def readme_table(r: dict) -> str:
    """The README's figures, made from bench/results.json alone (a test checks the README shows them)."""
    m = r["machine"]
    return tables.markdown(README_START, README_END, f"Figures of `make bench` on {m['date']}: Python {m['python']}, "
                           f"{m['cpus']} CPUs, {r['per_pass_us']['passes']:,} measured passes.", rows(r))


def write_readme(r: dict) -> None:
    tables.replace_between(README, README_START, README_END, readme_table(r))


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
