"""The library cache: re-read on change, last good copy on a broken file, old plan versions kept."""

import json
import os

from graph_engine.session.catalogue import LibraryCache


def write(path, plans, mtime):
    path.write_text(json.dumps({"plans": plans}))
    os.utime(path, (mtime, mtime))


def linear(name):
    return {"name": name, "triggers": ["go"], "trigger_threshold": 1, "steps": [{"name": "s", "verify": {"type": "any_output"}}]}


def test_reload_on_change_and_last_good_on_broken_json(tmp_path):
    path = tmp_path / "lib.json"
    write(path, {"a": linear("A1")}, 1_000)
    cache = LibraryCache(str(path), recheck_seconds=0, background=False)
    lib, problems = cache.refresh()
    assert lib.get("a").name == "A1" and problems == []
    old_version = lib.get("a").version
    write(path, {"a": linear("A2")}, 2_000)
    lib, _ = cache.refresh()
    assert lib.get("a").name == "A2"
    assert cache.plan_version("a", old_version).name == "A1"  # a run started on A1 keeps it
    path.write_text("{broken")
    os.utime(path, (3_000, 3_000))
    lib, problems = cache.refresh()
    assert lib.get("a").name == "A2"
    assert len(problems) == 1 and "not valid JSON" in problems[0] and "keeping the last good library" in problems[0]
    assert cache.refresh() == (lib, [])  # said once


def test_recheck_interval_limits_file_checks(tmp_path):
    path = tmp_path / "lib.json"
    write(path, {"a": linear("A1")}, 1_000)
    cache = LibraryCache(str(path), recheck_seconds=3600, background=False)
    cache.refresh()
    write(path, {"a": linear("A2")}, 2_000)
    assert cache.refresh()[0].get("a").name == "A1"
    cache.recheck_seconds = 0
    assert cache.refresh()[0].get("a").name == "A2"


def test_an_edited_file_is_loaded_beside_the_passes_and_taken_when_ready(tmp_path):
    """With a library in use, no call reads, parses or checks the edited file: a thread loads it (its meaning
    index built too), the calls meanwhile keep the library they have, and the first call after it is ready takes
    it; a broken edit is told by that call, once."""
    path = tmp_path / "lib.json"
    write(path, {"a": linear("A1")}, 1_000)
    cache = LibraryCache(str(path), recheck_seconds=0)
    first, _ = cache.refresh()
    write(path, {"a": linear("A2")}, 2_000)
    assert cache.refresh() == (first, [])  # noticed: loading
    cache.wait_loaded()
    lib, problems = cache.refresh()
    assert lib is not first and lib.get("a").name == "A2" and problems == []
    assert lib.meaning_index()[0] is not None or lib.meaning_index()[1]  # built beside the passes (or off)
    path.write_text("{broken")
    os.utime(path, (3_000, 3_000))
    assert cache.refresh() == (lib, [])
    cache.wait_loaded()
    kept, problems = cache.refresh()
    assert kept is lib and len(problems) == 1 and "not valid JSON" in problems[0]
    assert cache.refresh() == (lib, [])


def test_missing_file_is_reported(tmp_path):
    cache = LibraryCache(str(tmp_path / "none.json"), recheck_seconds=0)
    lib, problems = cache.refresh()
    assert lib is None and "cannot read the plan library" in problems[0] and "no plans are active" in problems[0]


def test_bundled_library_compiles_without_problems():
    from graph_engine.authoring.library import load_library_file
    from graph_engine.tools.standin import LIBRARY
    lib = load_library_file(str(LIBRARY))
    assert lib.problems == () and len(lib.plans) == 10
    for plan in lib.plans.values():
        last = plan.success_path[-1]
        forward = [e.dst for e in plan.out_edges[last] if e.condition in ("on_success", "always")]
        assert [plan.nodes[d].type for d in forward] == ["exit"], plan.id


# ── inside Agent-Zero: reload while runs are in progress ────────────────────

from graph_engine.hosts.agent_zero import adapter  # noqa: E402
from scenario import exit_fail, exit_ok, fix_loop_plan, library_edited, started, use_library  # noqa: E402


def reload_now():
    library_edited()


def rewrite(path, plans):
    st = path.stat()
    path.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": plans}))
    os.utime(path, ns=(st.st_mtime_ns + 10**9, st.st_mtime_ns + 10**9))
    reload_now()


def test_a_run_keeps_the_plan_version_it_started_with(monkeypatch, tmp_path):
    path = use_library(monkeypatch, tmp_path, {"loop": fix_loop_plan()})
    s = started("loop please")
    version = s.state["plan_version"]
    changed = fix_loop_plan()
    changed["graph"]["nodes"]["test"]["verify"] = {"type": "output_contains", "value": "never printed"}
    rewrite(path, {"loop": changed})
    s.run_pass(exit_ok("fixed"))   # fix
    s.run_pass(exit_ok())          # test, judged by the version the run started with
    s.run_pass(exit_ok())
    assert s.state is None and s.agent._htn_last_run["events"][-1]["type"] == "plan_completed"
    assert s.agent._htn_last_run["plan_version"] == version
    s.user("loop please")          # a new run uses the new version
    s.run_pass(exit_ok())
    assert s.state["plan_version"] != version


def test_a_run_whose_plan_is_gone_ends_with_a_clear_message(monkeypatch, tmp_path):
    path = use_library(monkeypatch, tmp_path, {"loop": fix_loop_plan()})
    s = started("loop please")
    rewrite(path, {"other": dict(fix_loop_plan(), triggers=["other words"])})
    adapter._runtimes.clear()      # a restart: the old version is not known any more
    s.run_pass(exit_fail())
    assert s.state is None
    assert ("[HTN] Workflow 'Loop' ended: plan 'loop' is no longer in the library; start it again with a new "
            "request once the library has it") in s.log.texts("warning")


def test_a_plan_broken_by_an_edit_is_disabled_with_one_line_and_the_others_work(monkeypatch, tmp_path):
    other = dict(fix_loop_plan(), name="Other", triggers=["other words"])
    path = use_library(monkeypatch, tmp_path, {"loop": fix_loop_plan(), "other": other})
    s = started("loop please")
    broken = fix_loop_plan()
    broken["graph"]["edges"] = [e for e in broken["graph"]["edges"] if e["condition"] != "on_exhaust"]
    rewrite(path, {"loop": broken, "other": other})
    for _ in range(3):
        s.run_pass(exit_ok())
    lines = [t for t in s.log.texts("warning") if "plan 'loop' is disabled" in t]
    assert len(lines) == 1 and "[reachability] no path from the start node reaches it" in lines[0]
    assert lines[0].endswith(f"(and 2 more: run graph-engine validate {path})")
    s.user("other words please")
    s.run_pass(exit_ok())
    assert s.state["plan_id"] == "other"
