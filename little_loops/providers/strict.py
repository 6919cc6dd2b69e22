"""Answer schemas as strict structured-output endpoints accept them, and the limits they set.

Strict tool use (Anthropic) and strict `response_format` (OpenAI) refuse numeric bounds,
string-length bounds, array sizes above 1 and objects without `additionalProperties: false`.
`to_strict` rewrites a schema the way the Anthropic SDK's `transform_schema` does (the
constraints an endpoint refuses are moved into the description, `additionalProperties` is set
to false), without importing the SDK: `ll validate` runs the same transform, and an
`openai://` judge never loads the Anthropic SDK. Two shapes the SDK's transform cannot take are
normalised first: a list of types (`type: [string, "null"]`) becomes an `anyOf` of one type
each, and a draft-07 `definitions` block becomes `$defs` with its `$ref`s rewritten. A
`verdict` the schema leaves optional is sent as required.

OpenAI's strict mode also wants every property listed in `required`, so optional properties
become required-but-nullable, and the nulls are dropped again before the answer is checked
against the full schema. The judge always validates answers locally against the schema as
written. `strict_limits` finds what the APIs document as refused even in a well-formed
schema: recursion, more than 24 optional properties or 16 union types, `allOf` with a `$ref`.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any

# Formats a strict string schema keeps; any other is only described to the model.
STRING_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
MAX_OPTIONAL = 24  # optional properties across a strict schema (the APIs' documented limit)
MAX_UNIONS = 16  # properties with a union type (anyOf, or a list of types)

Where = tuple[str | int, ...]


class StrictProblem(ValueError):
    """A schema a strict endpoint cannot take; `where` is the path inside the schema."""

    def __init__(self, where: Where, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.message = message


def anthropic_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema for a `strict: true` tool. Raises StrictProblem when it cannot be sent."""
    return copy.deepcopy(_anthropic(json.dumps(schema)))


def openai_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema for `response_format` json_schema with `strict: true`."""
    return copy.deepcopy(_openai(json.dumps(schema)))


@functools.lru_cache(maxsize=64)
def _openai(schema_json: str) -> dict[str, Any]:
    result: dict[str, Any] = _all_required(_anthropic(schema_json))
    return result


@functools.lru_cache(maxsize=64)
def _anthropic(schema_json: str) -> dict[str, Any]:
    """The transform, once per schema (keyed by its JSON, key order kept) in a process."""
    normal = normalise(json.loads(schema_json))
    problem = next(strict_limits(normal), None)
    if problem is not None:
        raise StrictProblem(*problem)
    return to_strict(_verdict_required(normal))


def _verdict_required(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with `verdict` required: an answer without one is verdict `error` anyway,
    so a strict endpoint is never allowed to leave it out."""
    props, required = schema.get("properties"), schema.get("required")
    if not isinstance(props, Mapping) or "verdict" not in props:
        return schema
    have = list(required) if isinstance(required, list) else []
    return schema if "verdict" in have else {**schema, "required": [*have, "verdict"]}


# -- normalising: type lists, draft-07 definitions ------------------------------------------


