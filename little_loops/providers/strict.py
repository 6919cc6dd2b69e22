"""Answer schemas as strict structured-output endpoints accept them.

Strict tool use (Anthropic) and strict `response_format` (OpenAI) refuse numeric bounds,
string-length bounds, array sizes above 1 and objects without `additionalProperties: false`.
The Anthropic SDK's `transform_schema` (anthropic >= 0.87, which keeps `enum`) moves such
constraints into descriptions; OpenAI's strict mode also wants every property listed in
`required`, so optional properties become required-but-nullable, and the nulls are dropped
again before the answer is checked against the full schema. The judge always validates
answers locally against the schema as written.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def anthropic_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema for a `strict: true` tool. Raises ValueError when it cannot be expressed."""
    try:
        from anthropic.lib._parse._transform import transform_schema  # lazy: imports the SDK
    except ImportError as exc:
        raise ValueError(
            "the installed anthropic SDK has no transform_schema; upgrade it: "
            "pip install 'anthropic>=0.87'"
        ) from exc
    try:
        result: dict[str, Any] = transform_schema(copy.deepcopy(dict(schema)))
    except (AssertionError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"the schema cannot be sent to a strict judge: {exc}") from exc
    return result


def openai_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema for `response_format` json_schema with `strict: true`."""
    result: dict[str, Any] = _all_required(anthropic_schema(schema))
    return result


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
