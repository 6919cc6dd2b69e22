"""A fork's scheduling, in the thread of the run that forks: branches started in item order
(at most `max_concurrency` at once) each in a thread of its own, their ends recorded as they
come, the rest stopped once a `fail_fast` join is decided, and every branch stopped and
waited for when a signal (or, nested, its own stop) ends the fork.

A branch's end becomes its record, which a resumed fork reads back instead of running the
branch again: an action branch's is one entry of the fork's journal (`branches.jsonl`: its
record, state and events, appended whole when it ends), a `loop:` branch's `result.json`
beside its run's `state.json` (as every branch's was before; such runs are still read).
"""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from little_loops.errors import (
    LoopError,
    RecordError,
)
from little_loops.model.fork import (
    CANCELLED,
    OUTPUT_CHARS,
    BranchEnd,
    BranchRecord,
    Item,
    concurrency,
    decide,
)
from little_loops.model.loop import (
    Join,
    State,
)
from little_loops.model.progress import RunResult
from little_loops.model.records import record
from little_loops.record import events as ev
from little_loops.record import questions as qs
from little_loops.record.events import JOURNAL, Evaluate, Event, read_journal, read_records
from little_loops.record.questions import Suspended
from little_loops.record.store import BranchDir, ForkJournal, RunDir
from little_loops.run import children
from little_loops.run.action_branch import ActionBranch
from little_loops.run.action_layer import Processes
from little_loops.run.branch_layer import (
    BranchActions,
    Scope,
    TreeSlots,
)
from little_loops.run.children import Child
from little_loops.run.context import ChildRun, RunContext
from little_loops.run.gate import (
    GATE,
    Terminated,
    raise_for,
)
from little_loops.run.subloop import ChildEnd

SUSPENDED = "suspended"  # a branch waiting for an answer (an `ask`): not an end yet
RESULT = "result.json"  # a finished branch's record, beside its state.json


@record
class Job:
    """A branch started in a thread, and what it gave back."""

    item: Item
    root: Path
    # An action branch run as its one step here (`ActionBranch`), or a child run started
    # through the run's one door (`RunContext.start_child`): a `loop:` branch, or an action
    # branch resumed from a run directory of its own.
    child: Child | ActionBranch
    scope: Scope
    action: bool  # an inline action (a one-step run) rather than a `loop:` child
    result: RunResult | None = None
    error: BaseException | None = None


# A branch made ready to start (a `Job`), or the end of one that could not start.
Prepare = Callable[[Item, "BranchActions | TreeSlots", int], "Job | BranchEnd"]


