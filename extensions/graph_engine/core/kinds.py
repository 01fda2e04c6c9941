"""The plan language's kinds, each declared once: node kinds, checks, edge conditions, outcomes, run statuses and
events.  Every other module reads these tables (compile, engine, lint, routing, DOT import and export, pictures,
card); the controls are declared in ``control.CONTROLS`` beside their words.  The schema's enums and the docs'
tables are written from them (`make tables`) and a test checks that they are.  To add a kind, add a row here, then its behaviour where the row says (a check's judge in ``verify``, a node
kind's settle handler in ``engine.SETTLE``; a test fails for a row without it).  Other modules read what a node
kind does from its row's flags (``node.kind.judged``, ``.asks``, ``.forks``, ...), never by testing its name.

Pure data, no I/O; it reads only the controls' table (``control.CONTROLS``, beside the controls' words).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Mapping

from .control import CONTROLS

# ── node kinds ──────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class NodeKind:
    name: str
    does: str  # one line for the docs
    route: str  # how its outgoing edges are read (routing.select_edge's kind): task, decision, pass, human, or
    # branches (every edge, in the order listed)
    rests: bool = False  # a run waits there for a result or an answer
    ends: str = ""  # reaching it ends the run with this run status (completed, escalated); "" = it does not
    judged: bool = False  # a step the model carries out: its check judges the output, it has attempts and retries
    asks: bool = False  # a question for the person: each outgoing edge is an answer, so each needs a label
    forks: bool = False  # its outgoing edges are branches
    manages: bool = False  # runs a child plan in a subordinate agent, supervises it, routes on how it went
    joins: bool = False  # where branches meet: routes as its fan-in policy reads how they went
    begins: bool = False  # where the run begins: one per plan, nothing leads into it
    decides: bool = False  # routes on the previous outcome: lint wants an edge for success and one for failure
    checkpoints: bool = False  # the run records passing it (the state's ``checkpoint``)
    needs: tuple[tuple[str, str], ...] = ()  # (field, how to fill it in): lint warns when it is empty (rule
    # "<kind>_<field>", declared in lint.RULES)
    dot_shape: str = "box"  # DOT export (and, for Attractor's own shapes, import)
    dot_type: bool = False  # DOT export also writes type="<name>" (the shape alone does not say the kind)
    picture: str = "box"  # Graphviz shape of the run's picture
    fill: str = "white"  # its fill colour in the picture
    mermaid: tuple[str, str] = ("[", "]")  # Mermaid brackets
    retries: int = 0  # max_retries when the plan does not say

    @property
    def terminal(self) -> bool:
        """Reaching it ends the run."""
        return bool(self.ends)

    @property
    def passes(self) -> bool:
        """A run passes through it at once (it neither rests there nor ends)."""
        return not self.rests and not self.terminal


NODE_KINDS: dict[str, NodeKind] = {k.name: k for k in (
    NodeKind("start", "where the run begins; passes on at once", "pass", begins=True, dot_shape="Mdiamond", picture="oval",
             fill="#eeeeee", mermaid=("([", "])")),
    NodeKind("task", "a step the model carries out; its check judges the tool's result", "task", rests=True, judged=True),
    NodeKind("decision", "routes on the previous task's outcome and the run's context", "decision", decides=True,
             dot_shape="diamond", picture="diamond", fill="#fff3cd", mermaid=("{", "}")),
    NodeKind("escalate", "ends the run at a PACE level, with a reason for the person", "task", ends="escalated",
             needs=(("reason", "add a 'reason' saying what went wrong"),), dot_shape="octagon", dot_type=True, picture="octagon", fill="#f8d7da", mermaid=("[[", "]]")),
    NodeKind("exit", "ends the run as completed (when its goal gates hold)", "task", ends="completed",
             dot_shape="Msquare", fill="#d9f2d9", mermaid=("([", "])")),
    NodeKind("checkpoint", "records that the run got this far; passes on at once", "pass", checkpoints=True,
             dot_shape="cylinder",
             dot_type=True, picture="cylinder", mermaid=("[(", ")]")),
    NodeKind("human", "a question for the person; each outgoing edge's label is an answer", "human", rests=True, asks=True,
             dot_shape="hexagon", picture="hexagon", fill="#e2d9f3", mermaid=("{{", "}}")),
    NodeKind("parallel", "its outgoing edges are branches, run up to their fan-in at the same time, each by a "
             "subordinate agent of its own (one after another with `sequential` or where subordinates cannot run at "
             "once)", "branches", forks=True, dot_shape="component", picture="component"),
    NodeKind("fan_in", "where the branches meet; routes on success or fail as its `fan_in_policy` reads how they "
             "went", "decision", joins=True,
             dot_shape="tripleoctagon", picture="tripleoctagon"),
    NodeKind("manager", "runs the plan `child` in a subordinate agent and supervises it at each of its passes; routes "
             "on success when the child completes or its `stop_condition` holds, else on fail", "decision",
             manages=True, dot_shape="house", picture="house", mermaid=("[/", "\\]")),
)}
NODE_TYPES = tuple(NODE_KINDS)
TERMINAL = frozenset(k.name for k in NODE_KINDS.values() if k.terminal)
RESTING = frozenset(k.name for k in NODE_KINDS.values() if k.rests)
PASS_THROUGH = tuple(k.name for k in NODE_KINDS.values() if k.passes)


def node_kind(name: str) -> NodeKind:
    return NODE_KINDS.get(name, NODE_KINDS["task"])


# ── checks ──────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Check:
    name: str
    says: str  # a statement true of a passing result; {v} is the check's value
    needs_value: bool = False  # "value" must be given
    regex: bool = False  # "value" is a regular expression
    reads_output: bool = True  # judges the tool's output (so fail_if can apply)
    reads_status: bool = False  # judges the command's exit status: the model is told to print it
    looks_at_path: bool = False  # the host looks at the path "value" before the step (``Observation.files``)
    doc: str = ""  # when it passes, for the docs' table (Markdown)


CHECKS: dict[str, Check] = {c.name: c for c in (
    Check("output_contains", 'the output contains "{v}" (any letter case)', needs_value=True,
          doc="the text `value` is in the output, in any letter case"),
    Check("output_not_contains", 'the output does not contain "{v}" (any letter case)', needs_value=True,
          doc="the text `value` is not in the output, in any letter case"),
    Check("output_matches", "the output matches /{v}/", needs_value=True, regex=True,
          doc="the regular expression `value` matches somewhere in the output"),
    Check("output_not_matches", "the output does not match /{v}/", needs_value=True, regex=True,
          doc="the regular expression `value` matches nowhere in the output"),
    Check("any_output", "the command prints some output",
          doc='there is output; Agent-Zero\'s "[SYSTEM: No output returned...]" counts as none'),
    Check("exit_code_zero", "the command exits with status 0", reads_status=True,
          doc="the last `[exit:N]` (or `exit=N` line) printed is 0; an output without a status fails. The model is "
              "told once how to print it: `; echo \"[exit:$?]\"` is appended to the step's command when the command "
              "does not print the status itself, and without a command the check says to end the command with it. "
              "A pipe makes the status the last command's: `pytest \\| tail` exits 0 when tests fail, so run such "
              "commands without pipes (or add `fail_if`)"),
    Check("file_exists", "the file {v} exists afterwards", needs_value=True, reads_output=False, looks_at_path=True,
          doc="`value` is an existing file; a directory or a dangling link fails, with that reason"),
    Check("manual", "your reply says STEP COMPLETE (write it when the step is done)", reads_output=False,
          doc="the model's reply contains `STEP COMPLETE`, as the context asks"),
)}
VERIFY_TYPES = tuple(CHECKS)
DEFAULT_CHECK = "any_output"

# ── fan-in policies ─────────────────────────────────────────────────────────


@dataclass(frozen=True)
class FanInPolicy:
    """A fan-in policy is this row and nothing else: what the docs say, what the model is told, and the test."""

    name: str
    passes: str  # when the fan-in routes on success (Markdown, for the docs)
    told: str  # what the model is told the branches must do: {q} the quorum, {r} the required branches' names
    met: Callable[[Mapping[str, str], int, tuple[str, ...]], bool]  # (each branch's outcome, quorum, required)
    reads: str = ""  # the fan-in field it reads: "quorum" (at least 1 when the plan does not say) or "required"
    # (which must name a branch); "" = neither


def _won(outcomes: Mapping[str, str]) -> int:
    return sum(1 for o in outcomes.values() if o == "success")


FAN_IN_POLICIES: dict[str, FanInPolicy] = {p.name: p for p in (
    FanInPolicy("all", "every branch succeeded (the default)", "every branch must succeed",
                lambda outcomes, quorum, required: _won(outcomes) == len(outcomes)),
    FanInPolicy("any", "at least one branch succeeded", "one branch succeeding is enough",
                lambda outcomes, quorum, required: _won(outcomes) > 0),
    FanInPolicy("quorum", "at least `quorum` branches succeeded", "at least {q} must succeed",
                lambda outcomes, quorum, required: _won(outcomes) >= max(1, quorum), reads="quorum"),
    FanInPolicy("required", "every branch named in `required` (by its first node's id) succeeded; the others may fail",
                "{r} must succeed", lambda outcomes, quorum, required: all(outcomes.get(b) == "success" for b in required),
                reads="required"),
    FanInPolicy("majority", "more than half of the branches succeeded", "more than half of them must succeed",
                lambda outcomes, quorum, required: 2 * _won(outcomes) > len(outcomes)),
)}
# ── reducers: how a fan-in merges a value the branches captured ─────────────
# A fan-in's ``reduce`` names a reducer per captured value; the value the next step sees is the reducer's merge of
# the branches' values, in branch order (the parallel node's edges as listed, a list's items in order), each a
# branch's last captured text for that name.  Branches that captured nothing for it are left out.  A value without
# a reducer is the last branch's (in branch order) that captured it.


def _number(text: str) -> float | None:
    try:
        value = float(text.strip().replace(",", ""))
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def _spelled(value: float) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _numbers(values: list[tuple[str, str]]) -> list[float]:
    return [n for _, v in values for n in [_number(v)] if n is not None]


def _merge_maps(values: list[tuple[str, str]]) -> str:
    merged: dict = {}
    for _, text in values:
        try:
            found = json.loads(text)
        except ValueError:
            continue
        if isinstance(found, dict):
            merged.update(found)
    return json.dumps(merged, ensure_ascii=False)


@dataclass(frozen=True)
class Reducer:
    """A reducer is this row and nothing else: its name, what the docs say, and the merge."""

    name: str
    does: str  # the merged value (Markdown, for the docs)
    merge: Callable[[list[tuple[str, str]]], str]  # [(branch id, its value)] in branch order -> the merged text


REDUCERS: dict[str, Reducer] = {r.name: r for r in (
    Reducer("append", "a JSON list of the branches' values, in branch order",
            lambda values: json.dumps([v for _, v in values], ensure_ascii=False)),
    Reducer("merge", "the branches' values read as JSON objects, merged into one in branch order (a later branch's "
                     "key wins); a value that is no JSON object is left out",
            _merge_maps),
    Reducer("sum", "the sum of the values that read as numbers", lambda values: _spelled(sum(_numbers(values)))),
    Reducer("max", "the largest of the values that read as numbers (\"\" when none does)",
            lambda values: _spelled(max(_numbers(values))) if _numbers(values) else ""),
    Reducer("last", "the last branch's value, in branch order", lambda values: values[-1][1] if values else ""),
    Reducer("per_branch", "a JSON object of each branch's value by its branch id",
            lambda values: json.dumps(dict(values), ensure_ascii=False)),
)}
DEFAULT_MAX_ITEMS = 20  # parallel nodes over a list: the most items a run may fan out to when the node does not say
MAX_ITEMS = 100  # ... and when it says: the most a plan may allow

DEFAULT_MAX_PARALLEL = 4  # branches run at once when the parallel node does not say (Attractor's default)
BRANCH_OUTCOMES = ("success", "fail", "escalated", "expired", "stopped")  # how a branch ended

# ── edges, outcomes, runs ───────────────────────────────────────────────────

CONDITIONS = ("on_success", "on_fail", "on_retry", "on_exhaust", "always")


@dataclass(frozen=True)
class Outcome:
    """A step's outcome, one vocabulary: the status edge conditions read (``outcome=<name>``, the state's
    ``outcome.status``), the shorthand conditions that take it, the name the engine and the lint walk it by, the
    run's ``last_outcome`` after it, and what the step's entry in ``visited`` records."""

    name: str  # the status
    task_takes: tuple[str, ...]  # a task's (and a gate's) shorthand conditions that take it, in this order
    decision_takes: tuple[str, ...]  # a decision's
    walked: str  # the engine's and the lint's name for a judged result routed with it ("" = none is)
    last: str  # the run's last_outcome after it
    recorded: str  # the step's visited outcome after it ("" = the step stays pending)
    passed: bool  # the step counts as done


STEP_OUTCOMES: dict[str, Outcome] = {o.name: o for o in (
    Outcome("success", ("on_success",), ("on_success",), "success", "success", "success", True),
    Outcome("partial_success", ("on_success",), ("on_success",), "partial", "success", "partial_success", True),
    Outcome("retry", ("on_retry",), ("on_fail", "on_retry"), "retry", "retry", "", False),
    Outcome("fail", ("on_exhaust", "on_fail"), ("on_fail", "on_exhaust"), "exhausted", "exhausted", "fail", False),
    Outcome("skipped", (), (), "", "success", "skipped", False),
)}
OUTCOMES = tuple(STEP_OUTCOMES)  # a step's outcome, as conditions name it
STATUS_OF = {o.walked: o.name for o in STEP_OUTCOMES.values() if o.walked}  # walked name -> status
LAST_OUTCOMES = ("", *dict.fromkeys(o.last for o in STEP_OUTCOMES.values()))  # the run's last_outcome ("" = none)
NODE_OUTCOMES = ("pending", *dict.fromkeys(o.recorded for o in STEP_OUTCOMES.values() if o.recorded))  # visited
ON_FAIL_ACTIONS = ("warn", "block", "skip", "abort")
PACE_LEVELS = ("primary", "alternate", "contingent", "emergency")
RUN_STATUSES = ("active", "escalated", "completed", "expired", "ended", "aborted", "withdrawn", "stopped")

# ── events (the audit log's and the state's history) ────────────────────────


@dataclass(frozen=True)
class Event:
    name: str
    means: str
    ends_run: bool = False
    said: bool = False  # carries the person's words (``said``): a control's event


EVENTS: dict[str, Event] = {e.name: e for e in (
    Event("plan_activated", "a run started (with the stage that matched and what it cost)"),
    Event("node_entered", "the run reached a node"),
    Event("node_verified", "a tool result was judged (reason, evidence_sha256)"),
    Event("retry_triggered", "a failed check with attempts left: the step is tried again"),
    Event("edge_followed", "the run followed an edge"),
    Event("decision_routed", "a decision node chose its edge"),
    Event("checkpoint_reached", "the run passed a checkpoint"),
    Event("evidence_ignored", "a result was not judged (not new, or not the step's)"),
    Event("route_stalled", "no edge matched: the run waits for the person"),
    Event("partial_accepted", "attempts spent on a step that allows it: routed as a partial success"),
    Event("goal_gate_unsatisfied", "an exit was reached before a goal gate held: back to its retry target"),
    Event("goal_gate_failed", "a goal gate cannot hold: the run ends"),
    Event("parallel_started", "a parallel node's branches begin"),
    Event("parallel_branch", "the next branch begins"),
    Event("parallel_joined", "the branches met at their fan-in (each one's outcome, the policy's verdict)"),
    Event("branch_started", "a branch's subordinate agent started (or started again after a restart)"),
    Event("branch_returned", "a branch's subordinate agent answered: the branch's outcome and final answer"),
    Event("branch_finished", "a branch's own run reached its fan-in, an exit or an escalation", ends_run=True),
    Event("human_answered", "the person answered a gate"),
    Event("human_reasked", "an answer matched no option: the gate asks again"),
    Event("human_unanswered", "a gate got no answer it could use: its default is taken"),
    Event("human_timed_out", "a gate's timeout passed: its default is taken, or the run escalates"),
    Event("emergency_hold", "an emergency escalation holds the agent until the person answers"),
    Event("emergency_released", "the person released an emergency hold"),
    Event("state_migrated", "a state saved by an older version was carried over"),
    Event("run_resumed", "a run was resumed after a restart"),
    Event("plan_completed", "the run reached an exit", ends_run=True),
    Event("plan_escalated", "the run reached an escalation", ends_run=True),
    Event("plan_expired", "the run reached its ceiling of turns", ends_run=True),
    Event("plan_ended", "the run was ended (its plan changed or was removed, or it went stale)", ends_run=True),
    Event("plan_aborted", "a failed step's on_fail is abort", ends_run=True),
    Event("plan_withdrawn", "a run started by phrases was withdrawn in the same pass", ends_run=True),
    Event("state_rejected", "a restored state was behind its log or unusable", ends_run=True),
    Event("plan_amended", "the run moved to a new version of its proposed plan at its current step (steps done kept)"),
)}
EVENTS.update({k.event: Event(k.event, k.means, k.ends_run, said=True) for k in CONTROLS.values() if k.event not in EVENTS})
ENDINGS = frozenset(e.name for e in EVENTS.values() if e.ends_run)
