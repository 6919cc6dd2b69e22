"""Where SIGINT and SIGTERM take effect during a run: the gate the runner opens around waits."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import EXIT_INTERRUPTED, EXIT_TERMINATED


class Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler, so running actions are killed."""


class _SignalGate:
    """Where SIGINT and SIGTERM take effect during a run.

    A signal stops the run at once only inside a window the runner opens for waiting on
    something outside (an action, the judge, a sleep). Anywhere else it is held until the
    step's bookkeeping (its events and persisted route) is done, so a step is either
    finished and recorded, or cut off and run again on resume, never half of each.
    """

    def __init__(self) -> None:
        self.held = False
        self.pending: int | None = None

    def arrived(self, signum: int) -> None:
        """The handler's half: raise now, or remember the signal for the end of the hold."""
        if self.held:
            self.pending = signum
            return
        _raise_for(signum)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold signals; a signal that came meanwhile is raised on leaving, unless still held."""
        was = self.held
        self.held = True
        try:
            yield
        finally:
            self.held = was
        if not was:
            self.raise_pending()

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """A window where a signal stops the run at once (a held one is raised on entry)."""
        self.raise_pending()
        was = self.held
        self.held = False
        try:
            yield
        finally:
            self.held = was

    def raise_pending(self) -> None:
        if self.pending is not None:
            signum, self.pending = self.pending, None
            _raise_for(signum)


def _raise_for(signum: int) -> None:
    import signal

    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated


GATE = _SignalGate()


@contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """While a run is in progress, SIGINT and SIGTERM raise, so the action is stopped and the
    run persisted; a second signal ends the process at once (state.json is only ever replaced
    whole, so the run stays resumable). Where a signal lands in a step's bookkeeping, it is
    held until that bookkeeping is done (see `_SignalGate`)."""
    import signal

    received: list[int] = []

    def handler(signum: int, frame: object) -> None:
        if received:
            os._exit(EXIT_INTERRUPTED if signum == signal.SIGINT else EXIT_TERMINATED)
        received.append(signum)
        GATE.arrived(signum)

    # Held from here: a signal while the run is set up stops it at its first step, recorded.
    GATE.held, GATE.pending = True, None
    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
        GATE.held, GATE.pending = False, None
