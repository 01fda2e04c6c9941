"""The pack's settings: Agent-Zero's plugin config (v1.x), with environment variables winning where set.

On Agent-Zero v1.x the plugin's settings page saves them (``default_config.yaml`` in the plugin, overridden by a
``config.json`` for everyone, a project or an agent profile); ``helpers.plugins.get_plugin_config`` returns the
one that applies to an agent.  Without that helper (v0.9.x, or the pack installed outside ``usr/plugins``) the
defaults apply.  Each value is parsed on its own: a bad one is replaced by its default and reported in one line.
"""

from __future__ import annotations

import importlib
import os
import stat
import sys
import threading
import time
import weakref
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Callable

from .reading import kind_of

PLUGIN = "graph_workflow_engine"
LIBRARY_NAME = "htn_plan_library.json"
PICTURES = ("auto", "mermaid", "off")
DEFAULT_MAX_PLANS = 1000
DEFAULT_UTILITY_TIMEOUT = 10.0
MAX_UTILITY_TIMEOUT = 120.0

# setting -> (environment variable, default)
FIELDS: dict[str, tuple[str, Any]] = {
    "library_path": ("GRAPH_ENGINE_LIBRARY", ""),
    "project_plans_folder": ("GRAPH_ENGINE_PROJECT_PLANS", "graph_plans"),
    "picture": ("GRAPH_ENGINE_PICTURE", "auto"),
    "card": ("GRAPH_ENGINE_CARD", True),
    "max_plans": ("GRAPH_ENGINE_MAX_PLANS", DEFAULT_MAX_PLANS),
    "utility_model": ("GRAPH_ENGINE_UTILITY_MODEL", True),
    "utility_timeout": ("GRAPH_ENGINE_UTILITY_TIMEOUT", DEFAULT_UTILITY_TIMEOUT),
    "parallel_branches": ("GRAPH_ENGINE_PARALLEL_BRANCHES", True),
    "run_proposed": ("GRAPH_ENGINE_RUN_PROPOSED", False),
}


@dataclass(frozen=True)
class Settings:
    library_path: str = ""  # "" = the library found beside the extension files
    project_plans_folder: str = "graph_plans"
    picture: str = "auto"
    card: bool = True
    max_plans: int = DEFAULT_MAX_PLANS
    utility_model: bool = True  # ask Agent-Zero's utility model about the messages matching cannot settle
    utility_timeout: float = DEFAULT_UTILITY_TIMEOUT  # seconds its answer is waited for
    parallel_branches: bool = True  # a parallel node's branches run at once, each in a subordinate agent (v1.x)
    run_proposed: bool = False  # a workflow the agent proposes runs without waiting for the person's approval
    project_library: str = ""  # the chat's project's own library, when the chat is in a project that has one
    problems: tuple[str, ...] = ()


DEFAULTS = Settings()
# The settings of the hook call being run (library checks and pictures read them without being passed them).
ACTIVE: ContextVar[Settings | None] = ContextVar("graph_engine_settings", default=None)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("expected text")
    return value.strip()


def _folder(value: Any) -> str:
    text = _text(value).strip("/")
    if text.startswith("~") or ".." in text.replace("\\", "/").split("/"):
        raise ValueError("expected a folder inside the project (no '..', no leading '/')")
    return text


def _picture(value: Any) -> str:
    text = _text(value).lower()
    if text not in PICTURES:
        raise ValueError(f"expected one of {', '.join(PICTURES)}")
    return text


def _switch(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "on", "true", "yes"):
        return True
    if text in ("0", "off", "false", "no"):
        return False
    raise ValueError("expected on or off")


