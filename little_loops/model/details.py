"""A verdict's details: an immutable, ordered map of JSON values with typed reads.

Evaluators build one (`Details({...})`, `Details(key=value)`, `with_`, `without`); the engine
and the reports read it through its properties (`reason`, `confidence`, `cost_usd`, ...), each
giving None (or a neutral value) when the key is missing or holds a value of another type, so
a record written by an older or newer `ll`, or edited by hand, reads without a crash. On the
wire (events.jsonl, the judge cache, cassettes) it is the JSON object it holds, keys in the
order they were added: `to_json()` gives it back. `Details.parse` checks one read from the
cache or a cassette; an event read back whose `details` is not an object keeps it in `extra`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence

# A JSON value as the engine holds it. Containers are the read-only ABCs so that a literal
# `{"usage": {"input_tokens": 3}}` is one without a cast.
Json = str | int | float | bool | None | Sequence["Json"] | Mapping[str, "Json"]

_DEPTH = 64  # nesting a record read back may have; deeper is refused, never a RecursionError


class DetailsError(ValueError):
    """A details record read back is not a JSON object of JSON values."""


def _number(value: Json) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _records(value: Json) -> tuple[Details, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        return ()
    return tuple(Details(item) for item in value if isinstance(item, Mapping))


class Details(Mapping[str, Json]):
    """What an evaluator says beside its verdict word; see the module's docstring."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Json] | None = None, /, **more: Json) -> None:
        self._data: dict[str, Json] = dict(data) if data is not None else {}
        if more:
            self._data.update(more)

    # -- the mapping ----------------------------------------------------------------------

    def __getitem__(self, key: str) -> Json:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Details):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        # It holds lists and maps: never hashable. A method rather than `__hash__ = None`,
        # which dataclasses would take for a mutable default and refuse.
        raise TypeError("unhashable type: 'Details'")

    def __repr__(self) -> str:
        return f"Details({self._data!r})"

    def get(self, key: str, default: Json = None) -> Json:  # type: ignore[override]
        return self._data.get(key, default)

    # -- building -------------------------------------------------------------------------

    def with_(self, values: Mapping[str, Json] | None = None, /, **more: Json) -> Details:
        """A copy with `values` set: a key already here keeps its place, a new one goes last."""
        out = Details(self._data)
        if values is not None:
            out._data.update(values)
        out._data.update(more)
        return out

    def without(self, *keys: str) -> Details:
        """A copy without `keys`."""
        return Details({k: v for k, v in self._data.items() if k not in keys})

    def to_json(self) -> dict[str, Json]:
        """The wire form: a plain dict, in order (a copy: the record stays as it is)."""
        return dict(self._data)

    @classmethod
    def parse(cls, value: object, where: str = "details") -> Details:
        """The record of a JSON object read back (events.jsonl, the cache, a cassette).

        Raises DetailsError, one line naming `where`, when `value` is not an object of JSON
        values (a hostile or hand-edited file); JSON a file decoded is always one."""
        if not isinstance(value, Mapping):
            raise DetailsError(f"{where}: expected an object, found {type(value).__name__}")
        problem = _not_json(value, 0)
        if problem is not None:
            raise DetailsError(f"{where}: {problem}")
        return cls(value)

    # -- the typed reads --------------------------------------------------------------------

    @property
    def reason(self) -> str | None:
        """The judge's (or a join's, a simulation's) reason for its verdict."""
        value = self._data.get("reason")
        return value if isinstance(value, str) else None

    @property
    def error(self) -> str | None:
        """What went wrong, when the evaluator could not judge."""
        value = self._data.get("error")
        return value if isinstance(value, str) else None

    @property
    def confidence(self) -> float | None:
        return _number(self._data.get("confidence"))

    @property
    def confident(self) -> bool | None:
        """The judge's confidence reached `min_confidence`; None: no judge said."""
        value = self._data.get("confident")
        return value if isinstance(value, bool) else None

    @property
    def cost_usd(self) -> float:
        """What the judge spent: 0 when nothing was, nothing says, or what is said is not a
        finite, positive number (a NaN must never disable `max_cost_usd`)."""
        cost = _number(self._data.get("cost_usd"))
        return cost if cost is not None and math.isfinite(cost) and cost > 0 else 0.0

    @property
    def recorded_cost_usd(self) -> float:
        """What a replayed answer cost when it was recorded."""
        return _number(self._data.get("recorded_cost_usd")) or 0.0

    @property
    def cost_known(self) -> bool:
        return self._data.get("cost_known") is True

    @property
    def latency_ms(self) -> float | None:
        return _number(self._data.get("latency_ms"))

    @property
    def timeout_s(self) -> float | None:
        return _number(self._data.get("timeout_s"))

    @property
    def value(self) -> float | None:
        """A measured value (convergence, output_numeric), when it is a number."""
        return _number(self._data.get("value"))

    @property
    def usage(self) -> Mapping[str, int]:
        """Tokens by kind (`input_tokens`, `output_tokens`, ...); the whole numbers only."""
        value = self._data.get("usage")
        if not isinstance(value, Mapping):
            return {}
        return {k: v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}

    @property
    def model(self) -> str | None:
        value = self._data.get("model")
        return value if isinstance(value, str) else None

    @property
    def stop_reason(self) -> str | None:
        value = self._data.get("stop_reason")
        return value if isinstance(value, str) else None

    @property
    def attempts(self) -> int | None:
        value = self._data.get("attempts")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def status(self) -> int | None:
        """The HTTP status of a judge request that failed, when there was one."""
        value = self._data.get("status")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def outcome(self) -> str | None:
        """A child run's outcome (`success`/`failure`), on a `loop:` step's verdict."""
        value = self._data.get("outcome")
        return value if isinstance(value, str) else None

    @property
    def raw(self) -> Json:
        """The judge's answer as it came (None when there was none)."""
        return self._data.get("raw")

    @property
    def panel(self) -> tuple[Details, ...]:
        """Each panel model's vote (`model`, `verdict`, `confidence`, `reason`, ...)."""
        return _records(self._data.get("panel"))

    @property
    def samples(self) -> tuple[Details, ...]:
        """Each sample's vote of a judge asked more than once."""
        return _records(self._data.get("samples"))

    @property
    def cached(self) -> bool:
        return self._data.get("cached") is True

    @property
    def replayed(self) -> bool:
        """The answer came from a cassette (`--replay`)."""
        return self._data.get("replayed") is True

    @property
    def replay_miss(self) -> bool:
        """`--replay` found no (valid) recorded answer for the question."""
        return self._data.get("replay_miss") is True

    @property
    def verdict(self) -> str | None:
        """On a panel member's or a sample's vote: the verdict it gave."""
        value = self._data.get("verdict")
        return value if isinstance(value, str) else None

    @property
    def fail_open(self) -> bool:
        return self._data.get("fail_open") is True

    @property
    def judged(self) -> bool:
        """A judge gave this verdict (its details say how confident it was)."""
        return "confidence" in self._data

    @property
    def simulated_verdict(self) -> str | None:
        """On an action's details: the verdict a simulation's answer stands for."""
        value = self._data.get("simulated_verdict")
        return value if isinstance(value, str) else None

    @property
    def output_cut(self) -> bool:
        """On an action's details: only the last 1 MiB of its stdout was kept."""
        return self._data.get("output_cut") is True

    @property
    def flags(self) -> tuple[str, ...]:
        """The keys set to `true`, sorted: a failed judge's flags (`timeout`, `refusal`, ...)."""
        return tuple(sorted(k for k, v in self._data.items() if v is True))


EMPTY_DETAILS = Details()


_SCALARS = (str, int, float, bool, type(None))  # concrete types: a fast isinstance


def _not_json(value: Mapping[object, object], depth: int) -> str | None:
    """What keeps `value` from being a JSON object of JSON values, or None. Without
    recursion: a hostile record nested deep is refused, not a RecursionError."""
    stack: list[tuple[object, int]] = [(value, depth)]
    while stack:
        node, level = stack.pop()
        if level > _DEPTH:
            return f"nested deeper than {_DEPTH} levels"
        if isinstance(node, dict | Mapping):
            for key, item in node.items():
                if not isinstance(key, str):
                    return f"a key is {type(key).__name__} {key!r}, not a string"
                if not isinstance(item, _SCALARS):
                    stack.append((item, level + 1))
        elif isinstance(node, list | tuple):
            stack.extend((item, level + 1) for item in node if not isinstance(item, _SCALARS))
        elif not isinstance(node, _SCALARS):
            return f"a value is {type(node).__name__}, not JSON"
    return None
