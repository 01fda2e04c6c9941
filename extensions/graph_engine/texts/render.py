"""The text the model reads: the active workflow's context, and the notices when a run ends.

Rules of this module
--------------------
* One way of counting, everywhere: a plan has ``total_steps`` steps (the task nodes on its success path);
  a step is done once it passed its check (``len(state["steps_completed"])``).  Other task nodes (a fix
  step off the main path, a restore) are "extra steps" and are never counted as steps.
* Attempts are counted "attempt k of n" (n = ``max_retries`` + 1); plurals are correct ("1 step").
* A step's command is shown as the model must run it: when the check reads the exit status and the
  command does not print it, ``; echo "[exit:$?]"`` is appended, so the model is told once how to report
  its exit status.
* The texts are pinned by golden files (``fixtures/prompts/``) and proofread by ``tests/texts/test_prompts.py``.
"""

from __future__ import annotations

import re
from typing import Any

from ..core.control import CONTROLS
from ..core.fanout import ITEM, expand, first_of
from ..core.fanout import inside as fanout_inside
from ..core.kinds import CHECKS, FAN_IN_POLICIES
from ..core.model import Edge, Node, Plan
from ..core.routing import resolve

INSTRUCTION = "Execute the current step. Do not skip ahead."
EVIDENCE_NOTE = ("Your next tool call is checked against this step only; "
                 "results of earlier calls do not count.")
EXIT_SUFFIX = '; echo "[exit:$?]"'
COMMAND_TOOL = "code_execution_tool"
_PRINTS_STATUS = re.compile(r"\[exit[:=]|\bexit=\$\?")
_PLACEHOLDER = re.compile(r"<[^<>\n]+>")


def plural(count: int, word: str) -> str:
    """``2 steps``, ``2 branches``: English's regular plural (``es`` after a hissing sound)."""
    return f"{count} {word}" + ("" if count == 1 else "es" if word.endswith(("s", "sh", "ch", "x", "z")) else "s")


def steps_done(state: dict[str, Any]) -> int:
    return len(state.get("steps_completed") or ())


def progress(state: dict[str, Any]) -> str:
    """'2 of 5 steps done': the one way every text counts steps."""
    total = int(state.get("total_steps", 0) or 0)
    return f"{steps_done(state)} of {plural(total, 'step')} done"


def context(plan: Plan, state: dict[str, Any]) -> str:
    if plan.mode == "linear":
        return linear_context(plan, state)
    if state.get("fork"):
        return fork_context(plan, state)
    if state.get("branch") and "child" not in state["branch"]:  # (a manager's child runs its whole plan)
        return branch_context(plan, state)
    return graph_context(plan, state)


# ── a step's instructions ───────────────────────────────────────────────────


def reads_exit_status(node: Node) -> bool:
    """The node's check needs the command's exit status printed in the output: a check that reads it, or a
    pattern that looks for the "[exit:" line."""
    v = node.verify
    kind = CHECKS.get(v.type) if v is not None else None
    return kind is not None and (kind.reads_status or (kind.regex and "exit" in v.value and "\\[" in v.value))


def command_text(node: Node) -> str:
    """The step's command as the model must run it (the exit-status echo appended when the check needs it)."""
    hint = node.tool_hint.strip()
    if hint and reads_exit_status(node) and not _PRINTS_STATUS.search(hint):
        hint += EXIT_SUFFIX
    return hint


def is_command(node: Node) -> bool:
    """The hint is a shell command to run in the terminal, not advice in words: the step uses the terminal
    tool and the hint starts as commands do (a lowercase letter, a <placeholder>, a path, a variable)."""
    hint = node.tool_hint.strip()
    return node.tool == COMMAND_TOOL and (hint[:1].islower() or hint[:1] in ("<", ".", "/", "~", "$"))


def check_text(node: Node) -> str:
    """The check in plain words; says how to print the exit status only when the command does not."""
    v = node.verify
    if v is None:
        return ""
    text = v.describe()
    if reads_exit_status(node) and not (is_command(node) and _PRINTS_STATUS.search(command_text(node))):
        text += f'; end the command with {EXIT_SUFFIX} so the status is printed'
    return text


def step_details(node: Node, item: str | None = None) -> list[str]:
    """The step's action, tool, command or hint and check; ``$item`` in them is ``item`` (a branch over a list's;
    quoted for a shell in a command or hint)."""
    lines = [f"  Action: {expand(node.action or node.name, item)}"]
    if node.tool:
        lines.append(f"  Tool: {node.tool}")
    if is_command(node):
        command = expand(command_text(node), item, command=True)
        label = "Command (fill in the <...> parts)" if _PLACEHOLDER.search(command) else "Command"
        lines.append(f"  {label}: {command}")
    elif node.tool_hint.strip():
        lines.append(f"  Hint: {expand(node.tool_hint.strip(), item, command=True)}")
    if node.verify is not None:
        lines.append(f"  Check: passes when {check_text(node)}")
    return lines


