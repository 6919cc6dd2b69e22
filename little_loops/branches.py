"""A fork's branches running: each a child run of its own, in a thread of this process.

`Runner` takes `_fork` from `ForkCalls`. The fork's thread (the run's own) resolves the items
once and stores them (`sub/<step>-<state>/items.json`), starts branches in item order (at
most `max_concurrency` at a time), and records each branch's end as it comes; the branches'
own run directories are the record, so a resumed fork reads back the finished ones, resumes
the running ones and starts the rest. Every action of a tree of forks waits for one of the
tree's `--jobs` slots. A branch is stopped through its `Scope`: its process groups are
killed and its thread's gate raises, so its run records `interrupted` (`cancelled` once
`fail_fast` decided the join). What is decided (items, keys, join) is in `fork.py`.

A little over 400 lines: `_Fork` (scheduling and its stop) and `ForkCalls` (preparing a
branch, reading back its end) share the helpers here, and split apart they would hand each
other most of their state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import signal
import threading
from collections import deque
from pathlib import Path
from typing import Any

from . import events as ev
from . import subloop
from .action_layer import ActionLayer, Processes
from .errors import EXIT_SUSPENDED, EXIT_TERMINATED, LoopError
from .events import Listener
from .fork import (
    CANCELLED,
    OUTPUT_CHARS,
    BranchEnd,
    Item,
    ItemsError,
    branch_items,
    concurrency,
    decide,
    describe,
    make_items,
    max_items,
    parse_items,
    summary,
)
from .gate import GATE, GateState, Suspended, Terminated
from .interpolate import render
from .model import EMPTY, Join, Loop, State, Verdict
from .progress import Progress, RunOptions
from .secrets import Redactor
from .session import RunSession
from .steps import StepPipeline, StepResult
from .store import RunDir, atomic_write_text
from .subloop import ChildEnd, ChildError, Parent

SUSPENDED = "suspended"  # a branch waiting for an answer (an `ask`): not an end yet
RESULT = "result.json"  # a finished branch's record, beside its state.json
ITEMS = "items.json"
JOIN = "join.json"


class Scope:
    """What stops one branch: its thread's gate and the process groups it runs; a nested
    fork's branches are its children, stopped with it."""

    def __init__(self, parent: Scope | None = None) -> None:
        self.gate = GateState()
        self.lock = threading.Lock()
        self.groups: set[int] = set()
        self.children: list[Scope] = []
        self.stopped: int | None = None  # the signal it was stopped as
        if parent is not None:
            with parent.lock:
                parent.children.append(self)
                stopped = parent.stopped
            if stopped is not None:
                self.stop(stopped)

    def started(self, pgid: int) -> None:
        with self.lock:
            self.groups.add(pgid)
            stopped = self.stopped
        if stopped is not None:
            _term(pgid)

    def ended(self, pgid: int) -> None:
        with self.lock:
            self.groups.discard(pgid)

    def stop(self, signum: int = signal.SIGINT) -> None:
        """Kill what runs and make the branch's thread raise at its next wait."""
        with self.lock:
            if self.stopped is None:
                self.stopped = signum
            if self.gate.pending is None:
                self.gate.pending = signum
            groups, children = list(self.groups), list(self.children)
        for pgid in groups:
            _term(pgid)
        for child in children:
            child.stop(signum)


def _term(pgid: int) -> None:
    # SIGTERM; the action's own wait then kills what is left of the group (grace, SIGKILL).
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGTERM)


