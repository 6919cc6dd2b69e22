"""Start one command in its own process group and pump its output until the group is gone.

Both streams are read as raw bytes as they arrive (never line by line, so a partial line cannot
delay a timeout), appended to the step's log, handed to the hooks, and kept in memory only as a
bounded tail. A timeout, the direct child's exit, or any exception raised while waiting
(KeyboardInterrupt, the runner's termination exception) ends every member of the group:
SIGTERM, a short grace, then SIGKILL. With `actions` and `reaper`, this is the process layer:
the only modules that start processes for a step (the contract is in docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from little_loops.actions.plain import dash_environment, own_environment, signal_ending
from little_loops.actions.reaper import (
    GUARD,
    KILL_GRACE_S,
    KILL_WAIT_S,
    ORPHANS,
    SPAWNING,
    group_alive,
)
from little_loops.model.records import record
from little_loops.record.store import LogSegment, StepLog

# `subprocess` (with `locale`, `selectors` and `_posixsubprocess`, which it imports) is loaded
# only where Popen is used: on Linux, actions started in `ll`'s own directory are started by
# posix_spawn, and a run of them never needs it (about 2 ms of every `ll run`).
TYPE_CHECKING = False  # mypy reads this
if TYPE_CHECKING:
    import subprocess

OutputHook = Callable[[str, bytes], None]
Window = Callable[[], contextlib.AbstractContextManager[None]]
StrPath = str | os.PathLike[str]

EXIT_DRAIN_S = 0.2  # reading on after the direct child exited while a pipe is still held open
POST_KILL_DRAIN_S = 0.5  # reading what is left in the pipes once the group was killed
POLL_S = 0.05  # wake-up interval where pidfd_open is unavailable
READ_CHUNK = 1 << 16
EXIT_READS = 16  # chunks read at once per pipe when the child has exited (1 MiB)
DEFAULT_TAIL_BYTES = 1 << 20

_DEVNULL: int | None = None
_LINUX = sys.platform.startswith("linux")


def _devnull() -> int:
    """One /dev/null for every action's stdin, opened once (Popen would open one per action)."""
    global _DEVNULL
    if _DEVNULL is None:
        _DEVNULL = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return _DEVNULL


def ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


class Tail:
    """The last `limit` bytes of a stream, kept as the chunks read (no copy while they fit);
    trimmed at 2x the limit so trimming is amortised."""

    __slots__ = ("chunks", "exact", "limit", "size", "trimmed")

    def __init__(self, limit: int) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.limit = max(limit, 0)
        self.trimmed = False
        self.exact = True  # whether `text()` decoded every byte (no replacement character)

    def add(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)
        if self.size > 2 * self.limit:
            kept = b"".join(self.chunks)[-self.limit :] if self.limit else b""
            self.chunks = [kept] if kept else []
            self.size = len(kept)
            self.trimmed = True

    @property
    def cut(self) -> bool:
        """Whether bytes before the last `limit` were dropped."""
        return self.trimmed or self.size > self.limit

    def data(self) -> bytes:
        """The bytes kept, whole (one chunk is given as it was read)."""
        chunks = self.chunks
        if len(chunks) > 1:
            self.chunks = chunks = [b"".join(chunks)]
        return chunks[0] if chunks else b""

    def text(self) -> str:
        if self.limit == 0 or not self.size:
            return ""
        data: bytes | memoryview = self.data()
        if self.cut:
            data = memoryview(data)[-self.limit :]
            # A cut may land inside a multi-byte character: start at the next one.
            skip = 0
            while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
                skip += 1
            data = data[skip:]
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError:
            self.exact = False
            return str(data, "utf-8", "replace")


@record
class Run:
    stdout: Tail
    stderr: Tail
    exit_code: int | None
    timed_out: bool
    output_bytes: int
    duration_ms: int
    # Where stdout's bytes lie in the run's log, all of them, in one piece and as read (no
    # stderr between them, no cut): the output record then points there instead of holding
    # a second copy (record/outputs.py). None otherwise.
    stdout_at: int | None = None


