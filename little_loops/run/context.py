"""What a step kind is given instead of the runner: one typed `RunContext` of the run it steps.

The step kinds (`kinds.KINDS`) read the run through it (its loop, options, progress, session,
step pipeline, place in the tree, secrets, listeners and budget) and start a child run through
its one door, `start_child` (`children.start`), for `loop:` states and fork branches alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from little_loops.model.loop import Loop
from little_loops.model.progress import (
    Progress,
    RunOptions,
    RunResult,
)
from little_loops.model.question import epoch
from little_loops.model.records import field, record
from little_loops.record.events import Listener
from little_loops.record.secrets import Redactor
from little_loops.record.store import RunDir
from little_loops.run.action_layer import ActionLayer
from little_loops.run.session import (
    Clock,
    RunSession,
)
from little_loops.run.steps import (
    Finish,
    StepPipeline,
)
from little_loops.run.subloop import Parent

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    import random
    from typing import Protocol

    from little_loops.run.children import (
        Child,
        ChildPlan,
    )
else:
    Protocol = object  # (ChildRun and RunFactory are for the type checker)


class ChildRun(Protocol):
    """A run of the tree as its caller sees it (a `Runner`): run it, then read its progress."""

    progress: Progress

    def run(self) -> RunResult: ...


class RunFactory(Protocol):
    """Makes the run of a child loop (`Runner` itself: this package's modules never import
    the runner, which imports them)."""

    def __call__(
        self,
        loop: Loop,
        options: RunOptions | None = None,
        *,
        listeners: list[Listener] | None = None,
        progress: Progress | None = None,
        run_dir: RunDir | None = None,
        run_id: str | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        action_layer: ActionLayer | None = None,
        parent: Parent | None = None,
    ) -> ChildRun: ...


@record(eq=False)
class RunContext:
    """One run as its steps see it; the runner makes it once and hands it to every step."""

    loop: Loop
    options: RunOptions
    progress: Progress
    session: RunSession
    steps: StepPipeline
    parent: Parent | None  # None for the root of the tree
    redactor: Redactor
    listeners: list[Listener]  # this run's own (a child's forward to its caller's)
    env: Mapping[str, str]
    new_run: RunFactory  # the child factory `children.start` runs a child with
    # (wall epoch, monotonic) at the first look at the time of a question
    _epoch: tuple[float, float] | None = field(default=None, repr=False)
    # Paths the tree resolved (`Parent.resolved`), shared with every child run it starts.
    resolved: dict[Path, Path] = field(default_factory=dict, repr=False)

    @property
    def run_dir(self) -> RunDir:
        return self.session.run_dir

    @property
    def path(self) -> tuple[str, ...]:
        """The calling states above this run, root first (empty for the root)."""
        return self.parent.path if self.parent is not None else ()

    # -- the budget ----------------------------------------------------------------------

    def check_budget(self, state_name: str) -> None:
        """`Finish` with `budget` once this run's cost passed its own `max_cost_usd` or what
        its callers had left."""
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

    def budget_left(self) -> float | None:
        """What a child of this run may spend before this run's or an ancestor's budget."""
        limits = (
            []
            if self.parent is None or self.parent.budget_left is None
            else [self.parent.budget_left]
        )
        if self.loop.max_cost_usd is not None:
            limits.append(self.loop.max_cost_usd)
        return min(limits) - self.progress.cost_usd if limits else None

    # -- the tree ------------------------------------------------------------------------

    def start_child(self, plan: ChildPlan) -> Child:
        """The one door to a child run (a `loop:` state's or a fork branch's)."""
        from little_loops.run import children

        return children.start(self, plan)

    def settle_questions(self, state_name: str) -> None:
        """After a `loop:` or fork step: its children's questions were answered (or dropped
        with them), so none of them is this run's any more."""
        inside = "/".join((*self.path, state_name)) + "/"
        pending = self.progress.pending
        self.progress.pending = [q for q in pending if not q.id.startswith(inside)]

    def now(self) -> float:
        """Wall-clock seconds on the run's clock: a simulated clock moves it on too."""
        clock = self.session.clock
        if self._epoch is None:
            self._epoch = (epoch(clock.wall()) or 0.0, clock.monotonic())
        wall, mono = self._epoch
        return wall + (clock.monotonic() - mono)
