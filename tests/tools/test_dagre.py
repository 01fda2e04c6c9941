"""The web UI's layout library (tools/dagre.py): pinned by package-lock.json, made into one file by the build, or
downloaded and checked by a plugin installed from a Git URL.  No test touches the network: the download is a fake."""

import base64
import hashlib
import io
import json
import tarfile
import urllib.error
from pathlib import Path

import pytest

from graph_engine.tools import dagre, install_files, installer

ROOT = Path(__file__).resolve().parents[2]
MODULE = b'var x=1;export{x as default};\n//# sourceMappingURL=dagre.esm.js.map\n'
LICENCE = b"/*\n@license\n\nCopyright (c) 2012-2014 Chris Pettitt\n\nPermission is hereby granted ...\n*/\n"


def tarball(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


GOOD = tarball({"package/package.json": b'{"version": "3.1.3"}', dagre.MODULE: MODULE, dagre.LICENCE: LICENCE})


def integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def plugin(tmp_path: Path, data: bytes = GOOD) -> Path:
    """A plugin folder as a Git URL gives it: the lock, no built file."""
    folder = tmp_path / "graph_workflow_engine"
    folder.mkdir()
    lock = json.loads((ROOT / dagre.LOCK).read_text())
    lock["packages"][f"node_modules/{dagre.NAME}"]["integrity"] = integrity(data)
    (folder / dagre.LOCK).write_text(json.dumps(lock))
    return folder


def test_the_lock_pins_the_version_package_json_asks_for_with_an_https_tarball_and_its_sha512():
    wanted = json.loads((ROOT / "package.json").read_text())["dependencies"][dagre.NAME]
    p = dagre.pin(ROOT)
    assert p.version == wanted and p.url == f"https://registry.npmjs.org/{dagre.NAME}/-/dagre-{wanted}.tgz"
    assert p.integrity.startswith("sha512-") and len(base64.b64decode(p.integrity[7:])) == 64


def test_a_good_tarball_gives_the_one_file_with_its_licence_and_no_source_map(tmp_path):
    folder, lines, asked = plugin(tmp_path), [], []
    assert dagre.ensure(folder, fetch=lambda url: asked.append(url) or GOOD, say=lines.append)
    made = (folder / dagre.TARGET).read_text()
    assert asked == [dagre.pin(folder).url]
    assert made.startswith(f"/*! {dagre.NAME} 3.1.3, ") and "Copyright (c) 2012-2014 Chris Pettitt" in made
    assert "var x=1;export{x as default};" in made and "sourceMappingURL" not in made
    assert made.count("*/") == 1 + MODULE.count(b"*/")  # the licence is one comment, closed once
    assert len(lines) == 1 and "downloaded and checked against package-lock.json" in lines[0]
    assert dagre.ensure(folder, fetch=lambda url: pytest.fail("fetched again"), say=lines.append)  # there: kept


def test_a_tarball_whose_hash_is_not_the_locks_is_refused_and_nothing_is_written(tmp_path):
    folder, lines = plugin(tmp_path), []
    other = tarball({dagre.MODULE: b"alert('not dagre')", dagre.LICENCE: LICENCE})
    assert not dagre.ensure(folder, fetch=lambda url: other, say=lines.append)
    assert not (folder / dagre.TARGET).exists() and not list(folder.rglob("*.tmp"))
    assert len(lines) == 1 and "is not the one package-lock.json pins" in lines[0] and "it was not used" in lines[0]
    assert 'says "layout library missing"' in lines[0]


def test_without_a_network_it_is_one_clear_line_and_the_plugin_goes_on(tmp_path):
    folder, lines = plugin(tmp_path), []

    def offline(url):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    assert not dagre.ensure(folder, fetch=offline, say=lines.append)
    assert not (folder / dagre.TARGET).exists()
    assert lines == [f"Graph Workflow Engine: the graph layout library is missing: {dagre.NAME} 3.1.3 could not be "
                     f"downloaded from {dagre.pin(folder).url} ([Errno -3] Temporary failure in name resolution); "
                     f"{dagre.MISSING}"]


def test_told_not_to_download_it_does_not_try(tmp_path, monkeypatch):
    folder, lines = plugin(tmp_path), []
    monkeypatch.setenv(dagre.NO_DOWNLOAD, "1")
    monkeypatch.setattr(dagre, "download", lambda url: pytest.fail("downloaded"))
    assert not dagre.ensure(folder, say=lines.append)
    assert f"was not downloaded ({dagre.NO_DOWNLOAD} is set)" in lines[0]


def test_a_tarball_without_the_module_or_with_a_link_in_its_place_is_refused(tmp_path):
    for files in ({dagre.LICENCE: LICENCE}, {dagre.MODULE: MODULE}):
        data = tarball(files)
        with pytest.raises(dagre.LibraryError, match="does not hold"):
            dagre.from_tarball(data, dagre.Pin("3.1.3", "https://x", integrity(data)))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        link = tarfile.TarInfo(dagre.MODULE)
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    data = out.getvalue()
    with pytest.raises(dagre.LibraryError, match="not a regular file"):
        dagre.from_tarball(data, dagre.Pin("3.1.3", "https://x", integrity(data)))


def test_the_build_reads_what_npm_ci_unpacked_and_refuses_another_version(tmp_path):
    package = tmp_path / "node_modules" / "@dagrejs" / "dagre"
    (package / "dist").mkdir(parents=True)
    (package / "dist" / "dagre.esm.js").write_bytes(MODULE)
    (package / "dist" / "dagre.esm.js.LEGAL.txt").write_bytes(LICENCE)
    (package / "package.json").write_text(json.dumps({"version": dagre.pin(ROOT).version}))
    out = tmp_path / "dagre.js"
    assert dagre.main(["--root", str(ROOT), "--from", str(package), "--out", str(out)]) == 0
    assert out.read_bytes() == dagre.built(MODULE, LICENCE, dagre.pin(ROOT).version)
    (package / "package.json").write_text(json.dumps({"version": "0.8.5"}))
    assert dagre.main(["--root", str(ROOT), "--from", str(package), "--out", str(tmp_path / "other.js")]) == 1


def test_the_shell_installer_carries_the_built_file_or_says_in_one_line_that_it_is_missing(tmp_path, monkeypatch,
                                                                                       capsys):
    target = tmp_path / dagre.TARGET
    monkeypatch.setattr(install_files, "_FETCHED", [])
    monkeypatch.setattr(dagre, "fetched", lambda root: b"made")
    have = {}
    installer.layout_library(tmp_path, have)
    assert have == {target: b"made"}
    monkeypatch.setattr(install_files, "_FETCHED", [])
    monkeypatch.setattr(dagre, "fetched", lambda root: (_ for _ in ()).throw(dagre.LibraryError("offline")))
    have = {}
    installer.layout_library(tmp_path, have)
    installer.layout_library(tmp_path, have)  # said once per run
    assert have == {} and capsys.readouterr().out.count("the graph layout library is missing: offline") == 1
    built = {target: b"built"}  # this checkout's build: carried as it is
    installer.layout_library(tmp_path, built)
    assert built == {target: b"built"}


def test_the_web_ui_files_are_the_components_modules_the_strip_and_the_built_library(tmp_path):
    webui = tmp_path / "extensions" / "webui"
    for rel in ("get_message_handler/graph-workflow-handler.js", "chat-input-start/graph-workflow-strip.html",
                "graph_workflow_engine/component.js", "graph_workflow_engine/dagre.js", "graph_workflow_engine/x.map"):
        (webui / rel).parent.mkdir(parents=True, exist_ok=True)
        (webui / rel).write_text("x")
    found = [p.relative_to(tmp_path).as_posix() for p in installer.web_ui_files(tmp_path)]
    assert found == ["extensions/webui/chat-input-start/graph-workflow-strip.html",
                     "extensions/webui/get_message_handler/graph-workflow-handler.js",
                     "extensions/webui/graph_workflow_engine/component.js",
                     "extensions/webui/graph_workflow_engine/dagre.js"]