# ── linear plans: the old selector's layout ─────────────────────────────────


def linear_context(plan: Plan, state: dict[str, Any]) -> str:
    total = state["total_steps"]
    done, failed = set(state["steps_completed"]), set(state["steps_failed"])
    skipped = set(state.get("steps_skipped") or ())
    lines = [f"[ACTIVE PLAN: {state['plan_name']}] step {min(state['current_step'] + 1, total)} of {total} "
             f"({progress(state)})"]
    for i, nid in enumerate(plan.success_path):
        node = plan.nodes[nid]
        label = f"  Step {i + 1} of {total}: {node.name}"
        if i in done:
            lines.append(f"{label} [DONE]")
        elif i in failed:
            lines.append(f"{label} [FAILED]")
        elif i in skipped and i != state["current_step"]:
            lines.append(f"{label} [SKIPPED]")
        elif i == state["current_step"]:
            lines.append(f"{label} << CURRENT")
            lines.extend("  " + line for line in step_details(node))
        else:
            lines.append(f"{label} [PENDING]")
    if state.get("last_failure"):
        verb = "failed its check" if plan.nodes[state["current_node"]].on_fail == "block" else "check not met"
        lines.append(f"Step {state['current_step'] + 1} {verb}: {state['last_failure']}")
    lines.append("")
    lines.append(f"Execute Step {state['current_step'] + 1} now. Do not skip ahead. Verify before proceeding.")
    return "\n".join(lines)


# ── graph plans ─────────────────────────────────────────────────────────────


class _PlanTexts:
    """The parts of a plan's context that depend on the plan alone, made once per plan version."""

    def __init__(self, plan: Plan) -> None:
        self.header = f"[WORKFLOW: {plan.name}] "
        self.of_total = f" of {plan.total_steps}"
        self.task_name = {nid: n.name for nid, n in plan.nodes.items() if n.kind.judged}
        self.steps: dict[str, str] = {}  # node -> its block of instructions
        self.forward: dict[tuple[str, int], str] = {}  # (node, failures) -> the ways forward
        for nid, node in plan.nodes.items():  # made with the plan's first context: a step met for the first
            if node.kind.judged:  # time costs no more than any other (the after-failure texts come later)
                self.steps[nid] = "\n".join(step_details(node))
                self.forward[(nid, 0)] = "\n".join(_paths_forward(plan, node, 0))


def _texts(plan: Plan) -> _PlanTexts:
    return plan.derived("_render_texts", _PlanTexts)


def position(plan: Plan, node: Node) -> str:
    """'step 3 of 5', or 'extra step' for a task node off the success path."""
    index = plan.success_index.get(node.id)
    if index is None:
        return f"extra step, not one of the {plural(plan.total_steps, 'main step')}"
    return f"step {index + 1} of {plan.total_steps}"


def attempt(node: Node, failures: int) -> str:
    if node.max_retries <= 0:
        return ""
    return f" (attempt {min(failures, node.max_retries) + 1} of {node.max_retries + 1})"


def graph_context(plan: Plan, state: dict[str, Any]) -> str:
    node = plan.nodes[state["current_node"]]
    if node.kind.asks:
        return human_context(plan, state, node)
    texts = _texts(plan)
    entry = state["visited"].get(node.id)
    failures = entry.get("failures", 0) if entry else 0
    lines = [f"{texts.header}{position(plan, node)} ({progress(state)})"]
    trail = _trail(plan, state)
    if trail:
        lines.append("  " + " → ".join(trail))
    pending = _pending(plan, state, node)
    if pending:
        lines.append("  Next: " + pending)
    if state.get("route_note") and state.get("turns_since_transition", 0) == 0:
        lines.append("  " + state["route_note"])
    item = item_of(state)
    if item is not None:
        lines.append(f"  This branch's item: {item}")
    lines.append(f"Current step: {node.name}{attempt(node, failures)}")
    lines.append("\n".join(step_details(node, item)) if item is not None else
                 texts.steps.get(node.id) or "\n".join(step_details(node)))
    if state.get("last_failure"):
        failed = _last_judged(state)
        who = "Last attempt" if failed in ("", node.id) else _texts(plan).task_name.get(failed, failed)
        lines.append(f"  {who} failed: {state['last_failure']}")
    key = (node.id, min(failures, node.max_retries))  # past its budget a node's ways forward stay the same
    sequential = _sequential_branch(plan, state, node) if state.get("parallel") else None
    forward = texts.forward.get(key) if sequential is None else "\n".join(
        _paths_forward(plan, node, key[1], sequential[0], sequential[1]))
    if forward is None:
        forward = "\n".join(_paths_forward(plan, node, key[1]))
        if key[1] <= FORWARD_CACHED:  # a budget of a billion retries must not grow the cache for ever
            texts.forward[key] = forward
    lines.append(forward)
    if state.get("stalled"):
        lines.append(f"  STALLED: {state['stalled']}")
    lines.append(_FOOTER)
    return "\n".join(lines)


