"""Every text a plan can show the model, laid out for review (``graph-engine prompts``, the golden files).

For a graph plan: each task step's context at its first visit, after one failed attempt and after all its
attempts failed (what the model is shown next), the text right after each route a decision can take, each
escalation notice, the completion notice, and the expiry, end, withdrawal, pause, hold and resume notices;
for a human gate its question, the re-ask after an answer that matches no option, and the step after each
option.  A linear plan: each step, its failure texts and the completion.

The runs are made by the engine's own transition code (``engine.apply_outcome``, ``engine.answer_human``)
and the texts by the same functions the hooks use (``engine.shown_text`` and the notices), so what is
reviewed here is what the model reads.  Failed attempts get the reason the step's real check gives on a
failing output.  Tooling: not installed into Agent-Zero.
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass
from typing import Iterator

from ..core import engine
from ..texts import render
from . import simulate
from ..core.model import Node, Plan
from ..core.verify import Evidence, check

MAX_DEPTH = 60
MAX_RUNS = 20_000
MAX_DRIVE = 40
FAILING_OUTPUTS = ("Error: something went wrong\n[exit:1]", "[exit:0]", "", "all good")


@dataclass(frozen=True)
class Section:
    title: str
    text: str


def document(plan: Plan) -> str:
    """The plan's texts as one reviewable document."""
    head = f"# Texts the model reads for plan '{plan.id}' ({plan.name})\n"
    return head + "".join(f"\n=== {s.title} ===\n{s.text}\n" for s in sections(plan))


def sections(plan: Plan) -> list[Section]:
    if plan.mode == "linear":
        return list(_linear_sections(plan))
    return list(_graph_sections(plan)) + list(_branch_sections(plan))


# ── runs ────────────────────────────────────────────────────────────────────


def _clone(run: engine.Run) -> engine.Run:
    return engine.Run(plan=run.plan, state=copy.deepcopy(run.state), fx=engine.Effects(texts=render))


def _seen(run: engine.Run) -> str:
    """What the model is shown after the run's last transition: the step, or the notice the run ended with."""
    if run.fx.ended:
        return run.fx.context or ""
    return engine.shown_text(run)


def failure_reason(node: Node) -> str:
    """The reason the node's real check gives on a failing output."""
    for text in FAILING_OUTPUTS:
        verdict = check(node.verify, Evidence(tool=node.tool, text=text))
        if not verdict.ok:
            return verdict.reason
    return "the check failed"


def _act(run: engine.Run, passed: bool) -> engine.Run:
    """One pass that judges the current step: counted like a pass (turns), then the outcome applied."""
    nxt = _clone(run)
    turn = nxt.state["turn"] + 1
    engine._tick(nxt, engine.Observation(hook=engine.PROMPTS_AFTER, monologue="sim", iteration=turn))
    node = nxt.node
    if passed:
        engine.apply_outcome(nxt, node, "success", "the check passed")
    else:
        engine.apply_outcome(nxt, node, "fail", failure_reason(node))
    return nxt


def _alive(run: engine.Run) -> bool:
    return not run.fx.ended and not run.state.get("stalled") and run.node.kind.rests


def _answer(run: engine.Run, answer: str) -> engine.Run:
    nxt = _clone(run)
    engine.answer_human(nxt, answer)
    return nxt


def _moves(run: engine.Run) -> Iterator[tuple[engine.Run, bool]]:
    """Every next run: a human gate takes each option; a task passes, or fails when it has a check."""
    if run.node.kind.asks:
        for edge in engine.human_options(run.plan, run.node):
            yield _answer(run, edge.label or edge.dst), True
        return
    yield _act(run, passed=True), True
    if run.node.verify is not None:  # a step without a check cannot fail
        yield _act(run, passed=False), False


def _key(run: engine.Run) -> tuple:
    visited = run.state["visited"]
    return (run.state["current_node"],
            tuple(sorted((k, v.get("failures", 0), bool(v.get("completed"))) for k, v in visited.items())))


