"""Workflows proposed in the chat, whatever the host: a proposal checked and kept until the person approves or
rejects it, the approval turned into the offer the step takes (``engine.Offer``), and a finished workflow saved
beside the library so that it starts by its own text from then on.

A proposal is a plain dict the host keeps with the chat (``Pending``): the plan's text, not the compiled plan, so
that it survives a restart; the plan is compiled again from it when it is approved.  Nothing here waits: the
person's answer is read from their next message (or a button the host has), and until then the agent goes on
with whatever else they say.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from typing import Any, TypedDict

from ..authoring import compose
from ..core.engine import Offer, amend_problem
from .runtime import Runtime

APPROVED_BY_WORDS = "approved by the person"
APPROVED_BY_BUTTON = "approved by the person in the web UI"
RUN_WITHOUT_ASKING = "run without asking, as the settings allow"
MAX_REQUEST = 500  # characters of the request kept with a proposal (the saved plan's first example)

_POLITE = r"(?:(?:ok|okay|yes|yeah|yep|sure|please|great|good|fine|alright|then|so|and|just|thanks|thank you)\s)*"
_APPROVE = re.compile(_POLITE + r"(?:yes|yeah|yep|sure|ok|okay|approve|approved|i approve|go ahead|go for it|"
                      r"run it|start it|do it|proceed|looks good|lgtm|sounds good|accept|accepted|"
                      r"approve (?:it|the (?:workflow|plan))|run the (?:workflow|plan)|start the (?:workflow|plan))"
                      r"(?:\s(?:please|thanks|thank you|now|then))*")
_REJECT = re.compile(r"(?:(?:no|nope|please|thanks|sorry)\s)*(?:no|nope|reject|rejected|i reject|don't|do not|"
                     r"cancel|cancel it|not that|no thanks|no thank you|reject (?:it|the (?:workflow|plan))|"
                     r"don't run it|do not run it|skip it)(?:\s(?:please|thanks|thank you))*")
_SAVE = re.compile(r"(?:(?:please|ok|okay|now|and|then|so)\s)*(?:save|keep|store)\s(?:this|the|that)\s"
                   r"(?:workflow|plan)(?:\sas\s(?P<name>.{1,80}?))?(?:\s(?:please|thanks|thank you))*")
_PLAN_TEXT = re.compile(r"^\s*(?:(?:strict\s+)?digraph\b|\{\s*\"(?:name|graph|plans|id)\")", re.IGNORECASE)


class Pending(TypedDict):
    """A proposal waiting for the person (kept with the chat)."""

    id: str
    source: dict[str, str]  # {format, text}
    plan_id: str
    name: str
    steps: int
    request: str  # what the person asked for (the saved plan's first example)
    amend: str  # the run id it changes ("" for a new run)
    by: str  # "agent" or "person"
    at: float


def _words(text: str) -> str:
    text = text.lower().replace("’", "'")
    return " ".join(re.sub(r"[^\w']+|(?<!\w)'|'(?!\w)", " ", text).split())


def answer_of(message: str) -> str:
    """"approve", "reject" or "" (the message is neither: the proposal keeps waiting, the message is handled as any
    other).  A whole short message only: "yes, go ahead" approves, "yes, but add a test step first" does not."""
    if len(message) > 80:
        return ""
    said = _words(message)
    if _APPROVE.fullmatch(said):
        return "approve"
    if _REJECT.fullmatch(said):
        return "reject"
    return ""


def save_asked(message: str) -> tuple[bool, str]:
    """(the message asks to save the workflow, the name it gives or "")."""
    if len(message) > 120:
        return False, ""
    m = _SAVE.fullmatch(_words(message))
    if m is None:
        return False, ""
    if not m.group("name"):
        return True, ""
    raw = re.split(r"\bas\b", message, flags=re.IGNORECASE)[-1]  # the name as the person wrote it (its case)
    raw = re.sub(r"(?:[\s,.!]+(?:please|thanks|thank you))+[\s.!]*$", "", raw, flags=re.IGNORECASE)
    return True, " ".join(raw.strip(" \t\n.!,;:\"'").split()) or m.group("name")


def is_plan_text(message: str) -> bool:
    """The message is a plan pasted in the chat (DOT, or a JSON plan object), not a request."""
    return bool(_PLAN_TEXT.match(message[:200]))


def propose(rt: Runtime, text: Any, fmt: str = "", request: str = "", running: dict | None = None,
            amend: bool = False, by: str = "agent") -> tuple[str, Pending | None, compose.Proposal]:
    """A plan proposed: (what the proposer reads, the pending proposal or None when refused, the proposal).
    ``running``: the chat's live run (an amendment must carry it on from its current step)."""
    proposal = compose.check(text, fmt)
    if not proposal.ok:
        return proposal.answer(), None, proposal
    plan = proposal.plan
    assert plan is not None
    if amend:
        old = rt.lookup(running.get("plan_id", ""), running.get("plan_version", "")) if running else None
        if running is None or old is None:
            return "Not accepted: no workflow is running, so there is nothing to amend. Propose it as a new " \
                   "workflow instead.", None, proposal
        why = amend_problem(old, running, plan)
        if why:
            return f"Not accepted: {why}. Keep the current step '{running.get('current_node')}' and every step " \
                   "the run has visited, with the same ids, and propose the change again.", None, proposal
    pending: Pending = {"id": uuid.uuid4().hex[:12], "source": proposal.source, "plan_id": plan.id,
                        "name": plan.name, "steps": len(plan.task_ids), "request": " ".join(request.split())[
                            :MAX_REQUEST], "amend": str(running.get("run_id", "")) if amend and running else "",
                        "by": by, "at": time.time()}
    return "", pending, proposal