def _last_judged(state: dict[str, Any]) -> str:
    """The node of the newest check (the one whose failure ``last_failure`` holds)."""
    events = state.get("events") or ()
    for i in range(len(events) - 1, -1, -1):
        if events[i].get("type") == "node_verified":
            return str(events[i].get("node", ""))
    return ""


_FOOTER = f"\n{EVIDENCE_NOTE}\n{INSTRUCTION}"
FORWARD_CACHED = 8
PENDING_SHOWN = 6


def _pending(plan: Plan, state: dict[str, Any], node: Node) -> str:
    """The next success-path steps not done yet (a few: long plans must not make every pass longer)."""
    start = plan.success_index.get(node.id, -1) + 1
    names, visited, path, task_name = [], state["visited"], plan.success_path, _texts(plan).task_name
    for i in range(start, len(path)):  # no slice: a copy of a long path on every pass adds up
        nid = path[i]
        if not (visited.get(nid) or {}).get("completed"):
            if len(names) == PENDING_SHOWN:
                return ", ".join(names) + ", ..."  # the header counts them all
            names.append(task_name[nid])
    return ", ".join(names)


TRAIL_SHOWN = 8
_MARK = {"success": " [DONE]", "partial_success": " [PARTLY DONE]", "fail": " [FAILED]", "skipped": " [SKIPPED]"}


def _mark(entry: dict[str, Any] | None) -> str:
    """The latest check of a step met earlier: passed, failed (a retry keeps the outcome 'pending')."""
    outcome = entry.get("outcome", "") if entry else ""
    if outcome == "pending" and entry and entry.get("attempts", 0) > 0:
        return " [FAILED]"
    return _MARK.get(outcome, " [NOT CHECKED]")


def _trail(plan: Plan, state: dict[str, Any]) -> list[str]:
    """The last few task nodes met before the current one, each once, oldest first, with their latest
    outcome ('<< CURRENT' marks the current one).  Empty when the current step is the first met."""
    parts: list[str] = []
    seen: set[str] = set()
    path, visited, current = state.get("path", []), state["visited"], state["current_node"]
    task_name = _texts(plan).task_name
    for i in range(len(path) - 1, -1, -1):
        nid = path[i]
        name = task_name.get(nid)
        if name is None or nid in seen:
            continue
        seen.add(nid)
        if len(parts) == TRAIL_SHOWN:
            parts.append("...")
            break
        if nid == current:
            parts.append(f"{name} << CURRENT")
            continue
        parts.append(name + _mark(visited.get(nid)))
    parts.reverse()
    return parts if len(parts) > 1 else []


def human_context(plan: Plan, state: dict[str, Any], node: Node) -> str:
    options = [e.label or plan.nodes[e.dst].name for e in plan.out_edges.get(node.id, ())]
    lines = [f"[WORKFLOW: {plan.name}] waiting for the user's decision ({progress(state)})"]
    trail = _trail(plan, state)
    if trail:
        lines.append("  " + " → ".join(trail + [f"{node.name} << QUESTION"]))
    if state.get("route_note"):
        lines.append("  " + state["route_note"])
    lines.append(f"Question for the user: {node.description or node.name}")
    lines.append("Options: " + "; ".join(options))
    lines.append("")
    lines.append("Ask the user this question with the options above, using the response tool, and stop. "
                 "Do not choose for the user and do not execute further steps until the user answers.")
    return "\n".join(lines)


def node_words(plan: Plan, node_id: str | None) -> str:
    """A node as the ways forward name it: a step's name, 'escalate: why', 'finish (...)', a question."""
    if node_id is None:
        return "no route: the workflow stalls"
    dst = plan.nodes[node_id]
    if dst.kind.ends == "escalated":
        return f"escalate: {dst.reason or dst.name}"
    if dst.kind.ends == "completed":
        return f"finish ({dst.name})"
    if dst.kind.asks:
        return f"ask the user: {dst.description or dst.name}"
    return dst.name


