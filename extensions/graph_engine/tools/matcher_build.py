"""``graph-engine build-matcher``: learn what ships in ``matching/data/matcher.json`` from the project's own texts.

Inputs: the bundled library (its plans' names, phrases, steps, ``examples`` and ``not_examples``), the messages
that ask for no plan's work (``matching/data/not_requests.json``) and the labelled set
(``fixtures/trigger_cases.json``; only its tuning cases teach anything).  Three things are learned, each from
zero with a fixed number of steps and a fixed seed, so the same inputs give the same bytes:

* ``learned``: the bundled plans' classes and "no plan" (a multinomial logistic regression, Adam);
* the gate: a message asks for work or not (logistic regression on hashed words and word pairs, and cues);
* ``nearness``'s scorer, from the labelled messages scored against every bundled plan as if the plan were not
  learned: with its examples (each message scored without itself) and without them (only its own text).

The constants that decide come with them: the learned model's were calibrated on the labelled set
(``graph-engine triggers --calibrate``); the scorer's two shifts are set here so that at most ``TAUGHT_BOUND``
(plans with examples) and ``UNTAUGHT_BOUND`` (plans without) of the tuning cases that ask for nothing start a plan.
The file records ``inputs_sha256``; a test checks it against the inputs as they are (a library edit without a
rebuild fails it, naming this command).  Run with one thread (``make matcher`` sets it): BLAS sums in another
order on more threads.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import zlib
from typing import Any, Callable, Sequence

from ..authoring.library import load_library_file
from ..matching import learned, nearness, shipped, vectors
from ..matching.words import normalise, request_text

BUILD_VERSION = 1  # raise it when what is learned, or how, changes (the inputs' hash includes it)
TRAIN_STEPS = 250
TRAIN_RATE = 0.08
TRAIN_L2 = 3e-4
GATE_STEPS = 300
GATE_RATE = 0.1
GATE_L2 = 1e-4
NET_STEPS = 1500
NET_RATE = 0.05
NET_L2 = 1e-3
SEED = 20261127
TAUGHT_BOUND = 0.01
UNTAUGHT_BOUND = 0.02
# the learned model's constants, calibrated on the labelled set (graph-engine triggers --calibrate)
LEARNED = {"threshold": -1.25, "bonus": 0.25, "likeness": 0.35, "veto": -2.0, "strong_veto": -3.5, "overrule": 4.0}
CLOSE = {"close_below": 1.5, "close_above": 1.0, "work": 0.0}  # work: the gate's logit of "asks for work"


def root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def default_paths() -> dict[str, str]:
    top = root()
    return {"library": os.path.join(top, "plan_library", "htn_plan_library.json"),
            "cases": os.path.join(top, "fixtures", "trigger_cases.json"),
            "not_requests": shipped.NOT_REQUESTS, "out": shipped.MATCHER}


def plan_inputs(plan: Any) -> dict[str, Any]:
    """What of a plan the matcher reads."""
    return {"id": plan.id, "name": plan.name, "description": plan.description, "domains": list(plan.domains),
            "triggers": list(plan.triggers), "strong_triggers": list(plan.strong_triggers),
            "trigger_threshold": plan.trigger_threshold, "own": list(nearness.own_texts(plan)),
            "examples": list(plan.examples), "not_examples": list(plan.not_examples)}


def inputs_sha256(plans: Sequence[Any], cases: Sequence[dict], nots: Sequence[tuple[str, bool]]) -> str:
    """A hash of what the matcher learns from (their content, not their files' layout) and BUILD_VERSION."""
    blob = json.dumps({"version": BUILD_VERSION, "plans": [plan_inputs(p) for p in plans],
                       "cases": [[c["message"], c["expect"], c.get("domain", ""), c.get("split", "")] for c in cases],
                       "not_requests": [list(n) for n in nots]}, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def tuning(cases: Sequence[dict]) -> list[dict]:
    return [c for c in cases if c.get("split") not in ("held_out", "fresh")]


# ── the learned model ───────────────────────────────────────────────────────


def learn(enc: vectors.Encoder, plans: Sequence[Any], nots: Sequence[str]) -> tuple[Any, Any, Any]:
    """The learned classes' weights (dense, sparse, vocabulary) for ``plans`` and "no plan" (``nots``)."""
    np = enc.np
    rows = [(t.lower(), c) for c, plan in enumerate(plans) for t in learned.class_texts(plan)]
    rows += [(t.lower(), len(plans)) for t in nots]
    ids = [enc.ids(t) for t, _ in rows]
    words = [enc.words(i) for i in ids]
    y = np.asarray([c for _, c in rows], dtype=np.int64)
    classes = len(plans) + 1
    aligner = vectors.Aligner(enc, words, [t for t, _ in rows], y.tolist(), classes)
    dim = enc.unit.shape[1]
    wide = learned.width(dim, classes)
    vocab = aligner.vectors
    size = len(vocab)
    dense = np.zeros((len(rows), wide + 1), dtype=np.float32)
    cos = vocab @ vocab.T
    dense[:, wide - classes:wide] = aligner.training(cos)
    dense[:, -1] = 1.0
    near_all = np.where(cos >= learned.WORD_MATCH, cos, 0.0).astype(np.float32)
    del cos
    at_vocab = {w: i for i, w in enumerate(aligner.words)}
    at, where, value = [], [], []
    for r, ((text, _), i, w) in enumerate(zip(rows, ids, words)):
        pooled = enc.unit[w].max(axis=0) if len(w) else np.zeros(dim, dtype=np.float32)
        dense[r, :2 * dim] = np.concatenate([enc.sentence(i), pooled])
        dense[r, 2 * dim:2 * dim + len(vectors.CUES)] = vectors.cues(text)
        grams = np.asarray(vectors.ngrams(text), dtype=np.int64) + size
        cols, vals = grams, np.ones(len(grams), dtype=np.float32)
        if len(w):
            near = near_all[[at_vocab[x] for x in w.tolist()]].sum(axis=0)
            nz = np.flatnonzero(near)
            cols, vals = np.concatenate([nz, grams]), np.concatenate([near[nz], vals])
        at.append(np.full(len(cols), r, dtype=np.int64))
        where.append(cols)
        value.append(vals)
    cat = (lambda parts, kind: np.concatenate(parts) if parts else np.zeros(0, dtype=kind))
    wd, wb = _softmax_regression(np, dense, (cat(at, np.int64), cat(where, np.int64), cat(value, np.float32),
                                             size + vectors.NGRAM_BUCKETS), y, classes)
    return wd, wb, np.asarray(aligner.words, dtype=np.int64)


def _softmax_regression(np: Any, dense: Any, sparse: tuple, y: Any, classes: int) -> tuple[Any, Any]:
    """Multinomial logistic regression by TRAIN_STEPS steps of Adam from zero, L2 TRAIN_L2.  ``sparse``: (row,
    column, value, columns), rows in order."""
    rows, cols, vals, size = sparse
    n = len(dense)
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]]) if len(rows) else np.zeros(0, dtype=np.int64)
    order = np.argsort(cols, kind="stable")
    by_col = cols[order]
    rows_by_col, vals_by_col, vals_by_row = rows[order], vals[order][:, None], vals[:, None]
    col_starts = np.flatnonzero(np.r_[True, by_col[1:] != by_col[:-1]]) if len(cols) else starts
    target = np.eye(classes, dtype=np.float32)[y]
    weights = [np.zeros((dense.shape[1], classes), dtype=np.float32), np.zeros((size, classes), dtype=np.float32)]
    moments = [(np.zeros_like(w), np.zeros_like(w)) for w in weights]
    for step in range(1, TRAIN_STEPS + 1):
        wd, wb = weights
        z = dense @ wd
        if len(rows):
            z[rows[starts]] += np.add.reduceat(vals_by_row * wb[cols], starts, axis=0)
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        err = (p - target) / n
        gb = np.zeros_like(wb)
        if len(rows):
            gb[by_col[col_starts]] = np.add.reduceat(vals_by_col * err[rows_by_col], col_starts, axis=0)
        for w, g, (m, v) in zip(weights, (dense.T @ err + TRAIN_L2 * wd, gb + TRAIN_L2 * wb), moments):
            _adam(np, w, g, m, v, step, TRAIN_RATE)
    return weights[0], weights[1]


