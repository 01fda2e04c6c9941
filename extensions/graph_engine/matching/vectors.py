"""Text as vectors: ``wordllama``'s static token embeddings, and what the matchers compute from them.

``wordllama``'s PyPI wheel ships its 256-dimension table and its tokenizer: no download, CPU only, a few tens of
microseconds per message.  Without the package (or numpy) the engine matches by phrases (and the utility
model) and says so in one log line (``unavailable``).  Loading takes a few tenths of a second: the warm-up
thread does it, and a pass never waits for it (``encoder(wait=False)``).

``Aligner``: how closely a message's words and each of many texts' words cover each other (per text, the F1
of two rarity-weighted coverages): a message worded like one example counts even where the plan as a whole is
far.  ``cues``: a few signs of a request (an error pasted in, a file named, an order).  ``ngrams``: hashed
words and word pairs.
"""

from __future__ import annotations

import math
import re
import threading
import zlib
from typing import Any, Sequence

STOP_WEIGHT = 0.3
ALIGN_WEIGHT = 5.0  # the scale of the alignment features (the same L2 weight on every feature)
ALIGN_FLOOR = 0.35  # a cosine under this counts 0 in a coverage (most pairs of words: cheaper, and noise)
NGRAM_BUCKETS = 8_192  # hashed words and word pairs
MAX_CHARS = 2_000  # of a message: the words that decide (a pasted log adds noise, not meaning)
MEMO_FLOATS = 4_000_000  # per aligner: the words' cosines kept (16 MB)

STOP_WORDS = frozenset("""a an the to of in on for and or but is are was were be been being it its this that these
those i me my mine we our ours us you your yours he she they them their with at by from as into onto about please
pls can could would will should shall may might must do does did done doing have has had just so some any all not
no yes ok okay hey hi hello then there here what which who whom how why when where get got gets make makes made
let lets i'm it's i'd i'll don't can't need needs want wants like one new up out over off own same too very also
again still now thanks thank than more most much many each every other another such only really something
anything""".split())


def unavailable() -> str:
    """Why matching by meaning is off ("" when it is on, or still loading); waits for the load."""
    return _model()[1]


def encoder(wait: bool = True) -> Encoder | None:
    """The encoder; ``wait=False``: None while it is still loading (a thread loads it: a pass never waits)."""
    if _LOADED:
        return _LOADED[0][0]
    if wait:
        return _model()[0]
    start_loading()
    return None


def loading() -> bool:
    """The encoder is being loaded by a thread and is not ready yet."""
    return not _LOADED and _STARTED.is_set()


def start_loading() -> None:
    """Load the encoder in a thread (once): what the warm-up and a pass that finds it missing call."""
    if _LOADED or _STARTED.is_set():
        return
    with _LOCK:
        if _STARTED.is_set():
            return
        _STARTED.set()
    threading.Thread(target=_model, name="graph-engine-encoder", daemon=True).start()


_LOCK = threading.Lock()
_LOAD_LOCK = threading.Lock()
_STARTED = threading.Event()
_LOADED: list[tuple[Encoder | None, str]] = []


def _model() -> tuple[Encoder | None, str]:
    if _LOADED:
        return _LOADED[0]
    with _LOAD_LOCK:
        if not _LOADED:
            _STARTED.set()
            _LOADED.append(_load())
    return _LOADED[0]


def _load() -> tuple[Encoder | None, str]:
    try:
        import os

        import numpy as np
        import wordllama
        from wordllama import WordLlama
    except ImportError as exc:
        return None, (f"matching by meaning is off: {exc.name or 'wordllama'} is not installed (pip install "
                      "wordllama in Agent-Zero's Python); requests start by their phrases and the utility model")
    try:  # the wheel ships the table and the tokenizer; the package folder is the cache, so nothing downloads
        folder = os.path.dirname(wordllama.__file__)
        model = WordLlama.load(config="l2_supercat", dim=256, cache_dir=folder, disable_download=True)
        return Encoder(model.tokenizer, np.asarray(model.embedding, dtype=np.float32)), ""
    except Exception as exc:  # a broken install: words still work
        return None, (f"matching by meaning is off: wordllama could not load its model ({type(exc).__name__}: "
                      f"{exc}); requests start by their phrases and the utility model")


