"""The pack as an Agent-Zero v1.x plugin in the real loop (`make real-loop`): installed by Agent-Zero's own
installer code from the ZIP of `make plugin` and from a Git URL, a bug fix run by Agent-Zero's own message loop,
then deleted through Agent-Zero's own uninstall; the tree is as before, the linear selector byte for byte."""

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from a0real import A0Copy
from test_real_loop import BUG_REPORT, FIXED, fix, isolate, project, respond, run_tests, types, verdicts

from graph_engine.tools import installer

PLUGIN = "graph_workflow_engine"
LEGACY = "usr/extensions/python/before_main_llm_call/_15_htn_plan_selector.py"
LEGACY_SELECTOR = ("from helpers.extension import Extension\n\n\nclass HTNPlanSelector(Extension):\n"
                   "    async def execute(self, loop_data=None, **kwargs):\n        pass  # the linear selector\n")
# Agent-Zero's own code: helpers.plugins and the Plugins dialog's installer (plugins/_plugin_installer)
PLUGINS_API = """
import json, os, sys
root, action, arg = sys.argv[1:4]
os.chdir(root)
sys.path.insert(0, root)
from plugins._plugin_installer.helpers.install import install_from_git, install_from_zip
from helpers import plugins
if action == "zip":
    out = install_from_zip(arg, original_filename=os.path.basename(arg))
elif action == "git":
    out = install_from_git(arg)
elif action == "list":  # what the Plugins list shows of it
    item = next(p for p in plugins.get_enhanced_plugins_list() if p.name == arg)
    out = item.model_dump(include={"display_name", "version", "has_config_screen", "has_readme", "has_license",
                                   "has_execute_script", "toggle_state", "per_project_config", "per_agent_config"})
elif action == "toggle":  # the Plugins list's switch (for everyone)
    plugins.toggle_plugin("graph_workflow_engine", arg == "on")
    out = {"enabled": "graph_workflow_engine" in plugins.get_enabled_plugins(None)}
elif action == "update":
    from plugins._plugin_installer.helpers.install import update_from_git
    out = update_from_git(arg)
elif action == "settings":  # what the plugin's settings page saves (for everyone: no project, no profile)
    plugins.save_plugin_config("graph_workflow_engine", "", "", json.loads(arg))
    out = plugins.get_plugin_config("graph_workflow_engine")
else:
    plugins.uninstall_plugin(arg)
    out = {"deleted": arg, "listed": plugins.get_plugins_list()}
print(json.dumps(out))
"""
# what the run itself leaves (chats, the project, audit logs, logs, temporary files, the .env Agent-Zero writes)
RUN_ARTIFACTS = ("usr/chats/", "usr/workdir/", "usr/graph_engine/runs/", "logs/", "tmp/", "usr/.env")


def a0_plugins(tree: A0Copy, action: str, arg: str) -> dict:
    done = subprocess.run([str(tree.python), "-B", "-c", PLUGINS_API, str(tree.root), action, arg],
                          capture_output=True, text=True, cwd=tree.root, timeout=600)
    assert done.returncode == 0, f"{action} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def v1_tree(source: Path, tmp_path: Path) -> A0Copy:
    tree = A0Copy.fresh(source, tmp_path)
    if tree.layout != "new":
        pytest.skip("plugins are Agent-Zero v1.x")
    return tree


def install_zip(tree: A0Copy, tmp_path: Path) -> dict:
    """The ZIP of `make plugin`, uploaded to the Plugins dialog (Agent-Zero deletes the upload afterwards)."""
    upload = tmp_path / "upload.zip"
    shutil.copy(installer.build_zip(tmp_path / "dist"), upload)
    done = a0_plugins(tree, "zip", str(upload))
    assert done["success"], done
    return done


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and "__pycache__" not in path.parts and not rel.startswith(RUN_ARTIFACTS):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def git_url(tmp_path: Path) -> str:
    """A clone of this repository with this checkout's plugin files committed: what a Git URL points at."""
    return f"file://{git_clone(tmp_path)}"


def git_clone(tmp_path: Path) -> Path:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--depth", "1", f"file://{installer.SRC}", str(clone)], check=True)
    for name, data in installer.plugin_files().items():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_bytes(data)
    subprocess.run(["git", "-C", str(clone), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet",
                    "--allow-empty", "-m", "working tree"], check=True)
    return clone


