"""The `project` fixture's object: a temporary directory to write loop files in and run `ll` in.

tox's `tox_project` is the model. `project.ll(...)` runs the real `ll` command in this process,
through click's CliRunner (about a hundredth of a second instead of a fresh interpreter's
fraction of a second), when no process, signal or terminal behaviour is under test; with
`process=True` it runs `python -m little_loops` in a subprocess, as a user's shell does. Both
give the exit code, stdout and stderr under the names `subprocess.run` uses.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class Result:
    """What `ll` did: its exit code and what it printed on each stream."""

    returncode: int
    stdout: str
    stderr: str


class Project:
    """A directory of loop files (the test's tmp_path) and the `ll` that runs in it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, name: str, text: str) -> Path:
        """Write `text` (dedented) to `name` under the project; returns its path."""
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    def ll(
        self,
        *args: str | Path,
        cwd: Path | None = None,
        env: Mapping[str, str | None] | None = None,
        process: bool = False,
        timeout: float = 120,
    ) -> Result:
        """`ll ARGS` in `cwd` (the project by default), with `env` added to the environment
        (a name given None is taken out of it)."""
        argv = [str(arg) for arg in args]
        where = cwd if cwd is not None else self.path
        if process:
            proc = subprocess.run(
                [sys.executable, "-m", "little_loops", *argv],
                cwd=where,
                env=_environ(env) if env else None,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            return Result(proc.returncode, proc.stdout, proc.stderr)
        return _in_process(argv, where, env)


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)


def _environ(env: Mapping[str, str | None]) -> dict[str, str]:
    full = {**os.environ, **env}
    return {name: value for name, value in full.items() if value is not None}


def _in_process(argv: list[str], cwd: Path, env: Mapping[str, str | None] | None) -> Result:
    from click.testing import CliRunner

    from little_loops.cli.main import main

    runner = CliRunner(**_separate_streams())  # type: ignore[arg-type]
    before = os.getcwd()
    # `ll run` ignores SIGINT and SIGTERM once its run is recorded, as a process about to exit
    # may; here the process goes on, and a child it starts later (a `sleep` a test kills with
    # SIGTERM) would inherit the ignoring. So the handlers are put back as they were.
    handlers = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    # It also adopts its actions' orphans and, after each step, kills every child of the
    # process but its guard: in the test's process that would be the test's own children (a
    # `sleep` standing for a live owner), so the adoption ends with the command.
    # The adoption is the kernel's too (a child subreaper keeps the orphans of everything the
    # test starts later, as zombies nobody collects), so that bit is put back as well.
    from little_loops.actions.reaper import ORPHANS

    adopted = ORPHANS.enabled
    reaper = subreaper()
    # The first action marks the process's environment (LL_ACTION_OWNER, for the guard that
    # kills a dead runner's actions); a test's later subprocesses must not inherit that mark.
    environ = dict(os.environ)
    os.chdir(cwd)
    try:
        # pytest turns every warning into an error (pyproject's filterwarnings); `ll` runs
        # under Python's own defaults, as it does for a user, where a library's
        # DeprecationWarning (an SDK's about a model) is not shown, let alone raised.
        with warnings.catch_warnings():
            _python_defaults()
            # A crash is raised here with its traceback, not turned into exit 1 and hidden.
            result = runner.invoke(
                main, argv, prog_name="ll", env=dict(env) if env else None, catch_exceptions=False
            )
    finally:
        os.chdir(before)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        ORPHANS.enabled = adopted
        if reaper is not None and subreaper() != reaper:
            _set_subreaper(reaper)
        for name in set(os.environ) - set(environ):
            del os.environ[name]
        os.environ.update((k, v) for k, v in environ.items() if os.environ.get(k) != v)
    return Result(result.exit_code, result.stdout, result.stderr)


@functools.cache
def _separate_streams() -> dict[str, bool]:
    """CliRunner's arguments for stdout and stderr apart: click 8.2 keeps them apart always and
    has no `mix_stderr`; 8.1, the lowest pyproject allows (`nox -s minimums`), mixes them unless
    told not to."""
    from importlib.metadata import version

    major, minor = (int(part) for part in version("click").split(".")[:2])
    return {"mix_stderr": False} if (major, minor) < (8, 2) else {}


def _python_defaults() -> None:
    """The warning filters a Python process starts with (no -W, no PYTHONWARNINGS)."""
    warnings.resetwarnings()
    warnings.filterwarnings("ignore", category=ResourceWarning)
    warnings.filterwarnings("ignore", category=ImportWarning)
    warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")


_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


def subreaper() -> bool | None:
    """Whether this process is a child subreaper (Linux); None where that cannot be asked."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    flag = ctypes.c_int(0)
    if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
        return None
    return bool(flag.value)


def _set_subreaper(on: bool) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)


@contextlib.contextmanager
def shared_dir(factory: pytest.TempPathFactory, name: str) -> Iterator[tuple[Path, bool]]:
    """A directory made once a session and shared by its xdist workers (a costly fixture's
    output, such as the converted corpus): yields (the directory, whether this caller makes
    it). The first caller makes it under a lock while the others wait; a maker that fails
    leaves it to the next."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # this session's, above every worker's own
    path = base / name
    with (base / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (base / f"{name}.made").is_file():
            yield path, False
            return
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir()
        yield path, True
        (base / f"{name}.made").touch()


REPO = Path(__file__).resolve().parent.parent
# What a copy of the checkout leaves out when git cannot say what the checkout holds.
NOT_THE_PROJECT = (
    *(".git", ".venv", ".nox", ".tox", "build", "dist", ".loops", "*.egg-info", "__pycache__"),
    *(".*_cache", ".hypothesis", "reports", ".bench-*"),
)


def copy_checkout(dest: Path, source: Path = REPO) -> None:
    """Copy this checkout's files, as a clone with its working changes would hold them, to
    `dest`: what git tracks plus what it would add, never what it ignores. A session's own
    temporary folders may lie inside the checkout (`nox` puts them in `.nox/`, under the
    session's venv), and copying the whole tree would then copy the copy into itself until
    the disk is full (it filled this machine's 68 GB once)."""
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=source, capture_output=True, check=False
    )
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source,
        capture_output=True,
        check=False,
    )
    ours = top.returncode == 0 and Path(os.fsdecode(top.stdout.strip())) == source.resolve()
    if listed.returncode != 0 or not ours:  # not a checkout of its own (an unpacked sdist, or
        # a folder inside another repository's ignored files): leave out the known
        inside = dest.resolve()

        def skip(folder: str, names: list[str]) -> set[str]:
            left = set(shutil.ignore_patterns(*NOT_THE_PROJECT)(folder, names))
            return left | {n for n in names if (Path(folder) / n).resolve() == inside}

        shutil.copytree(source, dest, ignore=skip, symlinks=True)
        return
    for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0"):
        path = source / name
        if not name or not os.path.lexists(path):  # deleted in the working tree
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target, follow_symlinks=False)


