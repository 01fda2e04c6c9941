"""``graph-engine``: command-line tools around the engine.

``graph-engine demo`` drives a realistic bug-fix session through the Agent-Zero
stand-in (the same one the tests use), with the bundled plan library and both
extension files loaded the way Agent-Zero loads them, and prints each pass.
``graph-engine validate PATH...`` checks library files (schema + lint);
``graph-engine triggers`` runs the trigger golden set;
``graph-engine explain RUN_OR_STATE`` says why each edge of a run was taken.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Sequence

from . import standin as a0
from . import triggers as trig
from .explain import explain, format_steps, load_events
from .. import __version__
from ..library import check_document, parse_json, with_dot_plans
from ..lint import Diagnostic, diag
from ..schema import jsonschema_available
from .standin import Reply, Session, cmd


def _demo_script(workdir: str) -> tuple[str, list[Reply]]:
    calc = os.path.join(workdir, "calc.py")
    crash = ("Traceback (most recent call last):\n  File \"{0}\", line 6, in <module>\n"
             "    print(average([]))\n  File \"{0}\", line 3, in average\n"
             "    return sum(xs) / len(xs)\nZeroDivisionError: division by zero\n").format(calc)
    message = f"Fix the bug in {calc}: average([]) crashes with ZeroDivisionError"
    replies = [
        cmd(f'python3 {calc}; echo "[exit:$?]"', crash + "[exit:1]"),
        cmd(f"grep -n 'def average' -A2 {calc}", "2:def average(xs):\n3-    return sum(xs) / len(xs)"),
        cmd(f"sed -i 's/return sum(xs) \\/ len(xs)/return sum(xs) \\/ len(xs) if xs else 0/' {calc}; "
            'echo "[exit:$?]"', "[exit:0]"),
        cmd(f'python3 {calc}; echo "[exit:$?]"',
            f"  File \"{calc}\", line 3\n    return sum(xs) / len(xs) if xs else 0)\n"
            "SyntaxError: unmatched ')'\n[exit:1]"),
        cmd(f"sed -i 's/ else 0)/ else 0/' {calc}; echo \"[exit:$?]\"", "[exit:0]"),
        cmd(f'python3 {calc}; echo "[exit:$?]"', "0\n[exit:0]"),
        Reply(warning="You have misformatted your message. Follow system prompt instructions on JSON message "
                      "formatting precisely."),
        cmd('python3 -m pytest -q; echo "[exit:$?]"', "....                                         [100%]\n"
                                                      "4 passed in 0.03s\n[exit:0]"),
        Reply(final="Fixed: average([]) now returns 0; the reproduce command and the 4 tests pass."),
    ]
    return message, replies


def _events_since(session: Session, seq: int) -> list[dict]:
    state = session.state or getattr(session.agent, "_htn_last_run", None) or {}
    return [e for e in state.get("events", []) if e.get("seq", 0) > seq]


def _describe(event: dict) -> str | None:
    kind = event["type"]
    if kind == "node_verified":
        return f"verdict  {event['node']}: {event['outcome']} ({event['reason']})"
    if kind == "edge_followed":
        return f"edge     {event['from']} -({event['condition']})-> {event['to']}"
    if kind == "retry_triggered":
        return f"retry    {event['node']}: attempt {event['attempt']} of {event['of']}"
    if kind in ("plan_activated", "plan_completed", "plan_escalated", "plan_expired", "plan_ended",
                "route_stalled", "evidence_ignored", "decision_routed", "checkpoint_reached"):
        extra = {k: v for k, v in event.items() if k not in ("type", "turn", "seq")}
        return f"event    {kind} {extra}"
    return None


def demo(out=None) -> int:
    out = out or sys.stdout
    with tempfile.TemporaryDirectory() as workdir:
        saved_root = os.environ.get("A0_ROOT")
        os.environ["A0_ROOT"] = os.path.join(workdir, "a0")  # audit log and reports go to the throwaway tree
        try:
            return _demo(workdir, out)
        finally:
            if saved_root is None:
                os.environ.pop("A0_ROOT", None)
            else:
                os.environ["A0_ROOT"] = saved_root


def _demo(workdir: str, out) -> int:
    message, replies = _demo_script(workdir)
    session = Session()
    out.write(f"Library: {a0.LIBRARY}\nUser: {message}\n")
    session.user(message)
    seq = 0
    for reply in replies:
        record = session.run_pass(reply)
        shown = record.prompt_extras.get("htn_active_plan", "")
        out.write(f"\n── pass {record.iteration} " + "─" * 60 + "\n")
        for event in _events_since(session, seq):  # judged at this pass, before and after the call
            line = _describe(event)
            if line:
                out.write(line + "\n")
            seq = max(seq, event.get("seq", 0))
        first = shown.splitlines()[0] if shown else "(no workflow context in this call's prompt)"
        out.write(f"prompt   {first}\n")
        if shown and "Current step:" in shown:
            current = next(line for line in shown.splitlines() if line.startswith("Current step:"))
            out.write(f"shown    {current}\n")
        out.write(f"model    {_reply_summary(reply)}\n")
        if not session.monologue_open:
            break
    final = getattr(session.agent, "_htn_last_run", None) or {}
    out.write("\nLog lines written to the Agent-Zero UI:\n")
    for entry in session.log.entries:
        out.write(f"  [{entry['type']}] {entry['content']}\n")
    injected = session.records[-1].prompt_extras.get("htn_active_plan", "")
    out.write("\nText injected into the final call's prompt:\n" + textwrap.indent(injected, "  ") + "\n")
    runs = sorted(Path(workdir, "a0").rglob("*.jsonl"))
    for run in runs:
        lines = list(load_events(str(run))[0])
        out.write(f"\nAudit log: {len(lines)} lines in {run.relative_to(workdir)}; "
                  "`graph-engine explain` on it says:\n")
        events, facts = load_events(str(run))
        lib = check_document(parse_json(a0.LIBRARY.read_bytes()), str(a0.LIBRARY))
        out.write(textwrap.indent(format_steps(explain(lib.get(facts["plan"]), events), facts), "  ") + "\n")
    done = [e for e in final.get("events", []) if e["type"] == "plan_completed"]
    out.write(f"\nResult: {'workflow completed' if done else 'workflow did not complete'}; "
              f"{len(final.get('events', []))} events, path length {final.get('path_len', 0)}\n")
    return 0 if done else 1


def _reply_summary(reply: Reply) -> str:
    if reply.warning:
        return "misformatted reply -> system_warning (no tool result)"
    if reply.final:
        return f"response tool: {reply.final}"
    tail = reply.output.replace("\n", " | ")
    return f"{reply.tool}: {reply.code}\n         -> {tail[:150]}"


def validate_files(paths: Sequence[str]) -> list[Diagnostic]:
    """Every finding for every file, plus one info line per plan with its worst-case turns."""
    use_js = jsonschema_available()
    found: list[Diagnostic] = []
    for path in paths:
        try:
            if path.endswith(".dot"):
                lib = with_dot_plans({"plans": {}}, path, [path], use_jsonschema=use_js)
            else:
                with open(path, "rb") as fh:
                    data = parse_json(fh.read())
                lib = check_document(data, path, use_jsonschema=use_js)
        except OSError as exc:
            found.append(diag("schema", path, f"cannot read the file ({exc.strerror or exc})", "check the path"))
            continue
        except (ValueError, UnicodeDecodeError) as exc:
            found.append(diag("schema", path, f"not a usable library: {exc}", "fix the JSON syntax or shape"))
            continue
        found.extend(lib.diagnostics)
        for plan_id, turns in lib.worst_case_turns.items():
            if plan_id in lib.plans:
                found.append(Diagnostic(rule="worst_case_turns", severity="info", plan=plan_id, node=None, edge=None,
                                        message=f"every run ends within {turns} turns", fix=""))
    return found


def validate(paths: Sequence[str], as_json: bool, out=None) -> int:
    out = out or sys.stdout
    found = validate_files(paths)
    errors = [d for d in found if d.severity == "error"]
    if as_json:
        out.write(json.dumps([d.to_json() for d in found], indent=2) + "\n")
        return 1 if errors else 0
    checker = "jsonschema" if jsonschema_available() else "the built-in validator (jsonschema is not installed)"
    out.write(f"schema checked with {checker}\n")
    for path in paths:
        out.write(f"{path}\n")
        for d in validate_files([path]):
            out.write(f"  ok      plan '{d.plan}': {d.message}\n" if d.rule == "worst_case_turns" else f"  {d.text()}\n")
    warnings = sum(1 for d in found if d.severity == "warning")
    out.write(f"{len(errors)} error(s), {warnings} warning(s) in {len(paths)} file(s)\n")
    return 1 if errors else 0


def triggers(library: str, cases: str, as_json: bool, out=None) -> int:
    out = out or sys.stdout
    with open(library, "rb") as fh:
        lib = check_document(parse_json(fh.read()), library)
    rep = trig.report(list(lib.plans.values()), trig.load_cases(cases))
    out.write((json.dumps(rep, indent=2) if as_json else trig.format_report(rep)) + "\n")
    return 0 if rep["accuracy"] >= trig.REQUIRED_ACCURACY and not rep["negatives_activated"] else 1


def prompts_cmd(path: str, plan_id: str | None, out=None, err=None) -> int:
    """Every text a plan (or every plan of a library) can show the model, as the golden files hold them."""
    from ..library import load_library_file
    from .prompts import document

    out, err = out or sys.stdout, err or sys.stderr
    try:
        lib = load_library_file(path)
    except ValueError as exc:
        err.write(f"graph-engine prompts: {exc}\n")
        return 2
    if plan_id is not None and plan_id not in lib.plans:
        known = ", ".join(lib.plans) or "none loaded (run graph-engine validate on it)"
        err.write(f"graph-engine prompts: {path} has no usable plan {plan_id!r}; its plans: {known}\n")
        return 2
    for pid in [plan_id] if plan_id else list(lib.plans):
        out.write(document(lib.plans[pid]) + "\n")
    return 0


def explain_run(path: str, library: str, as_json: bool, out=None) -> int:
    out = out or sys.stdout
    try:
        events, facts = load_events(path)
    except (OSError, ValueError) as exc:
        out.write(f"explain: cannot read {path}: {exc}\n")
        return 2
    with open(library, "rb") as fh:
        lib = check_document(parse_json(fh.read()), library)
    plan = lib.get(facts["plan"])
    note = ""
    if plan is None:
        note = f"plan '{facts['plan']}' is not in {library}: edges are listed as taken, without candidates"
    elif facts["version"] and plan.version != facts["version"]:
        note = (f"note: the run used plan version {facts['version']}, {library} has {plan.version}; "
                "candidates are read from the current version")
    steps = explain(plan, events)
    if as_json:
        out.write(json.dumps({"run": facts, "note": note, "steps": steps}, indent=2) + "\n")
    else:
        out.write(format_steps(steps, facts, note) + "\n")
    return 0


def inspect_dot(path: str, as_json: bool, out=None) -> int:
    out = out or sys.stdout
    from ..dot import DotSyntaxError, jsonable, parse
    from ..dot_plan import HANDLER_TO_NODE, handler_type, to_plan

    try:
        with open(path, encoding="utf-8") as fh:
            graph = parse(fh.read())
    except DotSyntaxError as exc:
        if as_json:
            out.write(json.dumps({"ok": False, "error": {"message": exc.message, "line": exc.line,
                                                         "col": exc.col}}) + "\n")
        else:
            out.write(f"{path}:{exc.line}:{exc.col}: {exc.message}\n")
        return 2
    except (OSError, UnicodeDecodeError) as exc:
        out.write(f"inspect: cannot read {path}: {exc}\n")
        return 2
    _, _, found = to_plan(graph)
    nodes = {nid: {"attrs": {k: jsonable(v) for k, v in n.attrs.items()}, "handler_type": handler_type(n.attrs),
                   "node_type": HANDLER_TO_NODE.get(handler_type(n.attrs), "unsupported"), "line": n.line,
                   "col": n.col} for nid, n in graph.nodes.items()}
    edges = [{"from": e.src, "to": e.dst, "attrs": {k: jsonable(v) for k, v in e.attrs.items()}, "line": e.line,
              "col": e.col} for e in graph.edges]
    report = {"ok": True, "graph": {"name": graph.name, "attrs": {k: jsonable(v) for k, v in graph.attrs.items()}},
              "nodes": nodes, "edges": edges, "diagnostics": [d.to_json() for d in found]}
    if as_json:
        out.write(json.dumps(report, indent=2) + "\n")
        return 0
    out.write(f"digraph {graph.name}: {len(nodes)} nodes, {len(edges)} edges\n")
    for key, value in report["graph"]["attrs"].items():
        out.write(f"  graph {key} = {json.dumps(value)}\n")
    for nid, n in nodes.items():
        out.write(f"  {nid:<20} {n['handler_type']:<18} -> {n['node_type']:<10} {json.dumps(n['attrs'])}\n")
    for e in edges:
        out.write(f"  {e['from']} -> {e['to']} {json.dumps(e['attrs'])}\n")
    for d in found:
        out.write(f"  {d.text()}\n")
    return 0


def _plan_source(path: str, plan_id: str | None) -> tuple[str, dict]:
    """(plan id, plan JSON) from a library file (with --plan) or a DOT file."""
    from ..dot_plan import load_dot_plan

    if path.endswith(".dot"):
        with open(path, encoding="utf-8") as fh:
            pid, raw, _ = load_dot_plan(fh.read())
        return pid, raw
    with open(path, "rb") as fh:
        plans = parse_json(fh.read()).get("plans", {})
    if not plan_id or plan_id not in plans:
        raise ValueError(f"{path} has no plan {plan_id!r}; pass --plan with one of: {', '.join(plans)}")
    return plan_id, plans[plan_id]


def export_plan(path: str, plan_id: str | None, fmt: str, trace: str | None, out=None, render: bool = False) -> int:
    out = out or sys.stdout
    from ..dot import DotSyntaxError
    from ..dot_plan import to_dot
    from .render_graph import mermaid, trace_counts

    try:
        pid, raw = _plan_source(path, plan_id)
        highlight = trace_counts(load_events(trace)[0]) if trace else None
        if fmt == "mermaid":
            text = mermaid(pid, raw, highlight)
        else:  # render (dot, svg, png) writes what Graphviz reads; export keeps Attractor's bare qualified keys
            text = to_dot(pid, raw, highlight, graphviz=trace is not None or fmt != "dot" or render)
    except (OSError, ValueError, DotSyntaxError) as exc:
        out.write(f"graph-engine: {exc}\n")
        return 2
    if fmt in ("svg", "png"):
        import shutil
        import subprocess

        binary = shutil.which("dot")
        if binary is None:
            out.write("graph-engine: svg and png need Graphviz's 'dot' program (Debian: apt-get install graphviz); "
                      "--format dot or mermaid work without it\n")
            return 2
        proc = subprocess.run([binary, f"-T{fmt}"], input=text.encode(), capture_output=True)
        if proc.returncode != 0:
            out.write(f"graph-engine: dot failed: {proc.stderr.decode(errors='replace')}\n")
            return 2
        sys.stdout.buffer.write(proc.stdout) if out is sys.stdout else out.write(proc.stdout.decode(errors="replace"))
        return 0
    out.write(text)
    return 0


def _compiled(path: str, plan_id: str | None):
    from ..model import compile_plan

    pid, raw = _plan_source(path, plan_id)
    return pid, raw, compile_plan(pid, raw)


def select_cmd(path: str, plan_id: str | None, node: str, outcome: str, context: str, out=None) -> int:
    out = out or sys.stdout
    from .simulate import select

    try:
        _, _, plan = _compiled(path, plan_id)
        if node not in plan.nodes:
            raise ValueError(f"plan '{plan.id}' has no node {node!r}")
        result = select(plan, node, json.loads(outcome), json.loads(context) if context else {})
    except (OSError, ValueError) as exc:
        out.write(json.dumps({"error": str(exc)}) + "\n")
        return 2
    out.write(json.dumps(result, indent=2) + "\n")
    return 0


def simulate_cmd(args, out=None) -> int:
    out = out or sys.stdout
    from .simulate import diverges, run_outcomes, run_transcript

    try:
        pid, raw, plan = _compiled(args.file, args.plan)
        if args.transcript:
            with open(args.transcript, encoding="utf-8") as fh:
                lines = [json.loads(x) for x in fh if x.strip()]
            result = run_transcript(pid, raw, lines)
        else:
            result = run_outcomes(plan, json.loads(args.outcomes or "{}"), json.loads(args.answers or "[]"),
                                  args.auto_approve)
        expected = None
        if args.expect:
            with open(args.expect, encoding="utf-8") as fh:
                expected = json.load(fh)
    except (OSError, ValueError) as exc:
        out.write(f"simulate: {exc}\n")
        return 2
    problem = diverges(result["events"], expected) if expected is not None else ""
    if args.json:
        shown = {k: v for k, v in result.items() if k not in ("events", "log")}
        out.write(json.dumps(dict(shown, divergence=problem) if expected is not None else shown, indent=2) + "\n")
    else:
        for st in result["steps"]:
            if "kind" not in st:
                continue
            edge = st["edge"]
            via = f"-({edge['condition']})-> {edge['to']}" if edge else st.get("why", "")
            did = st.get("status") or f"answer {st.get('answer')!r}"
            left = "" if st["retries_left"] is None else f"  retries left {st['retries_left']}"
            out.write(f"{st['node']:<24} {did:<16} {st['verdict']:<8} {via}{left}\n")
        out.write(f"final: {result['final_status']}" + (f" ({result['failure_reason']})"
                                                       if result["failure_reason"] else "") + "\n")
        out.write("path: " + " -> ".join(result["node_sequence"]) + "\n")
        if problem:
            out.write(f"divergence: {problem}\n")
    return 1 if problem else 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # output piped into head and the like
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graph-engine", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="drive a bug-fix session through the Agent-Zero stand-in and print each pass")
    val = sub.add_parser("validate", help="check plan library files: schema and lint (exit 1 on any error)")
    val.add_argument("paths", nargs="+", metavar="PATH")
    val.add_argument("--json", action="store_true", help="print a JSON list of findings")
    tr = sub.add_parser("triggers", help="run the trigger golden set: confusion table and colliding phrases")
    tr.add_argument("--library", default=str(a0.LIBRARY))
    tr.add_argument("--cases", default=str(a0.ROOT / "fixtures" / "trigger_cases.json"))
    tr.add_argument("--json", action="store_true")
    ex = sub.add_parser("explain", help="why each edge of a run was taken (audit log .jsonl or saved state .json)")
    ex.add_argument("run", metavar="RUN_OR_STATE")
    ex.add_argument("--library", default=str(a0.LIBRARY))
    ex.add_argument("--json", action="store_true")
    ins = sub.add_parser("inspect", help="the parsed DOT graph: typed attributes, handler types, findings")
    ins.add_argument("file", metavar="FILE.dot")
    ins.add_argument("--json", action="store_true")
    exp = sub.add_parser("export", help="a plan as DOT (re-imports to the same plan) or mermaid")
    exp.add_argument("--library", default=str(a0.LIBRARY))
    exp.add_argument("--plan", required=True)
    exp.add_argument("--format", choices=("dot", "mermaid"), default="dot")
    ren = sub.add_parser("render", help="a plan as a picture (dot, mermaid, svg, png), a run's path highlighted")
    ren.add_argument("file", metavar="FILE", help="a library .json (with --plan) or a .dot file")
    ren.add_argument("--plan")
    ren.add_argument("--format", choices=("dot", "mermaid", "svg", "png"), default="dot")
    ren.add_argument("--trace", metavar="RUN_OR_STATE", help="an audit log (.jsonl) or saved state (.json)")
    sel = sub.add_parser("select", help="the edge the engine would take from a node for an outcome")
    sel.add_argument("file", metavar="FILE")
    sel.add_argument("--plan")
    sel.add_argument("--from", dest="node", required=True)
    sel.add_argument("--outcome", required=True, help='e.g. {"status": "fail"}')
    sel.add_argument("--context", default="", help='e.g. {"lang": "python"}')
    pro = sub.add_parser("prompts", help="every text a plan can show the model: steps, failures, notices")
    pro.add_argument("file", nargs="?", default=str(a0.LIBRARY), metavar="FILE", help="a library (default: bundled)")
    pro.add_argument("--plan", help="one plan (default: every plan of the library)")
    sim = sub.add_parser("simulate", help="run a plan with no model: scripted outcomes or a recorded chat")
    sim.add_argument("file", metavar="FILE")
    sim.add_argument("--plan")
    how = sim.add_mutually_exclusive_group(required=True)
    how.add_argument("--outcomes", help='per node, per visit: {"test": [{"status": "fail"}, {"status": "success"}]}')
    how.add_argument("--transcript", metavar="FILE.jsonl")
    sim.add_argument("--answers", help='answers for human gates, in order: ["F", "A"]')
    sim.add_argument("--auto-approve", action="store_true", help="human gates take their first option")
    sim.add_argument("--expect", metavar="EVENTS.json", help="exit 1 unless these events happen, in order")
    sim.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "select":
        return select_cmd(args.file, args.plan, args.node, args.outcome, args.context)
    if args.command == "simulate":
        return simulate_cmd(args)
    if args.command == "prompts":
        return prompts_cmd(args.file, args.plan)
    if args.command == "inspect":
        return inspect_dot(args.file, args.json)
    if args.command == "export":
        return export_plan(args.library, args.plan, args.format, None)
    if args.command == "render":
        return export_plan(args.file, args.plan, args.format, args.trace, render=True)
    if args.command == "explain":
        return explain_run(args.run, args.library, args.json)
    if args.command == "demo":
        return demo()
    if args.command == "validate":
        return validate(args.paths, args.json)
    if args.command == "triggers":
        return triggers(args.library, args.cases, args.json)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
