"""Which plan, if any, a user's message starts.

Rules (documented in docs/matching.md, pinned by tests):

* Only the user's own words count, lower-cased, white space folded.
* A trigger phrase matches on word boundaries: "debug" does not match "debugger", and "refactor" does not
  match the branch name "refactor/db-layer" (a "/" joins words too).
* ``hits`` = number of distinct trigger phrases found.  ``domain_ok`` = the plan
  lists no domains, or the belief-state tracker's domain is one of them.
* score = hits + 1 when the plan lists domains and ``domain_ok`` (the old
  selector's score).  A plan fires when hits >= 1 and score >= its
  ``trigger_threshold`` and, if the domain does not agree, the triggers alone
  reach the threshold (so a one-trigger plan may fire in any domain, a
  two-point plan needs two phrases or one phrase and its domain).
* A ``strong_triggers`` phrase is specific enough to start the plan on its own,
  in any domain: it counts ``trigger_threshold`` points.
* The org kernel's filter applies first: None allows all, [] allows nothing.
* Ties: higher score, then the phrase found earliest in the message (people
  name the task first), then more matched characters, then plan id (A-Z).
* Domain unknown (``domain=None``: the tracker has not read this message yet)
  means the trigger points alone must reach the threshold: only a match that
  no domain could undo is returned (a "decisive" match).
* A continuation ("go on", "yes", "continue", ...) is never a new request.
* Mentioning a topic is not asking for the work: phrases in a sentence that
  asks about something ("what is a docker volume?", "how do I create a
  branch?", "explain git rebase") or asks for a text about it ("a poem about
  refactoring", "recommend a book on docker") do not count.  Questions about
  the user's own trouble ("what went wrong last night?", "why is the build
  failing?") are requests.  See ``request_text``.
"""

from __future__ import annotations

import re
from typing import Iterable

from ..core.message import Match
from ..core.model import Plan

MAX_MESSAGE_CHARS = 20_000  # the words that decide; longer pastes are mostly logs or code


def normalise(message: str) -> str:
    return " ".join(message[:MAX_MESSAGE_CHARS].lower().split())


# A sentence (or a clause after "and then", ";", ...) that asks about a topic instead of asking for work.
_LEAD = r"^(?:(?:hey|hi|ok|okay|so|well|please|quick question|just curious),? )*(?:(?:can|could|would|will) you (?:please )?)?"
_MENTION = re.compile(_LEAD + r"(?:"
    r"what(?:'s|s| is| are| was| were) (?:a|an|the|some)? ?(?!wrong\b|going on\b|happening\b|failing\b|broken\b)"
    r"|what(?:'s| is) the (?:difference|point|purpose|use)\b"
    r"|what (?:does|do|did) .*\b(?:mean|do|does|stand for|contain|include|look like)\b|what makes\b"
    r"|how (?:does|do|did|is|are|can|could|should|would|often|much|many|long) "
    r"|why (?:do|does|would|should|did|use)\b"
    r"|why (?:is|are) (?!.*\b(?:fail|crash|broke|error|wrong|slow|stuck|missing|empty|down|hang|not)).*"
    r"|(?:explain|describe|define|compare|teach me|tell me (?:about|what|how|why|a|an))\b"
    r"|(?:a|an) [^,]*, (?:but )?(?:why|how|how come)$"  # "an error in floating point, why?": about a topic
    r"|translate\b|how do (?:you|i) say\b|(?:english|spanish|german|french|italian|portuguese|dutch|japanese|"
    r"chinese|russian|polish|turkish|arabic|hindi) for\b"
    r"|summari[sz]e (?:(?:this|that|the|a|an|these|those|my) )?(?:\w+ )?(?:article|text|paragraph|book|story|chapter|"
    r"video|paper|essay|email|e-mail|thread|conversation|page|post|news|document|meeting|film|movie|podcast|lecture|"
    r"speech|poem|plot|history)s?\b"
    r"|(?:should|could|would|can|do|must|will) (?:i|we|one)\b(?! (?:get|have)\b)|(?:is|are|will) (?:it|there|this|that)\b"
    r"|will (?:my|our|the|this|that) "
    r"|(?:is|are|does|do) (?!you\b)[\w.+#-]+ (?:\w+ )?(?:better|worse|faster|slower|good|bad|worth|safe|free|"
    r"necessary|needed|required|possible|secure|stable)\b"
    r"|(?:recommend|suggest)\b|any (?:ideas|tips|suggestions|thoughts|recommendations)\b|(?:difference|differences) between\b|(?:when|which|who) "
    r"|(?:write|compose|make up|give me|tell me|draft) (?:me )?(?:a|an|some|\d+)? ?(?:short |funny |little )?"
    r"(?:poem|story|haiku|song|joke|limerick|essay|rap|sonnet|tweet|blog post|article|quote|riddle|slogan|slide|"
    r"presentation|letter|memo|speech|e-?mail|reply|message|note|announcement|newsletter)s?\b"
    r"|what (?:\w+ ){1,3}(?:exist|are there|are available)\b|what \w+ (?:do|would|should) (?:you|i|we) "
    r"|summari[sz]e (?:this|that|it)\b(?! (?:log|error|output|trace|crash|failure))"
    r"|(?:a|an|some)? ?(?:short |funny |little )?(?:poem|story|haiku|song|joke|limerick|essay|rap|sonnet|riddle)s? "
    r"(?:about|on|for)\b"
    r")")
