"""The engine is split by layer (run < fork < traversal < evidence, gates < new_message < steering < engine): each
module imports only the layers before it, so no import draws a circle, and each stays readable in one sitting."""

import ast
from pathlib import Path

import pytest

from graph_engine.core import engine

CORE = Path(engine.__file__).resolve().parent
LAYERS = ["run", "fork", "traversal", "evidence", "gates", "new_message", "steering", "engine"]
MAX_LINES = 800


def _core_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {a.name for a in node.names}
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_each_engine_layer_imports_only_the_layers_before_it(layer):
    above = set(LAYERS[LAYERS.index(layer):])
    assert _core_imports(CORE / f"{layer}.py") & above == set()


def test_no_core_module_imports_in_a_circle():
    graph = {p.stem: _core_imports(p) for p in CORE.glob("*.py")}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join((*path, name))
        if name in done:
            return
        for nxt in graph.get(name, ()):
            visit(nxt, (*path, name))
        done.add(name)

    for name in graph:
        visit(name, ())


def test_every_core_module_is_under_its_size_limit():
    sizes = {p.name: len(p.read_text().splitlines()) for p in CORE.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n >= MAX_LINES} == {}


def test_the_engine_exports_every_name_used_outside_the_core():
    package = CORE.parent
    used = set()
    for path in package.rglob("*.py"):
        if path.parent == CORE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "engine":
                used.add(node.attr)
    assert used and [name for name in sorted(used) if not hasattr(engine, name)] == []
