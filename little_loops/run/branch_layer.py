"""What a fork's branch acts through: its `Scope` (what stops it) and `BranchActions` (the
layer every action of the branch, and of every run below it, goes through).

Each action holds one of the tree's `--jobs` slots while it runs, and its process group is
registered in the branch's scope, so stopping the branch (a `fail_fast` join, a signal) kills
it. `Lines` prefixes `--verbose` output with the branch's path; `serial` makes the root's
listeners see one branch's event at a time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from typing import overload

from little_loops.actions import (
    ActionRequest,
    ActionResult,
)
from little_loops.model.loop import Loop
from little_loops.model.records import replace
from little_loops.record.events import (
    Listener,
    RunEvent,
    listening_as,
)
from little_loops.run.action_layer import (
    ActionLayer,
    AnswerRequest,
    AnswerStub,
    ChildRequest,
    ChildStub,
    OutputHook,
    simulates,
    stub,
)
from little_loops.run.gate import (
    GATE,
    GateState,
)


class Scope:
    """What stops one branch: its thread's gate and the process groups it runs; a nested
    fork's branches are its children, stopped with it."""

    def __init__(self, parent: Scope | None = None) -> None:
        self.gate = GateState()
        self.lock = threading.Lock()
        self.groups: set[int] = set()
        self.children: list[Scope] = []
        self.stopped: int | None = None  # the signal it was stopped as
        if parent is not None:
            with parent.lock:
                parent.children.append(self)
                stopped = parent.stopped
            if stopped is not None:
                self.stop(stopped)

    def started(self, pgid: int) -> None:
        with self.lock:
            self.groups.add(pgid)
            stopped = self.stopped
        if stopped is not None:
            _term(pgid)

    def ended(self, pgid: int) -> None:
        with self.lock:
            self.groups.discard(pgid)

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Kill what runs and make the branch's thread raise at its next wait."""
        with self.lock:
            if self.stopped is None:
                self.stopped = signum
            if self.gate.pending is None:
                self.gate.pending = signum
            groups, children = list(self.groups), list(self.children)
        for pgid in groups:
            _term(pgid)
        for child in children:
            child.stop(signum)


def _term(pgid: int) -> None:
    # SIGTERM; the action's own wait then kills what is left of the group (grace, SIGKILL).
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGTERM)


class BranchActions:
    """The action layer of a branch: each action holds one of the tree's `--jobs` slots and
    is registered in the branch's scope, so a stop kills it."""

    def __init__(
        self,
        inner: ActionLayer,
        scope: Scope,
        jobs: threading.Semaphore,
        verbose: tuple[str, OutputHook] | None = None,
    ) -> None:
        self.inner, self.scope, self.jobs = inner, scope, jobs
        # `--verbose`: (the branch's path, the root's output hook): whole lines, prefixed.
        self.verbose = verbose

    def run(self, request: ActionRequest) -> ActionResult:
        while not self.jobs.acquire(timeout=0.2):
            GATE.raise_pending()  # stopped while waiting for a slot
        started: list[int] = []

        def on_start(pid: int) -> None:
            started.append(pid)
            self.scope.started(pid)

        lines = Lines(*self.verbose) if self.verbose and not request.on_output else None
        on_output = lines.feed if lines is not None else request.on_output
        try:
            GATE.raise_pending()
            return self.inner.run(replace(request, on_start=on_start, on_output=on_output))
        finally:
            if lines is not None:
                lines.close()
            for pid in started:
                self.scope.ended(pid)
            self.jobs.release()

    def kill_orphans(self) -> None:
        self.inner.kill_orphans()

    def child(self, state: str, loop: Loop | None) -> BranchActions:
        return BranchActions(self.inner.child(state, loop), self.scope, self.jobs, self.verbose)

    def resumed(self, events_path: Path) -> BranchActions:
        return BranchActions(self.inner.resumed(events_path), self.scope, self.jobs, self.verbose)

    # A branch of a simulated run is as simulated as the layer under it (`Simulation`).
    @overload
    def stub(self, request: ChildRequest) -> ChildStub | None: ...
    @overload
    def stub(self, request: AnswerRequest) -> AnswerStub | None: ...
    def stub(self, request: ChildRequest | AnswerRequest) -> ChildStub | AnswerStub | None:
        if isinstance(request, ChildRequest):
            return stub(self.inner, request)
        return stub(self.inner, request)

    def observe(self, event: RunEvent) -> None:
        if simulates(self.inner):
            self.inner.observe(event)


class Lines:
    """An action's output for `--verbose` in a fork: each whole line, prefixed with the branch's
    path (`[rollout/us-east] …`), so concurrent branches never split each other's lines."""

    def __init__(self, label: str, out: OutputHook) -> None:
        self.prefix, self.out = f"[{label}] ".encode(), out
        self.rest = {"stdout": b"", "stderr": b""}

    def feed(self, name: str, chunk: bytes) -> None:
        *whole, self.rest[name] = (self.rest.get(name, b"") + chunk).split(b"\n")
        for line in whole:
            self.out(name, self.prefix + line + b"\n")

    def close(self) -> None:
        for name, rest in self.rest.items():
            if rest:
                self.out(name, self.prefix + rest + b"\n")


class TreeSlots:
    """The outermost fork's stand-in for a branch layer: the tree's `--jobs` slots, no scope."""

    def __init__(self, inner: ActionLayer, jobs: threading.Semaphore) -> None:
        self.inner, self.jobs = inner, jobs
        self.scope: Scope | None = None
        self.verbose: tuple[str, OutputHook] | None = None


_LISTENER_LOCKS: dict[int, threading.Lock] = {}


_LOCKS_LOCK = threading.Lock()


def branch_listener(listener: Listener, segment: tuple[str, ...]) -> Listener:
    """`serial(subloop.forward(listener, segment), listener)` for a fork's action branch:
    each event it emits reaches the root's `listener` with the fork's state and the branch's
    key in front of its `path`, one branch at a time. The event is copied with its new
    `extra` without its `__init__` (as `events._stamped` stamps one): six events a branch,
    for each listener of the root."""
    chain = list(segment)
    with _LOCKS_LOCK:
        lock = _LISTENER_LOCKS.setdefault(id(listener), threading.Lock())

    def call(event: RunEvent) -> None:
        new = object.__new__(event.__class__)
        new.__dict__.update(event.__dict__, extra={**event.extra, "path": [*chain, *event.path]})
        with lock:
            listener(new)

    return listening_as(call, listener)


def serial(send: Listener, listener: Listener) -> Listener:
    """`send`, called by one branch at a time: a listener of the root (a renderer, a report)
    sees the events of concurrent branches one after another, never two at once."""
    with _LOCKS_LOCK:
        lock = _LISTENER_LOCKS.setdefault(id(listener), threading.Lock())

    def call(event: RunEvent) -> None:
        with lock:
            send(event)

    return listening_as(call, send)
