"""A loop file in plain YAML composed without PyYAML: the first run of a file (issue 27).

PyYAML's import is most of what the first `ll run` of a file costs over the next ones (about
44 M instructions: its sixteen modules, `datetime`, its resolver's patterns, the `_yaml`
extension), and the parse cache (source.py) has nothing for a file never run. Most loop files
use a small part of YAML: block mappings and sequences, one-line scalars (plain, quoted
without escapes), literal blocks (`|`, `|-`) and one-line flow collections. `compose_plain`
reads exactly that part and gives the document and positions `composer.compose` would give.

It answers None, and `composer.compose` reads the file with PyYAML as before, for anything
else or anything it is not sure of: anchors, aliases, tags, merges, folded or kept blocks,
escapes, multi-line plain or quoted scalars, empty values, duplicate keys, documents markers,
directives, tabs, control characters, a plain scalar that could be a number, date or special
value other than the plain ones below, and every error. So a file's errors, with their lines,
columns and words, always come from PyYAML. tests/load/test_plain_yaml.py compares the two
over generated documents and every loop file of the repository.

Plain scalars are typed as PyYAML's safe loader types them (YAML 1.1): `true`/`yes`/`on`
(and their capitalised forms) and their opposites are booleans, `~`/`null` is None, decimal
integers and `digits.digits` decimals are numbers; any other scalar that begins as a number,
a date or a special value might do (`0x1f`, `1:30`, `2026-01-01`, `.inf`, `<<`, `=`) is left
to PyYAML.
"""

from __future__ import annotations

import re

from little_loops.load.positions import MAX_DEPTH, MAX_NODES, SourceMap
from little_loops.model.loop import Pos

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

    from little_loops.wording import NodePath

_KEY = re.compile(r"[A-Za-z0-9_][^\s:#,\[\]{}]*(?: [^\s:#,\[\]{}]+)*:(?= |$)", re.ASCII)
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/"}
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)", re.ASCII)
_FLOAT = re.compile(r"[-+]?[0-9]+\.[0-9]+", re.ASCII)
_BOOLS = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_NULLS = ("~", "null", "Null", "NULL")
_DIGITS = "0123456789_"
_NUMERIC = "0123456789+-.~<="  # first characters PyYAML's resolvers look further at
_INDICATORS = "-?:,[]{}#&*!|>'\"%@`"  # a plain scalar does not begin with one (here)
_FLOW_STOP = ",[]{}#"


class _Unsure(Exception):
    """Not the plain part of YAML: PyYAML reads the file."""


def compose_plain(text: str) -> tuple[Any, SourceMap] | None:
    """The document and its positions, as `composer.compose` gives them; None when the file
    is not in the part of YAML read here (PyYAML reads it)."""
    if "\r" in text:
        return None
    lines = text.split("\n")
    if not all(line.isprintable() for line in lines):  # tabs, controls, odd line breaks
        return None
    try:
        return _Reader(lines).document()
    except (_Unsure, RecursionError):
        return None


def _blank(line: str) -> bool:
    stripped = line.lstrip(" ")
    return not stripped or stripped.startswith("#")


def _typed(value: str) -> Any:
    """A plain scalar's value as PyYAML's safe loader types it; _Unsure when it might not
    be plain text, a boolean, None, a decimal integer or a decimal."""
    if value in _NULLS:
        return None
    first = value[0]
    if first in "yYnNtTfFoO":
        return _BOOLS.get(value, value)
    if first not in _NUMERIC:
        return value
    second = value[1:2]
    if first == "~" or (first == "<" and value != "<<") or (first == "=" and value != "="):
        return value  # only `~`, `<<` and `=` are more than text
    if first in "+-" and (not second or second not in _DIGITS + "."):
        return value  # a number has a digit or `.inf` after its sign
    if first == "." and (not second or second not in _DIGITS + "iInN"):
        return value  # `.5`, `.inf`, `.nan` may be numbers, `./run.sh` is not
    if _INT.fullmatch(value):
        if len(value) > 4000:
            raise _Unsure  # past Python's limit for int(): PyYAML's reading says so
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    raise _Unsure


