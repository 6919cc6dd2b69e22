"""Run management: what `ll list`, `status`, `history`, `logs` and `stop` show and do."""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from little_loops.errors import (
    EXIT_RUN_ERROR,
    EXIT_SUSPENDED,
    EXIT_USAGE,
    LoopError,
)
from little_loops.record.events import (
    Event,
    EventLog,
    Listener,
)
from little_loops.record.history import (
    History,
    Step,
)
from little_loops.record.questions import (
    Question,
    recorded_answer,
    tree_pending,
    tree_root,
)
from little_loops.record.store import (
    RunDir,
    find_run,
    list_runs,
    newest_first,
    owner_alive,
    run_names,
)

LIST_LIMIT = 20  # `ll list` shows this many runs unless told `--limit N` or `--all`


@dataclass(frozen=True)
class RunInfo:
    """One run as the listings show it."""

    run_id: str
    loop: str
    file: str
    status: str  # running, finished, interrupted, paused (by `ll step`), crashed, suspended
    outcome: str | None
    step: int
    max_iterations: int
    current: str
    started_at: str
    elapsed_ms: int
    cost_usd: float
    pid: int
    error: str | None = None
    pending: tuple[Question, ...] = ()  # questions waiting for an answer

    @property
    def shown_status(self) -> str:
        """`suspended (2 questions)` for a run waiting on answers; else the status."""
        if self.status != "suspended":
            return self.status
        n = len(self.pending)
        return f"suspended ({n} question{'s' if n != 1 else ''})"


def info(run_dir: RunDir) -> RunInfo:
    state = run_dir.read_state()
    status = str(state.get("status", "?"))
    pid = int(state.get("pid") or 0)
    if status == "running" and owner_alive(run_dir, state) is False:
        status = "crashed"  # the owner died without a word: resumable
    if status == "interrupted" and state.get("exit_code") == EXIT_SUSPENDED:
        status = "paused"  # by `ll step`: stored as interrupted, so it resumes like one
    loop_file = str(state.get("loop_file", ""))
    return RunInfo(
        run_id=run_dir.run_id,
        loop=_loop_name(run_dir, loop_file),
        file=loop_file,
        status=status,
        outcome=state.get("outcome"),
        step=int(state.get("step", 0)),
        max_iterations=int(state.get("max_iterations", 0)),
        current=str(state.get("current", "")),
        started_at=str(state.get("started_at", "")),
        elapsed_ms=int(state.get("elapsed_ms", 0)),
        cost_usd=float(state.get("cost_usd", 0.0)),
        pid=pid,
        error=error if isinstance(error := state.get("error"), str) else None,
        pending=tuple(tree_pending(run_dir.root, state)) if status != "finished" else (),
    )


def _loop_name(run_dir: RunDir, loop_file: str) -> str:
    start = History.from_events(_head_events(run_dir)).start
    return start.loop if start is not None else Path(loop_file).stem


def _head_events(run_dir: RunDir) -> list[Event]:
    """The first few events, without reading a long log whole."""
    return EventLog(run_dir.events_path).head(3)


def _duration(ms: int) -> str:
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _started(text: str) -> str:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return text


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _infos(base: Path) -> list[RunInfo]:
    out = []
    for run_dir in list_runs(base):
        try:
            out.append(info(run_dir))
        except LoopError:
            continue  # a corrupt run shows up in `ll status RUN` with its error
    return out


def list_text(base: Path, limit: int | None = LIST_LIMIT) -> str:
    """`ll list`: the newest `limit` runs here (every run when None), newest first.

    Only the state files of the runs shown are read: run ids begin with their start time, so
    the newest runs are the greatest names, read from the end of the runs' index when it is
    true (record/run_index.py) rather than by listing the folder. When older runs are left
    out, a last line says how many and how to see them.
    """
    names = run_names(base)
    infos: list[RunInfo] = []
    looked: set[str] = set()
    for run_dir in newest_first(base, names):
        if limit is not None and len(infos) >= limit:
            break
        looked.add(run_dir.run_id)
        try:
            infos.append(info(run_dir))
        except LoopError:
            continue  # a corrupt run shows up in `ll status RUN` with its error
    if not infos:
        return "no runs here yet; start one with 'll run FILE'\n"
    rows = [["RUN", "LOOP", "STATUS", "STEP", "STARTED (UTC)", "DURATION"]]
    for i in infos:
        status = i.shown_status if i.outcome is None or i.status != "finished" else i.outcome
        rows.append(
            [
                i.run_id,
                i.loop,
                status,
                f"{i.step}/{i.max_iterations}",
                _started(i.started_at),
                _duration(i.elapsed_ms),
            ]
        )
    text = _table(rows) + "\n"
    if limit is not None:
        # Counted by name, not read (a run that lost its state file still counts). Names
        # that begin with a dot (an editor's or a file manager's) sort last: left out.
        older = names.total - names.hidden - len(looked)
        if older:
            runs = "run" if older == 1 else "runs"
            text += f"{older:,} older {runs} not shown; see every run with: ll list --all\n"
    return text


