"""Evidence: the output of an LLM call, judged against the step that call was shown.

Rules of this module
--------------------
* An output is evidence only for the node its call was shown (``state["shown"]``) and only once
  (``state["consumed"]``); anything else is recorded as ignored and changes nothing but counters.
* A graph plan's verdict goes to ``traversal.apply_outcome``; a linear plan keeps the old selector's rules here.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .model import Edge, Node
from .state import MAX_CONSUMED, emit, remember, shown_node
from .kinds import CHECKS
from .verify import EXIT_STATUS, Evidence, Verdict, capture, check, did_not_run, judged_text, only_resets
from .run import MAX_REPLY_HASHED, Observation, Run, _finish
from .traversal import _complete, _follow, apply_outcome


# ── evidence ────────────────────────────────────────────────────────────────


def _judge(run: Run, obs: Observation, key: str) -> None:
    out, s = obs.output, run.state
    if out is None or not key or key in s.get("consumed", []):
        return
    remember(s, "consumed", key, MAX_CONSUMED)
    node = run.node
    shown = shown_node(s, key)
    if shown != node.id or not node.kind.judged:  # that call was not shown this node: not evidence
        was = run.plan.nodes.get(shown) if shown else None
        if was is not None and was.kind.judged:  # it was shown a step the run has left since (a control moved it)
            emit(s, "evidence_ignored", node=shown, tool=out.tool,
                 reason=f"issued for '{shown}'; the run has moved to '{node.id}' since")
        return
    if out.not_found or (node.tool and out.tool != node.tool):
        emit(s, "evidence_ignored", node=node.id, tool=out.tool,
             reason="unknown tool" if out.not_found else f"step expects tool {node.tool}")
        return
    if did_not_run(out.text):  # no verdict on a command that never ran: the step is shown again, and why
        emit(s, "evidence_ignored", node=node.id, tool=out.tool,
             reason="the terminal was still running an earlier command, so this call's command did not run")
        s["notice"], s["notice_turn"] = run.fx.texts.terminal_busy(), s["turn"]
        return
    if out.tool == "code_execution_tool" and only_resets(out.reply):
        emit(s, "evidence_ignored", node=node.id, tool=out.tool, reason="the call only reset the terminal")
        return
    evidence = Evidence(tool=out.tool, text=out.text, reply=out.reply, truncated=out.truncated, files=obs.files)
    text = judged_text(evidence)  # cleaned once: the check, the capture and the hash read the same text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass"))  # the hash of text + NUL + reply
    digest.update(b"\0" + out.reply[:MAX_REPLY_HASHED].encode("utf-8", "surrogatepass"))
    sha = digest.hexdigest()
    if _judged_already(s, obs, key, sha):
        return
    verdict = check(node.verify, evidence, text)
    if not verdict.ok and _cut_once(s, node, out, text):  # a fresh terminal's output can come back before its end
        emit(s, "evidence_ignored", node=node.id, tool=out.tool, reason=CUT)
        s["notice"], s["notice_turn"] = run.fx.texts.output_cut(), s["turn"]
        return
    if out.interrupted and not verdict.ok:  # the person's message may have cut the command short: no failure
        emit(s, "evidence_ignored", node=node.id, tool=out.tool,
             reason=f"a message came while the command ran, which may have cut it short ({verdict.reason}); "
                    "the step is shown again, its attempt unspent")
        return
    if verdict.too_slow:
        run.fx.log("warning", f"[HTN] Plan '{run.plan.id}': the check of step '{node.name}' took too long on a "
                              f"{len(text):,}-character output and counts as failed; simplify its pattern in the "
                              "plan library (graph-engine validate names the slow ones)")
    s["judged"] = [key, sha]
    if run.plan.mode == "linear":
        _linear_verdict(run, node, verdict, sha)
    else:
        _graph_verdict(run, node, verdict, sha, capture(node.verify, evidence, text))


def _judged_already(s: dict[str, Any], obs: Observation, key: str, digest: str) -> bool:
    """At a monologue's first pass the newest result in history is attributed to the previous monologue's
    last call.  When that call never returned (Agent-Zero stopped during it: a restart, then the Nudge), the
    newest result is still the one an earlier call produced and this run judged: not evidence again."""
    judged = s.get("judged")
    if obs.iteration != 0 or not isinstance(judged, list) or len(judged) != 2:
        return False
    if judged[1] != digest or judged[0] == key:
        return False
    emit(s, "evidence_ignored", node=s["current_node"], tool=obs.output.tool if obs.output else "",
         reason=f"the result of call {judged[0]}, already judged; call {key} returned nothing")
    return True


CUT = ("the output came back without the [exit:N] line its command prints, cut before the command ended; the "
       "step is shown again, its attempt unspent")


def _cut_once(s: dict[str, Any], node: Any, out: Any, text: str) -> bool:
    """The check reads the exit status, the call's command prints it, and its output has none: the output was cut
    (a terminal just opened can answer before the command's end).  Not judged, once per step: a second such
    output is judged as it is."""
    if node.verify is None or not CHECKS[node.verify.type].reads_status or "[exit:" not in out.reply \
            or EXIT_STATUS.search(text) is not None:
        return False
    return not any(e.get("type") == "evidence_ignored" and e.get("node") == node.id and e.get("reason") == CUT
                   for e in s.get("events") or ())


def _graph_verdict(run: Run, node: Node, verdict: Verdict, digest: str, captured: dict[str, str]) -> None:
    apply_outcome(run, node, "success" if verdict.ok else "fail", verdict.reason, digest=digest, captured=captured)


# ── linear plans: the old selector's rules ──────────────────────────────────


def _linear_verdict(run: Run, node: Node, verdict: Verdict, digest: str) -> None:
    s = run.state
    idx = int(s["current_step"])
    emit(s, "node_verified", node=node.id, outcome="success" if verdict.ok else "fail", reason=verdict.reason,
         evidence_sha256=digest)
    if verdict.ok:
        s["steps_completed"].append(idx)
        s["last_failure"] = ""
        run.fx.log("info", f"[HTN] Step {idx + 1} verified: {node.name}")
        _linear_advance(run, idx)
        return
    s["last_failure"] = verdict.reason
    if node.on_fail == "skip":
        s["steps_failed"].append(idx)
        run.fx.log("warning", f"[HTN] Step {idx + 1} skipped after failed verification: {verdict.reason}")
        _linear_advance(run, idx)
    elif node.on_fail == "abort":
        s["steps_failed"].append(idx)
        emit(s, "plan_aborted", node=node.id, reason=verdict.reason)
        s["status"] = "aborted"
        run.fx.log("warning", f"[HTN] Plan aborted: step '{node.name}' failed verification: {verdict.reason}")
        _finish(run, "aborted", f"[ACTIVE PLAN: {s['plan_name']}]\nPlan aborted: step {idx + 1} ({node.name}) "
                                f"failed verification: {verdict.reason}")
    else:
        run.fx.log("warning", f"[HTN] Step {idx + 1} failed verification ({node.on_fail}): {verdict.reason}")


def _linear_advance(run: Run, idx: int) -> None:
    s = run.state
    s["current_step"] = idx + 1
    s["turns_since_progress"] = 0
    s["completed_nodes"] = len(s["steps_completed"])
    if s["current_step"] >= s["total_steps"]:
        _complete(run, run.plan.nodes["done"])
        return
    edge = Edge(src=f"step_{idx + 1}", dst=f"step_{idx + 2}", condition="on_success")
    _follow(run, edge)
