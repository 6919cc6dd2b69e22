"""What people see during `ll run`: listens to events and draws them.

In a terminal: colours and a spinner that shows the running step's elapsed time and its latest
output line, while its action runs and while it is judged. Without a terminal (CI): the same
lines, plain, no ANSI codes, and a heartbeat line every 30 s while a step runs, so a CI job is
never silent for long. `--json`: the events themselves, one JSON object a line.
This and cli.py are the only modules that write to the terminal; rich is imported only here,
and only when stdout is a terminal.

Over 400 lines on purpose: the plain, rich and child views are one family of renderers over
`PlainRenderer`'s line layout, and `make_renderer` picks among them; in two modules the
subclasses and the factory would import each other.

A step reads as two lines, the step and what came of it, then the last lines it printed when
it did not succeed:

     2/10  draft   n=$(( $(cat '/tmp/tmp.kP5j'/round 2>/dev/null || echo 0) + 1 )) ...
           failure 0.93 "The notes say 'various improvements' but name..." 12 ms -> draft
     3/10  deploy  ./deploy.sh
           error "command not found: ./deploy.sh" 3 ms -> stop
               sh: 1: ./deploy.sh: not found
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable

from little_loops.model.details import EMPTY_DETAILS
from little_loops.model.records import replace
from little_loops.record.events import (
    ActionComplete,
    ActionStart,
    Answer,
    Ask,
    ChildComplete,
    ChildStart,
    Evaluate,
    JudgeFailOpen,
    JudgeStart,
    LockReclaimed,
    LoopComplete,
    LoopStart,
    Retry,
    Route,
    RunEvent,
    StateEnter,
    utc_ms,
)
from little_loops.record.history import History
from little_loops.report.fork_view import (
    ForkView,
    branch_line,
    header,
)
from little_loops.report.heartbeat import Heartbeat
from little_loops.report.terminal_text import (
    age,
    elapsed,
    last_line,
    printable,
)
from little_loops.report.terminal_text import clip as clip  # these three are also read from here
from little_loops.report.terminal_text import duration as duration
from little_loops.report.terminal_text import summary_line as summary_line

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import IO, Any

BAD = {"failure", "error", "timeout"}
HEARTBEAT_S = 30.0
_PATH_EVENTS = frozenset({"loop_start", "state_enter", "loop_complete"})
_INDENT = " " * 13
_TAIL_INDENT = " " * 15


def _ts_ms(ts: object) -> float | None:
    if not isinstance(ts, str) or not ts:
        return None
    if len(ts) == 24 and ts[10] == "T" and ts[23] == "Z":  # as utc_now writes them
        with contextlib.suppress(ValueError):
            return utc_ms(ts)
    from datetime import datetime  # (only for other forms: its import is a millisecond of start-up)

    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return None


class PlainRenderer:
    """Line-oriented output for pipes and CI logs."""

    def __init__(
        self,
        out: IO[str] | None = None,
        *,
        quiet: bool = False,
        width: int = 120,
        heartbeat: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.out = out or sys.stdout
        self.quiet = quiet
        self.width = width
        self.cap = 0
        self.clock = clock
        self._lock = threading.Lock()
        # The entries and the end of what the listener has seen: all its path needs (folding
        # every event would cost each step of a run some 20 µs more).
        self.history = History()
        self._shown: int | None = None  # the step whose header line is out
        self._action_ms: int | None = None
        self._began_ts: float | None = None  # the step's (or attempt's) first event, from ts
        self._step_ms: float | None = None
        self._verdict: Evaluate | None = None
        self._pending: Evaluate | None = None  # an evaluate whose result line is not out yet
        # The running step, for the spinner and the heartbeat.
        self.running: str | None = None
        self.phase = "running"
        self.since = 0.0
        self._chunks: tuple[bytes, ...] = (b"", b"")
        self._heartbeat = Heartbeat(heartbeat, self._beat, clock) if heartbeat > 0 else None
        # Quiet without a heartbeat, only the run's last line is shown: the emitter hands this
        # listener that one event, and the others cost a step nothing here (`listens_to`).
        self.listens_to: frozenset[str] | None = None
        if quiet and self._heartbeat is None:
            self.listens_to = frozenset({"loop_complete"})
        # A running child run's view (a fork's: its running branches), by state.
        self._children: dict[str, _ChildView | ForkView] = {}
        self.fork: ForkView | None = None  # the running fork's, for a terminal's live block

    def __call__(self, event: RunEvent) -> None:
        path = event.path
        if path:
            self._child_event(path, event)
            return
        if event.name in _PATH_EVENTS:
            self.history.feed(event)
        handler = getattr(self, f"on_{event.name}", None)
        if handler is not None:
            handler(event)

    def output(self, _name: str, chunk: bytes) -> None:
        """The runner's output hook: keeps the latest chunks for the progress line (cheap)."""
        self._chunks = (self._chunks[1], chunk)

    @property
    def output_hook(self) -> Callable[[str, bytes], None] | None:
        """`output` when a latest line can be shown (a spinner, a heartbeat); None when quiet
        without a heartbeat, which shows neither."""
        return None if self.listens_to is not None else self.output

    @property
    def latest_line(self) -> str:
        return last_line(self._chunks)

    # -- output; RichRenderer overrides these two --------------------------------------

    def write(self, text: str, style: str | None = None) -> None:
        if not self.quiet:
            with self._lock:
                self.out.write(text + "\n")
                self.out.flush()

    def final(self, text: str, style: str | None = None) -> None:
        with self._lock:
            self.out.write(text + "\n")
            self.out.flush()

    # -- events --------------------------------------------------------------------------

    def on_loop_start(self, event: LoopStart) -> None:
        self.cap = event.max_iterations or 0
        verb = "resuming" if event.resumed else "running"
        self.write(f"ll: {verb} {event.loop} (run {event.run_id}, at most {self.cap} steps)")

    @property
    def path(self) -> list[str]:
        """The states entered, one a step, in step order; once the run ended, only the
        finished steps (a step cut off by an interruption is re-run when resumed)."""
        end = self.history.complete
        return self.history.path if end is None else self.history.path_upto(end.steps)

    def on_state_enter(self, event: StateEnter) -> None:
        self._action_ms = self._step_ms = None
        self._began_ts = _ts_ms(event.ts)
        self._verdict = None
        self._pending = None
        self._chunks = (b"", b"")

    def on_action_start(self, event: ActionStart) -> None:
        self._header(event, event.action)
        self._began_ts = _ts_ms(event.ts)  # a retried attempt counts from its start
        self._chunks = (b"", b"")
        self._begin(event, "running")

    def on_action_complete(self, event: ActionComplete) -> None:
        self._action_ms = event.duration_ms

    def on_judge_start(self, event: JudgeStart) -> None:
        if self._shown != event.step:
            self._header(event, "(no action)")
        model = event.model
        self._begin(event, f"judging with {model}" if model else "judging")

    def on_evaluate(self, event: Evaluate) -> None:
        self._end()
        self.fork = None
        if self._shown != event.step:
            self._header(event, "(no action)")
        self._verdict = event
        self._pending = event
        self._step_ms = self._whole_step_ms(event)

    def on_retry(self, event: Retry) -> None:
        self._result(f"-> retry {event.attempt} in {float(event.delay_s or 0):.2f} s")
        self._shown = None

    def on_route(self, event: Route) -> None:
        if event.via == "maintain":
            self._pending = None
            self.write(f"{_INDENT}maintain -> {event.to}")
            return
        self._result(f"-> {event.to}")

    def on_ask(self, event: Ask) -> None:
        self._header(event, f"ask: {printable(event.prompt)}")

    def on_answer(self, event: Answer) -> None:
        if self._shown != event.step:  # asked before a resume: the step's line first
            self._header(event, f"answer to {event.question_id}")
        by = f" by {event.by}" if event.by else ""
        self.write(f"{_INDENT}answered '{event.answer}'{by} ({event.via})")

    def on_judge_fail_open(self, event: JudgeFailOpen) -> None:
        self.write(f"{_INDENT}judge failed; fail_open counts it as success: {event.error}")

    def on_child_start(self, event: ChildStart) -> None:
        """A `loop:` state: its line, then its child's steps inline, indented below it."""
        if event.kind == "branch":  # a fork's: its line once, its branches at their end
            name = str(event.state)
            if self._shown != event.step or not isinstance(self._children.get(name), ForkView):
                self._header(event, header(event))
                self.fork = self._children[name] = ForkView(self.clock)
                self._begin(event, "running")  # the heartbeat goes on while branches run
            return
        given = event.with_
        notes = [" ".join(f"{k}={v}" for k, v in given.items())] if given else []
        if event.resumed:
            notes.append("resumed")
        bound = ", ".join(notes)
        if given:
            bound = "with " + bound
        self._header(event, f"loop {event.file}" + (f"  ({bound})" if bound else ""))
        name = str(event.state)
        self._children[name] = _ChildView(self, name)

    def on_child_complete(self, event: ChildComplete) -> None:
        if event.branch is not None:
            name = str(event.state)
            if self._shown != event.step:  # a resumed fork: its branches read back
                self._header(event, "fork, resumed")
                self.fork = self._children[name] = ForkView(self.clock)
            self.write(branch_line(event, self.width), _style(event.verdict))

    def _child_event(self, path: tuple[str, ...], event: RunEvent) -> None:
        view = self._children.get(path[0])
        if view is None:
            return
        extra = {k: v for k, v in event.extra.items() if k != "path"}
        if len(path) > 1:
            extra["path"] = list(path[1:])
        view(replace(event, extra=extra))

    def on_lock_reclaimed(self, event: LockReclaimed) -> None:
        self.write(
            f"ll: took over the lock of run {event.previous_run_id} "
            f"(pid {event.previous_pid} is gone)"
        )

    def on_loop_complete(self, event: LoopComplete) -> None:
        self._end()
        if self._heartbeat is not None:
            self._heartbeat.close()
        if self._pending is not None:
            # The step that ended the run: no route follows it.
            self._result("-> stop" if self._pending.verdict != "success" else "")
        path = self.path
        if path:
            self.write(f"{_INDENT}path: " + " -> ".join(path))
        self.final(summary_line(event), "green" if event.outcome == "success" else "red")

    # -- progress ------------------------------------------------------------------------

    def _begin(self, event: RunEvent, phase: str) -> None:
        """A step's action or judge starts: the spinner and the heartbeat follow it."""
        if self.running is None:
            self.since = self.clock()
        self.running = str(event.state)
        self.phase = phase
        if self._heartbeat is not None:
            self._heartbeat.start(self.since)

    def _end(self) -> None:
        self.running = None
        if self._heartbeat is not None:
            self._heartbeat.stop()

    def progress_text(self) -> str:
        """`build running… 2m30s` (the spinner's words), from the clock at call time."""
        return f"{self.running} {self.phase}… {elapsed(self.clock() - self.since)}"

    def _beat(self, seconds: float) -> None:
        name = self.running
        if name is None:
            return
        line = f"… {name} still {self.phase} ({age(seconds)})"
        fork = self.fork
        branches = fork.running() if fork is not None else []
        latest = "branches running: " + ", ".join(branches) if branches else self.latest_line
        if latest:
            line += ": " + clip(latest, max(self.width - len(line) - 2, 20))
        self.final(line)

    # -- helpers -------------------------------------------------------------------------

    def _header(self, event: RunEvent, action: str) -> None:
        step = event.step
        counter = f"{step}/{self.cap}"
        if isinstance(step, int) and 0 < self.cap < step:
            counter = "limit"  # the on_max_iterations step, after the cap
        name = str(event.state)
        room = max(self.width - 14 - len(name), 20)
        self.write(f"{counter.rjust(6)}  {name}  {clip(action, room)}")
        self._shown = step

    def _whole_step_ms(self, event: Evaluate) -> float | None:
        """The step's time up to its verdict: the action and its judge, not the action alone."""
        parts = [p for p in (self._action_ms, event.details.latency_ms) if p is not None]
        summed = sum(parts)
        known = bool(parts)
        end = _ts_ms(event.ts)
        if self._began_ts is not None and end is not None and end - self._began_ts > summed:
            return end - self._began_ts
        return summed if known else None

    def _result(self, where: str) -> None:
        """The step's result line, then the last lines it printed when it did not succeed."""
        event = self._pending or self._verdict
        self._pending = None
        verdict = event.verdict if event is not None else "?"
        line = f"{_INDENT}{self._outcome()}"
        self.write(f"{line} {where}" if where else line, _style(verdict))
        if event is not None and event.tail:
            for text in event.tail:
                self.write(_TAIL_INDENT + clip(printable(str(text)), self.width - 16), "dim")

    def _outcome(self) -> str:
        """`failure 0.93 "reason" 12 ms` for the step that just finished."""
        v = self._verdict
        parts = [v.verdict if v is not None else "?"]
        details = v.details if v is not None else EMPTY_DETAILS
        confidence = details.confidence
        judged = v is not None and v.type not in ("", "exit_code") and v.verdict != "error"
        if judged and confidence is not None:
            parts.append(f"{confidence:.2f}")
        reason = (v.reason if v is not None else None) or details.reason or details.error
        if reason:
            parts.append(json.dumps(clip(reason, max(70, self.width - 50)), ensure_ascii=False))
        if self._step_ms is not None:
            parts.append(duration(self._step_ms))
        return " ".join(parts)


