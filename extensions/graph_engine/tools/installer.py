"""Install, upgrade, verify and uninstall the pack in an Agent-Zero tree (run by install_graph_engine.sh).

Standard library only; run as a script (it is not installed into Agent-Zero).

What it touches, and nothing else:
* ``<ext root>/before_main_llm_call/_15_htn_plan_selector.py`` (replaces the linear selector),
  ``htn_plan_library.json`` and ``plan_library.schema.json`` beside it;
* ``<ext root>/message_loop_prompts_after/_75_graph_workflow_context.py``;
* ``<ext root>/agent_init/_90_graph_engine_warm_up.py`` (loads the library before a chat's first message);
* ``<ext root>/graph_engine/`` (the engine package; the loader in the two files finds it there);
* ``<root>/usr/graph_engine/`` (install manifest and backups);
* with ``--plugin``: the plugin folder ``<root>/usr/plugins/graph_workflow_engine/``, holding the same files as
  the ZIP of ``make plugin`` (``plugin_files``) plus the merged library.

A plugin installed by Agent-Zero's own Plugins dialog (from the ZIP or a Git URL) is recorded in the same
manifest by its ``hooks.py`` (``adopt`` and ``release``, form ``dialog``), so either route sees the other.

``<ext root>`` is ``python/extensions`` on the old layout (v0.9.x) and ``usr/extensions/python`` (or the
plugin's ``extensions/python``) on the new one.  Every file it replaces is copied to a new backup folder
first; the manifest records what was installed (path, sha256) and what was replaced, so ``--uninstall``
restores the originals byte for byte and removes only what this pack put there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script by install_graph_engine.sh: the package is two folders up
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
# the installer's parts, each a module beside this one; their names are this module's too (hooks.py, the tests)
from graph_engine.tools.install_apply import (  # noqa: E402,F401
    install, plan_install, report_user_plans, rollback, touched_dirs, up_to_date, writable_or_refuse)
from graph_engine.tools.install_dialog import a0_root_of, adopt, keep_user_data, release  # noqa: E402,F401
from graph_engine.tools.install_files import (  # noqa: E402,F401
    build_zip, layout_library, pack_version, payload, plugin_files, runtime_files, shipped_history, web_ui_files)
from graph_engine.tools.install_layout import (  # noqa: E402,F401
    COMPANION, CONTROL_API, CORE_CONTROL_API, DIALOG, FRAMEWORK_PYTHON, LIBRARY, LOADER, MANIFEST, MARK, OPTIONAL,
    PACKAGE, PLUGIN, PLUGIN_README, PLUGIN_TOOLS, PLUGIN_TOP, REQUIREMENT, SCHEMA, SELECTOR, SRC, SRC_HOOKS,
    STATE_DIR, WARM_UP, Layout, Plan, Refused, act, competing_selectors, detect, file_sha, say, sha256)
from graph_engine.tools.install_restore import (  # noqa: E402,F401
    added_plans, drop_restored_backups, leave_only_backups, take, uninstall)
from graph_engine.tools.install_state import (  # noqa: E402,F401
    clear_caches, new_backup_dir, read_manifest, recorded_form, remove_if_empty, write_manifest)
from graph_engine.tools.install_verify import (  # noqa: E402,F401
    PROBE, VERIFY, check, check_dialog, framework_python, install_optional, print_verification, python_or_refuse,
    self_test, verify)


# ── entry point ─────────────────────────────────────────────────────────────


def without_optional(python: str, missing: tuple[str, ...], why: str) -> str:
    """What the person is told when optional packages stay missing: why, what it costs, how to add them."""
    cost = (" Without wordllama matching by meaning is off: a request starts a plan by its trigger phrases and the "
            "utility model alone, so many requests worded unlike a plan's examples start nothing."
            if "wordllama" in missing else "")
    return (f"optional packages {', '.join(missing)}: {why}. The engine works without them.{cost} To add them: "
            f"{python} -m pip install " + " ".join(f"'{REQUIREMENT[n]}'" for n in missing))


def confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise Refused("no terminal to ask for confirmation on; add --yes to go ahead (or --dry-run to look first)")
    if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
        raise Refused("not confirmed; nothing was changed")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="install_graph_engine.sh", description=__doc__.splitlines()[0])
    ap.add_argument("--a0-root", default="/a0", help="Agent-Zero root folder (default /a0)")
    ap.add_argument("--dry-run", action="store_true", help="print every action and change nothing")
    ap.add_argument("--uninstall", action="store_true", help="restore the replaced files and remove this pack")
    ap.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    ap.add_argument("--plugin", action="store_true", help=f"v1.x: install as the plugin usr/plugins/{PLUGIN}")
    ap.add_argument("--with-optional", action="store_true", help=argparse.SUPPRESS)  # the default now
    ap.add_argument("--without-optional", action="store_true",
                    help="do not pip-install the missing optional packages (orjson, jsonschema, wordllama: "
                         "matching by meaning needs wordllama)")
    ap.add_argument("--python", help=f"the framework's Python (default {FRAMEWORK_PYTHON} when present)")
    ap.add_argument("--check", action="store_true",
                    help="only report whether this version is installed and intact (exit 0 yes, 1 no)")
    ap.add_argument("--take-shipped", metavar="ID[,ID...]|all",
                    help="replace plans you edited by the shipped versions (kept in htn_plan_library.shipped.json)")
    ap.add_argument("--build-plugin", metavar="DIR",
                    help=f"write DIR/{PLUGIN}-<version>.zip for Agent-Zero's Plugins dialog and print its path")
    ap.add_argument("--self-test", action="store_true",
                    help="run a short scripted bug fix through the installed pack in Agent-Zero's own message loop "
                         "(no model is called); one line per check, then PASS or FAIL (exit 0 only on PASS)")
    ap.add_argument("--version", action="version", version=f"%(prog)s {pack_version()}")
    args = ap.parse_args(argv)
    root = Path(args.a0_root).resolve()
    try:
        if args.build_plugin:
            say(str(build_zip(Path(args.build_plugin).resolve())))
            return 0
        if args.check:
            return check(root, args.plugin)
        if args.self_test:
            return self_test(root, framework_python(args.python, root) or sys.executable)
        if args.take_shipped:
            confirm(f"Replace plan(s) {args.take_shipped} by the shipped version(s) in {root}?", args.yes or args.dry_run)
            return take(root, [x.strip() for x in args.take_shipped.split(",") if x.strip()], args.dry_run)
        if args.uninstall:
            if recorded_form(root) in (DIALOG, "unrecorded"):
                raise Refused(f"the pack is the Agent-Zero plugin usr/plugins/{PLUGIN}: delete it in Agent-Zero's "
                              "Plugins list (that restores what it replaced); nothing was changed")
            confirm(f"Uninstall the graph workflow engine from {root}?", args.yes or args.dry_run)
            return uninstall(root, args.dry_run)
        return run_install(root, args)
    except Refused as exc:
        say(f"refused: {exc}")
        return 2


def keep_form(root: Path, args: argparse.Namespace) -> None:
    """A re-run keeps the form that is installed, or says what changes; a dialog install is the dialog's."""
    form = recorded_form(root)
    if form in (DIALOG, "unrecorded"):
        how = "through the Plugins dialog" if form == DIALOG else "(a plugin folder no install record names)"
        raise Refused(f"the pack is installed as the Agent-Zero plugin usr/plugins/{PLUGIN} {how}; update or "
                      "delete it in Agent-Zero's Plugins list (deleting it restores what it replaced); "
                      "nothing was changed")
    if form == "plugin" and not args.plugin:
        say(f"installed as the plugin usr/plugins/{PLUGIN} (--plugin): keeping that form; to install into "
            "usr/extensions/python/ instead, run --uninstall first")
        args.plugin = True
    elif form == "files" and args.plugin:
        say(f"--plugin: the pack's files in {read_manifest(root).get('ext_root')}/ move into the plugin "
            f"usr/plugins/{PLUGIN}/ (each is backed up first)")


