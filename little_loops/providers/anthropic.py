"""The Anthropic Messages API judge: the official SDK, forced tool use, our own retries."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import (
    DEFAULT_POLICY,
    MAX_REPLY_BYTES,
    JudgeReply,
    JudgeRequest,
    ProviderError,
    RetryPolicy,
    before_deadline,
    is_retryable_status,
    parse_retry_after,
    reply_too_large,
    status_flags,
    strict_schema,
    token_count,
    with_retries,
)
from .strict import anthropic_schema

DEFAULT_BASE_URL = "https://api.anthropic.com"
# How long a run without a loop `timeout` waits for the SDK import (1.5-5 s on a busy machine).
SDK_IMPORT_LIMIT = 60.0
TOOL_NAME = "evaluate"
TOOL_DESCRIPTION = "Report your verdict on the action's result, as the schema describes."

NO_KEY_MESSAGE = (
    "no Anthropic API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), or choose a judge "
    "that needs none: model: claude://sonnet (your Claude Code login) or "
    "ollama://localhost:11434/MODEL; or try the loop with --simulate SCRIPT or --replay CASSETTE"
)


class AnthropicProvider:
    """One SDK client per run, created on the first request; the SDK's own retries are off."""

    name = "anthropic"

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        policy: RetryPolicy = DEFAULT_POLICY,
        on_retry: Callable[[int, float, ProviderError], None] | None = None,
    ) -> None:
        self._env = env
        self._policy = policy
        self._on_retry = on_retry
        self._client: Any = None
        self._lock = threading.Lock()  # one client, however many judgements ask at once

    def _get_client(self, deadline: float | None = None, budget: float | None = None) -> Any:
        with self._lock:
            return self._open_client(deadline, budget)

    def _open_client(self, deadline: float | None, budget: float | None) -> Any:
        if self._client is not None:
            return self._client
        api_key = self._env.get("ANTHROPIC_API_KEY") or None
        auth_token = self._env.get("ANTHROPIC_AUTH_TOKEN") or None
        if api_key is None and auth_token is None:
            raise ProviderError(NO_KEY_MESSAGE, flags={"no_api_key": True})

        def build() -> Any:
            import anthropic  # ~1.7 s: only when a judge really calls the API

            # Credentials are passed explicitly so the SDK never falls back to profiles on disk.
            return anthropic.Anthropic(
                api_key=api_key,
                auth_token=None if api_key else auth_token,
                base_url=self._env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL,
                max_retries=0,
            )

        # The import (or the wait for the one started in the background when the run began)
        # is not the judge's time: it has its own bound, the loop's deadline, or SDK_IMPORT_LIMIT
        # seconds without one. The judge's `timeout` starts when the request is sent.
        self._client = before_deadline(build, deadline, "loading the Anthropic SDK", budget=budget)
        return self._client

    def complete(self, request: JudgeRequest) -> JudgeReply:
        schema = strict_schema(request.schema, anthropic_schema)
        bound = None if request.deadline is not None else SDK_IMPORT_LIMIT
        client = self._get_client(request.deadline, bound)
        until = time.monotonic() + request.timeout  # the request's budget starts now
        return with_retries(
            lambda remaining: self._attempt(client, request, schema, remaining),
            budget=request.timeout,
            policy=self._policy,
            on_retry=self._on_retry,
            until=until if request.deadline is None else min(until, request.deadline),
            loop_deadline=request.deadline,
        )

    def _attempt(
        self, client: Any, request: JudgeRequest, schema: Mapping[str, Any], remaining: float
    ) -> JudgeReply:
        import anthropic

        try:
            # Streamed off the socket so that a reply past the cap is never held whole.
            with client.messages.with_streaming_response.create(
                model=request.model,
                max_tokens=request.max_tokens,
                system=request.system,
                messages=[{"role": "user", "content": request.user}],
                tools=[
                    {
                        "name": TOOL_NAME,
                        "description": TOOL_DESCRIPTION,
                        "input_schema": dict(schema),
                        "strict": True,
                    }
                ],
                tool_choice={"type": "tool", "name": TOOL_NAME},
                timeout=remaining,
            ) as raw:
                data = _read_bounded(raw, request.timeout)
        except anthropic.APITimeoutError as exc:
            raise ProviderError(
                f"the judge did not answer within {request.timeout:g} s",
                flags={"timeout": True},
                retryable=True,
            ) from exc
        except anthropic.APIConnectionError as exc:
            raise ProviderError(
                f"cannot reach the Anthropic API: {exc.__cause__ or exc}",
                flags={"api_error": True, "connection_error": True},
                retryable=True,
            ) from exc
        except anthropic.APIStatusError as exc:
            raise ProviderError(
                f"Anthropic API error {exc.status_code}: {_error_message(exc.body, exc)}",
                flags=status_flags(exc.status_code),
                retryable=is_retryable_status(exc.status_code),
                retry_after=parse_retry_after(exc.response.headers),
            ) from exc
        except anthropic.APIError as exc:
            raise ProviderError(
                f"Anthropic API error: {exc}", flags={"api_error": True}, retryable=False
            ) from exc
        text = data.decode("utf-8", "replace")
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        return parse_message(body, text if body is None else "")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _read_bounded(raw: Any, timeout: float) -> bytearray:
    """The body, read off the socket up to MAX_REPLY_BYTES. The SDK wraps what fails before
    the headers; what fails while the body streams is its HTTP library's own error, told
    apart here by name so as not to depend on which library the SDK ships with."""
    data = bytearray()
    try:
        for chunk in raw.iter_bytes():
            data += chunk
            if len(data) > MAX_REPLY_BYTES:
                raise reply_too_large("the Anthropic API")
    except ProviderError:
        raise
    except Exception as exc:
        if "timeout" in type(exc).__name__.lower():
            raise ProviderError(
                f"the judge did not answer within {timeout:g} s",
                flags={"timeout": True},
                retryable=True,
            ) from exc
        raise ProviderError(
            f"the Anthropic API's reply broke off: {exc}",
            flags={"api_error": True, "connection_error": True},
            retryable=True,
        ) from exc
    return data


def _error_message(body: object, exc: Exception) -> str:
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping) and isinstance(err.get("message"), str):
            return str(err["message"])
    return str(exc)


def parse_message(body: object, raw_text: str = "") -> JudgeReply:
    """A Messages API response body -> JudgeReply. A 200 can still be malformed: check it."""
    if not isinstance(body, Mapping) or body.get("type") != "message":
        preview = raw_text[:200] if raw_text else repr(body)[:200]
        raise ProviderError(
            f"the Anthropic API answered 200 with something that is not a message: {preview!r}",
            flags={"api_error": True, "invalid_response": True, "status": 200},
        )
    content = body.get("content")
    blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
    usage = body.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    answer: Mapping[str, Any] | None = None
    for block in blocks:
        if block.get("type") == "tool_use" and block.get("name") == TOOL_NAME:
            tool_input = block.get("input")
            if isinstance(tool_input, Mapping):
                answer = tool_input
                break
    text = "\n".join(
        str(b.get("text")) for b in blocks if b.get("type") == "text" and b.get("text")
    )
    stop_reason = body.get("stop_reason")
    return JudgeReply(
        answer=answer,
        text=text,
        model=str(body.get("model") or ""),
        input_tokens=token_count(usage.get("input_tokens")),
        output_tokens=token_count(usage.get("output_tokens")),
        stop_reason=stop_reason if isinstance(stop_reason, str) else None,
    )
