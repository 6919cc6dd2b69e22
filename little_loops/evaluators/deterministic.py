"""Tier-1 evaluators: exit code, regex, number, JSON path, convergence, all/any. Pure functions."""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ..model import Evaluate, Scalar, Verdict
from . import EvalInput, evaluate

OPERATORS: tuple[str, ...] = ("eq", "ne", "lt", "le", "gt", "ge")

_PATH_TOKEN = re.compile(
    r"""\.(?P<key>[A-Za-z_][A-Za-z0-9_-]*)      # .name
      | \[(?P<index>-?\d+)\]                    # [0] or [-1]
      | \["(?P<quoted>(?:[^"\\]|\\.)*)"\]       # ["any key"]
    """,
    re.VERBOSE,
)


def parse_json_path(path: str) -> tuple[str | int, ...]:
    """`.a.b[0].c` -> ("a", "b", 0, "c"); `.` is the whole document.

    Raises ValueError with a message that says what is wrong and how to write it.
    """
    if path in (".", ""):
        if path == "":
            raise ValueError("empty JSON path; write '.' for the whole document or '.key[0]'")
        return ()
    if not path.startswith((".", "[")):
        raise ValueError(f"JSON path '{path}' must start with '.' or '[' (for example '.{path}')")
    out: list[str | int] = []
    pos = 0
    while pos < len(path):
        m = _PATH_TOKEN.match(path, pos)
        if m is None:
            raise ValueError(
                f"JSON path '{path}' is malformed at character {pos + 1} ('{path[pos:]}'); "
                "write keys as '.name' or '[\"any key\"]' and indexes as '[0]'"
            )
        if m.group("key") is not None:
            out.append(m.group("key"))
        elif m.group("index") is not None:
            out.append(int(m.group("index")))
        else:
            out.append(re.sub(r"\\(.)", r"\1", m.group("quoted")))
        pos = m.end()
    return tuple(out)


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


def _subject(spec: Evaluate, inp: EvalInput) -> str:
    """The evaluated text: `source` interpolated, or the action's stdout."""
    return inp.text if spec.source is None else inp.resolve(spec.source)


def _target(spec: Evaluate, inp: EvalInput) -> Scalar | None:
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


def _error(reason: str, **details: Any) -> Verdict:
    return Verdict("error", {"error": reason, **details})


# --------------------------------------------------------------------------- evaluators


def exit_code(spec: Evaluate, inp: EvalInput) -> Verdict:
    """0 is `success`, 1 is `failure`, any other code (or none at all) is `error`."""
    code = inp.exit_code
    if code is None:
        return _error("the action has no exit code", exit_code=None)
    if code == 0:
        return Verdict("success", {"exit_code": 0})
    if code == 1:
        return Verdict("failure", {"exit_code": 1})
    return _error(f"exit code {code} is neither 0 nor 1", exit_code=code)


def output_contains(spec: Evaluate, inp: EvalInput) -> Verdict:
    """`success` when `pattern` is found in the text (multiline regex, or plain with `literal`).

    `negate` swaps the verdicts. This type has no `error` verdict: a missing or invalid
    pattern (which the loader rejects) gives `failure` with `details["error"]`.
    """
    text = _subject(spec, inp)
    details: dict[str, Any] = {
        "pattern": spec.pattern,
        "literal": spec.literal,
        "negate": spec.negate,
    }
    if spec.pattern is None:
        return Verdict("failure", {**details, "matched": False, "error": "no pattern given"})
    try:
        regex = _regex(spec.pattern, spec.literal)
    except re.error as exc:
        return Verdict("failure", {**details, "matched": False, "error": f"invalid regex: {exc}"})
    found = regex.search(text)
    details["matched"] = found is not None
    if found is not None:
        details["match"] = _snippet(found.group(0))
    passed = (found is not None) != spec.negate
    return Verdict("success" if passed else "failure", details)


def output_numeric(spec: Evaluate, inp: EvalInput) -> Verdict:
    """The whole text (stripped) read as a number and compared with `target` by `operator`."""
    text = _subject(spec, inp)
    op = spec.operator or "eq"
    target = _target(spec, inp)
    details: dict[str, Any] = {"operator": op, "target": target}
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
    return Verdict("success" if passed else "failure", {"value": value, **details, "target": goal})


_MISSING = object()


