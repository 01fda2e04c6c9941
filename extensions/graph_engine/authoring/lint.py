"""Lint: what the schema cannot see.  Stable rule ids, a severity and a fix for each finding.

The loop analysis follows the engine's routing exactly (``routing.possible_edges`` and ``routing.resolve``):

* a task's check gives one of three outcomes: ``success``; ``retry`` (failed, the
  node's budget has retries left: at most ``max_retries`` times per run);
  ``exhausted`` (failed with the budget spent: any number of times);
* pass-through nodes (start, checkpoint, decision) are followed to the next task
  or terminal node, decisions choosing by the outcome that reached them.

This gives, per task node and outcome, the next task or terminal node.  Only
``retry`` transitions spend a budget.  A cycle made of ``success`` and
``exhausted`` transitions alone can repeat forever: that is ``cycle_unbounded``.
When there is none, every run visits at most (retries + 1) x (longest chain of
free transitions) task nodes, each for at most ``stale_after_turns`` turns, and
never more than ``max_turns`` turns: that is the plan's worst case.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping

from ..core.fanout import inside as branch_nodes
from ..core.model import Edge, Node, Plan
from ..core.patterns import repeat_chain
from ..core.routing import (MAX_PASS_THROUGH, STATUS_OF, _outcome_clauses_hold, condition_problem, possible_edges, reachable,
                      resolve, select_edge, strongly_connected)

ERROR, WARNING = "error", "warning"

RULES: Mapping[str, tuple[str, str]] = {
    "schema": (ERROR, "the plan does not follow plan_library.schema.json"),
    "edge_target_exists": (ERROR, "an edge names a node that does not exist"),
    "regex_invalid": (ERROR, "a regular expression does not compile"),
    "regex_unsafe": (ERROR, "a regular expression could backtrack catastrophically"),
    "regex_slow": (WARNING, "a regular expression whose repeats re-scan each other: slow on long lines"),
    "pace_level": (ERROR, "an escalate node names no valid PACE level (primary, alternate, contingent, emergency)"),
    "start_node": (ERROR, "exactly one entry: at most one start node, and it is graph.start (a DOT plan: exactly "
                          "one, shape=Mdiamond or the id start)"),
    "start_no_incoming": (ERROR, "no edge leads back into the start node"),
    "terminal_node": (ERROR, "a graph needs an exit node (a DOT plan: exactly one)"),
    "exit_no_outgoing": (ERROR, "exit and escalate nodes end the run; edges out of them are never taken"),
    "reachability": (ERROR, "every node is reachable from the start node"),
    "dead_end": (ERROR, "every node that is not an exit or escalation has a way out"),
    "duplicate_condition": (WARNING, "two edges from one node with the same condition and weight: one is never taken"),
    "decision_branches": (ERROR, "a decision needs an on_success edge and an edge for failure"),
    "failure_unrouted": (ERROR, "a check that can fail has no route once its retries are spent"),
    "stall_possible": (ERROR, "an outcome that reaches a node and that its edges do not route for every context "
                              "value: the run would stall there"),
    "failure_as_success": (WARNING, "a failed check leads where success leads (an 'always' edge, or an on_exhaust "
                                    "edge to the success route's node)"),
    "cycle_unbounded": (ERROR, "a loop that no retry budget ends"),
    "escalate_reason": (WARNING, "an escalate node without a reason tells the user nothing"),
    "no_triggers": (WARNING, "a plan without trigger phrases or examples never starts by a request"),
    "threshold_unreachable": (ERROR, "the trigger threshold is higher than the plan can score"),
    "trigger_overlap": (WARNING, "one trigger phrase contains another of the same plan: one phrase scores twice"),
    "duplicate_trigger": (WARNING, "the same trigger phrase in two plans (or twice in one)"),
    "example_routing": (WARNING, "an example that does not start its plan, or a not-example that starts a plan"),
    "text_markup": (WARNING, "a text the page shows (a plan's or step's name or description, an escalation reason, a "
                             "check's wording, an edge label) holds markup: an HTML tag or entity, icon:// or img://, "
                             "a markdown image or link"),
    "text_bidi": (WARNING, "a text the page shows holds a bidirectional control (U+202A-U+202E, U+2066-U+2069, "
                           "U+200E, U+200F, U+061C): what the person reads is reordered"),
    "text_invisible": (WARNING, "a text the page shows holds an invisible format or control character (zero-width "
                                "space, word joiner, byte order mark, soft hyphen, escape, ...)"),
    # DOT files (Attractor rule ids where the rule is the same)
    "syntax": (ERROR, "a DOT file that does not parse (the message gives line:column)"),
    "duplicate_plan": (ERROR, "a DOT plan whose id (the digraph name) is already taken"),
    "type_known": (WARNING, "a node whose shape or type names no handler (it runs as a task)"),
    "manager_child": (ERROR, "a manager node (house) that names no child plan, or names its own plan"),
    "condition_syntax": (ERROR, "an edge condition the engine does not route on"),
    "retry_target_exists": (WARNING, "retry_target or fallback_retry_target names no node (it is ignored)"),
    "goal_gate_has_retry": (WARNING, "a goal gate without a retry target"),
    "prompt_on_llm_nodes": (WARNING, "a task node without a prompt or label"),
    "stylesheet_syntax": (ERROR, "a model_stylesheet that is not 'selector { key: value; }' rules"),
    "fidelity_valid": (WARNING, "a fidelity value outside full, truncate, compact, summary:low|medium|high"),
    "human_options": (ERROR, "a human gate option (edge) without a label"),
    "fan_in_policy": (ERROR, "a fan-in whose policy can never be met: an unknown policy, required with no branch or "
                             "naming one that is not a branch, a quorum over the number of branches"),
    "fan_out": (ERROR, "a parallel node over a list (over) that cannot fan out: more than one edge, no fan-in, a "
                       "value no step captures, or a fan-in that names branches (required); over on another node"),
    "reducer": (ERROR, "a reduce that cannot merge: an unknown reducer, reduce on a node that is not a fan-in, or a "
                       "name no step of its branches captures"),
    "parallel_branches": ("info", "a parallel node's branches and the fan-in they meet at (each branch runs in a "
                                  "subordinate agent, at once; without a fan-in, one after another)"),
}



@dataclass(frozen=True)
class Diagnostic:
    rule: str
    severity: str
    plan: str
    node: str | None
    edge: str | None
    message: str
    fix: str
    line: int | None = None  # for DOT files: 1-based position of the node, edge or graph
    col: int | None = None
    file: str | None = None
    src: str | None = None  # an edge rule's edge, as (from, to)
    dst: str | None = None
    index: int | None = None  # the edge's position in the plan's edge list (to locate it in a DOT file)

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items()
               if (v is not None or k in ("node", "edge")) and k not in ("src", "dst", "index")}
        if self.src is not None:
            out["from"], out["to"] = self.src, self.dst
        return out

    def text(self) -> str:
        at = f"{self.file or ''}:{self.line}:{self.col}: " if self.line is not None else ""
        if self.plan == "(library)" or self.plan == self.file:  # the file's own problem, not a plan's
            where = "the library" if self.plan == "(library)" else "the file"
        else:
            where = f"plan '{self.plan}'" + (f" node '{self.node}'" if self.node else "") + \
                    (f" edge {self.edge}" if self.edge else "")
        fix = f" (fix: {self.fix})" if self.fix else ""
        message = self.message
        if self.edge and message.startswith(f"edge {self.edge}: "):  # (said once: the JSON keeps it in the message)
            message = message[len(f"edge {self.edge}: "):]
        return f"{at}{self.severity} [{self.rule}] {where}: {message}{fix}"


def diag(rule: str, plan: str, message: str, fix: str, node: str | None = None,
         edge: Edge | None = None, index: int | None = None) -> Diagnostic:
    """A finding; an edge finding names its edge ``from -> to`` and carries both ends."""
    return Diagnostic(rule=rule, severity=RULES[rule][0], plan=plan, node=node,
                      edge=f"{edge.src} -> {edge.dst}" if edge is not None else None, message=message, fix=fix,
                      src=edge.src if edge is not None else None, dst=edge.dst if edge is not None else None,
                      index=index)


# ── routing, as the engine does it ──────────────────────────────────────────




def route_gap(plan: Plan, node: Node, outcome: str) -> str:
    """Why this outcome may route nowhere from the node ("" when it always routes somewhere): no edge matches
    it, or every edge that matches also needs a context value or a preferred label that may not be there."""
    if outcome == "partial":  # an edge that surely takes it, else it is routed as a success
        sure = any(e.clauses and _outcome_clauses_hold(e.clauses, "partial_success")[1]
                   for e in plan.out_edges.get(node.id, ()))
        return "" if sure else route_gap(plan, node, "success")
    edges, stay = possible_edges(plan, node, outcome)
    if stay or node.kind.forks or node.kind.joins or node.kind.asks or node.kind.manages:  # branches, a policy, an
        # answer or a child's outcome route them
        return ""
    status = STATUS_OF[outcome]
    if not edges:
        outs = plan.out_edges.get(node.id, ())
        listed = ", ".join(f"{e.src} -> {e.dst} [{e.condition}]" for e in outs)
        return f"none of its edges ({listed}) matches '{status}'" if outs else "no edge leaves it"
    singles = set()
    for e in edges:
        if not e.clauses or _outcome_clauses_hold(e.clauses, status)[1]:
            return ""  # a shorthand, an unconditional edge, or clauses on the outcome alone: it always matches
        rest = tuple(c for c in e.clauses if c[0] != "outcome")
        if len(rest) == 1:
            singles.add(rest[0])
    if any((key, "!=" if op == "=" else "=", value) in singles for key, op, value in singles):
        return ""  # key=v on one edge and key!=v on another: every value matches one of them
    conds = "; ".join(f"{e.src} -> {e.dst} [{e.condition}]" for e in edges)
    return f"every edge that matches it also needs a context value or label ({conds}); any other value routes nowhere"


def reached(plan: Plan) -> list[tuple[str, str, str | None]]:
    """Every (node, outcome, from task) the engine can route on: each task's outcomes, and each pass-through
    node with the outcome that reaches it (the start with "success")."""
    out: list[tuple[str, str, str | None]] = []
    seen: set[tuple[str, str]] = set()

    def walk(nid: str, outcome: str, origin: str | None, depth: int = 0) -> None:
        node = plan.nodes[nid]
        if not node.kind.passes or (nid, outcome) in seen or depth > MAX_PASS_THROUGH:
            return
        seen.add((nid, outcome))
        out.append((nid, outcome, origin))
        for e in possible_edges(plan, node, outcome)[0]:
            walk(e.dst, outcome, origin, depth + 1)

    walk(plan.start, "success", None)
    for node in plan.nodes.values():
        if not node.kind.judged:
            continue
        outcomes = ["success"] + (["retry"] if can_fail(node) and node.max_retries > 0 else []) + \
            ([("partial" if node.allow_partial else "exhausted")] if can_fail(node) else [])
        for outcome in outcomes:
            out.append((node.id, outcome, node.id))
            for e in possible_edges(plan, node, outcome)[0]:
                walk(e.dst, "success" if outcome == "partial" else outcome, node.id)
    return out


def _stall_rules(plan: Plan) -> list[Diagnostic]:
    """A run that can reach a node with an outcome its edges do not route: the run would stall there."""
    found = []
    for nid, outcome, origin in reached(plan):
        node = plan.nodes[nid]
        if not plan.out_edges.get(nid):
            continue  # no edge at all: dead_end says it
        if node.kind.judged and not possible_edges(plan, node, outcome)[0]:
            continue  # no edge for it: failure_unrouted / dead_end say it at the task (or it stays: no gap)
        why = route_gap(plan, node, outcome)
        if not why:
            continue
        came = "" if origin in (None, nid) else f" (reached from '{origin}' with outcome '{outcome}')"
        found.append(diag("stall_possible", plan.id, f"outcome '{outcome}'{came}: {why}; the run would stall at "
                          f"'{nid}'", f"add an edge from {nid} for outcome {STATUS_OF[outcome]} (or an "
                          "unconditional edge as the fallback)", node=nid))
    return found


def can_fail(node: Node) -> bool:
    return node.kind.judged and node.verify is not None


def transitions(plan: Plan) -> dict[str, dict[str, tuple[str | None, ...]]]:
    """Per task node: outcome -> the task, human gate or terminal nodes it may lead to (None = a stall)."""
    table: dict[str, dict[str, tuple[str | None, ...]]] = {}
    for node in plan.nodes.values():
        if not node.kind.judged:
            continue
        outs = {"success": resolve(plan, node.id, "success")}
        if can_fail(node):
            if node.max_retries > 0:
                outs["retry"] = resolve(plan, node.id, "retry")
            # allow_partial: a failure with the retries spent is routed as a partial success (spec 3.5-3.6)
            outs["exhausted"] = resolve(plan, node.id, "partial" if node.allow_partial else "exhausted")
        table[node.id] = outs
    return table


# ── a graph that does not compile: what can still be said ──────────────────


def raw_structure(plan_id: str, raw: Any) -> list[Diagnostic]:
    """For a graph plan that does not compile: every edge naming a missing node, every bad condition, and
    every node the start does not reach, read from the JSON as written (one error hides no other)."""
    graph = raw.get("graph") if isinstance(raw, dict) else None
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), dict):
        return []
    nodes = graph["nodes"]
    edges = graph.get("edges") if isinstance(graph.get("edges"), list) else []
    found: list[Diagnostic] = []
    out: dict[str, list[str]] = {}
    for i, e in enumerate(edges):
        if not isinstance(e, dict):
            continue
        src, dst = e.get("from"), e.get("to")
        pair = Edge(src=str(src), dst=str(dst))
        for end, name in (("from", src), ("to", dst)):
            if not (isinstance(name, str) and name in nodes):
                found.append(diag("edge_target_exists", plan_id, f"plans.{plan_id}.graph.edges[{i}].{end}: names no "
                                  f"node ({name!r})", f"point '{end}' at a declared node", edge=pair, index=i))
        cond = e.get("condition", "always")
        problem = condition_problem(cond) if isinstance(cond, str) else ""
        if problem:
            found.append(diag("condition_syntax", plan_id, f"plans.{plan_id}.graph.edges[{i}].condition: edge "
                              f"{src} -> {dst}: condition {cond!r}: {problem}", "use a shorthand or clauses "
                              "key=value / key!=value joined by &&", edge=pair, index=i))
        if isinstance(src, str) and isinstance(dst, str) and dst in nodes:
            out.setdefault(src, []).append(dst)
    start = graph.get("start")
    if isinstance(start, str) and start in nodes:
        seen = reachable([start], out)
        found += [diag("reachability", plan_id, "no path from the start node reaches it",
                       "add an edge to it or remove the node", node=nid) for nid in nodes if nid not in seen]
    return found


# ── per-plan rules ──────────────────────────────────────────────────────────


@dataclass(frozen=True)
class PlanReport:
    plan: str
    diagnostics: tuple[Diagnostic, ...]
    worst_case_turns: int | None  # None when a loop is unbounded (the turn ceiling still applies)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == ERROR)


def lint_plan(plan: Plan) -> PlanReport:
    found: list[Diagnostic] = []
    found += _trigger_rules(plan)
    found += _pattern_rules(plan)
    found += _text_rules(plan)
    if plan.mode == "linear":
        worst = min(plan.max_turns, (len(plan.nodes) - 1) * plan.stale_after_turns)
        return PlanReport(plan.id, tuple(found), worst)
    found += _shape_rules(plan)
    table = transitions(plan)
    found += _routing_rules(plan, table)
    found += _stall_rules(plan)
    cycles = _free_cycles(plan, table) + _pass_through_cycles(plan)
    for members in cycles:
        found.append(diag("cycle_unbounded", plan.id,
                          f"the loop through {', '.join(members)} can repeat without spending a retry budget",
                          "give a node in the loop max_retries and send its on_retry edge around the loop and its "
                          "on_exhaust edge out of it", node=members[0]))
    if cycles:
        worst = None
    elif any(n.kind.forks for n in plan.nodes.values()):
        worst = plan.max_turns  # branches run one after another; the turn ceiling is the bound that holds
    else:
        worst = _worst_case(plan, table)
    return PlanReport(plan.id, tuple(found), worst)


def _pattern_rules(plan: Plan) -> list[Diagnostic]:
    """Patterns whose cost grows faster than the square of the output (two repeats in a row that can match the
    same text, such as .*=.*x): the engine bounds them, but they are slow and, without the regex package, read
    less of a long output."""
    found = []
    for node in plan.nodes.values():
        v = node.verify
        for field_name, pattern in (("value", v.pattern), ("fail_if", v.fail_pattern), ("capture", v.capture_pattern)) \
                if v is not None else ():
            if pattern is not None and repeat_chain(pattern.pattern, pattern.flags) >= 2:
                found.append(diag("regex_slow", plan.id, f"verify.{field_name} /{pattern.pattern}/ has repeats that "
                                  "can re-scan each other's text: slow on a long line",
                                  "make each repeat stop where the next part starts, e.g. [^=]*=[^x]*x instead of "
                                  ".*=.*x", node=node.id))
    return found


def _shape_rules(plan: Plan) -> list[Diagnostic]:
    pid, found = plan.id, []
    starts = [n.id for n in plan.nodes.values() if n.kind.begins]
    if len(starts) > 1 or (starts and starts[0] != plan.start):
        found.append(diag("start_node", pid, f"start nodes {starts}, graph.start is '{plan.start}'",
                          "keep one node of type start and name it in graph.start", node=plan.start))
    for e in plan.edges:
        if e.dst == plan.start and plan.nodes[plan.start].kind.begins:
            found.append(diag("start_no_incoming", pid, "an edge leads into the start node",
                              "point the edge at the first task instead", edge=e, index=_index(plan, e)))
    if not any(n.kind.ends == "completed" for n in plan.nodes.values()):
        found.append(diag("terminal_node", pid, "no exit node", 'add a node of type "exit" and an edge to it'))
    reachable = _reachable(plan)
    for node in plan.nodes.values():
        outs = plan.out_edges.get(node.id, ())
        if node.kind.terminal:
            for e in outs:
                found.append(diag("exit_no_outgoing", pid, f"{node.type} node has an outgoing edge",
                                  "remove the edge", node=node.id, edge=e, index=_index(plan, e)))
            for name, fix in node.kind.needs:  # what the kind's row asks of its nodes
                if not str(getattr(node, name)).strip():
                    found.append(diag(f"{node.type}_{name}", pid, f"{node.type} node has no {name}", fix, node=node.id))
        elif not outs:
            found.append(diag("dead_end", pid, f"{node.type} node has no outgoing edge",
                              "add an edge to the next node, an escalation or an exit", node=node.id))
        if node.id not in reachable:
            found.append(diag("reachability", pid, "no path from the start node reaches it",
                              "add an edge to it or remove the node", node=node.id))
        seen: set[tuple[str, str, float]] = set()
        for e in outs if not node.kind.forks else ():  # a parallel node's edges are its branches
            key = (e.condition, e.label if e.condition == "always" else "", e.weight)
            if key in seen:
                found.append(diag("duplicate_condition", pid, f"second '{e.condition}' edge from the node with the "
                                  "same weight: only the one to the first target id is ever taken",
                                  "merge the edges or give one another condition (or weight, or label)",
                                  node=node.id, edge=e, index=_index(plan, e)))
            seen.add(key)
        found += _fan_out_rules(plan, node, outs)
        if node.kind.manages and (not node.child or node.child == plan.id):
            found.append(diag("manager_child", pid, "the manager names no child plan" if not node.child else
                              "the manager names its own plan as its child", "set child (DOT manager.child, or the "
                              "graph's stack.child_dotfile) to the id of another plan of the library", node=node.id))
        if node.kind.forks:
            fan_in = plan.fan_in_of.get(node.id)
            if fan_in and not node.over:
                found += _fan_in_rules(plan, plan.nodes[fan_in], [e.dst for e in outs])
            found.append(diag("parallel_branches", pid, f"branches {', '.join(e.dst for e in outs)} " + (
                f"meet at '{fan_in}': each runs in a subordinate agent, at most {node.max_parallel} at once "
                "(one after another with sequential: true)" if fan_in else
                "meet at no fan_in node: they run one after another, in the order listed, in the run's own chat"),
                "none needed" if fan_in else "add a fan_in node every branch reaches, to run them at once",
                node=node.id))
        if node.kind.asks and any(not e.label for e in outs):
            found.append(diag("human_options", pid, "a human gate's edge has no label, so the user cannot choose it",
                              'label every option, e.g. "[A] Approve"', node=node.id))
        if node.kind.decides or node.kind.manages:
            ok_edges = {(e.dst, e.condition) for e in possible_edges(plan, node, "success")[0]}
            bad_edges = {(e.dst, e.condition) for e in possible_edges(plan, node, "exhausted")[0]}
            if not ok_edges or not bad_edges or ok_edges == bad_edges:
                conds = sorted({e.condition for e in outs})
                found.append(diag("decision_branches", pid, f"decision routes only on {conds or 'nothing'}",
                                  "give it an on_success edge and an on_fail (or on_retry/on_exhaust) edge",
                                  node=node.id))
    return found


def _captured_names(plan: Plan, nodes: Any) -> set[str]:
    return {name for nid in nodes for v in [plan.nodes[nid].verify] if v is not None and v.capture_pattern is not None
            for name in v.capture_pattern.groupindex}


def _fan_out_rules(plan: Plan, node: Node, outs: tuple[Edge, ...]) -> list[Diagnostic]:
    """A parallel node over a list and a fan-in's reducers: each can do what it says, or is refused with why."""
    found, pid = [], plan.id
    if node.over and not node.kind.forks:
        found.append(diag("fan_out", pid, f"over='{node.over}' on a {node.type} node: only a parallel node fans out",
                          "make it a parallel node (shape=component) or remove over", node=node.id))
    elif node.over:
        fan_in = plan.fan_in_of.get(node.id)
        if len(outs) != 1:
            found.append(diag("fan_out", pid, f"a parallel node over the list '{node.over}' has {len(outs)} edges: its "
                              "one edge is the branch each item runs", "keep one edge, to the branch's first step",
                              node=node.id))
        if not fan_in:
            found.append(diag("fan_out", pid, f"the branches over '{node.over}' meet at no fan-in node",
                              "add a fan_in node (shape=tripleoctagon) the branch reaches", node=node.id))
        if node.over not in _captured_names(plan, plan.nodes) | {"item"}:
            found.append(diag("fan_out", pid, f"no step captures '{node.over}', so the list is always missing",
                              f"capture it in an earlier step's check: verify.capture (?P<{node.over}>...)",
                              node=node.id))
        if fan_in and plan.nodes[fan_in].fan_in_policy == "required":
            found.append(diag("fan_out", pid, f"the fan-in '{fan_in}' names required branches, but the branches over "
                              f"'{node.over}' are known only when the run reaches it",
                              "use all, any, quorum or majority", node=fan_in))
    if node.reduce and not node.kind.joins:
        found.append(diag("reducer", pid, f"reduce on a {node.type} node: only a fan-in merges its branches' values",
                          "move reduce to the fan_in node", node=node.id))
    elif node.reduce:
        forks = [p for p, f in plan.fan_in_of.items() if f == node.id]
        inside = {n for p in forks for e in plan.out_edges.get(p, ()) for n in branch_nodes(plan, e.dst, node.id)}
        missing = [name for name, _ in node.reduce if name not in _captured_names(plan, inside)]
        if missing:
            found.append(diag("reducer", pid, f"reduce names {', '.join(map(repr, missing))}, which no step of the "
                              "branches meeting here captures", "capture it in a branch's check (?P<name>...) or "
                              "remove it from reduce", node=node.id))
    return found