class _Selector:
    """poll(2) over an action's three descriptors, for reading: what `selectors.PollSelector`
    did here, without its key objects and its map (three registrations, a wait or two and
    three removals a step). poll needs no kernel object per step, unlike epoll."""

    __slots__ = ("_poll",)

    def __init__(self) -> None:
        self._poll = select.poll()

    def register(self, fd: int) -> None:
        self._poll.register(fd, select.POLLIN)

    def unregister(self, fd: int) -> None:
        self._poll.unregister(fd)

    def select(self, timeout: float | None = None) -> list[int]:
        """The descriptors ready to read (or at their end, or in error) within `timeout`
        seconds; None waits for one."""
        ms = None if timeout is None else max(math.ceil(timeout * 1000), 0)
        return [fd for fd, _ in self._poll.poll(ms)]

    def close(self) -> None:
        return


class _Sink:
    """Reads the child's pipes and fans each chunk out to the log, the tails and the hooks."""

    def __init__(
        self,
        stdout: Tail,
        stderr: Tail,
        log_path: StrPath | LogSegment | None,
        on_output: OutputHook | None,
        on_stdout: Callable[[bytes], None] | None,
    ) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.sel = _Selector()
        self.streams: dict[int, tuple[str, Tail]] = {}
        # stdout before stderr, in the order they were attached: what both pipes hold at once
        # goes to the log stdout first, whatever numbers the descriptors got (a set's order
        # follows the numbers, so a log could show a step's stderr line before the stdout line
        # it printed first).
        self.open: dict[int, None] = {}
        # A path is opened at the first byte: a step that prints nothing leaves no empty log
        # behind, and a silent step does not pay for creating a file. A `LogSegment` (the
        # run's one log) is written as it is.
        self.log: StepLog | LogSegment | None = None
        self.log_path: StrPath | None = None
        if isinstance(log_path, LogSegment):
            self.log = log_path
        else:
            self.log_path = log_path
        # stdout's place in the run's log while its bytes there stay whole and in one piece
        self.out_at: int | None = None
        self.out_whole = isinstance(log_path, LogSegment)
        self.on_output = on_output
        self.on_stdout = on_stdout
        self.total = 0
        self.pidfd: int | None = None

    def attach(self, stdout: int, stderr: int, pid: int) -> None:
        """Watch the read ends of the child's pipes, and its exit."""
        for name, fd, tail in (("stdout", stdout, self.stdout), ("stderr", stderr, self.stderr)):
            os.set_blocking(fd, False)
            self.sel.register(fd)
            self.streams[fd] = (name, tail)
            self.open[fd] = None
        self.watch_exit(pid)

    def close(self) -> None:
        """Release the selector, the pidfd and the log; the pipes belong to `_Pipes`."""
        self.unwatch_exit()
        self.sel.close()
        if self.log is not None:
            self.log.close()

    def watch_exit(self, pid: int) -> None:
        """Wake select as soon as `pid` exits, where the platform has pidfd_open."""
        opener = getattr(os, "pidfd_open", None)
        if opener is None:
            return
        try:
            self.pidfd = int(opener(pid))
        except OSError:
            return
        self.sel.register(self.pidfd)

    def unwatch_exit(self) -> None:
        pidfd, self.pidfd = self.pidfd, None
        if pidfd is not None:
            self.sel.unregister(pidfd)
            os.close(pidfd)

    def read(self, fd: int) -> bool:
        """One chunk of `fd`, fanned out; False when there was none (yet, or any more)."""
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return False
        if not chunk:
            self.sel.unregister(fd)
            self.open.pop(fd, None)
            return False
        self.take(fd, chunk)
        return True

    def take(self, fd: int, chunk: bytes) -> None:
        """Fan a chunk of `fd`'s stream out to the log, the tail and the hooks."""
        name, tail = self.streams[fd]
        self.total += len(chunk)
        log = self.log
        if log is None and self.log_path is not None:
            os.makedirs(os.path.dirname(os.fspath(self.log_path)) or ".", exist_ok=True)
            log = self.log = StepLog(os.fspath(self.log_path))
        if self.out_whole and name == "stdout":
            self._stdout_to_log(chunk)
        elif log is not None:
            log.write(chunk)
        tail.add(chunk)
        if self.on_stdout is not None and name == "stdout":
            self.on_stdout(chunk)
        if self.on_output is not None:
            self.on_output(name, chunk)

    def _stdout_to_log(self, chunk: bytes) -> None:
        """Write a stdout chunk to the run's log, following whether all of stdout is there
        in one piece: each chunk right after the one before, none of it cut."""
        log = self.log
        assert isinstance(log, LogSegment)
        at = log.start + log.size  # a run's attempt writes its log alone: its bytes follow
        if self.out_at is None:
            self.out_at = at
        elif at != self.out_at + self.stdout.size:
            self.out_whole = False  # stderr came in between
        log.write(chunk)
        if log.cut:
            self.out_whole = False

    def stdout_at(self) -> int | None:
        """Where all of stdout lies in the run's log, as read; None if it does not."""
        if self.out_whole and self.out_at is not None and not self.stdout.cut:
            return self.out_at
        return None

    def read_held(self) -> None:
        """Read what the pipes hold now, up to their end where every writer is gone: once the
        child exited, its last output and the end of file are usually both there already,
        and another wait would only find them (a printing step's second poll)."""
        for fd in list(self.open):
            for _ in range(EXIT_READS):  # bounded: a background writer may keep writing
                if not self.read(fd):
                    break

    def drain(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while self.open:
            left = end - time.monotonic()
            if left <= 0:
                return
            for fd in self.sel.select(left):
                self.read(fd)


def execute(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str] | None,
    timeout: float | None,
    log_path: StrPath | LogSegment | None,
    tail_bytes: int,
    on_output: OutputHook | None,
    on_stdout: Callable[[bytes], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    stdin: int | None = None,
    pass_fds: tuple[int, ...] = (),
    interruptible: Window | None = None,
    plain: list[str] | None = None,
) -> Run:
    """Start argv in its own group and pump its output until it and its group are gone.

    `stdin` is a descriptor for the child's standard input (default /dev/null); `pass_fds`
    stay open in the child. `interruptible`, when given, opens the only stretch where the
    caller's signal handlers may raise: the wait. Starting, killing and cleaning up then never
    stop half-way. `plain`: the words of a plain command that argv's shell would only exec
    (`plain.plain_argv`), started without the shell where that gives what the shell would.
    """
    GUARD.ready()
    pipes = _Pipes()
    started = time.monotonic()
    try:
        # Watched before another thread's sweep could take it for an escaped orphan.
        with SPAWNING:
            proc = _start(
                argv,
                cwd,
                None if env is None else GUARD.marked(env),
                _devnull() if stdin is None else stdin,
                pipes,
                pass_fds,
                plain,
            )
            try:
                GUARD.watch(proc.pid)
            except BaseException:
                _stop(proc)
                raise
    except BaseException:
        pipes.close()
        raise
    # From here on, whatever happens (even an interrupt between two lines), the group dies.
    sink: _Sink | None = None
    try:
        pipes.close_writers()  # the child has them: end of file comes when its group is done
        # Everything from here to the wait overlaps the child's start-up.
        sink = _Sink(Tail(tail_bytes), Tail(tail_bytes), log_path, on_output, on_stdout)
        sink.attach(pipes.out_r, pipes.err_r, proc.pid)
        if on_start is not None:
            on_start(proc.pid)
        deadline = None if timeout is None else started + max(timeout, 0.0)
        with interruptible() if interruptible is not None else contextlib.nullcontext():
            timed_out = _pump(proc, sink, deadline)
        exit_code = None if timed_out else proc.returncode
        if exit_code is not None and isinstance(proc, _Spawned) and proc.plain:
            ending = signal_ending(proc.status)
            if ending is not None:  # what dash says and returns for a command a signal ended
                exit_code, line = ending
                if line:
                    sink.take(pipes.err_r, line)
        sink.unwatch_exit()
        if timed_out or group_alive(proc.pid):
            _kill_group(proc)
        ORPHANS.sweep()  # descendants that left the group (setsid, set -m) go too
        sink.drain(POST_KILL_DRAIN_S)
    except BaseException:
        _stop(proc)
        raise
    finally:
        GUARD.forget(proc.pid)
        if sink is not None:
            sink.close()
        pipes.close()
    return Run(
        stdout=sink.stdout,
        stderr=sink.stderr,
        exit_code=exit_code,
        timed_out=timed_out,
        output_bytes=sink.total,
        duration_ms=ms_since(started),
        stdout_at=sink.stdout_at(),
    )


# -- starting the child ---------------------------------------------------------------------
#
# `os.posix_spawn` where it can do what `subprocess.Popen` would, else Popen. Popen's own
# Python work around the same vfork and exec (its arguments checked and turned into lists, the
# executable looked up, an error pipe read, a Popen object) is most of what starting an action
# costs this process: posix_spawn starts the same child for about half (docs/performance.md,
# "A step's spawn"). It cannot change the child's directory, so it is used where the action
# runs in this process's own directory (the default: where `ll run` was started); and only on
# Linux, where glibc's `posix_spawn` creates the child with `CLONE_VFORK` and reports a failed
# exec as the error Popen raises (FileNotFoundError, PermissionError).


class _Spawned:
    """A child started by `posix_spawn`: what this module uses of a Popen."""

    __slots__ = ("pid", "plain", "returncode", "status")

    def __init__(self, pid: int, plain: bool = False) -> None:
        self.pid = pid
        self.plain = plain  # a plain command, exec'd without its shell
        self.returncode: int | None = None
        self.status = 0  # the wait status, once reaped

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): as Popen says
                self.returncode = 0
            else:
                if pid:
                    self.status = status
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            while self.returncode is None:
                try:
                    _, status = os.waitpid(self.pid, 0)
                except ChildProcessError:
                    self.returncode = 0
                else:
                    self.status = status
                    self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode
        end = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() >= end:
                import subprocess

                raise subprocess.TimeoutExpired(["(action)"], timeout)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode


if TYPE_CHECKING:
    _Child = subprocess.Popen[bytes] | _Spawned
# The descriptors this process was given that a child would inherit (fds 3 and up, not
# close-on-exec), found at the first action: closed in every child, as Popen's `close_fds`
# closes them. None: not looked yet; False: posix_spawn is not used in this process.
_INHERITED: tuple[int, ...] | bool | None = None
_SIGDEF = (signal.SIGPIPE, signal.SIGXFSZ)  # ignored by Python, default in a child (Popen's)
# `signal.getsignal` without its wrapper, which makes each answer an enum (20 times the cost).
# (`_signal`, loaded by `signal`, is its C half: one the type stubs do not describe.)
_GETSIGNAL: Callable[[int], object] = getattr(
    sys.modules.get("_signal"), "getsignal", signal.getsignal
)
_IGNORED = int(signal.SIG_IGN)
# Every signal a disposition can be set for (not SIGKILL, SIGSTOP, nor the C library's own).
_SETTABLE = tuple(
    int(sig) for sig in signal.valid_signals() if sig not in (signal.SIGKILL, signal.SIGSTOP)
)


def _defaults() -> list[int]:
    """The signals a child gets back at their default: `_SIGDEF`, and every one this process
    does not ignore; an ignored one stays ignored, as `sh -c` and Popen leave it (`nohup`).

    That is what glibc's posix_spawn gives the child anyway: it sets every signal missing
    from `setsigdef` to its default too, unless the child finds it ignored, at the cost of
    asking first (two system calls a signal in the child, where one does). Read at each
    action, through the C `getsignal` (a few µs in all), as dispositions change."""
    ignored, get = _IGNORED, _GETSIGNAL
    return [*_SIGDEF, *[sig for sig in _SETTABLE if get(sig) != ignored]]


