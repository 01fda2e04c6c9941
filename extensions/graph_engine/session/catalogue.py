"""The plan library as the running engine uses it: able to match a message as soon as the file is read.

A small library (up to ``EAGER_PLANS`` plans, or one with DOT plans beside it) is checked whole when it is
loaded, as ``library.load_library_file`` does.  A large one is loaded lazily:

* loading reads the file and files every plan's trigger phrases in a ``TriggerIndex`` (tens of milliseconds
  for 1,000 plans); no plan is compiled yet;
* a plan is checked (schema, compile, lint: ``library.check_plan``) the first time a message matches it, and
  a background thread checks the others in file order, so every finding is reported soon after the load and
  a pass never waits for more than the plans it needs;
* a reload after an edit re-reads the file and compares its text with the previous text: when the change
  lies inside one plan's value, only that value is parsed again and only that plan is checked again;
  otherwise the whole file is parsed and only the plans whose content changed are checked again.

When everything is checked, the plans, findings and matches are those of a full load (the tests compare).
``LibraryCache`` is what a running engine holds: the file looked at once per second at most, a catalogue
loaded when it changed, the last good one kept when it broke, and the plan versions runs started on.  With a
catalogue in use, an edited file is loaded by a thread: the passes go on with the catalogue they have until the
new one is ready, and the first pass after that takes it (no pass reads, parses or checks the file).
"""

from __future__ import annotations

import gc
import os
import threading
import time
from dataclasses import replace
from typing import Any, Mapping, Sequence

from ..authoring.library import (Checked, Library, _problem_lines, check_document, check_plan, document_problems, dot_files,
                      json_error, library_meta, library_schema, load_library_file, read_library)
from ..core.kinds import RESTING
from ..authoring.lint import ERROR, Diagnostic, cross_plan_triggers, shared_trigger
from ..matching import decide, shipped, vectors
from ..matching.decide import Verdict, by_meaning, by_words
from ..matching.nearness import own_texts
from ..matching.words import TriggerIndex, normalise, phrase_start, request_text, score_plan, trigger_hits
from ..core.message import Match, allowed
from ..core.model import DEFAULT_THRESHOLD, Plan
from ..core.prefilter import prepare as prepare_pattern
from ..boundary.reading import decode_text, scan_document, scan_value

KEPT_VERSIONS = 64
BACKGROUND_DELAY = 0.25  # seconds after a load before the background thread starts checking
BACKGROUND_PAUSE = 0.0005  # seconds it sleeps after each plan
EAGER_PLANS = 32  # up to this many plans a library is checked whole at load (10 plans: about 20 ms)
CHUNK = 1 << 16



class Head:
    """What matching reads of a plan not checked yet, taken from its JSON as compiling would take it."""

    __slots__ = ("id", "triggers", "strong_triggers", "domains", "trigger_threshold", "name", "examples",
                 "not_examples", "description", "step_texts")

    def __init__(self, plan_id: str, triggers: tuple[str, ...], strong: tuple[str, ...], domains: tuple[str, ...],
                 threshold: int, name: str = "", examples: tuple[str, ...] = (), not_examples: tuple[str, ...] = (),
                 description: str = "", step_texts: tuple[str, ...] = ()) -> None:
        self.id, self.triggers, self.strong_triggers = plan_id, triggers, strong
        self.domains, self.trigger_threshold = domains, threshold
        self.name, self.examples, self.not_examples = name or plan_id, examples, not_examples
        self.description, self.step_texts = description, step_texts

    @classmethod
    def of(cls, plan_id: str, raw: Any) -> Head | None:
        """None when the fields matching reads are not of their types (the check will disable the plan)."""
        if type(raw) is not dict:
            return None
        weak, strong, domains, examples, nots = (raw.get(key, []) for key in (
            "triggers", "strong_triggers", "domains", "examples", "not_examples"))
        threshold, name = raw.get("trigger_threshold", DEFAULT_THRESHOLD), raw.get("name", plan_id)
        description = raw.get("description", "")
        if type(weak) is not list or type(strong) is not list or type(domains) is not list or \
                type(threshold) is not int or type(examples) is not list or type(nots) is not list or \
                type(name) is not str or type(description) is not str:
            return None
        try:  # every item text (join refuses anything else, at C speed)
            "".join(weak), "".join(strong), "".join(domains), "".join(examples), "".join(nots)
        except TypeError:
            return None
        return cls(plan_id, tuple(t.lower().strip() for t in weak), tuple(t.lower().strip() for t in strong),
                   tuple(domains), threshold, name.strip(), tuple(examples), tuple(nots), description.strip(),
                   _step_texts(raw))


