"""The run: enter -> act -> evaluate -> route -> record, step after step, until the end.

The runner never prints and never exits; it reports through events and returns a RunResult.
What a run holds open (lock, run directory, event sink, clock) is its `RunSession`; one
state's step (render, act, evaluate, retry) is the `StepPipeline`; everything a resumed run
needs lives in `Progress`, written to state.json once per step. A step is run by its kind
(`kinds.KINDS`: an action, a child run, a fork, a question), given the run's `RunContext`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from little_loops.errors import (
    EXIT_SUSPENDED,
    LoopError,
)
from little_loops.model import router
from little_loops.model.loop import (
    Loop,
    State,
)
from little_loops.model.progress import (
    OUTCOME_EXIT,
    Progress,
    Routed,
    RunOptions,
    RunResult,
    SavedOptions,
)
from little_loops.model.records import replace
from little_loops.record import events as ev
from little_loops.record.events import Listener
from little_loops.record.secrets import (
    Redactor,
    Sealer,
    secret_sources,
)
from little_loops.record.store import (
    RUNS,
    RunDir,
    new_run_id,
    process_start,
)
from little_loops.run.action_layer import (
    ActionLayer,
    Processes,
)
from little_loops.run.context import RunContext
from little_loops.run.gate import (
    GATE,
    Terminated,
    signals_as_exceptions,
)
from little_loops.run.kinds import (
    KINDS,
    kind_of,
)
from little_loops.run.session import (
    Clock,
    RunSession,
    file_secrets,
)
from little_loops.run.steps import (
    Finish,
    StepPipeline,
    StepResult,
    remember,
    run_end,
)
from little_loops.run.subloop import Parent
from little_loops.templates.interpolate import resolve_context

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    import random

# The names other modules and tests import from here.
__all__ = [
    "GATE",
    "OUTCOME_EXIT",
    "Clock",
    "Progress",
    "RunOptions",
    "RunResult",
    "Runner",
    "Terminated",
    "file_secrets",
    "signals_as_exceptions",
]


class Runner:
    """Runs one loop to its end, or to a limit, writing every step to the run directory."""

    def __init__(
        self,
        loop: Loop,
        options: RunOptions | None = None,
        *,
        listeners: list[Listener] | None = None,
        progress: Progress | None = None,
        run_dir: RunDir | None = None,
        run_id: str | None = None,
        sleep: Callable[[float], None] | None = None,
        rng: random.Random | None = None,
        clock: Clock | None = None,
        action_layer: ActionLayer | None = None,
        parent: Parent | None = None,
    ) -> None:
        self.loop = loop
        self.options = options or RunOptions()
        # A child run (a `loop:` state's) takes no lock: its root holds the tree's.
        self.parent = parent
        if parent is not None and not self.options.allow_concurrent:
            self.options = replace(self.options, allow_concurrent=True)
        self._listeners = list(listeners or [])
        clock = clock or Clock()
        if sleep is not None:
            clock = Clock(clock.monotonic, clock.wall, sleep)
        self.env: Mapping[str, str]
        if self.options.env is not None:
            self.env = self.options.env
        elif parent is not None and parent.env is not None:
            self.env = parent.env  # the root's copy: a tree reads one environment
        else:
            self.env = dict(os.environ)
        # Resolved once for the whole tree: every child of a fork runs the same loop file in
        # the same base directory.
        self._resolved: dict[Path, Path] = parent.resolved if parent is not None else {}
        resolved = self._resolve
        self.resumed = progress is not None
        self._kinds: dict[str, str] = {}  # each state's kind (`kind_of`), found at its first step
        # A resumed run that had ended (its end logged, its state not written): not run again.
        self.ended_before = False
        # `ll step`: asked after each recorded step; a reason pauses the run there (exit 6).
        self.pause: Callable[[], str | None] | None = None
        run_id = progress.run_id if progress else (run_id or new_run_id(loop.name))
        started_at = progress.started_at if progress else clock.wall()
        run_root = run_dir.root if run_dir else self.options.base_dir / RUNS / run_id
        given_root = run_root
        if parent is not None and run_dir is not None:
            # A child's directory sits in one its tree resolved already (its caller's `sub/`,
            # its fork's), and is no link (`RunDir.check_links`): one resolve for all of them,
            # none when its caller's is known (a chain of calls: `sub/` under each level).
            up = run_root.parent
            known = self._resolved.get(up.parent)
            if up not in self._resolved and known is not None:
                self._resolved[up] = known / up.name
            run_root = resolved(up) / run_root.name
        else:
            run_root = run_root.resolve()
        if any(s.is_loop or s.is_fork for s in loop.states.values()):
            self._resolved[given_root] = run_root  # for its children: one entry a caller
        # Fixed for the whole run; context values may use them, and ${env.X}.
        loop_scope = {
            "name": loop.name,
            "run_id": run_id,
            "run_dir": str(run_root),
            "dir": str(resolved(loop.path).parent),
            "started_at": started_at,
        }
        context = resolve_context(
            loop.context, self.options.overrides, env=self.env, loop=loop_scope
        )
        if progress is None:
            o = self.options
            progress = Progress(
                run_id=run_id,
                loop_file=str(resolved(loop.path)),
                loop_sha256=loop.source_sha256,
                started_at=started_at,
                context=context,
                max_iterations=o.max_iterations or loop.max_iterations,
                current=loop.initial,
                options=SavedOptions(
                    cwd=str(
                        resolved(o.base_dir)
                        if loop.working_dir is None
                        else (resolved(loop.path).parent / loop.working_dir).resolve()
                    ),
                    base_dir=str(resolved(o.base_dir)),  # a resume elsewhere maps paths by it
                    overrides={k: v for k, v in o.overrides.items() if k not in set(loop.secrets)},
                    model=o.model,
                    cache=o.cache,
                    record=str(o.record) if o.record else None,
                    replay=str(o.replay) if o.replay else None,
                    claude=tuple(o.claude),
                    claude_flags=tuple(o.claude_flags),
                    # which secrets came from --set, so a resume asks for them again
                    secret_sets=tuple(sorted(k for k in o.overrides if k in set(loop.secrets))),
                    secret_nonce=os.urandom(4).hex(),
                ),
            )
        else:
            # Secret context values are never written down; a resumed run takes them afresh.
            progress.context.update({k: context[k] for k in loop.secrets if k in context})
        progress.pid = os.getpid()
        progress.pid_start = process_start(progress.pid)
        self.progress = progress
        sources = secret_sources(self.env, progress.context, loop.secrets)
        # A value secret anywhere above a child is secret in it too (and sealed in its state).
        for i, value in enumerate(parent.secrets if parent else ()):
            sources[f"caller.{i}"] = value
        self.redactor = Redactor(sources.values())
        # Saved values hold markers where secrets stood; a resumed run fills them in again.
        sealer = Sealer(sources, progress.options.secret_nonce)
        if self.resumed and sealer.nonce:
            progress.context = sealer.unseal(progress.context, sources)
        self.session = RunSession(
            loop,
            self.options,
            progress,
            redactor=self.redactor,
            sealer=sealer,
            clock=clock,
            listeners=self._listeners,
            run_dir=run_dir,
            sources=sources,
            snapshot=parent.snapshot if parent is not None else True,
        )
        self.run_dir = self.session.run_dir
        if self.resumed:
            try:
                self.session.load_outputs(progress)
            except BaseException:
                self.session.close()
                raise
            if sealer.nonce:
                progress.captured = sealer.unseal(progress.captured, sources)
                progress.prev = sealer.unseal(progress.prev, sources)
        self.steps = StepPipeline(
            loop,
            self.options,
            progress,
            self.session,
            env=self.env,
            scope=loop_scope,
            action_layer=action_layer or Processes(),
            rng=rng,
            root=parent is None,
        )
        # What every kind of step is given instead of the runner.
        self.ctx = RunContext(
            loop=loop,
            options=self.options,
            progress=progress,
            session=self.session,
            steps=self.steps,
            parent=parent,
            redactor=self.redactor,
            listeners=self._listeners,
            env=self.env,
            new_run=Runner,
            resolved=self._resolved,
        )

    def _capture_of(self, name: str) -> str | None:
        state = self.loop.states.get(name)
        return state.capture if state is not None else None

    def _resolve(self, path: Path) -> Path:
        """`path.resolve()`, once per path for the whole tree."""
        found = self._resolved.get(path)
        if found is None:
            found = self._resolved[path] = path.resolve()
        return found

    # -- the run -------------------------------------------------------------------------

    def run(self) -> RunResult:
        """Run until a terminal state, a limit, an error or a signal; always persists the end.

        Signals are held throughout, except in the windows that wait on something outside
        (actions, the judge, sleeps); one that arrives while the end is being recorded does
        not change the recorded outcome.
        """
        # Held until signals_as_exceptions ends, so that a signal after the end is recorded
        # is dropped there rather than raised on the way out.
        GATE.held = True
        try:
            return self._run()
        finally:
            if self.parent is None:  # a child's caller still has its end to record
                GATE.pending = None

    def _run(self) -> RunResult:
        p = self.progress
        logged = self.session.logged_end(p) if self.resumed else None
        if logged is not None:  # its process was cut off after it logged its end: finished now
            self.ended_before = True
            try:
                capture_of = self._capture_of
                return self.session.end_logged(p, self.run_dir.root, logged, capture_of)
            finally:
                self.steps.close()
                self.session.close()
        self._start()
        try:
            GATE.raise_pending()  # one that came while the run was set up
            if self.pause is not None and not self.resumed:  # `ll step --until INITIAL`
                why = self.pause()
                if why:
                    return self._finish("interrupted", p.current, why, EXIT_SUSPENDED)
            while True:
                self._next_step()
                GATE.raise_pending()  # the step is recorded: a held signal stops the run here
                why = self.pause() if self.pause is not None else None
                if why:
                    return self._finish("interrupted", p.current, why, EXIT_SUSPENDED)
        except BaseException as exc:
            end = run_end(exc, p, self.session)
            if end is None:
                raise
            return self._finish(*end)
        finally:
            self.steps.close()
            self.session.close()

    def _start(self) -> None:
        p, session = self.progress, self.session
        session.emit(
            ev.LoopStart(
                loop=self.loop.name,
                file=str(self.loop.path),
                max_iterations=p.max_iterations,
                resumed=self.resumed,
            )
        )
        lock = session.lock
        if lock is not None and lock.reclaimed_from:
            owner = lock.reclaimed_from
            session.emit(
                ev.LockReclaimed(previous_run_id=owner.get("run_id"), previous_pid=owner.get("pid"))
            )
        session.persist(p)

    def _next_step(self) -> None:
        """One step, in the order things happen."""
        step, state = self._enter()
        kind = self._kinds.get(state.name)
        if kind is None:
            kind = self._kinds[state.name] = kind_of(state)
        result = KINDS[kind].run(self.ctx, step, state)
        self._remember(step, state, result)
        route = self._route(state, result, kind)
        self._record(step, state, route)

    def _enter(self) -> tuple[int, State]:
        """The state the next step runs (the `on_max_iterations` one once the limit is hit)."""
        p = self.progress
        self.steps.check_deadline(p.current)
        # A terminal reached by the last allowed step still runs: its outcome is the run's
        # (a maintained loop's terminals start it again, so there the limit comes first).
        ends_here = self.loop.states[p.current].terminal and not self.loop.maintain
        ends_here = ends_here and self.options.branch is None  # `--branch`: the fork alone
        if p.step >= p.max_iterations and not ends_here:
            if self.loop.on_max_iterations is None or p.on_max_used:
                raise Finish("max_iterations", p.current)
            p.on_max_used = True
            p.current = self.loop.on_max_iterations
        step = p.step + 1
        self.session.emit_fields(ev.StateEnter, {"step": step, "state": p.current})
        return step, self.loop.states[p.current]

    def _route(self, state: State, result: StepResult, kind: str) -> Routed:
        """Where the run goes next (`kind`: the state's, `kind_of`); `Finish` when it ends
        here."""
        verdict = result.verdict.verdict
        if kind == "loop" or kind == "fork":
            self.ctx.check_budget(state.name)  # the child's cost, or an ancestor's budget, ends us
        if self.steps.ends_run(state):
            return self._after_terminal(state, result)
        # A child's terminal routes as its outcome when it has no route of its own.
        outcome = result.verdict.details.outcome if kind == "loop" else None
        if verdict in ("error", "timeout"):
            outcome = None
        decision = router.route(self.loop, state, verdict, outcome)
        if decision is None:
            self.progress.last_route = None  # written once, by _finish
            outcome, message = router.stop(state, verdict, result.reason)
            raise Finish(outcome, state.name, message)
        return Routed(state.name, decision.target, verdict, decision.via)

    def _after_terminal(self, state: State, result: StepResult) -> Routed:
        """End the run at a terminal (or the `on_max_iterations` state), or maintain.

        A terminal whose action did not succeed makes the outcome `failure`, whatever its
        `outcome` says, and stops a maintained loop too. At `on_max_iterations` the outcome
        stays `max_iterations` (the limit came first) and the error names the failed action.
        """
        failed = None
        if result.verdict.verdict != "success":
            kind = "terminal state" if state.terminal else "state"
            failed = f"{kind} '{state.name}' gave verdict '{result.verdict.verdict}'"
            if result.reason:
                failed += f": {result.reason}"
        if self.progress.on_max_used:
            raise Finish("max_iterations", state.name, failed)
        if failed is not None:
            raise Finish("failure", state.name, failed)
        if self.loop.maintain and state.terminal:
            target = state.on_maintain or self.loop.initial
            return Routed(state.name, target, "maintain", "maintain")
        raise Finish(state.outcome, state.name)

    def _record(self, step: int, state: State, route: Routed) -> None:
        """The step's one persist point: its route written, then the state that names it.

        A step that ends the run is written once, by `_finish`: a state.json naming a finished
        step but not the end would make resume run that step again as the next one.
        """
        p = self.progress
        self.session.emit_fields(
            ev.Route,
            {
                "step": step,
                "state": state.name,
                "from_": route.from_,
                "to": route.to,
                "verdict": route.verdict,
                "via": route.via,
            },
        )
        p.last_route = route
        p.current = route.to
        self.session.persist(p)
        self.ctx.check_budget(state.name)
        if self.loop.backoff > 0:
            remaining = self.session.remaining(self.loop.timeout)
            with GATE.interruptible():
                self.session.clock.sleep(min(self.loop.backoff, remaining or self.loop.backoff))

    def _remember(self, step: int, state: State, result: StepResult) -> None:
        """The finished step in the progress: what `prev` and `captured` show from now on."""
        remember(self.progress, self.session, step, state, result)

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

    # -- the end ---------------------------------------------------------------------------

    def _finish(
        self, outcome: str, final_state: str, error: str | None, exit_code: int | None = None
    ) -> RunResult:
        """Every end of a run, a suspension included (`RunSession.end`), its `outputs:`
        rendered first."""
        if self.loop.outputs and outcome not in ("interrupted", "suspended"):
            self.progress.outputs = self._outputs(final_state)
        return self.session.end(
            self.progress, self.run_dir.root, outcome, final_state, error, exit_code
        )
