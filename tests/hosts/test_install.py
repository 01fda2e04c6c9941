"""install_graph_engine.sh on throwaway Agent-Zero trees of both layouts."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from graph_engine.tools import installer
from graph_engine.tools.standin import FIXTURES, ROOT, SELECTOR, WARM_UP

SCRIPT = ROOT / "install_graph_engine.sh"
BASE = "class Extension:\n    def __init__(self, agent=None, **kwargs):\n        self.agent = agent\n"
LEGACY_SELECTOR = ("from python.helpers.extension import Extension\n\n\nclass HTNPlanSelector(Extension):\n"
                   "    async def execute(self, loop_data=None, **kwargs):\n        pass  # the linear selector\n")
OTHER = "from {base} import Extension\n\n\nclass {name}(Extension):\n    async def execute(self, **kw):\n        pass\n"


def write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


def make_tree(base: Path, layout: str, legacy: str | None = None) -> Path:
    """An Agent-Zero tree: the base class, neighbouring layers, org files; legacy = where the old selector is."""
    root = base / f"a0_{layout}"
    if layout == "old":
        write(root / "python" / "helpers" / "extension.py", BASE)
        ext = root / "python" / "extensions"
        mod = "python.helpers.extension"
    else:
        write(root / "helpers" / "extension.py", BASE)
        ext = root / "extensions" / "python"
        mod = "helpers.extension"
        write(root / "usr" / "extensions" / "python" / "monologue_start" / "_10_user.py",
              OTHER.format(base=mod, name="UserThing"))
    write(ext / "before_main_llm_call" / "_11_belief_state_tracker.py", OTHER.format(base=mod, name="BST"))
    write(ext / "before_main_llm_call" / "_12_org_dispatcher.py", OTHER.format(base=mod, name="Dispatcher"))
    write(ext / "message_loop_end" / "_50_supervisor.py", OTHER.format(base=mod, name="Supervisor"))
    write(ext / "message_loop_prompts_after" / "_60_other.py", OTHER.format(base=mod, name="Other"))
    write(root / "usr" / "organizations" / "active.json", (FIXTURES / "organizations" / "software_dev.json").read_bytes())
    write(root / "agent.py", "# the framework\n")
    if legacy:
        where = {"old": ext, "usr": root / "usr" / "extensions" / "python",
                 "plugin": root / "usr" / "plugins" / "htn_layer" / "extensions" / "python"}[legacy]
        write(where / "before_main_llm_call" / "_15_htn_plan_selector.py", LEGACY_SELECTOR)
        write(where / "before_main_llm_call" / "htn_plan_library.json",
              (FIXTURES / "legacy_linear_htn_plan_library.json").read_bytes())
        if legacy == "plugin":
            write(root / "usr" / "plugins" / "htn_layer" / "plugin.yaml", "title: HTN layer\n")
    return root


def snapshot(root: Path, skip_state: bool = False) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if skip_state and rel.startswith("usr/graph_engine"):
            continue
        out[rel] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "<dir>"
    return out


def run(root: Path, *args: str, python: str | None = None, user: int | None = None,
        stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    env = dict(os.environ, GRAPH_ENGINE_INSTALL_PYTHON=python or sys.executable)
    cmd = ["bash", str(SCRIPT), "--a0-root", str(root), "--python", python or sys.executable, *args]
    demote = (lambda: (os.setgid(user), os.setuid(user))) if user is not None else None
    return subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=stdin, preexec_fn=demote,
                          timeout=120)


def manifest(root: Path) -> dict:
    return json.loads((root / "usr" / "graph_engine" / "install_manifest.json").read_text())


# ── installing ──────────────────────────────────────────────────────────────


def test_old_layout_with_the_linear_selector_install_again_and_uninstall(tmp_path):
    root = make_tree(tmp_path, "old", legacy="old")
    before = snapshot(root)
    r = run(root, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "v0.9.x layout; installing into python/extensions/" in r.stdout
    hook = root / "python" / "extensions" / "before_main_llm_call"
    assert (hook / "_15_htn_plan_selector.py").read_bytes() == SELECTOR.read_bytes()
    assert (root / "python" / "extensions" / "message_loop_prompts_after" / "_75_graph_workflow_context.py").is_file()
    assert (root / "python" / "extensions" / "agent_init" / WARM_UP.name).read_bytes() == WARM_UP.read_bytes()
    # the workflow tool and its prompt, where v0.9.x looks for a user's tools and prompts
    assert (root / "usr" / "tools" / "graph_workflow.py").read_bytes() == (ROOT / "tools" / "graph_workflow.py").read_bytes()
    assert (root / "usr" / "prompts" / "agent.system.tool.graph_workflow.md").is_file()
    installed = root / "python" / "extensions" / "graph_engine"
    runtime = ROOT / "extensions" / "graph_engine"
    # exactly the runtime package reaches Agent-Zero (its modules, subpackages and their data); tools/ stays out
    assert sorted(p.relative_to(installed).as_posix() for p in installed.rglob("*") if p.is_file()) == \
        sorted(p.relative_to(runtime).as_posix() for p in installer.runtime_files())
    assert not (installed / "tools").exists() and (installed / "matching" / "data" / "matcher.json").is_file()
    assert all((installed / p.name).read_bytes() == p.read_bytes() for p in runtime.glob("*.py"))
    assert json.loads((hook / "htn_plan_library.json").read_text())["_meta"]["version"].startswith("2.")
    # verified the way Agent-Zero loads extension files, library included
    assert r.stdout.count("1 Extension subclass(es)") == 3 and "library: 10 plan(s) load" in r.stdout
    # backups of the replaced files, byte-identical, and a manifest with hashes
    m = manifest(root)
    originals = {o["path"]: o for o in m["originals"]}
    assert set(originals) == {"python/extensions/before_main_llm_call/_15_htn_plan_selector.py",
                              "python/extensions/before_main_llm_call/htn_plan_library.json"}
    for rel, o in originals.items():
        assert hashlib.sha256((root / o["backup"]).read_bytes()).hexdigest() == before[rel] == o["sha256"]
    for e in m["installed"]:
        assert hashlib.sha256((root / e["path"]).read_bytes()).hexdigest() == e["sha256"]
    # every other file is untouched
    after = snapshot(root, skip_state=True)
    ours = {e["path"] for e in m["installed"]}
    assert {k: v for k, v in after.items() if k not in ours and v != "<dir>"} == \
        {k: v for k, v in before.items() if k not in ours and v != "<dir>"}
    # a second run changes nothing
    again = snapshot(root)
    r2 = run(root, "--yes")
    assert r2.returncode == 0 and "already installed" in r2.stdout and snapshot(root) == again
    # uninstall restores the tree byte for byte (the backups stay under usr/graph_engine)
    r3 = run(root, "--uninstall", "--yes")
    assert r3.returncode == 0, r3.stdout
    assert snapshot(root, skip_state=True) == {k: v for k, v in before.items()}


def test_new_layout_fresh_install_goes_to_user_code_and_uninstall_leaves_nothing(tmp_path):
    root = make_tree(tmp_path, "new")
    before = snapshot(root)
    r = run(root, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "v1.x layout; installing into usr/extensions/python/" in r.stdout
    assert (root / "usr/extensions/python/before_main_llm_call/_15_htn_plan_selector.py").is_file()
    assert (root / "usr/extensions/python/graph_engine/core/engine.py").is_file()
    assert manifest(root)["originals"] == []
    assert run(root, "--uninstall", "--yes").returncode == 0
    assert snapshot(root, skip_state=True) == before


def test_new_layout_replaces_the_selector_where_it_is(tmp_path):
    root = make_tree(tmp_path, "new", legacy="plugin")
    before = snapshot(root)
    r = run(root, "--yes")
    assert r.returncode == 0, r.stdout
    assert "installing into usr/plugins/htn_layer/extensions/python/" in r.stdout
    sel = root / "usr/plugins/htn_layer/extensions/python/before_main_llm_call/_15_htn_plan_selector.py"
    assert b"Graph workflow engine" in sel.read_bytes()
    assert run(root, "--uninstall", "--yes").returncode == 0
    assert snapshot(root, skip_state=True) == before


def test_plugin_install_moves_a_competing_selector_aside_and_puts_it_back(tmp_path):
    root = make_tree(tmp_path, "new", legacy="usr")
    old_lib = root / "usr/extensions/python/before_main_llm_call/htn_plan_library.json"
    data = json.loads(old_lib.read_text())
    data["plans"]["my_linear"] = MY_LINEAR  # a plan of the user's, in the library beside the old selector
    old_lib.write_text(json.dumps(data))
    before = snapshot(root)
    r = run(root, "--yes", "--plugin")
    assert r.returncode == 0, r.stdout
    plugin = root / "usr" / "plugins" / "graph_workflow_engine"
    assert (plugin / "plugin.yaml").read_bytes() == (ROOT / "plugin.yaml").read_bytes()  # with its name
    installed = json.loads((plugin / "extensions/python/before_main_llm_call/htn_plan_library.json").read_text())
    assert installed["plans"]["my_linear"] == MY_LINEAR  # carried into the plugin's library
    assert (plugin / "extensions/python/message_loop_prompts_after/_75_graph_workflow_context.py").is_file()
    assert (plugin / "extensions/python/agent_init" / WARM_UP.name).is_file()
    assert not (root / "usr/extensions/python/before_main_llm_call/_15_htn_plan_selector.py").exists()
    assert "compete with the new selector" in r.stdout
    assert run(root, "--uninstall", "--yes").returncode == 0
    assert snapshot(root, skip_state=True) == before


def test_upgrade_over_an_earlier_version_of_the_pack(tmp_path):
    root = make_tree(tmp_path, "new", legacy="usr")
    before = snapshot(root)
    assert run(root, "--yes").returncode == 0
    # make the install look like an earlier version: one changed module, one the new version dropped
    ext = root / "usr" / "extensions" / "python"
    m = manifest(root)
    m["version"] = "1.9.0"
    (ext / "graph_engine" / "texts" / "render.py").write_text("# render, version 1.9\n")
    write(ext / "graph_engine" / "legacy_helpers.py", "# gone in 2.x\n")
    for e in m["installed"]:
        e["sha256"] = hashlib.sha256((root / e["path"]).read_bytes()).hexdigest()
    m["installed"].append({"path": "usr/extensions/python/graph_engine/legacy_helpers.py",
                           "sha256": hashlib.sha256(b"# gone in 2.x\n").hexdigest()})
    (root / "usr/graph_engine/install_manifest.json").write_text(json.dumps(m))
    r = run(root, "--yes")
    assert r.returncode == 0, r.stdout
    assert "upgrade: from version 1.9.0" in r.stdout
    assert (ext / "graph_engine" / "texts" / "render.py").read_bytes() == \
        (ROOT / "extensions/graph_engine/texts/render.py").read_bytes()
    assert not (ext / "graph_engine" / "legacy_helpers.py").exists()
    assert len(manifest(root)["backups"]) == 2  # the first install's and the upgrade's, side by side
    assert run(root, "--uninstall", "--yes").returncode == 0
    assert snapshot(root, skip_state=True) == before  # back to the linear selector, not to 1.9.0


def test_two_installs_in_the_same_second_never_share_a_backup_folder(tmp_path):
    root = make_tree(tmp_path, "old", legacy="old")
    assert run(root, "--yes").returncode == 0
    assert run(root, "--uninstall", "--yes").returncode == 0
    assert run(root, "--yes").returncode == 0
    backups = sorted(p.name for p in (root / "usr/graph_engine/backups").iterdir())
    assert len(backups) == 2 and len(set(backups)) == 2


# ── doing nothing, and saying why ───────────────────────────────────────────


def test_dry_run_prints_every_action_and_changes_nothing(tmp_path):
    root = make_tree(tmp_path, "old", legacy="old")
    before = snapshot(root)
    r = run(root, "--dry-run")
    assert r.returncode == 0 and snapshot(root) == before
    assert "replace: would write python/extensions/before_main_llm_call/_15_htn_plan_selector.py" in r.stdout
    assert "add:     would write python/extensions/graph_engine/core/engine.py" in r.stdout
    assert "mkdir:   would create python/extensions/graph_engine/" in r.stdout
    assert "dry run: nothing was changed" in r.stdout
    assert run(root, "--yes").returncode == 0
    installed = snapshot(root)
    r = run(root, "--uninstall", "--dry-run")
    assert r.returncode == 0 and snapshot(root) == installed
    assert "restore: would restore python/extensions/before_main_llm_call/_15_htn_plan_selector.py" in r.stdout


@pytest.mark.parametrize("shape, message", [
    ("missing", "is not a folder; pass the Agent-Zero root with --a0-root DIR"),
    ("empty", "no Agent-Zero found at"),
    ("both", "has both python/extensions/ (v0.9.x) and extensions/python/ (v1.x)"),
    ("no_base", "but helpers/extension.py does not; this does not look like Agent-Zero v1.x"),
])
def test_refuses_trees_that_are_not_agent_zero(tmp_path, shape, message):
    root = tmp_path / "a0"
    if shape != "missing":
        root.mkdir()
    if shape == "both":
        make_tree(tmp_path, "old")
        root = make_tree(tmp_path, "new")
        shutil.copytree(tmp_path / "a0_old" / "python", root / "python")
    if shape == "no_base":
        root = make_tree(tmp_path, "new")
        (root / "helpers" / "extension.py").unlink()
    before = snapshot(root) if root.exists() else None
    r = run(root, "--yes")
    assert r.returncode == 2 and message in r.stdout and "refused:" in r.stdout
    assert (snapshot(root) if root.exists() else None) == before


def runs_as(python: str, user: int) -> bool:
    try:
        return subprocess.run([python, "-c", "pass"], preexec_fn=lambda: (os.setgid(user), os.setuid(user)),
                              capture_output=True).returncode == 0
    except OSError:
        return False


def test_read_only_folder_is_refused_before_anything_changes():
    base = Path(tempfile.mkdtemp(prefix="ge-ro-"))
    try:
        os.chmod(base, 0o755)
        root = make_tree(base, "old", legacy="old")
        src = base / "pack"  # a copy of the pack the unprivileged user can read
        src.mkdir()
        for part in ("install_graph_engine.sh", "extensions", "plan_library", "tools", "prompts"):
            (shutil.copytree if (ROOT / part).is_dir() else shutil.copy2)(ROOT / part, src / part)
        for path in [base, *base.rglob("*")]:
            os.chmod(path, (0o777 if path.is_dir() else 0o666) if root in path.parents or path == root else
                     (0o755 if path.is_dir() or path.suffix == ".sh" else 0o644))
        hook = root / "python" / "extensions" / "before_main_llm_call"
        os.chmod(hook, 0o555)
        user = None
        python = sys.executable
        if os.geteuid() == 0:  # root writes anywhere: run as an unprivileged user
            user = 65534
            python = next((p for p in (sys.executable, "/usr/bin/python3") if runs_as(p, 65534)), None)
            if python is None:
                pytest.skip("no Python the unprivileged user can run")
        before = snapshot(root)
        env = dict(os.environ, GRAPH_ENGINE_INSTALL_PYTHON=python)
        demote = (lambda: (os.setgid(user), os.setuid(user))) if user else None
        r = subprocess.run(["bash", str(src / "install_graph_engine.sh"), "--a0-root", str(root), "--yes",
                            "--python", python], capture_output=True, text=True, env=env, preexec_fn=demote,
                           cwd=str(base))
        assert r.returncode == 2, r.stdout + r.stderr
        assert f"refused: {hook} is read-only for this user" in r.stdout
        assert snapshot(root) == before
    finally:
        for path in [base, *base.rglob("*")]:
            if path.is_dir():
                os.chmod(path, 0o755)
        shutil.rmtree(base)


def test_failed_verification_rolls_back(tmp_path):
    root = make_tree(tmp_path, "new", legacy="usr")
    before = snapshot(root)
    write(root / "helpers" / "extension.py", "raise RuntimeError('broken framework')\n")
    before = snapshot(root)
    r = run(root, "--yes")
    assert r.returncode == 1
    assert "could not import the base class helpers.extension: RuntimeError: broken framework" in r.stdout
    assert "rolled back" in r.stdout
    assert snapshot(root, skip_state=True) == before
    assert not (root / "usr/graph_engine/install_manifest.json").exists()


def test_uninstall_without_an_install_is_refused(tmp_path):
    root = make_tree(tmp_path, "old", legacy="old")
    r = run(root, "--uninstall", "--yes")
    assert r.returncode == 2 and "no install manifest" in r.stdout


def test_without_a_terminal_it_asks_for_yes(tmp_path):
    root = make_tree(tmp_path, "old")
    before = snapshot(root)
    r = run(root)
    assert r.returncode == 2 and "add --yes to go ahead" in r.stdout and snapshot(root) == before


def test_optional_packages_are_reported(tmp_path):
    root = make_tree(tmp_path, "old")
    r = run(root, "--yes")
    for name in ("orjson", "jsonschema", "wordllama"):
        present = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True).returncode == 0
        assert f"optional package {name}: {'present' if present else 'absent'}" in r.stdout


def test_user_edits_to_installed_files_are_kept_on_uninstall(tmp_path):
    root = make_tree(tmp_path, "old", legacy="old")
    assert run(root, "--yes").returncode == 0
    lib = root / "python/extensions/before_main_llm_call/htn_plan_library.json"
    lib.write_text(lib.read_text().replace("Bug Fix Workflow", "My Bug Fixes"))
    r = run(root, "--uninstall", "--yes")
    assert r.returncode == 0 and "it holds your changes or plans" in r.stdout
    kept = list((root / "usr/graph_engine/backups").rglob("htn_plan_library.json"))
    assert any("My Bug Fixes" in p.read_text() for p in kept)


# ── the user's plans: never lost ────────────────────────────────────────────

HOOK = "python/extensions/before_main_llm_call"
MY_LINEAR = {"name": "My Deploy", "triggers": ["ship it now"], "trigger_threshold": 1,
             "steps": [{"name": "Run the deploy script", "tool": "code_execution_tool", "tool_hint": "./deploy.sh",
                        "verify": {"type": "output_contains", "value": "deployed"}}]}
MY_BROKEN_GRAPH = {"name": "My Broken Graph", "triggers": ["broken graph please"], "trigger_threshold": 1,
                   "graph": {"start": "a", "nodes": {"a": {"type": "task", "name": "A"}, "end": {"type": "exit"}},
                             "edges": [{"from": "a", "to": "nowhere"}]}}


def with_user_plans(root: Path, **plans) -> Path:
    lib = root / HOOK / "htn_plan_library.json"
    data = json.loads(lib.read_text())
    data["plans"].update(plans)
    lib.write_text(json.dumps(data, indent=1))
    return lib


def live_plans(root: Path):
    from graph_engine.authoring.library import load_library_file
    return load_library_file(str(root / HOOK / "htn_plan_library.json"))


def test_install_over_the_legacy_library_carries_the_users_plans_and_uninstall_loses_nothing(tmp_path):
    root = make_tree(tmp_path, "old", legacy="old")
    lib = with_user_plans(root, my_linear=MY_LINEAR, my_graph=MY_BROKEN_GRAPH)
    original = lib.read_bytes()
    r = run(root, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "will carry your plan 'my_linear' into python/extensions/before_main_llm_call/htn_plan_library.json" \
        in r.stdout
    assert "will carry your plan 'my_graph' into" in r.stdout and \
        "the engine disables it until it is fixed: [edge_target_exists]" in r.stdout
    installed = json.loads(lib.read_text())["plans"]
    assert installed["my_linear"] == MY_LINEAR and installed["my_graph"] == MY_BROKEN_GRAPH  # as they were
    assert "graph" in installed["bugfix_workflow"]  # the previous selector's linear version was replaced
    loaded = live_plans(root)
    assert "my_linear" in loaded.plans and "my_graph" not in loaded.plans and len(loaded.plans) == 11
    assert any("plan 'my_graph' is disabled" in line for line in loaded.problems)
    assert "warn " in r.stdout and "installed:" in r.stdout  # verified: a user's broken plan is a warning
    r = run(root, "--uninstall", "--yes")
    assert r.returncode == 0 and lib.read_bytes() == original  # both plans back, byte for byte


def test_an_edited_shipped_plan_is_kept_and_the_shipped_one_waits_beside_it(tmp_path):
    root = make_tree(tmp_path, "old", legacy="old")
    assert run(root, "--yes").returncode == 0
    lib = root / HOOK / "htn_plan_library.json"
    data = json.loads(lib.read_text())
    data["plans"]["bugfix_workflow"]["name"] = "My Bug Fixes"  # the user edits a shipped plan ...
    data["plans"]["my_linear"] = MY_LINEAR  # ... and adds one
    lib.write_text(json.dumps(data, indent=1))
    r = run(root, "--yes")  # the installer again (an upgrade runs the same way)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "will keep your edited plan 'bugfix_workflow'" in r.stdout
    assert "--take-shipped bugfix_workflow" in r.stdout and "will carry your plan 'my_linear'" in r.stdout
    plans = json.loads(lib.read_text())["plans"]
    assert plans["bugfix_workflow"]["name"] == "My Bug Fixes" and plans["my_linear"] == MY_LINEAR
    beside = json.loads((root / HOOK / "htn_plan_library.shipped.json").read_text())["plans"]
    assert list(beside) == ["bugfix_workflow"] and beside["bugfix_workflow"]["name"] == "Bug Fix Workflow"
    assert "already installed" in run(root, "--yes").stdout  # stable: nothing to do the next time
    r = run(root, "--take-shipped", "bugfix_workflow", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    plans = json.loads(lib.read_text())["plans"]
    assert plans["bugfix_workflow"]["name"] == "Bug Fix Workflow" and plans["my_linear"] == MY_LINEAR
    assert not (root / HOOK / "htn_plan_library.shipped.json").exists()
    assert "already installed" in run(root, "--yes").stdout
    r = run(root, "--uninstall", "--yes")
    assert r.returncode == 0 and "it holds your plans my_linear" in r.stdout
    kept = [p for p in (root / "usr/graph_engine/backups").rglob("htn_plan_library.json")
            if "my_linear" in json.loads(p.read_text())["plans"]]
    assert kept  # the plan added after installing is in the backup folder


def test_take_shipped_refuses_a_plan_the_pack_does_not_ship(tmp_path):
    root = make_tree(tmp_path, "old", legacy="old")
    assert run(root, "--yes").returncode == 0
    r = run(root, "--take-shipped", "bugfix_workflw", "--yes")
    assert r.returncode == 2 and "the pack ships no plan 'bugfix_workflw'; did you mean 'bugfix_workflow'?" in r.stdout
    r = run(root, "--take-shipped", "all", "--yes")
    assert r.returncode == 2 and "no edited plan waits for its shipped version" in r.stdout


def test_a_broken_dot_plan_beside_the_library_is_a_warning_and_is_never_touched(tmp_path):
    root = make_tree(tmp_path, "old", legacy="old")
    dot = root / HOOK / "broken.dot"
    dot.write_text("digraph Broken { a -- b }")
    good = root / HOOK / "smoke.dot"
    good.write_text('digraph smoke { start [shape=Mdiamond]; run [prompt="run it"]; exit [shape=Msquare]; '
                    'start -> run -> exit }')
    before = (dot.read_bytes(), good.read_bytes())
    r = run(root, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warn " in r.stdout and "broken.dot" in r.stdout and "rolling back" not in r.stdout
    assert (dot.read_bytes(), good.read_bytes()) == before
    assert run(root, "--uninstall", "--yes").returncode == 0
    assert (dot.read_bytes(), good.read_bytes()) == before


# ── the installed form, Agent-Zero's Python, rollback, what uninstall leaves ─


def test_a_plain_rerun_after_plugin_keeps_the_plugin_and_check_answers_for_it(tmp_path):
    root = make_tree(tmp_path, "new", legacy="usr")
    assert run(root, "--yes", "--plugin").returncode == 0
    plugin = root / "usr/plugins/graph_workflow_engine"
    (plugin / "extensions/python/message_loop_prompts_after/_75_graph_workflow_context.py").write_text("# edited\n")
    r = run(root, "--yes")  # the README's plain command
    assert r.returncode == 0, r.stdout
    assert "installed as the plugin usr/plugins/graph_workflow_engine (--plugin): keeping that form" in r.stdout
    assert (plugin / "plugin.yaml").read_bytes() == (ROOT / "plugin.yaml").read_bytes()
    assert not (root / "usr/extensions/python/before_main_llm_call/_15_htn_plan_selector.py").exists()
    assert manifest(root)["plugin"] == "usr/plugins/graph_workflow_engine"
    check = run(root, "--check")  # without --plugin: it answers for the form that is installed
    assert check.returncode == 0 and "at usr/plugins/graph_workflow_engine/extensions/python/, every file intact" \
        in check.stdout


def test_switching_the_form_is_said_before_it_is_done(tmp_path):
    root = make_tree(tmp_path, "new", legacy="usr")
    assert run(root, "--yes").returncode == 0
    r = run(root, "--yes", "--plugin")
    assert r.returncode == 0 and "--plugin: the pack's files in usr/extensions/python/ move into the plugin " \
        "usr/plugins/graph_workflow_engine/ (each is backed up first)" in r.stdout


def test_without_agent_zeros_python_it_stops_before_changing_anything_and_names_python(tmp_path):
    root = make_tree(tmp_path, "new", legacy="usr")
    write(root / "helpers" / "extension.py", "import simpleeval_is_not_here\n" + BASE)  # needs the framework's venv
    before = snapshot(root)
    env = dict(os.environ, GRAPH_ENGINE_INSTALL_PYTHON=sys.executable)
    r = subprocess.run(["bash", str(SCRIPT), "--a0-root", str(root), "--yes"], capture_output=True, text=True,
                       env=env, stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Agent-Zero's Python was not found (looked for /opt/venv-a0/bin/python" in r.stdout
    assert "No module named 'simpleeval_is_not_here'" in r.stdout
    assert "pass the Python that runs Agent-Zero with --python PATH; nothing was changed" in r.stdout
    assert snapshot(root) == before and not r.stderr


def test_the_trees_own_venv_is_agent_zeros_python(tmp_path):
    root = make_tree(tmp_path, "new")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(sys.executable)
    env = dict(os.environ, GRAPH_ENGINE_INSTALL_PYTHON=sys.executable)
    r = subprocess.run(["bash", str(SCRIPT), "--a0-root", str(root), "--yes"], capture_output=True, text=True,
                       env=env, stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"verify: with {root / '.venv' / 'bin' / 'python'}" in r.stdout


@pytest.mark.parametrize("legacy", [None, "usr"])
def test_a_rollback_never_raises_and_leaves_the_tree_exactly_as_it_was(tmp_path, legacy):
    root = make_tree(tmp_path, "new", legacy=legacy)
    hook = root / "usr/extensions/python/before_main_llm_call"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "mine.dot").write_text("digraph mine { start [shape=Mdiamond]; start -> nowhere }")  # disabled plan
    write(root / "helpers" / "extension.py", "raise RuntimeError('broken framework')\n")
    before = snapshot(root)
    r = run(root, "--yes")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "rolled back: the tree is as before this run" in r.stdout
    assert snapshot(root) == before  # no usr/graph_engine/ left behind either


def test_a_rollback_that_cannot_restore_a_file_names_it_and_goes_on(tmp_path, capsys):
    from graph_engine.tools import installer
    root = make_tree(tmp_path, "new", legacy="usr")
    manifest_ = {"installed": [{"path": "usr/extensions/python/before_main_llm_call/_15_htn_plan_selector.py"}],
                 "_run": {"backup": "usr/graph_engine/backups/gone", "created": [], "state_created": False,
                          "backed_up": ["usr/extensions/python/before_main_llm_call/_15_htn_plan_selector.py"]}}
    assert installer.rollback(root, manifest_, previous=None) is False
    out = capsys.readouterr().out
    assert out.startswith("rollback incomplete: could not restore usr/extensions/python/before_main_llm_call/"
                          "_15_htn_plan_selector.py from ") and "FileNotFoundError" in out


@pytest.mark.parametrize("legacy", [None, "usr"])
def test_uninstall_leaves_nothing_of_the_pack_but_the_backups_it_names(tmp_path, legacy):
    root = make_tree(tmp_path, "new", legacy=legacy)
    before = snapshot(root)
    assert run(root, "--yes").returncode == 0
    assert run(root, "--yes", "--plugin").returncode == 0  # a second run: a second backup folder
    r = run(root, "--uninstall", "--yes")
    assert r.returncode == 0, r.stdout
    assert snapshot(root, skip_state=True) == before
    left = sorted(p.relative_to(root).as_posix() for p in (root / "usr/graph_engine").rglob("*") if p.is_file()) \
        if (root / "usr/graph_engine").exists() else []
    named = r.stdout.split("kept: ", 1)[1].strip().split(", ") if "kept: " in r.stdout else []
    assert named, r.stdout  # the first run's and the --plugin run's backups of what they replaced
    assert left and all(any(f.startswith(n) for n in named) for f in left)
    assert not [f for f in left if "uninstalled" in f]


def test_a_fresh_install_and_uninstall_leave_the_tree_exactly_as_it_was(tmp_path):
    root = make_tree(tmp_path, "new")
    before = snapshot(root)
    assert run(root, "--yes").returncode == 0
    r = run(root, "--uninstall", "--yes")
    assert r.returncode == 0 and "nothing of the pack is left in" in r.stdout
    assert snapshot(root) == before


# ── install_all.sh ──────────────────────────────────────────────────────────

ALL = ROOT / "install_all.sh"


def run_all(root: Path, *args: str, tty: bool = False) -> tuple[int, str]:
    env = dict(os.environ, GRAPH_ENGINE_INSTALL_PYTHON=sys.executable)
    env.pop("NO_COLOR", None)
    cmd = ["bash", str(ALL), "--a0-root", str(root), *args]
    if not tty:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=120)
        return r.returncode, r.stdout + r.stderr
    import pty
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=120), b"".join(chunks).decode()


def test_install_all_checks_installs_and_is_safe_to_rerun(tmp_path):
    root = make_tree(tmp_path, "new", legacy="usr")
    before = snapshot(root)
    code, out = run_all(root, "--check-only")
    assert code == 1 and "[ ok ] Belief State Tracker is present" in out and "[ ok ] Org Kernel is present" in out
    assert "[warn] Graph Workflow Engine needs installing" in out and snapshot(root) == before
    assert "\x1b[" not in out  # plain when not on a terminal
    code, out = run_all(root, "--yes")
    assert code == 0 and "[ ok ] Graph Workflow Engine done" in out
    installed = snapshot(root)
    code, out = run_all(root, "--yes")
    assert code == 0 and "[ ok ] Graph Workflow Engine is installed and intact" in out and snapshot(root) == installed


def test_install_all_layer_selection_and_the_replaced_layer(tmp_path):
    root = make_tree(tmp_path, "old")
    code, out = run_all(root, "--layer", "HTN Plan Templates", "--check-only")
    assert code == 1 and "replaced by Graph Workflow Engine" in out and "Belief State Tracker" not in out
    code, out = run_all(root, "--layer", "nonsense")
    assert code == 2 and "no layer called 'nonsense'" in out
    (root / "python/extensions/before_main_llm_call/_12_org_dispatcher.py").unlink()
    code, out = run_all(root, "--layer", "org-kernel")
    assert code == 0 and "[warn] Org Kernel is not installed" in out


def test_install_all_colours_on_a_terminal(tmp_path):
    root = make_tree(tmp_path, "old")
    code, out = run_all(root, "--check-only", tty=True)
    assert code == 1 and "\x1b[32m[ ok ]\x1b[0m Belief State Tracker is present" in out


def test_the_runtime_never_imports_its_tools():
    """What Agent-Zero loads stands on its own: no module of the runtime package imports graph_engine.tools."""
    import ast
    for path in (ROOT / "extensions" / "graph_engine").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith(("tools", "graph_engine.tools")), path.name
                assert not (node.level and any(a.name == "tools" for a in node.names)), path.name


# ── one version ─────────────────────────────────────────────────────────────


def test_every_place_a_version_is_written_agrees(tmp_path):
    import tomllib
    from graph_engine import __version__
    from graph_engine.tools import cli
    version = __version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"]  # read from graph_engine.__version__, never typed twice
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "graph_engine.__version__"}
    library = json.loads((ROOT / "plan_library" / "htn_plan_library.json").read_text())
    assert library["_meta"]["version"] == version
    r = subprocess.run(["bash", str(SCRIPT), "--version"], capture_output=True, text=True)
    assert (r.returncode, r.stdout.strip()) == (0, f"install_graph_engine.sh {version}")
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    root = make_tree(tmp_path, "new", legacy="usr")
    r = run(root, "--yes", "--plugin")
    assert r.returncode == 0, r.stdout
    assert manifest(root)["version"] == version
    assert f"version: {version}" in (root / "usr/plugins/graph_workflow_engine/plugin.yaml").read_text()
    again = run(root, "--yes", "--plugin")
    assert again.returncode == 0 and "already installed: version " + version in again.stdout
    assert f"{version} differs from {version}" not in run(root, "--check", "--plugin").stdout


@pytest.mark.parametrize("flag, pip_works", [((), False), ((), True), (("--without-optional",), True)])
def test_a_missing_optional_package_is_installed_by_default_and_its_loss_said_when_it_cannot_be(
        tmp_path, monkeypatch, capsys, flag, pip_works):
    import graph_engine.tools.installer as inst
    root = make_tree(tmp_path, "old")
    real_verify, calls = inst.verify, []

    def verify(*args, **kwargs):
        ok, report = real_verify(*args, **kwargs)
        report["optional"]["wordllama"] = bool(calls) and pip_works  # absent until pip put it there
        return ok, report

    monkeypatch.setattr(inst, "verify", verify)
    monkeypatch.setattr(inst, "install_optional", lambda python, names=(): calls.append(names) or (0 if pip_works else 1))
    assert inst.main(["--a0-root", str(root), "--yes", "--python", sys.executable, *flag]) == 0
    out = capsys.readouterr().out
    assert calls == ([] if flag else [("wordllama",)])
    lost = [line for line in out.splitlines() if line.startswith("optional packages wordllama")]
    if flag:
        assert lost and "left out (--without-optional)" in lost[0] and "matching by meaning is off" in lost[0]
    elif pip_works:
        assert lost == []
    else:
        assert lost and "pip could not install them" in lost[0] and "'wordllama>=0.4,<0.5'" in lost[0]
