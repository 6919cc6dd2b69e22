"""One state's step: render -> act -> evaluate, with retries; what a step gives the runner.

The action layer is a seam (`ActionLayer`): the default runs real processes through `actions`,
a simulation or a benchmark passes its own. The step writes its events through the session
and never routes: the runner decides where the run goes next.

A little over 400 lines: `StepPipeline` is one class, a step from render to verdict with its
retries, and its small helpers (`output_record`, `retry_delay`) are imported from here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from little_loops import actions
from little_loops.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_RUN_ERROR,
    EXIT_SUSPENDED,
    EXIT_TERMINATED,
    LoopError,
    RecordError,
)
from little_loops.evaluators import (
    EvalInput,
    evaluate,
)
from little_loops.model import reasons
from little_loops.model.details import Details, Json
from little_loops.model.loop import (
    Evaluate,
    Loop,
    Retry,
    State,
    Verdict,
    base_verdict,
)
from little_loops.model.progress import (
    Progress,
    RunOptions,
)
from little_loops.model.question import Suspended
from little_loops.model.records import record, replace
from little_loops.record import events as ev
from little_loops.record.secrets import RedactingStream
from little_loops.record.store import LogSegment, cannot
from little_loops.run.action_layer import ActionLayer
from little_loops.run.gate import GATE, Terminated
from little_loops.run.session import RunSession
from little_loops.run.step_scope import StepScope
from little_loops.templates.interpolate import program_keys

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    import random
    from typing import Any

    from little_loops.evaluators.llm import JudgeSession


@record(frozen=True)
class StepResult:
    verdict: Verdict
    action: actions.ActionResult | None
    reason: str | None = None  # one line, for a verdict other than success
    record: dict[str, Json] | None = None  # the output fields of `prev` and `captured`


class Finish(Exception):
    """The run ends here with this outcome."""

    def __init__(self, outcome: str, final_state: str, error: str | None = None) -> None:
        super().__init__(outcome)
        self.outcome = outcome
        self.final_state = final_state
        self.error = error


class StepPipeline:
    """Runs one state of a loop: its action, its evaluator, its retries."""

    def __init__(
        self,
        loop: Loop,
        options: RunOptions,
        progress: Progress,
        session: RunSession,
        *,
        env: Mapping[str, str],
        scope: Mapping[str, object],
        action_layer: ActionLayer,
        rng: random.Random | None,
        root: bool = True,
    ) -> None:
        self.loop = loop
        self.root = root  # the tree's root run (not a child's, nor a fork branch's)
        self.options = options
        self.progress = progress
        self.session = session
        self.redactor = session.redactor
        self.env = env
        # None lets actions inherit our environment without re-encoding it every step.
        self._child_env = options.env
        self.templates = StepScope(
            progress,
            self.redactor,
            loop_scope=scope,
            env=env,
            elapsed_ms=session.elapsed_ms,
            program=program_keys(loop.context, options.overrides, options.program_context),
        )
        self.actions = action_layer
        self._rng = rng
        # Recorded at the start, so a run resumed from elsewhere acts in the same place; runs
        # recorded before v2 ran their actions in the loop file's directory.
        self._cwd = Path(progress.options.cwd or loop.dir)
        self._judge: JudgeSession | None = None
        self._judge_spent = 0.0  # what the judge's answers in this evaluation cost so far

    def run(self, step: int, state: State) -> StepResult:
        """The step's attempts, until one needs no retry; each retry is persisted first."""
        # A resumed run continues the retry count of the step it was cut off in.
        attempt = max(self.progress.attempt, 1)
        while True:
            result = self._attempt(step, state, attempt)
            if not self.wait_to_retry(step, state, attempt, result.verdict.verdict):
                return result
            attempt += 1

    def wait_to_retry(
        self, step: int, state: State, attempt: int, verdict: str, *, jitter: bool = True
    ) -> bool:
        """Whether `verdict` on `attempt` calls for another attempt; if so, the retry is
        recorded (its event, and the attempt count persisted so a resume continues it) and
        its backoff waited out, within the loop's deadline."""
        retry = state.retry
        if retry is None or verdict not in retry.on or attempt >= retry.max_attempts:
            return False
        delay = retry_delay(retry, attempt)
        if jitter and retry.jitter:
            if self._rng is None:  # made at the first retry: seeding it costs every run
                import random

                self._rng = random.Random()
            delay = self._rng.uniform(0, delay)
        remaining = self.session.remaining(self.loop.timeout)
        if remaining is not None:
            delay = min(delay, remaining)
        self.session.emit(
            ev.Retry(
                step=step,
                state=state.name,
                attempt=attempt + 1,
                delay_s=round(delay, 3),
                verdict=verdict,
            )
        )
        self.progress.attempt = attempt + 1
        self.session.persist(self.progress)
        with GATE.interruptible():
            self.session.clock.sleep(delay)
        self.check_deadline(state.name)
        return True

    def _attempt(self, step: int, state: State, attempt: int) -> StepResult:
        action = None
        shown: str | None = None
        record = None
        if state.action is not None:
            shell = state.action_type == "shell"
            command = self.templates.render(
                state.action, step, state, attempt, shell=shell, command=True
            )
            # What events, the terminal and reports show: secrets masked before quoting.
            shown = self.templates.display(state.action, command, step, state, attempt, shell=shell)
            action = self._act(step, state, attempt, command, shown)
            # Spent as soon as it is known: a step cut off later still counts its action.
            self.spend(action.cost_usd)
            if self.ends_run(state):
                self._show_terminal_output(action)
            record = output_record(state, action)
            if state.capture:  # its own evaluator may read the output fields
                self.progress.captured[state.capture] = record
            if action.timed_out:
                self.check_deadline(state.name)
                verdict = Verdict("timeout", Details(timeout_s=self._action_timeout(state)))
                return self._evaluated(step, state, verdict, action, "timeout", shown, record)
            if action.error is not None:
                verdict = Verdict("error", Details({"error": action.error, **action.details}))
                return self._evaluated(step, state, verdict, action, "action", shown, record)
            forced = action.details.simulated_verdict
            if forced is not None:  # a simulation's answer (simulate.py) stands as given
                verdict = Verdict(forced, action.details.without("simulated_verdict"))
                return self._evaluated(step, state, verdict, action, "simulated", shown, record)
        elif state.terminal:
            return StepResult(Verdict("success"), None)  # nothing ran, so nothing failed
        else:
            record = output_record(state, None)
            if state.capture:
                self.progress.captured[state.capture] = record
        spec = state.evaluate
        if spec is None:
            verdict = Verdict("success")
            return self._evaluated(step, state, verdict, action, "none", shown, record)
        judged = _uses_judge(spec)
        # The judge (a remote model, a cache file) never sees a secret value.
        mask = self.redactor.text if judged and self.redactor else _same

        def resolve(text: str) -> str:
            return mask(self.templates.render(text, step, state, attempt, shell=False))

        inp = EvalInput(
            text=mask(action.output) if action else "",
            stderr=mask(action.stderr) if action else "",
            exit_code=action.exit_code if action else None,
            state=state.name,
            resolve=resolve,
            previous_value=self.progress.convergence.get(state.name),
            prior_reason=self.progress.prior_reasons.get(state.name),
            judge=self._judge_session() if judged else None,
            deadline=self.session.deadline(self.loop.timeout),
            program=self.templates.program,
        )
        self._judge_spent = 0.0
        if judged:
            # Waiting on a model: a signal stops the step here (it is run again on resume),
            # while each answer's cost is recorded the moment it arrives (`_on_judge_cost`).
            with GATE.interruptible():
                verdict = evaluate(spec, inp)
        else:
            verdict = evaluate(spec, inp)
        result = self._evaluated(step, state, verdict, action, spec.type, shown, record)
        if judged:
            self.check_deadline(state.name)  # the judge gave up at the loop's deadline
        return result

    def _evaluated(
        self,
        step: int,
        state: State,
        verdict: Verdict,
        action: actions.ActionResult | None,
        kind: str,
        command: str | None,
        record: dict[str, Json] | None,
    ) -> StepResult:
        denied = action.details.get("permission_denials") if action is not None else None
        if denied and "permission_denials" not in verdict.details:
            # Tools the claude CLI refused to run: kept whatever the verdict, for the author.
            verdict = Verdict(verdict.verdict, verdict.details.with_(permission_denials=denied))
        # The judge's answers were counted as they came; only the rest is added here.
        self.spend(verdict.details.cost_usd - self._judge_spent)
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
                why["tail"] = tuple(reasons.output_tail(action.output, action.stderr))
        self.session.emit_fields(
            ev.Evaluate,
            {
                "step": step,
                "state": state.name,
                "type": kind,
                "verdict": verdict.verdict,
                "details": verdict.details,
                "reason": why.get("reason"),
                "tail": why.get("tail"),
            },
        )
        return StepResult(verdict, action, why.get("reason"), record)

    def _act(
        self, step: int, state: State, attempt: int, command: str, shown: str
    ) -> actions.ActionResult:
        assert state.action_type is not None
        GATE.raise_pending()  # rather than start a process only to kill it
        # The attempt's output goes to the run's one log; `log_at` says where it begins.
        log = self.session.run_dir.log.attempt()
        self.session.emit_fields(
            ev.ActionStart,
            {
                "step": step,
                "state": state.name,
                "action": shown,
                "action_type": state.action_type,
                "log_at": log.start,
            },
        )
        self.session.flush()  # `ll logs -f` shows the step while it runs
        timeout = self._action_timeout(state)
        remaining = self.session.remaining(self.loop.timeout)
        if remaining is not None:
            timeout = min(timeout, remaining)
        on_output = self.options.on_output
        streams: list[RedactingStream] = []
        log_sink: LogSegment | None = log
        if self.redactor.masks:
            # Output is masked on its way to the log and the terminal, never written raw.
            streams.append(RedactingStream(log.write, self.redactor))
            if on_output is not None:
                verbose = on_output
                streams.append(RedactingStream(lambda b: verbose("stdout", b), self.redactor))
            log_sink = None

            def on_output(_name: str, chunk: bytes) -> None:
                for stream in streams:
                    stream.write(chunk)

        try:
            result = self.actions.run(
                actions.ActionRequest(
                    kind="slash" if state.action_type == "slash" else "shell",
                    text=command,
                    cwd=self._cwd,
                    shell=self.loop.shell,
                    claude=self.options.claude,
                    flags=self.options.claude_flags,
                    env=self._child_env,
                    timeout=timeout,
                    log_path=log_sink,
                    on_output=on_output,
                    interruptible=GATE.interruptible,
                )
            )
        finally:
            for stream in streams:
                stream.flush()
        self.session.emit_fields(
            ev.ActionComplete,
            {
                "step": step,
                "state": state.name,
                "exit_code": result.exit_code,
                "duration_ms": result.duration_ms,
                "timed_out": result.timed_out,
                "output_bytes": result.output_bytes,
            },
        )
        return result

    def ends_run(self, state: State) -> bool:
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

    # -- limits and cost -------------------------------------------------------------------

    def _action_timeout(self, state: State) -> float:
        return state.timeout if state.timeout is not None else self.loop.action_timeout

    def check_deadline(self, state_name: str) -> None:
        remaining = self.session.remaining(self.loop.timeout)
        if remaining is not None and remaining <= 0:
            raise Finish("timeout", state_name, f"loop timeout of {self.loop.timeout:g}s reached")

    def spend(self, cost: float) -> None:
        if cost > 0:
            self.progress.cost_usd += cost

    # -- the judge -------------------------------------------------------------------------

    def _judge_session(self) -> JudgeSession:
        if self._judge is None:
            from little_loops.evaluators.llm import (
                JudgeSession,
                JudgeSettings,
            )

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

    def _judge_event(self, event: ev.RunEvent) -> None:
        with GATE.deferred():
            p = self.progress
            self.session.emit(replace(event, step=p.step + 1, state=p.current))

    def _on_judge_cost(self, cost: object) -> None:
        """An answer arrived: its cost is spent even if the step is cut off before its verdict,
        so it is written down at once (a resumed run re-judges, and pays again)."""
        amount = _cost(cost)
        if amount:
            with GATE.deferred():
                self._judge_spent += amount
                self.spend(amount)
                self.session.persist(self.progress)

    def close(self) -> None:
        judged = self._judge is not None
        if self._judge is not None:
            self._judge.close()
            self._judge = None
        # Nothing a step started outlives the run. Each action's end swept its escaped
        # descendants already (actions/process.py); what is left is what a judge's CLI left,
        # so a child run (a branch of thousands, a sub-loop level) that judged nothing lists
        # no /proc/self/task; the root sweeps once more at its end whatever ran.
        if judged or self.root:
            self.actions.kill_orphans()


