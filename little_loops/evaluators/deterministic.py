"""Tier-1 evaluators: exit code, regex, number, JSON path, convergence, all/any. Pure functions."""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable
from functools import lru_cache

from little_loops.model.details import Details, Json
from little_loops.model.loop import (
    Evaluate,
    Scalar,
    Verdict,
)

from .configs import Convergence, ExitCode, Of, OutputContains, OutputJson, OutputNumeric, config_of
from .contract import EvalInput
from .jsonpath import MAX_JSON_DEPTH, MISSING, parse_json_path, too_deep, walk

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any, TypeVar

    _C = TypeVar("_C")

OPERATORS: tuple[str, ...] = ("eq", "ne", "lt", "le", "gt", "ge")

# --------------------------------------------------------------------------- helpers

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_SNIPPET = 200  # characters of evaluated text kept in details

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}

# Verdicts of a sub-evaluator that count as passing / as errors inside `all` and `any`.
_PASSING = frozenset({"success", "target"})
_ERRORS = frozenset({"error", "timeout"})


@lru_cache(maxsize=512)
def _regex(pattern: str, literal: bool) -> re.Pattern[str]:
    return re.compile(re.escape(pattern) if literal else pattern, re.MULTILINE)


def _snippet(text: str) -> str:
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"


def _parse_number(text: str) -> int | float | None:
    """A whole string as an int or a finite float; None when it is not exactly one number."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    value = float(text)
    return value if math.isfinite(value) else None


def _subject(
    spec: OutputContains | OutputNumeric | OutputJson | Convergence, inp: EvalInput
) -> str:
    """The evaluated text: `source` interpolated, or the action's stdout."""
    return inp.text if spec.source is None else inp.resolve(spec.source)


def _target(spec: OutputNumeric | OutputJson | Convergence, inp: EvalInput) -> Scalar | None:
    target = spec.target
    if isinstance(target, str) and "$" in target:
        return inp.resolve(target)
    return target


def _number_target(target: Scalar | None) -> int | float | None:
    if isinstance(target, bool) or target is None:
        return None
    if isinstance(target, int | float):
        return target if math.isfinite(target) else None
    return _parse_number(target)


def _error(reason: str, **details: Json) -> Verdict:
    return Verdict("error", Details({"error": reason, **details}))


# The verdicts of exit codes 0 and 1, built once: every shell step of a loop gives one.
_EXIT_0 = Verdict("success", Details(exit_code=0))
_EXIT_1 = Verdict("failure", Details(exit_code=1))


# --------------------------------------------------------------------------- evaluators


def exit_code(spec: ExitCode, inp: EvalInput) -> Verdict:
    """0 is `success`, 1 is `failure`, any other code (or none at all) is `error`."""
    code = inp.exit_code
    if code is None:
        return _error("the action has no exit code", exit_code=None)
    if code == 0:
        return _EXIT_0
    if code == 1:
        return _EXIT_1
    return _error(f"exit code {code} is neither 0 nor 1", exit_code=code)


def output_contains(spec: OutputContains, inp: EvalInput) -> Verdict:
    """`success` when `pattern` is found in the text (multiline regex, or plain with `literal`).

    `negate` swaps the verdicts. This type has no `error` verdict: a missing or invalid
    pattern (which the loader rejects) gives `failure` with `details["error"]`.
    """
    text = _subject(spec, inp)
    details: dict[str, Json] = {
        "pattern": spec.pattern,
        "literal": spec.literal,
        "negate": spec.negate,
    }
    if spec.pattern is None:
        return Verdict(
            "failure", Details({**details, "matched": False, "error": "no pattern given"})
        )
    try:
        regex = _regex(spec.pattern, spec.literal)
    except re.error as exc:
        return Verdict(
            "failure", Details({**details, "matched": False, "error": f"invalid regex: {exc}"})
        )
    found = regex.search(text)
    details["matched"] = found is not None
    if found is not None:
        details["match"] = _snippet(found.group(0))
    passed = (found is not None) != spec.negate
    return Verdict("success" if passed else "failure", Details(details))


