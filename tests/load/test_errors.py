"""Diagnostics, the error classes and their exit codes, and the hints of undefined variables."""

from __future__ import annotations

import pytest

from little_loops.errors import (
    EXIT_RUN_ERROR,
    EXIT_USAGE,
    Diagnostic,
    LoadError,
    LoopError,
    RunError,
    Severity,
    UndefinedVariable,
)


def diag(line: int, col: int, severity: Severity = "error", file: str = "loop.yaml") -> Diagnostic:
    return Diagnostic(file, line, col, severity, "code", f"problem at {line}:{col}")


def test_diagnostic_format_and_to_dict() -> None:
    d = Diagnostic("loop.yaml", 14, 7, "error", "unknown-target", "state 'fix' routes to 'fx'")
    assert d.format() == "loop.yaml:14:7: error: state 'fix' routes to 'fx'"
    assert d.to_dict() == {
        "file": "loop.yaml",
        "line": 14,
        "col": 7,
        "severity": "error",
        "code": "unknown-target",
        "message": "state 'fix' routes to 'fx'",
    }


def test_diagnostic_is_frozen() -> None:
    d = diag(1, 1)
    with pytest.raises(AttributeError):
        d.line = 2


def test_load_error_sorts_by_file_line_col_and_names_first_error() -> None:
    diagnostics = [
        diag(9, 1),
        diag(2, 5, "warning"),
        diag(3, 2),
        diag(3, 1),
        diag(1, 1, file="a.yaml"),
    ]
    err = LoadError(diagnostics)
    assert [(d.file, d.line, d.col) for d in err.diagnostics] == [
        ("a.yaml", 1, 1),
        ("loop.yaml", 2, 5),
        ("loop.yaml", 3, 1),
        ("loop.yaml", 3, 2),
        ("loop.yaml", 9, 1),
    ]
    assert err.message == "a.yaml:1:1: error: problem at 1:1"
    assert str(err) == err.message
    assert err.exit_code == EXIT_USAGE


def test_load_error_first_message_skips_warnings() -> None:
    err = LoadError([diag(1, 1, "warning"), diag(5, 3)])
    assert err.message == "loop.yaml:5:3: error: problem at 5:3"


def test_load_error_with_only_warnings_names_the_first_warning() -> None:
    err = LoadError([diag(7, 1, "warning"), diag(2, 4, "warning")])
    assert err.message == "loop.yaml:2:4: warning: problem at 2:4"


def test_load_error_without_diagnostics() -> None:
    err = LoadError([])
    assert err.message == "invalid loop"
    assert err.diagnostics == []


def test_exit_codes_of_the_error_classes() -> None:
    assert LoopError("x").exit_code == EXIT_USAGE
    assert LoopError("x", exit_code=7).exit_code == 7
    assert RunError("x").exit_code == EXIT_RUN_ERROR
    assert UndefinedVariable("context.x").exit_code == EXIT_RUN_ERROR
    assert isinstance(UndefinedVariable("context.x"), RunError)
    assert LoopError("x").exit_code == EXIT_USAGE  # the override did not leak to the class


@pytest.mark.parametrize(
    ("name", "where", "message"),
    [
        (
            "env.API_HOST",
            "",
            "undefined variable '${env.API_HOST}'; "
            "export API_HOST=... before 'll run', or use a context value instead",
        ),
        (
            "captured.lint.output",
            "state 'fix' action",
            "undefined variable '${captured.lint.output}' in state 'fix' action; "
            "no step has captured 'lint' yet on this path; "
            "add 'capture: lint' to a state that runs before this one",
        ),
        (
            "prev.output",
            "",
            "undefined variable '${prev.output}'; "
            "there is no previous step yet; use it only in states after the first",
        ),
        (
            "context.target",
            "",
            "undefined variable '${context.target}'; "
            "define it under 'context:' or pass --set KEY=VALUE",
        ),
    ],
)
def test_undefined_variable_hint_per_namespace(name: str, where: str, message: str) -> None:
    err = UndefinedVariable(name, where=where)
    assert err.name == name
    assert err.message == message
    assert str(err) == message