def _adam(np: Any, w: Any, g: Any, m: Any, v: Any, step: int, rate: float) -> None:
    m *= 0.9
    m += 0.1 * g
    v *= 0.999
    v += 0.001 * g * g
    w -= rate * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)


# ── the gate ────────────────────────────────────────────────────────────────


def gate_texts(plans: Sequence[Any], cases: Sequence[dict], nots: Sequence[tuple[str, bool]]) -> list[tuple[str, int]]:
    """(text, 1 when it asks for work) for the gate: every example and request of the tuning cases, and the
    messages that ask for no plan's work as they are marked (once per text, letter case aside)."""
    texts = [(e, 1) for p in plans for e in p.examples]
    texts += [(c["message"], 1) for c in tuning(cases) if c["expect"]]
    texts += [(t, int(work)) for t, work in nots]
    seen: dict[str, tuple[str, int]] = {}
    for t, label in texts:
        seen.setdefault(t.lower(), (t, label))
    return list(seen.values())


def learn_gate(np: Any, texts: Sequence[tuple[str, int]]) -> tuple[Any, Any, float]:
    rows = [vectors.ngrams(normalise(t)) for t, _ in texts]
    cue = np.asarray([vectors.cues(normalise(t)) for t, _ in texts], dtype=np.float32)
    y = np.asarray([label for _, label in texts], dtype=np.float32)
    n = len(rows)
    flat = np.asarray([g for r in rows for g in r], dtype=np.int64)
    owner = np.repeat(np.arange(n), [len(r) for r in rows])
    grams, cw, bias = (np.zeros(vectors.NGRAM_BUCKETS, dtype=np.float32), np.zeros(cue.shape[1], dtype=np.float32),
                       np.zeros(1, dtype=np.float32))
    moments = [(np.zeros_like(w), np.zeros_like(w)) for w in (grams, cw, bias)]
    for step in range(1, GATE_STEPS + 1):
        z = np.bincount(owner, weights=grams[flat], minlength=n) + cue @ cw + bias[0]
        err = ((1.0 / (1.0 + np.exp(-z))) - y) / n
        grads = (np.bincount(flat, weights=err[owner], minlength=len(grams)).astype(np.float32) + GATE_L2 * grams,
                 (cue.T @ err).astype(np.float32) + GATE_L2 * cw, np.asarray([err.sum()], dtype=np.float32))
        for w, g, (m, v) in zip((grams, cw, bias), grads, moments):
            _adam(np, w, g, m, v, step, GATE_RATE)
    return grams, cw, float(bias[0])


