"""`ll validate`: load loop files and report every diagnostic, as text lines or as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable

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
        if sum(_UPSTREAM_NAME in d.message for d in diagnostics) >= 2:
            upstream.add(file)
        found += diagnostics
    failing = {"error", "warning"} if strict else {"error"}
    code = EXIT_USAGE if any(d.severity in failing for d in found) else EXIT_SUCCESS
    if fmt == "json":
        out.write(json.dumps([d.to_dict() for d in found], indent=2) + "\n")
    else:
        told: set[str] = set()
        for d in found:
            if d.file in upstream and d.file not in told:
                told.add(d.file)
                out.write(
                    f"{d.file}: this looks like an upstream little-loops file; "
                    f"`ll migrate {d.file}` converts it\n"
                )
            out.write(d.format() + "\n")
    return code


# How hints.upstream_key words a key of upstream little-loops; two of them make a file upstream's.
_UPSTREAM_NAME = "is upstream little-loops' name"
