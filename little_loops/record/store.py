"""Run directories under `.loops/runs/<run-id>/`: atomic state.json, the event log, step logs.

Over 400 lines on purpose: every file ll keeps under `.loops/` (run dirs, state, locks, step
logs) is opened here, so the rules for them (no symbolic links, atomic replace, one-line
errors) live in one module.
"""

from __future__ import annotations

import _thread  # a lock without importing `threading` (`ll validate` imports this module)
import contextlib
import errno
import functools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from little_loops.errors import (
    EXIT_USAGE,
    LoopError,
    RunError,
)
from little_loops.record.events import (
    CALLS,
    ENCODE,
    JOURNAL,
    Event,
    JsonlSink,
    call_children,
    journal_entry,
    read_journal,
)

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

    from little_loops.record.run_index import Names

# 2: step outputs and captures live in outputs.dat and state.json holds references to them.
# Version 1 files (the texts inline) are still read; the session moves their texts out.
STATE_VERSION = 2
READ_VERSIONS = (1, 2)
_ENCODE = ENCODE
LOOPS = Path(".loops")
RUNS = LOOPS / "runs"
_GITIGNORE = (
    "# Written by ll: runs, locks and caches, not source. Delete this file to track them.\n*\n"
)


def loops_dir(base: Path) -> Path:
    """`base/.loops`; created with a `.gitignore` of `*` when it does not exist yet.

    As pytest does for its cache: the run files stay out of `git status` without anyone
    editing their own .gitignore. An existing `.loops/` (and its .gitignore) is left alone.
    """
    root = base / LOOPS
    try:
        root.mkdir(parents=True)
    except FileExistsError:
        return root
    except OSError as exc:
        raise RunError(cannot("create", root, exc)) from None
    try:
        (root / ".gitignore").write_text(_GITIGNORE, encoding="utf-8")
    except OSError as exc:
        raise RunError(cannot("write", root / ".gitignore", exc)) from None
    return root


def cannot(verb: str, path: Path | str, exc: OSError) -> str:
    """`cannot create /ro/.loops: Permission denied; ...`: an OSError as a user's line."""
    why = exc.strerror or str(exc)
    if exc.errno == errno.ELOOP:
        why = "it is a symbolic link, which ll does not follow inside .loops/ (remove it)"
    fix = {
        errno.ENOSPC: "free some space and resume the run",
        errno.EDQUOT: "free some space and resume the run",
        errno.EFBIG: "raise the file size limit (ulimit -f) and resume the run",
        errno.EIO: "check the disk, then resume the run",
        errno.EACCES: "run ll in a directory you can write to",
        errno.EPERM: "run ll in a directory you can write to",
        errno.EROFS: "run ll in a directory on a writable file system",
    }.get(exc.errno or 0)
    return f"cannot {verb} {path}: {why}" + (f"; {fix}" if fix else "")


def sha256(data: bytes) -> str:
    """The SHA-256 hex digest of `data`, as `hashlib.sha256(data).hexdigest()` gives it, by
    the interpreter's built-in implementation when it has one: importing hashlib loads
    OpenSSL, a few milliseconds of every `ll run` (docs/performance.md)."""
    global _SHA256
    if _SHA256 is None:
        _SHA256 = _sha256_impl()
    return str(_SHA256(data).hexdigest())


# Found at the first digest: a failed import is not cached by Python, so asking for `_sha2`
# on 3.11 searched the whole sys.path again at every digest (each sub-loop call makes one).
_SHA256: Callable[[bytes], Any] | None = None


def _sha256_impl() -> Callable[[bytes], Any]:
    for name in ("_sha2", "_sha256"):  # Python 3.12+, 3.10-3.11
        try:
            built_in = __import__(name)
        except ImportError:
            continue
        found: Callable[[bytes], Any] = built_in.sha256
        return found
    import hashlib  # a build without its own hashes: OpenSSL's

    return hashlib.sha256


