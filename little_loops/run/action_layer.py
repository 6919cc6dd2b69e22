"""The seam between a step and what runs its action: real processes, or a simulation's answers.

`ActionLayer.run` takes an `ActionRequest` (a shell or slash action) and returns its
`ActionResult`. A simulation is one more implementation of the same seam, typed by the optional
`Simulation` protocol (checked with `isinstance`): it may stand in for a `loop:` state's whole
child (`ChildRequest` -> `ChildStub`) or for the person who answers an `ask:` state
(`AnswerRequest` -> `AnswerStub`), and it observes the run's events. `stub(layer, request)`
asks any layer; a layer that is no `Simulation` answers None: the child runs, a person answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path

from little_loops import actions
from little_loops.actions import (
    ActionRequest,
    ActionResult,
)
from little_loops.model.loop import Loop
from little_loops.model.records import field, record
from little_loops.record.events import RunEvent

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Protocol, TypeGuard, overload
else:
    Protocol = object  # (ActionLayer and Simulation are for the type checker)

OutputHook = Callable[[str, bytes], None]  # (stream name, chunk), as the output arrives
Window = Callable[[], AbstractContextManager[None]]  # where a signal may stop the wait


@record(frozen=True)
class ChildRequest:
    """Whether the child run of the `loop:` state (or fork branch) `state` runs: a
    simulation may answer for the whole child (`ChildStub`)."""

    state: str
    loop: Loop


@record(frozen=True)
class AnswerRequest:
    """Whether anyone but a person answers the `ask:` state `state` (a simulation's script)."""

    state: str


@record(frozen=True)
class ChildStub:
    """How a child run ends without running: what `ChildEnd` holds, but its run id."""

    final_state: str
    outcome: str
    exit_code: int
    steps: int = 0
    duration_ms: int = 0
    cost_usd: float = 0.0
    outputs: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None
    via_terminal: bool = True


@record(frozen=True)
class AnswerStub:
    """The answer to an `ask:` state without a person: the choice (`verdict`; None: the
    default `success`, `timeout`: nobody answered), its note, and the time it took."""

    verdict: str | None
    note: str | None
    duration_ms: int = 0


Stubbed = ChildRequest | AnswerRequest


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


class Simulation(Protocol):
    """An action layer that may stand in for a whole child run or an `ask:` answer, and reads
    its run's events (from `action_start` it learns which state the next action is)."""

    if TYPE_CHECKING:

        @overload
        def stub(self, request: ChildRequest) -> ChildStub | None: ...
        @overload
        def stub(self, request: AnswerRequest) -> AnswerStub | None: ...

    def stub(self, request: Stubbed) -> ChildStub | AnswerStub | None:
        """The stand-in for `request`, or None: the child runs, a person answers."""
        ...

    def observe(self, event: RunEvent) -> None: ...


if TYPE_CHECKING:

    @overload
    def stub(layer: ActionLayer, request: ChildRequest) -> ChildStub | None: ...
    @overload
    def stub(layer: ActionLayer, request: AnswerRequest) -> AnswerStub | None: ...


def stub(layer: ActionLayer, request: Stubbed) -> ChildStub | AnswerStub | None:
    """`layer`'s stand-in for `request` when it is a `Simulation`; None otherwise."""
    if not simulates(layer):
        return None
    if isinstance(request, ChildRequest):
        return layer.stub(request)
    return layer.stub(request)


def simulates(layer: object) -> TypeGuard[Simulation]:
    """Whether `layer` is a `Simulation` (it has the protocol's methods, as a runtime protocol's
    `isinstance` asks), asked once a class (each sub-loop call asks)."""
    kind = type(layer)
    known = _SIMULATES.get(kind)
    if known is None:
        known = _SIMULATES[kind] = all(
            getattr(layer, name, None) is not None for name in _SIMULATION_METHODS
        )
    return known


_SIMULATION_METHODS = ("stub", "observe")


_SIMULATES: dict[type, bool] = {}


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
