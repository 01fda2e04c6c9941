"""Pictures of plans: mermaid flowcharts, and the visit counts of a run for highlighting (DOT is in dot_plan)."""

from __future__ import annotations

from typing import Any

MERMAID_SHAPE = {"start": ("([", "])"), "exit": ("([", "])"), "task": ("[", "]"), "decision": ("{", "}"),
                 "escalate": ("[[", "]]"), "checkpoint": ("[(", ")]")}


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
    for i, e in enumerate(raw["graph"]["edges"]):
        cond = e.get("condition", "always")
        text = _label(e.get("label") or ("" if cond == "always" else cond))
        n = counts.get((e["from"], e["to"], cond))
        text = f"{text} x{n}".strip() if n else text
        arrow = "==>" if n else "-->"
        lines.append(f'    {e["from"]} {arrow}|"{text}"| {e["to"]}' if text else f"    {e['from']} {arrow} {e['to']}")
    if visits:
        lines.append("    classDef visited fill:#cde4ff,stroke:#1f6feb")
        lines.append("    class " + ",".join(visits) + " visited")
    return "\n".join(lines) + "\n"
