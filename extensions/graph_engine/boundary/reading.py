"""Reading what comes from outside the engine: files, and the library's JSON.

Everything that reads a file the user or the framework supplies (the plan library, ``.dot`` plans, a tool
result Agent-Zero saved, audit logs, every CLI input) goes through ``read_regular``: only a regular file is
read (a FIFO, a device or a folder is refused at once, without blocking), and never more than a limit.

A library's JSON is read one way, whatever is installed and whatever lies beside it: ``scan_document`` (the
json module's own scanner, which also says where each plan's value lies, for an edit in place).  What JSON
allows but a plan cannot use is not an error of the whole file: NaN, Infinity and integers of more than
``MAX_DIGITS`` digits are read as ``Unusable`` markers (text that says what was written), and a value nested
deeper than the parser can go becomes one; ``value_problem`` finds them, lone surrogates and nesting deeper
than ``MAX_DEPTH``, so the plan that holds one is disabled and the others load.  A byte order mark is skipped;
of duplicate keys the last counts (as in every JSON reader of the standard library).
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any, Callable

MAX_DEPTH = 64  # nesting of one plan's JSON value (the schema needs 7) or of DOT subgraphs
MAX_DIGITS = 4300  # Python's own limit on converting a decimal integer


class ReadError(ValueError):
    """A file that cannot be read: one line naming it, why, and what to do."""


class TooLarge(ReadError):
    """A regular file over the size limit."""


def file_fact(path: str, roots_env: str = "GRAPH_ENGINE_FILE_ROOTS") -> str:
    """What a ``file_exists`` check is told of a path, looked at by the host before the step: "file", "dir",
    "dangling" (a link to nothing), "missing", or "outside ROOTS" when ``roots_env`` lists the folders checks
    may look in and the path is in none of them."""
    where = os.path.expanduser(path)
    roots = [os.path.realpath(os.path.expanduser(r)) for r in os.environ.get(roots_env, "").split(os.pathsep)
             if r.strip()]
    if roots:
        real = os.path.realpath(where)
        if not any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
            return "outside " + os.pathsep.join(roots)
    if os.path.islink(where) and not os.path.exists(where):
        return "dangling"
    if os.path.isdir(where):
        return "dir"
    return "file" if os.path.isfile(where) else "missing"


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, in words ("a folder", "a FIFO (named pipe)", ...)."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_regular(path: str, limit: int, what: str = "file", prefix: bool = False) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (``prefix``: its first ``limit`` bytes, however
    long it is).  Raises ReadError otherwise; never blocks on a FIFO and never reads a device."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ReadError(f"{path}: cannot read the {what} ({exc.strerror or exc}); check the file exists and is "
                        "readable") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadError(f"{path}: the {what} is {kind_of(st.st_mode)}, not a regular file; give a file's path")
        if st.st_size > limit and not prefix:
            raise TooLarge(f"{path}: the {what} is {st.st_size:,} bytes, over the {limit:,} byte limit")
        chunks, left = [], limit + (0 if prefix else 1)
        step = max(st.st_size + 1, 1 << 16)  # the whole file in one read, as a rule
        while left > 0:
            chunk = os.read(fd, min(left, step))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ReadError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    blob = b"".join(chunks)
    if len(blob) > limit:  # it grew while being read
        raise TooLarge(f"{path}: the {what} is over the {limit:,} byte limit")
    return blob


def decode_text(blob: bytes) -> str:
    """UTF-8 text without a byte order mark.  Raises UnicodeDecodeError."""
    return blob.decode("utf-8").removeprefix("\ufeff")


# ── the library's JSON ──────────────────────────────────────────────────────


class Unusable(str):
    """A JSON value a plan cannot hold (NaN, Infinity, an integer of thousands of digits, a value nested
    deeper than the parser goes): kept as text saying what was written, so the load goes on and the check
    of the plan holding it refuses that plan alone."""


def _integer(text: str) -> Any:
    return int(text) if len(text) <= MAX_DIGITS else Unusable(f"an integer of {len(text.lstrip('-')):,} digits")


def _constant(text: str) -> Unusable:
    return Unusable(f"{text} (not a number JSON allows)")


_DECODER = json.JSONDecoder(parse_int=_integer, parse_constant=_constant)
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once
_STRING = json.decoder.scanstring
_WS = " \t\n\r"
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def scan_value(text: str, i: int) -> tuple[Any, int]:
    """The JSON value at ``i`` and where it ends.  A value nested deeper than the parser can go is read as an
    ``Unusable`` marker (its end found without recursion).  Raises ValueError on text that is not JSON."""
    try:
        return _SCAN(text, i)
    except StopIteration:
        raise ValueError(f"expected a value at {i}") from None
    except RecursionError:
        end, depth = _nesting(text, i)
        return Unusable(f"a value nested {depth:,} deep (at most {MAX_DEPTH})"), end


def _nesting(text: str, i: int) -> tuple[int, int]:
    """Where the array or object at ``i`` ends, and how deep it nests (read without recursion)."""
    depth = deepest = 0
    for m in _TOKEN.finditer(text, i):
        token = m.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
            if depth == 0:
                return m.end(), deepest
    raise ValueError(f"unclosed value at {i}")


def loads(text: str) -> Any:
    """One JSON document, read as a library is read."""
    return scan_document(text)[0]


def scan_document(text: str) -> tuple[Any, dict[str, tuple[int, int]]]:
    """The document, and where each plan's value lies in the text (an object's ``plans`` member).  Raises
    ValueError on text that is not one JSON value."""
    text = text.removeprefix("\ufeff")
    spans: dict[str, tuple[int, int]] = {}
    i = _skip(text, 0)
    if text[i:i + 1] != "{":
        value, end = scan_value(text, i)
        if _skip(text, end) != len(text):
            raise ValueError(f"extra data at {end}")
        return value, spans
    data: dict[str, Any] = {}
    seen_plans = [0]

    def plan(pid: str, at: int) -> int:
        value, end = scan_value(text, at)
        data["plans"][pid] = value
        spans[pid] = (at, end)
        return end

    def member(key: str, at: int) -> int:
        if key == "plans" and text[at:at + 1] == "{":
            seen_plans[0] += 1
            data["plans"] = {}
            return _walk(text, at, plan)
        data[key], end = scan_value(text, at)
        return end

    end = _walk(text, i, member)
    if _skip(text, end) != len(text):
        raise ValueError(f"extra data at {end}")
    if seen_plans[0] > 1:  # "plans" twice: the last one counts, and no edit is taken in place
        spans.clear()
    return data, spans


def _walk(text: str, i: int, member: Any) -> int:
    """Read the object at ``i``: ``member(key, start)`` reads each value and returns where it ends; returns
    where the object ends."""
    i = _skip(text, i + 1)
    if text[i:i + 1] == "}":
        return i + 1
    while True:
        if text[i:i + 1] != '"':
            raise ValueError(f"expected a key at {i}")
        key, i = _STRING(text, i + 1)
        i = _skip(text, i)
        if text[i:i + 1] != ":":
            raise ValueError(f"expected ':' at {i}")
        i = _skip(text, member(key, _skip(text, i + 1)))
        if text[i:i + 1] == ",":
            i = _skip(text, i + 1)
        elif text[i:i + 1] == "}":
            return i + 1
        else:
            raise ValueError(f"expected ',' or '}}' at {i}")


def _skip(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in _WS:
        i += 1
    return i


def value_problem(value: Any, where: str) -> tuple[str, str] | None:
    """The first thing in a parsed value that a plan cannot hold, as (JSON path, what is wrong), read without
    recursion: nesting deeper than MAX_DEPTH, an ``Unusable`` marker, a lone surrogate in a text.  The paths are
    spelt out only when there is something to report (most values are fine: no text is built for them)."""
    return _problem(value, where) if _problem(value, None) is not None else None


def _problem(value: Any, where: str | None) -> tuple[str, str] | None:
    todo: list[tuple[Any, str | None, int]] = [(value, where, 0)]
    while todo:
        item, path, depth = todo.pop()
        if depth > MAX_DEPTH:
            return path or "", f"nested more than {MAX_DEPTH} deep"
        if isinstance(item, Unusable):
            return path or "", str(item)
        if isinstance(item, str):
            if not item.isascii() and _lone_surrogate(item):
                return path or "", "holds a lone surrogate (a \\ud800-\\udfff escape without its pair)"
        elif isinstance(item, dict):
            for key, sub in item.items():
                if not key.isascii() and _lone_surrogate(key):
                    return path or "", f"a key {key!r} holds a lone surrogate"
                todo.append((sub, None if path is None else f"{path}.{key}", depth + 1))
        elif isinstance(item, list):
            todo.extend((sub, None if path is None else f"{path}[{i}]", depth + 1) for i, sub in enumerate(item))
    return None


def _lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
