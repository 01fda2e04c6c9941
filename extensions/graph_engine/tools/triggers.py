"""Matching quality: run a labelled set of user messages through the real matcher.

Each case is ``{"message", "expect": plan id or null, "domain": the BST domain}``, optionally ``"split":
"held_out"`` or ``"fresh"`` (never taught anything; ``fresh`` cases were also never looked at while the matcher
was built).  The report gives, per split, the requests that start the right plan and the messages that start a
plan they should not, with the recorded domain and without one (stock Agent-Zero has no belief-state tracker),
twice: with the library as it is ("taught": its plans' examples and not-examples) and with every plan's
examples and not-examples removed ("untaught": each plan matched by its own text alone).  With recorded answers
of a utility model (``load_answers``), the untaught library is scored a third time as Agent-Zero runs it: the
messages the host would ask about (``asking.why_ask``) take the recorded answer to the very question it would
send ("untaught_asked"; a question with no recorded answer leaves the local decision, and is counted).  Then
the confusion table, the misses, and trigger phrases that collide across plans.

A case that is one of the texts the matcher learned from (an example, a not-request) is scored as if it were
not: with ``folds``, the learned classes are learned again without a fifth of such cases (``FOLDS`` folds, by a
hash of the message) and each case is scored by the classes that never saw it; every text the scorer reads
leaves the case out.  Without ``folds`` (quicker) the tuning split is scored by the shipped classes, which
learned from it: only the held-out and fresh figures then say what to expect.
"""

from __future__ import annotations

import copy
import json
import zlib
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from ..session import asking
from ..authoring.lint import contains_phrase
from ..matching import decide, second, shipped, vectors
from ..matching.decide import Index, best_match
from ..matching.words import normalise, request_text, score_plan, trigger_hits
from ..core.model import Plan
from . import matcher_build

NONE = "(none)"
# what the labelled set must show: requests that start the right plan, and messages that start a plan they should
# not, per kind of library (the shipped plans taught by their examples; every plan by its own text alone)
REQUIRED = {"taught": {"recall": 0.97, "false": 0.01}, "untaught": {"recall": 0.85, "false": 0.02},
            "untaught_asked": {"recall": 0.85, "false": 0.02}}
SPLITS = ("tune", "held_out", "fresh", "all")
KINDS = ("taught", "untaught", "untaught_asked")
TITLES = {"taught": "the library as it is (plans taught by their examples), the local stages",
          "untaught": "every plan's examples and not-examples removed (own text alone), the local stages",
          "untaught_asked": "the same, with the utility model asked as the host asks it (recorded answers)"}
FOLDS = matcher_build.FOLDS


@dataclass(frozen=True)
class CaseResult:
    message: str
    domain: str
    expect: str | None
    got: str | None
    hits: tuple[str, ...]
    stage: str = ""
    asked: str = ""  # why the utility model was asked ("" when it was not)
    answered: bool = False  # ... and whether a recorded answer was found

    @property
    def ok(self) -> bool:
        return self.expect == self.got


