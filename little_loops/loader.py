"""Loop file -> `Loop`: YAML with positions, then the JSON Schema, semantic checks, the model.

The YAML is read by PyYAML's (C) parser; this module composes its events itself, without
recursion, so that it can keep every node's line and column, reject duplicate keys (PyYAML
keeps the last silently), read every mapping key as text (`on:` stays `on`, not `True`), and
refuse documents nested or aliased deeply enough to crash or stall the program.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from . import checks
from .errors import Diagnostic, LoadError
from .model import (
    PASS_FAIL_SCHEMA,
    ActionType,
    Evaluate,
    LlmDefaults,
    Loop,
    Pos,
    Retry,
    Route,
    Scalar,
    State,
)
from .schema import NodePath, SchemaIssue, locate_issue, schema_issues, subject, where

try:
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment]
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 100
MAX_NODES = 100_000  # after aliases are expanded

NATIVE_PARADIGM = "fsm"
PARADIGMS = ("goal", "convergence", "invariants", "imperative")
SHORTHANDS = {
    "on_success": "success",
    "on_failure": "failure",
    "on_error": "error",
    "on_timeout": "timeout",
}

_MAP_TAGS = (None, "!", "tag:yaml.org,2002:map")
_SEQ_TAGS = (None, "!", "tag:yaml.org,2002:seq")
_MERGE_TAG = "tag:yaml.org,2002:merge"


def load(path: str | Path) -> Loop:
    """The loop in `path`; raises LoadError carrying every diagnostic when it has an error."""
    loop, diagnostics = try_load(path)
    if loop is None:
        raise LoadError(diagnostics)
    return loop


def try_load(path: str | Path, *, digest: bool = True) -> tuple[Loop | None, list[Diagnostic]]:
    """The loop (None when there is an error) and every diagnostic, sorted by line.

    `digest=False` leaves `Loop.source_sha256` empty, sparing `ll validate` hashlib's import.
    """
    file = str(path)
    data = _read(Path(path), file)
    if isinstance(data, Diagnostic):
        return None, [data]
    return parse(data, path=Path(path), file=file, digest=digest)


def parse(
    data: bytes, *, path: Path, file: str | None = None, digest: bool = True
) -> tuple[Loop | None, list[Diagnostic]]:
    """Like `try_load`, for a file's bytes already read."""
    file = str(path) if file is None else file
    sha = ""
    if digest:
        import hashlib  # its OpenSSL import is a noticeable part of start-up

        sha = hashlib.sha256(data).hexdigest()
    text = _decode(data, file)
    if isinstance(text, Diagnostic):
        return None, [text]
    doc, smap, diagnostics, complete = _compose(text, file)
    if not complete:
        return None, _sorted(diagnostics)
    loop, more = _from_document(doc, smap, path=path, file=file, sha256=sha)
    if diagnostics:  # duplicate keys: the document is whole, but not what the author meant
        return None, _sorted(diagnostics + more)
    return loop, more


def load_document(
    doc: Any, *, path: Path, file: str | None = None, smap: SourceMap | None = None
) -> tuple[Loop | None, list[Diagnostic]]:
    """Check and build a loop from an already-parsed document.

    `smap` says where each node came from (a compiled paradigm maps its states back to the
    paradigm file's lines); without it every position is 1:1.
    """
    file = str(path) if file is None else file
    return _from_document(doc, smap or SourceMap(), path=path, file=file, sha256="")


def read_document(
    path: Path, file: str | None = None
) -> tuple[Any, SourceMap | None, list[Diagnostic]]:
    """The document in `path` and its positions; (None, None, errors) when it cannot be read."""
    file = str(path) if file is None else file
    data = _read(path, file)
    if isinstance(data, Diagnostic):
        return None, None, [data]
    text = _decode(data, file)
    if isinstance(text, Diagnostic):
        return None, None, [text]
    doc, smap, diagnostics, complete = _compose(text, file)
    if not complete or diagnostics:
        return None, None, _sorted(diagnostics)
    return doc, smap, []


