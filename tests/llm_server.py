"""A scripted model server on 127.0.0.1 speaking the Anthropic Messages API and OpenAI chat
completions, so the real SDK and HTTP code run end to end in tests and benchmarks.

Use the `llm_server` fixture (import it into a test module), script replies with
`server.script(reply, ..., then=reply)` and read `server.requests` afterwards.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

MAX_HANG = 5.0  # a "hang" never holds a handler thread longer than this


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer."""

    status: int = 200
    body: Any = None  # a dict/list is sent as JSON; str/bytes as they are
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (a hang), at most MAX_HANG
    content_type: str = "application/json"


@dataclass(frozen=True)
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    headers: Mapping[str, str]  # lower-cased names
    body: Any  # parsed JSON, or the raw text when it is not JSON
    at: float  # time.monotonic() on arrival


def message(
    answer: Mapping[str, Any] | None = None,
    *,
    text: str | None = None,
    model: str = "claude-sonnet-4-5",
    stop_reason: str | None = None,
    input_tokens: int = 1200,
    output_tokens: int = 40,
) -> Reply:
    """A Messages API reply: a tool_use block answering `answer`, and/or a text block."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    if answer is not None:
        content.append(
            {"type": "tool_use", "id": "toolu_01Test", "name": "evaluate", "input": dict(answer)}
        )
    return Reply(
        body={
            "id": "msg_01Test",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason or ("tool_use" if answer is not None else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }
    )


def api_error(status: int, kind: str, msg: str, headers: Mapping[str, str] | None = None) -> Reply:
    """An Anthropic-style error body with any status and headers (e.g. retry-after)."""
    return Reply(
        status=status,
        body={"type": "error", "error": {"type": kind, "message": msg}},
        headers=dict(headers or {}),
    )


def chat(
    content: str,
    *,
    model: str = "llama3",
    prompt_tokens: int = 900,
    finish_reason: str = "stop",
    refusal: str | None = None,
) -> Reply:
    """An OpenAI chat-completions reply whose message text is `content`."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        msg["refusal"] = refusal
    return Reply(
        body={
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": msg,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 30},
        }
    )


def garbage() -> Reply:
    """A 200 that is not an API answer at all (a proxy's HTML page)."""
    return Reply(body="<html><body>502 upstream gone</body></html>", content_type="text/html")


def hang(seconds: float = 3.0) -> Reply:
    """A request that gets no answer for `seconds` (the client should time out first)."""
    return Reply(delay=seconds, body={"type": "error", "error": {"type": "late", "message": ""}})


SUCCESS = {"verdict": "success", "confidence": 0.9, "reason": "all checks passed"}

# What strict structured outputs refuse (the API's documented JSON Schema limitations).
STRICT_UNSUPPORTED = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "uniqueItems",
)


