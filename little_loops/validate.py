"""`ll validate`: load loop files and report every diagnostic, as text lines or as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from .checks import stops
from .errors import EXIT_SUCCESS, EXIT_USAGE, Diagnostic
from .loader import PARADIGMS, load_document, read_document


def validate_files(files: Iterable[str], *, strict: bool, fmt: str, out: TextIO) -> int:
    """Print the diagnostics of every file to `out`; 0 when all are valid, else 2.

    Warnings do not fail a file unless `strict`. `strict` also reports every verdict that
    would stop a run for want of a route (SPEC section 6); a paradigm file's routes are the
    compiler's, so its stops are not reported. `fmt` is "text" (one `FILE:LINE:COL:
    severity: message` line each) or "json" (a list of objects).
    """
    found: list[Diagnostic] = []
    for file in files:
        found += _check_file(file, strict=strict)
    failing = {"error", "warning"} if strict else {"error"}
    code = EXIT_USAGE if any(d.severity in failing for d in found) else EXIT_SUCCESS
    if fmt == "json":
        out.write(json.dumps([d.to_dict() for d in found], indent=2) + "\n")
    else:
        for d in found:
            out.write(d.format() + "\n")
    return code


def _check_file(file: str, *, strict: bool) -> list[Diagnostic]:
    doc, smap, diagnostics = read_document(Path(file), file)
    if smap is None:
        return diagnostics
    loop, diagnostics = load_document(doc, path=Path(file), file=file, smap=smap)
    if not strict or loop is None or (isinstance(doc, dict) and doc.get("paradigm") in PARADIGMS):
        return diagnostics
    return sorted(diagnostics + stops(loop, file), key=lambda d: (d.line, d.col, d.message))
