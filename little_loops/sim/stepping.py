"""What `ll step` and `ll run --simulate` add around the real runner.

A `Rig` carries a simulation (its action layer, listener and clock) and a pause rule (N
steps, or a breakpoint state); `ll step` pauses a run as a recorded interruption with exit
code 6, so `ll resume` and another `ll step` continue it like any interrupted run. After a
pause, `next_text` says what comes next: the state, its action as the run would render it,
and where each verdict it can give would go.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from little_loops.errors import LoopError
from little_loops.evaluators import possible_verdicts
from little_loops.model import router
from little_loops.model.loop import (
    Loop,
    State,
)
from little_loops.record.store import RunDir
from little_loops.run.runner import (
    Runner,
    RunOptions,
)
from little_loops.sim.simulate import (
    SimulatedActions,
    SimulatedClock,
    mark_run,
    script_of_run,
    simulation,
)


@dataclass
class Rig:
    """A simulation and a pause rule, fitted to one run (`attach`)."""

    script: Path | None = None
    actions: SimulatedActions | None = None
    clock: SimulatedClock | None = None
    steps: int | None = None  # pause after this many steps of this session
    until: frozenset[str] = frozenset()  # pause when the next state is one of these
    paused: str | None = None
    _runner: Runner | None = field(default=None, repr=False)
    _start: int = 0

    @classmethod
    def simulated(cls, script: Path, loop: Loop, *, replay: bool) -> Rig:
        _, actions, clock = simulation(script, loop, replay=replay)
        return cls(script=script, actions=actions, clock=clock)

    def resume_from(self, run_root: Path) -> None:
        """A resumed simulated run: visits already answered are not answered again."""
        if self.actions is not None:
            self.actions.resumed(run_root / "events.jsonl")

    def runner_kwargs(self) -> dict[str, Any]:
        if self.actions is None or self.clock is None:
            return {}
        return {"action_layer": self.actions, "clock": self.clock.clock()}

    def listeners(self) -> list[Any]:
        return [self.actions.observe] if self.actions is not None else []

    def attach(self, runner: Runner) -> None:
        self._runner = runner
        self._start = runner.progress.step
        if self.script is not None:
            mark_run(runner.run_dir.root, self.script)
        if self.steps is not None or self.until:
            runner.pause = self.pause

    def pause(self) -> str | None:
        assert self._runner is not None
        p = self._runner.progress
        if p.current in self.until:
            self.paused = f"paused by ll step before state '{p.current}' (a breakpoint)"
        elif self.steps is not None and p.step - self._start >= self.steps:
            self.paused = f"paused by ll step after step {p.step}"
        return self.paused

    def next_text(self) -> str:
        """What the next step would run, and where each of its verdicts would go."""
        assert self._runner is not None
        runner = self._runner
        loop, p = runner.loop, runner.progress
        state = loop.states[p.current]
        step = p.step + 1
        head = f"next: {state.name} (step {step})"
        if state.is_fork:  # its work runs per branch, in the branch's scope
            branches = ", ".join(state.parallel) or f"for_each of {state.loop or state.action}"
            head += f"  fork: {branches}"
        elif state.action is not None:
            shell = state.action_type == "shell"
            templates = runner.steps.templates
            try:
                command = templates.render(state.action, step, state, 1, shell=shell)
                shown = templates.display(state.action, command, step, state, 1, shell=shell)
            except LoopError as exc:
                shown = f"{state.action}    # cannot interpolate yet: {exc.message}"
            shown = shown.rstrip("\n").replace("\n", "\n" + " " * 6)  # a script, indented
            head += f"  {state.action_type}: {shown}"
        ends: dict[str, str] = {}
        if state.loop is not None:
            head += f"  loop: {state.loop}{self._with_text(state, step)}"
            ends = _child_ends(loop, state)
        if state.ask is not None:
            head += f"  ask: {state.ask}"
        if state.terminal:
            return f"{head}\n      terminal: the run ends with outcome '{state.outcome}'\n"
        routes = []
        verdicts: frozenset[str] | set[str]
        if state.loop is not None:
            verdicts = set(ends) | {"error", "timeout"}
        elif state.is_fork:
            verdicts = {"success", "failure", "error"}
        elif state.is_ask:
            verdicts = state.ask_verdicts()
        else:
            verdicts = possible_verdicts(state.evaluate, action_type=state.action_type)
        for verdict in sorted(verdicts):
            decision = router.route(loop, state, verdict, ends.get(verdict))
            if decision is None:
                outcome, _ = router.stop(state, verdict, None)
                routes.append(f"{verdict} -> (stops: {outcome})")
            else:
                fallback = decision.via.startswith(("_", "loop.")) or ":" in decision.via
                via = f" ({decision.via})" if fallback else ""
                routes.append(f"{verdict} -> {decision.target}{via}")
        return f"{head}\n      {' · '.join(routes)}\n"

    def _with_text(self, state: State, step: int) -> str:
        """A `loop:` state's `with:` values, as the next step would bind them."""
        assert self._runner is not None
        templates = self._runner.steps.templates
        parts = []
        for key, value in state.with_.items():
            try:
                shown = templates.render(str(value), step, state, 1, shell=False)
            except LoopError:
                shown = str(value)  # cannot be rendered yet: the template as written
            parts.append(f"{key}={shown}")
        return f"  (with {' '.join(parts)})" if parts else ""


def _child_ends(loop: Loop, state: State) -> dict[str, str]:
    """The child's terminal names and outcomes: the verdicts a `loop:` state can give."""
    from little_loops.load.children import terminals
    from little_loops.run.subloop import (
        ChildError,
        load_child,
    )

    try:
        return terminals(load_child(loop, state, 2))
    except ChildError:
        return {}


def resumed_rig(
    loop: Loop, options: RunOptions, run_dir: RunDir, rig: Rig | None = None
) -> Rig | None:
    """A simulated run resumes simulated, from its script (never with real actions);
    `rig` carries `ll step`'s pause rule over."""
    script = script_of_run(run_dir.root)
    if script is None:
        return rig
    sim = Rig.simulated(script, loop, replay=options.replay is not None)
    sim.resume_from(run_dir.root)
    if rig is not None:
        sim.steps, sim.until = rig.steps, rig.until
    return sim