def _step_texts(raw: dict) -> tuple[str, ...]:
    """The names and actions of a plan's steps, read from its JSON as compiling reads them (texts only)."""
    graph = raw.get("graph")
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    specs = [n for n in nodes.values() if isinstance(n, dict) and n.get("type", "task") in RESTING] \
        if isinstance(nodes, dict) else [s for s in raw.get("steps", []) if isinstance(s, dict)] \
        if isinstance(raw.get("steps"), list) else []
    out = []
    for spec in specs:
        name, action = spec.get("name", ""), spec.get("action", "")
        if isinstance(name, str) and isinstance(action, str) and name:
            out.append(f"{name}: {action}" if action else name)
    return tuple(out)


def matching_texts(plan: Any) -> tuple:
    """What meaning reads of a plan (its index is rebuilt when these change)."""
    return (own_texts(plan), tuple(getattr(plan, "examples", ())), tuple(getattr(plan, "not_examples", ())),
            tuple(getattr(plan, "domains", ())))


class Judgement:
    """What matching found for one message: the match (None: no plan), the meaning verdict it read (None: meaning
    was not ready or is off), the request text, and why meaning was not read ("" when it was)."""

    __slots__ = ("match", "verdict", "text", "not_ready", "work")

    def __init__(self, match: Match | None, verdict: Verdict | None, text: str, not_ready: str = "",
                 work: float | None = None) -> None:
        self.match, self.verdict, self.text, self.not_ready = match, verdict, text, not_ready
        self.work = work  # how much it reads as asking for work (the gate; None: not known yet)


