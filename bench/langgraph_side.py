"""The same bug-fix plan as a LangGraph graph, driven the way the engine is driven: one tool result per pass.

A LangGraph node per task node of the plan: the node interrupts for the step's tool result, judges it with the
plan's own check (the engine's ``verify.check``, so both sides do the same judging), counts the attempt and
the failure, and a conditional edge routes by the outcome through the plan's edges (on_success, on_retry
while the step's retry budget lasts, on_exhaust; an unconditional edge otherwise); decision nodes pass
through on the last outcome, exit and escalate nodes end the graph.  Each pass is one
``graph.invoke(Command(resume=output), config)`` that runs to the next interrupt, with the checkpointer
saving every super-step before the call returns (``durability="sync"``, as the engine writes its audit lines
before the pass returns): LangGraph's in-memory saver, or its SQLite saver on a file.

Used by ``bench/run.py``; needs the ``bench`` extra (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import hashlib
import operator
import sqlite3
import statistics
import time
import uuid
from typing import Annotated, Any, Callable, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from graph_engine.core.model import Plan
from graph_engine.core.verify import Evidence, check, judged_text


def _merge(old: dict, new: dict) -> dict:
    return {**old, **new}


class RunState(TypedDict):
    """What the graph keeps per run: attempts and failures per node, the last outcome, the evidence hashes."""

    attempts: Annotated[dict, _merge]
    failures: Annotated[dict, _merge]
    last: str  # success, retry or exhausted
    evidence: Annotated[list, operator.add]
    ended: str


def _task(plan: Plan, node_id: str) -> Callable[[RunState], dict]:
    node = plan.nodes[node_id]

    def run(state: RunState) -> dict:
        output = interrupt({"node": node_id, "tool": node.tool, "hint": node.tool_hint})
        evidence = Evidence(tool=output["tool"], text=output["text"], reply=output["reply"])
        text = judged_text(evidence)
        verdict = check(node.verify, evidence, text)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0" + output["reply"].encode("utf-8", "surrogatepass"))
        failures = state["failures"].get(node_id, 0) + (0 if verdict.ok else 1)
        last = "success" if verdict.ok else "retry" if failures <= node.max_retries else "exhausted"
        return {"attempts": {node_id: state["attempts"].get(node_id, 0) + 1}, "failures": {node_id: failures},
                "last": last, "evidence": [(node_id, verdict.ok, verdict.reason, digest.hexdigest())]}
    return run


def _end(how: str) -> Callable[[RunState], dict]:
    return lambda state: {"ended": how}


WANTED = {"success": ("on_success", "always"), "retry": ("on_retry", "always"), "exhausted": ("on_exhaust",)}


def _router(plan: Plan, node_id: str) -> Callable[[RunState], str]:
    edges = plan.out_edges.get(node_id, ())
    for edge in edges:
        if edge.condition not in ("always", "on_success", "on_retry", "on_exhaust"):
            raise ValueError(f"{plan.id}: edge {edge.src} -> {edge.dst} has condition {edge.condition!r}, which "
                             "this comparison does not route")

    def route(state: RunState) -> str:
        for condition in WANTED[state["last"]]:
            for edge in edges:
                if edge.condition == condition:
                    return edge.dst
        return node_id  # a retry without an on_retry edge: the step again
    return route


def build(plan: Plan, checkpointer: Any) -> Any:
    """The compiled LangGraph graph of a plan made of start, task, decision, exit and escalate nodes."""
    graph = StateGraph(RunState)
    for node_id, node in plan.nodes.items():
        if node.type == "task":
            graph.add_node(node_id, _task(plan, node_id))
        elif node.type == "decision":
            graph.add_node(node_id, lambda state: {})
        elif node.type in ("exit", "escalate"):
            graph.add_node(node_id, _end("completed" if node.type == "exit" else "escalated"))
            graph.add_edge(node_id, END)
        elif node.type != "start":
            raise ValueError(f"{plan.id}: node {node_id} is a {node.type}, which this comparison does not build")
    first = next(e.dst for e in plan.out_edges[plan.start])
    graph.add_edge(START, first)
    for node_id, node in plan.nodes.items():
        if node.type in ("task", "decision"):
            targets = {e.dst for e in plan.out_edges.get(node_id, ())} | {node_id}
            graph.add_conditional_edges(node_id, _router(plan, node_id), sorted(targets))
    return graph.compile(checkpointer=checkpointer)


class Driver:
    """Runs after run of the plan: each pass resumes the waiting step with its tool result."""

    def __init__(self, plan: Plan, checkpointer: Any, output_for: Callable[[str], dict]) -> None:
        self.graph = build(plan, checkpointer)
        self.output_for = output_for
        self.config: dict = {}
        self.waiting = ""  # the node the graph waits at; "" when no run is active

    def _waiting_at(self, result: dict) -> str:
        interrupts = result.get("__interrupt__") or ()
        return interrupts[0].value["node"] if interrupts else ""

    def one_pass(self) -> int:
        """One pass; returns its nanoseconds (negative: the pass that started a run)."""
        if not self.waiting:
            self.config = {"configurable": {"thread_id": uuid.uuid4().hex}}
            t0 = time.perf_counter_ns()
            result = self.graph.invoke({"attempts": {}, "failures": {}, "last": "", "evidence": [], "ended": ""},
                                       self.config, durability="sync")
            spent = -(time.perf_counter_ns() - t0)
        else:
            output = self.output_for(self.waiting)
            t0 = time.perf_counter_ns()
            result = self.graph.invoke(Command(resume=output), self.config, durability="sync")
            spent = time.perf_counter_ns() - t0
        self.waiting = self._waiting_at(result)
        if not self.waiting and result.get("ended") != "completed":
            raise RuntimeError(f"the LangGraph run did not complete: {result.get('ended')!r}, {result.get('evidence')}")
        return spent


def per_pass_us(plan: Plan, output_for: Callable[[str], dict], passes: int, saver: str,
                folder: str = "") -> dict[str, float]:
    """Median microseconds of the passes that judge a result (and of those that start a run), with LangGraph's
    in-memory saver or its SQLite saver on a file in ``folder``."""
    if saver == "memory":
        checkpointer: Any = InMemorySaver()
        conn = None
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(f"{folder}/checkpoints.sqlite", check_same_thread=False)
        checkpointer = SqliteSaver(conn)
    try:
        driver = Driver(plan, checkpointer, output_for)
        for _ in range(min(200, passes)):
            driver.one_pass()
        judged: list[float] = []
        starts: list[float] = []
        while len(judged) < passes:
            ns = driver.one_pass()
            (judged if ns >= 0 else starts).append(abs(ns) / 1000)
        return {"median": statistics.median(judged), "start": statistics.median(starts), "passes": len(judged)}
    finally:
        if conn is not None:
            conn.close()


def version() -> str:
    from importlib.metadata import version as installed

    return installed("langgraph")
