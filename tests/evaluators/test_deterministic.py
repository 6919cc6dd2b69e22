"""Tier-1 evaluators (SPEC section 4): verdicts, details, and the registry's verdict sets."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from little_loops.errors import UndefinedVariable
from little_loops.evaluators import EvalInput, evaluate, possible_verdicts
from little_loops.evaluators.deterministic import OPERATORS, _regex
from little_loops.evaluators.jsonpath import parse_json_path
from little_loops.model.loop import (
    Evaluate,
    Verdict,
)
from little_loops.templates.interpolate import render


def _parts(v: Verdict) -> list[dict[str, Any]]:
    """An `all`/`any` verdict's sub-verdicts, as its details list them."""
    return cast(list[dict[str, Any]], v.details["of"])


def inp(text: str = "", exit_code: int | None = 0, **scope: Any) -> EvalInput:
    full = {"captured": scope, "context": {"goal": "5", "word": "hello"}}
    return EvalInput(
        text=text,
        exit_code=exit_code,
        resolve=lambda t: render(t, full, shell=False, where="state 's'"),
    )


def run(spec: Evaluate, i: EvalInput) -> Verdict:
    v = evaluate(spec, i)
    json.dumps(v.to_dict())  # details are always JSON-serialisable
    assert v.verdict in possible_verdicts(spec, action_type=None)
    return v


# --------------------------------------------------------------------------- exit_code


@pytest.mark.parametrize(
    ("code", "verdict"), [(0, "success"), (1, "failure"), (2, "error"), (-9, "error")]
)
def test_exit_code(code: int, verdict: str) -> None:
    v = run(Evaluate("exit_code"), inp(exit_code=code))
    assert v.verdict == verdict
    assert v.details["exit_code"] == code


def test_exit_code_missing_is_error() -> None:
    v = run(Evaluate("exit_code"), inp(exit_code=None))
    assert v.verdict == "error"
    assert v.details == {"error": "the action has no exit code", "exit_code": None}


# --------------------------------------------------------------------------- output_contains


def test_output_contains_regex_multiline() -> None:
    spec = Evaluate("output_contains", pattern=r"^All \d+ checks passed$")
    v = run(spec, inp("ruff\nAll 12 checks passed\n"))
    assert v.verdict == "success"
    assert v.details["matched"] is True
    assert v.details["match"] == "All 12 checks passed"
    assert run(spec, inp("All checks passed")).verdict == "failure"


def test_output_contains_literal_and_negate() -> None:
    spec = Evaluate("output_contains", pattern="a.b (x)", literal=True)
    assert run(spec, inp("see a.b (x) here")).verdict == "success"
    assert run(spec, inp("see aXb (x) here")).verdict == "failure"
    neg = Evaluate("output_contains", pattern="error", negate=True)
    v = run(neg, inp("3 errors"))
    assert v.verdict == "failure"
    assert v.details == {
        "pattern": "error",
        "literal": False,
        "negate": True,
        "matched": True,
        "match": "error",
    }
    assert run(neg, inp("clean")).verdict == "success"


def test_output_contains_source_is_interpolated() -> None:
    spec = Evaluate("output_contains", pattern="^ok$", source="${captured.c.output}")
    assert run(spec, inp("nothing", c={"output": "ok"})).verdict == "success"
    with pytest.raises(UndefinedVariable, match=r"captured\.c\.output"):
        evaluate(spec, inp("nothing"))


def test_output_contains_bad_pattern_never_raises() -> None:
    v = run(Evaluate("output_contains", pattern="("), inp("x"))
    assert v.verdict == "failure"
    assert "invalid regex" in (v.details.error or "")
    assert run(Evaluate("output_contains"), inp("x")).verdict == "failure"


def test_regexes_are_compiled_once() -> None:
    _regex.cache_clear()
    spec = Evaluate("output_contains", pattern=r"step \d+")
    for i in range(1000):
        evaluate(spec, inp(f"step {i}"))
    info = _regex.cache_info()
    assert info.misses == 1
    assert info.hits == 999


# --------------------------------------------------------------------------- output_numeric


