"""Crash reports: what an unexpected exception leaves behind instead of a traceback on screen.

A bug in `ll` prints one line naming the report; the report holds the traceback, the
command line and the versions, for an issue. It goes into the run's directory when there
is one, else into `.loops/` when this directory has one, else into the temp directory.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path


def write_report(
    exc: BaseException,
    directory: Path | None = None,
    *,
    redact: Callable[[str], str] | None = None,
) -> Path | None:
    """Write a crash report for `exc`; its path, or None when no place would take it.

    The values of `--set KEY=VALUE` never reach it (a secret may be one), and `redact` (the
    run's, when a run crashed) masks every secret the run knows, in the traceback too."""
    from . import __version__

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    name = f"crash-{stamp}-{os.getpid()}.txt"
    text = "".join(
        [
            f"ll {__version__} crashed: a bug in ll; please report it with this file\n",
            f"command: {' '.join(_masked(sys.argv))!r}\n",
            f"python: {platform.python_version()} on {platform.platform()}\n",
            f"cwd: {_cwd()!r}\n\n",
            *traceback.format_exception(type(exc), exc, exc.__traceback__),
        ]
    )
    if redact is not None:
        text = redact(text)
    data = text.encode("utf-8", "backslashreplace")
    for place in _places(directory):
        try:
            fd = os.open(place / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError:
            continue
        try:
            os.write(fd, data)
        except OSError:
            continue
        finally:
            os.close(fd)
        return place / name
    return None


def _masked(argv: list[str]) -> list[str]:
    """The command line with each `--set` value replaced by `***`."""
    out: list[str] = []
    after_set = False
    for arg in argv:
        if after_set:
            key, eq, _ = arg.partition("=")
            arg = f"{key}=***" if eq else "***"
        elif arg.startswith("--set="):
            arg = re.sub(r"^(--set=[^=]*=).*", r"\1***", arg, flags=re.S)
        after_set = arg == "--set"
        out.append(arg)
    return out


def one_line(exc: BaseException) -> str:
    """`ZeroDivisionError: division by zero`, on one line and not too long."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:199] + "…"


def _places(directory: Path | None) -> list[Path]:
    places = [directory] if directory is not None else []
    try:
        loops = Path.cwd() / ".loops"
        if loops.is_dir() and not loops.is_symlink():
            places.append(loops)
    except OSError:
        pass
    places.append(Path(tempfile.gettempdir()))
    return places


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:
        return "?"
