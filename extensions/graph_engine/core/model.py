"""Plan model: immutable, indexed plans compiled from the library's JSON.

A plan is either a graph (``graph``: ``start``, ``nodes``, ``edges``) or an old
linear plan (``steps``).  Both compile to the same ``Plan`` object: linear steps
become task nodes ``step_1 .. step_N`` chained by ``on_success`` edges to an
implicit exit node, so rendering and lint see one shape.  The engine still runs
linear plans with the old selector's rules (see ``engine``).

Every compile error is a ``PlanError`` naming the plan, the JSON path and a fix.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cached_property

from .patterns import unsafe
from .routing import ConditionError, condition_problem, parse_condition, success_target
from types import MappingProxyType
from typing import Any, Callable, Mapping

from .kinds import (CHECKS, CONDITIONS, DEFAULT_CHECK, DEFAULT_MAX_ITEMS, DEFAULT_MAX_PARALLEL, FAN_IN_POLICIES,
                    MAX_ITEMS, NODE_TYPES, REDUCERS,
                    ON_FAIL_ACTIONS, PACE_LEVELS, VERIFY_TYPES, NodeKind, node_kind)

AGENT_FIT = ("profile", "llm_model", "fidelity", "thread_id")  # a branch agent's settings (Node's fields)
FIDELITY = ("full", "truncate", "compact", "summary:low", "summary:medium", "summary:high")
DEFAULT_STALE_GRAPH = 15
DEFAULT_STALE_LINEAR = 10
DEFAULT_THRESHOLD = 2
LINEAR_EXIT_ID = "done"
MAX_WEIGHT = 10**9  # an edge weight beyond it tells nothing more; a float could not hold a 400-digit one


class PlanError(ValueError):
    """A plan that cannot be compiled; the message says where and how to fix it.

    ``rule`` is the lint rule id the problem belongs to (``schema`` unless more specific)."""

    def __init__(self, plan_id: str, path: str, problem: str, fix: str, rule: str = "schema") -> None:
        self.plan_id = plan_id
        self.path = path
        self.problem = problem
        self.fix = fix
        self.rule = rule
        super().__init__(f"plan '{plan_id}' at {path}: {problem} (fix: {fix})")


@dataclass(frozen=True)
class Verify:
    type: str
    value: str = ""
    pattern: re.Pattern[str] | None = None
    fail_if: str = ""
    fail_pattern: re.Pattern[str] | None = None
    capture: str = ""
    capture_pattern: re.Pattern[str] | None = None
    says: str = ""  # the plan's own words for the check ("describe"), shown instead of the generated text

    def describe(self) -> str:
        """The check in plain words, as the model reads it (how to print an exit status is added by render)."""
        if self.says:
            return self.says
        text = self._describe()
        if self.fail_if:
            text += f", and the output does not match /{self.fail_if}/"
        return text

    def _describe(self) -> str:
        """A statement that is true of a passing result ("Check: passes when ...")."""
        return CHECKS[self.type].says.format(v=self.value)


@dataclass(frozen=True)
class Node:
    id: str
    type: str
    name: str
    action: str = ""
    tool: str = ""
    tool_hint: str = ""
    verify: Verify | None = None
    max_retries: int = 0
    description: str = ""
    pace_level: str = "contingent"
    reason: str = ""
    on_fail: str = "warn"
    required: bool = True
    continue_on_fail: bool = False
    goal_gate: bool = False
    allow_partial: bool = False  # retries spent: partial_success, routed as success
    retry_target: str = ""
    fallback_retry_target: str = ""
    default_choice: str = ""  # human gates: the option taken when the answer matches none, asked twice
    timeout: float = 0.0  # human gates: seconds without an answer before the default is taken (or it escalates)
    timeout_turns: int = 0  # human gates: the same, counted in turns
    max_parallel: int = DEFAULT_MAX_PARALLEL  # parallel nodes: branches run at once
    sequential: bool = False  # parallel nodes: branches one after another in the run's own chat
    fan_in_policy: str = "all"  # fan-in nodes: what the branches must have done for the success route
    quorum: int = 0  # fan-in nodes with the quorum policy: branches that must succeed
    required: tuple[str, ...] = ()  # fan-in nodes with the required policy: the branches (first node ids) that must
    over: str = ""  # parallel nodes: the captured value whose items each get a branch (its one edge), found at run time
    max_items: int = DEFAULT_MAX_ITEMS  # parallel nodes over a list: more items than this refuse the fan-out
    reduce: tuple[tuple[str, str], ...] = ()  # fan-in nodes: (captured name, kinds.REDUCERS row) pairs
    # the agent a branch runs in (set on a branch's first node, else on its parallel node; the chat's own agent
    # ignores them): an Agent-Zero agent profile, a model (preset), what it is told, and a shared agent
    profile: str = ""
    llm_model: str = ""
    fidelity: str = ""  # FIDELITY: full (the chat so far), compact / summary:* (the steps done), truncate (the default)
    thread_id: str = ""  # branches with the same thread_id run one after another in one agent
    child: str = ""  # manager nodes: the plan (id) the subordinate agent runs
    max_cycles: int = 1000  # manager nodes: the child's passes after which it is stopped and the node fails
    stop_condition: str = ""  # manager nodes: a condition on the child's context that stops it with success
    stop_clauses: tuple = ()  # ... parsed (routing.parse_condition)

    @property
    def kind(self) -> NodeKind:
        """Its row in ``kinds.NODE_KINDS``: what a node of its type does."""
        return node_kind(self.type)


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    condition: str = "always"
    label: str = ""
    weight: float = 0.0
    clauses: tuple = ()  # a parsed expression condition (routing.parse_condition); () for a shorthand


@dataclass(frozen=True)
class Plan:
    id: str
    name: str
    mode: str
    domains: tuple[str, ...]
    triggers: tuple[str, ...]
    strong_triggers: tuple[str, ...]
    trigger_threshold: int
    stale_after_turns: int
    max_turns: int
    start: str
    nodes: Mapping[str, Node]
    edges: tuple[Edge, ...]
    out_edges: Mapping[str, tuple[Edge, ...]]
    success_path: tuple[str, ...]
    version: str
    description: str = ""
    retry_target: str = ""
    fallback_retry_target: str = ""
    examples: tuple[str, ...] = ()  # requests in everyday words that must start the plan
    not_examples: tuple[str, ...] = ()  # messages near its topic that must start nothing
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def total_steps(self) -> int:
        return len(self.success_path)

    @cached_property
    def resting(self) -> tuple[str, ...]:
        """The nodes where a run waits for a result or an answer (the steps a person can name), in plan order."""
        return tuple(nid for nid, n in self.nodes.items() if n.kind.rests)

    @cached_property
    def success_index(self) -> Mapping[str, int]:
        """Position of each success-path task node (lookups stay O(1) in long plans)."""
        return MappingProxyType({nid: i for i, nid in enumerate(self.success_path)})

    @cached_property
    def fan_in_of(self) -> Mapping[str, str]:
        """Each parallel node's fan-in: the first fan-in node every one of its branches reaches (none: its
        branches run one after another, as they always could)."""
        return MappingProxyType({nid: f for nid, n in self.nodes.items() if n.kind.forks
                                 for f in [_meeting_fan_in(self.nodes, self.out_edges, nid)] if f})

    @property
    def all_triggers(self) -> tuple[str, ...]:
        return self.triggers + self.strong_triggers

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(n.id for n in self.nodes.values() if n.kind.judged)

    def node(self, node_id: str) -> Node | None:
        return self.nodes.get(node_id)

    def derived(self, name: str, make: Callable[[Plan], Any]) -> Any:
        """Something computed from this plan once and kept with it (routing memo, render texts): a plan is
        immutable, and a new version of a plan is a new object."""
        value = self.__dict__.get(name)
        if value is None:
            value = self.__dict__[name] = make(self)
        return value


# ── compiling ───────────────────────────────────────────────────────────────


def plan_version(raw: Mapping[str, Any]) -> str:
    """A short, stable hash of a plan's JSON: two versions of a plan never share it."""
    blob = json.dumps(raw, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def compile_plan(plan_id: str, raw: Any) -> Plan:
    if not isinstance(raw, dict):
        raise PlanError(plan_id, f"plans.{plan_id}", f"expected an object, got {type(raw).__name__}",
                        "write the plan as a JSON object with 'graph' or 'steps'")
    has_graph, has_steps = "graph" in raw, "steps" in raw
    if has_graph == has_steps:
        raise PlanError(plan_id, f"plans.{plan_id}", "a plan needs exactly one of 'graph' or 'steps'",
                        "keep 'graph' for a graph plan or 'steps' for a linear plan")
    common = _compile_common(plan_id, raw)
    if has_graph:
        nodes, edges, start = _compile_graph(plan_id, raw["graph"])
        mode = "graph"
        for key in ("retry_target", "fallback_retry_target"):
            target = raw.get(key, "")
            _expect(isinstance(target, str) and (not target or target in nodes), plan_id, f"plans.{plan_id}.{key}",
                    f"names no node ({target!r})", "point it at a declared node", rule="retry_target_exists")
            common[key] = target
    else:
        nodes, edges, start = _compile_steps(plan_id, raw["steps"])
        mode = "linear"
    out: dict[str, list[Edge]] = {nid: [] for nid in nodes}
    for e in edges:
        out[e.src].append(e)
    out_edges = MappingProxyType({k: tuple(v) for k, v in out.items()})
    success_path = _success_path(nodes, out_edges, start)
    stale = common.pop("stale_after_turns") or (DEFAULT_STALE_GRAPH if mode == "graph" else DEFAULT_STALE_LINEAR)
    max_turns = common.pop("max_turns") or default_max_turns(nodes, stale)
    return Plan(
        id=plan_id, mode=mode, start=start, nodes=MappingProxyType(nodes), edges=tuple(edges),
        out_edges=out_edges, success_path=success_path, version=plan_version(raw),
        stale_after_turns=stale, max_turns=max_turns, raw=MappingProxyType(dict(raw)), **common,
    )


def default_max_turns(nodes: Mapping[str, Node], stale: int) -> int:
    """Plan-level ceiling: every task attempt the budgets allow, each given a full staleness window."""
    attempts = sum(n.max_retries + 1 for n in nodes.values() if n.kind.judged)
    return max(1, attempts) * stale


def _compile_common(plan_id: str, raw: dict) -> dict:
    """Fields every plan has (graph plans add their retry targets)."""
    where = f"plans.{plan_id}"
    name = raw.get("name", plan_id)
    _expect(isinstance(name, str) and name.strip() != "", plan_id, f"{where}.name", "must be a non-empty string",
            "give the plan a readable name")
    domains = _str_list(plan_id, raw.get("domains", []), f"{where}.domains")
    triggers = _str_list(plan_id, raw.get("triggers", []), f"{where}.triggers")
    strong = _str_list(plan_id, raw.get("strong_triggers", []), f"{where}.strong_triggers")
    threshold = _int(plan_id, raw.get("trigger_threshold", DEFAULT_THRESHOLD), f"{where}.trigger_threshold", 1)
    stale = _int(plan_id, raw.get("stale_after_turns", 0), f"{where}.stale_after_turns", 0)
    max_turns = _int(plan_id, raw.get("max_turns", 0), f"{where}.max_turns", 0)
    description = raw.get("description", "")
    _expect(isinstance(description, str), plan_id, f"{where}.description", "must be a string", "write text")
    examples = _str_list(plan_id, raw.get("examples", []), f"{where}.examples")
    not_examples = _str_list(plan_id, raw.get("not_examples", []), f"{where}.not_examples")
    return {
        "name": name.strip(), "domains": tuple(domains), "triggers": tuple(t.lower().strip() for t in triggers),
        "strong_triggers": tuple(t.lower().strip() for t in strong),
        "trigger_threshold": threshold, "stale_after_turns": stale, "max_turns": max_turns,
        "description": description, "examples": tuple(examples), "not_examples": tuple(not_examples),
    }


def _compile_graph(plan_id: str, graph: Any) -> tuple[dict[str, Node], list[Edge], str]:
    where = f"plans.{plan_id}.graph"
    _expect(isinstance(graph, dict), plan_id, where, "must be an object with start, nodes, edges",
            'write "graph": {"start": ..., "nodes": {...}, "edges": [...]}')
    raw_nodes = graph.get("nodes")
    _expect(isinstance(raw_nodes, dict) and raw_nodes, plan_id, f"{where}.nodes", "must be a non-empty object",
            "declare the nodes as an object keyed by node id")
    nodes = {nid: _compile_node(plan_id, nid, spec, f"{where}.nodes.{nid}") for nid, spec in raw_nodes.items()}
    start = graph.get("start")
    _expect(isinstance(start, str) and start in nodes, plan_id, f"{where}.start",
            f"names no node ({start!r})", "set start to the id of the first node")
    raw_edges = graph.get("edges", [])
    _expect(isinstance(raw_edges, list), plan_id, f"{where}.edges", "must be a list", "write edges as a list")
    edges = [_compile_edge(plan_id, e, nodes, f"{where}.edges[{i}]") for i, e in enumerate(raw_edges)]
    return nodes, edges, start


def _compile_node(plan_id: str, nid: str, spec: Any, where: str) -> Node:
    _expect(isinstance(spec, dict), plan_id, where, "must be an object", "describe the node as an object")
    ntype = spec.get("type", "task")
    _expect(ntype in NODE_TYPES, plan_id, f"{where}.type", f"unknown node type {ntype!r}",
            f"use one of {', '.join(NODE_TYPES)}")
    pace = spec.get("pace_level", "contingent")
    _expect(pace in PACE_LEVELS, plan_id, f"{where}.pace_level", f"unknown PACE level {pace!r}",
            f"use one of {', '.join(PACE_LEVELS)}", rule="pace_level")
    texts = {k: spec.get(k, "") for k in ("action", "tool", "tool_hint", "description", "reason", *AGENT_FIT)}
    for key, value in texts.items():
        _expect(isinstance(value, str), plan_id, f"{where}.{key}", "must be a string", "write text")
    _expect(texts["fidelity"] in ("", *FIDELITY), plan_id, f"{where}.fidelity",
            f"unknown fidelity {texts['fidelity']!r}", f"use one of {', '.join(FIDELITY)}")
    name = spec.get("name", nid)
    _expect(isinstance(name, str), plan_id, f"{where}.name", "must be a string", "write text")
    flags = {k: spec.get(k, False) for k in ("continue_on_fail", "goal_gate", "allow_partial")}
    for key, value in flags.items():
        _expect(isinstance(value, bool), plan_id, f"{where}.{key}", "must be true or false", "write true or false")
    refs = {k: spec.get(k, "") for k in ("retry_target", "fallback_retry_target", "default_choice")}
    for key, value in refs.items():
        _expect(isinstance(value, str), plan_id, f"{where}.{key}", "must be a string", "write a node id or label")
    timeout = spec.get("timeout", 0)
    _expect(isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and 0 <= timeout < 1e9, plan_id,
            f"{where}.timeout", f"must be a number of seconds >= 0, got {timeout!r}", "write e.g. 900 for 15 minutes")
    return Node(
        id=nid, type=ntype, name=name or nid, verify=_compile_verify(plan_id, spec.get("verify"), f"{where}.verify"),
        max_retries=_int(plan_id, spec.get("max_retries", node_kind(ntype).retries), f"{where}.max_retries", 0),
        pace_level=pace, timeout=float(timeout),
        timeout_turns=_int(plan_id, spec.get("timeout_turns", 0), f"{where}.timeout_turns", 0),
        **_branch_fields(plan_id, spec, where), **flags, **refs, **texts,
    )


def _branch_fields(plan_id: str, spec: dict, where: str) -> dict[str, Any]:
    """A parallel node's ``max_parallel`` and ``sequential``; a fan-in's ``fan_in_policy``, ``quorum``, ``required``."""
    out: dict[str, Any] = {"max_parallel": _int(plan_id, spec.get("max_parallel", DEFAULT_MAX_PARALLEL),
                                                f"{where}.max_parallel", 1)}
    sequential = spec.get("sequential", False)
    _expect(isinstance(sequential, bool), plan_id, f"{where}.sequential", "must be true or false",
            "write true to run the branches one after another")
    policy = spec.get("fan_in_policy", "all")
    _expect(policy in FAN_IN_POLICIES, plan_id, f"{where}.fan_in_policy", f"unknown fan-in policy {policy!r}",
            f"use one of {', '.join(FAN_IN_POLICIES)}", rule="fan_in_policy")
    reads = FAN_IN_POLICIES[policy].reads
    quorum = _int(plan_id, spec.get("quorum", 1 if reads == "quorum" else 0), f"{where}.quorum", 0)
    required = spec.get("required", [])
    if isinstance(required, str):  # DOT: required="lint,test"
        required = [r.strip() for r in required.split(",") if r.strip()]
    _expect(isinstance(required, list) and all(isinstance(r, str) and r for r in required), plan_id,
            f"{where}.required", "must be a list of branch ids (each branch's first node)", 'write ["lint", "test"]')
    _expect(reads != "required" or required, plan_id, f"{where}.required",
            f"the {policy} policy names no branch", "list the branches that must succeed", rule="fan_in_policy")
    out.update(sequential=sequential, fan_in_policy=policy, quorum=quorum, required=tuple(required))
    over = spec.get("over", "")
    _expect(isinstance(over, str) and over == over.strip(), plan_id, f"{where}.over",
            "must be the name of a captured value", 'write e.g. "files" (captured by an earlier step: (?P<files>...))')
    out.update(over=over, max_items=_int(plan_id, spec.get("max_items", DEFAULT_MAX_ITEMS), f"{where}.max_items", 1))
    _expect(out["max_items"] <= MAX_ITEMS, plan_id, f"{where}.max_items", f"is {out['max_items']}, over {MAX_ITEMS}",
            f"write at most {MAX_ITEMS}; narrow the list an earlier step captures")
    out["reduce"] = _reducers(plan_id, spec.get("reduce", {}), f"{where}.reduce")
    child, stop = spec.get("child", ""), spec.get("stop_condition", "")
    _expect(isinstance(child, str), plan_id, f"{where}.child", "must be a plan id", 'write e.g. "bugfix_workflow"')
    _expect(isinstance(stop, str), plan_id, f"{where}.stop_condition", "must be a condition",
            'write e.g. "context.tests=green"')
    problem = condition_problem(stop) if stop.strip() else ""
    _expect(not problem, plan_id, f"{where}.stop_condition", f"{stop!r}: {problem}",
            "write clauses key=value or key!=value joined by &&", rule="condition_syntax")
    out.update(child=child, stop_condition=stop, stop_clauses=parse_condition(stop) if stop.strip() else (),
               max_cycles=_int(plan_id, spec.get("max_cycles", 1000), f"{where}.max_cycles", 1))
    return out


def _reducers(plan_id: str, raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    """A fan-in's ``reduce``: {"name": "append"} (JSON) or "name:append, total:sum" (DOT)."""
    if isinstance(raw, str):
        pairs = [part.split(":", 1) for part in raw.split(",") if part.strip()]
        _expect(all(len(p) == 2 for p in pairs), plan_id, where, f"{raw!r} is not name:reducer pairs",
                'write e.g. reduce="files:append, total:sum"', rule="reducer")
        raw = {name.strip(): how.strip() for name, how in pairs}
    _expect(isinstance(raw, dict) and all(isinstance(k, str) and k for k in raw), plan_id, where,
            "must map captured names to reducers", 'write {"files": "append", "total": "sum"}', rule="reducer")
    for name, how in raw.items():
        _expect(how in REDUCERS, plan_id, f"{where}.{name}", f"unknown reducer {how!r}",
                f"use one of {', '.join(REDUCERS)}", rule="reducer")
    return tuple(raw.items())


def _compile_edge(plan_id: str, raw: Any, nodes: Mapping[str, Node], where: str) -> Edge:
    _expect(isinstance(raw, dict), plan_id, where, "must be an object", 'write {"from": ..., "to": ...}')
    src, dst = raw.get("from"), raw.get("to")
    _expect(isinstance(src, str) and src in nodes, plan_id, f"{where}.from", f"names no node ({src!r})",
            "point 'from' at a declared node", rule="edge_target_exists")
    _expect(isinstance(dst, str) and dst in nodes, plan_id, f"{where}.to", f"names no node ({dst!r})",
            "point 'to' at a declared node", rule="edge_target_exists")
    cond = raw.get("condition", "always")
    _expect(isinstance(cond, str), plan_id, f"{where}.condition", "must be a string",
            f"use one of {', '.join(CONDITIONS)} or an expression such as outcome=success && context.lang=python")
    clauses: tuple = ()
    if cond not in CONDITIONS:
        try:
            clauses = parse_condition(cond)
        except ConditionError as exc:
            raise PlanError(plan_id, f"{where}.condition", f"condition {cond!r}: {exc}",
                            f"use one of {', '.join(CONDITIONS)} or clauses key=value / key!=value joined by &&",
                            rule="condition_syntax") from None
    label = raw.get("label", "")
    _expect(isinstance(label, str), plan_id, f"{where}.label", "must be a string", "write text")
    weight = raw.get("weight", 0)
    _expect(isinstance(weight, (int, float)) and not isinstance(weight, bool), plan_id, f"{where}.weight",
            "must be a number", "write a number (higher wins among matching edges)")
    _expect(-MAX_WEIGHT <= weight <= MAX_WEIGHT, plan_id, f"{where}.weight",
            f"must be between -{MAX_WEIGHT:,} and {MAX_WEIGHT:,}, got {_short(weight)}",
            "write a smaller number (only the order of the weights matters)")
    return Edge(src=src, dst=dst, condition=cond, label=label, weight=float(weight), clauses=clauses)


def _compile_steps(plan_id: str, steps: Any) -> tuple[dict[str, Node], list[Edge], str]:
    where = f"plans.{plan_id}.steps"
    _expect(isinstance(steps, list) and steps, plan_id, where, "must be a non-empty list", "list the steps in order")
    nodes: dict[str, Node] = {}
    for i, spec in enumerate(steps):
        sw = f"{where}[{i}]"
        _expect(isinstance(spec, dict), plan_id, sw, "must be an object", "describe the step as an object")
        on_fail = spec.get("on_fail", "warn")
        _expect(on_fail in ON_FAIL_ACTIONS, plan_id, f"{sw}.on_fail", f"unknown action {on_fail!r}",
                f"use one of {', '.join(ON_FAIL_ACTIONS)}")
        texts = {k: spec.get(k, "") for k in ("action", "tool", "tool_hint")}
        for key, value in texts.items():
            _expect(isinstance(value, str), plan_id, f"{sw}.{key}", "must be a string", "write text")
        nid = f"step_{i + 1}"
        nodes[nid] = Node(id=nid, type="task", name=str(spec.get("name", nid)), on_fail=on_fail,
                          verify=_compile_verify(plan_id, spec.get("verify"), f"{sw}.verify"),
                          required=bool(spec.get("required", True)), **texts)
    nodes[LINEAR_EXIT_ID] = Node(id=LINEAR_EXIT_ID, type="exit", name="Plan complete")
    ids = list(nodes)
    edges = [Edge(src=a, dst=b, condition="on_success") for a, b in zip(ids, ids[1:])]
    return nodes, edges, ids[0]


def _compile_verify(plan_id: str, raw: Any, where: str) -> Verify | None:
    if raw is None:
        return None
    _expect(isinstance(raw, dict), plan_id, where, "must be an object", 'write {"type": ..., "value": ...}')
    vtype = raw.get("type", DEFAULT_CHECK)
    _expect(vtype in VERIFY_TYPES, plan_id, f"{where}.type", f"unknown verification {vtype!r}",
            f"use one of {', '.join(VERIFY_TYPES)}")
    value = raw.get("value", "")
    _expect(isinstance(value, str), plan_id, f"{where}.value", "must be a string", "write the text to look for")
    kind = CHECKS[vtype]
    _expect(not kind.needs_value or value != "", plan_id, f"{where}.value", f"{vtype} needs a value",
            "say what to look for in 'value'")
    pattern = None
    flags = raw.get("flags", "")
    if kind.regex:
        pattern = _compile_regex(plan_id, value, flags, f"{where}.value")
    fail_if = raw.get("fail_if", "")
    _expect(isinstance(fail_if, str), plan_id, f"{where}.fail_if", "must be a string",
            "write a regular expression that marks the output as failed")
    _expect(not fail_if or kind.reads_output, plan_id, f"{where}.fail_if",
            f"{vtype} does not read the output, so fail_if would never apply", "remove fail_if")
    fail_pattern = _compile_regex(plan_id, fail_if, flags, f"{where}.fail_if") if fail_if else None
    capture = raw.get("capture", "")
    _expect(isinstance(capture, str), plan_id, f"{where}.capture", "must be a string",
            "write a regular expression with named groups, e.g. (?P<lang>python|node)")
    capture_pattern = _compile_regex(plan_id, capture, flags, f"{where}.capture") if capture else None
    _expect(capture_pattern is None or bool(capture_pattern.groupindex), plan_id, f"{where}.capture",
            "has no named group, so it captures nothing", "name the groups: (?P<name>...)")
    says = raw.get("describe", "")
    _expect(isinstance(says, str), plan_id, f"{where}.describe", "must be a string",
            "say in plain words what the check wants, e.g. \"the tests pass\"")
    return Verify(type=vtype, value=value, pattern=pattern, fail_if=fail_if, fail_pattern=fail_pattern,
                  capture=capture, capture_pattern=capture_pattern, says=says.strip())


def _compile_regex(plan_id: str, value: str, flags: Any, where: str) -> re.Pattern[str]:
    _expect(isinstance(flags, str) and set(flags) <= set("ims"), plan_id, f"{where}.flags",
            f"unknown regex flags {flags!r}", "use any of i (ignore case), m (multiline), s (dot matches newline)")
    bits = re.MULTILINE
    for ch, flag in (("i", re.IGNORECASE), ("s", re.DOTALL)):
        if ch in flags:
            bits |= flag
    why, fix = unsafe(value, bits)
    _expect(not why, plan_id, where, f"{why} on a long output", fix, rule="regex_unsafe")
    try:
        return re.compile(value, bits)
    except re.error as exc:
        raise PlanError(plan_id, where, f"invalid regular expression: {exc}", "fix the pattern",
                        rule="regex_invalid") from None


def _success_path(nodes: Mapping[str, Node], out_edges: Mapping[str, tuple[Edge, ...]], start: str) -> tuple[str, ...]:
    """Task nodes met when every check passes: the steps that progress counts.  A parallel node's branches count
    each, in the order listed, up to the fan-in they meet at; the path goes on from there."""
    path: list[str] = []
    seen: set[str] = set()
    current: str | None = start
    while current is not None and current not in seen:
        seen.add(current)
        node = nodes[current]
        if node.kind.judged:
            path.append(current)
        if node.kind.terminal:
            break
        fan_in = _meeting_fan_in(nodes, out_edges, current) if node.kind.forks else ""
        if fan_in:
            for edge in out_edges.get(current, ()):
                branch: str | None = edge.dst
                while branch is not None and branch != fan_in and branch not in seen:
                    seen.add(branch)
                    if nodes[branch].kind.judged:
                        path.append(branch)
                    if nodes[branch].kind.terminal:
                        break
                    branch = success_target(out_edges.get(branch, ()), nodes[branch].type)
            current = fan_in
            continue
        current = success_target(out_edges.get(current, ()), node.type)
    return tuple(path)


def _meeting_fan_in(nodes: Mapping[str, Node], out_edges: Mapping[str, tuple[Edge, ...]], parallel: str) -> str:
    """The nearest fan-in node every branch of ``parallel`` reaches (by any edges, not through another parallel
    node's fan-in), or "" when they meet at none."""
    branches = [e.dst for e in out_edges.get(parallel, ())]
    if not branches:
        return ""
    reach: list[dict[str, int]] = []
    for first in branches:
        dist, queue = {first: 0}, [first]
        for nid in queue:  # breadth first: the list grows as it is read
            if nodes[nid].kind.joins:
                continue  # a branch ends at the first fan-in it meets
            for e in out_edges.get(nid, ()):
                if e.dst not in dist and e.dst != parallel:
                    dist[e.dst] = dist[nid] + 1
                    queue.append(e.dst)
        reach.append({n: d for n, d in dist.items() if nodes[n].kind.joins})
    common = set(reach[0]).intersection(*reach[1:])
    return min(common, key=lambda n: (max(r[n] for r in reach), n)) if common else ""


# ── small validators ────────────────────────────────────────────────────────


def _short(value: Any) -> str:
    """A number for a message: a huge integer by its size, not its hundreds of digits (which str() may refuse)."""
    if isinstance(value, int) and value.bit_length() > 64:
        try:
            return f"a number of {len(str(abs(value))):,} digits"
        except ValueError:  # over the interpreter's limit on converting an integer to text
            return "a number of thousands of digits"
    return repr(value)


def _expect(ok: bool, plan_id: str, path: str, problem: str, fix: str, rule: str = "schema") -> None:
    if not ok:
        raise PlanError(plan_id, path, problem, fix, rule)


def _int(plan_id: str, value: Any, path: str, minimum: int) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    _expect(ok, plan_id, path, f"must be a whole number >= {minimum}, got {value!r}", "write a whole number")
    return value


def _str_list(plan_id: str, value: Any, path: str) -> list[str]:
    ok = isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)
    _expect(ok, plan_id, path, "must be a list of non-empty strings", 'write ["...", "..."]')
    return value
