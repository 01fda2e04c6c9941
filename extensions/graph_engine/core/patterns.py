"""Plan patterns, run with a time bound: no check can hang Agent-Zero.

Every regular expression a plan gives (``verify.value``, ``fail_if``, ``capture``) is

* checked at load for shapes that backtrack catastrophically (``unsafe``): a quantifier over something that
  is itself quantified (``(a+)+``, ``((a+))+``, ``(?:(a+))+``), a repeat of something that can match nothing
  (``(a?){25}``), repeated alternatives that can match the same text (``(a|a)+``, ``(a|aa)+``), and two
  unbounded repeats of overlapping characters with nothing required between them (``a*a*``, ``.*\\s*``).
  Such a plan is refused (lint rule ``regex_unsafe``), whatever the environment;
* run on tool output with a time bound (``search``): with the ``regex`` package (a dependency of
  ``tiktoken``, present in Agent-Zero) each search stops after ``TIMEOUT`` seconds and scans at most
  ``BOUNDED_CHARS`` (the timeout is checked between attempts); without it, the text a pattern scans is capped
  (its head and tail): ``FALLBACK_CHARS`` for a pattern whose cost grows as the square
  of the text (``.*x`` on a long line), less for one that grows faster (``.*=.*x``: ``repeat_chain``).  A search that runs out of time raises ``PatternTooSlow``: the check
  fails with "pattern took too long" and the plan is named in the log.
"""

from __future__ import annotations

import re
from typing import Any

try:  # Python 3.11+: the parser of the standard library's regular expressions
    from re import _constants as _c
    from re import _parser as _p
except ImportError:  # pragma: no cover - older layouts of the standard library
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

try:
    import regex as _regex  # type: ignore[import-not-found]
except ImportError:  # the engine works without it: scans are capped instead
    _regex = None

TIMEOUT = 0.2  # seconds per search, with the regex package
BOUNDED_CHARS = 256_000  # characters one pattern scans with it (one attempt can read them all before a timeout)
FALLBACK_CHARS = 10_000  # characters one pattern scans without it: the first quarter and the last three quarters
MAX_COMPILED = 512


class PatternTooSlow(Exception):
    """A search ran out of time: the pattern backtracks too much on this output."""


# ── running ─────────────────────────────────────────────────────────────────

_bounded: dict[tuple[str, int], Any] = {}
use_regex = _regex is not None  # tests switch it off to run the fallback


def search(pattern: re.Pattern[str], text: str) -> Any:
    """``pattern.search(text)`` with a time bound; raises ``PatternTooSlow`` when it runs out of time."""
    if use_regex:
        rx = _regex_for(pattern)
        if rx is not None:
            try:  # the timeout is checked between attempts, and one attempt may scan the whole text: capped too
                return rx.search(_head_and_tail(text, BOUNDED_CHARS), timeout=TIMEOUT)
            except TimeoutError:
                raise PatternTooSlow(f"/{pattern.pattern}/ ran over {TIMEOUT} s on {len(text):,} characters") \
                    from None
    return pattern.search(_head_and_tail(text, fallback_cap(pattern)))


def prepare(pattern: re.Pattern[str]) -> None:
    """Compile now what ``search`` would compile on its first use of ``pattern`` (the warm-up's part)."""
    if not use_regex or _regex_for(pattern) is None:
        fallback_cap(pattern)


def _head_and_tail(text: str, cap: int) -> str:
    """At most ``cap`` characters: the first quarter from the head, the rest from the tail (where the
    summaries of tests and builds are)."""
    if len(text) <= cap:
        return text
    head = cap // 4
    return text[:head] + "\n" + text[-(cap - head):]


_caps: dict[tuple[str, int], int] = {}


def fallback_cap(pattern: re.Pattern[str]) -> int:
    """How much text the pattern may scan without a timeout: its cost grows as the text's length to the power of
    one plus its chain of overlapping repeats (.*x: squared; .*=.*x: cubed), so the cap keeps that cost at the
    cost of a plain pattern on FALLBACK_CHARS."""
    key = (pattern.pattern, pattern.flags)
    cap = _caps.get(key)
    if cap is None:
        chain = max(1, repeat_chain(pattern.pattern, pattern.flags))
        cap = int(FALLBACK_CHARS ** (2 / (chain + 1)))
        if len(_caps) >= MAX_COMPILED:
            _caps.clear()
        _caps[key] = cap
    return cap


_FLAGS = ((re.IGNORECASE, "IGNORECASE"), (re.MULTILINE, "MULTILINE"), (re.DOTALL, "DOTALL"), (re.VERBOSE, "VERBOSE"))