class BranchActions:
    """The action layer of a branch: each action holds one of the tree's `--jobs` slots and
    is registered in the branch's scope, so a stop kills it."""

    def __init__(
        self,
        inner: ActionLayer,
        scope: Scope,
        jobs: threading.Semaphore,
        verbose: tuple[str, Any] | None = None,
    ) -> None:
        self.inner, self.scope, self.jobs = inner, scope, jobs
        # `--verbose`: (the branch's path, the root's output hook): whole lines, prefixed.
        self.verbose = verbose

    def run_shell(self, command: str, **kwargs: Any) -> Any:
        return self._run(self.inner.run_shell, command, kwargs)

    def run_slash(self, prompt: str, **kwargs: Any) -> Any:
        return self._run(self.inner.run_slash, prompt, kwargs)

    def _run(self, run: Any, text: str, kwargs: dict[str, Any]) -> Any:
        while not self.jobs.acquire(timeout=0.2):
            GATE.raise_pending()  # stopped while waiting for a slot
        started: list[int] = []

        def on_start(pid: int) -> None:
            started.append(pid)
            self.scope.started(pid)

        lines = _Lines(*self.verbose) if self.verbose and not kwargs.get("on_output") else None
        if lines is not None:
            kwargs["on_output"] = lines.feed
        try:
            GATE.raise_pending()
            return run(text, on_start=on_start, **kwargs)
        finally:
            if lines is not None:
                lines.close()
            for pid in started:
                self.scope.ended(pid)
            self.jobs.release()

    def kill_orphans(self) -> None:
        self.inner.kill_orphans()

    def child(self, state: str, loop: Loop) -> BranchActions:
        return BranchActions(self.inner.child(state, loop), self.scope, self.jobs, self.verbose)

    def resumed(self, events_path: Path) -> BranchActions:
        return BranchActions(self.inner.resumed(events_path), self.scope, self.jobs, self.verbose)

    def stub_child(self, state: str, child: Loop) -> dict[str, Any] | None:
        return self.inner.stub_child(state, child)

    def __call__(self, event: Any) -> None:
        if callable(self.inner):  # a simulation learns which state acts from the events
            self.inner(event)


class _Lines:
    """An action's output for `--verbose` in a fork: each whole line, prefixed with the branch's
    path (`[rollout/us-east] …`), so concurrent branches never split each other's lines."""

    def __init__(self, label: str, out: Any) -> None:
        self.prefix, self.out = f"[{label}] ".encode(), out
        self.rest = {"stdout": b"", "stderr": b""}

    def feed(self, name: str, chunk: bytes) -> None:
        *whole, self.rest[name] = (self.rest.get(name, b"") + chunk).split(b"\n")
        for line in whole:
            self.out(name, self.prefix + line + b"\n")

    def close(self) -> None:
        for name, rest in self.rest.items():
            if rest:
                self.out(name, self.prefix + rest + b"\n")


