"""The host's side of matching a new user message: match it locally, and ask Agent-Zero's utility model when the
local stage cannot settle it (``matching.second``).

One question at most per message (kept on the agent by the message's id, so the other hook of the pass and any
later pass reuse the answer); never for a control, a "go on" to a running workflow, or a message the local
stage is sure of.  The question waits at most the timeout of the settings (``utility_timeout``); a timeout, an
exception, no utility model, or an answer that is not a label leaves the local decision, and one log line says
why.  What decided and what it cost travel with the match (``Match.stage``, ``Match.cost_ms``): the activation
log line and the ``plan_activated`` event show them.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..core import control
from ..matching import second
from ..matching.words import is_continuation
from ..core.message import Match, allowed

ASKED_ATTR = "_graph_engine_asked"  # [message id, the match it decided (None: no plan), what decided]


@dataclass
class Question:
    """A question for the utility model about one message, and what stands if it gets no answer."""

    message_id: str
    why: str  # "a close call", "another language", "the meaning model is loading"
    system: str
    body: str
    labels: tuple[str, ...]
    local: Match | None
    plan_of: Callable[[str], Any]
    domain: str | None


def decided(agent: Any, message_id: str) -> tuple[bool, Match | None]:
    """Whether this message was decided by a question already, and the match that question left."""
    seen = getattr(agent, ASKED_ATTR, None)
    if isinstance(seen, list) and len(seen) == 3 and seen[0] == message_id:
        return True, seen[1]
    return False, None


def match_message(library: Any, agent: Any, words: str, message_id: str, domain: str | None,
                  allowed_plans: Any, running: bool, ask: bool) -> tuple[Match | None, Question | None]:
    """The match of a new message for this hook call, and the question to ask about it (None: none)."""
    done, match = decided(agent, message_id)
    if done:
        return match, None
    judged = library.judge(words, domain, allowed_plans)
    ask = ask and callable(getattr(agent, "call_utility_model", None))  # (every Agent-Zero has one; a stand-in may not)
    if not ask or not judged.text or control.parse(words) is not None or (running and is_continuation(words)):
        return judged.match, None
    rows = _rows(library, allowed_plans)
    domains_of = lambda pid: getattr(library.get(pid), "domains", ())  # noqa: E731
    why, labels = why_ask(judged.verdict, judged.match, words, domain, [pid for pid, _, _ in rows], domains_of,
                          judged.not_ready, judged.work)
    if not why:
        return judged.match, None
    names = {pid: (name, desc) for pid, name, desc in rows}
    candidates = [(pid, *names[pid]) for pid in labels if pid in names]
    if not candidates:
        return judged.match, None
    system, body = second.question(candidates, words)
    return judged.match, Question(message_id, why, system, body, tuple(pid for pid, _, _ in candidates),
                                  judged.match, library.get, domain)


def why_ask(verdict: Any, match: Match | None, words: str, domain: str | None, every: list[str],
            domains_of: Callable[[str], Any], not_ready: str = "", work: float | None = None) -> tuple[str, list[str]]:
    """Why the local stage is not sure of a message ("" when it is), and the plans the question lists.

    ``verdict``: matching's verdict (None: meaning not read), ``match``: its decision, ``every``: the plans the agent
    may run, in the library's order.  Asked: a message in another language; a plan whose author gave no examples
    would start by meaning or by weak phrases (its own text tells its job, not where the job ends); a close call;
    a message that reads as asking for work while the meaning model is loading.  A question that involves a plan
    without examples, or a message in another language, lists every plan (the nearest ``MAX_CANDIDATES`` of a
    larger library), in the library's order; a close call among taught plans lists the plans near it."""
    if not second.reads_as_english(words):
        return "another language", _every(every, verdict)
    if match is not None:
        strong = bool(set(match.hits) & set(getattr(match.plan, "strong_triggers", ())))
        if not strong and not getattr(match.plan, "examples", ()):
            return "a workflow without examples would start", _every(every, verdict)
        if match.stage == "phrases":
            return "", []
    if verdict is None:  # meaning not ready yet: asked only about a message that reads as asking for work
        asks = bool(not_ready) and match is None and work is not None and work >= 0.0
        return ("the meaning model is loading", _every(every, None)) if asks else ("", [])
    if not verdict.close(domains_of, domain):
        return "", []
    if verdict.untaught:
        return "a close call", _every(every, verdict)
    floor = verdict.constants["threshold"] - verdict.constants["close_below"] - 1.0
    near = [s.plan_id for score, s in verdict.adjusted(domains_of, domain) if score >= floor]
    return "a close call", near[:second.MAX_CANDIDATES]