_ABOUT = re.compile(r"\b(?:poem|story|haiku|song|joke|limerick|essay|article|blog post|talk|book|course|tutorial|"
                    r"video|quote|quiz|history|overview|introduction|lecture) (?:about|on|of)\b")
# clause breaks: sentence ends, "and then"-like joins, and a question tagged on after a comma ("..., is it safe?")
_TAGGED = (r", (?=(?:is|are|was|were|will|would|can|could|should|do|does|did) (?:it|i|we|my|our|this|that|there|you|"
           r"they)\b|(?:how|what|which|why|who|where|when)(?:'s)? |(?:suggest|recommend)\b|"
           r"any (?:ideas|tips|suggestions|thoughts|recommendations)\b)")
# a full stop, colon or semicolon ends a sentence only before white space or the end: "1.2gb", "api/views.py",
# "https://..." and "10:30" are words
_CLAUSES = re.compile(r"(?:[.;:]+(?=\s|$)|[?!\n]+)[.?!;:\n]*\s*|,? (?:and then|then|and also|but) |" + _TAGGED)
_TAG = re.compile(_TAGGED)


# A message that holds the work back and asks only for words ("no need to fix it, I'm just noting it"), that
# reports work already done ("FYI the container is up again", "the refactor is done, just wanted to share"), that
# vents ("i hate merge conflicts so much") or that plans work for later ("next sprint we'll refactor auth") asks
# for no work now, whatever its words.
_WORK = (r"(?:fix|touch|chang|run\b|merg|refactor|updat|upgrad|writ|build|deploy|look\b|modify|edit|back(?:up|\b)|"
         r"restor|push|commit|rebuild|install|do\b|creat|start\b|implement|migrat|mov(?:e|ing)\b|copy\b|delet|"
         r"containeri[sz])")  # (whole words where a longer one is no order: "docker", "backend", "startup")
_NOT_ORDER = (r"(?!\w*(?:ing|ed|ions?|ments?)\b|ne\b)\w*\b(?![':])"  # "refactoring", "pushed", "migration": none
              r"(?! (?:conflicts?|scripts?|logs?|files?|errors?|jobs?|process|times?)\b)")  # nouns
_ORDER_FIRST = re.compile(r"^(?:please |pls |plz |can you |could you |can u |could u |would you |i need you to )?(?:" +
                          _WORK + r"|make|ensure|check|get|set|put|bring|split|wire|hook)" + _NOT_ORDER)
_ORDER_LATER = re.compile(r"(?:[,.;:!?\u2014-] |\b(?:and|so|then|now) )(?:please |pls |now |then |just )?(?:" + _WORK +
                          r"|(?:verify|check|test|add|remove|clean|investigate|find|make|ensure|send|tag|rename|"
                          r"resolve|review|repair|debug|patch|bring|split|wire|hook|connect|integrate|set up|put)\b"
                          r"(?! (?:are|is|was|were|pass\w*|fail\w*|green|red)\b))"
                          + _NOT_ORDER)  # an order after a first clause ("..., fix it")
_HOLD = re.compile(r"\b(?:don'?t|do not|no need to|you don'?t need to|hold off(?: on)?|not asking you to)\b"
                   r"(?: \w+){0,2}? " + _WORK)
# the user will do the work and asks for the words ("show me the commands, I'll type them myself")
_SELF = re.compile(r"\b(?:i|we)(?:'ll| will| can| want to) (?:do|type|run|handle|apply|make|paste|try) "
                   r"(?:(?:it|them|this|that|those|the \w+) )?(?:myself|ourselves|by hand)\b")