# ── the nearness scorer ─────────────────────────────────────────────────────


def queries(plans: Sequence[Any], cases: Sequence[dict], nots: Sequence[tuple[str, bool]]) -> list[dict]:
    """What the scorer learns from: the tuning cases, then every example and not-request that is not one of
    them (their domain not known)."""
    out = [dict(c) for c in tuning(cases)]
    seen = {c["message"].lower() for c in out}
    for p in plans:
        for e in p.examples:
            if e.lower() not in seen:
                seen.add(e.lower())
                out.append({"message": e, "expect": p.id, "domain": ""})
    for t, _ in nots:
        if t.lower() not in seen:
            seen.add(t.lower())
            out.append({"message": t, "expect": None, "domain": ""})
    return out


def untaught(plan: Any) -> Any:
    """The plan as if its author had given no examples and no not-examples."""
    from dataclasses import replace
    return replace(plan, examples=(), not_examples=())


FOLDS = 5


def fold_of(text: str) -> int:
    return zlib.crc32(text.lower().encode("utf-8", "surrogatepass")) % FOLDS


def held_out_gates(np: Any, texts: Sequence[tuple[str, int]], owners: dict[str, str]) -> tuple[list, dict]:
    """Gates that never saw a message: one per fold of the texts, and one per plan without that plan's requests
    (a plan's requests scored as if it were a plan nobody taught: its topic unseen)."""
    folds = [learn_gate(np, [t for t in texts if fold_of(t[0]) != f]) for f in range(FOLDS)]
    per_plan = {pid: learn_gate(np, [t for t in texts if owners.get(t[0].lower()) != pid])
                for pid in sorted(set(owners.values()))}
    return folds, per_plan


def near_rows(enc: vectors.Encoder, plans: Sequence[Any], qs: Sequence[dict], no_work: Sequence[str],
              gates: tuple[list, dict], progress: Callable[[str], None]) -> tuple[Any, Any, Any]:
    """The scorer's training rows: per query and plan, with examples and without, with the domain and without.
    The gate's value of a query is a gate's that never saw it (its fold's; for a request of a plan without
    examples, the gate that never saw that plan's requests)."""
    np = enc.np
    ids_of = {p.id: i for i, p in enumerate(plans)}
    folds, per_plan = gates
    X, M, y = [], [], []
    for taught in (True, False):
        near = nearness.Near(enc, plans if taught else [untaught(p) for p in plans], no_work, _zero_net(np),
                             nearness.Gate(np, *folds[0]))
        for n, q in enumerate(qs):
            if n % 500 == 0:
                progress(f"scorer rows: {'with' if taught else 'without'} examples, {n} of {len(qs)} messages")
            text = request_text(normalise(q["message"]))
            ids = enc.ids(text) if text else []
            words = enc.words(ids)
            if not len(words):
                continue
            held = per_plan[q["expect"]] if q["expect"] and not taught else folds[fold_of(q["message"])]
            rows, message = near.features(text, ids, words, q["message"].lower(), nearness.Gate(np, *held))
            m = [message[k] for k in nearness.MESSAGE_FEATURES]
            label = ids_of[q["expect"]] if q["expect"] else len(plans)
            for domain in dict.fromkeys(("", q.get("domain", ""))):
                X.append([nearness.plan_row(dict(f, domain=float(bool(domain) and domain in plans[f["at"]].domains)))
                          for f in rows])
                M.append(m)
                y.append(label)
    return np.asarray(X, dtype=np.float32), np.asarray(M, dtype=np.float32), np.asarray(y, dtype=np.int64)


