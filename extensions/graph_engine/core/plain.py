"""Values from outside the engine (a restored state, a tool result, whatever another extension left) copied into
plain JSON values: always a new value, never the caller's, bounded in depth and size, and free of cycles, so that
no reader after this boundary can recurse without end or be changed behind its back.

``copy_plain`` refuses what is not JSON (the reason names where); ``as_text`` never refuses: it spells anything
as JSON text, marking what it had to leave out.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 32  # nesting levels; far below Python's recursion limit
MAX_VALUES = 100_000  # values in one copy
MAX_INT_BITS = 64  # no counter, seq or number this engine keeps is larger


class NotPlain(ValueError):
    """A value that is not plain JSON; ``where`` is its path inside the value (``events[3].node``)."""

    def __init__(self, where: str, problem: str) -> None:
        self.where, self.problem = where, problem
        super().__init__(f"{where} {problem}" if where else problem)


def copy_plain(value: Any, where: str = "") -> Any:
    """A new value of dicts (text keys), lists, text, numbers, booleans and None; tuples become lists."""
    return _Walk(strict=True).copy(value, (where,), 0)


def as_text(value: Any, limit: int = 0) -> str:
    """``value`` as JSON text (its own text when it is a str); non-text keys, cycles, depth and other types are
    spelled so that the result always exists.  ``limit``: at most this many characters (0: no limit)."""
    if isinstance(value, str):
        return value[:limit] if limit else value
    text = json.dumps(_Walk(strict=False).copy(value, ("",), 0))
    return text[:limit] if limit else text


class _Walk:
    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.left = MAX_VALUES
        self.open: set[int] = set()  # containers on the current path: one seen again is a cycle

    def refuse(self, path: tuple, problem: str, shown: str) -> str:
        if self.strict:
            raise NotPlain(_spell(path), problem)
        return shown

    def copy(self, value: Any, path: tuple, depth: int) -> Any:
        self.left -= 1
        if self.left < 0:
            return self.refuse(path, f"holds more than {MAX_VALUES:,} values", "...")
        kind = type(value)
        if kind is str or kind is bool or value is None or (kind is int and value.bit_length() <= MAX_INT_BITS):
            return value  # most values: immutable, kept as they are
        if isinstance(value, str):
            return str(value)
        if isinstance(value, int):
            if value.bit_length() > MAX_INT_BITS:  # text of a huge integer cannot even be made (over 4,300 digits)
                return self.refuse(path, f"is an integer of {value.bit_length():,} bits, over {MAX_INT_BITS}",
                                   "<huge integer>")
            return int(value)
        if isinstance(value, float):
            if math.isfinite(value):
                return float(value)
            return self.refuse(path, f"is {value!r}, not a finite number", repr(value))
        if not isinstance(value, (dict, list, tuple)):
            return self.refuse(path, f"is a {type(value).__name__}, not a JSON value", f"<{type(value).__name__}>")
        if depth >= MAX_DEPTH:
            return self.refuse(path, f"is nested more than {MAX_DEPTH} levels deep", "<too deep>")
        if id(value) in self.open:
            return self.refuse(path, "holds itself (a cycle)", "<cycle>")
        self.open.add(id(value))
        try:
            if isinstance(value, dict):
                return {self.key(k, path): self.copy(v, (path, k), depth + 1) for k, v in value.items()}
            return [self.copy(v, (path, i), depth + 1) for i, v in enumerate(value)]
        finally:
            self.open.discard(id(value))

    def key(self, key: Any, path: tuple) -> str:
        if type(key) is str:
            return key
        if isinstance(key, str):
            return str(key)
        if self.strict:
            raise NotPlain(_spell(path), f"has a key of type {type(key).__name__}; keys must be text")
        if key is None or isinstance(key, (bool, int, float)):
            return json.dumps(key)
        return f"<{type(key).__name__}>"


def _spell(path: tuple) -> str:
    """``(("", "events"), 3)`` -> ``events[3]``."""
    parts: list[Any] = []
    while isinstance(path, tuple) and len(path) == 2:
        path, key = path
        parts.append(key)
    if isinstance(path, tuple) and path and path[0]:
        parts.append(path[0])
    out = ""
    for key in reversed(parts):
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out
