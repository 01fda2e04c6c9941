"""Whether the pack loads and is intact: the extension files and the library loaded in the framework's Python
(``verify``), ``--check``, ``--self-test`` and the optional packages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from graph_engine.tools.install_apply import plan_install, up_to_date
from graph_engine.tools.install_files import pack_version, plugin_files
from graph_engine.tools.install_layout import (
    COMPANION, DIALOG, FRAMEWORK_PYTHON, LIBRARY, MANIFEST, OPTIONAL, PLUGIN, REQUIREMENT, SELECTOR, STATE_DIR,
    WARM_UP, Layout, Refused, detect, file_sha, say, sha256)
from graph_engine.tools.install_state import read_manifest, recorded_form

# ── verification, in the framework's Python ─────────────────────────────────

VERIFY = r"""
import importlib, importlib.util, json, os, sys
root, base, files, library = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
os.chdir(root)
sys.path.insert(0, root)
out = {"python": sys.executable, "files": {}, "optional": {}}
Extension = importlib.import_module(base).Extension
for i, path in enumerate(files):
    spec = importlib.util.spec_from_file_location(f"graph_engine_check_{i}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        found = sorted(n for n, v in vars(module).items()
                       if isinstance(v, type) and issubclass(v, Extension) and v is not Extension)
        out["files"][path] = {"classes": found}
        if found:
            loader = module._loader(None)
            if loader is None:
                raise module._said[0]
            loader.engine()
    except Exception as exc:
        out["files"][path] = {"error": f"{type(exc).__name__}: {exc}"}
try:
    lib = sys.modules["graph_engine.authoring.library"].load_library_file(library)
    out["library"] = {"plans": len(lib.plans), "loaded": sorted(lib.plans), "problems": list(lib.problems)}
except Exception as exc:
    out["library"] = {"error": f"{type(exc).__name__}: {exc}"}
for name in ("orjson", "jsonschema", "wordllama"):
    try:
        importlib.import_module(name)
        out["optional"][name] = True
    except ImportError:
        out["optional"][name] = False
