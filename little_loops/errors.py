"""User-facing errors, diagnostics and the exit codes of `ll`, all in one place."""

from __future__ import annotations

# Exit codes of `ll run` (SPEC section 8) and of the other commands.
EXIT_SUCCESS = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2  # usage error or invalid loop file
EXIT_RUN_ERROR = 3  # unrouted verdict, undefined variable, action could not start
EXIT_MAX_ITERATIONS = 4
EXIT_BUDGET = 5
EXIT_SUSPENDED = 6  # `ll step` paused the run; `ll step RUN` or `ll resume RUN` continues it
EXIT_INTERNAL = 70  # a bug in ll: one line and the path of a crash report
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Literal

    Severity = Literal["error", "warning"]
else:
    Severity = str


class Diagnostic:
    """One problem in a loop file, at a 1-based line and column. Frozen; written by hand, not a
    dataclass: importing `dataclasses` (and `inspect` with it) costs every `ll run` more than
    all the loader's work (docs/performance.md, "Start-up of `ll run`")."""

    __match_args__ = ("file", "line", "col", "severity", "code", "message")

    file: str
    line: int
    col: int
    severity: Severity
    code: str
    message: str

    def __init__(
        self, file: str, line: int, col: int, severity: Severity, code: str, message: str
    ) -> None:
        # One store a field (not `update(**fields)`, which builds a dict first): a file with
        # thousands of wrong names makes thousands of these.
        fields = self.__dict__
        fields["file"] = file
        fields["line"] = line
        fields["col"] = col
        fields["severity"] = severity
        fields["code"] = code
        fields["message"] = message

    def _key(self) -> tuple[str, int, int, str, str, str]:
        return (self.file, self.line, self.col, self.severity, self.code, self.message)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{n}={v!r}" for n, v in zip(self.__match_args__, self._key(), strict=True)
        )
        return f"Diagnostic({shown})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: a Diagnostic is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: a Diagnostic is frozen")

    def with_message(self, message: str) -> Diagnostic:
        """The same problem, told in other words."""
        return Diagnostic(self.file, self.line, self.col, self.severity, self.code, message)

    def format(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.severity}: {self.message}"

    def to_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
        }


class LoopError(Exception):
    """A user error: printed as one line, mapped to an exit code, never a traceback."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def lines(self) -> list[str]:
        """What `ll` prints of it on stderr, one line each."""
        return [f"ll: error: {self.message}"]


class LoadError(LoopError):
    """The loop file could not be loaded; carries every diagnostic found in one pass."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = sorted(diagnostics, key=lambda d: (d.file, d.line, d.col))
        errors = [d for d in self.diagnostics if d.severity == "error"]
        first = (errors or self.diagnostics)[0].format() if self.diagnostics else "invalid loop"
        super().__init__(first, exit_code=EXIT_USAGE)

    def lines(self) -> list[str]:
        """Every problem, one line each, as `ll validate` shows them."""
        return [d.format() for d in self.diagnostics]


class SimulationError(LoopError):
    """A simulation script that does not fit the loop it runs: it stops the run, and is never
    taken for a step's (or a fork branch's) verdict."""


class RunError(LoopError):
    """The run cannot go on: unrouted verdict, undefined variable, corrupt run state."""

    exit_code = EXIT_RUN_ERROR


class RecordError(RunError):
    """A record of the run on disk (a fork's `items.json`, a branch's state) cannot be read:
    the run stops with exit 3 and stays resumable, so that it goes on once the file is
    repaired."""


class UndefinedVariable(RunError):
    """A `${namespace.path}` placeholder names nothing at run time."""

    def __init__(self, name: str, *, where: str = "") -> None:
        self.name = name
        suffix = f" in {where}" if where else ""
        super().__init__(f"undefined variable '${{{name}}}'{suffix}; {_fix_for(name)}")


def _fix_for(name: str) -> str:
    """How to define a placeholder, by its namespace."""
    namespace, _, rest = name.partition(".")
    key = rest.split(".", 1)[0]
    if namespace == "env":
        return f"export {key}=... before 'll run', or use a context value instead"
    if namespace == "captured":
        return (
            f"no step has captured '{key}' yet on this path; add 'capture: {key}' to a "
            "state that runs before this one"
        )
    if namespace == "prev":
        return "there is no previous step yet; use it only in states after the first"
    return "define it under 'context:' or pass --set KEY=VALUE"