def _fan_in_rules(plan: Plan, fan_in: Node, branches: list[str]) -> list[Diagnostic]:
    """A fan-in's policy against the branches that meet at it: one it can never pass is refused with its reason."""
    found = []
    if fan_in.fan_in_policy == "required":
        strangers = [b for b in fan_in.required if b not in branches]
        if strangers:
            found.append(diag("fan_in_policy", plan.id, f"required names {', '.join(map(repr, strangers))}, which "
                              f"{'is' if len(strangers) == 1 else 'are'} not a branch meeting here (the branches: "
                              f"{', '.join(branches)}), so the policy can never be met",
                              "name branches by their first node's id", node=fan_in.id))
    if fan_in.fan_in_policy == "quorum" and fan_in.quorum > len(branches):
        found.append(diag("fan_in_policy", plan.id, f"quorum {fan_in.quorum} but only {len(branches)} branches meet "
                          "here, so the policy can never be met",
                          f"set quorum to at most {len(branches)}", node=fan_in.id))
    return found


def _index(plan: Plan, edge: Edge) -> int:
    return next(i for i, e in enumerate(plan.edges) if e is edge)


def _reachable(plan: Plan) -> set[str]:
    return reachable([plan.start], {nid: [e.dst for e in es] for nid, es in plan.out_edges.items()})


