"""Pictures of plans for people: Graphviz DOT made for drawing, mermaid flowcharts, and a run's visit counts.

(The DOT that round-trips a plan is ``dot_plan.to_dot``; this one is for looking at.)  Every edge shows its
condition, with its label when it has one; edges between the same two nodes are drawn as one arrow that lists
each condition; a traced run fills the nodes it entered and thickens the edges it followed, each with its
count.
"""

from __future__ import annotations

import re
from typing import Any

MERMAID_SHAPE = {"start": ("([", "])"), "exit": ("([", "])"), "task": ("[", "]"), "decision": ("{", "}"),
                 "escalate": ("[[", "]]"), "checkpoint": ("[(", ")]"), "human": ("{{", "}}")}
SHAPE = {"start": "oval", "exit": "box", "task": "box", "decision": "diamond", "escalate": "octagon",
         "checkpoint": "cylinder", "human": "hexagon", "parallel": "component", "fan_in": "tripleoctagon"}
FILL = {"start": "#eeeeee", "exit": "#d9f2d9", "escalate": "#f8d7da", "decision": "#fff3cd", "human": "#e2d9f3"}
RUN = "#1f6feb"


def trace_counts(events: list[dict[str, Any]]) -> dict[str, Any]:
    """How often a run entered each node and followed each edge."""
    nodes: dict[str, int] = {}
    edges: dict[tuple[str, str, str], int] = {}
    for e in events:
        if e.get("type") == "node_entered":  # a run enters its start node once, right after plan_activated
            nodes[e["node"]] = nodes.get(e["node"], 0) + 1
        elif e.get("type") == "edge_followed":
            key = (e["from"], e["to"], e.get("condition", "always"))
            edges[key] = edges.get(key, 0) + 1
    return {"nodes": nodes, "edges": edges}


def _id(node_id: str) -> str:
    """A node id as DOT writes it: bare when it is an identifier, else quoted."""
    return node_id if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", node_id) else f'"{_text(node_id)}"'


def _text(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


def _lines(parts: list[str]) -> str:
    """Graphviz label text: each part escaped, parts on lines of their own."""
    return "\\n".join(_text(p) for p in parts)


def _condition(e: dict[str, Any]) -> str:
    cond = e.get("condition", "always")
    return f"{e['label']} ({cond})" if e.get("label") else cond


def _merged_edges(raw: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Edges grouped by (from, to) in plan order: one arrow per pair of nodes."""
    pairs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in raw["graph"]["edges"]:
        pairs.setdefault((e["from"], e["to"]), []).append(e)
    return pairs


def picture(plan_id: str, raw: dict[str, Any], highlight: dict[str, Any] | None = None) -> str:
    """The plan as DOT for Graphviz to draw (svg, png)."""
    if "graph" not in raw:
        raise ValueError(f"plan '{plan_id}' is a linear plan (steps); only graph plans can be drawn")
    visits = (highlight or {}).get("nodes", {})
    counts = (highlight or {}).get("edges", {})
    title = raw.get("name", plan_id) + (" (a run's path in blue, with counts)" if highlight else "")
    lines = ["digraph plan {",
             f'    graph [label="{_text(title)}", labelloc=t, fontsize=16, fontname="Helvetica", rankdir=TB, '
             f"nodesep=0.5, ranksep=0.55, forcelabels=true]",
             '    node [fontname="Helvetica", fontsize=11, style=filled, fillcolor=white]',
             '    edge [fontname="Helvetica", fontsize=9, color="#555555"]']
    for nid, node in raw["graph"]["nodes"].items():
        ntype = node.get("type", "task")
        label = [node.get("name", nid)]
        attrs = [f"shape={SHAPE.get(ntype, 'box')}", f'fillcolor="{FILL.get(ntype, "white")}"']
        if ntype == "exit":
            attrs += ['style="filled,rounded"', "peripheries=2"]
        if ntype == "task" and node.get("max_retries"):
            label.append(f"up to {node['max_retries'] + 1} attempts")
        if ntype == "escalate":
            label.append(f"PACE {node.get('pace_level', 'contingent')}")
        if nid in visits:
            label.append(f"× {visits[nid]}")
            attrs += [f'color="{RUN}"', "penwidth=2.5", 'fillcolor="#cde4ff"']
        lines.append(f'    {_id(nid)} [label="{_lines(label)}", {", ".join(attrs)}]')
    for (src, dst), group in _merged_edges(raw).items():
        label_lines, taken = [], 0
        for e in group:
            n = counts.get((src, dst, e.get("condition", "always")), 0)
            taken += n
            label_lines.append(_condition(e) + (f" × {n}" if n else ""))
        attrs = [f'label="{_lines(label_lines)}"']
        if taken:
            attrs += [f'color="{RUN}"', f'fontcolor="{RUN}"', "penwidth=2.5"]
        if any(e.get("condition") in ("on_retry", "on_fail", "on_exhaust") for e in group) and not taken:
            attrs.append("style=dashed")
        lines.append(f'    {_id(src)} -> {_id(dst)} [{", ".join(attrs)}]')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _label(text: str) -> str:
    return text.replace('"', "'")


def mermaid(plan_id: str, raw: dict[str, Any], highlight: dict[str, Any] | None = None) -> str:
    if "graph" not in raw:
        raise ValueError(f"plan '{plan_id}' is a linear plan (steps); only graph plans can be drawn")
    visits = (highlight or {}).get("nodes", {})
    counts = (highlight or {}).get("edges", {})
    lines = ["flowchart TD", f"    %% {plan_id}: {_label(raw.get('name', plan_id))}"]
    for nid, node in raw["graph"]["nodes"].items():
        left, right = MERMAID_SHAPE.get(node.get("type", "task"), ("[", "]"))
        name = _label(node.get("name", nid)) + (f" x{visits[nid]}" if nid in visits else "")
        lines.append(f'    {nid}{left}"{name}"{right}')
    for (src, dst), group in _merged_edges(raw).items():
        texts, taken = [], 0
        for e in group:
            n = counts.get((src, dst, e.get("condition", "always")), 0)
            taken += n
            texts.append(_label(_condition(e)) + (f" x{n}" if n else ""))
        arrow = "==>" if taken else "-->"
        lines.append(f'    {src} {arrow}|"{" / ".join(texts)}"| {dst}')
    if visits:
        lines.append("    classDef visited fill:#cde4ff,stroke:#1f6feb")
        lines.append("    class " + ",".join(visits) + " visited")
    return "\n".join(lines) + "\n"