_ONLY_WORDS = re.compile(r"\b(?:just|only) (?:want|need|tell|asking|noting|curious|wondering|looking for|your|"
                         r"explain|describe|say)\b|\bwhat would\b|\btell me\b|\?|\bi'?m just\b|\bopinion\b")
# asks for the work itself ("can you explain ..." asks for words)
_ASKS = re.compile(r"\b(?:go ahead|asap|right away|right now)\b|\b(?:can|could|would) (?:you|u) (?:please |just )?"
                   r"(?!explain|tell|describe|say|clarify|walk me|help me understand|summari[sz]e|comment|give me your)")
_REPORT = re.compile(r"^(?:fyi|update|status|just so you know|heads[ -]up|for the record|roadmap note|imo|imho|"
                     r"in my opinion)\b|"
                     r"^(?:(?:i|we|he|she|they) )?(?:just |already |finally |also )?(?:(?!\w*eed\b|embed\b|shed\b)\w{2,}ed|"
                     r"went|built|rebuilt|wrote|ran|made|did|took|sent)\b|"
                     r"^(?:i|we)(?:'ve| have)? already\b|\bjust a heads up\b|"
                     r"^(?:i|we|\w+) (?:just |finally |already )?(?:pushed|merged|fixed|deployed|rebuilt|upgraded|"
                     r"updated|restored|backed up|refactored|finished|shipped|released|rebased)\b|"
                     r"\b(?:landed|shipped|went live|is live) (?:on|last|yesterday|this|today)\b|"
                     r"\b(?:is|are|was|were|'s) (?:now |already |all )?(?:done|finished|sorted|resolved)\b|"
                     r"\bsorted now\b|\ball (?:good|sorted|done) now\b|\bjust wanted to (?:share|let you know|say|tell you)\b|"
                     r"\bthanks (?:though|anyway|anyways)\b|\bno action needed\b|"
                     r"^(?:ugh|argh|sigh|meh|omg)\b|\bi (?:hate|love|can'?t stand)\b|\b(?:so|sick and) tired of\b|"
                     r"^(?:finished|done|fixed|merged|pushed|deployed|shipped|sorted)\b|\bthanks for (?:the|your|all)\b|"
                     r"\b(?:is|are) (?:now |all )?gone\b")
_LATER = re.compile(r"\b(?:next (?:sprint|week|month|quarter|year|release)|later this (?:week|month|quarter|year)|"
                    r"on the roadmap|roadmap|in q[1-4]|we(?:'re| are) planning to|we plan to|we'?ll probably|someday|"
                    r"(?:tomorrow|tonight|later) (?:i|we)'?ll|(?:i|we)'?ll (?:need|have) to|(?:we|i) might|eventually|no rush|"
                    r"(?:he|she|they)(?:'ll| will)|once \w+ (?:is|are|gets?) back|"
                    r"(?:i|we)'?ll need (?:a|an|some)|once (?:the|our|this|it)\b.{0,40}\b(?:is|are) (?:out|done|shipped|over))\b")
# ... and says who will do it then: planned, whatever trouble it names ("we'll look into the 502s next week")
_PLANNED_WHO = re.compile(r"\b(?:we|i|they|the team)(?:'ll| will| are going to|'re going to| plan to| decided)\b")
_PLANNED_WHEN = re.compile(r"\b(?:next (?:sprint|week|month|quarter|year|release)|tomorrow|later this|retro|someday)\b")
_PLANNED = re.compile(r"\b(?:if|should|once|when) (?:it|the \w+|this|that) (?:comes? back|happens? again|recurs?)\b|"
                      r"\bnot (?:now|yet|before|until)\b")
# ... or says the trouble it names is over ("the crash is gone, thanks for the hints")
_SOLVED = re.compile(r"\b(?:is|are|was|were|'s) (?:now |all |finally )?(?:gone|fixed|resolved|sorted)\b|"
                     r"\b(?:works|working) (?:again|now)\b|\bsorted now\b")
_UNSOLVED = re.compile(r"\b(?:but|still|however|again|back)\b")
_NOW = re.compile(r"\b(?:please|pls|plz|can you|could you|can u|could u|would you|asap|right away|go ahead|"
                  r"before you)\b")
_WANTS = re.compile(r"\b(?:need|want|would like) (?:someone|somebody|you|it|this|that|them)\b")
_TROUBLE_WORDS = re.compile(r"\b\w*(?:error|exception)\b|(?<!#)\b[45]\d\d\b|fail|broke|crash|wrong")  # ("#478": an issue)
_TROUBLE = re.compile(_TROUBLE_WORDS.pattern + r"|n't\b|\bnot\b")
# a report that goes on or asks is still open
_OPEN = re.compile(r"\bbut\b(?! (?:it|they|everything) (?:works|work|runs|run)\b)|"
                   r"\bstill\b(?! (?:all )?(?:pass|passes|passing|green|works|working|good|fine|up)\b)|\?")
