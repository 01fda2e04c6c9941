"""The shipped plans, as the project's labelled messages taught them: one class per plan and one for "no plan".

``graph-engine build-matcher`` (``tools/matcher_build.py``) learns these weights from the bundled library's
plans (their names and ``examples``), their ``not_examples``, the messages that ask for no plan's work
(``data/not_requests.json``) and the labelled set; they ship in ``data/matcher.json`` and nothing is trained
inside Agent-Zero.  A plan of the library whose id is one of the classes and that has at least ``TAUGHT``
examples is scored here (a "learned" plan); every other plan by ``nearness``.

A message's features: its sentence vector and its words' largest coordinates (max-pooled), its words (per
vocabulary word of the training texts: the cosine of each message word at least ``WORD_MATCH`` near it, summed),
its hashed words and word pairs (``vectors.ngrams``), how closely it is worded like each class's nearest texts
(``vectors.Aligner``, over the plans' texts as the library has them now) and its ``vectors.cues``; the classes'
scores are linear in them.  A message word's part of every class's score is computed once and kept (words recur
from message to message).
"""

from __future__ import annotations

from typing import Any, Sequence

from .vectors import CUES, NGRAM_BUCKETS, Aligner, Encoder, cues, ngrams

WORD_MATCH = 0.6  # a message word counts a vocabulary word this near (cosine)
TAUGHT = 5  # examples a plan needs to be scored by its learned class
MEMO_WORDS = 100_000


def class_texts(plan: Any) -> tuple[str, ...]:
    """What a plan's class learned from: its name and its examples."""
    return (plan.name, *getattr(plan, "examples", ()))


def width(dim: int, classes: int) -> int:
    """The dense features: sentence, max-pooled words, cues, alignment per class (then 1 for the bias)."""
    return 2 * dim + len(CUES) + classes


class Model:
    """The learned classes, over the texts they are scored against now: ``plans`` (in the classes' order; None
    for a class whose plan is not in the library) and ``nots``.  ``dense``: (width + 1) x classes;
    ``vocabulary``: the training words' token ids; ``sparse``: (len(vocabulary) + NGRAM_BUCKETS) x classes."""

    def __init__(self, enc: Encoder, plans: Sequence[Any], nots: Sequence[str], dense: Any, sparse: Any,
                 vocabulary: Any) -> None:
        np = enc.np
        self.enc = enc
        rows = [(t.lower(), c) for c, plan in enumerate(plans) if plan is not None for t in class_texts(plan)]
        rows += [(t.lower(), len(plans)) for t in nots]
        self.classes = len(plans) + 1
        ids = enc.many_ids([t for t, _ in rows])
        self.aligner = Aligner(enc, [enc.words(r) for r in ids], [t for t, _ in rows], [c for _, c in rows],
                               self.classes)
        dim = enc.unit.shape[1]
        wide = width(dim, self.classes)
        self.sentence, self.pooled = dense[:dim], dense[dim:2 * dim]
        self.cues, self.align, self.bias = dense[2 * dim:2 * dim + len(CUES)], dense[wide - self.classes:wide], \
            dense[-1]
        size = len(vocabulary)
        self.vocab = enc.unit[np.asarray(vocabulary, dtype=np.int64)]
        self.words, self.grams = sparse[:size], sparse[size:size + NGRAM_BUCKETS]
        self._memo: dict[int, Any] = {}

    def vectors(self, ids: list[int], words: Any) -> Any:
        """The sentence vector and the max-pooled vector of the content words, side by side."""
        np, enc = self.enc.np, self.enc
        pooled = enc.unit[words].max(axis=0) if len(words) else np.zeros(enc.unit.shape[1], dtype=np.float32)
        return np.concatenate([enc.sentence(ids), pooled])

    def near(self, words: Any) -> Any:
        """Per message word, its cosine with each vocabulary word, where at least WORD_MATCH (else 0)."""
        np = self.enc.np
        near = np.einsum("wd,vd->wv", self.enc.unit[words], self.vocab)
        return np.where(near >= WORD_MATCH, near, 0.0).astype(np.float32)

    def scores(self, text: str, ids: list[int], words: Any) -> Any:
        """Every class's score for a request text (the last: "no plan")."""
        np, memo = self.enc.np, self._memo
        dim = len(self.sentence)
        both = self.vectors(ids, words)
        z = (self.bias + both[:dim] @ self.sentence + both[dim:] @ self.pooled
             + np.asarray(cues(text), dtype=np.float32) @ self.cues + self.aligner.features(words) @ self.align
             + self.grams[ngrams(text)].sum(axis=0))
        got = {w: memo.get(w) for w in words.tolist()}  # read once: another thread may clear the memo meanwhile
        new = [w for w, row in got.items() if row is None]
        if new:
            if len(memo) + len(new) > MEMO_WORDS:
                memo.clear()
            for w, row in zip(new, self.near(np.asarray(new, dtype=np.int64)) @ self.words):
                memo[w] = got[w] = row
        return z + sum(got.values()) if got else z
