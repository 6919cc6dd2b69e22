"""Run actions: shell commands and `claude -p` slash commands, each in its own process group.

This is the only module that starts subprocesses. Both kinds of action share one pump: stdout
and stderr are read as raw bytes as they arrive (never line by line, so a partial line cannot
delay a timeout), appended to the step's log, handed to `on_output`, and kept in memory only as
a bounded tail. A timeout, the direct child's exit, or any exception raised while waiting
(KeyboardInterrupt, the runner's termination exception) ends every member of the group:
SIGTERM, a short grace, then SIGKILL. Should this process die by SIGKILL mid-action, a small
guard process it started kills the running groups for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shlex
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from little_loops.errors import LoopError, RunError
from little_loops.model import EMPTY
from little_loops.store import StepLog

OutputHook = Callable[[str, bytes], None]
Window = Callable[[], contextlib.AbstractContextManager[None]]
StrPath = str | os.PathLike[str]

KILL_GRACE_S = 0.75  # between SIGTERM and SIGKILL of a process group
KILL_WAIT_S = 2.0  # for SIGKILLed members to be gone (bounded: a process stuck in D state)
EXIT_DRAIN_S = 0.2  # reading on after the direct child exited while a pipe is still held open
POST_KILL_DRAIN_S = 0.5  # reading what is left in the pipes once the group was killed
POLL_S = 0.05  # wake-up interval where pidfd_open is unavailable
READ_CHUNK = 1 << 16
MAX_EVENT_LINE = 64 << 20  # a stream-JSON line longer than this is skipped, not buffered
DEFAULT_TAIL_BYTES = 1 << 20
# The kernel refuses a single argument over 128 KiB (MAX_ARG_STRLEN, "argument list too
# long"): a longer command or prompt goes to the child through a file descriptor instead.
MAX_ARG_BYTES = 100_000

SLASH_FLAGS = ("--dangerously-skip-permissions",)
_ROOT_REFUSAL = "cannot be used with root/sudo privileges"
_ROOT_HINT = (
    "the claude CLI refuses --dangerously-skip-permissions when running as root unless "
    "IS_SANDBOX=1 is set: inside a disposable container or VM run `export IS_SANDBOX=1` "
    "before `ll run`, or run ll as a non-root user"
)
_RESULT_DETAIL_KEYS = (
    "is_error",
    "subtype",
    "total_cost_usd",
    "usage",
    "num_turns",
    "duration_ms",
    "duration_api_ms",
    "session_id",
)


class ActionStartError(RunError):
    """An action could not be started: its shell or its working directory is missing."""


@dataclass(frozen=True)
class ActionResult:
    """What one action did. Text fields are tails, decoded as UTF-8 with replacement.

    `exit_code` is None when the action was killed by its timeout or never started, negative
    when a signal ended it. `error` is set when a slash action failed outside the command itself
    (CLI missing, non-zero exit, `is_error`, no result event); the runner turns it into verdict
    `error`. `output_bytes` counts every byte seen on both streams, not only the tails.
    """

    output: str
    stderr: str
    exit_code: int | None
    duration_ms: int
    timed_out: bool
    output_bytes: int
    error: str | None = None
    cost_usd: float = 0.0
    details: Mapping[str, Any] = field(default_factory=lambda: EMPTY)

    def to_dict(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "stderr": self.stderr,
            "exit_code": self.exit_code,
            "duration_ms": self.duration_ms,
            "timed_out": self.timed_out,
            "output_bytes": self.output_bytes,
            "error": self.error,
            "cost_usd": self.cost_usd,
            "details": dict(self.details),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ActionResult:
        exit_code = data.get("exit_code")
        error = data.get("error")
        return cls(
            output=str(data.get("output", "")),
            stderr=str(data.get("stderr", "")),
            exit_code=None if exit_code is None else int(exit_code),
            duration_ms=int(data.get("duration_ms", 0)),
            timed_out=bool(data.get("timed_out", False)),
            output_bytes=int(data.get("output_bytes", 0)),
            error=None if error is None else str(error),
            cost_usd=float(data.get("cost_usd", 0.0)),
            details=dict(data.get("details") or {}),
        )


def claude_command(cli_value: str | None, env: Mapping[str, str]) -> list[str]:
    """The argv prefix for slash actions: `--claude PATH`, else `$LL_CLAUDE` split, else claude."""
    if cli_value:
        return [cli_value]
    raw = env.get("LL_CLAUDE", "").strip()
    if raw:
        try:
            parts = shlex.split(raw)
        except ValueError as exc:
            raise LoopError(
                f"LL_CLAUDE={raw!r} is not a valid command line ({exc}); fix its quoting"
            ) from exc
        if parts:
            return parts
    return ["claude"]


def claude_flags(cli_value: str | None, env: Mapping[str, str]) -> list[str]:
    """The permission flags for slash actions: `--claude-flags`, else `$LL_CLAUDE_FLAGS`, else
    SLASH_FLAGS. An empty value means no flags (the CLI then asks for permissions itself)."""
    raw = cli_value if cli_value is not None else env.get("LL_CLAUDE_FLAGS")
    if raw is None:
        return list(SLASH_FLAGS)
    try:
        return shlex.split(raw)
    except ValueError as exc:
        raise LoopError(f"claude flags {raw!r} are not a valid command line ({exc})") from exc


def run_shell(
    command: str,
    *,
    shell: str = "/bin/sh",
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    log_path: StrPath | None = None,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
    on_output: OutputHook | None = None,
    on_start: Callable[[int], None] | None = None,
    interruptible: Window | None = None,
) -> ActionResult:
    """Run `[shell, "-c", command]` in a new process group, stdin from /dev/null.

    `env` is the child's whole environment (None: inherit ours). Each chunk of either stream is
    appended to `log_path` (created with its parents at the first byte, so a silent action
    leaves none) and passed to `on_output("stdout" | "stderr", chunk)`. Raises
    ActionStartError when the shell or `cwd` does not exist.
    """
    _check_cwd(cwd)
    script = _long_text(command)
    # a long command is read by the shell from a descriptor, as if it were given with -c
    argv = [shell, "-c", command if script is None else f". /dev/fd/{script}"]
    try:
        run = _execute(
            argv, cwd, env, timeout, log_path, tail_bytes, on_output, on_start=on_start,
            pass_fds=() if script is None else (script,), interruptible=interruptible,
        )  # fmt: skip
    except FileNotFoundError:
        raise ActionStartError(
            f"cannot run shell action: shell {shell!r} not found; install it or set 'shell:' "
            "in the loop file to an existing shell such as /bin/sh"
        ) from None
    except PermissionError:
        raise ActionStartError(
            f"cannot run shell action: shell {shell!r} is not executable (permission denied); "
            "set 'shell:' in the loop file to an executable shell such as /bin/sh"
        ) from None
    finally:
        if script is not None:
            os.close(script)
    return ActionResult(
        output=run.stdout.text(),
        stderr=run.stderr.text(),
        exit_code=run.exit_code,
        duration_ms=run.duration_ms,
        timed_out=run.timed_out,
        output_bytes=run.output_bytes,
    )


def run_slash(
    prompt: str,
    *,
    claude: Sequence[str] = ("claude",),
    flags: Sequence[str] = SLASH_FLAGS,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    log_path: StrPath | None = None,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
    on_output: OutputHook | None = None,
    on_start: Callable[[int], None] | None = None,
    interruptible: Window | None = None,
) -> ActionResult:
    """Run `claude -p PROMPT --output-format stream-json --verbose FLAGS` like a shell action.

    `output` is the assistant's text (its text blocks joined by newlines, sub-agent messages
    left out), or the result event's `result` when it wrote none. The log and `on_output` get
    the raw stream-JSON. Never raises for a failing CLI: `error` says what went wrong.
    """
    if not claude:
        raise ValueError("claude command must not be empty")
    _check_cwd(cwd)
    # `claude -p` with no prompt argument reads the prompt from its standard input
    stdin = _long_text(prompt)
    given = [prompt] if stdin is None else []
    argv = [*claude, "-p", *given, "--output-format", "stream-json", "--verbose", *flags]
    parser = _StreamJson(tail_bytes)
    started = time.monotonic()
    try:
        run = _execute(
            argv,
            cwd,
            env,
            timeout,
            log_path,
            tail_bytes,
            on_output,
            on_stdout=parser.feed,
            on_start=on_start,
            stdin=stdin,
            interruptible=interruptible,
        )
    except (FileNotFoundError, PermissionError) as exc:
        problem = "not found" if isinstance(exc, FileNotFoundError) else "not executable"
        return ActionResult(
            output="",
            stderr="",
            exit_code=None,
            duration_ms=_ms_since(started),
            timed_out=False,
            output_bytes=0,
            error=f"claude CLI {problem}: {claude[0]!r}; install Claude Code or set "
            "LL_CLAUDE / --claude",
        )
    finally:
        if stdin is not None:
            os.close(stdin)
    parser.close()
    stderr = run.stderr.text()
    result = parser.result
    details: dict[str, Any] = {}
    if result is not None:
        details = {key: result[key] for key in _RESULT_DETAIL_KEYS if key in result}
    if parser.model is not None:
        details["model"] = parser.model
    cost = result.get("total_cost_usd") if result is not None else None
    return ActionResult(
        output=parser.output(),
        stderr=stderr,
        exit_code=run.exit_code,
        duration_ms=run.duration_ms,
        timed_out=run.timed_out,
        output_bytes=run.output_bytes,
        error=None if run.timed_out else _slash_error(run.exit_code, result, stderr),
        cost_usd=float(cost) if isinstance(cost, (int, float)) else 0.0,
        details=details,
    )


def _slash_error(
    exit_code: int | None, result: Mapping[str, Any] | None, stderr: str
) -> str | None:
    """Why a finished slash action failed, or None. The CLI can exit 0 on failure."""
    said = _result_message(result) if result is not None and result.get("is_error") else ""
    if exit_code != 0:
        said = said or _last_line(stderr)
        reason = f"claude CLI exited with code {exit_code}" + (f": {said}" if said else "")
    elif result is None:
        reason = "claude CLI ended without a result event" + (
            f"; stderr: {_last_line(stderr)}" if stderr.strip() else ""
        )
    elif result.get("is_error"):
        subtype = result.get("subtype") or "error"
        reason = f"claude CLI reported an error ({subtype})" + (f": {said}" if said else "")
    else:
        return None
    if _ROOT_REFUSAL in stderr:
        reason += f"; {_ROOT_HINT}"
    return reason


def _result_message(result: Mapping[str, Any]) -> str:
    text = result.get("result")
    if isinstance(text, str) and text.strip():
        return _clip(text.strip())
    errors = result.get("errors")
    if isinstance(errors, list) and errors:
        return _clip("; ".join(str(e) for e in errors))
    return ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return _clip(lines[-1]) if lines else ""


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_DEVNULL: int | None = None


def _long_text(text: str) -> int | None:
    """For text too long to be one argument, a descriptor reading it from its start; else None."""
    if len(text) * 4 <= MAX_ARG_BYTES:
        return None  # short enough whatever its encoding: spare the encoding
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= MAX_ARG_BYTES:
        return None
    try:
        fd = os.memfd_create("ll-action")  # in memory: the text may hold secrets
    except (AttributeError, OSError):
        import tempfile

        with tempfile.TemporaryFile() as file:  # already unlinked
            fd = os.dup(file.fileno())
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _devnull() -> int:
    """One /dev/null for every action's stdin, opened once (Popen would open one per action)."""
    global _DEVNULL
    if _DEVNULL is None:
        _DEVNULL = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return _DEVNULL