def _words(plan: Plan, targets: tuple[str | None, ...], inside: Any = None, end: str = "the end of this branch") -> str:
    """The steps ``targets`` name, in words; with ``inside`` (a branch's nodes) a step past them is ``end``; the
    first steps of a parallel node's branches are named as its branches."""
    if inside is not None:
        words = dict.fromkeys(node_words(plan, t) if t in inside else end for t in targets)
        return " or ".join(words) or node_words(plan, None)
    if len(targets) > 1:
        for fork in plan.fan_in_of:
            firsts = list(dict.fromkeys(e.dst for e in plan.out_edges.get(fork, ())))
            if set(firsts) == set(targets):
                names = [f"'{branch_name(plan, b)}'" for b in firsts]
                return f"the branches of '{plan.nodes[fork].name}': {', '.join(names[:-1])} and {names[-1]}"
    return " or ".join(node_words(plan, t) for t in targets) or node_words(plan, None)


def _sequential_branch(plan: Plan, state: dict[str, Any], node: Node) -> tuple[frozenset[str], str] | None:
    """(the nodes of the branch the run is in, what comes after it) when the run's own agent runs a parallel node's
    branches one after another and is in one of them; else None."""
    frame = state["parallel"][-1]
    fan_in = plan.fan_in_of.get(frame["node"])
    if not fan_in:
        return None
    branches = list(frame["items"]) if "items" in frame else list(
        dict.fromkeys(e.dst for e in plan.out_edges.get(frame["node"], ())))
    at = len(branches) - len(frame["pending"]) - 1
    if not 0 <= at < len(branches):
        return None
    nodes = fanout_inside(plan, first_of(plan, branches[at]), fan_in)
    if node.id not in nodes:
        return None
    after = (f"the next branch, '{branch_name(plan, frame['pending'][0])}'" if frame["pending"] else
             f"'{plan.nodes[fan_in].name}', where the branches meet")
    return nodes, after


def _targets(plan: Plan, targets: tuple[str | None, ...]) -> str:
    return _words(plan, targets)


def _comes_back(plan: Plan, start: str | None, node_id: str) -> bool:
    """Passing every step from ``start`` leads back to ``node_id`` within a few steps."""
    seen: set[str] = set()
    todo = [start]
    for _ in range(BACK_STEPS):
        nxt: list[str | None] = []
        for nid in todo:
            if nid == node_id:
                return True
            if nid is None or nid in seen or not plan.nodes[nid].kind.judged:
                continue
            seen.add(nid)
            nxt.extend(resolve(plan, nid, "success"))
        todo = nxt
    return node_id in todo


BACK_STEPS = 6


def _paths_forward(plan: Plan, node: Node, failures: int, inside: Any = None,
                   end: str = "the end of this branch") -> list[str]:
    """Where the run goes when this attempt passes or fails (through decisions), in the words the model reads;
    ``inside``: the nodes of the branch the run is in (a step past them is ``end``)."""
    def _targets(plan: Plan, targets: tuple[str | None, ...]) -> str:
        return _words(plan, targets, inside, end)
    lines = [f"  If the check passes → {_targets(plan, resolve(plan, node.id, 'success'))}"]
    if node.verify is None:
        return lines  # a step without a check passes on its tool's result
    left = node.max_retries - failures  # attempts left after this one fails
    if left > 0:
        again = f"{plural(left, 'attempt')} left"
        retry = resolve(plan, node.id, "retry")
        if retry == (node.id,):
            lines.append(f"  If it fails → this step again ({again})")
        elif all(_comes_back(plan, t, node.id) for t in retry):
            lines.append(f"  If it fails → {_targets(plan, retry)}, then this step again ({again})")
        else:
            lines.append(f"  If it fails → {_targets(plan, retry)}")
    label = "If it fails on the last attempt" if left > 0 else "If it fails"
    if node.allow_partial:  # the retries spent, the result is accepted as it is and the run goes on
        lines.append(f"  {label} → the step counts as partly done, then "
                     f"{_targets(plan, resolve(plan, node.id, 'partial'))}")
    else:
        lines.append(f"  {label} → {_targets(plan, resolve(plan, node.id, 'exhausted'))}")
    return lines


CONDITION_WORDS = {"on_success": "the last check passed", "on_retry": "the last check failed, attempts left",
                   "on_fail": "the last check failed", "on_exhaust": "the last check failed, no attempts left",
                   "always": "always"}


def decision_note(plan: Plan, node: Node, edge: Edge) -> str:
    """One line on what a decision chose and why (its edge's label, else the condition in words)."""
    why = edge.label or CONDITION_WORDS.get(edge.condition, edge.condition)
    question = f" ({node.description})" if node.description else ""
    return f'Decision "{node.name}"{question}: {why} → {plan.nodes[edge.dst].name}'


# ── branches running at once, each in a subordinate agent ──────────────────

ANSWER_SHOWN = 300  # characters of a branch agent's answer shown to the parent's next step
WAIT_COMMAND = 'echo "[waiting for the branches]"'


