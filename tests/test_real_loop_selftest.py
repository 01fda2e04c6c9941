"""`install_graph_engine.sh --self-test` in real Agent-Zero trees (skipped without $A0_TREES, like the real loop)."""

import subprocess
from pathlib import Path

from a0real import INSTALLER, A0Copy

CHECKS = ("the plan starts in the first model call", "a failing result retries the step", "the run completes",
          "the workflow card shows every step done", "the audit log records each check",
          "the picture of the run is written", "nothing is left in the Agent-Zero tree")


def self_test(tree: A0Copy) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(INSTALLER), "--self-test", "--a0-root", str(tree.root),
                           "--python", str(tree.python)], capture_output=True, text=True, timeout=900)


def files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_the_self_test_passes_and_leaves_nothing_in_the_tree(a0_tree):
    before = files(a0_tree.root)
    done = self_test(a0_tree)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert lines[-1] == "PASS"
    for check in CHECKS:
        assert f"  ok   {check}" in lines
    assert files(a0_tree.root) == before


def test_the_self_test_fails_with_a_clear_line_when_the_pack_is_broken(a0_tree):
    library = a0_tree.installed("htn_plan_library.json")
    library.write_text(library.read_text()[:2000])  # a damaged installed library: no plan can start
    done = self_test(a0_tree)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1
    assert "  FAIL the plan starts in the first model call: the first call carries no [WORKFLOW: Bug Fix " \
           "Workflow] block" in lines
    assert lines[-1].startswith("FAIL (")
