"""The library cache: re-read on change, last good copy on a broken file, old plan versions kept."""

import json
import os

from graph_engine.library import LibraryCache


def write(path, plans, mtime):
    path.write_text(json.dumps({"plans": plans}))
    os.utime(path, (mtime, mtime))


def linear(name):
    return {"name": name, "triggers": ["go"], "trigger_threshold": 1, "steps": [{"name": "s", "verify": {"type": "any_output"}}]}


def test_reload_on_change_and_last_good_on_broken_json(tmp_path):
    path = tmp_path / "lib.json"
    write(path, {"a": linear("A1")}, 1_000)
    cache = LibraryCache(str(path), recheck_seconds=0)
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
    cache = LibraryCache(str(path), recheck_seconds=3600)
    cache.refresh()
    write(path, {"a": linear("A2")}, 2_000)
    assert cache.refresh()[0].get("a").name == "A1"
    cache.recheck_seconds = 0
    assert cache.refresh()[0].get("a").name == "A2"


def test_missing_file_is_reported(tmp_path):
    cache = LibraryCache(str(tmp_path / "none.json"), recheck_seconds=0)
    lib, problems = cache.refresh()
    assert lib is None and "cannot read the plan library" in problems[0] and "no plans are active" in problems[0]


def test_bundled_library_compiles_without_problems():
    from graph_engine.library import load_library_file
    from graph_engine.standin import LIBRARY
    lib = load_library_file(str(LIBRARY))
    assert lib.problems == () and len(lib.plans) == 10
    for plan in lib.plans.values():
        last = plan.success_path[-1]
        forward = [e.dst for e in plan.out_edges[last] if e.condition in ("on_success", "always")]
        assert [plan.nodes[d].type for d in forward] == ["exit"], plan.id