print(json.dumps(out))
"""


def framework_python(explicit: str | None, root: Path) -> str | None:
    """--python, else the Docker image's framework venv, else the tree's own venv; None when none is there."""
    if explicit:
        return explicit
    for candidate in (Path(FRAMEWORK_PYTHON), root / ".venv" / "bin" / "python", root / "venv" / "bin" / "python"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


PROBE = "import importlib, os, sys; os.chdir(sys.argv[1]); sys.path.insert(0, sys.argv[1]); " \
        "importlib.import_module(sys.argv[2])"


def python_or_refuse(layout: Layout, explicit: str | None) -> str:
    """The Python to verify with: Agent-Zero's, or this one when it imports Agent-Zero's base class; else stop
    before anything is changed and name --python."""
    found = framework_python(explicit, layout.root)
    if found:
        return found
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        proc = subprocess.run([sys.executable, "-B", "-c", PROBE, str(layout.root), layout.base_module],
                              capture_output=True, text=True, timeout=120, env=env)
        problem = "" if proc.returncode == 0 else ((proc.stderr or proc.stdout).strip().splitlines() or ["?"])[-1]
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    if not problem:
        return sys.executable
    looked = ", ".join(str(p) for p in (Path(FRAMEWORK_PYTHON), layout.root / ".venv/bin/python",
                                        layout.root / "venv/bin/python"))
    raise Refused(f"Agent-Zero's Python was not found (looked for {looked}) and {sys.executable} cannot import "
                  f"{layout.base_module} ({problem}); pass the Python that runs Agent-Zero with --python PATH; "
                  "nothing was changed")


def verify(layout: Layout, python: str, required: list[str]) -> tuple[bool, dict]:
    """Load the three extension files as Agent-Zero does and the installed library; every plan the pack installed
    must load (a user's plan or a .dot file beside the library that does not is a warning, as in the engine)."""
    ext = layout.ext_root
    files = [str(ext / "before_main_llm_call" / SELECTOR), str(ext / "message_loop_prompts_after" / COMPANION),
             str(ext / "agent_init" / WARM_UP)]
    library = str(ext / "before_main_llm_call" / LIBRARY)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("GRAPH_ENGINE_LIBRARY", None)
    env.pop("GRAPH_ENGINE_HOME", None)
    try:
        proc = subprocess.run([python, "-B", "-c", VERIFY, str(layout.root), layout.base_module, json.dumps(files),
                               library], capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, {"error": f"could not run {python}: {exc}"}
    try:
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return False, {"error": f"{python} could not import the base class {layout.base_module}: {tail[0]}"}
    good = all(r.get("classes") is not None and len(r["classes"]) == 1 for r in report["files"].values())
    missing = sorted(set(required) - set(report["library"].get("loaded", [])))
    report["library"]["missing"] = missing
    good = good and "error" not in report["library"] and report["library"]["plans"] > 0 and not missing
    return good, report


def print_verification(report: dict) -> None:
    if "error" in report:
        say(f"verify: {report['error']}")
        return
    say(f"verify: with {report['python']}")
    for path, r in report["files"].items():
        if "error" in r:
            say(f"  FAIL {path}: {r['error']}")
        else:
            n = len(r["classes"])
            say(f"  {'ok  ' if n == 1 else 'FAIL'} {path}: {n} Extension subclass(es) {r['classes']}")
    lib = report["library"]
    if "error" in lib:
        say(f"  FAIL library: {lib['error']}")
    elif lib.get("missing"):
        say(f"  FAIL library: the pack's plan(s) {', '.join(lib['missing'])} do not load: {lib['problems'][:1]}")
    else:
        say(f"  ok   library: {lib['plans']} plan(s) load")
    for line in lib.get("problems", []) if not lib.get("missing") else []:
        say(f"  warn {line}")
    for name, present in report["optional"].items():
        say(f"  optional package {name}: {'present' if present else 'absent (the engine works without it)'}")


def install_optional(python: str, names: tuple[str, ...] = OPTIONAL) -> int:
    say(f"pip: installing {' '.join(names)} into {python}")
    return subprocess.call([python, "-m", "pip", "install", "--quiet", *(REQUIREMENT[n] for n in names)])


def check(root: Path, plugin: bool) -> int:
    form = recorded_form(root)
    if form in (DIALOG, "unrecorded"):
        return check_dialog(root)
    layout = detect(root, plugin or form == "plugin")
    plan = plan_install(layout)
    if up_to_date(plan):
        say(f"installed: version {plan.previous.get('version')} at {layout.rel(layout.ext_root)}/, every file intact")
        return 0
    if plan.previous is None:
        say(f"not installed at {root}")
        return 1
    changed = [rel for rel, data in plan.files.items()
               if not (root / rel).is_file() or file_sha(root / rel) != sha256(data)]
    example = f", e.g. {changed[0]}" if changed else ""
    if plan.previous.get("version") == pack_version():
        say(f"installed: version {pack_version()}, but {len(changed)} file(s) differ from this pack{example} "
            "(edited or removed since the install); run the installer again to restore them")
    else:
        say(f"installed: version {plan.previous.get('version')}; this pack is {pack_version()}: "
            f"{len(changed)} file(s) to update{example}; run the installer to upgrade")
    return 1


def check_dialog(root: Path) -> int:
    """--check for a plugin installed through the Plugins dialog: its files against this pack's."""
    folder = root / "usr" / "plugins" / PLUGIN
    meta = (folder / "plugin.yaml").read_text(errors="replace").splitlines()
    version = next((line.split(":", 1)[1].strip() for line in meta if line.startswith("version:")), "unknown")
    changed = [rel for rel, data in plugin_files().items()
               if not (folder / rel).is_file() or file_sha(folder / rel) != sha256(data)]
    where = f"version {version} as the Agent-Zero plugin usr/plugins/{PLUGIN} (Plugins dialog)"
    if not changed:
        say(f"installed: {where}, every file intact")
        return 0
    say(f"installed: {where}; {len(changed)} file(s) differ from this pack {pack_version()}, e.g. {changed[0]}; "
        "update it in Agent-Zero's Plugins list")
    return 1


def self_test(root: Path, python: str) -> int:
    """Run graph_engine.hosts.agent_zero.selftest from where the manifest says the pack is installed, with the framework's Python
    (Agent-Zero's own code and packages), as its own process."""
    manifest = read_manifest(root)
    if manifest is None:
        raise Refused(f"the pack is not installed at {root} (no {STATE_DIR / MANIFEST}); install it first")
    home = root / manifest["ext_root"]
    if not (home / "graph_engine").is_dir():  # a plugin: the package is beside extensions/python/
        home = home.parent
    if not (home / "graph_engine" / "hosts" / "agent_zero" / "selftest.py").is_file():
        raise Refused(f"{home / 'graph_engine' / 'hosts' / 'agent_zero' / 'selftest.py'} is missing; run the installer again to "
                      "restore it")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(home))
    for key in ("GRAPH_ENGINE_LIBRARY", "GRAPH_ENGINE_HOME", "GRAPH_ENGINE_RUNS_DIR"):
        env.pop(key, None)
    try:
        return subprocess.run([python, "-B", "-m", "graph_engine.hosts.agent_zero.selftest", "--a0-root", str(root)],
                              env=env, cwd=str(root), timeout=900).returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        say(f"self-test: could not run {python}: {exc}; pass the framework's Python with --python PATH")
        return 1
