"""OpenTelemetry export: a run as a trace, built from the run's events (an event listener).

The run is the root span; each step is a child span carrying its state, verdict and route;
each judge call is a grandchild span named and attributed after the OpenTelemetry GenAI
semantic conventions (`gen_ai.*`), with the cost as our own attribute. Spans take their start
and end times from when the events happen, so nothing in the runner knows about tracing.

The SDK (the optional extra `[otel]`) is imported only when export is asked for: `--otel`,
or the standard `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`. The
exporter itself reads the other standard variables (headers, timeout, protocol details).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from little_loops.model.details import Details
from little_loops.record.events import (
    ActionComplete,
    ActionStart,
    Evaluate,
    JudgeRetry,
    JudgeStart,
    LoopComplete,
    LoopStart,
    Retry,
    Route,
    RunEvent,
    StateEnter,
)

if TYPE_CHECKING:
    # The SDK's types, for the checker only: the optional extra is imported when export is
    # asked for, never by `ll run` without it.
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.trace import Span, SpanKind
    from opentelemetry.util.types import AttributeValue

# The [otel] extra's packages by name: the project itself is installed from a checkout or a
# wheel, never by name from the package index (README.md), so the hint names what to add.
INSTALL_HINT = (
    "pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http "
    "(the [otel] extra; from a checkout: pip install '.[otel]')"
)
ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
SCOPE = "little_loops"

# gen_ai.provider.name for each judge scheme; `claude://` asks Anthropic's models via the CLI.
GENAI_PROVIDERS = {
    "anthropic": "anthropic",
    "claude": "anthropic",
    "openai": "openai",
    "ollama": "ollama",
}


class OtelMissing(Exception):
    """Export was asked for, but the `[otel]` extra is not installed."""


def asked(flag: bool, env: Mapping[str, str]) -> bool:
    """Whether this run is to be exported: `--otel`, or an OTLP endpoint in the environment
    (unless `OTEL_SDK_DISABLED=true`, the standard switch that turns the SDK off)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return flag or any(env.get(name) for name in ENDPOINT_VARS)


def otlp_listener(env: Mapping[str, str]) -> TraceListener:
    """A listener exporting over OTLP/HTTP (protobuf). Raises OtelMissing without the extra."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise OtelMissing(
            f"OpenTelemetry export needs packages that are not installed ({exc.name}); "
            f"install them: {INSTALL_HINT}"
        ) from None
    from little_loops import __version__

    resource = Resource.create(
        {
            "service.name": env.get("OTEL_SERVICE_NAME") or "little-loops",
            "service.version": __version__,
        }
    )
    provider = TracerProvider(resource=resource)
    exporter = _Counted(OTLPSpanExporter(), endpoint(env))
    # Batched: a slow collector never slows a step; `close` flushes what is left.
    # _Counted has SpanExporter's methods without its base class (see there).
    provider.add_span_processor(BatchSpanProcessor(exporter))  # type: ignore[arg-type]
    # The exporter logs every failed attempt at length; `close` says it once, in one line.
    import logging  # only when exporting: it is not small

    logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)
    return TraceListener(provider, exporter=exporter)


def endpoint(env: Mapping[str, str]) -> str:
    """Where the OTLP/HTTP exporter sends spans (its own rule, for messages)."""
    traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if traces:
        return traces
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
    return base.rstrip("/") + "/v1/traces"


class _Counted:
    """An exporter that counts the spans it could not deliver (the SDK's processor calls it).
    It has the SDK's `SpanExporter` methods (the SDK is imported only when export is asked)."""

    def __init__(self, inner: SpanExporter, where: str) -> None:
        self.inner = inner
        self.where = where
        self.lost = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self.inner.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.lost += len(spans)
        return result

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))

    def shutdown(self) -> None:
        self.inner.shutdown()


