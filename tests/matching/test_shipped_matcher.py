"""What matching ships (matching/data/matcher.json, not_requests.json) is a boundary: a damaged file is refused
with one line, whole, and matching goes on by phrases; the shipped file matches what it was learned from."""

import base64
import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_engine.hosts.agent_zero import adapter
from graph_engine.matching import shipped
from graph_engine.tools import matcher_build
from graph_engine.tools.standin import Reply, Session

ORIGINAL = json.loads(open(shipped.MATCHER, encoding="utf-8").read())


def test_the_shipped_file_matches_its_inputs():
    """An edit of the bundled library's plans, of the labelled set or of not_requests.json without `make matcher`
    fails here, naming the command."""
    assert matcher_build.stale() == ""


def test_a_changed_input_makes_the_file_stale(tmp_path):
    lib = json.loads(open(matcher_build.default_paths()["library"]).read())
    lib["plans"]["bugfix_workflow"]["examples"].append("the totals are off by one, repair it")
    path = tmp_path / "lib.json"
    path.write_text(json.dumps(lib))
    said = matcher_build.stale(dict(matcher_build.default_paths(), library=str(path)))
    assert "make matcher" in said and "graph-engine build-matcher" in said


def load(path, nots=None):
    shipped._READ.clear()
    try:
        return shipped.load(np, str(path), str(nots) if nots else None)
    finally:
        shipped._READ.clear()


def damaged(tmp_path, change) -> str:
    data = json.loads(json.dumps(ORIGINAL))
    change(data)
    path = tmp_path / "matcher.json"
    path.write_text(json.dumps(data))
    return str(path)


def set_array(data, name, values):
    spec = data["arrays"][name]
    spec["data"] = base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()
    spec["shape"] = [len(values)]


def array_of(name):
    spec = ORIGINAL["arrays"][name]
    return np.frombuffer(base64.b64decode(spec["data"]), dtype="<f4").copy()


@pytest.mark.parametrize("change, said", [
    (lambda d: set_array(d, "gate_grams", [float("nan")] * len(array_of("gate_grams"))), "finite"),
    (lambda d: set_array(d, "net_out", [1e9] * len(array_of("net_out"))), "finite number of at most"),
    (lambda d: set_array(d, "gate_grams", array_of("gate_grams")[:-1]), "do not fit"),
    (lambda d: d["arrays"]["dense"].update(data="not base64 !!"), "not base64"),
    (lambda d: d["arrays"]["dense"].update(shape=[3, 3]), "holds"),
    (lambda d: d.update(format="something else"), "not a matcher file"),
    (lambda d: d["constants"].update(threshold="high"), "'constants'"),
    (lambda d: d.update(classes=["a", "a"]), "'classes'"),
    (lambda d: d["arrays"].pop("net_w"), "array 'net_w'"),
])
def test_damaged_contents_are_refused_with_one_line(tmp_path, change, said):
    ship, line = load(damaged(tmp_path, change))
    assert ship is None and said in line and "\n" not in line
    assert "matching by meaning is off" in line and "build-matcher" in line


def test_a_fifo_a_folder_a_huge_or_torn_file_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert "FIFO" in load(fifo)[1]  # not opened for reading in a way that waits for a writer
    assert "a folder" in load(tmp_path)[1]
    assert "cannot read" in load(tmp_path / "missing.json")[1]
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:
        fh.truncate(shipped.MAX_MATCHER_BYTES + 1)
    assert "byte limit" in load(huge)[1]
    torn = tmp_path / "torn.json"
    blob = open(shipped.MATCHER, "rb").read()
    torn.write_bytes(blob[: len(blob) // 2])
    assert "not valid JSON" in load(torn)[1]
    nots = tmp_path / "nots.json"
    nots.write_text(json.dumps({"messages": [{"text": "hi", "work": "no"}]}))
    assert "'messages'" in load(shipped.MATCHER, nots)[1]


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20), st.sampled_from(["constants", "classes", "arrays", "format", "inputs_sha256"]))
@settings(max_examples=60, deadline=None)
def test_any_value_in_any_field_is_refused_or_read_never_raised(value, field):
    data = dict(ORIGINAL, **{field: value})
    try:
        got = shipped.parse(np, data, {"messages": [{"text": "hi", "work": False}]})
    except shipped.ShippedError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(got, shipped.Shipped)


def test_in_the_engine_a_damaged_file_turns_meaning_off_and_phrases_still_start_plans(tmp_path, monkeypatch):
    """Weights full of NaN once made "put the app into a container" start the bug fix; refused, the message
    starts what its phrases start, and the chat's log says why in one line."""
    path = damaged(tmp_path, lambda d: set_array(d, "gate_grams", [float("nan")] * len(array_of("gate_grams"))))
    monkeypatch.setattr(shipped, "MATCHER", path)
    shipped._READ.clear()
    try:
        s = Session()
        s.user("hello")
        s.run_pass(Reply(final="hi"))
        for rt in adapter._runtimes.values():  # the meaning index tried (and refused the file) before the request
            rt.library.current.meaning_index(wait=True)
        s.user("please put the app into a container and run it on port 8080")
        s.run_pass(Reply(final="..."))
        assert s.state is None or s.state["plan_id"] != "bugfix_workflow"
        s.user("fix the bug in /tmp/test.py")
        s.run_pass(Reply(final="..."))
        assert s.state["plan_id"] == "bugfix_workflow"
        lines = [t for t in s.log.texts("warning") if "matcher.json" in t]
        assert len(lines) == 1 and "finite" in lines[0]
    finally:
        shipped._READ.clear()


@pytest.mark.deep
def test_building_again_gives_the_same_bytes(tmp_path):
    """`make matcher` on the same inputs writes the shipped file byte for byte (one thread)."""
    out = tmp_path / "matcher.json"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "graph_engine.tools", "build-matcher", "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == open(shipped.MATCHER, "rb").read()
