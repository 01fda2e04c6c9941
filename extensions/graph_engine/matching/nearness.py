"""Any plan, matched by its own text: how near a message is to what a plan says it does.

A plan says what it does in its name, description, trigger phrases and the names and actions of its steps (its
"own text"), and, when its author gave them, in ``examples`` (requests that must start it) and
``not_examples`` (messages near its topic that must start nothing).  Nothing here is trained on the plans:
``Near`` embeds their texts (``vectors``) and scores a message against each plan with one small network whose
weights ship with the pack (``shipped``), learned from the project's labelled messages for plans of every kind.

Per message and plan the network reads (``PLAN_FEATURES``): the plan's phrases found in the message; the
message's nearest own text (sentence cosine, best and mean of the best three; word coverage, ``Aligner``) and
the cosine with its name; its nearest example the same way and its nearest not-example; how much of the
message's neighbourhood (its ten nearest texts among every plan's examples and the messages that ask for no
work) belongs to the plan; whether the belief-state domain is one of the plan's.  Per message
(``MESSAGE_FEATURES``): how near it is to a message that asks for no work (``not_requests.json``, those marked
``work: false``), how much it reads as asking for work (``gate``: hashed words and word pairs, learned from
those messages and requests of every kind), and ``vectors.cues``.  A plan's score is its logit against "no
plan", on the same scale as the learned model's (``decide``).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from . import vectors
from .vectors import Aligner, Encoder, cues, ngrams
from .words import TriggerIndex, trigger_hits

PLAN_FEATURES = ("strong", "weak", "has_examples", "own_cos", "own_cos3", "own_words", "name_cos", "example_cos",
                 "example_cos3", "example_words", "not_example_cos", "neighbours", "domain")
UNTAUGHT = ("own_cos", "own_cos3", "own_words", "name_cos")  # again, times "no examples": their own weights then
MESSAGE_FEATURES = ("bias", "no_work_cos", "no_work_cos3", "no_work_words", "gate", *(f"cue_{n}" for n, _ in
                                                                                        vectors.CUES), "length")
NEIGHBOURS = 10
HIDDEN = 16
SHORTLIST = 24  # plans scored in full; a larger library is cut to the plans nearest the message (and those it names)


def own_texts(plan: Any) -> tuple[str, ...]:
    """The texts a plan says what it does in: its name first, its description's sentences, its trigger phrases,
    and each step's name with its action."""
    texts = [plan.name]
    description = getattr(plan, "description", "") or ""
    texts += [s.strip() for s in description.replace("; ", ". ").split(". ") if s.strip()]
    texts += [*getattr(plan, "strong_triggers", ()), *getattr(plan, "triggers", ())]
    for node in getattr(plan, "nodes", {}).values():
        if node.kind.rests:
            texts.append(f"{node.name}: {node.action}" if node.action else node.name)
    texts += list(getattr(plan, "step_texts", ()))  # a plan not compiled yet (catalogue.Head) lists them
    return tuple(dict.fromkeys(t for t in texts if t))


def _top(np: Any, values: Any, k: int) -> float:
    if not len(values):
        return 0.0
    k = min(k, len(values))
    return float(np.partition(values, -k)[-k:].mean())