def _folded(body: list[str]) -> str:
    """A folded block's lines as one text: a line break between two lines becomes a space,
    and each empty line between them a line break; _Unsure for a line indented deeper (kept
    as it is, with the breaks around it: left to PyYAML)."""
    out: list[str] = []
    empty = 0
    for line in body:
        if line.startswith(" "):
            raise _Unsure
        if not line:
            empty += 1
            continue
        if out:
            out.append("\n" * empty if empty else " ")
        out.append(line)
        empty = 0
    return "".join(out)


class _Reader:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.i = 0  # the next line to read
        # Each line's indentation, and the first line from it that is neither blank nor a
        # comment (-1: none), made once: the reading asks for them again and again.
        self.indents = [len(line) - len(line.lstrip(" ")) for line in lines]
        self.content = [0] * len(lines)
        after = -1
        for k in range(len(lines) - 1, -1, -1):
            if not _blank(lines[k]):
                after = k
            self.content[k] = after
        self.smap = SourceMap()
        self.nodes = 0

    # -- lines ----------------------------------------------------------------------------

    def next_content(self, i: int) -> int | None:
        """The first line from `i` that is neither blank nor a comment."""
        j = self.content[i] if i < len(self.content) else -1
        return None if j < 0 else j

    def ends_here(self, parent: int) -> None:
        """After a value ending on line `self.i - 1`: the next line that is not blank nor a
        comment is not indented deeper than `parent` (deeper: a continuation, or an error)."""
        j = self.next_content(self.i)
        if j is not None and self.indents[j] > parent:
            raise _Unsure

    def count(self, path: NodePath) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES or len(path) >= MAX_DEPTH:
            raise _Unsure

    # -- the document ---------------------------------------------------------------------

    def document(self) -> tuple[Any, SourceMap]:
        i = self.next_content(0)
        if i is None:
            raise _Unsure
        for line in self.lines:
            if line.startswith(("---", "...", "%")):
                raise _Unsure
        if self.indents[i] != 0:
            raise _Unsure
        root = self.mapping(i, 0, ())
        if self.next_content(self.i) is not None:
            raise _Unsure
        return root, self.smap

    def mapping(self, i: int, col: int, path: NodePath) -> dict[str, Any]:
        """A block mapping whose first key is on line `i` at column `col` (0-based)."""
        self.count(path)
        self.smap.values[path] = Pos(i + 1, col + 1)
        value: dict[str, Any] = {}
        while True:
            line = self.lines[i]
            found = _KEY.match(line, col)
            if found is None:
                raise _Unsure
            key = found.group()[:-1]
            if key in value:
                raise _Unsure  # a duplicate: PyYAML's reading reports it
            key_path = (*path, key)
            self.smap.keys[key_path] = Pos(i + 1, col + 1)
            value[key] = self.value(i, found.end(), col, key_path)
            j = self.next_content(self.i)
            if j is None:
                return value
            indent = self.indents[j]
            if indent < col:
                return value
            if indent > col:
                raise _Unsure
            i = j

    def sequence(self, i: int, col: int, path: NodePath, indentless: bool = False) -> list[Any]:
        """A block sequence whose first `-` is on line `i` at column `col` (`indentless`: in
        the column of the key it is the value of, so a line there without `- ` ends it)."""
        self.count(path)
        self.smap.values[path] = Pos(i + 1, col + 1)
        items: list[Any] = []
        while True:
            line = self.lines[i]
            if not line.startswith("- ", col):
                raise _Unsure
            start = col + 2
            while start < len(line) and line[start] == " ":
                start += 1
            at = (*path, len(items))
            if start >= len(line) or line[start] == "#" or line.startswith("- ", start):
                raise _Unsure  # an item on the next lines, or a sequence in a sequence
            if _KEY.match(line, start):
                items.append(self.mapping(i, start, at))
            else:
                items.append(self.value(i, start, col, at, in_mapping=False))
            j = self.next_content(self.i)
            if j is None:
                return items
            indent = self.indents[j]
            if indent < col or (indentless and not self.lines[j].startswith("- ", col)):
                return items
            if indent > col:
                raise _Unsure
            i = j

    # -- values ---------------------------------------------------------------------------

    def value(
        self, i: int, start: int, parent: int, path: NodePath, in_mapping: bool = True
    ) -> Any:
        """The value after a key's `:` or a sequence's `- ` on line `i` from `start`; the
        key or the `-` stands at column `parent`. Leaves `self.i` after its last line."""
        line = self.lines[i]
        at = start
        while at < len(line) and line[at] == " ":
            at += 1
        rest = line[at:]
        if not rest or rest.startswith("#"):
            if at == start and rest:
                raise _Unsure
            j = self.next_content(i + 1)
            indent = -1 if j is None else self.indents[j]
            if j is not None and indent > parent:
                if self.lines[j].startswith("- ", indent):
                    return self.sequence(j, indent, path)
                return self.mapping(j, indent, path)
            if not in_mapping:
                raise _Unsure  # `- ` and nothing: an empty item
            if j is not None and indent == parent and self.lines[j].startswith("- ", indent):
                return self.sequence(j, indent, path, indentless=True)  # `key:` then `- a`
            # An empty value: None, where the `:` ends (and a comment after it is noted).
            self.count(path)
            self.smap.values[path] = Pos(i + 1, start + 1)
            if rest:
                self.smap.comments[path] = (Pos(i + 1, at + 1), rest[1:])
            self.i = i + 1
            return None
        self.count(path)
        self.smap.values[path] = Pos(i + 1, at + 1)
        if rest[0] in "|>":
            return self.block(i, at, parent, path)
        if rest[0] in "[{":
            value, end = self.flow(line, at, path, i, 0)
            self.after(line, end)
        elif rest[0] == "'":
            value, end = self.single(line, at)
            self.after(line, end)
        elif rest[0] == '"':
            value, end = self.double(line, at)
            self.after(line, end)
        else:
            value = self.plain(line, at, i, path)
        self.i = i + 1
        self.ends_here(parent)
        return value

    def after(self, line: str, end: int) -> None:
        """What follows a quoted scalar or a flow collection: spaces, then maybe a comment."""
        rest = line[end:]
        stripped = rest.lstrip(" ")
        if stripped and not (stripped.startswith("#") and len(stripped) < len(rest)):
            raise _Unsure

    def plain(self, line: str, at: int, i: int, path: NodePath) -> Any:
        if line[at] in _INDICATORS and not (line[at] == "-" and line[at + 1 : at + 2].isdigit()):
            raise _Unsure
        cut = line.find(" #", at)
        text = line[at:] if cut < 0 else line[at:cut]
        text = text.rstrip(" ")
        if ": " in text or text.endswith(":"):
            raise _Unsure
        end = at + len(text)
        rest = line[end:]
        stripped = rest.lstrip(" \t")
        if stripped.startswith("#") and len(stripped) < len(rest):
            col = end + len(rest) - len(stripped) + 1
            self.smap.comments[path] = (Pos(i + 1, col), stripped[1:])
        return _typed(text)

    def single(self, line: str, at: int) -> tuple[str, int]:
        """A single-quoted scalar on one line: its text and the column after it."""
        parts: list[str] = []
        k = at + 1
        while True:
            close = line.find("'", k)
            if close < 0:
                raise _Unsure  # it goes on to the next line
            parts.append(line[k:close])
            if line.startswith("''", close):
                parts.append("'")
                k = close + 2
                continue
            return "".join(parts), close + 1

    def double(self, line: str, at: int) -> tuple[str, int]:
        """A double-quoted scalar on one line; of the escapes, only `\\n \\t \\" \\\\ \\/`."""
        parts: list[str] = []
        k = at + 1
        while True:
            close = line.find('"', k)
            slash = line.find("\\", k, close)
            if close < 0:
                raise _Unsure  # it goes on to the next line
            if slash < 0:
                parts.append(line[k:close])
                return "".join(parts), close + 1
            escaped = _ESCAPES.get(line[slash + 1 : slash + 2])
            if escaped is None:
                raise _Unsure
            parts.append(line[k:slash])
            parts.append(escaped)
            k = slash + 2

    def block(self, i: int, at: int, parent: int, path: NodePath) -> str:
        """`|`, `|-`, `>` or `>-` at column `at` of line `i`, and the lines below it."""
        header = self.lines[i][at:]
        folded = header[0] == ">"
        chomp = header[1:2] == "-"
        rest = header[2:] if chomp else header[1:]
        stripped = rest.lstrip(" ")
        if stripped and not (stripped.startswith("#") and len(stripped) < len(rest)):
            raise _Unsure  # `|+`, `|2`, `>`...
        j = i + 1
        if j >= len(self.lines) or not self.lines[j].strip(" "):
            raise _Unsure  # leading blank lines: their spaces may count
        indent = self.indents[j]
        if indent <= parent:
            raise _Unsure  # an empty block
        body: list[str] = []
        while j < len(self.lines):
            line = self.lines[j]
            if not line.strip(" "):
                if len(line) > indent:
                    raise _Unsure  # spaces beyond the block's indentation
                body.append("")
            elif self.indents[j] >= indent:
                body.append(line[indent:])
            else:
                break
            j += 1
        while body and not body[-1]:
            body.pop()
        # Clipped, the text ends with the line break of its last line, if it has one.
        broken = i + len(body) < len(self.lines) - 1
        self.i = j
        self.ends_here(parent)
        text = _folded(body) if folded else "\n".join(body)
        return text if chomp or not broken else text + "\n"

    def flow(self, line: str, at: int, path: NodePath, i: int, depth: int) -> tuple[Any, int]:
        """A flow mapping or sequence on one line from column `at`: it and the column after."""
        if depth + len(path) >= MAX_DEPTH:
            raise _Unsure
        is_map = line[at] == "{"
        close = "}" if is_map else "]"
        value: Any = {} if is_map else []
        k = self.spaces(line, at + 1)
        if line.startswith(close, k):
            return value, k + 1
        while True:
            if is_map:
                found = _KEY.match(line, k)
                if found is None:
                    raise _Unsure
                key = found.group()[:-1]
                if key in value:
                    raise _Unsure
                at_item = (*path, key)
                self.smap.keys[at_item] = Pos(i + 1, k + 1)
                k = found.end()
                if not line.startswith(" ", k):
                    raise _Unsure
                k = self.spaces(line, k)
            else:
                at_item = (*path, len(value))
            item, k = self.flow_item(line, k, at_item, i, depth)
            if is_map:
                value[at_item[-1]] = item
            else:
                value.append(item)
            k = self.spaces(line, k)
            if line.startswith(close, k):
                return value, k + 1
            if not line.startswith(", ", k):
                raise _Unsure
            k = self.spaces(line, k + 1)
            if k >= len(line) or line[k] in ",]}":
                raise _Unsure  # a trailing or empty entry

    def flow_item(self, line: str, k: int, path: NodePath, i: int, depth: int) -> tuple[Any, int]:
        if k >= len(line):
            raise _Unsure
        self.count(path)
        self.smap.values[path] = Pos(i + 1, k + 1)
        first = line[k]
        if first in "[{":
            return self.flow(line, k, path, i, depth + 1)
        if first == "'":
            return self.single(line, k)
        if first == '"':
            return self.double(line, k)
        if first in _INDICATORS and not (first == "-" and line[k + 1 : k + 2].isdigit()):
            raise _Unsure
        end = k
        while end < len(line) and line[end] not in _FLOW_STOP:
            end += 1
        text = line[k:end].rstrip(" ")
        if not text or ":" in text or " #" in line[k:end]:
            raise _Unsure
        return _typed(text), k + len(text)

    @staticmethod
    def spaces(line: str, k: int) -> int:
        while k < len(line) and line[k] == " ":
            k += 1
        return k