class TraceListener:
    """Turns events into spans. `provider` is an SDK TracerProvider (tests pass one with an
    in-memory exporter); `clock` gives nanoseconds since the epoch."""

    def __init__(
        self,
        provider: TracerProvider,
        *,
        clock: Callable[[], int] = time.time_ns,
        exporter: _Counted | None = None,
    ) -> None:
        self._provider = provider
        self._exporter = exporter
        self.problem: str | None = None  # set by `close` when spans could not be delivered
        self._tracer = provider.get_tracer(SCOPE)
        self._clock = clock
        self._run: Span | None = None
        self._step: Span | None = None
        self._judge: Span | None = None
        self._closed = False
        self._broken = False  # a handler failed: no more spans, `problem` says why

    def __call__(self, event: RunEvent) -> None:
        handler = _HANDLERS.get(event.name)
        if event.path:  # a child run's event: its time is inside the calling step's span
            return
        if handler is None or self._closed or self._broken:
            return
        try:
            handler(self, event, self._clock())
        except Exception as exc:  # tracing is a side channel: it never stops a run
            self._broken = True
            self.problem = f"tracing stopped at a '{event.name}' event: {exc!r}"

    def close(self) -> None:
        """End what is still open (a run cut off before `loop_complete`) and flush the export."""
        if self._closed:
            return
        now = self._clock()
        for span in (self._judge, self._step, self._run):
            if span is not None:
                _fail(span, "the run ended before this span was finished")
                span.end(end_time=now)
        self._judge = self._step = self._run = None
        self._closed = True
        self._provider.shutdown()  # flushes the batch; bounded by the exporter's timeout
        if self._exporter is not None and self._exporter.lost and self.problem is None:
            self.problem = (
                f"{self._exporter.lost} trace spans could not be exported to "
                f"{self._exporter.where}; is an OpenTelemetry collector listening there?"
            )

    # -- events --------------------------------------------------------------------------

    def _loop_start(self, event: LoopStart, now: int) -> None:
        loop = event.loop
        self._run = self._tracer.start_span(
            f"ll run {loop}",
            start_time=now,
            attributes={
                "ll.loop.name": loop,
                "ll.loop.file": event.file,
                "ll.run.id": event.run_id,
                "ll.run.resumed": event.resumed,
            },
        )

    def _state_enter(self, event: StateEnter, now: int) -> None:
        self._end_step(now)
        if self._run is None:
            return
        state = event.state or ""
        self._step = self._tracer.start_span(
            f"step {state}",
            context=_inside(self._run),
            start_time=now,
            attributes={"ll.state": state, "ll.step": _int(event.step)},
        )

    def _action_start(self, event: ActionStart, now: int) -> None:
        if self._step is not None:
            self._step.set_attribute("ll.action.type", event.action_type or "")

    def _action_complete(self, event: ActionComplete, now: int) -> None:
        if self._step is None:
            return
        self._step.set_attributes(
            {
                "ll.action.exit_code": _int(event.exit_code),
                "ll.action.duration_ms": _int(event.duration_ms),
                "ll.action.timed_out": event.timed_out,
            }
        )

    def _judge_start(self, event: JudgeStart, now: int) -> None:
        if self._step is None:
            return
        self._end_judge(now)
        model = event.model
        provider, target = _judge_target(model)
        self._judge = self._tracer.start_span(
            f"chat {target}",
            context=_inside(self._step),
            kind=_client_kind(),
            start_time=now,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.system": provider,  # the name before semantic conventions 1.37
                "gen_ai.request.model": target,
                "ll.judge.model": model,
                "ll.judge.samples": _int(event.samples),
            },
        )

    def _judge_retry(self, event: JudgeRetry, now: int) -> None:
        if self._judge is not None:
            attributes: dict[str, AttributeValue] = {
                "attempt": event.attempt,
                "delay_s": event.delay_s,
            }
            if event.status is not None:
                attributes["status"] = event.status
            attributes["error"] = event.error
            self._judge.add_event("judge_retry", attributes, timestamp=now)

    def _evaluate(self, event: Evaluate, now: int) -> None:
        verdict = event.verdict
        details = event.details
        if self._judge is not None:
            if event.type == "llm_structured":
                self._judge.set_attributes(_judge_attributes(verdict, details))
                if verdict == "error":
                    self._judge.set_attribute("error.type", _error_type(details))
                    _fail(self._judge, details.error or "the judge failed")
            self._end_judge(now)
        if self._step is not None:
            self._step.set_attributes({"ll.evaluate.type": event.type, "ll.verdict": verdict})
            if details.cached:
                self._step.set_attribute("ll.judge.cached", True)
            reason = event.reason
            if reason:
                self._step.set_attribute("ll.reason", reason)

    def _retry(self, event: Retry, now: int) -> None:
        if self._step is not None:
            attributes: dict[str, AttributeValue] = {
                "attempt": event.attempt,
                "delay_s": event.delay_s,
                "verdict": event.verdict,
            }
            self._step.add_event("retry", attributes, timestamp=now)

    def _route(self, event: Route, now: int) -> None:
        if self._step is None:
            return
        self._step.set_attributes({"ll.route.to": event.to, "ll.route.via": event.via})
        self._end_step(now)

    def _loop_complete(self, event: LoopComplete, now: int) -> None:
        self._end_step(now)
        if self._run is None:
            return
        outcome = event.outcome
        self._run.set_attributes(
            {
                "ll.run.outcome": outcome,
                "ll.run.exit_code": _int(event.exit_code),
                "ll.run.steps": _int(event.steps),
                "ll.run.final_state": event.final_state,
                "ll.cost_usd": float(event.cost_usd or 0.0),
            }
        )
        if outcome != "success":
            _fail(self._run, event.error or outcome)
        self._run.end(end_time=now)
        self._run = None

    # -- helpers -------------------------------------------------------------------------

    def _end_step(self, now: int) -> None:
        self._end_judge(now)
        if self._step is not None:
            self._step.end(end_time=now)
            self._step = None

    def _end_judge(self, now: int) -> None:
        if self._judge is not None:
            self._judge.end(end_time=now)
            self._judge = None


