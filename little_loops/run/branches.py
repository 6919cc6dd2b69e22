"""A fork's branches running: each a child run of its own, in a thread of this process.

`Runner` takes `_fork` from `ForkCalls`: the items are resolved once and stored
(`sub/<step>-<state>/items.json`) before any branch starts; each branch is prepared here (its
work rendered in this run's scope with `item`, its child loop, its run directory, resumed when
it was running) and scheduled by `fork_schedule.Fork`; the join of their ends (`fork.py`) is
the state's verdict, and every branch's record is kept (`join.json`, `captured.X.branches`).
What a branch acts through, and what stops it, is `branch_layer`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from little_loops.actions import DEFAULT_TAIL_BYTES
from little_loops.errors import (
    LoopError,
    RecordError,
    RunError,
    SimulationError,
)
from little_loops.model.fork import (
    BranchEnd,
    BranchRecord,
    Item,
    ItemsError,
    branch_items,
    decide,
    describe,
    items_json,
    items_record,
    make_items,
    max_items,
    parse_items,
    summary,
)
from little_loops.model.loop import (
    EMPTY,
    Join,
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
from little_loops.record.secrets import Redactor
from little_loops.record.store import RunDir
from little_loops.run import subloop
from little_loops.run.action_layer import Processes
from little_loops.run.branch_layer import (
    BranchActions,
    Scope,
    TreeSlots,
    serial,
)
from little_loops.run.fork_schedule import (
    Fork,
    ForkHost,
    Job,
    loop_record,
)
from little_loops.run.session import RunSession
from little_loops.run.steps import (
    StepPipeline,
    StepResult,
)
from little_loops.run.subloop import (
    ChildEnd,
    ChildError,
    Parent,
)
from little_loops.templates.interpolate import (
    placeholders,
    render,
)

ITEMS = "items.json"
JOIN = "join.json"


def _stored_items(stored: Path, cap: int, read: Callable[[Path], Any]) -> list[Item]:
    """The items a fork stored when it started (read back by the run's session, which fills
    in their sealed secrets), checked as any file read back (`items_record`). Anything else
    stops the run (exit 3), resumable once the file is repaired."""
    try:
        data = read(stored)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RecordError(
            f"{stored}: cannot be read as JSON ({type(exc).__name__}); repair it (or remove "
            "it, to resolve the items again) and run ll resume"
        ) from None
    return items_record(data, str(stored), cap)


class ForkCalls:
    """The run's side of a `parallel:`/`for_each:` state; mixed into `Runner`."""

    loop: Loop
    options: RunOptions
    parent: Parent | None
    progress: Progress
    redactor: Redactor
    session: RunSession
    steps: StepPipeline
    run_dir: RunDir
    env: Any
    _listeners: list[Listener]

    def _child_runner(self, child: Loop, options: RunOptions, **kwargs: Any) -> Any:
        raise NotImplementedError

    def _budget_left(self) -> float | None:
        raise NotImplementedError

    def _check_budget(self, state_name: str) -> None:
        raise NotImplementedError

    def _fork(self, step: int, state: State) -> StepResult:
        """Run (or resume) every branch; the join of their verdicts is the state's verdict."""
        root = subloop.child_dir(self.run_dir.root, step, state.name)
        join = state.join or Join()
        if not (root / ITEMS).is_file():
            self._refuse_cut_items(state)
        try:
            items = self._fork_items(step, state, root)
        except (ItemsError, LoopError) as exc:
            if isinstance(exc, RecordError):
                raise  # not the branches' doing: the run stops, resumable
            why = exc.message if isinstance(exc, LoopError) else str(exc)
            return self._joined(step, state, join, [], {}, "error", why)
        only = self.options.branch
        if only is not None and only[0] == state.name and self.parent is None:
            chosen = [i for i in items if i.key == only[1]]  # `ll run --branch STATE=KEY`
            if not chosen:
                keys = ", ".join(i.key for i in items) or "none"
                why = f"state '{state.name}' has no branch '{only[1]}'; its keys: {keys}"
                return self._joined(step, state, join, [], {}, "error", why)
            items = chosen
        host = ForkHost(
            session=self.session,
            steps=self.steps,
            jobs=self.options.jobs,
            prepare=lambda item, base, total: self._prepare(step, state, root, item, base, total),
            check_budget=self._check_budget,
        )
        ends = Fork(host, step, state, root, items, join).run()
        verdict = decide(join, len(items), ends) or "failure"
        done = summary(join, items, ends, verdict)
        self.session.write_record(root / JOIN, done["branches"])
        reason: str | None = None
        if verdict != "success":
            failed = done["failed_keys"].replace("\n", ", ")
            reason = f"join {describe(join)}: {done['succeeded']} of {len(items)} succeeded" + (
                f"; not: {failed}" if failed else ""
            )
        return self._joined(step, state, join, items, ends, verdict, reason, done)

    def _joined(
        self,
        step: int,
        state: State,
        join: Join,
        items: list[Item],
        ends: dict[str, BranchEnd],
        verdict: str,
        reason: str | None,
        record: dict[str, Any] | None = None,
    ) -> StepResult:
        record = record or summary(join, items, ends, verdict)
        details = {
            "policy": describe(join),
            **{k: record[k] for k in ("total", "succeeded", "failed", "cancelled")},
        }
        if verdict == "success":
            details["reason"] = f"join {describe(join)}: {record['succeeded']} of " + (
                f"{record['total']} succeeded"
            )
        self.session.emit(
            ev.Evaluate(
                step=step,
                state=state.name,
                type="join",
                verdict=verdict,
                details=details,
                reason=reason,
            )
        )
        if state.capture:
            self.progress.captured[state.capture] = record
        return StepResult(Verdict(verdict, details), None, reason, record)

    def _refuse_cut_items(self, state: State) -> None:
        """A for_each over a capture that kept only the tail of a longer output would run
        the items of a cut list: the run stops (exit 3) and says why."""
        if not isinstance(state.for_each, str):
            return
        for part in placeholders(state.for_each):
            record: Any = None
            if part.namespace == "captured" and part.path[1:] == ("output",):
                record = self.progress.captured.get(part.path[0])
            elif part.namespace == "prev" and part.path == ("output",):
                record = self.progress.prev
            if isinstance(record, dict) and record.get("output_cut"):
                raise RunError(
                    f"state '{state.name}': for_each reads '${{{part.name}}}', which holds only "
                    f"the last {DEFAULT_TAIL_BYTES // (1 << 20)} MiB of a longer output, so its "
                    "items would be cut; write the items to a file in that step and list them "
                    "from there in a smaller output, or split the work"
                )

    def _fork_items(self, step: int, state: State, root: Path) -> list[Item]:
        """The items, resolved once: read back from items.json when the fork resumes."""
        stored = root / ITEMS
        if stored.is_file():
            return _stored_items(stored, max_items(self.env), self.session.read_record)
        if state.parallel:
            items = branch_items(state)
        else:
            given = state.for_each
            if isinstance(given, str):
                text = self.steps.templates.render(given, step, state, 1, shell=False)
                values: list[Any] = parse_items(text)
            else:
                values = list(given or ())
            items = make_items(values, max_items(self.env))
        root.mkdir(parents=True, exist_ok=True)
        self.session.write_record(stored, items_json(items))
        return items

    # -- one branch ------------------------------------------------------------------------

    def _branch_path(self, state: State, item: Item) -> tuple[str, ...]:
        return (*(self.parent.path if self.parent else ()), state.name, item.key)

    def _prepare(
        self,
        step: int,
        state: State,
        root: Path,
        item: Item,
        base: BranchActions | TreeSlots,
        total: int,
    ) -> Job | BranchEnd:
        """A `Job` ready to start, or the `BranchEnd` of a branch that cannot start."""
        work = state.parallel[item.key] if state.parallel else state
        if state.parallel and work.action is not None:  # the fork's timeout/retry: defaults
            work = dataclasses.replace(
                work, timeout=work.timeout or state.timeout, retry=work.retry or state.retry
            )
        path = self._branch_path(state, item)
        where = f"state '{state.name}' branch '{item.key}'"
        scope = self.steps.templates.scope(step, state, 1)
        if not state.parallel:
            scope["item"] = item.scope()
        raw = base.inner  # the layer under the fork's own (`TreeSlots`, or its branch's)
        values: dict[str, str] = {}
        stub: dict[str, Any] | None = None
        try:
            if work.loop is not None:
                child = subloop.load_child(self.loop, work, len(path))
                values = {
                    k: render(t, scope, shell=False, where=where) for k, t in work.with_.items()
                }
                subloop.bind_inputs(child, values, work.loop)
                layer = raw.child(state.name, None).child(item.key, child)
                stub = raw.child(state.name, None).stub_child(item.key, child)
            else:
                shell = work.action_type == "shell"
                assert work.action is not None
                command = render(
                    work.action,
                    scope,
                    shell=shell,
                    where=where,
                    command=True,
                    program=self.steps.templates.program,
                )
                child = self._action_loop(work, item.key, command)
                # Not `for_loop`: a simulation answers the branch as an action, never as an
                # unanswered terminal's silent success.
                layer = raw.child(state.name, None)
        except (ChildError, LoopError) as exc:
            if isinstance(exc, SimulationError):
                raise  # the script is wrong, not the branch: the run stops
            reason = str(exc.message if isinstance(exc, LoopError) else exc)
            record = BranchRecord.of(verdict="error", error=reason, key=item.key, index=item.index)
            return BranchEnd("error", "error", record)
        child_root = root / item.key
        run_id = f"{self.progress.run_id}/{root.name}/{item.key}"
        if stub is not None:
            end = ChildEnd(run_id=run_id, **stub)
            return BranchEnd(end.verdict, end.outcome, loop_record(end, item))
        progress = None
        if (child_root / "state.json").is_file():  # it was running when the fork stopped
            from little_loops.record.history import History

            progress = Progress.from_dict(
                RunDir(child_root).read_state(), str(child_root / "state.json")
            )
            progress.path = History.from_file(child_root / "events.jsonl").path_upto(progress.step)
            progress.status = "running"
            # Where this tree runs now: its run directory may have moved to another checkout
            # (the CI approval flow), and a branch acts there, never in the old tree.
            progress.options = dataclasses.replace(
                progress.options,
                cwd=str(child.cwd(self.options.base_dir)),
                base_dir=str(self.options.base_dir.resolve()),
            )
            layer = layer.resumed(child_root / "events.jsonl")
        shown = self.redactor.obj(values) if self.redactor else values
        self.session.emit(
            ev.ChildStart(
                step=step,
                state=state.name,
                kind="branch",
                file=work.loop or "",
                child_run_id=run_id,
                dir=os.path.relpath(child_root, self.run_dir.root),
                with_=shown,
                resumed=progress is not None,
                branch=item.key,
                index=item.index,
                item=(self.redactor.text(item.text) if self.redactor else item.text)[:200],
                fork="parallel" if state.parallel else "for_each",
                total=total,
            )
        )
        branch_scope = Scope(base.scope)
        # `--verbose` output goes to the root's hook, each line under this branch's path.
        out = self.options.on_output if base.verbose is None else base.verbose[1]
        verbose = ("/".join(path), out) if out is not None else None
        wrapped = BranchActions(layer, branch_scope, base.jobs, verbose)
        segment = (state.name, item.key)
        listeners = [serial(subloop.forward(one, segment), one) for one in self._listeners]
        if not isinstance(layer, Processes) and callable(layer):
            listeners.append(layer)
        limits = [t for t in (child.timeout, None if work.action else work.timeout) if t]
        remaining = self.session.remaining(self.loop.timeout)
        if remaining is not None:
            limits.append((progress.elapsed_ms / 1000.0 if progress else 0.0) + remaining)
        if limits:
            child = dataclasses.replace(child, timeout=min(limits))
        options = dataclasses.replace(
            self.options,
            overrides={k: v.replace("${", "$${") for k, v in values.items()},
            # A branch's child: keys bound from program text; an action branch runs with this
            # run's context, and its keys that hold program text.
            program_context=(
                subloop.program_inputs(work, self.steps.templates.program)
                if work.loop is not None
                else self.steps.templates.program
            ),
            max_iterations=None,
            on_terminal_output=None,
            on_output=None,
            # Branches run at once: a question in one waits for `ll answer`/`ll resume
            # --answer` rather than a terminal prompt two threads would share.
            prompt=None,
        )
        runner = self._child_runner(
            child,
            options,
            listeners=listeners,
            progress=progress,
            run_dir=subloop.open_child_dir(child_root),
            run_id=run_id,
            clock=self.session.clock,
            action_layer=wrapped,
            parent=Parent(
                path,
                tuple(self.redactor.values),
                tuple(self._listeners),
                self._budget_left(),
                snapshot=work.loop is not None,
            ),
        )
        return Job(item, child_root, run_id, runner, branch_scope, work.loop is None, child)

    def _action_loop(self, work: State, key: str, command: str) -> Loop:
        """An action branch as a run of one step: its state is the branch, and terminal."""
        state = dataclasses.replace(
            work,
            name=key,
            action=command.replace("${", "$${"),  # rendered already: literal from here
            terminal=True,
            routes=EMPTY,
            next=None,
            capture=None,
            parallel=EMPTY,
            for_each=None,
            join=None,
            max_concurrency=None,
            fail_fast=False,
        )
        return dataclasses.replace(
            self.loop,
            initial=key,
            states={key: state},
            context={k: str(v).replace("${", "$${") for k, v in self.progress.context.items()},
            max_iterations=1,
            on_max_iterations=None,
            maintain=False,
            on_error=None,
            timeout=None,
            outputs=EMPTY,
            inputs=EMPTY,
        )
