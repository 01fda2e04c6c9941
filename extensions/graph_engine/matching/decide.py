"""Which plan, if any, a message starts: its phrases first, then its meaning; and whether it is a close call.

Rules (docs/matching.md says them; tests pin them):

* Only the request text counts (``words.request_text``): a message that asks for no work starts nothing.
* A plan whose trigger phrases reach its threshold (``words.score_plan``) starts, unless meaning undoes the
  match: the message says nearly what one of the library's not-examples says (cosine ``MENTION_COSINE``), or the
  plan's score is far below a start (``veto``; ``strong_veto`` for a strong phrase; a plan scored by ``nearness``
  loses a match by weak phrases alone under ``near_veto``), or a learned plan yields to another learned plan
  scored ``overrule`` higher ("rebase my feature branch onto main" asks for a merge).
* Otherwise the plan with the best meaning score starts when the score reaches ``threshold``.  A learned plan
  (``learned``) scores its log-odds against "no plan", plus ``bonus`` when the belief-state domain is one of its
  domains and ``bonus`` when one of its phrases is in the message, and needs a cosine of ``likeness`` with its
  nearest text; any other plan (``nearness``) scores its margin over "no plan" moved onto the same scale (minus
  ``near_taught`` or ``near_untaught``), the domain counting inside the scorer.
* With the domain not known yet (``None``), a plan starts only when no domain could make another one win.
* The org kernel's filter applies first: a message that asks for a plan it leaves out starts nothing.
* A close call (``Verdict.close``): the best score lies within ``close_below`` under the threshold and
  ``close_above`` over it, or two plans are that close to each other; the host may ask the utility model.

The constants come with the learned weights (``shipped``), calibrated on the labelled set by the build.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, NamedTuple, Sequence

from . import learned, nearness, shipped, vectors
from ..core.message import Match, allowed
from .words import normalise, rank, request_text, score_plan, trigger_hits

MENTION_COSINE = 0.8  # how near a not-example a message must be to undo a match by weak phrases


class Scores(NamedTuple):
    """One plan's meaning score for a message, and why: ``total`` on the learned scale (its threshold is
    ``threshold``), ``gain``: what the plan's domain adds, ``learned``: scored by its learned class."""

    plan_id: str
    total: float
    example: str  # the plan's text nearest the message
    cosine: float  # ... and its cosine
    gain: float = 0.0
    learned: bool = True


