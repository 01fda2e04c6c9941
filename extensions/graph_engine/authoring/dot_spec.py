"""What the Attractor spec decides about a parsed DOT graph, before it becomes a plan.

* **Handler types** (spec 2.8): ``type`` wins, else the shape; a node with neither a ``type`` nor a shape other
  than ``box`` whose id is ``start``/``Start`` is the start, ``exit``/``Exit``/``end``/``End`` the exit (spec
  3.2 "Resolves by: (1) shape=Mdiamond, (2) id="start"", and 7.2).
* **Transforms** (spec 3.1, 8): a node's ``label`` defaults to its id, ``$goal`` in a ``prompt`` becomes the
  graph's ``goal``, and the ``model_stylesheet`` sets ``llm_model``, ``llm_provider`` and ``reasoning_effort``
  on the nodes that do not have them (universal ``*`` < shape < ``.class`` < ``#id``; among equals the later
  rule wins), then the graph's own values of those keys.  ``view`` gives these attributes without changing the
  parsed graph.
* **Lint** (spec 7.2), each finding with the line and column of its node, edge or graph: ``start_node`` and
  ``terminal_node`` (exactly one each), ``start_no_incoming``, ``exit_no_outgoing``,
  ``reachability`` (always, whatever else is wrong), ``dead_end``, ``condition_syntax`` (every bad edge),
  ``type_known`` / ``fidelity_valid`` / ``retry_target_exists`` / ``goal_gate_has_retry`` /
  ``prompt_on_llm_nodes`` (warnings) and ``stylesheet_syntax`` (errors).  A node named only
  by an edge exists, as in Graphviz and the spec's own human-gate example (``edge_target_exists`` cannot
  happen in DOT); with no prompt or label it gets the ``prompt_on_llm_nodes`` warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .dot import DotGraph, DotNode, Value
from ..core.kinds import NODE_KINDS, NODE_TYPES
from ..core.model import FIDELITY
from .lint import Diagnostic
from ..core.routing import condition_problem, reachable

SHAPES = {"Mdiamond": "start", "Msquare": "exit", "box": "codergen", "parallelogram": "tool",
          "diamond": "conditional", "hexagon": "wait.human", "component": "parallel",
          "tripleoctagon": "parallel.fan_in", "house": "stack.manager_loop"}
HANDLER_TO_NODE = {**{name: name for name in NODE_TYPES}, "codergen": "task", "tool": "task",
                   "conditional": "decision", "wait.human": "human", "parallel.fan_in": "fan_in",
                   "stack.manager_loop": "manager"}  # Attractor's names too
START_IDS = ("start", "Start")
EXIT_IDS = ("exit", "Exit", "end", "End")
STYLE_PROPERTIES = ("llm_model", "llm_provider", "reasoning_effort")


# ── handler types ───────────────────────────────────────────────────────────


def handler_type(attrs: dict[str, Value], nid: str = "") -> str:
    explicit = attrs.get("type")
    if isinstance(explicit, str) and explicit:
        return explicit
    shape = str(attrs.get("shape", "box"))
    if shape == "box":
        if nid in START_IDS:
            return "start"
        if nid in EXIT_IDS:
            return "exit"
    return SHAPES.get(shape, "codergen")


def node_type(htype: str) -> str:
    """The plan's node type for a handler type (an unknown one runs as a task, with a type_known warning)."""
    return HANDLER_TO_NODE.get(htype, "task")


# ── model stylesheet ────────────────────────────────────────────────────────


class StylesheetError(ValueError):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message, self.offset = message, offset


@dataclass(frozen=True)
class Rule:
    kind: str  # "*", "shape", "class", "id"
    name: str
    specificity: int
    order: int
    declarations: tuple[tuple[str, str], ...]

    def matches(self, nid: str, shape: str, classes: set[str]) -> bool:
        return {"*": True, "shape": shape == self.name, "class": self.name in classes, "id": nid == self.name}[
            self.kind]