def explore(plan: Plan) -> Iterator[tuple[engine.Run, engine.Run, bool]]:
    """Breadth first over pass/fail outcomes from the start: (run before, run after, passed), shortest first."""
    first = simulate.start(plan)
    queue = deque([(first, 0)])
    seen = {_key(first)}
    count = 0
    while queue and count < MAX_RUNS:
        run, depth = queue.popleft()
        if not _alive(run) or depth >= MAX_DEPTH:
            continue
        for nxt, passed in _moves(run):
            count += 1
            yield run, nxt, passed
            key = _key(nxt)
            if _alive(nxt) and key not in seen:
                seen.add(key)
                queue.append((nxt, depth + 1))


# ── graph plans ─────────────────────────────────────────────────────────────


def _graph_sections(plan: Plan) -> Iterator[Section]:
    first_visit: dict[str, engine.Run] = {}
    routes: dict[tuple[str, str, str], str] = {}
    ends: dict[str, str] = {}
    start = simulate.start(plan)
    if _alive(start):
        first_visit[start.state["current_node"]] = start
    for before, after, _ in explore(plan):
        node = after.state["current_node"]
        entry = after.state["visited"].get(node, {})
        if _alive(after) and after.node.kind.judged and node not in first_visit and entry.get("failures", 0) == 0:
            first_visit[node] = after
        for e in after.state["events"]:
            if e["seq"] <= before.state["seq"]:
                continue
            if e["type"] == "edge_followed" and plan.nodes[e["from"]].kind.decides:
                routes.setdefault((e["from"], e["condition"], e["to"]), _seen(after))
        if after.fx.ended:
            ends.setdefault(after.state["current_node"], after.fx.context or "")
    for nid in _task_order(plan):
        if nid in first_visit:
            yield from _task_sections(plan, plan.nodes[nid], first_visit[nid])
        else:
            yield Section(f"{nid}: never reached from the start", "(no text)")
    for (dec, cond, dst), text in sorted(routes.items(), key=lambda kv: _order(plan, kv[0])):
        yield Section(f"decision {dec}: {cond} -> {dst}", text)
    for nid, node in plan.nodes.items():
        if node.kind.terminal and nid in ends:
            yield Section(f"{'escalation' if node.kind.ends == 'escalated' else 'completion'} {nid}", ends[nid])
    yield from _human_sections(plan)
    yield from _notices(plan, first_visit)


def _order(plan: Plan, route: tuple[str, str, str]) -> tuple[int, int]:
    ids = list(plan.nodes)
    edges = [(e.src, e.condition, e.dst) for e in plan.edges]
    return ids.index(route[0]), edges.index(route) if route in edges else len(edges)


def _task_order(plan: Plan) -> list[str]:
    rest = [nid for nid, n in plan.nodes.items() if n.kind.judged and nid not in plan.success_index]
    return list(plan.success_path) + rest


def _task_sections(plan: Plan, node: Node, first: engine.Run) -> Iterator[Section]:
    yield Section(f"{node.id}: first visit", engine.shown_text(first))
    if node.verify is None:
        return
    once = _act(first, passed=False)
    word = "attempt" if node.max_retries else "attempt (its only one)"
    yield Section(f"{node.id}: after 1 failed {word}, the model is shown", _seen(once))
    if node.max_retries == 0:
        return
    run = once
    for _ in range(MAX_DRIVE):  # back to the node (passing the steps in between), fail again, until exhausted
        if not _alive(run) or run.state["visited"][node.id]["outcome"] in ("fail", "partial_success"):
            break
        run = _act(run, passed=run.state["current_node"] != node.id)
    title = f"{node.id}: after all {node.max_retries + 1} attempts failed, the model is shown"
    if run.state["visited"][node.id]["outcome"] in ("fail", "partial_success"):  # partial: allow_partial
        yield Section(title, _seen(run))
    else:  # e.g. a merge whose failure goes to a conflict resolution that never leads back to it
        yield Section(title, "(never: after a failed attempt, passing every step does not lead back here)")


