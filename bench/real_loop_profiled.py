"""The real-loop harness's Agent-Zero process (graph_engine.hosts.agent_zero.a0driver) with the pack's two hooks profiled.

    python bench/real_loop_profiled.py PROFILE.prof|parts:PARTS.json|- --a0-root DIR --script S.json --out R.json

Run with the tree's Python and the installed pack on PYTHONPATH (bench/real_loop.py does).  ``PROFILE.prof``:
each call of the two hooks after a monologue's first pass runs under one cProfile profiler, written when the
process ends.  ``parts:PARTS.json``: each hook call's parts are timed with ``time.perf_counter_ns`` (no
profiler: the figures are the real ones, give or take the wrappers' own 0.1-0.2 µs a call), one record per
hook call: {"hook", "iteration", "total", <part>: ns, ...}; a part's time includes the parts it calls.
``-``: neither, only the driver's timings."""

import cProfile
import functools
import json
import os
import sys
import time

from graph_engine.hosts.agent_zero import a0driver

PROFILE = sys.argv.pop(1)
profiler = cProfile.Profile()
patch_extensions = a0driver.Session._patch_extensions

# (label, module of graph_engine or Agent-Zero's log, attribute): what a hook call's parts are
PARTS = (("settings", "boundary.settings", "current"), ("library look", "session.catalogue", "LibraryCache.refresh"),
         ("observe", "hosts.agent_zero.reading", "observe"), ("engine step", "core.engine", "step"),
         ("judge", "core.evidence", "_judge"), ("check", "core.evidence", "check"), ("render", "texts.render", "context"),
         ("apply", "hosts.agent_zero.adapter", "_apply"), ("audit", "hosts.agent_zero.keeping", "audit"),
         ("audit write", "session.audit", "AuditLog.write"), ("checkpoint", "session.audit", "AuditLog.checkpoint"),
         ("card", "hosts.agent_zero.cards", "show"), ("card text", "texts.card", "text"),
         ("log item update", "log", "LogItem.update"), ("log line", "hosts.agent_zero.lines", "log"))


def profiled_extensions(session) -> None:
    """The driver's timed hooks, each call also profiled (the timing is taken outside the profiler)."""
    patch_extensions(session)
    ext = session._helper("extension")
    timed_lookup = ext._get_extensions

    def get_extensions(folder):
        classes = timed_lookup(folder)
        for cls in classes:
            if cls.__module__.split(".")[-1] in a0driver.HOOK_FILES and not getattr(cls, "_profiled", False):
                inner = cls.execute

                async def execute(self, *args, _inner=inner, **kwargs):
                    if not getattr(kwargs.get("loop_data"), "iteration", 0):
                        return await _inner(self, *args, **kwargs)  # a monologue's first pass: not profiled
                    profiler.enable()
                    try:
                        return await _inner(self, *args, **kwargs)
                    finally:
                        profiler.disable()
                cls.execute, cls._profiled = execute, True
        return classes

    ext._get_extensions = get_extensions


def exit_with_profile(code: int, _exit=os._exit) -> None:
    profiler.dump_stats(PROFILE)
    _exit(code)


def timed_parts(path: str) -> None:
    """Wrap the parts in PARTS and ``adapter.run_hook`` with ``perf_counter_ns`` sums per hook call."""
    import importlib

    spent: dict[str, int] = {}
    records: list[dict] = []

    def wrap(owner, attr: str, label: str) -> None:
        real = getattr(owner, attr)

        @functools.wraps(real)
        def timed(*args, **kwargs):
            started = time.perf_counter_ns()
            try:
                return real(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0) + time.perf_counter_ns() - started
        setattr(owner, attr, timed)

    def wrap_parts(module_of) -> None:
        for label, module, attr in PARTS:
            owner = module_of(module)
            if owner is None:
                continue
            *outer, name = attr.split(".")
            for part in outer:
                owner = getattr(owner, part)
            wrap(owner, name, label)

    wrap_parts(lambda m: importlib.import_module(f"graph_engine.{m}") if m != "log" else None)
    adapter = importlib.import_module("graph_engine.hosts.agent_zero.adapter")
    run_hook = adapter.run_hook

    async def timed_hook(agent, loop_data, hook, ext_file, runtime=None):
        spent.clear()
        started = time.perf_counter_ns()
        try:
            return await run_hook(agent, loop_data, hook, ext_file, runtime)
        finally:
            records.append({"hook": hook, "iteration": getattr(loop_data, "iteration", None),
                            "total": time.perf_counter_ns() - started, **spent})
    adapter.run_hook = timed_hook
    session_init = a0driver.Session.__init__

    def init(session, *args, **kwargs):
        session_init(session, *args, **kwargs)
        wrap_parts(lambda m: session._helper("log") if m == "log" else None)
    a0driver.Session.__init__ = init

    def exit_with_parts(code: int, _exit=os._exit) -> None:
        with open(path, "w") as fh:
            json.dump(records, fh)
        _exit(code)
    os._exit = exit_with_parts


if PROFILE.startswith("parts:"):
    timed_parts(PROFILE[len("parts:"):])
elif PROFILE != "-":
    a0driver.Session._patch_extensions = profiled_extensions
    os._exit = exit_with_profile
sys.exit(a0driver.main(sys.argv[1:]))
