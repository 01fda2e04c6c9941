import sys
from pathlib import Path

import os
import tempfile

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Property tests: "ci" (the default, used by `make test`: 150 examples per property, derandomized) and
# "long" (HYPOTHESIS_PROFILE=long: 2,000 examples, for local runs).
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

from graph_engine import adapter  # noqa: E402

pytest_plugins = ["a0real"]  # the real-loop harness: fixtures a0_source, a0_tree; one line when it is skipped


@pytest.fixture(autouse=True)
def fresh_runtime(monkeypatch, tmp_path):
    """Each test gets its own library cache, one-time-log memory and Agent-Zero root."""
    adapter._runtimes.clear()
    monkeypatch.setenv("A0_ROOT", str(tmp_path / "a0"))
    monkeypatch.delenv("GRAPH_ENGINE_LIBRARY", raising=False)
    monkeypatch.delenv("GRAPH_ENGINE_PICTURE", raising=False)
    yield
    for rt in adapter._runtimes.values():  # a large library's background checks end with the test
        if rt.library.current is not None:
            rt.library.current.cancel()
    adapter._runtimes.clear()


# ── hygiene: a test run leaves nothing in the temp folder ───────────────────
# (pytest's own tmp_path folders are removed for passing tests: tmp_path_retention_policy in pyproject.toml)

_TEMP_BEFORE: set[str] = set()


def pytest_sessionstart(session):
    _TEMP_BEFORE.update(os.listdir(tempfile.gettempdir()))


def pytest_sessionfinish(session, exitstatus):
    if exitstatus != 0:
        return
    left = sorted(n for n in set(os.listdir(tempfile.gettempdir())) - _TEMP_BEFORE if not n.startswith("pytest-of-"))
    if left:
        session.exitstatus = 1
        sys.stderr.write(f"\nthe tests left {len(left)} entries in {tempfile.gettempdir()}: {left[:5]}\n")