# -- reading ------------------------------------------------------------------------------


def _read(path: Path, file: str) -> bytes | Diagnostic:
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


def _decode(data: bytes, file: str) -> str | Diagnostic:
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


# -- composing YAML events into plain values with positions ---------------------------------


@dataclass
class SourceMap:
    """Line and column of each node (`values`) and of each mapping key (`keys`), by path.

    `comments` holds where a YAML comment starts on the line a plain (unquoted) value ends,
    and its text: `action: /fix issue #42` sends `/fix issue`, which the author may not mean.
    """

    values: dict[NodePath, Pos] = field(default_factory=dict)
    keys: dict[NodePath, Pos] = field(default_factory=dict)
    comments: dict[NodePath, tuple[Pos, str]] = field(default_factory=dict)

    def value(self, path: NodePath) -> Pos:
        """Where the node at `path` starts, or its nearest recorded ancestor."""
        while path not in self.values and path:
            path = path[:-1]
        return self.values.get(path, Pos())

    def key(self, path: NodePath) -> Pos:
        """Where the key naming `path` stands, or the node's own position."""
        return self.keys.get(path) or self.value(path)


class _Stop(Exception):
    """Composition cannot go on; the diagnostic says why."""

    def __init__(self, pos: Pos, code: str, message: str) -> None:
        super().__init__(message)
        self.pos, self.code, self.message = pos, code, message


@dataclass
class _Frame:
    value: dict[str, Any] | list[Any]
    path: NodePath
    pos: Pos
    anchor: str | None
    size: int = 1
    key: str | None = None  # a mapping's key waiting for its value
    key_pos: Pos = field(default_factory=Pos)
    is_merge: bool = False
    merged: list[dict[str, Any]] = field(default_factory=list)
    seen: dict[str, Pos] = field(default_factory=dict)


def _compose(text: str, file: str) -> tuple[Any, SourceMap, list[Diagnostic], bool]:
    """The document, its positions, the diagnostics, and whether the whole file was read."""
    composer = _Composer(text, file)
    complete = False
    try:
        composer.run()
        complete = True
    except _Stop as stop:
        message = stop.message
        if stop.code == "unsupported-tag":  # `operator: !=`
            message = _line_hint(message, text, stop.pos) or message
        composer.errors.append(
            Diagnostic(file, stop.pos.line, stop.pos.col, "error", stop.code, message)
        )
    except yaml.MarkedYAMLError as exc:
        found = _yaml_error(exc, file)
        problem = (exc.problem or "").strip()
        hint = _line_hint(problem, text, Pos(found.line, found.col))
        composer.errors.append(dataclasses.replace(found, message=hint) if hint else found)
    except yaml.YAMLError as exc:
        composer.errors.append(_reader_error(exc, text, file))
    finally:
        composer.loader.dispose()
    return composer.root, composer.smap, composer.errors, complete


