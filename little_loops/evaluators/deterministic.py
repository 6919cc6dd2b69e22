"""Tier-1 evaluators: exit code, regex, number, JSON path, convergence, all/any. Pure functions."""

from __future__ import annotations

import re

OPERATORS: tuple[str, ...] = ("eq", "ne", "lt", "le", "gt", "ge")

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