def strict_problem(schema: Any, where: str, *, all_required: bool = False) -> str | None:
    """Why a strict endpoint refuses `schema`, naming the keyword, or None when it accepts it.

    `all_required` adds OpenAI's rule: every object lists all its properties in `required`.
    """
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            problem = strict_problem(item, f"{where}.{i}", all_required=all_required)
            if problem:
                return problem
        return None
    if not isinstance(schema, dict):
        return None
    for keyword in STRICT_UNSUPPORTED:
        if keyword in schema:
            return f"{where}: '{keyword}' is not supported in strict mode"
    if isinstance(schema.get("minItems"), int) and schema["minItems"] > 1:
        return f"{where}: 'minItems' values other than 0 or 1 are not supported in strict mode"
    if schema.get("type") == "object":
        if schema.get("additionalProperties") is not False:
            return f"{where}: 'additionalProperties' must be explicitly set to false for objects"
        props = schema.get("properties") or {}
        if all_required and set(schema.get("required") or ()) != set(props):
            return f"{where}: 'required' must list every key in 'properties' in strict mode"
    for key in ("properties", "$defs"):
        for name, sub in (schema.get(key) or {}).items():
            problem = strict_problem(sub, f"{where}.{key}.{name}", all_required=all_required)
            if problem:
                return problem
    for key in ("items", "anyOf", "allOf"):
        if key in schema:
            problem = strict_problem(schema[key], f"{where}.{key}", all_required=all_required)
            if problem:
                return problem
    return None


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def limits_problem(schema: Any, where: str) -> str | None:
    """The documented limits of strict schemas: refs that resolve, no recursion, at most 24
    optional properties, no `$ref` inside `allOf`."""
    if not isinstance(schema, dict):
        return None
    nodes = list(_walk(schema))
    found = schema.get("$defs")
    defs: dict[str, Any] = found if isinstance(found, dict) else {}
    for node in nodes:
        ref = node.get("$ref")
        if isinstance(ref, str) and not (
            ref.startswith("#/$defs/") and ref[len("#/$defs/") :] in defs
        ):
            return f"{where}: $ref '{ref}' could not be resolved"
        if any(isinstance(sub, dict) and "$ref" in sub for sub in node.get("allOf") or ()):
            return f"{where}: 'allOf' with '$ref' is not supported"
    for name in defs:
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            for node in _walk(defs.get(current)):
                target = str(node.get("$ref", ""))[len("#/$defs/") :]
                if target == name:
                    return f"{where}: recursive schemas are not supported ($defs.{name})"
                if target and target not in seen:
                    seen.add(target)
                    todo.append(target)
    optional = sum(
        len([p for p in node["properties"] if p not in (node.get("required") or ())])
        for node in nodes
        if node.get("type") == "object" and isinstance(node.get("properties"), dict)
    )
    if optional > 24:
        return (
            f"{where}: Schemas contains too many optional parameters ({optional}), which would "
            "make grammar compilation inefficient. Reduce the number of optional parameters "
            "in your tool schemas (limit: 24)."
        )
    return None


# The most output tokens each model takes as max_tokens (the Messages API refuses more).
MAX_OUTPUT = {"claude-haiku-4-5": 64000, "claude-sonnet-4-5": 64000, "claude-opus-4-1": 32000}


def request_problem(path: str, body: Any) -> str | None:
    """The strict-schema problem of a Messages or chat-completions request body, if any."""
    if not isinstance(body, dict):
        return None
    if path.rstrip("/").endswith("/v1/messages"):
        limit = MAX_OUTPUT.get(str(body.get("model")))
        if limit is not None and int(body.get("max_tokens") or 0) > limit:
            return (
                f"max_tokens: {body['max_tokens']} > {limit}, which is the maximum allowed "
                f"number of output tokens for {body['model']}"
            )
        for i, tool in enumerate(body.get("tools") or ()):
            if isinstance(tool, dict) and tool.get("strict") is True:
                at = f"tools.{i}.input_schema"
                problem = strict_problem(tool.get("input_schema"), at) or limits_problem(
                    tool.get("input_schema"), at
                )
                if problem:
                    return problem
        return None
    fmt = body.get("response_format")
    spec = fmt.get("json_schema") if isinstance(fmt, dict) else None
    if isinstance(spec, dict) and spec.get("strict") is True:
        at = "response_format.json_schema.schema"
        return strict_problem(spec.get("schema"), at, all_required=True) or limits_problem(
            spec.get("schema"), at
        )
    return None


# Messages API versions from this one on refuse every sampling parameter (SDK 2.x sends it).
SAMPLING_FREE_VERSION = "2026-10-21"
SAMPLING = ("temperature", "top_p", "top_k")


# OpenAI's reasoning models: only the default temperature, and max_completion_tokens.
REASONING_PREFIXES: tuple[str, ...] = ("gpt-5", "o1", "o3", "o4")


def openai_error(message: str, param: str, code: str) -> Reply:
    """An OpenAI-style 400 naming the parameter it refuses."""
    return Reply(
        status=400,
        body={
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": param,
                "code": code,
            }
        },
    )