def run_install(root: Path, args: argparse.Namespace) -> int:
    keep_form(root, args)
    layout = detect(root, args.plugin)
    python = python_or_refuse(layout, args.python)
    say(f"Agent-Zero at {root}: {'v0.9.x' if layout.name == 'old' else 'v1.x'} layout; "
        f"installing into {layout.rel(layout.ext_root)}/")
    plan = plan_install(layout)
    if up_to_date(plan):
        say(f"already installed: version {plan.previous.get('version')} at {layout.rel(layout.ext_root)}/, "
            "every file matches its manifest entry; nothing was changed")
        ok, report = verify(layout, python, list(plan.merged.pack_plans)) if not args.dry_run else (True, {})
        if report:
            print_verification(report)
        return 0 if ok else 1
    if plan.previous:
        say(f"upgrade: from version {plan.previous.get('version')} to {pack_version()}")
    writable_or_refuse(touched_dirs(plan))
    if args.dry_run:
        install(plan, dry_run=True)
        say("dry run: nothing was changed")
        return 0
    confirm(f"Install the graph workflow engine into {root}?", args.yes)
    manifest = install(plan, dry_run=False)
    ok, report = verify(layout, python, list(plan.merged.pack_plans))
    print_verification(report)
    if not ok:
        say("verification failed: rolling back")
        rollback(root, manifest, plan.previous)
        return 1
    manifest.pop("_run")
    missing = tuple(name for name, present in report.get("optional", {}).items() if not present)
    if missing and not args.without_optional:
        code = install_optional(python, missing)
        still = tuple(n for n, present in verify(layout, python, list(plan.merged.pack_plans))[1]["optional"].items()
                      if not present) if code == 0 else missing
        if still:
            say(without_optional(python, still, "pip could not install them (is a package index reachable?)"))
    elif missing:
        say(without_optional(python, missing, "left out (--without-optional)"))
    say(f"installed: {len(manifest['installed'])} file(s); replaced {len(plan.replace) + len(plan.move_out)}; "
        f"manifest {root / STATE_DIR / MANIFEST}")
    say("live check: send a chat message such as 'fix the bug in /tmp/test.py'; the log shows "
        "'[HTN] Graph plan activated: Bug Fix Workflow'. Restart Agent-Zero first if it is running "
        "(extension classes are cached for the life of the process).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
