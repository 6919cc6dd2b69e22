"""What a judge's reply means: the resolved call, and its answer checked into a sample.

A provider hands back a `JudgeReply`; `interpret` turns it into a `Sample` (a verdict with its
details) or verdict `error` with a specific flag: out of tokens, a refusal, no answer, an
answer that does not match the schema. Nothing here talks to a provider.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from little_loops.model.details import Details, Json

from .votes import Sample

if TYPE_CHECKING:
    from ..providers import JudgeReply


@dataclass(frozen=True)
class Call:
    """One evaluator's settings, resolved."""

    provider: str
    target: str  # the provider's own model id
    endpoint: str  # ollama: the server's base URL; else ""
    model: str  # as written: for details and keys
    max_tokens: int
    timeout: float
    min_confidence: float
    max_output_chars: int
    schema: Mapping[str, Any]
    enum: tuple[str, ...]
    temperature: float | None = None  # None: not sent (claude://)


def interpret(call: Call, reply: JudgeReply) -> Sample:
    """What a provider's reply means: a sample with its verdict, or `error` saying why."""
    from ..providers import prices
    from . import parse

    base: dict[str, Json] = {
        "provider": call.provider,
        "model": reply.model or call.target,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
        "attempts": reply.attempts,
    }
    if reply.extra.get("temperature_dropped"):
        base["temperature_dropped"] = True  # the model refused our temperature; sent without
    if reply.cost_usd is not None:
        base["cost_usd"], base["cost_known"] = reply.cost_usd, True
    else:
        base["cost_usd"], base["cost_known"] = prices.cost_usd(
            reply.model or call.target, reply.input_tokens, reply.output_tokens
        )
    cost = base["cost_usd"]
    if not isinstance(cost, int | float) or not math.isfinite(cost) or cost < 0:
        # A NaN or negative cost would silently disable max_cost_usd: count it as unknown.
        base["cost_usd"], base["cost_known"] = 0.0, False
        base["cost_warning"] = f"the judge reported an invalid cost ({cost!r}); counted as 0"
    if reply.stop_reason in ("max_tokens", "length"):
        return error(
            f"the judge ran out of max_tokens ({call.max_tokens}) before finishing its "
            "answer; raise max_tokens",
            max_tokens=True,
            stop_reason=reply.stop_reason,
            raw=reply.text or (_raw(reply.answer) if reply.answer else None),
            **base,
        )
    if reply.stop_reason in ("refusal", "content_filter") or reply.extra.get("refusal"):
        said = reply.extra.get("refusal") or reply.text
        return error(
            "the judge refused to answer"
            + (f": {parse.preview(str(said))!r}" if said else f" ({reply.stop_reason})"),
            refusal=True,
            stop_reason=reply.stop_reason,
            raw=reply.text or None,
            **base,
        )
    answer: Mapping[str, Any] | None = reply.answer
    base["lenient"] = False  # True: read from the reply's text, not a tool call / structured
    if answer is None and reply.text:
        found = parse.extract(reply.text, lambda obj: check(call, plain(call, obj)) is None)
        verdicts = list(dict.fromkeys(str(obj.get("verdict")) for obj in found))
        if len(verdicts) > 1:
            return error(
                f"the judge's reply holds answers with different verdicts ({', '.join(verdicts)})"
                f", so it cannot be read either way; its reply: {parse.preview(reply.text)!r}",
                ambiguous_answer=True,
                raw=reply.text,
                stop_reason=reply.stop_reason,
                **base,
            )
        if found:
            answer, base["lenient"] = plain(call, found[-1]), True
        else:
            tried = [o for o in parse.candidates(reply.text) if "verdict" in o]
            if tried:  # an answer was given, but not one the schema takes: say why
                problem = check(call, plain(call, tried[-1]))
                return error(
                    f"the judge's answer does not match the schema: {problem}",
                    invalid_answer=True,
                    raw=reply.text,
                    **base,
                )
    if answer is None:
        flag = {
            "anthropic": "no_tool_call",
            "claude": "no_structured_output",
        }.get(call.provider, "invalid_answer")
        what = {"no_tool_call": "did not call the evaluate tool"}.get(
            flag, "gave no answer matching the schema"
        )
        return error(
            f"the judge {what}; its reply: {parse.preview(reply.text) or '(empty)'!r}",
            **{flag: True},
            raw=reply.text,
            stop_reason=reply.stop_reason,
            **base,
        )
    problem = check(call, answer)
    if problem is not None:
        return error(
            f"the judge's answer does not match the schema: {problem}",
            invalid_answer=True,
            raw=_raw(answer),
            **base,
            **_unknown_verdict(answer, call.enum),
        )
    confidence, scale = read_confidence(answer.get("confidence"))
    details: dict[str, Json] = {
        "confidence": confidence,
        "reason": str(answer.get("reason") or ""),
        "raw": _raw(answer),
        **base,
    }
    if scale is not None:
        details["confidence_rescaled"] = {
            "given": answer.get("confidence"),
            "scale": scale,
            "read_as": confidence,
        }
    return Sample(str(answer["verdict"]), Details(details))


