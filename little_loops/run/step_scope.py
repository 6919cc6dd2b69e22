"""What a step's templates see (`context`, `captured`, `prev`, `state`, `loop`, `env`), and
rendering them: the command as run, and as shown with secrets masked."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from little_loops.errors import (
    LoopError,
    RunError,
)
from little_loops.model.loop import State
from little_loops.model.progress import Progress
from little_loops.record.secrets import (
    MaskedView,
    Redactor,
)
from little_loops.templates.interpolate import (
    literal_text,
    render,
)


class StepScope:
    """Renders one run's templates from its progress; `elapsed_ms` is the session's clock."""

    def __init__(
        self,
        progress: Progress,
        redactor: Redactor,
        *,
        loop_scope: Mapping[str, object],
        env: Mapping[str, str],
        elapsed_ms: Callable[[], int],
        program: frozenset[str] = frozenset(),
    ) -> None:
        self.progress = progress
        # Context keys holding program text (`with:` from captured, item...): escaped.
        self.program = program
        self.redactor = redactor
        self._loop_scope = loop_scope
        self.env = env
        self._elapsed_ms = elapsed_ms

    def render(
        self,
        template: str,
        step: int,
        state: State,
        attempt: int,
        *,
        shell: bool,
        mask: Callable[[str], str] | None = None,
        command: bool = False,
    ) -> str:
        text = literal_text(template)
        if text is None:
            scope = self.scope(step, state, attempt)
            if mask is not None:
                scope = {name: MaskedView(values, mask) for name, values in scope.items()}
            where = f"state '{state.name}'"
            text = render(
                template, scope, shell=shell, where=where, command=command, program=self.program
            )
        if command and "\0" in text:
            raise RunError(
                f"the action of state '{state.name}' holds a NUL byte, which no command can "
                "carry; remove it from the loop file"
            )
        return text

    def display(
        self, template: str, command: str, step: int, state: State, attempt: int, *, shell: bool
    ) -> str:
        """`command` as shown: rendered again from masked values, since a quoted secret
        (`'hunter2'\\''xyz'`) no longer matches the secret itself."""
        if not self.redactor or literal_text(template) is not None:
            return self.redactor.text(command) if self.redactor else command
        try:
            shown = self.render(
                template, step, state, attempt, shell=shell, mask=self.redactor.text
            )
        except LoopError:
            shown = command
        return self.redactor.text(shown)

    def scope(self, step: int, state: State, attempt: int) -> dict[str, Mapping[str, object]]:
        p = self.progress
        elapsed_ms = self._elapsed_ms()
        return {
            "context": p.context,
            "captured": p.captured,
            "prev": p.prev,
            "state": {"name": state.name, "iteration": step, "attempt": attempt},
            "loop": {
                **self._loop_scope,
                "elapsed_ms": elapsed_ms,
                "elapsed": _human_duration(elapsed_ms),
            },
            "env": self.env,
        }


def _human_duration(ms: int) -> str:
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m {seconds}s"