def waiting_text(pending: Pending, notes: tuple[str, ...] = ()) -> str:
    """What the proposer reads while the person decides."""
    what = "The change to the running workflow" if pending["amend"] else f"The workflow '{pending['name']}'"
    meanwhile = ("Until then the run goes on as it is." if pending["amend"] else
                 "Do not carry out its steps before it is approved; answer anything else the person asks meanwhile.")
    lines = [f"{what} passed its checks ({pending['steps']} step{'' if pending['steps'] == 1 else 's'}) and waits "
             "for the person's approval. Tell the person in one or two sentences what it will do, and that they "
             f"approve it with the Approve button or by saying \"go ahead\", or reject it with \"no\". {meanwhile}"]
    if notes:
        lines.append("Worth knowing: " + " ".join(notes[:3]))
    return "\n".join(lines)


def offer_of(rt: Runtime, pending: Any, by: str) -> tuple[Offer | None, str]:
    """The approved proposal as the step's offer (its plan adopted by the runtime), or (None, why not)."""
    if not isinstance(pending, dict) or not isinstance(pending.get("source"), dict):
        return None, "the proposal kept with the chat is unreadable"
    source = pending["source"]
    proposal = compose.check(source.get("text"), str(source.get("format", "")))
    if not proposal.ok or proposal.plan is None:
        return None, "the proposal no longer passes its checks"
    rt.adopt(proposal.plan)
    source = dict(proposal.source, request=str(pending.get("request", ""))[:MAX_REQUEST])
    return Offer(plan=proposal.plan, source=source, by=by, amend=bool(pending.get("amend"))), ""


def plan_folder(rt: Runtime) -> str:
    """Where a saved workflow goes: beside the library this chat uses (a project's own, or the user's)."""
    return os.path.dirname(os.path.abspath(rt.library.path))


def save(rt: Runtime, source: dict[str, str], request: str, name: str = "") -> tuple[bool, str]:
    """Write a workflow that ran as a DOT plan beside the library, its request as its first example; never over a
    plan of the same id.  (saved, one line for the person and the log)."""
    from ..authoring.dot_plan import to_dot

    proposal = compose.check(source.get("text"), source.get("format", ""))
    if not proposal.ok or proposal.raw is None:
        return False, "the workflow's text no longer passes its checks, so it was not saved"
    raw = dict(proposal.raw)
    pid = proposal.plan_id
    if name:
        raw["name"] = " ".join(name.split())[:80]
        pid = compose.plan_id_of(name, raw)
    examples = [e for e in raw.get("examples", []) if isinstance(e, str)]
    if request and request not in examples:
        raw["examples"] = [request, *examples]
    folder = plan_folder(rt)
    path = os.path.join(folder, f"{pid}.dot")
    library = rt.library.current
    if (library is not None and library.get(pid) is not None) or os.path.lexists(path):
        where = path if os.path.lexists(path) else "in the library"
        return False, (f"a plan with the id '{pid}' exists already ({where}); nothing was overwritten. Say \"save "
                       "this workflow as <another name>\" to keep it under another name")
    try:
        text = to_dot(pid, raw)
    except ValueError as exc:
        return False, f"it cannot be written as DOT ({exc})"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        return False, f"{path} cannot be written ({exc.strerror or exc})"
    rt.library.written()
    return True, f"saved as {path}; from now on it starts when a request asks for its job, like any plan"
