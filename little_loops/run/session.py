"""A run session: the loop lock, the run directory, the event sink and the clock of one run.

The session is the run's only writer: events go out through `emit`, step outputs through
`keep_outputs`, the progress through `persist`, which writes state.json whole, and every
other record of the tree (a fork's items and join, a branch's result, a used answer, a crash
report) through `write_record` or `crash_report`, with its secrets sealed or masked. Whatever
fails while it is being set up releases the lock it took, so the loop can be run again.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from little_loops.errors import RunError
from little_loops.model.details import Json
from little_loops.model.loop import Loop
from little_loops.model.progress import (
    _CHANGING,
    _FIXED,
    OUTCOME_EXIT,
    Progress,
    Routed,
    RunOptions,
    RunResult,
)
from little_loops.model.records import record
from little_loops.record import events as ev
from little_loops.record import outputs as outputs_store
from little_loops.record.events import (
    Emitter,
    EventLog,
    JsonlSink,
    Listener,
    RunEvent,
    json_string,
    json_value,
    utc_now,
)
from little_loops.record.secrets import (
    Redactor,
    Sealer,
)
from little_loops.record.store import (
    BranchDir,
    CallDir,
    FixedState,
    LoopLock,
    MemoryOutputs,
    MemorySink,
    RunDir,
    atomic_write_text,
)
from little_loops.run.gate import GATE

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

# Fields of a step's record that only `captured` shows; `prev` is the record without them.
_VERDICT_ONLY = ("confidence", "reason")


@record(frozen=True)
class Clock:
    """Time as a run sees it: a simulation or a test gives its own."""

    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], str] = utc_now  # the `ts` of every event
    sleep: Callable[[float], None] = time.sleep


def changing_json(progress: Progress, captured: Json, prev: Json) -> str:
    """`ENCODE(progress.to_dict(_CHANGING))` with `captured` and `prev` (their references
    into outputs.dat) in their places: the same text, made from the attributes at once,
    without the dict or the encoder's walk of it (a third of a step's state write). A value
    of another type than a step gives its field (a float that is not finite, a subclass)
    goes through `json_value`: tests/run/test_session.py compares the two.

    Written inline, without a call for a value as a step leaves it (an empty object, None,
    a bool): on this interpreter a call costs as much as the rest of a field's text."""
    d = progress.__dict__
    current, status, error = d["current"], d["status"], d["error"]
    step, ms, attempt, code = d["step"], d["elapsed_ms"], d["attempt"], d["exit_code"]
    cost, route, pending = d["cost_usd"], d["last_route"], d["pending"]
    convergence, reasons, outputs = d["convergence"], d["prior_reasons"], d["outputs"]
    # An empty object is written `{}` without a call.
    fresh_c = captured.__class__ is dict and not captured
    fresh_v = convergence.__class__ is dict and not convergence
    fresh_r = reasons.__class__ is dict and not reasons
    used, outcome, final = d["on_max_used"], d["outcome"], d["final_state"]
    finite = cost.__class__ is float and cost - cost == 0  # not inf, -inf or nan
    return (
        f'{{"current":{json_string(current) if current.__class__ is str else json_value(current)},'
        f'"status":{json_string(status) if status.__class__ is str else json_value(status)},'
        f'"step":{step if step.__class__ is int else json_value(step)},'
        f'"elapsed_ms":{ms if ms.__class__ is int else json_value(ms)},'
        f'"cost_usd":{_FLOAT(cost) if finite else json_value(cost)},'
        f'"captured":{"{}" if fresh_c else _object(captured)},'
        f'"prev":{_reference(prev)},'
        f'"convergence":{"{}" if fresh_v else _object(convergence)},'
        f'"prior_reasons":{"{}" if fresh_r else _object(reasons)},'
        f'"on_max_used":{"false" if used is False else json_value(used)},'
        f'"attempt":{attempt if attempt.__class__ is int else json_value(attempt)},'
        f'"last_route":{"null" if route is None else _route(route)},'
        f'"outcome":{"null" if outcome is None else json_value(outcome)},'
        f'"exit_code":{"null" if code is None else json_value(code)},'
        f'"error":{"null" if error is None else json_value(error)},'
        f'"final_state":{"null" if final is None else json_value(final)},'
        f'"outputs":{"null" if outputs is None else _object(outputs)},'
        f'"pending":{json_value([q.to_json() for q in pending]) if pending else "[]"}}}'
    )


