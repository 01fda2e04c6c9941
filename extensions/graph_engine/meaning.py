"""Which plan a message asks for, by meaning: people describe their problem, they do not type trigger phrases.

The model is ``wordllama``'s static token embeddings (its PyPI wheel ships the 256-dimension table and the
tokenizer: no download, CPU only, a few tens of microseconds per message).  Without the package (or numpy) the
engine matches by words alone and says so in one log line (``unavailable``).

A plan is described by its name, trigger phrases and ``examples`` (requests that must start it); its
``not_examples`` are messages near its topic that must start nothing.  What a plan's texts give is computed
once per content (``PlanVectors``, kept by a hash of the texts), so a reload only embeds the plans that changed.

For a library of up to ``MODEL_PLANS`` plans, a ``Model`` learns from those texts which plan a message asks
for: a linear model with one class per plan and one for "no plan", whose examples are every plan's
``not_examples`` and the engine's own list of messages that ask for no plan's work (``not_requests.py``: small
talk, tasks a chat answers itself, a plan's words in another sense, and the tuning cases of the project's
labelled set that ask for nothing).  It reads the message's sentence vector and its words' largest coordinates,
its words near the plans' words (each content word counts the plan texts' words it is near, cosine at least
``WORD_MATCH``), its hashed words and word pairs, how closely its words and each class's nearest texts cover
each other (``Aligner``: a message worded like one example counts even where the class as a whole is far), and
a few cues of a request (an error pasted in, a file or version named, an order, a report of what broke).  It is
trained when the library is loaded (in the warm-up thread; for the shipped ten plans about 25 s on the slow
2-core machine where it was last measured, 12.6 s there for the smaller training set before) and kept by a hash
of the texts, in the process and on disk (``Store``): a restart loads the weights instead of training again.
A plan's score is how far its class leads "no plan" (log-odds), plus ``BONUS`` when the belief-state domain is
one of the plan's and ``BONUS`` again when one of its trigger phrases is in the message (as each adds a point
to matching by phrases); the best plan starts when its score reaches ``THRESHOLD``.  The model also has a say
over the phrases: a match by weak phrases alone that it finds far from the plan (``VETO``) is a mention, and a
match by any phrase of a plan it scores ``OVERRULE`` below another plan yields to meaning ("rebase my feature
branch onto main" asks for a merge); a plan so undone does not start by meaning either.

A larger library is scored by nearness to the plans' texts instead (training would take too long):

* ``words``: each content word of the message (stop words, numbers and pieces shorter than 3 letters left out)
  finds its nearest word among the plan's words; a pair whose cosine reaches ``WORD_CUT`` counts that cosine
  times how rare the plan's word is among the plans (``log(1 + plans / plans using it)``), summed over the
  message's words and divided by their number (at least ``MIN_WORDS``) plus one;
* ``sentence``: the mean of the two best cosines between the message's sentence vector (its words' vectors
  summed, stop words at ``STOP_WEIGHT``) and the plan's name and examples, times ``SENTENCE_WEIGHT``;

and the best plan starts when its score reaches ``NEAR_THRESHOLD`` (``NEAR_DOMAIN_THRESHOLD`` when the domain
is one of the plan's), it leads the next plan by ``NEAR_MARGIN``, and the message is not closer to some plan's
not-example than to the winner's nearest example.  The constants are calibrated on the project's labelled set
(``graph-engine triggers --calibrate``; see the README).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import math
import re
import threading
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

WORD_CUT = 0.5
STOP_WEIGHT = 0.3
SENTENCE_WEIGHT = 0.5
MENTION_COSINE = 0.8  # how near a not-example a message must be to undo a match by weak phrases
MIN_WORDS = 2  # a message with fewer content words is scored as if it had this many (one rare word is no request)
NEAR_THRESHOLD = 1.10
NEAR_DOMAIN_THRESHOLD = 0.60
NEAR_MARGIN = 0.0
# the model (libraries of up to MODEL_PLANS plans)
THRESHOLD = -1.25  # a plan's log-odds against "no plan", bonuses included, to start it
BONUS = 0.25  # per piece of evidence: the domain is one of the plan's; one of its phrases is in the message
LIKENESS = 0.35  # the message's cosine with the plan's nearest text, at least: a plan nothing like it never starts
TAUGHT = 5  # examples a plan needs before the model may undo a match by its phrases (a plan without examples: never)
VETO = -2.0  # a match by weak phrases alone is undone when the model scores the plan below this ("I need a backup
# plan for the garden wedding"); of the tuning cases' right matches by weak phrases, each scored by a model that
# never saw it, one is lower (-2.27, "my game crashes on level 3"): -2.5 would start it, and 2 more messages that
# should start nothing
STRONG_VETO = -3.5  # ... a match by a strong phrase, below this ("help me refactor my weekly schedule"); of the
# right matches by a strong phrase, scored so, one is lower (-3.79, "checkout -b add-dark-mode, stage + commit ...")
OVERRULE = 4.0  # a match by phrases is undone when the model, taught by both plans, scores another plan this much higher
MODEL_PLANS = 64
WORD_MATCH = 0.6  # a message word counts a plan-text word this near (cosine)
TRAIN_STEPS = 250
TRAIN_RATE = 0.08
TRAIN_L2 = 3e-4
NGRAM_BUCKETS = 8_192  # hashed words and word pairs
ALIGN_WEIGHT = 5.0  # the scale of the alignment features (the same L2 weight on every feature)
ALIGN_FLOOR = 0.35  # a cosine under this counts 0 in a coverage (most pairs of words: cheaper, and noise)
CACHE_MODELS = 8
SHORTLIST = 24  # plans scored in full; a larger library is cut to the plans nearest in meaning first
MAX_CHARS = 2_000  # of a message: the words that decide (a pasted log adds noise, not meaning)
CACHE_PLANS = 1_024  # PlanVectors kept by content hash (vectors stored as 16-bit floats)
MEMO_FLOATS = 4_000_000  # per index: the words' gains kept (16 MB)

STOP_WORDS = frozenset("""a an the to of in on for and or but is are was were be been being it its this that these
those i me my mine we our ours us you your yours he she they them their with at by from as into onto about please
pls can could would will should shall may might must do does did done doing have has had just so some any all not
no yes ok okay hey hi hello then there here what which who whom how why when where get got gets make makes made
let lets i'm it's i'd i'll don't can't need needs want wants like one new up out over off own same too very also
again still now thanks thank than more most much many each every other another such only really something
anything""".split())


def unavailable() -> str:
    """Why matching by meaning is off ("" when it is on); loads the model on first call."""
    return _model()[1]


def encoder() -> Encoder | None:
    return _model()[0]


_SAID: list[bool] = []


def say_once() -> bool:
    """True the first time it is asked in this process: the one log line that meaning is off."""
    if _SAID:
        return False
    _SAID.append(True)
    return True


_LOCK = threading.Lock()
_LOADED: list[tuple[Encoder | None, str]] = []


def _model() -> tuple[Encoder | None, str]:
    if _LOADED:
        return _LOADED[0]
    with _LOCK:
        if not _LOADED:
            _LOADED.append(_load())
    return _LOADED[0]


def _load() -> tuple[Encoder | None, str]:
    try:
        import os

        import numpy as np
        import wordllama
        from wordllama import WordLlama
    except ImportError as exc:
        return None, (f"matching by words only: {exc.name or 'wordllama'} is not installed "
                      f"(pip install wordllama to match requests by meaning)")
    try:  # the wheel ships the table and the tokenizer; the package folder is the cache, so nothing downloads
        folder = os.path.dirname(wordllama.__file__)
        model = WordLlama.load(config="l2_supercat", dim=256, cache_dir=folder, disable_download=True)
        return Encoder(model.tokenizer, np.asarray(model.embedding, dtype=np.float32)), ""
    except Exception as exc:  # a broken install: words still work
        return None, f"matching by words only: wordllama could not load its model ({type(exc).__name__}: {exc})"


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


@dataclass(frozen=True)
class PlanVectors:
    """What one plan's texts give the matcher."""

    words: Any  # distinct content-word ids of the name, trigger phrases and examples
    texts: tuple[str, ...]  # the name and examples, in this order
    sentences: Any  # their vectors (rows)
    not_examples: tuple[str, ...]
    not_sentences: Any  # their vectors