def _routing_rules(plan: Plan, table: Mapping[str, Mapping[str, str | None]]) -> list[Diagnostic]:
    pid, found = plan.id, []
    for nid, outs in table.items():
        node = plan.nodes[nid]
        if not plan.out_edges.get(nid):
            continue  # dead_end says it
        for outcome, targets in outs.items():
            if None in targets:
                rule = "failure_unrouted" if outcome != "success" else "dead_end"
                found.append(diag(rule, pid, f"no route for outcome '{outcome}': the run would stall here",
                                  "add an on_exhaust (or on_fail) edge to an escalation" if outcome != "success"
                                  else "add an on_success edge", node=nid))
        if not can_fail(node) or node.continue_on_fail or node.allow_partial:
            continue
        if outs.get("exhausted") and set(outs["exhausted"]) == set(outs["success"]):
            found.append(diag("failure_as_success", pid,
                              f"a failed check goes on to '{', '.join(map(str, outs['success']))}' exactly as "
                              "success does",
                              "add an on_exhaust edge to an escalation, or set continue_on_fail: true if that is "
                              "the intent", node=nid))
    return found


def _pass_through_cycles(plan: Plan) -> list[list[str]]:
    """Loops of nodes that pass straight on (start, checkpoint), each following the edge the run would take (a tie
    of equal edges goes to the first target id, as the spec says): the run would go round them for ever."""
    found, done = [], set()
    for first in plan.nodes.values():
        if first.kind.route != "pass" or first.id in done:
            continue
        path, nid = [], first.id
        while nid is not None and nid not in done and nid not in path and plan.nodes[nid].kind.route == "pass":
            path.append(nid)
            edge, _, _ = select_edge(plan, nid, {"status": "success"}, {}, "pass", explain=False)
            nid = edge.dst if edge is not None else None
        if nid in path:
            found.append(path[path.index(nid):])
        done.update(path)
    return found