def _regex_for(pattern: re.Pattern[str]) -> Any:
    key = (pattern.pattern, pattern.flags)
    rx = _bounded.get(key)
    if rx is None and key not in _bounded:
        flags = 0
        for bit, name in _FLAGS:
            if pattern.flags & bit:
                flags |= getattr(_regex, name)
        try:
            rx = _regex.compile(pattern.pattern, flags)
        except Exception:  # noqa: BLE001 - a pattern only re understands: run it with the cap
            rx = None
        if len(_bounded) >= MAX_COMPILED:
            _bounded.clear()
        _bounded[key] = rx
    return rx


# ── the load-time check ─────────────────────────────────────────────────────

# characters that stand for every kind a pattern can tell apart (ASCII, Latin, Greek, CJK, spaces)
_PROBES = [chr(c) for c in range(128)] + ["é", "Ω", "中", "\u00a0", "\u2028"]
_UNBOUNDED = _c.MAXREPEAT
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT}


PROBLEMS = {  # shape -> (what is wrong, how to fix it)
    "nested": ("a quantifier inside a quantified group, such as (a+)+, can backtrack for minutes",
               "remove the outer quantifier or make the inner group match one thing"),
    "empty": ("a repeat of something that can match nothing, such as (a?){25} or (a?)+, can backtrack for minutes",
              "make the repeated part match at least one character"),
    "alternation": ("repeated alternatives that can match the same text, such as (a|aa)+, can backtrack for minutes",
                    "match the alternatives once, e.g. (a|b) without + or *, or use a character class [ab]+"),
    "adjacent": ("two unbounded repeats of the same characters in a row, such as a*a* or .*\\s*, can backtrack for "
                 "minutes", "keep one of the two repeats"),
}


def unsafe(pattern: str, flags: int = 0) -> tuple[str, str]:
    """(why the pattern can backtrack catastrophically, how to fix it), or ("", "") when it cannot (as far as
    this check sees; a time bound covers the rest)."""
    try:
        tree = _p.parse(pattern, flags)
    except Exception:  # noqa: BLE001 - an invalid pattern is reported by the compile step
        return "", ""
    shape = _walk(list(tree), bool(flags & re.IGNORECASE), inside_repeat=False)
    return PROBLEMS[shape] if shape else ("", "")


LARGE = 16  # a repeat up to this many times is bounded enough to nest (such as (\d{1,3}\.){3})


def _walk(items: list, icase: bool, inside_repeat: bool) -> str:
    for i, (op, av) in enumerate(items):
        if op in _REPEATS:
            low, high, body = av
            body = list(body)
            if high > 1 and inside_repeat and _can_consume(body):
                return "nested"
            if high > LARGE and _first(body, icase)[1]:
                return "empty"
            if high > LARGE and _overlapping_branch(body, icase):
                return "alternation"
            why = _walk(body, icase, inside_repeat or high > LARGE)
            if why:
                return why
            if high == _UNBOUNDED and _adjacent_overlap(items, i, icase):
                return "adjacent"
        elif op == _c.SUBPATTERN:
            why = _walk(list(av[-1]), icase, inside_repeat)
            if why:
                return why
        elif op == _c.BRANCH:
            for alt in av[1]:
                why = _walk(list(alt), icase, inside_repeat)
                if why:
                    return why
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            why = _walk(list(av[1]), icase, inside_repeat)
            if why:
                return why
        # POSSESSIVE_REPEAT and ATOMIC_GROUP never backtrack into themselves: safe
    return ""


def repeat_chain(pattern: str, flags: int = 0) -> int:
    """The longest run of unbounded repeats in a row where each can match what follows it up to the next one
    (.*x: 1; .*=.*x: 2, for the first .* can also match '=' and the second then scans the rest again)."""
    try:
        tree = _p.parse(pattern, flags)
    except Exception:  # noqa: BLE001 - an invalid pattern is reported by the compile step
        return 0
    return _chain(list(tree), bool(flags & re.IGNORECASE))


def _chain(items: list, icase: bool) -> int:
    best, run, covering = 0, 0, frozenset()
    for op, av in items:
        inner = 0
        if op == _c.SUBPATTERN:
            inner = _chain(list(av[-1]), icase)
        elif op == _c.BRANCH:
            inner = max((_chain(list(alt), icase) for alt in av[1]), default=0)
        elif op in _REPEATS:
            inner = _chain(list(av[2]), icase)
        best = max(best, inner)
        if op in _REPEATS and av[1] == _UNBOUNDED:
            chars = _chars(list(av[2]), icase)
            run = run + 1 if run and chars & covering else 1
            covering = chars
        elif op == _c.AT:
            continue
        elif run and _chars([(op, av)], icase) <= covering:
            continue  # the repeat before can match this too: the chain goes on
        else:
            run, covering = 0, frozenset()
        best = max(best, run)
    return best