def _route(route: Routed) -> str:
    """`last_route`'s object, as `ENCODE(route.to_json())` writes it."""
    from_, to, verdict, via = route.from_, route.to, route.verdict, route.via
    if from_.__class__ is to.__class__ is verdict.__class__ is via.__class__ is str:
        return (
            f'{{"from":{json_string(from_)},"to":{json_string(to)},'
            f'"verdict":{json_string(verdict)},"via":{json_string(via)}}}'
        )
    return json_value(route.to_json())


_FLOAT = float.__repr__  # what json writes for a finite float


def _reference(value: Any) -> str:
    """`prev`: where the last step's record lies in outputs.dat (`{"ref": [offset, size]}`),
    or `{}` before the first."""
    where = value.get("ref") if value.__class__ is dict and len(value) == 1 else None
    if (
        where.__class__ is list
        and len(where) == 2
        and where[0].__class__ is where[1].__class__ is int
    ):
        return f'{{"ref":[{where[0]},{where[1]}]}}'
    return _object(value)


def _object(value: Any) -> str:
    """A field that is an object (or null): `{}` without the encoder when empty."""
    return "{}" if value.__class__ is dict and not value else json_value(value)


# The fields `changing_json` writes, in their order: a field added to `Progress` must be
# added there too (this fails at import until it is).
if _CHANGING != (
    "current", "status", "step", "elapsed_ms", "cost_usd", "captured", "prev", "convergence",
    "prior_reasons", "on_max_used", "attempt", "last_route", "outcome", "exit_code", "error",
    "final_state", "outputs", "pending",
):  # fmt: skip
    raise ImportError(f"changing_json does not write Progress's fields {_CHANGING}")