def output_numeric(spec: OutputNumeric, inp: EvalInput) -> Verdict:
    """The whole text (stripped) read as a number and compared with `target` by `operator`."""
    text = _subject(spec, inp)
    op = spec.operator or "eq"
    target = _target(spec, inp)
    details: dict[str, Json] = {"operator": op, "target": target}
    if op not in _COMPARE:
        return _error(f"unknown operator '{op}'; use one of: {', '.join(OPERATORS)}", **details)
    value = _parse_number(text)
    if value is None:
        return _error(
            "the output is not a number; print only the number, or point `source` at it",
            **details,
            text=_snippet(text.strip()),
        )
    goal = _number_target(target)
    if goal is None:
        return _error(f"the target {target!r} is not a number", value=value, **details)
    passed = _COMPARE[op](value, goal)
    return Verdict(
        "success" if passed else "failure", Details({"value": value, **details, "target": goal})
    )


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _coerce_like(value: Any, target: Scalar | None) -> Any:
    """`target` converted to the JSON type of `value`, for eq/ne (see output_json)."""
    kind = _json_type(value)
    if kind == "number":
        return _number_target(target)
    if kind == "boolean":
        if isinstance(target, bool):
            return target
        return {"true": True, "false": False}.get(str(target).strip().lower())
    if kind == "string":
        if isinstance(target, bool):
            return "true" if target else "false"
        return None if target is None else str(target)
    if kind == "null":
        return None if target is None or str(target).strip() in ("null", "") else MISSING
    if isinstance(target, str):  # arrays and objects compare with a target written as JSON
        try:
            return json.loads(target)
        except ValueError:
            return MISSING
    return MISSING


def _reject_constant(name: str) -> Any:
    raise ValueError(f"'{name}' is not a JSON number")


def output_json(spec: OutputJson, inp: EvalInput) -> Verdict:
    """Parse the text as JSON, take the value at `path`, compare it with `target`.

    `eq`/`ne` work on every JSON type; the target is read as the value's type first (the
    text "3" equals the number 3, "true" the boolean true, `null` or "" equals null, an array or
    object target is written as JSON), and a target that cannot be read so is simply unequal.
    `lt`/`le`/`gt`/`ge` need a number on both sides, else `error`. Without `operator` and
    `target` the verdict is `success` when the path exists.
    """
    text = _subject(spec, inp)
    path = spec.path or "."
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        return _error(f"the output is not valid JSON: {exc}", path=path, text=_snippet(text))
    except RecursionError:
        doc = MISSING
    if doc is MISSING or too_deep(doc):
        return _error(
            f"the output's JSON is nested more than {MAX_JSON_DEPTH} levels deep",
            path=path,
            text=_snippet(text),
        )
    try:
        keys = parse_json_path(path)
    except ValueError as exc:
        return _error(str(exc), path=path)
    value, found = walk(doc, keys)
    if value is MISSING:
        return _error(f"JSON path '{path}' is missing (found only '{found}')", path=path)
    target = _target(spec, inp)
    if spec.operator is None and target is None:
        return Verdict("success", Details({"path": path, "value": value}))
    op = spec.operator or "eq"
    details: dict[str, Json] = {"path": path, "operator": op, "value": value, "target": target}
    if op not in _COMPARE:
        return _error(f"unknown operator '{op}'; use one of: {', '.join(OPERATORS)}", **details)
    kind = _json_type(value)
    if op in ("eq", "ne"):
        goal = _coerce_like(value, target)
        equal = goal is not MISSING and value == goal
        passed = equal if op == "eq" else not equal
        return Verdict("success" if passed else "failure", Details(details))
    if kind != "number":
        return _error(f"operator '{op}' needs a number, but '{path}' is {kind}", **details)
    number = _number_target(target)
    if number is None:
        return _error(f"operator '{op}' needs a number, but the target is {target!r}", **details)
    passed = _COMPARE[op](value, number)
    return Verdict("success" if passed else "failure", Details({**details, "target": number}))