class _Composer:
    def __init__(self, text: str, file: str) -> None:
        self.loader = _Loader(text)
        self.text = text
        self.lines: list[str] | None = None
        self.file = file
        self.smap = SourceMap()
        self.errors: list[Diagnostic] = []
        self.root: Any = None
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.tags: dict[tuple[str, tuple[bool, bool]], str] = {}
        self.nodes = 0
        self.documents = 0

    def run(self) -> None:
        loader = self.loader
        while True:
            event = loader.get_event()  # type: ignore[no-untyped-call]
            pos = _pos(event.start_mark)
            if isinstance(event, yaml.StreamEndEvent):
                return
            if isinstance(event, yaml.DocumentStartEvent):
                self.documents += 1
                if self.documents > 1:
                    raise _Stop(
                        pos,
                        "multiple-documents",
                        "a loop file holds one YAML document; remove the second '---' and what "
                        "follows, or put it in its own file",
                    )
            elif isinstance(event, yaml.ScalarEvent):
                self.scalar(event, pos)
            elif isinstance(event, yaml.AliasEvent):
                self.alias(event, pos)
            elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                self.open(event, pos)
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                self.close()

    def child_path(self) -> NodePath | None:
        """The path of the node about to be added; None when it is a mapping key."""
        if not self.stack:
            return ()
        top = self.stack[-1]
        if isinstance(top.value, list):
            return (*top.path, len(top.value))
        if top.key is None:
            return None
        return (*top.path, top.key)

    def scalar(self, event: yaml.ScalarEvent, pos: Pos) -> None:
        path = self.child_path()
        if path is None:
            self.key(event, pos)
            return
        value = self.construct(event, pos)
        self.smap.values[path] = pos
        if not event.style and event.end_mark is not None:
            self.note_comment(path, event.end_mark)
        if event.anchor:
            self.anchors[event.anchor] = (value, 1)
        self.add(value, 1, pos)

    def note_comment(self, path: NodePath, end: Any) -> None:
        """Record a comment that starts on the line where a plain value ends."""
        if self.lines is None:
            self.lines = self.text.splitlines()
        if end.line >= len(self.lines):
            return
        rest = self.lines[end.line][end.column :]
        stripped = rest.lstrip(" \t")
        if stripped.startswith("#") and len(stripped) < len(rest):
            col = end.column + len(rest) - len(stripped) + 1
            self.smap.comments[path] = (Pos(end.line + 1, col), stripped[1:])

    def key(self, event: yaml.ScalarEvent, pos: Pos) -> None:
        top = self.stack[-1]
        if event.anchor:
            self.anchors[event.anchor] = (event.value, 1)
        # a plain `<<` is YAML's merge key; every other key is taken as text
        is_merge = event.value == "<<" and event.tag is None and event.implicit[0]
        self.set_key(top, event.value, pos, is_merge=is_merge)

    def set_key(self, top: _Frame, key: str, pos: Pos, *, is_merge: bool = False) -> None:
        top.key, top.key_pos, top.is_merge = key, pos, is_merge
        if is_merge:
            return
        first = top.seen.get(key)
        if first is not None:
            self.errors.append(
                Diagnostic(
                    self.file,
                    pos.line,
                    pos.col,
                    "error",
                    "duplicate-key",
                    f"duplicate key '{key}' {where(top.path)} (first at line {first.line}); "
                    "YAML would silently keep only the last one",
                )
            )
        else:
            top.seen[key] = pos
        key_path: NodePath = (*top.path, key)
        self.smap.keys[key_path] = pos

    def construct(self, event: yaml.ScalarEvent, pos: Pos) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            memo = (event.value, event.implicit)
            tag = self.tags.get(memo)
            if tag is None:
                tag = self.tags[memo] = self.loader.resolve(  # type: ignore[no-untyped-call]
                    yaml.ScalarNode, event.value, event.implicit
                )
        make = self.loader.yaml_constructors.get(tag)
        if make is None or tag == _MERGE_TAG:
            raise _Stop(pos, "unsupported-tag", f"the YAML tag '{event.tag}' is not supported here")
        node = yaml.ScalarNode(tag, event.value, None, None, event.style)
        try:
            return make(self.loader, node)
        except Exception as exc:  # PyYAML's constructors raise ValueError & co. on bad input
            raise _Stop(
                pos,
                "bad-scalar",
                f"'{event.value[:40]}' cannot be read as {tag.rsplit(':', 1)[-1]}",
            ) from exc

    def alias(self, event: yaml.AliasEvent, pos: Pos) -> None:
        anchor = event.anchor or ""
        if anchor not in self.anchors:
            if any(f.anchor == anchor for f in self.stack):
                raise _Stop(
                    pos, "recursive-alias", f"alias '*{anchor}' refers to a node that contains it"
                )
            raise _Stop(
                pos, "unknown-alias", f"alias '*{anchor}' names no anchor ('&{anchor}') above it"
            )
        value, size = self.anchors[anchor]
        path = self.child_path()
        if path is None:
            if not isinstance(value, str):
                raise _Stop(pos, "bad-key", "a mapping key must be plain text")
            self.set_key(self.stack[-1], value, pos)
            return
        self.smap.values[path] = pos
        self.add(value, size, pos)

    def open(self, event: yaml.MappingStartEvent | yaml.SequenceStartEvent, pos: Pos) -> None:
        is_map = isinstance(event, yaml.MappingStartEvent)
        if event.tag not in (_MAP_TAGS if is_map else _SEQ_TAGS):
            raise _Stop(pos, "unsupported-tag", f"the YAML tag '{event.tag}' is not supported here")
        path = self.child_path()
        if path is None:
            raise _Stop(pos, "bad-key", "a mapping key must be plain text, not a list or mapping")
        if len(self.stack) >= MAX_DEPTH:
            raise _Stop(
                pos, "too-deep", f"the document is nested more than {MAX_DEPTH} levels deep"
            )
        self.smap.values[path] = pos
        container: dict[str, Any] | list[Any] = {} if is_map else []
        self.stack.append(_Frame(container, path, pos, event.anchor))

    def close(self) -> None:
        frame = self.stack.pop()
        if isinstance(frame.value, dict):
            for extra in frame.merged:
                for k, v in extra.items():
                    frame.value.setdefault(k, v)
        if frame.anchor:
            self.anchors[frame.anchor] = (frame.value, frame.size)
        self.add(frame.value, frame.size, frame.pos)

    def add(self, value: Any, size: int, pos: Pos) -> None:
        self.nodes += size
        if self.nodes > MAX_NODES:
            raise _Stop(
                pos,
                "too-large",
                f"the document has more than {MAX_NODES} values once aliases are expanded",
            )
        if not self.stack:
            self.root = value
            return
        top = self.stack[-1]
        top.size += size
        if isinstance(top.value, list):
            top.value.append(value)
            return
        key, top.key = top.key, None
        assert key is not None
        if top.is_merge:
            parts = value if isinstance(value, list) else [value]
            if not all(isinstance(p, dict) for p in parts):
                raise _Stop(
                    pos, "bad-merge", "'<<' must be followed by a mapping or a list of mappings"
                )
            top.merged.extend(parts)
            return
        top.value[key] = value


