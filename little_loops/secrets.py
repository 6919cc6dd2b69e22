"""Secret values and their redaction to `***` in events, state files, logs and terminal output."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

MASK = "***"
MASK_BYTES = MASK.encode()
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
        # One scan, leftmost match first and the longest secret at each place.
        self.pattern_bytes = re.compile(b"|".join(re.escape(b) for b in self._bytes))
        self._pattern_text = re.compile("|".join(re.escape(v) for v in self.values))

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
        return self._pattern_text.sub(MASK, text) if self.values else text

    def data(self, data: bytes) -> bytes:
        return self.pattern_bytes.sub(MASK_BYTES, data) if self.values else data

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

    The last `longest - 1` raw bytes wait for the next chunk (or `flush`): a secret that
    begins earlier than that is wholly inside what has arrived, so everything before that
    point can be masked and passed on for good. A match that starts before the point and
    ends after it is passed on whole.
    """

    def __init__(self, sink: Callable[[bytes], object], redactor: Redactor) -> None:
        self._sink = sink
        self._redactor = redactor
        self._keep = max(redactor.longest - 1, 0)
        self._pending = b""

    def write(self, chunk: bytes) -> None:
        if not self._redactor:
            self._sink(chunk)
            return
        data = self._pending + chunk
        limit = len(data) - self._keep
        if limit <= 0:
            self._pending = data
            return
        out: list[bytes] = []
        pos = 0
        for match in self._redactor.pattern_bytes.finditer(data):
            if match.start() >= limit:
                break
            out += (data[pos : match.start()], MASK_BYTES)
            pos = match.end()
        end = max(limit, pos)
        out.append(data[pos:end])
        self._sink(b"".join(out))
        self._pending = data[end:]

    def flush(self) -> None:
        if self._pending:
            self._sink(self._redactor.data(self._pending))
            self._pending = b""
