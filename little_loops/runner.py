"""The run: enter -> interpolate -> act -> evaluate -> route -> emit -> persist, step after step.

The runner never prints and never exits; it reports through events and returns a RunResult.
Everything a resumed run needs lives in `Progress`, written to state.json after every step.
"""

from __future__ import annotations

import math
import os
import random
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import actions, reasons, router
from .errors import (
    EXIT_BUDGET,
    EXIT_FAILURE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_MAX_ITERATIONS,
    EXIT_RUN_ERROR,
    EXIT_SUCCESS,
    EXIT_TERMINATED,
    EXIT_TIMEOUT,
    LoopError,
    RunError,
)
from .evaluators import EvalInput, evaluate
from .events import Emitter, Event, JsonlSink, Listener, utc_now
from .interpolate import literal_text, render, resolve_context
from .model import Loop, Retry, State, Verdict, base_verdict
from .secrets import MaskedView, RedactingStream, Redactor, Sealer, secret_sources
from .store import (
    RUNS,
    LoopLock,
    RunDir,
    StepLog,
    cannot,
    new_run_id,
    process_start,
    state_head,
)

OUTCOME_EXIT = {
    "success": EXIT_SUCCESS,
    "failure": EXIT_FAILURE,
    "error": EXIT_RUN_ERROR,
    "max_iterations": EXIT_MAX_ITERATIONS,
    "budget": EXIT_BUDGET,
    "timeout": EXIT_TIMEOUT,
}


class Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler, so running actions are killed."""


class _SignalGate:
    """Where SIGINT and SIGTERM take effect during a run.

    A signal stops the run at once only inside a window the runner opens for waiting on
    something outside (an action, the judge, a sleep). Anywhere else it is held until the
    step's bookkeeping (its events and persisted route) is done, so a step is either
    finished and recorded, or cut off and run again on resume, never half of each.
    """

    def __init__(self) -> None:
        self.held = False
        self.pending: int | None = None

    def arrived(self, signum: int) -> None:
        """The handler's half: raise now, or remember the signal for the end of the hold."""
        if self.held:
            self.pending = signum
            return
        _raise_for(signum)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold signals; a signal that came meanwhile is raised on leaving, unless still held."""
        was = self.held
        self.held = True
        try:
            yield
        finally:
            self.held = was
        if not was:
            self.raise_pending()

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """A window where a signal stops the run at once (a held one is raised on entry)."""
        self.raise_pending()
        was = self.held
        self.held = False
        try:
            yield
        finally:
            self.held = was

    def raise_pending(self) -> None:
        if self.pending is not None:
            signum, self.pending = self.pending, None
            _raise_for(signum)


def _raise_for(signum: int) -> None:
    import signal

    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated


GATE = _SignalGate()


@contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """While a run is in progress, SIGINT and SIGTERM raise, so the action is stopped and the
    run persisted; a second signal ends the process at once (state.json is only ever replaced
    whole, so the run stays resumable). Where a signal lands in a step's bookkeeping, it is
    held until that bookkeeping is done (see `_SignalGate`)."""
    import signal

    received: list[int] = []

    def handler(signum: int, frame: object) -> None:
        if received:
            os._exit(EXIT_INTERRUPTED if signum == signal.SIGINT else EXIT_TERMINATED)
        received.append(signum)
        GATE.arrived(signum)

    # Held from here: a signal while the run is set up stops it at its first step, recorded.
    GATE.held, GATE.pending = True, None
    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
        GATE.held, GATE.pending = False, None


@dataclass(frozen=True)
class RunOptions:
    """What the command line adds to a loop file."""

    base_dir: Path = field(default_factory=Path.cwd)  # where .loops/ lives and actions run
    overrides: Mapping[str, str] = field(default_factory=dict)  # --set KEY=VALUE
    max_iterations: int | None = None
    claude: tuple[str, ...] = ("claude",)
    claude_flags: tuple[str, ...] = ("--dangerously-skip-permissions",)
    model: str | None = None  # --model / LL_MODEL
    cache: bool = True
    record: Path | None = None
    replay: Path | None = None
    env: Mapping[str, str] | None = None  # None: this process's environment
    fsync: bool = False
    allow_concurrent: bool = False
    on_output: Callable[[str, bytes], None] | None = None  # --verbose streaming
    # A terminal state's output, shown once its action ends (when on_output does not show it).
    on_terminal_output: Callable[[str, bytes], None] | None = None


@dataclass
class Progress:
    """The mutable state of a run; serialised whole into state.json after every step."""

    run_id: str
    loop_file: str
    loop_sha256: str
    started_at: str
    context: dict[str, str]
    max_iterations: int
    current: str  # the state the next step runs
    status: str = "running"  # running, finished, interrupted
    step: int = 0  # steps finished
    elapsed_ms: int = 0
    cost_usd: float = 0.0
    captured: dict[str, dict[str, Any]] = field(default_factory=dict)
    prev: dict[str, Any] = field(default_factory=dict)
    convergence: dict[str, float] = field(default_factory=dict)
    prior_reasons: dict[str, str] = field(default_factory=dict)
    path: list[str] = field(default_factory=list)  # not persisted: events.jsonl has it
    on_max_used: bool = False
    attempt: int = 0  # retry attempt of the step in progress (0 between steps)
    pid: int = 0  # the ll process that owns the run
    pid_start: int | None = None  # and when it started: with the pid, it names that process
    options: dict[str, Any] = field(default_factory=dict)  # command-line options, for resume
    last_route: dict[str, Any] | None = None
    outcome: str | None = None
    exit_code: int | None = None
    error: str | None = None

    def to_dict(self, names: tuple[str, ...] | None = None) -> dict[str, Any]:
        # Shallow on purpose: this runs after every step and json.dumps walks the rest.
        # The path grows with every step, so it stays out (events.jsonl records it).
        return {name: getattr(self, name) for name in names or _PERSISTED}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Progress:
        return cls(**{k: v for k, v in data.items() if k in _PERSISTED})


_PERSISTED = tuple(name for name in Progress.__dataclass_fields__ if name != "path")
# Set when the run starts (or resumes) and never changed by a step: encoded once per run.
_FIXED = (
    "run_id",
    "loop_file",
    "loop_sha256",
    "started_at",
    "context",
    "max_iterations",
    "pid",
    "pid_start",
    "options",
)
_CHANGING = tuple(name for name in _PERSISTED if name not in _FIXED)


@dataclass(frozen=True)
class RunResult:
    run_id: str
    outcome: str
    exit_code: int
    final_state: str
    steps: int
    duration_ms: int
    path: tuple[str, ...]
    run_dir: Path
    error: str | None = None


class _Finish(Exception):
    """Internal: the run ends here with this outcome."""

    def __init__(self, outcome: str, final_state: str, error: str | None = None) -> None:
        super().__init__(outcome)
        self.outcome = outcome
        self.final_state = final_state
        self.error = error


@dataclass(frozen=True)
class _StepResult:
    verdict: Verdict
    action: actions.ActionResult | None
    reason: str | None = None  # one line, for a verdict other than success


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
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.loop = loop
        self.options = options or RunOptions()
        self.env: Mapping[str, str] = (
            self.options.env if self.options.env is not None else dict(os.environ)
        )
        # None lets actions inherit our environment without re-encoding it every step.
        self._child_env = self.options.env
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.resumed = progress is not None
        run_id = progress.run_id if progress else (run_id or new_run_id(loop.name))
        started_at = progress.started_at if progress else utc_now()
        run_root = run_dir.root if run_dir else self.options.base_dir / RUNS / run_id
        # Fixed for the whole run; context values may use them, and ${env.X}.
        self._loop_scope = {
            "name": loop.name,
            "run_id": run_id,
            "run_dir": str(run_root.resolve()),
            "dir": str(loop.dir),
            "started_at": started_at,
        }
        context = resolve_context(
            loop.context, self.options.overrides, env=self.env, loop=self._loop_scope
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
        self.redactor = Redactor(sources.values())
        # Saved values hold markers where secrets stood; a resumed run fills them in again.
        self._sealer = Sealer(sources, str(progress.options.get("secret_nonce") or ""))
        if self.resumed and self._sealer.nonce:
            for name in ("context", "captured", "prev"):
                setattr(progress, name, self._sealer.unseal(getattr(progress, name), sources))
        fixed = progress.to_dict(_FIXED)
        # Secret context values are never written down; a resumed run takes them afresh.
        fixed["context"] = {k: v for k, v in progress.context.items() if k not in loop.secrets}
        if self.redactor:
            fixed = self.redactor.obj({**fixed, "context": self._sealer.seal(fixed["context"])})
        self._state_head = state_head(fixed)
        self._lock: LoopLock | None = None
        if not self.options.allow_concurrent:
            # Before the run directory exists, so a refused start leaves nothing behind.
            self._lock = LoopLock(self.options.base_dir, loop.path)
            self._lock.acquire(progress.run_id, loop.path)
        if run_dir is None:
            run_dir = RunDir.create(self.options.base_dir, progress.run_id)
            self._write_snapshot(run_dir)
        self.run_dir = run_dir
        self._sink = JsonlSink(self.run_dir.events_path)
        self.emitter = Emitter(
            progress.run_id,
            [self._sink, *(listeners or [])],
            redact=self.redactor.obj if self.redactor else None,
        )
        self._judge: Any = None
        self._judge_spent = 0.0  # what the judge's answers in this evaluation cost so far
        self._entering: tuple[int, str] | None = None  # a state_enter not yet written
        # Recorded at the start, so a run resumed from elsewhere acts in the same place; runs
        # recorded before v2 ran their actions in the loop file's directory.
        self._cwd = Path(progress.options.get("cwd") or loop.dir)
        self._t0 = time.monotonic() - progress.elapsed_ms / 1000.0

    def _write_snapshot(self, run_dir: RunDir) -> None:
        """The file as it was at the start, so `ll resume` can tell what changed since; secret
        values (the run's, and literals the file gives its secret keys) are masked, since run
        directories get uploaded as CI artifacts. Resume compares digests of the original."""
        loop = self.loop
        try:
            if not stat.S_ISREG(os.stat(loop.path).st_mode):
                return  # a pipe (`ll run /dev/stdin`) cannot be read twice
            data = loop.path.read_bytes()
        except OSError:
            return
        redactor = Redactor([*self.redactor.values, *file_secrets(loop)])
        if redactor:
            text = data.decode("utf-8", "surrogateescape")
            data = redactor.text(text).encode("utf-8", "surrogateescape")
        (run_dir.root / "loop.yaml").write_bytes(data)

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
            GATE.pending = None

    def _run(self) -> RunResult:
        p = self.progress
        self._emit(
            "loop_start",
            loop=self.loop.name,
            file=str(self.loop.path),
            max_iterations=p.max_iterations,
            resumed=self.resumed,
        )
        if self._lock is not None and self._lock.reclaimed_from:
            owner = self._lock.reclaimed_from
            self._emit(
                "lock_reclaimed",
                previous_run_id=owner.get("run_id"),
                previous_pid=owner.get("pid"),
            )
        self._persist()
        try:
            GATE.raise_pending()  # one that came while the run was set up
            while True:
                self._next_step()
                GATE.raise_pending()  # the step is recorded: a held signal stops the run here
        except _Finish as end:
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
            self._close()

    def _next_step(self) -> None:
        p = self.progress
        self._check_deadline(p.current)
        state_name = p.current
        if p.step >= p.max_iterations:
            if self.loop.on_max_iterations is None or p.on_max_used:
                raise _Finish("max_iterations", state_name)
            p.on_max_used = True
            state_name = p.current = self.loop.on_max_iterations
        state = self.loop.states[state_name]
        step = p.step + 1
        result = self._run_state(step, state)
        p.step = step
        p.attempt = 0
        p.path.append(state.name)
        self._remember(state, result)
        if self._ends_run(state):
            self._after_terminal(state, result)
            return
        decision = router.route(self.loop, state, result.verdict.verdict)
        if decision is None:
            # The end is written once, by _finish: a state.json naming a finished step but not
            # the end would make resume run this step again as the next one.
            p.last_route = None
            outcome, message = router.stop(state, result.verdict.verdict, result.reason)
            raise _Finish(outcome, state.name, message)
        self._emit(
            "route",
            step=step,
            state=state.name,
            **{"from": state.name, "to": decision.target},
            verdict=result.verdict.verdict,
            via=decision.via,
        )
        p.last_route = {
            "from": state.name,
            "to": decision.target,
            "verdict": result.verdict.verdict,
            "via": decision.via,
        }
        p.current = decision.target
        self._persist()
        self._check_budget(state.name)
        if self.loop.backoff > 0:
            with GATE.interruptible():
                self._sleep(min(self.loop.backoff, self._remaining() or self.loop.backoff))

    def _after_terminal(self, state: State, result: _StepResult) -> None:
        """End the run at a terminal (or the `on_max_iterations` state), or maintain.

        A terminal whose action did not succeed makes the outcome `failure`, whatever its
        `outcome` says, and stops a maintained loop too. At `on_max_iterations` the outcome
        stays `max_iterations` (the limit came first) and the error names the failed action.
        """
        p = self.progress
        failed = None
        if result.verdict.verdict != "success":
            kind = "terminal state" if state.terminal else "state"
            failed = f"{kind} '{state.name}' gave verdict '{result.verdict.verdict}'"
            if result.reason:
                failed += f": {result.reason}"
        # The end is written once, by _finish (see _next_step).
        if p.on_max_used:
            raise _Finish("max_iterations", state.name, failed)
        if failed is not None:
            raise _Finish("failure", state.name, failed)
        if self.loop.maintain and state.terminal:
            p.current = state.on_maintain or self.loop.initial
            p.last_route = {
                "from": state.name,
                "to": p.current,
                "verdict": "maintain",
                "via": "maintain",
            }
            self._emit(
                "route",
                step=p.step,
                state=state.name,
                **{"from": state.name, "to": p.current},
                verdict="maintain",
                via="maintain",
            )
            self._persist()
            self._check_budget(state.name)
            return
        raise _Finish(state.outcome, state.name)

    # -- one state -----------------------------------------------------------------------

    def _run_state(self, step: int, state: State) -> _StepResult:
        # Written with the step's next event: for an action, while its process starts up.
        self._entering = (step, state.name)
        retry = state.retry
        # A resumed run continues the retry count of the step it was cut off in.
        attempt = max(self.progress.attempt, 1)
        while True:
            result = self._attempt(step, state, attempt)
            verdict = result.verdict.verdict
            if retry is None or verdict not in retry.on or attempt >= retry.max_attempts:
                return result
            delay = _retry_delay(retry, attempt)
            if retry.jitter:
                delay = self._rng.uniform(0, delay)
            remaining = self._remaining()
            if remaining is not None:
                delay = min(delay, remaining)
            self._emit(
                "retry",
                step=step,
                state=state.name,
                attempt=attempt + 1,
                delay_s=round(delay, 3),
                verdict=verdict,
            )
            attempt += 1
            self.progress.attempt = attempt
            self._persist()
            with GATE.interruptible():
                self._sleep(delay)
            self._check_deadline(state.name)

    def _attempt(self, step: int, state: State, attempt: int) -> _StepResult:
        action = None
        shown: str | None = None
        if state.action is not None:
            shell = state.action_type == "shell"
            command = self._render(state.action, step, state, attempt, shell=shell, command=True)
            # What events, the terminal and reports show: secrets masked before quoting.
            shown = self._display(state.action, command, step, state, attempt, shell=shell)
            action = self._act(step, state, attempt, command, shown)
            # Spent as soon as it is known: a step cut off later still counts its action.
            self._spend(action.cost_usd)
            if self._ends_run(state):
                self._show_terminal_output(action)
            self._capture_output(state, action)
            if action.timed_out:
                self._check_deadline(state.name)
                verdict = Verdict("timeout", {"timeout_s": self._action_timeout(state)})
                return self._evaluated(step, state, verdict, action, "timeout", shown)
            if action.error is not None:
                verdict = Verdict("error", {"error": action.error, **dict(action.details)})
                return self._evaluated(step, state, verdict, action, "action", shown)
        elif state.terminal:
            return _StepResult(Verdict("success"), None)  # nothing ran, so nothing failed
        else:
            self._capture_output(state, None)
        spec = state.evaluate
        if spec is None:
            return self._evaluated(step, state, Verdict("success"), action, "none", shown)
        judged = _uses_judge(spec)
        # The judge (a remote model, a cache file) never sees a secret value.
        mask = self.redactor.text if judged and self.redactor else _same

        def resolve(text: str) -> str:
            return mask(self._render(text, step, state, attempt, shell=False))

        inp = EvalInput(
            text=mask(action.output) if action else "",
            stderr=mask(action.stderr) if action else "",
            exit_code=action.exit_code if action else None,
            state=state.name,
            resolve=resolve,
            previous_value=self.progress.convergence.get(state.name),
            prior_reason=self.progress.prior_reasons.get(state.name),
            judge=self._judge_session() if judged else None,
            deadline=self._deadline(),
        )
        self._judge_spent = 0.0
        if judged:
            # Waiting on a model: a signal stops the step here (it is run again on resume),
            # while each answer's cost is recorded the moment it arrives (`_on_judge_cost`).
            with GATE.interruptible():
                verdict = evaluate(spec, inp)
        else:
            verdict = evaluate(spec, inp)
        result = self._evaluated(step, state, verdict, action, spec.type, shown)
        if judged:
            self._check_deadline(state.name)  # the judge gave up at the loop's deadline
        return result

    def _evaluated(
        self,
        step: int,
        state: State,
        verdict: Verdict,
        action: actions.ActionResult | None,
        kind: str,
        command: str | None = None,
    ) -> _StepResult:
        # The judge's answers were counted as they came; only the rest is added here.
        self._spend(_cost(verdict.details.get("cost_usd")) - self._judge_spent)
        self._judge_spent = 0.0
        why: dict[str, Any] = {}
        if verdict.verdict != "success":
            # Why it did not succeed, and what it printed last: the terminal, JUnit and the
            # stop message all read these two fields.
            why["reason"] = reasons.step_reason(
                verdict.verdict,
                verdict.details,
                exit_code=action.exit_code if action else None,
                stderr=action.stderr if action else "",
                stdout=action.output if action else "",
                command=command,
                action_type=state.action_type,
            )
            base = base_verdict(verdict.verdict) or verdict.verdict
            if action is not None and base in reasons.BAD_VERDICTS:
                why["tail"] = reasons.output_tail(action.output, action.stderr)
        self._emit(
            "evaluate",
            step=step,
            state=state.name,
            type=kind,
            verdict=verdict.verdict,
            details=dict(verdict.details),
            **why,
        )
        return _StepResult(verdict, action, why.get("reason"))

    def _act(
        self, step: int, state: State, attempt: int, command: str, shown: str
    ) -> actions.ActionResult:
        assert state.action_type is not None
        action_type = state.action_type
        announced: list[bool] = []

        def started(_pid: int = 0) -> None:
            # Called once the process exists, so this bookkeeping overlaps its start-up;
            # called afterwards instead when the action could not start at all.
            if announced:
                return
            announced.append(True)
            with GATE.deferred():
                self._emit(
                    "action_start",
                    step=step,
                    state=state.name,
                    action=shown,
                    action_type=action_type,
                )
                self._sink.flush()

        GATE.raise_pending()  # rather than start a process only to kill it
        timeout = self._action_timeout(state)
        remaining = self._remaining()
        if remaining is not None:
            timeout = min(timeout, remaining)
        log: str | None = self.run_dir.step_log(step, state.name, attempt)
        on_output = self.options.on_output
        streams: list[RedactingStream] = []
        log_file = None
        if self.redactor:
            # Output is masked on its way to the log and the terminal, never written raw.
            assert log is not None
            log_file = StepLog(log)
            streams.append(RedactingStream(log_file.write, self.redactor))
            if on_output is not None:
                verbose = on_output
                streams.append(RedactingStream(lambda b: verbose("stdout", b), self.redactor))
            log = None

            def on_output(_name: str, chunk: bytes) -> None:
                for stream in streams:
                    stream.write(chunk)

        try:
            if state.action_type == "slash":
                result = actions.run_slash(
                    command,
                    claude=self.options.claude,
                    flags=self.options.claude_flags,
                    cwd=self._cwd,
                    env=self._child_env,
                    timeout=timeout,
                    log_path=log,
                    on_output=on_output,
                    on_start=started,
                    interruptible=GATE.interruptible,
                )
            else:
                result = actions.run_shell(
                    command,
                    shell=self.loop.shell,
                    cwd=self._cwd,
                    env=self._child_env,
                    timeout=timeout,
                    log_path=log,
                    on_output=on_output,
                    on_start=started,
                    interruptible=GATE.interruptible,
                )
        finally:
            started()  # a no-op when the process started; the event still comes first
            for stream in streams:
                stream.flush()
            if log_file is not None:
                log_file.close()
        self._emit(
            "action_complete",
            step=step,
            state=state.name,
            exit_code=result.exit_code,
            duration_ms=result.duration_ms,
            timed_out=result.timed_out,
            output_bytes=result.output_bytes,
        )
        return result

    def _ends_run(self, state: State) -> bool:
        """A terminal, or the `on_max_iterations` state once the limit sent the run there."""
        on_max = self.progress.on_max_used and state.name == self.loop.on_max_iterations
        return state.terminal or on_max

    def _show_terminal_output(self, action: actions.ActionResult) -> None:
        show = self.options.on_terminal_output
        if show is None:
            return  # nobody asked (--quiet, --json), or --verbose streamed it already
        for name, text in (("stdout", action.output), ("stderr", action.stderr)):
            if text:
                if self.redactor:
                    text = self.redactor.text(text)
                show(name, (text if text.endswith("\n") else text + "\n").encode())

    def _capture_output(self, state: State, action: actions.ActionResult | None) -> None:
        """The output fields of `capture`, set before evaluation so the state's own evaluator
        can read them; `_remember` adds the verdict fields afterwards."""
        if state.capture:
            self.progress.captured[state.capture] = _output_record(state, action)

    def _remember(self, state: State, result: _StepResult) -> None:
        p = self.progress
        action = result.action
        details = result.verdict.details
        record = {**_output_record(state, action), "verdict": result.verdict.verdict}
        p.prev = record
        if state.capture:
            p.captured[state.capture] = {
                **record,
                "confidence": details.get("confidence"),
                "reason": details.get("reason"),
            }
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

    # -- helpers -------------------------------------------------------------------------

    def _render(
        self,
        template: str,
        step: int,
        state: State,
        attempt: int,
        *,
        shell: bool,
        mask: Callable[[str], str] | None = None,
        command: bool = False,
    ) -> str:
        text = literal_text(template)
        if text is None:
            scope = self._scope(step, state, attempt)
            if mask is not None:
                scope = {name: MaskedView(values, mask) for name, values in scope.items()}
            where = f"state '{state.name}'"
            text = render(template, scope, shell=shell, where=where, command=command)
        if command and "\0" in text:
            raise RunError(
                f"the action of state '{state.name}' holds a NUL byte, which no command can "
                "carry; remove it from the loop file"
            )
        return text

    def _display(
        self, template: str, command: str, step: int, state: State, attempt: int, *, shell: bool
    ) -> str:
        """`command` as shown: rendered again from masked values, since a quoted secret
        (`'hunter2'\\''xyz'`) no longer matches the secret itself."""
        if not self.redactor or literal_text(template) is not None:
            return self.redactor.text(command) if self.redactor else command
        try:
            shown = self._render(
                template, step, state, attempt, shell=shell, mask=self.redactor.text
            )
        except LoopError:
            shown = command
        return self.redactor.text(shown)

    def _scope(self, step: int, state: State, attempt: int) -> dict[str, Mapping[str, Any]]:
        p = self.progress
        elapsed_ms = self._elapsed_ms()
        scope: dict[str, Mapping[str, Any]] = {
            "context": p.context,
            "captured": p.captured,
            "prev": p.prev,
            "state": {"name": state.name, "iteration": step, "attempt": attempt},
            "loop": {
                **self._loop_scope,
                "elapsed_ms": elapsed_ms,
                "elapsed": _human_duration(elapsed_ms),
            },
            "env": self.env,
        }
        return scope

    def _action_timeout(self, state: State) -> float:
        return state.timeout if state.timeout is not None else self.loop.action_timeout

    def _elapsed_ms(self) -> int:
        return int((time.monotonic() - self._t0) * 1000)

    def _remaining(self) -> float | None:
        if self.loop.timeout is None:
            return None
        return max(0.0, self.loop.timeout - (time.monotonic() - self._t0))

    def _deadline(self) -> float | None:
        """time.monotonic() when the loop's `timeout` runs out; None without one."""
        return None if self.loop.timeout is None else self._t0 + self.loop.timeout

    def _check_deadline(self, state_name: str) -> None:
        remaining = self._remaining()
        if remaining is not None and remaining <= 0:
            raise _Finish("timeout", state_name, f"loop timeout of {self.loop.timeout:g}s reached")

    def _check_budget(self, state_name: str) -> None:
        budget = self.loop.max_cost_usd
        if budget is not None and self.progress.cost_usd > budget:
            raise _Finish(
                "budget",
                state_name,
                f"cost ${self.progress.cost_usd:.4f} passed max_cost_usd ${budget:g}",
            )

    def _judge_session(self) -> Any:
        if self._judge is None:
            from .evaluators.llm import JudgeSession, JudgeSettings

            o = self.options
            self._judge = JudgeSession(
                JudgeSettings(
                    model_override=o.model,
                    llm=self.loop.llm,
                    cache_dir=(o.base_dir / ".loops" / "cache") if o.cache else None,
                    record=o.record,
                    replay=o.replay,
                    claude=o.claude,
                ),
                emit=self._judge_event,
                env=self.env,
                on_cost=self._on_judge_cost,
            )
        return self._judge

    def _judge_event(self, name: str, fields: Mapping[str, Any]) -> None:
        with GATE.deferred():
            self._emit(name, step=self.progress.step + 1, state=self.progress.current, **fields)

    def _on_judge_cost(self, cost: object) -> None:
        """An answer arrived: its cost is spent even if the step is cut off before its verdict,
        so it is written down at once (a resumed run re-judges, and pays again)."""
        amount = _cost(cost)
        if amount:
            with GATE.deferred():
                self._judge_spent += amount
                self._spend(amount)
                self._persist()

    def _spend(self, cost: float) -> None:
        if cost > 0:
            self.progress.cost_usd += cost

    def _emit(
        self, name: str, *, step: int | None = None, state: str | None = None, **fields: Any
    ) -> Event:
        if self._entering is not None:
            entering, self._entering = self._entering, None
            self.emitter.emit("state_enter", None, step=entering[0], state=entering[1])
        return self.emitter.emit(name, fields, step=step, state=state)

    def _persist(self) -> None:
        with GATE.deferred():
            self._sink.flush()
            self.progress.elapsed_ms = self._elapsed_ms()
            data = self.progress.to_dict(_CHANGING)
            if self.redactor:
                # captured values and `prev` keep named markers, which a resumed run fills in
                sealed = {name: self._sealer.seal(data[name]) for name in ("captured", "prev")}
                data = self.redactor.obj(data) | sealed
            self.run_dir.write_state(data, fsync=self.options.fsync, head=self._state_head)

    def _finish(
        self, outcome: str, final_state: str, error: str | None, exit_code: int | None = None
    ) -> RunResult:
        p = self.progress
        code = exit_code if exit_code is not None else OUTCOME_EXIT[outcome]
        p.status = "interrupted" if outcome == "interrupted" else "finished"
        p.outcome, p.exit_code, p.error = outcome, code, error
        duration_ms = self._elapsed_ms()
        self._emit(
            "loop_complete",
            final_state=final_state,
            outcome=outcome,
            exit_code=code,
            steps=p.step,
            duration_ms=duration_ms,
            error=error,
            cost_usd=round(p.cost_usd, 6),
        )
        # After the event, so whoever sees the final state also finds the event in the log.
        self._persist()
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

    def _close(self) -> None:
        if self._judge is not None:
            self._judge.close()
            self._judge = None
        actions.kill_orphans()  # nothing a step started outlives the run
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        self._sink.close()
        self.run_dir.close()


def file_secrets(loop: Loop) -> list[str]:
    """The literal values the loop file itself gives its secret keys."""
    return [str(loop.context[k]) for k in loop.secrets if k in loop.context]


def _output_record(state: State, action: actions.ActionResult | None) -> dict[str, Any]:
    # Trailing newlines are dropped, as shell command substitution does, so that
    # `${captured.dir.output}/file` works after an action that printed a path.
    return {
        "output": action.output.rstrip("\n") if action else "",
        "stderr": action.stderr.rstrip("\n") if action else "",
        "exit_code": action.exit_code if action else None,
        "duration_ms": action.duration_ms if action else 0,
        "state": state.name,
    }


def _cost(value: object) -> float:
    """A cost in USD; anything not a finite, non-negative number counts as unknown (0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if math.isfinite(value) and value > 0 else 0.0


def _retry_delay(retry: Retry, attempt: int) -> float:
    """interval * backoff_rate ** (attempt - 1), at most max_delay, without float overflow."""
    top, first, rate = float(retry.max_delay), float(retry.interval), float(retry.backoff_rate)
    if first <= 0 or first >= top or rate <= 1:
        return min(first, top)
    # The power passes max_delay after this many steps; before that it cannot overflow.
    if attempt - 1 >= math.log(top / first) / math.log(rate):
        return top
    return min(top, first * rate ** (attempt - 1))


def _os_error(exc: OSError) -> str:
    return cannot("write", os.fsdecode(exc.filename), exc) if exc.filename else str(exc)


def _same(text: str) -> str:
    return text


def _uses_judge(spec: Any) -> bool:
    if spec.type == "llm_structured":
        return True
    return any(_uses_judge(sub) for sub in spec.of)


def _human_duration(ms: int) -> str:
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m {seconds}s"
