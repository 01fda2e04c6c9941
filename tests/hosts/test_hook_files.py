"""The pack's three hook files share one loader (extensions/python/graph_engine_loader.py).  Agent-Zero runs each
extension file by path, off ``sys.path``, and keys its class by that file, so a hook file can import neither the
loader nor the engine by name: the lines that find the loader beside the hook folders (``_loader``, and ``_said``,
what it said once) are one text in the three files, and this test keeps them so."""

import ast
from pathlib import Path

import pytest

HOOKS = Path(__file__).resolve().parents[2] / "extensions" / "python"
FILES = sorted(HOOKS.glob("*/_*.py"))
SHARED = ("_loader", "_said", "_engine")


def shared_text(path: Path) -> dict[str, str]:
    """The source of each shared definition, and of the import of Agent-Zero's Extension base class."""
    text = path.read_text()
    tree = ast.parse(text)
    out = {}
    for node in tree.body:
        names = ([node.name] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else
                 [t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign) else [])
        for name in names:
            if name in SHARED:
                out[name] = ast.get_source_segment(text, node)
        if isinstance(node, ast.Try) and any(isinstance(n, ast.ImportFrom) and n.module == "helpers.extension"
                                             for n in node.body):
            out["Extension"] = ast.unparse(node.body[0]) + " | " + ast.unparse(node.handlers[0].body[0])
    return out


def test_the_three_hook_files_are_found_and_the_loader_beside_their_folders():
    assert [p.parent.name for p in FILES] == ["agent_init", "before_main_llm_call", "message_loop_prompts_after"]
    assert sorted(p.name for p in HOOKS.glob("*.py")) == ["graph_engine_loader.py"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.name)
def test_a_hook_file_holds_no_loading_or_warning_of_its_own(path):
    """What the loader does (find the package, wait for an import, warn once, start the warm-up) is not copied;
    a hook file only looks the imported engine up, one dict lookup a pass."""
    text = path.read_text()
    assert "__init__.py" not in text and "GRAPH_ENGINE_HOME" not in text and "threading" not in text
    assert len(text.splitlines()) < 80


@pytest.mark.parametrize("path", FILES[1:], ids=lambda p: p.parent.name)
def test_each_hook_file_carries_the_one_loader_unchanged(path):
    first = shared_text(FILES[0])
    assert set(first) == {*SHARED, "Extension"}
    assert shared_text(path) == first, f"{path.name}: the loader differs from {FILES[0].name}'s; keep them one text"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.name)
def test_each_hook_file_defines_one_extension_class_of_its_own(path):
    """The class Agent-Zero runs is the alphabetically last subclass of Extension in the file's namespace: one,
    defined in the file (an imported one would be keyed by another file)."""
    tree = ast.parse(path.read_text())
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert len(classes) == 1 and [ast.unparse(b) for b in classes[0].bases] == ["Extension"]
