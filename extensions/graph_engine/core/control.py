"""The user's controls of a run, said in the chat: which message is one, and what it names.

Rules (documented in docs/steering.md, pinned by ``fixtures/control_messages.json``):

* A control is a whole message: after politeness ("please", "ok", "can you", "thanks", ...) the user's
  words, lower-cased and without punctuation, must be one of the forms below, word for word.  A request
  that only contains such words is not one: "stop the workflow" controls, "write a function that stops
  the workflow engine" does not.
* Each control has one canonical form (``CANONICAL``), the one the docs and the card name, and the natural
  variants people type ("cancel the workflow", "abort", "back to the fix", "use the git workflow").
* A control that names something (a step to go back to, a plan to start) carries the words as ``target``;
  the engine resolves them against the plan or the library (``find_steps``, ``find_plans``).  When they
  name nothing, a message that said what they are ("go back to the moon step", "start the teleport
  workflow", "go back to step 9") is still a control, answered with what exists; one that did not is an
  ordinary message ("go back to the office", "run the tests"), and a plan is then started only by its exact
  name ("start the Dependency Update").
* An answer is not a control: when the agent's last reply asked the user something (``asked``), a short
  answer ("end", "back", "stop", "skip") answers it; a control then needs one of the words workflow, plan
  or step ("stop the workflow", "skip this step", "workflow status": every canonical form has one).

Pure: no Agent-Zero, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

MAX_CONTROL_CHARS = 160  # a control is a short message; longer ones are requests

@dataclass(frozen=True)
class Kind:
    """A control as the person meets it: its canonical form (the docs and the card name it), the audit event it
    records, the verb of the answer when no run is active, and whether the card lists it."""
    name: str
    canonical: str
    event: str
    means: str
    verb: str = ""
    on_card: bool = False
    ends_run: bool = False


# the controls, each declared once; its natural forms are in _FORMS below, what it does in engine._CONTROLS
CONTROLS: dict[str, Kind] = {k.name: k for k in (
    Kind("stop", "stop the workflow", "plan_stopped", "the person said to stop", "stop", True, True),
    Kind("pause", "pause the workflow", "plan_paused", "the person said to pause", "pause", True),
    Kind("resume", "resume the workflow", "plan_resumed", "the person said to resume", "resume"),
    Kind("skip", "skip this step", "step_skipped", "the person skipped the step", "skip", True),
    Kind("back", "go back to <step>", "jumped_back", "the person went back to an earlier step", "go back in", True),
    Kind("retry", "retry this step", "attempts_restored", "the person gave the step its attempts back", "retry",
         True),
    Kind("restart", "restart the workflow", "plan_restarted", "the person restarted the run", "restart", True,
         True),
    Kind("start", "start the <plan name> workflow", "plan_activated", "a run started"),
    Kind("list", "list workflows", "workflows_listed", "the person asked for the workflows"),
    Kind("status", "workflow status", "status_shown", "the person asked where the run is", "report on", True),
)}
CANONICAL = {k.name: k.canonical for k in CONTROLS.values()}
KINDS = tuple(CONTROLS)


@dataclass(frozen=True)
class Control:
    kind: str  # one of KINDS
    said: str  # the user's words, as written (trimmed)
    target: str = ""  # the step or plan the message names (normalised words), for "back" and "start"
    explicit: bool = True  # the target was said as one ("the fix step", "the git workflow"): a control even
    # when it names nothing; else the message is a control only when the target names a step or a plan
    node: str = ""  # the step to go back to, by its id (a control pressed in the web UI names it so)
    by: str = ""  # "button": pressed in the web UI (the audit event says so); "": said in the chat


def words(text: str) -> str:
    """Lower-case words separated by single spaces; punctuation other than inner apostrophes is a space."""
    text = text.lower().replace("’", "'")
    text = re.sub(r"[^\w']+|(?<!\w)'|'(?!\w)", " ", text)
    return " ".join(text.split())


_LEAD = (r"(?:(?:ok|okay|so|hey|hi|please|pls|now|then|just|alright|right|well|actually|and|but|kindly|"
         r"can you|could you|would you|will you|i want you to|i want to|i'd like to|id like to|"
         r"i would like to|let's|lets|let us|go ahead and)\s)*")
_TAIL = r"(?:\s(?:please|pls|now|thanks|thank you|thx|for now|right now|then|for me|immediately|asap|ok|okay))*"
_THE = r"(?:(?:the|this|that|my|our|your|current|active|the current|this current)\s)?"
_WF = r"(?:workflow|plan|run|htn plan)"
_WFS = r"(?:workflow|plan)"  # the words that name a plan to start
_OBJ = rf"(?:{_THE}{_WF})"
_STEP = r"(?:step|one|task|stage)"
_HERE = r"(?:this|the|that|current|the current|this current)"

# (kind, pattern): the first whole-message match wins; the order puts the specific forms first
_FORMS: list[tuple[str, str]] = [
    ("stop", rf"(?:stop|cancel|abort|quit|end)(?:\s(?:{_OBJ}|it))?"),
    ("stop", rf"(?:stop|quit)\s(?:following|running|using|doing)\s{_OBJ}"),
    ("stop", rf"(?:terminate|halt|kill|exit|abandon|drop|forget|leave)\s{_OBJ}"),
    ("stop", rf"(?:get out of|break out of|no more)\s{_OBJ}"),
    ("pause", rf"(?:pause|suspend|freeze|hold)(?:\s(?:{_OBJ}|it))?|put\s(?:{_OBJ}|it)\son hold"),
    ("resume", rf"(?:resume|unpause|unfreeze)(?:\s(?:{_OBJ}|it))?|(?:continue|restart)\s{_OBJ}\safter the pause"),
    ("resume", rf"(?:continue|carry on with|go on with|pick up)\s{_OBJ}\s?(?:again)?"),
    ("skip", rf"skip(?:\s(?:{_HERE}\s)?{_STEP})?(?:\sit)?|skip\s(?:it|that|this)|skip\s{_HERE}\s{_STEP}\sfor now"),
    ("retry", rf"(?:retry|redo|repeat)(?:\s(?:{_HERE}\s)?{_STEP}|\sit|\sthat|\sthis)?"),
    ("retry", rf"try\s(?:(?:{_HERE}\s)?{_STEP}\s|it\s|that\s|this\s)?again|give\s(?:it|{_HERE}\s{_STEP})\s"
              r"(?:another|one more)\s(?:try|go|shot)|(?:reset|restore)\s(?:the\s)?attempts"),
    ("restart", rf"(?:restart|reset|rerun|re run)\s{_OBJ}(?:\sfrom\s(?:the\s)?(?:start|beginning|scratch|top))?"),
    ("restart", rf"(?:start|begin|run)\s(?:{_OBJ}\s)?(?:over|again|from scratch|from the (?:start|beginning|top))"
                rf"|start over|begin again|start from (?:the )?(?:start|beginning|scratch|top)"),
    ("back", r"(?:(?:go|jump|get|move|step|head)\s)?back\s(?:up\s)?to\s(?:the\s)?(?P<t>.+?)"),
    ("back", r"(?:redo|repeat|rerun|re run|return to|restart from|start again from|start over from|resume from|"
             r"(?:go|jump)\sto)\s(?:the\s)?(?P<t>.+?)"),
    ("back", r"(?:go back|step back|back)(?:\s(?:one|a)\sstep)?|(?:go\sto\s)?(?:the\s)?previous\sstep"),
    ("start", rf"(?:start|use|run|begin|launch|follow|switch to|apply|activate|execute|kick off|go with|load)\s"
              rf"(?:the\s|a\s)?(?P<t>.+?)\s{_WFS}"),
    ("start", rf"(?:start|use|run|begin|launch|follow|switch to|apply|activate|execute|kick off|load)\s"
              rf"(?:the\s|a\s)?{_WFS}\s(?:called\s|named\s)?(?P<t>.+?)"),
    ("start", r"(?:start|use|run|launch|follow|switch to|activate)\s(?:the\s)?(?P<t>.+?)"),  # the exact name only
    ("list", rf"(?:list|show|show me|display|print|tell me|give me|what are)(?:\s(?:all|the|your|available|all the|"
             rf"the available|all your|all available))?\s(?:workflows|plans|{_WF}s)(?:\s(?:you have|available|"
             r"you can run|you know|there are|i can use|you can use))?"),
    ("list", r"(?:which|what)\s(?:workflows|plans)(?:\s(?:do you have|are there|are available|can you run|do you "
             r"know|you have|exist|can i use|can you use|are|do you support))?|(?:available\s)?workflows|"
             r"workflow list"),
    ("status", rf"(?:workflow|plan)\sstatus|status(?:\sof\s{_OBJ})?|(?:what is|what's|whats|show|show me|give me)\s"
               rf"(?:the\s)?(?:(?:workflow|plan)\s)?(?:status|progress)(?:\sof\s{_OBJ})?"),
    ("status", rf"where are we(?:\sat)?(?:\sin\s{_OBJ})?|what step are we (?:on|at)|which step are we (?:on|at)|"
               rf"how far (?:are we|along are we)(?:\sin\s{_OBJ})?|what(?:'s| is) the current step|progress"),
]
_COMPILED = [(kind, re.compile(f"{_LEAD}(?:{pattern}){_TAIL}")) for kind, pattern in _FORMS]
_DEICTIC = frozenset(("this", "that", "it", "this step", "that step", "current step", "the current step", "one"))
_NOT_A_TARGET = frozenset(("", "me", "you", "next", "next one", "following"))  # "go to the next step": a go-on


# The word a control's form starts with, after the politeness words: a message whose first other word is not
# one of these is no control, found in a few set lookups (most messages are requests: they cost this, not the
# forms).  A prefilter only: a message it lets through is then matched against every form.
_FIRST = frozenset((
    "stop cancel abort quit end terminate halt kill exit abandon drop forget leave get break no pause suspend "
    "freeze hold put resume unpause unfreeze continue restart carry go pick skip retry redo repeat try give reset "
    "restore rerun re start begin run jump move step head back return previous use launch follow switch apply "
    "activate execute kick load list show display print tell what which workflows available workflow plan "
    "status what's whats where how progress").split())
_POLITE = frozenset(("ok okay so hey hi please pls now then just alright right well actually and but kindly can "
                     "could would will you i want to i'd id like let's lets let us ahead the").split())
_PUNCTUATION = ".,!?;:'\"()[]-’"


def _may_be_control(message: str) -> bool:
    rest = message[:48].lower()  # a control's politeness words fit in its first 48 characters
    while True:  # word by word: most messages are decided by their first word
        parts = rest.split(None, 1)
        if not parts:
            return False
        word = parts[0].strip(_PUNCTUATION)
        if word and word not in _POLITE:
            return word in _FIRST
        if len(parts) == 1:
            return False
        rest = parts[1]


SLASH = re.compile(r"/workflows?(?:\s+(.{0,150}))?", re.IGNORECASE | re.DOTALL)  # "/workflow <name>"; alone: the list
_SAYS_WORKFLOW = frozenset(("workflow", "workflows", "plan", "plans", "step", "steps"))


def parse(message: str, asked: bool = False) -> Control | None:
    """The control a message is, or None (most messages); ``asked``: the agent's last reply asked the user a
    question, so the message is a control only when it says workflow, plan or step."""
    if not message or len(message) > MAX_CONTROL_CHARS:
        return None
    slash = SLASH.fullmatch(message.strip())
    if slash is not None:  # "/workflow <name>": start that plan (a slash command, the words are its name)
        target = _target(words(slash.group(1) or ""))
        return Control("start", message.strip()[:200], target, True) if target else Control("list", message.strip())
    if not _may_be_control(message):
        return None
    text = words(message)
    if not text or (asked and _SAYS_WORKFLOW.isdisjoint(text.split())):
        return None
    for kind, rx in _COMPILED:
        m = rx.fullmatch(text)
        if m is None:
            continue
        target = _target(m.groupdict().get("t") or "")
        if kind == "back" and "t" in m.groupdict() and m.group("t") is not None:
            if target in _DEICTIC:
                return Control("retry", message.strip()[:200])
            if target in ("start", "beginning", "scratch", "top"):
                return Control("restart", message.strip()[:200])
            if target in _NOT_A_TARGET:
                continue
        return Control(kind, message.strip()[:200], target, _explicit(kind, m))
    return None


def _explicit(kind: str, m: re.Match[str]) -> bool:
    """The words around the target say what it is: "the <name> workflow", "the <name> step", "step 2"."""
    raw = m.groupdict().get("t")
    if raw is None:
        return True
    if kind == "back":
        parts = raw.split()
        return parts[-1] in ("step", "stage") or re.fullmatch(r"step\s(?:number\s)?\d{1,4}", raw) is not None
    return m.string[m.end("t"):].split()[:1] in (["workflow"], ["plan"])


def _target(raw: str) -> str:
    """The words that name a step or a plan: articles and a trailing 'step' / 'workflow' left out."""
    parts = raw.split()
    while parts and parts[0] in ("the", "a", "an", "my", "our", "your"):
        parts.pop(0)
    while parts and parts[-1] in ("step", "stage", "task", "workflow", "plan", "again", "please"):
        parts.pop()
    return " ".join(parts)


# ── resolving what a control names ──────────────────────────────────────────

_SMALL = frozenset(("the", "a", "an", "to", "of", "and", "step", "stage", "workflow", "plan", "for", "in", "on"))


def _key_words(text: str) -> list[str]:
    return [w for w in words(text.replace("_", " ")).split() if w not in _SMALL]


def names(target: str, candidates: Iterable[tuple[str, str]], exact_only: bool = False) -> list[str]:
    """The ids among ``(id, name)`` pairs that ``target`` names: an exact id or name first; else every
    candidate whose name (or id) holds all of the target's words, whole or as the start of a word
    ("reproduce" names "Reproduce the issue", "fix" names "Implement the fix")."""
    said = _key_words(target)
    if not said:
        return []
    pairs = list(candidates)
    exact = [cid for cid, name in pairs if said in (_key_words(cid), _key_words(name))]
    if exact or exact_only:
        return exact
    found = []
    for cid, name in pairs:
        have = _key_words(name) + _key_words(cid)
        if all(any(h == w or (len(w) >= 3 and h.startswith(w)) for h in have) for w in said):
            found.append(cid)
    return found


ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
            "eighth": 8, "ninth": 9, "tenth": 10}
_NUMBERED = re.compile(r"(?:step\s)?(?:number\s)?(\d{1,4})|(" + "|".join(ORDINALS) + r"|last)(?:\sstep)?")


def find_steps(plan, target: str) -> list[str]:
    """The steps (task nodes and human gates) of a plan that ``target`` names, main steps first: by name or
    id, or by number on the main path ("step 2", "the first step", "the last step")."""
    numbered = _NUMBERED.fullmatch(target)
    path = plan.success_path
    if numbered:
        n = int(numbered.group(1)) if numbered.group(1) else ORDINALS.get(numbered.group(2), len(path))
        return [path[n - 1]] if 1 <= n <= len(path) else []
    nodes = [plan.nodes[nid] for nid in plan.resting]
    order = plan.success_index
    nodes.sort(key=lambda n: (order.get(n.id, len(order)), n.id))
    return names(target, ((n.id, n.name) for n in nodes))


def find_plans(listing: Sequence[tuple[str, str]], target: str, exact_only: bool = False) -> list[str]:
    """The plans among ``(id, name)`` pairs that ``target`` names."""
    return names(target, listing, exact_only)
