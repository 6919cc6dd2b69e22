"""Fuzzing the loader: any bytes end in a Loop or in located diagnostics, never an exception.

Three sources, 2,400 cases in all: random documents built from loop-like pieces (dumped as
YAML), byte-level mutations of a real loop, and random text made of YAML's special characters.
Each document also goes through jsonschema to check that the fast schema interpreter agrees.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from little_loops.load.loader import parse
from little_loops.load.schema import (
    schema_issues,
    schema_text,
)
from little_loops.model.loop import Loop

# 2,400 generated documents, each through the loader and jsonschema: not in the fast set.
pytestmark = pytest.mark.slow

VALIDATOR = jsonschema.Draft202012Validator(json.loads(schema_text()))
PATH = Path("fuzz.yaml")
BASE = b"""\
name: fuzz
initial: check
on_error: failed
context: {src: src}
states:
  check:
    action: ruff check ${context.src}
    capture: lint
    evaluate: {type: output_contains, pattern: "^ok", source: "${captured.lint.output}"}
    route: {success: done, _: fix}
  fix:
    action: /ll:fix
    evaluate: {type: llm_structured, uncertain_suffix: true}
    next: check
  done: {terminal: true}
  failed: {terminal: true, outcome: failure}
"""

KEYS = [
    "name",
    "initial",
    "states",
    "context",
    "action",
    "evaluate",
    "type",
    "route",
    "next",
    "on_success",
    "on_failure",
    "on_error",
    "terminal",
    "outcome",
    "pattern",
    "operator",
    "target",
    "path",
    "of",
    "schema",
    "retry",
    "on",
    "llm",
    "max_iterations",
    "capture",
    "_",
    "check",
    "done",
    "exit_code",
    "all",
    "llm_structured",
    "$current",
    "paradigm",
    "metadata",
    "x-note",
    "on_yes",
    "category",
    "action_type",
    "prompt",
]
scalars = st.one_of(
    st.sampled_from(KEYS),
    st.text(max_size=12),
    st.integers(min_value=-5, max_value=10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.sampled_from(
        [
            "${context.src}",
            "${captured.lint.output}",
            "${bad",
            "${x.y}",
            "(a",
            ".a[0]",
            "${HOME}",
            "${A:-b}",
            "${context.x:shell}",
            "gte",
            "/fix #1",
        ]
    ),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=6),
    ),
    max_leaves=40,
)


def check_outcome(data: bytes) -> None:
    loop, diagnostics = parse(data, path=PATH)
    if loop is None:
        assert any(d.severity == "error" for d in diagnostics)
    else:
        assert isinstance(loop, Loop)
        assert all(d.severity == "warning" for d in diagnostics)
    for d in diagnostics:
        assert d.file == "fuzz.yaml"
        assert d.line >= 1
        assert d.col >= 1
        assert d.code
        assert "\n" not in d.message


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(documents)
def test_random_documents(doc: Any) -> None:
    # Half of them wrapped as a plausible loop, so the deeper checks run too.
    check_outcome(yaml.safe_dump(doc).encode())
    wrapped = {"name": "f", "initial": "a", "states": {"a": doc, "b": {"terminal": True}}}
    check_outcome(yaml.safe_dump(wrapped).encode())
    for candidate in (doc, wrapped):
        assert (schema_issues(candidate) == []) is VALIDATOR.is_valid(candidate)


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=len(BASE)),
            st.integers(min_value=0, max_value=8),
            st.binary(max_size=6) | st.sampled_from([b":", b"\t", b"\n  ", b"- ", b"&a", b"*a"]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_mutated_loops(edits: list[tuple[int, int, bytes]]) -> None:
    data = bytearray(BASE)
    for at, cut, insert in edits:
        at = min(at, len(data))
        data[at : at + cut] = insert
    check_outcome(bytes(data))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet=" \t\n-:?[]{},&*!|>'\"%@`#abcxyz01", max_size=200))
def test_random_yaml_punctuation(text: str) -> None:
    check_outcome(text.encode())


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.text(alphabet=" #:'\"$(){}`\\-/ab>=!<", max_size=30),
    st.sampled_from(["action", "description", "operator", "check"]),
)
def test_hint_lines(value: str, key: str) -> None:
    """The hints read odd lines of YAML: any action or operator still gives located lines."""
    line = f"    {key}: {value}\n"
    check_outcome(BASE.replace(b"    action: /ll:fix\n", line.encode()))
