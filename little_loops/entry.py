"""The `ll` (and `little-loops`) executable: `--version`, `--help`, plain `validate` without click.

Importing click costs about 35 ms, half of `ll --help`'s start-up budget and a quarter of
`ll validate`'s. The top-level help page is click's own, rendered once into `_help.py` by
scripts/gen_help.py; `validate` with only FILES, `--strict` and `--format` calls the same
function the click command calls. Tests compare both paths' output; anything else (another
option, a mistake, `validate --help`) goes to the click CLI, which owns every error message.
"""

from __future__ import annotations

import functools
import os
import signal
import sys

from little_loops import _catch_interrupts_while_starting, _interrupted_while_starting

# Already done when the package was imported as `ll`; this covers any other launcher.
_catch_interrupts_while_starting()

TYPE_CHECKING = False  # typing costs `ll --help` a few milliseconds; mypy reads this
if TYPE_CHECKING:
    from typing import Any


def _columns() -> int:
    """The width click would format for (it caps help at 80 columns)."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit():
        return int(env)
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (OSError, AttributeError, ValueError):
        return 80


def _prog() -> str:
    """The name this command was run under: `little-loops` (for shells that alias `ll`) or `ll`."""
    name = os.path.basename(sys.argv[0]).removesuffix(".exe")
    return "little-loops" if name == "little-loops" else "ll"


def _validate(args: list[str]) -> int | None:
    """`ll validate` without click, or None when click should handle these arguments."""
    strict, fmt = False, "text"
    files: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--strict":
            strict = True
        elif arg == "--format":
            fmt = next(rest, "")
        elif arg.startswith("--format="):
            fmt = arg.partition("=")[2]
        elif arg == "--":
            files.extend(rest)
        elif arg.startswith("-") and arg != "-":
            return None
        else:
            files.append(arg)
    if fmt not in ("text", "json") or not files:
        return None
    from little_loops.cli.validate import validate_files

    return validate_files(files, strict=strict, fmt=fmt, out=sys.stdout)


_RUN_FLAGS = {
    "-q": "quiet",
    "--quiet": "quiet",
    "--json": "json_mode",
    "-v": "verbose",
    "--verbose": "verbose",
}


def _run(args: list[str]) -> int | None:
    """`ll run FILE` without click, or None when click should handle these arguments.

    Only FILE, -q, --json, -v, --set and --max-iterations are taken here; any other option,
    LL_JOBS (click reads it) or a usage mistake goes to the click command, which words every
    usage error (the file's checks are made again there: nothing has started yet). Both run
    the same function, `cli.execute.prepare_run`, and report errors as `cli.main` does.
    """
    if "LL_JOBS" in os.environ:
        return None
    given: dict[str, Any] = {}
    sets: list[str] = []
    files: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg in _RUN_FLAGS:
            given[_RUN_FLAGS[arg]] = True
        elif arg == "--set" or arg.startswith("--set="):
            value = arg[6:] if arg.startswith("--set=") else next(rest, None)
            if value is None:
                return None
            sets.append(value)
        elif arg == "--max-iterations" or arg.startswith("--max-iterations="):
            value = arg.partition("=")[2] if "=" in arg else next(rest, "")
            if not (value.isascii() and value.isdigit()) or int(value) < 1:
                return None
            given["max_iterations"] = int(value)
        elif arg == "--":
            files.extend(rest)
        elif arg.startswith("-"):
            return None
        else:
            files.append(arg)
    if len(files) != 1:
        return None
    from little_loops.cli.execute import RunArgs, prepare_run, use_caches
    from little_loops.errors import LoopError

    use_caches()
    try:
        try:
            go = prepare_run(RunArgs(files[0], tuple(sets), **given))
        except Exception as exc:
            click = sys.modules.get("click")
            if click is not None and isinstance(exc, click.ClickException):
                return None
            raise
        if go is not None:
            go()
    except LoopError as exc:
        sys.stderr.write("".join(f"{line}\n" for line in exc.lines()))
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("ll: interrupted\n")
        return 130
    return 0


def _exit_on_signals() -> None:
    """Ctrl-C or SIGTERM before a run installs its own handlers (while starting up or loading
    the file) ends `ll` with 130 or 143, as an interrupted run does, not click's "Aborted!"."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(143)

    signal.signal(signal.SIGINT, _interrupted_while_starting)
    signal.signal(signal.SIGTERM, stop)


def main() -> None:
    """`ll`: every command, behind the guard that keeps tracebacks off the user's screen."""
    _guard_streams()
    try:
        # Inside the try: a Ctrl-C the moment its handler is in place (before `try` was
        # reached, it once escaped as a traceback through this frame) is an interrupt too.
        _note_interrupts()
        _main()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        _fail("ll: interrupted", 130)
    except OSError as exc:
        # The machine said no (disk full, read-only directory, unreadable file): one line.
        _fail(f"ll: error: {_os_error(exc)}", 3)
    except Exception as exc:
        if _interrupted:
            # Ctrl-C inside an import can leave Python's import machinery broken (KeyError,
            # ImportError): the interrupt is what happened, not a bug.
            _fail("ll: interrupted", 130)
        _crash(exc)
    finally:
        # The exit code is decided: a Ctrl-C in the last moments (the interpreter shutting
        # down) changes nothing and prints nothing, where it would print a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)


_interrupted: list[int] = []


def _note_interrupts() -> None:
    """Ctrl-C raises KeyboardInterrupt as usual, and is remembered (unless it is ignored, as in
    a background job, which stays so)."""
    if signal.getsignal(signal.SIGINT) not in (
        signal.default_int_handler,
        _interrupted_while_starting,
    ):
        return

    def interrupted(signum: int, frame: object) -> None:
        _interrupted.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)


