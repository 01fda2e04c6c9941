"""Reading Agent-Zero's ``history_output`` from the end: the newest call's output, the user's words.

Pure functions over the plain shapes CONTRACT.md section 3 describes.  Every
reader looks only at the tail, so the cost does not grow with the history.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from ...core.message import CallOutput
from ...core.plain import as_text

COMPRESSED_MARK = "CHARACTERS REMOVED"
_TOOL_NAME = re.compile(r'"tool_name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_NOT_FOUND = re.compile(r"^\s*Tool \S+ not found\b")
MAX_TOOL_NAME = 200
MAX_WORDS_DEPTH = 8  # a user message is a list of parts at most a few levels deep
MAX_COMPRESSED_CHARS = 1 << 20  # a result history compression shortened is far shorter: a longer one is whole
TAIL_SCAN = 8  # items looked at from the end; a call adds at most reply + result + a note or two


def reply_tool_name(reply: str) -> str:
    m = _TOOL_NAME.search(reply or "")
    return m.group(1) if m else ""


def _as_tool_result(content: Any) -> dict | None:
    if isinstance(content, dict):
        return content if "tool_name" in content and "tool_result" in content else None
    if isinstance(content, str) and content.lstrip().startswith('{"tool_name"'):
        try:
            data = json.loads(content)
        except (ValueError, RecursionError):
            name = _TOOL_NAME.search(content)
            return {"tool_name": name.group(1) if name else "", "tool_result": content}
        return data if isinstance(data, dict) and "tool_result" in data else None
    return None


def newest_call_output(history: Sequence[Any]) -> CallOutput | None:
    """The reply and tool result the newest LLM call added, or None when it added no tool result.  A result
    followed by a message the person wrote while the agent worked (Agent-Zero's intervention) is ``interrupted``:
    the message may have cut the tool short (Agent-Zero keeps the output so far as the result)."""
    result: dict | None = None
    interrupted = False
    for i in range(len(history) - 1, max(-1, len(history) - 1 - TAIL_SCAN), -1):
        item = history[i]
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        if item.get("ai"):
            return None if result is None else _call_output(_text(content), result, interrupted)
        if result is None:
            result = _as_tool_result(content)
            interrupted = interrupted or (isinstance(content, dict) and "user_intervention" in content)
        if isinstance(content, dict) and "user_message" in content:
            return None  # a user message after the last reply: no new result
    return None


def _call_output(reply: str, result: dict, interrupted: bool = False) -> CallOutput:
    text = as_text(result.get("tool_result", ""))  # another extension may leave any value here
    tool = as_text(result.get("tool_name", ""), MAX_TOOL_NAME)
    file = result.get("file")
    truncated = len(text) <= MAX_COMPRESSED_CHARS and COMPRESSED_MARK in text
    return CallOutput(reply, tool, text, truncated, file if isinstance(file, str) else "",
                      _NOT_FOUND.match(text) is not None, interrupted)


def reply_before_user_message(history: Sequence[Any]) -> CallOutput | None:
    """At a monologue's first pass: what the previous monologue's last call produced, read before the new
    user message: its tool result (a monologue cut short after a tool ran), or its final ``response`` reply."""
    seen_user = False
    result: dict | None = None
    for item in reversed(history[-TAIL_SCAN:]):
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        if not seen_user:
            seen_user = isinstance(content, dict) and "user_message" in content
            continue
        if not item.get("ai"):
            if result is None:
                result = _as_tool_result(content)
            continue
        reply = _text(content)
        if result is not None:
            return _call_output(reply, result)
        if reply_tool_name(reply) != "response":
            return None
        return CallOutput(reply=reply, tool="response", text=_response_text(reply))
    return None


def new_intervention(history: Sequence[Any]) -> str:
    """The words of a user intervention added since the newest AI reply (Agent-Zero adds one mid-monologue
    when the user writes while the agent works), or ""."""
    for i in range(len(history) - 1, max(-1, len(history) - 1 - TAIL_SCAN), -1):
        item = history[i]
        if not isinstance(item, dict):
            continue
        if item.get("ai"):
            return ""
        content = item.get("content")
        if isinstance(content, dict) and isinstance(content.get("user_intervention"), str):
            return content["user_intervention"]
    return ""


def _response_text(reply: str) -> str:
    try:
        data = json.loads(reply)
        return as_text(data.get("tool_args", {}).get("text", ""))
    except (ValueError, AttributeError, RecursionError):
        return reply


_SYSTEM_ONLY = re.compile(r'\A\s*(?:```(?:json)?\s*)?\{\s*"system_message"\s*:\s*"(?:[^"\\]|\\.)*"\s*,?\s*\}'
                          r'\s*(?:```)?\s*\Z')


def from_framework(words: str) -> bool:
    """A "user message" that only carries a system message: Agent-Zero's Nudge (prompt fw.msg_nudge.md,
    ``{"system_message": "Nudged - continue"}``) after a stop or restart.  Not a request from the person."""
    return '"system_message"' in words[:200] and _SYSTEM_ONLY.match(words) is not None


def user_words(user_message: Any) -> str:
    """The user's own words from ``loop_data.user_message`` (a Message with ``.output()``, or plain data)."""
    if user_message is None:
        return ""
    try:  # a foreign object: its output() or any attribute may raise
        output = getattr(user_message, "output", None)
        return _words(output() if callable(output) else user_message)
    except Exception:  # noqa: BLE001 - a broken message object means "no words"
        return ""


def _words(data: Any, depth: int = 0) -> str:
    if isinstance(data, str):
        return data
    if depth >= MAX_WORDS_DEPTH:
        return ""  # deeper than any message Agent-Zero builds (or a value that holds itself)
    if isinstance(data, list):
        return " ".join(w for w in (_words(x, depth + 1) for x in data) if w)
    if isinstance(data, dict):
        if "content" in data:
            return _words(data["content"], depth + 1)
        for key in ("user_message", "user_intervention", "message"):
            if isinstance(data.get(key), str):
                return data[key]
    content = getattr(data, "content", None)
    return _words(content, depth + 1) if content is not None else ""


def _text(content: Any) -> str:
    return as_text(content)
