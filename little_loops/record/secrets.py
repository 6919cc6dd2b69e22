"""Secret values: their redaction to `***` in events, logs and terminal output, and their
sealing as named markers in the state a resumed run reads back."""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping

from little_loops.errors import (
    EXIT_USAGE,
    LoopError,
)

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

MASK = "***"
MASK_BYTES = MASK.encode()
# Environment variable names whose values are treated as secrets (case-insensitive globs).
SECRET_ENV_PATTERNS = ("*_KEY", "*_TOKEN", "*_SECRET", "*PASSWORD*", "*_API_KEY", "ANTHROPIC_*KEY*")
# A shorter value would mask ordinary words and numbers all over the output.
MIN_SECRET_LENGTH = 4


def secret_env_names(env: Mapping[str, str]) -> list[str]:
    """Names of the environment variables that look secret."""
    return [name for name in env if _looks_secret(name)]


@functools.lru_cache(maxsize=4096)
def _looks_secret(name: str) -> bool:
    # Every run of a tree asks about the same names: the globs are matched once a name.
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_ENV_PATTERNS)


def secret_sources(
    env: Mapping[str, str], context: Mapping[str, str], secret_keys: Iterable[str]
) -> dict[str, str]:
    """Each secret value of a run by where it comes from: `env.NAME` or `context.KEY`."""
    sources = {f"env.{name}": env[name] for name in secret_env_names(env)}
    sources |= {f"context.{key}": context[key] for key in secret_keys if key in context}
    return sources


def quoted_forms(value: str) -> Iterator[str]:
    """`value` as shell quoting and JSON write it: a quoted copy must not slip past a mask."""
    yield value
    yield value.replace("'", "'\\''")  # inside '...'
    yield value.replace("\\", "\\\\").replace("$", "\\$").replace("`", "\\`").replace('"', '\\"')
    yield json.dumps(value, ensure_ascii=False)[1:-1]


class Redactor:
    """Replaces every known secret value with `***`, in text, bytes and nested JSON values.

    The quoted forms of each value (shell quotes, JSON escapes) are masked too.
    """

    def __init__(self, values: Iterable[str]) -> None:
        secrets = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH}
        self.values: tuple[str, ...] = tuple(sorted(secrets, key=len, reverse=True))
        self.masks = bool(self.values)  # whether anything is masked: read at every step
        # Longest first, so a secret that contains another is masked whole.
        forms = sorted({f for v in secrets for f in quoted_forms(v)}, key=len, reverse=True)
        self._bytes = tuple(f.encode("utf-8") for f in forms)
        self.longest = max((len(b) for b in self._bytes), default=0)
        # One scan, leftmost match first and the longest secret at each place.
        self.pattern_bytes = re.compile(b"|".join(re.escape(b) for b in self._bytes))
        self._pattern_text = re.compile("|".join(re.escape(f) for f in forms))

    @classmethod
    def for_run(
        cls, env: Mapping[str, str], context: Mapping[str, str], secret_keys: Iterable[str]
    ) -> Redactor:
        return cls(secret_sources(env, context, secret_keys).values())

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


class MaskedView(Mapping[str, "Any"]):
    """A read-only view of a nested mapping whose text values come out masked."""

    def __init__(self, inner: Mapping[str, Any], mask: Callable[[str], str]) -> None:
        self._inner = inner
        self._mask = mask

    def __getitem__(self, key: str) -> Any:
        value = self._inner[key]
        if isinstance(value, str):
            return self._mask(value)
        if isinstance(value, Mapping):
            return MaskedView(value, self._mask)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._inner)

    def __len__(self) -> int:
        return len(self._inner)


_OPEN, _CLOSE = "\u27e6", "\u27e7"  # ⟦ ⟧: a marker reads ⟦secret NAME FORM NONCE⟧


class Sealer:
    """Swaps secret values for markers naming their source (`⟦secret context.pw 0 3fa2c1⟧`)
    in what a resumed run reads back (captured values, `prev`, context), and swaps them back.

    FORM numbers the quoted form the value had (see `quoted_forms`). The nonce is the run's
    own, so output that happens to look like a marker stays text.
    """

    def __init__(self, sources: Mapping[str, str], nonce: str) -> None:
        self.nonce = nonce
        self._names: dict[str, tuple[str, int]] = {}
        for name, value in sources.items():
            if len(value) >= MIN_SECRET_LENGTH:
                for form, text in enumerate(quoted_forms(value)):
                    self._names.setdefault(text, (name, form))
        values = sorted(self._names, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in values)) if values else None
        self._marker: re.Pattern[str] | None = None  # compiled when a resume unseals

    def _markers(self) -> re.Pattern[str]:
        """The markers of this run's nonce (one pattern a run: compiled only when needed, since
        every child run and fork branch has a nonce of its own)."""
        if self._marker is None:
            self._marker = re.compile(
                re.escape(f"{_OPEN}secret ")
                + r"([A-Za-z0-9_.-]+) ([0-9]+) "
                + re.escape(f"{self.nonce}{_CLOSE}")
            )
        return self._marker

    def seal(self, value: Any) -> Any:
        """A copy of a JSON-like value with every secret replaced by its marker."""
        pattern = self._pattern
        if pattern is None:
            return value
        if isinstance(value, str):
            return pattern.sub(self._marker_for, value)
        if isinstance(value, Mapping):
            return {self.seal(str(k)): self.seal(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.seal(v) for v in value]
        return value

    def _marker_for(self, match: re.Match[str]) -> str:
        name, form = self._names[match.group()]
        return f"{_OPEN}secret {name} {form} {self.nonce}{_CLOSE}"

    def unseal(self, value: Any, sources: Mapping[str, str]) -> Any:
        """`value` with each marker replaced by the secret now in `sources`.

        Raises LoopError (a usage error) naming every source that is no longer given.
        """
        missing: set[str] = set()
        out = self._unseal(value, sources, missing)
        if missing:
            names = ", ".join(sorted(missing))
            how = []
            keys = sorted(n.removeprefix("context.") for n in missing if n.startswith("context."))
            env = sorted(n.removeprefix("env.") for n in missing if n.startswith("env."))
            if keys:
                how.append(" ".join(f"--set {k}=..." for k in keys))
            if env:
                how.append("set " + ", ".join(env) + " in the environment")
            raise LoopError(
                f"the run's saved values use secrets that are not given again ({names}); "
                f"resume with {' and '.join(how)}",
                exit_code=EXIT_USAGE,
            )
        return out

    def _unseal(self, value: Any, sources: Mapping[str, str], missing: set[str]) -> Any:
        if isinstance(value, str):
            if _OPEN not in value:
                return value

            def fill(match: re.Match[str]) -> str:
                name, form = match.group(1), int(match.group(2))
                if name not in sources:
                    missing.add(name)
                    return match.group()
                forms = list(quoted_forms(sources[name]))
                return forms[form] if form < len(forms) else match.group()

            return self._markers().sub(fill, value)
        if isinstance(value, Mapping):
            return {k: self._unseal(v, sources, missing) for k, v in value.items()}
        if isinstance(value, list):
            return [self._unseal(v, sources, missing) for v in value]
        return value
