"""Lenient JSON extraction from judges that answer in text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from little_loops.evaluators.parse import candidates, extract, preview


def has_verdict(obj: Mapping[str, Any]) -> bool:
    return obj.get("verdict") in ("success", "failure")


def test_every_valid_object_is_returned_in_text_order() -> None:
    text = '{"verdict": "failure"}\n```json\n{"verdict": "success"}\n```'
    assert extract(text, has_verdict) == [{"verdict": "failure"}, {"verdict": "success"}]
    text = 'Draft: {"verdict": "success"}. On reflection: {"verdict": "failure"} and {"x": 1}'
    assert extract(text, has_verdict) == [{"verdict": "success"}, {"verdict": "failure"}]


def test_think_blocks_are_removed_before_parsing() -> None:
    text = '<think>maybe {"verdict": "failure"}?</think>\n{"verdict": "success"}'
    assert extract(text, has_verdict) == [{"verdict": "success"}]
    text = '{"verdict": "success"}<think>no wait {"verdict": "failure"}'  # unclosed
    assert extract(text, has_verdict) == [{"verdict": "success"}]
    assert extract('<think>{"verdict": "failure"}</think>', has_verdict) == []


def test_deep_nesting_is_skipped_not_raised() -> None:
    deep = "[" * 1500 + "]" * 1500
    text = '{"a": ' + deep + '} {"verdict": "success"} {"b": ' + deep + "}"
    assert extract(text, has_verdict) == [{"verdict": "success"}]
    assert extract("{" * 1500, has_verdict) == []


def test_bare_fence_and_bare_object() -> None:
    assert extract('```\n{"verdict": "success"}\n```', has_verdict) == [{"verdict": "success"}]
    assert extract('  {"verdict": "failure", "n": 1}  ', has_verdict) == [
        {"verdict": "failure", "n": 1}
    ]


def test_object_in_prose_with_braces_inside_strings() -> None:
    text = 'My answer {not json} is {"verdict": "success", "reason": "saw } and { in logs"} ok'
    assert extract(text, has_verdict) == [{"verdict": "success", "reason": "saw } and { in logs"}]


def test_nested_objects_stand_in_for_an_unacceptable_outer_object() -> None:
    text = 'first {"verdict": "maybe"} then {"wrapper": {"verdict": "failure"}} and {"v": 1}'
    assert extract(text, has_verdict) == [{"verdict": "failure"}]
    # an acceptable outer object is the answer, not what is nested in it
    text = '{"verdict": "success", "detail": {"verdict": "failure"}}'
    assert extract(text, has_verdict) == [{"verdict": "success", "detail": {"verdict": "failure"}}]


def test_nothing_valid_is_nothing_never_a_guess() -> None:
    assert extract("It succeeded.", has_verdict) == []
    assert extract('{"verdict": "succes"}', has_verdict) == []
    assert extract("{'verdict': 'success'}", has_verdict) == []  # not JSON: no repair
    assert extract('{"verdict": "success"', has_verdict) == []  # unbalanced


def test_candidates_order() -> None:
    text = 'x {"a": 1} ```json\n{"b": {"c": 3}}\n```'
    assert list(candidates(text)) == [{"a": 1}, {"b": {"c": 3}}]


def test_preview_is_one_short_line() -> None:
    assert preview("a\n  b\tc") == "a b c"
    assert len(preview("x" * 1000)) == 160


@given(st.text(max_size=300))
def test_never_raises_on_any_text(text: str) -> None:
    result = extract(text, lambda obj: True)
    assert all(isinstance(obj, dict) for obj in result)