_VECTORS: dict[str, PlanVectors] = {}


def plan_texts(plan: Any) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(texts scored as sentences, phrases that add words only, not-examples) of a plan or a plan head."""
    return ((plan.name, *getattr(plan, "examples", ())), (*plan.triggers, *plan.strong_triggers),
            tuple(getattr(plan, "not_examples", ())))


def vectors(enc: Encoder, plan: Any) -> PlanVectors:
    texts, phrases, nots = plan_texts(plan)
    key = hashlib.sha256("\x00".join((*texts, "\x01", *phrases, "\x01", *nots)).encode()).hexdigest()
    found = _VECTORS.get(key)
    if found is not None:
        return found
    np = enc.np
    ids = enc.many_ids(texts + phrases + nots)
    text_ids, not_ids = ids[:len(texts)], ids[len(texts) + len(phrases):]
    words = np.asarray(sorted({i for row in ids[:len(texts) + len(phrases)] for i in row if enc.content[i]}),
                       dtype=np.int64)
    pv = PlanVectors(words=words, texts=texts, sentences=enc.sentences(text_ids), not_examples=nots,
                     not_sentences=enc.sentences(not_ids))
    if len(_VECTORS) >= CACHE_PLANS:
        _VECTORS.pop(next(iter(_VECTORS)))
    _VECTORS[key] = pv
    return pv


class Scores(NamedTuple):
    """One plan's meaning score for a message, and why: with a model, its log-odds against "no plan"; by
    nearness, ``words`` plus ``sentence``."""

    plan_id: str
    total: float
    example: str  # the plan's text nearest the message
    cosine: float  # ... and its cosine
    words: float = 0.0
    sentence: float = 0.0


@dataclass(frozen=True)
class Verdict:
    """The plans ranked for one message, and the not-example nearest it; ``model``: scored by a ``Model``."""

    ranked: tuple[Scores, ...]
    not_example: str = ""
    not_cosine: float = -1.0
    model: bool = False
    taught: frozenset = frozenset()  # plans with at least TAUGHT examples: the model knows what asks for them

    def winner(self, domains_of: Any, domain: str | None, named: Iterable[str] = (), usable: Any = None,
               constants: tuple[float, ...] | None = None) -> tuple[Scores | None, str]:
        """The plan the message starts (None and why not).  ``domains_of(plan_id)``: the plan's domains;
        ``named``: plans whose trigger phrases are in the message without reaching their threshold;
        ``usable(plan_id)``: False for a plan found broken since the index was built (passed over).  With the
        domain unknown (None), a plan is returned only when no domain could undo the choice.  ``constants``:
        (THRESHOLD, BONUS, LIKENESS) for a model, (NEAR_THRESHOLD, NEAR_DOMAIN_THRESHOLD, NEAR_MARGIN) by
        nearness; the module's by default."""
        ranked = self.ranked if usable is None else tuple(s for s in self.ranked if usable(s.plan_id))
        if not ranked:
            return None, "no plan is near it"
        named = frozenset(named)
        if self.model:
            threshold, bonus, likeness = constants or (THRESHOLD, BONUS, LIKENESS)
            scored = sorted(((s.total + (bonus if domain and domain in domains_of(s.plan_id) else 0.0)
                              + (bonus if s.plan_id in named else 0.0), s) for s in ranked),
                            key=lambda x: (-x[0], x[1].plan_id))
            score, best = scored[0]
            if score < threshold:
                return None, f"best score {score:.2f} is below {threshold:.2f}"
            if best.cosine < likeness:
                return None, (f"'{best.plan_id}' scores {score:.2f}, but its nearest text is only {best.cosine:.2f} "
                              f"alike (at least {likeness:.2f})")
            if domain is None:  # the domain is not known yet: another plan's domain must not be able to win
                rival = next((s for sc, s in scored[1:] if sc + bonus >= score
                              and not set(domains_of(s.plan_id)) <= set(domains_of(best.plan_id))), None)
                if rival is not None:
                    return None, f"the domain could still choose '{rival.plan_id}'"
            return best._replace(total=score), ""
        threshold, domain_threshold, margin = constants or (NEAR_THRESHOLD, NEAR_DOMAIN_THRESHOLD, NEAR_MARGIN)
        best = ranked[0]
        agrees = bool(domain) and domain in domains_of(best.plan_id)
        need = domain_threshold if agrees else threshold
        if best.total < need:
            return None, f"best score {best.total:.2f} is below {need:.2f}" + (" (domain agrees)" if agrees else "")
        if len(ranked) > 1 and best.total - ranked[1].total < margin:
            return None, f"'{ranked[1].plan_id}' is as near ({ranked[1].total:.2f})"
        if self.not_cosine >= best.cosine:
            return None, f"it is nearer the not-example '{self.not_example}' ({self.not_cosine:.2f})"
        if domain is None and any(pid != best.plan_id for pid in named):
            return None, "a plan it names by a phrase could still win by its domain"
        return best, ""

    def scores_of(self, plan_id: str) -> Scores | None:
        return next((s for s in self.ranked if s.plan_id == plan_id), None)

    def mention(self, plan_id: str, strong: bool = False, domain_agrees: bool = False) -> bool:
        """The message says nearly what a not-example says (``MENTION_COSINE``), and is nearer it than any text
        of the plan; or the model, taught by the plan's examples, finds it far from the plan (log-odds under
        ``VETO``): a mention of the plan's topic or its words in another sense, whatever phrases it shares.
        ``strong``: the match is by a strong phrase, which only the model undoes, under ``STRONG_VETO``.
        ``domain_agrees``: the belief-state domain is one of the plan's, evidence worth ``BONUS`` here as in
        ``winner`` (both limits are that much lower)."""
        s = self.scores_of(plan_id)
        total = None if s is None else s.total + (BONUS if domain_agrees else 0.0)
        if strong:  # a phrase that starts the plan alone: only the model, far surer, undoes it
            return s is not None and self.model and plan_id in self.taught and total < STRONG_VETO
        return s is not None and (self.not_cosine >= max(MENTION_COSINE, s.cosine)
                                   or self.model and plan_id in self.taught and total < VETO)

    def overruled(self, plan_id: str) -> bool:
        """The model, taught by this plan's examples and another's, scores the other plan ``OVERRULE`` or more
        above it: the message asks for the other plan's work, whatever phrases of this one it uses ("rebase my
        feature branch onto main" asks for a merge, not a new branch)."""
        if not self.model or plan_id not in self.taught:
            return False
        s = self.scores_of(plan_id)
        best = next((r for r in self.ranked if r.plan_id != plan_id and r.plan_id in self.taught), None)
        return s is not None and best is not None and best.total - s.total >= OVERRULE

    def may_win(self, named: bool = True) -> bool:
        """Whether some domain and org filter could let the best plan start (False: it starts nothing);
        ``named``: whether a trigger phrase of some plan is in the message (another bonus it may get)."""
        if not self.ranked:
            return False
        if self.model:
            return self.ranked[0].total + (1 + named) * BONUS >= THRESHOLD
        return self.ranked[0].total >= min(NEAR_THRESHOLD, NEAR_DOMAIN_THRESHOLD) and \
            self.not_cosine < self.ranked[0].cosine


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
        return self._by_class(_f1(np, p, r))

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