@dataclasses.dataclass
class _Job:
    """A branch started in a thread, and what it gave back."""

    item: Item
    root: Path
    run_id: str
    runner: Any
    scope: Scope
    action: bool  # an inline action (a one-step run) rather than a `loop:` child
    child: Loop
    result: Any = None
    error: BaseException | None = None


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
        try:
            items = self._fork_items(step, state, root)
        except (ItemsError, LoopError) as exc:
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
        ends = _Fork(self, step, state, root, items, join).run()
        verdict = decide(join, len(items), ends) or "failure"
        done = summary(join, items, ends, verdict)
        atomic_write_text(root / JOIN, json.dumps(done["branches"], ensure_ascii=False) + "\n")
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

    def _fork_items(self, step: int, state: State, root: Path) -> list[Item]:
        """The items, resolved once: read back from items.json when the fork resumes."""
        stored = root / ITEMS
        if stored.is_file():
            data = json.loads(stored.read_text(encoding="utf-8"))
            return [Item(str(d["key"]), int(d["index"]), d["value"]) for d in data]
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
        text = json.dumps([i.to_dict() for i in items], ensure_ascii=False) + "\n"
        atomic_write_text(stored, text)
        return items

    # -- one branch ------------------------------------------------------------------------

    def _branch_path(self, state: State, item: Item) -> tuple[str, ...]:
        return (*(self.parent.path if self.parent else ()), state.name, item.key)

    def _prepare(
        self, step: int, state: State, root: Path, item: Item, base: Any, total: int
    ) -> Any:
        """A `_Job` ready to start, or the `BranchEnd` of a branch that cannot start."""
        work = state.parallel[item.key] if state.parallel else state
        path = self._branch_path(state, item)
        where = f"state '{state.name}' branch '{item.key}'"
        scope = self.steps.templates.scope(step, state, 1)
        if not state.parallel:
            scope["item"] = item.scope()
        raw = base.inner  # the layer under the fork's own (`_Root`, or its branch's)
        values: dict[str, str] = {}
        stub: dict[str, Any] | None = None
        try:
            if work.loop is not None:
                child = subloop.load_child(self.loop, work, len(path))
                values = {
                    k: render(t, scope, shell=False, where=where) for k, t in work.with_.items()
                }
                subloop.bind_inputs(child, values, work.loop)
                layer = raw.child(state.name, child).child(item.key, child)
                stub = raw.child(state.name, child).stub_child(item.key, child)
            else:
                shell = work.action_type == "shell"
                assert work.action is not None
                command = render(work.action, scope, shell=shell, where=where, command=shell)
                child = self._action_loop(work, item.key, command)
                # Not `for_loop`: a simulation answers the branch as an action, never as an
                # unanswered terminal's silent success.
                layer = raw.child(state.name, None)
        except (ChildError, LoopError) as exc:
            reason = str(exc.message if isinstance(exc, LoopError) else exc)
            record = {"verdict": "error", "error": reason, "key": item.key, "index": item.index}
            return BranchEnd("error", "error", record)
        child_root = root / item.key
        run_id = f"{self.progress.run_id}/{root.name}/{item.key}"
        if stub is not None:
            end = ChildEnd(run_id=run_id, **stub)
            return BranchEnd(end.verdict, end.outcome, _loop_record(end, item))
        progress = None
        if (child_root / "state.json").is_file():  # it was running when the fork stopped
            from .history import History

            progress = Progress.from_dict(RunDir(child_root).read_state())
            progress.path = History.from_file(child_root / "events.jsonl").path_upto(progress.step)
            progress.status = "running"
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
        listeners = [_serial(subloop.forward(one, path), one) for one in self._listeners]
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
            max_iterations=None,
            on_terminal_output=None,
            on_output=None,
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
                path, tuple(self.redactor.values), tuple(self._listeners), self._budget_left()
            ),
        )
        return _Job(item, child_root, run_id, runner, branch_scope, work.loop is None, child)

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


