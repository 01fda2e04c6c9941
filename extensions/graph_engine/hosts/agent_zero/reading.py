"""Reading one hook call of Agent-Zero: the pass's identity, the person's new words, the newest tool result, the
belief-state domain and the org's plan filter, into one ``Observation``; and whether a pass can start anything."""

from __future__ import annotations

import time
import uuid
import zlib
from typing import Any

from ...boundary.reading import read_regular
from ...core import control, engine
from ...matching import second
from ...session.runtime import Runtime
from .history import (CallOutput, from_framework, new_intervention, newest_call_output, reply_before_user_message,
                      user_words)


PACE_ATTR = "_org_pace_level"
MONOLOGUE_KEY = "graph_engine_monologue"

SEEN_KEY = "graph_engine_seen"  # in a monologue's params_persistent: a hook call of this pack has seen it
COMPANION_ATTR = "_graph_engine_companion"  # (loop data, iteration) of the pass the companion last handled

MAX_FULL_OUTPUT = 4 * 1024 * 1024
MAX_ITERATION = 10 ** 9

COMPOSE_TOOL = "graph_workflow"  # the pack's own tool: its result is never a step's evidence
CONTROL_ATTR = "_graph_engine_control"  # the message (observation's message_id) last taken as a user's control


def unread_request(loop_data: Any) -> str:
    """The monologue's own message, when no hook has read it: a message the person wrote while the agent started
    (Agent-Zero took it before the monologue's first pass built its prompt) ended that pass before any hook ran, so
    this later pass is the first to see the monologue.  "" otherwise (and for the Nudge).  The first hook call of a
    monologue names it, so later passes pay one dictionary lookup."""
    store = getattr(loop_data, "params_persistent", None)
    if not isinstance(store, dict) or SEEN_KEY in store:
        return ""
    store[SEEN_KEY] = True  # seen from here on
    if iteration_of(loop_data) == 0 or MONOLOGUE_KEY in store:
        return ""
    words = user_words(getattr(loop_data, "user_message", None))
    return "" if not words or from_framework(words) else words


def may_start(rt: Runtime, library: Any, words: str) -> bool:
    """A pass with no run: do the new words (``new_words``) hold a trigger phrase that may be found?  (Most
    messages name no plan: such a pass reads the message's words and the trigger index, nothing else.)"""
    if library is None:
        return False
    return bool(words) and (library.may_start(words) or is_control(rt, words) or not reads_as_english(rt, words))


def new_words(rt: Runtime, loop_data: Any, request: str | None = None) -> str:
    """The person's new words at this pass ("" for none), read once for both hooks."""
    if request is not None:
        words = request
    elif iteration_of(loop_data) > 0:
        words = new_intervention(history_of(loop_data))
    else:  # the monologue's message, read once for both hooks
        message, seen = getattr(loop_data, "user_message", None), rt.message_words  # one read: agents of
        if seen[0] is not message:  # other chats may replace it meanwhile
            seen = rt.message_words = (message, user_words(message))
        words = seen[1]
    return words


def reads_as_english(rt: Runtime, words: str) -> bool:
    """Whether the local matcher reads the words (else the utility model may); read once for both hooks."""
    seen = rt.english_words
    if seen[0] is not words:
        seen = rt.english_words = (words, second.reads_as_english(words))
    return seen[1]


def is_control(rt: Runtime, words: str) -> bool:
    """Whether the words are one of the user's controls; read once for both hooks of a pass."""
    seen = rt.control_words
    if seen[0] is not words:
        seen = rt.control_words = (words, control.parse(words) is not None)
    return seen[1]


def companion_handled(agent: Any, loop_data: Any, hook: str) -> bool:
    """before_main_llm_call after the companion handled the same pass (not the pass of a new message): it stepped
    the pass, or found nothing that could happen in it (no run, no message that could start one), which the selector
    would find too, as it reads the same history and, past a monologue's first pass, no domain.  (A pass is its
    loop data, which is the monologue's, and its iteration.)"""
    if hook != engine.BEFORE_MAIN:
        return False
    seen = getattr(agent, COMPANION_ATTR, None)
    if not isinstance(seen, tuple):
        return False  # no companion has handled a pass of this agent
    iteration = iteration_of(loop_data)
    return iteration > 0 and seen[0] is loop_data and seen[1] == iteration


