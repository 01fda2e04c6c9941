"""The real-loop harness's Agent-Zero process (graph_engine.a0driver) with the pack's two hooks profiled.

    python bench/real_loop_profiled.py PROFILE.prof|- --a0-root DIR --script S.json --out R.json

Run with the tree's Python and the installed pack on PYTHONPATH (bench/real_loop.py does).  Each call of the
two hooks after a monologue's first pass runs under one cProfile profiler, written to PROFILE.prof when the
process ends (``-``: no profile, only the driver's timings)."""

import cProfile
import os
import sys

from graph_engine import a0driver

PROFILE = sys.argv.pop(1)
profiler = cProfile.Profile()
patch_extensions = a0driver.Session._patch_extensions


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


if PROFILE != "-":
    a0driver.Session._patch_extensions = profiled_extensions
    os._exit = exit_with_profile
sys.exit(a0driver.main(sys.argv[1:]))