def _notices(plan: Plan, first_visit: dict[str, engine.Run]) -> Iterator[Section]:
    if not first_visit:
        return
    order = [nid for nid in _task_order(plan) if nid in first_visit]
    mid = first_visit[order[1] if len(order) > 1 else order[0]]
    stale = _clone(mid)
    stale.state["turns_since_transition"] = stale.state["stale_after_turns"] + 1
    engine._check_limits(stale)
    yield Section("expiry (no step change for too long)", stale.fx.context or "")
    ended = _clone(mid)
    engine._end(ended, "ENDED", "the new message matches plan 'Git Feature Branch'")
    yield Section("ended by a new request", ended.fx.context or "")
    yield Section("withdrawn before its first step counted",
                  render.withdrawn_notice(first_visit[order[0]].state, "the org role does not allow this plan"))
    yield Section("paused by a new message that does not decide yet", render.paused_notice(mid.state))
    held = _clone(mid)
    held.state["held"] = True
    yield Section("on hold (PACE emergency)", engine.shown_text(held))
    yield Section("resumed after a restart", render.resumed_notice(mid.state, plan))


def _human_sections(plan: Plan) -> Iterator[Section]:
    for nid, node in plan.nodes.items():
        if not node.kind.asks:
            continue
        run = _reach(plan, nid)
        if run is None:
            continue
        yield Section(f"human gate {nid}: the question", engine.shown_text(run))
        yield Section(f"human gate {nid}: after an answer that matches no option",
                      _seen(_answer(run, "maybe later")))
        for edge in engine.human_options(plan, node):
            yield Section(f"human gate {nid}: answered {edge.label or edge.dst!r}",
                          _seen(_answer(run, edge.label or edge.dst)))


def _reach(plan: Plan, node_id: str) -> engine.Run | None:
    """A run standing at ``node_id`` (passing every step; human gates take their first option)."""
    run = simulate.start(plan)
    for _ in range(MAX_DEPTH):
        if run.fx.ended or run.state.get("stalled"):
            return None
        if run.state["current_node"] == node_id:
            return run
        if run.node.kind.asks:
            options = engine.human_options(plan, run.node)
            if not options:
                return None
            run = _answer(run, options[0].label or options[0].dst)
        else:
            run = _act(run, passed=True)
    return None


# ── branches that run at once ───────────────────────────────────────────────


def _branch_sections(plan: Plan) -> Iterator[Section]:
    """For each parallel node whose branches meet at a fan-in: the chat's own agent while they start, each branch
    agent's first message and first step, its end (passed, and failed with its attempts spent), the reminder when
    it answers too early, and the step after the fan-in on either route (every branch passed; every one failed)."""
    from ..core.state import new_state, push_path
    for fork_id, fan_in in plan.fan_in_of.items():
        name = plan.nodes[fork_id].name
        state = new_state(plan, "m", "m:0", 0)
        parent = engine.Run(plan=plan, state=state, fx=engine.Effects(texts=render), concurrent=True)
        state["current_node"] = fork_id
        push_path(state, fork_id)
        engine._fork(parent, plan.nodes[fork_id])
        yield Section(f"parallel '{name}': the chat's agent while its branches start", engine.shown_text(parent))
        for b in state["fork"]["branches"]:
            sub = b["state"]
            branch = render.branch_name(plan, b["id"])
            yield Section(f"branch '{branch}': its agent's first message", render.branch_assignment(plan, sub))
            yield Section(f"branch '{branch}': its first step", render.context(plan, sub))
            yield Section(f"branch '{branch}': answered before it was done",
                          render.branch_not_done(plan, sub, plan.nodes.get(sub["current_node"])))
            for passed in (True, False):
                run = _to_end(engine.Run(plan=plan, state=copy.deepcopy(sub), fx=engine.Effects(texts=render)), passed)
                how = "passed" if passed else "failed on every attempt"
                yield Section(f"branch '{branch}': {how}, its end", _seen(run))
        for passed in (True, False):
            joined = engine.Run(plan=plan, state=copy.deepcopy(state), fx=engine.Effects(texts=render),
                                concurrent=True)
            for b in joined.state["fork"]["branches"]:
                sub, _ = engine.branch_started(joined.state, b["id"])
                run = _to_end(engine.Run(plan=plan, state=sub, fx=engine.Effects(texts=render)), passed)
                engine.branch_returned(joined.state, b["id"], run.fx.final_state or run.state,
                                       f"{b['id']}: all clean" if passed else f"{b['id']}: it still fails")
            engine._join_when_done(joined)
            how = "every branch passed" if passed else "every branch failed"
            notice = joined.fx.notice + "\n\n" if joined.fx.notice and not joined.fx.ended else ""
            yield Section(f"fan-in '{plan.nodes[fan_in].name}': {how}, the next text", notice + _seen(joined))