_SS_TOKEN = re.compile(r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<word>[A-Za-z0-9_\-][A-Za-z0-9_.\-]*(?::[A-Za-z0-9_.\-]+)*)|(?P<punct>[*#.{};:])|'
                       r'(?P<other>\S))', re.DOTALL)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CLASS = re.compile(r"[a-z0-9-]+\Z")
_SPECIFICITY = {"*": 0, "shape": 1, "class": 2, "id": 3}


def parse_stylesheet(text: str) -> list[Rule]:
    """The rules of ``selector { property: value; ... }`` (spec 8.2); raises StylesheetError with the offset."""
    tokens = []
    pos = 0
    while True:
        m = _SS_TOKEN.match(text, pos)
        if m is None:
            break
        kind = m.lastgroup or "other"
        tokens.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    tokens.append(("end", "", len(text)))
    rules: list[Rule] = []
    i = 0

    def fail(message: str, tok: tuple) -> StylesheetError:
        return StylesheetError(message, tok[2])

    while tokens[i][0] != "end":
        tok = tokens[i]
        if tok[1] == "*":
            kind, name, i = "*", "*", i + 1
        elif tok[1] in ("#", "."):
            nxt = tokens[i + 1]
            if nxt[0] != "word" or not (_IDENT if tok[1] == "#" else _CLASS).match(nxt[1]):
                what = "a node id" if tok[1] == "#" else "a class name (lower-case letters, digits, '-')"
                raise fail(f"'{tok[1]}' must be followed by {what}", nxt)
            kind, name, i = ("id" if tok[1] == "#" else "class"), nxt[1], i + 2
        elif tok[0] == "word" and _IDENT.match(tok[1]):
            kind, name, i = "shape", tok[1], i + 1
        else:
            raise fail(f"expected a selector (*, a shape, .class or #id), found {tok[1]!r}", tok)
        if tokens[i][1] != "{":
            raise fail(f"expected '{{' after the selector, found {tokens[i][1] or 'the end'!r}", tokens[i])
        i += 1
        decls: list[tuple[str, str]] = []
        while tokens[i][1] != "}":
            prop = tokens[i]
            if prop[0] == "word" and ":" in prop[1]:  # llm_model:gpt-5 written without spaces
                key, _, rest = prop[1].partition(":")
                tokens[i:i + 1] = [("word", key, prop[2]), ("punct", ":", prop[2] + len(key)),
                                   ("word", rest, prop[2] + len(key) + 1)]
                prop = tokens[i]
            if prop[0] == "end":
                raise fail("'{' is never closed: add '}'", prop)
            if prop[1] not in STYLE_PROPERTIES:
                raise fail(f"unknown property {prop[1]!r}: use {', '.join(STYLE_PROPERTIES)}", prop)
            if tokens[i + 1][1] != ":":
                raise fail(f"expected ':' after {prop[1]}", tokens[i + 1])
            value = tokens[i + 2]
            if value[0] == "string":
                decls.append((prop[1], value[1][1:-1]))
            elif value[0] == "word":
                decls.append((prop[1], value[1]))
            else:
                raise fail(f"{prop[1]} has no value", value)
            i += 3
            if tokens[i][1] == ";":
                i += 1
            elif tokens[i][1] != "}":
                raise fail(f"expected ';' or '}}' after the value of {prop[1]}", tokens[i])
        i += 1
        rules.append(Rule(kind, name, _SPECIFICITY[kind], len(rules), tuple(decls)))
    return rules


def classes_of(attrs: dict[str, Value]) -> set[str]:
    return {c for c in re.split(r"[,\s]+", str(attrs.get("class", ""))) if c}


def styled(g: DotGraph, node: DotNode, rules: list[Rule]) -> dict[str, str]:
    """The stylesheet's and the graph's values for the model properties the node does not set itself."""
    shape, classes = str(node.attrs.get("shape", "box")), classes_of(node.attrs)
    best: dict[str, tuple[int, int, str]] = {}
    for rule in rules:
        if not rule.matches(node.id, shape, classes):
            continue
        for prop, value in rule.declarations:
            rank = (rule.specificity, rule.order)
            if prop not in best or rank >= best[prop][:2]:
                best[prop] = (*rank, value)
    out = {}
    for prop in STYLE_PROPERTIES:
        if prop in node.attrs:
            continue
        if prop in best:
            out[prop] = best[prop][2]
        elif isinstance(g.attrs.get(prop), str):
            out[prop] = str(g.attrs[prop])
    return out


def stylesheet_rules(g: DotGraph) -> tuple[list[Rule], StylesheetError | None]:
    text = g.attrs.get("model_stylesheet", "")
    if not isinstance(text, str) or not text.strip():
        return [], None
    try:
        return parse_stylesheet(text), None
    except StylesheetError as exc:
        return [], exc


def view(g: DotGraph) -> dict[str, dict[str, Value]]:
    """Each node's attributes after the spec's transforms (label, $goal, stylesheet); the graph is unchanged."""
    goal = str(g.attrs.get("goal", ""))
    rules, _ = stylesheet_rules(g)
    out = {}
    for nid, node in g.nodes.items():
        attrs = dict(node.attrs)
        attrs.setdefault("label", nid)
        if isinstance(attrs.get("prompt"), str) and "$goal" in attrs["prompt"]:
            attrs["prompt"] = attrs["prompt"].replace("$goal", goal)
        attrs.update(styled(g, node, rules))
        out[nid] = attrs
    return out


# ── lint ────────────────────────────────────────────────────────────────────


def _d(rule: str, severity: str, pid: str, message: str, fix: str, at: Any, node: str | None = None,
       edge: tuple[str, str] | None = None) -> Diagnostic:
    return Diagnostic(rule=rule, severity=severity, plan=pid, node=node,
                      edge=f"{edge[0]} -> {edge[1]}" if edge else None, message=message, fix=fix,
                      line=at.line, col=at.col, src=edge[0] if edge else None, dst=edge[1] if edge else None)


def roles(g: DotGraph) -> tuple[list[str], list[str]]:
    """The start nodes and the exit nodes, in the order they appear.  The graph attribute ``start`` (this
    pack's: a run that begins at a task) names the start when no node is a start node."""
    types = {nid: handler_type(n.attrs, nid) for nid, n in g.nodes.items()}
    starts = [n for n, t in types.items() if t == "start"]
    named = str(g.attrs.get("start", ""))
    if named in g.nodes:
        starts = [named] + [n for n in starts if n != named]
    return starts, [n for n, t in types.items() if t == "exit"]


def lint_graph(g: DotGraph, pid: str) -> list[Diagnostic]:
    """The spec's rules on the graph as written; independent of each other, so one error hides no other."""
    found: list[Diagnostic] = []
    starts, exits = roles(g)
    found += _role_rules(g, pid, starts, exits)
    found += _node_rules(g, pid)
    found += _edge_rules(g, pid, starts, exits)
    if starts:
        out: dict[str, list[str]] = {}
        for e in g.edges:
            out.setdefault(e.src, []).append(e.dst)
        seen = reachable(starts, out)
        for nid, n in g.nodes.items():
            if nid not in seen:
                found.append(_d("reachability", "error", pid, f"no path from the start node '{starts[0]}' reaches "
                                f"'{nid}'", f"add an edge to {nid} from a reachable node, or remove it", n,
                                node=nid))
    rules_error = stylesheet_rules(g)[1]
    if rules_error is not None:
        found.append(_d("stylesheet_syntax", "error", pid, f"model_stylesheet at character {rules_error.offset + 1}: "
                        f"{rules_error.message}", "write rules as selector { llm_model: ...; llm_provider: ...; "
                        "reasoning_effort: ...; } with selector *, a shape, .class or #id", g))
    return found


def _role_rules(g: DotGraph, pid: str, starts: list[str], exits: list[str]) -> list[Diagnostic]:
    found = []
    named = g.attrs.get("start")
    if named is not None and str(named) not in g.nodes:
        found.append(_d("start_node", "error", pid, f"graph start '{named}' names no node", "name the first node in "
                        "start, or drop it and mark the start node shape=Mdiamond", g))
    for rule, kind, found_ids, shape, ids in (("start_node", "start", starts, "Mdiamond", "the id start"),
                                              ("terminal_node", "exit", exits, "Msquare", "the id exit or end")):
        if len(found_ids) == 1:
            continue
        extra = found_ids[1] if len(found_ids) > 1 else None
        fix = (f"keep one {kind} node" + (": route every end into it" if kind == "exit" else "") if found_ids else
               f"add {kind} [shape={shape}] and " + ("an edge from it to the first step" if kind == "start" else
                                                     "edges into it"))
        found.append(_d(rule, "error", pid, f"{len(found_ids)} {kind} nodes ({', '.join(found_ids) or 'none'}); "
                        f"exactly one is needed (shape={shape}, or {ids})", fix,
                        g.nodes[extra] if extra else g, node=extra))
    return found


def _node_rules(g: DotGraph, pid: str) -> list[Diagnostic]:
    found = []
    fid = g.attrs.get("default_fidelity")
    if fid not in (None, "") and str(fid) not in FIDELITY:
        found.append(_d("fidelity_valid", "warning", pid, f"default_fidelity {fid!r} is not one of "
                        f"{', '.join(FIDELITY)}", "use one of those modes", g))
    for key in ("retry_target", "fallback_retry_target"):
        target = g.attrs.get(key)
        if target not in (None, "") and str(target) not in g.nodes:
            found.append(_d("retry_target_exists", "warning", pid, f"graph {key} '{target}' names no node (it is "
                            "ignored)", "point it at a declared node", g))
    sources = {e.src for e in g.edges}
    for nid, n in g.nodes.items():
        htype = handler_type(n.attrs, nid)
        if htype not in HANDLER_TO_NODE:
            found.append(_d("type_known", "warning", pid, f"unknown handler type {htype!r}: the node runs as a task",
                            f"use a shape from {', '.join(sorted(SHAPES))} or type= one of "
                            f"{', '.join(sorted(HANDLER_TO_NODE))}", n, node=nid))
        fid = n.attrs.get("fidelity")
        if fid is not None and str(fid) not in FIDELITY:
            found.append(_d("fidelity_valid", "warning", pid, f"fidelity {fid!r} is not one of {', '.join(FIDELITY)}",
                            "use one of those modes", n, node=nid))
        if htype == "codergen" and not (n.attrs.get("prompt") or n.attrs.get("label")):
            how = "" if n.declared else " (only named by an edge: a typo of another node's id?)"
            found.append(_d("prompt_on_llm_nodes", "warning", pid, f"task node without a prompt or label{how}",
                            f"declare it with a prompt: {nid} [prompt=\"...\"]", n, node=nid))
        for key in ("retry_target", "fallback_retry_target"):
            target = n.attrs.get(key)
            if target not in (None, "") and str(target) not in g.nodes:
                found.append(_d("retry_target_exists", "warning", pid, f"{key} '{target}' names no node (it is "
                                "ignored)", "point it at a declared node", n, node=nid))
        if n.attrs.get("goal_gate") is True and not any(
                n.attrs.get(k) or g.attrs.get(k) for k in ("retry_target", "fallback_retry_target")):
            found.append(_d("goal_gate_has_retry", "warning", pid, "goal gate without a retry target: an exit "
                            "reached before it passes ends the run as failed", "add retry_target=...", n, node=nid))
        if not NODE_KINDS[node_type(htype)].terminal and nid not in sources:
            found.append(_d("dead_end", "error", pid, f"'{nid}' is not an exit and no edge leaves it: a run that "
                            "gets there stalls", f"add an edge from {nid} to the next node or the exit", n,
                            node=nid))
    return found


def _edge_rules(g: DotGraph, pid: str, starts: list[str], exits: list[str]) -> list[Diagnostic]:
    found = []
    for e in g.edges:
        pair = (e.src, e.dst)
        if e.dst in starts and handler_type(g.nodes[e.dst].attrs, e.dst) == "start":  # not a task named in start
            found.append(_d("start_no_incoming", "error", pid, f"edge {e.src} -> {e.dst} leads into the start node",
                            "point the edge at the first step instead", e, edge=pair))
        if e.src in exits:
            found.append(_d("exit_no_outgoing", "error", pid, f"edge {e.src} -> {e.dst} leaves the exit node",
                            "remove the edge: the run ends at the exit", e, edge=pair))
        cond = e.attrs.get("condition")
        problem = condition_problem(str(cond)) if cond is not None else ""
        if problem:
            found.append(_d("condition_syntax", "error", pid, f"edge {e.src} -> {e.dst}: condition {cond!r}: "
                            f"{problem}", "use clauses key=value or key!=value joined by &&, keys outcome, "
                            "preferred_label or context.<name> (or a shorthand such as on_success)", e, edge=pair))
        fid = e.attrs.get("fidelity")
        if fid is not None and str(fid) not in FIDELITY:
            found.append(_d("fidelity_valid", "warning", pid, f"edge {e.src} -> {e.dst}: fidelity {fid!r} is not "
                            f"one of {', '.join(FIDELITY)}", "use one of those modes", e, edge=pair))
    return found