def branch_name(plan: Plan, branch_id: str) -> str:
    """A branch by its first node's name; one over a list's item with the item's number ('Run the tests #2')."""
    node = plan.nodes.get(branch_id)
    if node is not None:
        return node.name
    first = first_of(plan, branch_id)
    return f"{plan.nodes[first].name} #{branch_id.rpartition('#')[2]}" if first in plan.nodes else branch_id


def item_of(state: dict[str, Any]) -> str | None:
    """The item the run's current branch runs for: a branch agent's over a list, or the run's own while it runs a
    list's branches one after another; None for none."""
    mine = state.get("branch")
    if isinstance(mine, dict) and "item" in mine:
        return mine["item"]
    frames = state.get("parallel")
    if frames and "items" in frames[-1]:
        item = (state.get("context") or {}).get(ITEM)
        return item if isinstance(item, str) else None
    return None


FULL_CHAT = 8_000  # characters of the chat so far a branch with fidelity "full" is told (its newest)
SUMMARY_STEPS = 12  # steps done before the fork a branch with fidelity "compact" or "summary:*" is told (the last)


def branch_assignment(plan: Plan, state: dict[str, Any], parent: dict[str, Any] | None = None,
                      fidelity: str = "", chat: str = "") -> str:
    """The message a branch's subordinate agent starts with (its steps come with each of its turns); with a
    ``fidelity`` of full, the chat so far (``chat``), of compact or summary:*, the steps done before the fork."""
    name = branch_name(plan, state["branch"]["id"])
    if "child" in state["branch"]:
        return (f"You run the workflow '{state['plan_name']}' for the workflow '{plan.name}', whose step '{name}' "
                "watches your progress at each of your turns. Do the steps you are shown, one at a time, each with "
                "the tool it names; when you are told the workflow is done, answer with the response tool.")
    item = item_of(state)
    mine = f" It is for the item: {item}" + ("" if item.endswith((".", "!", "?")) else ".") if item is not None else ""
    text = (f"You run one branch of the workflow '{plan.name}': '{name}'.{mine} Other agents run the other branches "
            "at the same time. Do the steps you are shown, one at a time, each with the tool it names; when you are "
            "told the branch is done, answer with the response tool.")
    if fidelity == "full" and chat.strip():
        told = chat[-FULL_CHAT:]
        cut = "its last part, " if len(chat) > FULL_CHAT else ""
        text += f"\n\nThe chat so far ({cut}for context; act only on your branch's steps):\n{told}"
    elif (fidelity == "compact" or fidelity.startswith("summary:")) and parent is not None:
        done = steps_judged(plan, parent)
        if done:
            text += "\n\nSteps of the workflow done before the branches started:\n" + "\n".join(done)
    return text


def steps_judged(plan: Plan, state: dict[str, Any]) -> list[str]:
    """The steps a run judged, each once in the order met, with its last check: '- Build: passed, exit status 0'."""
    last: dict[str, str] = {}
    for event in state.get("events") or ():
        if event.get("type") == "node_verified" and not event.get("branch") and event.get("node") in plan.nodes:
            verdict = {"success": "passed", "fail": "failed"}.get(event.get("outcome", ""), event.get("outcome", ""))
            last.pop(event["node"], None)
            last[event["node"]] = verdict + (f", {event['reason']}" if event.get("reason") else "")
    return [f"- {plan.nodes[nid].name}: {v}" for nid, v in list(last.items())[-SUMMARY_STEPS:]]


def branch_context(plan: Plan, state: dict[str, Any]) -> str:
    """A branch's step, as its agent reads it: the workflow's context without the other branches' steps, and its
    ways forward ending at the branch's end."""
    branch = state["branch"]
    inside = fanout_inside(plan, first_of(plan, branch["id"]), branch["fan_in"])
    node = plan.nodes[state["current_node"]]
    failures = (state["visited"].get(node.id) or {}).get("failures", 0)
    lines = [f"[BRANCH: {branch_name(plan, branch['id'])}] You are a subordinate agent running this one branch of "
             "the workflow; do only its steps."]
    forward = _paths_forward(plan, node, min(failures, node.max_retries), inside) if node.kind.judged else []
    counted = f" ({progress(state)})"  # the whole plan's count: not this branch's to read
    for line in graph_context(plan, state).split("\n"):
        if line.startswith("  Next: ") or (forward and line.startswith("  If ")):
            continue
        if line.startswith("[WORKFLOW: ") and line.endswith(counted):
            line = line[: -len(counted)]
        if forward and line == "":  # the footer's blank line: the ways forward go before it
            lines.extend(forward)
            forward = []
        lines.append(line)
    return "\n".join(lines)


def branch_not_done(plan: Plan, state: dict[str, Any], node: Node | None) -> str:
    """What a branch's agent is told when it answered before its branch was done."""
    where = f" at '{node.name}'" if node is not None else ""
    return (f"The branch '{branch_name(plan, state['branch']['id'])}' is not done yet: it is{where}. Go on with its "
            "current step; answer with the response tool only when you are told the branch is done.")


