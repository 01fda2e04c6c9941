"""The one routing model: which edge a node's outcome takes (``select_edge``, for the engine, `select`, `simulate`
and `explain`), where a passed step goes when nothing else is known (``success_target``: the plan's success path),
and where an outcome may lead (``possible_edges``, ``resolve``, ``settle``, ``reachable``: for the lint and the
texts the model reads).  JSON and DOT plans alike; how each node kind reads its edges is ``kinds.NODE_KINDS``.

An outcome is ``{status, preferred_label, suggested_next_ids, context_updates}`` with status one of
``success``, ``partial_success``, ``retry`` (a failed check with retries left), ``fail`` (a failed check with
the budget spent) or ``skipped``.

Conditions are either the shorthands ``on_success``, ``on_fail``, ``on_retry``, ``on_exhaust``, ``always``
or the Attractor condition language: clauses ``key=value`` / ``key!=value`` joined by ``&&``, keys
``outcome``, ``preferred_label`` and ``context.<name>``; a missing key reads as ""; comparison is exact and
case-sensitive.  Which shorthands match an outcome depends on the node:

=================  ===============================  ===============================
status             task node                        decision node (the task's outcome)
=================  ===============================  ===============================
success, partial   on_success                       on_success
retry              on_retry                         on_fail, on_retry
fail               on_exhaust, on_fail              on_fail, on_exhaust
skipped            (none)                           (none)
=================  ===============================  ===============================

Selection, in order (a ``partial_success`` that no edge names is then routed as ``success``):
1. the conditional edges that match: highest ``weight``, then expressions before shorthands (shorthands in the
   order of the table), then target id (the spec's lexical tie-break: among expressions, weight then target);
2. a retry with no matching edge stays on the node (the step is retried in place);
3. among unconditional (``always``) edges: the one whose label matches ``preferred_label`` (case, spaces and
   accelerator prefixes ``[K] ``, ``K) ``, ``K - `` ignored);
4. then the first of ``suggested_next_ids`` that an unconditional edge leads to;
5. then the highest-weight unconditional edge, ties broken by target id;
6. else no edge: the run stalls (the lint prevents this for a plan it accepts).
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping, Sequence

from .kinds import CONDITIONS, NODE_KINDS, OUTCOMES, STATUS_OF, STEP_OUTCOMES

STATUSES = OUTCOMES
SHORTHANDS = CONDITIONS
TASK_SHORTHANDS = {o.name: o.task_takes for o in STEP_OUTCOMES.values()}
PASS_SHORTHANDS = ("on_success",)  # start and checkpoint nodes, whatever the status
DECISION_SHORTHANDS = {o.name: o.decision_takes for o in STEP_OUTCOMES.values()}
_CLAUSE = re.compile(r"\s*(outcome|preferred_label|context\.[A-Za-z_][A-Za-z0-9_.]*)\s*(!=|=)\s*(.*?)\s*\Z")
_ACCEL = re.compile(r"^(?:\[[A-Za-z0-9]\]\s+|[A-Za-z0-9]\)\s+|[A-Za-z0-9]\s+-\s+)")


class ConditionError(ValueError):
    pass


def parse_condition(text: str) -> tuple[tuple[str, str, str], ...]:
    """The clauses of an expression condition; raises ConditionError naming the bad clause."""
    clauses = []
    for part in text.split("&&"):
        m = _CLAUSE.match(part)
        if m is None:
            raise ConditionError(f"clause {part.strip()!r} is not key=value or key!=value with key outcome, "
                                 "preferred_label or context.<name>")
        key, op, value = m.groups()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if key == "outcome" and value not in STATUSES:
            raise ConditionError(f"outcome {value!r} is not one of {', '.join(STATUSES)}")
        clauses.append((key, op, value))
    return tuple(clauses)


def condition_problem(text: str) -> str:
    """Why an edge condition cannot be routed on ("" for none, a shorthand, or valid clauses)."""
    text = text.strip()
    if not text or text in SHORTHANDS:
        return ""
    try:
        parse_condition(text)
    except ConditionError as exc:
        return str(exc)
    return ""


def normalise_label(label: str) -> str:
    return _ACCEL.sub("", label.strip()).strip().lower()


_KEY = re.compile(r"^\[([A-Za-z0-9])\]\s+|^([A-Za-z0-9])\)\s+|^([A-Za-z0-9])\s+-\s+")


def _key_as_written(label: str) -> str:
    m = _KEY.match(label.strip())
    return next((g for g in m.groups() if g), "") if m else ""


def accelerator(label: str) -> str:
    """The key of a label written ``[K] Label``, ``K) Label`` or ``K - Label`` ("" when there is none)."""
    return _key_as_written(label).lower()


def choice_key(label: str, fallback: str = "") -> str:
    """A human gate option's key as the spec records it: the accelerator as written, else the first character."""
    return _key_as_written(label) or (label.strip() or fallback)[:1]