class Encoder:
    """Token ids and vectors of a text: the tokenizer plus the static table (rows scaled to length 1)."""

    def __init__(self, tokenizer: Any, table: Any) -> None:
        import numpy as np
        self.np = np
        self.tokenizer = tokenizer
        norms = np.linalg.norm(table, axis=1)
        self.unit = table / np.maximum(norms, 1e-9)[:, None]
        self.norms = norms.astype(np.float32)
        content = np.zeros(len(table), dtype=bool)
        for piece, i in tokenizer.get_vocab().items():
            word = piece.lstrip("\u2581").lower()
            if i < len(table) and len(word) >= 3 and word.isalpha() and word not in STOP_WORDS:
                content[i] = True
        self.content = content
        self.weight = np.where(content, 1.0, STOP_WEIGHT).astype(np.float32) * self.norms  # in a sentence

    def ids(self, text: str) -> list[int]:
        """The token ids of a text's first MAX_CHARS characters (a lone surrogate, which the tokenizer refuses,
        read as "?")."""
        size = len(self.unit)
        text = text[:MAX_CHARS].lower().encode("utf-8", "replace").decode("utf-8")
        return [i for i in self.tokenizer.encode(text, add_special_tokens=False).ids if i < size]

    def many_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.ids(t) for t in texts]  # one by one: the batch call's threads cost more than they save

    def sentences(self, rows: list[list[int]]) -> Any:
        """Many texts' vectors at once (16-bit floats: what an index keeps)."""
        np = self.np
        out = np.zeros((len(rows), self.unit.shape[1]), dtype=np.float32)
        for r, ids in enumerate(rows):
            if ids:
                out[r] = self.weight[ids] @ self.unit[ids]
        norms = np.sqrt(np.einsum("rd,rd->r", out, out))
        return (out / np.maximum(norms, 1e-9)[:, None]).astype(np.float16)

    def words(self, ids: list[int]) -> Any:
        """The distinct content-word ids."""
        content = self.content
        np = self.np
        return np.asarray(sorted({i for i in ids if content[i]}), dtype=np.int64)

    def sentence(self, ids: list[int]) -> Any:
        """A text's vector, length 1 (zero for a text without words)."""
        np = self.np
        if not ids:
            return np.zeros(self.unit.shape[1], dtype=np.float32)
        v = self.weight[ids] @ self.unit[ids]
        n = float(np.sqrt(v @ v))
        return v / n if n else v


# Cues that a message asks for work: (what it is, pattern on the lower-cased message)
CUES = tuple((name, re.compile(pattern)) for name, pattern in (
    ("trouble", r"(?:error|exception)\b|\b[45]\d\d\b|traceback|segfault|crash|fail|broken|wrong|n't\b|"
                r"\bnot\b|\bnever\b|freez|hang|stuck|\bred\b|\bleak"),
    ("artifact", r"\w\.(?:py|js|ts|tsx|java|go|rb|json|ya?ml|toml|txt|log|sh|md|cfg|ini|lock|xml|html|css|c|cpp|rs)\b|"
                 r"(?:^|\s)[~./]?[\w.-]+/[\w./-]+|\w_\w|\bv?\d+\.\d+"),  # (a word with "_" in it)
    ("order", r"^(?:please |pls |can you |could you |would you |i need to |i need |i want to |i want |let's |"
              r"help me )?(?:fix|make|create|build|update|upgrade|merge|move|copy|write|add|implement|set up|setup|"
              r"start|open|put|get|bring|run|deploy|rebase|restore|back up|backup|check|find|investigate|look|dig|"
              r"grep|scan|trace|clean|refactor|split|rename|extract|remove|simplify|integrate|connect|call|hook|sync|"
              r"install|bump|migrate|generate|code|develop|spin up|ship|package|containeri[sz]e|debug|repair|"
              r"resolve|sort out|go through|analy[sz]e|read|tar|zip|archive|transfer|land|combine|squash|pull|push|"
              r"branch|fetch|consume|wire|use|send|query|talk)\b"),
    ("account", r"^(?:i|we|my|our|the|this|that)\b.*\b(?:\w+ed|was|were|went|got|had|did|took|spent|made|came)\b"),
    ("asking", r"\b(?:please|pls|can you|could you|i need|i want|help)\b"),
    ("holding back", r"\b(?:don'?t|do not|no need to|without|not asking (?:you )?to|instead of|rather than|only)\b"
                     r"(?: \w+){0,3}? (?:fix|chang|touch|merg|run|build|deploy|modify|edit|apply|commit|push|do)"),
    ("wondering", r"\?\s*$|^(?:what|why|how|which|when|where|who|is|are|does|do|should|would it|will)\b"),
))