def fork_context(plan: Plan, state: dict[str, Any]) -> str:
    """The parent while its branches run (the call before the host starts them, when that is not this call)."""
    fork = state["fork"]
    listed = [f"'{branch_name(plan, b['id'])}' ({b['status']})" for b in fork["branches"]]
    return (f"[WORKFLOW: {plan.name}] {branch_name(plan, fork['node'])} ({progress(state)})\n"
            f"  Branches, each run by a subordinate agent of its own: {', '.join(listed)}.\n"
            "Do not do the branches' work yourself: their results come with your next step. Run exactly this "
            f"command and nothing else: {WAIT_COMMAND}")


def branch_done_notice(plan: Plan, state: dict[str, Any], outcome: str, reason: str) -> str:
    """What a branch's agent reads when its branch's run ended: answer now."""
    name = branch_name(plan, state["branch"]["id"])
    title = "DONE" if outcome == "success" else "ENDED"
    why = f" ({reason})" if reason else ""
    return (f"[BRANCH {title}: {name}] Outcome: {outcome}{why}.\n"
            "Answer now with the response tool, in a few lines: what you did and what the checks showed"
            + ("" if outcome == "success" else ", and what failed") + ". Run nothing else.")


def fan_in_failure(plan: Plan, fan_in: Node, outcomes: dict[str, str]) -> str:
    failed = [f"'{branch_name(plan, b)}'" for b, o in outcomes.items() if o != "success"]
    return f"{plural(len(failed), 'branch')} did not succeed ({', '.join(failed)}); {_policy(plan, fan_in)}"


def _policy(plan: Plan, fan_in: Node) -> str:
    return FAN_IN_POLICIES[fan_in.fan_in_policy].told.format(
        q=fan_in.quorum, r=" and ".join(f"'{branch_name(plan, r)}'" for r in fan_in.required))


def fan_in_note(plan: Plan, fan_in: Node, branches: list[dict[str, Any]], passed: bool, none_ran: str = "") -> str:
    """The fan-in's evidence, shown with the parent's next step: each branch's outcome, last check and answer (or
    why no branch ran: a list with no item, or one that could not fan out)."""
    if none_ran:
        return f"No branch ran ({none_ran}): '{fan_in.name}' routes on {'success' if passed else 'fail'}."
    if fan_in.kind.manages and branches:
        b = branches[0]
        answer = " ".join(str(b.get("answer", "")).split())[:ANSWER_SHOWN]
        return (f"The child workflow '{(b.get('state') or {}).get('plan_name', fan_in.child)}' of '{fan_in.name}' "
                f"ended: {b['status']}" + (f" ({b['reason']})" if b.get("reason") else "")
                + (f"; its answer: {answer}" if answer else "") + f". '{fan_in.name}' routes on "
                f"{'success' if passed else 'fail'}.")
    lines = [f"The branches met at '{fan_in.name}' ({_policy(plan, fan_in)}): it routes on "
             f"{'success' if passed else 'fail'}."]
    for b in branches:
        check = _last_check(plan, b.get("state") or {})
        answer = " ".join(str(b.get("answer", "")).split())
        answer = answer[:ANSWER_SHOWN] + ("..." if len(answer) > ANSWER_SHOWN else "")
        item = ((b.get("state") or {}).get("branch") or {}).get("item")
        lines.append(f"- '{branch_name(plan, b['id'])}'" + (f" (item: {item})" if item is not None else "")
                     + f": {b['status']}"
                     + (f" ({b['reason']})" if b.get("reason") and b["status"] != "success" else "")
                     + (f"; last check: {check}" if check else "") + (f"; its answer: {answer}" if answer else ""))
    return "\n  ".join(lines)


def _last_check(plan: Plan, sub: dict[str, Any]) -> str:
    for event in reversed(sub.get("events") or ()):
        if event.get("type") == "node_verified":
            verdict = {"success": "passed", "fail": "failed"}.get(event.get("outcome", ""), event.get("outcome", ""))
            return (f"{branch_name(plan, str(event.get('node', '')))}: {verdict}"
                    + (f", {event['reason']}" if event.get("reason") else ""))
    return ""


# ── notices when a run ends (or is held, resumed, withdrawn) ────────────────


