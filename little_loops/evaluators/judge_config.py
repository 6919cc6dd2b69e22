"""Load-time checks of a judge's settings: its model URI and a custom answer schema.

Whatever `ll validate` can know about an `llm_structured` evaluator is checked here, so a
judge configuration mistake is a located error before the run, never verdict `error` (or a
crash) in every judged step. `jsonschema` is imported only for a file that has a custom
schema: start-up stays fast for every other file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping

from little_loops.model.loop import (
    ERROR_VERDICTS,
    UNCERTAIN_SUFFIX,
)

from ..wording import NodePath, subject
from ..wording import did_you_mean as _did_you_mean

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

# (where in the loop file, diagnostic code, message)
Finding = tuple[NodePath, str, str]

_VERDICT_WORD = re.compile(r"^[a-z][a-z0-9_]*$")
_JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
# Keywords holding one subschema, a list of them, or a mapping of them (Draft 2020-12).
_ONE = ("items", "not", "if", "then", "else", "contains", "additionalProperties",
        "propertyNames", "unevaluatedItems", "unevaluatedProperties")  # fmt: skip
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "$defs", "dependentSchemas")


def model_findings(model: str, at: NodePath) -> Iterator[Finding]:
    """The problem of a `model` (or `llm.model`) value at `at`, if it names no judge."""
    from ..providers import model_problem

    problem = model_problem(model)
    if problem is not None:
        yield at, "unknown-judge-model", f"{subject(at)}: {problem}"


def max_tokens_findings(
    max_tokens: int, models: tuple[str | None, ...], at: NodePath
) -> Iterator[Finding]:
    """`max_tokens` above what a judge model's API accepts (a 400 in every judged step)."""
    from ..model.loop import DEFAULT_JUDGE_MODEL
    from ..providers import prices, split_model

    for model in models:
        try:
            provider, target = split_model(model or DEFAULT_JUDGE_MODEL)
        except ValueError:
            continue  # reported as unknown-judge-model
        if provider not in ("anthropic", "openai"):
            continue  # the claude CLI takes no max_tokens; an ollama model's limit is its own
        limit = prices.max_output_tokens(target)
        if limit is not None and max_tokens > limit:
            yield (
                at,
                "judge-max-tokens",
                f"{subject(at)} is {max_tokens}, above the {limit} output tokens "
                f"{model or DEFAULT_JUDGE_MODEL} accepts (its API refuses the request); "
                f"lower it to {limit} or less",
            )
            return


def uses_strict_schema(model: str | None) -> bool:
    """Whether the judge `model` names (None: the default judge) gets a strict schema.

    The Anthropic API and OpenAI-compatible servers get strict structured outputs; the
    Claude Code CLI takes the schema as written.
    """
    return model is None or not model.startswith("claude://")


def schema_findings(schema: Mapping[str, Any], at: NodePath, *, strict: bool) -> list[Finding]:
    """Every problem of a custom judge `schema` found at `at` (the `schema` key's path).

    In order, each step only when the ones before it found nothing: values JSON can hold;
    a valid JSON Schema (Draft 2020-12 unless `$schema` names another draft) whose `$ref`s
    point inside it; a `verdict` enum of usable, unreserved words; a numeric `confidence`;
    and, when `strict`, a shape strict structured outputs can express.
    """
    for check in (_json_values, _valid_schema, _verdicts):
        found = list(check(schema, at))
        if found:
            return found
    found = list(_confidence(schema, at))
    if strict:
        nodes = list(_strict_nodes(schema, at))
        found += nodes or _strict_transform(schema, at)
    return found


def _strict_transform(schema: Mapping[str, Any], at: NodePath) -> Iterator[Finding]:
    """The transform every strict judge's schema goes through, and the APIs' documented
    limits (recursion, optional properties, unions, allOf with $ref), as a request would
    meet them: a schema `ll validate` passes is one the judge can send."""
    from ..providers.strict import StrictProblem, normalise, strict_limits, to_strict

    draft7 = "definitions" in schema and "$defs" not in schema

    def place(where: tuple[str | int, ...]) -> NodePath:
        if draft7 and where[:1] == ("$defs",):
            where = ("definitions", *where[1:])
        return (*at, *where)

    normal = normalise(schema)
    try:
        to_strict(normal)
    except StrictProblem as problem:
        yield place(problem.where), "judge-schema-not-strict", problem.message
        return
    for where, message in strict_limits(normal):
        yield place(where), "judge-schema-not-strict", message


# -- the steps ----------------------------------------------------------------------------------


