"""`${namespace.path}` placeholders: finding them (for checks) and resolving them (for runs)."""

from __future__ import annotations

import re
from dataclasses import dataclass

NAMESPACES = ("context", "captured", "prev", "state", "loop", "env")
MODIFIERS = ("raw", "q")

# Inside ${...}: a dotted path of names, then an optional |modifier.
_BODY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)((?:\.[A-Za-z0-9_-]+)*)(?:\|([A-Za-z]+))?$")


@dataclass(frozen=True)
class Placeholder:
    """One `${...}` in a template, with its offsets in the template text."""

    start: int  # offset of `$`
    end: int  # offset just past `}`
    namespace: str
    path: tuple[str, ...]  # the names after the namespace
    modifier: str | None  # "raw", "q" or None

    @property
    def name(self) -> str:
        return ".".join((self.namespace, *self.path))


@dataclass(frozen=True)
class PlaceholderError:
    """A `${` that is not a well-formed placeholder; `message` says what is wrong."""

    start: int
    message: str


def scan(text: str) -> list[str | Placeholder | PlaceholderError]:
    """Split a template into literal text and placeholders. `$${` is a literal `${`.

    Unknown namespaces and modifiers are reported as PlaceholderError, so `ll validate`
    can point at them before anything runs.
    """
    parts: list[str | Placeholder | PlaceholderError] = []
    literal: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        if text.startswith("$${", i):
            literal.append("${")
            i += 3
            continue
        if not text.startswith("${", i):
            j = text.find("$", i + 1)
            j = n if j < 0 else j
            literal.append(text[i:j])
            i = j
            continue
        close = text.find("}", i + 2)
        if close < 0:
            parts.append("".join(literal))
            literal = []
            parts.append(PlaceholderError(i, "'${' is never closed with '}' (write '$${' for a literal '${')"))
            literal.append(text[i:])
            break
        body = text[i + 2 : close].strip()
        m = _BODY.match(body)
        if literal:
            parts.append("".join(literal))
            literal = []
        if m is None:
            parts.append(PlaceholderError(i, f"'${{{body}}}' is not a valid placeholder; write '${{namespace.name}}'"))
        else:
            namespace, dotted, modifier = m.group(1), m.group(2), m.group(3)
            path = tuple(dotted[1:].split(".")) if dotted else ()
            if namespace not in NAMESPACES:
                parts.append(
                    PlaceholderError(
                        i,
                        f"unknown namespace '{namespace}' in '${{{body}}}'; "
                        f"use one of: {', '.join(NAMESPACES)}",
                    )
                )
            elif modifier is not None and modifier not in MODIFIERS:
                parts.append(
                    PlaceholderError(
                        i, f"unknown modifier '|{modifier}' in '${{{body}}}'; use '|raw' or '|q'"
                    )
                )
            elif not path:
                parts.append(
                    PlaceholderError(i, f"'${{{body}}}' names a namespace but no key; write '${{{namespace}.NAME}}'")
                )
            else:
                parts.append(Placeholder(i, close + 1, namespace, path, modifier))
        i = close + 1
    if literal:
        parts.append("".join(literal))
    return parts


def placeholders(text: str) -> list[Placeholder]:
    """The well-formed placeholders of a template, in order."""
    return [p for p in scan(text) if isinstance(p, Placeholder)]