def new_run_id(loop_name: str, now: float | None = None) -> str:
    """A sortable, unique id: `20261122-041430-fix-lint-3fa2`."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now if now is not None else time.time()))
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", loop_name)[:40] or "loop"
    # secrets.token_hex(2) is this (os.urandom), without importing secrets, hmac and hashlib.
    return f"{stamp}-{slug}-{os.urandom(2).hex()}"


def atomic_write_text(path: Path, text: str, *, fsync: bool = False) -> None:
    """Write to a temp file beside `path`, then rename over it: readers see old or new, never half.

    Without fsync a power cut may lose the newest write (the rename survives a killed process
    either way); `fsync=True` trades a few milliseconds per step for surviving that too.
    """
    target = os.fspath(path)
    head, _, name = target.rpartition(os.sep)
    tmp = f"{head}{os.sep}.{name}.{os.getpid()}.tmp" if head else f".{name}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileExistsError:  # left by a killed process, or planted: never written through
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, flags, 0o644)
    try:
        _write_all(fd, text.encode("utf-8", "replace"), target)
        if fsync:
            os.fsync(fd)
        os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_named_file(path: Path, text: str) -> None:
    """Write a file the user named on the command line (`--junit-xml`, `--report`, `-o`).

    A regular file, or a symlink to one, is replaced whole and atomically (the link is kept:
    its target is what gets replaced). Anything else is written into, never renamed over:
    a FIFO or a device, and a path whose links pass through /dev or /proc (`/dev/stdout`,
    `/dev/fd/1`), which is appended to, so `ll run --junit-xml /dev/stdout > log` adds the
    report to the log instead of replacing the system's /dev/stdout link with a file.
    """
    hop = os.path.abspath(path)
    for _ in range(40):
        if hop.startswith(("/dev/", "/proc/")):
            break
        if not os.path.islink(hop):
            if os.path.exists(hop) and not os.path.isfile(hop):
                break  # a FIFO, a device, a socket
            atomic_write_text(Path(hop), text)
            return
        hop = os.path.normpath(os.path.join(os.path.dirname(hop), os.readlink(hop)))
    else:
        raise OSError(errno.ELOOP, "too many levels of symbolic links", os.fspath(path))
    fd = os.open(hop, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        _write_all(fd, text.encode("utf-8", "replace"), os.fspath(path))
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes, path: str | None = None) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        if path is None or exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, path) from None


def libc_function(name: str) -> Any:
    """The C library's function `name`, called with Python ints (passed as C `int`) and bytes
    (`char *`), giving a C `int`, with `errno` kept for `ctypes.get_errno()`: what
    `ctypes.CDLL(None, use_errno=True).NAME` is. Made from `_ctypes`, the C half of `ctypes`,
    as `ctypes` makes it: importing `ctypes` itself defines its whole family of C types, about
    3 ms of every `ll run` (for the subreaper's `prctl` and `renameat2`). AttributeError when
    there is no such function; `ctypes` itself where `_ctypes` differs."""
    try:
        import _ctypes

        class _Int(_ctypes._SimpleCData):  # type: ignore[type-arg]  # ctypes.c_int
            _type_ = "i"

        class _Function(_ctypes.CFuncPtr):  # CDLL(None, use_errno=True)'s functions
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = _Int

        class _Libc:  # what a function is looked up in: a CDLL(None)'s `_handle`
            _handle = _ctypes.dlopen(None, _ctypes.RTLD_LOCAL)  # type: ignore[arg-type]

    except (ImportError, AttributeError, TypeError):  # another interpreter's _ctypes
        import ctypes

        return getattr(ctypes.CDLL(None, use_errno=True), name)
    return _Function((name, _Libc()))  # type: ignore[arg-type]


class _Exchange:
    """`renameat2(RENAME_EXCHANGE)` through libc, where the platform and file system have it."""

    def __init__(self) -> None:
        self.usable = sys.platform.startswith("linux")
        self._call: Any = None

    def swap(self, a: bytes, b: bytes) -> bool:
        """Swap two paths atomically; False (and never again) when the call is unavailable."""
        if self._call is None:
            try:  # (int, char *, int, char *, unsigned): ints and bytes are passed as these
                self._call = libc_function("renameat2")
            except (OSError, AttributeError):
                self.usable = False
                return False
        at_fdcwd, rename_exchange = -100, 2
        if self._call(at_fdcwd, a, at_fdcwd, b, rename_exchange) == 0:
            return True
        self.usable = False  # EINVAL/ENOSYS: this file system or kernel cannot; fall back
        return False


_EXCHANGE = _Exchange()


class FixedState:
    """The fields of a run's state.json that no step changes (its id, file, options...), and
    the start of the file's JSON with them, made once per run at its first write
    (`RunDir.write_state`; a fork's action branch, kept in memory, never needs it)."""

    __slots__ = ("_raw", "fields")

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields
        self._raw: bytes | bool | None = False  # False: not made yet

    @property
    def raw(self) -> bytes | None:
        """`{"version":...,<the fields>,` as bytes; None for bytes that are not UTF-8 (the
        whole state is then written the slow way)."""
        raw = self._raw
        if raw is False:
            raw = None
            try:
                text = _ENCODE({"version": STATE_VERSION, **self.fields})
                if len(text) > 2:  # `{...}` with something in it: the rest follows a comma
                    raw = text[:-1].encode("utf-8") + b","
            except UnicodeEncodeError:
                pass
            self._raw = raw
        return raw if isinstance(raw, bytes) else None


class RunDir:
    """One run's directory and the files in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # Paths used every step are built once.
        self.state_path = root / "state.json"
        self.events_path = root / "events.jsonl"
        self.log = RunLog(root)
        self._state = os.fspath(self.state_path)
        self._spare = os.fspath(root / ".state.next")
        self._state_b, self._spare_b = os.fsencode(self._state), os.fsencode(self._spare)
        self._fds: list[int] | None = None  # [spare, state] while swapping
        self._sizes: list[int] = [0, 0]
        self._safe: dict[str, str] = {}
        self.tree_id: str | None = None  # a child's whole id, when found by it (`find_run`)

    @classmethod
    def create(cls, base: Path, run_id: str) -> RunDir:
        from little_loops.record import run_index

        root = loops_dir(base) / "runs" / run_id
        if (root / "state.json").exists():
            raise RunError(f"run '{run_id}' already exists under {base / RUNS}")
        before = run_index.before_add(root.parent)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(cannot("create", root, exc)) from None
        run_index.added(root.parent, run_id, before)  # `ll status` finds it without a listing
        run = cls(root)
        run.check_links()
        return run

    @classmethod
    def open(cls, base: Path, run_id: str) -> RunDir:
        root = base / RUNS / run_id
        if not (root / "state.json").is_file():
            raise RunError(f"no run '{run_id}' under {base / RUNS}; see 'll list' for run ids")
        return cls(root)

    @property
    def run_id(self) -> str:
        """The run's id: its directory's name, or a child's whole id (`RUN/0001-call`)."""
        return self.tree_id or self.root.name

    def check_links(self) -> None:
        """Refuse a run directory (or the `steps/` an older ll made) that is a symbolic link.

        Whoever can write to `.loops/` could otherwise point a run's files at any file the
        user can write (`~/.bashrc`), and the run would overwrite it. The files inside are
        opened without following links (O_NOFOLLOW) for the same reason.
        """
        for path in (self.root, self.root / "steps"):
            if path.is_symlink():
                raise RunError(
                    f"{path} is a symbolic link; ll does not follow links inside .loops/ "
                    "(someone may have planted it): remove it, or start a new run"
                )

    def write_state(
        self, data: dict[str, Any], *, fsync: bool = False, fixed: FixedState | None = None
    ) -> None:
        """Replace state.json whole: readers and a `kill -9` see the old file or the new one.

        The new state is written into `.state.next` and the two names are swapped in one
        atomic rename (Linux `RENAME_EXCHANGE`), so no file is created or deleted per step,
        which on ext4 costs several times the write. The two files stay open and trade places
        every step. Where the swap is not available, a temp file is renamed over state.json.
        `fixed`: the fields that do not change during the run, written before `data`'s, their
        JSON made once (the same bytes as the whole state encoded at once).
        """
        raw: bytes | None = None
        if fixed is not None and fixed.raw is not None and data:
            with contextlib.suppress(UnicodeEncodeError):  # then the slow way, below
                raw = fixed.raw + _ENCODE(data)[1:].encode("utf-8") + b"\n"
        if raw is None:
            state = {"version": STATE_VERSION, **(fixed.fields if fixed else {}), **data}
            text = _ENCODE(state) + "\n"
            try:
                raw = text.encode("utf-8")
            except UnicodeEncodeError:
                # A value with bytes that are not UTF-8 (a file name, an environment variable)
                # is kept as a JSON escape, which reads back the same, instead of failing.
                raw = (json.dumps(state, separators=(",", ":")) + "\n").encode("ascii")
        self._replace(raw, fsync)

    @property
    def takes_json(self) -> bool:
        """Whether `write_state_json` may write the state (a state kept in memory as fields,
        a fork's action branch, a child run not yet in its directory, may not)."""
        return True

    def write_state_json(self, text: str, *, fsync: bool = False, fixed: FixedState) -> bool:
        """`write_state` for the changing fields already in JSON (`text`, an object): the
        same file. False, nothing written, where the caller must hand over the fields
        instead (text that is not UTF-8, no fixed fields, a state kept in memory)."""
        head = fixed.raw
        if head is None or len(text) < 3 or not self.takes_json:
            return False
        try:
            raw = head + text[1:].encode("utf-8") + b"\n"
        except UnicodeEncodeError:
            return False
        self._replace(raw, fsync)
        return True

    def _replace(self, raw: bytes, fsync: bool) -> None:
        if _EXCHANGE.usable and self._swap_in(raw, fsync):
            return
        self._close_state()
        atomic_write_text(self.state_path, raw.decode("utf-8"), fsync=fsync)

    def _swap_in(self, raw: bytes, fsync: bool) -> bool:
        if self._fds is None:
            if not os.path.exists(self._state):
                return False  # the first state is written the plain way
            flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
            self._fds = [
                os.open(self._spare, flags | os.O_CREAT, 0o644),
                os.open(self._state, flags),
            ]
            self._sizes = [os.fstat(fd).st_size for fd in self._fds]
        fd, size = self._fds[0], self._sizes[0]
        try:
            written = os.pwrite(fd, raw, 0)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self._state) from None
        if written != len(raw):  # a full disk writes part: never swap that in
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._state)
        if len(raw) < size:
            os.ftruncate(fd, len(raw))
        if fsync:
            os.fsync(fd)
        if not _EXCHANGE.swap(self._spare_b, self._state_b):
            return False
        # The file just written is state.json now; the old state.json is the next spare.
        self._fds.reverse()
        self._sizes = [self._sizes[1], len(raw)]
        return True

    def close(self) -> None:
        """Close the state files kept open between steps, and the run's log."""
        self._close_state()
        self.log.close()

    def _close_state(self) -> None:
        for fd in self._fds or ():
            os.close(fd)
        self._fds = None

    def read_state(self) -> dict[str, Any]:
        """The run's state; a corrupt, truncated or future-version file is a clear error."""
        path: Path | str = self.state_path
        self.check_links()
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fh:
                data = json.loads(fh.read())
        except FileNotFoundError:
            entry = journal_entry(self.root)  # a fork's action branch: its journal entry
            if entry is None:
                raise RunError(f"{path}: missing; the run directory is incomplete") from None
            data = dict(entry["state"])
            path = f"{self.root.parent / JOURNAL} (branch '{self.root.name}')"
        except OSError as exc:
            raise RunError(cannot("read", path, exc)) from None
        except RecursionError:
            raise RunError(f"{path}: corrupted state file (nested too deeply)") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunError(
                f"{path}: corrupted or truncated state file ({exc}); the run cannot be resumed"
            ) from None
        if not isinstance(data, dict):
            raise RunError(f"{path}: corrupted state file (not a JSON object)")
        version = data.get("version")
        if type(version) is not int or version not in READ_VERSIONS:
            raise RunError(
                f"{path}: state format version {version!r}, this ll reads versions "
                f"{' and '.join(map(str, READ_VERSIONS))}; use the ll version that started the run"
            )
        for key, kinds in _STATE_TYPES.items():
            value = data.get(key)
            if key in data and value is not None and not _is(value, kinds):
                names = " or ".join(k.__name__ for k in kinds)
                raise RunError(
                    f"{path}: corrupted state file ('{key}' should be {names}, not "
                    f"{_short(value)}); the run cannot be resumed"
                )
        return data


