"""JSON paths (`.a.b[0]`, `["any key"]`) for `output_json`: parsing, walking, depth limits."""

from __future__ import annotations

import re

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

_PATH_TOKEN = re.compile(
    r"""\.(?P<key>[A-Za-z_][A-Za-z0-9_-]*)      # .name
      | \[(?P<index>-?\d+)\]                    # [0] or [-1]
      | \["(?P<quoted>(?:[^"\\]|\\.)*)"\]       # ["any key"]
    """,
    re.VERBOSE,
)


def parse_json_path(path: str) -> tuple[str | int, ...]:
    """`.a.b[0].c` -> ("a", "b", 0, "c"); `.` is the whole document.

    Raises ValueError with a message that says what is wrong and how to write it.
    """
    if path in (".", ""):
        if path == "":
            raise ValueError("empty JSON path; write '.' for the whole document or '.key[0]'")
        return ()
    if not path.startswith((".", "[")):
        raise ValueError(f"JSON path '{path}' must start with '.' or '[' (for example '.{path}')")
    out: list[str | int] = []
    pos = 0
    while pos < len(path):
        m = _PATH_TOKEN.match(path, pos)
        if m is None:
            raise ValueError(
                f"JSON path '{path}' is malformed at character {pos + 1} ('{path[pos:]}'); "
                "write keys as '.name' or '[\"any key\"]' and indexes as '[0]'"
            )
        if m.group("key") is not None:
            out.append(m.group("key"))
        elif m.group("index") is not None:
            out.append(int(m.group("index")))
        else:
            out.append(re.sub(r"\\(.)", r"\1", m.group("quoted")))
        pos = m.end()
    return tuple(out)


MISSING = object()  # what `walk` gives for a path that is not there


def walk(doc: Any, path: tuple[str | int, ...]) -> tuple[Any, str]:
    """The value at `path`, or `MISSING` and the part of the path that was found."""
    node = doc
    seen = ""
    for key in path:
        if isinstance(key, int) and isinstance(node, list) and -len(node) <= key < len(node):
            node = node[key]
            seen += f"[{key}]"
        elif isinstance(key, str) and isinstance(node, dict) and key in node:
            node = node[key]
            seen += f".{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key) else f"[{key!r}]"
        else:
            return MISSING, seen or "."
    return node, seen or "."


# Deeper documents are refused: they would overflow Python's stack when compared or written
# into an event, and no tool's real output nests so far.
MAX_JSON_DEPTH = 200


def too_deep(doc: Any) -> bool:
    level: list[Any] = [doc]
    for _ in range(MAX_JSON_DEPTH):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return False
    return any(isinstance(item, dict | list) and item for item in level)
