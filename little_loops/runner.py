"""The run: enter -> act -> evaluate -> route -> record, step after step, until the end.

The runner never prints and never exits; it reports through events and returns a RunResult.
What a run holds open (lock, run directory, event sink, clock) is its `RunSession`; one
state's step (render, act, evaluate, retry) is the `StepPipeline`; everything a resumed run
needs lives in `Progress`, written to state.json once per step.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Callable, Mapping
from typing import Any

from . import events as ev
from . import router, subloop
from .action_layer import ActionLayer, Processes
from .errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_SUSPENDED,
    EXIT_TERMINATED,
    LoopError,
)
from .events import Listener
from .gate import GATE, Terminated, signals_as_exceptions
from .interpolate import resolve_context
from .model import Loop, State, Verdict
from .progress import OUTCOME_EXIT, Progress, RunOptions, RunResult
from .secrets import Redactor, Sealer, secret_sources
from .session import Clock, RunSession, file_secrets
from .steps import Finish, StepPipeline, StepResult, output_record, retry_delay
from .store import RUNS, RunDir, cannot, new_run_id, process_start
from .subloop import ChildEnd, ChildError, Parent

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
        if parent is not None:
            self.options = dataclasses.replace(self.options, allow_concurrent=True)
        self._listeners = list(listeners or [])
        clock = clock or Clock()
        if sleep is not None:
            clock = Clock(clock.monotonic, clock.wall, sleep)
        self.env: Mapping[str, str] = (
            self.options.env if self.options.env is not None else dict(os.environ)
        )
        self.resumed = progress is not None
        # `ll step`: asked after each recorded step; a reason pauses the run there (exit 6).
        self.pause: Callable[[], str | None] | None = None
        run_id = progress.run_id if progress else (run_id or new_run_id(loop.name))
        started_at = progress.started_at if progress else clock.wall()
        run_root = run_dir.root if run_dir else self.options.base_dir / RUNS / run_id
        # Fixed for the whole run; context values may use them, and ${env.X}.
        loop_scope = {
            "name": loop.name,
            "run_id": run_id,
            "run_dir": str(run_root.resolve()),
            "dir": str(loop.dir),
            "started_at": started_at,
        }
        context = resolve_context(
            loop.context, self.options.overrides, env=self.env, loop=loop_scope
        )
        if progress is None:
            o = self.options
            progress = Progress(
                run_id=run_id,
                loop_file=str(loop.path.resolve()),
                loop_sha256=loop.source_sha256,
                started_at=started_at,
                context=context,
                max_iterations=o.max_iterations or loop.max_iterations,
                current=loop.initial,
                options={
                    "cwd": str(loop.cwd(o.base_dir)),
                    "overrides": {
                        k: v for k, v in o.overrides.items() if k not in set(loop.secrets)
                    },
                    "model": o.model,
                    "cache": o.cache,
                    "record": str(o.record) if o.record else None,
                    "replay": str(o.replay) if o.replay else None,
                    "claude": list(o.claude),
                    "claude_flags": list(o.claude_flags),
                    # which secrets came from --set, so a resume asks for them again
                    "secret_sets": sorted(k for k in o.overrides if k in set(loop.secrets)),
                    "secret_nonce": os.urandom(4).hex(),
                },
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
        sealer = Sealer(sources, str(progress.options.get("secret_nonce") or ""))
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
            rng=rng or random.Random(),
        )

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
        self._start()
        try:
            GATE.raise_pending()  # one that came while the run was set up
            while True:
                self._next_step()
                GATE.raise_pending()  # the step is recorded: a held signal stops the run here
                why = self.pause() if self.pause is not None else None
                if why:
                    return self._finish("interrupted", p.current, why, EXIT_SUSPENDED)
        except Finish as end:
            return self._finish(end.outcome, end.final_state, end.error)
        except LoopError as exc:
            return self._finish("error", p.current, exc.message)
        except KeyboardInterrupt:
            return self._finish("interrupted", p.current, "interrupted (SIGINT)", EXIT_INTERRUPTED)
        except Terminated:
            return self._finish("interrupted", p.current, "terminated (SIGTERM)", EXIT_TERMINATED)
        except OSError as exc:  # the machine said no: disk full, a file made unwritable
            return self._finish("error", p.current, _os_error(exc))
        except Exception as exc:  # a bug in ll: recorded as ended in error, never "running"
            from .crash import one_line, write_report

            report = write_report(exc, self.run_dir.root)
            message = f"internal error (a bug in ll): {one_line(exc)}"
            if report is not None:
                message += f"; crash report: {report}"
            return self._finish("error", p.current, message, EXIT_INTERNAL)
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
        result = self._call(step, state) if state.is_loop else self.steps.run(step, state)
        self._remember(step, state, result)
        route = self._route(state, result)
        self._record(step, state, route)

    def _enter(self) -> tuple[int, State]:
        """The state the next step runs (the `on_max_iterations` one once the limit is hit)."""
        p = self.progress
        self.steps.check_deadline(p.current)
        if p.step >= p.max_iterations:
            if self.loop.on_max_iterations is None or p.on_max_used:
                raise Finish("max_iterations", p.current)
            p.on_max_used = True
            p.current = self.loop.on_max_iterations
        step = p.step + 1
        self.session.emit(ev.StateEnter(step=step, state=p.current))
        return step, self.loop.states[p.current]

    def _route(self, state: State, result: StepResult) -> dict[str, str]:
        """Where the run goes next; `Finish` when it ends here."""
        verdict = result.verdict.verdict
        if state.is_loop:
            self._check_budget(state.name)  # the child's cost, or an ancestor's budget, ends us
        if self.steps.ends_run(state):
            return self._after_terminal(state, result)
        # A child's terminal routes as its outcome when it has no route of its own.
        outcome = result.verdict.details.get("outcome") if state.is_loop else None
        if verdict in ("error", "timeout") or not isinstance(outcome, str):
            outcome = None
        decision = router.route(self.loop, state, verdict, outcome)
        if decision is None:
            self.progress.last_route = None  # written once, by _finish
            outcome, message = router.stop(state, verdict, result.reason)
            raise Finish(outcome, state.name, message)
        return {"from": state.name, "to": decision.target, "verdict": verdict, "via": decision.via}

    def _after_terminal(self, state: State, result: StepResult) -> dict[str, str]:
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
            return {"from": state.name, "to": target, "verdict": "maintain", "via": "maintain"}
        raise Finish(state.outcome, state.name)

    def _record(self, step: int, state: State, route: dict[str, str]) -> None:
        """The step's one persist point: its route written, then the state that names it.

        A step that ends the run is written once, by `_finish`: a state.json naming a finished
        step but not the end would make resume run that step again as the next one.
        """
        p = self.progress
        self.session.emit(
            ev.Route(
                step=step,
                state=state.name,
                from_=route["from"],
                to=route["to"],
                verdict=route["verdict"],
                via=route["via"],
            )
        )
        p.last_route = route
        p.current = route["to"]
        self.session.persist(p)
        self._check_budget(state.name)
        if self.loop.backoff > 0:
            remaining = self.session.remaining(self.loop.timeout)
            with GATE.interruptible():
                self.session.clock.sleep(min(self.loop.backoff, remaining or self.loop.backoff))

    def _remember(self, step: int, state: State, result: StepResult) -> None:
        """The finished step in the progress: what `prev` and `captured` show from now on."""
        p = self.progress
        p.step = step
        p.attempt = 0
        p.path.append(state.name)
        details = result.verdict.details
        fields = result.record or output_record(state, result.action)
        record = {**fields, "verdict": result.verdict.verdict}
        p.prev = record
        kept = {**record, "confidence": details.get("confidence"), "reason": details.get("reason")}
        if state.capture:
            p.captured[state.capture] = kept
        self.session.keep_outputs(kept, state.capture)
        value = details.get("value")
        converging = state.evaluate is not None and state.evaluate.type == "convergence"
        if converging and isinstance(value, int | float) and not isinstance(value, bool):
            p.convergence[state.name] = float(value)
        # Only a real judge verdict's reason is shown to the judge again, never an error text.
        reason = details.get("reason")
        judged = state.evaluate is not None and state.evaluate.type == "llm_structured"
        real = "confident" in details and "error" not in details  # not an error, not a timeout
        if judged and real and not details.get("fail_open") and isinstance(reason, str) and reason:
            p.prior_reasons[state.name] = str(reason)

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
        retry = state.retry
        attempt = max(self.progress.attempt, 1)  # a resumed run continues the attempt count
        while True:
            # A fresh child run each attempt: sub/<step>-<state>.<attempt> after the first.
            root = subloop.child_dir(self.run_dir.root, step, state.name, attempt)
            end = self._finished_child(root, child)
            if end is None:
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
            if retry is None or end.verdict not in retry.on or attempt >= retry.max_attempts:
                break
            delay = retry_delay(retry, attempt)
            remaining = self.session.remaining(self.loop.timeout)
            if remaining is not None:
                delay = min(delay, remaining)
            self.session.emit(
                ev.Retry(
                    step=step,
                    state=state.name,
                    attempt=attempt + 1,
                    delay_s=round(delay, 3),
                    verdict=end.verdict,
                )
            )
            attempt += 1
            self.progress.attempt = attempt
            self.session.persist(self.progress)  # the finished attempt's cost with it
            with GATE.interruptible():
                self.session.clock.sleep(delay)
            self.steps.check_deadline(state.name)
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
            from .history import History

            progress = Progress.from_dict(RunDir(root).read_state())
            progress.path = History.from_file(root / "events.jsonl").path_upto(progress.step)
            progress.status = "running"
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
            max_iterations=None,
            on_terminal_output=None,
        )
        listeners = [subloop.forward(listener, path) for listener in self._listeners]
        # A simulation answers a child's states under `state/` (`deploy/canary`); the real
        # action layer is the same for every run of the tree.
        layer = self.steps.actions.child(state.name, child)
        if progress is not None:
            layer = layer.resumed(root / "events.jsonl")
        if layer is not self.steps.actions and callable(layer):
            listeners.append(layer)  # it learns which state acts from the child's own events
        runner = Runner(
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
        if result.outcome == "interrupted":  # the parent stops with it, and resumes it
            raise Terminated() if result.exit_code == EXIT_TERMINATED else KeyboardInterrupt()
        return ChildEnd(
            run_id=run_id,
            final_state=result.final_state,
            outcome=result.outcome,
            exit_code=result.exit_code,
            steps=result.steps,
            duration_ms=result.duration_ms,
            cost_usd=runner.progress.cost_usd,
            outputs=runner.progress.outputs or {},
            error=result.error,
            via_terminal=subloop.ended_at_terminal(child, result.final_state, result.outcome),
        )

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

    # -- the end ---------------------------------------------------------------------------

    def _finish(
        self, outcome: str, final_state: str, error: str | None, exit_code: int | None = None
    ) -> RunResult:
        p = self.progress
        code = exit_code if exit_code is not None else OUTCOME_EXIT[outcome]
        p.status = "interrupted" if outcome == "interrupted" else "finished"
        p.outcome, p.exit_code, p.error = outcome, code, error
        p.final_state = final_state
        if self.loop.outputs and outcome != "interrupted":
            p.outputs = self._outputs(final_state)
        duration_ms = self.session.elapsed_ms()
        self.session.emit(
            ev.LoopComplete(
                final_state=final_state,
                outcome=outcome,
                exit_code=code,
                steps=p.step,
                duration_ms=duration_ms,
                error=error,
                cost_usd=round(p.cost_usd, 6),
                outputs=p.outputs,
            )
        )
        # After the event, so whoever sees the final state also finds the event in the log.
        self.session.persist(p)
        return RunResult(
            run_id=p.run_id,
            outcome=outcome,
            exit_code=code,
            final_state=final_state,
            steps=p.step,
            duration_ms=duration_ms,
            path=tuple(p.path),
            run_dir=self.run_dir.root,
            error=error,
        )

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


def _os_error(exc: OSError) -> str:
    return cannot("write", os.fsdecode(exc.filename), exc) if exc.filename else str(exc)