class Fork:
    """One fork's scheduling, in the thread of the run that forks."""

    def __init__(
        self,
        ctx: RunContext,
        step: int,
        state: State,
        root: Path,
        items: list[Item],
        join: Join,
        prepare: Prepare,
        present: frozenset[str] = frozenset(),
    ) -> None:
        self.ctx, self.step, self.state, self.root = ctx, step, state, root
        self.items, self.join, self.prepare = items, join, prepare
        # The names in the fork's folder when it started: a branch's folder (an older `ll`'s
        # run of it, a `loop:` branch's run, a printing action branch's log) is looked into
        # only when it is there.
        self.present = present
        base = ctx.steps.actions
        self.base: BranchActions | TreeSlots
        if isinstance(base, BranchActions):
            self.base = base
        else:  # the outermost fork: the tree's slots
            self.base = TreeSlots(base, threading.Semaphore(max(1, ctx.options.jobs)))
        raw = base.inner if isinstance(base, BranchActions) else base
        # A simulation runs branches one at a time, in item order: the same result each time.
        self.limit = concurrency(state, len(items)) if isinstance(raw, Processes) else 1
        self.done: queue.Queue[Job] = queue.Queue()
        # Branches run in worker threads, at most `limit`, each taking the next branch when
        # its last one ended: starting a thread a branch cost more than a branch's own work.
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.workers: list[threading.Thread] = []
        self.journal = ForkJournal(root, fsync=ctx.options.fsync)
        self.entries: dict[str, Event] | None = None  # the journal as the fork found it

    def run(self) -> dict[str, BranchEnd]:
        try:
            ends = self._run()
        except BaseException:
            self._dismiss(wait=False)  # a branch a second signal cut off may still run
            raise
        finally:
            self.journal.close()
        self._dismiss(wait=True)
        return ends

    def _run(self) -> dict[str, BranchEnd]:
        ends: dict[str, BranchEnd] = {}
        todo = deque(self.items)
        running: dict[str, Job] = {}
        stopping = False
        try:
            while (todo and not stopping) or running or (not stopping and self._answered(ends)):
                if not todo and not running:  # answered while the last branches worked
                    todo.extend(self._take_answered(ends))
                while todo and len(running) < self.limit and not stopping:
                    item = todo.popleft()
                    end = self._finished(item)
                    if end is None:
                        job = self.prepare(item, self.base, len(self.items))
                        if isinstance(job, Job):
                            self._start(job, len(running) + 1)
                            running[item.key] = job
                            continue
                        end = job
                    ends[item.key] = self._complete(item, end)
                    stopping = stopping or self._decided(ends)
                if not running:
                    continue
                self.ctx.session.flush()  # `ll logs -f` shows the branches started and ended
                ended = self._wait(None if stopping else ends)
                if ended is None:  # `ll answer` answered a waiting branch: it goes on now
                    todo.extendleft(reversed(self._take_answered(ends)))
                    continue
                del running[ended.item.key]
                ends[ended.item.key] = self._complete(ended.item, self._end(ended))
                if not stopping and self._decided(ends):
                    stopping = True
                    for other in running.values():
                        other.scope.stop()
            # In item order, whichever branch asked first: the questions are listed this way.
            waiting = [
                i.key for i in self.items if (e := ends.get(i.key)) and e.verdict == SUSPENDED
            ]
            if waiting and decide(self.join, len(self.items), _settled(ends)) is None:
                # Nothing else can progress: the run suspends; `ll resume` resumes these.
                raise Suspended([q for k in waiting for q in ends[k].pending])
            for key in waiting:  # the join was decided without them
                ends[key] = BranchEnd(CANCELLED, CANCELLED)
            for item in todo:  # never started: the join was decided without them
                ends[item.key] = self._complete(item, BranchEnd(CANCELLED, CANCELLED))
        except BaseException as exc:
            signum = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
            for job in running.values():
                job.scope.stop(signum)
            while running:  # each stopped branch ends (its thread reports it) before we go
                stopped = self.done.get()
                self._keep_unfinished(stopped)
                running.pop(stopped.item.key, None)
            raise
        return ends

    def _start(self, job: Job, running: int) -> None:
        """Hand `job` to a worker; a new worker only while fewer than `running` branches
        (this one included) have one. One branch at a time runs here, in this thread."""
        if self.limit == 1:
            self._inline(job)
            return
        if len(self.workers) < running:
            worker = threading.Thread(target=self._serve, name="ll-branch", daemon=True)
            worker.start()
            self.workers.append(worker)
        self.jobs.put(job)

    def _serve(self) -> None:
        """A worker: run branches one after another, until dismissed."""
        while (job := self.jobs.get()) is not None:
            self._work(job)

    def _dismiss(self, *, wait: bool) -> None:
        """End the workers once they are idle; `wait`: for them to be gone."""
        for _ in self.workers:
            self.jobs.put(None)
        if wait:
            for worker in self.workers:
                worker.join()
        self.workers.clear()

    def _decided(self, ends: dict[str, BranchEnd]) -> bool:
        # Asked after every branch: without `fail_fast`, never copy the ends (a fork of
        # 10,000 items would copy 50 million of them).
        if not self.state.fail_fast:
            return False
        return decide(self.join, len(self.items), _settled(ends)) is not None

    def _work(self, job: Job) -> None:
        GATE.adopt(job.scope.gate)
        try:
            job.result = job.child.run()
        except BaseException as exc:
            job.error = exc
        finally:
            self.done.put(job)

    def _inline(self, job: Job) -> None:
        """Run `job` in this thread, as its worker would (its own gate, its end in `done`):
        at concurrency 1 a worker only added two thread hand-offs a branch. The signal
        handler meanwhile gives its signal to the branch's gate, as a stop would; once the
        branch has ended (recorded as interrupted), the fork raises it as `_wait` would."""
        gate = job.scope.gate
        gate.held = True  # until the branch's first wait, as in its run
        with GATE.lent(gate):
            try:
                job.result = job.child.run()
            except BaseException as exc:
                job.error = exc
        if gate.received is not None:
            gate.pending = None
            self._keep_unfinished(job)
            raise_for(gate.received)
        self.done.put(job)

    def _wait(self, ends: dict[str, BranchEnd] | None) -> Job | None:
        """The next branch to end, or None as soon as a waiting branch of `ends` has its
        answer."""
        if self.limit == 1:  # the branch ran in this thread (`_inline`): its end is queued
            GATE.raise_pending()  # a signal (or, in a branch, a stop) since, as a wait's entry
            with contextlib.suppress(queue.Empty):
                return self.done.get_nowait()
        while True:
            try:
                with GATE.interruptible():  # a signal (or, in a branch, a stop) ends the wait
                    return self.done.get(timeout=0.2)
            except queue.Empty:
                if ends is not None and self._answered(ends):
                    return None

    def _answered(self, ends: dict[str, BranchEnd]) -> list[Item]:
        """Waiting branches whose every question has its answer recorded (`ll answer`)."""
        root = qs.tree_root(self.root)
        found = []
        for item in self.items:
            end = ends.get(item.key)
            if end is None or end.verdict != SUSPENDED:
                continue
            asked = end.pending
            # For this very question (an answer left for an earlier one with the same id, a
            # child called again, is not: the branch would only ask again).
            if asked and all(qs.recorded_answer(root, q) is not None for q in asked):
                found.append(item)
        return found

    def _take_answered(self, ends: dict[str, BranchEnd]) -> list[Item]:
        """Those branches, no longer counted as waiting: they run on, taking their answers."""
        found = self._answered(ends)
        for item in found:
            del ends[item.key]
        return found

    def _finished(self, item: Item) -> BranchEnd | None:
        """A branch that ended before the fork stopped: read back, never run again."""
        if self.entries is None:
            self.entries = read_journal(self.root)
        entry = self.entries.get(item.key)
        # A malformed record stops the run (exit 3), as a file's would.
        if entry is not None and entry["state"].get("status") == "finished":
            where = f"{self.root / JOURNAL} (branch '{item.key}')"
            raw = self.ctx.session.unsealed(entry.get("result"))
            record = BranchRecord.from_json(raw, where, need=("verdict",))
            return BranchEnd(str(record.verdict), record.outcome or "", record)
        if item.key not in self.present:
            return None
        root = self.root / item.key
        try:
            data = children.finished(root)
        except RecordError:
            raise
        except LoopError as exc:  # corrupt: the run stops, and resumes once it is repaired
            raise RecordError(exc.message) from None
        if data is None:
            return None
        try:
            raw = self.ctx.session.read_record(root / RESULT)
        except (OSError, ValueError):  # killed between its end and its record: from its files
            record = self._read_back(item, root, data)
            self._write_result(RunDir(root), record)
        else:  # a malformed record stops the run (exit 3), resumable once it is repaired
            record = BranchRecord.from_json(raw, str(root / RESULT), need=("verdict",))
        return BranchEnd(str(record.verdict), record.outcome or "", record)

    def _read_back(self, item: Item, root: Path, data: dict[str, Any]) -> BranchRecord:
        outcome = str(data.get("outcome") or "error")
        final = str(data.get("final_state") or "")
        verdict = {"timeout": "timeout", "error": "error", "budget": "error"}.get(outcome, final)
        work = self.state.parallel[item.key] if self.state.parallel else self.state
        if work.loop is None:  # an action branch: its evaluator's verdict, from its events
            for event in reversed(read_records(root / "events.jsonl")):  # a torn line skipped
                if isinstance(event, Evaluate) and not event.path:
                    verdict = event.verdict
                    break
        exit_code, run_id = data.get("exit_code"), data.get("run_id")
        return BranchRecord.of(
            run_id=run_id if isinstance(run_id, str) else None,
            final_state=final or data.get("final_state"),
            exit_code=exit_code if isinstance(exit_code, int) else None,
            verdict=verdict,
            outcome=outcome,
            key=item.key,
            index=item.index,
            item=item.text,
            outputs=_outputs(data.get("outputs")),
        )

    def _end(self, job: Job) -> BranchEnd:
        result = job.result
        if job.error is not None or result is None:
            raise job.error or RuntimeError("a branch ended without a result")
        stopped = job.scope.stopped is not None
        run = _run(job)
        if stopped and result.outcome == "interrupted":
            _mark_cancelled(run.run_dir)
            record = BranchRecord.of(
                verdict=CANCELLED,
                outcome=CANCELLED,
                run_id=_run_id(job),
                key=job.item.key,
                index=job.item.index,
                item=job.item.text,
            )
            self._write_result(run.run_dir, record)
            return BranchEnd(CANCELLED, CANCELLED, record)
        try:
            end = job.child.end(result, stopped=stopped)
        except (KeyboardInterrupt, Terminated, RecordError):
            self._keep_unfinished(job)
            raise
        except Suspended as waiting:  # it waits for an answer: kept, not counted
            run_id = BranchRecord.of(run_id=_run_id(job))
            return BranchEnd(SUSPENDED, SUSPENDED, run_id, tuple(waiting.pending))
        prev = run.progress.prev
        if job.action and prev.get("state") == job.item.key and prev.get("verdict"):
            record = _action_record(end, job.item, prev)  # its action's verdict and output
            verdict = str(record.verdict)
        else:
            verdict = end.verdict
            record = loop_record(end, job.item).with_(verdict=verdict)
        self._write_result(run.run_dir, record)
        return BranchEnd(verdict, end.outcome, record)

    def _keep_unfinished(self, job: Job) -> None:
        """An action branch a signal stopped: its state and events kept in the journal, with
        no record (`ll status` shows it interrupted; a resume runs it again)."""
        run_dir = _run(job).run_dir
        if isinstance(run_dir, BranchDir) and run_dir.state is not None:
            with contextlib.suppress(OSError):  # the signal's stop is what matters now
                self.journal.append(run_dir.entry(run_dir.root.name, None))

    def _write_result(self, run_dir: RunDir, record: BranchRecord) -> None:
        """A branch's end, kept by the forking run's session (secrets sealed): an action
        branch's as its journal entry, with its state and events; a branch with a run
        directory's beside its run (`result.json`)."""
        if isinstance(run_dir, BranchDir):
            sealed = self.ctx.session.sealed(record.to_json())
            self.journal.append(run_dir.entry(run_dir.root.name, sealed))
            return
        self.ctx.session.write_record(run_dir.root / RESULT, record.to_json())

    def _complete(self, item: Item, end: BranchEnd) -> BranchEnd:
        """A branch's end, told: its event, and its cost spent by the run."""
        ctx = self.ctx
        record = end.record
        cost = float(record.cost_usd or 0.0)
        ctx.session.emit(
            ev.ChildComplete(
                step=self.step,
                state=self.state.name,
                child_run_id=record.run_id or "",
                final_state=record.final_state or "",
                outcome=end.outcome,
                exit_code=record.exit_code,
                verdict=end.verdict,
                steps=record.steps or 0,
                duration_ms=record.duration_ms or 0,
                cost_usd=round(cost, 6),
                outputs=dict(record.outputs or {}),
                branch=item.key,
                reason=_reason(end),
            )
        )
        ctx.steps.spend(cost)
        ctx.check_budget(self.state.name)  # spent: the other branches stop, the run ends
        return end


