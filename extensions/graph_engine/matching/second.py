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
op te met voor dat je ik wij jullie zij mijn jouw deze dit kun kan maak bitte nel nella nei sul sulla a in me per
come son was""".split())
REQUESTS = frozenset("""faça faz fazer crie cria criar rode roda rodar corrija corrige corrigir atualize atualiza atualizar
revise revisa revisar gere gera gerar mostre mostra verifique verifica apague apaga remova remove arregla arreglar haz
corrige corregir actualiza actualizar ejecuta ejecutar crea crear revisa muestra borra elimina sistema correggi
aggiorna esegui crea controlla mostra cancella rimuovi repareer herstel voer maak verwijder controleer mach erstelle
behebe korrigiere aktualisiere lösche prüfe zeige führe corrige mets lance crée vérifie supprime affiche""".split())
SHARED = FOREIGN & ENGLISH  # function words of English and of another language ("a", "do", "no", "as"): neither's
FOREIGN = (FOREIGN | REQUESTS) - ENGLISH
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
    other = sum(1 for w in words if w in FOREIGN or not w.isascii())  # (a word with an accent is evidence too)
    return other < 2 or other <= sum(1 for w in words if w in ENGLISH and w not in SHARED)


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


def prompt_key(system: str, body: str) -> str:
    """A question's fingerprint (recorded answers are kept by it: another wording or plan list is another
    question)."""
    import hashlib
    return hashlib.sha256(f"{system}\n\n{body}".encode("utf-8", "surrogatepass")).hexdigest()


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