class _ChildView(PlainRenderer):
    """The lines of a child run, written through its caller's view, indented one level."""

    def __init__(self, caller: PlainRenderer, name: str) -> None:
        super().__init__(caller.out, quiet=caller.quiet, width=max(caller.width - 6, 40))
        self.caller = caller
        self.name = name  # the calling state

    def write(self, text: str, style: str | None = None) -> None:
        self.caller.write(_CHILD_INDENT + text, style)

    def final(self, text: str, style: str | None = None) -> None:
        self.write(text, style)

    def on_loop_start(self, event: LoopStart) -> None:
        self.cap = event.max_iterations or 0

    def _begin(self, event: RunEvent, phase: str) -> None:
        # The caller's heartbeat (and spinner words) follow the child's running step.
        self.caller._begin(replace(event, state=f"{self.name}/{event.state}"), phase)

    def _end(self) -> None:
        self.caller._end()

    def on_lock_reclaimed(self, event: LockReclaimed) -> None:
        return

    def on_loop_complete(self, event: LoopComplete) -> None:
        if self._pending is not None:
            self._result("-> stop" if self._pending.verdict != "success" else "")
        ms = event.duration_ms
        steps = event.steps
        took = f" {duration(ms)}" if isinstance(ms, int | float) else ""
        line = f"{event.final_state} ({event.outcome}) {steps} steps{took}"
        error = event.error
        if isinstance(error, str) and error:
            line += f": {clip(error, max(self.width - len(line) - 2, 20))}"
        self.write(line, "green" if event.outcome == "success" else "red")