def _walk(doc: Any, path: tuple[str | int, ...]) -> tuple[Any, str]:
    """The value at `path`, or `_MISSING` and the part of the path that was found."""
    node = doc
    seen = ""
    for key in path:
        if isinstance(key, int) and isinstance(node, list) and -len(node) <= key < len(node):
            node = node[key]
            seen += f"[{key}]"
        elif isinstance(key, str) and isinstance(node, dict) and key in node:
            node = node[key]
            seen += f".{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key) else f"[{key!r}]"
        else:
            return _MISSING, seen or "."
    return node, seen or "."


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
        return None if target is None or str(target).strip() in ("null", "") else _MISSING
    if isinstance(target, str):  # arrays and objects compare with a target written as JSON
        try:
            return json.loads(target)
        except ValueError:
            return _MISSING
    return _MISSING


def _reject_constant(name: str) -> Any:
    raise ValueError(f"'{name}' is not a JSON number")


# Deeper documents are refused: they would overflow Python's stack when compared or written
# into an event, and no tool's real output nests so far.
MAX_JSON_DEPTH = 200


def _too_deep(doc: Any) -> bool:
    level: list[Any] = [doc]
    for _ in range(MAX_JSON_DEPTH):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return False
    return any(isinstance(item, dict | list) and item for item in level)


def output_json(spec: Evaluate, inp: EvalInput) -> Verdict:
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
        doc = _MISSING
    if doc is _MISSING or _too_deep(doc):
        return _error(
            f"the output's JSON is nested more than {MAX_JSON_DEPTH} levels deep",
            path=path,
            text=_snippet(text),
        )
    try:
        keys = parse_json_path(path)
    except ValueError as exc:
        return _error(str(exc), path=path)
    value, found = _walk(doc, keys)
    if value is _MISSING:
        return _error(f"JSON path '{path}' is missing (found only '{found}')", path=path)
    target = _target(spec, inp)
    if spec.operator is None and target is None:
        return Verdict("success", {"path": path, "value": value})
    op = spec.operator or "eq"
    details: dict[str, Any] = {"path": path, "operator": op, "value": value, "target": target}
    if op not in _COMPARE:
        return _error(f"unknown operator '{op}'; use one of: {', '.join(OPERATORS)}", **details)
    kind = _json_type(value)
    if op in ("eq", "ne"):
        goal = _coerce_like(value, target)
        equal = goal is not _MISSING and value == goal
        passed = equal if op == "eq" else not equal
        return Verdict("success" if passed else "failure", details)
    if kind != "number":
        return _error(f"operator '{op}' needs a number, but '{path}' is {kind}", **details)
    number = _number_target(target)
    if number is None:
        return _error(f"operator '{op}' needs a number, but the target is {target!r}", **details)
    passed = _COMPARE[op](value, number)
    return Verdict("success" if passed else "failure", {**details, "target": number})


def convergence(spec: Evaluate, inp: EvalInput) -> Verdict:
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
    details: dict[str, Any] = {"direction": direction, "tolerance": tolerance}
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
        return Verdict("target", details)
    if previous is None:
        return Verdict("progress", {**details, "first": True})
    moved = sign * (value - previous)
    details["delta"] = value - previous
    return Verdict("progress" if moved > tolerance else "stall", details)


def _combine(spec: Evaluate, inp: EvalInput, *, need_all: bool) -> Verdict:
    results = [(sub, evaluate(sub, inp)) for sub in spec.of]
    parts = [{"type": sub.type, **result.to_dict()} for sub, result in results]
    verdicts = [result.verdict for _, result in results]
    passed = sum(v in _PASSING for v in verdicts)
    details = {"of": parts, "passed": passed, "total": len(verdicts)}
    if any(v in _ERRORS for v in verdicts):
        return Verdict("error", {**details, "error": "a sub-evaluator gave error"})
    ok = passed == len(verdicts) if need_all else passed > 0
    return Verdict("success" if ok else "failure", details)


def all_of(spec: Evaluate, inp: EvalInput) -> Verdict:
    """`success` when every evaluator of `of` passes; `error` when any gives `error`.

    Passing means `success` (or `target` for convergence); `_uncertain` verdicts do not pass.
    Every sub-evaluator runs, so an error anywhere is never hidden by an earlier failure.
    """
    return _combine(spec, inp, need_all=True)


def any_of(spec: Evaluate, inp: EvalInput) -> Verdict:
    """`success` when at least one evaluator of `of` passes; `error` when any gives `error`."""
    return _combine(spec, inp, need_all=False)