def history_text(base: Path, loop: str | None) -> str:
    """`ll history [LOOP]`: finished and stopped runs, newest first, with their outcomes."""
    infos = [i for i in _infos(base) if loop is None or loop in (i.loop, i.file, Path(i.file).name)]
    if not infos:
        target = f" of '{loop}'" if loop else ""
        return f"no runs{target} here yet\n"
    rows = [["STARTED (UTC)", "RUN", "LOOP", "OUTCOME", "STEPS", "DURATION", "COST"]]
    for i in reversed(infos):
        rows.append(
            [
                _started(i.started_at),
                i.run_id,
                i.loop,
                i.outcome or i.status,
                str(i.step),
                _duration(i.elapsed_ms),
                f"${i.cost_usd:.4f}" if i.cost_usd else "-",
            ]
        )
    return _table(rows) + "\n"


def status_text(base: Path, run_id: str | None) -> str:
    """`ll status [RUN]`: where a run is, its last verdicts, time and cost so far."""
    run_dir = find_run(base, run_id)
    i = info(run_dir)
    verdicts = History.from_file(run_dir.events_path).evaluations[-5:]
    elapsed = i.elapsed_ms
    if i.status == "running":
        started = _started_epoch(i.started_at)
        if started is not None:
            elapsed = max(elapsed, int((time.time() - started) * 1000))
    root = tree_root(run_dir.root)
    answers = {q.id: recorded_answer(root, q) for q in i.pending}
    error = i.error
    if i.pending and all(answers.values()):  # `ll answer` gave them all: nothing waits
        error = f"answered; continue it with: ll resume {i.run_id}"
    lines = [
        f"run:     {i.run_id}",
        f"loop:    {shown(i.loop)} ({shown(i.file)})",
        f"status:  {i.shown_status}"
        + (
            f" ({i.outcome})"
            if i.outcome and i.outcome not in (i.status, "interrupted", "suspended")
            else ""
        )
        + (f": {shown(error)}" if error else ""),
        f"state:   {shown(i.current)}",
        f"step:    {i.step}/{i.max_iterations}",
        f"elapsed: {_duration(elapsed)}",
        f"cost:    ${i.cost_usd:.4f}",
    ]
    if i.status == "running":
        lines.append(f"pid:     {i.pid}")
    if verdicts:
        lines.append("last verdicts:")
        for e in verdicts:
            reason = e.reason or e.details.reason or e.details.error
            note = f" - {shown(reason)}" if reason else ""
            lines.append(f"  step {e.step} {shown(e.state)}: {shown(e.verdict)}{note}")
    if i.pending:
        lines.append("questions:")
        for q in i.pending:
            expires = f" (expires {q.expires_at})" if q.expires_at else ""
            lines.append(f"  {shown(q.id)}: {shown(q.prompt)}{shown(expires)}")
            given = answers.get(q.id)
            if given is not None:
                by = f" by {shown(given.by)}" if given.by else ""
                answer = shown(given.answer)
                lines.append(f"    answered: {answer}{by} (ll resume {i.run_id})")
                continue
            choices = shown("|".join(q.choices) or "TEXT")
            key = f"{shown(q.id)}=" if len(i.pending) > 1 else ""
            lines.append(f"    answer: ll resume {i.run_id} --answer {key}{choices}")
    if i.status == "paused":
        lines.append(f"continue with: ll step {i.run_id} (or ll resume {i.run_id})")
    elif i.status in ("interrupted", "crashed"):
        lines.append(f"resume with: ll resume {i.run_id}")
    return "\n".join(lines) + "\n"


# Escapes a terminal would act on (CSI, OSC to its end, DCS/SOS/PM/APC strings, two-byte
# ones), then any other control character; a newline or tab becomes a space.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def shown(value: object) -> str:
    """A value from a run's files (a question built from captured text, a reason, an error)
    as one printable line: no terminal escapes, no control characters, no line breaks."""
    text = _ESCAPES.sub("", str(value))
    return _CONTROLS.sub(lambda m: " " if m.group() in "\n\t\r" else "", text)


