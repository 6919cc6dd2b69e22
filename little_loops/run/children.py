"""The one place a child run starts and its end is read back, for a `loop:` state's child and
a fork's branch alike.

A step kind describes the child (`ChildPlan`: its loop, directory, id, `with:` values, the
calling state's limits, and for a branch its key and how its actions are wrapped); `start`
resumes it when it was running, announces it (`child_start`), gives it its limits, options,
listeners and what it inherits (`Parent`), and makes its run with the context's factory.
`Child.end` turns what the run returned into the caller's `ChildEnd`, or into the caller's
own stop: a question that waits (`Suspended`), a record that cannot be read, a signal.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from little_loops.errors import (
    EXIT_RUN_ERROR,
    EXIT_SUSPENDED,
    EXIT_TERMINATED,
    RecordError,
)
from little_loops.model.loop import (
    Loop,
    State,
)
from little_loops.model.progress import (
    Progress,
    RunResult,
)
from little_loops.model.records import record, replace
from little_loops.record import events as ev
from little_loops.record.events import journal_entry
from little_loops.record.questions import Suspended
from little_loops.record.store import BranchDir, CallDir, RunDir
from little_loops.run import subloop
from little_loops.run.action_layer import ActionLayer, simulates
from little_loops.run.branch_layer import serial
from little_loops.run.gate import Terminated
from little_loops.run.subloop import (
    ChildEnd,
    Parent,
)

if TYPE_CHECKING:
    from little_loops.run.context import (
        ChildRun,
        RunContext,
    )


@record(frozen=True)
class Branch:
    """What marks a child as a fork's branch: its key, index and item, its fork's kind and
    size, and how its action layer is wrapped (its scope, the tree's slots)."""

    key: str
    index: int
    item: str  # the item's text, as `child_start` shows it (redacted, cut)
    fork: str  # parallel | for_each
    total: int
    wrap: Callable[[ActionLayer], ActionLayer]


@record(frozen=True)
class ChildPlan:
    """A child run as the calling step describes it."""

    step: int
    state: State  # the calling state (the fork's state, for a branch)
    loop: Loop  # the child's loop, before the limits it inherits
    root: Path  # its run directory
    run_id: str
    file: str  # the `loop:` file, or "" for an action branch
    values: Mapping[str, str]  # `with:`, rendered in the caller's scope
    path: tuple[str, ...]  # the calling states, root first, this one (and a branch key) last
    # What its steps act through (before it resumes), made once `child_start` is told: a
    # simulation checks its script for the child there.
    layer: Callable[[], ActionLayer]
    program_context: frozenset[str]  # its context keys that hold program text
    timeout: float | None = None  # the calling state's own limit, if it has one for the child
    attempt: int = 1  # a `loop:` state's retry
    branch: Branch | None = None
    snapshot: bool = True  # whether it keeps a copy of its loop file (`Parent.snapshot`)


@record
class Child:
    """A child run, started: run it (here or in a thread), then read its end back."""

    plan: ChildPlan
    loop: Loop  # with the limits it inherited
    runner: ChildRun

    def run(self) -> RunResult:
        return self.runner.run()

    def end(self, result: RunResult, *, stopped: bool = False) -> ChildEnd:
        """How the child ended, for its caller. Unless its caller `stopped` it, a child that
        waits for an answer suspends the caller (`Suspended`, with its questions), one whose
        record cannot be read stops it (`RecordError`), one interrupted by a signal stops it
        the same way, to be resumed."""
        waits = result.outcome == "suspended" or (
            result.outcome == "interrupted" and result.exit_code == EXIT_SUSPENDED
        )
        if not stopped:
            if waits:
                raise Suspended(self.runner.progress.pending)
            if result.outcome == "interrupted" and result.exit_code == EXIT_RUN_ERROR:
                what = "a sub-loop's" if self.plan.branch is None else "a branch's"
                raise RecordError(result.error or f"{what} record cannot be read")
            if result.outcome == "interrupted":
                raise Terminated() if result.exit_code == EXIT_TERMINATED else KeyboardInterrupt()
        run_dir = self.runner.run_dir
        if isinstance(run_dir, CallDir):
            # Its end, recorded before its caller's step is: a caller resumed reads it back.
            run_dir.journal()
        return ChildEnd.of_run(self.plan.run_id, result, self.runner.progress, self.loop)


def finished(root: Path) -> dict[str, Any] | None:
    """The state of a child that ended before its caller stopped (read back, never run again),
    or None when it has not started or has not finished."""
    if not os.path.isfile(os.path.join(root, "state.json")) and journal_entry(root) is None:
        return None
    data = RunDir(root).read_state()
    return data if data.get("status") == "finished" else None


def start(ctx: RunContext, plan: ChildPlan) -> Child:
    """Start (or resume) the child `plan` describes, as a run of the tree below `ctx`."""
    root, branch = plan.root, plan.branch
    progress = _resumed(ctx, plan)
    redactor = ctx.redactor
    shown = redactor.obj(dict(plan.values)) if redactor else dict(plan.values)
    announce: dict[str, Any] = {"attempt": plan.attempt}
    if branch is not None:
        announce = {
            "kind": "branch",
            "branch": branch.key,
            "index": branch.index,
            "item": branch.item,
            "fork": branch.fork,
            "total": branch.total,
        }
    ctx.session.emit(
        ev.ChildStart(
            step=plan.step,
            state=plan.state.name,
            file=plan.file,
            child_run_id=plan.run_id,
            dir=os.path.relpath(root, ctx.run_dir.root),
            with_=shown,
            resumed=progress is not None,
            **announce,
        )
    )
    layer = plan.layer()
    if progress is not None:
        layer = layer.resumed(root / "events.jsonl")
    # The earliest deadline: the child's own, the calling state's, and ours (which holds
    # every ancestor's), each on the child's clock (its elapsed time goes on over resumes).
    child = plan.loop
    limits = [t for t in (child.timeout, plan.timeout) if t is not None]
    remaining = ctx.session.remaining(ctx.loop.timeout)
    if remaining is not None:
        limits.append((progress.elapsed_ms / 1000.0 if progress else 0.0) + remaining)
    if limits:
        child = replace(child, timeout=min(limits))
    changes: dict[str, Any] = {
        # literal text: a with: value is not a template in the child
        "overrides": {k: v.replace("${", "$${") for k, v in plan.values.items()},
        "program_context": plan.program_context,
        "max_iterations": None,
        "on_terminal_output": None,
        "allow_concurrent": True,  # a child takes no lock: its root holds the tree's
    }
    segment: tuple[str, ...] = (plan.state.name,)
    listeners = [subloop.forward(one, segment) for one in ctx.listeners]
    if branch is not None:
        # Branches run at once: a question in one waits for `ll answer`/`ll resume
        # --answer` rather than a terminal prompt two threads would share.
        changes.update(on_output=None, prompt=None)
        segment = (plan.state.name, branch.key)
        # The root's listeners are called one branch at a time.
        listeners = [serial(subloop.forward(one, segment), one) for one in ctx.listeners]
    if layer is not ctx.steps.actions and simulates(layer):
        listeners.append(layer.observe)  # a simulation learns which state acts from the events
    options = replace(ctx.options, **changes)  # once: a branch of thousands
    acting = branch.wrap(layer) if branch is not None else layer
    run_dir: RunDir
    if branch is not None and not plan.file and progress is None and ctx.options.branch is None:
        # An action branch: no directory of its own, its end one entry of its fork's journal
        # (`ll run --branch` keeps one, which `ll join` copies into the fork).
        run_dir = BranchDir(root)
    elif branch is None and progress is None and ctx.options.branch is None:
        # A `loop:` child: in memory until it must not be (`CallDir`), its end one line of
        # the journal of the nearest run above it with a directory.
        run_dir = CallDir(root, ctx.run_dir, _spills(child), fsync=ctx.options.fsync)
    else:
        run_dir = subloop.open_child_dir(root)
    runner = ctx.new_run(
        child,
        options,
        listeners=listeners,
        progress=progress,
        run_dir=run_dir,
        run_id=plan.run_id,
        clock=ctx.session.clock,
        action_layer=acting,
        parent=Parent(
            plan.path,
            tuple(ctx.redactor.values),
            tuple(ctx.listeners),
            ctx.budget_left(),
            snapshot=plan.snapshot,
            env=ctx.env,
            resolved=ctx.resolved,
        ),
    )
    return Child(plan, child, runner)


def _resumed(ctx: RunContext, plan: ChildPlan) -> Progress | None:
    """The progress of a child that was running when its caller stopped, or None."""
    root = plan.root
    if not (root / "state.json").is_file():
        return None
    from little_loops.record.history import History

    progress = Progress.from_dict(RunDir(root).read_state(), str(root / "state.json"))
    progress.path = History.from_file(root / "events.jsonl").path_upto(progress.step)
    progress.status = "running"
    # Where this tree runs now: its run directory may have moved to another checkout (the CI
    # approval flow), and the child acts there, never in the old tree.
    progress.options = replace(
        progress.options,
        cwd=str(plan.loop.cwd(ctx.options.base_dir)),
        base_dir=str(ctx.options.base_dir.resolve()),
    )
    return progress


def _spills(loop: Loop) -> Callable[[str, bool], bool]:
    """When a child kept in memory moves to its directory: as it enters a state that forks or
    asks (their records live under it), and, once a step of it has finished, any state that
    may act (all but a terminal with no action, judge or child): a finished step is then
    recorded before anything else happens."""
    states = loop.states

    def spills(name: str, done: bool) -> bool:
        state = states.get(name)
        if state is None or state.is_fork or state.is_ask:
            return True
        if not done:
            return False
        pure = state.terminal and state.action is None and state.evaluate is None
        return not (pure and not state.is_loop)

    return spills
