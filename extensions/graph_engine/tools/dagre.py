"""The web UI's layout library: dagre (``@dagrejs/dagre`` on npm), which lays out the workflow graph in the browser.

It is a dependency, not part of the repository: ``package.json`` and ``package-lock.json`` pin it (version,
tarball and sha512 integrity), and one file is made from its published package, ``TARGET`` (its ES module, which
bundles graphlib, with its licence on top), which the component imports beside itself.  Three ways make it:

* ``make webui-lib`` (and ``make plugin``, ``make real-ui``): ``npm ci`` checks the tarball against the lock and
  unpacks it into ``node_modules/``; ``--from node_modules/@dagrejs/dagre`` makes the file from there;
* the shell installer, when the checkout has no built file, and a v1.x plugin installed from a Git URL (the
  repository is the plugin: nothing was built), whose ``hooks.install()`` calls ``ensure``: the tarball named by
  the lock is fetched from the npm registry with the standard library, refused unless its sha512 is the lock's,
  and the one file is read out of it (nothing else is unpacked).

Without the file (no network, ``GRAPH_ENGINE_NO_DOWNLOAD=1``) the component draws a simple layered layout and
says "layout library missing" in one small line.  Standard library only; run as a script by the Makefile.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import sys
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

NAME = "@dagrejs/dagre"
LOCK = "package-lock.json"
TARGET = Path("extensions/webui/graph_workflow_engine/dagre.js")  # relative to the repository or plugin root
MODULE = "package/dist/dagre.esm.js"  # in the tarball (npm ci unpacks package/ as node_modules/@dagrejs/dagre/)
LICENCE = "package/dist/dagre.esm.js.LEGAL.txt"
MAX_TARBALL = 8 << 20  # the 3.1.3 tarball is about 400 kB
MAX_FILE = 2 << 20
TIMEOUT = 20.0
NO_DOWNLOAD = "GRAPH_ENGINE_NO_DOWNLOAD"  # set (to anything but "" or "0"): never download it
MISSING = ("the workflow component draws a simple layered layout instead and says \"layout library missing\"; "
           "build it with `make webui-lib` (needs npm) or install the plugin's ZIP from `make plugin`")


class LibraryError(Exception):
    """The layout library could not be made; the message says why and what to do."""


@dataclass(frozen=True)
class Pin:
    version: str
    url: str
    integrity: str  # "sha512-<base64>", as npm writes it


def pin(root: Path) -> Pin:
    """What ``package-lock.json`` at ``root`` pins dagre to."""
    path = root / LOCK
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))["packages"][f"node_modules/{NAME}"]
        found = Pin(entry["version"], entry["resolved"], entry["integrity"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LibraryError(f"{path}: no pin of {NAME} (version, resolved, integrity) ({type(exc).__name__}: "
                           f"{exc}); restore the file from the repository") from None
    if not found.integrity.startswith("sha512-") or not found.url.startswith("https://"):
        raise LibraryError(f"{path}: the pin of {NAME} needs an https tarball and a sha512 integrity, it has "
                           f"{found.url!r} and {found.integrity[:20]!r}; restore the file from the repository")
    return found


def check(data: bytes, p: Pin) -> None:
    """Raise unless ``data`` has the sha512 integrity the lock records."""
    got = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    if got != p.integrity:
        raise LibraryError(f"the downloaded {NAME} {p.version} tarball is not the one package-lock.json pins "
                           f"(sha512 {got[:27]}..., the lock says {p.integrity[:27]}...); it was not used")


def built(module: bytes, licence: bytes, version: str) -> bytes:
    """The one file: dagre's licence as a comment, then its ES module (its source-map line dropped: the map is
    not shipped)."""
    text = module.decode("utf-8")
    lines = [line for line in text.splitlines() if not line.startswith("//# sourceMappingURL=")]
    notice = licence.decode("utf-8").strip().removeprefix("/*").removesuffix("*/").strip().replace("*/", "* /")
    head = (f"/*! {NAME} {version}, made by the graph workflow engine's build from the package npm publishes "
            f"(checked against package-lock.json); its licence:\n{notice}\n*/\n")
    return (head + "\n".join(lines) + "\n").encode("utf-8")


def from_tarball(data: bytes, p: Pin) -> bytes:
    """The one file, read out of the package's tarball (after its integrity is checked); nothing is unpacked."""
    check(data, p)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            parts = []
            for name in (MODULE, LICENCE):
                member = tar.getmember(name)
                if not member.isfile() or member.size > MAX_FILE:
                    raise LibraryError(f"{name} in the {NAME} tarball is not a regular file of at most {MAX_FILE} "
                                       "bytes")
                parts.append(tar.extractfile(member).read())
    except (tarfile.TarError, KeyError, OSError) as exc:
        raise LibraryError(f"the {NAME} {p.version} tarball does not hold {MODULE} ({type(exc).__name__}: {exc})"
                           ) from None
    return built(parts[0], parts[1], p.version)