def _pos(mark: Any) -> Pos:
    return Pos(mark.line + 1, mark.column + 1) if mark is not None else Pos()


def _yaml_error(exc: yaml.MarkedYAMLError, file: str) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    pos = _pos(mark)
    problem = (exc.problem or "the YAML is malformed").strip()
    if "\t" in problem or "tab" in problem:
        problem += " (indent with spaces, not tabs)"
    context = f" ({exc.context.strip()})" if exc.context and exc.context_mark is not mark else ""
    message = f"invalid YAML: {problem}{context}"
    return Diagnostic(file, pos.line, pos.col, "error", "yaml-syntax", message)


def _line_hint(problem: str, text: str, pos: Pos) -> str | None:
    """A message naming the fix, when the line of a YAML error shows what went wrong."""
    from .hints import yaml_line_message

    lines = text.splitlines()
    if not 1 <= pos.line <= len(lines):
        return None
    return yaml_line_message(problem, lines[pos.line - 1], pos.col - 1)


def _reader_error(exc: yaml.YAMLError, text: str, file: str) -> Diagnostic:
    offset = getattr(exc, "position", 0)
    offset = offset if isinstance(offset, int) else 0
    before = text[:offset]
    line = before.count("\n") + 1
    col = offset - (before.rfind("\n") + 1) + 1
    char = getattr(exc, "character", None)
    what = f" (character {char!r})" if isinstance(char, str) else ""
    message = f"invalid YAML: the file contains a control character{what}; is it a text file?"
    if not isinstance(char, str) and not isinstance(char, int):
        message = "invalid YAML: the file cannot be read as text"
    return Diagnostic(file, line, col, "error", "yaml-syntax", message)


