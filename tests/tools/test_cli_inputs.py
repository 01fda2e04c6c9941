"""The command line on any input: no traceback, bad input exits 2 with one line on stderr (with --json, one JSON
error object on stdout); what `export` writes re-imports to the same plan."""

import contextlib
import dataclasses
import io
import json
import os

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_properties import graph_plans

from graph_engine.authoring.dot_plan import load_dot_plan
from graph_engine.authoring.library import check_document
from graph_engine.core.model import Plan, compile_plan
from graph_engine.tools import cli
from graph_engine.tools import triggers as trig
from graph_engine.tools.standin import FIXTURES, LIBRARY


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # --help and --version print and exit 0
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def refused(code: int, out: str, err: str, as_json: bool) -> str:
    """An input that cannot be used: exit 2, one line on stderr, and with --json one error object on stdout."""
    assert code == 2 and "Traceback" not in out + err
    assert len(err.splitlines()) == 1 and err.startswith("graph-engine"), err
    if as_json:
        answer = json.loads(out)
        assert answer["ok"] is False and answer["error"]["message"] in err
    else:
        assert out == ""
    return err


# ── the reproducers ─────────────────────────────────────────────────────────


@pytest.mark.parametrize("line", ["[1]", "5", "null", '"text"', "[" * 100_000])
@pytest.mark.parametrize("as_json", [False, True])
def test_explain_on_a_log_line_that_is_no_event(tmp_path, line, as_json):
    log = tmp_path / "run.jsonl"
    log.write_text(line + "\n")
    err = refused(*run(["explain", str(log)] + ["--json"] * as_json), as_json)
    assert "holds no event of a run" in err


def test_explain_reads_the_events_of_a_log_with_odd_lines_and_fields(tmp_path):
    log = tmp_path / "run.jsonl"
    lines = ["[1]", "5", "null", json.dumps({"type": "plan_activated", "node": [], "plan": 7, "seq": 1}),
             json.dumps({"type": "node_verified", "node": "test", "outcome": {"x": 1}, "seq": 2}),
             json.dumps({"type": "edge_followed", "from": "test", "seq": 3})]
    log.write_text("\n".join(lines) + "\n")
    code, out, err = run(["explain", "--json", str(log)])
    assert code == 0 and err == "" and [s["node"] for s in json.loads(out)["steps"]] == ["test"]


def test_prompts_on_a_library_whose_plans_are_all_disabled_says_so(tmp_path):
    lib = tmp_path / "lib.json"
    lib.write_text(json.dumps({"plans": {"p": {"name": "P", "triggers": ["go"], "steps": [{"name": "s"}]}}}))
    err = refused(*run(["prompts", str(lib)]), False)
    assert f"{lib}: no plan loads (1 error(s): " in err and f"run graph-engine validate {lib}" in err
    refused(*run(["prompts", "--json", str(lib)]), True)


def test_a_usage_error_is_one_line_and_a_json_object_with_json():
    err = refused(*run(["select", str(LIBRARY), "--plan", "bugfix_workflow", "--json"]), True)
    assert "the following arguments are required: --from" in err and err.startswith("graph-engine select: ")
    err = refused(*run(["frobnicate"]), False)
    assert "invalid choice: 'frobnicate'" in err


def plan_with_float_weight_and_allow_partial() -> dict:
    from scenario import fix_loop_plan
    raw = fix_loop_plan()
    raw["graph"]["nodes"]["test"]["allow_partial"] = True
    raw["graph"]["edges"][0]["_attractor"] = {"cost": 1e16}  # an attribute DOT carried in, a large float
    raw["graph"]["edges"][1]["weight"] = 1.5e-7
    return raw


def exported(raw: dict, tmp_path, plan_id: str = "p") -> str:
    lib = tmp_path / f"{plan_id}-lib.json"
    lib.write_text(json.dumps({"plans": {plan_id: raw}}))
    code, out, err = run(["export", "--library", str(lib), "--plan", plan_id])
    assert code == 0 and err == "", err
    return out


def same_plan(a: Plan, b: Plan) -> None:
    """Every field of the compiled plans (the version is a hash of the JSON, which DOT spells its own way)."""
    for f in dataclasses.fields(Plan):
        if f.name not in ("version", "raw"):
            assert getattr(a, f.name) == getattr(b, f.name), f.name


def test_export_keeps_floats_past_1e16_and_allow_partial(tmp_path):
    raw = plan_with_float_weight_and_allow_partial()
    text = exported(raw, tmp_path)
    assert "cost=10000000000000000.0" in text and "weight=0.00000015" in text and "allow_partial=true" in text
    pid, back, found = load_dot_plan(text)
    assert found == [] and back["graph"]["nodes"]["test"]["allow_partial"] is True
    assert back["graph"]["edges"][0]["_attractor"] == {"cost": 1e16}
    same_plan(compile_plan(pid, back), compile_plan("p", raw))


def test_export_of_a_plan_dot_cannot_name_is_refused_in_one_line(tmp_path):
    from scenario import fix_loop_plan
    lib = tmp_path / "lib.json"
    lib.write_text(json.dumps({"plans": {"my-plan": fix_loop_plan()}}))
    err = refused(*run(["export", "--library", str(lib)]), False)
    assert "plan id 'my-plan' is not a DOT identifier" in err and "--format mermaid" in err


# ── export re-imports to the same plan, for any plan ────────────────────────

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
WEIGHT = st.integers(-10 ** 9, 10 ** 9) | st.floats(-1e9, 1e9) | st.sampled_from([1.5e-7, 5e-324, 1e9, -1e9])
LARGE = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e16, -1e16, 1e300, 5e-324])


