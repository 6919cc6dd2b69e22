"""OpenTelemetry export (issue 12 item 9): a run as a trace, steps and judge calls as spans.

Unit tests feed events to the listener with the SDK's in-memory exporter; the end-to-end test
runs the real `ll` from a YAML file against a loopback OTLP/HTTP receiver (and the loopback
judge server), decodes the protobuf it receives, and checks names, parents and attributes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from llm_server import LlmServer, api_error, message
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from project import Project

from little_loops.record.events import parse
from little_loops.report.otel import (
    TraceListener,
    asked,
    endpoint,
)

# `ll` runs in process (the `project` fixture) except where a SIGINT or a fresh interpreter
# (a shadowed package on PYTHONPATH) is under test.
LL = [sys.executable, "-m", "little_loops"]


class Clock:
    """Nanoseconds that advance 1 ms a reading: spans get distinct, ordered times."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000_000_000

    def __call__(self) -> int:
        self.now += 1_000_000
        return self.now


def listener() -> tuple[TraceListener, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return TraceListener(provider, clock=Clock()), exporter


def ev(
    name: str, step: int | None = None, state: str | None = None, **fields: Any
) -> dict[str, Any]:
    event: dict[str, Any] = {"event": name, "ts": "2026-11-23T00:00:00.000Z", "run_id": "r-1"}
    if step is not None:
        event["step"], event["state"] = step, state
    return {**event, **fields}


JUDGED = {
    "confidence": 0.9,
    "reason": "all passed",
    "model": "claude-sonnet-4-5-20250929",
    "provider": "anthropic",
    "usage": {"input_tokens": 1200, "output_tokens": 40},
    "cost_usd": 0.0042,
    "cost_known": True,
    "attempts": 2,
    "cached": False,
}


def a_judged_run() -> list[dict[str, Any]]:
    return [
        ev("loop_start", loop="fix", file="fix.yaml", max_iterations=5, resumed=False),
        ev("state_enter", 1, "build"),
        ev("action_start", 1, "build", action="make", action_type="shell"),
        ev("action_complete", 1, "build", exit_code=2, duration_ms=30, timed_out=False),
        ev("evaluate", 1, "build", type="exit_code", verdict="failure", details={"exit_code": 2},
           reason="exit code 2: make: *** no rule"),
        ev("route", 1, "build", to="review", via="on_failure", verdict="failure"),
        ev("state_enter", 2, "review"),
        ev("action_start", 2, "review", action="echo ok", action_type="shell"),
        ev("action_complete", 2, "review", exit_code=0, duration_ms=3, timed_out=False),
        ev("judge_start", 2, "review", model="claude-sonnet-5-5", samples=1),
        ev("judge_retry", 2, "review", attempt=1, delay_s=0.1, status=529, error="overloaded"),
        ev("evaluate", 2, "review", type="llm_structured", verdict="success", details=JUDGED),
        ev("route", 2, "review", to="done", via="route", verdict="success"),
        ev("state_enter", 3, "done"),
        ev("loop_complete", final_state="done", outcome="success", exit_code=0, steps=3,
           duration_ms=50, error=None, cost_usd=0.0042),
    ]  # fmt: skip


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


def test_a_run_is_a_trace_of_steps_and_judge_calls() -> None:
    tracer, exporter = listener()
    for event in a_judged_run():
        tracer(parse(event))
    tracer.close()
    spans = by_name(exporter.get_finished_spans())
    assert set(spans) == {
        "ll run fix",
        "step build",
        "step review",
        "step done",
        "chat claude-sonnet-5-5",
    }
    run, build, review, done = (
        spans[n] for n in ("ll run fix", "step build", "step review", "step done")
    )
    judge = spans["chat claude-sonnet-5-5"]
    assert run.parent is None
    assert {s.context.trace_id for s in spans.values()} == {run.context.trace_id}
    for step in (build, review, done):
        assert step.parent is not None
        assert step.parent.span_id == run.context.span_id
    assert judge.parent is not None
    assert judge.parent.span_id == review.context.span_id
    assert dict(run.attributes or {}) == {
        "ll.loop.name": "fix",
        "ll.loop.file": "fix.yaml",
        "ll.run.id": "r-1",
        "ll.run.resumed": False,
        "ll.run.outcome": "success",
        "ll.run.exit_code": 0,
        "ll.run.steps": 3,
        "ll.run.final_state": "done",
        "ll.cost_usd": 0.0042,
    }
    assert run.status.status_code is StatusCode.UNSET
    assert dict(build.attributes or {}) == {
        "ll.state": "build",
        "ll.step": 1,
        "ll.action.type": "shell",
        "ll.action.exit_code": 2,
        "ll.action.duration_ms": 30,
        "ll.action.timed_out": False,
        "ll.evaluate.type": "exit_code",
        "ll.verdict": "failure",
        "ll.reason": "exit code 2: make: *** no rule",
        "ll.route.to": "review",
        "ll.route.via": "on_failure",
    }
    assert judge.kind is SpanKind.CLIENT
    assert dict(judge.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.system": "anthropic",
        "gen_ai.request.model": "claude-sonnet-5-5",
        "gen_ai.response.model": "claude-sonnet-4-5-20250929",
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 40,
        "ll.judge.model": "claude-sonnet-5-5",
        "ll.judge.samples": 1,
        "ll.judge.cost_usd": 0.0042,
        "ll.judge.cost_known": True,
        "ll.judge.verdict": "success",
        "ll.judge.confidence": 0.9,
        "ll.judge.attempts": 2,
    }
    assert [e.name for e in judge.events] == ["judge_retry"]
    assert dict(judge.events[0].attributes or {})["status"] == 529
    # Times nest: each span inside its parent, steps one after the other.
    assert run.start_time is not None
    assert run.end_time is not None
    for span in (build, review, done, judge):
        assert span.start_time is not None
        assert span.end_time is not None
        assert run.start_time <= span.start_time < span.end_time <= run.end_time
    assert build.end_time <= review.start_time  # type: ignore[operator]
    assert review.start_time <= judge.start_time  # type: ignore[operator]
    assert judge.end_time <= review.end_time  # type: ignore[operator]


def test_a_failed_judgement_and_an_unfinished_run_are_errors() -> None:
    tracer, exporter = listener()
    failed = {
        "confidence": 0.0,
        "error": "the judge did not answer within 2 s",
        "timeout": True,
        "model": "",
        "provider": "openai",
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "cost_usd": 0.0,
        "cost_known": False,
    }
    for event in [
        ev("loop_start", loop="x", file="x.yaml", max_iterations=5, resumed=True),
        ev("state_enter", 1, "check"),
        ev("judge_start", 1, "check", model="ollama://localhost:11434/qwen3:8b", samples=3),
        ev("evaluate", 1, "check", type="llm_structured", verdict="error", details=failed),
        ev("state_enter", 2, "check"),  # the run is cut off inside this step
    ]:
        tracer(parse(event))
    tracer.close()
    tracer.close()  # idempotent: the atexit safety net may call it again
    spans = by_name(exporter.get_finished_spans())
    judge = spans["chat qwen3:8b"]
    attributes = dict(judge.attributes or {})
    assert attributes["gen_ai.provider.name"] == "ollama"
    assert attributes["gen_ai.request.model"] == "qwen3:8b"
    assert attributes["error.type"] == "timeout"
    assert attributes["ll.judge.samples"] == 3
    assert "gen_ai.response.model" not in attributes
    assert judge.status.status_code is StatusCode.ERROR
    assert judge.status.description == "the judge did not answer within 2 s"
    run = spans["ll run x"]
    assert run.status.status_code is StatusCode.ERROR
    assert dict(run.attributes or {})["ll.run.resumed"] is True
    assert len([s for s in exporter.get_finished_spans() if s.name == "step check"]) == 2


def test_export_is_asked_by_the_flag_or_the_standard_variables() -> None:
    assert not asked(False, {})
    assert asked(True, {})
    assert asked(False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert asked(False, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert not asked(True, {"OTEL_SDK_DISABLED": "true"})
    assert endpoint({}) == "http://localhost:4318/v1/traces"
    assert endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    traces = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "y",
    }
    assert endpoint(traces) == "http://t/x"


# -- through the real `ll` ----------------------------------------------------------------


class OtlpReceiver:
    """A loopback OTLP/HTTP receiver: keeps every ExportTraceServiceRequest it is sent."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.paths: list[str] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                received.requests.append(request)
                received.paths.append(self.path)
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def spans(self) -> list[Any]:
        return [
            span
            for request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver()
    yield server
    server.close()


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def _attrs(span: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in span.attributes}


def test_ll_run_exports_the_trace_over_otlp_http(
    project: Project, tmp_path: Path, receiver: OtlpReceiver
) -> None:
    loop = tmp_path / "traced.yaml"
    loop.write_text(
        "name: traced\ninitial: build\nstates:\n"
        "  build:\n    action: 'echo built'\n    next: review\n"
        "  review:\n    action: 'echo 3 passed'\n"
        "    evaluate: {type: llm_structured, model: claude-haiku-4-5}\n"
        "    route: {success: done, _: broken}\n"
        "  done: {terminal: true}\n"
        "  broken: {terminal: true, outcome: failure}\n",
        encoding="utf-8",
    )
    answer = {"verdict": "success", "confidence": 0.9, "reason": "passed"}
    with LlmServer() as judge:
        judge.script(api_error(529, "overloaded_error", "busy"), message(answer))
        env = {
            "ANTHROPIC_API_KEY": "sk-test-not-real",
            "ANTHROPIC_BASE_URL": judge.url,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_SERVICE_NAME": "ci-loops",
        }
        proc = project.ll("run", loop, "--json", "--no-cache", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    run_id = events[0]["run_id"]
    assert set(receiver.paths) == {"/v1/traces"}
    (resource,) = {
        tuple(sorted((kv.key, str(_value(kv.value))) for kv in rs.resource.attributes))
        for request in receiver.requests
        for rs in request.resource_spans
    }
    assert ("service.name", "ci-loops") in resource
    spans = {span.name: span for span in receiver.spans()}
    assert set(spans) == {
        "ll run traced",
        "step build",
        "step review",
        "step done",
        "chat claude-haiku-4-5",
    }
    run, review, judged = (
        spans["ll run traced"],
        spans["step review"],
        spans["chat claude-haiku-4-5"],
    )
    assert run.parent_span_id == b""
    assert {span.trace_id for span in spans.values()} == {run.trace_id}
    for name in ("step build", "step review", "step done"):
        assert spans[name].parent_span_id == run.span_id
    assert judged.parent_span_id == review.span_id
    assert _attrs(run) == {
        "ll.loop.name": "traced",
        "ll.loop.file": events[0]["file"],
        "ll.run.id": run_id,
        "ll.run.resumed": False,
        "ll.run.outcome": "success",
        "ll.run.exit_code": 0,
        "ll.run.steps": 3,
        "ll.run.final_state": "done",
        "ll.cost_usd": pytest.approx(events[-1]["cost_usd"]),
    }
    review_attrs = _attrs(review)
    assert (review_attrs["ll.step"], review_attrs["ll.verdict"]) == (2, "success")
    assert (review_attrs["ll.route.to"], review_attrs["ll.route.via"]) == ("done", "route")
    judge_attrs = _attrs(judged)
    assert judge_attrs["gen_ai.operation.name"] == "chat"
    assert judge_attrs["gen_ai.provider.name"] == "anthropic"
    assert judge_attrs["gen_ai.request.model"] == "claude-haiku-4-5"
    assert judge_attrs["gen_ai.usage.input_tokens"] > 0
    assert judge_attrs["gen_ai.usage.output_tokens"] > 0
    assert judge_attrs["ll.judge.cost_usd"] > 0
    assert judge_attrs["ll.judge.attempts"] == 2
    assert [e.name for e in judged.events] == ["judge_retry"]
    assert judged.kind == 3  # SPAN_KIND_CLIENT
    assert run.start_time_unix_nano <= judged.start_time_unix_nano
    assert judged.end_time_unix_nano <= review.end_time_unix_nano <= run.end_time_unix_nano


def test_a_run_stopped_by_sigint_is_still_exported(tmp_path: Path, receiver: OtlpReceiver) -> None:
    loop = tmp_path / "slow.yaml"
    loop.write_text(
        "name: slow\ninitial: wait\nstates:\n  wait: {action: 'sleep 60', next: done}\n"
        "  done: {terminal: true}\n",
        encoding="utf-8",
    )
    env = {**os.environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url + "/custom"}
    proc = subprocess.Popen(
        [*LL, "run", str(loop), "--json"], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:  # wait until the action runs
        if json.loads(line)["event"] == "action_start":
            break
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert set(receiver.paths) == {"/custom"}
    spans = {span.name: span for span in receiver.spans()}
    assert set(spans) == {"ll run slow", "step wait"}
    assert _attrs(spans["ll run slow"])["ll.run.outcome"] == "interrupted"
    assert spans["ll run slow"].status.code == 2  # STATUS_CODE_ERROR


def test_ll_run_otel_without_the_extra_is_a_one_line_error(tmp_path: Path) -> None:
    """`--otel` without the packages: exit 2 and the fix; the endpoint alone only warns."""
    shadow = tmp_path / "shadow" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("", encoding="utf-8")  # a namespace with nothing in it
    loop = tmp_path / "plain.yaml"
    loop.write_text(
        "name: plain\ninitial: a\nstates:\n  a: {action: 'echo hi', next: done}\n"
        "  done: {terminal: true}\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(shadow.parent)}
    proc = subprocess.run(
        [*LL, "run", str(loop), "--otel"], cwd=tmp_path, capture_output=True, text=True,
        timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "ll: error: --otel: OpenTelemetry export needs packages that are not installed "
        "(opentelemetry.exporter); install them: pip install opentelemetry-sdk "
        "opentelemetry-exporter-otlp-proto-http (the [otel] extra; from a checkout: "
        "pip install '.[otel]')"
    ]
    assert not (tmp_path / ".loops" / "runs").exists()
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
    proc = subprocess.run(
        [*LL, "run", str(loop), "-q"], cwd=tmp_path, capture_output=True, text=True,
        timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 0
    (warning,) = proc.stderr.splitlines()
    assert warning.startswith("ll: warning: OTEL_EXPORTER_OTLP_ENDPOINT is set, but ")
    assert warning.endswith("from a checkout: pip install '.[otel]')")


def test_a_tracing_failure_never_stops_the_run() -> None:
    tracer, exporter = listener()
    tracer(parse(ev("loop_start", loop="x", file="x.yaml", max_iterations=5, resumed=False)))
    end = parse(ev("loop_complete", outcome="success", exit_code=0, steps=1))
    # a record typed wrong (a bug upstream) makes the handler raise, as any fault in it would
    object.__setattr__(end, "cost_usd", "not a number")
    tracer(end)
    tracer(parse(ev("state_enter", 1, "a")))  # ignored from here on
    tracer.close()
    assert tracer.problem is not None
    assert tracer.problem.startswith("tracing stopped at a 'loop_complete' event: ValueError(")
    (run,) = exporter.get_finished_spans()
    assert run.status.status_code is StatusCode.ERROR  # ended by close, unfinished


def test_a_panels_provider_name_is_its_members_one_or_other() -> None:
    """A panel's judge_start names every member ("a, b"): one provider when they share it."""
    from little_loops.report.otel import _judge_target

    assert _judge_target("claude-haiku-4-5, claude://sonnet") == (
        "anthropic",
        "claude-haiku-4-5, sonnet",
    )
    assert _judge_target("claude-haiku-4-5, openai://gpt-4o") == (
        "_OTHER",
        "claude-haiku-4-5, gpt-4o",
    )


def test_ll_run_names_the_same_endpoint_variables() -> None:
    """cli/launch.py decides without importing this module whether export may be asked."""
    from little_loops.cli.launch import OTLP_ENDPOINT_VARS
    from little_loops.report.otel import ENDPOINT_VARS

    assert OTLP_ENDPOINT_VARS == ENDPOINT_VARS