# says no work is needed ("imo the auth module doesn't need refactoring"), unless it names trouble
_NO_NEED = re.compile(r"\b(?:doesn'?t|don'?t|does not|do not|no) need (?:to be |any |for )?\w+")
# an order not to do it yet ("don't merge anything into main until after the demo")
_PROHIBIT = re.compile(r"^(?:please )?(?:don'?t|do not|never)\b.*\b(?:until|before|unless)\b")


def asks_no_work(text: str) -> bool:
    """A normalised message that holds the work back, reports it done, vents or plans it for later (see
    above)."""
    if _ORDER_FIRST.match(text):
        return False
    if _HOLD.search(text):
        if _PROHIBIT.match(text):
            return not _ORDER_LATER.search(text)
        return bool(_ONLY_WORDS.search(text)) and not _ASKS.search(text)
    if _NOW.search(text):
        return False
    if _SELF.search(text):
        return True
    if _ORDER_LATER.search(text):
        return False
    over = bool(_SOLVED.search(text)) and not _UNSOLVED.search(_SOLVED.sub(" ", text))
    if _NO_NEED.search(text) and not _TROUBLE_WORDS.search(text) and not _OPEN.search(text):
        return True
    who = _PLANNED_WHO.search(text)  # ... then when (one linear search each: no ".*" to backtrack over a long text)
    planned = _PLANNED.search(text) or who and _PLANNED_WHEN.search(text, who.end())
    return bool(planned or over or (_REPORT.search(text) or _LATER.search(text))
                and not _TROUBLE.search(text) and not _OPEN.search(text))


def request_text(text: str) -> str:
    """The parts of a normalised message that ask for work: each sentence that only asks about a topic
    (a question, an explanation, a poem about it) is left out, so its trigger phrases do not count; nothing of
    a message that asks for no work now (``asks_no_work``)."""
    if asks_no_work(text):
        return ""
    if not _MENTION.search(text) and not _ABOUT.search(text) and "?" not in text and not _TAG.search(text):
        return text  # the usual case: no sentence to leave out
    kept, dropped, quote, asked = [], False, "", False
    for c in _CLAUSES.split(text):
        if not c:
            continue
        if quote:  # inside a quote that such a sentence introduced: left out up to its end
            quote = "" if quote in c else quote
            continue
        if dropped and c[0] in "'\"`":  # what such a sentence asks about ("summarise this: '...'")
            quote = "" if c[0] in c[1:] else c[0]
            continue
        dropped = bool(_MENTION.match(c) or _ABOUT.search(c))
        if dropped:
            asked = True
        else:
            kept.append(c)
    if asked and not _TROUBLE.search(text) and not _ORDER_LATER.search(text) and not any(_ORDER_FIRST.match(c) or _NOW.search(c) or _WANTS.search(c)
                                                        for c in kept):
        return ""  # what is left only sets the scene for the question ("we open a new branch office, suggest names")
    return " ".join(" ".join(kept).split())


def phrase_start(phrase: str, text: str) -> int:
    """Where a trigger phrase first occurs in a normalised text (words separated by single spaces) with no
    word character (``\\w``: a letter, digit or "_") and no "/" right before or after it (a phrase inside a path
    or a branch name, "refactor/db-layer", is not the user's word); -1 when it does not.  The same answer as
    searching ``(?<![\\w/])word\\s+word...(?![\\w/])``, without a regular expression per phrase."""
    needle = " ".join(phrase.lower().split())
    if not needle:
        return -1
    size, n = len(text), len(needle)
    i = text.find(needle)
    while i >= 0:
        j = i + n
        if (i == 0 or not _bound(text[i - 1])) and (j == size or not _bound(text[j])):
            return i
        i = text.find(needle, i + 1)
    return -1


def _bound(ch: str) -> bool:
    """A character that joins a phrase to the text beside it: what \\w matches in a str pattern, or "/"."""
    return ch.isalnum() or ch == "_" or ch == "/"


def trigger_hits(phrases: tuple[str, ...], text: str) -> tuple[str, ...]:
    return tuple(t for t in phrases if t and phrase_start(t, text) >= 0)


