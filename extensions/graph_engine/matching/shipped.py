"""What the pack learned from the project's labelled messages, as it ships: ``data/matcher.json``, and the messages
that ask for no plan's work, ``data/not_requests.json``.

Both files are a boundary: each is read only when it is a regular file of bounded size (a FIFO or a device put in
its place is refused without blocking), parsed into checked values (every array of the shape its neighbours
give it, every weight a finite number in range), or refused as a whole with one line saying what is wrong and
how to restore it.  Refused, matching by meaning is off: requests start by their phrases and the utility model.

``matcher.json``: ``format``, ``inputs_sha256`` (a hash of what it was learned from: ``tools/matcher_build.py``
recomputes it), ``constants``, ``classes`` (the learned plans' ids), and ``arrays``: each
``{"dtype": "float32" | "int32", "shape": [...], "data": base64 of the little-endian values}``.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from dataclasses import dataclass
from typing import Any

from ..boundary.reading import ReadError, read_regular
from . import learned, nearness
from .vectors import CUES, NGRAM_BUCKETS

FORMAT = "graph_engine.matcher/1"
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
MATCHER = os.path.join(HERE, "matcher.json")
NOT_REQUESTS = os.path.join(HERE, "not_requests.json")
MAX_MATCHER_BYTES = 16 << 20
MAX_NOT_REQUESTS_BYTES = 4 << 20
MAX_WEIGHT = 1e4  # a learned weight beyond this is damage, not learning
DTYPES = {"float32": "<f4", "int32": "<i4"}
CONSTANTS = ("threshold", "bonus", "likeness", "veto", "strong_veto", "overrule", "near_taught", "near_untaught",
             "near_veto", "close_below", "close_above", "work")


class ShippedError(ValueError):
    """A shipped file that cannot be used: one line, naming it and how to restore it."""


@dataclass(frozen=True)
class Shipped:
    """The checked contents of matcher.json and not_requests.json."""

    inputs_sha256: str
    constants: dict[str, float]
    classes: tuple[str, ...]
    dense: Any
    sparse: Any
    vocabulary: Any
    gate: Any  # nearness.Gate
    net: Any  # nearness.Net
    not_requests: tuple[tuple[str, bool], ...]  # (text, whether it asks for work)

    @property
    def no_work(self) -> tuple[str, ...]:
        return tuple(t for t, work in self.not_requests if not work)


def _fail(path: str, problem: str) -> ShippedError:
    return ShippedError(f"{path}: {problem}; matching by meaning is off (requests start by their phrases and the "
                        "utility model). Reinstall the pack, or rebuild the file with `graph-engine build-matcher`")


def read_json(path: str, limit: int) -> Any:
    try:
        return json.loads(read_regular(path, limit, "matcher file"))
    except ReadError as exc:
        raise ShippedError(f"{exc}; matching by meaning is off (requests start by their phrases and the utility "
                           "model). Reinstall the pack") from None
    except (ValueError, RecursionError) as exc:
        raise _fail(path, f"not valid JSON ({str(exc)[:80]})") from None


def array(np: Any, path: str, arrays: Any, name: str, dtype: str, ndim: int) -> Any:
    """One array of the file, checked: its dtype, its number of dimensions, its size, finite values in range."""
    spec = arrays.get(name) if isinstance(arrays, dict) else None
    if not isinstance(spec, dict) or spec.get("dtype") != dtype or not isinstance(spec.get("shape"), list) \
            or len(spec["shape"]) != ndim or not all(type(n) is int and 0 <= n < 1 << 24 for n in spec["shape"]) \
            or not isinstance(spec.get("data"), str):
        raise _fail(path, f"array '{name}' is missing or not {{dtype: {dtype}, shape: {ndim} sizes, data}}")
    try:
        raw = base64.b64decode(spec["data"], validate=True)
    except ValueError:
        raise _fail(path, f"array '{name}' is not base64") from None
    values = np.frombuffer(raw, dtype=DTYPES[dtype])
    count = 1
    for n in spec["shape"]:
        count *= n
    if values.size != count:
        raise _fail(path, f"array '{name}' holds {values.size} values, its shape {spec['shape']} needs {count}")
    values = values.reshape(spec["shape"]).astype(np.float32 if dtype == "float32" else np.int64)
    if dtype == "float32" and not (np.isfinite(values).all() and float(np.abs(values).max(initial=0.0)) <= MAX_WEIGHT):
        raise _fail(path, f"array '{name}' holds a weight that is not a finite number of at most {MAX_WEIGHT:g}")
    return values


def parse(np: Any, data: Any, nots: Any, path: str = MATCHER, nots_path: str = NOT_REQUESTS) -> Shipped:
    """The files' parsed JSON, checked into a ``Shipped``.  Raises ShippedError."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _fail(path, f"not a matcher file of format {FORMAT}")
    constants = data.get("constants")
    if not isinstance(constants, dict) or not all(
            isinstance(constants.get(k), (int, float)) and not isinstance(constants.get(k), bool)
            and abs(constants[k]) <= 100 for k in CONSTANTS):
        raise _fail(path, f"'constants' must give {', '.join(CONSTANTS)} as numbers")
    classes = data.get("classes")
    if not isinstance(classes, list) or not all(isinstance(c, str) and c for c in classes) or \
            len(set(classes)) != len(classes):
        raise _fail(path, "'classes' must be a list of distinct plan ids")
    arrays = data.get("arrays")
    dense = array(np, path, arrays, "dense", "float32", 2)
    sparse = array(np, path, arrays, "sparse", "float32", 2)
    vocabulary = array(np, path, arrays, "vocabulary", "int32", 1)
    k = len(classes) + 1
    dim = (dense.shape[0] - 1 - len(CUES) - k) // 2
    if dense.shape[1] != k or sparse.shape[1] != k or sparse.shape[0] != len(vocabulary) + NGRAM_BUCKETS \
            or dim < 1 or dense.shape[0] != learned.width(dim, k) + 1 or (vocabulary < 0).any():
        raise _fail(path, f"the learned arrays do not fit {len(classes)} classes and their vocabulary")
    gate = nearness.Gate(np, array(np, path, arrays, "gate_grams", "float32", 1),
                         array(np, path, arrays, "gate_cues", "float32", 1), constants.get("gate_bias", 0.0))
    if len(gate.grams) != NGRAM_BUCKETS or len(gate.cue_weights) != len(CUES):
        raise _fail(path, "the gate's arrays do not fit the hashed words and the cues")
    net = nearness.Net(np, *(array(np, path, arrays, name, "float32", n) for name, n in (
        ("net_w", 1), ("net_u", 1), ("net_hidden_w", 2), ("net_hidden_b", 1), ("net_out", 1))))
    plan_width = len(nearness.PLAN_FEATURES) + len(nearness.UNTAUGHT)
    if len(net.w) != plan_width or len(net.u) != len(nearness.MESSAGE_FEATURES) or \
            net.hidden_w.shape != (plan_width + len(nearness.MESSAGE_FEATURES), len(net.hidden_b)) or \
            len(net.out) != len(net.hidden_b):
        raise _fail(path, "the scorer's arrays do not fit its features")
    if not isinstance(data.get("inputs_sha256"), str):
        raise _fail(path, "'inputs_sha256' is missing")
    return Shipped(data["inputs_sha256"], {k: float(v) for k, v in constants.items()
                                           if isinstance(v, (int, float))},
                   tuple(classes), dense, sparse, vocabulary, gate, net, not_requests(nots, nots_path))