def sampling_problem(
    path: str,
    headers: Mapping[str, str],
    body: Any,
    reasoning: tuple[str, ...] = REASONING_PREFIXES,
) -> Reply | None:
    """The 400 the real APIs answer to sampling parameters they refuse, or None.

    Anthropic: API version 2026-10-21 (what SDK 2.x sends) refuses temperature, top_p and
    top_k, even at 1.0; older versions refuse them for generation-5 models. OpenAI: reasoning
    models (gpt-5*, o1, o3, o4*) take only the default temperature, 1, and refuse
    `max_tokens` (they take `max_completion_tokens`).
    """
    if not isinstance(body, dict):
        return None
    sent = [k for k in SAMPLING if k in body]
    if path.rstrip("/").endswith("/v1/messages") and sent:
        if headers.get("anthropic-version", "") >= SAMPLING_FREE_VERSION:
            return api_error(
                400, "invalid_request_error", f"{sent[0]}: Extra inputs are not permitted"
            )
        generation = re.match(r"claude-[a-z]+-(\d+)", str(body.get("model")))
        if generation and int(generation.group(1)) >= 5:
            return api_error(
                400, "invalid_request_error", f"`{sent[0]}` is deprecated for this model."
            )
        return None
    model = str(body.get("model", ""))
    if not model.startswith(reasoning):
        return None
    if "max_tokens" in body:
        return openai_error(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            "max_tokens",
            "unsupported_parameter",
        )
    if "temperature" in body and body["temperature"] != 1:
        value = body["temperature"]
        return openai_error(
            f"Unsupported value: 'temperature' does not support {value} with this model. "
            "Only the default (1) value is supported.",
            "temperature",
            "unsupported_value",
        )
    return None


def sent_texts(body: Any) -> tuple[str, str, dict[str, Any]]:
    """(system prompt, user message, answer schema) of a Messages or chat-completions body."""
    if not isinstance(body, dict):
        return "", "", {}
    messages = body.get("messages") or []
    user = str(messages[-1].get("content", "")) if messages else ""
    if "tools" in body:
        return str(body.get("system", "")), user, dict(body["tools"][0].get("input_schema", {}))
    system = str(messages[0].get("content", "")) if len(messages) > 1 else ""
    spec = (body.get("response_format") or {}).get("json_schema") or {}
    return system, user, dict(spec.get("schema") or {})


ANY = object()


def judge_checks(
    *, examples: int | None = None, temperature: Any = ANY, reason_first: bool = True
) -> Any:
    """A request check for `LlmServer.expect`: the judge's request as little-loops must send
    it. `examples`: that many fenced examples, each with its output fenced and a verdict;
    `temperature`: the value sent (None: not sent); `reason_first`: the answer schema's
    properties start reason, verdict, confidence."""

    def check(path: str, body: Any) -> str | None:
        _, user, schema = sent_texts(body)
        if reason_first:
            order = [
                k for k in schema.get("properties", {}) if k in ("reason", "verdict", "confidence")
            ]
            if order != ["reason", "verdict", "confidence"]:
                return f"answer schema properties in order {order}, not reason, verdict, confidence"
        if examples is not None:
            found = user.count('<example n="')
            if found != examples:
                return f"{found} fenced examples in the user message, expected {examples}"
            for i in range(1, examples + 1):
                start = user.index(f'<example n="{i}">')
                end = user.index("</example>", start)
                block = user[start:end]
                if "<example_output>" not in block or "</example_output>" not in block:
                    return f"example {i} has no fenced output"
                if "\nVerdict: " not in block:
                    return f"example {i} has no verdict"
            if examples and user.index("</example>") > user.index("<action_output>"):
                return "the examples come after the output to judge"
        if temperature is not ANY:
            got = body.get("temperature") if isinstance(body, dict) else None
            if got != temperature:
                return f"temperature {got!r} sent, expected {temperature!r}"
        return None

    return check


