"""What every judge provider shares: the request and reply records, errors, retries, model URIs.

A provider turns one `JudgeRequest` into one `JudgeReply` or raises `ProviderError`. It never
interprets the answer: that is the judge's job (`little_loops.evaluators.llm`). Provider modules
import their SDKs lazily so that importing this package costs nothing.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from little_loops.model.details import Json

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any, Protocol, TypeVar

    T = TypeVar("T")
else:
    Protocol = object  # (Provider is for the type checker)

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
# The most a judge's reply may weigh: a verdict is a few hundred bytes, a long one a few KiB.
# A reply past this (a broken proxy, a CLI printing without end) is an `error`, never kept.
MAX_REPLY_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class JudgeRequest:
    """One question to a judge model: the texts, the answer schema and the limits."""

    model: str  # the provider's own model id (no scheme)
    system: str
    user: str
    schema: Mapping[str, Json]
    max_tokens: int
    timeout: float  # wall budget for this request, retries and waits included
    deadline: float | None = None  # time.monotonic() when the loop's `timeout` runs out
    temperature: float | None = None  # None: the provider's default (claude:// takes none)


@dataclass(frozen=True)
class JudgeReply:
    """What came back: a structured answer, or only text for the lenient parser."""

    answer: Mapping[str, Json] | None  # the tool input / structured output, when there was one
    text: str = ""  # any text the model wrote instead (or besides)
    model: str = ""  # the model id the server reported
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # when the provider reports its own cost (claude CLI)
    stop_reason: str | None = None
    attempts: int = 1
    extra: Mapping[str, Json] = field(default_factory=dict)


class ProviderError(Exception):
    """A judge request failed. `flags` go into the verdict's details as they are.

    `retryable` marks failures worth another attempt (429, 5xx, 529, connection errors,
    timeouts); `retry_after` is the server's requested wait in seconds, when it gave one.
    """

    def __init__(
        self,
        message: str,
        *,
        flags: Mapping[str, Json] | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.flags: dict[str, Json] = dict(flags or {})
        self.retryable = retryable
        self.retry_after = retry_after


def reply_too_large(what: str) -> ProviderError:
    """The error for a reply past MAX_REPLY_BYTES; not retried (the same reply would come)."""
    cap = f"{MAX_REPLY_BYTES // (1024 * 1024)} MiB"
    return ProviderError(
        f"{what} sent more than {cap}; a judge's reply is at most {cap} (a verdict is a few "
        "hundred bytes): check the server or proxy it goes through",
        flags={"too_large": True, "limit_bytes": MAX_REPLY_BYTES},
    )


class Provider(Protocol):
    """One judge backend. Created lazily, once per run, closed at the end of the run."""

    name: str

    def complete(self, request: JudgeRequest) -> JudgeReply: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RetryPolicy:
    """Our own bounded retries: exponential backoff with full jitter, capped by the budget.

    Attempt n (from 1) that fails retryably waits `uniform(0, min(cap, base * 2**(n-1)))`
    seconds, or the server's `retry-after` when it gave one. A wait that would pass the
    request's remaining budget is not taken: the last error is returned at once instead.
    """

    max_attempts: int = 4
    base: float = 0.5
    cap: float = 8.0


DEFAULT_POLICY = RetryPolicy()


def token_count(value: object) -> int:
    """A usage field as a whole number of tokens; anything else (missing, bool, text) is 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def status_flags(status: int) -> dict[str, Json]:
    """The details flags for an HTTP error status."""
    flags: dict[str, Json] = {"api_error": True, "status": status}
    if status == 429:
        flags["rate_limited"] = True
    elif status == 529:
        flags["overloaded"] = True
    return flags


def is_retryable_status(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds; an HTTP date is ignored)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = lowered.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None


LOOP_TIMEOUT_MESSAGE = "the loop's timeout ran out while the judge was {doing}"


def loop_timeout(doing: str) -> ProviderError:
    """The error of a judgement the loop's deadline cut short."""
    return ProviderError(
        LOOP_TIMEOUT_MESSAGE.format(doing=doing), flags={"timeout": True, "loop_timeout": True}
    )


