"""A fork's decisions, without running anything: its items and keys, its join, its result.

`parallel:` names its branches; `for_each:` gives items (a YAML list, a JSON array, or lines),
each a branch keyed by its text when every text is a safe, unique key, else by its index.
The join counts the branches that gave the verdict it waits for; the state's verdict is
`success` when the count is met, `failure` when it is not (or can no longer be), `error` only
when the fork could not start. `branches.py` runs the branches and asks these functions.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from little_loops.model.loop import (
    Join,
    State,
    base_verdict,
)

KEY_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,40}")
MAX_ITEMS = 1000  # more items than this: verdict `error` before any branch starts
OUTPUT_CHARS = 4000  # an action branch's output kept in the join record (its tail)
DEFAULT_CONCURRENCY = 4  # `for_each` without `max_concurrency`; `parallel:` runs every branch
CANCELLED = "cancelled"  # a branch stopped by `fail_fast`: never a routable verdict


class ItemsError(Exception):
    """The items cannot be used: the fork state's verdict is `error`, with this reason."""


@dataclass(frozen=True)
class Item:
    """One branch: its key (directory, path, `branches.KEY`), 1-based index and value."""

    key: str
    index: int
    value: Any

    @property
    def text(self) -> str:
        """The value as `${item.value}` gives it: text as is, anything else as JSON."""
        if isinstance(self.value, str):
            return self.value
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        if isinstance(self.value, int | float):
            return str(self.value)
        return json.dumps(self.value, ensure_ascii=False, sort_keys=True)

    def scope(self) -> dict[str, Any]:
        """The `item` namespace: `${item.value}` (`${item.value.name}` for an object)."""
        value = self.value if isinstance(self.value, Mapping) else self.text
        return {"value": value, "index": self.index, "key": self.key}

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "index": self.index, "value": self.value}


def max_items(env: Mapping[str, str] | None = None) -> int:
    raw = (env if env is not None else os.environ).get("LL_MAX_ITEMS", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else MAX_ITEMS


def parse_items(text: str) -> list[Any]:
    """A rendered `for_each:`: a JSON array when it is one, else its non-blank lines."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except ValueError:
            value = None
        if isinstance(value, list):
            return value
    return [line.strip() for line in text.splitlines() if line.strip()]


def make_items(values: Sequence[Any], limit: int = MAX_ITEMS) -> list[Item]:
    """Keys from the items' text when each is a safe key and no two are the same, else
    the index (from 1) for every item."""
    if len(values) > limit:
        raise ItemsError(
            f"for_each gave {len(values)} items, more than the cap of {limit}; split the "
            "work, or raise the cap with LL_MAX_ITEMS"
        )
    texts = [Item("", 0, v).text for v in values]
    by_text = all(KEY_PATTERN.fullmatch(t) for t in texts) and len(set(texts)) == len(texts)
    return [
        Item(texts[i] if by_text else str(i + 1), i + 1, value) for i, value in enumerate(values)
    ]


def branch_items(state: State) -> list[Item]:
    """The items of a `parallel:` state: its branch names, in file order."""
    return [Item(key, i + 1, key) for i, key in enumerate(state.parallel)]


def concurrency(state: State, total: int) -> int:
    if state.max_concurrency is not None:
        return max(1, state.max_concurrency)
    return max(1, total) if state.parallel else DEFAULT_CONCURRENCY


# -- the join ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BranchEnd:
    """How one branch ended: its verdict (or `cancelled`) and its child run's end."""

    verdict: str
    outcome: str = ""  # the child run's outcome; a terminal of a `loop:` child routes by it
    record: Mapping[str, Any] = field(default_factory=dict)


def counts(join: Join, end: BranchEnd) -> bool:
    """Whether this branch counts towards the join."""
    if end.verdict in (CANCELLED, "error", "timeout"):
        return False
    wanted = join.verdict or "success"
    if end.verdict == wanted or base_verdict(end.verdict) == wanted:
        return True
    # A child's terminal counts by its outcome, as it routes by it.
    return wanted in ("success", "failure") and end.outcome == wanted and join.verdict is None


def needed(join: Join, total: int) -> int:
    if join.need == "all":
        return total
    if join.need == "any":
        return 1
    return int(join.need) if isinstance(join.need, int) else total


def decide(join: Join, total: int, ends: Mapping[str, BranchEnd]) -> str | None:
    """`success` once enough branches count, `failure` once they no longer can, else None."""
    need = needed(join, total)
    met = sum(counts(join, e) for e in ends.values())
    if met >= need:
        return "success"
    if met + (total - len(ends)) < need:
        return "failure"
    return None


def describe(join: Join) -> str:
    """`all`, `any`, `2`, `approve: all`: the join as the terminal shows it."""
    need = str(join.need)
    return f"{join.verdict}: {need}" if join.verdict else need


def summary(
    join: Join, items: Sequence[Item], ends: Mapping[str, BranchEnd], verdict: str
) -> dict[str, Any]:
    """What `capture:` keeps of a fork: counts, item lists, and every branch in item order."""
    done = [i for i in items if i.key in ends]
    good = [i for i in done if counts(join, ends[i.key])]
    cancelled = [i for i in done if ends[i.key].verdict == CANCELLED]
    # By key, not by a scan of the lists: a fork of 10,000 items would compare 10^8 pairs.
    either = {i.key for i in good} | {i.key for i in cancelled}
    bad = [i for i in done if i.key not in either]
    branches = {i.key: dict(ends[i.key].record) for i in done}

    def lines(chosen: list[Item]) -> str:
        return "\n".join(i.text for i in chosen)

    return {
        "verdict": verdict,
        "join": describe(join),
        "total": len(items),
        "succeeded": len(good),
        "failed": len(bad),
        "cancelled": len(cancelled),
        "succeeded_items": lines(good),
        "failed_items": lines(bad),
        "cancelled_items": lines(cancelled),
        "failed_keys": "\n".join(i.key for i in bad),
        "branches": branches,
        "output": json.dumps(branches, ensure_ascii=False),
        "stderr": "",
        "exit_code": None,
        "duration_ms": max((int(b.get("duration_ms") or 0) for b in branches.values()), default=0),
    }
