"""A strict parser for the Attractor subset of Graphviz DOT: hand-written lexer, recursive descent.

Accepted: one ``digraph``; ``graph`` / ``node`` / ``edge`` attribute blocks; top-level ``key = value``;
chained edges ``a -> b -> c [attrs]`` (the attributes apply to every edge of the chain); subgraphs,
flattened, with scoped ``node`` / ``edge`` defaults and a class derived from the subgraph's label;
``//`` and ``/* */`` comments; optional semicolons; commas (or nothing) between attributes; typed values
(quoted strings with ``\\" \\n \\t \\\\`` escapes and raw newlines, integers, floats, booleans, durations
``250ms 900s 15m 2h 1d``, bare values such as ``summary:high``); qualified keys (``tool_hooks.pre``).

Rejected with a message and a 1-based line:column: ``graph`` (undirected), ``strict``, ``--`` edges, more
than one digraph, HTML labels, ports, quoted or otherwise invalid node ids, unterminated strings or
comments, missing values, junk after the graph.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any, Union

ID_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_INT = re.compile(r"-?\d+\Z")
_FLOAT = re.compile(r"-?(?:\d+\.\d*|\.\d+)\Z")
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)\Z")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_INPUT = 5_000_000  # characters
_GOOD_KEYS: set[str] = set()  # attribute names already checked (they repeat on every node)
KEYWORDS = ("digraph", "graph", "node", "edge", "subgraph", "strict")


class DotSyntaxError(ValueError):
    def __init__(self, message: str, line: int, col: int) -> None:
        self.message, self.line, self.col = message, line, col
        super().__init__(f"{line}:{col}: {message}")


@dataclass(frozen=True)
class Duration:
    ms: int
    raw: str


Value = Union[str, int, float, bool, Duration]


@dataclass
class DotNode:
    id: str
    attrs: dict[str, Value]
    line: int
    col: int
    declared: bool = True  # False: created only by an edge


@dataclass
class DotEdge:
    src: str
    dst: str
    attrs: dict[str, Value]
    line: int
    col: int


@dataclass
class DotGraph:
    name: str
    attrs: dict[str, Value] = field(default_factory=dict)
    nodes: dict[str, DotNode] = field(default_factory=dict)
    edges: list[DotEdge] = field(default_factory=list)
    line: int = 1
    col: int = 1


# ── lexer ───────────────────────────────────────────────────────────────────

# a token is a plain tuple (kind, text, pos): kind is word, string, arrow, eof or the punctuation itself
Token = tuple  # (kind, text, pos)


class Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = [m.start() for m in re.finditer("\n", text)]

    def where(self, pos: int) -> tuple[int, int]:
        line = bisect.bisect_left(self.lines, pos)
        start = self.lines[line - 1] + 1 if line else 0
        return line + 1, pos - start + 1

    def error(self, message: str, pos: int) -> DotSyntaxError:
        return DotSyntaxError(message, *self.where(pos))

    _TOKEN = re.compile(r"""
        (?:[ \t\r\n\f\v\ufeff]+|//[^\n]*|/\*.*?\*/)*   # space and comments before a token
        (?:
        (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<arrow>->)
      | (?P<undirected>--)
      | (?P<punct>[{}\[\]=,;])
      | (?P<word>(?:[A-Za-z0-9_.:]|-(?![->]))+)
      | (?P<other>.)
      | (?P<end>\Z)
        )
    """, re.VERBOSE | re.DOTALL)
    _ESCAPE = re.compile(r"\\(.)", re.DOTALL)

    def tokens(self) -> list[Token]:
        out: list[Token] = []
        append = out.append
        for m in self._TOKEN.finditer(self.text):
            g = m.lastindex  # 1 string, 2 arrow, 3 undirected, 4 punct, 5 word, 6 other, 7 end
            if g == 5:
                append(("word", m.group(5), m.start(5)))
            elif g == 4:
                text = m.group(4)
                append((text, text, m.start(4)))
            elif g == 2:
                append(("arrow", "->", m.start(2)))
            elif g == 1:
                raw = m.group(1)[1:-1]
                if "\\" in raw:
                    raw = self._ESCAPE.sub(_unescape, raw)
                append(("string", raw, m.start(1)))
            elif g == 3:
                raise self.error("undirected edge '--': this format has directed edges only (use '->')", m.start(3))
            elif g == 6:
                raise self._unexpected(m.start(6))
            else:  # the end, after trailing space or comments
                break
        end = ("eof", "", len(self.text))
        out.extend((end, end, end))  # lookahead past the end reads the end
        return out

    def _unexpected(self, pos: int) -> DotSyntaxError:
        c = self.text[pos]
        if c == '"':
            return self.error("unterminated string: '\"' without a closing '\"'", pos)
        if self.text.startswith("/*", pos):
            return self.error("unterminated comment: '/*' without '*/'", pos)
        if c == "<":
            return self.error("HTML labels (<...>) are not supported; use a quoted string", pos)
        if c == "#":
            return self.error("'#' lines are not part of this format", pos)
        return self.error(f"unexpected character {c!r}", pos)


def _unescape(m: re.Match[str]) -> str:
    c = m.group(1)
    return {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}.get(c, "\\" + c)


# ── parser ──────────────────────────────────────────────────────────────────


def parse(text: str) -> DotGraph:
    """Parse one digraph; raises DotSyntaxError with a 1-based line and column inside the text."""
    if len(text) > MAX_INPUT:
        raise DotSyntaxError(f"the file has {len(text)} characters, over the limit of {MAX_INPUT}", 1, 1)
    lexer = Lexer(text)
    return _Parser(lexer, lexer.tokens()).graph()


def typed(token: Token) -> Value:
    """A value as the Attractor types it: strings stay strings; bare words become numbers, booleans, durations."""
    if token[0] == "string":
        return token[1]
    word = token[1]
    if word in ("true", "false"):
        return word == "true"
    if not (word[0].isdigit() or word[0] in "-."):
        return word  # a bare word such as summary:high
    if _INT.match(word):
        return int(word)
    if _FLOAT.match(word):
        return float(word)
    m = _DURATION.match(word)
    if m:
        return Duration(int(m.group(1)) * _UNIT_MS[m.group(2)], word)
    return word


class _Parser:
    def __init__(self, lexer: Lexer, tokens: list[Token]) -> None:
        self.lx = lexer
        self.toks = tokens
        self.i = 0
        self.g: DotGraph | None = None

    # helpers
    def peek(self, k: int = 0) -> Token:
        return self.toks[self.i + k]

    def take(self) -> Token:
        tok = self.toks[self.i]
        if tok[0] != "eof":
            self.i += 1
        return tok

    def error(self, message: str, tok: Token | None = None) -> DotSyntaxError:
        return self.lx.error(message, (tok or self.peek())[2])

    def expect(self, kind: str, what: str) -> Token:
        tok = self.peek()
        if tok[0] != kind:
            raise self.error(f"expected {what}, found {_describe(tok)}")
        return self.take()

    def keyword(self, tok: Token) -> str:
        return tok[1].lower() if tok[0] == "word" and tok[1].lower() in KEYWORDS else ""

    # grammar
    def graph(self) -> DotGraph:
        tok = self.peek()
        kw = self.keyword(tok)
        if kw == "strict":
            raise self.error("'strict' graphs are not supported; remove 'strict'", tok)
        if kw == "graph":
            raise self.error("undirected 'graph' is not supported; use 'digraph'", tok)
        if kw != "digraph":
            raise self.error(f"expected 'digraph', found {_describe(tok)}", tok)
        self.take()
        name_tok = self.peek()
        name = ""
        if name_tok[0] == "word" and not self.keyword(name_tok):
            name = self._node_id(self.take())
        elif name_tok[0] == "string":
            raise self.error("quoted graph names are not supported; write an identifier", name_tok)
        line, col = self.lx.where(tok[2])
        self.g = DotGraph(name=name, line=line, col=col)
        self.expect("{", "'{'")
        self.statements({}, {}, None, True)
        self.expect("}", "'}' to close the digraph")
        end = self.peek()
        if end[0] != "eof":
            if self.keyword(end) in ("digraph", "graph", "strict"):
                raise self.error("more than one graph in the file; keep one digraph per file", end)
            raise self.error(f"junk after the graph: {_describe(end)}", end)
        return self.g

    def statements(self, node_defaults: dict, edge_defaults: dict, cls: str | None, top: bool) -> None:
        while True:
            tok = self.peek()
            if tok[0] in ("}", "eof"):
                return
            self.statement(node_defaults, edge_defaults, cls, top)
            if self.peek()[0] == ";":
                self.take()

    def statement(self, node_defaults: dict, edge_defaults: dict, cls: str | None, top: bool) -> None:
        tok = self.peek()
        kw = self.keyword(tok)
        assert self.g is not None
        if kw in ("graph", "node", "edge"):
            self.take()
            attrs = self.attr_block(required=True)
            if kw == "graph":
                self._graph_attrs(attrs, top)
            elif kw == "node":
                node_defaults.update(attrs)
            else:
                edge_defaults.update(attrs)
            return
        if kw == "subgraph":
            self.take()
            if self.peek()[0] == "word" and not self.keyword(self.peek()):
                self.take()
            self.expect("{", "'{' after subgraph")
            inner_nodes, inner_edges = dict(node_defaults), dict(edge_defaults)
            start = self.i
            label = self._scan_subgraph_label()
            self.i = start
            derived = _class_name(label) if label else None
            self.statements(inner_nodes, inner_edges, derived or cls, False)
            self.expect("}", "'}' to close the subgraph")
            return
        if kw in ("digraph", "strict"):
            raise self.error("more than one graph in the file; keep one digraph per file", tok)
        if tok[0] == "string":
            raise self.error("quoted node ids are not supported; write an identifier", tok)
        if tok[0] != "word":
            raise self.error(f"expected a statement, found {_describe(tok)}", tok)
        if self.peek(1)[0] == "=":  # key = value at graph level
            key_tok = self.take()
            self.take()
            key = self._key(key_tok)
            value = self.value()
            self._graph_attrs({key: value}, top)
            return
        first = self.take()
        ids = [self._node_id(first)]
        id_toks = [first]
        arrow_toks = []
        while self.peek()[0] == "arrow":
            arrow_toks.append(self.take())
            nxt = self.peek()
            if nxt[0] == "string":
                raise self.error("quoted node ids are not supported; write an identifier", nxt)
            if nxt[0] != "word" or self.keyword(nxt):
                raise self.error(f"expected a node id after '->', found {_describe(nxt)}", nxt)
            id_toks.append(self.take())
            ids.append(self._node_id(id_toks[-1]))
        attrs = self.attr_block(required=False) if self.peek()[0] == "[" else {}
        if len(ids) == 1:
            self._declare(ids[0], attrs, node_defaults, cls, first)
            return
        for nid, t in zip(ids, id_toks):
            if nid not in self.g.nodes:
                line, col = self.lx.where(t[2])
                self.g.nodes[nid] = DotNode(nid, _with_class(dict(node_defaults), cls), line, col, declared=False)
        for (a, b), arrow in zip(zip(ids, ids[1:]), arrow_toks):
            line, col = self.lx.where(arrow[2])
            self.g.edges.append(DotEdge(a, b, {**edge_defaults, **attrs}, line, col))

    def _scan_subgraph_label(self) -> str:
        """The subgraph's label (``label = "..."`` or ``graph [label=...]`` directly inside it), if any."""
        depth = 0
        while True:
            tok = self.peek()
            if tok[0] == "eof":
                return ""
            if tok[0] in ("{", "["):
                depth += 1
            elif tok[0] in ("}", "]"):
                if depth == 0:
                    return ""
                depth -= 1
            elif depth == 0 and tok[0] == "word" and tok[1] == "label" and self.peek(1)[0] == "=" \
                    and self.peek(2)[0] in ("string", "word"):
                return str(typed(self.peek(2)))
            elif depth == 1 and tok[0] == "word" and tok[1] == "label" and self.peek(1)[0] == "=" \
                    and self.peek(2)[0] in ("string", "word") and self._inside_graph_block():
                return str(typed(self.peek(2)))
            self.i += 1

    def _inside_graph_block(self) -> bool:
        j = self.i - 1
        while j >= 0 and self.toks[j][0] != "[":
            j -= 1
        return j > 0 and self.keyword(self.toks[j - 1]) == "graph"

    def _graph_attrs(self, attrs: dict, top: bool) -> None:
        assert self.g is not None
        if top:  # a subgraph's own attributes stay with it (its label made the class)
            self.g.attrs.update(attrs)

    def _declare(self, nid: str, attrs: dict, defaults: dict, cls: str | None, tok: Token) -> None:
        assert self.g is not None
        node = self.g.nodes.get(nid)
        if node is None:
            line, col = self.lx.where(tok[2])
            self.g.nodes[nid] = DotNode(nid, _with_class({**defaults, **attrs}, cls), line, col)
            return
        node.attrs.update(attrs)
        if not node.declared:
            node.declared = True
            node.line, node.col = self.lx.where(tok[2])

    def attr_block(self, required: bool) -> dict[str, Value]:
        self.expect("[", "'['")
        attrs: dict[str, Value] = {}
        while self.peek()[0] != "]":
            key_tok = self.peek()
            if key_tok[0] not in ("word", "string"):  # a quoted key, as Graphviz needs for "verify.value"
                raise self.error(f"expected an attribute name, found {_describe(key_tok)}", key_tok)
            self.take()
            key = self._key(key_tok)
            if self.peek()[0] != "=":
                raise self.error(f"attribute '{key}' has no value: write {key}=...", self.peek())
            self.take()
            attrs[key] = self.value()
            if self.peek()[0] in (",", ";"):
                self.take()
        self.take()
        return attrs

    def value(self) -> Value:
        tok = self.peek()
        if tok[0] in ("string", "word"):
            self.take()
            return typed(tok)
        raise self.error(f"missing value: found {_describe(tok)}", tok)

    def _key(self, tok: Token) -> str:
        text = tok[1]
        if text not in _GOOD_KEYS:
            if not KEY_RE.match(text):
                raise self.error(f"invalid attribute name {text!r}", tok)
            if len(_GOOD_KEYS) < 10_000:
                _GOOD_KEYS.add(text)
        return text

    def _node_id(self, tok: Token) -> str:
        text = tok[1]
        if self.g is not None and text in self.g.nodes:
            return text  # checked when first seen
        if ":" in text and ID_RE.match(text.split(":", 1)[0]):
            raise self.lx.error(f"ports are not supported ('{text}'); connect nodes, not ports", tok[2])
        if not ID_RE.match(text):
            raise self.lx.error(f"invalid node id {text!r}: use letters, digits and '_', not starting with a digit",
                                tok[2])
        return text


def _describe(tok: Token) -> str:
    if tok[0] == "eof":
        return "the end of the file"
    if tok[0] == "string":
        return "a quoted string"
    return repr(tok[1])


def _class_name(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def _with_class(attrs: dict, cls: str | None) -> dict:
    if cls:
        current = str(attrs.get("class", ""))
        classes = [c for c in re.split(r"[,\s]+", current) if c]
        if cls not in classes:
            classes.append(cls)
        attrs["class"] = ",".join(classes)
    return attrs


# ── plain data for inspect ──────────────────────────────────────────────────


def jsonable(value: Any) -> Any:
    if isinstance(value, Duration):
        return {"duration_ms": value.ms, "raw": value.raw}
    return value