def _zero_net(np: Any) -> nearness.Net:
    pw, mw = len(nearness.PLAN_FEATURES) + len(nearness.UNTAUGHT), len(nearness.MESSAGE_FEATURES)
    return nearness.Net(np, np.zeros(pw, np.float32), np.zeros(mw, np.float32),
                        np.zeros((pw + mw, nearness.HIDDEN), np.float32), np.zeros(nearness.HIDDEN, np.float32),
                        np.zeros(nearness.HIDDEN, np.float32))


def learn_net(np: Any, X: Any, M: Any, y: Any) -> dict[str, Any]:
    """Softmax over the plans and "no plan" (its logit linear in the message's features), by NET_STEPS steps of
    Adam; the hidden layer starts from SEED."""
    X, M = X.astype(np.float64), M.astype(np.float64)
    n, plans, d = X.shape
    rng = np.random.default_rng(SEED)
    p = {"w": np.zeros(d), "u": np.zeros(M.shape[1]), "W1": rng.normal(0, 0.3, (d + M.shape[1], nearness.HIDDEN)),
         "b1": np.zeros(nearness.HIDDEN), "w2": rng.normal(0, 0.1, nearness.HIDDEN)}
    moments = {k: (np.zeros_like(v), np.zeros_like(v)) for k, v in p.items()}
    Z = np.concatenate([X, np.broadcast_to(M[:, None, :], (n, plans, M.shape[1]))], axis=2)
    for step in range(1, NET_STEPS + 1):
        H = np.tanh(Z @ p["W1"] + p["b1"])
        L = np.concatenate([X @ p["w"] + H @ p["w2"], (M @ p["u"])[:, None]], axis=1)
        L -= L.max(axis=1, keepdims=True)
        P = np.exp(L)
        P /= P.sum(axis=1, keepdims=True)
        P[np.arange(n), y] -= 1
        G = P / n
        dH = G[:, :plans, None] * p["w2"] * (1 - H * H)
        grads = {"w": np.einsum("np,npd->d", G[:, :plans], X), "u": G[:, plans] @ M,
                 "w2": np.einsum("np,nph->h", G[:, :plans], H), "W1": np.einsum("npz,nph->zh", Z, dH),
                 "b1": dH.sum(axis=(0, 1))}
        for k in p:
            _adam(np, p[k], grads[k] + NET_L2 * p[k], *moments[k], step, NET_RATE)
    return {"net_w": p["w"], "net_u": p["u"], "net_hidden_w": p["W1"], "net_hidden_b": p["b1"], "net_out": p["w2"]}


# ── building ────────────────────────────────────────────────────────────────