@st.composite
def decorated_plans(draw):
    """Random valid graph plans with the fields export must carry: texts with any character, weights of any
    size, allow_partial, goal gates, labels."""
    raw = draw(graph_plans())
    raw["description"] = draw(TEXT)
    raw["name"] = draw(TEXT.filter(str.strip))
    for node in raw["graph"]["nodes"].values():
        if node["type"] == "task":
            node["allow_partial"] = draw(st.booleans())
            node["goal_gate"] = draw(st.booleans())
            node["action"] = draw(TEXT)
            node["tool_hint"] = draw(TEXT)
    for edge in raw["graph"]["edges"]:
        if draw(st.booleans()):
            edge["weight"] = draw(WEIGHT)
        if draw(st.booleans()):
            edge["label"] = draw(TEXT)
        if draw(st.booleans()):
            edge["_attractor"] = {"cost": draw(LARGE)}
    return raw


@given(raw=decorated_plans())
def test_export_re_imports_to_the_same_plan(tmp_path_factory, raw):
    assume("p" in check_document({"plans": {"p": raw}}).plans)
    pid, back, _ = load_dot_plan(exported(raw, tmp_path_factory.mktemp("export")))
    assert pid == "p"
    same_plan(compile_plan(pid, back), compile_plan("p", raw))
    assert [e.get("_attractor") for e in back["graph"]["edges"]] == [e.get("_attractor") for e in raw["graph"]["edges"]]


# ── any command line ────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Files of every kind a user may name: good, bad, empty, binary, deep, of the wrong shape, a folder, a FIFO,
    a device that never ends."""
    d = tmp_path_factory.mktemp("inputs")
    blobs = {"lib.json": LIBRARY.read_bytes(), "empty.json": b"", "binary.json": b"\0\1\2", "bad.json": b"{nope",
             "list.json": b"[1, 2]", "deep.json": b"[" * 50_000, "null.json": b"null",
             "state.json": json.dumps({"events": [5, {"type": "node_entered", "node": {}}]}).encode(),
             "run.jsonl": b"[1]\n5\nnull\n", "plan.dot": b"digraph p { start [shape=Mdiamond] a [prompt=x] "
                                                           b"done [shape=Msquare] start -> a -> done }",
             "bad.dot": b"digraph { a -- b", "lint.json": (FIXTURES / "lint" / "clean.json").read_bytes()}
    for name, blob in blobs.items():
        (d / name).write_bytes(blob)
    os.mkfifo(d / "pipe.json")  # opened for reading, it would block: refused as not a regular file
    return [str(d / n) for n in blobs] + [str(d / "missing.json"), str(d), str(d / "pipe.json"), "/dev/zero"]


VERBS = ["validate", "triggers", "prompts", "explain", "inspect", "export", "render", "select", "simulate"]
OPTIONS = ["--plan", "--library", "--cases", "--from", "--outcome", "--outcomes", "--context", "--answers",
           "--expect", "--transcript", "--trace", "--format", "--json", "--auto-approve", "--allow-invalid"]
VALUES = st.sampled_from(["bugfix_workflow", "test", "start", "p", "fail", "success", "{}", "[1]", "5", "null",
                          '{"status": "fail"}', '{"test": [{"status": "fail"}]}', "dot", "mermaid", "gif", "",
                          "-", "[" * 3000, '{"a": ' * 2000]) | st.text(max_size=8)


@pytest.fixture(scope="module")
def few_cases():
    """`triggers` without --cases scores the bundled labelled set: here a few of its cases that teach no model (so
    no fold is trained), since this test is about the command line, not the figures (tests/matching/test_triggers.py)."""
    load = trig.load_cases
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trig, "load_cases", lambda path: [c for c in load(path) if "split" in c][:24])
        yield


@settings(max_examples=max(20, settings.default.max_examples // 3), deadline=None)  # each runs a whole verb
@given(data=st.data())
def test_no_command_line_gives_a_traceback(inputs, few_cases, data):
    argv = [data.draw(st.sampled_from(VERBS))]
    for _ in range(data.draw(st.integers(0, 5))):
        kind = data.draw(st.integers(0, 2))
        if kind == 0:
            argv.append(data.draw(st.sampled_from(inputs)))
        elif kind == 1:
            argv += [data.draw(st.sampled_from(OPTIONS)), data.draw(st.sampled_from(inputs) | VALUES)]
        else:
            argv.append(data.draw(st.sampled_from(OPTIONS)))
    code, out, err = run(argv)
    # (a labelled message may quote a traceback: only a line that starts one is Python's)
    assert not any(line.startswith("Traceback (most recent call last)") for line in (out + err).splitlines()) \
        and "internal error" not in err, (argv, err)
    assert code in (0, 1, 2), (argv, code)
    if code == 2:  # refused: a line per refusal (validate: per file it cannot read, beside its report)
        assert err and all(line.startswith("graph-engine") for line in err.splitlines()), err
        if "--json" in argv:
            json.loads(out)  # one JSON document: the error object, or validate's findings


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_refuses_a_missing_file_with_the_error_object(tmp_path, verb):
    import jsonschema
    from test_attractor_spec import SCHEMA
    missing = str(tmp_path / "missing.json")
    argv = {"validate": [missing], "triggers": ["--library", missing], "prompts": [missing], "explain": [missing],
            "inspect": [missing], "export": ["--library", missing], "render": [missing],
            "select": [missing, "--from", "x"], "simulate": [missing]}[verb]
    code, out, err = run([verb, "--json", *argv])
    refused(code, out, err, True)
    jsonschema.validate(json.loads(out), {"$defs": SCHEMA["$defs"], "$ref": "#/$defs/error"})