class Model:
    """Which plan a message asks for, learned from the plans' texts: one class per plan and one for "no plan"
    (the plans' not-examples and ``not_requests.MESSAGES``).  A message's features: its sentence vector and
    its words' largest coordinates (max-pooled), its words (per plan-text word: the cosine of each message word
    at least ``WORD_MATCH`` near it, summed), its hashed words and word pairs (``ngrams``), how closely it is
    worded like each class's nearest texts (``Aligner``) and its ``CUES``; the classes' scores are linear in
    them.  A message word's part of every class's score is computed once and kept (words recur from message to
    message)."""

    def __init__(self, enc: Encoder, classes: Sequence[Sequence[str]], nots: Sequence[str],
                 weights: tuple[Any, Any] | None = None) -> None:
        """``weights``: the two weight tables a model of the same texts learned before (``stored``); when their
        shapes do not fit these texts, the model is trained again."""
        np = enc.np
        self.enc = enc
        rows = [(text.lower(), c) for c, texts in enumerate(classes) for text in texts]
        rows += [(text.lower(), len(classes)) for text in nots]
        id_rows = [enc.ids(text) for text, _ in rows]
        word_rows = [enc.words(ids) for ids in id_rows]
        y = np.asarray([c for _, c in rows], dtype=np.int64)
        n_classes = len(classes) + 1
        self.aligner = Aligner(enc, word_rows, [text for text, _ in rows], y.tolist(), n_classes)
        dim = enc.unit.shape[1]
        self.vocab = self.aligner.vectors
        size = len(self.vocab)
        width = 2 * dim + len(CUES) + n_classes  # sentence, max-pooled words, cues, alignment; then 1
        shapes = ((width + 1, n_classes), (size + NGRAM_BUCKETS, n_classes))
        self.kept = weights is not None and tuple(a.shape for a in weights) == shapes and \
            all(a.dtype == np.float32 for a in weights)
        w, v = weights if self.kept else self._learn(rows, id_rows, word_rows, y, n_classes, width)
        self.weights = (w, v)
        self.sentence, self.pooled = w[:dim], w[dim:2 * dim]
        self.cues, self.align, self.bias = w[2 * dim:2 * dim + len(CUES)], w[width - n_classes:width], w[-1]
        self.words, self.grams = v[:size], v[size:]
        self._memo: dict[int, Any] = {}

    def _learn(self, rows: list[tuple[str, int]], id_rows: list[list[int]], word_rows: list[Any], y: Any,
               n_classes: int, width: int) -> tuple[Any, Any]:
        """The training rows' features, and the weights learned from them."""
        np, enc = self.enc.np, self.enc
        vocab, dim, size = self.aligner.words, enc.unit.shape[1], len(self.vocab)
        dense = np.zeros((len(rows), width + 1), dtype=np.float32)
        cos = self.vocab @ self.vocab.T  # the training words' cosines, once (one BLAS product)
        dense[:, width - n_classes:width] = self.aligner.training(cos)
        dense[:, -1] = 1.0
        near_all = np.where(cos >= WORD_MATCH, cos, 0.0).astype(np.float32)
        del cos
        at_vocab = {w: i for i, w in enumerate(vocab)}
        at, where, value = [], [], []  # the words and n-grams parts, mostly zeros: kept as (row, column, value)
        for r, ((text, _), ids, words) in enumerate(zip(rows, id_rows, word_rows)):
            dense[r, :2 * dim] = self._vectors(ids, words)
            dense[r, 2 * dim:2 * dim + len(CUES)] = cues(text)
            grams = np.asarray(ngrams(text), dtype=np.int64) + size
            cols, vals = grams, np.ones(len(grams), dtype=np.float32)
            if len(words):
                near = near_all[[at_vocab[w] for w in words.tolist()]].sum(axis=0)
                nz = np.flatnonzero(near)
                cols, vals = np.concatenate([nz, grams]), np.concatenate([near[nz], vals])
            at.append(np.full(len(cols), r, dtype=np.int64))
            where.append(cols)
            value.append(vals)
        cat = (lambda parts, kind: np.concatenate(parts) if parts else np.zeros(0, dtype=kind))
        return _train(np, dense, (cat(at, np.int64), cat(where, np.int64), cat(value, np.float32),
                                  size + NGRAM_BUCKETS), y, n_classes)

    def _vectors(self, ids: list[int], words: Any) -> Any:
        """The sentence vector and the max-pooled vector of the content words, side by side."""
        np, enc = self.enc.np, self.enc
        pooled = enc.unit[words].max(axis=0) if len(words) else np.zeros(enc.unit.shape[1], dtype=np.float32)
        return np.concatenate([enc.sentence(ids), pooled])

    def _near(self, words: Any) -> Any:
        np = self.enc.np
        near = np.einsum("wd,vd->wv", self.enc.unit[words], self.vocab)
        return np.where(near >= WORD_MATCH, near, 0.0).astype(np.float32)

    def scores(self, text: str, ids: list[int], words: Any) -> Any:
        """Every class's score for a request text (the last: "no plan")."""
        np, memo = self.enc.np, self._memo
        dim = len(self.sentence)
        both = self._vectors(ids, words)
        z = (self.bias + both[:dim] @ self.sentence + both[dim:] @ self.pooled
             + np.asarray(cues(text), dtype=np.float32) @ self.cues + self.aligner.features(words) @ self.align
             + self.grams[ngrams(text)].sum(axis=0))
        got = {w: memo.get(w) for w in words.tolist()}  # read once: another thread may clear the memo meanwhile
        new = [w for w, row in got.items() if row is None]
        if new:
            if len(memo) + len(new) > 100_000:
                memo.clear()
            for w, row in zip(new, self._near(np.asarray(new, dtype=np.int64)) @ self.words):
                memo[w] = got[w] = row
        return z + sum(got.values()) if got else z


