"""The repository as an Agent-Zero v1.x plugin: its metadata, and its settings read through the plugin config."""

import json
import re
import shutil
from pathlib import Path

import pytest
from scenario import IDLE

from graph_engine import __version__, settings
from graph_engine.tools.standin import ROOT, Session, flat_yaml, install_plugin_helpers

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


def started(root: Path, message: str, project: str | None = None) -> Session:
    s = Session()
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
    from graph_engine import adapter
    rt = next(iter(adapter._runtimes.values()))
    assert len(rt.library.current) == 3 and any("only the first 3" in w for w in s.log.texts("warning"))
    cfg = settings.read(s.agent)
    assert (cfg.picture, cfg.max_plans) == ("off", 3)
    monkeypatch.setenv("GRAPH_ENGINE_PICTURE", "mermaid")
    assert settings.read(s.agent).picture == "mermaid"


def test_without_agent_zeros_plugin_helpers_the_defaults_apply():
    s = Session()
    assert settings.read(s.agent) == settings.DEFAULTS
