import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graph_engine import adapter  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_runtime(monkeypatch, tmp_path):
    """Each test gets its own library cache, one-time-log memory and Agent-Zero root."""
    adapter._runtimes.clear()
    monkeypatch.setenv("A0_ROOT", str(tmp_path / "a0"))
    monkeypatch.delenv("GRAPH_ENGINE_LIBRARY", raising=False)
    yield
    adapter._runtimes.clear()
