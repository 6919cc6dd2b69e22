"""Warm the judge before the run needs it: start the SDK import when a judged run begins.

Importing the Anthropic SDK takes about 2 s. A run whose judges need it starts the import in
a background thread as it begins, so the import overlaps the first actions and the first
judged step pays only its round trip; the judge waits for it within its own timeout. A run
without judges, or whose judges need no SDK (`claude://`, `--replay`), never imports it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from little_loops.model.loop import (
    DEFAULT_JUDGE_MODEL,
    Evaluate,
    Loop,
)

# Providers that import the SDK: only the Anthropic API itself. The strict-schema transform is
# our own (providers/strict.py); `claude://` runs the Claude Code CLI.
SDK_PROVIDERS = frozenset({"anthropic"})


def judge_models(loop: Loop, model_override: str | None) -> set[str]:
    """The judge model of every `llm_structured` evaluator of `loop`, resolved as the judge
    resolves it: the state's `model`, the loop's `llm.model`, the override, the default."""
    fallback = loop.llm.model or model_override or DEFAULT_JUDGE_MODEL
    return {
        model
        for state in loop.states.values()
        for spec in _evaluators(state.evaluate)
        if spec.type == "llm_structured"
        for model in (spec.models or (spec.model or fallback,))
    }


def needs_sdk(loop: Loop, model_override: str | None, replay: Path | None) -> bool:
    """Whether a run of `loop` will import the Anthropic SDK for its judges."""
    if replay is not None:  # answers come from the recording, never from a provider
        return False
    for model in judge_models(loop, model_override):
        from ..providers import split_model  # only with a judge: it is not small

        try:
            provider, _ = split_model(model)
        except ValueError:  # the judge reports it as a config error; nothing to warm
            continue
        if provider in SDK_PROVIDERS:
            return True
    return False


def warm_judges(loop: Loop, model_override: str | None, replay: Path | None) -> bool:
    """Start the SDK import in the background when the run will need it; True if it did."""
    if not needs_sdk(loop, model_override, replay):
        return False
    from ..providers import prefetch_sdk

    prefetch_sdk()
    return True


def _evaluators(spec: Evaluate | None) -> Iterator[Evaluate]:
    if spec is None:
        return
    yield spec
    for sub in spec.of:
        yield from _evaluators(sub)


def no_key_hint(
    loop: Loop, model_override: str | None, replay: Path | None, env: dict[str, str]
) -> str | None:
    """One line for a run whose judge needs the Anthropic API and finds no key: how to try
    the loop without one. None when a key is set, or no judge needs one."""
    if replay is not None or env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN"):
        return None
    for model in sorted(judge_models(loop, model_override)):
        from ..providers import split_model

        try:
            provider, _ = split_model(model)
        except ValueError:
            continue
        if provider == "anthropic":
            return (
                f"ll: no ANTHROPIC_API_KEY, so the judge ({model}) will give verdict error; "
                "without a key: --simulate SCRIPT, --replay CASSETTE, or a local model "
                "(--model ollama://localhost:11434/MODEL); see docs/judge.md#without-an-api-key"
            )
    return None