def remaining(deadline: float | None, budget: float) -> float:
    """Seconds left of `budget`, cut to the loop's `deadline` (time.monotonic()) when sooner."""
    if deadline is None:
        return budget
    return min(budget, deadline - time.monotonic())


def before_deadline(
    work: Callable[[], T], deadline: float | None, doing: str, *, budget: float | None = None
) -> T:
    """`work()`, unless the loop's `deadline` or the judge's own `budget` runs out first.

    With a bound the work runs in a daemon thread, so that a slow step which cannot be
    interrupted (importing the SDK takes about 2 s, and may still be under way in the
    background: see `prefetch_sdk`) never holds a judgement past its timeout. `budget` is
    in seconds from now; running out of it is the judge's timeout, of `deadline` the loop's.
    """
    start = time.monotonic()
    until = None if budget is None else start + budget
    if deadline is None and until is None:
        return work()
    import threading

    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append((False, exc))

    worker = threading.Thread(target=run, name="ll-judge-setup", daemon=True)
    worker.start()
    worker.join(max(0.0, min(t for t in (deadline, until) if t is not None) - start))
    if not outcome:
        if deadline is not None and (until is None or deadline <= until):
            raise loop_timeout(doing)
        raise ProviderError(
            f"the judge's time budget ({budget:g} s) ran out while {doing}",
            flags={"timeout": True},
        )
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result


_prefetch_started = False


def prefetch_sdk() -> None:
    """Start importing the Anthropic SDK in a daemon thread, once per process.

    A run whose judges need the SDK (the Anthropic API) calls this when it begins, so the
    import (about 2 s) overlaps the first actions instead of delaying the first judged step.
    Whoever needs the SDK still imports it, and waits within the loop's deadline
    (`before_deadline`), never within its judge's own timeout; a failed import here is left
    for that import to report.
    """
    global _prefetch_started
    if _prefetch_started:
        return
    _prefetch_started = True
    import threading

    def load() -> None:
        try:
            import anthropic  # noqa: F401
        except BaseException:  # the judge's own import reports it
            return

    threading.Thread(target=load, name="ll-sdk-prefetch", daemon=True).start()


