"""YAML text -> plain values with the line and column of every node (`SourceMap`).

The YAML is read by PyYAML's (C) parser; this module composes its events itself, without
recursion, so that it can keep every node's line and column, reject duplicate keys (PyYAML
keeps the last silently), read every mapping key as text (`on:` stays `on`, not `True`), and
refuse documents nested or aliased deeply enough to crash or stall the program.
"""

from __future__ import annotations

from little_loops.errors import Diagnostic
from little_loops.load.positions import MAX_DEPTH as MAX_DEPTH  # theirs, callers' too
from little_loops.load.positions import MAX_NODES as MAX_NODES
from little_loops.load.positions import SourceMap as SourceMap
from little_loops.model.loop import Pos
from little_loops.model.records import field, record
from little_loops.wording import (
    NodePath,
    where,
)

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

    import yaml

# PyYAML is imported when a file is composed, not with this module: its import compiles
# regular expressions for about a fifth of `ll run`'s start-up, which a loop file found in
# the parse cache (source.py) does without.

# The largest of them: `yaml.reader` (PyYAML's pure-Python reader) compiles, when it is
# imported, the characters YAML forbids written as the complement of the ones it allows. For
# a class that large, `re` marks the 65,536 first code points of a table one at a time: about
# 57 M instructions (13 ms), a seventh of a file's first run, for a pattern libyaml's reader,
# the one `ll` uses, never reads. `yaml_module` has the reader compile the same set of
# characters written directly, a few thousand of them (tests/load/test_composer_yaml.py
# compares both over every code point). A PyYAML whose pattern differs is left as it is.
_FORBIDDEN_AS_ALLOWED = "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
_FORBIDDEN = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]"


def yaml_module() -> Any:
    """`import yaml`, without compiling its reader's pattern the slow way (above)."""
    import sys

    found = sys.modules.get("yaml")
    if found is not None:
        return found
    import re

    compile_pattern = re.compile

    def compile_fast(pattern: Any, flags: int = 0) -> Any:
        if pattern == _FORBIDDEN_AS_ALLOWED and not flags:
            pattern = _FORBIDDEN
        return compile_pattern(pattern, flags)

    re.compile = compile_fast
    try:
        import yaml
    finally:
        re.compile = compile_pattern
    return yaml


def _loader_class() -> type[yaml.SafeLoader]:
    module = yaml_module()
    made: type[yaml.SafeLoader] = getattr(module, "CSafeLoader", module.SafeLoader)  # libyaml's
    return made


_MAP_TAGS = (None, "!", "tag:yaml.org,2002:map")
_SEQ_TAGS = (None, "!", "tag:yaml.org,2002:seq")
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Stop(Exception):
    """Composition cannot go on; the diagnostic says why."""

    def __init__(self, pos: Pos, code: str, message: str) -> None:
        super().__init__(message)
        self.pos, self.code, self.message = pos, code, message


@record
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


def compose(text: str, file: str) -> tuple[Any, SourceMap, list[Diagnostic], bool]:
    """The document, its positions, the diagnostics, and whether the whole file was read.

    A file in the plain part of YAML is read without PyYAML (plain_yaml.py: the same
    document and positions); any other, and every error, by PyYAML."""
    from little_loops.load.plain_yaml import compose_plain

    found = compose_plain(text)
    if found is not None:
        return found[0], found[1], [], True
    return compose_yaml(text, file)


def compose_yaml(text: str, file: str) -> tuple[Any, SourceMap, list[Diagnostic], bool]:
    """`compose` by PyYAML's parser, whatever the file holds."""
    yaml = yaml_module()

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
        composer.errors.append(found.with_message(hint) if hint else found)
    except yaml.YAMLError as exc:
        composer.errors.append(_reader_error(exc, text, file))
    finally:
        composer.loader.dispose()
    return composer.root, composer.smap, composer.errors, complete


class _Composer:
    def __init__(self, text: str, file: str) -> None:
        self.loader = _loader_class()(text)
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
        import yaml

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
        import yaml

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
        import yaml

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
    from little_loops.load.hints import yaml_line_message

    lines = text.splitlines()
    if not 1 <= pos.line <= len(lines):
        return None
    return yaml_line_message(problem, lines[pos.line - 1], pos.col - 1) or _indent_hint(
        problem, lines, pos
    )


# PyYAML's words for a line indented wrong (a key too deep, too shallow, a stray space).
_INDENT_PROBLEMS = (
    "mapping values are not allowed",
    "did not find expected key",
    "expected <block end>",
    "did not find expected '-' indicator",
)


def _indent_hint(problem: str, lines: list[str], pos: Pos) -> str | None:
    """A tab in the indentation, or a line indented unlike the one before: say so."""
    for number in range(pos.line, max(pos.line - 3, 0), -1):  # the error may point past it
        line = lines[number - 1]
        lead = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in lead:
            return (
                f"invalid YAML: line {number} is indented with a tab; YAML indents with "
                "spaces only: replace the tab with spaces"
            )
    if not problem.startswith(_INDENT_PROBLEMS):
        return None
    here = pos.line - 1
    line = lines[here]
    before = next(
        (
            i
            for i in range(here - 1, -1, -1)
            if lines[i].strip() and not lines[i].lstrip().startswith("#")
        ),
        None,
    )
    if before is None:
        return None
    mine = len(line) - len(line.lstrip(" "))
    theirs = len(lines[before]) - len(lines[before].lstrip(" "))
    if mine == theirs:
        return None
    return (
        f"invalid YAML: {problem}; check the indentation: line {pos.line} is indented "
        f"{mine} spaces, line {before + 1} {theirs}: the keys of one mapping start in the same "
        "column, and a nested mapping is indented under its key"
    )


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