_CHILD_INDENT = " " * 6


def _style(verdict: str) -> str:
    base = verdict.removesuffix("_uncertain")
    if verdict.endswith("_uncertain") or verdict in ("timeout", "cancelled"):
        return "yellow"
    return "red" if base in BAD else "green"


class _Spinning:
    """The spinner's words, drawn afresh at every refresh: elapsed time and the latest line."""

    def __init__(self, renderer: RichRenderer) -> None:
        self.renderer = renderer

    def __rich__(self) -> Any:
        from rich.text import Text

        r = self.renderer
        if r.fork is not None:  # a fork: a row per running branch
            return Text("\n".join(r.fork.rows(r.width)), style="dim")
        text = Text(r.progress_text() if r.running else "")
        latest = r.latest_line if r.running else ""
        if latest:
            room = max(r.width - len(text) - 6, 10)
            text.append("  " + clip(latest, room), style="dim")
        return text


class RichRenderer(PlainRenderer):
    """A terminal view: the same lines in colour, and a spinner while a step runs."""

    def __init__(
        self,
        *,
        quiet: bool = False,
        verbose: bool = False,
        console: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from rich.console import Console

        self.console = console or Console(highlight=False)
        super().__init__(sys.stdout, quiet=quiet, width=self.console.width, clock=clock)
        self.verbose = verbose
        self._status: Any = None

    def write(self, text: str, style: str | None = None) -> None:
        if not self.quiet:
            self.console.print(text, style=style, markup=False, overflow="ellipsis", no_wrap=True)

    def final(self, text: str, style: str | None = None) -> None:
        self._stop()
        self.console.print(text, style=style, markup=False)

    def on_action_start(self, event: ActionStart) -> None:
        super().on_action_start(event)
        if not self.verbose:
            self._spin()

    def on_action_complete(self, event: ActionComplete) -> None:
        self._stop()
        super().on_action_complete(event)

    def on_judge_start(self, event: JudgeStart) -> None:
        self._stop()
        super().on_judge_start(event)
        self._spin()

    def on_evaluate(self, event: Evaluate) -> None:
        self._stop()
        super().on_evaluate(event)

    def on_child_start(self, event: ChildStart) -> None:
        super().on_child_start(event)
        if event.kind == "branch":
            self._spin()

    def on_child_complete(self, event: ChildComplete) -> None:
        if event.branch is None:
            return
        self._stop()  # the line goes above the block, which is drawn again below it
        super().on_child_complete(event)
        if self.fork is not None and self.fork.rows(self.width):
            self._spin()

    def _spin(self) -> None:
        if not self.quiet and self._status is None:
            self._status = self.console.status(_Spinning(self))
            self._status.start()

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


class JsonRenderer:
    """`--json`: every event as one JSON line on stdout."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stdout

    def __call__(self, event: RunEvent) -> None:
        self.out.write(
            json.dumps(event.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
        )
        self.out.flush()


def make_renderer(
    *, json_mode: bool, quiet: bool, verbose: bool, heartbeat: float | None = None
) -> Any:
    """The right listener for this terminal and these flags.

    `heartbeat`: seconds between "still running" lines without a terminal; None means 30 s,
    or none with `--quiet`; 0 turns them off.
    """
    if json_mode:
        return JsonRenderer()
    if sys.stdout.isatty() and os.environ.get("TERM") != "dumb":
        return RichRenderer(quiet=quiet, verbose=verbose)
    if heartbeat is None:
        heartbeat = 0.0 if quiet else HEARTBEAT_S
    return PlainRenderer(quiet=quiet, heartbeat=heartbeat)


def output_streamer(json_mode: bool) -> Any:
    """`--verbose`: copy each chunk of action output to the terminal as it arrives.

    With `--json` stdout carries only events, so the output goes to stderr instead.
    """
    target = sys.stderr if json_mode else sys.stdout

    def stream(_name: str, chunk: bytes) -> None:
        target.flush()
        target.buffer.write(chunk)
        target.buffer.flush()

    return stream