@dataclass(frozen=True)
class Verdict:
    """The plans ranked for one message, the not-example nearest it, and the constants that decide."""

    ranked: tuple[Scores, ...]
    constants: dict[str, float]
    not_example: str = ""
    not_cosine: float = -1.0
    own: tuple[tuple[str, float], ...] = ()  # learned plans scored by nearness too (when the library has others)
    work: float | None = None  # how much the message reads as asking for work (the gate's logit; None: not read)
    untaught: tuple[str, ...] = ()  # the plans scored whose authors gave no examples

    def _c(self, name: str) -> float:
        return self.constants[name]

    def adjusted(self, domains_of: Callable[[str], Any], domain: str | None, named: Iterable[str] = (),
                 usable: Callable[[str], bool] | None = None) -> list[tuple[float, Scores]]:
        """Each plan's score with what the domain and a phrase in the message add, best first."""
        named = frozenset(named)
        bonus = self._c("bonus")
        out = [(s.total + (s.gain if domain and domain in domains_of(s.plan_id) else 0.0)
                + (bonus if s.learned and s.plan_id in named else 0.0), s)
               for s in self.ranked if usable is None or usable(s.plan_id)]
        return sorted(out, key=lambda x: (-x[0], x[1].plan_id))

    def winner(self, domains_of: Callable[[str], Any], domain: str | None, named: Iterable[str] = (),
               usable: Callable[[str], bool] | None = None) -> tuple[Scores | None, str]:
        """The plan the message starts (None and why not); with the domain unknown (None), a plan is returned only
        when no domain could undo the choice."""
        scored = self.adjusted(domains_of, domain, named, usable)
        if not scored:
            return None, "no plan is near it"
        score, best = scored[0]
        threshold = self._c("threshold")
        rival = self._untaught_rival(scored, threshold)
        if rival is not None:
            score, best = rival
        if score < threshold:
            return None, f"best score {score:.2f} is below {threshold:.2f}"
        if best.learned and best.cosine < self._c("likeness"):
            return None, (f"'{best.plan_id}' scores {score:.2f}, but its nearest text is only {best.cosine:.2f} "
                          f"alike (at least {self._c('likeness'):.2f})")
        if domain is None:  # the domain is not known yet: another plan's domain must not be able to win
            rival = next((s for sc, s in scored[1:] if sc + s.gain >= score
                          and not set(domains_of(s.plan_id)) <= set(domains_of(best.plan_id))), None)
            if rival is not None:
                return None, f"the domain could still choose '{rival.plan_id}'"
        return best._replace(total=score), ""

    def _untaught_rival(self, scored: list[tuple[float, Scores]], threshold: float) -> tuple[float, Scores] | None:
        """A plan the learned classes never saw that reaches the threshold, and that nearness scores above the
        learned plan leading: the learned classes read its requests as their own (a "release the package" plan
        beside the dependency update), so the two are compared on the same footing."""
        best = scored[0][1]
        if not best.learned or not self.own:
            return None
        own = dict(self.own)
        rival = next(((sc, s) for sc, s in scored if not s.learned and sc >= threshold), None)
        if rival is None or rival[1].total <= own.get(best.plan_id, -1e9):
            return None
        return rival

    def close(self, domains_of: Callable[[str], Any], domain: str | None, named: Iterable[str] = ()) -> bool:
        """The local stage is not sure: the best plan is near the threshold, or a second plan is near the best, or a
        learned plan and one the learned classes never saw would both start, or the message asks for work that no
        plan reaches while some plan has no examples (its own text tells little of the ways it is asked for)."""
        scored = self.adjusted(domains_of, domain, named)
        if not scored:
            return False
        if self.untaught and self.work is not None and self.work >= self._c("work") and \
                scored[0][0] < self._c("threshold"):
            return True
        threshold, below, above = self._c("threshold"), self._c("close_below"), self._c("close_above")
        best = scored[0][0]
        if threshold - below <= best < threshold + above:
            return True
        starting = {s.learned for sc, s in scored if sc >= threshold}
        if self.own and starting == {True, False}:
            return True  # a learned plan and one the learned classes never saw: the utility model tells them apart
        return len(scored) > 1 and best >= threshold and scored[1][0] >= best - above

    def scores_of(self, plan_id: str) -> Scores | None:
        return next((s for s in self.ranked if s.plan_id == plan_id), None)

    def mention(self, plan_id: str, strong: bool = False, domain_agrees: bool = False) -> bool:
        """A match by the plan's phrases is a mention of its topic, not a request (see the module's rules)."""
        s = self.scores_of(plan_id)
        if s is None:
            return False
        total = s.total + (s.gain if domain_agrees else 0.0)
        if not s.learned:
            if strong:
                return total < self._c("strong_veto")
            return total < self._c("near_veto") or self.not_cosine >= max(MENTION_COSINE, s.cosine)
        if strong:  # a phrase that starts the plan alone: only the model, far surer, undoes it
            return total < self._c("strong_veto")
        return self.not_cosine >= max(MENTION_COSINE, s.cosine) or total < self._c("veto")

    def overruled(self, plan_id: str) -> bool:
        """A learned plan whose phrases match yields to another learned plan scored ``overrule`` or more above it."""
        s = self.scores_of(plan_id)
        if s is None or not s.learned:
            return False
        best = next((r for r in self.ranked if r.plan_id != plan_id and r.learned), None)
        return best is not None and best.total - s.total >= self._c("overrule")

    def may_win(self, named: bool = True) -> bool:
        """Whether some domain and org filter could let the best plan start, or make the message a close call
        (False: it starts nothing, and nobody is asked about it)."""
        bonus, floor = self._c("bonus"), self._c("threshold") - self._c("close_below")
        if self.untaught and self.work is not None and self.work >= self._c("work"):
            return True
        return any(s.total + max(s.gain, bonus if s.learned else 0.0) + (bonus if named and s.learned else 0.0)
                   >= floor for s in self.ranked[:3])