@pytest.mark.parametrize("route", ["zip", "git"])
def test_installed_from_the_plugins_dialog_it_fixes_a_bug_and_deletes_cleanly(a0_source, tmp_path, route):
    tree = v1_tree(a0_source, tmp_path)
    if route == "git" and not (installer.SRC / ".git").exists():
        pytest.skip("not a git checkout")
    legacy = tree.root / LEGACY
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text(LEGACY_SELECTOR)
    before = snapshot(tree.root)
    if route == "zip":
        done = install_zip(tree, tmp_path)
    else:
        done = a0_plugins(tree, "git", git_url(tmp_path))
    assert done["success"] and done["plugin_name"] == PLUGIN and done["path"] == f"usr/plugins/{PLUGIN}"
    assert not legacy.exists()

    p = project(tree)
    replies = [run_tests(p, "Reproduce"), isolate(p), fix(p), run_tests(p), run_tests(p, "Regressions"),
               respond("Fixed: divide() returns 0.0 for a zero divisor; the tests pass.")]
    run = tree.run([BUG_REPORT.format(p=p)], replies)
    assert run.overrun == 0 and len(run.calls) == 6
    assert "[WORKFLOW: Bug Fix Workflow] step 1 of 5" in run.last_user[0]
    events = tree.audit(run.chat_id)
    assert verdicts(events, "fix") == ["success"] and types(events)[-1] == "plan_completed"
    assert (p / "calc.py").read_text() == FIXED

    done = a0_plugins(tree, "delete", PLUGIN)
    assert PLUGIN not in done["listed"]
    assert legacy.read_text() == LEGACY_SELECTOR  # byte for byte
    assert snapshot(tree.root) == before


@pytest.mark.parametrize("saved", [True, False])
def test_the_settings_page_changes_where_plans_are_read_from(a0_source, tmp_path, saved):
    tree = v1_tree(a0_source, tmp_path)
    install_zip(tree, tmp_path)
    shipped = json.loads((installer.SRC / "plan_library" / "htn_plan_library.json").read_text())
    plan = dict(shipped["plans"]["bugfix_workflow"], name="Calc Repair", domains=[],
                triggers=["calc repair"], strong_triggers=["do the calc repair"])
    library = tmp_path / "team_plans" / "htn_plan_library.json"
    library.parent.mkdir()
    library.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"calc_repair": plan}}))
    if saved:
        config = a0_plugins(tree, "settings", json.dumps({"library_path": str(library)}))
        assert config["library_path"] == str(library)

    p = project(tree)
    replies = [run_tests(p, "Reproduce"), isolate(p), fix(p), run_tests(p), run_tests(p, "Regressions"),
               respond("Repaired.")]
    run = tree.run([f"please do the calc repair in {p}/calc.py"], replies)
    if not saved:  # the plugin's own library has no such plan (its bug-fix plan may start: the message asks for one)
        assert "Calc Repair" not in run.last_user[0]
        return
    assert "[WORKFLOW: Calc Repair] step 1 of 5" in run.last_user[0]  # the plan from the saved library
    assert types(tree.audit(run.chat_id))[-1] == "plan_completed"


def test_an_update_from_the_plugins_list_keeps_the_users_plans_and_settings(a0_source, tmp_path):
    tree = v1_tree(a0_source, tmp_path)
    if not (installer.SRC / ".git").exists():
        pytest.skip("not a git checkout")
    legacy = tree.root / LEGACY
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text(LEGACY_SELECTOR)
    shipped = json.loads((installer.SRC / "plan_library" / "htn_plan_library.json").read_text())
    mine = dict(shipped["plans"]["bugfix_workflow"], name="Calc Repair", domains=[],
                triggers=["calc repair"], strong_triggers=["do the calc repair"])
    (legacy.parent / "htn_plan_library.json").write_text(json.dumps({"plans": {"calc_repair": mine}}))
    clone = git_clone(tmp_path)
    assert a0_plugins(tree, "git", f"file://{clone}")["success"]
    plugin = tree.root / "usr" / "plugins" / PLUGIN
    library = plugin / "extensions/python/before_main_llm_call/htn_plan_library.json"
    assert json.loads(library.read_text())["plans"]["calc_repair"] == mine  # carried from the linear library
    a0_plugins(tree, "settings", json.dumps({"picture": "off"}))
    (clone / "docs" / "plan-authoring.md").write_text("A newer version.\n")  # the repository moves on
    subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet",
                    "-am", "newer"], check=True)
    done = a0_plugins(tree, "update", PLUGIN)
    assert done["success"] and (plugin / "docs" / "plan-authoring.md").read_text() == "A newer version.\n"
    assert json.loads(library.read_text())["plans"]["calc_repair"] == mine
    assert json.loads((plugin / "config.json").read_text())["picture"] == "off"
    p = project(tree)
    run = tree.run([f"please do the calc repair in {p}/calc.py"], [respond("Not now.")])
    assert "[WORKFLOW: Calc Repair] step 1 of 5" in run.last_user[0]
    a0_plugins(tree, "delete", PLUGIN)
    assert legacy.read_text() == LEGACY_SELECTOR