_E = TypeVar("_E", bound=RunEvent)
Handler = Callable[[TraceListener, RunEvent, int], None]


def _on(kind: type[_E], method: Callable[[TraceListener, _E, int], None]) -> tuple[str, Handler]:
    """The table's row for events of `kind`: its name, and `method` called with the record."""

    def handle(listener: TraceListener, event: RunEvent, now: int) -> None:
        if isinstance(event, kind):
            method(listener, event, now)

    return kind.NAME, handle


# Each handler takes the record of its event's name (the dispatch is by `RunEvent.name`).
_HANDLERS: dict[str, Handler] = dict(
    [
        _on(LoopStart, TraceListener._loop_start),
        _on(StateEnter, TraceListener._state_enter),
        _on(ActionStart, TraceListener._action_start),
        _on(ActionComplete, TraceListener._action_complete),
        _on(JudgeStart, TraceListener._judge_start),
        _on(JudgeRetry, TraceListener._judge_retry),
        _on(Evaluate, TraceListener._evaluate),
        _on(Retry, TraceListener._retry),
        _on(Route, TraceListener._route),
        _on(LoopComplete, TraceListener._loop_complete),
    ]
)


def _judge_attributes(verdict: str, details: Details) -> dict[str, AttributeValue]:
    usage = details.usage
    attributes: dict[str, AttributeValue] = {
        "gen_ai.usage.input_tokens": usage.get("input_tokens", 0),
        "gen_ai.usage.output_tokens": usage.get("output_tokens", 0),
        "ll.judge.cost_usd": details.cost_usd,
        "ll.judge.cost_known": details.cost_known,
        "ll.judge.verdict": verdict,
        "ll.judge.confidence": details.confidence or 0.0,
    }
    if details.model:
        attributes["gen_ai.response.model"] = details.model
    if details.attempts is not None:
        attributes["ll.judge.attempts"] = details.attempts
    if details.stop_reason:
        attributes["gen_ai.response.finish_reasons"] = [details.stop_reason]
    return attributes


def _error_type(details: Details) -> str:
    """The first of the judge's error flags (`timeout`, `rate_limited`, ...), for `error.type`."""
    flags = [flag for flag in details.flags if flag != "cost_known"]
    for flag in ("loop_timeout", "timeout", "rate_limited", "overloaded", "no_api_key"):
        if flag in flags:
            return flag
    return flags[0] if flags else "_OTHER"


def _judge_target(model: str) -> tuple[str, str]:
    """(gen_ai.provider.name, the model id the provider is asked for) of a judge model URI,
    or of a panel's comma-separated URIs (`_OTHER` when its members' providers differ)."""
    from little_loops.providers import (
        ollama_target,
        split_model,
    )

    members = [m.strip() for m in model.split(",") if m.strip()]
    if len(members) > 1:  # a panel (`models:`): one provider when its members share it
        found = [_judge_target(m) for m in members]
        names = {name for name, _ in found}
        return (names.pop() if len(names) == 1 else "_OTHER"), ", ".join(t for _, t in found)
    try:
        scheme, target = split_model(model)
        if scheme == "ollama":
            target = ollama_target(target)[1]
    except ValueError:
        return "_OTHER", model
    return GENAI_PROVIDERS.get(scheme, scheme), target


def _inside(parent: Span) -> Context:
    from opentelemetry.trace import set_span_in_context

    return set_span_in_context(parent)


def _client_kind() -> SpanKind:
    from opentelemetry.trace import SpanKind

    return SpanKind.CLIENT


def _fail(span: Span, description: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, description))


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