def _every(every: list[str], verdict: Any) -> list[str]:
    """Every plan, in the library's order; of a library of more than MAX_CANDIDATES, the nearest by meaning."""
    if len(every) <= second.MAX_CANDIDATES or verdict is None:
        return every[:second.MAX_CANDIDATES]
    nearest = {s.plan_id for s in verdict.ranked[:second.MAX_CANDIDATES]}
    return [pid for pid in every if pid in nearest]


def _rows(library: Any, allowed_plans: Any) -> list[tuple[str, str, str]]:
    """(id, name, description) of every plan the agent may run now."""
    out = []
    for pid, name, _ in library.listing():
        if allowed(pid, allowed_plans):
            head = library.heads.get(pid)
            out.append((pid, name, getattr(head, "description", "") or ""))
    return out


async def ask(agent: Any, q: Question, timeout: float, log: Callable[[str, str], None]) -> Match | None:
    """Ask the utility model; the match its answer gives, or the local one when there is no usable answer.  The
    decision is kept on the agent for this message.  Never raises but for the task's own cancellation (a
    CancelledError the provider raises inside the call is a failed answer: the local decision stands, one line)."""
    started = time.perf_counter()
    problem, label = "", None
    call = getattr(agent, "call_utility_model", None)
    if not callable(call):
        problem = "this Agent-Zero has no utility model"
    else:
        try:
            reply = await asyncio.wait_for(call(system=q.system, message=q.body), timeout)
            label = second.answer(reply, q.labels)
            if label is None:
                problem = f"its answer {_short(reply)} is not one of the labels"
        except asyncio.TimeoutError:
            problem = f"no answer within {timeout:g} s"
        except asyncio.CancelledError:
            task = asyncio.current_task()
            cancelling = getattr(task, "cancelling", None)  # (Python 3.11+; before it, every one propagates)
            if task is None or not callable(cancelling) or cancelling():  # this pass is cancelled (a stop): it ends
                raise
            problem = "CancelledError raised inside its call (not a stop of this pass)"  # a provider's own
        except Exception as exc:  # noqa: BLE001 - a failing model: the local decision stands
            problem = f"{type(exc).__name__}: {_short(str(exc))}"
    cost = round((time.perf_counter() - started) * 1000, 1)
    local = q.local
    if problem:
        log("warning", f"[HTN] The utility model was asked about the new message ({q.why}) and gave no usable "
                       f"answer ({problem}); matching's own decision stands: "
                       f"{local.plan.name if local else 'no workflow'}")
        setattr(agent, ASKED_ATTR, [q.message_id, local, "local"])
        return local
    plan = q.plan_of(label) if label != second.NONE else None
    match = None if plan is None else Match(plan=plan, score=0, hits=(), domain_ok=not plan.domains or bool(
        q.domain and q.domain in plan.domains), stage="utility model", cost_ms=cost)
    log("info", f"[HTN] The utility model was asked about the new message ({q.why}; {cost / 1000:.1f} s): "
                f"{'workflow ' + repr(plan.name) if plan else 'no workflow'}"
                f"{'' if (local and local.plan.id) == (plan and plan.id) else '; matching alone said ' + (repr(local.plan.name) if local else 'none')}")
    setattr(agent, ASKED_ATTR, [q.message_id, match, "utility model"])
    return match


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else repr(value)
    return text[:80] + ("..." if len(text) > 80 else "")
