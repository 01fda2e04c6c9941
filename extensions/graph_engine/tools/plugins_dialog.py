"""Agent-Zero v1.x's Plugins dialog as the stand-in models it, with the rules of Agent-Zero v1.7's installer: a ZIP
or a git URL installed into ``usr/plugins/<name>`` (its ``hooks.py``'s ``install()`` run), and uninstalled; and the
flat YAML its plugin files use."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any


def flat_yaml(text: str) -> dict[str, Any]:
    """A flat ``key: value  # comment`` YAML document (what ``default_config.yaml`` holds)."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#") or ":" not in line:
            continue
        key, value = line.split(":", 1)
        value = value.strip()
        if value.startswith('"'):
            value = value[1:value.index('"', 1)]
        else:
            value = value.split(" #", 1)[0].strip()
            value = {"true": True, "false": False}.get(value, int(value) if value.isdigit() else value)
        out[key.strip()] = value
    return out


def plugin_name(folder: Path) -> str:
    """v1.7's validate_plugin_dir + _get_plugin_name: plugin.yaml must be there and name a plugin."""
    meta = folder / "plugin.yaml"
    if not meta.is_file():
        raise ValueError(f"No plugin.yaml found in {folder.name}")
    name = str(flat_yaml(meta.read_text()).get("name") or "").strip()
    if not name:
        raise ValueError("plugin.yaml is missing required field 'name'")
    return name


def run_plugin_hook(folder: Path, hook: str) -> Any:
    """v1.7's call_plugin_hook: hooks.py imported by path, the function called by name when it has one."""
    script = folder / "hooks.py"
    if not script.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"plugin_hooks_{folder.name}", str(script))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function = getattr(module, hook, None)
    return function() if function is not None else None


def place_plugin(a0_root: Path, found: Path) -> str:
    name = plugin_name(found)
    dest = a0_root / "usr" / "plugins" / name
    if dest.exists():
        raise ValueError(f"Plugin '{name}' is already installed")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(found), str(dest))
    try:
        run_plugin_hook(dest, "install")
    except Exception:
        shutil.rmtree(dest)  # v1.7 deletes the plugin folder again when install() raises
        raise
    return name


def install_plugin_zip(a0_root: Path, archive: Path) -> str:
    """v1.7's install_from_zip: the first folder (walking top-down) that holds a plugin.yaml is the plugin; it is
    moved to ``usr/plugins/<name>``; then ``install()`` of its hooks.py.  Returns the name."""
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(archive) as z:
            z.extractall(tmp)
        found = next((Path(d) for d, _dirs, files in os.walk(tmp) if "plugin.yaml" in files), None)
        if found is None:
            raise ValueError("No plugin.yaml found in the uploaded archive")
        return place_plugin(a0_root, found)


def install_plugin_git(a0_root: Path, url: str) -> str:
    """v1.7's install_from_git: ``git clone`` into a temporary folder whose root must hold plugin.yaml."""
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "tmp_plugin_clone"
        subprocess.run(["git", "clone", "--quiet", "--", url, str(clone)], check=True, capture_output=True)
        return place_plugin(a0_root, clone)


def uninstall_plugin(a0_root: Path, name: str) -> None:
    """v1.7's uninstall_plugin: ``uninstall()`` of its hooks.py, then the plugin folder is deleted."""
    folder = a0_root / "usr" / "plugins" / name
    run_plugin_hook(folder, "uninstall")
    shutil.rmtree(folder)