def held_after_a_childs_end(argv: list[str], cwd: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`ll run ... --json` (`argv`) writing into a 4 KiB pipe that is read up to a child run's
    `loop_complete` and then no further: `ll` blocks on its next large write, between the
    child's end and its caller's record of it. The process and the pipe's read end (close it
    after killing the process)."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=write_end, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    os.close(write_end)
    line = b""
    while True:
        chunk = os.read(read_end, 1)
        assert chunk, "ll ended early"
        line += chunk
        if chunk == b"\n":
            if b'"event":"loop_complete"' in line and b'"path"' in line:
                return proc, read_end
            line = b""


def fork_journal(fork: Path) -> dict[str, dict[str, Any]]:
    """A fork's journal of action branches (`branches.jsonl`) by key, read as plain JSON lines
    (not through `ll`'s reader): a later entry wins, a torn line (a kill mid-write) is skipped."""
    found: dict[str, dict[str, Any]] = {}
    path = fork / "branches.jsonl"
    for line in path.read_bytes().splitlines() if path.is_file() else []:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        found[entry["key"]] = entry
    return found


@contextlib.contextmanager
def time_limit(seconds: int, what: str) -> Iterator[None]:
    """In the main thread, raise TimeoutError in whatever runs after `seconds` (SIGALRM): an
    in-process `ll` that hangs then fails its test (`ll` ends with the reason on screen, a run
    error) instead of holding the suite, as a subprocess's `timeout=` did."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"{what}: still running after {seconds} s")

    before = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