def _value(key: str, outcome: Mapping[str, Any], context: Mapping[str, Any]) -> str:
    if key == "outcome":
        return str(outcome.get("status", ""))
    if key == "preferred_label":
        return str(outcome.get("preferred_label", "") or "")
    value = context.get(key)  # the spec's order: the key as written, then without "context."
    if value is None:
        value = context.get(key[len("context."):])
    return value if type(value) is str else text_of(value)


def text_of(value: Any) -> str:
    """A context value as a condition compares it: JSON's spelling (true, false, 3, 2.5; null is "")."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    return json.dumps(value, sort_keys=True)


def evaluate(clauses: Sequence[tuple[str, str, str]], outcome: Mapping[str, Any],
             context: Mapping[str, Any]) -> bool:
    for key, op, want in clauses:
        have = _value(key, outcome, context)
        if (have == want) != (op == "="):
            return False
    return True


ROUTE_KINDS = {k.name: k.route for k in NODE_KINDS.values()}  # how a node's outgoing edges are read


def route_kind(node_type: str) -> str:
    """How the edges leaving a node of this type are chosen (``select_edge``'s ``kind``): the one table the
    engine, the lint and `graph-engine select` read (``kinds.NODE_KINDS``' route)."""
    return ROUTE_KINDS.get(node_type, "task")


def select_edge(plan: Any, node_id: str, outcome: Mapping[str, Any], context: Mapping[str, Any],
                kind: str = "task", explain: bool = True) -> tuple[Any, list[dict[str, Any]], bool]:
    """(edge or None, why: each candidate with its verdict, stay: a retry kept on the node).

    ``explain=False`` skips building ``why`` (the engine's hot path); there the choice is remembered per
    (node, kind, status) when it cannot depend on anything else: every edge leaving the node is a shorthand
    or unconditional and the outcome names no preferred label and no suggested ids."""
    status = outcome.get("status", "success")
    if not explain and not outcome.get("preferred_label") and not outcome.get("suggested_next_ids"):
        memo = plan.derived("_route_memo", lambda _: {})
        key = (node_id, kind, status)
        found = memo.get(key)
        if found is None:
            found = _select(plan.out_edges.get(node_id, ()), outcome, context, kind, False)
            if all(e.condition in SHORTHANDS for e in plan.out_edges.get(node_id, ())):
                memo[key] = found
        return found
    return _select(plan.out_edges.get(node_id, ()), outcome, context, kind, explain)


def success_target(edges: Sequence[Any], node_type: str) -> str | None:
    """Where a passed step goes when nothing else is known (no context, no label): the edge ``select_edge`` takes
    for a success among the edges whose condition reads the outcome alone.  The plan's success path (the steps
    progress counts) is built from it, so the card and the run agree on the way ahead."""
    kind = route_kind(node_type)
    if kind in ("human", "branches"):  # a gate's first option (as --auto-approve takes it), the first branch
        return edges[0].dst if edges else None
    known = [e for e in edges if not e.clauses or all(key == "outcome" for key, _, _ in e.clauses)]
    edge = _select(known, {"status": "success"}, {}, kind, False)[0]
    return edge.dst if edge is not None else None


def _select(edges: Sequence[Any], outcome: Mapping[str, Any], context: Mapping[str, Any], kind: str,
            explain: bool) -> tuple[Any, list[dict[str, Any]], bool]:
    status = outcome.get("status", "success")
    wanted = (PASS_SHORTHANDS if status in STATUSES else ()) if kind == "pass" else (
        DECISION_SHORTHANDS if kind == "decision" else TASK_SHORTHANDS).get(status, ())
    matching: list[tuple[tuple, Any]] = []
    why: list[dict[str, Any]] = []
    unconditional = []
    for order, edge in enumerate(edges):
        cond = edge.condition
        if cond == "always":
            unconditional.append(edge)
            if explain:
                why.append({"to": edge.dst, "condition": cond, "weight": edge.weight, "verdict": "unconditional"})
            continue
        if cond in SHORTHANDS:
            ok = cond in wanted
            rank = (1, wanted.index(cond) if ok else 0)
        else:
            ok = evaluate(edge.clauses, outcome, context)
            rank = (0, 0)  # among expressions the spec decides: weight, then target id
        if explain:
            why.append({"to": edge.dst, "condition": cond, "weight": edge.weight,
                        "verdict": "matches" if ok else f"does not match outcome '{status}'"})
        if ok:
            matching.append(((-edge.weight, *rank, edge.dst, order), edge))
    if matching:
        chosen = min(matching, key=lambda m: m[0])[1]
        return chosen, _mark(why, chosen, "taken: best matching conditional edge"), False
    if status == "partial_success":  # no edge names it: a partial success is routed as a success
        return _select(edges, {**outcome, "status": "success"}, context, kind, explain)
    if status == "retry" and kind == "task":
        return None, _mark(why, None, ""), True
    label = normalise_label(str(outcome.get("preferred_label", "") or ""))
    if label:
        for edge in unconditional:
            if edge.label and normalise_label(edge.label) == label:
                return edge, _mark(why, edge, "taken: its label is the preferred label"), False
    for target in outcome.get("suggested_next_ids", ()) or ():
        for edge in unconditional:
            if edge.dst == target:
                return edge, _mark(why, edge, "taken: suggested next node"), False
    if unconditional:
        edge = min(unconditional, key=lambda e: (-e.weight, e.dst))
        return edge, _mark(why, edge, "taken: highest-weight unconditional edge"), False
    return None, why, False


def _mark(why: list[dict[str, Any]], chosen: Any, verdict: str) -> list[dict[str, Any]]:
    if chosen is None:
        return why
    for entry in why:
        if entry["to"] == chosen.dst and entry["condition"] == chosen.condition:
            entry["verdict"] = verdict
            break
    return why


# ── where an outcome leads: the lint, the texts and the engine read the same answers ────────────────

MAX_PASS_THROUGH = 64  # a longer chain of pass-through nodes stops the engine (and the lint says so)


def _kind(node: Any) -> str:
    kind = route_kind(node.type)
    return "task" if kind == "human" else kind  # (the lint walks a gate's edges as a task's outcomes)


def _outcome_clauses_hold(clauses: tuple, status: str) -> tuple[bool, bool]:
    """(may match, surely matches) for an expression's clauses, knowing only the outcome's status."""
    sure = True
    for key, op, value in clauses:
        if key != "outcome":
            sure = False  # depends on the context or the preferred label
        elif (value == status) != (op == "="):
            return False, False
    return True, sure


def possible_edges(plan: Any, node: Any, outcome: str) -> tuple[list[Any], bool]:
    """Every edge the engine might take for this outcome (routing.select_edge), and whether it may stay."""
    status = STATUS_OF[outcome]
    if route_kind(node.type) == "branches":  # every branch runs (one after another)
        return list(plan.out_edges.get(node.id, ())), False
    kind = _kind(node)
    wanted = ("on_success",) if kind == "pass" else (
        DECISION_SHORTHANDS if kind == "decision" else TASK_SHORTHANDS)[status]
    edges = plan.out_edges.get(node.id, ())
    found: list[Any] = []
    certain = False
    for e in edges:
        if e.condition in wanted:
            found.append(e)
            certain = True
        elif e.clauses:
            may, sure = _outcome_clauses_hold(e.clauses, status)
            if may:
                found.append(e)
                certain = certain or sure
    if certain:
        return found, False
    if outcome == "partial":  # when no edge names it, a partial success is routed as a success
        return found + [e for e in possible_edges(plan, node, "success")[0] if e not in found], False
    if status == "retry" and kind == "task":
        return found, True
    return found + [e for e in edges if e.condition == "always"], False


def resolve(plan: Any, node_id: str, outcome: str) -> tuple[str | None, ...]:
    """Where a task's outcome may lead: task, human gate or terminal nodes; None marks a possible stall.

    A retry without a matching route stays on the node."""
    node = plan.nodes[node_id]
    edges, stay = possible_edges(plan, node, outcome)
    targets: set[str | None] = {node_id} if stay else set()
    onward = "success" if outcome == "partial" else outcome  # a partial success goes on as a success
    for e in edges:  # a pass-through node further on that routes nowhere is stall_possible's finding, there
        targets |= {t for t in settle(plan, e.dst, onward) if t is not None}
    if not edges and not stay:
        targets.add(None)
    return tuple(sorted(targets, key=lambda t: (t is None, t or "")))


def settle(plan: Any, node_id: str, outcome: str) -> tuple[str | None, ...]:
    """Where passing through ``node_id`` with this outcome may lead: task, human gate or terminal nodes; None
    when a pass-through node on the way routes nowhere, or the way is a loop or longer than MAX_PASS_THROUGH
    pass-through nodes (the engine stops there)."""
    if not plan.nodes[node_id].kind.passes:
        return (node_id,)
    return _settled(plan, outcome)[node_id]


_SETTLED: dict[tuple[int, str], tuple[Any, dict[str, tuple[str | None, ...]]]] = {}


def _settled(plan: Any, outcome: str) -> dict[str, tuple[str | None, ...]]:
    """``settle`` for every pass-through node of the plan at once: each node's pass-through successors are
    read once, and a loop among them is found as a strongly connected component (linear in the plan's size;
    following every path instead doubles with each decision in a row). Kept for the last few plans."""
    key = (id(plan), outcome)
    kept = _SETTLED.get(key)
    if kept is not None and kept[0] is plan:
        return kept[1]
    passing = [n for n in plan.nodes.values() if n.kind.passes]
    succ = {n.id: [e.dst for e in possible_edges(plan, n, outcome)[0]] for n in passing}
    inner = {nid: sorted({d for d in dsts if d in succ}) for nid, dsts in succ.items()}
    result: dict[str, tuple[str | None, ...]] = {}
    length: dict[str, int] = {}
    for comp in strongly_connected(inner):  # sinks first: every component after those it leads to
        members = set(comp)
        looped = len(comp) > 1 or comp[0] in inner[comp[0]]
        out: set[str | None] = {None} if looped or any(not succ[m] for m in comp) else set()
        longest = 0
        for m in comp:
            for d in succ[m]:
                if d in members:
                    continue
                if d in succ:
                    out.update(result[d])
                    longest = max(longest, length[d])
                else:
                    out.add(d)
        if longest + 1 > MAX_PASS_THROUGH:
            out.add(None)
        for m in comp:
            result[m] = tuple(out)
            length[m] = longest + 1
    if len(_SETTLED) >= 16:
        _SETTLED.clear()
    _SETTLED[key] = (plan, result)
    return result


def reachable(starts: Iterable[str], successors: Mapping[str, Iterable[str]]) -> set[str]:
    """The nodes a path from any of ``starts`` reaches (they included)."""
    seen = set(starts)
    todo = list(seen)
    while todo:
        for nxt in successors.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def strongly_connected(graph: Mapping[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (plans can be large)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph.get(w, []))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out
