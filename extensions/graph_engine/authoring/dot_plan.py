"""DOT (Attractor subset) <-> plans: a parsed digraph becomes the same plan JSON the library holds, and
any plan can be written back as DOT that re-imports to the same plan.

Shapes and ``type`` give the handler type as in the Attractor spec (``Mdiamond`` start, ``Msquare`` exit,
``box`` / default codergen, ``parallelogram`` tool, ``diamond`` conditional, ``hexagon`` wait.human,
``component`` parallel, ``tripleoctagon`` parallel.fan_in, ``house`` stack.manager_loop); this pack adds
``type="escalate"``, ``type="checkpoint"``, ``type="task"`` and ``type="decision"``.  Handler types the
engine cannot run (manager loops) are parsed, reported by ``type_supported`` and disable the plan; what the
spec itself decides about a graph (handler types, transforms, its lint rules) is in ``dot_spec``.  Attributes
with no meaning inside Agent-Zero (``fidelity``, ``thread_id``, ``llm_model``, ``model_stylesheet``, ...) are
validated and kept under ``_attractor``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from .dot import DotGraph, Duration, Value, parse
from ..core.kinds import NODE_KINDS, node_kind
from ..core.model import AGENT_FIT, FIDELITY
from .lint import Diagnostic
from ..core.routing import condition_problem
from .dot_spec import HANDLER_TO_NODE, SHAPES, handler_type, lint_graph, node_type, roles, view

SHAPE_OF = {k.name: k.dot_shape for k in NODE_KINDS.values()}
OUR_NODE_KEYS = ("label", "prompt", "tool", "tool_hint", "max_retries", "pace_level", "reason", "continue_on_fail",
                 "description", "type", "shape", "goal_gate", "retry_target", "fallback_retry_target",
                 "human.default_choice", "allow_partial", "human.timeout_turns", "max_parallel", "sequential",
                 "fan_in_policy", "quorum", "required", "over", "max_items", "reduce", *AGENT_FIT, "manager.child",
                 "manager.max_cycles", "manager.stop_condition")
GRAPH_PLAN_KEYS = {"triggers": "list", "strong_triggers": "list", "domains": "list", "trigger_threshold": "int",
                   "stale_after_turns": "int", "max_turns": "int", "description": "str", "retry_target": "str",
                   "fallback_retry_target": "str", "examples": "lines", "not_examples": "lines"}
# rules the DOT lint (dot_spec.lint_graph) decides on the graph as written: the plan lint's findings of these
# ids on a DOT plan would say the same thing again (or something the mapping made up, such as a start node)
DOT_OWNED_RULES = frozenset({"start_node", "terminal_node", "reachability", "edge_target_exists",
                             "start_no_incoming", "exit_no_outgoing", "condition_syntax", "retry_target_exists"})

__all__ = ["HANDLER_TO_NODE", "SHAPES", "handler_type", "to_plan", "to_dot", "load_dot_plan"]


def to_plan(g: DotGraph) -> tuple[str, dict[str, Any], list[Diagnostic]]:
    """The plan id, the plan JSON, and the DOT-level findings (each with a line and column).

    The plan is built from the graph after the spec's transforms (dot_spec.view); every attribute that has no
    plan field is kept under ``_attractor``."""
    pid = g.name or "dot_plan"
    found = lint_graph(g, pid)
    attrs_of = view(g)
    goal = str(g.attrs.get("goal", ""))
    plan: dict[str, Any] = {"name": str(g.attrs.get("label") or pid)}
    if goal:
        plan["description"] = goal
    extra_graph: dict[str, Any] = {}
    for key, value in g.attrs.items():
        if key in ("retry_target", "fallback_retry_target") and str(value) not in g.nodes:
            extra_graph[key] = _plain(value)  # names no node: kept, not followed (retry_target_exists)
        elif key in GRAPH_PLAN_KEYS:
            plan[key] = _plan_value(key, value)
        elif key not in ("label", "goal", "start"):
            extra_graph[key] = _plain(value)
    default_retries = g.attrs.get("default_max_retries", g.attrs.get("default_max_retry"))
    dotfile = str(g.attrs.get("stack.child_dotfile", ""))  # the spec's child: a .dot file; here its plan's id
    graph_child = dotfile.rsplit("/", 1)[-1].removesuffix(".dot") if dotfile else ""
    nodes: dict[str, Any] = {}
    declared = set(g.nodes)
    for nid, n in g.nodes.items():
        htype = handler_type(n.attrs, nid)
        nodes[nid] = _node(attrs_of[nid], node_type(htype), htype, default_retries, declared, graph_child)
        if "label" not in n.attrs:
            nodes[nid].pop("name", None)  # the id is the default name; export stays as written
    edges = []
    for e in g.edges:
        edge: dict[str, Any] = {"from": e.src, "to": e.dst}
        cond = e.attrs.get("condition")
        mapped = _condition(str(cond)) if cond is not None else "always"
        if mapped is not None and mapped != "always":  # a bad condition: condition_syntax says it
            edge["condition"] = mapped
        if "label" in e.attrs:
            edge["label"] = str(e.attrs["label"])
        if isinstance(e.attrs.get("weight"), (int, float)) and not isinstance(e.attrs.get("weight"), bool):
            edge["weight"] = e.attrs["weight"]
        extra = {k: _plain(v) for k, v in e.attrs.items() if k not in ("condition", "label", "weight")}
        if extra:
            edge["_attractor"] = extra
        edges.append(edge)
    starts, _ = roles(g)
    start = str(g.attrs.get("start", "")) or (starts[0] if starts else "")
    plan["graph"] = {"start": start if start in nodes else next(iter(nodes), ""), "nodes": nodes, "edges": edges}
    if extra_graph:
        plan["_attractor"] = extra_graph
    return pid, plan, found


def _node(attrs: dict[str, Value], ntype: str, htype: str, default_retries: Value | None,
          ids: set[str], graph_child: str = "") -> dict:
    """One node's plan fields from its transformed attributes (label defaulted, $goal expanded, styled)."""
    node: dict[str, Any] = {"type": ntype}
    kind = node_kind(ntype)
    if "label" in attrs:
        node["name"] = str(attrs["label"])
    prompt = attrs.get("prompt")
    if kind.judged:
        node["action"] = str(prompt if prompt is not None else attrs.get("label", ""))
        if htype == "tool" and "tool" not in attrs:
            node["tool"] = "code_execution_tool"
    for key in ("tool", "tool_hint", "pace_level", "reason", "description"):
        if key in attrs:
            node[key] = str(attrs[key])
    for key in ("retry_target", "fallback_retry_target"):
        if key in attrs and str(attrs[key]) in ids:  # one that names no node is kept under _attractor
            node[key] = str(attrs[key])
    if kind.asks and prompt is not None:
        node["description"] = str(prompt)
    if "human.default_choice" in attrs:
        node["default_choice"] = str(attrs["human.default_choice"])
    if (kind.asks or kind.forks) and hasattr(attrs.get("timeout"), "ms"):  # wait.human's; a fork's: each branch's
        node["timeout"] = attrs["timeout"].ms / 1000
    if kind.asks and "human.timeout_turns" in attrs:
        node["timeout_turns"] = attrs["human.timeout_turns"]
    for key in ("continue_on_fail", "goal_gate", "allow_partial"):
        if key in attrs:
            node[key] = attrs[key]
    if kind.forks:
        for key in ("max_parallel", "sequential"):
            if key in attrs:
                node[key] = attrs[key]
    for key in ("over", "max_items", "reduce"):  # any node: the lint says where they mean nothing
        if key in attrs:
            node[key] = attrs[key] if key == "max_items" else str(attrs[key])
    if kind.manages:  # Attractor's manager loop: the child plan (ours, or the graph's stack.child_dotfile's name)
        child = attrs.get("manager.child", graph_child)
        if child:
            node["child"] = str(child)
        if "manager.max_cycles" in attrs:
            node["max_cycles"] = attrs["manager.max_cycles"]
        if "manager.stop_condition" in attrs:
            node["stop_condition"] = str(attrs["manager.stop_condition"])
    for key in AGENT_FIT:  # a branch agent's (the chat's own agent ignores them); a fidelity the spec does not
        if key in attrs and (key != "fidelity" or str(attrs[key]) in FIDELITY):  # know stays under _attractor
            node[key] = str(attrs[key])
    if kind.joins:
        for key in ("fan_in_policy", "quorum"):
            if key in attrs:
                node[key] = attrs[key] if key == "quorum" else str(attrs[key])
        if "required" in attrs:
            node["required"] = [r.strip() for r in str(attrs["required"]).split(",") if r.strip()]
    retries = attrs.get("max_retries", default_retries if kind.judged else None)
    if retries is not None:
        node["max_retries"] = retries
    verify = {k.split(".", 1)[1]: _plain(v) for k, v in attrs.items() if k.startswith("verify.")}
    if "verify" in attrs:
        verify["type"] = str(attrs["verify"])
    if verify:
        node["verify"] = verify
    extra = {k: _plain(v) for k, v in attrs.items()
             if (k not in OUR_NODE_KEYS or (k in ("retry_target", "fallback_retry_target", "fidelity") and k not in node))
             and k != "verify" and not k.startswith("verify.")}
    if extra:
        node["_attractor"] = extra
    return node