def _can_consume(items: list) -> bool:
    """The subpattern can match at least one character."""
    return any(op not in (_c.AT, _c.ASSERT, _c.ASSERT_NOT) for op, _ in items)


def _overlapping_branch(items: list, icase: bool) -> bool:
    for op, av in items:
        if op == _c.SUBPATTERN:
            if _overlapping_branch(list(av[-1]), icase):
                return True
        elif op == _c.BRANCH:
            firsts = [_first(list(alt), icase) for alt in av[1]]
            if any(empty for _, empty in firsts):  # an alternative that can match nothing
                return True
            for a in range(len(firsts)):
                for b in range(a + 1, len(firsts)):
                    if firsts[a][0] & firsts[b][0]:
                        return True
    return False


def _adjacent_overlap(items: list, i: int, icase: bool) -> bool:
    """The unbounded repeat at ``i`` is followed, with only optional items between, by another unbounded
    repeat that can match the same characters."""
    mine = _chars(list(items[i][1][2]), icase)
    for op, av in items[i + 1:]:
        if op in _REPEATS:
            if av[1] == _UNBOUNDED and mine & _chars(list(av[2]), icase):
                return True
            if av[0] > 0:
                return False
        elif op != _c.AT:
            return False
    return False


def _first(items: list, icase: bool) -> tuple[frozenset[str], bool]:
    """The characters a match of ``items`` can start with, and whether it can match the empty text."""
    acc: set[str] = set()
    for op, av in items:
        chars, empty = _first_of(op, av, icase)
        acc |= chars
        if not empty:
            return frozenset(acc), False
    return frozenset(acc), True


def _first_of(op: Any, av: Any, icase: bool) -> tuple[frozenset[str], bool]:
    if op == _c.AT or op in (_c.ASSERT, _c.ASSERT_NOT):
        return frozenset(), True
    if op == _c.SUBPATTERN:
        return _first(list(av[-1]), icase)
    if op == _c.BRANCH:
        alts = [_first(list(alt), icase) for alt in av[1]]
        return frozenset().union(*(a for a, _ in alts)), any(e for _, e in alts)
    if op in _REPEATS:
        chars, empty = _first(list(av[2]), icase)
        return chars, empty or av[0] == 0
    return _chars([(op, av)], icase), False


def _chars(items: list, icase: bool) -> frozenset[str]:
    """Every probe character some part of ``items`` can match."""
    out: set[str] = set()
    for op, av in items:
        if op == _c.SUBPATTERN:
            out |= _chars(list(av[-1]), icase)
        elif op == _c.BRANCH:
            for alt in av[1]:
                out |= _chars(list(alt), icase)
        elif op in _REPEATS:
            out |= _chars(list(av[2]), icase)
        elif op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN, _c.CATEGORY):
            out |= {ch for ch in _PROBES if _accepts(op, av, ch, icase)}
        elif op not in (_c.AT, _c.ASSERT, _c.ASSERT_NOT):
            out |= set(_PROBES)  # anything else (a back-reference, ...): assume it can match anything
    return frozenset(out)


def _accepts(op: Any, av: Any, ch: str, icase: bool) -> bool:
    if op == _c.LITERAL:
        return chr(av) == ch or (icase and chr(av).lower() == ch.lower())
    if op == _c.NOT_LITERAL:
        return not (chr(av) == ch or (icase and chr(av).lower() == ch.lower()))
    if op == _c.ANY:
        return ch != "\n"
    if op == _c.CATEGORY:
        return _category(av, ch)
    negate = False
    hit = False
    for kind, value in av:  # IN: a character class
        if kind == _c.NEGATE:
            negate = True
        elif kind == _c.LITERAL:
            hit = hit or chr(value) == ch or (icase and chr(value).lower() == ch.lower())
        elif kind == _c.RANGE:
            lo, hi = value
            hit = hit or lo <= ord(ch) <= hi or (icase and (lo <= ord(ch.lower()) <= hi or lo <= ord(ch.upper()) <= hi))
        elif kind == _c.CATEGORY:
            hit = hit or _category(value, ch)
        else:  # anything the class can hold that is not listed above
            hit = True
    return hit != negate


def _category(cat: Any, ch: str) -> bool:
    name = str(cat)
    if "DIGIT" in name:
        got = ch.isdigit()
    elif "SPACE" in name:
        got = ch.isspace()
    elif "WORD" in name:
        got = ch.isalnum() or ch == "_"
    elif "LINEBREAK" in name:
        got = ch in "\n\r"
    else:
        got = True
    return not got if "NOT_" in name else got
