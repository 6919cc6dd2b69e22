"""The seam between a step and what runs its action: real processes, or a simulation's answers."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from little_loops import actions
from little_loops.actions import (
    ActionRequest,
    ActionResult,
)
from little_loops.model.loop import Loop

OutputHook = Callable[[str, bytes], None]  # (stream name, chunk), as the output arrives
Window = Callable[[], AbstractContextManager[None]]  # where a signal may stop the wait


class ActionLayer(Protocol):
    """What runs a state's action; `Processes` (real processes) unless a caller swaps it."""

    def run(self, request: ActionRequest) -> ActionResult:
        """The action `request` describes, run (or, in a simulation, answered)."""
        ...

    def kill_orphans(self) -> None: ...

    def child(self, state: str, loop: Loop | None) -> ActionLayer:
        """The layer the child run of `state` (a `loop:` state) uses; `loop` None: the layer
        of a fork's branches, each of which takes its own child of it."""
        ...

    def resumed(self, events_path: Path) -> ActionLayer:
        """This layer continuing a run that already wrote `events_path`."""
        ...

    def stub_child(self, state: str, child: Loop) -> dict[str, Any] | None:
        """How the child of `state` ends without running (a simulation's answer), or None."""
        ...

    def stub_answer(self, state: str) -> dict[str, Any] | None:
        """The answer to the `ask` state `state` without a person (a simulation's), or None."""
        ...


class Processes:
    """The default action layer: every action a real process, through `actions`."""

    def run(self, request: ActionRequest) -> ActionResult:
        return actions.run(request)

    def kill_orphans(self) -> None:
        actions.kill_orphans()

    def child(self, state: str, loop: Loop | None) -> Processes:
        return self  # every run of a tree runs real processes alike

    def resumed(self, events_path: Path) -> Processes:
        return self

    def stub_child(self, state: str, child: Loop) -> None:
        return None  # a real child runs

    def stub_answer(self, state: str) -> None:
        return None  # a person answers