def plain(call: Call, answer: Mapping[str, Any]) -> Mapping[str, Any]:
    """OpenAI strict answers carry nulls for optional properties: drop them."""
    if call.provider in ("openai", "ollama"):
        from ..providers.strict import drop_optional_nulls

        plain: Mapping[str, Any] = drop_optional_nulls(answer, call.schema)
        return plain
    return answer


def check(call: Call, answer: Mapping[str, Any]) -> str | None:
    """Why `answer` is not acceptable, or None. Confidence is read on its scale first."""
    verdict = answer.get("verdict")
    if not isinstance(verdict, str) or verdict not in call.enum:
        return f"verdict {verdict!r} is not one of {', '.join(call.enum)}"
    conf = answer.get("confidence")
    if conf is not None and (
        isinstance(conf, bool) or not isinstance(conf, int | float) or math.isnan(conf)
    ):
        return f"confidence {conf!r} is not a number"
    if conf is not None and not 0 <= conf <= MAX_CONFIDENCE_SCALE:
        return (
            f"confidence {conf!r} is on no scale the judge reads (0 to 1, tenths up to 10, "
            f"a percentage up to {MAX_CONFIDENCE_SCALE})"
        )
    checked = dict(answer)
    if conf is not None:
        checked["confidence"] = read_confidence(conf)[0]
    validator = _validator(_dumps(call.schema))
    problem = next(iter(validator.iter_errors(checked)), None)
    if problem is None:
        return None
    where = "/".join(str(p) for p in problem.absolute_path)
    return f"{where + ': ' if where else ''}{problem.message}"


@functools.lru_cache(maxsize=64)
def _validator(schema_json: str) -> Any:
    """A compiled validator per schema (keyed by its canonical JSON), built once per process."""
    import json

    import jsonschema

    schema = json.loads(schema_json)
    return jsonschema.validators.validator_for(schema)(schema)


def error(message: str, **flags: Json) -> Sample:
    details: dict[str, Json] = {"confidence": 0.0, "reason": message, "raw": None}
    details.update(flags)
    details["error"] = message
    return Sample("error", Details(details))


MAX_RAW_DEPTH = 32


def _raw(answer: Mapping[str, Any]) -> Json:
    """The answer for `details.raw`, unless it nests too deep to serialise safely."""
    stack: list[tuple[Any, int]] = [(answer, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_RAW_DEPTH:
            return f"(an answer nested deeper than {MAX_RAW_DEPTH} levels; not kept)"
        if isinstance(value, Mapping):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list | tuple):
            stack.extend((v, depth + 1) for v in value)
    return dict(answer)


def _unknown_verdict(answer: Mapping[str, Any], enum: tuple[str, ...]) -> dict[str, Json]:
    verdict = answer.get("verdict")
    return {} if verdict in enum else {"unknown_verdict": verdict}


MAX_CONFIDENCE_SCALE = 100


def read_confidence(value: object) -> tuple[float, int | None]:
    """(confidence 0..1, the scale it was given on when not 0..1). Missing counts as 1.0.

    A judge answering off the 0..1 scale is read on the scale it most plausibly uses: up to
    10 as tenths (7 -> 0.7), up to 100 as a percentage (30 -> 0.30). `check` has refused
    anything else (negative, over 100, not a number) as an invalid answer.
    """
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return 1.0, None
    number = float(value)
    if 0.0 <= number <= 1.0:
        return number, None
    scale = 10 if number <= 10 else MAX_CONFIDENCE_SCALE
    return round(min(1.0, max(0.0, number / scale)), 6), scale


def _dumps(value: object) -> str:
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"))
