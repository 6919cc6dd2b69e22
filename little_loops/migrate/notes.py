"""`ll migrate`: what a migration did to a file, line by line, for MIGRATION-NOTES.md.

Four kinds of note: `carried` (rewritten so the loop does what it did upstream), `changed`
(it now behaves differently), `dropped` (no equivalent here; the value is kept under
`x-upstream` for reference) and `hand` (needs a person: the file may not validate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml.comments import CommentedMap

KINDS = {
    "hand": "needs hand work",
    "changed": "behaves differently",
    "dropped": "no equivalent",
    "carried": "carried",
}


def line_of(mapping: Any, key: Any) -> int:
    """The 1-based line of `key` in a ruamel mapping, else 0 (a key added by the migration)."""
    try:
        return int(mapping.lc.key(key)[0]) + 1
    except (AttributeError, KeyError, TypeError, IndexError):
        return 0


@dataclass
class Note:
    kind: str
    text: str
    lines: list[int] = field(default_factory=list)


@dataclass
class Notes:
    """The notes of one file; the same text twice becomes one note with both lines."""

    items: list[Note] = field(default_factory=list)

    def add(self, kind: str, line: int, text: str, lines: list[int] | None = None) -> None:
        for note in self.items:
            if note.kind == kind and note.text == text:
                note.lines += [n for n in (lines or [line]) if n and n not in note.lines]
                return
        self.items.append(Note(kind, text, [n for n in (lines or [line]) if n]))

    def carried(self, line: int, text: str, lines: list[int] | None = None) -> None:
        self.add("carried", line, text, lines)

    def changed(self, line: int, text: str) -> None:
        self.add("changed", line, text)

    def dropped(self, line: int, text: str) -> None:
        self.add("dropped", line, text)

    def hand(self, line: int, text: str) -> None:
        self.add("hand", line, text)

    @property
    def needs_hand_work(self) -> bool:
        return any(note.kind == "hand" for note in self.items)

    def markdown(self) -> list[str]:
        """One bullet a note, the worst kinds first, each with its upstream lines."""
        order = list(KINDS)
        out: list[str] = []
        for note in sorted(self.items, key=lambda n: (order.index(n.kind), min(n.lines or [0]))):
            lines = sorted(set(note.lines))
            where = _lines(lines)
            out.append(f"- {where}**{KINDS[note.kind]}**: {note.text}")
        return out


def _lines(lines: list[int]) -> str:
    if not lines:
        return ""
    shown = ", ".join(str(n) for n in lines[:12])
    more = f" (+{len(lines) - 12})" if len(lines) > 12 else ""
    return f"line{'s' if len(lines) > 1 else ''} {shown}{more} · "


# -- two edits of a ruamel mapping that keep its order and comments ---------------------


def rename(mapping: CommentedMap, old: str, new: str) -> None:
    """Rename a key where it stands, its comment kept."""
    pos = list(mapping).index(old)
    value = mapping.pop(old)
    comment = mapping.ca.items.pop(old, None)
    mapping.insert(pos, new, value)
    if comment is not None:
        mapping.ca.items[new] = comment


def set_near(mapping: CommentedMap, after: str, key: str, value: Any) -> None:
    """Set `key`, just after `after` when `key` is new."""
    if key in mapping:
        mapping[key] = value
        return
    order = list(mapping)
    pos = order.index(after) + 1 if after in order else len(order)
    mapping.insert(pos, key, value)
