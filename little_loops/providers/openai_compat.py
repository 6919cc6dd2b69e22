"""OpenAI-compatible chat-completions judges (`openai://MODEL`, `ollama://HOST:PORT/MODEL`).

Plain HTTP with the standard library: one small POST per judgement, `response_format`
json_schema, the reply's message text handed to the lenient parser by the judge.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from . import (
    DEFAULT_OPENAI_BASE_URL,
    DEFAULT_POLICY,
    MAX_REPLY_BYTES,
    JudgeReply,
    JudgeRequest,
    ProviderError,
    RetryPolicy,
    is_retryable_status,
    parse_retry_after,
    reply_too_large,
    status_flags,
    strict_schema,
    token_count,
    with_retries,
)
from .strict import openai_schema


class OpenAICompatProvider:
    """Chat completions against one base URL, with an optional bearer key."""

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key: str | None,
        *,
        policy: RetryPolicy = DEFAULT_POLICY,
        on_retry: Callable[[int, float, ProviderError], None] | None = None,
    ) -> None:
        self.name = name
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self._policy = policy
        self._on_retry = on_retry
        self._fixed_temperature: set[str] = set()  # models that refused our temperature
        self._completion_tokens: set[str] = set()  # models that refused max_tokens

    def complete(self, request: JudgeRequest) -> JudgeReply:
        if self._api_key is None and self._url.startswith(DEFAULT_OPENAI_BASE_URL):
            raise ProviderError(
                "no OpenAI API key: set OPENAI_API_KEY, or point OPENAI_BASE_URL at your own "
                "OpenAI-compatible server",
                flags={"no_api_key": True},
            )
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.user},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "evaluate",
                    "strict": True,
                    "schema": strict_schema(request.schema, openai_schema),
                },
            },
        }
        token_key = (
            "max_completion_tokens"
            if _reasoning_model(request.model) or request.model in self._completion_tokens
            else "max_tokens"
        )
        body[token_key] = request.max_tokens
        if request.temperature is not None and request.model not in self._fixed_temperature:
            body["temperature"] = request.temperature
        until = time.monotonic() + request.timeout
        extra: dict[str, Any] = {}
        while True:  # at most one fallback of each kind: the body shrinks or renames each time
            try:
                reply = self._send(body, request, until)
                break
            except ProviderError as err:
                if "temperature" in body and _refuses(err, "temperature"):
                    # Some models (OpenAI's reasoning models) take only their own temperature:
                    # ask again without one, and never send one to this model again this run.
                    self._fixed_temperature.add(request.model)
                    del body["temperature"]
                    extra["temperature_dropped"] = True
                elif "max_tokens" in body and _refuses(err, "max_tokens"):
                    # Reasoning models (gpt-5*, o-series) want max_completion_tokens instead.
                    self._completion_tokens.add(request.model)
                    body["max_completion_tokens"] = body.pop("max_tokens")
                    extra["max_completion_tokens"] = True
                else:
                    raise
        if not extra:
            return reply
        return JudgeReply(**{**reply.__dict__, "extra": {**reply.extra, **extra}})

    def _send(self, body: dict[str, Any], request: JudgeRequest, until: float) -> JudgeReply:
        payload = json.dumps(body).encode()
        return with_retries(
            lambda remaining: self._attempt(payload, request, remaining),
            budget=request.timeout,
            policy=self._policy,
            on_retry=self._on_retry,
            until=until if request.deadline is None else min(until, request.deadline),
            loop_deadline=request.deadline,
        )

    def _attempt(self, payload: bytes, request: JudgeRequest, remaining: float) -> JudgeReply:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        http_request = urllib.request.Request(self._url, data=payload, headers=headers)
        try:
            with urllib.request.urlopen(http_request, timeout=remaining) as response:
                raw = response.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as exc:
            with exc:
                detail = exc.read(4096).decode("utf-8", "replace")[:200]
                raise ProviderError(
                    f"{self.name} API error {exc.code} from {self._url}: {detail}",
                    flags=status_flags(exc.code),
                    retryable=is_retryable_status(exc.code),
                    retry_after=parse_retry_after(dict(exc.headers.items())),
                ) from None
        except TimeoutError as exc:
            raise ProviderError(
                f"the judge did not answer within {request.timeout:g} s",
                flags={"timeout": True},
                retryable=True,
            ) from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise ProviderError(
                    f"the judge did not answer within {request.timeout:g} s",
                    flags={"timeout": True},
                    retryable=True,
                ) from exc
            raise ProviderError(
                f"cannot reach {self._url}: {reason}",
                flags={"api_error": True, "connection_error": True},
                retryable=True,
            ) from exc
        if len(raw) > MAX_REPLY_BYTES:
            raise reply_too_large(f"{self._url}")
        return parse_chat(raw.decode("utf-8", "replace"))

    def close(self) -> None:
        """Nothing to close: every request opens and closes its own connection."""


def _refuses(err: ProviderError, param: str) -> bool:
    """A 400 that names `param`: the model refuses it (a temperature, `max_tokens`)."""
    return err.flags.get("status") == 400 and f"'{param}'" in err.message


def _reasoning_model(model: str) -> bool:
    """OpenAI's reasoning models (gpt-5*, o1, o3, o4*): they refuse `max_tokens` with a 400."""
    return model.startswith(("gpt-5", "o1", "o3", "o4"))


def parse_chat(body_text: str) -> JudgeReply:
    """A chat-completions body -> JudgeReply with the message text (structured or not)."""
    try:
        body: Any = json.loads(body_text)
        message = body["choices"][0]["message"]
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise TypeError("content is not text")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ProviderError(
            f"the server answered 200 with something that is not a chat completion: "
            f"{body_text[:200]!r}",
            flags={"api_error": True, "invalid_response": True, "status": 200},
        ) from exc
    usage_field = body.get("usage")
    usage: Mapping[str, Any] = usage_field if isinstance(usage_field, Mapping) else {}
    finish = body["choices"][0].get("finish_reason")
    refusal = message.get("refusal")
    return JudgeReply(
        answer=None,
        text=content,
        model=str(body.get("model") or ""),
        input_tokens=token_count(usage.get("prompt_tokens")),
        output_tokens=token_count(usage.get("completion_tokens")),
        stop_reason=finish if isinstance(finish, str) else None,
        extra={"refusal": refusal} if isinstance(refusal, str) and refusal else {},
    )
