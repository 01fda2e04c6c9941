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
    "session": {"core", "boundary", "texts", "authoring", "matching", "session"},
    "hosts": {"core", "boundary", "texts", "authoring", "matching", "session", "hosts"},
    "tools": {"core", "boundary", "texts", "authoring", "matching", "session", "hosts", "tools"},
}
WORLD = {"os", "sys", "time", "threading", "subprocess", "pathlib", "datetime", "socket", "shutil", "tempfile",
         "asyncio", "random", "io", "glob", "signal", "multiprocessing", "importlib"}


def folders(path: Path) -> list[str]:
    """The folders from the package to the module: ["core"], ["hosts", "agent_zero"]."""
    return list(path.relative_to(PACKAGE).parent.parts)


def layer_of(path: Path) -> str:
    return folders(path)[0]


def imports(path: Path) -> list[tuple[str, int]]:
    """(what a module imports, as a dotted name under graph_engine or a top-level module, line)."""
    here = ["graph_engine", *folders(path)] if path.is_relative_to(PACKAGE) else ["graph_engine", path.parent.name]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.append((node.module or "", node.lineno))
                continue
            base = here[: len(here) + 1 - node.level] if node.level <= len(here) else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            if not node.module:  # from . import a, b: each name
                out += [(f"{target}.{a.name}", node.lineno) for a in node.names]
            else:
                out.append((target, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
    return out


MODULES = sorted([*PACKAGE.glob("*/*.py"), *PACKAGE.glob("hosts/*/*.py")])


def test_every_folder_is_a_known_layer():
    assert {layer_of(p) for p in MODULES} == set(MAY_IMPORT)
    assert [p.name for p in PACKAGE.glob("*.py")] == ["__init__.py"]


def test_the_tests_are_in_folders_named_after_the_layers():
    """tests/<layer>/ holds that layer's tests; tests/ itself the harness, this file and the tests that run the
    real Agent-Zero (test_real_*.py)."""
    tests = Path(__file__).resolve().parent
    folders = {p.name for p in tests.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders and folders <= set(MAY_IMPORT)
    assert sorted(p.name for p in tests.glob("test_*.py") if not p.name.startswith("test_real_")) == ["test_layers.py"]


def named(path: Path) -> str:
    return "/".join([*folders(path), path.name])


@pytest.mark.parametrize("path", MODULES, ids=named)
def test_a_module_imports_only_its_layer_and_those_below(path):
    assert wrong_imports(path) == []


def wrong_imports(path: Path) -> list[str]:
    layer = layer_of(path)
    wrong = []
    for name, line in imports(path):
        parts = name.split(".")
        if parts[0] == "graph_engine" and len(parts) > 1 and parts[1] in MAY_IMPORT:
            if parts[1] not in MAY_IMPORT[layer]:
                wrong.append(f"line {line}: {name}")
            elif layer == "hosts" and parts[1] == "hosts" and len(parts) > 2 and folders(path)[:2] != ["hosts", parts[2]]:
                wrong.append(f"line {line}: {name} (a host imports no other host)")
        elif layer == "core" and parts[0] in WORLD:
            wrong.append(f"line {line}: {name} (the core touches no file, environment, clock or thread)")
    return wrong


def test_the_checker_sees_an_import_from_a_higher_layer(tmp_path):
    """(The check above can fail: a core module that reads the settings is caught.)"""
    core = tmp_path / "core"
    core.mkdir()
    bad = core / "bad.py"
    bad.write_text("import os\nfrom ..boundary.settings import active\nfrom . import model\n")
    assert imports(bad) == [("os", 1), ("graph_engine.boundary.settings", 2), ("graph_engine.core.model", 3)]


def writes_to_a_state(path: Path) -> list[str]:
    """Places where a module changes a dict named like a run's state itself (an item set or deleted, a
    mutating method, an event emitted) instead of calling the core, each named by the function it is in."""
    tree = ast.parse(path.read_text())
    where = {}
    for fn in ast.walk(tree):  # outer functions first: an inner function's nodes are named by it
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            where.update({id(n): fn.name for n in ast.walk(fn)})
    found = []
    for node in ast.walk(tree):
        at = where.get(id(node), "<module>")
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and "state" in t.value.id:
                found.append(f"{at}: {t.value.id}[...] changed")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and "state" in node.func.value.id and \
                node.func.attr in ("pop", "setdefault", "update", "clear", "popitem"):
            found.append(f"{at}: {node.func.value.id}.{node.func.attr}()")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "emit":
            found.append(f"{at}: emit()")
    return found


# rebuilding a stored copy from its files is not changing a run: the result is checked like any restored state
REBUILDS = {"session/journal.py": {"apply: state[...] changed", "apply: state.update()"},
            "session/audit.py": {"read_checkpoint: state.pop()"}}


@pytest.mark.parametrize("path", [p for p in MODULES if layer_of(p) in ("session", "hosts", "texts")], ids=named)
def test_only_the_core_changes_a_run_state(path):
    """The host reads a run's state and hands it to the core; the core's functions (the step, ``resumed``,
    ``state.logged``, ``state.pictured``) are what change it."""
    assert set(writes_to_a_state(path)) - REBUILDS.get(named(path), set()) == set()


def test_the_state_check_sees_a_write(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("state['picture'] = p\ndef f():\n    raw_state.pop('x')\n    def g():\n        emit(state, 'x')\n")
    assert writes_to_a_state(bad) == ["<module>: state[...] changed", "f: raw_state.pop()", "g: emit()"]


def test_the_checker_sees_a_host_importing_another(tmp_path, monkeypatch):
    """(A host imports no other host: the chat host that reads the Agent-Zero port is caught.)"""
    chat = tmp_path / "hosts" / "chat"
    chat.mkdir(parents=True)
    bad = chat / "bad.py"
    bad.write_text("from ..agent_zero import adapter\nfrom . import shell\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path)
    assert imports(bad) == [("graph_engine.hosts.agent_zero", 1), ("graph_engine.hosts.chat.shell", 2)]
    assert wrong_imports(bad) == ["line 1: graph_engine.hosts.agent_zero (a host imports no other host)"]
