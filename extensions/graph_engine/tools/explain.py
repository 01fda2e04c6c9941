"""Why each edge was taken: a run's events (audit log or saved state) read against its plan.

For every judged step it lists the verdict and its reason, the outcome class the
engine routed on (success, retry: failed with retries left, exhausted), every
edge leaving the node with its condition and whether that condition applied,
and the edge that was followed.  Decisions are explained the same way.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.model import Plan
from ..core.state import clean_event
from ..core.routing import select_edge


def load_events(path: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Events and run facts from an audit file (.jsonl) or a saved state (.json)."""
    if path.endswith(".jsonl"):
        from ..session.audit import read_lines

        events = list(read_lines(path))
        head = events[0] if events else {}
        return events, {key: head[key] if isinstance(head.get(key), str) else "" for key in ("plan", "version",
                                                                                            "run")}
    with open(path, encoding="utf-8") as fh:
        state = json.load(fh)
    if isinstance(state, dict) and isinstance(state.get("graph_engine_state"), dict):
        state = state["graph_engine_state"]  # an agent's saved data
    if not isinstance(state, dict) or not isinstance(state.get("events"), list):
        raise ValueError(f"{path}: neither an audit log (.jsonl) nor a workflow state with 'events'")
    events = [e for e in map(clean_event, state["events"]) if e is not None]
    facts = {"plan": state.get("plan_id"), "version": state.get("plan_version"), "run": state.get("run_id")}
    return events, {key: value if isinstance(value, str) else "" for key, value in facts.items()}


def explain(plan: Plan | None, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for i, e in enumerate(events):
        kind = e.get("type")
        if kind == "human_answered":
            steps.append(_answer_step(plan, e, _next_edge(events[i + 1:], e.get("node", ""))))
            continue
        if kind not in ("node_verified", "decision_routed"):
            continue
        node = e.get("node", "")
        later = events[i + 1:]
        if kind == "node_verified":
            retried = any(x.get("type") == "retry_triggered" and x.get("node") == node for x in later[:1])
            outcome = "success" if e.get("outcome") == "success" else ("retry" if retried else "exhausted")
        else:
            outcome = e.get("outcome", "success")
        taken = _next_edge(later, node)
        step = {"node": node, "kind": "check" if kind == "node_verified" else "decision", "outcome": outcome,
                "reason": e.get("reason", ""), "evidence_sha256": e.get("evidence_sha256", ""),
                "edge": taken, "candidates": []}
        if plan is not None and node in plan.out_edges:
            context = _context_until(events[: i + 1])
            step["candidates"] = _candidates(plan, node, kind, outcome, context, taken)
            if taken is None and outcome == "retry":
                step["note"] = "no on_retry edge: the step was retried in place"
        steps.append(step)
    return steps


def _answer_step(plan: Plan | None, e: dict[str, Any], taken: dict[str, str] | None) -> dict[str, Any]:
    """A human gate: the user's answer, the option it picked (and how), and the options not picked."""
    node = e.get("node", "")
    step = {"node": node, "kind": "answer", "outcome": "success",
            "reason": f"answer {e.get('answer', '')!r} picked {e.get('choice', '')!r} by {e.get('by', 'answer')}",
            "evidence_sha256": "", "edge": taken, "candidates": []}
    if plan is not None and node in plan.out_edges:
        step["candidates"] = [{"to": x.dst, "condition": x.label or x.condition,
                               "verdict": "taken" if taken and taken["to"] == x.dst else "not chosen"}
                              for x in plan.out_edges[node]]
    return step


def _next_edge(later: list[dict[str, Any]], node: str) -> dict[str, str] | None:
    for x in later:
        if x.get("type") == "edge_followed" and x.get("from") == node and "to" in x:
            return {"from": x["from"], "to": x["to"], "condition": x.get("condition", "")}
        if x.get("type") in ("node_verified", "decision_routed", "human_answered"):
            return None
    return None


def _context_until(events: list[dict[str, Any]]) -> dict[str, str]:
    """The run's context as the captures so far had made it."""
    ctx: dict[str, str] = {}
    for e in events:
        ctx.update(e.get("captured") or {})
    return ctx


def _candidates(plan: Plan, node: str, kind: str, outcome: str, context: dict[str, str],
                taken: dict | None) -> list[dict[str, str]]:
    """Every edge leaving the node with the engine's own verdict (routing.select_edge) and the one followed."""
    status = {"success": "success", "retry": "retry", "exhausted": "fail"}.get(outcome, outcome)
    node_kind = "decision" if kind == "decision_routed" else "task"
    _, why, _ = select_edge(plan, node, {"status": status}, context, node_kind)
    out = []
    for entry in why:
        followed = taken is not None and entry["to"] == taken["to"] and entry["condition"] == taken["condition"]
        verdict = "taken" if followed else (f"does not apply to: {OUTCOME_WORDS.get(outcome, outcome)}"
                                            if entry["verdict"].startswith("does not match") else
                                            "applies, but another edge was taken" if entry["verdict"] != "unconditional"
                                            else "unconditional, not taken")
        out.append({"to": entry["to"], "condition": entry["condition"], "verdict": verdict})
    return out


OUTCOME_WORDS = {"success": "success", "retry": "fail, attempts left", "exhausted": "fail, no attempts left"}


def format_steps(steps: list[dict[str, Any]], facts: dict[str, Any], note: str = "") -> str:
    lines = [f"run {facts.get('run') or '?'} of plan '{facts.get('plan')}' version {facts.get('version') or '?'}"]
    if note:
        lines.append(note)
    for n, st in enumerate(steps, 1):
        said = OUTCOME_WORDS.get(st["outcome"], st["outcome"])
        what = {"check": f"check: {said}", "answer": "human gate"}.get(st["kind"], f"decision on: {said}")
        lines.append(f"{n:>3}. {st['node']}  {what}" + (f" ({st['reason']})" if st["reason"] else ""))
        for c in st["candidates"]:
            lines.append(f"       {c['condition']:<11} -> {c['to']:<24} {c['verdict']}")
        if st.get("note"):
            lines.append(f"       {st['note']}")
        elif st["edge"] is None and not st["candidates"]:
            lines.append("       (no edge followed)")
    return "\n".join(lines)
