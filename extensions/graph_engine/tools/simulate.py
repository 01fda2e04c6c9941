"""Running a plan without a model: scripted outcomes, or a recorded chat replayed through the adapters.

``run_outcomes`` drives the engine's own transition code (``engine.apply_outcome``, ``engine.answer_human``,
``engine._settle``) with outcomes given per node and visit (default: success); human gates take the given
answers, or the first option with ``auto_approve``.  ``run_transcript`` replays recorded user messages and
tool results through both extension files in the Agent-Zero stand-in, exactly as a chat would.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Sequence

from ..core import engine
from ..texts import render
from ..core.model import Plan
from ..core.routing import route_kind, select_edge, text_of
from ..core.state import emit, new_state, push_path

MAX_STEPS = 1000


def start(plan: Plan) -> engine.Run:
    state = new_state(plan, "sim", "sim:0", 0)
    run = engine.Run(plan=plan, state=state, fx=engine.Effects(texts=render))
    emit(state, "plan_activated", node=plan.start, plan=plan.id, version=plan.version, triggers=[])
    push_path(state, plan.start)
    emit(state, "node_entered", node=plan.start)
    engine._settle(run)
    return run


def run_outcomes(plan: Plan, outcomes: dict[str, list[dict[str, Any]]], answers: Sequence[str] = (),
                 auto_approve: bool = False) -> dict[str, Any]:
    run = start(plan)
    script = {k: list(v) for k, v in outcomes.items()}
    answers = list(answers)
    steps: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    waiting = False
    log: list[dict[str, Any]] = list(run.state["events"])  # every event (the state keeps only the last 50)

    def collect() -> None:
        last = log[-1]["seq"] if log else 0
        log.extend(e for e in run.state["events"] if e["seq"] > last)

    ctx: dict[str, Any] = {"graph.goal": plan.description} if plan.description else {}  # the spec's run context

    def record() -> None:
        """The spec's context after a node: its updates (in the engine's context), outcome, preferred label."""
        ctx.update(run.state.get("context", {}))
        last = run.state.get("outcome") or {}
        if last.get("status"):
            ctx["outcome"] = last["status"]
        if last.get("preferred_label"):
            ctx["preferred_label"] = last["preferred_label"]

    for _ in range(MAX_STEPS):
        if run.fx.ended or run.state.get("stalled"):
            break
        node = run.node
        seq = run.state["seq"]
        if node.kind.asks:
            options = [e.label or e.dst for e in engine.human_options(plan, node)]
            questions.append({"node": node.id, "question": node.description or node.name, "options": options})
            if answers:
                answer = answers.pop(0)
            elif auto_approve and options:
                answer = options[0]
            else:
                waiting = True
                break
            engine.answer_human(run, str(answer))
            record()
            steps.append(_step(run, node.id, seq, kind="answer", answer=answer))
            collect()
            continue
        queue = script.get(node.id, [])
        outcome = queue.pop(0) if queue else {"status": "success"}
        status = outcome.get("status", "success")
        engine._update_context(run, {str(k): text_of(v) for k, v in (outcome.get("context_updates") or {}).items()},
                               "the script")
        engine.apply_outcome(run, node, status, outcome.get("reason", f"scripted {status}"),
                             preferred_label=str(outcome.get("preferred_label", "") or ""),
                             suggested=[str(x) for x in outcome.get("suggested_next_ids", []) or []])
        record()
        steps.append(_step(run, node.id, seq, kind="outcome", status=status))
        collect()
    s = run.state
    end = run.fx.ended or ("stalled" if s.get("stalled") else "waiting" if waiting else "max_steps")
    ctx.update(s.get("context", {}))
    return {
        "node_sequence": _sequence(log),
        "completed_nodes": completed(log),
        "final_status": "success" if end == "completed" else "fail",
        "end": end,
        "failure_reason": _reason(end, s, log),
        "context": ctx,
        "attempts": {nid: v.get("attempts", 0) for nid, v in s["visited"].items() if v.get("attempts")},
        "questions": questions,
        "steps": steps,
        "events": log,
    }


def completed(events: list[dict[str, Any]]) -> list[str]:
    """The spec's ``completed_nodes``: every node the run finished and left, in order (the start first; a node
    left twice is listed twice); the exit ends the run and is not listed, nor a node a goal gate jumps from."""
    return [e["from"] for e in events if e["type"] == "edge_followed" and e["condition"] != "goal_gate"]


def _reason(end: str, s: dict[str, Any], log: list[dict[str, Any]]) -> str:
    """Why a run did not succeed: the stall, the escalation, the end (an unsatisfied goal gate), the wait."""
    if end == "completed":
        return ""
    if end == "waiting":
        return f"human gate '{s['current_node']}' waits for an answer (pass --answers or --auto-approve)"
    if end == "max_steps":
        return f"no end after {MAX_STEPS} steps"
    ended = next((e.get("reason", "") for e in reversed(log) if e["type"] in ("plan_ended", "plan_escalated")), "")
    return s.get("stalled") or (s.get("escalation") or {}).get("reason", "") or ended or s.get("last_failure", "")


def _sequence(events: list[dict[str, Any]]) -> list[str]:
    return [e["node"] for e in events if e["type"] == "node_entered"]


def _step(run: engine.Run, node_id: str, seq: int, **what: Any) -> dict[str, Any]:
    """What one scripted step did: the verdict and reason, the edge and why, the retries left."""
    new = [e for e in run.state["events"] if e["seq"] > seq]
    verdict = next((e for e in new if e["type"] in ("node_verified", "human_answered")), {})
    edge = next((e for e in new if e["type"] == "edge_followed" and e["from"] == node_id), None)
    node = run.plan.nodes[node_id]
    failures = run.state["visited"].get(node_id, {}).get("failures", 0)
    step = {"node": node_id, **what, "verdict": verdict.get("outcome", verdict.get("choice", "")),
            "reason": verdict.get("reason", verdict.get("by", "")),
            "edge": {"from": edge["from"], "to": edge["to"], "condition": edge["condition"]} if edge else None,
            "retries_left": max(0, node.max_retries - failures) if node.kind.judged else None}
    if edge is None and what.get("kind") == "outcome" and not run.fx.ended:
        step["why"] = "retried in place" if run.state.get("last_outcome") == "retry" else "no edge"
    return step


def select(plan: Plan, node_id: str, outcome: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """The edge taken from a node for an outcome, as the spec orders it: the outcome's ``context_updates`` are
    applied to the context first (spec 3.2, step 4), then the edges are tried (``routing.select_edge``)."""
    node = plan.nodes[node_id]
    kind = route_kind(node.type)
    context = {**context, **(outcome.get("context_updates") or {})}
    edge, why, stay = select_edge(plan, node_id, outcome, context, kind)
    for entry in why:
        if isinstance(entry.get("weight"), float) and entry["weight"].is_integer():
            entry["weight"] = int(entry["weight"])  # the spec's weights are integers
    return {"target": node_id if stay else (edge.dst if edge else None), "stay": stay,
            "condition": edge.condition if edge else None, "why": why}


def diverges(events: list[dict[str, Any]], expected: list[dict[str, Any]]) -> str:
    """"" when every expected event appears, in order, with the given fields; else the first mismatch."""
    i = 0
    for want in expected:
        while i < len(events) and any(events[i].get(k) != v for k, v in want.items()):
            i += 1
        if i == len(events):
            return f"expected event {json.dumps(want)} not found in order"
        i += 1
    return ""


def run_transcript(plan_id: str, raw_plan: dict[str, Any], lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Replay a chat: {"user": text} | {"tool": name, "code": text, "output": text} | {"response": text} |
    {"warning": text}, through both extension files in the Agent-Zero stand-in."""
    from ..hosts.agent_zero import adapter
    from .standin import Reply, Session, terminal

    with tempfile.TemporaryDirectory() as tmp:
        lib = os.path.join(tmp, "htn_plan_library.json")
        with open(lib, "w") as fh:
            json.dump({"_meta": {"version": "2.0"}, "plans": {plan_id: raw_plan}}, fh)
        saved = {k: os.environ.get(k) for k in ("GRAPH_ENGINE_LIBRARY", "A0_ROOT")}
        os.environ["GRAPH_ENGINE_LIBRARY"], os.environ["A0_ROOT"] = lib, os.path.join(tmp, "a0")
        adapter._runtimes.clear()
        try:
            session = Session()
            for line in lines:
                if "user" in line:
                    session.user(str(line["user"]))
                    continue
                if not session.monologue_open:
                    session.user("continue")
                if "tool" in line:
                    reply = Reply(tool=str(line["tool"]), code=str(line.get("code", "")),
                                  output=terminal(str(line.get("output", ""))))
                elif "response" in line:
                    reply = Reply(final=str(line["response"]))
                else:
                    reply = Reply(warning=str(line.get("warning", "misformatted")))
                session.run_pass(reply)
            state = session.state or getattr(session.agent, "_htn_last_run", None) or {}
            logs = [e["content"] for e in session.log.entries]
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            adapter._runtimes.clear()
    events = state.get("events", [])
    ended = next((e["type"] for e in reversed(events) if e["type"].startswith("plan_") and
                  e["type"] != "plan_activated"), "")
    end = {"plan_completed": "completed", "plan_escalated": "escalated", "plan_expired": "expired",
           "plan_ended": "ended", "plan_aborted": "aborted"}.get(ended, "active" if events else "not started")
    return {"node_sequence": _sequence(events) if events else [], "completed_nodes": completed(events),
            "final_status": "success" if end == "completed" else "fail" if ended else end, "end": end,
            "failure_reason": state.get("last_failure", ""), "context": state.get("context", {}),
            "attempts": {k: v.get("attempts", 0) for k, v in state.get("visited", {}).items() if v.get("attempts")},
            "questions": [], "steps": [e for e in events if e["type"] in ("node_verified", "edge_followed",
                                                                         "human_answered")],
            "events": events, "log": logs}
