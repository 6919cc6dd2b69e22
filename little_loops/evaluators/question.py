"""What one judge model is asked: the system prompt and user message for a resolved call,
the key that names the question (cache and cassette), and its record for `ll judge explain`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from little_loops.model.loop import NO_TEMPERATURE, Evaluate
from little_loops.record.events import JudgeAsked

from .answer import Call
from .cache import key_of
from .judge_input import JSON_INSTRUCTION, TOOL_INSTRUCTION, build_user_message, system_prompt

# Sampling temperature when the judge sets none: 0 (the same output gets the same verdict);
# with `samples` above 1, 1.0, so the samples can differ and the vote means something.
DEFAULT_TEMPERATURE = 0.0
SAMPLING_TEMPERATURE = 1.0


# Judges that take no temperature: the Anthropic Messages API version current SDKs speak
# (2026-10-21) refuses sampling parameters with a 400, even 1.0, and the claude CLI has no
# such flag. Their answers are made repeatable by the cache and cassettes instead.
def temperature_of(spec: Evaluate, provider: str) -> float | None:
    """The temperature sent to the judge; None when its provider takes none."""
    if provider in NO_TEMPERATURE:
        return None
    if spec.temperature is not None:
        return spec.temperature
    return SAMPLING_TEMPERATURE if spec.samples > 1 else DEFAULT_TEMPERATURE


@dataclass(frozen=True)
class Question:
    """One model's question: the texts sent, and the key naming them."""

    call: Call
    system: str
    user: str
    key: str  # sha256 of everything that can change the answer (not min_confidence)
    examples: int

    def asked(self, *, cached: bool) -> JudgeAsked:
        """The `judge_request` event (step and state are filled in by the runner)."""
        call = self.call
        size = len(self.system) + len(self.user) + len(_dumps(call.schema))
        return JudgeAsked(
            model=call.model,
            provider=call.provider,
            temperature=call.temperature,
            max_tokens=call.max_tokens,
            system=self.system,
            user=self.user,
            schema=sent_schema(call),
            examples=self.examples,
            est_input_tokens=-(-size // 4),
            cached=cached,
        )


def question(
    call: Call,
    spec: Evaluate,
    prompt: str,
    stdout: str,
    stderr: str,
    prior: str | None,
    reference: str | None,
) -> Question:
    """The question `call`'s model is asked about one output."""
    user = build_user_message(
        prompt,
        stdout,
        stderr,
        call.max_output_chars,
        prior,
        examples=spec.examples,
        reference=reference,
    )
    system = system_prompt(call.schema) + (
        TOOL_INSTRUCTION
        if call.provider in ("anthropic", "claude")
        else JSON_INSTRUCTION.format(schema=json.dumps(call.schema, separators=(",", ":")))
    )
    key = key_of(
        {
            "provider": call.provider,
            "model": call.target,
            "endpoint": call.endpoint,
            "system": system,
            "user": user,
            "schema": call.schema,
            "max_tokens": call.max_tokens,
            "temperature": call.temperature,
        }
    )
    return Question(call, system, user, key, len(spec.examples))  # schema order kept: reason first


def sent_schema(call: Call) -> Any:
    """The answer schema as the provider sends it: strict judges get it transformed (the
    transform is our own and cheap); one it cannot send is shown as written."""
    from ..providers.strict import StrictProblem, anthropic_schema, openai_schema

    if call.provider == "claude":
        return call.schema
    try:
        return (anthropic_schema if call.provider == "anthropic" else openai_schema)(call.schema)
    except StrictProblem:
        return call.schema


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