class _Fork:
    """One fork's scheduling, in the thread of the run that forks."""

    def __init__(
        self, run: ForkCalls, step: int, state: State, root: Path, items: list[Item], join: Join
    ) -> None:
        self.run_, self.step, self.state, self.root = run, step, state, root
        self.items, self.join = items, join
        base = run.steps.actions
        self.base: Any = base
        if not isinstance(base, BranchActions):  # the outermost fork: the tree's slots
            self.base = _Root(base, threading.Semaphore(max(1, run.options.jobs)))
        raw = base.inner if isinstance(base, BranchActions) else base
        # A simulation runs branches one at a time, in item order: the same result each time.
        self.limit = concurrency(state, len(items)) if isinstance(raw, Processes) else 1
        self.done: queue.Queue[_Job] = queue.Queue()

    def run(self) -> dict[str, BranchEnd]:
        ends: dict[str, BranchEnd] = {}
        todo = deque(self.items)
        running: dict[str, tuple[_Job, threading.Thread]] = {}
        stopping = False
        try:
            while (todo and not stopping) or running:
                while todo and len(running) < self.limit and not stopping:
                    item = todo.popleft()
                    end = self._finished(item)
                    if end is None:
                        job = self.run_._prepare(
                            self.step, self.state, self.root, item, self.base, len(self.items)
                        )
                        if isinstance(job, _Job):
                            thread = threading.Thread(
                                target=self._work, args=(job,), name=f"ll-{item.key}", daemon=True
                            )
                            running[item.key] = (job, thread)
                            thread.start()
                            continue
                        end = job
                    ends[item.key] = self._complete(item, end)
                    stopping = stopping or self._decided(ends)
                if not running:
                    continue
                job = self._wait()
                del running[job.item.key]
                ends[job.item.key] = self._complete(job.item, self._end(job))
                if not stopping and self._decided(ends):
                    stopping = True
                    for other, _ in running.values():
                        other.scope.stop()
            waiting = [k for k, e in ends.items() if e.verdict == SUSPENDED]
            if waiting and decide(self.join, len(self.items), _settled(ends)) is None:
                # Nothing else can progress: the run suspends; `ll resume` resumes these.
                raise Suspended(f"branches of '{self.state.name}' wait: {', '.join(waiting)}")
            for key in waiting:  # the join was decided without them
                ends[key] = BranchEnd(CANCELLED, CANCELLED, {})
            for item in todo:  # never started: the join was decided without them
                ends[item.key] = self._complete(item, BranchEnd(CANCELLED, CANCELLED, {}))
        except BaseException as exc:
            signum = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
            for job, _ in running.values():
                job.scope.stop(signum)
            for _, thread in running.values():
                thread.join()
            raise
        return ends

    def _decided(self, ends: dict[str, BranchEnd]) -> bool:
        settled = _settled(ends)
        return self.state.fail_fast and decide(self.join, len(self.items), settled) is not None

    def _work(self, job: _Job) -> None:
        GATE.adopt(job.scope.gate)
        try:
            job.result = job.runner.run()
        except BaseException as exc:
            job.error = exc
        finally:
            self.done.put(job)

    def _wait(self) -> _Job:
        while True:
            try:
                with GATE.interruptible():  # a signal (or, in a branch, a stop) ends the wait
                    return self.done.get(timeout=0.2)
            except queue.Empty:
                continue

    def _finished(self, item: Item) -> BranchEnd | None:
        """A branch that ended before the fork stopped: read back, never run again."""
        root = self.root / item.key
        if not (root / "state.json").is_file():
            return None
        data = RunDir(root).read_state()
        if data.get("status") != "finished":
            return None
        try:
            record = json.loads((root / RESULT).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # killed between its end and its record: from its files
            record = self._read_back(item, root, data)
            _write_result(root, record)
        return BranchEnd(str(record.get("verdict")), str(record.get("outcome") or ""), record)

    def _read_back(self, item: Item, root: Path, data: dict[str, Any]) -> dict[str, Any]:
        outcome = str(data.get("outcome") or "error")
        final = str(data.get("final_state") or "")
        verdict = {"timeout": "timeout", "error": "error", "budget": "error"}.get(outcome, final)
        work = self.state.parallel[item.key] if self.state.parallel else self.state
        if work.loop is None:  # an action branch: its evaluator's verdict, from its events
            lines = (root / "events.jsonl").read_text(encoding="utf-8").splitlines()
            for line in reversed(lines):
                event = json.loads(line) if line.strip() else {}
                if event.get("event") == "evaluate" and "path" not in event:
                    verdict = str(event.get("verdict"))
                    break
        record = {key: data.get(key) for key in ("run_id", "final_state", "exit_code")}
        record.update(verdict=verdict, outcome=outcome, key=item.key, index=item.index)
        return {**record, "item": item.text, "outputs": data.get("outputs") or {}}

    def _end(self, job: _Job) -> BranchEnd:
        result = job.result
        if job.error is not None or result is None:
            raise job.error or RuntimeError("a branch ended without a result")
        runner = job.runner
        waits = result.outcome == "interrupted" and result.exit_code == EXIT_SUSPENDED
        if waits and job.scope.stopped is None:  # it waits for an answer: kept, not counted
            return BranchEnd(SUSPENDED, SUSPENDED, {"run_id": job.run_id})
        if result.outcome == "interrupted":
            if job.scope.stopped is None:  # not ours: the whole run stops, and resumes it
                raise Terminated() if result.exit_code == EXIT_TERMINATED else KeyboardInterrupt()
            _mark_cancelled(job.root)
            record: dict[str, Any] = {
                "verdict": CANCELLED,
                "outcome": CANCELLED,
                "run_id": job.run_id,
            }
            record.update(key=job.item.key, index=job.item.index, item=job.item.text)
            _write_result(job.root, record)
            return BranchEnd(CANCELLED, CANCELLED, record)
        end = ChildEnd(
            run_id=job.run_id,
            final_state=result.final_state,
            outcome=result.outcome,
            exit_code=result.exit_code,
            steps=result.steps,
            duration_ms=result.duration_ms,
            cost_usd=runner.progress.cost_usd,
            outputs=runner.progress.outputs or {},
            error=result.error,
            via_terminal=subloop.ended_at_terminal(job.child, result.final_state, result.outcome),
        )
        record = _loop_record(end, job.item)
        verdict = end.verdict
        prev = runner.progress.prev
        if job.action and prev.get("state") == job.item.key and prev.get("verdict"):
            verdict = str(prev["verdict"])  # the action's own verdict, as its evaluator gave
            record["output"] = str(prev.get("output") or "")[-OUTPUT_CHARS:]
            record["stderr"] = str(prev.get("stderr") or "")[-OUTPUT_CHARS:]
        record["verdict"] = verdict
        _write_result(job.root, record)
        return BranchEnd(verdict, end.outcome, record)

    def _complete(self, item: Item, end: BranchEnd) -> BranchEnd:
        """A branch's end, told: its event, and its cost spent by the run."""
        run = self.run_
        record = end.record
        cost = float(record.get("cost_usd") or 0.0)
        run.session.emit(
            ev.ChildComplete(
                step=self.step,
                state=self.state.name,
                child_run_id=str(record.get("run_id") or ""),
                final_state=str(record.get("final_state") or ""),
                outcome=end.outcome,
                exit_code=record.get("exit_code"),
                verdict=end.verdict,
                steps=int(record.get("steps") or 0),
                duration_ms=int(record.get("duration_ms") or 0),
                cost_usd=round(cost, 6),
                outputs=dict(record.get("outputs") or {}),
                branch=item.key,
                reason=_reason(end),
            )
        )
        run.steps.spend(cost)
        run._check_budget(self.state.name)  # spent: the other branches stop, the run ends
        return end


class _Root:
    """The outermost fork's stand-in for a branch layer: the tree's slots, no scope."""

    def __init__(self, inner: ActionLayer, jobs: threading.Semaphore) -> None:
        self.inner, self.jobs = inner, jobs
        self.scope: Scope | None = None
        self.verbose = None


_LISTENER_LOCKS: dict[int, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def _serial(send: Listener, listener: Listener) -> Listener:
    """`send`, called by one branch at a time: a listener of the root (a renderer, a report)
    sees the events of concurrent branches one after another, never two at once."""
    with _LOCKS_LOCK:
        lock = _LISTENER_LOCKS.setdefault(id(listener), threading.Lock())

    def call(event: ev.Event) -> None:
        with lock:
            send(event)

    return call


def _settled(ends: dict[str, BranchEnd]) -> dict[str, BranchEnd]:
    """The ends a join may count: a suspended branch has not ended yet."""
    return {k: e for k, e in ends.items() if e.verdict != SUSPENDED}


def _reason(end: BranchEnd) -> str | None:
    """Why a branch did not succeed, in one line (its run's error, without the preamble)."""
    if end.verdict in ("success", CANCELLED):
        return None
    text = str(end.record.get("error") or end.record.get("stderr") or "").strip()
    if text.startswith("terminal state '"):
        text = text.partition(": ")[2] or text
    return text.splitlines()[0] if text else None


def _loop_record(end: ChildEnd, item: Item) -> dict[str, Any]:
    return {
        **end.record(),
        "error": end.error or "",
        "verdict": end.verdict,
        "key": item.key,
        "index": item.index,
        "item": item.text,
    }


def _write_result(root: Path, record: dict[str, Any]) -> None:
    atomic_write_text(root / RESULT, json.dumps(record, ensure_ascii=False) + "\n")


def _mark_cancelled(root: Path) -> None:
    """A stopped branch's run ends `cancelled`: finished, not to be resumed."""
    run_dir = RunDir(root)
    data = run_dir.read_state()
    data.update(status="finished", outcome=CANCELLED)
    run_dir.write_state(data)