def observe(agent: Any, loop_data: Any, hook: str, state: Any = None, problems: list[str] | None = None,
            request: str | None = None, quiet: bool = False, concurrent: tuple[bool, str] = (False, "")
            ) -> engine.Observation:
    """The hook call as one Observation, complete but for what the session adds before the step (the facts a check
    needs, the match).  ``state``: the run as the hook found it (a result the other hook of the pass judged is not
    read again); ``request``: the monologue's own message, read late; ``quiet``: the call takes no words (a branch's
    agent, a pass stepped again after its branches); ``concurrent``: whether this agent runs a fork's branches at
    once, and why not."""
    iteration = iteration_of(loop_data)
    monologue = monologue_id(loop_data)
    history = history_of(loop_data)
    output = None
    if not pass_already_seen(state, f"{monologue}:{iteration}"):  # the other hook judged it this pass
        output = newest_call_output(history) if iteration > 0 else reply_before_user_message(history)
        if output is not None and output.tool.split(":", 1)[0] == COMPOSE_TOOL:
            output = None  # what the workflow tool answered (a proposal, a status) judges no step
    if request is not None:  # the monologue's message, read late: no hook knows its domain now
        words, key, known = request, "", False
    elif iteration == 0:  # the monologue's message; the tracker classifies it in before_main_llm_call
        words, key, known = user_words(getattr(loop_data, "user_message", None)), "", hook == engine.BEFORE_MAIN
    else:  # an intervention the user wrote while the agent worked: no hook knows its domain
        words = new_intervention(history)
        key, known = (f"{monologue}~{zlib.crc32(words.encode('utf-8', 'replace')):08x}" if words else ""), False
    if words and from_framework(words):  # the Nudge: the run goes on, as after any pass without new words
        words, key = "", ""
    return engine.Observation(
        hook=hook,
        monologue=monologue,
        iteration=iteration,
        user_message="" if quiet else words,  # (read all the same: a branch's message is the one its parent took)
        message_key=key,
        domain_known=known,
        domain=bst_domain(agent, problems) if known else "",
        allowed_plans=allowed_plans(agent, problems) if words else None,
        output=full_output(output),
        reply_mark=reply_mark(loop_data),
        global_turn=global_turn(agent, (monologue, iteration)),
        pace_level=pace_at_pass_start(agent, (monologue, iteration)),
        control_seen=text_attr(agent, CONTROL_ATTR) if words else "",
        now=now(),
        asked=bool(words) and iteration == 0 and asked_user(history),
        concurrent=concurrent[0],
        serial_reason=concurrent[1],
    )


MAX_MARKED = 65_536  # characters of a reply its mark reads (with its length and its object)


def reply_mark(loop_data: Any) -> str | None:
    """Names the model's newest reply, ``loop_data.last_response`` (Agent-Zero sets it as it adds a reply to history,
    on both layouts): a new reply is a new object, so its mark differs even when its text repeats; a call that made
    no reply leaves the mark as it was.  None when the loop data has none (another host)."""
    reply = getattr(loop_data, "last_response", None)
    if not isinstance(reply, str):
        return None
    crc = zlib.crc32(reply[:MAX_MARKED].encode("utf-8", "surrogatepass"))
    return f"{id(reply):x}:{len(reply):x}:{crc:08x}"


def asked_user(history: Any) -> bool:
    """Whether the agent's reply before the user's message asked the user something (a "?" in its response):
    the message is then an answer, a control only when it says so (control.parse)."""
    before = reply_before_user_message(history)
    return before is not None and before.tool == "response" and ("?" in before.text or "？" in before.text)