def _to_end(run: engine.Run, passed: bool) -> engine.Run:
    """A branch's run driven until it ends, every check passing (or failing)."""
    for _ in range(MAX_DRIVE):
        if run.fx.ended or not run.node.kind.judged:
            break
        run = _act(run, passed)
    return run


# ── linear plans ────────────────────────────────────────────────────────────


def _linear_sections(plan: Plan) -> Iterator[Section]:
    from ..core.verify import Verdict
    run = simulate.start(plan)
    for i, nid in enumerate(plan.success_path):
        node = plan.nodes[nid]
        yield Section(f"step {i + 1} ({nid}): first visit", engine.shown_text(run))
        failed = _clone(run)
        engine._linear_verdict(failed, node, Verdict(False, failure_reason(node)), "")
        yield Section(f"step {i + 1} ({nid}): after a failed check (on_fail: {node.on_fail})", _seen(failed))
        nxt = _clone(run)
        engine._linear_verdict(nxt, node, Verdict(True, "the check passed"), "")
        run = nxt
    yield Section("completion", _seen(run))


# ── the user's controls ─────────────────────────────────────────────────────


def control_document(plan: Plan, library: list[Plan]) -> str:
    """What the model reads in the call that answers each of the user's controls, for a run of ``plan``."""
    head = f"# Texts the model reads when the user steers a run of '{plan.id}' ({plan.name})\n"
    return head + "".join(f"\n=== {s.title} ===\n{s.text}\n" for s in control_sections(plan, library))


def control_sections(plan: Plan, library: list[Plan]) -> Iterator[Section]:
    """Each control said at the run's second step (its first step done), through ``engine.step`` as the
    companion hook calls it; then the answers when no run is active."""
    order = [n for n in plan.success_path if plan.nodes[n].kind.judged]
    mid = simulate.start(plan)
    for _ in range(MAX_DRIVE):
        if mid.fx.ended or mid.state["current_node"] != order[0]:
            break
        mid = _act(mid, passed=True)
    first = order[0].replace("_", " ")
    other = next((p for p in library if p.id != plan.id), plan)
    said = [("workflow status", "status"), ("skip this step", "skip"), (f"go back to the {first} step", "back"),
            ("go back to the moon step", "back, to a step the plan does not have"), ("retry this step", "retry"),
            ("pause the workflow", "pause"), ("restart the workflow", "restart"), ("stop the workflow", "stop"),
            ("list workflows", "list"), (f"start the {_bare(other.name)} workflow", "start by name"),
            ("start the nonexistent workflow", "start, a name no plan has")]
    for message, title in said:
        yield Section(f"{title}: the user says {message!r}", _steered(library, plan, mid.state, message))
    paused, _ = engine.step(library, _lookup(library, plan), copy.deepcopy(mid.state),
                            _said("pause the workflow", "m-pause"), render)
    yield Section("resume: the user says 'resume the workflow' (after 'pause the workflow')",
                  _steered(library, plan, paused, "resume the workflow", "m-resume"))
    for nid, node in plan.nodes.items():
        gate = _reach(plan, nid) if node.kind.asks else None
        if gate is not None:
            yield Section(f"skip at human gate {nid}: the user says 'skip this step'",
                          _steered(library, plan, gate.state, "skip this step"))
    for message in ("stop the workflow", "skip this step", "workflow status"):
        yield Section(f"no run active: the user says {message!r}", _steered(library, plan, None, message))


def _bare(name: str) -> str:
    """A plan's name as said before "workflow": "Bug Fix Workflow" -> "Bug Fix"."""
    return name[: -len(" workflow")] if name.lower().endswith(" workflow") else name


def _said(message: str, monologue: str) -> engine.Observation:
    return engine.Observation(hook=engine.PROMPTS_AFTER, monologue=monologue, iteration=0, user_message=message)


def _lookup(library: list[Plan], plan: Plan) -> engine.PlanLookup:
    return lambda pid, version: plan if pid == plan.id else next((p for p in library if p.id == pid), None)


def _steered(library: list[Plan], plan: Plan, state: dict | None, message: str, monologue: str = "m-ctl") -> str:
    _, fx = engine.step(library, _lookup(library, plan), copy.deepcopy(state), _said(message, monologue), render)
    return fx.context or ""