class Index:
    """A library's plans laid out for matching by meaning: its learned plans for the learned model, every other
    plan for ``nearness``.  Built off the pass (``catalogue``); nothing in it is trained."""

    def __init__(self, enc: vectors.Encoder, plans: Sequence[Any], ship: shipped.Shipped) -> None:
        np = enc.np
        self.enc, self.ship, self.constants = enc, ship, ship.constants
        if int(ship.vocabulary.max(initial=0)) >= len(enc.unit) or \
                ship.dense.shape[0] != learned.width(enc.unit.shape[1], len(ship.classes) + 1) + 1:
            raise shipped.ShippedError(f"{shipped.MATCHER}: its arrays do not fit the installed wordllama model; "
                                       "rebuild it with `graph-engine build-matcher`")
        by_id = {p.id: p for p in plans}
        self.learned_ids = {c for c in ship.classes if c in by_id and
                            len(getattr(by_id[c], "examples", ())) >= learned.TAUGHT}
        self.ids = [p.id for p in plans]
        self.plans = {p.id: p for p in plans}
        others = [p for p in plans if p.id not in self.learned_ids]
        self.mixed = bool(others) and bool(self.learned_ids)  # learned plans are scored by nearness too
        self.model = learned.Model(enc, [by_id[c] if c in self.learned_ids else None for c in ship.classes],
                                   [*(t for c in ship.classes if c in self.learned_ids for t in by_id[c].not_examples),
                                    *(t for t, _ in ship.not_requests)], ship.dense, ship.sparse,
                                   ship.vocabulary) if self.learned_ids else None
        near_plans = list(plans) if self.mixed else others
        self.near = nearness.Near(enc, near_plans, ship.no_work, ship.net, ship.gate) if near_plans else None
        self.texts = nearness.Corpus(enc, [learned.class_texts(by_id[c]) for c in ship.classes
                                           if c in self.learned_ids])
        self.text_owner = [c for c in ship.classes if c in self.learned_ids]
        self.nots = nearness.Corpus(enc, [tuple(getattr(p, "not_examples", ())) for p in plans])
        self._last: tuple | None = None
        self.np = np

    def __len__(self) -> int:
        return len(self.ids)

    def verdict(self, text: str, allowed_ids: Sequence[str] | None = None, leave_out: str = "") -> Verdict:
        """Every allowed plan scored for a request text (the last answer is kept: both hooks of a pass ask about
        the same message); ``leave_out``: score as if no plan and no not-request held this text (the labelled
        set's evaluation)."""
        key = (text, None if allowed_ids is None else tuple(allowed_ids), leave_out)
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        found = self._verdict(text, allowed_ids, leave_out)
        self._last = (key, found)
        return found

    def _verdict(self, text: str, allowed_ids: Sequence[str] | None, leave_out: str) -> Verdict:
        enc, np = self.enc, self.np
        ids = enc.ids(text)
        words = enc.words(ids)
        if not len(words):
            return Verdict((), self.constants)
        sent = enc.sentence(ids).astype(np.float32)
        near, work = self._near(text, ids, words, allowed_ids, leave_out)
        own = tuple((s.plan_id, s.total) for s in near if s.plan_id in self.learned_ids)
        untaught = tuple(s.plan_id for s in near if s.plan_id not in self.learned_ids and
                         not self.near.has_examples[self.near.at[s.plan_id]])
        found = self._learned(text, ids, words, sent, allowed_ids) + [s for s in near if s.plan_id not in
                                                                         self.learned_ids]
        found.sort(key=lambda s: (-s.total, s.plan_id))
        nots = self.nots.cosines(sent, leave_out)
        if len(nots) and float(nots.max()) > -1.0:
            j = int(nots.argmax())
            return Verdict(tuple(found), self.constants, self.nots.texts[j], float(nots[j]), own, work, untaught)
        return Verdict(tuple(found), self.constants, own=own, work=work, untaught=untaught)

    def _learned(self, text: str, ids: list[int], words: Any, sent: Any,
                 allowed_ids: Sequence[str] | None) -> list[Scores]:
        if self.model is None:
            return []
        z = self.model.scores(text, ids, words)
        classes = self.ship.classes
        rows = [i for i, c in enumerate(classes) if c in self.learned_ids and allowed(c, allowed_ids)]
        if not rows:
            return []
        # against "no plan", and against the plans left out (by the org filter, or missing from the library): a
        # message that asks for one of those starts nothing, not the next plan it resembles
        out_of_reach = [float(z[i]) for i in range(len(classes)) if i not in rows]
        floor = max([float(z[-1]), *out_of_reach])
        cos = self.texts.cosines(sent)
        best = self.texts.best(cos)
        bonus = self.constants["bonus"]
        found = []
        for i in rows:
            g = self.text_owner.index(classes[i])
            mine = cos[self.texts.starts[g]:self.texts.starts[g] + self.texts.sizes[g]]
            k = int(mine.argmax()) if len(mine) else 0
            found.append(Scores(classes[i], float(z[i]) - floor,
                                self.texts.texts[self.texts.starts[g] + k] if len(mine) else "",
                                float(best[g]), bonus, True))
        return found

    def _near(self, text: str, ids: list[int], words: Any, allowed_ids: Sequence[str] | None,
              leave_out: str) -> tuple[list[Scores], float | None]:
        near = self.near
        if near is None:
            return [], None
        rows, message = near.features(text, ids, words, leave_out)
        plain, gain = near.margins(rows, message)
        c = self.constants
        found = []
        for f, margin, gained in zip(rows, plain.tolist(), gain.tolist()):
            i = f["at"]
            pid = near.ids[i]
            if not allowed(pid, allowed_ids):
                continue
            shift = c["near_taught"] if near.has_examples[i] else c["near_untaught"]
            found.append(Scores(pid, margin - shift + c["threshold"], f["nearest"],
                                max(f["example_cos"], f["own_cos"]), gained, False))
        return found, float(message["gate"])


