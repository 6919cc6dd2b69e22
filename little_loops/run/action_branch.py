"""A fork's action branch run as its one step, in the fork's own code: no `Runner`, child
loop, `RunContext` or run directory of its own per branch.

`ActionBranches` holds what every action branch of one fork shares, made once a fork: the
options a child run takes, the branch's one-state loop (its context: only the keys its
evaluator reads), the secrets it knows, the options it saves. `ActionBranch` is one branch:
its progress, a session whose run directory is a `BranchDir` (its state and events in memory
until its fork journals them), and the `StepPipeline` every loop step runs (render, act through
the branch's layer, evaluate, retry). Its run gives the same events, final state and
`RunResult` a one-step child run of the same loop would: `loop_start`, `state_enter`, the
step's, `loop_complete`.
"""

from __future__ import annotations

import os
from pathlib import Path

from little_loops.errors import (
    EXIT_RUN_ERROR,
    EXIT_SUSPENDED,
    EXIT_TERMINATED,
    RecordError,
)
from little_loops.model.loop import Loop, State
from little_loops.model.progress import (
    Progress,
    RunResult,
    SavedOptions,
)
from little_loops.model.question import Suspended
from little_loops.model.records import replace
from little_loops.record import events as ev
from little_loops.record.events import Listener
from little_loops.record.secrets import Redactor, Sealer, secret_sources
from little_loops.record.store import BranchDir, RunDir, process_start
from little_loops.run.action_layer import ActionLayer
from little_loops.run.children import Branch
from little_loops.run.context import RunContext
from little_loops.run.gate import GATE, Terminated
from little_loops.run.session import RunSession
from little_loops.run.steps import Finish, StepPipeline, StepResult, remember, run_end
from little_loops.run.subloop import ChildEnd
from little_loops.templates.interpolate import resolve_context


class ActionBranches:
    """What the action branches of one fork (of one `work` state: a `parallel:` branch has
    its own) share: made at the fork's first branch, used by every one after it."""

    def __init__(self, ctx: RunContext, fork: Path, loop: Loop, present: frozenset[str]) -> None:
        self.ctx = ctx
        self.loop = loop  # the one-state loop of the first branch; each branch names its own
        self.template = loop.states[loop.initial]
        o = ctx.options
        # What `children.start` gives a child run: no overrides, this run's program keys, no
        # terminal prompt or output of its own, no lock.
        self.options = replace(
            o,
            overrides={},
            program_context=ctx.steps.templates.program,
            max_iterations=None,
            on_terminal_output=None,
            allow_concurrent=True,
            on_output=None,
            prompt=None,
        )
        self.env = self.options.env if self.options.env is not None else ctx.env
        self.present = present  # the branch folders the fork found (a cut-off branch's log)
        self.shown_dir = os.path.relpath(fork, ctx.run_dir.root)
        where = self._resolve(loop.path)
        self.loop_file, self.loop_dir = str(where), str(where.parent)
        scope = {"name": loop.name, "run_id": "", "run_dir": "", "dir": self.loop_dir}
        # Its context is escaped text (`$${`): resolved, it is the same for every branch.
        self.context = resolve_context(loop.context, {}, env=self.env, loop=scope)
        cwd = (
            str(self._resolve(o.base_dir))
            if loop.working_dir is None
            else str((where.parent / loop.working_dir).resolve())
        )
        self.saved = SavedOptions(  # each branch's with a secret nonce of its own
            cwd=cwd,
            base_dir=str(self._resolve(o.base_dir)),
            overrides={},
            model=o.model,
            cache=o.cache,
            record=str(o.record) if o.record else None,
            replay=str(o.replay) if o.replay else None,
            claude=tuple(o.claude),
            claude_flags=tuple(o.claude_flags),
            secret_sets=(),
        )
        sources = secret_sources(self.env, self.context, loop.secrets)
        # A value secret anywhere above a branch is secret in it too (and sealed in its state).
        for i, value in enumerate(ctx.redactor.values):
            sources[f"caller.{i}"] = value
        self.sources = sources
        self.redactor = Redactor(sources.values())
        self.pid = os.getpid()
        self.pid_start = process_start(self.pid)

    def one_state(self, key: str, command: str) -> State:
        """A branch's one state: the first branch's (`branches._branch_state`), named by
        `key` and running `command` (rendered already: literal from here). Copied without
        `State.__init__` and its thirty-odd fields checked again: one a branch."""
        one: State = object.__new__(State)
        one.__dict__.update(self.template.__dict__, name=key, action=command.replace("${", "$${"))
        return one

    def _resolve(self, path: Path) -> Path:
        """`path.resolve()`, once per path for the whole tree (`RunContext.resolved`)."""
        found = self.ctx.resolved.get(path)
        if found is None:
            found = self.ctx.resolved[path] = path.resolve()
        return found

    def start(
        self,
        step: int,
        fork_state: str,
        state: State,
        root: Path,
        run_id: str,
        branch: Branch,
        listeners: list[Listener],
        layer: ActionLayer,
    ) -> ActionBranch:
        """Branch `state` (its one state, named by its key; `root` where its run would be, in
        the fork's folder), announced in the forking run (`child_start`, as every child run
        is) and ready to run."""
        ctx = self.ctx
        ctx.session.emit(
            ev.ChildStart(
                step=step,
                state=fork_state,
                file="",
                child_run_id=run_id,
                dir=f"{self.shown_dir}/{branch.key}",
                with_={},
                resumed=False,
                kind="branch",
                branch=branch.key,
                index=branch.index,
                item=branch.item,
                fork=branch.fork,
                total=branch.total,
            )
        )
        loop = self.loop
        remaining = ctx.session.remaining(ctx.loop.timeout)
        if remaining is not None:  # the forking run's deadline, on the branch's clock
            loop = replace(loop, timeout=remaining)
        return ActionBranch(self, loop, state, root, run_id, listeners, branch.wrap(layer))


