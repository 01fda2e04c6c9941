import sys
from pathlib import Path

import os
import shutil
import tempfile
import threading

import pytest
from hypothesis import HealthCheck, settings

HERE = Path(__file__).resolve().parent
# the harness (scenario, golden, a0real, ...) and each layer's folder: a test may borrow plans and steps from another
# folder's module (tests/tools/test_cli_inputs.py uses tests/core/test_properties.py's generated plans)
sys.path[:0] = [str(HERE), *sorted(str(p) for p in HERE.iterdir() if p.is_dir() and any(p.glob("test_*.py")))]

# Property tests: "ci" (the default, used by `make test`: 60 examples per property, derandomized), "deep"
# (`make test-deep`: 600 examples, derandomized) and "long" (HYPOTHESIS_PROFILE=long: 2,000 examples, random).
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("deep", max_examples=600, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

from graph_engine.hosts.agent_zero import adapter, cards  # noqa: E402

pytest_plugins = ["a0real"]  # the real-loop harness: fixtures a0_source, a0_tree; one line when it is skipped


@pytest.fixture(autouse=True)
def fresh_runtime(monkeypatch, tmp_path):
    """Each test gets its own library cache, one-time-log memory and Agent-Zero root."""
    adapter._runtimes.clear()
    monkeypatch.setenv("A0_ROOT", str(tmp_path / "a0"))
    monkeypatch.delenv("GRAPH_ENGINE_LIBRARY", raising=False)
    monkeypatch.delenv("GRAPH_ENGINE_PICTURE", raising=False)
    monkeypatch.setattr(cards, "DRAW_POLL", 0.005)  # the picture thread looks often: tests wait less
    yield
    assert cards.wait_for_display(), "a picture was still being drawn 30 s after the test"
    for rt in adapter._runtimes.values():  # a large library's background checks end with the test
        if rt.library.current is not None:
            rt.library.current.cancel()
    adapter._runtimes.clear()
    for thread in threading.enumerate():  # the meaning index (and the examples' check) a test started: done
        if thread.name in ("graph-engine-meaning", "graph-engine warm-up"):  # before the next test patches it away
            thread.join(300)
            assert not thread.is_alive(), "the meaning index was still being built 300 s after the test"


# ── hygiene: a test run leaves nothing in the temp folder ───────────────────
# The run gets a temp folder of its own (TMPDIR for the programs the tests start, tempfile.tempdir for the
# tests): what other programs on the machine write to the system's temp folder cannot fail the check, and
# what this run leaves behind is found. pytest's own tmp_path folders live inside it and are removed for
# passing tests (tmp_path_retention_policy in pyproject.toml); the folder is removed after a clean run.

RUN_TEMP = tempfile.mkdtemp(prefix="graph-engine-tests-")
os.chmod(RUN_TEMP, 0o755)  # the installer tests run a step as an unprivileged user, who must reach their folder
os.environ["TMPDIR"] = RUN_TEMP
tempfile.tempdir = RUN_TEMP
# no test downloads the web UI's layout library (installs without it say so in one line); the tests of the
# download (tests/tools/test_dagre.py) hand it a fake one
os.environ["GRAPH_ENGINE_NO_DOWNLOAD"] = "1"


def _open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: not counted
        return 0


FDS_AT_START = _open_descriptors()
FD_SLACK = 64  # what pytest, hypothesis and the loaded libraries may hold open by the end
THREADS_AT_START = threading.active_count()
THREAD_SLACK = 4  # the pack's one display thread, and what numpy or the loaded libraries keep


def pytest_sessionfinish(session, exitstatus):
    import gc
    gc.collect()  # runtimes the tests dropped: their audit logs close their files when collected
    if exitstatus == 0 and FDS_AT_START and _open_descriptors() > FDS_AT_START + FD_SLACK:
        session.exitstatus = 1
        sys.stderr.write(f"\nthe tests leaked file descriptors: {FDS_AT_START} open at the start, "
                         f"{_open_descriptors()} at the end (/proc/self/fd)\n")
        return
    if exitstatus == 0 and threading.active_count() > THREADS_AT_START + THREAD_SLACK:
        session.exitstatus = 1
        sys.stderr.write(f"\nthe tests left threads running: {[t.name for t in threading.enumerate()]}\n")
        return
    if exitstatus != 0:
        sys.stderr.write(f"\nthe test run's temp folder is kept: {RUN_TEMP}\n")
        return
    left = sorted(n for n in os.listdir(RUN_TEMP) if not n.startswith("pytest-of-"))
    if left:
        session.exitstatus = 1
        sys.stderr.write(f"\nthe tests left {len(left)} entries in {RUN_TEMP}: {left[:5]}\n")
        return
    shutil.rmtree(RUN_TEMP, ignore_errors=True)