def with_retries(
    attempt: Callable[[float], JudgeReply],
    *,
    budget: float,
    policy: RetryPolicy,
    on_retry: Callable[[int, float, ProviderError], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
    until: float | None = None,
    loop_deadline: float | None = None,
) -> JudgeReply:
    """Call `attempt(remaining_seconds)` until it succeeds, fails for good, or time runs out.

    `until` (a `clock()` value, the loop's deadline) cuts the budget short when it comes
    first: no attempt and no wait goes past it. Raises the last `ProviderError`, with
    `attempts` added to its flags. When `loop_deadline` (the loop's `timeout:`) is what
    leaves no time for the next attempt or its wait, the error is the loop's timeout
    (`loop_timeout`, raised at that deadline: the run ends 124) with the last error's flags
    kept: a 529 storm the loop's time cut short is a timeout, not the judge failing.
    """
    deadline = clock() + budget
    if until is not None:
        deadline = min(deadline, until)
    if loop_deadline is not None:
        deadline = min(deadline, loop_deadline)
    loop_binds = loop_deadline is not None and loop_deadline <= deadline
    n = 0
    while True:
        n += 1
        remaining = deadline - clock()
        try:
            if remaining <= 0 and loop_binds:
                raise loop_timeout("retrying")
            if remaining <= 0:
                raise ProviderError(
                    f"the judge's time budget ({budget:g} s) ran out",
                    flags={"timeout": True},
                )
            reply = attempt(remaining)
        except ProviderError as err:
            err.flags["attempts"] = n
            if not err.retryable or n >= policy.max_attempts:
                raise
            delay = (
                err.retry_after
                if err.retry_after is not None
                else rand() * min(policy.cap, policy.base * 2 ** (n - 1))
            )
            remaining = deadline - clock()
            if delay >= remaining:
                if loop_binds and not err.flags.get("loop_timeout"):
                    # The loop's time runs out during this wait: spend it, then end as the
                    # loop's timeout (the run ends 124 at its deadline, not 3 before it). A
                    # request the deadline itself cut was still being answered.
                    if remaining <= 0:
                        cut = loop_timeout("answering")
                    else:
                        sleep(max(0.0, deadline - clock()))
                        cut = loop_timeout(f"waiting {delay:.1f} s to retry after: {err.message}")
                    cut.flags = {**err.flags, **cut.flags}
                    raise cut from err
                if err.retry_after is not None:
                    err.message += (
                        f" (the server asked to retry after {err.retry_after:g} s, past the"
                        f" judge's remaining budget of {max(remaining, 0):.1f} s)"
                    )
                raise
            if on_retry is not None:
                on_retry(n, delay, err)
            sleep(delay)
            continue
        if n > 1:
            return JudgeReply(**{**reply.__dict__, "attempts": n})
        return reply


def strict_schema(
    schema: Mapping[str, Any], transform: Callable[[Mapping[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """`transform(schema)`, or a ProviderError saying the schema cannot be sent."""
    try:
        return transform(schema)
    except ValueError as exc:
        raise ProviderError(str(exc), flags={"config_error": True, "schema_error": True}) from exc


def split_model(model: str) -> tuple[str, str]:
    """`anthropic://ID`, `claude://ALIAS`, `ollama://HOST:PORT/MODEL`, `openai://MODEL` or a bare
    id (Anthropic) -> (provider name, the rest). Raises ValueError for an unknown scheme."""
    scheme, sep, rest = model.partition("://")
    if not sep:
        return "anthropic", model
    if scheme not in ("anthropic", "claude", "ollama", "openai"):
        raise ValueError(
            f"unknown judge model scheme '{scheme}://' in '{model}'; use a bare model id, "
            "anthropic://ID, claude://ALIAS, ollama://HOST:PORT/MODEL or openai://MODEL"
        )
    if not rest:
        raise ValueError(f"judge model '{model}' names no model after '{scheme}://'")
    return scheme, rest


def ollama_target(rest: str) -> tuple[str, str]:
    """`HOST:PORT/MODEL` -> (base URL, model). The model may itself contain `/` or `:`.

    Raises ValueError when the host, the port or the model is missing or malformed.
    """
    host, sep, model = rest.partition("/")
    shape = "must look like ollama://HOST:PORT/MODEL, e.g. ollama://localhost:11434/qwen3:8b"
    if not sep or not host or not model.strip("/"):
        raise ValueError(f"ollama judge 'ollama://{rest}' names no model; it {shape}")
    port = ""
    if not host.endswith("]") and ":" in host:  # `[::1]` is an IPv6 host without a port
        host, _, port = host.rpartition(":")
        if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(
                f"ollama judge 'ollama://{rest}' has port '{port}', not a number from 1 to "
                f"65535; it {shape}"
            )
    if not host or any(c.isspace() or c in "@?#" for c in host):
        raise ValueError(f"ollama judge 'ollama://{rest}' has no valid host; it {shape}")
    return f"http://{host}{':' + port if port else ''}/v1", model


def model_problem(model: str) -> str | None:
    """Why `model` names no judge this program can ask, or None when it does.

    Checked when a loop file is loaded (`model`, `llm.model`) and for `--model` / `LL_MODEL`,
    so a misspelt judge is an error before the run instead of verdict `error` in every step.
    """
    if not model.strip():
        return "the judge model is empty; name one, e.g. claude-haiku-4-5, or remove the key"
    if "${" in model:
        return (
            f"judge model '{model}' holds a placeholder, but a model is never interpolated; "
            "write the model id, or pass it with --model or LL_MODEL"
        )
    if any(c.isspace() for c in model):
        return f"judge model '{model}' contains a space; a model id is one word"
    try:
        provider, rest = split_model(model)
        if provider == "ollama":
            ollama_target(rest)
    except ValueError as exc:
        return str(exc)
    return None