def from_folder(folder: Path, p: Pin) -> bytes:
    """The one file, from the package as ``npm ci`` unpacked it (npm checked the tarball against the lock)."""
    try:
        version = json.loads((folder / "package.json").read_text(encoding="utf-8"))["version"]
        module = (folder / "dist" / "dagre.esm.js").read_bytes()
        licence = (folder / "dist" / "dagre.esm.js.LEGAL.txt").read_bytes()
    except (OSError, ValueError, KeyError) as exc:
        raise LibraryError(f"{folder}: not an unpacked {NAME} package ({type(exc).__name__}: {exc}); run `npm ci`"
                           ) from None
    if version != p.version:
        raise LibraryError(f"{folder} holds {NAME} {version}, package-lock.json pins {p.version}; run `npm ci`")
    return built(module, licence, version)


def download(url: str) -> bytes:
    """The tarball at ``url`` (at most MAX_TARBALL bytes, within TIMEOUT seconds)."""
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:  # noqa: S310 - https, from the lock
        data = response.read(MAX_TARBALL + 1)
    if len(data) > MAX_TARBALL:
        raise LibraryError(f"{url} is larger than {MAX_TARBALL} bytes; it was not used")
    return data


def fetched(root: Path, fetch: Callable[[str], bytes] | None = None) -> bytes:
    """The one file made from the tarball the lock at ``root`` pins, fetched (``fetch``: the download, for tests)."""
    p = pin(root)
    if fetch is None:
        if os.environ.get(NO_DOWNLOAD, "") not in ("", "0"):
            raise LibraryError(f"{NAME} was not downloaded ({NO_DOWNLOAD} is set)")
        fetch = download
    try:
        data = fetch(p.url)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LibraryError(f"{NAME} {p.version} could not be downloaded from {p.url} ({reason})") from None
    return from_tarball(data, p)


def ensure(root: Path, fetch: Callable[[str], bytes] | None = None, say: Callable[[str], None] = print) -> bool:
    """Make ``root/TARGET`` when it is missing (a plugin installed from a Git URL); True when it is there.  A
    failure is one line through ``say``, never an exception: the component works without the library."""
    target = root / TARGET
    if target.is_file():
        return True
    try:
        data = fetched(root, fetch)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except Exception as exc:  # noqa: BLE001 - the plugin works without it: one line, never a failed install
        say(f"Graph Workflow Engine: the graph layout library is missing: {exc}; {MISSING}")
        return False
    say(f"Graph Workflow Engine: the graph layout library ({NAME} {pin(root).version}) was downloaded and "
        f"checked against package-lock.json: {target}")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Make {TARGET} from {NAME} as package-lock.json pins it.")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[3],
                        help="the folder holding package-lock.json (default: this repository)")
    parser.add_argument("--from", dest="folder", type=Path,
                        help="the package as `npm ci` unpacked it (node_modules/@dagrejs/dagre); else downloaded")
    parser.add_argument("--out", type=Path, help=f"the file to write (default: ROOT/{TARGET})")
    args = parser.parse_args(argv)
    out = args.out or args.root / TARGET
    try:
        p = pin(args.root)
        data = from_folder(args.folder, p) if args.folder else fetched(args.root)
    except LibraryError as exc:
        print(f"webui-lib: {exc}", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    print(f"{out} ({NAME} {p.version}, {len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