# What each field of state.json must be; a hand-edited or damaged file is refused whole.
_STATE_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "loop_file": (str,),
    "loop_sha256": (str,),
    "started_at": (str,),
    "context": (dict,),
    "max_iterations": (int,),
    "current": (str,),
    "status": (str,),
    "step": (int,),
    "elapsed_ms": (int, float),
    "cost_usd": (int, float),
    "captured": (dict,),
    "prev": (dict,),
    "convergence": (dict,),
    "prior_reasons": (dict,),
    "on_max_used": (bool,),
    "attempt": (int,),
    "pid": (int,),
    "options": (dict,),
    "last_route": (dict,),
    "outcome": (str,),
    "exit_code": (int,),
    "error": (str,),
}


def _is(value: object, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in kinds:
        return False
    return isinstance(value, kinds)


def _short(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


DEFAULT_MAX_LOG_BYTES = 50 * 1024 * 1024
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def max_log_bytes() -> int:
    """The size at which a step's log is cut: `LL_MAX_LOG_BYTES` (bytes, or a number with K, M
    or G), else 50 MiB; 0 keeps everything. A bad value is a usage error."""
    return _log_limit(os.environ.get("LL_MAX_LOG_BYTES", "").strip())


@functools.lru_cache(maxsize=8)
def _log_limit(text: str) -> int:
    """The parsed limit; every step's log asks, so each text is read once."""
    if not text:
        return DEFAULT_MAX_LOG_BYTES
    found = re.fullmatch(r"(\d{1,15})\s*([kmgKMG]?)(?:i?[bB])?", text)
    if found is None:
        raise LoopError(
            f"LL_MAX_LOG_BYTES={text!r} is not a size; give bytes or a number with K, M or G "
            "(e.g. 50M), or 0 to keep whole logs",
            exit_code=EXIT_USAGE,
        )
    return int(found[1]) * _UNITS[found[2].lower()]


class StepLog:
    """A step's log file, appended to; opened without following a symbolic link (a planted
    link would make the run overwrite its target) and cut at `limit` bytes with a marker line,
    so a step that prints without end cannot fill the disk."""

    def __init__(self, path: str, limit: int | None = None) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        self.path = path
        try:
            self._fd: int | None = os.open(path, flags, 0o644)
        except OSError as exc:
            raise RunError(cannot("open the step log", path, exc)) from None
        self.limit = max_log_bytes() if limit is None else limit
        self.size = os.fstat(self._fd).st_size  # a retried attempt appends
        self.cut = False

    def write(self, chunk: bytes) -> int:
        if self.cut or self._fd is None:
            return len(chunk)
        room = self.limit - self.size if self.limit else len(chunk)
        if len(chunk) <= room:
            _write_all(self._fd, chunk, self.path)
            self.size += len(chunk)
            return len(chunk)
        _write_all(self._fd, chunk[: max(room, 0)], self.path)
        self.size += max(room, 0)
        marker = (
            f"\n[ll: log cut at {self.limit} bytes (LL_MAX_LOG_BYTES); "
            "the rest of this step's output was not kept]\n"
        )
        _write_all(self._fd, marker.encode(), self.path)
        self.cut = True
        return len(chunk)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


LOG_NAME = "steps.log"


class RunLog:
    """`steps.log`: everything the run's actions printed, one attempt after another, in one
    append-only file opened once (at the first byte) instead of a file a step.

    A run acts one step at a time, so an attempt's bytes are contiguous: its `action_start`
    event records where they begin (`log_at`), and they end where the next attempt's begin
    (or at the end of the file). An attempt cut off by a crash leaves its bytes where they
    were; the step run again on resume writes after them.
    """

    def __init__(self, root: Path) -> None:
        self.path = os.fspath(root / LOG_NAME)
        self._fd: int | None = None
        self._end: int | None = None
        self._limit: int | None = None  # `LL_MAX_LOG_BYTES`, read at the run's first attempt
        self._unsynced = False

    def offset(self) -> int:
        """Where the next byte goes: the end of the file (0 before it exists)."""
        if self._end is None:
            try:
                self._end = os.stat(self.path, follow_symlinks=False).st_size
            except FileNotFoundError:
                self._end = 0
            except OSError as exc:
                raise RunError(cannot("read", self.path, exc)) from None
        return self._end

    def attempt(self, limit: int | None = None) -> LogSegment:
        """A writer for one attempt's output, cut at `limit` bytes (`LL_MAX_LOG_BYTES`)."""
        if limit is None:
            if self._limit is None:
                self._limit = max_log_bytes()
            limit = self._limit
        return LogSegment(self, self.offset(), limit)

    def append(self, data: bytes) -> None:
        if self._fd is None:
            self._fd, self._end = _open_append(self.path, "open the run's log", os.O_WRONLY)
        start = self.offset()
        try:
            _write_all(self._fd, data, self.path)
        except OSError:
            # A full disk took part of it: given back, so the run can still record that it
            # stopped (and resume once there is room); the step runs again then.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise
        self._end = start + len(data)
        self._unsynced = True

    def sync(self) -> None:
        """fsync what was appended (`--fsync`): output records may point into this file."""
        if self._fd is not None and self._unsynced:
            os.fsync(self._fd)
            self._unsynced = False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._end = None

    @staticmethod
    def read(root: Path, start: int, end: int | None) -> bytes:
        """Bytes `start` to `end` (None: to the end) of a run's `steps.log`."""
        path = root / LOG_NAME
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise RunError(cannot("read", path, exc)) from None
        try:
            size = os.fstat(fd).st_size if end is None else end
            chunks, at = [], start
            while at < size:
                chunk = os.pread(fd, min(size - at, 1 << 20), at)
                if not chunk:
                    break
                chunks.append(chunk)
                at += len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)


class LogSegment:
    """One attempt's part of the run's log: `write` as a step log's, with the same cut."""

    def __init__(self, log: RunLog, start: int, limit: int) -> None:
        self.start = start
        self.limit = limit
        self.size = 0
        self.cut = False
        self._log = log

    def write(self, chunk: bytes) -> int:
        if self.cut:
            return len(chunk)
        room = self.limit - self.size if self.limit else len(chunk)
        if len(chunk) <= room:
            self._log.append(chunk)
            self.size += len(chunk)
            return len(chunk)
        kept = chunk[: max(room, 0)]
        marker = (
            f"\n[ll: log cut at {self.limit} bytes (LL_MAX_LOG_BYTES); "
            "the rest of this step's output was not kept]\n"
        )
        self._log.append(kept + marker.encode())
        self.size += len(kept)
        self.cut = True
        return len(chunk)

    def close(self) -> None:
        """Nothing to release: the run's log stays open for the next step."""


class BranchDir(RunDir):
    """A fork's action branch (a run of one step), kept in memory: no directory of its own
    (made only if its action prints, for its `steps.log`), its state and events held until it
    ends, then written as one entry of its fork's journal (`ForkJournal`). Creating files in
    a directory made just now is most of what a branch cost (docs/performance.md)."""

    def __init__(self, root: Path, *, fresh: bool = False) -> None:
        # Not `RunDir.__init__`: none of the paths of the files it never writes (a fork of
        # thousands makes one of these a branch).
        self.root = root
        self.tree_id = None
        self._fds = None
        self.state: dict[str, Any] | None = None
        self.log = _BranchLog(root)
        if fresh:  # no folder of its own yet (its fork listed them), so no log to append to
            self.log._end = 0
        self.sink = MemorySink()
        self.outputs = MemoryOutputs()

    def write_state(
        self, data: dict[str, Any], *, fsync: bool = False, fixed: FixedState | None = None
    ) -> None:
        self.state = {"version": STATE_VERSION, **(fixed.fields if fixed else {}), **data}

    @property
    def takes_json(self) -> bool:
        return False  # kept in memory as fields (`write_state`)

    def read_state(self) -> dict[str, Any]:
        if self.state is None:
            raise RunError(f"{self.root / 'state.json'}: missing; the branch has not started")
        return self.state

    def entry(self, key: str, result: object) -> dict[str, Any]:
        """Its journal entry: its record (sealed by the fork's run), state and events."""
        return {"key": key, "result": result, "state": self.state, "events": self.sink.events}


class MemorySink:
    """A branch's events, kept until its journal entry is written (a `JsonlSink`'s face)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def flush(self) -> None:
        """Nothing to write out before the branch ends."""

    def close(self) -> None:
        """Nothing held open."""


class MemoryOutputs:
    """A branch's one output record, kept inline in its state (an `Outputs`' face)."""

    def append(
        self, record: dict[str, Any], in_log: tuple[int, int] | None = None
    ) -> dict[str, Any]:
        """The record itself, inline (its output too: the journal line holds it whole)."""
        return record

    def read(self, where: dict[str, Any]) -> dict[str, Any]:
        return where

    def sync(self) -> None:
        """In memory: written with the journal entry."""

    def close(self) -> None:
        """Nothing held open."""


class _BranchLog(RunLog):
    """A branch's `steps.log`, in a directory made at its first byte (a branch that prints
    nothing makes none)."""

    def __init__(self, root: Path) -> None:
        # Not `RunLog.__init__`: its path as text, no `Path` built (one a branch).
        self.path = f"{root}/{LOG_NAME}"
        self._fd = None
        self._end = None
        self._limit = None
        self._unsynced = False
        self.root = root

    def append(self, data: bytes) -> None:
        if self._fd is None:
            try:
                os.mkdir(self.root)
            except FileExistsError:
                RunDir(self.root).check_links()
            except OSError as exc:
                raise RunError(cannot("create", self.root, exc)) from None
        super().append(data)


class CallDir(BranchDir):
    """A `loop:` child run kept in memory for as long as that loses nothing: no directory of
    its own while at most its current step is unrecorded, its end one entry of the journal
    (`calls.jsonl`) of the nearest run above it that has a directory. Making a directory and
    its files was most of what a level cost (docs/performance.md, "Sub-loops").

    It moves to a directory of its own (`spill`), its events, state and records so far
    written out, before it could lose a finished step: when a step begins after one has
    finished (unless that step cannot act: a terminal without an action), when it forks or
    asks, and when it ends in any way but finished (interrupted, suspended: to be resumed).
    A step cut off by a crash runs again, as in any run; a child cut off in its first step
    runs again from its start, its caller's step not being recorded either."""

    def __init__(
        self,
        root: Path,
        caller: RunDir,
        spills: Callable[[str, bool], bool],
        *,
        fsync: bool = False,
    ) -> None:
        RunDir.__init__(self, root)  # not BranchDir's: its log, sink and outputs are these
        self.state = None
        self.caller = caller
        # Whether entering a state (by name) must find the child in its directory, given
        # whether a step of the child has finished already.
        self.spills = spills
        self.fsync = fsync
        self.spilled = False
        self.on_spill: Callable[[], None] | None = None  # the session's: the tree's file copy
        self.log = _CallLog(self)
        self.sink: MemorySink = _CallSink(self)
        self.outputs: MemoryOutputs = _CallOutputs(self)

    def anchor(self) -> Path:
        """The directory whose journal records this child: its caller's, or the next run's
        up with a directory of its own."""
        caller = self.caller
        if isinstance(caller, CallDir) and not caller.spilled:
            return caller.anchor()
        return caller.root

    def make_root(self) -> None:
        try:
            os.mkdir(self.root)
        except FileNotFoundError:  # the caller's `sub/` (its first child), or the caller's own
            try:
                os.makedirs(self.root, exist_ok=True)
            except OSError as exc:
                raise RunError(cannot("create", self.root, exc)) from None
            self.check_links()
        except FileExistsError:  # a child below spilled first, or its log: never a link
            self.check_links()
        except OSError as exc:
            raise RunError(cannot("create", self.root, exc)) from None

    def spill(self) -> None:
        """Move to a directory of its own: the events so far, then the state that names them."""
        if self.spilled:
            return
        self.make_root()
        if self.on_spill is not None:
            self.on_spill()
        sink = JsonlSink(self.events_path)
        for event in self.sink.events:
            sink(event)
        sink.flush()
        assert isinstance(self.sink, _CallSink)
        self.sink.file = sink
        self.spilled = True
        if self.state is not None:
            RunDir.write_state(self, self.state, fsync=self.fsync)

    def write_state(
        self, data: dict[str, Any], *, fsync: bool = False, fixed: FixedState | None = None
    ) -> None:
        if self.spilled:
            RunDir.write_state(self, data, fsync=fsync, fixed=fixed)
            return
        super().write_state(data, fsync=fsync, fixed=fixed)
        if data.get("status") not in ("running", "finished"):
            self.spill()  # interrupted or suspended: resumed from its directory

    @property
    def takes_json(self) -> bool:
        return self.spilled  # in its directory: state.json, as a run's

    def read_state(self) -> dict[str, Any]:
        return RunDir.read_state(self) if self.spilled else super().read_state()

    def journal(self) -> None:
        """Record the finished child in its anchor's journal (nothing when it spilled: its
        directory holds it)."""
        if self.spilled:
            return
        # An earlier run of this child, cut off as it moved to its directory, may have left
        # its first events there: the journal's are this child's.
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(self.events_path)
        anchor = self.anchor()
        top, here = os.fspath(anchor), os.fspath(self.root)
        if here.startswith(top + os.sep):
            key = here[len(top) + 1 :].replace(os.sep, "/")
        else:
            key = os.path.relpath(here, top).replace(os.sep, "/")
        entry = {"key": key, "state": self.state, "events": self.sink.events}
        with _CALLS_LOCK:  # the children of a fork's `loop:` branches end in threads
            journal = ForkJournal(anchor, fsync=self.fsync, name=CALLS)
            try:
                journal.append(entry)
            finally:
                journal.close()