def build(paths: dict[str, str] | None = None, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The matcher file's contents, learned from the inputs."""
    paths = paths or default_paths()
    enc = vectors.encoder()
    if enc is None:
        raise RuntimeError(vectors.unavailable())
    np = enc.np
    plans = list(load_library_file(paths["library"]).plans.values())
    with open(paths["cases"], encoding="utf-8") as fh:
        cases = json.load(fh)["cases"]
    with open(paths["not_requests"], encoding="utf-8") as fh:
        nots = shipped.not_requests(json.load(fh), paths["not_requests"])
    taught = [p for p in plans if len(p.examples) >= learned.TAUGHT]
    started = time.perf_counter()
    progress(f"learning the {len(taught)} bundled plans' classes")
    dense, sparse, vocab = learn(enc, taught, [*(t for p in taught for t in p.not_examples), *(t for t, _ in nots)])
    progress(f"learning the gate ({time.perf_counter() - started:.0f} s)")
    texts = gate_texts(plans, cases, nots)
    grams, cue_w, gate_bias = learn_gate(np, texts)
    no_work = [t for t, work in nots if not work]
    qs = queries(plans, cases, nots)
    progress("learning the held-out gates")
    gates = held_out_gates(np, texts, {q["message"].lower(): q["expect"] for q in qs if q["expect"]})
    X, M, y = near_rows(enc, plans, qs, no_work, gates, progress)
    progress(f"learning the scorer from {len(y)} rows ({time.perf_counter() - started:.0f} s)")
    net_arrays = learn_net(np, X, M, y)
    net = nearness.Net(np, *(net_arrays[k].astype(np.float32) for k in (
        "net_w", "net_u", "net_hidden_w", "net_hidden_b", "net_out")))
    constants = dict(LEARNED, **CLOSE, gate_bias=round(gate_bias, 6))
    constants.update(calibrate(enc, plans, cases, nots, net, gates[0], progress))
    arrays = {"dense": shipped.encode(np, dense, "float32"), "sparse": shipped.encode(np, sparse, "float32"),
              "vocabulary": shipped.encode(np, vocab, "int32"), "gate_grams": shipped.encode(np, grams, "float32"),
              "gate_cues": shipped.encode(np, cue_w, "float32"),
              **{k: shipped.encode(np, v, "float32") for k, v in net_arrays.items()}}
    progress(f"done in {time.perf_counter() - started:.0f} s")
    return {"format": shipped.FORMAT, "inputs_sha256": inputs_sha256(plans, cases, nots),
            "classes": [p.id for p in taught], "constants": constants, "arrays": arrays}


def calibrate(enc: vectors.Encoder, plans: Sequence[Any], cases: Sequence[dict], nots: Sequence[tuple[str, bool]],
              net: nearness.Net, folds: list, progress: Callable[[str], None]) -> dict[str, float]:
    """The scorer's shifts: per kind of plan (with examples, without), the margin at which at most the bound of
    the tuning cases that ask for nothing start a plan (every plan scored by the scorer, none learned; each
    message's gate one that never saw it)."""
    np = enc.np
    out = {}
    no_work = [t for t, work in nots if not work]
    for key, strip, bound in (("near_taught", False, TAUGHT_BOUND), ("near_untaught", True, UNTAUGHT_BOUND)):
        progress(f"calibrating {key}")
        near = nearness.Near(enc, [untaught(p) if strip else p for p in plans], no_work, net,
                             nearness.Gate(np, *folds[0]))
        best = []
        for c in tuning(cases):
            if c["expect"] is not None:
                continue
            text = request_text(normalise(c["message"]))
            ids = enc.ids(text) if text else []
            words = enc.words(ids)
            if not len(words):
                continue
            rows, message = near.features(text, ids, words, c["message"].lower(),
                                          nearness.Gate(np, *folds[fold_of(c["message"])]))
            plain, _ = near.margins(rows, message)
            best.append(float(plain.max()))
        values = np.asarray(best)
        negatives = len([c for c in tuning(cases) if c["expect"] is None])
        allowed = int(bound * negatives)
        ordered = np.sort(values)[::-1]
        out[key] = float(np.round(ordered[allowed] + 1e-3, 3)) if len(ordered) > allowed else 0.0
    out["near_veto"] = LEARNED["veto"]
    return out


def write(data: dict[str, Any], path: str) -> str:
    """The file, written whole (a reader never sees half of it); returns its sha256."""
    blob = (json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(blob)
    os.replace(tmp, path)
    return hashlib.sha256(blob).hexdigest()


def stale(paths: dict[str, str] | None = None) -> str:
    """Why the shipped matcher file does not match its inputs ("" when it does)."""
    paths = paths or default_paths()
    try:
        with open(paths["out"], encoding="utf-8") as fh:
            recorded = json.load(fh).get("inputs_sha256")
        plans = list(load_library_file(paths["library"]).plans.values())
        with open(paths["cases"], encoding="utf-8") as fh:
            cases = json.load(fh)["cases"]
        with open(paths["not_requests"], encoding="utf-8") as fh:
            nots = shipped.not_requests(json.load(fh), paths["not_requests"])
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        return f"{paths['out']}: cannot compare it with its inputs ({exc})"
    now = inputs_sha256(plans, cases, nots)
    if recorded != now:
        return (f"{paths['out']} was learned from other inputs than the bundled library, the labelled set and "
                f"not_requests.json as they are now (recorded {str(recorded)[:12]}, now {now[:12]}); run "
                "`make matcher` (graph-engine build-matcher) and commit the file")
    return ""
