"""The command line starts quickly: `--version`, `--help` and a wrong command line import nothing but the
command line itself; each verb imports what it uses when it runs (the CPU-time budgets are rows of `make
bench`)."""

import json
import subprocess
import sys

from graph_engine.tools import cli, inputs
from graph_engine.tools.standin import ROOT

HEAVY = ("numpy", "wordllama", "jsonschema", "asyncio", "graph_engine.authoring", "graph_engine.matching",
         "graph_engine.core", "graph_engine.session", "graph_engine.tools.inputs", "graph_engine.tools.standin",
         "graph_engine.tools.triggers")


def imported_by(*argv: str) -> list[str]:
    """The modules a fresh process has imported after `graph-engine ARGV` (the verb's own exit caught)."""
    code = ("import sys; sys.path.insert(0, %r)\nfrom graph_engine.tools import cli\ntry:\n    cli.main(%r)\n"
            "except SystemExit:\n    pass\nimport json; print(json.dumps(sorted(sys.modules)))") % (
                str(ROOT / "extensions"), list(argv))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_version_help_and_a_wrong_command_line_import_nothing_heavy():
    for argv in (["--version"], ["--help"], ["triggers", "--help"], ["no-such-verb"]):
        loaded = imported_by(*argv)
        assert "graph_engine.tools.cli" in loaded, argv
        heavy = [m for m in loaded if m.startswith(HEAVY)]
        assert heavy == [], (argv, heavy)


def test_a_verb_imports_what_it_uses():
    loaded = imported_by("validate", str(ROOT / "no-such-library.json"))
    assert "graph_engine.tools.inputs" in loaded and "graph_engine.authoring.library" in loaded


def test_the_exit_codes_are_the_ones_the_inputs_use():
    assert (cli.INPUT, cli.FINDING) == (inputs.INPUT, inputs.FINDING) == (2, 1)
