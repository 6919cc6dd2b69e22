"""Why a step did not succeed, in one line, and the last lines of what it printed.

The runner puts both on the step's `evaluate` event (`reason`, `tail`), so every consumer
(the terminal, JUnit, GitHub annotations, the run's stop message) says the same thing.
Pure; no I/O.
"""

from __future__ import annotations

import re

from little_loops.model.details import Details

TAIL_LINES = 10
_LINE_WIDTH = 300

# `sh: 1: foo: not found` (dash), `bash: foo: command not found`, `bash: line 1: foo: ...`,
# `zsh: command not found: foo`
_NOT_FOUND = (
    re.compile(r"^.*?:\s*(?:line \d+:\s*|\d+:\s*)?([^\s:]+): (?:command )?not found\s*$"),
    re.compile(r"^.*?command not found: (\S+)\s*$"),
)
# Verdicts that deserve the output's tail under the step line.
BAD_VERDICTS = frozenset({"failure", "error", "timeout", "blocked"})


def output_tail(stdout: str, stderr: str, lines: int = TAIL_LINES) -> list[str]:
    """The last `lines` non-blank lines of stderr, or of stdout when stderr has none."""
    for text in (stderr, stdout):
        kept = [line.rstrip()[:_LINE_WIDTH] for line in text.splitlines() if line.strip()]
        if kept:
            return kept[-lines:]
    return []


def command_not_found(stderr: str, command: str | None) -> str:
    """The name the shell could not find: from its message, else the command's first word."""
    for line in reversed(stderr.splitlines()):
        for pattern in _NOT_FOUND:
            found = pattern.match(line.strip())
            if found:
                return found.group(1)
    words = (command or "").split()
    return words[0] if words else "?"


def step_reason(
    verdict: str,
    details: Details,
    *,
    exit_code: int | None,
    stderr: str = "",
    stdout: str = "",
    command: str | None = None,
    action_type: str | None = "shell",
) -> str:
    """One line saying why a step gave `verdict`: what a person needs to fix it."""
    if verdict == "timeout":
        seconds = details.timeout_s
        return f"timed out after {seconds:g}s" if seconds is not None else "timed out"
    judged = details.reason
    if judged is not None and judged.strip() and details.model is not None:
        return _one_line(judged)
    if action_type == "shell" and exit_code == 127:
        return f"command not found: {command_not_found(stderr, command)}"
    if action_type == "shell" and exit_code == 126:
        return f"cannot execute (permission denied?): {command_not_found(stderr, command)}"
    error = details.error
    last = _last_line(stderr) or _last_line(stdout)
    if error is not None and error.strip():
        text = _one_line(error)
        if exit_code is not None and exit_code > 1 and f"exit code {exit_code}" in text:
            text = f"exit code {exit_code}"
        return f"{text}: {last}" if last and last not in text else text
    if judged is not None and judged.strip():
        return _one_line(judged)
    if exit_code is not None and exit_code < 0:
        return f"killed by signal {-exit_code}" + (f": {last}" if last else "")
    if exit_code not in (None, 0):
        return f"exit code {exit_code}" + (f": {last}" if last else "")
    return f"verdict '{verdict}'" + (f": {last}" if last else "")


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:_LINE_WIDTH]
    return ""


def _one_line(text: str) -> str:
    first = " ".join(text.split())
    return first[:_LINE_WIDTH]
