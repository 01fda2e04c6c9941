"""``graph-engine``: command-line tools around the engine.

Exit codes, for every verb: 0 done; 1 a finding (validate found errors, triggers missed cases, a simulated run
stalled or did not produce the expected events); 2 the input cannot be used (a missing, unreadable or
malformed file, an unknown plan, node or status, a wrong option), said in one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Sequence, TextIO

from .. import __version__

if TYPE_CHECKING:
    from ..authoring.lint import Diagnostic

# `--version`, `--help` and a wrong command line import nothing else: each verb imports what it uses when it runs
INPUT, FINDING = 2, 1  # the exit codes of tools/inputs.py, which is not imported before a verb runs
FORMATS = ("dot", "mermaid", "svg", "png")
SLOWEST = 5  # validate names the plans that took longest to check


# ── validate ────────────────────────────────────────────────────────────────


def validate_files(paths: Sequence[str]) -> list[Diagnostic]:
    return _findings(paths)[0]


def _findings(paths: Sequence[str], err: TextIO | None = None) -> tuple[list[Diagnostic], int]:
    """Every finding of every readable file (its .dot plans beside it included); files that cannot be read are
    said on ``err`` and counted."""
    per_file, unreadable = _per_file(paths, err)
    return [d for found in per_file.values() for d in found], unreadable


def _per_file(paths: Sequence[str], err: TextIO | None = None) -> tuple[dict[str, list[Diagnostic]], int]:
    """Each readable file's findings, then one info line per plan with its worst-case turns, then the five
    plans that took longest to check (a large library's slow plans are named)."""
    from ..authoring.lint import Diagnostic, example_routing
    from . import triggers as trig
    from .inputs import CliError, load_library

    per_file: dict[str, list[Diagnostic]] = {}
    unreadable = 0
    for path in paths:
        try:
            lib = load_library(path)
        except CliError as exc:
            unreadable += 1
            if err is not None:
                err.write(f"graph-engine validate: {exc}\n")
            continue
        plans = list(lib.plans.values())
        found = list(lib.diagnostics) + example_routing(plans, trig.index_of(plans) if any(
            p.examples for p in plans) else None)  # the meaning index: embedding the texts, no training

        def at(plan_id: str) -> dict[str, Any]:  # a DOT plan's info lines point at its digraph
            pos = lib.dot_positions.get(plan_id)
            return {"file": pos[0], "line": pos[1], "col": pos[2]} if pos else {}

        for plan_id, turns in lib.worst_case_turns.items():
            if plan_id in lib.plans:
                found.append(Diagnostic(rule="worst_case_turns", severity="info", plan=plan_id, node=None, edge=None,
                                        message=f"every run ends within {turns} turns", fix="", **at(plan_id)))
        slowest = sorted(lib.timings.items(), key=lambda kv: -kv[1])[:SLOWEST]
        for plan_id, seconds in slowest:
            found.append(Diagnostic(rule="check_time", severity="info", plan=plan_id, node=None, edge=None,
                                    message=f"checked in {seconds * 1000:.1f} ms (one of the {len(slowest)} slowest "
                                            f"of {len(lib.timings)} plans)", fix="", **at(plan_id)))
        per_file[path] = found
    return per_file, unreadable


def validate(paths: Sequence[str], as_json: bool, out: TextIO, err: TextIO) -> int:
    import io

    from ..authoring.schema import jsonschema_available
    from .inputs import CliError

    said = io.StringIO()
    per_file, unreadable = _per_file(paths, said)
    if unreadable == len(paths):  # nothing to report but the refusal: one line (one error object with --json)
        first, *more = said.getvalue().splitlines()
        raise CliError(first.split(": ", 1)[1] + (f" (and {len(more)} more file(s) that cannot be read)"
                                                  if more else ""))
    err.write(said.getvalue())
    found = [d for findings in per_file.values() for d in findings]
    errors = [d for d in found if d.severity == "error"]
    if as_json:
        out.write(json.dumps([d.to_json() for d in found], indent=2) + "\n")
    elif unreadable < len(paths):
        if jsonschema_available():  # without it, the library's warning line says the schema check is off
            out.write("schema checked with jsonschema\n")
        for path, findings in per_file.items():
            out.write(f"{path}\n")
            for d in findings:
                label = {"worst_case_turns": "ok     ", "check_time": "time   "}.get(d.rule)
                out.write(f"  {label} plan '{d.plan}': {d.message}\n" if label else f"  {d.text()}\n")
        warnings = sum(1 for d in found if d.severity == "warning")
        out.write(f"{len(errors)} error(s), {warnings} warning(s) in {len(paths) - unreadable} file(s)"
                  + (f"; {unreadable} file(s) could not be read" if unreadable else "") + "\n")
    return 2 if unreadable else (FINDING if errors else 0)


# ── triggers ────────────────────────────────────────────────────────────────


def triggers(library: str | None, cases: str | None, as_json: bool, out: TextIO, err: TextIO,
             explain: str | None = None, domain: str | None = None, folds: bool = False,
             answers: str | None = None, questions: bool = False) -> int:
    """The labelled set of the library: --cases, else trigger_cases.json beside the library, else (for the
    bundled library) fixtures/trigger_cases.json.  Without one, only colliding phrases are checked.  The shipped
    set is judged by its targets (``triggers.REQUIRED``); any other set by its own cases (exit 1 when one of them
    does not start what it expects).
    --explain MESSAGE: one message's scores per plan and why the winner won (--domain: the tracker's domain).
    --folds: the tuning split scored by classes learned again without each fifth of it (a minute, not seconds).
    --answers FILE: recorded utility model answers (default for the bundled set: fixtures/utility_answers.json),
    for the untaught library as the host runs it; --questions: print the questions to record them for (JSON
    lines: prompt_sha256, message, system, body; with --json one JSON list of them)."""
    from . import standin as a0
    from . import triggers as trig
    from .inputs import CliError, closest, json_file, load_library

    path = library or str(a0.LIBRARY)
    lib = load_library(path)
    if explain is not None:
        ex = trig.explain(list(lib.plans.values()), explain, domain)
        out.write((json.dumps(ex, indent=2) if as_json else trig.format_explain(ex)) + "\n")
        return 0
    bundled = str(a0.ROOT / "fixtures" / "trigger_cases.json")
    if cases is None:
        beside = os.path.join(os.path.dirname(os.path.abspath(path)), "trigger_cases.json")
        cases = beside if os.path.isfile(beside) else (bundled if library is None else None)
    if cases is None:
        err.write(f"graph-engine triggers: {path} has no golden set (write trigger_cases.json beside it, or pass "
                  "--cases FILE); checking only that no phrase collides across plans\n")
        rep = trig.report(list(lib.plans.values()), [])
        out.write((json.dumps(rep, indent=2) if as_json else trig.format_report(rep)) + "\n")
        return FINDING if rep["collisions"] else 0
    json_file(cases, "golden set of trigger cases")
    try:
        golden = trig.load_cases(cases)
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(f"{cases}: {exc}") from None
    for i, c in enumerate(golden):
        if c["expect"] is not None and c["expect"] not in lib.plans:
            raise CliError(f"{cases}: case {i} expects plan '{c['expect']}', which {path} does not hold (or "
                           f"disables: see graph-engine validate){closest(c['expect'], lib.plans)}")
    shipped_set = os.path.abspath(cases) == bundled and os.path.abspath(path) == str(a0.LIBRARY)
    if questions:  # JSON lines to answer one by one; --json: one JSON list
        asked = trig.questions(list(lib.plans.values()), golden)
        out.write(json.dumps(asked, indent=2, ensure_ascii=False) + "\n" if as_json else
                  "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in asked))
        return 0
    recorded = a0.ROOT / "fixtures" / "utility_answers.json"
    if answers is None and shipped_set and recorded.is_file():
        answers = str(recorded)
    answered = None
    if answers is not None:
        json_file(answers, "recorded utility model answers")
        try:
            answered = trig.load_answers(answers)
        except (ValueError, KeyError, TypeError) as exc:
            raise CliError(str(exc)) from None
    try:
        rep = trig.report(list(lib.plans.values()), golden, folds=folds, answers=answered, targets=shipped_set,
                          progress=lambda line: (err.write(f"graph-engine triggers: {line}\n"), err.flush()))
    except RuntimeError as exc:
        raise CliError(str(exc)) from None
    out.write((json.dumps(rep, indent=2) if as_json else trig.format_report(rep)) + "\n")
    if not shipped_set:
        return FINDING if rep["wrong"] else 0
    return 0 if all(rep["required"]["met"][k] for k in rep["required"]["counted"]) else FINDING


def build_matcher(path: str | None, check: bool, out: TextIO, err: TextIO, as_json: bool = False) -> int:
    """Learn the shipped matcher file again (``tools/matcher_build``), or with ``check`` only compare the hash of
    its inputs with the one it records (exit 1 when they differ: the file is stale)."""
    from . import matcher_build
    from .inputs import CliError
    paths = matcher_build.default_paths()
    if path:
        paths["out"] = path
    if check:
        stale = matcher_build.stale(paths)
        out.write(json.dumps({"file": paths["out"], "stale": stale}) + "\n" if as_json else
                  (stale or "the shipped matcher file matches its inputs") + "\n")
        return FINDING if stale else 0
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if os.environ.get(name) != "1":
            err.write(f"graph-engine build-matcher: note: {name} is not 1; BLAS may sum in another order on more "
                      "threads, and the bytes then differ (make matcher sets it)\n")
            break
    try:
        data = matcher_build.build(paths, lambda line: (err.write(f"graph-engine build-matcher: {line}\n"),
                                                        err.flush()))
    except RuntimeError as exc:
        raise CliError(str(exc)) from None
    digest = matcher_build.write(data, paths["out"])
    out.write(json.dumps({"file": paths["out"], "sha256": digest}) + "\n" if as_json else
              f"{paths['out']}: sha256 {digest}\n")
    return 0


# ── prompts, explain, inspect ───────────────────────────────────────────────


def prompts_cmd(path: str, plan_id: str | None, out: TextIO, as_json: bool = False) -> int:
    """Every text a plan (or every plan of a library) can show the model, as the golden files hold them;
    ``as_json``: ``{"plans": {id: [{"title", "text"}]}}``."""
    from .inputs import pick_plan
    from .prompts import document, sections

    plans = _loaded_plans(path) if plan_id is None else [pick_plan(path, plan_id).plan]
    if as_json:
        out.write(json.dumps({"plans": {p.id: [{"title": sec.title, "text": sec.text} for sec in sections(p)]
                                        for p in plans}}, indent=2) + "\n")
        return 0
    for plan in plans:
        out.write(document(plan) + "\n")
    return 0


def _loaded_plans(path: str) -> list:
    """The plans of a library that load; none is an input that cannot be used (it is said, not printed empty)."""
    from .inputs import CliError, load_library

    lib = load_library(path)
    if not lib.plans:
        errors = [d for d in lib.diagnostics if d.severity == "error"]
        first = f": {errors[0].text()}" if errors else ""
        raise CliError(f"{path}: no plan loads ({len(errors)} error(s){first}); run graph-engine validate {path}")
    return list(lib.plans.values())


def explain_run(path: str, library: str, as_json: bool, out: TextIO) -> int:
    from .explain import explain, format_steps
    from .inputs import load_library, run_log

    events, facts = run_log(path)
    lib = load_library(library)
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


def inspect_dot(path: str, as_json: bool, out: TextIO) -> int:
    """The parsed graph after the spec's transforms (label defaults to the id, ``$goal`` expanded, the model
    stylesheet applied), values typed, and the same findings as ``validate`` (timings left out)."""
    from ..authoring.dot import DotSyntaxError, jsonable, parse
    from ..authoring.dot_spec import handler_type, node_type, stylesheet_rules, styled, view
    from .inputs import CliError, read_text

    text = read_text(path, "DOT plan")
    if not path.endswith(".dot"):
        raise CliError(f"{path}: inspect reads DOT plans (.dot); check a JSON library with graph-engine validate")
    try:
        graph = parse(text)
    except DotSyntaxError as exc:
        raise CliError(f"{path}:{exc.line}:{exc.col}: {exc.message}",
                       details={"message": exc.message, "line": exc.line, "col": exc.col}) from None
    found = [d for d in validate_files([path]) if d.rule != "check_time"]
    shown = view(graph)
    rules, _ = stylesheet_rules(graph)
    nodes = {}
    for nid, n in graph.nodes.items():
        htype = handler_type(n.attrs, nid)
        shown[nid].setdefault("shape", "box")  # spec 2.6: a node's shape defaults to box
        nodes[nid] = {"attrs": {k: jsonable(v) for k, v in shown[nid].items()}, "handler_type": htype,
                      "node_type": "unsupported" if htype == "stack.manager_loop" else node_type(htype),
                      "from_stylesheet": sorted(styled(graph, n, rules)), "line": n.line, "col": n.col}
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


# ── export and render ───────────────────────────────────────────────────────


def export_plan(path: str, plan_id: str | None, fmt: str, trace: str | None, out: TextIO,
                output: str | None = None, render: bool = False, as_json: bool = False) -> int:
    """A plan as DOT or mermaid text, or a picture through Graphviz; ``as_json``: ``{"plan", "format",
    "text"}`` (or ``"output"`` and ``"bytes"`` for a picture written to a file)."""
    from ..authoring.dot_plan import to_dot
    from ..authoring.render_graph import mermaid, picture, trace_counts
    from .inputs import CliError, pick_plan, run_log

    source = pick_plan(path, plan_id)
    if "graph" not in source.raw:
        raise CliError(f"plan '{source.plan_id}' is a linear plan (steps); only graph plans can be drawn")
    highlight = trace_counts(run_log(trace, source.plan_id)[0]) if trace else None
    if fmt == "mermaid":
        text = mermaid(source.plan_id, source.raw, highlight)
    elif render:  # a picture for people: every condition on its arrow, a run's path highlighted
        text = picture(source.plan_id, source.raw, highlight)
    else:  # the plan as DOT that re-imports to the same plan
        try:
            text = to_dot(source.plan_id, source.raw)
        except ValueError as exc:
            raise CliError(f"{exc}; DOT cannot hold it, export the plan as --format mermaid or keep it in JSON") \
                from None
    if fmt in ("svg", "png"):
        if as_json and fmt == "png" and not output:
            raise CliError("--json with --format png needs --output FILE (a PNG is not text)")
        data = _graphviz(text, fmt, output, quiet=as_json)
        if as_json:
            shown = {"output": output, "bytes": len(data)} if output else {"text": data.decode("utf-8")}
            out.write(json.dumps({"plan": source.plan_id, "format": fmt, **shown}, indent=2) + "\n")
        return 0
    if output:
        _write(output, text.encode("utf-8"))
    if as_json:
        shown = {"output": output, "bytes": len(text.encode("utf-8"))} if output else {"text": text}
        out.write(json.dumps({"plan": source.plan_id, "format": fmt, **shown}, indent=2) + "\n")
    elif not output:
        out.write(text)
    return 0


def _graphviz(text: str, fmt: str, output: str | None, quiet: bool = False) -> bytes:
    import shutil
    import subprocess

    from .inputs import CliError

    binary = shutil.which("dot")
    if binary is None:
        raise CliError(f"--format {fmt} needs Graphviz's 'dot' program, which is not installed (Debian: apt-get "
                       "install graphviz); nothing was written. --format dot or mermaid work without it")
    proc = subprocess.run([binary, f"-T{fmt}"], input=text.encode(), capture_output=True)
    if proc.returncode != 0:
        first = proc.stderr.decode(errors="replace").strip().splitlines()[:1]
        raise CliError(f"Graphviz's dot failed ({first[0] if first else proc.returncode}); nothing was written")
    if output:
        _write(output, proc.stdout)
    elif not quiet:
        sys.stdout.flush()
        sys.stdout.buffer.write(proc.stdout)
    return proc.stdout


def _write(path: str, data: bytes) -> None:
    from .inputs import CliError

    try:
        with open(path, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        raise CliError(f"cannot write {path} ({exc.strerror or exc})") from None


# ── select and simulate ─────────────────────────────────────────────────────


def select_cmd(path: str, plan_id: str | None, node: str, outcome: str, context: str, as_json: bool,
               out: TextIO) -> int:
    """The edge the engine would take: ``{"target": id or null, "why": [...]}`` (and ``stay``, ``condition``).
    A null target is an answer (the run would stall or end there), not an error: exit 0."""
    from .inputs import CliError, json_arg, node_of, outcome_arg, pick_plan
    from .simulate import select

    source = pick_plan(path, plan_id)
    node_of(source, node)
    chosen = outcome_arg(outcome)
    ctx = json_arg(context, "--context", '{"lang": "python"}') if context else {}
    if not isinstance(ctx, dict):
        raise CliError("--context must be a JSON object of names and values, e.g. '{\"lang\": \"python\"}'")
    result = select(source.plan, node, chosen, ctx)
    if as_json:
        out.write(json.dumps(result, indent=2) + "\n")
        return 0
    if result["target"] is None:
        out.write(f"{node} -> (none: no edge for outcome '{chosen['status']}'; the run would stall here)\n")
    else:
        how = "stays (a retry in place)" if result["stay"] else f"via {result['condition']}"
        out.write(f"{node} -> {result['target']} {how}\n")
    for entry in result["why"]:
        out.write(f"  {entry.get('condition', ''):<24} -> {entry.get('to', ''):<20} {entry.get('verdict', '')}\n")
    return 0


def simulate_cmd(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .inputs import answers_arg, expect_arg, outcomes_arg, pick_plan, transcript_arg
    from .simulate import diverges, run_outcomes, run_transcript

    source = pick_plan(args.file, args.plan, allow_invalid=args.allow_invalid)
    expected = expect_arg(args.expect) if args.expect else None
    if args.transcript:
        result = run_transcript(source.plan_id, source.raw, transcript_arg(args.transcript))
    else:
        result = run_outcomes(source.plan, outcomes_arg(args.outcomes or "{}", source), answers_arg(args.answers),
                              args.auto_approve)
    problem = diverges(result["events"], expected) if expected is not None else ""
    if args.json:
        shown = {k: v for k, v in result.items() if k not in ("events", "log")}
        out.write(json.dumps(dict(shown, divergence=problem) if expected is not None else shown, indent=2) + "\n")
    else:
        _simulation_text(result, problem, out)
    if result["end"] in ("stalled", "max_steps"):
        err.write(f"graph-engine simulate: the run {result['end'].replace('_', ' ')} at "
                  f"'{(result['node_sequence'] or ['?'])[-1]}': {result['failure_reason'] or 'no route'} (a defect "
                  "of the plan: add an edge for that outcome)\n")
        return FINDING
    if problem:
        err.write(f"graph-engine simulate: {problem}\n")
        return FINDING
    return 0


def _simulation_text(result: dict[str, Any], problem: str, out: TextIO) -> None:
    for st in result["steps"]:
        if "kind" not in st:
            continue
        edge = st["edge"]
        via = f"-({edge['condition']})-> {edge['to']}" if edge else st.get("why", "")
        did = st.get("status") or f"answer {st.get('answer')!r}"
        left = "" if st["retries_left"] is None else f"  attempts left {st['retries_left']}"
        out.write(f"{st['node']:<24} {did:<16} {st['verdict']:<8} {via}{left}\n")
    out.write(f"final: {result['final_status']} ({result['end']})" + (f": {result['failure_reason']}"
                                                   if result["failure_reason"] else "") + "\n")
    out.write("path: " + " -> ".join(result["node_sequence"]) + "\n")
    if problem:
        out.write(f"divergence: {problem}\n")


# ── the command line ────────────────────────────────────────────────────────


class UsageError(Exception):
    """A command line argparse cannot read (an unknown verb or option, a missing or excluded argument)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]  # one line from main, not usage + message
        raise UsageError(f"{message} (see {self.prog} --help)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="graph-engine", description=__doc__.splitlines()[0],
                                epilog="exit codes: 0 done, 1 a finding, 2 an input that cannot be used")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    dm = sub.add_parser("demo", help="drive a bug-fix session through the Agent-Zero stand-in and print each pass")
    dm.add_argument("--out", default="graph-engine-demo", help="folder for the demo's project and audit log")
    dm.add_argument("--json", action="store_true", help="print one JSON object: the passes, the prompt, the result")
    val = sub.add_parser("validate", help="check plan library files: schema and lint (exit 1 on any error)")
    val.add_argument("paths", nargs="+", metavar="PATH")
    val.add_argument("--json", action="store_true", help="print a JSON list of findings")
    tr = sub.add_parser("triggers", help="run a library's trigger golden set: confusion table, colliding phrases")
    tr.add_argument("--library", help="a library (default: the bundled one)")
    tr.add_argument("--cases", help="the golden set (default: trigger_cases.json beside the library)")
    tr.add_argument("--json", action="store_true")
    tr.add_argument("--explain", metavar="MESSAGE", help="one message: the scores per plan and why the winner won")
    tr.add_argument("--domain", help="with --explain: the belief-state domain (default: none)")
    tr.add_argument("--folds", action="store_true", help="score the tuning cases by classes learned again without "
                                                         "each fifth of them (five folds: a minute, not seconds)")
    tr.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)  # the default now; still accepted
    tr.add_argument("--answers", metavar="FILE", help="recorded utility model answers (default for the bundled set: "
                                                      "fixtures/utility_answers.json)")
    tr.add_argument("--questions", action="store_true", help="print the questions the host would ask the utility "
                                                             "model about the untaught set, to record answers (JSON "
                                                             "lines; --json: one JSON list)")
    bm = sub.add_parser("build-matcher", help="learn matching/data/matcher.json from the bundled library and the "
                                              "labelled set (one thread: the same inputs give the same bytes)")
    bm.add_argument("--out", help="where to write it (default: the one the pack ships)")
    bm.add_argument("--check", action="store_true", help="only say whether the shipped file matches its inputs")
    bm.add_argument("--json", action="store_true", help='print {"file", "sha256"} ({"file", "stale"} with --check)')
    pro = sub.add_parser("prompts", help="every text a plan can show the model: steps, failures, notices")
    pro.add_argument("file", nargs="?", metavar="FILE", help="a library (default: the bundled one)")
    pro.add_argument("--plan", help="one plan (default: every plan of the library)")
    pro.add_argument("--json", action="store_true", help='print {"plans": {id: [{"title", "text"}]}}')
    ex = sub.add_parser("explain", help="why each edge of a run was taken (audit log .jsonl or saved state .json)")
    ex.add_argument("run", metavar="RUN_OR_STATE")
    ex.add_argument("--library", help="the library the run's plan is read from (default: the bundled one)")
    ex.add_argument("--json", action="store_true")
    ins = sub.add_parser("inspect", help="the parsed DOT graph: typed attributes, handler types, findings")
    ins.add_argument("file", metavar="FILE.dot")
    ins.add_argument("--json", action="store_true")
    exp = sub.add_parser("export", help="a plan as DOT (re-imports to the same plan) or mermaid")
    exp.add_argument("--library", help="a library (default: the bundled one)")
    exp.add_argument("--plan", help="the plan (needed when the library holds more than one)")
    exp.add_argument("--format", default="dot", help="dot or mermaid")
    exp.add_argument("--json", action="store_true", help='print {"plan", "format", "text"}')
    ren = sub.add_parser("render", help="a plan as a picture (dot, mermaid, svg, png), a run's path highlighted")
    ren.add_argument("file", metavar="FILE", help="a library .json or a .dot file")
    ren.add_argument("--plan")
    ren.add_argument("--format", default="dot", help="dot, mermaid, svg or png")
    ren.add_argument("--trace", metavar="RUN_OR_STATE", help="an audit log (.jsonl) or saved state (.json)")
    ren.add_argument("--output", "-o", metavar="FILE", help="write here (written only when the picture is made)")
    ren.add_argument("--json", action="store_true", help='print {"plan", "format", "text"} (or "output", "bytes")')
    sel = sub.add_parser("select", help="the edge the engine would take from a node for an outcome")
    sel.add_argument("file", metavar="FILE")
    sel.add_argument("--plan")
    sel.add_argument("--from", dest="node", required=True)
    sel.add_argument("--outcome", default='{"status": "success"}',
                     help='e.g. {"status": "fail"}, the spec\'s {"outcome": "fail"}, or fail (default: success)')
    sel.add_argument("--context", default="", help='e.g. {"lang": "python"}')
    sel.add_argument("--json", action="store_true")
    sim = sub.add_parser("simulate", help="run a plan with no model: scripted outcomes or a recorded chat")
    sim.add_argument("file", metavar="FILE")
    sim.add_argument("--plan")
    how = sim.add_mutually_exclusive_group()
    how.add_argument("--outcomes", help='per node, per visit: {"test": [{"status": "fail"}, {"status": "success"}]} '
                                        "(default: every node succeeds)")
    how.add_argument("--transcript", metavar="FILE.jsonl")
    sim.add_argument("--answers", help='answers for human gates, in order: ["F", "A"]')
    sim.add_argument("--auto-approve", action="store_true", help="human gates take their first option")
    sim.add_argument("--expect", metavar="EVENTS.json",
                     help='exit 1 unless these events happen, in order: [{"type": "plan_completed"}]')
    sim.add_argument("--allow-invalid", action="store_true", help="run a plan that fails validation")
    sim.add_argument("--json", action="store_true")
    return p


def bundled_library() -> str:
    """The library the pack ships (the default of --library and of prompts' FILE)."""
    from .standin import LIBRARY
    return str(LIBRARY)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .inputs import one_of

    if args.command == "demo":
        from .demo import demo
        return demo(out, args.out, args.json)
    if args.command == "validate":
        return validate(args.paths, args.json, out, err)
    if args.command == "triggers":
        return triggers(args.library, args.cases, args.json, out, err, args.explain, args.domain, args.folds,
                        args.answers, args.questions)
    if args.command == "build-matcher":
        return build_matcher(args.out, args.check, out, err, args.json)
    if args.command == "prompts":
        return prompts_cmd(args.file or bundled_library(), args.plan, out, args.json)
    if args.command == "explain":
        return explain_run(args.run, args.library or bundled_library(), args.json, out)
    if args.command == "inspect":
        return inspect_dot(args.file, args.json, out)
    if args.command == "export":
        return export_plan(args.library or bundled_library(), args.plan, one_of(args.format, ("dot", "mermaid"), "--format"), None, out,
                           as_json=args.json)
    if args.command == "render":
        return export_plan(args.file, args.plan, one_of(args.format, FORMATS, "--format"), args.trace, out,
                           args.output, render=True, as_json=args.json)
    if args.command == "select":
        return select_cmd(args.file, args.plan, args.node, args.outcome, args.context, args.json, out)
    return simulate_cmd(args, out, err)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one verb.  Whatever the input, no traceback: a problem is one line on stderr (and, with --json, one
    JSON object ``{"ok": false, "error": {"message": ...}}`` on stdout) and exit code 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    try:
        args = parser().parse_args(argv)
    except UsageError as exc:
        verb = next((a for a in argv if a in VERBS), "")
        return _refuse(verb, str(exc), INPUT, as_json)
    from .inputs import CliError  # a verb runs: what it reads is checked by tools/inputs.py

    try:
        return run(args, sys.stdout, sys.stderr)
    except CliError as exc:
        return _refuse(args.command, str(exc), exc.code, as_json, exc.details)
    except BrokenPipeError:  # output piped into head and the like: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - the last guard: a defect is one line too, never a traceback
        return _refuse(args.command, f"internal error ({type(exc).__name__}: {exc}); nothing was written; please "
                                     "report it with the command line", INPUT, as_json)


VERBS = ("demo", "validate", "triggers", "build-matcher", "prompts", "explain", "inspect", "export", "render", "select", "simulate")


def _refuse(verb: str, message: str, code: int, as_json: bool, details: dict[str, Any] | None = None) -> int:
    message = " ".join(message.split())[:2000]  # one line
    if as_json:
        sys.stdout.write(json.dumps({"ok": False, "error": {"message": message, **(details or {})}}) + "\n")
    sys.stderr.write(f"graph-engine{' ' + verb if verb else ''}: {message}\n")
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