def _count(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected a whole number of at least 1")
    number = int(str(value).strip())
    if number < 1:
        raise ValueError("expected a whole number of at least 1")
    return number


def _seconds(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected seconds, more than 0 and at most {MAX_UTILITY_TIMEOUT:g}")
    number = float(str(value).strip())
    if not 0 < number <= MAX_UTILITY_TIMEOUT:  # (NaN compares false: refused too)
        raise ValueError(f"expected seconds, more than 0 and at most {MAX_UTILITY_TIMEOUT:g}")
    return number


PARSERS: dict[str, Callable[[Any], Any]] = {"library_path": _text, "project_plans_folder": _folder,
                                            "picture": _picture, "card": _switch, "max_plans": _count,
                                            "utility_model": _switch, "utility_timeout": _seconds,
                                            "parallel_branches": _switch, "run_proposed": _switch}


_ABSENT: set[str] = set()  # helpers modules this process could not import (tried once)


def _helper(name: str) -> Any:
    """Agent-Zero's ``helpers.<name>`` module when this is a v1.x process, else None (never raises)."""
    module = sys.modules.get(f"helpers.{name}")
    if module is not None or name in _ABSENT or "helpers.extension" not in sys.modules:
        return module
    try:
        return importlib.import_module(f"helpers.{name}")
    except Exception:  # noqa: BLE001 - a framework without it: the defaults apply
        _ABSENT.add(name)
        return None


def plugin_config(agent: Any) -> tuple[dict[str, Any], str]:
    """The plugin's saved settings for this agent (its project and profile), and a problem line or ''."""
    plugins = _helper("plugins")
    getter = getattr(plugins, "get_plugin_config", None)
    if getter is None:
        return {}, ""
    try:
        config = getter(PLUGIN, agent=agent)
    except Exception as exc:  # noqa: BLE001 - a config that cannot be read: the defaults apply
        return {}, (f"[HTN] The plugin settings of {PLUGIN} could not be read ({type(exc).__name__}: {exc}); "
                    "the defaults apply until they are saved again on the plugin's settings page")
    return (config if isinstance(config, dict) else {}), ""


def project_folder(agent: Any) -> str:
    """The folder of the project the agent's chat is in, or ''."""
    projects = _helper("projects")
    try:
        name = projects.get_context_project_name(agent.context) if projects is not None else None
        return str(projects.get_project_folder(name)) if name else ""
    except Exception:  # noqa: BLE001 - no project information: no project library
        return ""


RECHECK_SECONDS = 1.0  # an agent's settings are re-read when the ones kept are older than this
_RECENT: "weakref.WeakKeyDictionary[Any, tuple[float, Settings, bool]]" = weakref.WeakKeyDictionary()
_KEPT = threading.Lock()  # _RECENT is written by hook calls and by the thread that re-reads


def current(agent: Any, later: Callable[..., None] | None = None) -> Settings:
    """``read(agent)``, kept per agent and re-read when older than RECHECK_SECONDS (a pass calls two hooks).
    ``later(function, *args)``: runs a function off the loop; given, an old value is returned as it is and
    re-read by ``later`` (Agent-Zero's plugin config looks for its file in every scope, about 0.1 ms a read,
    on nearly every pass of a real chat), so a change saved on the settings page takes effect from the pass
    after the one that found the kept value old.  The first read of an agent is made here.  Never raises."""
    now = time.monotonic()
    try:
        seen = _RECENT.get(agent)  # read without the lock (a kept value is put whole): the usual case returns
    except TypeError:  # an agent object that cannot be weakly referenced: read every time
        return _read_or_defaults(agent)
    if seen is not None and now - seen[0] < RECHECK_SECONDS:
        return seen[1]
    try:
        with _KEPT:
            seen = _RECENT.get(agent)
            old = seen is not None and now - seen[0] >= RECHECK_SECONDS
            ask = old and later is not None and not seen[2]
            if ask:  # one re-read asked for at a time
                _RECENT[agent] = (seen[0], seen[1], True)
    except TypeError:  # an agent object that cannot be weakly referenced: read every time
        return _read_or_defaults(agent)
    if seen is None or (old and later is None):
        return _reread(agent)
    if ask:
        try:
            later(_reread, agent)
        except Exception:  # noqa: BLE001 - nothing runs off the loop: read it now
            return _reread(agent)
    return seen[1]


def _reread(agent: Any) -> Settings:
    value = _read_or_defaults(agent)
    with _KEPT:
        _RECENT[agent] = (time.monotonic(), value, False)
    return value


def _read_or_defaults(agent: Any) -> Settings:
    try:
        return read(agent)
    except Exception as exc:  # noqa: BLE001 - the agent's loop must go on
        return replace(DEFAULTS, problems=(f"[HTN] The settings of {PLUGIN} could not be read ({type(exc).__name__}: "
                                           f"{exc}); the defaults apply",))


_PARSED: dict[tuple, Settings] = {}  # (environment values, saved settings) -> parsed; two hook calls a pass


def read(agent: Any) -> Settings:
    """The settings that apply to this agent: environment variable, else saved setting, else default."""
    config, problem = plugin_config(agent)
    environment = tuple(os.environ.get(env) for env, _default in FIELDS.values())
    key = (environment, repr(sorted(config.items(), key=lambda kv: str(kv[0]))), problem)
    parsed = _PARSED.get(key)
    if parsed is None:
        if len(_PARSED) >= 64:
            _PARSED.clear()
        parsed = _PARSED[key] = _parse(config, environment, problem)
    folder = project_folder(agent) if parsed.project_plans_folder else ""
    if not folder:
        return parsed
    library, problem = project_library(os.path.join(folder, parsed.project_plans_folder, LIBRARY_NAME))
    if problem:
        return replace(parsed, problems=parsed.problems + (problem,))
    return replace(parsed, project_library=library) if library else parsed


def project_library(path: str) -> tuple[str, str]:
    """(the project's library, or ""; the problem with the one that is there, or ""): a project without one
    uses the global library in silence, a project whose library cannot be read is told so."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "", ""
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror or exc})"
    else:
        if stat.S_ISREG(st.st_mode):
            if os.access(path, os.R_OK):
                return path, ""
            problem = "cannot be read (permission denied)"
        else:
            problem = f"is {kind_of(st.st_mode)}, not a plan library file"
    return "", (f"[HTN] The project's plan library {path} {problem}; this chat uses the global library until it is "
                "fixed (make it a readable JSON file, or remove it)")


def _parse(config: dict[str, Any], environment: tuple, problem: str) -> Settings:
    problems = [problem] if problem else []
    values: dict[str, Any] = {}
    for (key, (env, default)), raw in zip(FIELDS.items(), environment):
        where = f"environment variable {env}"
        if raw is None or raw.strip() == "":
            raw, where = config.get(key, default), f"plugin setting '{key}'"
        try:
            values[key] = PARSERS[key](raw)
        except (TypeError, ValueError) as exc:
            values[key] = default
            problems.append(f"[HTN] {where} is {raw!r}: {exc}; using {default!r} until it is fixed")
    return Settings(**values, problems=tuple(problems))


def active(key: str) -> Any:
    """One setting of the hook call being run; outside a hook call, the environment variable or default."""
    current = ACTIVE.get()
    if current is not None:
        return getattr(current, key)
    env, default = FIELDS[key]
    raw = os.environ.get(env)
    try:
        return PARSERS[key](raw) if raw is not None and raw.strip() else default
    except (TypeError, ValueError):
        return default
