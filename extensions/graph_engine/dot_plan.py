"""DOT (Attractor subset) <-> plans: a parsed digraph becomes the same plan JSON the library holds, and
any plan can be written back as DOT that re-imports to the same plan.

Shapes and ``type`` give the handler type as in the Attractor spec (``Mdiamond`` start, ``Msquare`` exit,
``box`` / default codergen, ``parallelogram`` tool, ``diamond`` conditional, ``hexagon`` wait.human,
``component`` parallel, ``tripleoctagon`` parallel.fan_in, ``house`` stack.manager_loop); this pack adds
``type="escalate"``, ``type="checkpoint"``, ``type="task"`` and ``type="decision"``.  Handler types the
engine cannot run yet (human gates, parallel, fan-in, manager loops) are parsed, reported by
``type_supported`` and disable the plan.  Attributes with no meaning inside Agent-Zero (``fidelity``,
``thread_id``, ``llm_model``, ``model_stylesheet``, ...) are validated and kept under ``_attractor``.
"""

from __future__ import annotations

import re
from typing import Any

from .dot import DotGraph, Duration, Value, parse
from .lint import Diagnostic
from .routing import ConditionError, parse_condition

SHAPES = {"Mdiamond": "start", "Msquare": "exit", "box": "codergen", "parallelogram": "tool",
          "diamond": "conditional", "hexagon": "wait.human", "component": "parallel",
          "tripleoctagon": "parallel.fan_in", "house": "stack.manager_loop"}
HANDLER_TO_NODE = {"start": "start", "exit": "exit", "codergen": "task", "tool": "task", "conditional": "decision",
                   "task": "task", "decision": "decision", "escalate": "escalate", "checkpoint": "checkpoint",
                   "wait.human": "human", "human": "human", "parallel": "parallel", "parallel.fan_in": "fan_in",
                   "fan_in": "fan_in"}
UNSUPPORTED = {"stack.manager_loop": "manager loop"}
SHAPE_OF = {"start": "Mdiamond", "exit": "Msquare", "task": "box", "decision": "diamond", "escalate": "octagon",
            "checkpoint": "cylinder", "human": "hexagon", "parallel": "component", "fan_in": "tripleoctagon"}
OUR_NODE_KEYS = ("label", "prompt", "tool", "tool_hint", "max_retries", "pace_level", "reason", "continue_on_fail",
                 "description", "type", "shape", "goal_gate", "retry_target", "fallback_retry_target",
                 "human.default_choice")
ATTRACTOR_NODE_KEYS = ("goal_gate", "retry_target", "fallback_retry_target", "allow_partial", "timeout", "class",
                       "fidelity", "thread_id", "llm_model", "llm_provider", "reasoning_effort", "auto_status")
GRAPH_PLAN_KEYS = {"triggers": "list", "strong_triggers": "list", "domains": "list", "trigger_threshold": "int",
                   "stale_after_turns": "int", "max_turns": "int", "description": "str", "retry_target": "str",
                   "fallback_retry_target": "str"}
CONDITIONS = {"on_success", "on_fail", "on_retry", "on_exhaust", "always"}
FIDELITY = {"full", "truncate", "compact", "summary:low", "summary:medium", "summary:high"}
_STYLESHEET = re.compile(r"\s*(?:(?:[*#.]?[A-Za-z_][\w.-]*|\*)\s*\{\s*(?:[A-Za-z_][\w.]*\s*:\s*[^;{}]+;?\s*)*\}\s*)*\Z")


def handler_type(attrs: dict[str, Value]) -> str:
    explicit = attrs.get("type")
    if isinstance(explicit, str) and explicit:
        return explicit
    return SHAPES.get(str(attrs.get("shape", "box")), "codergen")


def _diag(rule: str, severity: str, plan: str, message: str, fix: str, line: int, col: int,
          node: str | None = None, edge: str | None = None) -> Diagnostic:
    return Diagnostic(rule=rule, severity=severity, plan=plan, node=node, edge=edge, message=message, fix=fix,
                      line=line, col=col)