def cues(text: str) -> list[float]:
    """Which ``CUES`` the first ``MAX_CHARS`` of a text show (1.0) or not (0.0), letter case aside."""
    text = text[:MAX_CHARS].lower()
    return [1.0 if pattern.search(text) else 0.0 for _, pattern in CUES]


def _train(np: Any, dense: Any, words: tuple, y: Any, classes: int) -> tuple[Any, Any]:
    """Multinomial logistic regression by ``TRAIN_STEPS`` steps of Adam from zero (the same weights for the
    same texts), L2 ``TRAIN_L2``.  ``dense``: rows of features; ``words``: (row, column, value, columns) of the
    sparse part, rows in order.  Returns the weights of the dense part and of the sparse part."""
    rows, cols, vals, size = words
    n = len(dense)
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]]) if len(rows) else np.zeros(0, dtype=np.int64)
    order = np.argsort(cols, kind="stable")
    by_col = cols[order]
    rows_by_col, vals_by_col, vals_by_row = rows[order], vals[order][:, None], vals[:, None]  # laid out once
    col_starts = np.flatnonzero(np.r_[True, by_col[1:] != by_col[:-1]]) if len(cols) else starts
    target = np.eye(classes, dtype=np.float32)[y]
    dense_t = dense.T  # a view: BLAS reads it transposed faster than a copy laid out as rows
    weights = [np.zeros((dense.shape[1], classes), dtype=np.float32), np.zeros((size, classes), dtype=np.float32)]
    moments = [(np.zeros_like(w), np.zeros_like(w)) for w in weights]
    for step in range(1, TRAIN_STEPS + 1):
        wd, wb = weights
        z = dense @ wd  # BLAS: measured 3-8x einsum here, even with the machine busy
        if len(rows):
            z[rows[starts]] += np.add.reduceat(vals_by_row * wb[cols], starts, axis=0)
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        err = (p - target) / n
        gb = np.zeros_like(wb)
        if len(rows):
            gb[by_col[col_starts]] = np.add.reduceat(vals_by_col * err[rows_by_col], col_starts, axis=0)
        for w, g, (m, v) in zip(weights, (dense_t @ err + TRAIN_L2 * wd,
                                                      gb + TRAIN_L2 * wb), moments):
            m *= 0.9
            m += 0.1 * g
            v *= 0.999
            v += 0.001 * g * g
            w -= TRAIN_RATE * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
    return weights[0], weights[1]