class _CallSink(MemorySink):
    """A kept child's events: in memory, or its `events.jsonl` once it spilled."""

    def __init__(self, run: CallDir) -> None:
        super().__init__()
        self._run = run
        self.file: JsonlSink | None = None

    def __call__(self, event: Event) -> None:
        if self.file is None and event.get("event") == "state_enter":
            run = self._run
            done = run.state is not None and bool(run.state.get("step"))
            if run.spills(str(event.get("state")), done):
                run.spill()
        if self.file is not None:
            self.file(event)
        else:
            self.events.append(event)

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class _CallOutputs(MemoryOutputs):
    """A kept child's output records: inline in its state, or its `outputs.dat` once it
    spilled (a state may then point to both: each record is read as what it is)."""

    def __init__(self, run: CallDir) -> None:
        self._run = run
        self._file: Any = None

    def _store(self) -> Any:
        if self._file is None:
            from little_loops.record.outputs import Outputs

            self._file = Outputs(self._run.root)
        return self._file

    def append(
        self, record: dict[str, Any], in_log: tuple[int, int] | None = None
    ) -> dict[str, Any]:
        if self._run.spilled:
            found: dict[str, Any] = self._store().append(record, in_log=in_log)
            return found
        return record

    def read(self, where: dict[str, Any]) -> dict[str, Any]:
        from little_loops.record.outputs import is_ref

        if is_ref(where):
            found: dict[str, Any] = self._store().read(where)
            return found
        return where

    def sync(self) -> None:
        if self._file is not None:
            self._file.sync()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class _CallLog(RunLog):
    """A kept child's `steps.log`, in its directory made at the first byte."""

    def __init__(self, run: CallDir) -> None:
        super().__init__(run.root)
        self._run = run

    def append(self, data: bytes) -> None:
        if self._fd is None:
            self._run.make_root()
        super().append(data)