def stopped_at(plan: Plan | None, state: dict[str, Any]) -> str:
    """The last task node the run was on (or the fan-in where branches run at once met), with the step count:
    'Implement the fix (2 of 5 steps done)'."""
    nid = state.get("current_node", "")
    if plan is not None:
        path = state.get("path", [])
        for i in range(len(path) - 1, -1, -1):
            candidate, node = path[i], plan.nodes.get(path[i])
            joined = node is not None and node.kind.joins and i > 0 and path[i - 1] in plan.fan_in_of
            if node is not None and (node.kind.judged or joined):
                nid = candidate
                break
    node = plan.nodes.get(nid) if plan is not None else None
    return f"{node.name if node else nid} ({progress(state)})"


def completed_notice(state: dict[str, Any], exit_name: str) -> str:
    return (f"[WORKFLOW COMPLETE: {state['plan_name']}]\n  Finished at: {exit_name} ({progress(state)})\n\n"
            "The workflow is complete. Report the result to the user.")


def escalated_notice(state: dict[str, Any], node: Node, plan: Plan | None = None, reason: str = "") -> str:
    return (f"[WORKFLOW ESCALATED: {state['plan_name']}]\n  Reason: {reason or node.reason or node.name}\n"
            f"  PACE level: {node.pace_level}\n  Stopped at: {stopped_at(plan, state)}\n\n"
            "The current approach has failed. Stop executing workflow steps; tell the user what failed "
            "and ask for guidance.")


def ended_notice(state: dict[str, Any], title: str, reason: str, plan: Plan | None = None) -> str:
    return (f"[WORKFLOW {title}: {state['plan_name']}]\n  Reason: {reason}\n"
            f"  Stopped at: {stopped_at(plan, state)}\n\n"
            "The workflow is no longer tracked. Continue with the user's request.")


def withdrawn_notice(state: dict[str, Any], reason: str) -> str:
    return (f"[WORKFLOW WITHDRAWN: {state['plan_name']}] It does not apply to this message ({reason}); "
            "ignore the step the previous call showed.")


def paused_notice(state: dict[str, Any]) -> str:
    return (f"[WORKFLOW PAUSED: {state['plan_name']}] The user has sent a new message: do what it asks. If it "
            "continues this workflow, its current step is shown again in the next call.")


def hold(plan: Plan, state: dict[str, Any]) -> str:
    """PACE emergency: the step is not to be executed; the model stops and reports."""
    return (f"[WORKFLOW ON HOLD: {state['plan_name']}]\n  PACE level: EMERGENCY\n  Stopped at: "
            f"{stopped_at(plan, state)}\n\nDo not execute further workflow steps. Stop and report to the user: "
            "what was done, what failed, and the state things are in now; then wait for the user's instructions.")


def resumed_notice(state: dict[str, Any], plan: Plan) -> str:
    node = plan.nodes.get(state.get("current_node", ""))
    where = node.name if node else state.get("current_node", "")
    return (f"[WORKFLOW RESUMED: {state['plan_name']}]\n  The workflow was restored after a restart or chat "
            f"reload and continues at: {where} ({progress(state)}; attempt counts kept). Results from before "
            "the restart are not checked again; run the current step again if its result is not in view.")


# ── the user's controls (engine: "the user's controls") ─────────────────────

NO_RUN_VERBS = {k.name: k.verb for k in CONTROLS.values() if k.verb}
LISTED_PHRASES = 3


def control_line(text: str) -> str:
    return f"[WORKFLOW CONTROL] {text}"


def no_run_answer(kind: str) -> str:
    return control_line(f"No workflow is active, so there is nothing to {NO_RUN_VERBS.get(kind, kind)}; tell the "
                        "user so in one sentence.")


def output_cut() -> str:
    return ("[WORKFLOW NOTE] Your last command's output came back without its [exit:N] line: it was cut before the "
            "command ended. Run this step's command again, as it is shown.")


def terminal_busy() -> str:
    return ("[WORKFLOW NOTE] Your last command did not run: the terminal was still running an earlier command. "
            "Run this step's command again with \"reset\": true in the tool's arguments (the terminal is reset "
            "first).")


PRESSED_DONE = {"stop": "Stopped at {step}.", "pause": "Paused at {step}.", "resume": "Resumed at {step}.",
                "skip": "Skipped. Now at {step}.", "back": "Back at {step}.", "retry": "{step} has its attempts back.",
                "restart": "Restarted: a new run, now at {step}."}


def pressed_answer(kind: str, applied: bool, refused: str, plan: Plan | None, state: dict[str, Any]) -> str:
    """What the person reads beside a control they pressed: what it did, or why it did nothing."""
    if not applied:
        return f"Not applied: {refused}" if refused else "Not applied."
    node = plan.nodes.get(state.get("current_node", "")) if plan is not None else None
    step = f"'{node.name}'" if node is not None and not (node.kind.begins or node.kind.ends == "completed") else "its end"
    if kind == "stop":
        step = stopped_at(plan, state)
    told = "" if kind == "stop" else " The agent is told at its next step."
    return PRESSED_DONE[kind].format(step=step) + told