def _inherited() -> tuple[int, ...] | bool:
    global _INHERITED
    if _INHERITED is None:
        found: list[int] = []
        try:
            names = os.listdir("/proc/self/fd")
        except OSError:
            _INHERITED = False
            return False
        for name in names:
            fd = int(name)
            if fd > 2:
                with contextlib.suppress(OSError):  # the listing's own descriptor, closed now
                    if os.get_inheritable(fd):
                        found.append(fd)
        _INHERITED = tuple(found) if hasattr(os, "posix_spawn") else False
    return _INHERITED


def _start(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str] | None,
    stdin: int,
    pipes: _Pipes,
    pass_fds: tuple[int, ...],
    plain: list[str] | None = None,
) -> _Child:
    """Start argv in a new session, stdin from `stdin`, stdout and stderr into `pipes`; the
    words of `plain` without argv's shell where `plain.dash_environment` allows it."""
    global _INHERITED
    if (
        _LINUX
        and not pass_fds
        and argv[0].startswith("/")
        and min(stdin, pipes.out_w, pipes.err_w) > 2
        and os.fspath(cwd) == os.getcwd()
    ):
        inherited = _inherited()
        if inherited is not False:
            assert isinstance(inherited, tuple)
            actions: list[tuple[int, ...]] = [
                (os.POSIX_SPAWN_DUP2, stdin, 0),
                (os.POSIX_SPAWN_DUP2, pipes.out_w, 1),
                (os.POSIX_SPAWN_DUP2, pipes.err_w, 2),
            ]
            actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in inherited]
            environment = own_environment() if env is None else env
            sigdef = _defaults()
            child = None if plain is None else dash_environment(environment, os.fspath(cwd))
            try:
                if plain is not None and child is not None:
                    try:
                        pid = os.posix_spawnp(
                            plain[0],
                            plain,
                            child,
                            file_actions=actions,
                            setsid=True,
                            setsigdef=sigdef,
                            setsigmask=(),
                        )
                    except OSError:
                        pass  # not found, not executable, no `#!`: the shell is started and says
                    else:
                        return _Spawned(pid, plain=True)
                pid = os.posix_spawn(
                    argv[0],
                    argv,
                    environment,
                    file_actions=actions,
                    setsid=True,
                    setsigdef=sigdef,
                    setsigmask=(),
                )
            except NotImplementedError:  # no POSIX_SPAWN_SETSID here: Popen from now on
                _INHERITED = False
            else:
                return _Spawned(pid)
    import subprocess

    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=stdin,
        pass_fds=pass_fds,
        stdout=pipes.out_w,
        stderr=pipes.err_w,
        start_new_session=True,
    )