_MODELS: dict[str, Model] = {}


_LEAVE_OUT: contextvars.ContextVar[frozenset] = contextvars.ContextVar("graph_engine_leave_out", default=frozenset())


@contextlib.contextmanager
def leaving_out(texts: Iterable[str]) -> Iterator[None]:
    """Models built meanwhile (in this context) learn nothing from these of ``not_requests.MESSAGES``, letter
    case aside: ``graph-engine triggers`` scores a labelled message that is one of them with a model that has
    not seen it."""
    token = _LEAVE_OUT.set(frozenset(t.lower() for t in texts))
    try:
        yield
    finally:
        _LEAVE_OUT.reset(token)


def model_of(enc: Encoder, plans: Sequence[PlanVectors]) -> Model:
    """The model of a set of plans' texts, kept by their hash: in this process, and on disk (``store``), so a
    restart loads what an earlier process learned instead of training again."""
    from .not_requests import MESSAGES
    leave = _LEAVE_OUT.get()
    nots = [t for pv in plans for t in pv.not_examples] + [m for m in MESSAGES if m.lower() not in leave]
    key = hashlib.sha256("\x00".join(["\x01".join(pv.texts) for pv in plans] + ["\x02", *nots]).encode()).hexdigest()
    found = _MODELS.get(key)
    if found is None:
        stored = _STORE.read(enc, key)
        found = Model(enc, [pv.texts for pv in plans], nots, stored)
        if not found.kept:
            _STORE.write(enc, key, found.weights)
        with _LOCK:
            if len(_MODELS) >= CACHE_MODELS:
                _MODELS.pop(next(iter(_MODELS)))
            _MODELS[key] = found
    return found


STORE_ENV = "GRAPH_ENGINE_MODEL_STORE"


# what only decides on a message or keeps the weights, never trains them: a change to these keeps the stored weights
DECIDES = frozenset({"THRESHOLD", "BONUS", "LIKENESS", "VETO", "STRONG_VETO", "OVERRULE", "MENTION_COSINE",
                     "NEAR_THRESHOLD", "NEAR_DOMAIN_THRESHOLD", "NEAR_MARGIN", "Verdict", "Index", "index_of", "Store",
                     "keep_models_in", "store_problem"})


