"""What every evaluator is: the input it sees of a finished action, and the one Protocol.

No evaluator module imports the registry, and the registry is the only module that knows them
all, so there is no import cycle (docs/architecture.md, "The evaluator contract").
"""

from __future__ import annotations

from collections.abc import Callable

from little_loops.model.loop import (
    Evaluate,
    Verdict,
)
from little_loops.model.records import record

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object  # (the classes below are for the type checker)


class JudgeSession(Protocol):
    """The run's judge (`llm.JudgeSession`: clients, cache, cassette), as evaluators see it."""

    def judge(self, spec: Evaluate, inp: EvalInput, /) -> Verdict:
        """The judge's verdict on one finished action."""


@record(frozen=True)
class EvalInput:
    """What an evaluator sees of a finished action.

    `text` is the action's stdout (or nothing for a state with no action); evaluators that
    take `source:` call `resolve(spec.source)` instead. `resolve` interpolates a template
    with the step's scope (SPEC section 7) and may raise UndefinedVariable.
    """

    text: str
    stderr: str = ""
    exit_code: int | None = None
    state: str = ""
    resolve: Callable[[str], str] = lambda s: s
    previous_value: float | None = None  # convergence: the state's last value this run
    prior_reason: str | None = None  # judge: this state's last judged reason this run
    judge: JudgeSession | None = None  # per-run judge session (clients, cache, cassette)
    deadline: float | None = None  # time.monotonic() when the loop's `timeout` runs out
    # Context keys holding program text (bound through `with:` from captured, item...):
    # fenced as data in the judge's prompt, like `captured`.
    program: frozenset[str] = frozenset()


class Evaluator(Protocol):
    """One evaluator type. `evaluate` never raises for bad input: it gives verdict `error` (or,
    for a type without one, `failure`) with details saying what went wrong."""

    @property
    def config(self) -> type:
        """The type's typed config (`configs.py`): a frozen record of its keys."""

    def verdicts(self, spec: Evaluate) -> frozenset[str]:
        """Every verdict `evaluate` can give for `spec`, and no other."""

    def evaluate(self, spec: Evaluate, inp: EvalInput) -> Verdict:
        """The verdict for one finished action."""