class Aligner:
    """How closely a message's words and each training text's words cover each other: per text, the F1 of two
    coverages, each a rarity-weighted mean of best cosines, those under ``ALIGN_FLOOR`` counted 0 (the message's
    words by the text's, the text's words by the message's; rarity ``log(1 + texts / (1 + texts using the word))``).  Per class, its best text's F1: a
    message worded like one example counts even where the class's mean vector is far (a bug report about a phone menu is near one bug report, not near "a bug")."""

    def __init__(self, enc: Encoder, word_rows: Sequence[Any], texts: Sequence[str], classes: Sequence[int],
                 n_classes: int) -> None:
        np = enc.np
        self.enc = enc
        used: dict[int, int] = {}
        for row in word_rows:
            for w in row.tolist():
                used[w] = used.get(w, 0) + 1
        self.count = len(word_rows)
        self.used = used
        vocab = sorted(used)
        self.words = vocab  # the training words' ids, in the order of ``vectors``
        where = {w: i for i, w in enumerate(vocab)}
        self.vectors = enc.unit[np.asarray(vocab, dtype=np.int64)] if vocab else np.zeros((1, enc.unit.shape[1]),
                                                                                           dtype=np.float32)
        kept = [j for j, row in enumerate(word_rows) if len(row)]  # a text without words covers nothing
        self.kept = kept
        self.flat = np.asarray([where[w] for j in kept for w in word_rows[j].tolist()], dtype=np.int64)
        self.starts = np.cumsum([0] + [len(word_rows[j]) for j in kept[:-1]]).astype(np.int64)
        self.flat_rarity = np.asarray([self.rarity(w) for j in kept for w in word_rows[j].tolist()], dtype=np.float32)
        self.size = np.add.reduceat(self.flat_rarity, self.starts) if kept else np.zeros(0, dtype=np.float32)
        # per class, where its texts start among the kept (the training rows come class by class)
        counts = [0] * n_classes
        for j in kept:
            counts[classes[j]] += 1
        assert all(classes[a] <= classes[b] for a, b in zip(kept, kept[1:]))
        self.present = np.asarray([c > 0 for c in counts])
        self.class_starts = np.cumsum([0] + [c for c in counts if c][:-1]).astype(np.int64)
        lengths = [len(word_rows[j]) for j in kept]
        self.flat_weight = (self.flat_rarity / np.repeat(self.size, lengths)).astype(
            np.float32) if kept else np.zeros(0, dtype=np.float32)  # a word's share of its text's coverage
        # the same pairs by word: where each training word occurs (text, share), for the texts' coverage by a
        # message, which only the words near one of its words (ALIGN_FLOOR) add to
        by_word = np.argsort(self.flat, kind="stable")
        self.post_text = np.repeat(np.arange(len(kept), dtype=np.int64), lengths)[by_word]
        self.post_share = self.flat_weight[by_word]
        self.post_at = np.searchsorted(self.flat[by_word], np.arange(len(self.vectors) + 1)).astype(np.int64)
        self.texts = [texts[j] for j in kept]
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self._memo: dict[int, tuple[Any, Any]] = {}
        self._memo_cap = max(100, MEMO_FLOATS // (len(vocab) + len(kept) + 1))

    def rarity(self, w: int) -> float:
        return math.log(1 + self.count / (1 + self.used.get(w, 0)))

    def _rows(self, words: list[int]) -> tuple[Any, Any]:
        """Per message word: its cosines with the training words, and its best cosine in each kept text (kept
        per word: words recur from message to message)."""
        np, memo = self.enc.np, self._memo
        got = {w: memo.get(w) for w in words}  # read once: another thread may clear the memo meanwhile
        new = [w for w, row in got.items() if row is None]
        if new:
            # einsum, not a BLAS product: on a busy machine waking BLAS threads costs milliseconds
            cos = np.einsum("wd,vd->wv", self.enc.unit[np.asarray(new, dtype=np.int64)], self.vectors)
            best = np.maximum.reduceat(cos[:, self.flat], self.starts, axis=1) if len(self.kept) else \
                np.zeros((len(new), 0), dtype=np.float32)
            best[best < ALIGN_FLOOR] = 0.0
            if len(memo) + len(new) > self._memo_cap:
                memo.clear()
            for w, c, b in zip(new, cos, best):
                memo[w] = got[w] = (c, b)
        return np.stack([got[w][0] for w in words]), np.stack([got[w][1] for w in words])

    def features(self, words: Any) -> Any:
        """A message's features (its distinct content-word ids): per class its best text's F1, times
        ``ALIGN_WEIGHT``."""
        np = self.enc.np
        if not len(words) or not self.kept:
            return np.zeros(len(self.present), dtype=np.float32)
        return self._by_class(self.per_text(words))

    def per_text(self, words: Any) -> Any:
        """The F1 of the message (its distinct content-word ids, at least one) with each text that has words
        (``kept``), in their order."""
        np = self.enc.np
        ws = words.tolist()
        cos, best = self._rows(ws)
        rarity = np.asarray([self.rarity(w) for w in ws], dtype=np.float32)
        p = rarity @ best / rarity.sum()
        near = cos.max(axis=0)
        hot = np.flatnonzero(near >= ALIGN_FLOOR)
        lo, sizes = self.post_at[hot], self.post_at[hot + 1] - self.post_at[hot]
        total = int(sizes.sum())
        if total:  # each hot word's postings, side by side
            at = np.repeat(lo - (np.cumsum(sizes) - sizes), sizes) + np.arange(total)
            r = np.bincount(self.post_text[at], weights=self.post_share[at] * np.repeat(near[hot], sizes),
                            minlength=len(self.kept)).astype(np.float32)
        else:
            r = np.zeros(len(self.kept), dtype=np.float32)
        return _f1(np, p, r)

    def per_text_of(self, words: Any, positions: Any) -> Any:
        """``per_text`` for some of the kept texts only (``positions`` among them): a large corpus is scored in
        the part a shortlist names, its words compared with the message's once."""
        np = self.enc.np
        if not len(positions) or not len(words):
            return np.zeros(len(positions), dtype=np.float32)
        lens = self.lengths[positions]
        offsets = np.cumsum(lens) - lens
        at = np.repeat(self.starts[positions] - offsets, lens) + np.arange(int(lens.sum()))
        used, inverse = np.unique(self.flat[at], return_inverse=True)
        ws = words.tolist()
        cos = np.einsum("wd,vd->wv", self.enc.unit[np.asarray(ws, dtype=np.int64)], self.vectors[used])[:, inverse]
        best = np.maximum.reduceat(cos, offsets, axis=1)
        best[best < ALIGN_FLOOR] = 0.0
        rarity = np.asarray([self.rarity(w) for w in ws], dtype=np.float32)
        p = rarity @ best / rarity.sum()
        near = cos.max(axis=0)
        near[near < ALIGN_FLOOR] = 0.0
        r = np.add.reduceat(self.flat_weight[at] * near, offsets).astype(np.float32)
        return _f1(np, p, r)

    def training(self, cos: Any) -> Any:
        """The training texts' own features, each text scored without itself or a text equal to it (as a
        message nobody wrote down would be); ``cos``: the training words' cosines with each other."""
        np = self.enc.np
        kept = len(self.kept)
        out = np.zeros((self.count, len(self.present)), dtype=np.float32)
        if not kept:
            return out
        best = np.zeros((len(self.vectors), kept), dtype=np.float32)  # per training word, its best cosine per text
        for lo in range(0, len(self.vectors), 512):
            best[lo:lo + 512] = np.maximum.reduceat(cos[lo:lo + 512][:, self.flat], self.starts, axis=1)
        best[best < ALIGN_FLOOR] = 0.0
        p = np.add.reduceat(best[self.flat] * self.flat_rarity[:, None], self.starts, axis=0) / self.size[:, None]
        f1 = _f1(np, p, p.T)
        same: dict[str, list[int]] = {}
        for k, t in enumerate(self.texts):
            same.setdefault(t, []).append(k)
        for ks in same.values():
            f1[np.ix_(ks, ks)] = -1.0
        for k, j in enumerate(self.kept):
            out[j] = self._by_class(f1[k])
        return out

    def _by_class(self, f1: Any) -> Any:
        """Per class, its best text's F1 (-1 for a class without texts), times ``ALIGN_WEIGHT``."""
        np = self.enc.np
        out = np.full(len(self.present), -1.0, dtype=np.float32)
        out[self.present] = np.maximum.reduceat(f1, self.class_starts)
        return ALIGN_WEIGHT * out


def _f1(np: Any, p: Any, r: Any) -> Any:
    """2pr / (p + r), and 0 where p + r is not above 0 (cosines may be negative)."""
    total = p + r
    some = total > 0
    total[~some] = 1.0
    return np.where(some, 2 * p * r / total, 0.0).astype(np.float32)


def ngrams(text: str) -> list[int]:
    """The hashed buckets (``NGRAM_BUCKETS``) of a text's words and word pairs, letter case aside."""
    tokens = _TOKENS.findall(text[:MAX_CHARS].lower())
    grams = tokens + [f"{a} {b}" for a, b in zip(tokens, tokens[1:])]
    return sorted({zlib.crc32(g.encode("utf-8", "surrogatepass")) % NGRAM_BUCKETS for g in grams})


_TOKENS = re.compile(r"[a-z0-9_]+|[^\sa-z0-9_]")


def cues(text: str) -> list[float]:
    """Which ``CUES`` the first ``MAX_CHARS`` of a text show (1.0) or not (0.0), letter case aside."""
    text = text[:MAX_CHARS].lower()
    return [1.0 if pattern.search(text) else 0.0 for _, pattern in CUES]


