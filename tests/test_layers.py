"""The package's layers: each folder imports only the layers below it, and the core imports nothing outside
itself and nothing that touches the world (files, the environment, the clock, threads, processes)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "extensions" / "graph_engine"
# each layer and the layers it may import (itself included)
MAY_IMPORT = {
    "core": {"core"},
    "boundary": {"boundary"},
    "texts": {"core", "texts"},
    "matching": {"core", "boundary", "matching"},
    "authoring": {"core", "boundary", "matching", "authoring"},  # the lint runs the examples through matching
    "host": {"core", "boundary", "texts", "authoring", "matching", "host"},
    "tools": {"core", "boundary", "texts", "authoring", "matching", "host", "tools"},
}
WORLD = {"os", "sys", "time", "threading", "subprocess", "pathlib", "datetime", "socket", "shutil", "tempfile",
         "asyncio", "random", "io", "glob", "signal", "multiprocessing", "importlib"}


def imports(path: Path) -> list[tuple[str, int]]:
    """(what a module imports, as a dotted name under graph_engine or a top-level module, line)."""
    layer = path.parent.name
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.append((node.module or "", node.lineno))
                continue
            base = ["graph_engine", layer][: 3 - node.level] if node.level <= 2 else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            if not node.module:  # from . import a, b: each name
                out += [(f"{target}.{a.name}", node.lineno) for a in node.names]
            else:
                out.append((target, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
    return out


MODULES = sorted(p for p in PACKAGE.glob("*/*.py"))


def test_every_folder_is_a_known_layer():
    assert {p.parent.name for p in MODULES} == set(MAY_IMPORT)
    assert [p.name for p in PACKAGE.glob("*.py")] == ["__init__.py"]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_module_imports_only_its_layer_and_those_below(path):
    layer = path.parent.name
    wrong = []
    for name, line in imports(path):
        parts = name.split(".")
        if parts[0] == "graph_engine" and len(parts) > 1 and parts[1] in MAY_IMPORT:
            if parts[1] not in MAY_IMPORT[layer]:
                wrong.append(f"line {line}: {name}")
        elif layer == "core" and parts[0] in WORLD:
            wrong.append(f"line {line}: {name} (the core touches no file, environment, clock or thread)")
    assert wrong == []


def test_the_checker_sees_an_import_from_a_higher_layer(tmp_path):
    """(The check above can fail: a core module that reads the settings is caught.)"""
    core = tmp_path / "core"
    core.mkdir()
    bad = core / "bad.py"
    bad.write_text("import os\nfrom ..boundary.settings import active\nfrom . import model\n")
    assert imports(bad) == [("os", 1), ("graph_engine.boundary.settings", 2), ("graph_engine.core.model", 3)]