def _main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["validate"]:
        code = _validate(argv[1:])
        if code is not None:
            sys.exit(code)
    prog = _prog()
    if argv == ["--version"]:
        from . import __version__

        sys.stdout.write(f"{prog}, version {__version__}\n")
        return
    if argv in (["--help"], ["-h"]) and _columns() >= 80:
        from ._help import HELP

        sys.stdout.write(HELP.replace("Usage: ll ", f"Usage: {prog} ", 1))
        return
    _exit_on_signals()
    if argv[:1] == ["run"]:
        code = _run(argv[1:])
        if code is not None:
            sys.exit(code)
    from little_loops.cli.main import main as cli_main

    # Named, so click neither says "python -m little_loops" nor guesses from argv[0] itself.
    cli_main(prog_name=prog)


def _fail(line: str, code: int) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except OSError:
        pass
    sys.exit(code)


def _crash(exc: BaseException) -> None:
    """A bug in ll: one line naming the crash report, exit 70 (SPEC section 8)."""
    from .crash import one_line, write_report

    report = write_report(exc)
    where = f"; crash report: {report}" if report is not None else ""
    _fail(f"ll: internal error (a bug in ll): {one_line(exc)}{where}", 70)


def _os_error(exc: OSError) -> str:
    """`cannot write /x/state.json: No space left on device`, or the error's own words."""
    if exc.filename is None:
        return exc.strerror or str(exc)
    from little_loops.record.store import cannot

    return cannot("use", os.fsdecode(exc.filename), exc)


class _Quiet:
    """A standard stream that stops writing, without an error, once its reader has gone.

    `ll run loop.yaml | head -1`: when `head` exits, the run goes on (its actions are not
    killed by a failed print); what it would have printed is dropped.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, data: Any) -> int:
        try:
            return int(self._stream.write(data))
        except BrokenPipeError:
            self._gone()
            return len(data)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    @functools.cached_property
    def buffer(self) -> Any:
        return _Quiet(self._stream.buffer)

    def _gone(self) -> None:
        # Later writes (and the interpreter's final flush) go to /dev/null instead.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _guard_streams() -> None:
    """Make stdout survive a closed pipe, and print undecodable bytes (a non-UTF-8 file name,
    environment value or directory) as the bytes they were, instead of failing."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, _Quiet):
            continue
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="surrogateescape")
        setattr(sys, name, _Quiet(stream))
