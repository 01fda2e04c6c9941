"""The self-test: a short bug fix through the INSTALLED pack, inside the user's own Agent-Zero.

    install_graph_engine.sh --self-test [--a0-root DIR] [--python PATH]
    python -m graph_engine.hosts.agent_zero.selftest --a0-root DIR         (with the installed package importable)

It runs Agent-Zero's real message loop in a temporary chat (see `a0driver`): the model's replies are scripted,
so nothing is sent to any model and no tokens are spent; the commands are real and run in a temporary folder.
One line per check, then PASS or FAIL; `main` exits 0 only when every check passed.  The temporary chat, its
memory folder, its audit log and picture, the project and the process's log file are removed afterwards.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from . import a0driver

CALC = "def divide(a, b):\n    return a / b\n"
TEST = "from calc import divide\nassert divide(6, 3) == 2\nassert divide(1, 0) == 0.0\nprint('2 passed')\n"
REQUEST = "fix the bug in {p}/calc.py: divide(1, 0) crashes with ZeroDivisionError"
WARM_UP = "hello! what is in {p}?"  # a first exchange with one shell command and no workflow: Agent-Zero's first
# command in a fresh shell can return before its output on a busy machine (the shell's first prompt is taken
# for the end), which would make the judged first step vary


def _reply(tool: str, headline: str, **args) -> str:
    return json.dumps({"thoughts": [headline], "headline": headline, "tool_name": tool, "tool_args": args})


def _terminal(code: str, headline: str) -> str:
    return _reply("code_execution_tool", headline, runtime="terminal", code=code, session=0)


def script(project: Path) -> list[str]:
    """The scripted model: a look at the folder; then reproduce, isolate, a fix that fails, the fix, the test,
    the regression check."""
    test = f'cd {project} && python3 test_calc.py; echo "[exit:$?]"'
    return [
        _terminal(f"ls {project}", "List the folder"),
        _reply("response", "Answer", text="calc.py and test_calc.py."),
        _terminal(test, "Reproduce the failure"),
        _terminal(f"grep -n -A2 'def divide' {project}/calc.py", "Find the division"),
        _terminal(f"sed -i 's|return a // b$|return 0|' {project}/calc.py && grep -q 'return 0' {project}/calc.py;"
                  ' echo "[exit:$?]"', "A first fix (it matches nothing)"),
        _terminal(f"sed -i 's|return a / b$|return a / b if b else 0.0|' {project}/calc.py; echo \"[exit:$?]\"",
                  "Guard the division"),
        _terminal(test, "Run the test again"),
        _terminal(test + " && python3 -c 'import calc'", "Check for regressions"),
        _reply("response", "Done", text="divide() returns 0.0 for a zero divisor; the test passes."),
    ]


def _printer(stream):
    return lambda line: print(line, file=stream, flush=True)


class Checks:
    def __init__(self, out) -> None:
        self.out, self.failed = out, 0

    def __call__(self, ok: bool, what: str, detail: str = "") -> bool:
        if not ok:
            self.failed += 1
        self.out(f"  {'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail and not ok else ""))
        return ok


def _last_user(call: dict) -> str:
    users = [m["content"] for m in call["messages"] if m["role"] in ("user", "human")]
    return users[-1] if users else ""


def _events(runs: Path) -> list[dict]:
    events = []
    for path in sorted(runs.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
    return events


def _card_text(session: a0driver.Session) -> str:
    log = getattr(session.context, "log", None)
    items = getattr(log, "logs", None) or []
    texts = [f"{getattr(i, 'heading', '')}\n{getattr(i, 'content', '')}" for i in items]
    return "\n".join(t for t in texts if "Workflow: " in t)


def _judge(check: Checks, session: a0driver.Session, runs: Path, project: Path) -> None:
    calls = session.script.calls[2:]  # from the bug report on
    first = _last_user(calls[0]) if calls else ""
    check("[WORKFLOW: Bug Fix Workflow] step 1 of 5" in first, "the plan starts in the first model call",
          "the first call carries no [WORKFLOW: Bug Fix Workflow] block")
    retried = len(calls) > 3 and "Implement the fix (attempt 2 of 3)" in _last_user(calls[3])
    check(retried, "a failing result retries the step", "the call after the failed fix does not show attempt 2")
    events = _events(runs)
    done = bool(events) and events[-1].get("type") == "plan_completed"
    check(done, "the run completes", f"last event {events[-1].get('type') if events else 'none'}")
    check((project / "calc.py").read_text() != CALC, "the fix was made by real commands", "calc.py is unchanged")
    card = _card_text(session)
    check("[done] 5." in card, "the workflow card shows every step done", "no card with step 5 done in the chat log")
    judged = [e for e in events if e.get("type") == "node_verified"]
    check(len(judged) == 6 and all(e.get("evidence_sha256") for e in judged), "the audit log records each check",
          f"{len(judged)} node_verified events (6 expected) in {runs}")
    a0driver.wait_for_pictures()
    pictures = [p for p in runs.rglob("*") if p.suffix in (".svg", ".mmd")]
    check(bool(pictures), "the picture of the run is written", f"no .svg or .mmd beside the audit log in {runs}")


def run(a0_root: str, out=print) -> bool:
    """Run the self-test in the Agent-Zero tree at `a0_root`; print one line per check; True when all pass."""
    root = Path(a0_root).resolve()
    if out is print:  # the checks go where this process's output went before Agent-Zero's is silenced
        out = _printer(sys.stdout)
    out(f"graph engine self-test in {root} (scripted model: nothing is sent to any model)")
    scratch = Path(tempfile.mkdtemp(prefix="graph-engine-selftest-"))
    project, runs = scratch / "project", scratch / "runs"
    project.mkdir()
    (project / "calc.py").write_text(CALC)
    (project / "test_calc.py").write_text(TEST)
    os.environ["GRAPH_ENGINE_RUNS_DIR"] = str(runs)
    os.environ["A0_ROOT"] = str(scratch)  # no org files, no SALUTE reports in the user's tree
    check = Checks(out)
    cache_before, tree_before = set(_cache_files(root)), _entries(root)
    session, made = None, []
    quiet, streams = open(os.devnull, "w"), (sys.stdout, sys.stderr)  # Agent-Zero's console output is not
    try:  # shown: the checks are what this prints
        sys.stdout, sys.stderr = quiet, quiet
        session = a0driver.Session(str(root), a0driver.Script(script(project)))
        session.start()
        made = session.scratch_paths()
        session.send(WARM_UP.format(p=project), timeout=300)
        session.send(REQUEST.format(p=project), timeout=300)
        _judge(check, session, runs, project)
    except Exception as exc:  # noqa: BLE001 - a broken pack or tree is a failed check, said in one line
        check(False, "the bug fix runs in Agent-Zero's message loop", f"{type(exc).__name__}: {exc}")
    finally:
        if session is not None:
            made = session.scratch_paths()
            session.close(remove_chat=True)
        fake = [p for p in _cache_files(root) if p not in cache_before]
        for path in fake:  # embeddings of this run are hashes, not the user's model's: never left in the cache
            _unlink(path)
        shutil.rmtree(scratch, ignore_errors=True)
        _remove_empty_new(root, tree_before)
        sys.stdout, sys.stderr = streams
        quiet.close()
    left = [str(p.relative_to(root)) for p in made + [p for p in _cache_files(root) if p not in cache_before]
            if p.exists()]
    check(not left, "nothing is left in the Agent-Zero tree", ", ".join(left[:5]))
    out("PASS" if not check.failed else f"FAIL ({check.failed} check{'s' if check.failed > 1 else ''} failed)")
    return not check.failed


EMBEDDING_CACHE = "tmp/memory/embeddings"


def _entries(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if "__pycache__" not in p.parts}


def _remove_empty_new(root: Path, before: set[Path]) -> None:
    """Folders Agent-Zero made for this run that stayed empty, and the usr/.env it made when there was none."""
    new = sorted(_entries(root) - before, key=lambda p: len(p.parts), reverse=True)
    for path in new:
        try:
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()
            elif path == root / "usr" / ".env":  # made at start-up when missing (a runtime id only)
                path.unlink()
        except OSError:
            pass


def _cache_files(root: Path) -> list[Path]:
    folder = root / EMBEDDING_CACHE
    return [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graph_engine.hosts.agent_zero.selftest",
                                     description="Run a short scripted bug fix through the installed pack.")
    parser.add_argument("--a0-root", default="/a0", help="the Agent-Zero root (default /a0)")
    args = parser.parse_args(argv)
    ok = run(args.a0_root)
    sys.stdout.flush()
    os._exit(0 if ok else 1)  # Agent-Zero's background threads do not end by themselves


if __name__ == "__main__":
    sys.exit(main())