def _check_cwd(cwd: Path) -> None:
    try:
        is_dir = stat.S_ISDIR(os.stat(cwd).st_mode)  # one system call on the hot path
    except OSError:
        raise ActionStartError(
            f"cannot run action: working directory {str(cwd)!r} does not exist; create it or "
            "fix 'working_dir:' in the loop file"
        ) from None
    if not is_dir:
        raise ActionStartError(
            f"cannot run action: working directory {str(cwd)!r} is not a directory; "
            "fix 'working_dir:' in the loop file"
        )


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


class _Tail:
    """The last `limit` bytes of a stream; trimmed at 2x the limit so trimming is amortised."""

    __slots__ = ("buf", "limit", "trimmed")

    def __init__(self, limit: int) -> None:
        self.buf = bytearray()
        self.limit = max(limit, 0)
        self.trimmed = False

    def add(self, chunk: bytes) -> None:
        self.buf += chunk
        if len(self.buf) > 2 * self.limit:
            del self.buf[: len(self.buf) - self.limit]
            self.trimmed = True

    def text(self) -> str:
        if self.limit == 0 or not self.buf:
            return ""
        data = memoryview(self.buf)[-self.limit :]
        if self.trimmed or len(self.buf) > self.limit:
            # A cut may land inside a multi-byte character: start at the next one.
            skip = 0
            while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
                skip += 1
            data = data[skip:]
        return bytes(data).decode("utf-8", errors="replace")


