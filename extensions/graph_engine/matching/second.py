"""A second opinion from Agent-Zero's utility model, for what matching cannot settle by itself.

Asked at most once per new user message, and only when matching is not sure (``decide.Verdict.close``), cannot
read the message (``reads_as_english`` is False: another language), or has no meaning model yet (it is still
loading).  Never for a control, a tool result, or a message matching is sure of (small talk, a clear request).

The question lists the candidate plans (every plan the agent may run, for a message in another language; else
the plans near the message), one line each, and ``none``; the answer must be one of those labels, alone
(quotes, backticks, a trailing full stop and a leading "label:" are forgiven).  Anything else is no answer,
and matching's own decision stands.  This module only words the question and reads the answer; the host
asks, with a timeout.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

NONE = "none"
MAX_CANDIDATES = 40  # plans listed in one question (a library of more lists the nearest)
MAX_MESSAGE = 2_000  # characters of the message quoted
MAX_LINE = 240  # characters of a plan's line
MAX_ANSWER = 200  # an answer longer than this is not a label

SYSTEM = (
    "You route a user's chat message to the workflow an AI agent should run for it. Reply with exactly one "
    "label from the list and nothing else. Reply none when the message does not ask the agent to do that "
    "workflow's job now: a question about a topic, small talk, a report of work already done, work planned for "
    "later or for someone else, or an order not to do it. The message may be in any language.")

# common words of English, and of the languages users most often write to the agent in besides it; a message
# whose function words are mostly another language's is read by the utility model, not the local matcher
ENGLISH = frozenset("""the a an and or but to of in on at for with from by about as into is are was were be been it
this that these those i me my we our you your he she they them their what which who how why when where can could
would should will do does did not no yes please fix make get run add update check help need want let all some any
there here have has had just so if then than also only very new old again now today why because while after
before over under up down out off one two file files code error bug test tests branch""".split())
FOREIGN = frozenset("""der die das und ist nicht ein eine einen dem den des mit von zu auf für bitte ich du wir ihr sie
es im am beim zum zur kannst kann können wie was warum wo wenn dass oder aber auch noch schon nach bei aus mein
meine dein deine unser diese dieser dieses el la los las un una unos unas y es son en por para con del al lo que
de se su sus mi mis tu pero como más muy este esta estos estas puedes puede hacer favor hoy ayer le les et est
une des du au aux avec pour dans sur pas ce cette ces mon ma mes ton ta tes nous vous ils elles je tu qui peux
peut faire merci aujourd hier o os as um uma uns umas em no na nos nas do da dos das ao à com por para não é são
meu minha seu sua você vocês ele ela eles elas já ontem hoje pode fazer obrigado il lo gli le di della dello
degli delle per con non che sono mio mia tuo tua questo questa puoi può fare grazie het een en van de is niet
op te met voor dat je ik wij jullie zij mijn jouw deze dit kun kan maak bitte""".split()) - ENGLISH
_WORD = re.compile(r"[^\W\d_]+")
_CODE = re.compile(r"`[^`]*`|\S*[/\\._=:@#]\S*")  # paths, file names, identifiers, quoted code: not language


def reads_as_english(text: str) -> bool:
    """Whether the local matcher can read the message: mostly Latin letters, and not more function words of
    another language than of English (code, paths and names do not count)."""
    sample = text[:MAX_MESSAGE]
    if sample.isascii() and len(FOREIGN.intersection(sample.lower().split())) < 2:
        return True  # most messages: ASCII, with fewer than two other languages' function words (a quick look)
    if not sample.isascii():
        letters = [c for c in sample if c.isalpha()]
        if letters and sum(1 for c in letters if c < "\u0250") < 0.7 * len(letters):
            return False
    words = [w for w in _WORD.findall(_CODE.sub(" ", sample.lower())) if len(w) > 1 or w in "aoyeé"]
    other = sum(map(FOREIGN.__contains__, words))
    return other < 2 or other <= sum(map(ENGLISH.__contains__, words))


def _line(plan_id: str, name: str, description: str) -> str:
    first = re.split(r"(?<=[.!?])\s", " ".join(description.split()), maxsplit=1)[0] if description else ""
    text = f"- {plan_id}: {name}" + (f". {first}" if first and first != name else "")
    return text if len(text) <= MAX_LINE else text[:MAX_LINE - 1].rstrip() + "…"


def question(candidates: Sequence[tuple[str, str, str]], message: str) -> tuple[str, str]:
    """(system, message) for the utility model: the candidate plans as (id, name, description), and the user's
    message."""
    lines = [_line(*c) for c in candidates[:MAX_CANDIDATES]]
    quoted = message[:MAX_MESSAGE].replace('"""', "'''")
    body = ("Workflows:\n" + "\n".join(lines) + f"\n- {NONE}: no workflow; the message asks for none of these now\n\n"
            f'Message:\n"""\n{quoted}\n"""\n\nLabel:')
    return SYSTEM, body


