"""`Details`: a verdict's details as an immutable, ordered map of JSON values, typed reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from little_loops.evaluators.cache import VerdictCache
from little_loops.model.details import (
    EMPTY_DETAILS,
    Details,
    DetailsError,
    Json,
)
from little_loops.model.loop import Verdict
from little_loops.record.events import Evaluate, parse

JUDGED: dict[str, Json] = {
    "confidence": 0.3,
    "reason": "one test was skipped",
    "raw": {"verdict": "failure", "confidence": 0.6},
    "model": "claude-sonnet-4-5",
    "usage": {"input_tokens": 2100, "output_tokens": 70},
    "cost_usd": 0.00735,
    "cost_known": True,
    "latency_ms": 12.5,
    "cached": False,
    "samples": [
        {"verdict": "success", "confidence": 0.9, "reason": "ok"},
        {"verdict": "failure", "confidence": 0.6, "reason": "one test was skipped"},
    ],
    "confident": False,
}


def test_typed_reads_of_a_judges_details() -> None:
    d = Details(JUDGED)
    assert d.reason == "one test was skipped"
    assert d.confidence == 0.3
    assert d.confident is False
    assert d.cost_usd == 0.00735
    assert d.cost_known is True
    assert d.latency_ms == 12.5
    assert d.usage == {"input_tokens": 2100, "output_tokens": 70}
    assert d.model == "claude-sonnet-4-5"
    assert d.raw == {"verdict": "failure", "confidence": 0.6}
    assert [(s.verdict, s.confidence, s.reason) for s in d.samples] == [
        ("success", 0.9, "ok"),
        ("failure", 0.6, "one test was skipped"),
    ]
    assert d.judged
    assert not d.cached
    assert not d.replayed
    assert not d.fail_open
    assert d.error is None
    assert d.panel == ()
    assert d.attempts is None


def test_missing_or_mistyped_keys_read_as_nothing() -> None:
    """A record from another version, or edited by hand, reads without a crash."""
    odd = Details(
        reason=3,
        confidence="high",
        cost_usd="free",
        usage=[1, 2],
        samples="none",
        cached="yes",
        attempts=True,
        timeout_s=None,
    )
    assert odd.reason is None
    assert odd.confidence is None
    assert odd.cost_usd == 0.0
    assert odd.usage == {}
    assert odd.samples == ()
    assert odd.cached is False
    assert odd.attempts is None
    assert odd.timeout_s is None
    assert EMPTY_DETAILS.cost_usd == 0.0
    assert EMPTY_DETAILS.reason is None


@pytest.mark.parametrize("cost", [float("nan"), float("inf"), -1.0, True])
def test_a_cost_that_is_not_a_finite_positive_number_counts_as_nothing(cost: float) -> None:
    assert Details(cost_usd=cost).cost_usd == 0.0


def test_order_is_kept_through_building_and_the_wire() -> None:
    d = Details({"b": 1, "a": 2}).with_(b=3, c=4).without("a")
    assert list(d) == ["b", "c"]
    assert json.dumps(d.to_json()) == '{"b": 3, "c": 4}'
    again = Details.parse(json.loads(json.dumps(Details(JUDGED).to_json())))
    assert list(again) == list(JUDGED)
    assert again == Details(JUDGED)
    assert Verdict("failure", again).to_dict() == {"verdict": "failure", "details": JUDGED}


def test_immutable() -> None:
    source = {"reason": "x"}
    d = Details(source)
    source["reason"] = "changed"
    assert d.reason == "x"  # a copy: the caller's dict is not the record
    d.to_json()["reason"] = "changed"
    assert d.reason == "x"
    with pytest.raises(TypeError):
        d["reason"] = "y"  # type: ignore[index]
    with pytest.raises(TypeError):
        hash(d)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ([1, 2], "expected an object, found list"),
        ({1: "x"}, "a key is int 1, not a string"),
        ({"x": {1, 2}}, "a value is set, not JSON"),
        ({"x": object()}, "a value is object, not JSON"),
    ],
)
def test_parse_refuses_what_is_not_json_in_one_line(value: object, problem: str) -> None:
    with pytest.raises(DetailsError) as caught:
        Details.parse(value, "cache.json")
    assert str(caught.value) == f"cache.json: {problem}"


def test_parse_refuses_a_record_nested_too_deep_without_recursion() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(10_000):
        node["x"] = node = {}
    with pytest.raises(DetailsError, match="nested deeper than 64 levels"):
        Details.parse(deep)


def test_an_evaluate_event_read_back_holds_details() -> None:
    line = Evaluate(step=1, state="s", type="t", verdict="failure", details=Details(JUDGED))
    wire = json.loads(json.dumps(line.to_dict()))
    assert list(wire["details"]) == list(JUDGED)  # the wire keeps the order
    record = parse(wire)
    assert isinstance(record, Evaluate)
    assert isinstance(record.details, Details)
    assert record.details.reason == "one test was skipped"
    assert record.to_dict() == wire  # and gives back the same line
    # a torn or hostile `details` is kept aside in `extra`, never a crash
    bad = parse({**wire, "details": [1, 2]})
    assert isinstance(bad, Evaluate)
    assert bad.details == EMPTY_DETAILS
    assert bad.extra == {"details": [1, 2]}


def test_a_cache_file_that_is_not_a_details_object_is_a_miss(tmp_path: Path) -> None:
    cache = VerdictCache(tmp_path)
    cache.put("ab12", "success", Details(JUDGED))
    assert cache.get("ab12") == ("success", Details(JUDGED))
    path = tmp_path / "ab" / "ab12.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    nested: dict[str, Json] = {"x": [1, {"y": None}], "z": "ok"}
    path.write_text(json.dumps({**data, "details": nested}))
    assert cache.get("ab12") == ("success", Details(nested))
    path.write_text(json.dumps({**data, "details": ["not", "an", "object"]}))
    assert cache.get("ab12") is None