@pytest.mark.parametrize(
    ("text", "op", "target", "verdict"),
    [
        ("3\n", "eq", 3, "success"),
        (" 3.0 ", "eq", 3, "success"),
        ("3", "ne", 3, "failure"),
        ("2", "lt", 3, "success"),
        ("3", "le", "3", "success"),
        ("-1e3", "gt", -1001, "success"),
        ("0.5", "ge", 0.75, "failure"),
        ("5", "eq", "${context.goal}", "success"),
        (".5", "lt", 1, "success"),
    ],
)
def test_output_numeric(text: str, op: str, target: Any, verdict: str) -> None:
    v = run(Evaluate("output_numeric", operator=op, target=target), inp(text))
    assert v.verdict == verdict
    assert v.details["operator"] == op
    assert isinstance(v.details["value"], int | float)


@pytest.mark.parametrize("text", ["", "three", "3 errors", "1,000", "nan", "inf", "1e999", "0x10"])
def test_output_numeric_not_a_number(text: str) -> None:
    v = run(Evaluate("output_numeric", operator="eq", target=1), inp(text))
    assert v.verdict == "error"
    assert "not a number" in (v.details.error or "")
    assert v.details["text"] == text.strip()


def test_output_numeric_bad_target_and_operator() -> None:
    v = run(Evaluate("output_numeric", operator="lt", target="${context.word}"), inp("1"))
    assert v.verdict == "error"
    assert v.details["target"] == "hello"
    v = run(Evaluate("output_numeric", operator="approx", target=1), inp("1"))
    assert v.verdict == "error"
    assert "unknown operator" in (v.details.error or "")


def test_output_numeric_source() -> None:
    spec = Evaluate("output_numeric", operator="eq", target=0, source="${captured.n.output}")
    v = run(spec, inp("ignored", n={"output": "0\n"}))
    assert v.verdict == "success"
    assert v.details == {"value": 0, "operator": "eq", "target": 0}


# --------------------------------------------------------------------------- output_json

DOC = json.dumps(
    {
        "status": "green",
        "count": 3,
        "ratio": 0.5,
        "ok": True,
        "none": None,
        "items": [{"name": "a"}, {"name": "b"}],
        "odd key": {"x": 1},
        "tags": ["x", "y"],
    }
)


@pytest.mark.parametrize(
    ("path", "op", "target", "verdict"),
    [
        (".status", "eq", "green", "success"),
        (".status", "ne", "green", "failure"),
        (".count", "eq", 3, "success"),
        (".count", "eq", "3", "success"),
        (".count", "eq", "three", "failure"),
        (".count", "gt", 2, "success"),
        (".count", "le", "2", "failure"),
        (".ratio", "lt", 1, "success"),
        (".ok", "eq", True, "success"),
        (".ok", "eq", "true", "success"),
        (".ok", "ne", "false", "success"),
        (".none", "eq", "null", "success"),
        (".none", "eq", None, "success"),
        (".none", "ne", 0, "success"),
        (".items[1].name", "eq", "b", "success"),
        (".items[-1].name", "eq", "a", "failure"),
        ('["odd key"].x', "eq", 1, "success"),
        (".tags", "eq", '["x", "y"]', "success"),
        (".tags", "eq", "x", "failure"),
        (".status", "eq", 3, "failure"),
    ],
)
def test_output_json(path: str, op: str, target: Any, verdict: str) -> None:
    v = run(Evaluate("output_json", path=path, operator=op, target=target), inp(DOC))
    assert v.verdict == verdict, v.details
    assert v.details["path"] == path
    assert v.details["operator"] == op