def _free_cycles(plan: Plan, table: Mapping[str, Mapping[str, str | None]]) -> list[list[str]]:
    graph = {nid: sorted({t for o, ts in outs.items() if o != "retry" for t in ts if t in table})
             for nid, outs in table.items()}
    return [c for c in strongly_connected(graph) if len(c) > 1 or c[0] in graph[c[0]]]


def _worst_case(plan: Plan, table: Mapping[str, Mapping[str, str | None]]) -> int:
    """Turns a run can stay active at most (see the module docstring)."""
    longest: dict[str, int] = {}

    def chain(nid: str) -> int:  # free transitions form a DAG here
        stack = [nid]
        while stack:
            cur = stack[-1]
            nexts = sorted({t for o, ts in table[cur].items() if o != "retry" for t in ts if t in table and t != cur})
            todo = [t for t in nexts if t not in longest]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            longest[cur] = 1 + max((longest[t] for t in nexts), default=0)
        return longest[nid]

    length = max((chain(n) for n in table), default=0)
    budget = sum(plan.nodes[n].max_retries for n in table if "retry" in table[n])
    visits = (budget + 1) * max(length, 1)
    return min(plan.max_turns, visits * plan.stale_after_turns)


# ── triggers ────────────────────────────────────────────────────────────────


def _trigger_rules(plan: Plan) -> list[Diagnostic]:
    pid, found = plan.id, []
    if not plan.all_triggers:
        if plan.examples:
            return []  # (it starts by meaning, when its examples are close to the request)
        return [diag("no_triggers", pid, "the plan has no trigger phrases and no examples",
                     "add phrases users say for this task, or requests in everyday words as examples")]
    best = len(set(plan.triggers)) + (1 if plan.domains else 0)
    if best < plan.trigger_threshold and not plan.strong_triggers:
        found.append(diag("threshold_unreachable", pid,
                          f"trigger_threshold {plan.trigger_threshold} but the plan can score at most {best}",
                          "lower trigger_threshold or add trigger phrases"))
    for a in plan.all_triggers:
        for b in plan.triggers:  # a strong phrase starts the plan alone: counting it twice changes nothing
            if a != b and contains_phrase(b, a):
                found.append(diag("trigger_overlap", pid, f"'{b}' always also matches '{a}'",
                                  f"drop '{a}' or '{b}', or reword one"))
    return found


