"""Keeping a run in Agent-Zero: the state on the agent and in the chat's data, restored and trusted after a restart
(against the audit log's checkpoint), the audit lines (spooled with the chat when a folder refuses them), the
SALUTE report."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone
from typing import Any

from . import cards, lines, reading
from ...core import engine
from ...core.plain import as_text
from ...core.state import DATA_KEY, STATUSES, is_legacy_linear, logged, migrate_legacy, upgrade
from ...session import passes
from ...session.audit import checkpoint_path, read_checkpoint
from ...session.runtime import Runtime
from ...session.salute import build_report, write_report
from ...texts import render


STATE_ATTR = "_htn_state"
CHECKED_ATTR = "_graph_engine_written"  # the state object this module last wrote (its shape is known good)

SPOOL_KEY = "graph_engine_audit_spool"  # agent data, saved with the chat: audit lines not written yet
MAX_SPOOL_LINES = 2_000

SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
ENDED = tuple(x for x in STATUSES if x != "active")


def written(rt: Runtime, agent: Any, state: dict) -> None:
    """A run's state changed outside its own pass (a branch's): its audit lines and checkpoint, the chat's data and
    its card are written."""
    audit(rt, agent, state)
    save(agent, state)
    cards.show(rt, agent, state)


def saved_state(agent: Any) -> Any:
    """The state Agent-Zero restored with the chat, when the attribute was lost (restart, chat reload)."""
    try:
        saved = agent.get_data(DATA_KEY)
    except Exception:  # noqa: BLE001 - an agent without data has nothing saved
        return None
    if isinstance(saved, dict) and saved.get("status", "active") in ENDED:
        return None  # the last run of the chat, ended: kept for the record only
    return saved


def newest_record(rt: Runtime, agent: Any, saved: Any) -> Any:
    """The run as its audit log's checkpoint has it, when that is newer than the state saved with the chat:
    Agent-Zero saves the chat at the end of a pass, so a stop during the LLM call loses what this pass's hooks
    did (a result judged, a step moved on), while the audit lines and the checkpoint beside them were written
    before the hook returned."""
    if not isinstance(saved, dict) or not isinstance(saved.get("run_id"), str):
        return saved
    path = rt.audit.path(lines.chat_id(agent), saved["run_id"])
    newer = read_checkpoint(path)
    if newer is None and os.path.lexists(checkpoint_path(path)):
        lines.log_once(rt, agent, "warning", f"[HTN] The checkpoint of run {saved['run_id']} at {checkpoint_path(path)} "
                                        "cannot be read (damaged, cut short or not a regular file); the run continues "
                                        "from the chat's saved state, unless that is behind its audit log",
                  key=f"checkpoint-read:{path}")
    if (not isinstance(newer, dict) or newer.get("run_id") != saved["run_id"]
            or not isinstance(newer.get("audit_seq"), int) or not isinstance(saved.get("audit_seq", 0), int)
            or newer["audit_seq"] <= saved.get("audit_seq", 0)):
        return saved
    checked, problem = passes.trusted(rt, newer)
    if checked is None:
        lines.log_once(rt, agent, "warning", f"[HTN] The audit log's checkpoint of run {saved['run_id']} is not usable "
                                        f"({problem}); the run continues from the chat's saved state")
        return saved
    lines.log(agent, "info", f"[HTN] Workflow '{saved.get('plan_name', saved.get('plan_id', ''))}': the chat was saved "
                        f"before its last {newer['audit_seq'] - saved.get('audit_seq', 0)} audit event(s); the run "
                        "continues from the audit log's checkpoint")
    return checked


def logged_seq(rt: Runtime, agent: Any, run_id: str) -> int:
    """The last seq the run's audit log holds (0: no log, or one that cannot be read, said once)."""
    path = rt.audit.path(lines.chat_id(agent), run_id)
    try:
        return rt.audit.last_seq(path)
    except OSError as exc:
        lines.log_once(rt, agent, "warning", f"[HTN] Audit log {path} cannot be read ({exc.strerror or exc}); the run "
                                        "continues, and its lines are kept with the chat", key=f"audit:{path}")
        return 0