def test_turned_off_in_the_plugins_list_nothing_runs_and_turned_on_the_saved_run_goes_on(a0_source, tmp_path):
    tree = v1_tree(a0_source, tmp_path)
    install_zip(tree, tmp_path)
    p = project(tree)
    first = tree.run([BUG_REPORT.format(p=p)], [run_tests(p, "Reproduce"), respond("Reproduced; more later.")])
    saved = tree.state(first.chat_id)
    assert saved["status"] == "active" and saved["current_node"] == "isolate"

    assert a0_plugins(tree, "toggle", "off") == {"enabled": False}
    off = tree.run([{"load": first.chat_id}, "what is 2 + 2?"], [respond("4")])
    assert "[WORKFLOW" not in off.last_user[0]  # no hook of the engine ran
    assert tree.state(off.chat_id) == saved

    assert a0_plugins(tree, "toggle", "on") == {"enabled": True}
    on = tree.run([{"load": first.chat_id}, "continue"],
                  [isolate(p), fix(p), run_tests(p), run_tests(p, "Regressions"), respond("Fixed.")])
    assert "Current step: Isolate the root cause" in on.last_user[0]  # where it was
    events = tree.audit(on.chat_id)
    assert types(events)[-1] == "plan_completed" and len({e.get("run_id") for e in events}) == 1
    assert (p / "calc.py").read_text() == FIXED


PROJECT_SETTINGS = """
import json, os, sys, types
root, plugin = sys.argv[1:3]
os.chdir(root)
sys.path.insert(0, root)
from helpers import plugins, projects
sys.path.insert(0, os.path.join(plugin, "extensions"))
from graph_engine.boundary import settings
class Agent:  # what settings.read uses of Agent-Zero's agent: its context (the chat's project) and profile
    pass
agent = Agent()
agent.context = types.SimpleNamespace(get_data=lambda key: "shop" if key == projects.CONTEXT_DATA_KEY_PROJECT else None)
agent.config = types.SimpleNamespace(profile="agent0")
outside = Agent()
outside.context = types.SimpleNamespace(get_data=lambda key: None)
outside.config = agent.config
print(json.dumps({"in": settings.read(agent).project_library, "out": settings.read(outside).project_library,
                  "folder": projects.get_project_folder("shop")}))
"""


def test_a_projects_plan_folder_through_agent_zeros_own_project_and_config_helpers(a0_source, tmp_path):
    tree = v1_tree(a0_source, tmp_path)
    install_zip(tree, tmp_path)
    shop = tree.root / "usr" / "projects" / "shop"
    (shop / ".a0proj").mkdir(parents=True)
    (shop / "plans").mkdir()
    (shop / "plans" / "htn_plan_library.json").write_text('{"plans": {}}')
    # the project's own settings for the agent's profile (v1.7 reads a project's config for an agent with a
    # profile only there, not from .a0proj/plugins/)
    config = shop / ".a0proj" / "agents" / "agent0" / "plugins" / PLUGIN / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"project_plans_folder": "plans"}))
    done = subprocess.run([str(tree.python), "-B", "-c", PROJECT_SETTINGS, str(tree.root),
                           str(tree.root / "usr" / "plugins" / PLUGIN)],
                          capture_output=True, text=True, cwd=tree.root, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(found["folder"]) == shop
    assert found["in"] == str(shop / "plans" / "htn_plan_library.json") and found["out"] == ""


def test_the_plugins_list_shows_its_settings_page_readme_license_and_runs_execute(a0_source, tmp_path):
    tree = v1_tree(a0_source, tmp_path)
    install_zip(tree, tmp_path)
    from graph_engine import __version__
    assert a0_plugins(tree, "list", PLUGIN) == {
        "display_name": "Graph Workflow Engine", "version": __version__, "has_config_screen": True,
        "has_readme": True, "has_license": True, "has_execute_script": True, "toggle_state": "enabled",
        "per_project_config": True, "per_agent_config": True}
    plugin = tree.root / "usr" / "plugins" / PLUGIN  # "Execute": Agent-Zero's Python, in the plugin folder
    done = subprocess.run([str(tree.python), "execute.py"], capture_output=True, text=True, cwd=plugin, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "PASS"  # the self-test, through the plugin's own files
    shell = subprocess.run(["bash", str(installer.SRC / "install_graph_engine.sh"), "--a0-root", str(tree.root),
                            "--python", str(tree.python), "--self-test"], capture_output=True, text=True,
                           timeout=900)  # the shell installer's --self-test finds the plugin's package too
    assert shell.returncode == 0 and shell.stdout.strip().splitlines()[-1] == "PASS", shell.stdout + shell.stderr