def by_words(found: list[Match], verdict: Verdict | None) -> list[Match]:
    """The plans a message's trigger phrases start, best first (``rank``); with meaning on, a match that is a
    mention or yields to another plan is left out (see the module's rules)."""
    if verdict is not None:
        found = [m for m in found if not verdict.overruled(m.plan.id)
                 and not verdict.mention(m.plan.id, strong=bool(set(m.hits) & set(m.plan.strong_triggers)),
                                         domain_agrees=bool(m.plan.domains) and m.domain_ok)]
    return sorted(found, key=rank)


def by_meaning(verdict: Verdict | None, plan_of: Callable[[str], Any], domain: str | None, named: Sequence[str] = (),
               usable: Callable[[str], bool] | None = None) -> Match | None:
    """The plan a request text starts by meaning, when no plan's phrases decide it (``named``: plans whose phrases
    it contains without reaching their threshold)."""
    if verdict is None:
        return None
    win, _ = verdict.winner(lambda pid: plan_of(pid).domains, domain, named, usable=usable)
    if win is None:
        return None
    plan = plan_of(win.plan_id)
    return Match(plan=plan, score=0, hits=(), domain_ok=not plan.domains or bool(domain and domain in plan.domains),
                 meaning=win, stage="meaning")


def decide(plans: Sequence[Any], verdict: Verdict | None, text: str, domain: str | None,
           allowed_plans: Sequence[str] | None, usable: Callable[[str], bool] | None = None) -> Match | None:
    """The plan a request text starts among ``plans`` (phrases, then meaning)."""
    found = [m for p in plans if allowed(p.id, allowed_plans) and (usable is None or usable(p.id))
             and (m := score_plan(p, text, domain))]
    dropped: set[str] = set()
    if found:
        kept = by_words(found, verdict)
        if kept:
            return kept[0]
        dropped = {m.plan.id for m in found}  # a mention of their topic: meaning does not start them either
    by_id = {p.id: p for p in plans}
    named = [p.id for p in plans if trigger_hits(p.triggers + p.strong_triggers, text)]
    ok = (lambda pid: pid not in dropped and (usable is None or usable(pid)))
    return by_meaning(verdict, by_id.__getitem__, domain, named, ok)


