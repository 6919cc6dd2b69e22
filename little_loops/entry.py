"""The `ll` (and `little-loops`) executable: `--version`, `--help`, plain `validate` without click.

Importing click costs about 35 ms, half of `ll --help`'s start-up budget and a quarter of
`ll validate`'s. The top-level help page is click's own, rendered once into `_help.py` by
scripts/gen_help.py; `validate` with only FILES, `--strict` and `--format` calls the same
function the click command calls. Tests compare both paths' output; anything else (another
option, a mistake, `validate --help`) goes to the click CLI, which owns every error message.
"""

from __future__ import annotations

import os
import sys


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
    from .validate import validate_files

    return validate_files(files, strict=strict, fmt=fmt, out=sys.stdout)


def _exit_on_signals() -> None:
    """Ctrl-C or SIGTERM before a run installs its own handlers (while starting up or loading
    the file) ends `ll` with 130 or 143, as an interrupted run does, not click's "Aborted!"."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(130 if signum == signal.SIGINT else 143)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def main() -> None:
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
    from .cli import main as cli_main

    # Named, so click neither says "python -m little_loops" nor guesses from argv[0] itself.
    cli_main(prog_name=prog)
