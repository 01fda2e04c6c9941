"""What the installer keeps in ``<root>/usr/graph_engine/``: the install manifest and the backup folders; the
compiled caches and empty folders it clears."""

from __future__ import annotations

import json
import time
from pathlib import Path

from graph_engine.tools.install_layout import MANIFEST, PLUGIN, STATE_DIR, Refused

def read_manifest(root: Path) -> dict | None:
    path = root / STATE_DIR / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Refused(f"{path} is unreadable ({exc}); move it away or fix it, nothing was changed") from None
    return data if isinstance(data, dict) else None


def new_backup_dir(root: Path) -> Path:
    base = root / STATE_DIR / "backups"
    base.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1000):
        candidate = base / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise Refused(f"could not create a new backup folder under {base}")


def remove_if_empty(folder: Path) -> None:
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def write_manifest(root: Path, manifest: dict, backup_rel: str | None) -> None:
    blob = json.dumps(manifest, indent=2).encode() + b"\n"
    path = root / STATE_DIR / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)
    if backup_rel:
        (root / backup_rel / MANIFEST).write_bytes(blob)


def clear_caches(root: Path, rels: list[str]) -> None:
    """Remove compiled files of the modules this run changed (other modules' caches stay)."""
    for rel in rels:
        path = root / rel
        cache = path.parent / "__pycache__"
        if path.suffix != ".py" or not cache.is_dir():
            continue
        for entry in cache.glob(f"{path.stem}.*.pyc"):
            entry.unlink()
        if path.parent.name == "graph_engine" and not any(cache.iterdir()):
            cache.rmdir()


def recorded_form(root: Path) -> str:
    """How the pack is installed: "" (not at all), "files" (hook folders), "plugin" (this installer's --plugin),
    DIALOG (Agent-Zero's Plugins dialog) or "unrecorded" (a plugin folder that no manifest records)."""
    manifest = read_manifest(root)
    if manifest is None:
        return "unrecorded" if (root / "usr" / "plugins" / PLUGIN / "plugin.yaml").is_file() else ""
    return manifest.get("form") or ("plugin" if manifest.get("plugin") else "files")
