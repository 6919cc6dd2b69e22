"""The `ask` state as the runner runs it (`AskCalls`, mixed into `Runner`): ask, find an answer,
or suspend the run.

An answer comes, in this order, from a file under the root run's `answers/` (`ll answer`,
`ll resume --answer`), a preset (`ll run --answer`), the simulation's script, or the terminal
prompt the command line hands in (`RunOptions.prompt`). With none, the question stays pending
and the run suspends (`Suspended`; exit 6). A question past its `expires_at` completes with
verdict `timeout`. Time is the run's clock, so a simulation can move past a deadline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from little_loops.errors import (
    EXIT_SUSPENDED,
    LoopError,
)
from little_loops.model.loop import (
    Loop,
    State,
    Verdict,
)
from little_loops.model.progress import (
    Progress,
    RunOptions,
    RunResult,
)
from little_loops.record import events as ev
from little_loops.record import questions as qs
from little_loops.record.questions import (
    Answer,
    Expired,
    Question,
    Suspended,
)
from little_loops.record.store import RunDir
from little_loops.run.gate import GATE
from little_loops.run.session import RunSession
from little_loops.run.steps import (
    StepPipeline,
    StepResult,
    output_record,
)
from little_loops.run.subloop import Parent


class AskCalls:
    """The run's side of an `ask` state; mixed into `Runner`, whose attributes it reads."""

    loop: Loop
    options: RunOptions
    parent: Parent | None
    progress: Progress
    session: RunSession
    steps: StepPipeline
    run_dir: RunDir
    env: Any
    _epoch: tuple[float, float] | None = None  # (wall epoch, monotonic) at the first look

    def _now(self) -> float:
        """Wall-clock seconds on the run's clock: a simulated clock moves it on too."""
        clock = self.session.clock
        if self._epoch is None:
            self._epoch = (qs.epoch(clock.wall()) or 0.0, clock.monotonic())
        wall, mono = self._epoch
        return wall + (clock.monotonic() - mono)

    def _call(self, step: int, state: State) -> StepResult:
        raise NotImplementedError  # `ChildCalls._call`, beside this in `Runner`

    def _fork(self, step: int, state: State) -> StepResult:
        raise NotImplementedError  # `ForkCalls._fork`, beside this in `Runner`

    def _dispatch(self, step: int, state: State) -> StepResult:
        """The step of `state`: its action's, its child run's (`loop:`), its branches' (a
        fork), or its question's."""
        if state.is_loop or state.is_fork:
            result = self._fork(step, state) if state.is_fork else self._call(step, state)
            # The children's questions were answered (or dropped with them): none is ours now.
            inside = "/".join((*(self.parent.path if self.parent else ()), state.name)) + "/"
            pending = self.progress.pending
            self.progress.pending = [q for q in pending if not q.id.startswith(inside)]
            return result
        if state.is_ask:
            return self._ask(step, state)
        return self.steps.run(step, state)

    def _ask(self, step: int, state: State) -> StepResult:
        assert state.ask is not None
        p = self.progress
        path = (*(self.parent.path if self.parent else ()), state.name)
        qid = qs.question_id(path, step)
        question = next((q for q in p.pending if q.id == qid), None)
        if question is None:  # asked now (a resumed run asked it before: not asked again)
            prompt = self.steps.templates.render(state.ask, step, state, 1, shell=False)
            question = Question.new(
                qid, state.name, step, prompt, state.choices, self._now(), state.timeout
            )
            p.pending.append(question)
            self.session.emit(
                ev.Ask(
                    step=step,
                    state=state.name,
                    question_id=qid,
                    prompt=self._redacted(prompt),
                    choices=state.choices,
                    asked_at=question.asked_at,
                    expires_at=question.expires_at,
                )
            )
            self.session.persist(p)
        answer = self._find_answer(question, state.name)
        reply: Answer | Expired | None = answer
        if reply is None and not question.expired(self._now()):
            prompt_hook = self.options.prompt
            if prompt_hook is not None:
                root = qs.tree_root(self.run_dir.root)
                self.session.flush()  # the question is in the log before anyone reads it
                with GATE.interruptible():  # Ctrl-C at the prompt stops the run (resumable)
                    reply = prompt_hook(question, lambda: self._poll(question, root))
        if reply is None and not question.expired(self._now()):
            raise Suspended([question])
        return self._answered(step, state, question, reply if isinstance(reply, Answer) else None)

    def _redacted(self, text: str) -> str:
        redactor = self.session.redactor
        return redactor.text(text) if redactor else text

    def _find_answer(self, question: Question, state_name: str) -> Answer | None:
        qid = question.id
        root = qs.tree_root(self.run_dir.root)
        found = self._take(root, question)
        if found is not None:
            # Answered before it expired (the command line refuses later ones).
            at, expires = qs.epoch(found.at), question.deadline
            if expires is None or at is None or at < expires:
                return found
        for pattern, value in self.options.answers.items():
            if qs.matches(pattern, qid):
                by = qs.default_by(self.env)
                return qs.answer_record(qid, value, note=None, by=by, via="preset", now=self._now())
        simulated = self.steps.actions.stub_answer(state_name)
        if simulated is not None:
            self.session.clock.sleep(float(simulated.get("duration_ms") or 0) / 1000.0)
            if question.expired(self._now()):
                return None
            value = str(simulated.get("verdict") or "success")
            if value == "timeout":
                return None  # the script says nobody answered in time
            note = simulated.get("note") or None
            return qs.answer_record(
                qid, value, note=note, by="simulation", via="simulate", now=self._now()
            )
        return None

    def _poll(self, question: Question, root: Path) -> Answer | Expired | None:
        """For the prompt while it waits: an answer `ll answer` recorded, or the expiry."""
        if question.expired(self._now()):
            return Expired(question.id, question.expires_at)
        if qs.waiting_answer(root, question.id):
            return self._take(root, question)
        return None

    def _take(self, root: Path, question: Question) -> Answer | None:
        """An answer recorded for `question`; its used copy written by this run's session."""
        session = self.session
        return qs.take_answer(root, question, keep=session.write_record, read=session.read_record)

    def _answered(
        self, step: int, state: State, question: Question, answer: Answer | None
    ) -> StepResult:
        p = self.progress
        qid = question.id
        if answer is None:  # expired
            verdict = Verdict("timeout", {"question_id": qid})
            reason = f"question {qid} expired at {question.expires_at} without an answer"
            record = {**output_record(state, None), "by": None}
        else:
            value = answer.answer
            if state.choices and value not in state.choices:
                raise LoopError(
                    f"'{value}' is not an answer to {qid}: choose one of {', '.join(state.choices)}"
                )
            note, by = answer.note, answer.by
            self.session.emit(
                ev.Answer(
                    step=step,
                    state=state.name,
                    question_id=qid,
                    answer=value,
                    note=note,
                    by=by,
                    via=answer.via or "answer",
                )
            )
            verdict = Verdict(value if state.choices else "success", {"question_id": qid, "by": by})
            reason = None
            text = note if state.choices else value
            record = {**output_record(state, None), "output": text or "", "by": by}
        self.session.emit(
            ev.Evaluate(
                step=step,
                state=state.name,
                type="ask",
                verdict=verdict.verdict,
                details=dict(verdict.details),
                reason=reason,
            )
        )
        p.pending = [q for q in p.pending if q.id != qid]
        if state.capture:
            p.captured[state.capture] = record
        return StepResult(verdict, None, reason, record)

    def _finish(
        self, outcome: str, final_state: str, error: str | None, exit_code: int | None = None
    ) -> RunResult:
        raise NotImplementedError  # `Runner._finish`: every end goes through it

    def _suspend(self, pending: list[Question]) -> RunResult:
        """Nothing can go on without an answer: the run ends `suspended` (exit 6), holding
        every question the tree below waits on, and no other."""
        p = self.progress
        p.pending = list(pending)
        shown = ", ".join(q.id for q in pending)
        return self._finish(
            "suspended", p.current, f"waiting for an answer to {shown}", EXIT_SUSPENDED
        )