class Catalogue:
    """The library's plans for matching and lookup; ``get`` compiles a plan on first use."""

    def __init__(self, path: str, meta: Mapping[str, Any], raws: dict[str, Any], top: list[Diagnostic],
                 schema: dict[str, Any] | None, text: str = "", spans: dict[str, tuple[int, int]] | None = None) -> None:
        self.path, self.meta, self.schema = path, meta, schema
        self.raws = raws  # plan id -> its JSON, in file order
        self.top = top  # findings of the document's top level
        self.text, self.spans = text, spans or {}  # the file's text and each plan's value in it (lazy only)
        self.checked: dict[str, Checked] = {}
        self.heads: dict[str, Any] = {}  # plan id -> what matching reads (the compiled plan once checked)
        self.index = TriggerIndex()
        self._meaning: decide.Index | None = None  # built off the pass (a thread), never in one
        self._stale: decide.Index | None = None  # the index of the library before an edit, used meanwhile
        self._building = False  # a thread is building it
        self._built = threading.Event()  # set when a thread's build ended (built, or failed)
        self._meaning_off = ""  # why meaning cannot be built (no wordllama, a damaged shipped file)
        self._texts: dict[str, tuple] = {}  # plan id -> the texts meaning reads of it
        self._generation = 0  # raised when a plan's texts change: an index built before it is stale
        self._starts_nothing: str | None = None  # the last message found to start no plan
        self._owners: dict[str, list[str]] = {}  # after settling: trigger phrase -> plans listing it, file order
        self._phrases: dict[str, tuple[str, ...]] = {}  # ... and plan id -> its phrases
        self._order: dict[str, int] = {}
        self.settled = False
        self.reparsed = 0  # plan values parsed again by the last incremental reload (0: the whole file)
        self.replaced: list[Plan] = []  # compiled plans an edit replaced (runs started on them keep them)
        self._lock = threading.RLock()
        self._new: list[str] = _problem_lines(path, top)  # problem lines not handed out yet
        self._cancelled = False
        self._whole: Library | None = None  # the full load, when the library was checked whole
        for pid, raw in raws.items():
            self._file(pid, Head.of(pid, raw))

    # ── building ────────────────────────────────────────────────────────────

    @classmethod
    def checked_whole(cls, lib: Library) -> Catalogue:
        """A library already checked whole (small, or with DOT plans)."""
        cat = cls(lib.path, lib.meta, {}, [], None)
        cat.checked = {pid: Checked(p, (), lib.worst_case_turns.get(pid)) for pid, p in lib.plans.items()}
        for pid, plan in lib.plans.items():
            cat._file(pid, plan)
        cat._whole = lib
        cat._new = list(lib.problems)
        cat.settled = True
        return cat

    def _file(self, pid: str, head: Any) -> None:
        texts = matching_texts(head) if head is not None else None
        if texts is not None and self._texts.get(pid) != texts:  # compiling changes no text: the index stays
            if self._meaning is not None:
                self._stale, self._meaning = self._meaning, None  # used until the new one is built
            self._texts[pid] = texts  # a plan found broken stays in the index, passed over (``_usable``)
            self._generation += 1
        if head is None:
            self.heads.pop(pid, None)
            self.index.remove(pid)
            return
        self.heads[pid] = head
        self._starts_nothing = None  # a plan filed or filed again may match it
        self.index.add(pid, head.triggers + head.strong_triggers)

    def inherit(self, previous: Catalogue) -> None:
        """A new load of the same library: the previous one's meaning index serves until this one's is built."""
        if self._meaning is None:
            self._stale = previous._meaning or previous._stale

    # ── use ─────────────────────────────────────────────────────────────────

    def get(self, plan_id: str) -> Plan | None:
        """The plan, checked now if it was not yet; None when it is not in the library or has an error."""
        done = self.checked.get(plan_id)
        if done is None:
            if plan_id not in self.raws:
                return None
            done = self._check(plan_id)
        return done.plan if done.usable else None

    def judge(self, message: str, domain: str | None, allowed_plans: Sequence[str] | None) -> Judgement:
        """The plan a message starts (``domain`` None: not known yet, so only a decisive match), by its phrases,
        then by meaning when the index is ready (a pass never waits for it: until it is, phrases alone)."""
        started = time.perf_counter()
        text = request_text(normalise(message))
        if not text:
            return Judgement(None, None, text)
        index, not_ready = self.meaning_index()
        heads = self.heads
        candidates = self.index.candidates(text)
        found = [m for pid in candidates if allowed(pid, allowed_plans) and (m := score_plan(heads[pid], text, domain))]
        verdict = index.verdict(text, allowed_plans) if index is not None else None
        match = None
        for m in by_words(found, verdict):
            plan = self.get(m.plan.id)  # a plan with an error is skipped, as a full load leaves it out
            if plan is not None:
                match = m if m.plan is plan else replace(m, plan=plan)
                break
        if match is None:
            dropped = {m.plan.id for m in found}  # phrases that did not decide: meaning does not start them either
            named = [pid for pid in candidates if trigger_hits(heads[pid].triggers + heads[pid].strong_triggers, text)]
            for _ in range(4):  # a winner found broken when it is checked now is passed over
                m = by_meaning(verdict, self._head, domain, named,
                               lambda pid: pid not in dropped and self._usable(pid))
                plan = self.get(m.plan.id) if m is not None else None
                if m is None or plan is not None:
                    break
            match = None if plan is None else m if m.plan is plan else replace(m, plan=plan)
        if match is not None:
            match = replace(match, cost_ms=round((time.perf_counter() - started) * 1000, 2))
        work = verdict.work if verdict is not None else None
        if work is None and (ship := shipped.loaded()) is not None:
            work = ship.gate.logit(text)  # hashed words: no meaning model needed
        return Judgement(match, verdict, text, not_ready, work)

    def best(self, message: str, domain: str | None, allowed_plans: Sequence[str] | None) -> Match | None:
        return self.judge(message, domain, allowed_plans).match

    def _usable(self, pid: str) -> bool:
        return pid in self.heads and (pid not in self.checked or self.checked[pid].usable)

    def _head(self, pid: str) -> Any:
        head = self.heads.get(pid)
        return head if head is not None else Head(pid, (), (), (), DEFAULT_THRESHOLD)

    def meaning_index(self, wait: bool = False) -> tuple[decide.Index | None, str]:
        """The index for matching by meaning, and why there is none ("" when there is).  A pass never waits: while
        a thread builds it (the first time, and after an edit), the previous index serves when there is one,
        else none.  ``wait``: build it now (the warm-up thread and the command line)."""
        found = self._meaning
        if found is not None:
            return found, ""
        if self._meaning_off:
            return None, self._meaning_off
        if wait:
            if self._building:
                self._built.wait()
                return self._meaning, self._meaning_off
            return self._embed(), self._meaning_off
        if not self._building:
            self._start_building()
        stale = self._stale
        return stale, "" if stale is not None else ("the meaning model is loading" if vectors.loading() or
                                                     vectors.encoder(wait=False) is None else
                                                     "the plans' texts are being read")

    def _start_building(self) -> None:
        with self._lock:
            if self._building or self._meaning is not None:
                return
            self._building = True
            self._built.clear()
        threading.Thread(target=self._build_meaning, name="graph-engine-meaning", daemon=True).start()

    def _embed(self) -> decide.Index | None:
        enc = vectors.encoder()
        if enc is None:
            return self._off(vectors.unavailable())
        ship, problem = shipped.load(enc.np)
        if ship is None:
            return self._off(problem)
        with self._lock:
            heads, generation = list(self.heads.values()), self._generation
        try:
            built = decide.index_of(enc, heads, ship)  # outside the lock: embedding takes a while
        except Exception as exc:  # noqa: BLE001 - matching by phrases goes on; said once in the agent's log
            return self._off(f"{self.path}: preparing to match requests by meaning failed ({type(exc).__name__}: "
                             f"{exc}); messages are matched by their phrases and the utility model. Please report it")
        with self._lock:
            if self._meaning is None and generation == self._generation:  # no text changed meanwhile
                self._meaning, self._stale = built, None
            return built

    def _off(self, why: str) -> None:
        with self._lock:
            if not self._meaning_off:
                self._meaning_off = why
                self._new.append(why)
        return None

    def _build_meaning(self) -> None:
        """In a thread: build the meaning index (again, when the plans' texts changed meanwhile).  The examples'
        routing is an author's check (`graph-engine validate`): scoring every example of a library costs seconds
        of the interpreter that every chat shares, so the engine does not run it."""
        try:
            for _ in range(3):
                index = self._embed()
                if index is None or self._meaning is index:
                    break
        except Exception as exc:  # noqa: BLE001 - said in the agent's log by the next pass, never lost
            self._off(f"{self.path}: preparing to match requests by meaning failed ({type(exc).__name__}: {exc}); "
                      "messages are matched by their phrases and the utility model. Please report it")
        finally:
            self._building = False
            self._built.set()

    def may_start(self, message: str) -> bool:
        """Whether the message may start a plan: a trigger phrase is in its request text, or meaning finds a plan
        near it, or meaning is not ready (the utility model may be asked).  False means ``judge`` matches
        nothing, whatever the domain and the org filter: a quick test before the full observation of a pass that
        has no run (most messages name no plan)."""
        if message == self._starts_nothing:  # both hooks of a pass ask about the same message
            return False
        text = request_text(normalise(message))
        if not text:
            self._starts_nothing = message
            return False
        heads = self.heads
        if any(phrase_start(t, text) >= 0 for pid in self.index.candidates(text)
               for t in heads[pid].triggers + heads[pid].strong_triggers if t):
            return True
        index, not_ready = self.meaning_index()
        if index is None:
            return bool(not_ready) and not self._meaning_off  # loading: the utility model may decide
        if index.verdict(text).may_win(named=False):
            return True
        self._starts_nothing = message
        return False

    def listing(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(plan id, name, trigger phrases: strong ones first) of every plan not known to be broken, in file
        order: what the user's "list workflows" shows and "start the <name> workflow" looks names up in."""
        rows = []
        for pid, head in list(self.heads.items()):
            done = self.checked.get(pid)
            if done is not None and not done.usable:
                continue
            raw = self.raws.get(pid)
            name = getattr(head, "name", None) or (raw.get("name") if isinstance(raw, dict) else None)
            rows.append((pid, name if isinstance(name, str) and name else pid, head.strong_triggers + head.triggers))
        return rows

    def __bool__(self) -> bool:
        return True  # a catalogue is there even when it holds no plan: never counted to test it

    def __len__(self) -> int:
        """Plans that may be used (those checked and found broken are not counted)."""
        return sum(1 for pid in self.raws or self.checked if pid not in self.checked or self.checked[pid].usable)

    def take_problems(self) -> list[str]:
        """Problem lines found since the last call (the load's, a check's, the background thread's)."""
        if not self._new:
            return []
        with self._lock:
            lines, self._new = self._new, []
        return lines

    # ── checking ────────────────────────────────────────────────────────────

    def _check(self, pid: str) -> Checked:
        with self._lock:
            done = self.checked.get(pid)
            if done is not None:
                return done
            done = check_plan(pid, self.raws[pid], self.schema)
            self.checked[pid] = done
            self._file(pid, done.plan if done.usable else None)
            self._new.extend(_problem_lines(self.path, list(done.diagnostics)))
            if self.settled:  # an edit after everything was checked: the phrases it shares with other plans
                self._shared(pid, done.plan)
            return done

    def settle(self, pause: float = 0.0) -> None:
        """Check every plan not checked yet, then the findings across plans.  ``pause``: seconds to sleep after
        each plan (the background thread lets go of the interpreter, so that a pass waits for one plan's check
        at most, not for the interpreter's 5 ms switch interval)."""
        for pid in list(self.raws):
            if self._cancelled:
                return
            if pid not in self.checked:
                self._check(pid)
                if pause:
                    time.sleep(pause)
        with self._lock:
            if not self.settled and not self._cancelled:
                self.settled = True
                compiled = self._compiled()
                self._new.extend(_problem_lines(self.path, cross_plan_triggers(compiled)))
                self._order = {p: i for i, p in enumerate(self.raws)}  # an edit in place keeps the plan ids
                for plan in compiled:
                    self._phrases[plan.id] = plan.all_triggers
                    for phrase in plan.all_triggers:
                        self._owners.setdefault(phrase, []).append(plan.id)

    def _compiled(self) -> list[Plan]:
        """The plans that compiled (lint errors or not), in file order: what the cross-plan check reads."""
        return [c.plan for pid in self.raws if (c := self.checked.get(pid)) is not None and c.plan is not None]

    def _shared(self, pid: str, plan: Plan | None) -> None:
        """Refile an edited plan's trigger phrases and report those another plan lists too."""
        old = self._phrases.pop(pid, ())
        for phrase in old:
            ids = self._owners.get(phrase)
            if ids and pid in ids:
                ids.remove(pid)
        new = plan.all_triggers if plan is not None else ()
        for phrase in new:
            ids = self._owners.setdefault(phrase, [])
            ids.append(pid)
            ids.sort(key=self._order.__getitem__)
        if new:
            self._phrases[pid] = new
        found = [shared_trigger(phrase, ids) for phrase in dict.fromkeys((*old, *new))
                 if len(ids := self._owners.get(phrase, ())) > 1]
        self._new.extend(_problem_lines(self.path, found))

    def warm(self) -> None:
        """What the first messages would otherwise do in their passes, done now (the engine's warm-up thread,
        before the chat's first message): every checked plan's check patterns compiled for the time-bounded
        search, and the index for matching by meaning built, as the first message of a library checked whole
        would build it (a pass that comes meanwhile does not wait: it decides by phrases)."""
        for checked in list(self.checked.values()):
            for node in checked.plan.nodes.values() if checked.plan is not None else ():
                check = node.verify
                for pattern in (check.pattern, check.fail_pattern, check.capture_pattern) if check else ():
                    if pattern is not None:
                        prepare_pattern(pattern)
        self.meaning_index(wait=True)

    def start(self) -> None:
        """Check the rest in a background thread (a daemon: it never holds Agent-Zero's exit), after
        BACKGROUND_DELAY: the pass that loaded the library matches its message first, undisturbed."""
        if not self.settled:
            threading.Thread(target=self._background, name="graph-engine-library", daemon=True).start()
        elif self._meaning is None:  # checked whole: the index
            with self._lock:
                if self._building:
                    return
                self._building = True
                self._built.clear()
            threading.Thread(target=self._build_meaning, name="graph-engine-meaning", daemon=True).start()

    def _background(self) -> None:
        time.sleep(BACKGROUND_DELAY)
        try:
            self.meaning_index(wait=True)
            self.settle(pause=BACKGROUND_PAUSE)
        except Exception as exc:  # noqa: BLE001 - said in the agent's log by the next pass, never lost
            with self._lock:
                self._new.append(f"{self.path}: checking the plans in the background stopped ({type(exc).__name__}: "
                                 f"{exc}); each plan is still checked when a message first needs it, and "
                                 "`graph-engine validate` reports every finding. Please report it")

    def cancel(self) -> None:
        self._cancelled = True

    def library(self) -> Library:
        """Everything checked, as a full load reports it (checks what is left first)."""
        if self._whole is not None:
            return self._whole
        self.settle()
        with self._lock:
            found = list(self.top)
            for pid in self.raws:
                found.extend(self.checked[pid].diagnostics)
            found.extend(cross_plan_triggers(self._compiled()))
            broken = {d.plan for d in found if d.severity == ERROR}
            plans = {pid: c.plan for pid, c in self.checked.items() if c.plan is not None and pid not in broken}
            plans = {pid: plans[pid] for pid in self.raws if pid in plans}
            return Library(path=self.path, plans=plans, problems=tuple(_problem_lines(self.path, found)),
                           meta=self.meta, diagnostics=tuple(found),
                           worst_case_turns={pid: c.worst_case_turns for pid, c in self.checked.items()
                                             if c.plan is not None},
                           timings={pid: c.seconds for pid, c in self.checked.items()})

    # ── an edit ─────────────────────────────────────────────────────────────

    def edited(self, text: str) -> bool:
        """Take the file's new text when it differs from the last only inside one plan's value: that value is
        parsed again and the plan is checked again.  False: the caller loads the file whole."""
        if not self.spans or text == self.text:
            return bool(self.spans)
        old = self.text
        start = common_prefix(old, text)
        tail = common_suffix(old, text, start)
        pid = next((p for p, (a, b) in self.spans.items() if a <= start and len(old) - tail <= b), None)
        if pid is None:
            return False
        a, b = self.spans[pid]
        delta = len(text) - len(old)
        try:
            value, end = scan_value(text, a)
        except ValueError:
            return False
        if end != b + delta:
            return False
        with self._lock:
            self.text = text
            self.raws[pid] = value
            for other, (x, y) in self.spans.items():
                if x > a:
                    self.spans[other] = (x + delta, y + delta)
            self.spans[pid] = (a, end)
            old_check = self.checked.pop(pid, None)
            if old_check is not None and old_check.plan is not None:
                self.replaced.append(old_check.plan)
            self._file(pid, Head.of(pid, value))
            self._check(pid)
            self.reparsed = 1
        return True

    def reuse(self, previous: Catalogue) -> None:
        """After a whole load: keep the checks of the plans whose content did not change."""
        with previous._lock:
            kept = {pid: c for pid, c in previous.checked.items()
                    if pid in self.raws and previous.raws.get(pid) == self.raws[pid]}
        with self._lock:
            for pid, done in kept.items():
                self.checked[pid] = done
                self._file(pid, done.plan if done.usable else None)


# ── reading the file ────────────────────────────────────────────────────────


class NotJson(ValueError):
    """The library's text is not one JSON value."""


def load(path: str, text: str, previous: Catalogue | None = None, eager_plans: int | None = None) -> Catalogue:
    """The catalogue of a library file's text (``previous``: the catalogue of its last text, whose checks are
    kept for what did not change).  Raises NotJson, or ValueError when the document is unusable."""
    if previous is not None and previous.edited(text):
        return previous
    try:
        data, spans = scan_document(text)
    except ValueError as exc:
        raise NotJson(str(exc)) from None
    schema = library_schema(path)
    raws, top = document_problems(data, path, schema)
    if previous is not None:
        previous.cancel()
    if len(raws) <= (EAGER_PLANS if eager_plans is None else eager_plans):
        return Catalogue.checked_whole(check_document(data, path))
    meta = library_meta(data)
    cat = Catalogue(path, meta, dict(raws), top, schema, text, {pid: spans[pid] for pid in raws if pid in spans})
    if previous is not None and previous.raws:
        cat.reuse(previous)
    return cat


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (whole chunks compared in C, then halving)."""
    n = min(len(a), len(b))
    lo = 0
    while lo + CHUNK <= n and a[lo:lo + CHUNK] == b[lo:lo + CHUNK]:
        lo += CHUNK
    hi = min(lo + CHUNK, n)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: str, b: str, prefix: int) -> int:
    """Length of the longest common suffix that does not overlap the common prefix."""
    n = min(len(a), len(b)) - prefix
    la, lb = len(a), len(b)
    lo = 0
    while lo + CHUNK <= n and a[la - lo - CHUNK:la - lo] == b[lb - lo - CHUNK:lb - lo]:
        lo += CHUNK
    hi = min(lo + CHUNK, n)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[la - mid:la - lo] == b[lb - mid:lb - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


# ── the library file, re-read when it changes ──────────────────────────────


_DOT_LISTS: dict[str, tuple[int, list[str]]] = {}  # folder -> (its mtime when listed, its DOT files)
DOT_LIST_FRESH_NS = 2_000_000_000  # a folder changed this recently is listed again (coarse file-system clocks)


def _dot_files_listed(path: str) -> list[str]:
    """The DOT files beside the library, the folder listed again only when its mtime changed (a file added,
    removed or renamed), or changed so recently that a coarse clock could hide a second change: in the real
    loop the library is looked at on nearly every pass (passes are seconds apart), and a listing of the
    extension folder cost 1-3 ms on a busy machine, two `stat`s a few microseconds."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mtime = os.stat(folder).st_mtime_ns
    except OSError:
        return dot_files(path)
    seen = _DOT_LISTS.get(folder)
    if seen is None or seen[0] != mtime or time.time_ns() - mtime < DOT_LIST_FRESH_NS:
        seen = _DOT_LISTS[folder] = (mtime, dot_files(path))
    return seen[1]


def _dot_stamp(path: str) -> tuple:
    out = []
    for f in _dot_files_listed(path):
        try:
            st = os.stat(f)
        except OSError:
            continue
        out.append((f, st.st_mtime_ns, st.st_size))
    return tuple(out)


class LibraryCache:
    """Re-reads the library when its file changes; keeps the last good copy and old plan versions.

    ``current`` is a ``Catalogue``: a large library is matched from its trigger index at once and
    checked plan by plan (``background``: the plans no message needed yet are checked by a thread)."""

    def __init__(self, path: str, recheck_seconds: float = 1.0, eager_plans: int | None = None,
                 background: bool = True) -> None:
        self.path = path
        self.recheck_seconds = recheck_seconds
        self.eager_plans = eager_plans
        self.background = background
        self._checked_at = -1e18
        self._stamp: tuple | None = None
        self.current: Any = None
        self._versions: dict[tuple[str, str], Plan] = {}
        self.failing = False  # the last look at the file found it unreadable or broken
        self.recovered = False  # ... and the one after that loaded it: the caller says so once and resets it
        self._loader: threading.Thread | None = None  # loading an edited file, off the passes
        self._loaded: tuple[Any, Any] | None = None  # what it left: (catalogue, None) or (None, the ValueError)

    def refresh(self) -> tuple[Any, list[str]]:
        """Return the library to use and the problem lines that are new since the last call.

        The file's timestamp is looked at no more than once per ``recheck_seconds``; with a library in use and
        ``background``, an edited file is loaded by a thread and taken by the first call after it is ready."""
        loaded, self._loaded = self._loaded, None
        if loaded is not None:
            return self._take(*loaded)
        now = time.monotonic()
        if self.current is not None and (now - self._checked_at < self.recheck_seconds or self._loader is not None):
            return self.current, self.current.take_problems()
        self._checked_at = now
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size, _dot_stamp(self.path))
        except OSError as exc:
            stamp = None
            self.failing = True
            if self._stamp is not None or self.current is None:
                self._stamp = None
                reason = exc.strerror or str(exc)
                keep = "keeping the plans loaded before" if self.current else "no plans are active"
                return self.current, [f"{self.path}: cannot read the plan library ({reason}); {keep}"]
            return self.current, []
        if stamp == self._stamp:
            return self.current, self.current.take_problems() if self.current is not None else []
        self._stamp = stamp
        if self.current is not None and self.background:
            self._loader = threading.Thread(target=self._load_aside, name="graph-engine-library", daemon=True)
            self._loader.start()
            return self.current, []  # (its problem lines wait for the next call)
        try:
            return self._take(self._load(), None)
        except ValueError as exc:
            return self._take(None, exc)

    def written(self) -> None:
        """This process wrote a plan beside the library (a workflow saved from a chat): look at once, so that the
        load (off the passes, with its meaning index) is ready for the person's next message."""
        if self._loader is None:
            self._checked_at = -1e18
            if self.current is not None and self.background:
                self.refresh()

    def _load_aside(self) -> None:
        """The thread's work, begun after BACKGROUND_DELAY (the pass that saw the edit ends first, undisturbed):
        load the edited file and build its meaning index; the next ``refresh`` takes what it left."""
        time.sleep(BACKGROUND_DELAY)
        try:
            cat = self._load()
            if cat.settled or cat is self.current:
                cat.meaning_index(wait=True)  # ready to match when a pass takes it (the stale one serves till then)
            found: tuple[Any, Any] = (cat, None)
        except ValueError as exc:
            found = (None, exc)
        except Exception as exc:  # noqa: BLE001 - a bug in loading: told like a broken file, the passes go on
            found = (None, ValueError(f"{self.path}: could not be loaded ({type(exc).__name__}: {exc})"))
        self._loaded, self._loader = found, None
        self._checked_at = -1e18  # changed again while it loaded: the next call looks

    def wait_loaded(self, timeout: float = 60.0) -> None:
        """Wait until an edited file being loaded is ready (for tests and the command line; a pass never waits)."""
        loader = self._loader
        if loader is not None:
            loader.join(timeout)

    def _take(self, cat: Any, exc: Any) -> tuple[Any, list[str]]:
        """Use a catalogue just loaded, or keep the last good one when loading failed with ``exc``."""
        if exc is not None:
            self.failing = True
            keep = "keeping the last good library" if self.current else "no plans are active until it is fixed"
            return self.current, [f"{exc}; {keep}"]
        self.recovered, self.failing = self.failing, False
        if self.current is not None and cat is not self.current:
            self._remember(p.plan for p in self.current.checked.values() if p.plan is not None)
            cat.inherit(self.current)
        self._remember(cat.replaced)
        cat.replaced = []
        self.current = cat
        if self.background:
            cat.start()
        return cat, cat.take_problems()

    def _load(self) -> Any:
        if _dot_stamp(self.path):  # DOT plans beside it: checked whole, with their positions
            return Catalogue.checked_whole(load_library_file(self.path))
        blob = read_library(self.path)
        collecting = gc.isenabled()
        gc.disable()  # parsing makes a million objects and no cycle: collecting during it doubles its time
        try:
            text = decode_text(blob)
            return load(self.path, text, self.current, self.eager_plans)
        except (NotJson, UnicodeDecodeError):
            raise ValueError(f"{self.path}: not valid JSON ({json_error(blob)}); fix the syntax") from None
        finally:
            if collecting:
                gc.enable()

    def plan_version(self, plan_id: str, version: str) -> Plan | None:
        """A plan as it was when a run started, if this process has seen that version."""
        return self._versions.get((plan_id, version))

    def _remember(self, plans: Any) -> None:
        for plan in plans:
            self._versions[(plan.id, plan.version)] = plan
        while len(self._versions) > KEPT_VERSIONS:
            self._versions.pop(next(iter(self._versions)))
