"""The audit log: one JSON line per workflow event, appended per run.

Files: ``<runs dir>/<chat id>/<run id>.jsonl`` where the runs dir is
``GRAPH_ENGINE_RUNS_DIR`` or ``<Agent-Zero root>/usr/graph_engine/runs``.  A line carries the time, the chat id, the agent number, the run id,
the plan id and version hash, and the event (its type, turn, seq, node and the
event's own fields: verdict and reason with the evidence's sha256, the edge
taken with its condition, ...).

Exactly once, whatever stops the process:

* The run's checkpoint (its state as of its newest event, ``checkpoint``) is written BEFORE the event lines it
  holds; so the log is never ahead of the checkpoint, and a restart that resumes from the checkpoint writes the
  lines a stop kept from the log (``missing``).  A state behind its log (a checkpoint damaged or deleted by
  hand) is refused by the adapter: judging again would write the same verdicts twice.
* Each seq is written once: the writer knows the last seq of each log (read from its tail when it opens it)
  and leaves out the lines it already holds.
* Lines are whole: a write that fails part way (a full disk) is cut back to where it started, so no fragment
  is left for a later line to be glued to; a log found ending in a fragment (a stop mid-write) has it moved
  aside to ``<run>.jsonl.torn`` before anything is appended, and the adapter says so in one line.
* Only a regular file is written, opened without blocking: a FIFO, a device or a folder in a log's place is
  refused at once.

The lines of one hook call go out in a single write to an append-only descriptor (no buffer in this process)
before the call returns.  Before each write the open file is checked to still be the file at its path (device
and inode): a deleted folder is made again; a folder replaced by a file makes the write fail.  The adapter keeps
lines that could not be written in a spool saved with the chat, and writes them, oldest first, once a
checkpoint could be written again.

Retention: a chat's folder keeps its newest ``GRAPH_ENGINE_RUNS_KEEP`` files
(default 50): when creating a run file would take it over that number by a fifth,
the oldest are deleted down to the number; once per process, run files older
than ``GRAPH_ENGINE_RUNS_DAYS`` days (default 30) are deleted in every chat
folder, and chat folders left empty are removed.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import threading
import time
import weakref
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any, Iterator

from . import journal
from ..boundary.reading import read_regular
from ..core.state import clean_event, logged

try:  # optional speed-up; the standard library is enough
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
DEFAULT_KEEP = 50
DEFAULT_DAYS = 30
HEAD_KEYS = frozenset(("time", "chat", "agent", "run", "plan", "version"))
MAX_OPEN = 16  # run files kept open between calls (one per active run)
MAX_LOG_BYTES = 64 * 1024 * 1024  # a run log read back (explain, tests)
PICTURE_SUFFIXES = (".svg", ".mmd")  # the picture of a run, written beside its log when it ends
CHECKPOINT_SUFFIX = ".state.json"  # the run's state as of its newest audit line, beside its log
JOURNAL_SUFFIX = ".state.journal"  # what changed since the snapshot, one record per pass (journal.py)
CHAIN_KEY = "checkpoint_chain"  # in a snapshot: the name its journal's records give it
MAX_CHECKPOINT = 8 << 20
MIN_JOURNAL = 64 * 1024  # a journal is folded into a new snapshot past twice the snapshot's size, or this
_NOFOLLOW, _CLOEXEC = getattr(os, "O_NOFOLLOW", 0), getattr(os, "O_CLOEXEC", 0)
TORN_SUFFIX = ".torn"  # beside a log: fragments of lines a stop cut short, moved out of the log
TAIL_BYTES = 256 * 1024  # read from a log's end to find its last whole line (a line is at most a few KB)
_SEQ = re.compile(rb'"seq":\s*(\d+)')


def _write(fd: int, data: bytes) -> int:
    """os.write: every byte the pack writes to a run's files goes through here (the crash tests stop here)."""
    return os.write(fd, data)


_ENCODE = json.JSONEncoder(ensure_ascii=False, default=str, check_circular=False, separators=(", ", ": ")).encode


