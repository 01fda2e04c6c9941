"""The engine words nothing itself: it calls the functions of ``texts_port.Texts``, and ``texts.render`` has them."""

import ast
import inspect
from pathlib import Path

from graph_engine.core import texts_port
from graph_engine.texts import render

CORE = Path(texts_port.__file__).resolve().parent
PORT = sorted(name for name, value in vars(texts_port.Texts).items()
              if callable(value) and not name.startswith("_"))


def _texts_names(tree: ast.AST) -> set[ast.AST]:
    """The functions whose parameter ``texts`` is typed ``Texts``: there the bare name is the port."""
    return {f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
            and any(a.arg == "texts" and ast.unparse(a.annotation or ast.Constant("")) == "Texts" for a in f.args.args)}


def _called_on_texts(tree: ast.AST) -> set[str]:
    """Names the code reads off its texts: ``fx.texts.x``, ``run.fx.texts.x``, and ``texts.x`` where ``texts`` is
    a parameter typed ``Texts``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "texts":
            found.add(node.attr)
    for function in _texts_names(tree):
        for node in ast.walk(function):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "texts":
                found.add(node.attr)
    return found


def test_the_render_module_is_the_texts_the_engine_needs():
    assert isinstance(render, texts_port.Texts)
    for name in PORT:
        assert callable(getattr(render, name, None)), name


def test_each_text_function_takes_what_the_port_says():
    for name in PORT:
        wanted = list(inspect.signature(getattr(texts_port.Texts, name)).parameters)[1:]  # without self
        assert list(inspect.signature(getattr(render, name)).parameters) == wanted, name


def test_the_core_calls_on_its_texts_exactly_the_ports_functions():
    called = set()
    for path in CORE.glob("*.py"):
        called |= _called_on_texts(ast.parse(path.read_text()))
    assert called == set(PORT)


def test_a_texts_value_without_one_of_the_functions_is_not_the_port():
    class Partial:
        pass

    for name in PORT[1:]:
        setattr(Partial, name, staticmethod(lambda *a, **k: ""))
    assert not isinstance(Partial(), texts_port.Texts)
    setattr(Partial, PORT[0], staticmethod(lambda *a, **k: ""))
    assert isinstance(Partial(), texts_port.Texts)
