"""What people see during `ll run`: listens to events and draws them.

In a terminal: a rich view with a spinner while an action runs. Without a terminal (CI):
plain lines, no ANSI codes. `--json`: the events themselves, one JSON object a line.
This and cli.py are the only modules that write to the terminal; rich is imported only here,
and only when stdout is a terminal.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

from .events import Event


def _seconds(ms: object) -> str:
    return f"{(ms if isinstance(ms, int | float) else 0) / 1000:.2f}s"


def _verdict_note(event: Event) -> str:
    details = event.get("details") or {}
    parts: list[str] = []
    confidence = details.get("confidence")
    if isinstance(confidence, int | float) and event.get("type") != "exit_code":
        parts.append(f"confidence {confidence:.2f}")
    reason = details.get("reason") or details.get("error")
    if isinstance(reason, str) and reason:
        parts.append(reason if len(reason) <= 100 else reason[:97] + "...")
    return f" ({'; '.join(parts)})" if parts else ""


def summary_line(event: Event) -> str:
    """The last line of a run, also all that `--quiet` prints."""
    outcome = event.get("outcome")
    steps = event.get("steps")
    where = event.get("final_state")
    plural = "s" if steps != 1 else ""
    took = _seconds(event.get("duration_ms"))
    line = f"ll: {outcome} at '{where}' after {steps} step{plural} in {took}"
    cost = event.get("cost_usd")
    if isinstance(cost, int | float) and cost > 0:
        line += f", cost ${cost:.4f}"
    if event.get("error"):
        line += f": {event['error']}"
    return line


class PlainRenderer:
    """Line-oriented output for pipes and CI logs."""

    def __init__(self, out: IO[str] | None = None, *, quiet: bool = False) -> None:
        self.out = out or sys.stdout
        self.quiet = quiet
        self.max_iterations: int = 0
        self.path: list[str] = []
        self._verdict: dict[str, Any] = {}

    def __call__(self, event: Event) -> None:
        name = event["event"]
        handler = getattr(self, f"on_{name}", None)
        if handler is not None:
            handler(event)

    def write(self, text: str) -> None:
        if not self.quiet:
            self.out.write(text + "\n")
            self.out.flush()

    def on_loop_start(self, event: Event) -> None:
        self.max_iterations = int(event.get("max_iterations") or 0)
        verb = "resuming" if event.get("resumed") else "running"
        cap = self.max_iterations
        self.write(f"ll: {verb} {event.get('loop')} (run {event['run_id']}, at most {cap} steps)")

    def on_state_enter(self, event: Event) -> None:
        self.path.append(str(event.get("state")))

    def on_action_start(self, event: Event) -> None:
        action = str(event.get("action", "")).replace("\n", " ")
        if len(action) > 120:
            action = action[:117] + "..."
        self.write(f"[{event.get('step')}/{self.max_iterations}] {event.get('state')}: {action}")

    def on_evaluate(self, event: Event) -> None:
        self._verdict = event

    def on_retry(self, event: Event) -> None:
        self.write(
            f"    retry {event.get('attempt')} after {event.get('verdict')} "
            f"(waiting {event.get('delay_s')}s)"
        )

    def on_route(self, event: Event) -> None:
        verdict = self._verdict
        took = ""
        if verdict.get("state") == event.get("state"):
            took = _verdict_note(verdict)
        self.write(
            f"    {event.get('verdict')}{took} -> {event.get('to')} (via {event.get('via')})"
        )

    def on_judge_fail_open(self, event: Event) -> None:
        self.write(f"    judge failed, fail_open turned it into success: {event.get('error', '')}")

    def on_loop_complete(self, event: Event) -> None:
        if self.path:
            self.write("    path: " + " -> ".join(self.path))
        self.out.write(summary_line(event) + "\n")
        self.out.flush()


class RichRenderer(PlainRenderer):
    """A terminal view: colours, a spinner while the action runs, the route taken after."""

    def __init__(self, *, quiet: bool = False, verbose: bool = False) -> None:
        from rich.console import Console

        super().__init__(sys.stdout, quiet=quiet)
        self.console = Console(highlight=False)
        self.verbose = verbose
        self._status: Any = None

    def write(self, text: str) -> None:
        if not self.quiet:
            self.console.print(text, markup=False)

    def on_action_start(self, event: Event) -> None:
        super().on_action_start(event)
        if not self.quiet and not self.verbose:
            self._status = self.console.status(f"running {event.get('state')}...")
            self._status.start()

    def on_action_complete(self, event: Event) -> None:
        self._stop()
        took = _seconds(event.get("duration_ms"))
        if event.get("timed_out"):
            self.write(f"    timed out after {took}")
        else:
            self.write(f"    exit {event.get('exit_code')} in {took}")

    def on_loop_complete(self, event: Event) -> None:
        self._stop()
        if self.path and not self.quiet:
            self.console.print("    path: " + " -> ".join(self.path), markup=False)
        style = "green" if event.get("outcome") == "success" else "red"
        self.console.print(summary_line(event), style=style, markup=False)

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