_WRAP = re.compile(r"^(?:label\s*[:=]\s*)?[\s\"'`*\[(<]*(?P<label>[\w.-]+?)[\s\"'`*\])>.]*$", re.IGNORECASE)


def answer(reply: Any, labels: Sequence[str]) -> str | None:
    """The label the utility model answered (a plan id of ``labels`` or NONE), or None when the reply is not
    one label (then matching's own decision stands)."""
    if not isinstance(reply, str) or not reply.strip() or len(reply) > MAX_ANSWER:
        return None
    lines = [line for line in reply.strip().splitlines() if line.strip()]
    if len(lines) != 1:
        return None
    m = _WRAP.match(lines[0].strip())
    if m is None:
        return None
    said = m.group("label").strip(".").lower()
    by_lower = {label.lower(): label for label in labels}
    if said == NONE:
        return NONE
    return by_lower.get(said)


# ── examples for a plan written without them ───────────────────────────────
# A plan whose author gave no examples is matched by its own text alone, which tells its job but not where the
# job ends.  The utility model is asked once per version of such a plan (off the pass) to write examples and
# not-examples in the voice of users; they teach the plan as if its author had written them.

TEACH_SYSTEM = (
    "You write test messages for an AI agent that chooses a workflow from what its user writes in chat. "
    "Reply with one JSON object and nothing else.")
TEACH_EXAMPLES = 20
TEACH_NOT_EXAMPLES = 8
MAX_TAUGHT_TEXT = 300


def teach_question(name: str, description: str, phrases: Sequence[str], steps: Sequence[str]) -> tuple[str, str]:
    """(system, message) asking for examples and not-examples of a plan, from its own text."""
    lines = [f"Workflow: {name}"]
    if description:
        lines.append(f"What it does: {' '.join(description.split())[:600]}")
    if steps:
        lines.append("Its steps: " + "; ".join(s[:120] for s in steps[:12]))
    if phrases:
        lines.append("Phrases that name it: " + ", ".join(p[:60] for p in phrases[:16]))
    lines += ["", f"Write {TEACH_EXAMPLES} different messages in which a user asks the agent to do this workflow's job "
                  "now, the way different people write in chat: short and long, casual and formal, with the file "
                  "names, errors, versions or places a real request would name, most of them without the phrases "
                  f"above. Then write {TEACH_NOT_EXAMPLES} messages near its topic that must NOT start it: a question "
                  "about the topic, a report of the job already done, the job planned for later, and requests for "
                  "nearby jobs this workflow does not do.",
              'Reply with JSON only: {"examples": ["..."], "not_examples": ["..."]}']
    return TEACH_SYSTEM, "\n".join(lines)


def taught(reply: Any) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The examples and not-examples a reply gives, each a line of text (cut to MAX_TAUGHT_TEXT characters,
    repeats dropped, at most twice the numbers asked for), or None when the reply is not that JSON object."""
    if not isinstance(reply, str):
        return None
    text = reply.strip()
    if text.startswith("```"):  # a fenced block: its inside
        text = text.strip("`").split("\n", 1)[-1].rsplit("```", 1)[0] if "\n" in text else ""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start or end - start > 100_000:
        return None
    try:
        import json
        data = json.loads(text[start:end + 1])
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    out = []
    for key, most in (("examples", 2 * TEACH_EXAMPLES), ("not_examples", 2 * TEACH_NOT_EXAMPLES)):
        items = data.get(key)
        if not isinstance(items, list):
            return None
        kept = [" ".join(t.split())[:MAX_TAUGHT_TEXT] for t in items if isinstance(t, str) and t.strip()]
        out.append(tuple(dict.fromkeys(kept))[:most])
    return (out[0], out[1]) if len(out[0]) >= 5 else None