def reconcile(rt: Runtime, agent: Any, state: dict) -> dict | None:
    """A restored run against its audit log, which holds each judged result once: a state that is behind its log
    would judge those results again, so it ends the run (one warning; the end continues the log's seqs); the
    lines a stop kept out of the log are written from the state."""
    logged = logged_seq(rt, agent, state["run_id"])
    have = state.get("audit_seq", 0)
    if logged > have:
        reject(rt, agent, state, f"its saved state stops at audit event {have}, its audit log at {logged}: the "
                                  "checkpoint that held the rest is missing or damaged, and resuming would judge "
                                  "those results again; send the request again to start it anew",
                "the chat's saved state")
        return None
    if logged < have:
        taken = rt.audit.take(state, lines.chat_id(agent), int(getattr(agent, "number", 0) or 0), after=logged)
        if taken is not None:
            try:
                rt.audit.write(taken[0], taken[1])
            except OSError as exc:
                spool_warning(rt, agent, taken[0], exc)
                keep(rt, agent, spool_of(agent) or [], [taken[0], taken[1].decode("utf-8", "replace"), False])
    return state


def resume(rt: Runtime, agent: Any, state: dict) -> dict | None:
    plan = rt.lookup(state["plan_id"], state.get("plan_version", ""))
    if plan is None or state["current_node"] not in plan.nodes:
        return state  # the engine ends it with a clear message
    state = engine.resumed(plan, state, render)
    lines.log(agent, "info", f"[HTN] Workflow '{state.get('plan_name', plan.name)}' resumed at "
                        f"'{plan.nodes[state['current_node']].name}' after a restart or chat reload "
                        f"(turn {state.get('turn', 0)}, attempt counts kept)")
    return state


def ended_this_pass(state: Any, obs: engine.Observation) -> bool:
    return (isinstance(state, dict) and state.get("status") == "escalated"
            and state.get("last_pass") == obs.pass_key)


def usable_state(rt: Runtime, agent: Any, raw: Any, obs: engine.Observation, source: str) -> dict | None:
    """The state to run: the one this module wrote last pass as it is, else ``raw`` read into a new value
    (restored, migrated, set by others), or None (rejected with one warning, or a run that ended)."""
    if raw is None:
        return None
    if is_legacy_linear(raw):
        return migrate(rt, agent, raw, obs, source)
    if raw is getattr(agent, CHECKED_ATTR, None):
        state, problem = raw, ""
    else:
        state, problem = passes.trusted(rt, raw)
    if state is None:
        reject(rt, agent, raw, problem, source)
        return None
    if state.get("status", "active") != "active":
        if source != f"agent.{STATE_ATTR}" and isinstance(state.get("run_id"), str):  # ended before a restart
            reconcile(rt, agent, state)  # (its last lines, when the stop came before they were written)
            setattr(agent, "_htn_last_run", state)
        clear_state(agent)  # a run that ended in an earlier pass
        return None
    return upgrade(state)


def reject(rt: Runtime, agent: Any, raw: Any, problem: str, source: str) -> None:
    """A state that cannot be trusted ends its run: one warning naming where it was found and why, an end
    event in the run's audit log, and the last-run record."""
    lines.log(agent, "warning", f"[HTN] Ignored an unusable workflow state in {source} ({problem}): {excerpt(raw)}; it "
                           "was kept in agent._htn_state_rejected and no workflow is active")
    setattr(agent, "_htn_state_rejected", raw)
    run_id = raw.get("run_id") if isinstance(raw, dict) else None
    plan_id = raw.get("plan_id") if isinstance(raw, dict) else None
    end = {"type": "state_rejected", "turn": 0, "seq": 1, "reason": f"{problem} (in {source})"}
    record = {"status": "rejected", "reason": end["reason"], "run_id": run_id if isinstance(run_id, str) else "",
              "plan_id": plan_id if isinstance(plan_id, str) else "", "events": [end]}
    seq, turn = (counter_of(raw.get(k)) if isinstance(raw, dict) else None for k in ("seq", "turn"))
    if record["run_id"] and seq is not None:  # the run's own log ends with the rejection, in sequence
        seq = max(seq, logged_seq(rt, agent, record["run_id"]))  # (after what the log holds: no seq twice)
        end["seq"], end["turn"] = seq + 1, turn or 0
        version = raw.get("plan_version")
        audit(rt, agent, dict(record, plan_version=version if isinstance(version, str) else "", audit_seq=seq))
    setattr(agent, "_htn_last_run", record)
    if record["run_id"]:  # the run's card says it ended, and why
        name = raw.get("plan_name")
        cards.show(rt, agent, dict(record, plan_name=name if isinstance(name, str) else record["plan_id"]), search=True)
    clear_state(agent)


