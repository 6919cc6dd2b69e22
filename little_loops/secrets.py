"""Secret values and their redaction to `***` in events, state files, logs and terminal output."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping
from typing import Any

MASK = "***"
# Environment variable names whose values are treated as secrets (case-insensitive globs).
SECRET_ENV_PATTERNS = ("*_KEY", "*_TOKEN", "*_SECRET", "*PASSWORD*", "*_API_KEY", "ANTHROPIC_*KEY*")
# A shorter value would mask ordinary words and numbers all over the output.
MIN_SECRET_LENGTH = 4


def secret_env_names(env: Mapping[str, str]) -> list[str]:
    """Names of the environment variables that look secret."""
    return [
        name
        for name in env
        if any(fnmatch.fnmatchcase(name.upper(), pattern) for pattern in SECRET_ENV_PATTERNS)
    ]


class Redactor:
    """Replaces every known secret value with `***`, in text, bytes and nested JSON values."""

    def __init__(self, values: Iterable[str]) -> None:
        unique = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH}
        # Longest first, so a secret that contains another is masked whole.
        self.values: tuple[str, ...] = tuple(sorted(unique, key=len, reverse=True))
        self._bytes = tuple(v.encode("utf-8") for v in self.values)
        self.longest = max((len(b) for b in self._bytes), default=0)

    @classmethod
    def for_run(
        cls, env: Mapping[str, str], context: Mapping[str, str], secret_keys: Iterable[str]
    ) -> Redactor:
        values = [env[name] for name in secret_env_names(env)]
        values += [context[key] for key in secret_keys if key in context]
        return cls(values)

    def __bool__(self) -> bool:
        return bool(self.values)

    def text(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def data(self, data: bytes) -> bytes:
        for value in self._bytes:
            if value in data:
                data = data.replace(value, MASK.encode())
        return data

    def obj(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string redacted (keys too)."""
        if not self.values:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.obj(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.obj(v) for v in value]
        return value


class RedactingStream:
    """Passes a byte stream on with secrets masked, even when one spans two chunks.

    It holds back the last `longest - 1` bytes of each chunk until the next one arrives (or
    `flush`), so a secret split across a chunk boundary is still found whole.
    """

    def __init__(self, sink: Callable[[bytes], object], redactor: Redactor) -> None:
        self._sink = sink
        self._redactor = redactor
        self._keep = max(redactor.longest - 1, 0)
        self._pending = b""

    def write(self, chunk: bytes) -> None:
        data = self._redactor.data(self._pending + chunk)
        if len(data) > self._keep:
            cut = len(data) - self._keep
            self._sink(data[:cut])
            self._pending = data[cut:]
        else:
            self._pending = data

    def flush(self) -> None:
        if self._pending:
            self._sink(self._redactor.data(self._pending))
            self._pending = b""