# bounded repeats: a search costs at most a few hundred steps per character of a text, whatever it holds
MARKUP = re.compile(r"(?P<tag><(?:/?[A-Za-z][A-Za-z0-9-]{0,20}|[!?]))|"
                    r"(?P<entity>&(?:#[0-9]{1,8}|#[xX][0-9A-Fa-f]{1,8}|[A-Za-z][A-Za-z0-9]{0,31});)"
                    r"|(?P<scheme>(?:icon|img)://)|(?P<markdown>!?\[[^\]\n]{0,200}\]\([^)\n]{0,500}\))")
MARKUP_WORDS = {"tag": "an HTML tag", "entity": "an HTML entity", "scheme": "Agent-Zero's icon or image syntax",
                "markdown": "a markdown image or link"}
BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
JOINERS = frozenset("\u200c\u200d\t\n\r")  # the joiners words and emoji need; line breaks in descriptions


def shown_texts(plan: Plan) -> Iterable[tuple[str, str, Node | None, Edge | None]]:
    """(where, text, node, edge) of every text of a plan that the page shows: in the workflow card and component,
    and in the log lines; the model reads them too, and may repeat them in its answer, which the page renders as
    markdown."""
    yield "the plan's name", plan.name, None, None
    yield "the plan's description", plan.description, None, None
    for node in plan.nodes.values():
        yield "the step's name", node.name, node, None
        yield "the step's description", node.description, node, None
        yield "the escalation reason", node.reason, node, None
        yield "the check's wording (verify.describe)", node.verify.says if node.verify else "", node, None
    for edge in plan.edges:
        yield "the edge's label", edge.label, None, edge


