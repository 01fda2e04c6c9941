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

from ..boundary.reading import MAX_DEPTH

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
        """The tokens; a lexical error is a token ``("error", DotSyntaxError, pos)`` that the parser raises when it
        reaches it, so an earlier grammar error (an undirected ``graph`` on line 1) is the one reported."""
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
                append(("error", self.error("undirected edge '--': this format has directed edges only (use '->')",
                                            m.start(3)), m.start(3)))
                break
            elif g == 6:
                append(("error", self._unexpected(m.start(6)), m.start(6)))
                break
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


# The spec's attribute types (its Appendix A, plus this pack's own integer and boolean fields).  A value of such
# a key is typed the same whether it is quoted or not (``max_retries="3"`` is 3, ``timeout="900s"`` a
# duration); a String key keeps its text as written (``label=42`` is "42").  Other keys: a bare word is typed by
# its form, a quoted string stays a string unless it is a duration (``manager.poll_interval="45s"``).
KEY_TYPES = {
    **dict.fromkeys(("max_retries", "default_max_retries", "default_max_retry", "weight", "trigger_threshold",
                     "stale_after_turns", "max_turns", "manager.max_cycles"), "int"),
    **dict.fromkeys(("goal_gate", "auto_status", "allow_partial", "loop_restart", "continue_on_fail",
                     "stack.child_autostart"), "bool"),
    **dict.fromkeys(("timeout", "manager.poll_interval"), "duration"),
    **dict.fromkeys(("goal", "label", "prompt", "model_stylesheet", "retry_target", "fallback_retry_target",
                     "default_fidelity", "fidelity", "thread_id", "class", "llm_model", "llm_provider",
                     "reasoning_effort", "condition", "shape", "type", "tool_command", "stack.child_dotfile",
                     "stack.child_workdir", "tool_hooks.pre", "tool_hooks.post", "manager.stop_condition",
                     "manager.actions", "human.default_choice", "tool", "tool_hint", "reason", "pace_level",
                     "description", "triggers", "strong_triggers", "domains", "start", "verify", "verify.value",
                     "verify.flags", "verify.fail_if", "verify.capture", "verify.describe"), "str"),
}


def typed(token: Token, key: str = "") -> Value:
    """A value as the Attractor types it: by its key's type when the spec gives one, else strings stay
    strings (durations excepted) and bare words become numbers, booleans, durations."""
    kind = KEY_TYPES.get(key)
    word = token[1]
    if kind == "str":
        return word
    if kind is not None:
        value = _by_form(word.strip())
        if (kind == "int" and type(value) is int) or (kind == "bool" and type(value) is bool) or \
                (kind == "duration" and type(value) is Duration):
            return value
        return word if token[0] == "string" else value  # not of its type: the lint or schema says so
    if token[0] == "string":
        m = _DURATION.match(word)
        return Duration(int(m.group(1)) * _UNIT_MS[m.group(2)], word) if m else word
    return _by_form(word)


def _by_form(word: str) -> Value:
    if not word:
        return word
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
        self.depth = 0  # subgraphs open around the statement being read

    # helpers
    def peek(self, k: int = 0) -> Token:
        tok = self.toks[min(self.i + k, len(self.toks) - 1)]
        if tok[0] == "error":
            raise tok[1]
        return tok

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
            brace = self.expect("{", "'{' after subgraph")
            if self.depth >= MAX_DEPTH:  # before the recursion (and the label scan) can cost more
                raise self.error(f"subgraphs nested more than {MAX_DEPTH} deep; flatten them", brace)
            inner_nodes, inner_edges = dict(node_defaults), dict(edge_defaults)
            start = self.i
            label = self._scan_subgraph_label()
            self.i = start
            derived = _class_name(label) if label else None
            self.depth += 1
            self.statements(inner_nodes, inner_edges, derived or cls, False)
            self.depth -= 1
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
            value = self.value(key)
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
                if self.depth + depth > MAX_DEPTH:  # the parse refuses this nesting: no need to read further
                    return ""
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
        opening = self.expect("[", "'['")
        attrs: dict[str, Value] = {}
        while self.peek()[0] != "]":
            key_tok = self.peek()
            if key_tok[0] == "eof":
                raise self.error(f"'[' at {self._at(opening)} is never closed: add ']' after the last attribute",
                                 key_tok)
            if key_tok[0] not in ("word", "string"):  # a quoted key, as Graphviz needs for "verify.value"
                raise self.error(f"expected an attribute name, found {_describe(key_tok)}", key_tok)
            self.take()
            key = self._key(key_tok)
            if self.peek()[0] != "=":
                raise self.error(f"attribute '{key}' has no value: write {key}=...", self.peek())
            self.take()
            attrs[key] = self.value(key)
            sep = self.peek()
            if sep[0] == ",":
                self.take()
            elif sep[0] == ";":
                raise self.error("';' between attributes: separate attributes with ','", sep)
            elif sep[0] == "eof":
                raise self.error(f"'[' at {self._at(opening)} is never closed: add ']' after the last attribute",
                                 sep)
            elif sep[0] != "]":
                if sep[0] == "word" and self.peek(1)[0] == "=":
                    raise self.error(f"missing ',' before attribute '{sep[1]}': separate attributes with ','", sep)
                raise self.error(f"expected ',' or ']' after attribute '{key}', found {_describe(sep)} (is the "
                                 f"']' of the '[' at {self._at(opening)} missing?)", sep)
        self.take()
        return attrs

    def _at(self, tok: Token) -> str:
        line, col = self.lx.where(tok[2])
        return f"{line}:{col}"

    def value(self, key: str = "") -> Value:
        tok = self.peek()
        if tok[0] in ("string", "word"):
            self.take()
            return typed(tok, key)
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
        if ID_RE.match(text):
            return text
        # point at the first character that cannot be in an id: the ':' of a port, the '-' of a hyphen
        bad = next((i for i, c in enumerate(text) if not (c.isascii() and (c.isalnum() or c == "_"))), 0)
        head = text[:bad]
        if text[bad:bad + 1] == ":" and ID_RE.match(head):
            raise self.lx.error(f"ports are not supported ('{text}'); connect nodes, not ports (write {head})",
                                tok[2] + bad)
        if text[bad:bad + 1] == "-" and ID_RE.match(head):
            raise self.lx.error(f"'-' cannot be part of a node id ('{text}'): use '_' ({text.replace('-', '_')}) "
                                "and put the readable name in label", tok[2] + bad)
        raise self.lx.error(f"invalid node id {text!r}: use letters, digits and '_', not starting with a digit",
                            tok[2] + bad)


def _describe(tok: Token) -> str:
    if tok[0] == "eof":
        return "the end of the file"
    if tok[0] == "string":
        return "a quoted string"
    return repr(tok[1])


def _class_name(label: str) -> str:
    """Spec 2.10: 'lowercasing the label, replacing spaces with hyphens, and stripping non-alphanumeric characters
    (except hyphens)'."""
    return re.sub(r"[^a-z0-9-]", "", label.lower().replace(" ", "-"))


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
