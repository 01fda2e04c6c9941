"""Fast rejection for the regular expressions of plans: text any match must contain.

A check such as ``fail_if: \\b\\d+ (failed|errors?)\\b|^FAILED |^Traceback`` is searched in every judged
output, and Python's regex engine tries every alternative at every position: tens of microseconds for a
short output, milliseconds for a long one.  Any match of that pattern must contain "failed", "error",
"FAILED " or "Traceback"; when the output contains none of them (the usual case for a failure pattern),
``search`` answers "no match" after a few substring scans, without running the pattern.

``required_literals`` reads the pattern's parse tree: for each alternative it keeps the most selective
piece of literal text the alternative cannot match without (a run of literal characters, or one of the
alternatives of a group, or the body of a repeat that must occur at least once).  An alternative without
such a piece, a case-insensitive pattern (Unicode case folding makes substring tests unsafe), or a pattern
the parser does not read gives ``None``: the pattern is always run.  The answer is only ever a superset
test, so ``search`` returns exactly what ``pattern.search`` returns.
"""

from __future__ import annotations

import re
from typing import Any

from .patterns import prepare as prepare_bounded
from .patterns import search as bounded_search

try:  # the standard library's own regex parser (re._parser since Python 3.11)
    from re import _constants as _C
    from re import _parser as _P
except ImportError:  # pragma: no cover - another Python: no prefilter, every pattern runs
    _C = _P = None

MAX_CACHED = 4096
_MISSING = object()
_needs: dict[re.Pattern[str], tuple[str, ...] | None] = {}


def search(pattern: re.Pattern[str], text: str) -> Any:
    """``pattern.search(text)``, skipped when the text lacks every piece of text a match needs; run with a
    time bound (``patterns.search``: raises ``PatternTooSlow``)."""
    need = _needs.get(pattern, _MISSING)
    if need is _MISSING:
        need = _need(pattern)
    if need is not None:
        for piece in need:
            if piece in text:
                break
        else:
            return None
    return bounded_search(pattern, text)


def _need(pattern: re.Pattern[str]) -> tuple[str, ...] | None:
    if len(_needs) >= MAX_CACHED:
        _needs.clear()
    need = _needs[pattern] = required_literals(pattern)
    return need


def prepare(pattern: re.Pattern[str]) -> None:
    """Do now what the first ``search`` with ``pattern`` would do (read its required text, compile its
    time-bounded form): the engine's warm-up calls it for every check of the library, so that the first pass
    that judges a step does not compile its patterns."""
    if pattern not in _needs:
        _need(pattern)
    prepare_bounded(pattern)


def required_literals(pattern: re.Pattern[str]) -> tuple[str, ...] | None:
    """Pieces of text one of which every match of ``pattern`` contains, or None when there are none."""
    if _P is None or pattern.flags & re.IGNORECASE or not isinstance(pattern.pattern, str):
        return None
    try:
        parsed = _P.parse(pattern.pattern, pattern.flags)
        if parsed.state.flags & re.IGNORECASE:
            return None
        need = _sequence(list(parsed))
    except Exception:  # noqa: BLE001 - an unexpected parse tree: run the pattern
        return None
    return tuple(sorted(need)) if need else None


def _sequence(items: list[tuple[Any, Any]]) -> frozenset[str] | None:
    """The best requirement of a sequence: each of its items must match, so any item's requirement holds."""
    best: frozenset[str] | None = None
    run: list[str] = []
    for op, av in [*items, (None, None)]:
        if op == _C.LITERAL:
            run.append(chr(av))
            continue
        found = [frozenset(("".join(run),))] if run else []
        run = []
        if op is not None:
            element = _element(op, av)
            if element:
                found.append(element)
        for req in found:
            if best is None or _score(req) > _score(best):
                best = req
    return best


def _element(op: Any, av: Any) -> frozenset[str] | None:
    if op == _C.SUBPATTERN:
        _group, add_flags, _del_flags, body = av
        return None if add_flags & re.IGNORECASE else _sequence(list(body))
    if op == getattr(_C, "ATOMIC_GROUP", object()):
        return _sequence(list(av))
    if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, getattr(_C, "POSSESSIVE_REPEAT", object())):
        low, _high, body = av
        return _sequence(list(body)) if low >= 1 else None
    if op == _C.BRANCH:
        union: set[str] = set()
        for alternative in av[1]:
            req = _sequence(list(alternative))
            if not req:
                return None  # an alternative that needs no text: the branch needs nothing
            union |= req
        return frozenset(union)
    return None


def _score(req: frozenset[str]) -> tuple[int, int]:
    """Longer pieces are rarer in output; fewer of them are fewer scans."""
    return min(len(piece) for piece in req), -len(req)