class ActionBranch:
    """One action branch: its one step run by the step pipeline, its end a `RunResult`."""

    def __init__(
        self,
        kit: ActionBranches,
        loop: Loop,
        state: State,
        root: Path,
        run_id: str,
        listeners: list[Listener],
        layer: ActionLayer,
    ) -> None:
        self.state, self.run_id, self.loop = state, run_id, loop
        key = state.name
        clock = kit.ctx.session.clock
        started_at = clock.wall()
        nonce = os.urandom(4).hex()
        progress = Progress(
            run_id=run_id,
            loop_file=kit.loop_file,
            loop_sha256=loop.source_sha256,
            started_at=started_at,
            context=dict(kit.context),
            max_iterations=loop.max_iterations,
            current=key,
            options=replace(kit.saved, secret_nonce=nonce),
        )
        progress.pid, progress.pid_start = kit.pid, kit.pid_start
        self.progress = progress
        self.run_dir: RunDir = BranchDir(root, fresh=key not in kit.present)
        self.session = RunSession(
            loop,
            kit.options,
            progress,
            redactor=kit.redactor,
            sealer=Sealer(kit.sources, nonce),
            clock=clock,
            listeners=listeners,
            run_dir=self.run_dir,
            sources=kit.sources,
            snapshot=False,
        )
        scope = {
            "name": loop.name,
            "run_id": run_id,
            "run_dir": str(root),
            "dir": kit.loop_dir,
            "started_at": started_at,
        }
        self.steps = StepPipeline(
            loop,
            kit.options,
            progress,
            self.session,
            env=kit.env,
            scope=scope,
            action_layer=layer,
            rng=None,
            root=False,
        )

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> RunResult:
        """The branch's step, then its end, as a one-step child run records them; signals
        are held but in the step's waits (as in every run)."""
        GATE.held = True
        p, session = self.progress, self.session
        session.emit(
            ev.LoopStart(
                loop=self.loop.name,
                file=str(self.loop.path),
                max_iterations=p.max_iterations,
                resumed=False,
            )
        )
        # Not persisted here, as a run's start is: a branch's state is read only once it
        # has ended (every end goes through `_finish`, which persists it), from its line of
        # the journal.
        try:
            GATE.raise_pending()
            self.steps.check_deadline(p.current)
            session.emit(ev.StateEnter(step=1, state=p.current))
            result = self.steps.run(1, self.state)
            self._remember(result)
            raise self._end_at_terminal(result)
        except BaseException as exc:
            end = run_end(exc, p, self.session)
            if end is None:
                raise
            return self._finish(*end)
        finally:
            self.steps.close()
            session.close()

    def _remember(self, result: StepResult) -> None:
        """The finished step in the progress, as a run's step is (`prev`; its record kept)."""
        remember(self.progress, self.session, 1, self.state, result)

    def _end_at_terminal(self, result: StepResult) -> Finish:
        """The branch's state is terminal: the run ends there, `failure` when its action did
        not succeed."""
        state = self.state
        verdict = result.verdict.verdict
        if verdict != "success":
            failed = f"terminal state '{state.name}' gave verdict '{verdict}'"
            if result.reason:
                failed += f": {result.reason}"
            return Finish("failure", state.name, failed)
        return Finish(state.outcome, state.name)

    def _finish(
        self, outcome: str, final_state: str, error: str | None, exit_code: int | None = None
    ) -> RunResult:
        """Every end of the branch, as a run's (`RunSession.end`; a branch has no `outputs:`)."""
        return self.session.end(
            self.progress, self.run_dir.root, outcome, final_state, error, exit_code
        )

    # -- its end, for the fork -------------------------------------------------------------

    def end(self, result: RunResult, *, stopped: bool = False) -> ChildEnd:
        """How the branch ended, for its fork (`Child.end`'s contract): unless the fork
        stopped it, a branch cut off by a signal stops the fork the same way, and one whose
        record cannot be read stops it (`RecordError`)."""
        if not stopped:
            if result.outcome == "suspended" or (
                result.outcome == "interrupted" and result.exit_code == EXIT_SUSPENDED
            ):
                raise Suspended(self.progress.pending)
            if result.outcome == "interrupted" and result.exit_code == EXIT_RUN_ERROR:
                raise RecordError(result.error or "a branch's record cannot be read")
            if result.outcome == "interrupted":
                raise Terminated() if result.exit_code == EXIT_TERMINATED else KeyboardInterrupt()
        state = self.state
        at_terminal = result.final_state == state.name and not (
            result.outcome == "failure" and state.outcome != "failure"
        )
        return ChildEnd(
            run_id=self.run_id,
            final_state=result.final_state,
            outcome=result.outcome,
            exit_code=result.exit_code,
            steps=result.steps,
            duration_ms=result.duration_ms,
            cost_usd=self.progress.cost_usd,
            outputs=self.progress.outputs or {},
            error=result.error,
            via_terminal=at_terminal,
        )
