"""How messages name what is in a loop file: a node by its path, a value as YAML writes it."""

from __future__ import annotations

from typing import Any

# A node's place in the document: ("states", "fix", "evaluate", "of", 0).
NodePath = tuple[str | int, ...]


def did_you_mean(word: str, options: list[str]) -> str:
    """A " (did you mean 'X'?)" for the closest of `options`, or nothing."""
    import difflib  # only when there is something to suggest

    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _dotted(path: NodePath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def subject(path: NodePath) -> str:
    """How a message names the node at `path`: "'timeout' of state 'fix'"."""
    if len(path) >= 2 and path[0] == "states":
        if len(path) == 2:
            return f"state '{path[1]}'"
        return f"'{_dotted(path[2:])}' of state '{path[1]}'"
    return f"'{_dotted(path)}'" if path else "the loop file"


def where(path: NodePath) -> str:
    """Where a key stands: 'at the top level', "in state 'fix'", "in 'retry' of state 'fix'"."""
    if not path:
        return "at the top level"
    if len(path) == 2 and path[0] == "states":
        return f"in state '{path[1]}'"
    return f"in {subject(path)}"


def describe(value: Any) -> str:
    """What kind of value this is, for 'must be X, not Y'."""
    if value is None:
        return "empty"
    if isinstance(value, bool | int | float | str):
        kind = {bool: "true/false", str: "text"}.get(type(value), "a number")
        return f"{kind} ({show(value)})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__} value"


def show(value: Any) -> str:
    """A value as the author would write it in YAML, shortened."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return "'" + text.replace("\n", "\\n") + "'"
    return str(value)


def or_words(words: list[str]) -> str:
    """'a, b or c'."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