def normalise(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` with `definitions` moved to `$defs` and every list of types made an `anyOf`."""
    node = dict(schema)
    if isinstance(node.get("definitions"), Mapping):
        defs = dict(node.pop("definitions"))
        node["$defs"] = {**defs, **dict(node.get("$defs") or {})}
        node = _rewrite_refs(node)
    out: dict[str, Any] = _split_types(node)
    return out


def _rewrite_refs(node: Any) -> Any:
    if isinstance(node, list):
        return [_rewrite_refs(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out = {key: _rewrite_refs(value) for key, value in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/definitions/"):
        out["$ref"] = "#/$defs/" + ref[len("#/definitions/") :]
    return out


_SUBSCHEMA_MAPS = ("properties", "$defs")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf")


def _split_types(node: Any) -> Any:
    if not isinstance(node, Mapping):
        return node
    out = dict(node)
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), Mapping):
            out[key] = {name: _split_types(sub) for name, sub in out[key].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_split_types(sub) for sub in out[key]]
    if isinstance(out.get("items"), Mapping):
        out["items"] = _split_types(out["items"])
    types = out.get("type")
    if not isinstance(types, list):
        return out
    if len(types) == 1:
        out["type"] = types[0]
        return out
    shared = {k: out.pop(k) for k in ("description", "title") if k in out}
    del out["type"]
    return {**shared, "anyOf": [{**_for_type(out, kind), "type": kind} for kind in types]}


# Keywords that only mean something for one JSON type: kept in that type's variant only.
_TYPE_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties"),
    "array": ("items", "minItems", "maxItems", "uniqueItems"),
    "string": ("format", "minLength", "maxLength", "pattern"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}
_TYPE_KEYWORDS["integer"] = _TYPE_KEYWORDS["number"]


def _for_type(node: Mapping[str, Any], kind: object) -> dict[str, Any]:
    owned = {k for keys in _TYPE_KEYWORDS.values() for k in keys}
    mine = set(_TYPE_KEYWORDS.get(kind, ())) if isinstance(kind, str) else set()
    return {k: v for k, v in node.items() if k not in owned or k in mine}


# -- the transform ----------------------------------------------------------------------------


def to_strict(schema: Mapping[str, Any], where: Where = ()) -> dict[str, Any]:
    """One (normalised) schema node as a strict endpoint takes it; StrictProblem if it cannot."""
    if not isinstance(schema, Mapping):
        raise StrictProblem(where, f"{_at(where)} is {schema!r}, not a schema (a mapping)")
    rest = dict(schema)
    out: dict[str, Any] = {}
    defs = rest.pop("$defs", None)
    if isinstance(defs, Mapping):
        out["$defs"] = {name: to_strict(sub, (*where, "$defs", name)) for name, sub in defs.items()}
    ref = rest.pop("$ref", None)
    if ref is not None:
        out["$ref"] = ref
        return out
    kind = rest.pop("type", None)
    variants = {key: rest.pop(key, None) for key in _SUBSCHEMA_LISTS}
    enum = rest.get("enum")
    if isinstance(enum, list) and enum and all(map(_plain, enum)):
        out["enum"] = list(rest.pop("enum"))
    if "const" in rest and _plain(rest["const"]):
        out["const"] = rest.pop("const")
    literal = "enum" in out or "const" in out
    if literal:
        kind = None
    chosen = next(((k, v) for k, v in variants.items() if isinstance(v, list)), None)
    if chosen is not None:
        key, subs = chosen
        out["allOf" if key == "allOf" else "anyOf"] = [
            to_strict(sub, (*where, key, i)) for i, sub in enumerate(subs)
        ]
    elif not literal:
        if kind is None:
            raise StrictProblem(
                where,
                f"{_at(where)} has no 'type', which strict structured outputs need; add one "
                "(e.g. type: string), or an 'enum', 'const' or 'anyOf'",
            )
        if kind not in ("object", "array", "string", "integer", "number", "boolean", "null"):
            raise StrictProblem(where, f"{_at(where)} has type {kind!r}, not a JSON type")
        out["type"] = kind
    for key in ("description", "title"):
        if key in rest:
            out[key] = rest.pop(key)
    if kind == "object":
        props = rest.pop("properties", {}) or {}
        out["properties"] = {
            name: to_strict(sub, (*where, "properties", name)) for name, sub in props.items()
        }
        rest.pop("additionalProperties", None)
        out["additionalProperties"] = False
        if "required" in rest:
            out["required"] = list(rest.pop("required"))
    elif kind == "string":
        fmt = rest.pop("format", None)
        if fmt in STRING_FORMATS:
            out["format"] = fmt
        elif fmt:
            rest["format"] = fmt  # described, like every other keyword it cannot take
    elif kind == "array":
        if "items" in rest:
            out["items"] = to_strict(rest.pop("items"), (*where, "items"))
        if rest.get("minItems") in (0, 1):
            out["minItems"] = rest.pop("minItems")
    if rest:  # what strict mode refuses is only described, so the model may still follow it
        said = ", ".join(f"{key}: {value}" for key, value in rest.items())
        before = out.get("description")
        out["description"] = (f"{before}\n\n" if before is not None else "") + "{" + said + "}"
    return out


# -- the documented limits --------------------------------------------------------------------


def strict_limits(schema: Mapping[str, Any]) -> Iterator[tuple[Where, str]]:
    """What a strict endpoint refuses in a (normalised) schema, each with where it is."""
    nodes = list(_nodes(schema, ()))
    for where, node in nodes:
        subs = node.get("allOf")
        if isinstance(subs, list):
            for i, sub in enumerate(subs):
                if isinstance(sub, Mapping) and "$ref" in sub:
                    yield (
                        (*where, "allOf", i),
                        f"{_at((*where, 'allOf', i))} is a $ref inside allOf, which strict "
                        "structured outputs refuse; write the definition's properties in place",
                    )
    cycle = _recursion(schema)
    if cycle is not None:
        yield (
            ("$defs", cycle[0]),
            f"'$defs.{cycle[0]}' refers to itself ({' -> '.join(cycle)}); strict structured "
            "outputs refuse recursive schemas: unroll it to a fixed depth",
        )
    optional = [
        (where, name)
        for where, node in nodes
        if isinstance(node.get("properties"), Mapping)
        for name in node["properties"]
        if name not in (node.get("required") or ())
    ]
    if len(optional) > MAX_OPTIONAL:
        yield (
            (),
            f"the schema has {len(optional)} optional properties; strict structured outputs "
            f"take at most {MAX_OPTIONAL}: list more of them under 'required'",
        )
    unions = [where for where, node in nodes if isinstance(node.get("anyOf"), list)]
    if len(unions) > MAX_UNIONS:
        yield (
            (),
            f"the schema has {len(unions)} union types (anyOf, oneOf or a list of types); "
            f"strict structured outputs take at most {MAX_UNIONS}",
        )


def _nodes(node: Any, where: Where) -> Iterator[tuple[Where, Mapping[str, Any]]]:
    if not isinstance(node, Mapping):
        return
    yield where, node
    for key in _SUBSCHEMA_MAPS:
        named = node.get(key)
        if isinstance(named, Mapping):
            for name, sub in named.items():
                yield from _nodes(sub, (*where, key, name))
    for key in (*_SUBSCHEMA_LISTS,):
        subs = node.get(key)
        if isinstance(subs, list):
            for i, sub in enumerate(subs):
                yield from _nodes(sub, (*where, key, i))
    if "items" in node:
        yield from _nodes(node["items"], (*where, "items"))


def _recursion(schema: Mapping[str, Any]) -> list[str] | None:
    """A cycle of `$defs` names that refer to one another, or None."""
    defs = schema.get("$defs")
    if not isinstance(defs, Mapping):
        return None
    refs = {
        name: {
            str(n["$ref"])[len("#/$defs/") :].split("/")[0]
            for _, n in _nodes(sub, ())
            if str(n.get("$ref", "")).startswith("#/$defs/")
        }
        for name, sub in defs.items()
    }

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        for nxt in sorted(refs.get(name, ())):
            found = visit(nxt, [*path, name])
            if found is not None:
                return found
        return None

    for start in refs:
        found = visit(start, [])
        if found is not None:
            return found
    return None


def _at(where: Where) -> str:
    if not where:
        return "the schema"
    return "'" + ".".join(str(p) for p in where) + "'"


def _plain(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


# -- OpenAI: every property required, optional ones nullable ---------------------------------


def _all_required(node: Any) -> Any:
    if isinstance(node, list):
        return [_all_required(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _all_required(value) for key, value in node.items()}
    enum = out.get("enum")
    if (
        "type" not in out
        and isinstance(enum, list)
        and enum
        and all(isinstance(v, str) for v in enum)
    ):
        out["type"] = "string"  # the transform drops it beside an enum; OpenAI wants a type
    props = out.get("properties")
    if out.get("type") == "object" and isinstance(props, dict):
        required = set(out.get("required") or ())
        out["properties"] = {
            name: prop if name in required else {"anyOf": [prop, {"type": "null"}]}
            for name, prop in props.items()
        }
        out["required"] = list(props)
    return out


def drop_optional_nulls(answer: Any, schema: Mapping[str, Any]) -> Any:
    """`answer` without the nulls a strict OpenAI answer puts in optional properties."""
    if not isinstance(answer, Mapping):
        return answer
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return dict(answer)
    required = set(schema.get("required") or ())
    out: dict[str, Any] = {}
    for name, value in answer.items():
        if value is None and name not in required:
            continue
        sub = props.get(name)
        out[name] = drop_optional_nulls(value, sub) if isinstance(sub, Mapping) else value
    return out