def _started_epoch(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def stop(base: Path, run_id: str, *, wait: float = 10.0) -> str:
    """`ll stop RUN`: SIGTERM to the run's owner; it stops its action and persists the stop."""
    run_dir = find_run(base, run_id)
    i = info(run_dir)
    if i.status == "crashed":
        raise LoopError(
            f"run {i.run_id} is not running (crashed; pid {i.pid} is no longer its ll "
            f"process); resume it with 'll resume {i.run_id}'",
            exit_code=EXIT_RUN_ERROR,
        )
    if i.status != "running":
        raise LoopError(f"run {i.run_id} is not running ({i.status})", exit_code=EXIT_RUN_ERROR)
    state = run_dir.read_state()
    if owner_alive(run_dir, state) is None:
        raise LoopError(
            f"run {i.run_id}: cannot confirm that pid {i.pid} still runs it (no start time "
            "recorded and no lock to ask); check with 'ps -p "
            f"{i.pid}' and stop that process yourself if it is ll",
            exit_code=EXIT_RUN_ERROR,
        )
    try:
        _terminate(i.pid, state.get("pid_start"))
    except ProcessLookupError:
        return f"run {i.run_id} had already ended\n"
    except PermissionError:
        raise LoopError(
            f"run {i.run_id}: not allowed to signal pid {i.pid} (it belongs to another user); "
            "stop it as that user",
            exit_code=EXIT_RUN_ERROR,
        ) from None

    def running() -> bool:
        return owner_alive(run_dir, state) is True

    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and running():
        time.sleep(0.05)
    if running():
        return f"sent SIGTERM to run {i.run_id} (pid {i.pid}); it is still stopping\n"
    return f"stopped run {i.run_id}; resume with: ll resume {i.run_id}\n"


def _terminate(pid: int, started: object) -> None:
    """SIGTERM to `pid`, through a pidfd where the platform has one, checking after opening it
    that it is still the process that started at `started` (so a pid reused between the check
    and the signal is never hit)."""
    from little_loops.record.store import process_start

    opener = getattr(os, "pidfd_open", None)
    send = getattr(signal, "pidfd_send_signal", None)
    if opener is None or send is None or not isinstance(started, int):
        os.kill(pid, signal.SIGTERM)
        return
    try:
        fd = opener(pid)
    except OSError as exc:
        if isinstance(exc, ProcessLookupError | PermissionError):
            raise
        os.kill(pid, signal.SIGTERM)
        return
    try:
        if process_start(pid) != started:
            raise ProcessLookupError(pid)
        send(fd, signal.SIGTERM)
    finally:
        os.close(fd)


def follow(
    run_dir: RunDir,
    listener: Listener,
    *,
    follow: bool,
    poll: float = 0.2,
) -> None:
    """Feed a run's events (typed records) to `listener`; with `follow`, keep reading until
    the run ends."""
    log = EventLog(run_dir.events_path)
    last_round = not follow
    while True:
        for event in log.records():  # whole lines only: the run may be writing the next one
            listener(event)
        if last_round:
            return
        try:
            state = run_dir.read_state()
        except LoopError:
            state = {}
        if state.get("status") != "running" or owner_alive(run_dir, state) is False:
            last_round = True  # the run ended or its owner is gone: show what is left
            continue
        time.sleep(poll)


@dataclass(frozen=True)
class StepOutput:
    """One attempt of a step and what its action printed (None: nothing)."""

    step: int
    state: str
    attempt: int
    output: bytes | None
    label: str | None = None  # a child's or a branch's step: its path (`call/inner/s`)


def step_outputs(run_dir: RunDir, step: int) -> list[StepOutput]:
    """Every attempt of step `step`, in order, with what it printed: its part of the run's
    `steps.log` (found through its `action_start` events), or its file under `steps/` for a
    run an older ll recorded. On a `loop:` or fork step, what every action step below it
    printed, each labelled with its path in the tree.

    A step that printed nothing is still listed when the events know it. Raises a one-line
    usage error when the run has no such step.
    """
    history = History.from_file(run_dir.events_path)
    told = history.get(step)
    found = _attempts(run_dir.root, history, step, told)
    if told is not None and not any(o.output for o in found.values()):
        below = _outputs_below(history, told)
        if below:  # a `loop:` state or a fork: what its child's or branches' steps printed
            return below
    if not found:
        steps = [s.step for s in history.steps]
        known = f"its steps are 1 to {steps[-1]}" if steps else "it has no steps yet"
        raise LoopError(
            f"run {run_dir.run_id} has no step {step}; {known} (see 'll logs {run_dir.run_id}')",
            exit_code=EXIT_USAGE,
        )
    return [found[attempt] for attempt in sorted(found)]


def _attempts(
    root: Path, history: History, step: int, told: Step | None, label: str | None = None
) -> dict[int, StepOutput]:
    """What each attempt of `step` of the run in `root` printed, by attempt."""
    import re

    from little_loops.record.store import RunLog

    pattern = re.compile(rf"^{step:04d}-(.+?)(?:-attempt(\d+))?\.log$")
    found: dict[int, StepOutput] = {}
    for log in sorted((root / "steps").glob(f"{step:04d}-*.log")):
        match = pattern.match(log.name)
        if match and not log.is_symlink():
            attempt = int(match.group(2) or 1)
            state = label or match.group(1)
            found[attempt] = StepOutput(step, state, attempt, log.read_bytes(), label)
    if told is not None:
        for attempt in range(1, told.attempts + 1):
            ranges = history.log_ranges(told, attempt)
            data = b"".join(RunLog.read(root, a, b) for a, b in ranges)
            if data or attempt not in found:
                state = label or told.state
                found[attempt] = StepOutput(step, state, attempt, data or None, label)
    return found


def _outputs_below(history: History, told: Step) -> list[StepOutput]:
    """Every attempt of every action step in the child run (or the branches) of a step."""
    out: list[StepOutput] = []
    for node in history.below(told):
        visit, run = node.step, node.run
        if visit.action is None or run.dir is None:
            continue  # a `loop:` state or a fork inside: its own steps follow
        found = _attempts(run.dir, run, visit.step, visit, node.where)
        out.extend(found[attempt] for attempt in sorted(found))
    return out