def training_code(source: str) -> str:
    """What of this module's code the trained weights depend on: its syntax tree (so comments and layout do not
    count) without the top-level definitions named in ``DECIDES``."""
    import ast

    def decides(node: ast.stmt) -> bool:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            return node.name in DECIDES
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        return bool(targets) and all(isinstance(t, ast.Name) and t.id in DECIDES for t in targets)

    tree = ast.parse(source)
    tree.body = [node for node in tree.body if not decides(node)]
    return ast.dump(tree)


class Store:
    """Trained weights kept on disk, one ``.npz`` file per set of texts, named by a hash of the texts, of the
    code that trains them (``training_code``) and of the encoder's table (a change to any of them trains again).  The folder:
    ``GRAPH_ENGINE_MODEL_STORE`` when set ("off": none), else the one the runtime names (``<Agent-Zero
    root>/usr/graph_engine/models``), else ``$XDG_CACHE_HOME/graph-engine/models`` (``~/.cache``).  A file that
    cannot be read is ignored (the model is trained and the file written again); a folder that cannot be written
    is said once (``take_problem``), and each start then trains the model again."""

    def __init__(self) -> None:
        self.folder: str | None = None  # set by the runtime
        self._stamp: str | None = None
        self._problem: list[str] = []
        self._said = False

    def where(self) -> str | None:
        import os
        env = os.environ.get(STORE_ENV)
        if env is not None:
            return None if env.strip().lower() in ("", "off", "none", "0") else env
        if self.folder:
            return self.folder
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "graph-engine", "models")

    def _path(self, enc: Encoder, key: str) -> str | None:
        import os
        folder = self.where()
        if folder is None:
            return None
        if self._stamp is None:
            with open(__file__, encoding="utf-8") as fh:
                code = training_code(fh.read()).encode()
            table = enc.unit[:1024].tobytes() + repr(enc.unit.shape).encode()  # (its first rows and its shape)
            self._stamp = hashlib.sha256(code + table).hexdigest()
        name = hashlib.sha256(f"{self._stamp}:{key}".encode()).hexdigest()[:40]
        return os.path.join(folder, f"model-{name}.npz")

    def read(self, enc: Encoder, key: str) -> tuple[Any, Any] | None:
        try:
            path = self._path(enc, key)
            if path is None:
                return None
            with enc.np.load(path, allow_pickle=False) as data:
                return data["dense"], data["sparse"]
        except Exception:  # noqa: BLE001 - missing, partly written or not ours: trained again and rewritten
            return None

    def write(self, enc: Encoder, key: str, weights: tuple[Any, Any]) -> None:
        import os
        import tempfile
        path = None
        try:
            path = self._path(enc, key)
            if path is None:
                return
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".model-", suffix=".npz")
            try:
                with os.fdopen(fd, "wb") as fh:
                    enc.np.savez(fh, dense=weights[0], sparse=weights[1])
                os.replace(tmp, path)  # whole or not at all, for a reader in another process
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except Exception as exc:  # noqa: BLE001 - the model works; only the next start pays the training again
            if not self._said:
                self._said = True
                self._problem.append(
                    f"cannot keep the trained matching model in {os.path.dirname(path) if path else 'its folder'} "
                    f"({type(exc).__name__}: {exc}); each start trains it again, as long as this first training "
                    f"took. Make the folder writable, or set {STORE_ENV} to a writable folder ('off' to keep nothing)")

    def take_problem(self) -> list[str]:
        """The line to log about the folder, once (empty when there is none)."""
        found, self._problem = self._problem, []
        return found


_STORE = Store()


def keep_models_in(folder: str) -> None:
    """Where the runtime keeps trained models (``Store``; ``GRAPH_ENGINE_MODEL_STORE`` still wins)."""
    _STORE.folder = folder


def store_problem() -> list[str]:
    return _STORE.take_problem()