def to_plan(g: DotGraph) -> tuple[str, dict[str, Any], list[Diagnostic]]:
    """The plan id, the plan JSON, and the DOT-level findings (each with a line and column)."""
    pid = g.name or "dot_plan"
    found: list[Diagnostic] = []
    goal = str(g.attrs.get("goal", ""))
    plan: dict[str, Any] = {"name": str(g.attrs.get("label") or pid)}
    if goal:
        plan["description"] = goal
    extra_graph: dict[str, Any] = {}
    for key, value in g.attrs.items():
        if key in GRAPH_PLAN_KEYS:
            plan[key] = _plan_value(key, value)
        elif key in ("label", "goal", "start"):
            continue
        else:
            extra_graph[key] = _plain(value)
    if isinstance(g.attrs.get("model_stylesheet"), str) and not _STYLESHEET.match(g.attrs["model_stylesheet"]):
        found.append(_diag("stylesheet_syntax", "error", pid, "model_stylesheet is not 'selector { key: value; }' "
                           "rules", "fix the stylesheet syntax", g.line, g.col))
    default_retries = g.attrs.get("default_max_retries", g.attrs.get("default_max_retry"))
    nodes: dict[str, Any] = {}
    starts = []
    for nid, n in g.nodes.items():
        htype = handler_type(n.attrs)
        if not n.declared:
            found.append(_diag("edge_target_exists", "error", pid, f"node '{nid}' is used by an edge but never "
                               "declared", f"declare it: {nid} [label=\"...\"]", n.line, n.col, node=nid))
        if htype in UNSUPPORTED:
            found.append(_diag("type_supported", "error", pid, f"{UNSUPPORTED[htype]} nodes ({htype}) are parsed "
                               "but the engine cannot run them yet", "use task and decision nodes", n.line, n.col,
                               node=nid))
        elif htype not in HANDLER_TO_NODE:
            found.append(_diag("type_known", "error", pid, f"unknown handler type {htype!r}",
                               f"use a shape from {sorted(SHAPES)} or type= one of {sorted(HANDLER_TO_NODE)}",
                               n.line, n.col, node=nid))
        ntype = HANDLER_TO_NODE.get(htype, "task")
        if ntype == "start":
            starts.append(nid)
        fid = n.attrs.get("fidelity")
        if fid is not None and str(fid) not in FIDELITY:
            found.append(_diag("fidelity_valid", "error", pid, f"fidelity {fid!r} is not one of "
                               f"{', '.join(sorted(FIDELITY))}", "use a valid fidelity", n.line, n.col, node=nid))
        if htype == "codergen" and not (n.attrs.get("prompt") or n.attrs.get("label")):
            found.append(_diag("prompt_on_llm_nodes", "warning", pid, "task node without a prompt or label",
                               "add prompt=\"...\"", n.line, n.col, node=nid))
        for key in ("retry_target", "fallback_retry_target"):
            target = n.attrs.get(key)
            if target is not None and str(target) not in g.nodes:
                found.append(_diag("retry_target_exists", "error", pid, f"{key} '{target}' names no node",
                                   "point it at a declared node", n.line, n.col, node=nid))
        if n.attrs.get("goal_gate") is True:
            if not (n.attrs.get("retry_target") or g.attrs.get("retry_target")):
                found.append(_diag("goal_gate_has_retry", "warning", pid, "goal gate without a retry target",
                                   "add retry_target=...", n.line, n.col, node=nid))
        nodes[nid] = _node(n.attrs, ntype, htype, goal, default_retries)
    edges = []
    for e in g.edges:
        edge: dict[str, Any] = {"from": e.src, "to": e.dst}
        cond = e.attrs.get("condition")
        if cond is not None:
            mapped = _condition(str(cond))
            if mapped is None:
                found.append(_diag("condition_syntax", "error", pid, f"condition {cond!r} is neither a shorthand nor "
                                   "key=value / key!=value clauses joined by &&", "use on_success, on_fail, "
                                   "on_retry, on_exhaust, always, or e.g. outcome=success && context.lang=python",
                                   e.line, e.col, edge=f"{e.src} -> {e.dst}"))
            else:
                edge["condition"] = mapped
        if "label" in e.attrs:
            edge["label"] = str(e.attrs["label"])
        if isinstance(e.attrs.get("weight"), (int, float)) and not isinstance(e.attrs.get("weight"), bool):
            edge["weight"] = e.attrs["weight"]
        extra = {k: _plain(v) for k, v in e.attrs.items() if k not in ("condition", "label", "weight")}
        if extra:
            edge["_attractor"] = extra
        edges.append(edge)
    start = str(g.attrs.get("start", "")) or (starts[0] if len(starts) == 1 else "")
    if not start or (starts and start not in starts) or len(starts) > 1:
        found.append(_diag("start_node", "error", pid, f"{len(starts)} start nodes (shape=Mdiamond); exactly one "
                           "is needed", "mark the first node with shape=Mdiamond", g.line, g.col))
    plan["graph"] = {"start": start or next(iter(nodes), ""), "nodes": nodes, "edges": edges}
    if extra_graph:
        plan["_attractor"] = extra_graph
    return pid, plan, found


