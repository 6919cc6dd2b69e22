"""reasons: the one line that says why a step did not succeed, and the output's tail."""

from __future__ import annotations

import pytest

from little_loops.model.details import Details
from little_loops.model.reasons import (
    command_not_found,
    output_tail,
    step_reason,
)


@pytest.mark.parametrize(
    ("stderr", "name"),
    [
        ("sh: 1: ./deploy.sh: not found", "./deploy.sh"),
        ("/bin/sh: 1: nosuchcmd: not found", "nosuchcmd"),
        ("bash: line 1: make: command not found", "make"),
        ("bash: ruff: command not found", "ruff"),
        ("zsh: command not found: jq", "jq"),
        ("", "first"),
    ],
)
def test_command_not_found_names_the_missing_command(stderr: str, name: str) -> None:
    assert command_not_found(stderr, "first --flag") == name


def test_exit_127_is_command_not_found() -> None:
    reason = step_reason(
        "error",
        Details(error="exit code 127 is neither 0 nor 1"),
        exit_code=127,
        stderr="sh: 1: ./deploy.sh: not found\n",
        command="./deploy.sh prod",
    )
    assert reason == "command not found: ./deploy.sh"


def test_other_exit_codes_carry_the_last_stderr_line() -> None:
    reason = step_reason(
        "error",
        Details(error="exit code 6 is neither 0 nor 1"),
        exit_code=6,
        stderr="  % Total\ncurl: (6) Could not resolve host: example.invalid\n",
    )
    assert reason == "exit code 6: curl: (6) Could not resolve host: example.invalid"


def test_failure_falls_back_to_stdout_when_stderr_is_empty() -> None:
    assert (
        step_reason("failure", Details(), exit_code=1, stdout="3 errors\n")
        == "exit code 1: 3 errors"
    )


def test_judge_reason_wins() -> None:
    details = Details(reason="the notes are vague", model="m", confidence=0.9)
    assert step_reason("failure", details, exit_code=0) == "the notes are vague"


def test_timeout() -> None:
    assert step_reason("timeout", Details(timeout_s=2.0), exit_code=None) == "timed out after 2s"


def test_tail_keeps_the_last_ten_non_blank_lines_of_stderr_else_stdout() -> None:
    stderr = "\n".join(f"e{i}" for i in range(15)) + "\n\n"
    assert output_tail("out", stderr) == [f"e{i}" for i in range(5, 15)]
    assert output_tail("a\n\nb\n", "") == ["a", "b"]
    assert output_tail("", "") == []
