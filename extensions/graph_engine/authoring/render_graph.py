"""Pictures of plans for people: Graphviz DOT made for drawing, mermaid flowcharts, and a run's visit counts.

(The DOT that round-trips a plan is ``dot_plan.to_dot``; this one is for looking at.)  Every edge shows its
condition, with its label when it has one; edges between the same two nodes are drawn as one arrow that lists
each condition; a traced run fills the nodes it entered and thickens the edges it followed, each with its
count, and marks the node where it ended.  ``run_picture`` makes the picture written when a run ends: SVG
when Graphviz's ``dot`` is installed, mermaid text otherwise.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any, Mapping

from ..boundary import settings
from ..core.kinds import ENDINGS, node_kind
from ..core.model import Plan
from ..core.routing import ConditionError, parse_condition

RUN = "#1f6feb"
FINAL = "#0b3d91"
DOT_SECONDS = 1.0  # the drawing thread waits at most this long for Graphviz (the shipped plans take 20-60 ms)
DOT_MAX_NODES = 40  # above it Graphviz's layout time grows steeply (a 60-node chain with a shared escalation: 3 s)
PICTURE_SETTINGS = settings.PICTURES


def trace_counts(events: list[dict[str, Any]]) -> dict[str, Any]:
    """How often a run entered each node and followed each edge, and the node it is at or ended at."""
    nodes: dict[str, int] = {}
    edges: dict[tuple[str, str, str], int] = {}
    final, ended = "", False
    for e in events:
        if e.get("type") == "node_entered" and isinstance(e.get("node"), str):  # a run enters its start node
            nodes[e["node"]] = nodes.get(e["node"], 0) + 1  # once, right after plan_activated
            final = e["node"]
        elif e.get("type") == "edge_followed" and isinstance(e.get("from"), str) and isinstance(e.get("to"), str):
            key = (e["from"], e["to"], str(e.get("condition", "always")))
            edges[key] = edges.get(key, 0) + 1
        elif e.get("type") in ENDINGS and isinstance(e.get("node"), str):
            final, ended = e["node"], True
    return {"nodes": nodes, "edges": edges, "final": final, "ended": ended}


def _where(highlight: dict[str, Any]) -> str:
    return "the run ended here" if highlight.get("ended") else "the run is here"


def drawable(plan: Plan) -> Mapping[str, Any]:
    """The plan as the drawing functions read it: a graph plan's own document; a linear plan's steps as the
    chain of nodes the engine runs them as."""
    if "graph" in plan.raw:
        return plan.raw
    nodes = {nid: {"type": n.type, "name": n.name} for nid, n in plan.nodes.items()}
    edges = [{"from": e.src, "to": e.dst, "condition": e.condition} for e in plan.edges]
    return {"name": plan.name, "graph": {"start": plan.start, "nodes": nodes, "edges": edges}}


def picture_setting() -> str:
    """GRAPH_ENGINE_PICTURE, else the plugin setting: ``auto`` (SVG when Graphviz is installed, else mermaid),
    ``mermaid`` or ``off``."""
    value = str(settings.active("picture")).strip().lower()
    return value if value in PICTURE_SETTINGS else "auto"


def run_picture(plan: Plan, events: list[dict[str, Any]]) -> tuple[str, str]:
    """(file suffix, text) of a run's picture: SVG drawn by Graphviz when ``dot`` is installed and draws it
    (and GRAPH_ENGINE_PICTURE is not ``mermaid``) for a plan of at most DOT_MAX_NODES nodes within
    DOT_SECONDS, else mermaid text (any mermaid viewer draws it): a picture is never long in coming."""
    raw, highlight = drawable(plan), trace_counts(events)
    small = len(plan.nodes) <= DOT_MAX_NODES
    dot = shutil.which("dot") if small and picture_setting() == "auto" else None
    if dot:
        try:
            done = subprocess.run([dot, "-Tsvg"], input=picture(plan.id, raw, highlight).encode("utf-8"),
                                  capture_output=True, timeout=DOT_SECONDS, check=False)
        except (OSError, subprocess.SubprocessError):
            done = None
        if done is not None and done.returncode == 0 and done.stdout:
            return ".svg", done.stdout.decode("utf-8", "replace")
    return ".mmd", mermaid(plan.id, raw, highlight)


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


def _merged_edges(raw: Mapping[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Edges grouped by (from, to) in plan order: one arrow per pair of nodes."""
    pairs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in raw["graph"]["edges"]:
        pairs.setdefault((e["from"], e["to"]), []).append(e)
    return pairs