def run_end(
    exc: BaseException, p: Progress, session: RunSession
) -> tuple[str, str, str | None, int | None] | None:
    """How a run (or an action branch) ends when `exc` stops it: the outcome, final state,
    error and exit code its `_finish` records; None for what is no end of a run (raise it)."""
    if isinstance(exc, Finish):
        return exc.outcome, exc.final_state, exc.error, None
    if isinstance(exc, Suspended):  # a question (here, in a child or a fork's branch) waits
        p.pending = list(exc.pending)  # every question the tree below waits on
        shown = ", ".join(q.id for q in p.pending)
        return "suspended", p.current, f"waiting for an answer to {shown}", EXIT_SUSPENDED
    if isinstance(exc, RecordError):  # a file of the run cannot be read: repaired, it resumes
        return "interrupted", p.current, exc.message, EXIT_RUN_ERROR
    if isinstance(exc, LoopError):
        return "error", p.current, exc.message, None
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", p.current, "interrupted (SIGINT)", EXIT_INTERRUPTED
    if isinstance(exc, Terminated):
        return "interrupted", p.current, "terminated (SIGTERM)", EXIT_TERMINATED
    if isinstance(exc, OSError):  # the machine said no (a full disk): freed, the run resumes
        return "interrupted", p.current, _os_error(exc), EXIT_RUN_ERROR
    if isinstance(exc, Exception):  # a bug in ll: recorded as ended in error, never "running"
        from little_loops.crash import one_line

        report = session.crash_report(exc)
        message = f"internal error (a bug in ll): {one_line(exc)}"
        if report is not None:
            message += f"; crash report: {report}"
        return "error", p.current, message, EXIT_INTERNAL
    return None


