"""A loop file's path -> its bytes -> UTF-8 text -> the document and its positions.

Every way a file cannot be read (missing, a directory, a silent pipe, too large, not UTF-8,
not YAML) becomes one located diagnostic; nothing here knows what a loop is.

`compose_cached` keeps what a file composed to (its document and positions) in the parse
cache, so that the next `ll run` of the same bytes needs neither PyYAML nor the composer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from operator import attrgetter
from pathlib import Path

from little_loops.errors import Diagnostic
from little_loops.load import composer
from little_loops.load.composer import (
    SourceMap,
    compose,
)
from little_loops.model.loop import Pos
from little_loops.model.records import cache_dir, keep_cache, load_cache

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

MAX_FILE_BYTES = 1024 * 1024


def read_document(
    path: Path, file: str | None = None
) -> tuple[Any, SourceMap | None, list[Diagnostic]]:
    """The document in `path` and its positions; (None, None, errors) when it cannot be read."""
    file = str(path) if file is None else file
    data = read_bytes(path, file)
    if isinstance(data, Diagnostic):
        return None, None, [data]
    text = decode(data, file)
    if isinstance(text, Diagnostic):
        return None, None, [text]
    doc, smap, diagnostics, complete = compose(text, file)
    if not complete or diagnostics:
        return None, None, sorted_diagnostics(diagnostics)
    return doc, smap, []


def read_bytes(path: Path, file: str) -> bytes | Diagnostic:
    """The file's bytes (at most `MAX_FILE_BYTES`), or why they cannot be read."""

    def fail(code: str, message: str) -> Diagnostic:
        return Diagnostic(file, 1, 1, "error", code, message)

    try:
        if path.is_dir():
            return fail("not-a-file", "this is a directory; give the path of a loop file")
        if path.is_fifo():
            piped = _read_pipe(path)
            if piped is None:
                return fail(
                    "no-writer",
                    f"a pipe nobody wrote to within {PIPE_WAIT_S:g} s; give a loop file",
                )
            data = piped
        else:
            with path.open("rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return fail("no-such-file", "no such file")
    except PermissionError:
        return fail("unreadable-file", "permission denied: the file cannot be read")
    except OSError as exc:
        return fail("unreadable-file", f"the file cannot be read: {exc.strerror or exc}")
    if len(data) > MAX_FILE_BYTES:
        mib = MAX_FILE_BYTES // (1024 * 1024)
        return fail(
            "file-too-large", f"the file is larger than {mib} MiB; a loop file is far smaller"
        )
    return data


PIPE_WAIT_S = 5.0


def _read_pipe(path: Path) -> bytes | None:
    """A named pipe or `<(...)` read to its end; None when no writer came (opening one
    blocks until a writer does, so `ll validate FIFO` would wait for ever)."""
    import os
    import select
    import time

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        chunks: list[bytes] = []
        size, deadline = 0, time.monotonic() + PIPE_WAIT_S
        while size <= MAX_FILE_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not poller.poll(left * 1000):
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            deadline = time.monotonic() + PIPE_WAIT_S
        return b"".join(chunks)
    finally:
        os.close(fd)


def decode(data: bytes, file: str) -> str | Diagnostic:
    """The bytes as UTF-8 text (a BOM is dropped), or where they stop being UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = len(before[before.rfind(b"\n") + 1 :].decode("utf-8", "replace")) + 1
        return Diagnostic(
            file,
            line,
            col,
            "error",
            "not-utf8",
            f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x}); save it as UTF-8",
        )


def sorted_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sorted by position, each message kept to one printable line, each said once.

    The loops run in C (`map`, `attrgetter`): a file with thousands of wrong names has
    thousands of diagnostics, and a call of Python code for each cost as much as finding them."""
    found = list(diagnostics)
    if not all(map(str.isprintable, map(_MESSAGE, found))):
        found = [
            d if d.message.isprintable() else d.with_message(_printable(d.message)) for d in found
        ]
    once = dict(zip(map(_WHOLE, found), found, strict=True))
    return sorted(once.values(), key=_ORDER)


# What makes two diagnostics the same (`Diagnostic.__eq__`), and the order they are told in.
_MESSAGE = attrgetter("message")
_WHOLE = attrgetter("file", "line", "col", "severity", "code", "message")
_ORDER = attrgetter("file", "line", "col", "severity", "message")


def _printable(text: str) -> str:
    """Names from the file may hold newlines or control characters; show them escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# -- the parse cache ------------------------------------------------------------------------
#
# `$XDG_CACHE_HOME/little-loops/parsed/` (by default `~/.cache/little-loops/parsed/`): one
# file per loop file path (so an edited file replaces its entry: the cache grows with the
# number of loop files, not of edits), holding the SHA-256 of the bytes it was composed from
# and the result, in `marshal` form. An entry is used only when the bytes are the same and so
# are this module's composer and PyYAML (their files' size and time), otherwise the file is
# composed again and the entry replaced. Only a file composed without a diagnostic is kept,
# and only plain values (a YAML timestamp is not). A cache that cannot be read or written is
# a miss, never an error: the file is composed as if there were none.

_FORMAT = 1
_STAMP: list[str] = []  # computed once a process


def compose_cached(
    data: bytes, text: str, path: Path, file: str, sha: str = ""
) -> tuple[Any, SourceMap, list[Diagnostic], bool]:
    """`compose(text, file)` for `data` (the file's bytes, `sha` their SHA-256 if known),
    from the parse cache when these bytes were composed before."""
    from little_loops.record.store import sha256

    sha = sha or sha256(data)
    entry_file = _entry_file(path)
    stamp = _stamp() if entry_file is not None else ""
    if entry_file is not None:
        found = _from_entry(load_cache(entry_file), stamp, sha)
        if found is not None:
            return (*found, [], True)
    doc, smap, diagnostics, complete = compose(text, file)
    if entry_file is not None and complete and not diagnostics:
        keep_cache(entry_file, _entry(stamp, sha, doc, smap))
    return doc, smap, diagnostics, complete


def _entry_file(path: Path) -> str | None:
    root = cache_dir()
    if root is None:
        return None
    from little_loops.record.store import sha256

    name = sha256(os.path.abspath(path).encode("utf-8", "surrogateescape"))[:40]
    return os.path.join(root, "parsed", name)


def _stamp() -> str:
    """What else the result depends on: the composer's, plain_yaml's and PyYAML's files."""
    if not _STAMP:
        from importlib.machinery import PathFinder

        parts = [str(_FORMAT)]
        spec = PathFinder.find_spec("yaml")
        plain = os.path.join(os.path.dirname(composer.__file__), "plain_yaml.py")
        origins = [composer.__file__, plain, spec.origin if spec is not None else None]
        for origin in origins:
            try:
                st = os.stat(origin) if origin else None
            except OSError:
                st = None
            parts.append(f"{origin}:{st.st_size}:{st.st_mtime_ns}" if st else "-")
        _STAMP.append("|".join(parts))
    return _STAMP[0]


def _from_entry(entry: object, stamp: str, sha: str) -> tuple[Any, SourceMap] | None:
    if not (isinstance(entry, tuple) and len(entry) == 6 and entry[:2] == (stamp, sha)):
        return None
    _, _, doc, values, keys, comments = entry
    smap = SourceMap(
        {path: Pos(*at) for path, at in values.items()},
        {path: Pos(*at) for path, at in keys.items()},
        {path: (Pos(*at), text) for path, (at, text) in comments.items()},
    )
    return doc, smap


def _entry(stamp: str, sha: str, doc: Any, smap: SourceMap) -> tuple[object, ...]:
    return (
        stamp,
        sha,
        doc,
        {path: (at.line, at.col) for path, at in smap.values.items()},
        {path: (at.line, at.col) for path, at in smap.keys.items()},
        {path: ((at.line, at.col), text) for path, (at, text) in smap.comments.items()},
    )