def _node(attrs: dict[str, Value], ntype: str, htype: str, goal: str, default_retries: Value | None) -> dict:
    node: dict[str, Any] = {"type": ntype}
    if "label" in attrs:
        node["name"] = str(attrs["label"])
    prompt = attrs.get("prompt")
    if ntype == "task":
        action = str(prompt if prompt is not None else attrs.get("label", ""))
        node["action"] = action.replace("$goal", goal)
        if htype == "tool" and "tool" not in attrs:
            node["tool"] = "code_execution_tool"
    for key in ("tool", "tool_hint", "pace_level", "reason", "description", "retry_target",
                "fallback_retry_target"):
        if key in attrs:
            node[key] = str(attrs[key])
    if ntype == "human" and prompt is not None:
        node["description"] = str(prompt).replace("$goal", goal)
    if "human.default_choice" in attrs:
        node["default_choice"] = str(attrs["human.default_choice"])
    for key in ("continue_on_fail", "goal_gate"):
        if key in attrs:
            node[key] = attrs[key]
    retries = attrs.get("max_retries", default_retries if ntype == "task" else None)
    if retries is not None:
        node["max_retries"] = retries
    verify = {k.split(".", 1)[1]: _plain(v) for k, v in attrs.items() if k.startswith("verify.")}
    if "verify" in attrs:
        verify["type"] = str(attrs["verify"])
    if verify:
        node["verify"] = verify
    extra = {k: _plain(v) for k, v in attrs.items()
             if k not in OUR_NODE_KEYS and k != "verify" and not k.startswith("verify.")}
    if extra:
        node["_attractor"] = extra
    return node


def _condition(text: str) -> str | None:
    """A shorthand stays; an expression is kept when it parses (the engine evaluates it)."""
    text = text.strip()
    if text in CONDITIONS:
        return text
    try:
        parse_condition(text)
    except ConditionError:
        return None
    return text


def _plan_value(key: str, value: Value) -> Any:
    kind = GRAPH_PLAN_KEYS[key]
    if kind == "list":
        return [p.strip() for p in str(value).split(",") if p.strip()]
    return value if kind == "int" else str(value)


def _plain(value: Value) -> Any:
    return value.raw if isinstance(value, Duration) else value


def load_dot_plan(text: str) -> tuple[str, dict[str, Any], list[Diagnostic]]:
    return to_plan(parse(text))


# ── export: a plan as DOT ───────────────────────────────────────────────────


def quote(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{text}"'


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
    start = raw["graph"]["start"]
    if raw["graph"]["nodes"].get(start, {}).get("type", "task") != "start":
        gattrs.append(("start", start))  # the run begins at a node that is not a start node
    gattrs += sorted(raw.get("_attractor", {}).items())
    lines.append(f"    graph {_attrs(gattrs, graphviz)}")
    visits = (highlight or {}).get("nodes", {})
    for nid, node in raw["graph"]["nodes"].items():
        ntype = node.get("type", "task")
        pairs: list[tuple[str, Any]] = [("shape", SHAPE_OF[ntype])]
        if ntype in ("escalate", "checkpoint"):
            pairs.append(("type", ntype))
        if "name" in node:
            pairs.append(("label", node["name"]))
        if ntype == "task":
            pairs.append(("prompt", node.get("action", "")))  # an empty prompt stays empty on re-import
        for key in ("tool", "tool_hint", "description", "reason", "pace_level", "max_retries", "continue_on_fail",
                    "goal_gate", "retry_target", "fallback_retry_target"):
            if key in node:
                pairs.append((key, node[key]))
        if "default_choice" in node:
            pairs.append(("human.default_choice", node["default_choice"]))
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