def convergence(spec: Convergence, inp: EvalInput) -> Verdict:
    """Is a measured number at `target`, moving toward it, or stuck?

    `target`: within `tolerance` of the target, or past it in `direction` (below it when
    minimizing, above it when maximizing). `progress`: moved in `direction` by more than
    `tolerance` since the previous value (`previous` interpolated, else the state's last value
    this run), or first observation. `stall`: otherwise. `error`: a value that is not a number.
    `details["value"]` is the new value, for the runner to remember.
    """
    text = _subject(spec, inp)
    direction = spec.direction
    tolerance = abs(spec.tolerance)
    details: dict[str, Json] = {"direction": direction, "tolerance": tolerance}
    value = _parse_number(text)
    if value is None:
        return _error("the measured value is not a number", text=_snippet(text.strip()), **details)
    details["value"] = value
    raw_target = _target(spec, inp)
    target = _number_target(raw_target)
    if raw_target is not None and target is None:
        return _error(f"the target {raw_target!r} is not a number", **details)
    details["target"] = target
    previous: int | float | None = inp.previous_value
    if spec.previous is not None:
        prev_text = inp.resolve(spec.previous).strip()
        previous = _parse_number(prev_text) if prev_text else None
        if prev_text and previous is None:
            return _error(f"the previous value {_snippet(prev_text)!r} is not a number", **details)
    details["previous"] = previous
    sign = 1 if direction == "maximize" else -1
    if target is not None and (abs(value - target) <= tolerance or sign * (value - target) > 0):
        return Verdict("target", Details(details))
    if previous is None:
        return Verdict("progress", Details({**details, "first": True}))
    moved = sign * (value - previous)
    details["delta"] = value - previous
    return Verdict("progress" if moved > tolerance else "stall", Details(details))


# --------------------------------------------------------------------------- as registered


class Pure:
    """A deterministic evaluator: a fixed set of verdicts and a pure function of its config."""

    def __init__(
        self, config: type[_C], gives: frozenset[str], run: Callable[[_C, EvalInput], Verdict]
    ) -> None:
        self.config: type = config
        self.gives = gives
        self.run: Callable[[Any, EvalInput], Verdict] = run

    def verdicts(self, spec: Evaluate) -> frozenset[str]:
        return self.gives

    def evaluate(self, spec: Evaluate, inp: EvalInput) -> Verdict:
        return self.run(config_of(self.config, spec), inp)


class Combine:
    """`all` (`need_all`) and `any`: every evaluator of `of` runs (through `dispatch`, the
    registry's, handed in so this module never imports it), so an error anywhere is never
    hidden by an earlier failure. Passing means `success` (or `target` for convergence);
    `_uncertain` verdicts do not pass; any `error` gives `error`."""

    config = Of

    def __init__(
        self, *, need_all: bool, dispatch: Callable[[Evaluate, EvalInput], Verdict]
    ) -> None:
        self.need_all, self.dispatch = need_all, dispatch

    def verdicts(self, spec: Evaluate) -> frozenset[str]:
        return frozenset({"success", "failure", "error"})

    def evaluate(self, spec: Evaluate, inp: EvalInput) -> Verdict:
        results = [(sub, self.dispatch(sub, inp)) for sub in config_of(Of, spec).of]
        parts: list[Json] = [{"type": sub.type, **result.to_dict()} for sub, result in results]
        verdicts = [result.verdict for _, result in results]
        passed = sum(v in _PASSING for v in verdicts)
        details: dict[str, Json] = {"of": parts, "passed": passed, "total": len(verdicts)}
        if any(v in _ERRORS for v in verdicts):
            return Verdict("error", Details({**details, "error": "a sub-evaluator gave error"}))
        ok = passed == len(verdicts) if self.need_all else passed > 0
        return Verdict("success" if ok else "failure", Details(details))


def pure_evaluators() -> dict[str, Pure]:
    """The deterministic types, for the registry's table."""
    with_error = frozenset({"success", "failure", "error"})
    return {
        "exit_code": Pure(ExitCode, with_error, exit_code),
        "output_contains": Pure(OutputContains, frozenset({"success", "failure"}), output_contains),
        "output_numeric": Pure(OutputNumeric, with_error, output_numeric),
        "output_json": Pure(OutputJson, with_error, output_json),
        "convergence": Pure(
            Convergence, frozenset({"target", "progress", "stall", "error"}), convergence
        ),
    }