def stopped_notice(state: dict[str, Any], plan: Plan | None) -> str:
    return (f"[WORKFLOW STOPPED by the user: {state['plan_name']}]\n  Stopped at: {stopped_at(plan, state)}\n\n"
            "The user stopped this workflow; it is no longer tracked. Do not continue its steps: confirm that it "
            "is stopped and wait for the user's next request.")


def user_paused(plan: Plan, state: dict[str, Any]) -> str:
    return (f"[WORKFLOW PAUSED by the user: {state['plan_name']}] At {stopped_at(plan, state)}. No step is shown "
            "and no result is checked until the user says \"resume the workflow\"; meanwhile do what the user asks.")


def skipped_note(name: str, how: str) -> str:
    return control_line(f"Skipped by the user: '{name}' is marked skipped, not done; {how}.")


def back_note(name: str) -> str:
    return control_line(f"Back to '{name}' at the user's request: it starts again with fresh attempts, and the steps "
                        "after it are pending again.")


def started_note(name: str, replaced: str) -> str:
    instead = f" It replaces '{replaced}', which ended." if replaced else ""
    return control_line(f"Started by the user: '{name}'.{instead}")


def no_such_step(plan: Plan, said: str, found: list[str]) -> str:
    if found:
        names = "; ".join(plan.nodes[n].name for n in found)
        return control_line(f"'{said}' names {len(found)} steps of '{plan.name}': {names}. Ask the user which one.")
    if not said:
        return control_line("There is no earlier step to go back to; the run is at its first step.")
    steps = "; ".join(plan.nodes[n].name for n in plan.success_path)
    return control_line(f"No step of '{plan.name}' is named '{said}'. Its steps: {steps}. Ask the user which one.")


def no_such_plan(said: str, found: list[str]) -> str:
    if found:
        return control_line(f"'{said}' names {len(found)} workflows: {'; '.join(found)}. Ask the user which one "
                            "(\"start the <name> workflow\").")
    if not said:
        return control_line("Not started: the message names no workflow. Ask the user which one (\"start the "
                            "<name> workflow\"); \"list workflows\" shows the ones you can run.")
    return control_line(f"Not started: no workflow is named '{said}'. Tell the user; \"list workflows\" shows "
                        "the ones you can run.")


def workflow_list(rows: list[tuple[str, str, tuple[str, ...]]], total: int, shown: int = 40) -> str:
    """The plans this agent may run, one line each with what starts it."""
    lines = [f"[WORKFLOWS you can run: {len(rows)}]"]
    for _pid, name, phrases in rows[:shown]:
        starts = ", ".join(f'"{p}"' for p in phrases[:LISTED_PHRASES])
        lines.append(f"- {name}: starts on a request such as {starts}" if starts else f"- {name}")
    if len(rows) > shown:
        lines.append(f"- ... and {len(rows) - shown} more")
    if total > len(rows):
        lines.append(f"({plural(total - len(rows), 'other workflow')} in the library the active org role does not "
                     "allow.)")
    lines.append("Give the user this list, one line each. A workflow also starts when the user says "
                 "\"start the <name> workflow\".")
    return "\n".join(lines)


def status_text(plan: Plan, state: dict[str, Any]) -> str:
    """Where the run stands: the current step, the steps done and skipped, the attempts, the way forward."""
    node = plan.nodes[state["current_node"]]
    done = [plan.nodes[n].name for n in plan.success_path if (state["visited"].get(n) or {}).get("completed")] \
        if plan.mode == "graph" else [plan.nodes[plan.success_path[i]].name for i in state["steps_completed"]
                                      if isinstance(i, int) and i < len(plan.success_path)]
    skipped = [plan.nodes[n].name if isinstance(n, str) and n in plan.nodes else
               plan.nodes[plan.success_path[n]].name for n in state.get("steps_skipped", [])
               if isinstance(n, str) or n < len(plan.success_path)]
    failures = (state["visited"].get(node.id) or {}).get("failures", 0)
    where = position(plan, node) if node.kind.judged else "a question for the user"
    lines = [f"[WORKFLOW STATUS: {plan.name}]",
             f"  Current step: {node.name} ({where}{attempt(node, failures).replace(' (', ', ').rstrip(')')})",
             f"  Done: {'; '.join(done) or 'nothing yet'} ({progress(state)})"]
    if skipped:
        lines.append(f"  Skipped by the user: {'; '.join(skipped)}")
    if node.kind.judged and plan.mode == "graph":
        lines.extend(_paths_forward(plan, node, failures))
    lines.append("Tell the user where the workflow stands, in these words, then go on with the current step.")
    return "\n".join(lines)


def duration(seconds: float) -> str:
    """'45 s', '15 min', '2 h 5 min'."""
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"