def _run(job: Job) -> ChildRun:
    """The run of a branch: its progress and run directory."""
    child = job.child
    return child if isinstance(child, ActionBranch) else child.runner


def _run_id(job: Job) -> str:
    child = job.child
    return child.run_id if isinstance(child, ActionBranch) else child.plan.run_id


def _settled(ends: dict[str, BranchEnd]) -> dict[str, BranchEnd]:
    """The ends a join may count: a suspended branch has not ended yet."""
    return {k: e for k, e in ends.items() if e.verdict != SUSPENDED}


def _reason(end: BranchEnd) -> str | None:
    """Why a branch did not succeed, in one line (its run's error, without the preamble)."""
    if end.verdict in ("success", CANCELLED):
        return None
    text = (end.record.error or end.record.stderr or "").strip()
    if text.startswith("terminal state '"):
        text = text.partition(": ")[2] or text
    return text.splitlines()[0] if text else None


def loop_record(end: ChildEnd, item: Item) -> BranchRecord:
    return BranchRecord.of(
        **end.record(),
        error=end.error or "",
        verdict=end.verdict,
        key=item.key,
        index=item.index,
        item=item.text,
    )


def _action_record(end: ChildEnd, item: Item, prev: dict[str, Any]) -> BranchRecord:
    """An action branch's record: `loop_record`'s keys, in its order, with the action's own
    verdict (as its evaluator gave it) and the ends of its output."""
    return BranchRecord.of(
        output=str(prev.get("output") or "")[-OUTPUT_CHARS:],
        stderr=str(prev.get("stderr") or "")[-OUTPUT_CHARS:],
        exit_code=end.exit_code,
        duration_ms=end.duration_ms,
        state=end.final_state,
        outputs=dict(end.outputs),
        final_state=end.final_state,
        outcome=end.outcome,
        run_id=end.run_id,
        steps=end.steps,
        cost_usd=round(end.cost_usd, 6),
        error=end.error or "",
        verdict=str(prev["verdict"]),
        key=item.key,
        index=item.index,
        item=item.text,
    )


def _outputs(value: object) -> dict[str, str]:
    """A run's `outputs:` from its state.json (its values as text)."""
    if not isinstance(value, dict):
        return {}
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}


def _mark_cancelled(run_dir: RunDir) -> None:
    """A stopped branch's run ends `cancelled`: finished, not to be resumed."""
    data = run_dir.read_state()
    data.update(status="finished", outcome=CANCELLED)
    run_dir.write_state(data)