def _os_error(exc: OSError) -> str:
    return cannot("write", os.fsdecode(exc.filename), exc) if exc.filename else str(exc)


def remember(p: Progress, session: RunSession, step: int, state: State, result: StepResult) -> None:
    """A finished step in the progress: what `prev` and `captured` show from now on, its
    record kept (`outputs.dat`), a convergence value and a judge's real reason noted. A run's
    step and an action branch's one step both end here."""
    p.step = step
    p.attempt = 0
    p.path.append(state.name)
    details = result.verdict.details
    fields = result.record or output_record(state, result.action)
    record = {**fields, "verdict": result.verdict.verdict}
    p.prev = record
    kept = {**record, "confidence": details.confidence, "reason": details.reason}
    if state.capture:
        p.captured[state.capture] = kept
    session.keep_outputs(kept, state.capture, output_place(kept, result.action))
    value = details.value
    converging = state.evaluate is not None and state.evaluate.type == "convergence"
    if converging and value is not None:
        p.convergence[state.name] = value
    # Only a real judge verdict's reason is shown to the judge again, never an error text.
    reason = details.reason
    judged = state.evaluate is not None and state.evaluate.type == "llm_structured"
    real = details.confident is not None and details.error is None  # not an error/timeout
    if judged and real and not details.fail_open and reason:
        p.prior_reasons[state.name] = reason