def _json_values(value: Any, at: NodePath) -> Iterator[Finding]:
    """Values YAML reads but JSON cannot hold (dates, sets, NaN), which no judge can be sent."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _json_values(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _json_values(item, (*at, i))
    elif isinstance(value, float) and not math.isfinite(value):
        yield at, "invalid-judge-schema", f"{subject(at)} is {value}, which JSON cannot hold"
    elif not isinstance(value, str | int | float | bool) and value is not None:
        kind = type(value).__name__
        yield (
            at,
            "invalid-judge-schema",
            f"{subject(at)} is read by YAML as a {kind} ({value}), which JSON cannot hold; "
            "quote it to make it text",
        )


def _valid_schema(schema: Mapping[str, Any], at: NodePath) -> Iterator[Finding]:
    import jsonschema  # only files with a custom judge schema pay for it

    declared = schema.get("$schema")
    cls: Any = jsonschema.Draft202012Validator
    if declared is not None:
        lookup: Any = jsonschema.validators.validator_for  # default=None: None when unknown
        known = lookup(schema, default=None) if isinstance(declared, str) else None
        if known is None:
            yield (
                (*at, "$schema"),
                "invalid-judge-schema",
                f"{subject((*at, '$schema'))} names no JSON Schema draft this program knows "
                f"({declared!r}); remove it to use Draft 2020-12",
            )
            return
        cls = known
    meta = cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER)
    try:
        errors = sorted(meta.iter_errors(dict(schema)), key=lambda e: list(map(str, e.path)))
    except RecursionError:
        yield at, "invalid-judge-schema", f"{subject(at)} is nested too deeply to check"
        return
    seen: set[NodePath] = set()
    for error in errors:
        where: NodePath = (*at, *error.absolute_path)
        if where in seen:
            continue  # one message per spot
        seen.add(where)
        yield where, "invalid-judge-schema", _schema_error_message(error, where)
    if not errors:
        yield from _refs(schema, at)


def _schema_error_message(error: Any, where: NodePath) -> str:
    value = error.instance
    if where[-1] == "type" and error.validator == "anyOf":
        words = value if isinstance(value, list) else [value]
        bad = next((w for w in words if w not in _JSON_TYPES), value)
        hint = _did_you_mean(bad, list(_JSON_TYPES)) if isinstance(bad, str) else ""
        return (
            f"{subject(where)}: {bad!r} is not a JSON Schema type{hint}; use one of: "
            + ", ".join(_JSON_TYPES)
        )
    if error.validator == "format" and error.validator_value == "regex":
        try:
            re.compile(value)
        except re.error as exc:
            return (
                f"{subject(where)} is not a valid regular expression: {exc.msg} at position "
                f"{exc.pos}"
            )
    message = " ".join(str(error.message).split())
    if len(message) > 160:
        message = message[:159] + "…"
    return f"{subject(where)} is not valid JSON Schema: {message}"


def _refs(schema: Mapping[str, Any], at: NodePath) -> Iterator[Finding]:
    """`$ref`s must point inside the schema: the judge never fetches one from elsewhere."""
    if _nested_ids(schema):
        return  # refs resolve against embedded `$id`s; leave those to the author
    anchors = set(_anchors(schema))
    for path, ref in _ref_values(schema, ()):
        where = (*at, *path, "$ref")
        if not ref.startswith("#"):
            yield (
                where,
                "invalid-judge-schema",
                f"{subject(where)} ({ref!r}) points outside the schema, and the judge never "
                "fetches schemas; put the definition under '$defs' and use '#/$defs/NAME'",
            )
        elif not _resolves(schema, ref[1:], anchors):
            yield (
                where,
                "invalid-judge-schema",
                f"{subject(where)} ({ref!r}) points at nothing in the schema; define it under "
                "'$defs' or correct the path",
            )


def _verdicts(schema: Mapping[str, Any], at: NodePath) -> Iterator[Finding]:
    props = schema.get("properties")
    verdict = props.get("verdict") if isinstance(props, Mapping) else None
    enum = verdict.get("enum") if isinstance(verdict, Mapping) else None
    if (
        not isinstance(verdict, Mapping)
        or verdict.get("type") != "string"
        or not isinstance(enum, list)
        or not enum
    ):
        yield (
            at,
            "bad-judge-schema",
            f"{subject(at)} needs a 'verdict' property of type string with an 'enum' of "
            "verdicts, e.g. verdict: {type: string, enum: [done, retry]}",
        )
        return
    seen: set[object] = set()
    for i, value in enumerate(enum):
        where = (*at, "properties", "verdict", "enum", i)
        if isinstance(value, bool):
            yield (
                where,
                "bad-judge-schema",
                f"verdict {str(value).lower()} in {subject(at)} is read by YAML as true or "
                "false, not a word; quote it ('yes', 'no', 'on', 'off' are booleans to YAML)",
            )
        elif not isinstance(value, str) or not _VERDICT_WORD.match(value):
            yield (
                where,
                "bad-judge-schema",
                f"verdict {value!r} in {subject(at)} is not a lowercase word (letters, "
                "digits, '_')",
            )
        elif value in ERROR_VERDICTS or value.endswith(UNCERTAIN_SUFFIX):
            meaning = (
                "what a judge failure (or a timeout) gives"
                if value in ERROR_VERDICTS
                else "what 'uncertain_suffix' makes of a verdict below 'min_confidence'"
            )
            yield (
                where,
                "reserved-verdict",
                f"verdict '{value}' in {subject(at)} is reserved: it is {meaning}; name "
                "your verdict otherwise",
            )
        elif value in seen:
            yield (
                where,
                "bad-judge-schema",
                f"verdict '{value}' is listed twice in {subject(at)}; keep one",
            )
        seen.add(value)


def _confidence(schema: Mapping[str, Any], at: NodePath) -> Iterator[Finding]:
    """`confidence` is read as a number 0..1; any other type makes every answer invalid."""
    props = schema.get("properties")
    conf = props.get("confidence") if isinstance(props, Mapping) else None
    if not isinstance(conf, Mapping) or "type" not in conf:
        return
    types = conf["type"] if isinstance(conf["type"], list) else [conf["type"]]
    if not {"number", "integer"} & set(types):
        where = (*at, "properties", "confidence", "type")
        yield (
            where,
            "bad-judge-schema",
            f"{subject(where)} must be number: the judge reads 'confidence' as a number from "
            "0 to 1 (write confidence: {type: number}, or name your property otherwise)",
        )


def _strict_nodes(node: Any, at: NodePath) -> Iterator[Finding]:
    """Where strict structured outputs cannot express the schema.

    Every schema the answer's shape passes through (the root, `properties` of an object,
    `items` of an array, the variants of `anyOf`/`oneOf`/`allOf`, and `$defs`) must be a
    mapping that says what it holds: a `type`, a `$ref`, a `const` or `enum` of plain
    values, or variants. Other keywords are only described to a strict judge.
    """
    if not isinstance(node, Mapping):
        yield (
            at,
            "judge-schema-not-strict",
            f"{subject(at)} is {node!r}, which a strict judge cannot use; write a mapping "
            "with a 'type', e.g. {type: string}",
        )
        return
    defs = node.get("$defs")
    if isinstance(defs, Mapping):
        for name, sub in defs.items():
            yield from _strict_nodes(sub, (*at, "$defs", name))
    if "$ref" in node:
        return
    enum = node.get("enum")
    literal = (isinstance(enum, list) and bool(enum) and all(map(_plain, enum))) or (
        "const" in node and _plain(node["const"])
    )
    variants = next((k for k in ("anyOf", "oneOf", "allOf") if isinstance(node.get(k), list)), None)
    if variants is not None:
        for i, sub in enumerate(node[variants]):
            yield from _strict_nodes(sub, (*at, variants, i))
    elif not literal and "type" not in node:
        yield (
            at,
            "judge-schema-not-strict",
            f"{subject(at)} has no 'type', which strict structured outputs need; add one "
            "(e.g. type: string), or an 'enum', 'const' or 'anyOf'",
        )
        return
    if literal:
        return
    kind = node.get("type")
    props = node.get("properties")
    if kind == "object" and isinstance(props, Mapping):
        for name, sub in props.items():
            yield from _strict_nodes(sub, (*at, "properties", name))
    if kind == "array" and "items" in node:
        yield from _strict_nodes(node["items"], (*at, "items"))


# -- helpers --------------------------------------------------------------------------------------


def _plain(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _subschemas(node: Mapping[str, Any]) -> Iterator[tuple[NodePath, Any]]:
    """Each subschema directly inside a schema node, with its path from the node."""
    for key in _ONE:
        if key in node:
            yield (key,), node[key]
    for key in _MANY:
        items = node.get(key)
        if isinstance(items, list):
            for i, item in enumerate(items):
                yield (key, i), item
    for key in _NAMED:
        named = node.get(key)
        if isinstance(named, Mapping):
            for name, item in named.items():
                yield (key, name), item


def _walk(node: Any, path: NodePath) -> Iterator[tuple[NodePath, Mapping[str, Any]]]:
    if isinstance(node, Mapping):
        yield path, node
        for sub_path, sub in _subschemas(node):
            yield from _walk(sub, (*path, *sub_path))


def _ref_values(schema: Mapping[str, Any], path: NodePath) -> Iterator[tuple[NodePath, str]]:
    for where, node in _walk(schema, path):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield where, ref


def _nested_ids(schema: Mapping[str, Any]) -> bool:
    return any("$id" in node for where, node in _walk(schema, ()) if where)


def _anchors(schema: Mapping[str, Any]) -> Iterator[str]:
    for _, node in _walk(schema, ()):
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                yield node[key]


def _resolves(schema: Mapping[str, Any], fragment: str, anchors: set[str]) -> bool:
    """Whether `#fragment` names a node: a JSON pointer (`/a/b`), an anchor, or the root."""
    from urllib.parse import unquote

    fragment = unquote(fragment)
    if not fragment:
        return True
    if not fragment.startswith("/"):
        return fragment in anchors
    node: Any = schema
    for token in fragment[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True
