"""The text the model reads: the active workflow's context, and the notices when a run ends."""

from __future__ import annotations

from typing import Any

from .model import Edge, Node, Plan

INSTRUCTION = "Execute the current step. Do not skip ahead."
EVIDENCE_NOTE = ("Your next tool call is checked against this step only; "
                 "results of earlier calls do not count.")


def context(plan: Plan, state: dict[str, Any]) -> str:
    if plan.mode == "linear":
        return linear_context(plan, state)
    return graph_context(plan, state)


# ── linear plans: the old selector's format ─────────────────────────────────


def linear_context(plan: Plan, state: dict[str, Any]) -> str:
    total = state["total_steps"]
    done, failed = set(state["steps_completed"]), set(state["steps_failed"])
    lines = [f"[ACTIVE PLAN: {state['plan_name']}]"]
    for i, nid in enumerate(plan.success_path):
        node = plan.nodes[nid]
        label = f"  Step {i + 1}/{total}: {node.name}"
        if i in done:
            lines.append(f"{label} [DONE]")
        elif i in failed:
            lines.append(f"{label} [FAILED]")
        elif i == state["current_step"]:
            lines.append(f"{label} << CURRENT")
            lines.extend(_node_details(node))
        else:
            lines.append(f"{label} [PENDING]")
    if state.get("last_failure"):
        verb = "failed verification" if plan.nodes[state["current_node"]].on_fail == "block" else "check not met"
        lines.append(f"Step {state['current_step'] + 1} {verb}: {state['last_failure']}")
    lines.append("")
    lines.append(f"Execute Step {state['current_step'] + 1} now. Do not skip ahead. Verify before proceeding.")
    return "\n".join(lines)


# ── graph plans ─────────────────────────────────────────────────────────────


class _PlanTexts:
    """The parts of a plan's context that depend on the plan alone, made once per plan version."""

    def __init__(self, plan: Plan) -> None:
        self.header = f"[WORKFLOW: {plan.name}] step "
        self.of_total = f" of {plan.total_steps} on the success path ("
        self.task_name = {nid: n.name for nid, n in plan.nodes.items() if n.type == "task"}
        self.steps: dict[str, str] = {}  # node -> "Current step: ..." and its details
        self.forward: dict[tuple[str, int], str] = {}  # (node, failures) -> the ways forward
        for nid, node in plan.nodes.items():  # made with the plan's first context: a step met for the first
            if node.type == "task":  # time costs no more than any other (the after-retry texts come later)
                self.steps[nid] = step_text(node)
                self.forward[(nid, 0)] = "\n".join(_paths_forward(plan, node, 0))


def step_text(node: Node) -> str:
    return f"Current step: {node.name}\n" + "\n".join(_node_details(node))


def _texts(plan: Plan) -> _PlanTexts:
    return plan.derived("_render_texts", _PlanTexts)


def graph_context(plan: Plan, state: dict[str, Any]) -> str:
    node = plan.nodes[state["current_node"]]
    if node.type == "human":
        return human_context(plan, state, node)
    texts = _texts(plan)
    entry = state["visited"].get(node.id)
    failures = entry.get("failures", 0) if entry else 0
    lines = [f"{texts.header}{min(state['current_step'] + 1, plan.total_steps)}{texts.of_total}"
             f"{state['completed_nodes']} steps done)",
             "  " + " → ".join(_trail(plan, state, failures))]
    pending = _pending(plan, state, node)
    if pending:
        lines.append("  Pending: " + pending)
    if state.get("route_note") and state.get("turns_since_transition", 0) == 0:
        lines.append("  " + state["route_note"])
    lines.append(texts.steps.get(node.id) or step_text(node))
    if state.get("last_failure"):
        lines.append(f"    Last attempt failed: {state['last_failure']}")
    key = (node.id, min(failures, node.max_retries))  # past its budget a node's ways forward stay the same
    forward = texts.forward.get(key)
    if forward is None:
        forward = "\n".join(_paths_forward(plan, node, key[1]))
        if key[1] <= FORWARD_CACHED:  # a budget of a billion retries must not grow the cache for ever
            texts.forward[key] = forward
    lines.append(forward)
    if state.get("stalled"):
        lines.append(f"    STALLED: {state['stalled']}")
    lines.append(_FOOTER)
    return "\n".join(lines)


_FOOTER = f"\n{EVIDENCE_NOTE}\n{INSTRUCTION}"
FORWARD_CACHED = 8
PENDING_SHOWN = 6


def _pending(plan: Plan, state: dict[str, Any], node: Node) -> str:
    """The next success-path steps not met yet (a few: long plans must not make every pass longer)."""
    start = plan.success_index.get(node.id, -1) + 1
    names, visited, path, task_name = [], state["visited"], plan.success_path, _texts(plan).task_name
    for i in range(start, len(path)):  # no slice: a copy of a long path on every pass adds up
        nid = path[i]
        if nid not in visited:
            names.append(task_name[nid])
            if len(names) == PENDING_SHOWN:
                break
    more = plan.total_steps - start - len(names)
    return ", ".join(names) + (f" (+{more} more)" if more > 0 and len(names) == PENDING_SHOWN else "")


TRAIL_SHOWN = 8
_MARK = {"success": " [DONE]", "fail": " [FAILED]"}


