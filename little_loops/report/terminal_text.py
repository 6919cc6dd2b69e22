"""The words of the terminal output: durations, clipped and printable lines, the run's last line."""

from __future__ import annotations

import re

from little_loops.record.events import LoopComplete

# ANSI escape sequences and the other control characters a program may print.
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")


def duration(ms: object) -> str:
    value = float(ms) if isinstance(ms, int | float) else 0.0
    if value < 1000:
        return f"{value:.0f} ms"
    if value < 60_000:
        return f"{value / 1000:.2f} s"
    minutes, seconds = divmod(int(value / 1000), 60)
    return f"{minutes}m {seconds:02d}s"


def elapsed(seconds: float) -> str:
    """A running step's age: `3.1 s`, `45 s`, `2m30s`, `1h05m`."""
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f} s"
    if seconds < 60:
        return f"{int(seconds)} s"
    return age(seconds)


def age(seconds: float) -> str:
    """A heartbeat's elapsed time, in whole seconds: `45s`, `2m30s`, `1h05m`."""
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def clip(text: str, width: int) -> str:
    """The first line of `text`, cut to `width` characters with '...' when anything was left."""
    first, _, rest = text.strip().partition("\n")
    if len(first) > width or rest:
        return first[: max(width - 3, 1)].rstrip() + "..."
    return first


def printable(line: str) -> str:
    """A line of program output without colour codes or control characters."""
    return _CONTROL.sub("", line).rstrip()


def summary_line(event: LoopComplete) -> str:
    """The last line of a run, also all that `--quiet` prints."""
    steps = event.steps
    plural = "s" if steps != 1 else ""
    outcome = event.outcome
    error = event.error or ""
    if outcome == "interrupted" and event.exit_code == 6:
        # `ll step` stopped it on purpose (exit 6): "paused at 'x' ...: by ll step after step 2"
        outcome, error = "paused", error.removeprefix("paused ")
    elif error and error.startswith(outcome):
        # "interrupted (SIGINT)" says the outcome already: say it once.
        outcome, error = error, ""
    line = (
        f"ll: {outcome} at '{event.final_state}' after {steps} "
        f"step{plural} in {duration(event.duration_ms)}"
    )
    cost = event.cost_usd
    if isinstance(cost, int | float) and cost > 0 and f"${cost:.4f}" not in (error or ""):
        line += f", cost ${cost:.4f}"
    if error:
        line += f": {error}"
    return line


def last_line(chunks: tuple[bytes, ...]) -> str:
    """The last non-blank line of the latest output chunks, printable."""
    text = b"".join(chunks)[-4096:].decode("utf-8", "replace")
    for line in reversed(text.splitlines()):
        shown = printable(line).strip()
        if shown:
            return shown
    return ""