def _text_rules(plan: Plan) -> list[Diagnostic]:
    """Markup, bidirectional controls and invisible characters in what the page shows: the pack shows them as
    text, but a reader cannot see what the text really holds, and the model may repeat it where the page renders
    markup."""
    found = []
    for where, text, node, edge in shown_texts(plan):
        if not text:
            continue
        at = {"node": node.id if node else None, "edge": edge,
              "index": _index(plan, edge) if edge is not None else None}
        mark = MARKUP.search(text)
        if mark:
            found.append(diag("text_markup", plan.id, f"{where} holds {MARKUP_WORDS[mark.lastgroup]} "
                              f"'{_spelled(mark.group(0))}': the page shows it as text, and the model, which reads "
                              "it, may repeat it where the page renders markup",
                              "write plain words (e.g. 'the img tag' for <img>, 'and' for &amp;)", **at))
        bidi = next((c for c in text if c in BIDI), None)
        if bidi:
            found.append(diag("text_bidi", plan.id, f"{where} holds {_char(bidi)}, which reorders how the text "
                              "around it is displayed: the person does not read what the plan says",
                              "remove it: right-to-left words display correctly without direction controls", **at))
        hidden = next((c for c in text if c not in BIDI and c not in JOINERS
                       and unicodedata.category(c) in ("Cf", "Cc")), None)
        if hidden:
            found.append(diag("text_invisible", plan.id, f"{where} holds {_char(hidden)}, which the person cannot "
                              "see: two texts that look the same can differ", "remove it", **at))
    return found


