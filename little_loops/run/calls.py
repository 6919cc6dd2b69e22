"""The `loop:` state: a child run of its own, in this process, and how its end comes back.

`Runner` takes these methods from `ChildCalls` so that `runner.py` keeps to the run's own story
(enter -> act -> evaluate -> route -> record); a child is a `Runner` too, made by the runner's
`_child_runner`, so this module never imports the runner.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from little_loops.errors import (
    EXIT_RUN_ERROR,
    EXIT_TERMINATED,
    LoopError,
    RecordError,
)
from little_loops.model.loop import (
    Loop,
    State,
    Verdict,
)
from little_loops.model.progress import (
    Progress,
    RunOptions,
)
from little_loops.record import events as ev
from little_loops.record.events import Listener
from little_loops.record.questions import Suspended
from little_loops.record.secrets import Redactor
from little_loops.record.store import RunDir
from little_loops.run import subloop
from little_loops.run.gate import Terminated
from little_loops.run.session import RunSession
from little_loops.run.steps import (
    Finish,
    StepPipeline,
    StepResult,
    output_record,
)
from little_loops.run.subloop import (
    ChildEnd,
    ChildError,
    Parent,
)


class ChildCalls:
    """The run's side of a `loop:` state; mixed into `Runner`, whose attributes it reads."""

    loop: Loop
    options: RunOptions
    parent: Parent | None
    progress: Progress
    redactor: Redactor
    session: RunSession
    steps: StepPipeline
    run_dir: RunDir
    _listeners: list[Listener]

    def _child_runner(self, child: Loop, options: RunOptions, **kwargs: Any) -> Any:
        """A `Runner` for a child run (the runner makes it: this module does not import it)."""
        raise NotImplementedError

    # -- a `loop:` state: its child run ------------------------------------------------

    def _call(self, step: int, state: State) -> StepResult:
        """Run (or resume, or read back) the child of a `loop:` state; its end is the verdict."""
        assert state.loop is not None
        path = (*(self.parent.path if self.parent else ()), state.name)
        try:
            child = subloop.load_child(self.loop, state, len(path) + 1)
            values = {
                key: self.steps.templates.render(template, step, state, 1, shell=False)
                for key, template in state.with_.items()
            }
            subloop.bind_inputs(child, values, state.loop)
        except (ChildError, LoopError) as exc:
            reason = str(exc.message if isinstance(exc, LoopError) else exc)
            return self._child_verdict(step, state, Verdict("error", {"error": reason}), reason)
        attempt = max(self.progress.attempt, 1)  # a resumed run continues the attempt count
        while True:
            # A fresh child run each attempt: sub/<step>-<state>.<attempt> after the first.
            root = subloop.child_dir(self.run_dir.root, step, state.name, attempt)
            end = self._finished_child(root, child)
            stub = self.steps.actions.stub_child(state.name, child) if end is None else None
            if stub is not None:  # a simulation answers for the whole child
                end = ChildEnd(run_id=f"{self.progress.run_id}/{root.name}", **stub)
            elif end is None:
                end = self._run_child(step, state, child, root, values, path, attempt)
            self.session.emit(
                ev.ChildComplete(
                    step=step,
                    state=state.name,
                    child_run_id=end.run_id,
                    final_state=end.final_state,
                    outcome=end.outcome,
                    exit_code=end.exit_code,
                    verdict=end.verdict,
                    steps=end.steps,
                    duration_ms=end.duration_ms,
                    cost_usd=round(end.cost_usd, 6),
                    outputs=dict(end.outputs),
                )
            )
            self.steps.spend(end.cost_usd)  # costs roll up, once: recorded with this step
            self.steps.check_deadline(state.name)  # our deadline (or an ancestor's) ended it
            # No jitter: each attempt is a fresh child run. The persist keeps its cost.
            if not self.steps.wait_to_retry(step, state, attempt, end.verdict, jitter=False):
                break
            attempt += 1
        verdict = Verdict(end.verdict, end.details())
        return self._child_verdict(step, state, verdict, end.reason(), end.record())

    def _check_budget(self, state_name: str) -> None:
        p = self.progress
        budget = self.loop.max_cost_usd
        if budget is not None and p.cost_usd > budget:
            message = f"cost ${p.cost_usd:.4f} passed max_cost_usd ${budget:g}"
            raise Finish("budget", state_name, message)
        left = self.parent.budget_left if self.parent else None
        if left is not None and p.cost_usd > left:
            # A caller's budget is spent: stop here; that caller ends with `budget`.
            message = f"cost ${p.cost_usd:.4f} passed the max_cost_usd of a calling loop"
            raise Finish("budget", state_name, message)

    def _budget_left(self) -> float | None:
        """What a child of this run may spend before this run's or an ancestor's budget."""
        limits = (
            []
            if self.parent is None or self.parent.budget_left is None
            else [self.parent.budget_left]
        )
        if self.loop.max_cost_usd is not None:
            limits.append(self.loop.max_cost_usd)
        return min(limits) - self.progress.cost_usd if limits else None

    def _finished_child(self, root: Any, child: Loop) -> ChildEnd | None:
        """A child that ended before a crash of its parent: read back, never run again."""
        if not (root / "state.json").is_file():
            return None
        data = RunDir(root).read_state()
        return ChildEnd.from_state(data, child) if data.get("status") == "finished" else None

    def _run_child(
        self,
        step: int,
        state: State,
        child: Loop,
        root: Any,
        values: dict[str, str],
        path: tuple[str, ...],
        attempt: int,
    ) -> ChildEnd:
        progress = None
        run_id = f"{self.progress.run_id}/{root.name}"
        if (root / "state.json").is_file():  # it was running when its parent stopped
            from little_loops.record.history import History

            progress = Progress.from_dict(RunDir(root).read_state(), str(root / "state.json"))
            progress.path = History.from_file(root / "events.jsonl").path_upto(progress.step)
            progress.status = "running"
            # Where this tree runs now (its run directory may have moved to another checkout).
            cwd = str(child.cwd(self.options.base_dir))
            progress.options = dataclasses.replace(progress.options, cwd=cwd)
        shown = self.redactor.obj(values) if self.redactor else values
        self.session.emit(
            ev.ChildStart(
                step=step,
                state=state.name,
                file=state.loop or "",
                child_run_id=run_id,
                dir=os.path.relpath(root, self.run_dir.root),
                attempt=attempt,
                with_=shown,
                resumed=progress is not None,
            )
        )
        self.session.flush()
        # The earliest deadline: the child's own, the calling state's, and ours (which holds
        # every ancestor's), each on the child's clock (its elapsed time goes on over resumes).
        elapsed = progress.elapsed_ms / 1000.0 if progress else 0.0
        limits = [t for t in (child.timeout, state.timeout) if t is not None]
        remaining = self.session.remaining(self.loop.timeout)
        if remaining is not None:
            limits.append(elapsed + remaining)
        if limits:
            child = dataclasses.replace(child, timeout=min(limits))
        o = self.options
        options = dataclasses.replace(
            o,
            # literal text: a with: value is not a template in the child
            overrides={k: v.replace("${", "$${") for k, v in values.items()},
            program_context=subloop.program_inputs(state, self.steps.templates.program),
            max_iterations=None,
            on_terminal_output=None,
        )
        listeners = [subloop.forward(listener, (state.name,)) for listener in self._listeners]
        # A simulation answers a child's states under `state/` (`deploy/canary`); the real
        # action layer is the same for every run of the tree.
        layer = self.steps.actions.child(state.name, child)
        if progress is not None:
            layer = layer.resumed(root / "events.jsonl")
        if layer is not self.steps.actions and callable(layer):
            listeners.append(layer)  # it learns which state acts from the child's own events
        runner = self._child_runner(
            child,
            options,
            listeners=listeners,
            progress=progress,
            run_dir=subloop.open_child_dir(root),
            run_id=run_id,
            clock=self.session.clock,
            action_layer=layer,
            parent=Parent(
                path, tuple(self.redactor.values), tuple(self._listeners), self._budget_left()
            ),
        )
        result = runner.run()
        if result.outcome == "suspended":  # its questions wait, and so does the parent
            raise Suspended(runner.progress.pending)
        if result.outcome == "interrupted" and result.exit_code == EXIT_RUN_ERROR:
            raise RecordError(result.error or "a sub-loop's record cannot be read")
        if result.outcome == "interrupted":  # the parent stops with it, and resumes it
            raise Terminated() if result.exit_code == EXIT_TERMINATED else KeyboardInterrupt()
        return ChildEnd.of_run(run_id, result, runner.progress, child)

    def _child_verdict(
        self,
        step: int,
        state: State,
        verdict: Verdict,
        reason: str | None,
        record: dict[str, Any] | None = None,
    ) -> StepResult:
        self.session.emit(
            ev.Evaluate(
                step=step,
                state=state.name,
                type="loop",
                verdict=verdict.verdict,
                details=dict(verdict.details),
                reason=reason,
            )
        )
        record = record or {**output_record(state, None), "stderr": reason or ""}
        if state.capture:
            self.progress.captured[state.capture] = record
        return StepResult(verdict, None, reason, record)

    def _outputs(self, final_state: str) -> dict[str, str]:
        """The loop's `outputs:`, rendered in its scope at its end; one that cannot be rendered
        (a capture this path never made) is left out."""
        state = self.loop.states.get(final_state) or self.loop.states[self.loop.initial]
        out: dict[str, str] = {}
        for name, template in self.loop.outputs.items():
            try:
                out[name] = self.steps.templates.render(
                    template, self.progress.step, state, 1, shell=False
                )
            except LoopError:
                continue
        return out