def _sorted(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sorted by position, each message kept to one printable line, each said once."""
    out = {
        d if d.message.isprintable() else dataclasses.replace(d, message=_printable(d.message))
        for d in diagnostics
    }
    return sorted(out, key=lambda d: (d.file, d.line, d.col, d.severity, d.message))


def _printable(text: str) -> str:
    """Names from the file may hold newlines or control characters; show them escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# -- document -> checks -> model ---------------------------------------------------------------


def _from_document(
    doc: Any, smap: SourceMap, *, path: Path, file: str, sha256: str
) -> tuple[Loop | None, list[Diagnostic]]:
    def error(at: Pos, code: str, message: str) -> list[Diagnostic]:
        return [Diagnostic(file, at.line, at.col, "error", code, message)]

    if doc is None:
        return None, error(
            Pos(), "empty-file", "the file is empty; a loop needs 'name', 'initial' and 'states'"
        )
    if not isinstance(doc, dict):
        kind = "a list" if isinstance(doc, list) else "a single value"
        return None, error(
            smap.value(()),
            "not-a-mapping",
            f"a loop file must be a mapping of keys (name:, initial:, states:), not {kind}",
        )
    issues = schema_issues(doc)
    diagnostics = [
        locate_issue(i, file=file, locate_value=smap.value, locate_key=smap.key) for i in issues
    ]
    diagnostics += _cut_by_comment(doc, smap, file)
    paradigm = doc.get("paradigm")
    if isinstance(paradigm, str) and paradigm in PARADIGMS:
        return _compiled(doc, smap, diagnostics, issues, path=path, file=file, sha256=sha256)
    # Checks that depend on a broken key would only repeat the schema's news; the rest run.
    tainted = _tainted(issues)
    loop, route_entries = _Builder(smap).loop(doc, path=path, sha256=sha256)
    found = checks.check_loop(
        loop,
        file=file,
        locate=smap.value,
        route_entries=route_entries,
        tainted=tainted,
    )
    # One problem per spot: a semantic finding where the schema already spoke is a repeat.
    spoken = {(d.line, d.col) for d in diagnostics}
    diagnostics += [d for d in found if (d.line, d.col) not in spoken]
    diagnostics = _sorted(diagnostics)
    if any(d.severity == "error" for d in diagnostics):
        return None, diagnostics
    return loop, diagnostics


def _compiled(
    doc: dict[str, Any],
    smap: SourceMap,
    diagnostics: list[Diagnostic],
    issues: list[SchemaIssue],
    *,
    path: Path,
    file: str,
    sha256: str,
) -> tuple[Loop | None, list[Diagnostic]]:
    """A paradigm file, compiled and checked like any loop.

    Unknown top-level keys do not stop the compiler (it never reads them), so their errors
    come with the compiled loop's; any other schema error leaves nothing sound to compile.
    """
    unknown = {i.key for i in issues if i.path == () and i.code == "unknown-key"}
    if any(i.path != () or i.code != "unknown-key" for i in issues):
        return None, _sorted(diagnostics)
    from .paradigms import compile_document  # only paradigm files pay for the compiler

    known = {k: v for k, v in doc.items() if k not in unknown}
    compiled, found = compile_document(known, smap, file=file)
    if compiled is None:
        return None, _sorted(diagnostics + found)
    loop, found = _from_document(compiled.doc, compiled.smap, path=path, file=file, sha256=sha256)
    if diagnostics:
        return None, _sorted(diagnostics + found)
    return loop, found


def _tainted(issues: Iterable[SchemaIssue]) -> frozenset[str]:
    """The states whose routing a schema issue breaks, and `WHOLE_LOOP` for loop-wide routing.

    Only keys that decide where a run goes (or unknown keys that may be misspelt ones) count:
    a wrong `description` or `timeout` hides no routing fact, so it must not hide its checks.
    """
    found = (_routing_broken_by(issue) for issue in issues)
    return frozenset(name for name in found if name is not None)


def _routing_broken_by(issue: SchemaIssue) -> str | None:
    from .hints import LOOP_ROUTING_KEYS, STATE_ROUTING_KEYS, may_route

    at, key = issue.path, issue.key
    unknown = issue.code == "unknown-key" and key is not None
    if at == ("states",):
        return key  # a state whose name is not valid; None: `states` itself is wrong
    if at[:1] == ("states",):
        first = at[2] if len(at) > 2 else key
        if first is None or first in STATE_ROUTING_KEYS:
            return str(at[1])
        if len(at) == 2 and unknown and may_route(str(first), STATE_ROUTING_KEYS):
            return str(at[1])
        return None
    if at[:1] and at[0] in LOOP_ROUTING_KEYS:
        return checks.WHOLE_LOOP
    if not at and unknown and may_route(str(key), LOOP_ROUTING_KEYS):
        return checks.WHOLE_LOOP
    return None


# Where a paradigm file holds actions (a state's `action` is checked in every file).
_PARADIGM_ACTIONS = frozenset({("check",), ("using",), ("finally",)})
_PARADIGM_ACTION_LISTS = frozenset({"tools", "steps"})


def _cut_by_comment(doc: Mapping[str, Any], smap: SourceMap, file: str) -> list[Diagnostic]:
    """Warnings for unquoted actions a YAML comment cut short (` #` ends a plain value)."""
    if not smap.comments:
        return []
    from .hints import comment_cuts_command

    out = []
    for at, (pos, comment) in smap.comments.items():
        command = _action_at(doc, at)
        if command is None:
            continue
        given = _value_at(doc, (*at[:-1], "action_type")) if at[0] == "states" else None
        slash = given == "slash" or (given != "shell" and guess_action_type(command) == "slash")
        if not comment_cuts_command(command, comment, slash=slash):
            continue  # the shell would have read the same comment
        message = (
            f"{subject(at)} is cut short: ' #' starts a YAML comment, so the rest of the line "
            "is not part of the command; quote the whole action"
        )
        out.append(Diagnostic(file, pos.line, pos.col, "warning", "action-cut-by-comment", message))
    return out


def _action_at(doc: Mapping[str, Any], at: NodePath) -> str | None:
    """The action at `at`, when `at` is where a state or a paradigm file holds one."""
    in_state = len(at) == 3 and at[0] == "states" and at[2] == "action"
    in_paradigm = "paradigm" in doc and (
        at in _PARADIGM_ACTIONS
        or (len(at) == 2 and at[0] in _PARADIGM_ACTION_LISTS)
        or (len(at) == 3 and at[0] == "constraints" and at[2] in ("check", "fix"))
    )
    if not (in_state or in_paradigm):
        return None
    value = _value_at(doc, at)
    return value if isinstance(value, str) else None


def _value_at(doc: Any, at: NodePath) -> Any:
    for part in at:
        if isinstance(doc, dict) and isinstance(part, str):
            doc = doc.get(part)
        elif isinstance(doc, list) and isinstance(part, int) and 0 <= part < len(doc):
            doc = doc[part]
        else:
            return None
    return doc


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Builder:
    """Builds the model from a document, taking only well-typed values (others keep defaults)."""

    def __init__(self, smap: SourceMap) -> None:
        self.smap = smap

    def loop(
        self, doc: Mapping[str, Any], *, path: Path, sha256: str
    ) -> tuple[Loop, dict[str, list[tuple[str, Route]]]]:
        raw_states = doc.get("states")
        states: dict[str, State] = {}
        entries: dict[str, list[tuple[str, Route]]] = {}
        if isinstance(raw_states, dict):
            for name, raw in raw_states.items():
                at: NodePath = ("states", name)
                state, entries[name] = self.state(name, raw if isinstance(raw, dict) else {}, at)
                states[name] = state
        raw_context = doc.get("context")
        context: dict[str, Scalar] = {}
        if isinstance(raw_context, dict):
            # A key whose value the schema refused still exists: `${context.KEY}` is no error.
            context = {
                k: v if isinstance(v, str | int | float | bool) else ""
                for k, v in raw_context.items()
            }
        secrets = doc.get("secrets")
        working_dir = _str(doc, "working_dir")
        loop = Loop(
            name=_str(doc, "name") or "",
            initial=_str(doc, "initial") or "",
            states=MappingProxyType(states),
            path=path,
            description=_str(doc, "description"),
            context=MappingProxyType(context),
            max_iterations=int(_num(doc, "max_iterations", 50)),
            on_max_iterations=_str(doc, "on_max_iterations"),
            timeout=_opt_num(doc, "timeout"),
            action_timeout=float(_num(doc, "action_timeout", 3600.0)),
            backoff=float(_num(doc, "backoff", 0.0)),
            maintain=_bool(doc, "maintain", False),
            on_error=_str(doc, "on_error"),
            llm=self.llm(doc.get("llm")),
            max_cost_usd=_opt_num(doc, "max_cost_usd"),
            secrets=tuple(s for s in secrets if isinstance(s, str))
            if isinstance(secrets, list)
            else (),
            shell=_str(doc, "shell") or "/bin/sh",
            working_dir=Path(working_dir) if working_dir else None,
            source_sha256=sha256,
        )
        return loop, entries

    def llm(self, raw: Any) -> LlmDefaults:
        if not isinstance(raw, dict):
            return LlmDefaults()
        return LlmDefaults(
            model=_str(raw, "model"),
            max_tokens=int(_num(raw, "max_tokens", 256)),
            timeout=float(_num(raw, "timeout", 30.0)),
            min_confidence=float(_num(raw, "min_confidence", 0.5)),
            max_output_chars=int(_num(raw, "max_output_chars", 4000)),
        )

    def state(
        self, name: str, raw: Mapping[str, Any], at: NodePath
    ) -> tuple[State, list[tuple[str, Route]]]:
        action = _str(raw, "action") or None
        action_type: ActionType | None = None
        if action is not None:
            given = raw.get("action_type")
            action_type = given if given in ("shell", "slash") else guess_action_type(action)
        raw_eval = raw.get("evaluate")
        evaluate: Evaluate | None
        if isinstance(raw_eval, dict):
            evaluate = self.evaluate(raw_eval, (*at, "evaluate"))
        elif action_type == "shell":
            evaluate = Evaluate(type="exit_code", pos=self.smap.key(at))
        elif (
            action_type == "slash"
            and raw.get("terminal") is not True
            and any(raw.get(k) for k in ("route", "on_success", "on_failure"))
        ):
            # Branching on a slash step's result asks the judge, and only success or failure.
            evaluate = Evaluate(
                type="llm_structured", pos=self.smap.key(at), schema=PASS_FAIL_SCHEMA
            )
        else:
            evaluate = None  # a `next` or terminal slash step: the CLI's own result, no judge
        entries = self.route_entries(raw, at)
        routes: dict[str, Route] = {}
        for verdict, found in entries:
            routes.setdefault(verdict, found)
        next_target = _str(raw, "next")
        next_route = (
            Route(next_target, "next", self.smap.value((*at, "next"))) if next_target else None
        )
        raw_retry = raw.get("retry")
        state = State(
            name=name,
            pos=self.smap.key(at),
            action=action,
            action_type=action_type,
            evaluate=evaluate,
            routes=MappingProxyType(routes),
            next=next_route,
            terminal=_bool(raw, "terminal", False),
            outcome="failure" if raw.get("outcome") == "failure" else "success",
            capture=_str(raw, "capture"),
            timeout=_opt_num(raw, "timeout"),
            retry=self.retry(raw_retry) if isinstance(raw_retry, dict) else None,
            on_maintain=_str(raw, "on_maintain"),
            description=_str(raw, "description"),
        )
        return state, entries

    def route_entries(self, raw: Mapping[str, Any], at: NodePath) -> list[tuple[str, Route]]:
        """Every (verdict, route) the state's keys give, in file order, duplicates kept."""
        found: list[tuple[Pos, str, Route]] = []
        table = raw.get("route")
        if isinstance(table, dict):
            for verdict, target in table.items():
                if isinstance(target, str) and target:
                    pos = self.smap.value((*at, "route", verdict))
                    found.append((pos, verdict, Route(target, "route", pos)))
        for key, verdict in SHORTHANDS.items():
            target = raw.get(key)
            if isinstance(target, str) and target:
                pos = self.smap.value((*at, key))
                found.append((pos, verdict, Route(target, key, pos)))
        found.sort(key=lambda item: (item[0].line, item[0].col))
        return [(verdict, r) for _, verdict, r in found]

    def retry(self, raw: Mapping[str, Any]) -> Retry:
        on = raw.get("on")
        return Retry(
            max_attempts=int(_num(raw, "max_attempts", 3)),
            interval=float(_num(raw, "interval", 1.0)),
            backoff_rate=float(_num(raw, "backoff_rate", 2.0)),
            max_delay=float(_num(raw, "max_delay", 60.0)),
            jitter=_bool(raw, "jitter", True),
            on=tuple(v for v in on if isinstance(v, str))
            if isinstance(on, list)
            else ("error", "timeout"),
        )

    def evaluate(self, raw: Mapping[str, Any], at: NodePath) -> Evaluate:
        of = raw.get("of")
        nested: tuple[Evaluate, ...] = ()
        if isinstance(of, list):
            nested = tuple(
                self.evaluate(item, (*at, "of", i))
                for i, item in enumerate(of)
                if isinstance(item, dict)
            )
        target = raw.get("target")
        schema = raw.get("schema")
        direction = raw.get("direction")
        return Evaluate(
            type=_str(raw, "type") or "",
            pos=self.smap.value(at),
            pattern=_str(raw, "pattern"),
            literal=_bool(raw, "literal", False),
            negate=_bool(raw, "negate", False),
            source=_str(raw, "source"),
            operator=_str(raw, "operator"),
            target=target if isinstance(target, str | int | float | bool) else None,
            path=_str(raw, "path"),
            tolerance=float(_num(raw, "tolerance", 0.0)),
            direction="maximize" if direction == "maximize" else "minimize",
            previous=_str(raw, "previous"),
            of=nested,
            prompt=_str(raw, "prompt"),
            schema=MappingProxyType(schema) if isinstance(schema, dict) else None,
            min_confidence=_opt_num(raw, "min_confidence"),
            uncertain_suffix=_bool(raw, "uncertain_suffix", False),
            model=_str(raw, "model"),
            max_tokens=_opt_int(raw, "max_tokens"),
            timeout=_opt_num(raw, "timeout"),
            max_output_chars=_opt_int(raw, "max_output_chars"),
            fail_open=_bool(raw, "fail_open", False),
            prior_reason=_bool(raw, "prior_reason", False),
            samples=int(_num(raw, "samples", 1)),
        )


def guess_action_type(action: str) -> ActionType:
    """SPEC section 3: slash when the first word is `/name` or `/ns:name` with no other `/`."""
    words = action.split(None, 1)
    first = words[0] if words else ""
    if len(first) > 1 and first.startswith("/") and "/" not in first[1:]:
        return "slash"
    return "shell"


def _str(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) else None


def _bool(raw: Mapping[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key)
    return value if isinstance(value, bool) else default


def _num(raw: Mapping[str, Any], key: str, default: float) -> float:
    value = raw.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return default


def _opt_num(raw: Mapping[str, Any], key: str) -> float | None:
    return _num(raw, key, 0.0) if _is_num(raw.get(key)) else None


def _opt_int(raw: Mapping[str, Any], key: str) -> int | None:
    return int(_num(raw, key, 0)) if _is_num(raw.get(key)) else None
