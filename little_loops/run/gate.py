"""Where SIGINT and SIGTERM take effect during a run: the gate the runner opens around waits."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from little_loops.errors import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
)


class Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler, so running actions are killed."""


class _Local(threading.local):
    """A thread's own gate state; None (the class's) in a thread that has none. Read at every
    step, several times: a missing attribute of a plain `threading.local` raises and catches an
    AttributeError each time (about 1 µs)."""

    state: GateState | None = None


class GateState:
    """One thread's gate: whether signals are held, and the one that came meanwhile."""

    def __init__(self) -> None:
        self.held = False
        self.pending: int | None = None
        self.received: int | None = None  # the last signal the handler gave it


class _SignalGate:
    """Where SIGINT and SIGTERM take effect during a run.

    A signal stops the run at once only inside a window the runner opens for waiting on
    something outside (an action, the judge, a sleep). Anywhere else it is held until the
    step's bookkeeping (its events and persisted route) is done, so a step is either
    finished and recorded, or cut off and run again on resume, never half of each.
    """

    def __init__(self) -> None:
        self._main = GateState()
        self._local = _Local()

    # A branch of a fork runs in a thread of its own, with its own gate state (`adopt`):
    # the main thread's handler never reaches it; a fork stops it by setting its `pending`.
    def _state(self) -> GateState:
        state = self._local.state
        return state if state is not None else self._main

    def adopt(self, state: GateState) -> None:
        """This thread (a fork's branch) uses `state` from now on."""
        self._local.state = state

    @contextmanager
    def lent(self, state: GateState) -> Iterator[None]:
        """This thread uses `state` for a while (a branch run in the forking thread): the
        signal handler, which runs in the main thread, then gives its signals to `state`."""
        before = self._local.state
        self._local.state = state
        try:
            yield
        finally:
            self._local.state = before

    @property
    def held(self) -> bool:
        return self._state().held

    @held.setter
    def held(self, value: bool) -> None:
        self._state().held = value

    @property
    def pending(self) -> int | None:
        return self._state().pending

    @pending.setter
    def pending(self, value: int | None) -> None:
        self._state().pending = value

    def arrived(self, signum: int) -> None:
        """The handler's half: raise now, or remember the signal for the end of the hold."""
        state = self._state()
        state.received = signum
        if state.held:
            state.pending = signum
            return
        raise_for(signum)

    def deferred(self) -> _Deferred:
        """Hold signals; a signal that came meanwhile is raised on leaving, unless still held."""
        return _Deferred(self._state())

    def interruptible(self) -> _Interruptible:
        """A window where a signal stops the run at once (a held one is raised on entry)."""
        return _Interruptible(self._state(), self._main)

    def raise_pending(self) -> None:
        _raise_pending(self._state())


# The two windows are classes rather than generators: each step opens both (its action's
# wait, its state's write), and a generator's context manager costs several times as much.
# Each works on the gate state of the thread that opened it, which a thread keeps throughout
# (`lent` gives it back on the way out).


class _Deferred:
    __slots__ = ("state", "was")

    def __init__(self, state: GateState) -> None:
        self.state = state
        self.was = False

    def __enter__(self) -> None:
        self.was = self.state.held
        self.state.held = True

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        state = self.state
        state.held = self.was
        if kind is None and not self.was:
            _raise_pending(state)


class _Interruptible:
    __slots__ = ("main", "state", "was")

    def __init__(self, state: GateState, main: GateState) -> None:
        self.state = state
        self.main = main
        self.was = False

    def __enter__(self) -> None:
        state = self.state
        _raise_pending(state)
        self.was = state.held
        state.held = False

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        state = self.state
        state.held = self.was
        if kind is None and state is not self.main:
            _raise_pending(state)  # a branch is stopped when its wait ends (the fork killed it)


def _raise_pending(state: GateState) -> None:
    if state.pending is not None:
        signum, state.pending = state.pending, None
        raise_for(signum)


def raise_for(signum: int) -> None:
    """Raise what `signum` raises in a run: KeyboardInterrupt (SIGINT) or `Terminated`."""
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