def output_record(state: State, action: actions.ActionResult | None) -> dict[str, Json]:
    # Trailing newlines are dropped, as shell command substitution does, so that
    # `${captured.dir.output}/file` works after an action that printed a path.
    record: dict[str, Json] = {
        "output": action.output.rstrip("\n") if action else "",
        "stderr": action.stderr.rstrip("\n") if action else "",
        "exit_code": action.exit_code if action else None,
        "duration_ms": action.duration_ms if action else 0,
        "state": state.name,
    }
    if action is not None and action.details.output_cut:
        record["output_cut"] = True  # `output` holds only the last 1 MiB of stdout
    return record


def output_place(
    record: Mapping[str, Json], action: actions.ActionResult | None
) -> tuple[int, int] | None:
    """Where `record`'s output lies in the run's log: the action's stdout as it was read,
    trailing newlines dropped (`output_record`); None when it is anything else."""
    if action is None or action.output_at is None:
        return None
    output = record.get("output")
    if not isinstance(output, str) or not action.output.startswith(output):
        return None
    dropped = action.output[len(output) :]
    if dropped.strip("\n"):
        return None
    offset, size = action.output_at
    return offset, size - len(dropped)  # a newline is one byte


def retry_delay(retry: Retry, attempt: int) -> float:
    """interval * backoff_rate ** (attempt - 1), at most max_delay, without float overflow."""
    top, first, rate = float(retry.max_delay), float(retry.interval), float(retry.backoff_rate)
    if first <= 0 or first >= top or rate <= 1:
        return min(first, top)
    # The power passes max_delay after this many steps; before that it cannot overflow.
    if attempt - 1 >= math.log(top / first) / math.log(rate):
        return top
    return min(top, first * rate ** (attempt - 1))


def _cost(value: object) -> float:
    """A cost in USD; anything not a finite, non-negative number counts as unknown (0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if math.isfinite(value) and value > 0 else 0.0


def _same(text: str) -> str:
    return text


def _uses_judge(spec: Evaluate) -> bool:
    if spec.type == "llm_structured":
        return True
    return any(_uses_judge(sub) for sub in spec.of)
