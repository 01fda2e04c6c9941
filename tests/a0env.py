"""Python environments for real Agent-Zero trees (the real-loop suite, `make real-loop`).

A tree's environment is built from the tree's own `requirements.txt` and `requirements2.txt` into a venv OUTSIDE the repository,
`$A0_TREES/.venvs/<tree>-<key>/` (`GRAPH_ENGINE_A0_VENVS` chooses another folder), and reused while the
requirements, the stub list and the Python version are the same. Packages that need model weights, a browser
or a native build of their own are not installed: STUBS (the one list) names them with the modules they
provide, and those modules are replaced by import-only stubs (any attribute is a class; nothing works when
called, so a test that reaches one fails loudly).

    python tests/a0env.py [TREE ...]      # build (or reuse) the environments of $A0_TREES's trees
"""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from graph_engine.tools.installer import REQUIREMENT

# requirement name -> the top-level modules it provides, each replaced by an import-only stub
STUBS: dict[str, tuple[str, ...]] = {
    "browser-use": ("browser_use",),            # drives a browser
    "playwright": ("playwright",),              # downloads a browser build
    "kokoro": ("kokoro",),                      # text to speech: model weights (torch)
    "openai-whisper": ("whisper",),             # speech to text: model weights (torch)
    "sentence-transformers": ("sentence_transformers",),  # local embeddings: model weights (torch)
    "unstructured": ("unstructured",),          # document parsing: native builds, model weights
    "langchain-unstructured": ("langchain_unstructured",),
    "duckduckgo-search": ("duckduckgo_search",),  # needs a Rust build (pyreqwest_impersonate)
}

PYTHON_CANDIDATES = ("python3.12", "python3.13", "python3.11", "python3")  # Agent-Zero's image runs 3.12

STUB_MODULE = '''"""Import-only stubs for packages the real-loop suite does not install (see tests/a0env.py STUBS)."""
import importlib.abc, importlib.machinery, sys, types

NAMES = {names!r}


class _Stub:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        raise RuntimeError("import-only stub of a package the real-loop suite does not install")

    def __getattr__(self, name):
        return _Stub()


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (_Stub,), {{}})
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in NAMES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
'''


def trees_root() -> Path | None:
    value = os.environ.get("A0_TREES", "")
    return Path(value) if value and Path(value).is_dir() else None


def trees(root: Path) -> list[Path]:
    """The Agent-Zero trees in `root`: sub-folders holding agent.py and requirements.txt."""
    return sorted(p for p in root.iterdir()
                  if not p.name.startswith(".") and (p / "agent.py").is_file() and (p / "requirements.txt").is_file())


def layout(tree: Path) -> str:
    return "new" if (tree / "helpers" / "extension.py").is_file() else "old"


def requirement_name(line: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else ""


REQUIREMENT_FILES = ("requirements.txt", "requirements2.txt")  # Agent-Zero's image installs both


def requirements(tree: Path) -> list[str]:
    """The tree's requirements less the stubbed packages, comments dropped."""
    kept = []
    text = "\n".join((tree / f).read_text() for f in REQUIREMENT_FILES if (tree / f).is_file())
    for raw in text.splitlines():
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if requirement_name(line) not in STUBS:
            kept.append(line)
    return kept


def find_python() -> str:
    explicit = os.environ.get("A0_PYTHON")
    if explicit:
        return explicit
    pyenv = sorted(Path.home().glob(".pyenv/versions/3.12*/bin/python3.12"))  # pyenv's, when not on PATH
    for name in [*PYTHON_CANDIDATES[:1], *map(str, pyenv), *PYTHON_CANDIDATES[1:]]:
        try:
            out = subprocess.run([name, "-c", "import sys; print(sys.version_info >= (3, 11))"],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == "True":
            return name
    raise RuntimeError("no Python 3.11+ found for the Agent-Zero environments; set A0_PYTHON")


def python_version(python: str) -> str:
    return subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def venvs_dir(root: Path) -> Path:
    return Path(os.environ.get("GRAPH_ENGINE_A0_VENVS") or root / ".venvs")


def venv_for(tree: Path, python: str) -> Path:
    key = json.dumps([requirements(tree), sorted(STUBS.items()), python_version(python), STUB_MODULE])
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return venvs_dir(tree.parent) / f"{tree.name}-{digest}"


# The pack's optional packages, as `install_graph_engine.sh` and the plugin's install hook put
# them in Agent-Zero's Python: every tree's environment has them, so that a test never depends on whether an
# earlier test's install hook added them (matching by meaning is on in every run).
OPTIONAL = tuple(REQUIREMENT.values())


def ensure_env(tree: Path, log=print) -> Path:
    """The venv's python for `tree`, built when missing (a finished build leaves a `.ready` mark), with the
    pack's optional packages (added to an environment built before they were, once: an `.optional` mark)."""
    python = find_python()
    venv = venv_for(tree, python)
    bin_python = venv / "bin" / "python"
    if (venv / ".ready").is_file():
        if not (venv / ".optional").is_file():
            log(f"installing the pack's optional packages into {venv} (once)")
            subprocess.run([str(bin_python), "-m", "pip", "install", "--quiet", "--prefer-binary", *OPTIONAL],
                           check=True)
            (venv / ".optional").write_text("ok\n")
        return bin_python
    log(f"building the Python environment of {tree.name} in {venv} (once; reused afterwards)")
    subprocess.run([python, "-m", "venv", "--clear", str(venv)], check=True)
    reqs = venv / "requirements.txt"
    reqs.write_text("\n".join(requirements(tree)) + "\n")
    subprocess.run([str(bin_python), "-m", "pip", "install", "--quiet", "--prefer-binary", "-r", str(reqs), *OPTIONAL],
                   check=True)
    site = subprocess.run([str(bin_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    names = sorted(n for mods in STUBS.values() for n in mods)
    Path(site, "a0_import_stubs.py").write_text(STUB_MODULE.format(names=names))
    Path(site, "a0_import_stubs.pth").write_text("import a0_import_stubs\n")
    (venv / ".optional").write_text("ok\n")
    (venv / ".ready").write_text("ok\n")
    return bin_python


def main(argv: list[str] | None = None) -> int:
    root = trees_root()
    if root is None:
        print("A0_TREES is not set to a folder of Agent-Zero trees", file=sys.stderr)
        return 2
    names = set(argv if argv is not None else sys.argv[1:])
    for tree in trees(root):
        if not names or tree.name in names:
            print(f"{tree.name}: {ensure_env(tree)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
