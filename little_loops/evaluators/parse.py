"""Lenient extraction of a JSON answer from a judge that replied with text instead of a tool call.

`<think>...</think>` blocks (a reasoning model's drafts) are removed first. The candidates are
then the whole reply as one object, else every top-level balanced `{...}` from left to right
(braces inside JSON strings do not count; a fenced ```json block is found the same way); an
object that is not acceptable itself stands for the last acceptable object nested in it. The
**last** candidate that `accept` takes wins, since a model that drafts and corrects itself puts
its final answer last; if none does, the answer is `None` and the judge reports an error.
Nothing is repaired or guessed. Pathological input (deep nesting) is skipped, never raised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

_THINK = re.compile(r"<think(?:ing)?>.*?(?:</think(?:ing)?>|\Z)", re.DOTALL | re.IGNORECASE)
_DECODER = json.JSONDecoder()
MAX_CANDIDATES = 500  # objects tried from one reply; a reply is small, this only bounds abuse


def without_thinking(text: str) -> str:
    """The reply with `<think>` blocks removed (an unclosed one runs to the end)."""
    return _THINK.sub("", text)


def candidates(text: str) -> Iterator[dict[str, Any]]:
    """Every top-level JSON object the text offers, in text order."""
    text = without_thinking(text)
    whole = _load(text.strip())
    if whole is not None:
        yield whole
        return
    start = text.find("{")
    tried = 0
    while start != -1 and tried < MAX_CANDIDATES:
        tried += 1
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            value, end = None, start + 1
        if isinstance(value, dict):  # decoding at '{' gives an object or raises
            yield value
        start = text.find("{", end)


def extract(text: str, accept: Callable[[Mapping[str, Any]], bool]) -> list[dict[str, Any]]:
    """Every candidate object in `text` that `accept` takes, in text order."""
    found: list[dict[str, Any]] = []
    for obj in candidates(text):
        if accept(obj):
            found.append(obj)
            continue
        found += [sub for sub in _nested(obj) if accept(sub)]
    return found


def _nested(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects nested in `obj`, outer before inner, in key order (bounded)."""
    out: list[dict[str, Any]] = []
    stack: list[Any] = list(reversed(list(obj.values())))
    while stack and len(out) < MAX_CANDIDATES:
        value = stack.pop()
        if isinstance(value, dict):
            out.append(value)
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    return out


def preview(text: str, limit: int = 160) -> str:
    """A one-line preview of a reply for error messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _load(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