@pytest.mark.parametrize(
    ("path", "op", "target", "message"),
    [
        (".missing", "eq", 1, "JSON path '.missing' is missing (found only '.')"),
        (".items[5].name", "eq", 1, "JSON path '.items[5].name' is missing (found only '.items')"),
        (".items[0].nope", "eq", 1, "(found only '.items[0]')"),
        (".status", "lt", 3, "operator 'lt' needs a number, but '.status' is string"),
        (".ok", "ge", 1, "operator 'ge' needs a number, but '.ok' is boolean"),
        (".count", "lt", "many", "operator 'lt' needs a number, but the target is 'many'"),
        ("status", "eq", 1, "must start with '.'"),
        (".count", "approx", 1, "unknown operator 'approx'"),
    ],
)
def test_output_json_errors(path: str, op: str, target: Any, message: str) -> None:
    v = run(Evaluate("output_json", path=path, operator=op, target=target), inp(DOC))
    assert v.verdict == "error"
    assert message in (v.details.error or "")


def test_output_json_rejects_non_standard_numbers() -> None:
    v = run(Evaluate("output_json", path=".", operator="eq", target=1), inp("[NaN]"))
    assert v.verdict == "error"
    assert "NaN" in (v.details.error or "")


def test_output_json_bad_json_and_existence() -> None:
    v = run(Evaluate("output_json", path=".a", operator="eq", target=1), inp("{nope"))
    assert v.verdict == "error"
    assert (v.details.error or "").startswith("the output is not valid JSON")
    assert run(Evaluate("output_json", path=".items[0]"), inp(DOC)).verdict == "success"
    assert run(Evaluate("output_json", path=".nope"), inp(DOC)).verdict == "error"


def test_output_json_source_and_target_interpolated() -> None:
    spec = Evaluate(
        "output_json",
        path=".n",
        operator="eq",
        target="${context.goal}",
        source="${captured.r.output}",
    )
    assert run(spec, inp("", r={"output": '{"n": 5}'})).verdict == "success"


def test_parse_json_path() -> None:
    assert parse_json_path(".a.b[0].c") == ("a", "b", 0, "c")
    assert parse_json_path(".") == ()
    assert parse_json_path('["a \\"q\\""]') == ('a "q"',)
    with pytest.raises(ValueError, match="malformed at character 3"):
        parse_json_path(".a..b")


# --------------------------------------------------------------------------- convergence


def conv(text: str, previous: float | None = None, **fields: Any) -> Verdict:
    spec = Evaluate("convergence", **fields)
    return run(spec, EvalInput(text=text, previous_value=previous, resolve=inp().resolve))


def test_convergence_minimize() -> None:
    assert conv("10", None, target=0).verdict == "progress"
    assert conv("10", None, target=0).details["first"] is True
    assert conv("8", 10, target=0).verdict == "progress"
    assert conv("10", 10, target=0).verdict == "stall"
    assert conv("11", 10, target=0).verdict == "stall"
    assert conv("0", 3, target=0).verdict == "target"
    assert conv("-2", 3, target=0).verdict == "target"  # past it, in the right direction


def test_convergence_maximize_tolerance_and_details() -> None:
    v = conv("89.5", 80, target=90, tolerance=0.5, direction="maximize")
    assert v.verdict == "target"
    v = conv("81", 80, target=90, tolerance=2, direction="maximize")
    assert v.verdict == "stall"
    v = conv("83", 80, target=90, tolerance=2, direction="maximize")
    assert v.verdict == "progress"
    assert v.details == {
        "direction": "maximize",
        "tolerance": 2,
        "value": 83,
        "target": 90,
        "previous": 80,
        "delta": 3,
    }
    assert conv("70", 80, target=90, direction="maximize").verdict == "stall"


def test_convergence_first_value_already_at_target() -> None:
    assert conv("0", None, target=0).verdict == "target"


def test_convergence_previous_from_a_template() -> None:
    i = inp("4", c={"output": "5"})
    spec = Evaluate("convergence", target=0, previous="${captured.c.output}")
    assert run(spec, i).verdict == "progress"
    assert run(spec, inp("5", c={"output": "5"})).verdict == "stall"
    assert run(spec, inp("5", c={"output": ""})).details["previous"] is None
    bad = run(spec, inp("5", c={"output": "five"}))
    assert bad.verdict == "error"
    assert "previous value 'five'" in (bad.details.error or "")