class _QuietServer(ThreadingHTTPServer):
    """A client that resets its connection (a judge giving up on a reply too large) is no
    error of the server's: no traceback on stderr, which an in-process `ll` shares."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class LlmServer:
    """The server: a queue of scripted replies, then a default one, and a log of requests."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._queue: deque[Reply] = deque()
        self._then: Reply | None = None
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._conns: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.require_auth = True
        self.enforce_strict = True  # refuse strict schemas the real APIs refuse (HTTP 400)
        self.enforce_sampling = True  # refuse sampling parameters the real APIs refuse (400)
        self.reasoning = REASONING_PREFIXES  # models refusing max_tokens and a temperature
        self._checks: list[Any] = []
        self.in_flight = 0  # requests being answered now, and the most there ever were
        self.max_in_flight = 0

    def expect(self, *checks: Any) -> None:
        """Refuse (HTTP 400, "test server: ...") every request one of `checks` finds wrong:
        each is `check(path, body) -> problem or None`, e.g. `judge_checks(examples=2)`."""
        self._checks.extend(checks)

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def script(self, *replies: Reply, then: Reply | None = None) -> None:
        """Answer the next requests with `replies` in order, then always with `then`."""
        with self._lock:
            self._queue.extend(replies)
            self._then = then

    def _next(self, path: str) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            if self._then is not None:
                return self._then
        return chat(json.dumps(SUCCESS)) if path.endswith("/chat/completions") else message(SUCCESS)

    def start(self) -> LlmServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = 1 << 16  # headers and body leave in one write: no Nagle/delayed-ACK stall

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with server._lock:
                    server._conns.add(self.connection)

            def finish(self) -> None:
                with server._lock:
                    server._conns.discard(self.connection)
                with contextlib.suppress(OSError):
                    super().finish()

            def do_POST(self) -> None:
                try:
                    server._handle(self)
                except OSError:  # the client gave up (timeout) and closed the socket
                    self.close_connection = True

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        counted = [True]
        try:
            self._answer(h, counted)
        finally:
            self._done(counted)

    def _done(self, counted: list[bool]) -> None:
        """The request is answered (once): it no longer counts as in flight."""
        with self._lock:
            if counted[0]:
                counted[0] = False
                self.in_flight -= 1

    def _answer(self, h: BaseHTTPRequestHandler, counted: list[bool]) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length).decode("utf-8", "replace")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self._lock:
            self.requests.append(Received("POST", h.path, headers, body, time.monotonic()))
        problem = request_problem(h.path, body) if self.enforce_strict else None
        if problem is None:
            problem = next(
                (f"test server: {p}" for p in (c(h.path, body) for c in self._checks) if p), None
            )
        refused = (
            sampling_problem(h.path, headers, body, self.reasoning)
            if self.enforce_sampling
            else None
        )
        if problem is not None:
            reply = api_error(400, "invalid_request_error", problem)
        elif refused is not None:
            reply = refused
        elif h.path.rstrip("/").endswith("/v1/messages"):
            has_key = headers.get("x-api-key") or headers.get("authorization", "").startswith(
                "Bearer "
            )
            if self.require_auth and not has_key:
                reply = api_error(401, "authentication_error", "missing x-api-key")
            else:
                reply = self._next(h.path)
        elif h.path.rstrip("/").endswith("/chat/completions"):
            reply = self._next(h.path)
        else:
            reply = api_error(404, "not_found_error", f"no route {h.path}")
        if reply.delay:
            self._release.wait(min(reply.delay, MAX_HANG))
        if isinstance(reply.body, bytes):
            payload = reply.body
        elif isinstance(reply.body, str):
            payload = reply.body.encode()
        else:
            payload = json.dumps(reply.body).encode()
        self._done(counted)  # before the client can read the answer and send its next one
        h.send_response(reply.status)
        h.send_header("Content-Type", reply.content_type)
        h.send_header("Content-Length", str(len(payload)))
        h.send_header("request-id", f"req_{len(self.requests)}")
        for name, value in reply.headers.items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(payload)
        h.wfile.flush()

    def stop(self) -> None:
        self._release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            with self._lock:
                conns = list(self._conns)
            for conn in conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LlmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(name="llm_server")
def llm_server_fixture() -> Iterator[LlmServer]:
    """A running scripted model server; stopped (hangs released) after the test."""
    with LlmServer() as server:
        yield server
