"""`ll validate`: load loop files and report every diagnostic, as text lines or as JSON."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from operator import attrgetter

from little_loops.errors import (
    EXIT_SUCCESS,
    EXIT_USAGE,
    Diagnostic,
)
from little_loops.load.checks import stops
from little_loops.load.loader import try_load

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import TextIO


def validate_files(files: Iterable[str], *, strict: bool, fmt: str, out: TextIO) -> int:
    """Print the diagnostics of every file to `out`; 0 when all are valid, else 2.

    Warnings do not fail a file unless `strict`, which also reports every verdict that would
    stop a run for want of a route (SPEC section 6). `fmt` is "text" (one `FILE:LINE:COL:
    severity: message` line each) or "json" (a list of objects).
    """
    found: list[Diagnostic] = []
    upstream: set[str] = set()
    for file in files:
        loop, diagnostics = try_load(file, digest=False)
        if strict and loop is not None:
            diagnostics = sorted(
                diagnostics + stops(loop, file), key=lambda d: (d.line, d.col, d.message)
            )
        messages = map(_MESSAGE, diagnostics)
        if sum(map(str.__contains__, messages, itertools.repeat(_UPSTREAM_NAME))) >= 2:
            upstream.add(file)
        found += diagnostics
    failing = {"error", "warning"} if strict else {"error"}
    code = EXIT_USAGE if any(d.severity in failing for d in found) else EXIT_SUCCESS
    if fmt == "json":
        out.write(json.dumps([d.to_dict() for d in found], indent=2) + "\n")
    elif found:
        # One write of every line: thousands of lines (a file of many wrong names) written one
        # by one cost as much as finding them.
        lines = list(map(Diagnostic.format, found))
        for file in upstream:  # a note before the file's first line
            first = next(at for at, d in enumerate(found) if d.file == file)
            lines[first] = (
                f"{file}: this looks like an upstream little-loops file; "
                f"`ll migrate {file}` converts it\n{lines[first]}"
            )
        out.write("\n".join(lines) + "\n")
    return code


_MESSAGE = attrgetter("message")


# How hints.upstream_key words a key of upstream little-loops; two of them make a file upstream's.
_UPSTREAM_NAME = "is upstream little-loops' name"
