"""Run actions: shell commands and `claude -p` slash commands, each in its own process group.

The public surface of the process layer: `run_shell` and `run_slash` build the command line
and turn what `process.execute` saw into an `ActionResult`. How processes are started, pumped
and killed is in `process`; the guard and the orphan reaper in `reaper`; the CLI's command
line, stream-JSON and error messages in `slash`.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from little_loops.actions.plain import plain_argv
from little_loops.actions.process import (
    DEFAULT_TAIL_BYTES,
    OutputHook,
    StrPath,
    Window,
    execute,
    ms_since,
)
from little_loops.actions.reaper import (
    adopt_orphans,
    kill_orphans,
)
from little_loops.actions.slash import (
    RESULT_DETAIL_KEYS,
    SLASH_FLAGS,
    StreamJson,
    claude_command,
    claude_flags,
    slash_error,
    unknown_command,
)
from little_loops.errors import RunError
from little_loops.model.details import EMPTY_DETAILS, Details, Json
from little_loops.model.records import record
from little_loops.record.store import LogSegment

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any, Literal

__all__ = [
    "DEFAULT_TAIL_BYTES",
    "SLASH_FLAGS",
    "ActionRequest",
    "ActionResult",
    "ActionStartError",
    "adopt_orphans",
    "claude_command",
    "claude_flags",
    "kill_orphans",
    "run",
    "run_shell",
    "run_slash",
]

# The kernel refuses a single argument over 128 KiB (MAX_ARG_STRLEN, "argument list too
# long"): a longer command or prompt goes to the child through a file descriptor instead.
MAX_ARG_BYTES = 100_000


@record(frozen=True)
class ActionRequest:
    """One action to run, with every setting it runs with: what crosses the action seam
    (`run/action_layer.ActionLayer.run`) instead of loose parameters.

    `kind` `shell`: `text` run as `[shell, "-c", text]`; `slash`: `text` the prompt of
    `claude -p` (`claude`, `flags`). `env` is the child's whole environment (None: inherit
    ours); `log_path` a file or a `LogSegment` of the run's one log; `on_start` is told each
    process group started; `interruptible` is the window in which a signal may stop the wait.
    """

    kind: Literal["shell", "slash"]
    text: str
    cwd: Path
    shell: str = "/bin/sh"
    claude: tuple[str, ...] = ("claude",)
    flags: tuple[str, ...] = SLASH_FLAGS
    env: Mapping[str, str] | None = None
    timeout: float | None = None
    log_path: StrPath | LogSegment | None = None
    tail_bytes: int = DEFAULT_TAIL_BYTES
    on_output: OutputHook | None = None
    on_start: Callable[[int], None] | None = None
    interruptible: Window | None = None


def run(request: ActionRequest) -> ActionResult:
    """Run `request` as a real process (`run_shell` or `run_slash`)."""
    common: dict[str, Any] = {
        "cwd": request.cwd,
        "env": request.env,
        "timeout": request.timeout,
        "log_path": request.log_path,
        "tail_bytes": request.tail_bytes,
        "on_output": request.on_output,
        "on_start": request.on_start,
        "interruptible": request.interruptible,
    }
    if request.kind == "slash":
        return run_slash(request.text, claude=request.claude, flags=request.flags, **common)
    return run_shell(request.text, shell=request.shell, **common)


class ActionStartError(RunError):
    """An action could not be started: its shell or its working directory is missing."""


# The details of a shell action whose stdout kept only its tail (built once).
_CUT = Details(output_cut=True)


@record(frozen=True)
class ActionResult:
    """What one action did. Text fields are tails, decoded as UTF-8 with replacement.

    `exit_code` is None when the action was killed by its timeout or never started, negative
    when a signal ended the process `ll` started (the shell, or a slash action's CLI); a plain
    command `ll` exec'd without the shell reads as the shell would report it, 128+N. `error`
    is set when a slash action failed outside the command itself (CLI missing, non-zero exit,
    `is_error`, no result event); the runner turns it into verdict `error`. `output_bytes`
    counts every byte seen on both streams, not only the tails.
    """

    output: str
    stderr: str
    exit_code: int | None
    duration_ms: int
    timed_out: bool
    output_bytes: int
    error: str | None = None
    cost_usd: float = 0.0
    details: Details = EMPTY_DETAILS  # a slash action's cost, model, flags; a simulation's
    # (offset, size): `output` is these bytes of the run's log (`steps.log`), exactly; set
    # only when it is, so the step's output record can point there instead of copying them.
    output_at: tuple[int, int] | None = None

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
            "details": self.details.to_json(),
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
            details=Details.parse(data.get("details") or {}, "an action result's details"),
        )


def run_shell(
    command: str,
    *,
    shell: str = "/bin/sh",
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    log_path: StrPath | LogSegment | None = None,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
    on_output: OutputHook | None = None,
    on_start: Callable[[int], None] | None = None,
    interruptible: Window | None = None,
) -> ActionResult:
    """Run `[shell, "-c", command]` in a new process group, stdin from /dev/null.

    `env` is the child's whole environment (None: inherit ours). Each chunk of either stream is
    appended to `log_path` (a file created with its parents at the first byte, so a silent
    action leaves none, or a `LogSegment` of the run's one log) and passed to
    `on_output("stdout" | "stderr", chunk)`. Raises
    ActionStartError when the shell or `cwd` does not exist.
    """
    script = _long_text(command)
    # a long command is read by the shell from a descriptor, as if it were given with -c
    argv = [shell, "-c", command if script is None else f". /dev/fd/{script}"]
    try:
        run = execute(
            argv, cwd, env, timeout, log_path, tail_bytes, on_output, on_start=on_start,
            pass_fds=() if script is None else (script,), interruptible=interruptible,
            plain=None if script is not None else plain_argv(command, shell),
        )  # fmt: skip
    except (FileNotFoundError, NotADirectoryError):
        # The child changes directory before it runs the shell: a missing (or not a) directory
        # is told apart here, after the fact, rather than with a `stat` before every action.
        _check_cwd(cwd)
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
    output = run.stdout.text()
    at = run.stdout_at
    return ActionResult(
        output=output,
        stderr=run.stderr.text(),
        exit_code=run.exit_code,
        duration_ms=run.duration_ms,
        timed_out=run.timed_out,
        output_bytes=run.output_bytes,
        # stdout kept only its tail: a capture says so, and a for_each refuses it
        details=_CUT if run.stdout.cut else EMPTY_DETAILS,
        output_at=(at, run.stdout.size) if at is not None and run.stdout.exact else None,
    )


def run_slash(
    prompt: str,
    *,
    claude: Sequence[str] = ("claude",),
    flags: Sequence[str] = SLASH_FLAGS,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    log_path: StrPath | LogSegment | None = None,
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
    parser = StreamJson(tail_bytes)
    started = time.monotonic()
    try:
        run = execute(
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
            duration_ms=ms_since(started),
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
    details: dict[str, Json] = {}
    if result is not None:
        details = {key: result[key] for key in RESULT_DETAIL_KEYS if key in result}
    if parser.model is not None:
        details["model"] = parser.model
    cost = result.get("total_cost_usd") if result is not None else None
    error = None if run.timed_out else slash_error(run.exit_code, result, stderr)
    if error is None and not run.timed_out:
        error = unknown_command(prompt, parser.slash_commands)
        if error is not None:
            details["unknown_command"] = True
    return ActionResult(
        output=parser.output(),
        stderr=stderr,
        exit_code=run.exit_code,
        duration_ms=run.duration_ms,
        timed_out=run.timed_out,
        output_bytes=run.output_bytes,
        error=error,
        cost_usd=float(cost) if isinstance(cost, (int, float)) else 0.0,
        details=Details(details),
    )


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