@dataclass
class _Run:
    stdout: _Tail
    stderr: _Tail
    exit_code: int | None
    timed_out: bool
    output_bytes: int
    duration_ms: int


# poll(2) needs no kernel object per step, unlike epoll; it is as good for three descriptors.
_Selector = getattr(selectors, "PollSelector", selectors.DefaultSelector)


class _Sink:
    """Reads the child's pipes and fans each chunk out to the log, the tails and the hooks."""

    def __init__(
        self,
        stdout: _Tail,
        stderr: _Tail,
        log_path: StrPath | None,
        on_output: OutputHook | None,
        on_stdout: Callable[[bytes], None] | None,
    ) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.sel: selectors.BaseSelector = _Selector()
        self.streams: dict[int, tuple[str, _Tail]] = {}
        self.open: set[int] = set()
        # Opened at the first byte: a step that prints nothing leaves no empty log behind,
        # and a silent step does not pay for creating a file.
        self.log_path = log_path
        self.log: StepLog | None = None
        self.on_output = on_output
        self.on_stdout = on_stdout
        self.total = 0
        self.pidfd: int | None = None

    def attach(self, stdout: int, stderr: int, pid: int) -> None:
        """Watch the read ends of the child's pipes, and its exit."""
        for name, fd, tail in (("stdout", stdout, self.stdout), ("stderr", stderr, self.stderr)):
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ)
            self.streams[fd] = (name, tail)
            self.open.add(fd)
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
        self.sel.register(self.pidfd, selectors.EVENT_READ)

    def unwatch_exit(self) -> None:
        pidfd, self.pidfd = self.pidfd, None
        if pidfd is not None:
            self.sel.unregister(pidfd)
            os.close(pidfd)

    def read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self.sel.unregister(fd)
            self.open.discard(fd)
            return
        name, tail = self.streams[fd]
        self.total += len(chunk)
        if self.log_path is not None:
            if self.log is None:
                os.makedirs(os.path.dirname(os.fspath(self.log_path)) or ".", exist_ok=True)
                self.log = StepLog(os.fspath(self.log_path))
            self.log.write(chunk)
        tail.add(chunk)
        if self.on_stdout is not None and name == "stdout":
            self.on_stdout(chunk)
        if self.on_output is not None:
            self.on_output(name, chunk)

    def drain(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while self.open:
            left = end - time.monotonic()
            if left <= 0:
                return
            for key, _ in self.sel.select(left):
                self.read(key.fd)


def _execute(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str] | None,
    timeout: float | None,
    log_path: StrPath | None,
    tail_bytes: int,
    on_output: OutputHook | None,
    on_stdout: Callable[[bytes], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    stdin: int | None = None,
    pass_fds: tuple[int, ...] = (),
    interruptible: Window | None = None,
) -> _Run:
    """Start argv in its own group and pump its output until it and its group are gone.

    `stdin` is a descriptor for the child's standard input (default /dev/null); `pass_fds`
    stay open in the child. `interruptible`, when given, opens the only stretch where the
    caller's signal handlers may raise: the wait. Starting, killing and cleaning up then never
    stop half-way.
    """
    _GUARD.ready()
    pipes = _Pipes()
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=None if env is None else _GUARD.marked(env),
            stdin=_devnull() if stdin is None else stdin,
            pass_fds=pass_fds,
            stdout=pipes.out_w,
            stderr=pipes.err_w,
            start_new_session=True,
        )
    except BaseException:
        pipes.close()
        raise
    # From here on, whatever happens (even an interrupt between two lines), the group dies.
    sink: _Sink | None = None
    try:
        pipes.close_writers()  # the child has them: end of file comes when its group is done
        _GUARD.watch(proc.pid)
        # Everything from here to the wait overlaps the child's start-up.
        sink = _Sink(_Tail(tail_bytes), _Tail(tail_bytes), log_path, on_output, on_stdout)
        sink.attach(pipes.out_r, pipes.err_r, proc.pid)
        if on_start is not None:
            on_start(proc.pid)
        deadline = None if timeout is None else started + max(timeout, 0.0)
        with interruptible() if interruptible is not None else contextlib.nullcontext():
            timed_out = _pump(proc, sink, deadline)
        sink.unwatch_exit()
        if timed_out or _group_alive(proc.pid):
            _kill_group(proc)
        _ORPHANS.sweep()  # descendants that left the group (setsid, set -m) go too
        sink.drain(POST_KILL_DRAIN_S)
    except BaseException:
        _stop(proc)
        raise
    finally:
        _GUARD.forget(proc.pid)
        if sink is not None:
            sink.close()
        pipes.close()
    return _Run(
        stdout=sink.stdout,
        stderr=sink.stderr,
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        output_bytes=sink.total,
        duration_ms=_ms_since(started),
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


def _pump(proc: subprocess.Popen[bytes], sink: _Sink, deadline: float | None) -> bool:
    """Read until the child exited and its pipes closed; True when the deadline came first.

    Once the direct child has exited, a pipe still held open by a background member of its
    group is read for at most EXIT_DRAIN_S more; the caller then kills the group.
    """
    drain_until: float | None = None
    while True:
        if drain_until is None and proc.poll() is not None:
            if not sink.open:
                return False
            drain_until = time.monotonic() + EXIT_DRAIN_S
            sink.unwatch_exit()
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return True
        if drain_until is not None and (now >= drain_until or not sink.open):
            return False
        waits = [t - now for t in (deadline, drain_until) if t is not None]
        if sink.pidfd is None and drain_until is None:
            waits.append(POLL_S)
        for key, _ in sink.sel.select(min(waits) if waits else None):
            if key.fd != sink.pidfd:
                sink.read(key.fd)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill the group on the way out of an exception; a second interrupt skips the grace."""
    try:
        _kill_group(proc)
        _ORPHANS.sweep()
    except BaseException:
        _signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_WAIT_S)
        _ORPHANS.sweep(grace=0.0)
        raise


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the child's whole group, give it KILL_GRACE_S, then SIGKILL what is left."""
    pgid = proc.pid
    if _signal_group(pgid, signal.SIGTERM) and not _wait_group(proc, KILL_GRACE_S):
        _signal_group(pgid, signal.SIGKILL)
        _wait_group(proc, KILL_WAIT_S)  # SIGKILL is not instant: let them actually go
    proc.wait()


def _wait_group(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    """Wait up to `seconds` for every member of the child's group to be gone."""
    end = time.monotonic() + seconds
    while True:
        proc.poll()
        if not _group_alive(proc.pid):
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


_PROC = "/proc"

# The guard: a small process that outlives us by a moment. It blocks reading a pipe only we
# hold (stdin); at end of file, i.e. once this process died, even by SIGKILL, it reads the groups
# still running from a shared file (fd 3) and kills them, so no action outlives the runner
# either. We update that file with pwrite, which wakes nobody: the guard costs a step ~2 µs.
_GUARD_CODE = """
import os, signal, sys, time
while os.read(0, 4096):
    pass
groups = [int(g) for g in os.pread(3, 1 << 16, 0).split()]
mark = ("\\0" + sys.argv[1] + "\\0").encode()
def marked():
    # Descendants that left their group (setsid, set -m) still carry the owner's mark.
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open("/proc/" + name + "/environ", "rb") as fh:
                    if mark in b"\\0" + fh.read():
                        found.append(int(name))
            except OSError:
                pass
    return found
for round in range(5):
    pids = marked()
    if round and not pids:
        break
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pgid in groups if round == 0 else ():
            try:
                os.killpg(pgid, sig)
            except OSError:
                pass
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        if (groups or pids) and sig == signal.SIGTERM:
            time.sleep(%r)
        pids = marked() if sig == signal.SIGTERM else pids
"""


class _Guard:
    """Starts the guard process lazily (once per process) and records which groups run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pipe: int | None = None
        self.state: int | None = None
        self.owner = 0
        self.groups: set[int] = set()
        self.written = 0
        self.pid = 0  # the guard's
        self.mark = ""  # NAME=VALUE in the environment of every action of this process

    def watch(self, pgid: int) -> None:
        with self.lock:
            if self.owner != os.getpid():
                self._start()
            self.groups.add(pgid)
            self._save()

    def forget(self, pgid: int) -> None:
        with self.lock:
            if self.owner == os.getpid():
                self.groups.discard(pgid)
                self._save()

    def _save(self) -> None:
        if self.state is None:
            return
        data = " ".join(map(str, self.groups)).encode()
        os.pwrite(self.state, data.ljust(self.written), 0)
        self.written = len(data)

    def _start(self) -> None:
        for fd in (self.pipe, self.state):  # inherited from the process we were forked from
            if fd is not None:
                os.close(fd)
        self.pipe = self.state = None
        self.owner, self.groups, self.written = os.getpid(), set(), 0
        self.mark = f"{MARK_VAR}={os.getpid()}-{os.urandom(6).hex()}"
        # Inherited by every action and what it starts, so the guard can find the ones that
        # left their process group once this process is gone.
        os.environ[MARK_VAR] = self.mark.partition("=")[2]
        memfd = getattr(os, "memfd_create", None)
        state = memfd("ll-guard") if memfd else _temp_fd()
        read_end, write_end = os.pipe()
        devnull = os.open(os.devnull, os.O_RDWR)
        actions = [
            (os.POSIX_SPAWN_DUP2, read_end, 0),
            (os.POSIX_SPAWN_DUP2, devnull, 1),
            (os.POSIX_SPAWN_DUP2, devnull, 2),
            (os.POSIX_SPAWN_DUP2, state, 3),
        ]
        argv = [sys.executable, "-I", "-S", "-c", _GUARD_CODE % KILL_GRACE_S, self.mark]
        try:
            self.pid = os.posix_spawn(sys.executable, argv, {}, file_actions=actions, setsid=True)
        except OSError:  # no guard: actions still run, only a SIGKILLed runner leaks them
            os.close(write_end)
            os.close(state)
            return
        finally:
            os.close(read_end)
            os.close(devnull)
        self.pipe, self.state = write_end, state

    def ready(self) -> None:
        """Start the guard before the first action, so that action inherits the mark too."""
        if self.owner != os.getpid():
            with self.lock:
                if self.owner != os.getpid():
                    self._start()

    def marked(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` with this process's mark, for an action given an environment of its own."""
        self.ready()
        name, _, value = self.mark.partition("=")
        return {**env, name: value} if name else dict(env)


MARK_VAR = "LL_ACTION_OWNER"


class _Orphans:
    """Descendants of actions that escaped their process group, once `ll` adopted them.

    As a child subreaper (Linux `prctl(PR_SET_CHILD_SUBREAPER)`), this process becomes the
    parent of every orphaned descendant instead of init; after each action, any child other
    than the guard is such an orphan, and it is killed with all its descendants. Elsewhere, or
    until `adopt` is called, `sweep` does nothing.
    """

    def __init__(self) -> None:
        self.enabled = False

    def adopt(self) -> bool:
        """Become a child subreaper; False where the platform cannot."""
        if not sys.platform.startswith("linux"):
            return False
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_child_subreaper = 36
            self.enabled = libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) == 0
        except (OSError, AttributeError):
            self.enabled = False
        return self.enabled

    def sweep(self, grace: float = KILL_GRACE_S) -> None:
        """Kill every adopted orphan and its descendants: SIGTERM, `grace`, SIGKILL; reap them."""
        if not self.enabled:
            return
        end = time.monotonic() + grace + KILL_WAIT_S
        while time.monotonic() < end:
            orphans = self._orphans()
            if not orphans:
                return
            tree = _descendants(orphans)
            for pid in tree:
                _kill(pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
            until = time.monotonic() + grace
            while grace > 0 and time.monotonic() < until and self._reap(tree):
                time.sleep(0.01)
            for pid in tree:
                _kill(pid, signal.SIGKILL)
            self._reap(tree)
            grace = 0.0  # what appears later is killed at once

    def _orphans(self) -> list[int]:
        me = os.getpid()
        found: list[int] = []
        try:
            tasks = os.listdir(f"/proc/{me}/task")
        except OSError:
            return []
        for task in tasks:
            try:
                with open(f"/proc/{me}/task/{task}/children", "rb") as fh:
                    found += [int(pid) for pid in fh.read().split()]
            except OSError:
                continue
        return [pid for pid in found if pid != _GUARD.pid]

    def _reap(self, pids: list[int]) -> bool:
        """Collect the exit of those that are our children; True while any is still alive."""
        alive = False
        for pid in pids:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not ours (a grandchild): ask /proc
                done = 0 if _running(pid) else pid
            if done == 0:
                alive = True
        return alive


def _descendants(roots: list[int]) -> list[int]:
    """`roots` and every process below them, from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir(_PROC) if os.path.isdir(_PROC) else ():
        if not name.isdigit():
            continue
        try:
            with open(f"{_PROC}/{name}/stat", "rb") as fh:
                fields = fh.read().rpartition(b")")[2].split()
            children.setdefault(int(fields[1]), []).append(int(name))
        except (OSError, IndexError, ValueError):
            continue
    out: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.append(pid)
            todo += children.get(pid, [])
    return out


def _running(pid: int) -> bool:
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)


_ORPHANS = _Orphans()


def adopt_orphans() -> bool:
    """Make this process the reaper of its actions' orphans, so none outlives its step."""
    return _ORPHANS.adopt()


def kill_orphans() -> None:
    """Kill what was adopted since the last action ended (e.g. left behind by a judge's CLI)."""
    _ORPHANS.sweep()


def _temp_fd() -> int:
    import tempfile

    fd, name = tempfile.mkstemp(prefix="ll-guard-")
    os.unlink(name)
    return fd


_GUARD = _Guard()


def _group_alive(pgid: int) -> bool:
    """Whether any member of the group still runs. Zombies do not count: an init that does
    not reap orphans would otherwise make every group look alive forever."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir(_PROC):
        return True
    for name in os.listdir(_PROC):
        if not name.isdigit():
            continue
        try:
            with open(f"{_PROC}/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rpartition(b")")[2].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


class _StreamJson:
    """Incremental parser of the CLI's stream-JSON: lines may arrive split across chunks."""

    def __init__(self, text_limit: int) -> None:
        self.pending = bytearray()
        self.skipping = False
        self.limit = max(text_limit, 0)
        self.texts: list[str] = []
        self.text_len = 0
        self.result: dict[str, Any] | None = None
        self.model: str | None = None

    def feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if not self.skipping:
                    self.pending += chunk[start:]
                    if len(self.pending) > MAX_EVENT_LINE:
                        self.pending.clear()
                        self.skipping = True
                return
            if self.skipping:
                self.skipping = False
            elif self.pending:
                self.pending += chunk[start:nl]
                self._line(bytes(self.pending))
                self.pending.clear()
            else:
                self._line(chunk[start:nl])
            start = nl + 1

    def close(self) -> None:
        if self.pending and not self.skipping:
            self._line(bytes(self.pending))
        self.pending.clear()

    def output(self) -> str:
        if self.texts:
            text = "\n".join(self.texts)
            return text[-self.limit :] if len(text) > self.limit else text
        result = self.result.get("result") if self.result is not None else None
        return result if isinstance(result, str) else ""

    def _line(self, raw: bytes) -> None:
        raw = raw.strip()
        if not raw.startswith(b"{"):
            return
        try:
            event = json.loads(raw)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "assistant" and event.get("parent_tool_use_id") is None:
            message = event.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "text":
                    text = block.get("text")
                    if isinstance(text, str):
                        self._add_text(text)
        elif kind == "result":
            self.result = event
        elif kind == "system" and event.get("subtype") == "init":
            model = event.get("model")
            self.model = model if isinstance(model, str) else None

    def _add_text(self, text: str) -> None:
        self.texts.append(text)
        self.text_len += len(text) + 1
        if self.text_len > 2 * self.limit:
            kept = "\n".join(self.texts)[-self.limit :]
            self.texts = [kept]
            self.text_len = len(kept)