def _char(c: str) -> str:
    return f"U+{ord(c):04X} ({unicodedata.name(c, 'a control character')})"


def _spelled(text: str) -> str:
    """A fragment quoted in a finding: characters a terminal would not show plainly spelled as \\uXXXX."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text[:40])


def contains_phrase(text: str, phrase: str) -> bool:
    """``phrase`` occurs in ``text`` as whole words (what trigger matching sees), without compiling a regex."""
    return f" {' '.join(phrase.split())} " in f" {' '.join(text.split())} "


def cross_plan_triggers(plans: Iterable[Plan]) -> list[Diagnostic]:
    owners: dict[str, list[str]] = {}
    for plan in plans:
        for t in plan.all_triggers:
            owners.setdefault(t, []).append(plan.id)
    return [shared_trigger(trig, ids) for trig, ids in owners.items() if len(ids) > 1]


def example_routing(plans: Iterable[Plan], index: Any = None) -> list[Diagnostic]:
    """A plan's examples are its trigger tests: each must start the plan with no domain (stock Agent-Zero), and
    no not-example may start a plan, with no domain or with the plan's own.  Matched as the engine matches, with
    the library as it is (``index``: the plans' meaning index; without one only the not-examples are checked,
    by their phrases: the examples need meaning)."""
    from ..matching.decide import best_match
    from ..matching.nearness import own_texts
    plans = list(plans)
    key = (id(index), *((p.id, own_texts(p), p.examples, p.not_examples, p.domains, p.trigger_threshold)
                        for p in plans))
    known = _ROUTING.get(key)
    if known is not None:
        return list(known)
    found = []
    for plan in plans:
        for text in plan.examples if index is not None else ():
            m = best_match(plans, text, "", None, index)
            if m is None or m.plan.id != plan.id:
                found.append(diag("example_routing", plan.id, f"the example '{text}' starts "
                                  f"{f'plan {m.plan.id!r}' if m else 'no plan'}",
                                  "reword the example, or add examples and phrases nearer to it" if m is None else
                                  f"reword it, or tell the plans apart (a phrase of '{m.plan.id}' decides it)"))
        for text in plan.not_examples:
            for domain in dict.fromkeys(("", *plan.domains[:1])):
                m = best_match(plans, text, domain, None, index)
                if m is not None:
                    found.append(diag("example_routing", plan.id, f"the not-example '{text}' starts plan "
                                      f"{m.plan.id!r} ({m.why()}{f', domain {domain}' if domain else ''})",
                                      "reword it, or make the phrase that decides it more specific"))
                    break
    if len(_ROUTING) >= 16:
        _ROUTING.pop(next(iter(_ROUTING)))
    _ROUTING[key] = tuple(found)
    return found


_ROUTING: dict[tuple, tuple[Diagnostic, ...]] = {}  # a library's example findings, kept by its plans' texts


def shared_trigger(phrase: str, ids: list[str]) -> Diagnostic:
    """The finding on a trigger phrase that several plans list (or one plan twice), on the last of them."""
    return diag("duplicate_trigger", ids[-1], f"trigger '{phrase}' is listed by {', '.join(ids)}",
                "keep the phrase in the one plan it means")