def counter_of(value: Any) -> int | None:
    """A counter read from a state that was refused: a whole number of 0 up to 2^63, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 63 else None


def migrate(rt: Runtime, agent: Any, raw: dict, obs: engine.Observation, source: str) -> dict | None:
    plan = rt.lookup(raw["plan_id"], "")
    name = raw["plan_name"] if isinstance(raw.get("plan_name"), str) else raw["plan_id"]
    if plan is not None and plan.mode == "linear" and plan.total_steps == raw.get("total_steps", plan.total_steps):
        state, problem = migrate_legacy(raw, plan, obs.monologue, obs.pass_key, obs.global_turn)
        if state is None:
            reject(rt, agent, raw, f"a previous selector's state: {problem}", source)
            return None
        lines.log(agent, "info", f"[HTN] Continued plan '{name}' from the previous selector's state "
                            f"at step {state['current_step'] + 1}")
        return state
    why = "no longer in the library" if plan is None else "now a different plan (graph or other steps)"
    lines.log(agent, "warning", f"[HTN] Ended plan '{name}' left by the previous selector at step "
                           f"{max(0, raw['current_step']) + 1}: the plan is {why}; send the request again "
                           f"to start it under the graph engine")
    setattr(agent, "_htn_state_rejected", raw)
    clear_state(agent)
    return None


def excerpt(value: Any) -> str:
    text = json.dumps(value[:201]) if isinstance(value, str) else as_text(value, 201)
    return text[:200] + ("..." if len(text) > 200 else "")


def clear_state(agent: Any) -> None:
    if getattr(agent, STATE_ATTR, None) is not None:
        setattr(agent, STATE_ATTR, None)
    save(agent, None)


def save(agent: Any, state: dict | None) -> None:
    """Keep the live state in the agent's data: Agent-Zero writes it to chat.json every pass."""
    try:
        if state is not None or agent.get_data(DATA_KEY) is not None:
            agent.set_data(DATA_KEY, state)
    except Exception:  # noqa: BLE001 - an agent without data cannot persist; the run still works in memory
        pass


def audit(rt: Runtime, agent: Any, state: dict) -> None:
    """Write the run's checkpoint, then its new audit lines (a log is never ahead of its checkpoint: see audit.py);
    lines that cannot be written, or whose checkpoint cannot be, go to the spool saved with the chat, so the
    state never counts a line as written that is not in a file or in the spool."""
    taken = rt.audit.take(state, lines.chat_id(agent), int(getattr(agent, "number", 0) or 0))
    if taken is None:
        return
    path, blob, seq = taken
    logged(state, seq)  # from here the lines are in the file, or in the spool
    done = state.get("status", "active") != "active"
    problem = rt.audit.checkpoint(path, state)
    if problem and done:
        problem = ""  # an ended run is resumed by nobody: its last lines need no checkpoint before them
    if problem:
        lines.log_once(rt, agent, "warning", f"[HTN] Audit log not written: the checkpoint of run {state.get('run_id')} "
                                        f"at {checkpoint_path(path)} cannot be written ({problem}); the workflow "
                                        "continues, and its lines are kept with the chat and written once it can be "
                                        "(make its folder writable and the file a regular one)",
                  key=f"checkpoint:{path}")
        spool = spool_of(agent) or []
    else:
        spool = flush_spool(rt, agent)  # what waited for a checkpoint or a writable folder: written first
        if not spool:
            try:
                rt.audit.write(path, blob, done)
                return
            except OSError as exc:
                spool_warning(rt, agent, path, exc)
    keep(rt, agent, spool or [], [path, blob.decode("utf-8", "replace"), done])


def spool_warning(rt: Runtime, agent: Any, path: str, exc: OSError) -> None:
    lines.log_once(rt, agent, "warning", f"[HTN] Audit log {path} not written ({exc.strerror or exc}); the workflow "
                                    "continues, and its lines are kept with the chat and written once it can be",
              key=f"audit:{path}")


def data_of(agent: Any, key: str) -> Any:
    """The agent's saved data under ``key`` (None for an agent without data)."""
    try:
        return agent.get_data(key)
    except Exception:  # noqa: BLE001 - an agent without data has nothing saved
        return None


