"""Event records (SPEC section 10) and the sinks that receive them: a JSONL file, callbacks."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

Event = dict[str, Any]


def _compact_encoder() -> Callable[[Any], str]:
    """Compact, UTF-8-keeping JSON, the encoder built once.

    `json.dumps` and `JSONEncoder.encode` build a new C encoder on every call, which is most
    of the cost of a small event; the runner encodes six objects a step. Where CPython's C
    encoder is not available, the standard encoder does the same job.
    """
    standard = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
    try:
        from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
    except ImportError:
        c_make_encoder = None
    if c_make_encoder is None:
        return standard.encode
    # No circular-reference markers: events and states are plain trees built here.
    encode_one = c_make_encoder(
        None, standard.default, encode_basestring, None, ":", ",", False, False, True
    )

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return standard.encode(value)
        return "".join(encode_one(value, 0))

    return encode


ENCODE = _compact_encoder()
Listener = Callable[[Event], None]

# The public event names; CI dashboards read them, so they only ever grow.
EVENT_NAMES = (
    "loop_start",
    "state_enter",
    "action_start",
    "action_complete",
    "evaluate",
    "retry",
    "route",
    "loop_complete",
    "judge_retry",
    "judge_fail_open",
    "lock_reclaimed",
    "judge_start",
)


_second: tuple[int, str] = (-1, "")


def utc_now() -> str:
    """ISO 8601 UTC with milliseconds, e.g. 2026-11-22T04:14:30.123Z (every event has one)."""
    global _second
    now = time.time()
    whole = int(now)
    if whole != _second[0]:
        _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{_second[1]}.{int((now - whole) * 1000):03d}Z"


class JsonlSink:
    """Appends one JSON object a line.

    Lines are buffered until `flush`, which the runner calls once an action's process has
    started (so `ll logs -f` shows a running step) and before it writes state.json (so the
    log is never behind the state). A crash loses at most the events of the step it cut off, which a
    resumed run re-runs anyway.
    """

    def __init__(self, path: Path) -> None:
        import os

        from .errors import RunError

        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        # Never through a symbolic link (a planted one would make the run append to its
        # target), and after a torn last line (a crash mid-write) on a line of its own, so the
        # first event of a resumed run is not glued to the fragment and lost with it.
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as exc:
            why = exc.strerror or str(exc)
            if os.path.islink(path):
                why = "it is a symbolic link, which ll does not follow inside .loops/ (remove it)"
            raise RunError(f"cannot open {path}: {why}") from None
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.write(fd, b"\n")
        self._file: IO[str] = open(fd, "a", encoding="utf-8")  # noqa: SIM115 - see close()

    def __call__(self, event: Event) -> None:
        line = ENCODE(event)
        try:
            self._file.write(line + "\n")
        except UnicodeEncodeError:
            # Bytes that are not UTF-8 (an environment value, a file name): JSON escapes.
            self._file.write(json.dumps(event, separators=(",", ":")) + "\n")

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError as exc:  # a full disk: say which file
            raise OSError(exc.errno, exc.strerror, str(self._path)) from None

    def close(self) -> None:
        # A flush that failed was reported already; those events are lost either way.
        with contextlib.suppress(OSError):
            self._file.close()


class Emitter:
    """Builds events with the common fields and hands each to every listener, in order.

    `redact` is applied to each event before any listener sees it, so no sink can leak a
    secret value.
    """

    def __init__(
        self,
        run_id: str,
        listeners: list[Listener],
        *,
        redact: Callable[[Event], Event] | None = None,
        clock: Callable[[], str] = utc_now,
    ) -> None:
        self.run_id = run_id
        self.listeners = listeners
        self._redact = redact
        self._clock = clock

    def emit(
        self,
        name: str,
        fields: Mapping[str, Any] | None = None,
        *,
        step: int | None = None,
        state: str | None = None,
    ) -> Event:
        event: Event = {"event": name, "ts": self._clock(), "run_id": self.run_id}
        if step is not None:
            event["step"] = step
        if state is not None:
            event["state"] = state
        if fields:
            event.update(fields)
        if self._redact is not None:
            event = self._redact(event)
        for listener in self.listeners:
            listener(event)
        return event


def read_events(path: Path) -> list[Event]:
    """Every complete event of a JSONL file; a torn last line (from a crash) is skipped."""
    events: list[Event] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return events
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(item, dict):
            events.append(item)
    return events
