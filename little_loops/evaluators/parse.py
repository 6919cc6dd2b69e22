"""Lenient extraction of a JSON answer from a judge that replied with text instead of a tool call.

Candidates are tried in a fixed order: fenced ```json (or bare ```) blocks, the whole reply
as one object, then every balanced `{...}` in the text from left to right (braces inside JSON
strings do not count). The first candidate that `accept` takes wins; if none does, the answer
is `None` and the judge reports an error. Nothing is repaired or guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|jsonc)?[ \t]*\r?\n(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
MAX_CANDIDATES = 500  # objects tried from one reply; a reply is small, this only bounds abuse


def candidates(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object the text offers, in the order they are tried."""
    for match in _FENCE.finditer(text):
        obj = _load(match.group(1).strip())
        if obj is not None:
            yield obj
    obj = _load(text.strip())
    if obj is not None:
        yield obj
    start = text.find("{")
    tried = 0
    while start != -1 and tried < MAX_CANDIDATES:
        tried += 1
        try:
            value, _end = _DECODER.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            yield value
        start = text.find("{", start + 1)


def extract(text: str, accept: Callable[[Mapping[str, Any]], bool]) -> dict[str, Any] | None:
    """The first candidate object in `text` that `accept` takes, or None."""
    for obj in candidates(text):
        if accept(obj):
            return obj
    return None


def preview(text: str, limit: int = 160) -> str:
    """A one-line preview of a reply for error messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _load(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
