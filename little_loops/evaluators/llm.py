"""The `llm_structured` evaluator: ask a judge model for a verdict on an action's output.

The judge never raises for a bad answer or a failed request: every failure is verdict
`error` with a specific flag in `details` (SPEC section 5). Providers, and their SDKs, are
imported only when a judgement is actually requested, so `ll validate` stays fast.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from little_loops.model.details import Details, DetailsError, Json
from little_loops.model.loop import (
    DEFAULT_JUDGE_MODEL,
    DEFAULT_JUDGE_PROMPT,
    DEFAULT_SCHEMA,
    UNCERTAIN_SUFFIX,
    Evaluate,
    LlmDefaults,
    Verdict,
)
from little_loops.record.events import (
    JudgeFailOpen,
    JudgeRetry,
    JudgeStart,
    RunEvent,
)

from .answer import Call, error, interpret
from .cache import Cassette, VerdictCache, key_of, thaw
from .configs import judge_verdicts
from .contract import EvalInput
from .judge_input import render_prompt
from .question import Question, question, temperature_of
from .votes import Sample, aggregate, panel

if TYPE_CHECKING:
    from ..providers import JudgeRequest, Provider, ProviderError, RetryPolicy

Emit = Callable[[RunEvent], None]  # judge_start, judge_retry, judge_fail_open

# The flags that say why a judgement failed (docs/judge.md, "When the judge fails"): what a
# `judge_fail_open` event lists, never bookkeeping such as cost_known or replayed.
ERROR_FLAGS = frozenset(
    {
        "ambiguous_answer", "api_error", "cli_error", "config_error", "connection_error",
        "auth_error", "internal_error", "invalid_answer", "invalid_response", "loop_timeout",
        "max_tokens",
        "no_api_key", "no_structured_output", "no_tool_call", "not_found", "overloaded",
        "rate_limited", "refusal", "replay_miss", "schema_error", "timeout",
    }
)  # fmt: skip


@dataclass(frozen=True)
class JudgeSettings:
    """Run-wide judge settings the runner builds from the loop, the command line and env.

    Model order for one evaluator: the state's `model`, the loop's `llm.model`,
    `model_override` (`--model` / `LL_MODEL`), then DEFAULT_JUDGE_MODEL.
    """

    model_override: str | None = None
    llm: LlmDefaults = field(default_factory=LlmDefaults)
    cache_dir: Path | None = None  # None: no cache (--no-cache)
    record: Path | None = None  # --record FILE: append every exchange (JSONL)
    replay: Path | None = None  # --replay FILE: answer from a recording, never the network
    claude: tuple[str, ...] = ("claude",)
    retry: RetryPolicy | None = None  # None: providers.RetryPolicy()
    jobs: int = 1  # requests in flight at once: samples and panel members asked in parallel


class JudgeSession:
    """Per-run judge state: lazily created provider clients, the cache, the cassette."""

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        emit: Emit | None = None,
        env: Mapping[str, str] | None = None,
        on_cost: Callable[[float], None] | None = None,
    ) -> None:
        self.settings = settings
        self._emit = emit
        self._on_cost = on_cost  # told each answer's cost as it arrives, before the verdict
        self._env: Mapping[str, str] = env if env is not None else os.environ
        self._providers: dict[str, Provider] = {}
        self._lock = threading.Lock()  # provider creation, when judgements run in parallel
        # At most `jobs` requests in flight, however many cases, samples and members ask.
        self._slots = threading.BoundedSemaphore(max(1, settings.jobs))
        self._cache = VerdictCache(settings.cache_dir) if settings.cache_dir else None
        self._record = Cassette(settings.record) if settings.record else None
        self._replay = Cassette(settings.replay) if settings.replay else None

    def close(self) -> None:
        """Close every provider client this run opened."""
        providers, self._providers = self._providers, {}
        for provider in providers.values():
            provider.close()

    def emit(self, event: RunEvent) -> None:
        if self._emit is not None:
            self._emit(event)

    # -- one evaluation -------------------------------------------------------------------

    def judge(self, spec: Evaluate, inp: EvalInput) -> Verdict:
        """Judge one action result; never raises except UndefinedVariable from `inp.resolve`."""
        started = time.perf_counter()
        llm = self.settings.llm
        max_chars = (
            spec.max_output_chars if spec.max_output_chars is not None else llm.max_output_chars
        )
        prompt = render_prompt(
            spec.prompt or DEFAULT_JUDGE_PROMPT, inp.resolve, max_chars, inp.program
        )
        text = inp.resolve(spec.source) if spec.source is not None else inp.text
        stderr = "" if spec.source is not None else inp.stderr
        reference = inp.resolve(spec.reference) if spec.reference is not None else None
        try:
            return self._judge(spec, inp, prompt, text, stderr, reference, started)
        except Exception as exc:  # the judge must never crash the loop
            return self._finish(
                spec,
                inp,
                error(
                    f"judge failed unexpectedly: {type(exc).__name__}: {_short(str(exc), 200)}",
                    internal_error=True,
                ),
                started,
                cached=False,
            )

    def _judge(
        self,
        spec: Evaluate,
        inp: EvalInput,
        prompt: str,
        text: str,
        stderr: str,
        reference: str | None,
        started: float,
    ) -> Verdict:
        try:
            calls = [self._resolve(spec, model) for model in (spec.models or (None,))]
        except ValueError as exc:
            return self._finish(
                spec, inp, error(str(exc), config_error=True), started, cached=False
            )
        prior = inp.prior_reason if spec.prior_reason else None
        asks = [question(c, spec, prompt, text, stderr, prior, reference) for c in calls]
        # Each question's key names it (cassettes use it per sample); the cache key adds what
        # turns answers into a verdict, so tuning min_confidence needs no re-record.
        key = key_of(
            {
                "request": asks[0].key if len(asks) == 1 else [a.key for a in asks],
                "samples": spec.samples,
                "min_confidence": calls[0].min_confidence,
                "uncertain_suffix": spec.uncertain_suffix,
                # A verdict from one server is never served for another (cassettes, which
                # replay answers whatever the server, are keyed by the question alone).
                "servers": [self._server(c) for c in calls],
            }
        )
        hit = None
        # `--record` asks the model every time: a verdict from the cache has no exchange to
        # write, and a cassette recorded after a cached run would be empty.
        if self._cache is not None and self._replay is None and self._record is None:
            hit = self._cache.get(key)
        for ask in asks:  # what was asked, for `ll judge explain` (redacted like every event)
            self.emit(ask.asked(cached=hit is not None))
        if hit is not None:
            return Verdict(hit[0], hit[1].with_(cached=True, cost_usd=0.0, latency_ms=_ms(started)))
        # Listeners show a spinner or a heartbeat while the model thinks; a cache hit is instant.
        self.emit(JudgeStart(model=", ".join(c.model for c in calls), samples=max(1, spec.samples)))
        votes = self._each(lambda ask: self._ask_all(ask, spec, inp, prompt), asks)
        sample = (
            votes[0] if not spec.models else panel(votes, [c.model for c in calls], calls[0].enum)
        )
        verdict = self._finish(spec, inp, sample, started, cached=False)
        if (
            self._cache is not None
            and self._replay is None
            and verdict.verdict != "error"
            and not verdict.details.fail_open
        ):
            self._cache.put(key, verdict.verdict, verdict.details)
        return verdict

    def _ask_all(self, ask: Question, spec: Evaluate, inp: EvalInput, prompt: str) -> Sample:
        """Every sample of one model's question, and their majority."""
        from ..providers import JudgeRequest

        call = ask.call
        request = JudgeRequest(
            model=call.target,
            system=ask.system,
            user=ask.user,
            schema=call.schema,
            max_tokens=call.max_tokens,
            timeout=call.timeout,
            deadline=inp.deadline,
            temperature=call.temperature,
        )
        samples = self._each(
            lambda i: self._sample(
                call, request, key_of({"key": ask.key, "sample": i}), inp.state, prompt, i
            ),
            list(range(max(1, spec.samples))),
        )
        return aggregate(samples, call.enum)

    def _each(self, work: Callable[[Any], Sample], items: list[Any]) -> list[Sample]:
        """`work` on every item, in order; in parallel threads when `jobs` allows more than
        one request at once (each request still waits for one of the `jobs` slots)."""
        if self.settings.jobs <= 1 or len(items) <= 1:
            return [work(item) for item in items]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="ll-judge") as pool:
            return list(pool.map(work, items))

    def _resolve(self, spec: Evaluate, panel_model: str | None = None) -> Call:
        from ..providers import ollama_target, split_model

        llm = self.settings.llm
        model = (
            panel_model
            or spec.model
            or llm.model
            or self.settings.model_override
            or DEFAULT_JUDGE_MODEL
        )
        provider, target = split_model(model)
        endpoint = ""
        if provider == "ollama":
            endpoint, target = ollama_target(target)
        # Thawed once here: everything after serialises it (keys, request bodies, argv).
        schema = thaw(spec.schema if spec.schema is not None else DEFAULT_SCHEMA)
        return Call(
            provider=provider,
            target=target,
            endpoint=endpoint,
            model=model,
            max_tokens=spec.max_tokens if spec.max_tokens is not None else llm.max_tokens,
            timeout=spec.timeout if spec.timeout is not None else llm.timeout,
            min_confidence=(
                spec.min_confidence if spec.min_confidence is not None else llm.min_confidence
            ),
            max_output_chars=(
                spec.max_output_chars if spec.max_output_chars is not None else llm.max_output_chars
            ),
            schema=schema,
            enum=judge_verdicts(spec),
            temperature=temperature_of(spec, provider),
        )

    def _sample(
        self, call: Call, request: JudgeRequest, key: str, state: str, prompt: str, index: int
    ) -> Sample:
        if self._replay is not None:
            entry = self._replay.take(key)
            response = entry.get("response") if entry else None
            if not isinstance(response, Mapping):
                where = "" if self._replay.exists() else " (the file does not exist)"
                return error(
                    f"no recorded judge answer in {self._replay.path}{where} for state "
                    f"'{state}' (prompt {_short(prompt)!r}, sample {index + 1}); re-record "
                    "with --record",
                    replay_miss=True,
                    cassette=str(self._replay.path),
                )
            try:
                recorded = Details.parse(
                    response.get("details") or {},
                    f"{self._replay.path}: the recorded answer for state '{state}' (sample "
                    f"{index + 1}), its details",
                )
            except DetailsError as err:
                return error(
                    f"{err}; re-record with --record",
                    replay_miss=True,
                    cassette=str(self._replay.path),
                )
            # Nothing is spent on a replayed answer; the recorded cost stays for reference.
            recorded = recorded.with_(
                recorded_cost_usd=recorded.get("cost_usd", 0.0), cost_usd=0.0, replayed=True
            )
            return Sample(str(response.get("verdict")), recorded)
        with self._slots:
            started = time.perf_counter()
            sample = self._ask(call, request)
        sample = Sample(sample.verdict, sample.details.with_(latency_ms=_ms(started)))
        if self._on_cost is not None:
            self._on_cost(sample.details.cost_usd)
        if self._record is not None:
            self._record.append(
                {
                    "key": key,
                    "state": state,
                    "sample": index,
                    "request": {
                        "provider": call.provider,
                        "model": call.target,
                        "prompt": prompt,
                        "user_sha256": key_of({"user": request.user}),
                        "user_chars": len(request.user),
                        "max_tokens": call.max_tokens,
                        "temperature": call.temperature,
                    },
                    "response": {"verdict": sample.verdict, "details": sample.details.to_json()},
                }
            )
        return sample

    def _ask(self, call: Call, request: JudgeRequest) -> Sample:
        from ..providers import ProviderError, loop_timeout

        try:
            if request.deadline is not None and time.monotonic() >= request.deadline:
                raise loop_timeout("starting")  # no request at all: the run is over
            reply = self._provider(call).complete(request)
        except ProviderError as err:
            message, flags = err.message, err.flags
            passed = request.deadline is not None and time.monotonic() >= request.deadline
            if passed and not flags.get("loop_timeout"):
                # Whatever the provider saw (a timeout, a refused wait), the loop's timeout
                # is what ended this judgement; the runner ends the run with outcome timeout.
                cut = loop_timeout("answering")
                message, flags = cut.message, {**flags, **cut.flags}
            return error(message, **flags, provider=call.provider, model=call.model)
        except Exception as exc:  # the judge must never crash the loop
            return error(
                f"judge failed unexpectedly: {type(exc).__name__}: {exc}",
                internal_error=True,
                provider=call.provider,
                model=call.model,
            )
        return interpret(call, reply)

    def _server(self, call: Call) -> str:
        """The base URL `call`'s provider sends to ("" for the claude CLI)."""
        from ..providers import DEFAULT_OPENAI_BASE_URL

        if call.provider == "anthropic":
            from ..providers.anthropic import DEFAULT_BASE_URL

            return self._env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        if call.provider == "openai":
            return self._env.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
        return call.endpoint

    def _provider(self, call: Call) -> Provider:
        with self._lock:
            return self._open_provider(call)

    def _open_provider(self, call: Call) -> Provider:
        name = call.provider
        slot = f"{name} {call.endpoint}"
        cached = self._providers.get(slot)
        if cached is not None:
            return cached
        provider: Provider
        from ..providers import RetryPolicy

        policy = self.settings.retry or RetryPolicy()
        if name == "anthropic":
            from ..providers.anthropic import AnthropicProvider

            provider = AnthropicProvider(self._env, policy=policy, on_retry=self._on_retry)
        elif name == "claude":
            from ..providers.claude_cli import ClaudeCliProvider

            provider = ClaudeCliProvider(self.settings.claude, self._env)
        else:
            from ..providers import DEFAULT_OPENAI_BASE_URL
            from ..providers.openai_compat import OpenAICompatProvider

            if name == "ollama":
                base, key = call.endpoint, None
            else:
                base = self._env.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
                key = self._env.get("OPENAI_API_KEY") or None
            provider = OpenAICompatProvider(name, base, key, policy=policy, on_retry=self._on_retry)
        self._providers[slot] = provider
        return provider

    def _on_retry(self, attempt: int, delay: float, err: ProviderError) -> None:
        status = Details(err.flags).status
        self.emit(
            JudgeRetry(attempt=attempt, delay_s=round(delay, 3), status=status, error=err.message)
        )

    def _finish(
        self, spec: Evaluate, inp: EvalInput, sample: Sample, started: float, *, cached: bool
    ) -> Verdict:
        """Confidence threshold, `_uncertain`, fail_open, and the details every verdict has."""
        llm = self.settings.llm
        min_conf = spec.min_confidence if spec.min_confidence is not None else llm.min_confidence
        details: dict[str, Json] = {
            "confidence": 0.0,
            "reason": "",
            "raw": None,
            "model": "",
            "provider": "",
            "usage": {"input_tokens": 0, "output_tokens": 0},
            "cost_usd": 0.0,
            "cost_known": False,
            "lenient": False,
            **sample.details,
            "latency_ms": _ms(started),
            "cached": cached,
        }
        verdict = sample.verdict
        confident = verdict != "error" and (Details(details).confidence or 0.0) >= min_conf
        details["confident"] = confident
        if verdict != "error":
            if spec.uncertain_suffix and not confident:
                verdict += UNCERTAIN_SUFFIX
            return Verdict(verdict, Details(details))
        if not spec.fail_open:
            return Verdict("error", Details(details))
        failed = Details(details).with_(fail_open=True, confidence=0.0, confident=False)
        flags = tuple(flag for flag in failed.flags if flag in ERROR_FLAGS)
        self.emit(JudgeFailOpen(error=failed.error or "", flags=flags))
        return Verdict("success", failed)


def evaluate(spec: Evaluate, inp: EvalInput) -> Verdict:
    """The `llm_structured` evaluator (registry entry): uses the run's session or a throwaway."""
    if inp.judge is not None:
        return inp.judge.judge(spec, inp)
    session = JudgeSession(JudgeSettings())
    try:
        return session.judge(spec, inp)
    finally:
        session.close()


# -- helpers --------------------------------------------------------------------------------


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
