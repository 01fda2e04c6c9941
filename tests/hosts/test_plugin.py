"""The repository as an Agent-Zero v1.x plugin: its metadata, and its settings read through the plugin config."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from scenario import IDLE

from graph_engine import __version__

from graph_engine.boundary import settings
from graph_engine.tools import dagre
from graph_engine.tools.plugins_dialog import flat_yaml
from graph_engine.tools.standin import ROOT, Session, install_plugin_helpers

PLUGIN = "graph_workflow_engine"


def plugin_yaml() -> dict:
    return flat_yaml((ROOT / "plugin.yaml").read_text())


def test_plugin_yaml_names_the_plugin_and_carries_the_one_version():
    meta = plugin_yaml()
    assert meta["name"] == PLUGIN and re.fullmatch(r"[a-z0-9_]+", meta["name"])
    assert meta["version"] == __version__
    assert meta["title"] and meta["description"]
    assert meta["per_project_config"] is True and meta["per_agent_config"] is True
    for name in ("hooks.py", "execute.py", "default_config.yaml", "webui/config.html", "LICENSE", "README.md"):
        assert (ROOT / name).is_file(), name


def test_default_config_holds_every_setting_with_the_engines_default():
    assert flat_yaml((ROOT / "default_config.yaml").read_text()) == \
        {key: default for key, (_env, default) in settings.FIELDS.items()}
    page = (ROOT / "webui" / "config.html").read_text()
    for key, (env, _default) in settings.FIELDS.items():
        assert f"config.{key}" in page and env in page, key


# ── settings through Agent-Zero's plugin config ─────────────────────────────

SHOP_PLAN_MESSAGE = "please ship the shop release now"


def shop_library(folder: Path) -> Path:
    """A library with one plan of its own: the bug-fix plan renamed, started by 'ship the shop release'."""
    shipped = json.loads((ROOT / "plan_library" / "htn_plan_library.json").read_text())
    plan = dict(shipped["plans"]["bugfix_workflow"], name="Shop Release", domains=[],
                triggers=["shop release"], strong_triggers=["ship the shop release"])
    path = folder / "htn_plan_library.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"shop_release": plan}}))
    return path


@pytest.fixture
def a0(tmp_path):
    """An Agent-Zero tree with the plugin installed (its default_config.yaml) and a project 'shop'."""
    root = tmp_path / "a0"
    plugin = root / "usr" / "plugins" / PLUGIN
    plugin.mkdir(parents=True)
    shutil.copy(ROOT / "default_config.yaml", plugin / "default_config.yaml")
    (root / "usr" / "projects" / "shop" / ".a0proj").mkdir(parents=True)
    return root


def started(root: Path, message: str, project: str | None = None, chat: str = "") -> Session:
    s = Session()
    if chat:
        s.agent.context.id = chat
    install_plugin_helpers(root)
    if project:
        s.agent.context.data["project"] = project
    s.user(message)
    s.run_pass(IDLE)
    return s


def test_a_projects_plan_folder_is_read_while_the_chat_is_in_that_project(a0):
    shop_library(a0 / "usr" / "projects" / "shop" / "graph_plans")
    assert started(a0, SHOP_PLAN_MESSAGE, project="shop").state["plan_id"] == "shop_release"
    assert started(a0, SHOP_PLAN_MESSAGE).state is None  # outside the project: the plugin's library
    assert started(a0, "fix the bug in /tmp/test.py").state["plan_id"] == "bugfix_workflow"


@pytest.mark.parametrize("fault", ["folder", "fifo", "unreadable"])
def test_a_projects_library_that_cannot_be_read_is_told_to_each_chat_once(a0, fault):
    folder = a0 / "usr" / "projects" / "shop" / "graph_plans"
    folder.mkdir(parents=True)
    library = folder / "htn_plan_library.json"
    if fault == "folder":
        library.mkdir()
    elif fault == "fifo":
        os.mkfifo(library)
    else:
        shop_library(folder)
        library.chmod(0)
        if os.access(library, os.R_OK):
            pytest.skip("this user reads any file (root): an unreadable file cannot be made")
    chats = [started(a0, "fix the bug in /tmp/test.py", project="shop", chat=f"chat{i}") for i in range(2)]
    for s in chats:
        assert s.state["plan_id"] == "bugfix_workflow"  # the global library: the chat goes on
        s.user("thanks")
        s.run_pass(IDLE)
        said = [t for t in s.log.texts("warning") if "project's plan library" in t]
        assert len(said) == 1, s.log.texts("warning")
        assert str(library) in said[0] and "uses the global library" in said[0]


def test_a_project_without_a_library_is_no_warning(a0):
    s = started(a0, "fix the bug in /tmp/test.py", project="shop")
    assert not [t for t in s.log.texts("warning") if "project's plan library" in t]


def test_the_settings_page_moves_the_project_folder_and_the_library(a0):
    shop_library(a0 / "usr" / "projects" / "shop" / "plans")
    saved = a0 / "usr" / "plugins" / PLUGIN / "config.json"  # what the settings page saves for everyone
    saved.write_text(json.dumps({"project_plans_folder": "plans"}))
    assert started(a0, SHOP_PLAN_MESSAGE, project="shop").state["plan_id"] == "shop_release"
    other = shop_library(a0 / "elsewhere")
    project = a0 / "usr" / "projects" / "shop" / ".a0proj" / "plugins" / PLUGIN / "config.json"
    project.parent.mkdir(parents=True)  # the project's own settings: only the library path
    project.write_text(json.dumps({"library_path": str(other), "project_plans_folder": ""}))
    assert started(a0, SHOP_PLAN_MESSAGE, project="shop").state["plan_id"] == "shop_release"
    assert started(a0, SHOP_PLAN_MESSAGE).state is None  # the other chats keep the global setting
    saved.write_text(json.dumps({"library_path": str(other)}))
    assert started(a0, SHOP_PLAN_MESSAGE).state["plan_id"] == "shop_release"


def test_environment_variables_win_over_the_saved_settings(a0, monkeypatch, tmp_path):
    other = shop_library(tmp_path / "elsewhere")
    (a0 / "usr" / "plugins" / PLUGIN / "config.json").write_text(json.dumps({"library_path": str(other)}))
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(ROOT / "plan_library" / "htn_plan_library.json"))
    assert started(a0, SHOP_PLAN_MESSAGE).state is None
    assert started(a0, "fix the bug in /tmp/test.py").state["plan_id"] == "bugfix_workflow"


def test_the_card_setting_turns_the_card_off(a0):
    def cards(s: Session) -> list:
        return [e for e in s.log.entries if e["heading"].startswith("Workflow")]
    assert cards(started(a0, "fix the bug in /tmp/test.py"))
    (a0 / "usr" / "plugins" / PLUGIN / "config.json").write_text(json.dumps({"card": False}))
    s = started(a0, "fix the bug in /tmp/test.py")
    assert s.state["plan_id"] == "bugfix_workflow" and not cards(s)


def test_a_bad_saved_value_is_one_warning_and_its_default(a0):
    (a0 / "usr" / "plugins" / PLUGIN / "config.json").write_text(json.dumps({"picture": "svg", "max_plans": 0}))
    s = started(a0, "fix the bug in /tmp/test.py")
    assert s.state["plan_id"] == "bugfix_workflow"
    warnings = s.log.texts("warning")
    assert "[HTN] plugin setting 'picture' is 'svg': expected one of auto, mermaid, off; using 'auto' until it " \
           "is fixed" in warnings
    assert any(w.startswith("[HTN] plugin setting 'max_plans' is 0") for w in warnings)
    s.run_pass(IDLE)
    assert len([w for w in s.log.texts("warning") if "plugin setting" in w]) == 2  # once each


def test_the_picture_and_plan_limit_settings_reach_the_engine(a0, monkeypatch):
    (a0 / "usr" / "plugins" / PLUGIN / "config.json").write_text(json.dumps({"picture": "off", "max_plans": 3}))
    s = started(a0, "fix the bug in /tmp/test.py")
    from graph_engine.hosts.agent_zero import adapter
    rt = next(iter(adapter._runtimes.values()))
    assert len(rt.library.current) == 3 and any("only the first 3" in w for w in s.log.texts("warning"))
    cfg = settings.read(s.agent)
    assert (cfg.picture, cfg.max_plans) == ("off", 3)
    monkeypatch.setenv("GRAPH_ENGINE_PICTURE", "mermaid")
    assert settings.read(s.agent).picture == "mermaid"


def test_without_agent_zeros_plugin_helpers_the_defaults_apply():
    s = Session()
    assert settings.read(s.agent) == settings.DEFAULTS


# ── installed through the Plugins dialog (the stand-in keeps v1.7's installer rules) ─

import subprocess  # noqa: E402
import sys  # noqa: E402

from test_install import LEGACY_SELECTOR, MY_LINEAR, make_tree, manifest, run, snapshot  # noqa: E402

from graph_engine.tools import installer  # noqa: E402
from graph_engine.tools.plugins_dialog import (install_plugin_git, install_plugin_zip, run_plugin_hook,  # noqa: E402
                                               uninstall_plugin)
from graph_engine.tools.standin import Reply, load_extension_class, terminal  # noqa: E402

LEGACY = "usr/extensions/python/before_main_llm_call/_15_htn_plan_selector.py"


@pytest.fixture
def own_modules():
    """hooks.py imports the plugin folder's own copy of graph_engine (as it must inside Agent-Zero): the test
    process gets the repository's back afterwards."""
    def ours():
        return {n: m for n, m in sys.modules.items() if n == "graph_engine" or n.startswith("graph_engine.")}
    saved = ours()
    yield
    for name in ours():
        del sys.modules[name]
    sys.modules.update(saved)


