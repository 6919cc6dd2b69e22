"""The packaged loop JSON Schema, and schema errors rewritten as located plain-English messages.

`ll validate` must start fast, and importing `jsonschema` costs more than the whole start-up
budget (see docs/performance.md). So this module checks documents with a small interpreter of
the keywords `loop.schema.json` uses (`KEYWORDS`); the tests prove, against `jsonschema`'s
Draft 2020-12 validator, that the schema uses nothing else and that both agree on every document.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path

from little_loops.errors import Diagnostic
from little_loops.model.loop import Pos
from little_loops.model.records import record
from little_loops.wording import (
    NodePath,
    describe,
    did_you_mean,
    or_words,
    show,
    subject,
    where,
)

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

Locate = Callable[[NodePath], Pos]

# Keywords the interpreter below understands; annotations are accepted and ignored.
KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "properties",
        "patternProperties",
        "additionalProperties",
        "required",
        "propertyNames",
        "minProperties",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "pattern",
        "minLength",
        "$ref",
        "allOf",
        "if",
        "then",
    }
)
ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description", "default", "examples"})

_TYPE_WORDS = {
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "object": "a mapping (key: value lines)",
    "array": "a list",
    "null": "empty",
}

# What a `pattern` in the schema asks for, in words.
_PATTERN_HINTS = {
    "^[A-Za-z0-9_.-]+$": "use only letters, digits, '-', '_' and '.'",
    "^[A-Za-z_][A-Za-z0-9_-]*$": "start with a letter or '_', then use letters, digits, '_' or '-'",
    "^[A-Za-z_][A-Za-z0-9_.-]*$": (
        "start with a letter or '_', then use letters, digits, '_', '-' or '.'"
    ),
    "^[a-z][a-z0-9_]*$": "a verdict is a lowercase word (letters, digits, '_')",
    "^(_|_error|[a-z][a-z0-9_]*)$": "use a lowercase verdict, '_' (any other verdict) or '_error'",
    "\\.ya?ml$": "a loop file ends in .yaml or .yml",
    "^[A-Za-z0-9_-]+$": "use only letters, digits, '_' and '-'",
}


def schema_text() -> str:
    """The packaged `loop.schema.json`, exactly as shipped."""
    beside = Path(__file__).parent.parent / "loop.schema.json"
    if beside.is_file():  # the usual install; importlib.resources costs start-up time
        return beside.read_text("utf-8")
    from importlib import resources  # a zipped or otherwise unusual install

    return resources.files("little_loops").joinpath("loop.schema.json").read_text("utf-8")


@cache
def loop_schema() -> Mapping[str, Any]:
    """The packaged schema, parsed once per process."""
    data: dict[str, Any] = json.loads(schema_text())
    return data


@record(frozen=True)
class SchemaIssue:
    """One way a document breaks the schema. `key` is set when the problem is a mapping key."""

    path: NodePath
    code: str
    message: str
    key: str | None = None


def schema_issues(doc: Any) -> list[SchemaIssue]:
    """Every way `doc` breaks the loop schema, as plain-English issues."""
    root = loop_schema()
    return list(_Checker(root).check(doc, root, ()))


def schema_diagnostics(
    doc: Any, *, file: str, locate_value: Locate, locate_key: Locate
) -> list[Diagnostic]:
    """Schema issues located in the file: key problems at the key, value problems at the value."""
    return [
        locate_issue(issue, file=file, locate_value=locate_value, locate_key=locate_key)
        for issue in schema_issues(doc)
    ]


def locate_issue(
    issue: SchemaIssue, *, file: str, locate_value: Locate, locate_key: Locate
) -> Diagnostic:
    """One issue as a diagnostic: a key problem at the key, a value problem at the value."""
    if issue.key is not None:
        pos = locate_key((*issue.path, issue.key))
    else:
        pos = locate_value(issue.path)
    return Diagnostic(file, pos.line, pos.col, "error", issue.code, issue.message)


class _Checker:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def resolve(self, ref: str) -> Mapping[str, Any]:
        node: Any = self.root
        for part in ref.removeprefix("#/").split("/"):
            node = node[part]
        result: Mapping[str, Any] = node
        return result

    def valid(self, value: Any, schema: Mapping[str, Any]) -> bool:
        if schema.keys() == {"pattern"}:  # propertyNames
            return isinstance(value, str) and _compiled(schema["pattern"]).search(value) is not None
        if schema.keys() == {"properties", "required"} and isinstance(value, dict):
            # the `if` of a discriminated union: {"properties": {"type": {"const": X}}, ...}
            props = schema["properties"]
            if all(p.keys() == {"const"} for p in props.values()):
                return all(k in value for k in schema["required"]) and all(
                    k not in value or _equal(value[k], p["const"]) for k, p in props.items()
                )
        return next(iter(self.check(value, schema, ())), None) is None

    def check(self, value: Any, schema: Mapping[str, Any], path: NodePath) -> Iterator[SchemaIssue]:
        if "$ref" in schema:
            yield from self.check(value, self.resolve(schema["$ref"]), path)
        if "type" in schema:
            types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(_is_type(value, t) for t in types):
                want = or_words([_TYPE_WORDS[t] for t in types])
                message = f"{subject(path)} must be {want}, not {describe(value)}"
                if isinstance(value, bool) and "choices" in path[-2:-1]:
                    message = (
                        f"the choices of state '{path[1]}' are read by YAML as true/false, not "
                        "text (unquoted yes/no/on/off are booleans); quote them: "
                        'choices: ["yes", "no"]'
                    )
                    yield SchemaIssue(path, "wrong-type", message)
                    return
                yield SchemaIssue(path, "wrong-type", message + _colon_hint(value, types))
                return
        if "const" in schema and not _equal(value, schema["const"]):
            yield SchemaIssue(path, "bad-value", f"{subject(path)} must be {show(schema['const'])}")
        if "enum" in schema and not any(_equal(value, e) for e in schema["enum"]):
            yield _enum_issue(value, schema["enum"], path)
        if isinstance(value, dict):
            yield from self.check_object(value, schema, path)
        elif isinstance(value, list):
            yield from self.check_array(value, schema, path)
        elif isinstance(value, str):
            yield from _check_string(value, schema, path)
        elif _is_type(value, "number"):
            yield from _check_number(value, schema, path)
        for sub in schema.get("allOf", ()):
            yield from self.check(value, sub, path)
        if "if" in schema and "then" in schema and self.valid(value, schema["if"]):
            yield from self.check(value, schema["then"], path)

    def check_object(
        self, value: dict[str, Any], schema: Mapping[str, Any], path: NodePath
    ) -> Iterator[SchemaIssue]:
        props: Mapping[str, Any] = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                yield _missing_issue(key, props.get(key), path)
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            yield SchemaIssue(path, "empty", f"{subject(path)} must not be empty")
        names = schema.get("propertyNames")
        patterns: Mapping[str, Any] = schema.get("patternProperties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if names is not None and not self.valid(key, names):
                yield _name_issue(key, item, names, path)
                continue
            matched = [p for p in patterns if _compiled(p).search(key)]
            if key in props:
                yield from self.check(item, props[key], (*path, key))
            for pattern in matched:
                yield from self.check(item, patterns[pattern], (*path, key))
            if key in props or matched:
                continue
            if extra is False:
                yield _unknown_key_issue(key, item, list(props), path)
            elif isinstance(extra, Mapping):
                yield from self.check(item, extra, (*path, key))

    def check_array(
        self, value: list[Any], schema: Mapping[str, Any], path: NodePath
    ) -> Iterator[SchemaIssue]:
        if "minItems" in schema and len(value) < schema["minItems"]:
            n = schema["minItems"]
            yield SchemaIssue(
                path, "empty", f"{subject(path)} must list at least {n} item{'s' * (n != 1)}"
            )
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            n = schema["maxItems"]
            yield SchemaIssue(
                path,
                "too-many",
                f"{subject(path)} must list at most {n} item{'s' * (n != 1)}, not {len(value)}",
            )
        if schema.get("uniqueItems"):
            seen: list[Any] = []
            for item in value:
                if any(_equal(item, s) for s in seen):
                    yield SchemaIssue(
                        path, "duplicate-item", f"{subject(path)} lists {show(item)} twice"
                    )
                    break
                seen.append(item)
        if "items" in schema:
            for i, item in enumerate(value):
                yield from self.check(item, schema["items"], (*path, i))


def _check_string(value: str, schema: Mapping[str, Any], path: NodePath) -> Iterator[SchemaIssue]:
    if "minLength" in schema and len(value) < schema["minLength"]:
        yield SchemaIssue(path, "empty", f"{subject(path)} must not be empty")
    pattern = schema.get("pattern")
    if pattern is not None and _compiled(pattern).search(value) is None:
        hint = _PATTERN_HINTS.get(pattern, f"it must match {pattern}")
        yield SchemaIssue(path, "bad-value", f"{subject(path)} is {show(value)}; {hint}")


def _check_number(value: float, schema: Mapping[str, Any], path: NodePath) -> Iterator[SchemaIssue]:
    if not math.isfinite(value):  # YAML's .nan and .inf; JSON has no such numbers
        yield SchemaIssue(path, "bad-value", f"{subject(path)} must be a finite number")
        return
    if "minimum" in schema and value < schema["minimum"]:
        least = show(schema["minimum"])
        yield SchemaIssue(
            path, "out-of-range", f"{subject(path)} must be at least {least}, not {show(value)}"
        )
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        least = show(schema["exclusiveMinimum"])
        yield SchemaIssue(
            path,
            "out-of-range",
            f"{subject(path)} must be greater than {least}, not {show(value)}",
        )
    if "maximum" in schema and value > schema["maximum"]:
        most = show(schema["maximum"])
        yield SchemaIssue(
            path, "out-of-range", f"{subject(path)} must be at most {most}, not {show(value)}"
        )


def _missing_issue(key: str, prop: Any, path: NodePath) -> SchemaIssue:
    hint = ""
    if isinstance(prop, Mapping) and "enum" in prop:
        hint = f" (one of: {', '.join(map(str, prop['enum']))})"
    owner = subject(path) if path else "the loop"
    return SchemaIssue(path, "missing-key", f"{owner} is missing required key '{key}'{hint}")


def _unknown_key_issue(key: str, value: Any, valid: list[str], path: NodePath) -> SchemaIssue:
    from little_loops.load.hints import upstream_key  # only when there is a problem to explain

    in_state = len(path) == 2 and path[0] == "states"
    upstream = upstream_key(key, value, in_state=in_state) if in_state or not path else None
    if upstream is not None:
        return SchemaIssue(
            path, "unknown-key", f"unknown key '{key}' {where(path)}; {upstream}", key
        )
    message = f"unknown key '{key}' {where(path)}{did_you_mean(key, valid)}"
    message += f"; valid keys: {', '.join(sorted(valid))}"
    return SchemaIssue(path, "unknown-key", message, key=key)


def _name_issue(key: str, value: Any, names: Mapping[str, Any], path: NodePath) -> SchemaIssue:
    if "enum" in names:  # a closed set of keys
        return _unknown_key_issue(key, value, [str(n) for n in names["enum"]], path)
    pattern = names.get("pattern", "")
    hint = _PATTERN_HINTS.get(pattern, f"it must match {pattern}")
    if path == ("states",):
        what = f"state name '{key}' is not valid"
    elif path[-1:] == ("route",):
        what = f"route key '{key}' {where(path[:-1])} is not a verdict"
    else:
        what = f"key '{key}' {where(path)} is not valid"
    return SchemaIssue(path, "bad-name", f"{what}; {hint}", key=key)


def _enum_issue(value: Any, options: list[Any], path: NodePath) -> SchemaIssue:
    words = [str(o) for o in options]
    guess = did_you_mean(value, words) if isinstance(value, str) else ""
    if path[-1:] == ("type",) and path[:1] == ("context",):
        lead = f"unknown type {show(value)} for context key '{path[1]}'"
        return SchemaIssue(
            path, "bad-context-spec", f"{lead}{guess}; valid types: {', '.join(words)}"
        )
    if path[-1:] == ("type",):
        lead = f"unknown evaluator type {show(value)} in {subject(path[:-1])}"
        message = f"{lead}{guess}; valid types: {', '.join(words)}"
        return SchemaIssue(path, "unknown-evaluator", message)
    message = f"{subject(path)} must be one of: {', '.join(words)}; got {show(value)}"
    if isinstance(value, str):
        from little_loops.load.hints import (
            operator_for,
            upstream_action_type,
        )

        if path[-1:] == ("operator",) and operator_for(value) in words:
            guess = f" (did you mean '{operator_for(value)}'?)"
        elif path[-1:] == ("action_type",) and upstream_action_type(value):
            return SchemaIssue(path, "bad-value", f"{message}; {upstream_action_type(value)}")
    return SchemaIssue(path, "bad-value", message + guess)


def _colon_hint(value: Any, types: list[str]) -> str:
    """For text that YAML read as a mapping because of a ': ' in it: how to keep it text."""
    if "string" not in types or not isinstance(value, dict) or len(value) != 1:
        return ""
    ((key, item),) = value.items()
    if (
        not isinstance(key, str)
        or not isinstance(item, str | int | float)
        or isinstance(item, bool)
    ):
        return ""
    from little_loops.load.hints import quote

    text = quote(f"{key}: {item}")
    return f"; a ': ' inside text starts a mapping in YAML: quote the whole text, {text}"


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (
            isinstance(value, float) and math.isfinite(value) and value.is_integer()
        )
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    return value is None


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, 1 equals 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return bool(type(a) is type(b) or (_is_type(a, "number") and _is_type(b, "number"))) and a == b


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)
