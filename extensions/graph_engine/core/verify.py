"""Checks: a node's verification applied to one piece of evidence gives a verdict with a reason.

Evidence is the text a tool returned (with Agent-Zero's trailing shell prompt
line removed) plus the model's reply that called the tool.  Nothing passes
without evidence: there is no "cannot check, assume success" branch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from .kinds import CHECKS
from .model import Verify
from .patterns import PatternTooSlow
from .prefilter import search

NO_OUTPUT_MARK = "[SYSTEM: No output returned"
# Agent-Zero's terminal refuses a command while the session still runs an earlier one (fw.code.running.md): the
# result then holds that command's output so far, and the new command never ran
TERMINAL_BUSY = re.compile(r"\[SYSTEM: Terminal session \d+ might be still running\.")
SYSTEM_NOTE = re.compile(r"^\s*\[SYSTEM:[^\]]*\]?.*$", re.MULTILINE)
# "root@host:/dir#", "(venv) user@box:~/x$", with an optional trailing space
SHELL_PROMPT = re.compile(r"(?:\([^()\n]*\)\s*)?[\w.-]+@[\w.-]+:[^\n]*[#$]\s*$")
EXIT_STATUS = re.compile(r"\[exit[:=]\s*(-?\d+)\]|^\s*exit=(-?\d+)\s*$", re.MULTILINE | re.IGNORECASE)
CONFIRM = re.compile(r"\bSTEP\s+COMPLETE\b", re.IGNORECASE)
MAX_CHECKED_CHARS = 1_000_000  # checks read the head and the tail of longer outputs
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")  # colours, cursor moves, titles
FILE_ROOTS_ENV = "GRAPH_ENGINE_FILE_ROOTS"


@dataclass(slots=True)
class Evidence:
    """What one LLM call produced: the tool it called, the tool's text, and the raw reply."""

    tool: str
    text: str
    reply: str = ""
    truncated: bool = False
    files: Mapping[str, str] = field(default_factory=dict)  # what the host saw of the paths a check names


@dataclass(slots=True)
class Verdict:
    ok: bool
    reason: str
    too_slow: bool = False  # a pattern ran out of time: the plan's author must fix it


def clean_output(text: str) -> str:
    """Drop terminal escape codes and the shell prompt line Agent-Zero appends (a directory name must not
    satisfy a check, and a coloured "5 passed" is still "5 passed")."""
    if "\x1b" in text:
        text = ANSI.sub("", text)
    body = text.rstrip()
    if body[-1:] not in ("#", "$"):  # every prompt line ends so: most outputs skip the pattern
        return body
    last_nl = body.rfind("\n")
    if SHELL_PROMPT.fullmatch(body[last_nl + 1:].strip()):
        body = body[:last_nl] if last_nl >= 0 else ""
    return body


def _bounded(text: str) -> str:
    if len(text) <= MAX_CHECKED_CHARS:
        return text
    head = MAX_CHECKED_CHARS // 5
    return text[:head] + "\n" + text[-(MAX_CHECKED_CHARS - head):]


_RESET_ONLY = re.compile(r'"runtime"\s*:\s*"reset"')


def only_resets(reply: str) -> bool:
    """The call only reset Agent-Zero's terminal (code_execution_tool with runtime "reset"): it ran no command."""
    return '"reset"' in reply and _RESET_ONLY.search(reply) is not None


def did_not_run(text: str) -> bool:
    """The terminal did not run the call's command: it was still running an earlier one (one a message of the
    person's cut short, or one that outlasted Agent-Zero's wait)."""
    return "might be still running" in text and TERMINAL_BUSY.search(text) is not None


def has_output(text: str) -> bool:
    if NO_OUTPUT_MARK in text:
        return False
    return SYSTEM_NOTE.sub("", text).strip() != ""


def check(verify: Verify | None, evidence: Evidence, text: str | None = None) -> Verdict:
    """Apply one verification to one piece of evidence (``text``: its judged text, when already made).
    A pattern that runs out of time makes the check fail, with that reason."""
    try:
        return _check(verify, evidence, text)
    except PatternTooSlow as exc:
        return Verdict(False, f"pattern took too long ({exc}); the check counts as failed", too_slow=True)


