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

from little_loops.errors import RecordError
from little_loops.model.details import Json
from little_loops.model.loop import (
    Join,
    State,
    base_verdict,
)
from little_loops.model.question import (
    Question,
    json_kind,
)
from little_loops.model.records import field, record, replace

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

KEY_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,40}")
MAX_ITEMS = 1000  # more items than this: verdict `error` before any branch starts
OUTPUT_CHARS = 4000  # an action branch's output kept in the join record (its tail)
DEFAULT_CONCURRENCY = 4  # `for_each` without `max_concurrency`; `parallel:` runs every branch
CANCELLED = "cancelled"  # a branch stopped by `fail_fast`: never a routable verdict


class ItemsError(Exception):
    """The items cannot be used: the fork state's verdict is `error`, with this reason."""


@record(frozen=True)
class Item:
    """One branch: its key (directory, path, `branches.KEY`), 1-based index and value."""

    key: str
    index: int
    value: Json  # an item of a JSON array or a YAML list, or one line of text

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


def parse_items(text: str) -> list[Json]:
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


def make_items(values: Sequence[Json], limit: int = MAX_ITEMS) -> list[Item]:
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


# The keys of a branch record, in the order a finished `loop:` branch writes them.
BRANCH_KEYS = (
    "output", "stderr", "exit_code", "duration_ms", "state", "outputs", "final_state",
    "outcome", "run_id", "steps", "cost_usd", "error", "verdict", "key", "index", "item",
)  # fmt: skip
_KINDS: dict[str, tuple[type, ...]] = {
    "exit_code": (int,),
    "duration_ms": (int,),
    "steps": (int,),
    "index": (int,),
    "cost_usd": (int, float),
    "outputs": (dict,),
}


@record(frozen=True)
class BranchRecord:
    """A branch's record: its `result.json` beside its run, and its entry in the fork's
    `join.json` and `captured.X.branches`. Which keys it has depends on how the branch
    ended (finished, cancelled, could not start, read back after a crash); `keys` holds them
    in their order, so a record reads back and writes again byte for byte."""

    output: str | None = None
    stderr: str | None = None
    exit_code: int | None = None
    duration_ms: int | None = None
    state: str | None = None
    outputs: Mapping[str, str] | None = None
    final_state: str | None = None
    outcome: str | None = None
    run_id: str | None = None
    steps: int | None = None
    cost_usd: float | None = None
    error: str | None = None
    verdict: str | None = None
    key: str | None = None
    index: int | None = None
    item: str | None = None
    keys: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.keys}
        for k in BRANCH_KEYS:  # a value set after the record was built: at the end
            if k not in out and getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if isinstance(out.get("outputs"), Mapping):
            out["outputs"] = dict(out["outputs"])
        return out

    @classmethod
    def from_json(cls, data: object, where: str, *, need: tuple[str, ...] = ()) -> BranchRecord:
        """A record as `to_json` wrote it, each known key's type checked, unknown keys
        dropped; `need` names the keys it must have. `RecordError` names `where`."""
        if not isinstance(data, dict):
            raise _bad(where, f"is {json_kind(data)}, not a branch record (an object)")
        for k in need:
            if data.get(k) is None:
                raise _bad(where, f"has no '{k}'")
        values: dict[str, Any] = {}
        for k, value in data.items():  # in the file's order, which `to_json` keeps
            if k not in BRANCH_KEYS:
                continue
            kinds = _KINDS.get(k, (str,))
            if value is not None and (
                not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)
            ):
                raise _bad(where, f"'{k}' is {json_kind(value)}, not {_want(kinds)}")
            if isinstance(value, dict) and not all(isinstance(v, str) for v in value.values()):
                raise _bad(where, f"'{k}' holds a value that is not a string")
            values[k] = value
        return cls(**values, keys=tuple(values))

    @classmethod
    def of(cls, **values: Any) -> BranchRecord:
        """A record with these keys, in this order."""
        unknown = set(values) - set(BRANCH_KEYS)
        if unknown:
            raise TypeError(f"not keys of a branch record: {sorted(unknown)}")
        return cls(**values, keys=tuple(values))

    def with_(self, **values: Any) -> BranchRecord:
        """This record with these keys changed (kept in their place) or added (at the end)."""
        keys = self.keys + tuple(k for k in values if k not in self.keys)
        return replace(self, **values, keys=keys)


def join_record(data: object, where: str) -> dict[str, BranchRecord]:
    """A fork's `join.json`: every branch's record by key, checked."""
    if not isinstance(data, dict):
        why = f"is {json_kind(data)}, not the branches' records by key (an object)"
        raise _bad(where, why)
    return {str(k): BranchRecord.from_json(v, f"{where}: branch '{k}'") for k, v in data.items()}


def items_record(data: object, where: str, cap: int) -> list[Item]:
    """A fork's `items.json`, as stored when it started: a list of {key, index, value} with
    keys that name a branch directory, no more than `cap`, no key twice."""

    def bad(why: str) -> RecordError:
        return _bad(where, why, again="(or remove it, to resolve the items again)")

    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise bad("is not a list of items")
    if len(data) > cap:
        raise bad(f"holds {len(data)} items, more than the cap of {cap} (LL_MAX_ITEMS)")
    items: list[Item] = []
    for d in data:
        key, index = d.get("key"), d.get("index")
        if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
            raise bad(f"an item's key {str(key)[:60]!r} is not a branch key")
        if not isinstance(index, int) or isinstance(index, bool) or "value" not in d:
            raise bad(f"item '{key}' lacks its index or value")
        items.append(Item(key, index, d["value"]))
    if len({i.key for i in items}) != len(items):
        raise bad("two items have the same key")
    return items


def items_json(items: Sequence[Item]) -> list[dict[str, Any]]:
    return [i.to_dict() for i in items]


def _bad(where: str, why: str, again: str = "") -> RecordError:
    return RecordError(f"{where}: {why}; repair it {again + ' ' if again else ''}and run ll resume")


def _want(kinds: tuple[type, ...]) -> str:
    if dict in kinds:
        return "an object"
    return "a string" if str in kinds else "a number"


@record(frozen=True)
class BranchEnd:
    """How one branch ended: its verdict (or `cancelled`) and its record; a branch waiting
    for an answer (`suspended`) holds its questions."""

    verdict: str
    outcome: str = ""  # the child run's outcome; a terminal of a `loop:` child routes by it
    record: BranchRecord = field(default_factory=BranchRecord)
    pending: tuple[Question, ...] = ()


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
    branches = {i.key: ends[i.key].record.to_json() for i in done}

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