class Corpus:
    """Texts grouped by owner (a plan's index, or 0), listed owner by owner: their sentence vectors and an
    ``Aligner`` over their words."""

    def __init__(self, enc: Encoder, groups: Sequence[Sequence[str]]) -> None:
        np = enc.np
        self.enc = enc
        self.texts = [t for group in groups for t in group]
        self.owner = np.asarray([g for g, group in enumerate(groups) for _ in group], dtype=np.int64)
        self.low = [t.lower() for t in self.texts]
        ids = enc.many_ids(self.texts)
        self.sentences = enc.sentences(ids).astype(np.float32) if ids else np.zeros((0, enc.unit.shape[1]),
                                                                                     dtype=np.float32)
        self.groups = len(groups)
        self.sizes = np.bincount(self.owner, minlength=self.groups) if self.groups else np.zeros(0, dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.aligner = Aligner(enc, [enc.words(r) for r in ids], self.texts, self.owner.tolist(), max(1, self.groups))
        self.kept = np.asarray(self.aligner.kept, dtype=np.int64)

    def _left_out(self, values: Any, leave_out: str) -> Any:
        if leave_out:  # a labelled message that is one of these texts is scored as if it were not
            for i, t in enumerate(self.low):
                if t == leave_out:
                    values[i] = -1.0
        return values

    def cosines(self, sent: Any, leave_out: str = "") -> Any:
        """The message's cosine with each text."""
        if not len(self.texts):
            return self.enc.np.zeros(0, dtype=self.enc.np.float32)
        return self._left_out(self.sentences @ sent, leave_out)

    def word_f1(self, words: Any, leave_out: str = "", groups: Any = None) -> Any:
        """The message's word coverage F1 with each text (0 for a text or a message without content words);
        ``groups``: only theirs are computed (the others read 0)."""
        np = self.enc.np
        out = np.zeros(len(self.texts), dtype=np.float32)
        if not len(words) or not len(self.kept):
            return out
        if groups is None:
            out[self.kept] = self.aligner.per_text(words)
        else:
            mine = np.isin(self.owner[self.kept], groups)
            positions = np.flatnonzero(mine)
            out[self.kept[positions]] = self.aligner.per_text_of(words, positions)
        return self._left_out(out, leave_out)

    def best(self, values: Any) -> Any:
        """Per group, its best value (0 for a group without texts)."""
        np = self.enc.np
        out = np.zeros(self.groups, dtype=np.float32)
        some = self.sizes > 0
        if len(values):
            out[some] = np.maximum.reduceat(values, self.starts[some])
        return out

    def nearest(self, values: Any, g: int) -> str:
        """A group's text of the best value ("" for a group without texts)."""
        n, at = int(self.sizes[g]), int(self.starts[g])
        return self.texts[at + int(values[at:at + n].argmax())] if n else ""

    def best3(self, values: Any, g: int) -> float:
        """A group's mean of its best three values (of all it has, when fewer; 0 without any)."""
        n, at = int(self.sizes[g]), int(self.starts[g])
        return _top(self.enc.np, values[at:at + n], 3) if n else 0.0


class Gate:
    """How much a message reads as asking for work, whatever the work: a logistic model of its hashed words and
    word pairs and its cues."""

    def __init__(self, np: Any, grams: Any, cue_weights: Any, bias: float) -> None:
        self.np, self.grams, self.cue_weights, self.bias = np, grams, cue_weights, float(bias)

    def logit(self, text: str) -> float:
        return float(self.bias + self.grams[ngrams(text)].sum()
                     + self.np.asarray(cues(text), dtype=self.np.float32) @ self.cue_weights)


class Net:
    """The scorer: a plan's logit is linear in its features plus a small hidden layer over the plan's and the
    message's features together; "no plan" is linear in the message's."""

    def __init__(self, np: Any, w: Any, u: Any, hidden_w: Any, hidden_b: Any, out: Any) -> None:
        self.np, self.w, self.u, self.hidden_w, self.hidden_b, self.out = np, w, u, hidden_w, hidden_b, out

    def margins(self, plan_rows: Any, message_row: Any) -> Any:
        """Per plan (rows of ``plan_rows``): its logit minus "no plan"'s."""
        np = self.np
        both = np.concatenate([plan_rows, np.broadcast_to(message_row, (len(plan_rows), len(message_row)))], axis=1)
        hidden = np.tanh(both @ self.hidden_w + self.hidden_b)
        return plan_rows @ self.w + hidden @ self.out - float(message_row @ self.u)


def plan_row(f: dict[str, float]) -> list[float]:
    """A plan's features in the network's order: ``PLAN_FEATURES``, then ``UNTAUGHT`` times "no examples"."""
    return [f[k] for k in PLAN_FEATURES] + [f[k] * (1.0 - f["has_examples"]) for k in UNTAUGHT]


class Near:
    """Every plan's texts laid out for scoring messages against them (built once per set of plans, off the pass:
    embedding the shipped library's texts takes tens of milliseconds)."""

    def __init__(self, enc: Encoder, plans: Sequence[Any], no_work: Sequence[str], net: Net, gate: Gate) -> None:
        self.enc, self.net, self.gate = enc, net, gate
        self.ids = [p.id for p in plans]
        self.plans = list(plans)
        self.own = Corpus(enc, [own_texts(p) for p in plans])
        self.examples = Corpus(enc, [tuple(getattr(p, "examples", ())) for p in plans])
        self.nots = Corpus(enc, [tuple(getattr(p, "not_examples", ())) for p in plans])
        self.no_work = Corpus(enc, [tuple(no_work)])
        self.has_examples = [bool(getattr(p, "examples", ())) for p in plans]
        self.phrases = TriggerIndex()  # the plans a message names by a phrase are always scored
        for p in plans:
            self.phrases.add(p.id, (*p.triggers, *p.strong_triggers))
        self.at = {pid: i for i, pid in enumerate(self.ids)}
        self.name_rows = [0]
        for p in plans[:-1]:
            self.name_rows.append(self.name_rows[-1] + len(own_texts(p)))

    def __len__(self) -> int:
        return len(self.ids)

    def features(self, text: str, ids: list[int], words: Any, leave_out: str = "",
                 gate: Gate | None = None) -> tuple[list[dict], dict]:
        """The features of the plans scored (each row's ``at``: the plan's index; a library of more than
        SHORTLIST plans is cut to those nearest the message and those it names), with the domain not known (0),
        and the message's; ``leave_out``: a text (lower case) scored as if the plans and the messages that ask
        for no work did not hold it, ``gate``: another gate than the shipped one (the build's held-out gates)."""
        np, enc = self.enc.np, self.enc
        sent = enc.sentence(ids).astype(np.float32)
        own = self.own.cosines(sent)
        own_best = self.own.best(own)
        ex = self.examples.cosines(sent, leave_out)
        ex_best = self.examples.best(ex)
        chosen = self._shortlist(text, np.maximum(own_best, ex_best))
        some = chosen if len(chosen) < len(self.ids) else None  # all: every text's coverage at once
        own_words = self.own.best(self.own.word_f1(words, "", some))
        ex_words = self.examples.best(self.examples.word_f1(words, leave_out, some))
        nots = self.nots.best(self.nots.cosines(sent, leave_out))
        no = self.no_work.cosines(sent, leave_out)
        no_words = self.no_work.word_f1(words, leave_out)
        share = self._neighbours(ex, no)
        named = self.phrases.candidates(text)  # (a plan not among them has no phrase in the message)
        rows = []
        for i in chosen.tolist():
            plan = self.plans[i]
            has, phrased = self.has_examples[i], plan.id in named
            rows.append({
                "at": i, "strong": float(phrased and bool(trigger_hits(plan.strong_triggers, text))),
                "weak": min(len(trigger_hits(plan.triggers, text)), 3) / 3 if phrased else 0.0,
                "has_examples": float(has),
                "own_cos": float(own_best[i]), "own_cos3": self.own.best3(own, i), "own_words": float(own_words[i]),
                "name_cos": float(own[self.name_rows[i]]) if len(own) else 0.0,
                "example_cos": float(ex_best[i]), "example_cos3": self.examples.best3(ex, i),
                "example_words": float(ex_words[i]), "not_example_cos": float(nots[i]),
                "neighbours": float(share[i]), "domain": 0.0,
                "nearest": self.examples.nearest(ex, i) if has and ex_best[i] >= own_best[i] else
                self.own.nearest(own, i)})
        message = {"bias": 1.0, "no_work_cos": float(no.max()) if len(no) else 0.0,
                   "no_work_cos3": _top(np, no, 3), "no_work_words": float(no_words.max()) if len(no) else 0.0,
                   "gate": (gate or self.gate).logit(text), "length": min(len(words), 20) / 20}
        for (name, _), value in zip(vectors.CUES, cues(text)):
            message[f"cue_{name}"] = value
        return rows, message

    def _shortlist(self, text: str, near: Any) -> Any:
        """The plans to score in full, in their order: all of a small library; else the SHORTLIST nearest the
        message and every plan one of its phrases may name."""
        np = self.enc.np
        n = len(self.ids)
        if n <= SHORTLIST:
            return np.arange(n)
        top = np.argpartition(-near, SHORTLIST)[:SHORTLIST]
        named = [self.at[pid] for pid in self.phrases.candidates(text)]
        return np.unique(np.concatenate([top, np.asarray(named, dtype=np.int64)]))

    def _neighbours(self, ex: Any, no: Any) -> Any:
        """Per plan, its share of the message's NEIGHBOURS nearest texts (every plan's examples and the messages
        that ask for no work), each counted by its cosine."""
        np = self.enc.np
        near = np.concatenate([ex, no])
        share = np.zeros(len(self.ids), dtype=np.float32)
        if not len(near):
            return share
        owner = np.concatenate([self.examples.owner, np.full(len(no), -1, dtype=np.int64)])
        top = np.argsort(-near, kind="stable")[:NEIGHBOURS]
        weight = np.clip(near[top], 0.0, None)
        total = float(weight.sum()) or 1.0
        mine = owner[top] >= 0
        share += np.bincount(owner[top][mine], weights=weight[mine], minlength=len(self.ids)).astype(np.float32)
        return share / total

    def margins(self, rows: list[dict], message: dict) -> tuple[Any, Any]:
        """Per plan its margin over "no plan" with the domain unknown, and what the plan's domain adds to it."""
        np = self.enc.np
        m = np.asarray([message[k] for k in MESSAGE_FEATURES], dtype=np.float32)
        base = np.asarray([plan_row(f) for f in rows], dtype=np.float32)
        with_domain = base.copy()
        with_domain[:, PLAN_FEATURES.index("domain")] = 1.0
        plain = self.net.margins(base, m)
        return plain, self.net.margins(with_domain, m) - plain


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, x))))