_SECOND: list[Any] = [None, b""]  # the current second as the start of a line: b'{"time":"2026-11-22T01:02:03'
_MILLIS = tuple(f'.{ms:03d}+00:00",'.encode() for ms in range(1000))


def _time_prefix() -> bytes:
    """The start of a line up to the time's closing quote: UTC with milliseconds, as datetime.isoformat
    gives it (the second's text is made once per second)."""
    t = time.time()
    sec = int(t)
    if _SECOND[0] != sec:
        _SECOND[0] = sec
        _SECOND[1] = b'{"time":"' + datetime.fromtimestamp(sec, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S").encode()
    return _SECOND[1] + _MILLIS[min(int((t - sec) * 1000), 999)]


def _encode(value: dict[str, Any]) -> bytes:
    """One JSON object as UTF-8 bytes (orjson when present; a lone surrogate falls back to the standard
    encoder, which escapes it)."""
    if _orjson is not None:
        try:
            return _orjson.dumps(value, default=str)
        except TypeError:
            pass
    return _ENCODE(value).encode("utf-8", "backslashreplace")


def runs_dir(a0_root: str) -> str:
    return os.environ.get("GRAPH_ENGINE_RUNS_DIR") or os.path.join(a0_root, "usr", "graph_engine", "runs")


def safe_name(text: str) -> str:
    return _SAFE.sub("_", text)[:80] or "unknown"


def _env_int(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        return default


class AuditLog:
    def __init__(self, root_dir: str) -> None:
        self.root = root_dir
        self._swept = False
        self._open: OrderedDict[str, tuple[int, tuple[int, int]]] = OrderedDict()  # path -> (append-only
        # descriptor, the (device, inode) it was opened on)
        self._paths: dict[tuple[str, str], str] = {}
        self._heads: dict[tuple, bytes] = {}  # (path, agent, plan, version) -> the fixed part of a line
        self._files_in: dict[str, int] = {}  # chat folder -> run files counted since the last prune
        self._journals: OrderedDict[str, _Journal] = OrderedDict()  # run file -> its checkpoint's journal
        self._written: dict[str, int] = {}  # run file -> the last seq it holds (known since it was opened)
        self.notes: list[str] = []  # what the adapter says once in the agent's log (a torn line moved aside)
        weakref.finalize(self, _close_descriptors, self._open, self._journals)  # a log dropped closes its files

    def path(self, chat_id: str, run_id: str) -> str:
        key = (chat_id, run_id)
        path = self._paths.get(key)
        if path is None:
            if len(self._paths) > 1024:
                self._paths.clear()
            path = self._paths[key] = os.path.join(self.root, safe_name(chat_id), f"{safe_name(run_id)}.jsonl")
        return path

    def append(self, state: dict[str, Any], chat_id: str, agent_number: int) -> int:
        """Write the state's events not written yet; return how many.  Raises OSError (the lines stay
        pending in the state: ``audit_seq`` moves only when they are written)."""
        taken = self.take(state, chat_id, agent_number)
        if taken is None:
            return 0
        path, blob, seq = taken
        self.write(path, blob, done=state.get("status", "active") != "active")
        logged(state, seq)
        return blob.count(b"\n")

    def take(self, state: dict[str, Any], chat_id: str, agent_number: int,
             after: int | None = None) -> tuple[str, bytes, int] | None:
        """(the run's file, its lines not written yet, the seq they reach), or None when there are none;
        ``after``: the seq the lines start after (default: the state's ``audit_seq``)."""
        done = (state.get("audit_seq", 0) or 0) if after is None else after
        events = state.get("events") or ()
        start = len(events)  # events are in seq order: the pending ones are the tail
        while start and events[start - 1].get("seq", 0) > done:
            start -= 1
        if start == len(events):
            return None
        path = self.path(chat_id, state.get("run_id", "run"))
        head = self._head(path, chat_id, agent_number, state)
        prefix = _time_prefix() + head
        blob = b"".join(prefix + _encode(event)[1:] + b"\n" if HEAD_KEYS.isdisjoint(event)
                        else self._merged(prefix, event) for event in events[start:])
        return path, blob, events[-1]["seq"]

    def write(self, path: str, blob: bytes, done: bool = False) -> None:
        """Append whole lines in one write (the kernel has them when it returns: a stop of this process loses
        nothing written), leaving out those whose seq the log holds already.  A write that fails part way is cut
        back to where it started (no fragment stays).  The open file is first checked to still be the file at
        ``path`` (a deleted or replaced folder is made again, or the write fails).  Raises OSError."""
        fd = self._handle(path)
        blob = self._new_lines(path, blob)
        if not blob:
            if done:
                self.close(path)
            return
        try:
            start = os.lseek(fd, 0, os.SEEK_END)
        except OSError:
            self.close(path)
            raise
        try:
            written = _write(fd, blob)
            while written < len(blob):
                written += _write(fd, blob[written:])
        except OSError:
            try:  # what went out of this write: back out, whole lines only
                os.ftruncate(fd, start)
            except OSError:
                pass
            self.close(path)
            raise
        last = _last_seq_in(blob)
        if last is not None:
            self._written[path] = last
        if done:
            self.close(path)  # the run ended: its file is complete

    def _new_lines(self, path: str, blob: bytes) -> bytes:
        """The lines of ``blob`` whose seq is past the last the log holds."""
        known = self._written.get(path, 0)
        if not known:
            return blob
        kept = [line for line in blob.splitlines(keepends=True) if (_seq_of(line) or 0) > known]
        return b"".join(kept)

    def last_seq(self, path: str) -> int:
        """The last seq a run's log holds (0 without a log); its torn end, if any, moved aside first."""
        if not os.path.exists(path):
            return 0
        self._handle(path)
        return self._written.get(path, 0)

    def checkpoint(self, path: str, state: dict[str, Any]) -> str:
        """The run's checkpoint brought to ``state`` (as of the audit lines just written to ``path``): one record
        appended to its journal, or a new snapshot (the first of this process for the run, a pass a record cannot
        say, a journal grown past its bound).  A pass costs what it changed; a snapshot's cost is spread over
        the passes its journal's bound allows.  Agent-Zero saves the chat only at the end of a pass; this
        survives a stop in the middle of one.  Returns why it was not written, or ""."""
        kept = self._journals.pop(path, None)
        if kept is not None:
            if kept.append(journal_path(path), state):
                self._keep_journal(path, kept)
                return ""
            kept.close()  # (its file gone, or a pass a record cannot say): a snapshot, in a folder made again
        try:
            self._folder_for(path)
        except OSError as exc:
            return exc.strerror or str(exc)
        try:
            data = _dumps(state)
        except (TypeError, ValueError) as exc:
            return str(exc)
        mark = journal.mark(state) if state.get("status", "active") == "active" else None
        chain = os.urandom(6).hex()
        problem, opened = _write_snapshot(path, data, chain, keep=mark is not None)
        if opened is not None and mark is not None:
            self._keep_journal(path, _Journal(*opened, chain, max(MIN_JOURNAL, 2 * len(data)), mark))
        return problem

    def _keep_journal(self, path: str, kept: _Journal) -> None:
        self._journals[path] = kept
        while len(self._journals) > MAX_OPEN:
            self._journals.popitem(last=False)[1].close()

    def _head(self, path: str, chat_id: str, agent_number: int, state: dict[str, Any]) -> bytes:
        """The fields every line of a run repeats, encoded once: chat, agent, run, plan, version."""
        key = (path, agent_number, state.get("plan_id", ""), state.get("plan_version", ""))
        head = self._heads.get(key)
        if head is None:
            if len(self._heads) > 1024:
                self._heads.clear()
            head = self._heads[key] = _encode({"chat": chat_id, "agent": agent_number, "run": state.get("run_id", ""),
                                               "plan": key[2], "version": key[3]})[1:-1] + b","
        return head

    @staticmethod
    def _merged(prefix: bytes, event: dict[str, Any]) -> bytes:
        """A line for an event that repeats a head field (plan_activated names its plan): the head's value
        is kept, the event's copy dropped, so that every key appears once."""
        rest = {k: v for k, v in event.items() if k not in HEAD_KEYS}
        return prefix + _encode(rest)[1:] + b"\n"

    def _handle(self, path: str) -> int:
        opened = self._open.get(path)
        if opened is not None:
            if _identity(path) == opened[1]:  # one stat: the open file's identity does not change
                self._open.move_to_end(path)
                return opened[0]
            self.close(path)  # deleted or replaced since it was opened: its lines would go nowhere
        self._folder_for(path)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, 0o644)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # a FIFO or a device in its place: never written, never waited on
                raise OSError(errno.EINVAL, f"{path} is not a regular file")
            self._written[path] = self._mend(fd, path, st.st_size)
        except OSError:
            os.close(fd)
            raise
        self._open[path] = (fd, (st.st_dev, st.st_ino))
        while len(self._open) > MAX_OPEN:
            self.close(next(iter(self._open)))
        return fd

    def _folder_for(self, path: str) -> None:
        """Before a run's first file is made: its chat's folder, made (and its oldest runs pruned)."""
        if not os.path.exists(path):
            folder = os.path.dirname(path)
            self._prune(folder)
            os.makedirs(folder, exist_ok=True)

    def _mend(self, fd: int, path: str, size: int) -> int:
        """A log opened for appending: a fragment after its last newline (a stop cut a line short) is moved to
        ``<run>.jsonl.torn`` and cut off, so the next line starts on a line of its own; returns the last seq of
        its whole lines."""
        if size == 0:
            return 0
        start = max(0, size - TAIL_BYTES)
        tail = os.pread(fd, size - start, start)
        end = tail.rfind(b"\n") + 1
        if end < len(tail):
            fragment = tail[end:]
            problem = _write_file(path + TORN_SUFFIX, fragment + b"\n", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            if problem:
                raise OSError(errno.EIO, f"its torn last line could not be kept aside ({problem})")
            os.ftruncate(fd, start + end)
            self.notes.append(f"{path}: its last line was cut short ({len(fragment)} bytes, a stop during a write); "
                              f"the fragment was moved to {path + TORN_SUFFIX} and the log goes on from its last "
                              "whole line")
        return _last_seq_in(tail[:end]) or 0

    def close_all(self) -> None:
        """Every descriptor this log holds (run files and journals): a runtime that is dropped closes them."""
        for path in list(self._open):
            self.close(path)
        while self._journals:
            self._journals.popitem()[1].close()

    def close(self, path: str) -> None:
        opened = self._open.pop(path, None)
        if opened is not None:
            try:
                os.close(opened[0])
            except OSError:
                pass

    def _prune(self, chat_dir: str) -> None:
        """Keep the newest files of the chat; the folder is listed only when it may be over the limit."""
        keep = _env_int("GRAPH_ENGINE_RUNS_KEEP", DEFAULT_KEEP)
        count = self._files_in.get(chat_dir)
        if count is None or count + 1 > keep + max(1, keep // 5):  # list the folder only now and then
            files = sorted(_run_files(chat_dir), key=lambda p: (os.path.getmtime(p), p))
            for old in files[: max(0, len(files) - (keep - 1))]:
                _unlink_run(old)
            _unlink_strays(chat_dir)
            count = min(len(files), keep - 1)
        self._files_in[chat_dir] = count + 1
        if not self._swept:
            self._swept = True
            self.sweep()

    def sweep(self) -> None:
        cutoff = time.time() - _env_int("GRAPH_ENGINE_RUNS_DAYS", DEFAULT_DAYS) * 86400
        try:
            chats = [os.path.join(self.root, d) for d in os.listdir(self.root)]
        except OSError:
            return
        for chat in chats:
            if not os.path.isdir(chat):
                continue
            for path in _run_files(chat):
                try:
                    if os.path.getmtime(path) < cutoff:
                        _unlink_run(path)
                except OSError:
                    continue
            _unlink_strays(chat)
            try:
                os.rmdir(chat)  # only succeeds when empty
            except OSError:
                pass


class _Journal:
    """A run's checkpoint journal as this process writes it: its append-only descriptor and the (device, inode)
    it was opened on, the name of the snapshot its records follow, the records' bytes and their bound, and
    the mark of the state they replay to."""

    __slots__ = ("fd", "ident", "chain", "size", "limit", "mark")

    def __init__(self, fd: int, ident: tuple[int, int], chain: str, limit: int, mark: journal.Mark) -> None:
        self.fd, self.ident, self.chain, self.size, self.limit, self.mark = fd, ident, chain, 0, limit, mark

    def append(self, path: str, state: dict[str, Any]) -> bool:
        """One record bringing the journal to ``state``; False when a snapshot must be written instead (a pass
        a record cannot say, the bound reached, the file gone or replaced, a failed write)."""
        rec = journal.record(self.mark, state)
        if rec is None:
            return False
        rec["chain"] = self.chain
        try:
            line = _dumps(rec) + b"\n"
        except (TypeError, ValueError):
            return False
        if self.size + len(line) > self.limit or _identity(path) != self.ident:
            return False
        try:
            written = _write(self.fd, line)
            while written < len(line):
                written += _write(self.fd, line[written:])
        except OSError:
            return False  # a torn record ends the replay; the snapshot written next empties the journal
        mark = journal.mark(state)
        if mark is None:
            return False
        self.size += len(line)
        self.mark = mark
        return True

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _run_files(folder: str) -> list[str]:
    try:
        return [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".jsonl")]
    except OSError:
        return []


def checkpoint_path(log_path: str) -> str:
    return log_path[: -len(".jsonl")] + CHECKPOINT_SUFFIX


def journal_path(log_path: str) -> str:
    return log_path[: -len(".jsonl")] + JOURNAL_SUFFIX


def _dumps(value: Any) -> bytes:
    """Raises TypeError or ValueError for a value JSON cannot hold."""
    return _orjson.dumps(value) if _orjson is not None else json.dumps(value).encode()


def write_checkpoint(log_path: str, state: dict[str, Any], chain: str = "") -> str:
    """A snapshot of the state as of the audit lines just written, written over the previous one in place (one
    open, write and truncate: a twentieth of the cost of a new file renamed over it), its journal deleted.
    ``chain`` names the snapshot in the records appended after it (AuditLog.checkpoint): a record is replayed
    only over the snapshot it was written after.  A snapshot cut short by a stop mid-write does not parse, and
    a restart then resumes from the chat's state as it would without one.  Returns why it was not written,
    or ""."""
    try:
        data = _dumps(state)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return _write_snapshot(log_path, data, chain)[0]


def _write_snapshot(log_path: str, data: bytes, chain: str,
                    keep: bool = False) -> tuple[str, tuple[int, tuple[int, int]] | None]:
    """The snapshot written, then its journal emptied and (``keep``) its append-only descriptor returned with its
    (device, inode), or (the run ended) deleted; (why not, or "", the descriptor or None)."""
    if chain:  # the snapshot's name, first among the state's fields (taken out again on reading)
        data = b'{"' + CHAIN_KEY.encode() + b'":"' + chain.encode() + (b'",' if len(data) > 2 else b'"') + data[1:]
    problem = _write_file(checkpoint_path(log_path), data, os.O_WRONLY | os.O_CREAT)
    if problem:
        return problem, None
    path = journal_path(log_path)
    if not keep:  # the run ended: no records follow its last snapshot
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            return f"its journal: {exc.strerror or exc}", None
        return "", None
    flags = os.O_WRONLY | os.O_TRUNC | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC
    try:  # the records written after the previous snapshot: never replayed over this one (another chain)
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        return f"its journal: {exc.strerror or exc}", None
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        return f"its journal: {exc.strerror or exc}", None
    if stat.S_ISREG(st.st_mode):
        return "", (fd, (st.st_dev, st.st_ino))
    os.close(fd)
    return "its journal: not a regular file", None


def _write_file(path: str, data: bytes, flags: int) -> str:
    """``data`` written to a regular file opened with ``flags`` (the end cut off after it, unless appended);
    returns why not, or ""."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | _NOFOLLOW, 0o644)
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # never write into a FIFO or a device put in its place
            return "not a regular file"
        written = _write(fd, data)
        while written < len(data):
            written += _write(fd, data[written:])
        if not flags & os.O_APPEND:
            os.ftruncate(fd, len(data))
        return ""
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        os.close(fd)


def read_checkpoint(log_path: str) -> Any:
    """The run's checkpoint as written (to be checked like any restored state), or None: its snapshot with the
    journal's records replayed over it, as far as they follow one another (a torn last record ends them)."""
    try:  # only a regular file, bounded
        state = json.loads(read_regular(checkpoint_path(log_path), MAX_CHECKPOINT, "checkpoint"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(state, dict):
        return state
    chain = state.pop(CHAIN_KEY, None)
    if not chain:
        return state
    try:
        blob = read_regular(journal_path(log_path), MAX_CHECKPOINT, "checkpoint journal")
    except (OSError, ValueError):
        return state
    for line in blob.split(b"\n"):
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            break  # the end, or a record torn by a stop mid-write
        if not isinstance(rec, dict) or rec.get("chain") != chain or not journal.apply(state, rec):
            break
    return state


def _seq_of(line: bytes) -> int | None:
    m = _SEQ.search(line)
    return int(m.group(1)) if m else None


def _last_seq_in(blob: bytes) -> int | None:
    """The seq of the last line of ``blob`` that names one."""
    end = len(blob)
    while end > 0:
        start = blob.rfind(b"\n", 0, end - 1) + 1
        seq = _seq_of(blob[start:end])
        if seq is not None:
            return seq
        end = start
    return None


TMP_MARK = ".tmp"  # a file being written: <name>.tmp<pid>.<thread>, renamed over <name> when whole


def replace_file(path: str, data: bytes) -> None:
    """``path`` replaced whole by ``data`` (a new file renamed over it); on any failure the new file is
    removed, so a full disk leaves nothing behind."""
    tmp = f"{path}{TMP_MARK}{os.getpid()}.{threading.get_ident()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _close_descriptors(opened: dict, journals: dict) -> None:
    for fd, _inode in opened.values():
        try:
            os.close(fd)
        except OSError:
            pass
    for kept in journals.values():
        kept.close()
    opened.clear()
    journals.clear()


def _unlink_run(path: str) -> None:
    """A run's audit log and what was written beside it: its checkpoint, the picture when the run ended."""
    _unlink(path)
    _unlink(checkpoint_path(path))
    _unlink(journal_path(path))
    _unlink(path + TORN_SUFFIX)
    for suffix in PICTURE_SUFFIXES:
        _unlink(path[: -len(".jsonl")] + suffix)


STRAY_SECONDS = 60  # a file being written that is older than this was left by a failed write or a stop


def _unlink_strays(folder: str) -> None:
    """Files a failed write or a stop left half written in a chat's folder (``<name>.tmp<pid>.<thread>``)."""
    cutoff = time.time() - STRAY_SECONDS
    try:
        strays = [e.path for e in os.scandir(folder) if TMP_MARK in e.name and e.is_file(follow_symlinks=False)
                  and e.stat(follow_symlinks=False).st_mtime < cutoff]
    except OSError:
        return
    for stray in strays:
        _unlink(stray)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def read_lines(path: str) -> Iterator[dict[str, Any]]:
    """The events of one run file; a torn last line (a crash mid-write) is skipped, and so is a line that is
    not an event (``[1]``, ``5``, ``null``, a nest too deep to read); fields of the wrong type are left out.
    Raises ValueError when the path is not a regular file of at most MAX_LOG_BYTES."""
    blob = read_regular(path, MAX_LOG_BYTES, "run log")
    for raw in blob.decode("utf-8", errors="replace").splitlines():
        raw = raw.strip()
        if not raw:
            continue
        try:
            event = clean_event(json.loads(raw))
        except (ValueError, RecursionError):
            continue
        if event is not None:
            yield event


def replay_path(events: list[dict[str, Any]]) -> list[str]:
    """The node sequence a run took, rebuilt from its events alone."""
    path: list[str] = []
    for e in events:
        if e.get("type") == "plan_activated" and isinstance(e.get("node"), str):
            path = [e["node"]]
        elif e.get("type") == "edge_followed" and isinstance(e.get("to"), str):
            path.append(e["to"])
    return path
