"""The `loop:` step kind: a child run of its own, in this process, and how its end comes back.

The child starts through the context's one door (`RunContext.start_child`); this module
renders its `with:`, loads it, retries it (a fresh child run per attempt), and turns its end
into the calling state's verdict and record.
"""

from __future__ import annotations

from little_loops.errors import LoopError
from little_loops.model.details import Details, Json
from little_loops.model.loop import (
    State,
    Verdict,
)
from little_loops.record import events as ev
from little_loops.run import (
    children,
    subloop,
)
from little_loops.run.action_layer import ChildRequest, stub
from little_loops.run.children import ChildPlan
from little_loops.run.context import RunContext
from little_loops.run.steps import (
    StepResult,
    output_record,
)
from little_loops.run.subloop import (
    ChildEnd,
    ChildError,
)


class LoopStep:
    """A `loop:` state: run (or resume, or read back) its child; the child's end is the verdict."""

    def run(self, ctx: RunContext, step: int, state: State) -> StepResult:
        result = self._call(ctx, step, state)
        ctx.settle_questions(state.name)
        return result

    def _call(self, ctx: RunContext, step: int, state: State) -> StepResult:
        assert state.loop is not None
        path = (*ctx.path, state.name)
        try:
            child = subloop.load_child(ctx.loop, state, len(path) + 1, ctx.resolved)
            values = {
                key: ctx.steps.templates.render(template, step, state, 1, shell=False)
                for key, template in state.with_.items()
            }
            subloop.bind_inputs(child, values, state.loop)
        except (ChildError, LoopError) as exc:
            reason = str(exc.message if isinstance(exc, LoopError) else exc)
            return verdict_of(ctx, step, state, Verdict("error", Details(error=reason)), reason)
        attempt = max(ctx.progress.attempt, 1)  # a resumed run continues the attempt count
        while True:
            # A fresh child run each attempt: sub/<step>-<state>.<attempt> after the first.
            root = subloop.child_dir(ctx.run_dir.root, step, state.name, attempt)
            run_id = f"{ctx.progress.run_id}/{root.name}"
            done = children.finished(root)
            end = ChildEnd.from_state(done, child) if done is not None else None
            stand_in = (
                stub(ctx.steps.actions, ChildRequest(state.name, child)) if end is None else None
            )
            if stand_in is not None:  # a simulation answers for the whole child
                end = ChildEnd.stubbed(run_id, stand_in)
            elif end is None:
                started = ctx.start_child(
                    ChildPlan(
                        step=step,
                        state=state,
                        loop=child,
                        root=root,
                        run_id=run_id,
                        file=state.loop,
                        values=values,
                        path=path,
                        # A simulation answers a child's states under `state/`
                        # (`deploy/canary`); the real layer is the same for the whole tree.
                        layer=lambda: ctx.steps.actions.child(state.name, child),
                        program_context=subloop.program_inputs(state, ctx.steps.templates.program),
                        timeout=state.timeout,
                        attempt=attempt,
                    )
                )
                ctx.session.flush()
                end = started.end(started.run())
            ctx.session.emit(
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
            ctx.steps.spend(end.cost_usd)  # costs roll up, once: recorded with this step
            ctx.steps.check_deadline(state.name)  # our deadline (or an ancestor's) ended it
            # No jitter: each attempt is a fresh child run. The persist keeps its cost.
            if not ctx.steps.wait_to_retry(step, state, attempt, end.verdict, jitter=False):
                break
            attempt += 1
        verdict = Verdict(end.verdict, end.details())
        return verdict_of(ctx, step, state, verdict, end.reason(), end.record())


def verdict_of(
    ctx: RunContext,
    step: int,
    state: State,
    verdict: Verdict,
    reason: str | None,
    record: dict[str, Json] | None = None,
) -> StepResult:
    """The `loop:` state's verdict, told (`evaluate`, type `loop`) and captured."""
    ctx.session.emit(
        ev.Evaluate(
            step=step,
            state=state.name,
            type="loop",
            verdict=verdict.verdict,
            details=verdict.details,
            reason=reason,
        )
    )
    record = record or {**output_record(state, None), "stderr": reason or ""}
    if state.capture:
        ctx.progress.captured[state.capture] = record
    return StepResult(verdict, None, reason, record)
