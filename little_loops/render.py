"""What people see during `ll run`: listens to events and draws them.

In a terminal: colours and a spinner while an action runs. Without a terminal (CI): the same
lines, plain, no ANSI codes. `--json`: the events themselves, one JSON object a line.
This and cli.py are the only modules that write to the terminal; rich is imported only here,
and only when stdout is a terminal.

A step reads as two lines, the step and what came of it:

     2/10  draft   n=$(( $(cat '/tmp/tmp.kP5j'/round 2>/dev/null || echo 0) + 1 )) ...
           failure 0.93 "The notes say 'various improvements' but name..." 12 ms -> draft
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

from .events import Event

BAD = {"failure", "error", "timeout"}


def duration(ms: object) -> str:
    value = float(ms) if isinstance(ms, int | float) else 0.0
    if value < 1000:
        return f"{value:.0f} ms"
    if value < 60_000:
        return f"{value / 1000:.2f} s"
    minutes, seconds = divmod(int(value / 1000), 60)
    return f"{minutes}m {seconds:02d}s"


def clip(text: str, width: int) -> str:
    """The first line of `text`, cut to `width` characters with '...' when anything was left."""
    first, _, rest = text.strip().partition("\n")
    if len(first) > width or rest:
        return first[: max(width - 3, 1)].rstrip() + "..."
    return first


def summary_line(event: Event) -> str:
    """The last line of a run, also all that `--quiet` prints."""
    steps = event.get("steps")
    plural = "s" if steps != 1 else ""
    line = (
        f"ll: {event.get('outcome')} at '{event.get('final_state')}' after {steps} "
        f"step{plural} in {duration(event.get('duration_ms'))}"
    )
    cost = event.get("cost_usd")
    if isinstance(cost, int | float) and cost > 0:
        line += f", cost ${cost:.4f}"
    if event.get("error"):
        line += f": {event['error']}"
    return line


class PlainRenderer:
    """Line-oriented output for pipes and CI logs."""

    def __init__(self, out: IO[str] | None = None, *, quiet: bool = False, width: int = 120):
        self.out = out or sys.stdout
        self.quiet = quiet
        self.width = width
        self.cap = 0
        self._entered: dict[int, str] = {}  # step -> state; a re-run step replaces its entry
        self._shown: int | None = None  # the step whose header line is out
        self._action_ms: object = None
        self._exit: object = None
        self._verdict: Event = {}

    def __call__(self, event: Event) -> None:
        handler = getattr(self, f"on_{event['event']}", None)
        if handler is not None:
            handler(event)

    # -- output; RichRenderer overrides these two --------------------------------------

    def write(self, text: str, style: str | None = None) -> None:
        if not self.quiet:
            self.out.write(text + "\n")
            self.out.flush()

    def final(self, text: str, style: str | None = None) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    # -- events --------------------------------------------------------------------------

    def on_loop_start(self, event: Event) -> None:
        self.cap = int(event.get("max_iterations") or 0)
        verb = "resuming" if event.get("resumed") else "running"
        self.write(
            f"ll: {verb} {event.get('loop')} (run {event['run_id']}, at most {self.cap} steps)"
        )

    @property
    def path(self) -> list[str]:
        """The states entered, one a step, in step order."""
        return [self._entered[step] for step in sorted(self._entered)]

    def on_state_enter(self, event: Event) -> None:
        step = event.get("step")
        key = step if isinstance(step, int) else max(self._entered, default=0) + 1
        self._entered[key] = str(event.get("state"))
        self._action_ms = self._exit = None
        self._verdict = {}

    def on_action_start(self, event: Event) -> None:
        self._header(event, str(event.get("action", "")))

    def on_action_complete(self, event: Event) -> None:
        self._action_ms = event.get("duration_ms")
        self._exit = event.get("exit_code")

    def on_evaluate(self, event: Event) -> None:
        if self._shown != event.get("step"):
            self._header(event, "(no action)")
        self._verdict = event

    def on_retry(self, event: Event) -> None:
        self.write(
            f"{'':13}{self._outcome()} -> retry {event.get('attempt')} "
            f"in {float(event.get('delay_s') or 0):.2f} s",
            "yellow",
        )
        self._shown = None

    def on_route(self, event: Event) -> None:
        if event.get("via") == "maintain":
            self.write(f"{'':13}maintain -> {event.get('to')}")
            return
        verdict = str(event.get("verdict"))
        self.write(f"{'':13}{self._outcome()} -> {event.get('to')}", _style(verdict))

    def on_judge_fail_open(self, event: Event) -> None:
        self.write(f"{'':13}judge failed; fail_open counts it as success: {event.get('error', '')}")

    def on_lock_reclaimed(self, event: Event) -> None:
        self.write(
            f"ll: took over the lock of run {event.get('previous_run_id')} "
            f"(pid {event.get('previous_pid')} is gone)"
        )

    def on_loop_complete(self, event: Event) -> None:
        # Only finished steps: a step cut off by an interruption is re-run when resumed.
        steps = event.get("steps")
        if isinstance(steps, int):
            for cut_off in [step for step in self._entered if step > steps]:
                del self._entered[cut_off]
        if self._entered:
            self.write(f"{'':13}path: " + " -> ".join(self.path))
        self.final(summary_line(event), "green" if event.get("outcome") == "success" else "red")

    # -- helpers -------------------------------------------------------------------------

    def _header(self, event: Event, action: str) -> None:
        counter = f"{event.get('step')}/{self.cap}".rjust(6)
        name = str(event.get("state"))
        room = max(self.width - 14 - len(name), 20)
        self.write(f"{counter}  {name}  {clip(action, room)}")
        self._shown = event.get("step")

    def _outcome(self) -> str:
        """`failure 0.93 "reason" 12 ms` for the step that just finished."""
        v = self._verdict
        parts = [str(v.get("verdict", "?"))]
        details = v.get("details") or {}
        confidence = details.get("confidence")
        judged = v.get("type") not in (None, "exit_code") and v.get("verdict") != "error"
        if judged and isinstance(confidence, int | float):
            parts.append(f"{confidence:.2f}")
        reason = details.get("reason") or details.get("error")
        if isinstance(reason, str) and reason:
            parts.append(json.dumps(clip(reason, 70), ensure_ascii=False))
        if self._action_ms is not None:
            parts.append(duration(self._action_ms))
        return " ".join(parts)


def _style(verdict: str) -> str:
    base = verdict.removesuffix("_uncertain")
    if verdict.endswith("_uncertain") or verdict == "timeout":
        return "yellow"
    return "red" if base in BAD else "green"


class RichRenderer(PlainRenderer):
    """A terminal view: the same lines in colour, and a spinner while an action runs."""

    def __init__(self, *, quiet: bool = False, verbose: bool = False) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        super().__init__(sys.stdout, quiet=quiet, width=self.console.width)
        self.verbose = verbose
        self._status: Any = None

    def write(self, text: str, style: str | None = None) -> None:
        if not self.quiet:
            self.console.print(text, style=style, markup=False, overflow="ellipsis", no_wrap=True)

    def final(self, text: str, style: str | None = None) -> None:
        self._stop()
        self.console.print(text, style=style, markup=False)

    def on_action_start(self, event: Event) -> None:
        super().on_action_start(event)
        if not self.quiet and not self.verbose:
            self._status = self.console.status(f"{event.get('state')} is running...")
            self._status.start()

    def on_action_complete(self, event: Event) -> None:
        self._stop()
        super().on_action_complete(event)

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


class JsonRenderer:
    """`--json`: every event as one JSON line on stdout."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stdout

    def __call__(self, event: Event) -> None:
        self.out.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.out.flush()


def make_renderer(*, json_mode: bool, quiet: bool, verbose: bool) -> Any:
    """The right listener for this terminal and these flags."""
    if json_mode:
        return JsonRenderer()
    if sys.stdout.isatty() and os.environ.get("TERM") != "dumb":
        return RichRenderer(quiet=quiet, verbose=verbose)
    return PlainRenderer(quiet=quiet)


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