class Index:
    """Every plan's vectors, laid out for one pass of matrix products per message; built when the plans change.

    ``vocab``: the plans' distinct words (rows: their vectors); ``pos``/``rarity``: per plan, where each of its
    words is in ``vocab`` and how rare it is among the plans (padding: rarity 0); ``sentences``: per plan, its
    texts' vectors (padding rows 0, masked by ``pad``)."""

    def __init__(self, enc: Encoder, plans: Iterable[Any]) -> None:
        np = enc.np
        self.enc = enc
        self._last: tuple | None = None
        self._memo: dict[int, Any] = {}  # word id -> its gains per plan
        self._wide_tables: dict[int, Any] = {}
        self.ids: list[str] = []
        self.plans: list[PlanVectors] = []
        for plan in plans:
            self.ids.append(plan.id)
            self.plans.append(vectors(enc, plan))
        n, dim = len(self.plans), enc.unit.shape[1]
        counts: dict[int, int] = {}
        for pv in self.plans:
            for w in pv.words.tolist():
                counts[w] = counts.get(w, 0) + 1
        vocab = sorted(counts)
        where = {w: i for i, w in enumerate(vocab)}
        self.vocab = enc.unit[np.asarray(vocab, dtype=np.int64)] if vocab else np.zeros((1, dim), dtype=np.float32)
        width = max((len(pv.words) for pv in self.plans), default=0) or 1
        self.pos = np.zeros((n, width), dtype=np.int64)
        self.rarity = np.zeros((n, width), dtype=np.float32)
        rows = max((len(pv.texts) for pv in self.plans), default=1)
        self.sentences = np.zeros((n, rows, dim), dtype=np.float16)
        self.pad = np.full((n, rows), -4.0, dtype=np.float32)  # added to a padding row's cosine: never the best
        self.single = np.zeros(n, dtype=bool)  # a plan with one text: its best cosine counts twice
        for i, pv in enumerate(self.plans):
            ws = pv.words.tolist()
            self.pos[i, :len(ws)] = [where[w] for w in ws]
            self.rarity[i, :len(ws)] = [math.log(1 + n / counts[w]) for w in ws]
            self.sentences[i, :len(pv.texts)] = pv.sentences
            self.pad[i, :len(pv.texts)] = 0.0
            self.single[i] = len(pv.texts) == 1
        self.centroids = np.stack([_unit(np, pv.sentences.astype(np.float32).mean(axis=0))
                                   for pv in self.plans]) if n else np.zeros((0, dim), dtype=np.float32)
        self._memo_cap = max(1_000, MEMO_FLOATS // max(n, 1))
        width = max((len(pv.not_examples) for pv in self.plans), default=0)
        self.nots = np.zeros((n, width, dim), dtype=np.float16)
        self.not_pad = np.full((n, width), -4.0, dtype=np.float32)
        for i, pv in enumerate(self.plans):
            self.nots[i, :len(pv.not_examples)] = pv.not_sentences
            self.not_pad[i, :len(pv.not_examples)] = 0.0
        self.model = model_of(enc, self.plans) if 0 < n <= MODEL_PLANS else None
        self.taught = frozenset(pid for pid, pv in zip(self.ids, self.plans) if len(pv.texts) > TAUGHT)

    def __len__(self) -> int:
        return len(self.ids)

    def _gains(self, words: list[int]) -> Any:
        """Per message word (rows) and plan (columns): the word's gain in the plan, its nearest plan word's
        cosine times that word's rarity when the cosine reaches WORD_CUT, else 0.  A word's row is computed
        once and kept (words recur from message to message); the rows of a busy library are bounded."""
        np, memo = self.enc.np, self._memo
        got = {w: memo.get(w) for w in words}  # read once: another thread may clear the memo meanwhile
        new = [w for w, row in got.items() if row is None]
        if new:
            # einsum, not a BLAS product: a few thousand multiplications gain nothing from threads, and on a
            # busy machine waking them costs milliseconds
            near = np.einsum("wd,vd->wv", self.enc.unit[new], self.vocab)[:, self.pos]  # word x plan x plan word
            arg = near.argmax(axis=2)
            best = np.take_along_axis(near, arg[..., None], axis=2)[..., 0]
            rarity = np.take_along_axis(np.broadcast_to(self.rarity, near.shape), arg[..., None], axis=2)[..., 0]
            gain = np.where(best >= WORD_CUT, best * rarity, 0.0).astype(np.float32)
            if len(memo) + len(new) > self._memo_cap:
                memo.clear()
            for w, row in zip(new, gain):
                memo[w] = got[w] = row
        return np.stack([got[w] for w in words])

    def verdict(self, text: str, allowed_ids: Sequence[str] | None = None, full: bool = False,
                named: bool = True) -> Verdict:
        """The plans ranked by meaning for a message's request text (``allowed_ids``: the org filter); without
        ``full``, no plan at all when none could reach a threshold (``named``: False when no plan's trigger
        phrase is in the message, so no plan can get the phrases' bonus).  The last answer is kept: both hooks
        of a pass ask about the same message (and a full answer, or one that assumed a phrase, serves a question
        that asks for less)."""
        key = (text, None if allowed_ids is None else tuple(allowed_ids), full, named)
        last = self._last
        if last is not None and last[0][:2] == key[:2] and (last[0][2] or not full) and (last[0][3] or not named):
            return last[1]
        found = (self._model_verdict if self.model is not None else self._verdict)(text, allowed_ids, full, named)
        self._last = (key, found)
        return found

    def _wide(self, table: Any, chosen: Any) -> Any:
        """Rows of a 16-bit table as 32-bit floats; a library small enough to score whole (at most SHORTLIST
        plans, or MODEL_PLANS with a model) keeps them converted."""
        if len(self.ids) > (MODEL_PLANS if self.model is not None else SHORTLIST):
            return table[chosen].astype(self.enc.np.float32)
        wide = self._wide_tables.get(id(table))
        if wide is None:
            wide = self._wide_tables[id(table)] = table.astype(self.enc.np.float32)
        return wide[chosen]

    def _verdict(self, text: str, allowed_ids: Sequence[str] | None, full: bool = False,
                 named: bool = True) -> Verdict:
        enc, np = self.enc, self.enc.np
        ids = enc.ids(text)
        words = enc.words(ids)
        n = len(self.ids)
        if not len(words) or not n:
            return Verdict(())
        sent = enc.sentence(ids)
        chosen: Any = slice(None)  # every plan (a view, no copy)
        if n > SHORTLIST:  # the plans nearest the message; of those as near as the last, the first in the file
            near = np.einsum("pd,d->p", self.centroids, sent)
            last = np.partition(near, n - SHORTLIST)[n - SHORTLIST]
            above = np.flatnonzero(near > last)
            chosen = np.concatenate([above, np.flatnonzero(near == last)[:SHORTLIST - len(above)]])
        if allowed_ids is not None:
            allowed = set(allowed_ids)
            chosen = np.asarray([i for i in range(n)[chosen] if self.ids[i] in allowed], dtype=np.int64) \
                if isinstance(chosen, slice) else np.asarray([i for i in chosen.tolist() if self.ids[i] in allowed],
                                                             dtype=np.int64)
            if not len(chosen):
                return Verdict(())
        word_part = self._gains(words.tolist())[:, chosen].sum(axis=0) / (max(len(words), MIN_WORDS) + 1)
        if not full and float(word_part.max()) + SENTENCE_WEIGHT < min(NEAR_THRESHOLD, NEAR_DOMAIN_THRESHOLD):
            return Verdict(())  # even a sentence equal to an example could not make it start a plan
        # einsum, not a BLAS product: a few thousand multiplications gain nothing from threads, and on a busy
        # machine waking them costs milliseconds
        cos = self._wide(self.sentences, chosen) @ sent + self.pad[chosen]  # plan x text (a small product)
        nearest = cos.argmax(axis=1)
        rows = list(range(n))[chosen] if isinstance(chosen, slice) else chosen.tolist()
        at = np.arange(len(rows))
        first = cos[at, nearest]
        cos[at, nearest] = -4.0
        second = np.where(self.single[chosen], first, cos.max(axis=1))
        sentence_part = SENTENCE_WEIGHT * (first + second) / 2
        ids, plans = self.ids, self.plans
        found = sorted((Scores(ids[i], w + sp, plans[i].texts[k], c, w, sp) for i, w, sp, k, c in zip(
            rows, word_part.tolist(), sentence_part.tolist(), nearest.tolist(), first.tolist())),
            key=lambda s: (-s.total, s.plan_id))
        return self._with_nots(found, chosen, rows, sent, False)

    def _with_nots(self, found: list[Scores], chosen: Any, rows: list[int], sent: Any, model: bool) -> Verdict:
        """The verdict, with the not-example of the plans scored nearest the message."""
        taught = self.taught if model else frozenset()
        if not self.nots.shape[1]:
            return Verdict(tuple(found), model=model, taught=taught)
        nots = self._wide(self.nots, chosen) @ sent + self.not_pad[chosen]
        j = int(nots.argmax())
        p, t = divmod(j, nots.shape[1])
        if nots[p, t] < -1.5:  # the plans scored have no not-examples
            return Verdict(tuple(found), model=model, taught=taught)
        return Verdict(tuple(found), self.plans[rows[p]].not_examples[t], float(nots[p, t]), model=model,
                       taught=taught)

    def _model_verdict(self, text: str, allowed_ids: Sequence[str] | None, full: bool = False,
                       named: bool = True) -> Verdict:
        enc, np = self.enc, self.enc.np
        ids = enc.ids(text)
        words = enc.words(ids)
        n = len(self.ids)
        if not len(words):
            return Verdict((), model=True)
        allowed = None if allowed_ids is None else set(allowed_ids)
        rows = [i for i, pid in enumerate(self.ids) if allowed is None or pid in allowed]
        if not rows:
            return Verdict((), model=True)
        z = self.model.scores(text, ids, words)
        # against "no plan", and against the plans the org filter leaves out: a message that asks for one of
        # those starts nothing, not the next plan it resembles
        if len(rows) < n:
            kept = set(rows)
            odds = z[rows] - max(float(z[n]), *(float(z[i]) for i in range(n) if i not in kept))
        else:
            odds = z[rows] - z[n]
        if not full and float(odds.max()) + (1 + named) * BONUS < THRESHOLD:
            return Verdict((), model=True)  # no domain or phrase could make it start a plan
        sent = enc.sentence(ids)
        chosen = np.asarray(rows, dtype=np.int64)
        cos = self._wide(self.sentences, chosen) @ sent + self.pad[chosen]
        nearest = cos.argmax(axis=1)
        first = cos[np.arange(len(rows)), nearest]
        ids_, plans = self.ids, self.plans
        found = sorted((Scores(ids_[i], o, plans[i].texts[k], c) for i, o, k, c in zip(
            rows, odds.tolist(), nearest.tolist(), first.tolist())), key=lambda s: (-s.total, s.plan_id))
        return self._with_nots(found, chosen, rows, sent, True)


def _unit(np: Any, v: Any) -> Any:
    n = float(np.linalg.norm(v))
    return v / n if n else v


_INDEXES: dict[tuple, tuple[list, Index]] = {}


def index_of(plans: Sequence[Any]) -> Index | None:
    """The index of a set of plans (kept for the last few sets seen); None when the model is unavailable."""
    enc = encoder()
    if enc is None:
        return None
    key = (*map(id, plans), _LEAVE_OUT.get())  # plans are immutable: the same objects have the same texts
    found = _INDEXES.get(key)
    if found is None or any(a is not b for a, b in zip(found[0], plans)):
        if len(_INDEXES) >= 8:
            _INDEXES.pop(next(iter(_INDEXES)))
        found = _INDEXES[key] = (list(plans), Index(enc, plans))  # holding the plans keeps their ids unique
    return found[1]
