"""The heartbeat: "still running" lines every so often while a step runs, from one thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Heartbeat:
    """Calls `beat(seconds since the step began)` every `interval` seconds while a step runs.

    One daemon thread for the whole run, asleep between steps; starting and stopping a step
    costs a lock and a notify, not a thread.
    """

    def __init__(
        self,
        interval: float,
        beat: Callable[[float], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self._beat = beat
        self._clock = clock
        self._cond = threading.Condition()
        self._since: float | None = None
        self._next = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False

    def start(self, since: float) -> None:
        """A step began at `since` (on `clock`); beats come `interval` apart from there."""
        with self._cond:
            if self._since == since:
                return
            self._since = since
            self._next = since + self.interval
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ll-heartbeat", daemon=True)
                self._thread.start()
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._since = None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._since = None
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                if self._since is None:
                    self._cond.wait()
                    continue
                left = self._next - self._clock()
                if left > 0:
                    self._cond.wait(left)
                    continue
                since = self._since
                self._next += self.interval
            self._beat(self._clock() - since)
