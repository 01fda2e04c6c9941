"""Where a judged pass's time goes: each part switched off inside the pass, each part alone, a profile; and
the same graph and replay driven by LangGraph beside it (bench/langgraph_side.py)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import tempfile
from typing import Any, Callable

from chat_driver import OUTPUTS, ROOT, Driver, median_us, passing_case, per_pass
from graph_engine.hosts.agent_zero import adapter, cards
from graph_engine.tools import standin as a0

def in_pass_costs(passes: int) -> dict[str, float]:
    """What each part costs inside a judged pass: the pass's median with the part switched off (its result
    replaced by a stored one, or its effect skipped), against the same pass with everything on, measured in
    alternating batches.  Larger than the parts alone: inside a pass each part runs with cold caches."""
    from graph_engine.core import evidence
    from graph_engine.hosts.agent_zero import keeping
    from graph_engine.texts import render

    context, verdicts = render.context, evidence.check
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
        "card": [(cards, "show", lambda *a, **k: None)],
        "audit write": [(keeping, "audit", lambda *a, **k: None)],
        "render context": [(render, "context", stored_context)],
        "check": [(evidence, "check", stored_verdict), (evidence, "judged_text", lambda ev: ev.text)],
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


def judging(plan: Any, node: Any) -> Callable[[], None]:
    """Checking and hashing a step's realistic passing output (fixtures/check_outputs.json), read from a
    history as the hook reads it: a function to time."""
    import hashlib

    from graph_engine.core import verify
    from graph_engine.hosts.agent_zero import history

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

def judged_pass_parts_us(driver: Driver, reps: int = 1000) -> dict[str, float]:
    """What the main parts of a judged pass cost alone, on the live run's data: reading the newest result
    from the history; checking and hashing each step's realistic passing output (median over the plan's
    steps); rendering the context at each step (median over the steps); recording three events and writing
    their audit lines; making the card's text and updating its log item.  The rest of a pass is the
    Agent-Zero glue and the state bookkeeping."""
    from graph_engine.texts import card, render

    from graph_engine.hosts.agent_zero import history

    from graph_engine.session.audit import AuditLog
    from graph_engine.core.state import emit

    state = driver.agent._htn_state
    assert state is not None and state["status"] == "active"
    plan = next(iter(adapter._runtimes.values())).lookup(state["plan_id"], state["plan_version"])
    reply, result = driver._reply()
    hist = driver.history + [reply, result]
    assert history.newest_call_output(hist) is not None
    tasks = [n for n in plan.nodes.values() if n.type == "task"]

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
            "read newest result": round(median_us(lambda: history.newest_call_output(hist), reps), 2),
            "check + hash": round(statistics.median(median_us(judging(plan, n), reps) for n in tasks), 2),
            "render context": round(statistics.median(
                median_us(lambda n=n: render.context(plan, dict(state, current_node=n.id)), reps) for n in tasks), 2),
            "three events + audit write": round(median_us(audit, reps), 2),
            "card text + log update": round(median_us(card_update, reps), 2),
        }


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
