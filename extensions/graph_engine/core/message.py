"""What the host tells the step about the new message and the last LLM call: the plan it matched (``Match``),
the output the call produced (``CallOutput``), and the two rules of the plan language that read them (the org
filter's ``allowed``, a domain that leaves a plan).  The host (``session/``, ``hosts/``, ``matching/``) fills them; the core
reads them and matches nothing itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .model import Plan

SMALL_TALK_DOMAINS = ("", "conversational")


@dataclass(frozen=True)
class Match:
    plan: Plan
    score: int
    hits: tuple[str, ...]
    domain_ok: bool
    first: int = 0  # where the earliest phrase starts in the message
    meaning: Any = None  # the plan's meaning score (decide.Scores) when meaning, not its phrases, chose it
    stage: str = "phrases"  # what decided: "phrases", "meaning" or "utility model"
    cost_ms: float = 0.0  # what deciding the message cost, in milliseconds

    def why(self) -> str:
        """What matched, and what deciding it cost, for the activation log line."""
        cost = f"; decided in {self.cost_ms:.1f} ms" if self.cost_ms else ""
        if self.stage == "utility model":
            return f"chosen by the utility model{cost}"
        if self.meaning is not None:
            return (f"matched by meaning: {self.meaning.total:.2f}, like the text '{self.meaning.example}'"
                    f"{cost}")
        return f"matched {', '.join(repr(h) for h in self.hits)}{cost}"


@dataclass(slots=True)
class CallOutput:
    """The output of one LLM call as history shows it."""

    reply: str  # the model's raw reply text
    tool: str  # the tool whose result follows ("" when there is no result)
    text: str  # the tool's result text
    truncated: bool = False  # shortened by history compression
    file: str = ""  # where Agent-Zero saved the full result, when it did
    not_found: bool = False  # "Tool X not found": never evidence
    interrupted: bool = False  # a message of the person's follows it: the tool may have been cut short by it


def allowed(plan_id: str, allowed_plans: Sequence[str] | None) -> bool:
    """The org kernel's filter lets the plan run (None: no filter)."""
    return allowed_plans is None or plan_id in allowed_plans


def domain_leaves_plan(plan: Plan, domain: str) -> bool:
    """A new message whose domain the active plan does not cover (small talk never does)."""
    return domain not in SMALL_TALK_DOMAINS and bool(plan.domains) and domain not in plan.domains
