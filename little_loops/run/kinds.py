"""The table of step kinds: what a state's step is, chosen by what the state is.

Each kind is a small class with one method, `run(ctx, step, state) -> StepResult`, given the
run's `RunContext` and never the runner: an action (`StepPipeline`), a child run (`loop:`),
a fork's branches and their join (`parallel:`/`for_each:`), a question (`ask:`).
"""

from __future__ import annotations

from little_loops.model.loop import State
from little_loops.run.context import RunContext
from little_loops.run.steps import StepResult

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object  # (StepKind is for the type checker)


class StepKind(Protocol):
    """One kind of step."""

    def run(self, ctx: RunContext, step: int, state: State) -> StepResult: ...


class ActionStep:
    """A state with an action (or none): render -> act -> evaluate, with its retries."""

    def run(self, ctx: RunContext, step: int, state: State) -> StepResult:
        return ctx.steps.run(step, state)


class _Later:
    """A kind whose module is imported at its first step: a run without sub-loops, forks or
    questions never loads their code (a fork's, with what it imports, is a tenth of `ll
    run`'s start-up; docs/performance.md, "Start-up of `ll run`")."""

    def __init__(self, module: str, name: str) -> None:
        self._where = (module, name)
        self._kind: StepKind | None = None

    def run(self, ctx: RunContext, step: int, state: State) -> StepResult:
        if self._kind is None:
            from importlib import import_module

            module, name = self._where
            self._kind = getattr(import_module(module), name)()
        return self._kind.run(ctx, step, state)


KINDS: dict[str, StepKind] = {
    "action": ActionStep(),
    "loop": _Later("little_loops.run.calls", "LoopStep"),
    "fork": _Later("little_loops.run.branches", "ForkStep"),
    "ask": _Later("little_loops.run.asking", "AskStep"),
}


def kind_of(state: State) -> str:
    """The name of `state`'s kind in `KINDS`."""
    if state.is_fork:
        return "fork"
    if state.is_loop:
        return "loop"
    if state.is_ask:
        return "ask"
    return "action"
