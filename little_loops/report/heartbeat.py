"""The heartbeat: "still running" lines every so often while a step runs, from one thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Heartbeat:
    """Calls `beat(seconds since the step began)` every `interval` seconds while a step runs.

    One daemon thread for the whole run, asleep between steps; starting and stopping a step
    costs a lock, not a thread. A start wakes the thread only when it sleeps without a
    deadline or with one later than the new beat's: a thread already due to wake sooner finds
    the new beat then, so a run of short steps wakes it about once an interval, not at every
    step (each wake is a thread switch and a hand-over of the GIL).
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
        # When the thread's wait ends: None asleep without a deadline (or not waiting yet).
        self._until: float | None = None
        self.wakes = 0  # how many times the thread woke up (tests count them)

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
            elif self._until is None or self._until > self._next:
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
                    self._until = None
                    self._cond.wait()
                    self.wakes += 1
                    continue
                left = self._next - self._clock()
                if left > 0:
                    self._until = self._next
                    self._cond.wait(left)
                    self.wakes += 1
                    continue
                since = self._since
                self._next += self.interval
            self._beat(self._clock() - since)