def load_cases(path: str) -> list[dict[str, Any]]:
    """The labelled messages of a file (a list, or ``{"cases": [...]}``), each as ``run_cases`` reads it: an
    ``expect`` of "" is null (the message asks for nothing), a ``domain`` of null is none ("")."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    cases = data["cases"] if isinstance(data, dict) else data
    if not isinstance(cases, list):
        raise ValueError(f"{path}: needs a list of cases, or {{\"cases\": [...]}}")
    out = []
    for i, c in enumerate(cases):
        if not isinstance(c, dict) or not isinstance(c.get("message"), str) or "expect" not in c:
            raise ValueError(f"{path}: case {i} needs 'message' (text) and 'expect' (plan id or null)")
        if not isinstance(c["expect"], (str, type(None))) or not isinstance(c.get("domain"), (str, type(None))):
            raise ValueError(f"{path}: case {i}: 'expect' is a plan id or null, 'domain' a domain name or null")
        out.append(dict(c, expect=c["expect"] or None, domain=c.get("domain") or ""))
    return out


def split_of(case: dict[str, Any]) -> str:
    """``tune`` (teaches), ``held_out`` (never does) or ``fresh`` (never does, and never looked at)."""
    split = case.get("split")
    return split if split in ("held_out", "fresh") else "tune"


def untaught(plans: Sequence[Plan]) -> list[Plan]:
    return [replace(p, examples=(), not_examples=()) for p in plans]


def index_of(plans: Sequence[Plan], ship: shipped.Shipped | None = None) -> Index | None:
    enc = vectors.encoder()
    if enc is None:
        return None
    if ship is None:  # the shipped matcher: the index kept by the plans' content (validate, then triggers)
        ship = shipped.load(enc.np)[0]
        return decide.index_of(enc, list(plans), ship) if ship is not None else None
    return Index(enc, list(plans), ship)


def fold_of(message: str) -> int:
    return zlib.crc32(message.lower().encode("utf-8", "surrogatepass")) % FOLDS


def fold_indexes(plans: Sequence[Plan], cases: Sequence[dict], progress: Callable[[str], None]) -> dict[int, Index]:
    """Per fold, the library's index with its learned classes learned again without that fold's tuning cases."""
    enc = vectors.encoder()
    ship, problem = shipped.load(enc.np)
    if ship is None:
        raise RuntimeError(problem)
    out = {}
    taught = [p for p in plans if p.id in ship.classes]
    for f in range(FOLDS):
        progress(f"learning the classes without fold {f + 1} of {FOLDS}")
        gone = {c["message"].lower() for c in cases if split_of(c) == "tune" and fold_of(c["message"]) == f}
        kept = [replace(p, examples=tuple(e for e in p.examples if e.lower() not in gone),
                        not_examples=tuple(e for e in p.not_examples if e.lower() not in gone)) for p in taught]
        nots = [t for t, _ in ship.not_requests if t.lower() not in gone]
        dense, sparse, vocab = matcher_build.learn(enc, kept, [*(t for p in kept for t in p.not_examples), *nots])
        fold_ship = replace(ship, dense=dense, sparse=sparse, vocabulary=vocab,
                            not_requests=tuple(n for n in ship.not_requests if n[0].lower() not in gone))
        by_id = {p.id: p for p in kept}
        out[f] = Index(enc, [by_id.get(p.id, p) for p in plans], fold_ship)
    return out


def run_cases(plans: Sequence[Plan], cases: Sequence[dict[str, Any]], with_domain: bool, index: Index | None,
              folds: dict[int, Index] | None = None, answers: dict[str, str] | None = None) -> list[CaseResult]:
    """Each case through the matcher; with ``answers`` (recorded utility model answers by ``second.prompt_key``),
    a message the host would ask about takes the answer to the question it would send."""
    out = []
    for c in cases:
        domain = (c.get("domain") or "") if with_domain else ""
        use = folds[fold_of(c["message"])] if folds and split_of(c) == "tune" else index
        plans_used = list(use.plans.values()) if folds and split_of(c) == "tune" else plans
        m = best_match(plans_used, c["message"], domain, None, use, leave_out=c["message"].lower())
        got, asked, answered = (m.plan.id if m else None), "", False
        if answers is not None:
            asked, label = _asked(plans_used, use, c["message"], domain, m, answers)
            if label is not None:
                got, answered = (None if label == second.NONE else label), True
        out.append(CaseResult(c["message"], domain, c["expect"] or None, got, m.hits if m else (),
                              "utility model" if answered else m.stage if m else "", asked, answered))
    return out


def _asked(plans: Sequence[Plan], index: Index | None, message: str, domain: str, m: Any,
           answers: dict[str, str]) -> tuple[str, str | None]:
    """Why the host would ask the utility model about this message ("": it would not), and the recorded answer
    to the question it would send (None: none recorded, or not one of the labels)."""
    why, labels, system, body = _question(plans, index, message, domain, m)
    if not why:
        return "", None
    reply = answers.get(second.prompt_key(system, body))
    return why, (second.answer(reply, labels) if reply is not None else None)


def _question(plans: Sequence[Plan], index: Index | None, message: str, domain: str,
              m: Any) -> tuple[str, list[str], str, str]:
    """(why the host would ask, the labels, the system prompt, the message) of the question the host would send
    about ``message`` (why "" when it would not ask), by ``asking.why_ask``."""
    text = request_text(normalise(message))
    if not text:
        return "", [], "", ""
    verdict = index.verdict(text, None, message.lower()) if index is not None else None
    by_id = {p.id: p for p in plans}
    why, labels = asking.why_ask(verdict, m, message, domain, list(by_id), lambda pid: by_id[pid].domains)
    if not why:
        return "", [], "", ""
    system, body = second.question([(pid, by_id[pid].name, by_id[pid].description or "") for pid in labels],
                                   message)
    return why, labels, system, body


def load_answers(path: str) -> dict[str, str]:
    """Recorded answers of a utility model: ``{"answers": [{"prompt_sha256", "label", ...}]}`` (``questions``
    writes what to answer)."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    rows = data.get("answers") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("prompt_sha256"), str)
                                             and isinstance(r.get("label"), str) for r in rows):
        raise ValueError(f"{path}: needs {{\"answers\": [{{\"prompt_sha256\": ..., \"label\": ...}}, ...]}}")
    return {r["prompt_sha256"]: r["label"] for r in rows}