_BUILT: dict[str, Index] = {}  # indexes by the content they were built from (a reload of the same plans reuses one)
_BUILT_LOCK = __import__("threading").Lock()
MAX_BUILT = 8


def index_of(enc: vectors.Encoder, plans: Sequence[Any], ship: shipped.Shipped) -> Index:
    """The index of these plans' texts, built once per content (a library loaded again, or a new chat's copy of
    it, reuses the one built before).  Raises what ``Index`` raises."""
    import hashlib
    parts = [repr((p.id, p.name, getattr(p, "description", ""), p.triggers, p.strong_triggers, p.domains,
                   p.trigger_threshold, nearness.own_texts(p), tuple(getattr(p, "examples", ())),
                   tuple(getattr(p, "not_examples", ())))) for p in plans]
    key = hashlib.sha256("\0".join([ship.inputs_sha256, *parts]).encode("utf-8", "surrogatepass")).hexdigest()
    found = _BUILT.get(key)
    if found is None:
        found = Index(enc, plans, ship)
        with _BUILT_LOCK:
            if len(_BUILT) >= MAX_BUILT:
                _BUILT.pop(next(iter(_BUILT)))
            _BUILT[key] = found
    return found


AUTO: Any = object()  # best_match's default index: the plans' own (``index_for``)
_INDEXES: dict[tuple, tuple[list, Index]] = {}


def index_for(plans: Sequence[Any]) -> Index | None:
    """The meaning index of a set of plans (kept for the last few sets seen; built now, which is for the command
    line and tests: a running engine builds its catalogue's index off the pass); None without meaning."""
    enc = vectors.encoder()
    if enc is None:
        return None
    ship, _ = shipped.load(enc.np)
    if ship is None:
        return None
    key = tuple(map(id, plans))
    found = _INDEXES.get(key)
    if found is None or any(a is not b for a, b in zip(found[0], plans)):
        if len(_INDEXES) >= 8:
            _INDEXES.pop(next(iter(_INDEXES)))
        found = _INDEXES[key] = (list(plans), index_of(enc, list(plans), ship))  # holding them keeps ids unique
    return found[1]


def best_match(plans: Iterable[Any], message: str, domain: str | None, allowed_plans: Sequence[str] | None,
               index: Index | None = AUTO, leave_out: str = "") -> Match | None:
    """The plan a message starts (``domain`` None: unknown yet, so only a decisive match), with ``index`` the
    plans' meaning index (by default their own, ``index_for``; None: phrases alone).  ``leave_out``: see
    ``Index.verdict``."""
    started = time.perf_counter()
    text = request_text(normalise(message))
    if not text:
        return None
    plans = list(plans)
    if index is AUTO:
        index = index_for(plans)
    verdict = index.verdict(text, allowed_plans, leave_out) if index is not None else None
    m = decide(plans, verdict, text, domain, allowed_plans)
    if m is None:
        return None
    return replace(m, cost_ms=round((time.perf_counter() - started) * 1000, 2))
