"""Edge selection, shared by JSON and DOT plans, by the engine, `select`, `simulate` and `explain`.

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
from typing import Any, Mapping, Sequence

from .kinds import CONDITIONS, NODE_KINDS, OUTCOMES

STATUSES = OUTCOMES
SHORTHANDS = CONDITIONS
TASK_SHORTHANDS = {"success": ("on_success",), "partial_success": ("on_success",), "retry": ("on_retry",),
                   "fail": ("on_exhaust", "on_fail"), "skipped": ()}
PASS_SHORTHANDS = ("on_success",)  # start and checkpoint nodes, whatever the status
DECISION_SHORTHANDS = {"success": ("on_success",), "partial_success": ("on_success",),
                       "retry": ("on_fail", "on_retry"), "fail": ("on_fail", "on_exhaust"), "skipped": ()}
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