def score_plan(plan: Plan, text: str, domain: str | None) -> Match | None:
    weak = trigger_hits(plan.triggers, text)
    strong = trigger_hits(plan.strong_triggers, text)
    if not weak and not strong:
        return None
    domain_ok = not plan.domains or (domain is not None and domain in plan.domains)
    points = len(weak) + len(strong) * plan.trigger_threshold
    score = points + (1 if plan.domains and domain_ok else 0)
    if score < plan.trigger_threshold:
        return None
    if not domain_ok and points < plan.trigger_threshold:
        return None
    hits = strong + weak
    first = min(phrase_start(h, text) for h in hits)
    return Match(plan=plan, score=score, hits=hits, domain_ok=domain_ok, first=first)


def rank(m: Match) -> tuple:
    """The order of matches: higher score, earliest phrase, more matched characters, plan id."""
    return -m.score, m.first, -sum(len(h) for h in m.hits), m.plan.id


_TOKEN = re.compile(r"\w+")


class TriggerIndex:
    """The plans a message may start, found in one pass over the message's words.

    A phrase matches only as whole words separated by white space, so each of its words made of word
    characters alone is a whole token of any message it matches: the phrase is filed under the one of those
    words that the fewest plans use so far.  A phrase without such a word ("c++", "e-mail") is filed under
    its first word and looked for as text.  The candidates are a superset of the plans that match; each is
    then scored by ``score_plan``, so the result is the one a scan of every plan gives."""

    __slots__ = ("_words", "_odd", "_filed")

    def __init__(self) -> None:
        self._words: dict[str, dict[str, None]] = {}  # word -> plan ids (an ordered set)
        self._odd: dict[str, dict[str, None]] = {}
        self._filed: dict[str, list[tuple[bool, str]]] = {}  # plan id -> where its phrases are filed

    def add(self, plan_id: str, phrases: Iterable[str]) -> None:
        """File a plan's phrases (lower-cased, as plans hold them)."""
        self.remove(plan_id)
        filed, words = [], self._words
        for phrase in phrases:
            key, fewest = "", 0
            for word in phrase.split():
                if word.replace("_", "a").isalnum():  # word characters only (\\w+)
                    n = len(words.get(word, ()))
                    if not key or n < fewest or (n == fewest and len(word) > len(key)):
                        key, fewest = word, n
            if key:
                words.setdefault(key, {})[plan_id] = None
                filed.append((False, key))
            elif phrase.split():
                first = phrase.split()[0]
                self._odd.setdefault(first, {})[plan_id] = None
                filed.append((True, first))
        self._filed[plan_id] = filed

    def remove(self, plan_id: str) -> None:
        for odd, word in self._filed.pop(plan_id, ()):
            table = self._odd if odd else self._words
            ids = table.get(word)
            if ids is not None:
                ids.pop(plan_id, None)
                if not ids:
                    del table[word]

    def candidates(self, text: str) -> set[str]:
        found: set[str] = set()
        words = self._words
        for token in set(_TOKEN.findall(text)):
            ids = words.get(token)
            if ids:
                found.update(ids)
        for word, ids in self._odd.items():
            if word in text:
                found.update(ids)
        return found


def names_plan(plan: Plan, message: str) -> bool:
    """The message asks for work in at least one of the plan's trigger phrases."""
    text = request_text(normalise(message))
    return bool(trigger_hits(plan.triggers, text) or trigger_hits(plan.strong_triggers, text))


# Messages that only say "carry on": a run in progress continues, whatever domain the tracker gives them.
# A message is a continuation when every word is one of these and one of them says to go on.
CONTINUATION_WORDS = frozenset((
    "continue", "go", "on", "ahead", "proceed", "carry", "keep", "going", "resume", "next", "step", "yes", "yeah",
    "yep", "y", "ok", "okay", "sure", "alright", "fine", "right", "good", "great", "sounds", "do", "it", "please",
    "thanks", "thank", "you", "lets", "let's", "with", "the", "workflow", "then", "now", "and",
))
GO_ON_WORDS = frozenset(("continue", "go", "proceed", "carry", "keep", "resume", "next", "yes", "yeah", "yep", "y",
                         "ok", "okay", "sure", "alright", "do"))


def is_continuation(message: str) -> bool:
    """The message only asks to carry on ("go on", "ok, continue", "yes please"): letter case and punctuation
    do not matter; any other word (a file, a task) makes it something else."""
    words = re.sub(r"[^\w' ]+", " ", message[:200].lower()).split()
    return bool(words) and len(words) <= 8 and all(w in CONTINUATION_WORDS for w in words) and \
        any(w in GO_ON_WORDS for w in words)
