"""The `ask` step kind: ask, find an answer, or suspend the run.

An answer comes, in this order, from a file under the root run's `answers/` (`ll answer`,
`ll resume --answer`), a preset (`ll run --answer`), the simulation's script, or the terminal
prompt the command line hands in (`RunOptions.prompt`). With none, the question stays pending
and the run suspends (`Suspended`, which ends the run through `Runner._finish` like any other
end; exit 6). A question past its `expires_at` completes with verdict `timeout`. Time is the
run's clock (`RunContext.now`), so a simulation can move past a deadline.
"""

from __future__ import annotations

from pathlib import Path

from little_loops.errors import LoopError
from little_loops.model.details import Details
from little_loops.model.loop import (
    State,
    Verdict,
)
from little_loops.record import events as ev
from little_loops.record import questions as qs
from little_loops.record.questions import (
    Answer,
    Expired,
    Question,
    Suspended,
)
from little_loops.run.action_layer import AnswerRequest, stub
from little_loops.run.context import RunContext
from little_loops.run.gate import GATE
from little_loops.run.steps import (
    StepResult,
    output_record,
)


class AskStep:
    """An `ask` state: its question asked once (persisted as pending), then answered or not."""

    def run(self, ctx: RunContext, step: int, state: State) -> StepResult:
        assert state.ask is not None
        p = ctx.progress
        qid = qs.question_id((*ctx.path, state.name), step)
        question = next((q for q in p.pending if q.id == qid), None)
        if question is None:  # asked now (a resumed run asked it before: not asked again)
            prompt = ctx.steps.templates.render(state.ask, step, state, 1, shell=False)
            question = Question.new(
                qid, state.name, step, prompt, state.choices, ctx.now(), state.timeout
            )
            p.pending.append(question)
            redactor = ctx.session.redactor
            ctx.session.emit(
                ev.Ask(
                    step=step,
                    state=state.name,
                    question_id=qid,
                    prompt=redactor.text(prompt) if redactor else prompt,
                    choices=state.choices,
                    asked_at=question.asked_at,
                    expires_at=question.expires_at,
                )
            )
            ctx.session.persist(p)
        reply: Answer | Expired | None = _find_answer(ctx, question, state.name)
        if reply is None and not question.expired(ctx.now()):
            prompt_hook = ctx.options.prompt
            if prompt_hook is not None:
                root = qs.tree_root(ctx.run_dir.root)
                ctx.session.flush()  # the question is in the log before anyone reads it
                with GATE.interruptible():  # Ctrl-C at the prompt stops the run (resumable)
                    reply = prompt_hook(question, lambda: _poll(ctx, question, root))
        if reply is None and not question.expired(ctx.now()):
            raise Suspended([question])
        answer = reply if isinstance(reply, Answer) else None
        return _answered(ctx, step, state, question, answer)


def _find_answer(ctx: RunContext, question: Question, state_name: str) -> Answer | None:
    qid = question.id
    root = qs.tree_root(ctx.run_dir.root)
    found = _take(ctx, root, question)
    if found is not None:
        # Answered before it expired (the command line refuses later ones).
        at, expires = qs.epoch(found.at), question.deadline
        if expires is None or at is None or at < expires:
            return found
    for pattern, value in ctx.options.answers.items():
        if qs.matches(pattern, qid):
            by = qs.default_by(ctx.env)
            return qs.answer_record(qid, value, note=None, by=by, via="preset", now=ctx.now())
    simulated = stub(ctx.steps.actions, AnswerRequest(state_name))
    if simulated is not None:
        ctx.session.clock.sleep(float(simulated.duration_ms or 0) / 1000.0)
        if question.expired(ctx.now()):
            return None
        value = simulated.verdict or "success"
        if value == "timeout":
            return None  # the script says nobody answered in time
        note = simulated.note or None
        return qs.answer_record(
            qid, value, note=note, by="simulation", via="simulate", now=ctx.now()
        )
    return None


def _poll(ctx: RunContext, question: Question, root: Path) -> Answer | Expired | None:
    """For the prompt while it waits: an answer `ll answer` recorded, or the expiry."""
    if question.expired(ctx.now()):
        return Expired(question.id, question.expires_at)
    if qs.waiting_answer(root, question.id):
        return _take(ctx, root, question)
    return None


def _take(ctx: RunContext, root: Path, question: Question) -> Answer | None:
    """An answer recorded for `question`; its used copy written by this run's session."""
    session = ctx.session
    return qs.take_answer(root, question, keep=session.write_record, read=session.read_record)


def _answered(
    ctx: RunContext,
    step: int,
    state: State,
    question: Question,
    answer: Answer | None,
) -> StepResult:
    p = ctx.progress
    qid = question.id
    if answer is None:  # expired
        verdict = Verdict("timeout", Details(question_id=qid))
        reason = f"question {qid} expired at {question.expires_at} without an answer"
        record = {**output_record(state, None), "by": None}
    else:
        value = answer.answer
        if state.choices and value not in state.choices:
            raise LoopError(
                f"'{value}' is not an answer to {qid}: choose one of {', '.join(state.choices)}"
            )
        note, by = answer.note, answer.by
        ctx.session.emit(
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
        verdict = Verdict(value if state.choices else "success", Details(question_id=qid, by=by))
        reason = None
        text = note if state.choices else value
        record = {**output_record(state, None), "output": text or "", "by": by}
    ctx.session.emit(
        ev.Evaluate(
            step=step,
            state=state.name,
            type="ask",
            verdict=verdict.verdict,
            details=verdict.details,
            reason=reason,
        )
    )
    p.pending = [q for q in p.pending if q.id != qid]
    if state.capture:
        p.captured[state.capture] = record
    return StepResult(verdict, None, reason, record)