def _check(verify: Verify | None, evidence: Evidence, text: str | None) -> Verdict:
    text = judged_text(evidence) if text is None else text
    if verify is None:
        return Verdict(True, "no check defined; the step's result was received")
    if verify.fail_pattern is not None:
        bad = search(verify.fail_pattern, text)
        if bad is not None:
            if verify.says:  # the plan describes its check in words: name what was found, not the pattern
                return Verdict(False, f"the output shows a failure: '{bad.group(0)[:60]}'")
            return Verdict(False, f"output matches the failure pattern /{verify.fail_if}/ ('{bad.group(0)[:60]}')")
    handler = _HANDLERS[verify.type]
    verdict = handler(verify, text, evidence)
    if not verdict.ok and evidence.truncated:
        return Verdict(False, verdict.reason + " (the output was shortened by history compression)")
    return verdict


def _judge_output_contains(v: Verify, text: str, _: Evidence) -> Verdict:
    if v.value.lower() in text.lower():
        return Verdict(True, f"found '{v.value}' in the output")
    return Verdict(False, f"expected '{v.value}' in the output")


def _judge_output_not_contains(v: Verify, text: str, _: Evidence) -> Verdict:
    if v.value.lower() in text.lower():
        return Verdict(False, f"found '{v.value}' in the output")
    return Verdict(True, f"'{v.value}' is absent from the output")


def _regex(v: Verify, text: str, want_match: bool) -> Verdict:
    assert v.pattern is not None
    m = search(v.pattern, text)
    if m is None:
        if want_match and v.says:
            return Verdict(False, f"expected: {v.says}")
        return Verdict(not want_match, f"{'expected the output to match' if want_match else 'output does not match'}"
                                       f" /{v.value}/")
    if v.says:
        return Verdict(want_match, f"found '{m.group(0)[:60]}'" if want_match else
                       f"expected: {v.says}; found '{m.group(0)[:60]}'")
    return Verdict(want_match, f"output matches /{v.value}/ ('{m.group(0)[:60]}')")


def _judge_output_matches(v: Verify, text: str, _: Evidence) -> Verdict:
    return _regex(v, text, want_match=True)


def _judge_output_not_matches(v: Verify, text: str, _: Evidence) -> Verdict:
    return _regex(v, text, want_match=False)


def _judge_any_output(_: Verify, text: str, __: Evidence) -> Verdict:
    if has_output(text):
        return Verdict(True, "the command printed output")
    return Verdict(False, "the command printed no output")


def _judge_exit_code_zero(_: Verify, text: str, __: Evidence) -> Verdict:
    codes = [a or b for a, b in EXIT_STATUS.findall(text)]
    if not codes:
        return Verdict(False, "the output has no [exit:N] line, so the exit status is unknown")
    code = int(codes[-1])
    if code == 0:
        return Verdict(True, "exit status 0")
    return Verdict(False, f"exit status {code}")


def capture(verify: Verify | None, evidence: Evidence, text: str | None = None) -> dict[str, str]:
    """Named groups of the check's capture pattern, matched against the judged text."""
    if verify is None or verify.capture_pattern is None:
        return {}
    try:
        m = search(verify.capture_pattern, judged_text(evidence) if text is None else text)
    except PatternTooSlow:
        return {}  # nothing captured; the check itself says why when its own pattern is the slow one
    return {k: v for k, v in m.groupdict().items() if v is not None} if m else {}


def judged_text(evidence: Evidence) -> str:
    """The text the checks read: bounded, then cleaned (what the evidence hash covers); bounded first, so a
    100 MB result costs what a 1 MB one does."""
    return clean_output(_bounded(evidence.text))


# what the host saw of a path (``reading.file_fact``), and what the check says of it
FILE_FACTS = {"file": (True, "{path} exists"), "dir": (False, "{path} is a directory, not a file"),
              "dangling": (False, "{path} is a dangling symbolic link"), "missing": (False, "{path} does not exist")}


def _judge_file_exists(v: Verify, _: str, evidence: Evidence) -> Verdict:
    fact = evidence.files.get(v.value)
    if fact is None:
        return Verdict(False, f"{v.value} was not looked at before the check")
    if fact.startswith("outside "):
        return Verdict(False, f"{v.value} is outside the allowed roots ({fact[len('outside '):]}, set by "
                              f"{FILE_ROOTS_ENV})")
    ok, said = FILE_FACTS.get(fact, (False, "{path}: " + fact))
    return Verdict(ok, said.format(path=v.value))


def _judge_manual(_: Verify, __: str, evidence: Evidence) -> Verdict:
    if CONFIRM.search(evidence.reply or ""):
        return Verdict(True, "the model confirmed the step with STEP COMPLETE")
    return Verdict(False, "no STEP COMPLETE confirmation in the reply")


_HANDLERS = {name: globals()["_judge_" + name] for name in CHECKS}  # a check's judge is _judge_<its name>