def spool_of(agent: Any) -> list | None:
    spool = data_of(agent, SPOOL_KEY)
    return spool if isinstance(spool, list) else None


def flush_spool(rt: Runtime, agent: Any) -> list | None:
    """Write the spooled lines, oldest first, as far as the folder allows; the rest stays spooled."""
    try:
        spool = agent.get_data(SPOOL_KEY)
    except Exception:  # noqa: BLE001 - an agent without data has no spool
        return None
    if not spool:
        return None
    if not isinstance(spool, list):
        lines.log(agent, "warning", f"[HTN] The saved audit spool ({SPOOL_KEY}) is not a list; it was set aside in "
                               "agent._graph_engine_spool_rejected")
        setattr(agent, "_graph_engine_spool_rejected", spool)
        agent.set_data(SPOOL_KEY, None)
        return None
    written_lines = 0
    while spool:
        entry = spool[0]
        try:
            path, text, done = entry
            rt.audit.write(str(path), str(text).encode("utf-8"), bool(done))
        except (TypeError, ValueError):
            pass  # a damaged entry: dropped below
        except OSError as exc:
            spool_warning(rt, agent, str(path), exc)
            break
        else:
            written_lines += str(text).count("\n")
        spool.pop(0)
    agent.set_data(SPOOL_KEY, spool or None)
    if written_lines:
        for key in [k for k in rt.logged_once if k.split("|", 1)[-1].startswith("audit:")]:
            rt.logged_once.discard(key)  # a new failure is said again
        lines.log(agent, "info", f"[HTN] Audit log: {written_lines} line(s) kept while {rt.audit.root} could not be written "
                            "are written now")
    return spool


def keep(rt: Runtime, agent: Any, spool: list, entry: list) -> None:
    spool.append(entry)
    total = sum(str(e[1]).count("\n") for e in spool if isinstance(e, list) and len(e) == 3)
    dropped = 0
    while total > MAX_SPOOL_LINES and len(spool) > 1:
        lost = spool.pop(0)
        n = str(lost[1]).count("\n") if isinstance(lost, list) and len(lost) == 3 else 0
        total, dropped = total - n, dropped + n
    if dropped:
        lines.log(agent, "warning", f"[HTN] Audit log: {dropped} line(s) dropped: {rt.audit.root} has not been writable "
                               f"for more than {MAX_SPOOL_LINES} lines; the newest are kept with the chat")
    try:
        agent.set_data(SPOOL_KEY, spool)
    except Exception:  # noqa: BLE001 - an agent without data cannot keep them: said once
        lines.log_once(rt, agent, "warning", f"[HTN] Audit log: {total} line(s) could not be written nor kept",
                  key="audit:nodata")


def salute(rt: Runtime, agent: Any, request: dict) -> None:
    """An immediate SALUTE report, when the org kernel is active and the role's doctrine asks for it."""
    if not os.path.isfile(os.path.join(rt.org_dir, "active.json")):
        return
    role = getattr(agent, "_org_active_role", None)
    role = role if isinstance(role, dict) else {}
    doctrine = role.get("doctrine") if isinstance(role.get("doctrine"), dict) else {}
    if doctrine.get(f"report_on_{request.get('on', 'failure')}", True) is False:
        return
    org = getattr(agent, "_org_active", None)
    org = org if isinstance(org, dict) else {}
    level = request.get("pace_level") or getattr(agent, reading.PACE_ATTR, "") or "primary"
    level = level if isinstance(level, str) else "primary"
    report = build_report(state=request["state"], pace_level=level, role=role, org=org,
                          agent_number=int(getattr(agent, "number", 0) or 0), bst_domain=reading.bst_domain(agent),
                          now=datetime.now(timezone.utc), status_state=request.get("status_state", ""))
    try:
        role_id = report["unit"]["role_id"]  # a file name: no folder parts
        path = write_report(os.path.join(rt.org_dir, "reports"), role_id if SAFE_NAME.fullmatch(role_id) else
                            "unknown", report)
    except OSError as exc:
        lines.log(agent, "warning", f"[HTN] SALUTE report not written to {rt.org_dir}/reports ({exc}); "
                               "check the folder is writable")
        return
    lines.log(agent, "info", f"[HTN] SALUTE report written: {path}")