class _Pipes:
    """An action's stdout and stderr pipes, made here rather than by Popen.

    Popen would wrap each read end in a file object this module never reads through; raw
    descriptors are cheaper to make and to close, and each action pays for them twice.
    """

    __slots__ = ("err_r", "err_w", "held", "out_r", "out_w")

    def __init__(self) -> None:
        self.held: list[int] = []
        try:
            self.out_r, self.out_w = self._pipe()
            self.err_r, self.err_w = self._pipe()
        except BaseException:
            self.close()
            raise

    def _pipe(self) -> tuple[int, int]:
        read_end, write_end = os.pipe()  # close-on-exec: only the dup2'd copies reach the child
        self.held += (read_end, write_end)
        return read_end, write_end

    def close_writers(self) -> None:
        for fd in (self.out_w, self.err_w):
            if fd in self.held:
                self.held.remove(fd)
                os.close(fd)

    def close(self) -> None:
        while self.held:
            os.close(self.held.pop())


def _pump(proc: _Child, sink: _Sink, deadline: float | None) -> bool:
    """Read until the child exited and its pipes closed; True when the deadline came first.

    Once the direct child has exited, a pipe still held open by a background member of its
    group is read for at most EXIT_DRAIN_S more; the caller then kills the group.
    """
    drain_until: float | None = None
    # Whether the child may have exited since the last look: at first (it often has, on a
    # busy machine), then when its pidfd says so, or at every wake-up without a pidfd.
    look = True
    while True:
        if look and drain_until is None and proc.poll() is not None:
            sink.read_held()
            if not sink.open:
                return False
            drain_until = time.monotonic() + EXIT_DRAIN_S
            sink.unwatch_exit()
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return True
        if drain_until is not None and (now >= drain_until or not sink.open):
            return False
        wait = None if deadline is None else deadline - now
        if drain_until is not None:
            wait = drain_until - now if wait is None else min(wait, drain_until - now)
        elif sink.pidfd is None:
            wait = POLL_S if wait is None else min(wait, POLL_S)
        pidfd = sink.pidfd
        look = pidfd is None
        for fd in sink.sel.select(wait):
            if fd == pidfd:
                look = True
            else:
                sink.read(fd)


def _stop(proc: _Child) -> None:
    """Kill the group on the way out of an exception; a second interrupt skips the grace."""
    try:
        _kill_group(proc)
        ORPHANS.sweep()
    except BaseException:
        _signal_group(proc.pid, signal.SIGKILL)
        import subprocess

        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_WAIT_S)
        ORPHANS.sweep(grace=0.0)
        raise


def _kill_group(proc: _Child) -> None:
    """SIGTERM the child's whole group, give it KILL_GRACE_S, then SIGKILL what is left."""
    pgid = proc.pid
    if _signal_group(pgid, signal.SIGTERM) and not _wait_group(proc, KILL_GRACE_S):
        _signal_group(pgid, signal.SIGKILL)
        _wait_group(proc, KILL_WAIT_S)  # SIGKILL is not instant: let them actually go
    proc.wait()


def _wait_group(proc: _Child, seconds: float) -> bool:
    """Wait up to `seconds` for every member of the child's group to be gone."""
    end = time.monotonic() + seconds
    while True:
        proc.poll()
        if not group_alive(proc.pid):
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def start_detached(
    argv: list[str], output: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start argv in a session of its own, stdin from /dev/null, both streams appended to
    `output`; nobody waits for it or kills it (`ll run --background`)."""
    import subprocess

    with open(output, "ab") as out:
        return subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