def questions(plans: Sequence[Plan], cases: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The questions the host would ask the utility model about the labelled set with every plan untaught (with
    the domain and without), each once: what to answer to record ``answers``."""
    kind_plans = untaught(plans)
    index = index_of(kind_plans)
    seen: dict[str, dict[str, str]] = {}
    for with_domain in (True, False):
        for c in cases:
            domain = (c.get("domain") or "") if with_domain else ""
            m = best_match(kind_plans, c["message"], domain, None, index, leave_out=c["message"].lower())
            why, _, system, body = _question(kind_plans, index, c["message"], domain, m)
            if why:
                key = second.prompt_key(system, body)
                seen.setdefault(key, {"prompt_sha256": key, "message": c["message"], "system": system,
                                      "body": body})
    return list(seen.values())


def figures(results: Sequence[CaseResult]) -> dict[str, Any]:
    """Requests that start the right plan, and messages that should start nothing but start a plan."""
    requests = [r for r in results if r.expect is not None]
    negatives = [r for r in results if r.expect is None]
    right = sum(r.ok for r in requests)
    false = sum(r.got is not None for r in negatives)
    return {"requests": len(requests), "right": right, "recall": round(right / len(requests), 4) if requests else 1.0,
            "negatives": len(negatives), "false_activations": false,
            "false_rate": round(false / len(negatives), 4) if negatives else 0.0}


def met(figs: dict[str, dict[str, Any]], kind: str) -> bool:
    """Whether the figures of one split reach what ``REQUIRED`` asks of this kind of library."""
    need = REQUIRED[kind]
    return all(figs[k]["recall"] >= need["recall"] and figs[k]["false_rate"] <= need["false"]
               for k in ("with_domain", "without_domain"))


def counted(figs: dict[str, Any]) -> list[str]:
    """The kinds whose requirement the command's exit code reads: the taught library, and the untaught one as the
    host runs it when answers were recorded (else the local stages alone)."""
    return [k for k in ("taught", "untaught_asked" if "untaught_asked" in figs else "untaught") if k in figs]


def confusion(results: Sequence[CaseResult]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for r in results:
        row = table.setdefault(r.expect or NONE, {})
        row[r.got or NONE] = row.get(r.got or NONE, 0) + 1
    return table


def collisions(plans: Sequence[Plan]) -> list[dict[str, str]]:
    """Phrases of one plan that always also match a phrase of another plan."""
    found = []
    for a in plans:
        for b in plans:
            if a.id >= b.id:
                continue
            for ta in a.all_triggers:
                for tb in b.all_triggers:
                    if contains_phrase(tb, ta) or contains_phrase(ta, tb):
                        found.append({"plan": a.id, "trigger": ta, "other_plan": b.id, "other_trigger": tb})
    return found


_REPORTS: dict[tuple, dict[str, Any]] = {}  # the last reports, by the plans' versions and the cases' text


def report(plans: Sequence[Plan], cases: Sequence[dict[str, Any]], folds: bool = True,
           progress: Callable[[str], None] = lambda _: None, answers: dict[str, str] | None = None,
           targets: bool = True) -> dict[str, Any]:
    """The labelled set's figures for this library (kept per content for the process: a second report of the same
    plans and cases, by `validate` then `triggers` or by two tests, is not computed again); ``answers``:
    recorded utility model answers (``load_answers``), for the untaught library as the host runs it;
    ``targets``: the figures are judged by ``REQUIRED`` (the shipped set's targets; a user's set is reported by
    its own counts: its cases that do not start what they expect)."""
    key = (tuple((p.id, p.version) for p in plans), json.dumps(list(cases), sort_keys=True, default=str), folds,
           json.dumps(answers, sort_keys=True), targets)
    if key not in _REPORTS:
        if len(_REPORTS) >= 4:
            _REPORTS.pop(next(iter(_REPORTS)))
        _REPORTS[key] = _report(plans, cases, folds, progress, answers, targets)
    return copy.deepcopy(_REPORTS[key])


def _report(plans: Sequence[Plan], cases: Sequence[dict[str, Any]], folds: bool,
            progress: Callable[[str], None], answers: dict[str, str] | None, targets: bool) -> dict[str, Any]:
    enc = vectors.encoder()
    off = vectors.unavailable() or (shipped.load(enc.np)[1] if enc is not None else "")
    figs: dict[str, Any] = {}
    results: dict[str, Any] = {}
    asked: dict[str, Any] = {}
    for kind in KINDS if cases else ():
        if kind == "untaught_asked" and answers is None:
            continue
        kind_plans = list(plans) if kind == "taught" else untaught(plans)
        index = index_of(kind_plans)
        fold = fold_indexes(kind_plans, cases, progress) if folds and kind == "taught" and index is not None else None
        progress(f"scoring {len(cases)} messages ({kind})")
        results[kind] = {key: run_cases(kind_plans, cases, use, index, fold,
                                        answers if kind == "untaught_asked" else None)
                         for key, use in (("with_domain", True), ("without_domain", False))}
        if kind == "untaught_asked":
            asked = {key: {"asked": sum(bool(r.asked) for r in rs), "unanswered": sum(bool(r.asked and not r.answered)
                                                                                     for r in rs)}
                     for key, rs in results[kind].items()}
        figs[kind] = {split: {key: figures([r for r, c in zip(rs, cases) if split in ("all", split_of(c))])
                              for key, rs in results[kind].items()} for split in SPLITS}
    taught = results.get("taught", {})
    with_d, without = taught.get("with_domain", []), taught.get("without_domain", [])
    correct = sum(r.ok for r in with_d)
    return {
        "matching": off or "by trigger phrases, then by meaning (wordllama)",
        "folds": folds,
        "targets": targets,
        "figures": figs,
        "required": {"kinds": REQUIRED, "met": {kind: met(figs[kind]["all"], kind) for kind in figs} if cases else
                     {}, "counted": counted(figs)} if targets else {},
        "cases": len(with_d),
        "correct": correct,
        "accuracy": round(correct / len(with_d), 4) if with_d else 0.0,
        "negatives_activated": [r.__dict__ for r in with_d if r.expect is None and r.got is not None],
        "wrong": [dict(r.__dict__, hits=list(r.hits)) for r in with_d if not r.ok],
        "wrong_without_domain": [dict(r.__dict__, hits=list(r.hits)) for r in without if not r.ok],
        "confusion": confusion(with_d),
        "collisions": collisions(plans),
        "asked": asked,
    }


def format_report(rep: dict[str, Any]) -> str:
    lines = [f"matching: {rep['matching']}"]
    if not rep["folds"] and rep["targets"]:
        lines.append("(tuning split scored by the shipped classes, which learned from it: see held_out and fresh, "
                     "or --folds)")
    for kind, title in TITLES.items():
        if kind not in rep["figures"]:
            continue
        if rep["targets"]:
            need = rep["required"]["kinds"][kind]
            verdict = "met" if rep["required"]["met"][kind] else "NOT met"
            title += (f": at least {need['recall']:.0%} of requests, at most {need['false']:.0%} false activations: "
                      f"{verdict}{'' if kind in rep['required']['counted'] else ' (reported)'}")
        lines += ["", title,
                  f"{'':<10}{'':<16}{'requests that start the right plan':<38}messages that start a plan they should not"]
        held = [split for split in SPLITS[:-1] if _held(rep["figures"][kind][split]["with_domain"])]
        for split in (held if len(held) > 1 else []) + ["all"]:  # the splits the set uses (one: "all" alone)
            for key, label in (("with_domain", "with domain"), ("without_domain", "without")):
                f = rep["figures"][kind][split][key]
                lines.append(f"{split if key == 'with_domain' else '':<10}{label:<16}{_share(f, 'right', 'requests', 'recall'):<38}"
                             f"{_share(f, 'false_activations', 'negatives', 'false_rate')}")
        if kind == "untaught_asked":
            lines += [f"  asked about {a['asked']} message(s) {key.replace('_', ' ')}, {a['unanswered']} with no "
                      "recorded answer (the local decision stands)" for key, a in rep["asked"].items()]
    if rep["cases"]:
        lines += ["", f"{rep['correct']}/{rep['cases']} correct with the domain ({rep['accuracy']:.1%}); "
                      f"{len(rep['negatives_activated'])} negative message(s) activated a plan", "",
                  "expected -> chosen (count)"]
    for expect, row in sorted(rep["confusion"].items()):
        cells = ", ".join(f"{got}: {n}" for got, n in sorted(row.items(), key=lambda kv: -kv[1]))
        lines.append(f"  {expect:<22} {cells}")
    if rep["wrong"]:
        lines += ["", "wrong (with the domain):"]
        lines += [f"  {w['message']!r} (domain {w['domain'] or '-'}): expected {w['expect'] or NONE}, "
                  f"got {w['got'] or NONE} {w['hits'] or ''}" for w in rep["wrong"]]
    lines += ["", "colliding trigger phrases:" if rep["collisions"] else "no trigger phrase collides across plans"]
    lines += [f"  {c['plan']}: '{c['trigger']}'  <->  {c['other_plan']}: '{c['other_trigger']}'"
              for c in rep["collisions"]]
    return "\n".join(lines)


def _held(f: dict[str, Any]) -> bool:
    return bool(f["requests"] or f["negatives"])


def _share(f: dict[str, Any], part: str, whole: str, rate: str) -> str:
    """"12 of 40 (30.0%)", or "none" when there is nothing to count."""
    return f"{f[part]:>4} of {f[whole]:<4} ({f[rate]:.1%})" if f[whole] else f"{'none':>4}"


# ── one message, explained ──────────────────────────────────────────────────


def explain(plans: Sequence[Plan], message: str, domain: str | None) -> dict[str, Any]:
    """Every plan's scores for a message, by phrases and by meaning, and what the matcher decides and why."""
    text = request_text(normalise(message))
    rows = {p.id: {"plan": p.id, "phrases": list(trigger_hits(p.all_triggers, text)),
                   "points": (m.score if (m := score_plan(p, text, domain)) else 0)} for p in plans}
    index = index_of(plans)
    verdict = index.verdict(text) if index is not None and text else None
    by_id = {p.id: p for p in plans}
    domains_of = lambda pid: by_id[pid].domains  # noqa: E731
    for score, s in (verdict.adjusted(domains_of, domain) if verdict else ()):
        rows[s.plan_id].update(meaning=round(score, 3), scored_by="learned" if s.learned else "own text",
                               nearest=s.example, cosine=round(s.cosine, 3))
    chosen = best_match(plans, message, domain, None, index)
    phrased = [m for p in plans if text and (m := score_plan(p, text, domain))]
    why = _why(text, chosen, phrased, verdict, domains_of, domain, plans)
    order = [s.plan_id for _, s in verdict.adjusted(domains_of, domain)] if verdict else []
    order += [p.id for p in plans if p.id not in set(order)]
    close = bool(verdict and verdict.close(domains_of, domain) and not (chosen and chosen.stage == "phrases"))
    return {"message": message, "request_text": text, "domain": domain, "chosen": chosen.plan.id if chosen else None,
            "stage": chosen.stage if chosen else "", "why": why,
            "matching": vectors.unavailable() or ("words, then meaning" if index is not None else "words only"),
            "close_call": close, "thresholds": dict(verdict.constants) if verdict else {},
            "nearest_not_example": {"text": verdict.not_example if verdict else "",
                                    "cosine": round(verdict.not_cosine, 3) if verdict else -1.0},
            "plans": [rows[pid] for pid in order]}


