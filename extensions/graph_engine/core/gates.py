"""Human gates: the person's answer (or a timeout's default) picks one of a gate's options.

Rules of this module
--------------------
* An option is an outgoing edge of the gate; an answer names it by its accelerator key, its label or its target.
* A gate's clock starts when the run arrives there (``_gate_started``) and is read when a pass comes
  (``_gate_timeout``): Agent-Zero runs no pass on its own.
"""

from __future__ import annotations

from .model import Edge, Node, Plan
from .state import emit
from .routing import accelerator, choice_key, normalise_label
from .run import Observation, Run
from .traversal import _end, _escalate, _follow, _settle, _update_context


# ── human gates ─────────────────────────────────────────────────────────────


def human_options(plan: Plan, node: Node) -> list[Edge]:
    return list(plan.out_edges.get(node.id, ()))


def match_answer(plan: Plan, node: Node, answer: str) -> Edge | None:
    """The option an answer names: its accelerator key, its label, or its target id (any letter case)."""
    text = " ".join(answer.strip().lower().split()).rstrip(".!")
    if not text:
        return None
    said = {text, normalise_label(text)}  # "A", "approve" or the option as written: "[A] Approve"
    for edge in human_options(plan, node):
        key = accelerator(edge.label)
        if said & {k for k in (key, normalise_label(edge.label), edge.dst.lower()) if k}:
            return edge
    return None


def answer_human(run: Run, answer: str) -> None:
    s, node = run.state, run.node
    entry = s["visited"].setdefault(node.id, {"outcome": "pending", "attempts": 0, "failures": 0})
    entry["attempts"] += 1
    edge = match_answer(run.plan, node, answer)
    how = "answer"
    if edge is None:
        entry["failures"] += 1
        if entry["failures"] < 2:
            s["route_note"] = f"The answer {answer[:80]!r} matches no option; ask again, naming the options."
            emit(s, "human_reasked", node=node.id, answer=answer[:200])
            return
        edge = match_answer(run.plan, node, node.default_choice) if node.default_choice else None
        how = "default choice"
        if edge is None:
            emit(s, "human_unanswered", node=node.id, answer=answer[:200])
            _end(run, "ENDED", f"the answers to '{node.name}' matched none of its options and it has no default "
                               "choice")
            return
    take_option(run, node, edge, answer, how)


def take_option(run: Run, node: Node, edge: Edge, answer: str, how: str) -> None:
    """A human gate's option is taken (``how``: answer, default choice, timeout default, skipped by the user)."""
    s = run.state
    s["visited"].setdefault(node.id, {"outcome": "pending", "attempts": 0, "failures": 0})["outcome"] = "success"
    s["gate"] = None
    emit(s, "human_answered", node=node.id, answer=answer[:200], choice=edge.label or edge.dst, by=how)
    _update_context(run, {"human.gate.selected": choice_key(edge.label, edge.dst),
                          "human.gate.label": edge.label or edge.dst}, f"'{node.name}'")
    s["outcome"] = {"status": "success", "preferred_label": edge.label}
    s["last_outcome"] = "success"
    _follow(run, edge)
    _settle(run)


def _gate_timeout(run: Run, obs: Observation) -> None:
    """A human gate with a timeout that passed without an answer: its default option is taken and recorded as
    such; a gate without one escalates.  (Checked when a pass comes: Agent-Zero runs no pass on its own.)"""
    s, node = run.state, run.node
    gate = s.get("gate")
    if not node.kind.asks or s.get("paused") or not gate or gate.get("node") != node.id:
        return
    turns, seconds = s["turn"] - gate["turn"], obs.now - gate["at"] if obs.now and gate["at"] else 0.0
    if node.timeout_turns and turns >= node.timeout_turns:
        waited = run.fx.texts.plural(turns, "turn")
    elif node.timeout and seconds >= node.timeout:
        waited = run.fx.texts.duration(seconds)
    else:
        return
    edge = match_answer(run.plan, node, node.default_choice) if node.default_choice else None
    if edge is None:
        emit(s, "human_timed_out", node=node.id, waited=waited)
        _escalate(run, node, f"no answer to '{node.name}' within {waited}, and it has no default option")
        return
    emit(s, "human_timed_out", node=node.id, waited=waited, default=edge.label or edge.dst)
    run.fx.log("info", f"[HTN] Workflow '{run.plan.name}': no answer to '{node.name}' within {waited}; its default "
                       f"option '{edge.label or edge.dst}' was taken")
    take_option(run, node, edge, "", "timeout default")
    s["route_note"] = (f"No answer to '{node.name}' came within {waited}: its default option "
                       f"'{edge.label or edge.dst}' was taken.")


def _gate_started(run: Run, obs: Observation) -> None:
    """Start the clock of a human gate the run has just reached (each arrival at it is a new wait)."""
    s, node = run.state, run.node
    if not node.kind.asks or not (node.timeout or node.timeout_turns):
        return
    gate = s.get("gate")
    if not gate or gate.get("node") != node.id or gate.get("path_len") != s["path_len"]:
        s["gate"] = {"node": node.id, "path_len": s["path_len"], "turn": s["turn"], "at": obs.now}