def _counted(src: str, dst: str, group: list[dict[str, Any]], counts: dict, fmt: Any) -> tuple[list[str], int]:
    """Each condition's text on one arrow (``fmt(text, times taken)``) and how often the run took the arrow."""
    texts, taken = [], 0
    for e in group:
        n = counts.get((src, dst, e.get("condition", "always")), 0)
        taken += n
        texts.append(fmt(_condition(e), n))
    return texts, taken


def picture(plan_id: str, raw: Mapping[str, Any], highlight: dict[str, Any] | None = None) -> str:
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
        kind = node_kind(ntype)
        attrs = [f"shape={kind.picture}", f'fillcolor="{kind.fill}"']
        if kind.ends == "completed":
            attrs += ['style="filled,rounded"', "peripheries=2"]
        if kind.judged and node.get("max_retries", kind.retries):
            label.append(f"up to {node.get('max_retries', kind.retries) + 1} attempts")
        if kind.ends == "escalated":
            label.append(f"PACE {node.get('pace_level', 'contingent')}")
        if nid in visits:
            label.append(f"× {visits[nid]}")
            attrs += [f'color="{RUN}"', "penwidth=2.5", 'fillcolor="#cde4ff"']
        if nid == (highlight or {}).get("final"):
            label.append(_where(highlight or {}))
            attrs += [f'color="{FINAL}"', "penwidth=4"]
        lines.append(f'    {_id(nid)} [label="{_lines(label)}", {", ".join(attrs)}]')
    for (src, dst), group in _merged_edges(raw).items():
        label_lines, taken = _counted(src, dst, group, counts, lambda text, n: text + (f" × {n}" if n else ""))
        attrs = [f'label="{_lines(label_lines)}"']
        if taken:
            attrs += [f'color="{RUN}"', f'fontcolor="{RUN}"', "penwidth=2.5"]
        if any(is_failure_route(e.get("condition")) for e in group) and not taken:
            attrs.append("style=dashed")
        lines.append(f'    {_id(src)} -> {_id(dst)} [{", ".join(attrs)}]')
    lines.append("}")
    return "\n".join(lines) + "\n"


FAILURE_SHORTHANDS = ("on_retry", "on_fail", "on_exhaust")


def is_failure_route(condition: Any) -> bool:
    """An edge taken when a step failed: a failure shorthand, or an expression that asks for a failed outcome
    (`outcome=fail`, `outcome=retry`, `outcome!=success`): drawn dashed."""
    if condition in FAILURE_SHORTHANDS:
        return True
    if not isinstance(condition, str) or "outcome" not in condition:
        return False
    try:
        clauses = parse_condition(condition)
    except ConditionError:
        return False
    return any(key == "outcome" and ((op == "=" and value in ("fail", "retry")) or (op == "!=" and value == "success"))
               for key, op, value in clauses)


def _label(text: str) -> str:
    return text.replace('"', "'")


def mermaid(plan_id: str, raw: Mapping[str, Any], highlight: dict[str, Any] | None = None) -> str:
    if "graph" not in raw:
        raise ValueError(f"plan '{plan_id}' is a linear plan (steps); only graph plans can be drawn")
    visits = (highlight or {}).get("nodes", {})
    counts = (highlight or {}).get("edges", {})
    lines = ["flowchart TD", f"    %% {plan_id}: {_label(raw.get('name', plan_id))}"]
    for nid, node in raw["graph"]["nodes"].items():
        left, right = node_kind(node.get("type", "task")).mermaid
        name = _label(node.get("name", nid)) + (f" x{visits[nid]}" if nid in visits else "")
        if nid == (highlight or {}).get("final"):
            name += f" ({_where(highlight or {})})"
        lines.append(f'    {nid}{left}"{name}"{right}')
    for (src, dst), group in _merged_edges(raw).items():
        texts, taken = _counted(src, dst, group, counts, lambda text, n: _label(text) + (f" x{n}" if n else ""))
        arrow = "==>" if taken else "-->"
        lines.append(f'    {src} {arrow}|"{" / ".join(texts)}"| {dst}')
    if visits:
        lines.append("    classDef visited fill:#cde4ff,stroke:#1f6feb")
        lines.append("    class " + ",".join(visits) + " visited")
    final = (highlight or {}).get("final")
    if final in raw["graph"]["nodes"]:
        lines.append("    classDef final stroke:#0b3d91,stroke-width:4px")
        lines.append(f"    class {final} final")
    return "\n".join(lines) + "\n"