def iteration_of(loop_data: Any) -> int:
    """The pass number (0 = the monologue's first pass); a value of another type, or past any monologue's
    length, reads as 0."""
    value = getattr(loop_data, "iteration", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_ITERATION else 0


def history_of(loop_data: Any) -> list:
    """``history_output`` as a list (Agent-Zero gives one; anything else reads as no history)."""
    value = getattr(loop_data, "history_output", None)
    return value if isinstance(value, list) else list(value) if isinstance(value, tuple) else []


def now() -> float:
    """Seconds since the epoch: the clock human gates with a timeout are measured by."""
    return time.time()


def text_attr(agent: Any, name: str) -> str:
    value = getattr(agent, name, "")
    return value if isinstance(value, str) else ""


def pace_at_pass_start(agent: Any, key: tuple[str, int]) -> str:
    """The PACE level as the first hook of this pass read it (the dispatcher may recompute it mid-pass)."""
    seen = getattr(agent, "_graph_engine_pace", None)
    if isinstance(seen, list) and len(seen) == 2 and seen[0] == key and isinstance(seen[1], str):
        return seen[1]
    level = getattr(agent, PACE_ATTR, "")
    level = level if isinstance(level, str) else ""
    setattr(agent, "_graph_engine_pace", [key, level])
    return level


def pass_already_seen(state: Any, pass_key: str) -> bool:
    return isinstance(state, dict) and state.get("last_pass") == pass_key


def monologue_id(loop_data: Any) -> str:
    store = getattr(loop_data, "params_persistent", None)
    if not isinstance(store, dict):
        return f"m{id(loop_data):x}"
    mono = store.get(MONOLOGUE_KEY)
    if not isinstance(mono, str):
        mono = store[MONOLOGUE_KEY] = uuid.uuid4().hex[:10]
    return mono


def global_turn(agent: Any, key: tuple[str, int]) -> int:
    seen = getattr(agent, "_graph_engine_pass", None)
    if not isinstance(seen, list) or len(seen) != 2 or not isinstance(seen[1], int):
        seen = [None, 0]
    if seen[0] != key:
        seen = [key, int(seen[1]) + 1]
        setattr(agent, "_graph_engine_pass", seen)
    return seen[1]


def bst_domain(agent: Any, problems: list[str] | None = None) -> str:
    store = getattr(agent, "_bst_store", None)
    if store is not None and not isinstance(store, dict) and problems is not None:
        problems.append(f"[HTN] agent._bst_store is a {type(store).__name__}, not a dict; the belief-state domain "
                        "reads as empty until the _11_ tracker stores a dict")
    belief = store.get("__bst_belief_state__") if isinstance(store, dict) else None
    domain = belief.get("domain", "") if isinstance(belief, dict) else ""
    if not isinstance(domain, str):
        if problems is not None:
            problems.append(f"[HTN] agent._bst_store['__bst_belief_state__']['domain'] is a "
                            f"{type(domain).__name__}, not text; the domain reads as empty")
        return ""
    return domain


def allowed_plans(agent: Any, problems: list[str] | None = None) -> tuple[str, ...] | None:
    try:
        value = agent.get_data("_org_htn_allowed_plans")
    except Exception:  # noqa: BLE001 - an agent without data means "no filter"
        return None
    if value is None:
        return None
    if isinstance(value, (list, tuple, set)):
        return tuple(v for v in value if isinstance(v, str))
    if problems is not None:
        problems.append(f"[HTN] _org_htn_allowed_plans is a {type(value).__name__}, not a list of plan ids; no plan "
                        "may start until the org dispatcher sets a list (or None for no filter)")
    return ()  # a filter of the wrong type allows nothing rather than everything


def full_output(out: CallOutput | None) -> CallOutput | None:
    """A result shortened by compression is read back from the file Agent-Zero saved, when it can be."""
    if out is None or not out.truncated or not out.file:
        return out
    try:  # only a regular file: a FIFO named there would block the hook
        blob = read_regular(out.file, MAX_FULL_OUTPUT, "tool result", prefix=True)
    except ValueError:
        return out
    text = blob.decode("utf-8", errors="replace")
    return CallOutput(reply=out.reply, tool=out.tool, text=text, file=out.file, not_found=out.not_found)