def test_convergence_errors_and_no_target() -> None:
    v = conv("lots", 3, target=0)
    assert v.verdict == "error"
    assert v.details["text"] == "lots"
    assert conv("3", 1, target="${context.word}").verdict == "error"
    assert conv("3", 4).verdict == "progress"  # no target: direction only
    assert conv("3", 4, target="${context.goal}").verdict == "target"


# --------------------------------------------------------------------------- all / any

OK = Evaluate("output_contains", pattern="ok")
NUM = Evaluate("output_numeric", operator="eq", target=1)
CODE = Evaluate("exit_code")


def test_all_and_any() -> None:
    both = Evaluate("all", of=(OK, CODE))
    either = Evaluate("any", of=(OK, CODE))
    assert run(both, inp("ok", exit_code=0)).verdict == "success"
    assert run(both, inp("ok", exit_code=1)).verdict == "failure"
    assert run(either, inp("ok", exit_code=1)).verdict == "success"
    assert run(either, inp("no", exit_code=1)).verdict == "failure"
    v = run(both, inp("ok", exit_code=1))
    assert v.details["passed"] == 1
    assert v.details["total"] == 2
    assert [p["verdict"] for p in _parts(v)] == ["success", "failure"]
    assert _parts(v)[1] == {
        "type": "exit_code",
        "verdict": "failure",
        "details": {"exit_code": 1},
    }


def test_any_error_makes_error() -> None:
    either = Evaluate("any", of=(OK, NUM))
    v = run(either, inp("ok"))  # "ok" passes the regex but is not a number
    assert v.verdict == "error"
    assert _parts(v)[1]["verdict"] == "error"
    assert run(Evaluate("all", of=(CODE, OK)), inp("ok", exit_code=7)).verdict == "error"


def test_nested_and_convergence_inside() -> None:
    nested = Evaluate("all", of=(Evaluate("any", of=(OK, CODE)), Evaluate("convergence", target=0)))
    assert run(nested, inp("0", exit_code=0)).verdict == "success"  # convergence 'target' passes
    assert run(nested, inp("3", exit_code=0)).verdict == "failure"  # 'progress' does not


# --------------------------------------------------------------------------- verdict sets

TEXTS = st.one_of(
    st.text(max_size=20),
    st.integers(-5, 5).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(
        [
            "{",
            "[]",
            '{"a": 1}',
            '{"a": "x"}',
            '{"a": [1, 2]}',
            '{"a": null}',
            "ok",
            "NaN",
            "[Infinity]",
        ]
    ),
)
TARGETS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(-3, 3), st.sampled_from(["1", "x", ""])
)

SPECS = st.one_of(
    st.builds(Evaluate, st.just("exit_code")),
    st.builds(
        Evaluate,
        st.just("output_contains"),
        pattern=st.sampled_from(["ok", "^\\d+$", "(", "a.b"]),
        literal=st.booleans(),
        negate=st.booleans(),
    ),
    st.builds(
        Evaluate,
        st.sampled_from(["output_numeric", "output_json"]),
        operator=st.sampled_from([*OPERATORS, None]),
        target=TARGETS,
        path=st.sampled_from([".", ".a", ".a[0]", "[1]", "a"]),
    ),
    st.builds(
        Evaluate,
        st.just("convergence"),
        target=TARGETS,
        tolerance=st.floats(0, 2),
        direction=st.sampled_from(["minimize", "maximize"]),
    ),
)
COMBINED = st.builds(
    Evaluate,
    st.sampled_from(["all", "any"]),
    of=st.lists(SPECS, min_size=1, max_size=3).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(
    spec=st.one_of(SPECS, COMBINED),
    text=TEXTS,
    code=st.one_of(st.none(), st.integers(-2, 3)),
    previous=st.one_of(st.none(), st.floats(-5, 5)),
)
def test_verdicts_stay_within_possible_verdicts(
    spec: Evaluate, text: str, code: int | None, previous: float | None
) -> None:
    i = EvalInput(text=text, exit_code=code, previous_value=previous)
    v = evaluate(spec, i)
    assert v.verdict in possible_verdicts(spec, action_type="shell")
    assert v.verdict in possible_verdicts(spec, action_type=None)
    json.dumps(v.to_dict(), allow_nan=False)