def _condition(text: str) -> str | None:
    """A shorthand stays; an expression is kept when it parses (the engine evaluates it); "" is no condition."""
    text = text.strip()
    if condition_problem(text):
        return None
    return text or "always"


def _plan_value(key: str, value: Value) -> Any:
    kind = GRAPH_PLAN_KEYS[key]
    if kind == "list":
        return [p.strip() for p in str(value).split(",") if p.strip()]
    if kind == "lines":  # one text a line: examples hold commas
        return [line.strip() for line in str(value).splitlines() if line.strip()]
    return value if kind == "int" else str(value)


def _plain(value: Value) -> Any:
    return value.raw if isinstance(value, Duration) else value


def load_dot_plan(text: str) -> tuple[str, dict[str, Any], list[Diagnostic]]:
    return to_plan(parse(text))


# ── export: a plan as DOT ───────────────────────────────────────────────────


def quote(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _decimal(value)
    if isinstance(value, int):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{text}"'


def _decimal(value: float) -> str:
    """A float as the DOT parser reads it back to the same float: digits and a point, no exponent (1e+16 is
    written 10000000000000000.0)."""
    if not math.isfinite(value):
        raise ValueError(f"the number {value!r} has no DOT spelling")
    text = repr(value)
    if "e" in text or "E" in text:
        text = format(Decimal(text), "f")
    return text if "." in text else text + ".0"


def _attrs(pairs: list[tuple[str, Any]], graphviz: bool = False) -> str:
    """Attributes; ``graphviz`` quotes qualified keys (``"verify.value"``), which Graphviz needs."""
    def key(k: str) -> str:
        return f'"{k}"' if graphviz and "." in k else k
    return "[" + ", ".join(f"{key(k)}={quote(v)}" for k, v in pairs) + "]" if pairs else ""


def to_dot(plan_id: str, raw: dict[str, Any], highlight: dict[str, Any] | None = None,
           graphviz: bool = False) -> str:
    """A graph plan as DOT; ``highlight`` ({"nodes": {id: visits}, "edges": {(from, to, cond): count}}) marks a
    run; ``graphviz`` writes what the Graphviz programs accept (qualified keys quoted)."""
    if "graph" not in raw:
        raise ValueError(f"plan '{plan_id}' is a linear plan (steps); only graph plans can be exported as DOT")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", plan_id):
        raise ValueError(f"plan id '{plan_id}' is not a DOT identifier (letters, digits, '_')")
    for key in ("triggers", "strong_triggers", "domains"):
        bad = [t for t in raw.get(key, []) if "," in t]
        if bad:
            raise ValueError(f"plan '{plan_id}': {key} phrase {bad[0]!r} contains a comma, which DOT lists use")
    lines = [f"digraph {plan_id} {{"]
    gattrs = [("label", raw.get("name", plan_id))]
    if raw.get("description"):
        gattrs.append(("goal", raw["description"]))
    for key in ("domains", "triggers", "strong_triggers"):
        if raw.get(key):
            gattrs.append((key, ", ".join(raw[key])))
    for key in ("trigger_threshold", "stale_after_turns", "max_turns", "retry_target", "fallback_retry_target"):
        if key in raw:
            gattrs.append((key, raw[key]))
    for key in ("examples", "not_examples"):  # one a line
        texts = [" ".join(t.split()) for t in raw.get(key, []) if isinstance(t, str) and t.strip()]
        if texts:
            gattrs.append((key, "\n".join(texts)))
    start = raw["graph"]["start"]
    if raw["graph"]["nodes"].get(start, {}).get("type", "task") != "start":
        gattrs.append(("start", start))  # the run begins at a node that is not a start node
    gattrs += sorted(raw.get("_attractor", {}).items())
    lines.append(f"    graph {_attrs(gattrs, graphviz)}")
    visits = (highlight or {}).get("nodes", {})
    for nid, node in raw["graph"]["nodes"].items():
        ntype = node.get("type", "task")
        pairs: list[tuple[str, Any]] = [("shape", SHAPE_OF[ntype])]
        if NODE_KINDS[ntype].dot_type:
            pairs.append(("type", ntype))
        if "name" in node:
            pairs.append(("label", node["name"]))
        if NODE_KINDS[ntype].judged:
            pairs.append(("prompt", node.get("action", "")))  # an empty prompt stays empty on re-import
        for key in ("tool", "tool_hint", "description", "reason", "pace_level", "max_retries", "continue_on_fail",
                    "goal_gate", "allow_partial", "retry_target", "fallback_retry_target", "max_parallel", "sequential",
                    "fan_in_policy", "quorum", "over", "max_items", *AGENT_FIT):
            if key in node:
                pairs.append((key, node[key]))
        for key in ("child", "max_cycles", "stop_condition"):
            if key in node:
                pairs.append((f"manager.{key}", node[key]))
        if node.get("reduce"):
            reduce = node["reduce"]
            pairs.append(("reduce", reduce if isinstance(reduce, str) else
                          ", ".join(f"{k}:{v}" for k, v in reduce.items())))
        if node.get("required"):
            pairs.append(("required", ",".join(node["required"])))
        if "default_choice" in node:
            pairs.append(("human.default_choice", node["default_choice"]))
        if node.get("timeout") and "timeout" not in node.get("_attractor", {}):
            pairs.append(("timeout", f"{round(node['timeout'] * 1000)}ms"))
        if "timeout_turns" in node:
            pairs.append(("human.timeout_turns", node["timeout_turns"]))
        verify = node.get("verify")
        if verify:
            pairs.append(("verify", verify.get("type", "any_output")))
            pairs += [(f"verify.{k}", v) for k, v in verify.items() if k != "type"]
        pairs += sorted(node.get("_attractor", {}).items())
        if nid in visits:
            pairs += [("style", "filled"), ("fillcolor", "lightblue"), ("xlabel", f"x{visits[nid]}")]
        lines.append(f"    {nid} {_attrs(pairs, graphviz)}")
    counts = (highlight or {}).get("edges", {})
    for e in raw["graph"]["edges"]:
        pairs = []
        cond = e.get("condition", "always")
        if cond != "always":
            pairs.append(("condition", cond))
        if "label" in e:
            pairs.append(("label", e["label"]))
        if "weight" in e:
            pairs.append(("weight", e["weight"]))
        pairs += sorted(e.get("_attractor", {}).items())
        n = counts.get((e["from"], e["to"], cond))
        if n:
            pairs += [("color", "blue"), ("penwidth", 2.5), ("xlabel", f"x{n}")]
        lines.append(f"    {e['from']} -> {e['to']} {_attrs(pairs, graphviz)}".rstrip())
    lines.append("}")
    return "\n".join(lines) + "\n"
