"""A fork on the terminal: one line per finished branch, and the running branches as a block.

The branches' own steps are not printed one by one (they run at once, and their lines would
interleave): their events only keep the block of running branches up to date (key, current
state, elapsed time), which a terminal redraws in place. Each finished branch is one whole line,
written by the fork's thread.

     1/20  checks  parallel 3 branches, join all
             lint      success 1 step 1.02 s
             types     failure 1 step 1.01 s: exit code 3: types bad
             tests     success 1 step 1.03 s
             failure "join all: 2 of 3 succeeded; not: types" 1.05 s -> fix
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from little_loops.record.events import ChildComplete, ChildStart, RunEvent
from little_loops.report.terminal_text import (
    clip,
    duration,
    elapsed,
)

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

MAX_ROWS = 10  # running branches shown; the rest as "and N more running"
_INDENT = " " * 13


def header(event: ChildStart) -> str:
    """The fork's step line: what it runs and how."""
    total = event.total
    count = f" {total} branch{'es' * (total != 1)}" if isinstance(total, int) else ""
    kind = "for_each" if event.fork == "for_each" else "parallel"
    file = event.file
    return f"{kind}{count}" + (f", {file}" if file else "")


def branch_line(event: ChildComplete, width: int) -> str:
    """`lint      success 1 step 1.02 s`, with the reason when it did not succeed."""
    key = event.branch or "?"
    verdict = event.verdict or "?"
    outcome = event.outcome
    final = event.final_state
    what = verdict
    if outcome and final and final != key and verdict != outcome:
        what += f" ({outcome})"
    steps = event.steps
    line = f"{_INDENT}{key.ljust(9)} {what}"
    if isinstance(steps, int) and steps:
        line += f" {steps} step{'s' * (steps != 1)}"
    ms = event.duration_ms
    if isinstance(ms, int | float) and ms:
        line += f" {duration(ms)}"
    reason = event.reason
    if isinstance(reason, str) and reason:
        line += ": " + clip(reason, max(width - len(line) - 2, 20))
    return line


class ForkView:
    """The running branches of one fork, fed their forwarded events (any thread)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, list[Any]] = {}  # key -> [current state, started]

    def __call__(self, event: RunEvent) -> None:
        path = event.path
        if not path:
            return
        key, own = path[0], len(path) == 1
        kind = event.name
        with self._lock:
            if own and kind == "loop_start":
                self._running[key] = ["", self.clock()]
            elif own and kind == "loop_complete":
                self._running.pop(key, None)
            elif own and kind == "state_enter" and key in self._running:
                self._running[key][0] = event.state or ""

    def running(self) -> list[str]:
        """The keys of the branches running now, in the order they started."""
        with self._lock:
            return list(self._running)

    def rows(self, width: int) -> list[str]:
        """The live block: a row per running branch (at most MAX_ROWS)."""
        now = self.clock()
        with self._lock:
            running = list(self._running.items())
        rows = [
            # an action branch's one state is named as the branch: it is simply running
            clip(
                f"{key.ljust(9)} {'running' if state == key else state}  {elapsed(now - since)}",
                width,
            )
            for key, (state, since) in running[:MAX_ROWS]
        ]
        if len(running) > MAX_ROWS:
            rows.append(f"and {len(running) - MAX_ROWS} more running")
        return rows