def not_requests(data: Any, path: str = NOT_REQUESTS) -> tuple[tuple[str, bool], ...]:
    """not_requests.json checked: ``{"messages": [{"text": str, "work": bool}, ...]}``."""
    messages = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("text"), str) and isinstance(m.get("work"), bool)
            for m in messages):
        raise _fail(path, "'messages' must be a list of {text, work}")
    return tuple((m["text"], m["work"]) for m in messages)


_LOCK = threading.Lock()
_READ: dict[tuple[str, str], tuple[Shipped | None, str]] = {}


def load(np: Any, path: str | None = None, nots_path: str | None = None) -> tuple[Shipped | None, str]:
    """The shipped files (by default the pack's own), read once per process: (the contents, "") or (None, the one
    line why not)."""
    path, nots_path = path or MATCHER, nots_path or NOT_REQUESTS
    key = (path, nots_path)
    found = _READ.get(key)
    if found is not None:
        return found
    with _LOCK:
        found = _READ.get(key)
        if found is None:
            try:
                found = (parse(np, read_json(path, MAX_MATCHER_BYTES), read_json(nots_path, MAX_NOT_REQUESTS_BYTES),
                               path, nots_path), "")
            except ShippedError as exc:
                found = (None, str(exc))
            _READ[key] = found
    return found


def loaded() -> Shipped | None:
    """The pack's own shipped files when a thread has read them already (a pass never reads them itself)."""
    found = _READ.get((MATCHER, NOT_REQUESTS))
    return found[0] if found is not None else None


def encode(np: Any, values: Any, dtype: str) -> dict[str, Any]:
    """One array as the file holds it (the build writes these)."""
    values = np.ascontiguousarray(values, dtype=DTYPES[dtype])
    return {"dtype": dtype, "shape": list(values.shape), "data": base64.b64encode(values.tobytes()).decode("ascii")}