_CALLS_LOCK = _thread.allocate_lock()


def _open_append(path: Path | str, what: str, mode: int) -> tuple[int, int]:
    """An append-only file of the run opened (made if need be, never through a link), and
    its size: the run's log and a fork's journal."""
    flags = mode | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise RunError(cannot(what, path, exc)) from None
    return fd, os.fstat(fd).st_size


class ForkJournal:
    """A fork's journal of finished action branches (`branches.jsonl`): one line appended
    whole per branch, by the fork's run (its one writer), through one descriptor opened at
    the first entry. A line torn by a crash is skipped when read: that branch runs again."""

    def __init__(self, fork: Path, *, fsync: bool = False, name: str = JOURNAL) -> None:
        self.path = fork / name
        self.fsync = fsync
        self._fd: int | None = None
        self._end = 0

    def append(self, entry: dict[str, Any]) -> None:
        try:
            raw = (ENCODE(entry) + "\n").encode("utf-8")
        except UnicodeEncodeError:  # bytes that are not UTF-8: JSON escapes, read back the same
            raw = (json.dumps(entry, separators=(",", ":")) + "\n").encode("ascii")
        if self._fd is None:
            self._fd, self._end = _open_append(self.path, "open", os.O_RDWR)
            if self._end and os.pread(self._fd, 1, self._end - 1) != b"\n":
                os.write(self._fd, b"\n")  # after a torn line, on a line of its own
                self._end += 1
        start = self._end
        try:
            _write_all(self._fd, raw, os.fspath(self.path))
        except OSError:
            with contextlib.suppress(OSError):  # a full disk: the branch is not recorded
                os.ftruncate(self._fd, start)
            raise
        self._end = start + len(raw)
        if self.fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (a zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def process_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (`/proc/PID/stat` field 22), or
    None where that cannot be read (no such process, no /proc). Together with the pid it names
    one process: a pid is reused, a (pid, start) pair is not."""
    if pid <= 0:
        return None
    own = pid == os.getpid()
    if own and _OWN_START[0] == pid:
        return _OWN_START[1]  # every child run of this process asks again (bench/nesting.py)
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw.rpartition(b")")[2].split()  # the name, in brackets, may hold spaces
    try:
        start = int(fields[19])  # field 22; the list starts at field 3
    except (IndexError, ValueError):
        return None
    if own:
        _OWN_START[:] = [pid, start]
    return start


_OWN_START: list[int | None] = [None, None]  # (pid, start) of this process, once read


def owner_alive(run_dir: RunDir, state: dict[str, Any]) -> bool | None:
    """Whether the process that owns this run still runs it: its pid alive with the start time
    recorded in state.json, or else (a run recorded without one, no /proc) the run's loop lock
    still held on its behalf. None when neither can tell: never trust the pid alone, after a
    crash it may belong to anyone."""
    pid = state.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    started = state.get("pid_start")
    if isinstance(started, int) and not isinstance(started, bool):
        now = process_start(pid)
        if now is not None:
            return now == started and pid_alive(pid)
        if os.path.isdir(f"/proc/{os.getpid()}"):
            return False  # /proc works here and has no such process
    held = lock_held_by(run_dir, state)
    if held is not None:
        return held
    return None if pid_alive(pid) else False


def lock_held_by(run_dir: RunDir, state: dict[str, Any]) -> bool | None:
    """Whether the loop lock of this run's file is held and names this run; None when there is
    no such lock to ask (the run was started with --allow-concurrent, or the files moved)."""
    import fcntl

    loop_file = state.get("loop_file")
    if not isinstance(loop_file, str):
        return None
    base = run_dir.root.parent.parent.parent
    path = LoopLock(base, Path(loop_file)).path
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _read_owner(fd).get("run_id") != run_dir.run_id:
            return None
        try:
            # Shared and released at once: a start racing this probe is refused only if it
            # lands in the same microseconds.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class LoopLock:
    """One active run per loop file per directory, held with flock for the run's lifetime.

    The kernel drops an flock when its owner dies, however it dies, so a lock left by a
    killed run is reclaimed by the next start without a race between two starters. The
    file also names the owner (run id, pid) so a refused start can say who holds it.
    """

    def __init__(self, base: Path, loop_file: Path) -> None:
        key = sha256(os.fsencode(loop_file.resolve()))[:16]
        self._base = base
        self.path = base / LOOPS / "locks" / f"{key}.lock"
        self._fd: int | None = None
        self.reclaimed_from: dict[str, Any] | None = None

    def acquire(self, run_id: str, loop_file: Path) -> None:
        import fcntl

        try:
            (loops_dir(self._base) / "locks").mkdir(exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise RunError(cannot("open", self.path, exc)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _read_owner(fd)
            os.close(fd)
            raise RunError(
                f"{loop_file}: already running as run {owner.get('run_id', '?')} "
                f"(pid {owner.get('pid', '?')}); wait for it, stop it with "
                f"'ll stop {owner.get('run_id', 'RUN')}', or pass --allow-concurrent"
            ) from None
        previous = _read_owner(fd)
        if previous.get("pid") and previous.get("released") is not True:
            self.reclaimed_from = previous
        os.ftruncate(fd, 0)
        os.pwrite(
            fd,
            json.dumps({"run_id": run_id, "pid": os.getpid(), "file": str(loop_file)}).encode(),
            0,
        )
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        import fcntl

        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps({"released": True}).encode(), 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def _read_owner(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def list_runs(base: Path) -> list[RunDir]:
    """Every run directory under `base`, oldest first.

    Run ids start with the second the run began, so their names sort by time; only runs begun
    within the same second are ordered by the millisecond start time in their state file.
    """
    return list(reversed(list(newest_first(base))))


def run_names(base: Path) -> Names:
    """The names under `.loops/runs/`, newest first by name (no state file read), from the
    runs' index when it is true (record/run_index.py), else listed; how many there are."""
    from little_loops.record.run_index import Names, names

    try:
        return names(base / RUNS)
    except (FileNotFoundError, NotADirectoryError):
        return Names(0, 0, iter(()))
    except OSError as exc:
        raise RunError(cannot("read", base / RUNS, exc)) from None


def newest_first(base: Path, names: Iterable[str] | None = None) -> Iterator[RunDir]:
    """The runs under `base`, newest first, read lazily: a caller that stops at the first
    run it wants opens only that run's files and its same-second neighbours', however many
    runs there are (`ll status`, `ll resume`, a run id's prefix)."""
    root = base / RUNS
    group: list[str] = []
    for name in run_names(base) if names is None else names:
        # Names that share their first 15 characters began in the same second.
        if group and name[:15] != group[0][:15]:
            yield from _same_second(root, group)
            group = []
        group.append(name)
    yield from _same_second(root, group)


def _same_second(root: Path, names: list[str]) -> list[RunDir]:
    """Runs begun within the same second, newest first by their millisecond start."""
    group = [RunDir(root / name) for name in names]
    group = [r for r in group if not r.root.is_symlink() and r.state_path.is_file()]
    if len(group) > 1:
        group.sort(key=lambda r: (_started_at(r), r.run_id), reverse=True)
    return group


def _started_at(run: RunDir) -> str:
    try:
        value = json.loads(run.state_path.read_text(encoding="utf-8")).get("started_at")
    except (OSError, ValueError, AttributeError, RecursionError):
        return ""
    return value if isinstance(value, str) else ""


def find_run(base: Path, run_id: str | None) -> RunDir:
    """A run by id (or a unique prefix of one), a child run by its id (`RUN/0001-call`,
    `RUN/0002-regions/eu-west`), or a run directory by its path (a root's or a child's); the
    latest run when `run_id` is None.

    Neither reads more than the runs it names: an exact id is one directory, a prefix the
    names that start with it, the latest the newest name (and its same-second neighbours).
    """
    if run_id is not None and ("/" in run_id or os.sep in run_id):
        return _find_in_tree(base, run_id)
    if run_id is not None:
        RunDir(base / RUNS / run_id).check_links()  # `newest_first` skips it: say why
        exact = RunDir(base / RUNS / run_id)
        if run_id not in ("", ".", "..") and exact.state_path.is_file():
            return exact
    if run_id is None:
        for run in newest_first(base):
            return run
        raise RunError(f"no runs under {base / RUNS}; start one with 'll run FILE'")
    names = [n for n in run_names(base) if n.startswith(run_id)]
    matches = list(newest_first(base, names))
    if not matches and not any(newest_first(base)):
        raise RunError(f"no runs under {base / RUNS}; start one with 'll run FILE'")
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise RunError(f"'{run_id}' matches {len(matches)} runs; give more of the run id")
    raise RunError(f"no run '{run_id}' under {base / RUNS}; see 'll list' for run ids")


def _find_in_tree(base: Path, target: str) -> RunDir:
    """A run directory named by its path, or a child run by its id under a root run."""
    path = Path(target)
    kept = not (path / "state.json").is_file() and not path.is_symlink()
    if kept and path.parent.name == "sub" and (entry := journal_entry(path)) is not None:
        run = RunDir(path)  # a child with no state of its own: its journal entry
        given = entry["state"].get("run_id")
        if isinstance(given, str) and given:
            run.tree_id = given
        return run
    if (path / "state.json").is_file() and not path.is_symlink():
        run = RunDir(path.resolve())
        run.check_links()
        try:
            given = json.loads(run.state_path.read_text(encoding="utf-8")).get("run_id")
        except (OSError, ValueError, AttributeError, RecursionError):
            given = None
        if isinstance(given, str) and given:
            run.tree_id = given
        return run
    first, *parts = [p for p in target.split("/") if p]
    if not first or os.sep in first or path.is_absolute() or first in (".", ".."):
        raise RunError(
            f"{target} is neither a run directory (one with a state.json) nor a run id; "
            "see 'll list' for run ids"
        )
    root = find_run(base, first)
    here = root.root
    for i, part in enumerate(parts):
        if part in (".", "..") or not part:
            here = Path()
            break
        # A child of a `loop:` state lives under `sub/`; a fork's branch under its fork's dir.
        inside = here / "sub" / part
        if inside.is_dir() and not inside.is_symlink():
            here = inside
        elif journal_entry(inside) is not None:
            here = inside  # a `loop:` child kept in memory: an entry of a journal above it
        elif (
            here.parent.name == "sub" and (here / part).is_dir() and not (here / part).is_symlink()
        ):
            here = here / part
        elif here.parent.name == "sub" and journal_entry(here / part) is not None:
            here = here / part  # an action branch, in its fork's journal
        else:
            given = "/".join([root.run_id, *parts[: i + 1]])
            if here.parent.name == "sub" and part in _fork_keys(here):
                raise _not_ended(given, root.run_id)
            if _calling(here, part):
                raise RunError(
                    f"child run '{given}' has not ended: a sub-loop's run is recorded when it "
                    f"ends (or once it has a step to resume from); follow the run with "
                    f"'ll logs -f {root.run_id}'"
                )
            known = ", ".join(_children_ids(here)) or "none"
            raise RunError(f"no child run '{given}' (the children here: {known})")
    if not (here / "state.json").is_file() and journal_entry(here) is None:
        given = "/".join([root.run_id, *parts])
        if here.parent.parent.name == "sub" and here.name in _fork_keys(here.parent):
            raise _not_ended(given, root.run_id)
        raise RunError(f"no child run '{given}'; a fork's branch is RUN/STEP-STATE/KEY")
    run = RunDir(here)
    run.tree_id = "/".join([root.run_id, *parts])
    return run


def _calling(run: Path, part: str) -> bool:
    """Whether the run at `run` is running the `loop:` step whose child is `part`
    (`0003-deploy`, `0003-deploy.2`): a child kept in memory until it ends."""
    try:
        state = json.loads((run / "state.json").read_text(encoding="utf-8"))
        step, current = int(state["step"]) + 1, str(state["current"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return False
    name = f"{step:04d}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', current)}"
    return state.get("status") == "running" and (part == name or part.startswith(name + "."))


def _fork_keys(fork: Path) -> set[str]:
    """The branch keys a fork's `items.json` lists (empty when it cannot be read)."""
    try:
        items = json.loads((fork / "items.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return set()
    if not isinstance(items, list):
        return set()
    return {i["key"] for i in items if isinstance(i, dict) and isinstance(i.get("key"), str)}


def _not_ended(given: str, root_id: str) -> RunError:
    """An action branch of the fork that has no record yet: it is running, or was cut off
    (an action branch is recorded in its fork's journal when it ends)."""
    return RunError(
        f"branch '{given}' has not ended: a fork records an action branch when it ends; "
        f"follow the run with 'll logs -f {root_id}'"
    )


def _children_ids(here: Path) -> list[str]:
    """The names that go on from `here`: its children under `sub/`, or a fork's branches."""
    run = (here / "state.json").is_file() or (
        here.parent.name == "sub" and journal_entry(here) is not None
    )
    folder = here / "sub" if run else here
    names = call_children(here) if run else set()
    if folder.is_dir():
        names.update(p.name for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    if folder.parent.name == "sub":
        names.update(read_journal(folder))
    return sorted(names)