def _trail(plan: Plan, state: dict[str, Any], failures: int = 0) -> list[str]:
    """The last few task nodes met, each once, oldest first, with their latest outcome."""
    parts: list[str] = []
    seen: set[str] = set()
    path, visited, current = state.get("path", []), state["visited"], state["current_node"]
    task_name = _texts(plan).task_name
    for i in range(len(path) - 1, -1, -1):
        nid = path[i]
        name = task_name.get(nid)
        if name is None or nid in seen:
            continue
        seen.add(nid)
        if len(parts) == TRAIL_SHOWN:
            parts.append("...")
            break
        if nid == current:
            parts.append(f"{name} << CURRENT{_attempt(plan.nodes[nid], failures)}")
            continue
        entry = visited.get(nid)
        parts.append(name + _MARK.get(entry.get("outcome", "") if entry else "", " [...]"))
    parts.reverse()
    return parts


def _attempt(node: Node, failures: int) -> str:
    if node.max_retries <= 0:
        return ""
    return f" (attempt {min(failures, node.max_retries) + 1}/{node.max_retries + 1})"


def human_context(plan: Plan, state: dict[str, Any], node: Node) -> str:
    options = [e.label or plan.nodes[e.dst].name for e in plan.out_edges.get(node.id, ())]
    lines = [f"[WORKFLOW: {plan.name}] waiting for the user's decision ({state['completed_nodes']} steps done)",
             "  " + " → ".join(_trail(plan, state) + [f"{node.name} << QUESTION"])]
    if state.get("route_note"):
        lines.append("  " + state["route_note"])
    lines.append(f"Question for the user: {node.description or node.name}")
    lines.append("Options: " + "; ".join(options))
    lines.append("")
    lines.append("Ask the user this question with the options above, using the response tool, and stop. "
                 "Do not choose for the user and do not execute further steps until the user answers.")
    return "\n".join(lines)


def _node_details(node: Node) -> list[str]:
    lines = [f"    Action: {node.action or node.name}"]
    if node.tool:
        lines.append(f"    Tool: {node.tool}")
    if node.tool_hint:
        lines.append(f"    Hint: {node.tool_hint}")
    if node.verify is not None:
        lines.append(f"    Verify: {node.verify.describe()}")
    return lines


def target_words(plan: Plan, edge: Edge) -> str:
    dst = plan.nodes[edge.dst]
    if dst.type == "escalate":
        return f"escalate: {dst.reason or dst.name}"
    if dst.type == "exit":
        return f"finish: {dst.name}"
    return dst.name


def _paths_forward(plan: Plan, node: Node, failures: int) -> list[str]:
    edges = plan.out_edges.get(node.id, ())
    by = {c: next((e for e in edges if e.condition == c), None)
          for c in ("on_success", "on_fail", "on_retry", "on_exhaust", "always")}
    lines = []
    ok = by["on_success"] or by["always"]
    if ok:
        lines.append(f"    On success → {target_words(plan, ok)}")
    if node.max_retries > failures:
        nxt = failures + 2
        if by["on_retry"]:
            lines.append(f"    On fail (retries left) → {target_words(plan, by['on_retry'])} "
                         f"(retry {failures + 1}/{node.max_retries})")
        else:
            lines.append(f"    On fail (retries left) → retry {node.name} (attempt {nxt}/{node.max_retries + 1})")
    out = by["on_exhaust"] or by["on_fail"] or by["always"]
    label = "On fail (exhausted)" if node.max_retries > 0 else "On fail"
    lines.append(f"    {label} → {target_words(plan, out)}" if out else f"    {label} → no route: the workflow stalls")
    return lines


# ── notices when a run ends ─────────────────────────────────────────────────


def _summary(state: dict[str, Any]) -> str:
    return f"{state.get('completed_nodes', 0)}/{state.get('total_nodes', 0)} steps done"


def completed_notice(state: dict[str, Any], exit_name: str) -> str:
    return (f"[WORKFLOW COMPLETE: {state['plan_name']}]\n  Finished at: {exit_name} ({_summary(state)})\n\n"
            "The workflow is complete. Report the result to the user.")


def escalated_notice(state: dict[str, Any], node: Node) -> str:
    return (f"[WORKFLOW ESCALATED: {state['plan_name']}]\n  Reason: {node.reason or node.name}\n"
            f"  PACE level: {node.pace_level}\n  Completed: {_summary(state)}\n\n"
            "The current approach has failed. Stop executing workflow steps; tell the user what failed "
            "and ask for guidance.")


def ended_notice(state: dict[str, Any], title: str, reason: str) -> str:
    return (f"[WORKFLOW {title}: {state['plan_name']}]\n  Reason: {reason}\n  Completed: {_summary(state)}\n\n"
            "The workflow is no longer tracked. Continue with the user's request.")


def hold(plan: Plan, state: dict[str, Any]) -> str:
    """PACE emergency: the step is not to be executed; the model stops and reports."""
    node = plan.nodes.get(state.get("current_node", ""))
    where = node.name if node else state.get("current_node", "")
    return (f"[WORKFLOW ON HOLD: {state['plan_name']}]\n  PACE level: EMERGENCY\n  Stopped at: {where} "
            f"({_summary(state)})\n\nDo not execute further workflow steps. Stop and report to the user: what was "
            "done, what failed, and the state things are in now; then wait for the user's instructions.")


def resumed_notice(state: dict[str, Any], plan: Plan) -> str:
    node = plan.nodes.get(state.get("current_node", ""))
    where = node.name if node else state.get("current_node", "")
    return (f"[WORKFLOW RESUMED: {state['plan_name']}]\n  The workflow was restored after a restart or chat "
            f"reload and continues at: {where} ({_summary(state)}, retry counts kept). Results from before "
            "the restart are not re-checked; run the current step again if its result is not in view.")
