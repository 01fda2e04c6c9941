"""Run records, the engine's lowest layer: what a step reads (``Observation``) and returns (``Effects``), and a
run for the length of one step (``Run``: a state with its plan version).

Rules of this module
--------------------
* Records and the few helpers every layer above shares (``_finish``: a run ends in this step; ``_alive``); no
  rule of the plan language lives here.  Nothing here changes a run's state.
* It imports only the core's tables and records (``control``, ``message``, ``model``, ``texts_port``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from . import control
from .message import CallOutput, Match, allowed
from .model import Node, Plan
from .texts_port import Texts


PROMPTS_AFTER = "prompts_after"
BEFORE_MAIN = "before_main"
MAX_REPLY_HASHED = 100_000


@dataclass(slots=True)
class Observation:
    """What the adapter read from one Agent-Zero hook call."""

    hook: str
    monologue: str
    iteration: int
    user_message: str = ""  # the user's new words at this pass: a message (iteration 0) or an intervention
    message_key: str = ""  # names that message, so it is decided once ("" = the monologue's own message)
    domain_known: bool = False  # the belief-state tracker has classified this message (before_main, iteration 0)
    domain: str = ""
    allowed_plans: Sequence[str] | None = None
    output: CallOutput | None = None  # what the previous LLM call produced
    global_turn: int = 0
    pace_level: str = ""  # the org kernel's PACE level as read at the start of this pass
    control_seen: str = ""  # the message (``message_id``) an earlier hook call of this pass took as a control
    now: float = 0.0  # seconds since the epoch, for human gates with a timeout (0: the time is not known)
    matched: bool = False  # the host matched the new message for this hook call (``match``, None: no plan)
    match: Match | None = None
    asked: bool = False  # the agent's reply before this message asked the user a question (control.parse)
    continuation: bool = False  # the new words only say "go on" (``matching.words.is_continuation``)
    names_run_plan: bool = False  # they name the running plan by one of its trigger phrases
    files: dict[str, str] = field(default_factory=dict)  # what the host saw of the paths the current check names
    reply_mark: str | None = None  # names the model's newest reply (a new reply, a new mark); None: not known
    concurrent: bool = False  # the host runs a parallel node's branches at once, each in a subordinate agent
    serial_reason: str = ""  # why it does not (said once, when a run meets a parallel node)
    offer: Offer | None = None  # a composed plan approved for this pass: started (or the run amended to it)

    @property
    def pass_key(self) -> str:
        return f"{self.monologue}:{self.iteration}"

    @property
    def message_id(self) -> str:
        return self.message_key or self.monologue

    @property
    def next_pass_key(self) -> str:
        return f"{self.monologue}:{self.iteration + 1}"


@dataclass(frozen=True)
class Offer:
    """A plan that was proposed in the chat (not the library's) and approved: the step starts it, or moves the
    running run to it (``amend``).  ``source``: its text, stored with the run; ``by``: who approved it, in words."""

    plan: Plan
    source: dict[str, str]
    by: str
    amend: bool = False


@dataclass(slots=True)
class Effects:
    logs: list[tuple[str, str]] = field(default_factory=list)  # (level, text)
    context: str | None = None
    pace_level: str | None = None
    report: dict[str, Any] | None = None
    ended: str = ""  # "completed" | "escalated" | "expired" | "aborted" | "ended" | "withdrawn" | "stopped" | ""
    notice: str = ""  # why an earlier run ended, shown above a newly started run's context
    final_state: dict[str, Any] | None = None  # the state of a run that ended in this call
    control: str = ""  # the user's control decided in this call (control.KINDS), "" for none
    refused: str = ""  # a pressed control that changed nothing: why (press)
    texts: Texts = None  # type: ignore[assignment]  # given to ``step`` (the host's ``texts.render``): this module
    # words nothing itself
    library: Any = ()  # given to ``step``: the library's plans (a manager node's child is one of them)

    def log(self, level: str, text: str) -> None:
        self.logs.append((level, text))


PlanLookup = Callable[[str, str], Plan | None]  # (plan_id, version) -> plan


@dataclass(slots=True)
class Run:
    """A state together with the plan version it runs, for the duration of one step."""

    plan: Plan
    state: dict[str, Any]
    fx: Effects
    now: float = 0.0  # the observation's time (human gates with a timeout)
    concurrent: bool = False  # the observation's: a parallel node forks into subordinate agents
    serial_reason: str = ""  # the observation's: why not

    @property
    def node(self) -> Node:
        return self.plan.nodes[self.state["current_node"]]


PRESSED = "pressed"  # the hook name of a control pressed between the agent's passes


def _finish(run: Run, how: str, context: str) -> None:
    run.fx.ended = how
    run.fx.context = context
    run.fx.final_state = run.state


def _alive(run: Run) -> Run | None:
    return None if run.fx.ended else run


def _listing(plans: Iterable[Plan], allowed_plans: Sequence[str] | None) -> list[tuple[str, str, tuple[str, ...]]]:
    """(id, name, trigger phrases) of the plans the library holds and the org filter allows, in file order."""
    listing = getattr(plans, "listing", None)
    rows = listing() if callable(listing) else [(p.id, p.name, p.strong_triggers + p.triggers) for p in plans]
    return [row for row in rows if allowed(row[0], allowed_plans)]


def _plan_by_id(plans: Iterable[Plan], plan_id: str) -> Plan | None:
    get = getattr(plans, "get", None)
    if callable(get):
        return get(plan_id)
    return next((p for p in plans if p.id == plan_id), None)