class RunSession:
    """What one run holds open from its start to its end."""

    def __init__(
        self,
        loop: Loop,
        options: RunOptions,
        progress: Progress,
        *,
        redactor: Redactor,
        sealer: Sealer,
        clock: Clock,
        listeners: list[Listener],
        run_dir: RunDir | None = None,
        sources: Mapping[str, str] | None = None,
        snapshot: bool = True,
    ) -> None:
        self.options = options
        self.clock = clock
        self.redactor = redactor
        self._sealer = sealer
        self._sources = dict(sources or {})  # each secret by its source: to unseal records
        self._t0 = clock.monotonic() - progress.elapsed_ms / 1000.0
        fixed = progress.to_dict(_FIXED)
        # Secret context values are never written down; a resumed run takes them afresh.
        fixed["context"] = {k: v for k, v in progress.context.items() if k not in loop.secrets}
        if redactor:
            fixed = redactor.obj({**fixed, "context": sealer.seal(fixed["context"])})
        self._fixed = FixedState(fixed)
        self.lock: LoopLock | None = None
        if not options.allow_concurrent:
            # Before the run directory exists, so a refused start leaves nothing behind.
            self.lock = LoopLock(options.base_dir, loop.path)
            self.lock.acquire(progress.run_id, loop.path)
        try:
            if run_dir is None:
                run_dir = RunDir.create(options.base_dir, progress.run_id)
                _write_snapshot(loop, run_dir, redactor)
            elif snapshot and progress.step == 0 and isinstance(run_dir, CallDir):
                # A child kept in memory: copied if it moves to its directory (only a child
                # that did not finish is resumed, and compared with its file).
                run_dir.on_spill = lambda: _keep_tree_copy(loop, run_dir, redactor)
            elif snapshot and progress.step == 0:
                _keep_tree_copy(loop, run_dir, redactor)  # a child run, at its start
            self.run_dir = run_dir
            self.outputs: outputs_store.Outputs | MemoryOutputs
            self.sink: JsonlSink | MemorySink
            if isinstance(run_dir, BranchDir):  # an action branch: its fork's journal, at its end
                self.outputs, self.sink = run_dir.outputs, run_dir.sink
            else:
                self.outputs = outputs_store.Outputs(run_dir.root)
                self.sink = JsonlSink(run_dir.events_path)
        except BaseException:
            self.release_lock()  # or the next run of this loop in this process is refused
            raise
        self.emitter = Emitter(
            progress.run_id,
            list(listeners),
            sinks=[self.sink],
            redact=redactor.obj if redactor else None,
            clock=clock.wall,
        )
        # `emit(cls(**fields))` for the five events of a step, the record made only for a
        # listener that takes it (`Emitter.send_fields`); the emitter's own, not a wrapper.
        self.emit_fields: Callable[[type[RunEvent], dict[str, Any]], None]
        self.emit_fields = self.emitter.send_fields
        # Where state.json points for `captured` and `prev`: records of finished steps only.
        self._captured_refs: dict[str, dict[str, Any]] = {}
        self._prev_ref: dict[str, Any] = {}
        self._records_end = 0  # a resumed run's: where its state's records end (`load_outputs`)

    # -- time ------------------------------------------------------------------------------

    def elapsed_ms(self) -> int:
        return int((self.clock.monotonic() - self._t0) * 1000)

    def deadline(self, timeout: float | None) -> float | None:
        """The clock's monotonic time when a loop `timeout` runs out; None without one."""
        return None if timeout is None else self._t0 + timeout

    def remaining(self, timeout: float | None) -> float | None:
        if timeout is None:
            return None
        return max(0.0, timeout - (self.clock.monotonic() - self._t0))

    # -- writing ---------------------------------------------------------------------------

    def emit(self, event: RunEvent) -> None:
        """Write a typed event (SPEC section 10) to the log and every listener."""
        self.emitter.send(event)

    def flush(self) -> None:
        self.sink.flush()

    def keep_outputs(
        self,
        record: dict[str, Json],
        capture: str | None,
        in_log: tuple[int, int] | None = None,
    ) -> None:
        """A finished step's record: appended once, pointed to by the next state.json.
        `in_log`: where its output already lies in the run's log (`steps.log`), which the
        record then points to instead of holding the same bytes again."""
        if self.redactor.masks:  # sealed; the log holds the output masked
            where = self.outputs.append(self._sealer.seal(record))
        else:
            where = self.outputs.append(record, in_log=in_log)
        self._prev_ref = where
        if capture:
            self._captured_refs[capture] = where

    def load_outputs(self, progress: Progress) -> None:
        """Fill a resumed run's `captured` and `prev` from what its state.json points to.

        Records an older ll wrote inline are moved into outputs.dat, so from here on
        state.json holds references only. Values stay sealed; the runner unseals them.
        """
        # Before records written inline are moved: where the step after this state's wrote.
        self._records_end = outputs_store.records_end(
            {"prev": progress.prev, "captured": progress.captured}
        )
        for name, value in list(progress.captured.items()):
            progress.captured[name], self._captured_refs[name] = self._load(value)
        if progress.prev:
            progress.prev, self._prev_ref = self._load(progress.prev)
            for key in _VERDICT_ONLY:
                progress.prev.pop(key, None)

    def _load(self, value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        if outputs_store.is_ref(value):
            return self.outputs.read(value), value
        record = value if isinstance(value, dict) else {}
        return record, self.outputs.append(record)  # inline: already sealed when written

    def persist(self, progress: Progress) -> None:
        """Write state.json whole, after the events so far: the one place the state is saved."""
        with GATE.deferred():
            self.sink.flush()
            progress.elapsed_ms = self.elapsed_ms()
            fsync = self.options.fsync
            if fsync:
                self.run_dir.log.sync()  # output records may point into the run's log
                self.outputs.sync()
            if not self.redactor.masks and self.run_dir.takes_json:  # JSON from the attributes
                text = changing_json(progress, self._captured_refs, self._prev_ref)
                if self.run_dir.write_state_json(text, fsync=fsync, fixed=self._fixed):
                    return
            data = progress.to_dict(_CHANGING)
            if self.redactor:
                data = self.redactor.obj(data)
            data["captured"], data["prev"] = self._captured_refs, self._prev_ref
            self.run_dir.write_state(data, fsync=fsync, fixed=self._fixed)

    def end(
        self,
        p: Progress,
        root: Path,
        outcome: str,
        final_state: str,
        error: str | None,
        exit_code: int | None = None,
    ) -> RunResult:
        """Every end of a run (a suspension included; a run's, or an action branch's): the
        end's events, then the state that records it, persisted once."""
        code = exit_code if exit_code is not None else OUTCOME_EXIT[outcome]
        p.status = outcome if outcome in ("interrupted", "suspended") else "finished"
        p.outcome, p.exit_code, p.error = outcome, code, error
        p.final_state = final_state
        duration_ms = self.elapsed_ms()
        if outcome == "suspended":  # the questions it waits on, before its end
            self.emit(
                ev.LoopSuspended(
                    pending=tuple(q.id for q in p.pending),
                    exit_code=code,
                    steps=p.step,
                    duration_ms=duration_ms,
                    cost_usd=round(p.cost_usd, 6),
                )
            )
        self.emit(
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
        self.persist(p)
        return _result(p, root, duration_ms)

    def logged_end(self, p: Progress) -> ev.LoopComplete | None:
        """The end of a resumed run that its log holds but its state does not: its process
        was cut off between the two (`end` writes the event first). Only the end of the run
        itself counts: an interruption or a suspension is continued by resume, and a log
        whose last line is anything else (a torn one included) has no end."""
        if not isinstance(self.sink, JsonlSink):
            return None
        last = EventLog(self.run_dir.events_path).last()
        if last is None or last.get("event") != "loop_complete" or "path" in last:
            return None
        end = ev.parse(last)
        if not isinstance(end, ev.LoopComplete) or end.run_id != p.run_id:
            return None
        if end.outcome in ("interrupted", "suspended") or end.outcome not in OUTCOME_EXIT:
            return None
        if not isinstance(end.steps, int) or not p.step <= end.steps <= p.step + 1:
            return None
        return end

    def end_logged(
        self, p: Progress, root: Path, end: ev.LoopComplete, capture_of: Callable[[str], str | None]
    ) -> RunResult:
        """Finish a run whose end `logged_end` found, running nothing and logging nothing
        again: its state written from the event, with the record of the step that ended it
        (kept before the event, but no state.json points to it yet); `capture_of` names what
        a state captures. The listeners are handed the end as it was logged."""
        if end.steps == p.step + 1 and isinstance(self.outputs, outputs_store.Outputs):
            where = self.outputs.following(self._records_end)
            try:
                kept = self.outputs.read(where) if where is not None else None
            except RunError:
                kept = None
            if where is not None and kept is not None and kept.get("state") == end.final_state:
                self._prev_ref = where
                name = capture_of(str(end.final_state))
                if name:
                    self._captured_refs[name] = where
                p.path.append(str(end.final_state))
        p.step = end.steps or p.step
        p.status = "finished"
        p.outcome, p.error = end.outcome, end.error
        p.exit_code = end.exit_code if end.exit_code is not None else OUTCOME_EXIT[end.outcome]
        p.final_state = end.final_state
        p.cost_usd = end.cost_usd or 0.0
        outputs = end.outputs or {}
        p.outputs = {
            k: v if isinstance(v, str) else json.dumps(v) for k, v in outputs.items()
        } or None
        duration_ms = end.duration_ms if isinstance(end.duration_ms, int) else self.elapsed_ms()
        self._t0 = self.clock.monotonic() - duration_ms / 1000.0
        self.persist(p)
        self.emitter.tell(end)
        return _result(p, root, duration_ms)

    def write_record(self, path: Path, value: Json) -> None:
        """A JSON record of the run's tree beside its state (a fork's `items.json` and
        `join.json`, a branch's `result.json`, a used answer): secrets sealed as markers (so
        `read_record` gives them back), written whole (a temporary file, then a rename)."""
        atomic_write_text(path, json.dumps(self.sealed(value), ensure_ascii=False) + "\n")

    def sealed(self, value: Json) -> Json:
        """`value` with this run's secrets sealed as markers (a record, a journal entry's)."""
        return self._sealer.seal(value) if self.redactor else value

    def read_record(self, path: Path) -> object:
        """A record `write_record` wrote, its secrets filled in again. Raises OSError or
        ValueError (a missing or torn file) for the caller to decide."""
        return self.unsealed(json.loads(path.read_text(encoding="utf-8")))

    def unsealed(self, value: object) -> object:
        """A value `sealed` gave, its secrets filled in again."""
        return self._sealer.unseal(value, self._sources) if self._sealer.nonce else value

    def crash_report(self, exc: BaseException) -> Path | None:
        """A bug's report in the run directory, every secret of the run masked in it."""
        from little_loops.crash import write_report

        return write_report(exc, self.run_dir.root, redact=self.redactor.text)

    # -- the end ---------------------------------------------------------------------------

    def release_lock(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def close(self) -> None:
        self.release_lock()
        self.sink.close()
        self.outputs.close()
        self.run_dir.close()


def _result(p: Progress, root: Path, duration_ms: int) -> RunResult:
    """What a run's end (`RunSession.end`, `end_logged`) returns, from the progress it wrote."""
    return RunResult(
        run_id=p.run_id,
        outcome=str(p.outcome),
        exit_code=int(p.exit_code or 0),
        final_state=str(p.final_state),
        steps=p.step,
        duration_ms=duration_ms,
        path=tuple(p.path),
        run_dir=root,
        error=p.error,
    )


def file_secrets(loop: Loop) -> list[str]:
    """The literal values the loop file itself gives its secret keys."""
    return [str(loop.context[k]) for k in loop.secrets if k in loop.context]


def _write_snapshot(loop: Loop, run_dir: RunDir, run_secrets: Redactor) -> None:
    """The file as it was at the start, so `ll resume` can tell what changed since; secret
    values (the run's, and literals the file gives its secret keys) are masked, since run
    directories get uploaded as CI artifacts. Resume compares digests of the original."""
    data = _masked_source(loop, run_secrets)
    if data is not None:
        (run_dir.root / "loop.yaml").write_bytes(data)


def _masked_source(loop: Loop, run_secrets: Redactor) -> bytes | None:
    try:
        if not stat.S_ISREG(os.stat(loop.path).st_mode):
            return None  # a pipe (`ll run /dev/stdin`) cannot be read twice
        data = loop.path.read_bytes()
    except OSError:
        return None
    redactor = Redactor([*run_secrets.values, *file_secrets(loop)])
    if redactor:
        text = data.decode("utf-8", "surrogateescape")
        data = redactor.text(text).encode("utf-8", "surrogateescape")
    return data


def tree_copy(run_root: Path, source_sha256: str) -> Path:
    """Where a child run's copy of its loop file is kept: one copy per tree per distinct
    source, `<root run>/loops/<sha256 of the source>.yaml` (the digest its state.json
    records as `loop_sha256`), instead of a copy in every child's directory."""
    from little_loops.record.questions import tree_root

    return tree_root(run_root) / "loops" / f"{source_sha256}.yaml"


def _keep_tree_copy(loop: Loop, run_dir: RunDir, run_secrets: Redactor) -> None:
    """A child run's copy of its file, made once per tree (`tree_copy`). A copy made by an
    earlier call is kept unless this run knows a secret it holds in clear (a call given
    other secret values): then it is made again with this run's masking."""
    if not loop.source_sha256:
        return
    path = tree_copy(run_dir.root, loop.source_sha256)
    # A fork's branches start children of one file at once, in threads of this process, and
    # a temp file's name holds only the process id: one writer at a time.
    with _TREE_COPIES:
        _keep_copy(loop, path, run_secrets)


_TREE_COPIES = threading.Lock()


def _keep_copy(loop: Loop, path: Path, run_secrets: Redactor) -> None:
    try:
        kept = path.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        kept = None
    except OSError:
        return  # a copy for the change summary only: never a reason to stop
    if kept is not None and (not run_secrets or run_secrets.text(kept) == kept):
        return
    data = _masked_source(loop, run_secrets)
    if data is None:
        return
    if kept is None:
        path.parent.mkdir(exist_ok=True)
    atomic_write_text(path, data.decode("utf-8", "surrogateescape"))