def _why(text: str, chosen: Any, phrased: list, verdict: Any, domains_of: Any, domain: str | None,
         plans: Sequence[Plan]) -> str:
    if not text:
        return "the message asks for no work now (a question, a report, a mention): no part of it is a request"
    if chosen is not None and chosen.stage == "phrases":
        return f"its trigger phrases decide: {', '.join(repr(h) for h in chosen.hits)} ({chosen.score} points)"
    undone = ""
    if phrased:
        undone = (f"the phrases {', '.join(repr(h) for m in phrased for h in m.hits)} name "
                  f"{', '.join(sorted({m.plan.id for m in phrased}))}, but meaning reads a mention, not a request; ")
    if chosen is not None:
        return undone + chosen.why()
    if verdict is None:
        return undone + (vectors.unavailable() or "meaning is not available")
    named = [p.id for p in plans if trigger_hits(p.all_triggers, text)]
    return undone + verdict.winner(domains_of, domain, named)[1]


def format_explain(ex: dict[str, Any]) -> str:
    t = ex["thresholds"]
    rule = (f"a plan starts at a score of {t['threshold']:.2f}" if t else "meaning is not available")
    lines = [f"message: {ex['message']!r} (domain {ex['domain'] or '-'})",
             f"request text: {ex['request_text']!r}",
             f"chosen: {ex['chosen'] or NONE}: {ex['why']}",
             f"{rule}; close call (the utility model would be asked): {'yes' if ex['close_call'] else 'no'}", "",
             f"  {'plan':<22}{'phrases (points)':<28}{'meaning (by)':<24}nearest text (cosine)"]
    for r in ex["plans"]:
        phr = f"{', '.join(r['phrases']) or '-'} ({r['points']})"
        mean = "-" if "meaning" not in r else f"{r['meaning']:.2f} ({r['scored_by']})"
        near = f"{r['nearest']!r} ({r['cosine']:.2f})" if "nearest" in r else ""
        lines.append(f"  {r['plan']:<22}{phr[:27]:<28}{mean:<24}{near}")
    if ex["nearest_not_example"]["text"]:
        lines.append(f"nearest not-example: {ex['nearest_not_example']['text']!r} "
                     f"({ex['nearest_not_example']['cosine']:.2f})")
    return "\n".join(lines)
