"""Simulation: a script's answers in place of every action, and a clock that never sleeps.

`ll run FILE --simulate SCRIPT`, `ll step` and `ll test` run the real runner, router,
evaluators, interpolation and persistence; only the action layer and the clock are swapped.
A script maps state paths (`build`; a child's state as `deploy/verify`, `*` for any one
segment) to a verdict, a list of entries consumed one per visit (the last repeats), or a
mapping of the keys in `ENTRY_KEYS`. An entry with `output` and no `verdict` is judged by
the state's own evaluator.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import overload

from little_loops.actions import (
    ActionRequest,
    ActionResult,
)
from little_loops.errors import (
    EXIT_RUN_ERROR,
    EXIT_TIMEOUT,
    RunError,
)
from little_loops.model.details import Details, Json
from little_loops.model.loop import Loop
from little_loops.model.progress import OUTCOME_EXIT
from little_loops.record.events import (
    ActionStart,
    Answer,
    Route,
    RunEvent,
    read_records,
)
from little_loops.run.action_layer import (
    AnswerRequest,
    AnswerStub,
    ChildRequest,
    ChildStub,
)
from little_loops.run.session import Clock
from little_loops.sim.script import (
    Entry,
    Script,
    read_script,
)

MARK_FILE = "simulation.json"


class SimulatedClock:
    """Virtual time: `sleep` and simulated actions move it on; nothing waits."""

    def __init__(self) -> None:
        self.now = 1000.0  # any origin: only differences are read

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    def clock(self) -> Clock:
        from little_loops.record.events import utc_now

        return Clock(monotonic=self.monotonic, wall=utc_now, sleep=self.sleep)


class SimulatedActions:
    """The action layer of a simulation: every action answered from the script, none run.

    It is also a `Simulation`: it may answer for a whole child run or an `ask` state, and it
    observes the run's events: `action_start` says which state (and so which entry) the
    next action belongs to. `prefix` addresses a child run's states (`deploy/`).
    """

    def __init__(self, script: Script, clock: SimulatedClock, *, prefix: str = "") -> None:
        self.script = script
        self.clock = clock
        self.prefix = prefix
        self.visits: dict[str, int] = {}
        self._state = ""
        self._step = 0
        self._terminal: set[str] = set()

    def for_loop(self, loop: Loop) -> SimulatedActions:
        self._terminal = {name for name, state in loop.states.items() if state.terminal}
        return self

    def child(self, state: str, loop: Loop | None = None) -> SimulatedActions:
        """The layer a child run started by `state` uses: its states under `state/`."""
        layer = SimulatedActions(self.script, self.clock, prefix=f"{self.prefix}{state}/")
        layer.visits = self.visits  # one count a state path over the whole tree
        if loop is None:
            return layer
        self.script.check_child(layer.prefix, loop)
        return layer.for_loop(loop)

    def resumed(self, events_path: Path) -> SimulatedActions:
        """Continue the visit counts of a run's earlier sessions, read from its events."""
        for event in read_records(events_path):
            answered = isinstance(event, Answer | Route) and event.via == "simulate"
            if isinstance(event, ActionStart) or answered:
                path = self.prefix + str(event.state)
                self.visits[path] = self.visits.get(path, 0) + 1
        return self

    def observe(self, event: RunEvent) -> None:
        # A child's events come forwarded with their `path`; the child's own layer reads them.
        if isinstance(event, ActionStart) and not event.path:
            self._state = str(event.state)
            self._step = event.step or 0

    # -- the ActionLayer protocol, and the Simulation one ---------------------------------

    @overload
    def stub(self, request: ChildRequest) -> ChildStub | None: ...
    @overload
    def stub(self, request: AnswerRequest) -> AnswerStub | None: ...
    def stub(self, request: ChildRequest | AnswerRequest) -> ChildStub | AnswerStub | None:
        if isinstance(request, ChildRequest):
            return self._stub_child(request.state, request.loop)
        return self._stub_answer(request.state)

    def _stub_child(self, state: str, child: Loop) -> ChildStub | None:
        """How the child of `state` ends when the script answers `state` itself (its
        `final_state` or terminal `verdict`, `outputs`, `duration_ms`, `cost_usd`); None runs
        the child, its states answered under `state/`."""
        path = self.prefix + state
        entry = self._visit(path)
        if entry is None:
            return None
        self.clock.sleep(entry.duration_ms / 1000.0)
        name = entry.final_state or entry.verdict or "success"
        spent = ChildStub(
            final_state=child.initial,
            outcome=name,
            exit_code=EXIT_RUN_ERROR,
            duration_ms=entry.duration_ms,
            cost_usd=entry.cost_usd,
            outputs={str(k): str(v) for k, v in entry.outputs.items()},
        )
        if name in ("error", "timeout"):
            reason = entry.reason or f"simulated {name}"
            code = EXIT_TIMEOUT if name == "timeout" else EXIT_RUN_ERROR
            return dataclasses.replace(spent, exit_code=code, error=reason, via_terminal=False)
        target = child.states.get(name)
        if target is None or not target.terminal:
            ends = ", ".join(sorted(n for n, s in child.states.items() if s.terminal))
            raise RunError(
                f"{self.script.file}:{entry.line}: '{path}' ends its child at '{name}', which "
                f"is not a terminal state of {child.path.name}; its terminal states: {ends}"
            )
        code = OUTCOME_EXIT.get(target.outcome, 1)
        return dataclasses.replace(spent, final_state=name, outcome=target.outcome, exit_code=code)

    def _stub_answer(self, state: str) -> AnswerStub | None:
        """The answer the script gives the `ask` state `state` of this run: `verdict` (the
        choice), `note` (its `output`), `duration_ms`; None when unscripted."""
        entry = self._visit(self.prefix + state)
        if entry is None:
            return None
        return AnswerStub(verdict=entry.verdict, note=entry.output, duration_ms=entry.duration_ms)

    def _visit(self, path: str) -> Entry | None:
        """The script's entry for this visit of `path` (the last one repeats), counted; None
        (and not counted) when the script leaves `path` out."""
        entries = self.script.entries_for(path)
        if entries is None:
            return None
        visit = self.visits.get(path, 0)
        self.visits[path] = visit + 1
        return entries[min(visit, len(entries) - 1)]

    def run(self, request: ActionRequest) -> ActionResult:
        return self._answer(request.timeout)

    def kill_orphans(self) -> None:
        pass

    def _answer(self, timeout: float | None) -> ActionResult:
        path = self.prefix + self._state
        visit = self.visits.get(path, 0)
        self.visits[path] = visit + 1
        entries = self.script.entries_for(path)
        if entries is None:
            if self.script.default is not None:
                entries = [self.script.default]
            elif self._state in self._terminal:
                entries = [Entry(verdict="success")]
            else:
                raise RunError(
                    f"{self.script.file}: no entry for state '{path}' (step {self._step}); "
                    f"add '{path}: success' (or a list, one a visit) under 'states:', "
                    "or a 'default:'"
                )
        entry = entries[min(visit, len(entries) - 1)]
        return _result(entry, timeout, self.clock)


