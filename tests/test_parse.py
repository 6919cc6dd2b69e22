"""Lenient JSON extraction from judges that answer in text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from little_loops.evaluators.parse import candidates, extract, preview


def has_verdict(obj: Mapping[str, Any]) -> bool:
    return obj.get("verdict") in ("success", "failure")


def test_fenced_block_comes_first() -> None:
    text = '{"verdict": "failure"}\n```json\n{"verdict": "success"}\n```'
    assert extract(text, has_verdict) == {"verdict": "success"}


def test_bare_fence_and_bare_object() -> None:
    assert extract('```\n{"verdict": "success"}\n```', has_verdict) == {"verdict": "success"}
    assert extract('  {"verdict": "failure", "n": 1}  ', has_verdict) == {
        "verdict": "failure",
        "n": 1,
    }


def test_object_in_prose_with_braces_inside_strings() -> None:
    text = 'My answer {not json} is {"verdict": "success", "reason": "saw } and { in logs"} ok'
    assert extract(text, has_verdict) == {"verdict": "success", "reason": "saw } and { in logs"}


def test_first_valid_candidate_wins_and_nested_objects_are_tried() -> None:
    text = (
        'first {"verdict": "maybe"} then {"wrapper": {"verdict": "failure"}} {"verdict": "success"}'
    )
    assert extract(text, has_verdict) == {"verdict": "failure"}


def test_nothing_valid_is_none_never_a_guess() -> None:
    assert extract("It succeeded.", has_verdict) is None
    assert extract('{"verdict": "succes"}', has_verdict) is None
    assert extract("{'verdict': 'success'}", has_verdict) is None  # not JSON: no repair
    assert extract('{"verdict": "success"', has_verdict) is None  # unbalanced


def test_candidates_order() -> None:
    text = 'x {"a": 1} ```json\n{"b": 2}\n```'
    assert list(candidates(text)) == [{"b": 2}, {"a": 1}, {"b": 2}]


def test_preview_is_one_short_line() -> None:
    assert preview("a\n  b\tc") == "a b c"
    assert len(preview("x" * 1000)) == 160


@given(st.text(max_size=300))
def test_never_raises_on_any_text(text: str) -> None:
    result = extract(text, lambda obj: True)
    assert result is None or isinstance(result, dict)