@pytest.fixture
def plugin_zip(tmp_path_factory):
    return installer.build_zip(tmp_path_factory.mktemp("dist"))


def legacy_tree(tmp_path: Path) -> Path:
    """A v1.x tree whose usr/extensions holds a linear selector with a plan of the user's in its library."""
    root = make_tree(tmp_path, "new", legacy="usr")
    (root / "usr" / "plugins").mkdir(exist_ok=True)  # a v1.x tree has it
    library = root / "usr/extensions/python/before_main_llm_call/htn_plan_library.json"
    data = json.loads(library.read_text())
    data["plans"]["my_linear"] = MY_LINEAR
    library.write_text(json.dumps(data))
    return root


def test_make_plugin_builds_the_zip_of_what_runs_inside_agent_zero_and_prints_its_path(tmp_path):
    r = subprocess.run(["make", "-s", "plugin", "WEBUI_LIB=", f"PYTHON={sys.executable}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)  # (WEBUI_LIB=: the layout library as it is)
    path = Path(r.stdout.strip())
    assert r.returncode == 0 and path == ROOT / "dist" / f"{PLUGIN}-{__version__}.zip" and path.is_file()
    import zipfile
    names = zipfile.ZipFile(path).namelist()
    assert all(n.startswith(f"{PLUGIN}/") for n in names)
    tops = {n.split("/")[1] for n in names}
    assert tops == {"plugin.yaml", "hooks.py", "execute.py", "default_config.yaml", "LICENSE", "README.md", "webui",
                    "extensions", "plan_library", "api", "package.json", "package-lock.json", "tools", "prompts"}
    assert f"{PLUGIN}/api/workflow_control.py" in names  # the component's buttons call it
    assert {f"{PLUGIN}/tools/graph_workflow.py", f"{PLUGIN}/prompts/agent.system.tool.graph_workflow.md"} <= set(names)
    webui = {n.split("/", 1)[1] for n in names if "/extensions/webui/" in n}
    assert {"extensions/webui/get_message_handler/graph-workflow-handler.js",
            "extensions/webui/chat-input-start/graph-workflow-strip.html",
            "extensions/webui/graph_workflow_engine/component.js"} <= webui
    assert (f"{PLUGIN}/{dagre.TARGET.as_posix()}" in names) == (ROOT / dagre.TARGET).is_file()  # built: carried
    assert not [n for n in names if "__pycache__" in n or "/tests/" in n or "/fixtures/" in n]
    assert installer.build_zip(tmp_path).read_bytes() == path.read_bytes()  # the same sources, the same bytes


def test_the_zip_installs_takes_over_the_linear_selector_runs_the_users_plan_and_deletes_cleanly(
        tmp_path, plugin_zip, own_modules):
    root = legacy_tree(tmp_path)
    before = snapshot(root)
    assert install_plugin_zip(root, plugin_zip) == PLUGIN
    plugin = root / "usr" / "plugins" / PLUGIN
    assert not (root / LEGACY).exists()  # it would outrank the plugin's selector of the same name
    record = manifest(root)
    assert record["form"] == "dialog" and record["plugin"] == f"usr/plugins/{PLUGIN}"
    backup = root / next(o["backup"] for o in record["originals"] if o["path"] == LEGACY)
    assert backup.read_text() == LEGACY_SELECTOR
    library = json.loads((plugin / "extensions/python/before_main_llm_call/htn_plan_library.json").read_text())
    assert library["plans"]["my_linear"] == MY_LINEAR and "bugfix_workflow" in library["plans"]

    s = Session(companion=False, selector=False)  # the plugin's own files, loaded as Agent-Zero loads them
    s.prompts_after = [load_extension_class(plugin / "extensions/python/message_loop_prompts_after/"
                                                     "_75_graph_workflow_context.py")(s.agent)]
    s.before_main = [load_extension_class(plugin / "extensions/python/before_main_llm_call/"
                                                   "_15_htn_plan_selector.py")(s.agent)]
    s.user("ship it now please")
    s.run_pass(IDLE)
    assert s.state["plan_id"] == "my_linear"
    s.run_pass(Reply(code="./deploy.sh", output=terminal("deployed")))
    s.run_pass(IDLE)
    assert s.agent._htn_last_run["events"][-1]["type"] == "plan_completed"

    uninstall_plugin(root, PLUGIN)
    assert (root / LEGACY).read_text() == LEGACY_SELECTOR  # byte for byte
    assert snapshot(root) == before  # the backup held nothing the tree does not have again: it is gone too


def test_a_git_url_of_a_clone_installs_the_same_way(tmp_path, own_modules):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--depth", "1", f"file://{ROOT}", str(clone)], check=True)
    for name in installer.plugin_files():  # this checkout's files, committed or not
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_bytes((ROOT / name).read_bytes())
    subprocess.run(["git", "-C", str(clone), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet",
                    "--allow-empty", "-m", "working tree"], check=True)
    root = legacy_tree(tmp_path)
    before = snapshot(root)
    assert install_plugin_git(root, f"file://{clone}") == PLUGIN
    plugin = root / "usr" / "plugins" / PLUGIN
    assert (plugin / ".git").is_dir() and (plugin / "plugin.yaml").is_file() and not (root / LEGACY).exists()
    assert run(root, "--check").stdout.startswith(f"installed: version {__version__} as the Agent-Zero plugin")
    uninstall_plugin(root, PLUGIN)
    assert snapshot(root) == before


def test_a_failed_install_leaves_the_tree_as_it_was_with_one_clear_line(tmp_path, plugin_zip, own_modules):
    root = legacy_tree(tmp_path)
    assert run(root, "--yes").returncode == 0  # the shell installer's files in usr/extensions outrank any plugin
    before = snapshot(root)
    with pytest.raises(RuntimeError) as failed:
        install_plugin_zip(root, plugin_zip)
    assert str(failed.value).startswith("Graph Workflow Engine install: the pack is already installed by "
                                        "install_graph_engine.sh into usr/extensions/python/")
    assert "install_graph_engine.sh --uninstall --yes` first" in str(failed.value)
    assert snapshot(root) == before


def test_a_plugin_that_does_not_load_is_rolled_back_by_its_own_install(tmp_path, plugin_zip, own_modules):
    root = legacy_tree(tmp_path)
    (root / "helpers" / "extension.py").write_text("raise RuntimeError('broken framework')\n")
    before = snapshot(root)
    with pytest.raises(RuntimeError, match="did not load"):
        install_plugin_zip(root, plugin_zip)
    assert snapshot(root) == before


def test_the_shell_installer_sees_a_dialog_install_and_leaves_it_to_the_dialog(tmp_path, plugin_zip, own_modules):
    root = legacy_tree(tmp_path)
    install_plugin_zip(root, plugin_zip)
    installed = snapshot(root)
    for args in (("--yes",), ("--yes", "--plugin"), ("--uninstall", "--yes")):
        r = run(root, *args)
        assert r.returncode == 2 and "Plugins list" in r.stdout and "nothing was changed" in r.stdout, args
    assert snapshot(root) == installed
    check = run(root, "--check")
    assert check.returncode == 0 and "(Plugins dialog), every file intact" in check.stdout


def test_an_update_keeps_the_users_library_and_settings(tmp_path, plugin_zip, own_modules):
    root = legacy_tree(tmp_path)
    install_plugin_zip(root, plugin_zip)
    plugin = root / "usr" / "plugins" / PLUGIN
    (plugin / "config.json").write_text('{"card": false}')
    library = plugin / "extensions/python/before_main_llm_call/htn_plan_library.json"
    kept = Path(run_plugin_hook(plugin, "pre_update"))
    assert (kept / f"usr/plugins/{PLUGIN}/config.json").read_text() == '{"card": false}'
    assert (kept / library.relative_to(root)).read_bytes() == library.read_bytes()
    run_plugin_hook(plugin, "install")  # Agent-Zero calls install() again after pulling the update
    assert json.loads(library.read_text())["plans"]["my_linear"] == MY_LINEAR
    uninstall_plugin(root, PLUGIN)
    assert (root / LEGACY).read_text() == LEGACY_SELECTOR


def test_deleting_a_plugin_the_shell_installer_wrote_clears_its_record(tmp_path, own_modules):
    root = legacy_tree(tmp_path)
    before = snapshot(root)
    assert run(root, "--yes", "--plugin").returncode == 0
    uninstall_plugin(root, PLUGIN)  # Agent-Zero's delete: uninstall() of the plugin's hooks.py, then the folder
    assert not (root / "usr/graph_engine/install_manifest.json").exists()
    assert snapshot(root, skip_state=True) == before


def test_deleting_keeps_a_plan_added_to_the_plugins_library_in_a_named_backup(tmp_path, plugin_zip, own_modules,
                                                                             capsys):
    root = legacy_tree(tmp_path)
    install_plugin_zip(root, plugin_zip)
    library = root / f"usr/plugins/{PLUGIN}/extensions/python/before_main_llm_call/htn_plan_library.json"
    data = json.loads(library.read_text())
    data["plans"]["my_later"] = dict(MY_LINEAR, name="My Later", triggers=["later please"])
    library.write_text(json.dumps(data))
    capsys.readouterr()
    uninstall_plugin(root, PLUGIN)
    out = capsys.readouterr().out
    assert "it holds your plans my_later, which the restored library does not have" in out
    kept = out.split("kept: ", 1)[1].split(", ")[0].strip()
    copy = root / kept / library.relative_to(root)
    assert json.loads(copy.read_text())["plans"]["my_later"]["name"] == "My Later"
    assert (root / LEGACY).read_text() == LEGACY_SELECTOR


# ── on and off are Agent-Zero's ─────────────────────────────────────────────

from scenario import FixtureModel, message_for  # noqa: E402

from graph_engine.tools.standin import COMPANION, SELECTOR, cmd  # noqa: E402


def plugin_off(s: Session) -> None:
    """Agent-Zero with the plugin turned off for the agent's project or profile: none of its extensions load."""
    s.prompts_after, s.before_main = [], []


def plugin_on(s: Session) -> None:
    """Turned on again: Agent-Zero clears its extension cache and runs the files afresh."""
    s.prompts_after = [load_extension_class(COMPANION)(s.agent)]
    s.before_main = [load_extension_class(SELECTOR)(s.agent)]


@pytest.mark.parametrize("restart_while_off", [False, True])
def test_turned_off_no_hook_runs_and_turned_on_the_saved_run_goes_on(restart_while_off):
    s = Session()
    s.user(message_for("bugfix_workflow"))
    s.run_pass(IDLE)
    model = FixtureModel("bugfix_workflow")
    for _ in range(3):
        s.run_pass(model)
    saved = json.loads(json.dumps(s.state))
    log_size = len(s.log.entries)
    plugin_off(s)
    s.run_pass(Reply(final="Working on it."))
    s.user("what time is it?")
    s.run_pass(cmd("date", "Tue Nov 24 02:00:00 UTC 2026"))
    s.run_pass(Reply(final="It is 02:00 UTC."))
    assert s.state == saved and len(s.log.entries) == log_size  # nothing of the engine ran
    assert all(not r.prompt_extras for r in s.records[-3:])  # and no call was shown a step
    if restart_while_off:
        s = s.restarted()
    plugin_on(s)
    s.user("continue")
    for _ in range(30):  # after a restart the state is read back from the chat's data by the first hook call
        s.run_pass(model)
        if s.state is None or s.state["status"] != "active":
            break
    last = s.agent._htn_last_run
    assert last["run_id"] == saved["run_id"] and last["events"][-1]["type"] == "plan_completed"
    assert last["path"][:len(saved["path"])] == saved["path"]  # it went on from where it was
    resumed = [e for e in last["events"] if e["type"] == "run_resumed"]
    assert len(resumed) == (1 if restart_while_off else 0)


def test_a_zip_of_what_the_shell_installer_wrote_installs_through_the_dialog(tmp_path, own_modules):
    import zipfile
    first = legacy_tree(tmp_path / "first")
    assert run(first, "--yes", "--plugin").returncode == 0
    archive = tmp_path / "from_shell.zip"
    folder = first / "usr" / "plugins" / PLUGIN
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                z.write(path, f"{PLUGIN}/{path.relative_to(folder).as_posix()}")
    second = legacy_tree(tmp_path / "second")
    assert install_plugin_zip(second, archive) == PLUGIN
    assert manifest(second)["form"] == "dialog" and not (second / LEGACY).exists()


def test_a_saved_change_is_read_off_the_loop_and_applies_from_the_next_pass(a0, monkeypatch):
    """Agent-Zero's plugin config looks for the file in every scope (about 0.1 ms): the settings kept for an
    agent are re-read by the engine's background thread, not in a pass, once they are older than a second."""
    import threading

    s = started(a0, "fix the bug in /tmp/test.py")  # an agent's first read is made in its first pass
    readers = []
    real = settings.plugin_config
    monkeypatch.setattr(settings, "plugin_config",
                        lambda agent: (readers.append(threading.current_thread().name), real(agent))[1])
    monkeypatch.setattr(settings, "RECHECK_SECONDS", 0.0)
    (a0 / "usr" / "plugins" / PLUGIN / "config.json").write_text(json.dumps({"picture": "off"}))
    assert settings._RECENT[s.agent][1].picture == "auto"
    s.run_pass(IDLE)  # uses the settings kept; the stand-in waits for the background thread after a pass
    assert readers == ["graph-engine display"]
    assert settings._RECENT[s.agent][1].picture == "off"  # what the next pass uses


def test_settings_that_cannot_be_read_are_one_warning_and_the_defaults(a0, monkeypatch):
    s = Session()
    install_plugin_helpers(a0)
    monkeypatch.setattr(settings, "project_folder", lambda agent: (_ for _ in ()).throw(OSError("disk gone")))
    s.user("fix the bug in /tmp/test.py")
    s.run_pass(IDLE)
    assert s.state["plan_id"] == "bugfix_workflow"
    assert "[HTN] The settings of graph_workflow_engine could not be read (OSError: disk gone); the defaults " \
           "apply" in s.log.texts("warning")


def test_a_zip_of_the_whole_repository_installs_through_the_dialog(tmp_path, own_modules):
    """What a code host's "Download ZIP" gives: one folder holding the repository, plugin.yaml at its top."""
    import zipfile
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    archive = tmp_path / "agent-zero-graph-engine-main.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name in listed.stdout.split():
            if (ROOT / name).is_file():
                z.write(ROOT / name, f"agent-zero-graph-engine-main/{name}")
    root = legacy_tree(tmp_path)
    before = snapshot(root)
    assert install_plugin_zip(root, archive) == PLUGIN  # the folder is renamed after plugin.yaml's name
    assert (root / "usr/plugins" / PLUGIN / "tests").is_dir() and not (root / LEGACY).exists()
    uninstall_plugin(root, PLUGIN)
    assert snapshot(root) == before


@pytest.mark.parametrize("pip_code", [0, 1])
def test_the_install_hook_installs_the_optional_packages_the_framework_lacks(tmp_path, plugin_zip, own_modules,
                                                                             monkeypatch, capsys, pip_code):
    """The dialog's install runs pip for what the framework's Python lacks (here wordllama, hidden from it);
    when pip fails, the install still succeeds and one line says how to install it later."""
    hidden = tmp_path / "hidden"
    (hidden / "wordllama").mkdir(parents=True)
    (hidden / "wordllama" / "__init__.py").write_text("raise ImportError('hidden from this Python')\n")
    monkeypatch.setenv("PYTHONPATH", str(hidden))
    calls = []
    real_call = subprocess.call
    monkeypatch.setattr(subprocess, "call", lambda cmd, *a, **k: calls.append(cmd) or pip_code
                        if cmd[1:4] == ["-m", "pip", "install"] else real_call(cmd, *a, **k))
    root = legacy_tree(tmp_path)
    assert install_plugin_zip(root, plugin_zip) == PLUGIN
    assert calls == [[sys.executable, "-m", "pip", "install", "--quiet", "wordllama>=0.4,<0.5"]]
    assert manifest(root)["form"] == "dialog"
    said = [line for line in capsys.readouterr().out.splitlines() if "could not install" in line]
    assert said == ([] if pip_code == 0 else [
        f"pip could not install wordllama (1); the engine works without them (by words only, without wordllama); "
        f"install them later with: {sys.executable} -m pip install 'wordllama>=0.4,<0.5'"])