def _result(entry: Entry, timeout: float | None, clock: SimulatedClock) -> ActionResult:
    spent = entry.duration_ms / 1000.0
    timed_out = entry.verdict == "timeout" or (timeout is not None and spent > timeout)
    if timed_out and timeout is not None:
        spent = timeout  # the action ran until its timeout stopped it
    clock.sleep(spent)
    details: dict[str, Json] = {"simulated": True}
    if entry.final_state is not None:
        details["final_state"] = entry.final_state
    if entry.outputs:
        details["outputs"] = dict(entry.outputs)
    verdict = entry.verdict
    if verdict not in (None, "timeout", "error"):
        details["simulated_verdict"] = verdict
    exit_code = entry.exit_code
    if exit_code is None and not timed_out:
        exit_code = 0 if verdict in (None, "success") else 1
    error = None
    if verdict == "error":
        error = entry.reason or "simulated error"
    elif entry.reason and verdict is not None:
        details["reason"] = entry.reason
    output = entry.output
    return ActionResult(
        output=output,
        stderr=entry.stderr,
        exit_code=None if timed_out else exit_code,
        duration_ms=int(spent * 1000),
        timed_out=timed_out,
        output_bytes=len(output.encode()) + len(entry.stderr.encode()),
        error=error,
        cost_usd=entry.cost_usd,
        details=Details(details),
    )


def mark_run(run_root: Path, script: Path) -> None:
    """Note in the run directory which script a simulated run follows."""
    (run_root / MARK_FILE).write_text(
        json.dumps({"script": str(script.resolve())}) + "\n", encoding="utf-8"
    )


def script_of_run(run_root: Path) -> Path | None:
    """The script a simulated run follows, or None for a real run."""
    try:
        data = json.loads((run_root / MARK_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    script = data.get("script") if isinstance(data, dict) else None
    return Path(script) if isinstance(script, str) else None


def simulation(
    script_path: Path, loop: Loop, *, replay: bool, script: Script | None = None
) -> tuple[Script, SimulatedActions, SimulatedClock]:
    """Read and check a script for `loop` (every mistake told at once): its action layer
    (also a listener) and its clock. `script`: the script read already."""
    script = script or read_script(script_path)
    script.check(loop, replay=replay)
    clock = SimulatedClock()
    return script, SimulatedActions(script, clock).for_loop(loop), clock
