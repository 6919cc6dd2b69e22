"""A `loop:` state's child run: where it lives, what it is given, what the parent gets back.

The runner runs the child itself (a `Runner` of the child's loop, in this process); this module
holds the parts around it: the child's file and inputs, its run directory under the parent's
(`sub/<step>-<state>/`), the limits it inherits, how its events reach the parent's listeners,
and how its end becomes the calling state's verdict and captured record.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from little_loops.errors import LoopError
from little_loops.model.details import Details, Json
from little_loops.model.loop import (
    Loop,
    State,
)
from little_loops.model.progress import Progress, RunResult
from little_loops.model.records import field, record, replace
from little_loops.record.events import (
    Listener,
    RunEvent,
    listening_as,
)
from little_loops.record.store import RunDir, sha256
from little_loops.run.action_layer import ChildStub
from little_loops.templates.interpolate import reads_program_text

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 8  # runs in one tree, the root counting as 1 (as `ll validate` counts them)

# What a child's end gives the calling state, by the child's outcome (SPEC section 6 applies).
_ERROR_OUTCOMES = {"error", "max_iterations", "budget"}


class ChildError(Exception):
    """The child cannot start: the calling step ends with verdict `error` and this reason."""


@record(frozen=True)
class Parent:
    """What a child run inherits from the runs above it."""

    path: tuple[str, ...]  # the calling states, root first: ("deploy",) or ("deploy", "smoke")
    secrets: tuple[str, ...]  # every value secret anywhere above
    listeners: tuple[Listener, ...]  # the root's listeners (terminal, reports, trace)
    # What the child may spend before some ancestor's `max_cost_usd` is passed; None: no limit.
    budget_left: float | None = None
    # Whether the child keeps a copy of its loop file (`loop.yaml`, for `ll resume`'s change
    # summary). A fork's action branch runs its parent's file, which the root keeps already:
    # a copy a branch would hold that whole file (its inline items too) once a branch.
    snapshot: bool = True
    # The environment the root run took (a child's `${env.X}` and secret names read it), and
    # the paths the tree resolved already (its loop files, its base directory): a branch of a
    # fork of thousands starts without copying the one or resolving the other again.
    env: Mapping[str, str] | None = None
    resolved: dict[Path, Path] = field(default_factory=dict, compare=False)

    @property
    def depth(self) -> int:
        return len(self.path)


def load_child(
    loop: Loop, state: State, depth: int, resolved: dict[Path, Path] | None = None
) -> Loop:
    """The child's loop, loaded from its file (relative to the calling loop's file); `depth`
    is the child's run number in the tree (the root is 1). `ll validate` refuses deeper
    chains already; this holds at run time too (a child file changed since). `resolved`:
    the paths the tree resolved already (`RunContext.resolved`): a child called again is not
    resolved again."""
    from little_loops.load.loader import load

    assert state.loop is not None
    if depth > MAX_DEPTH:
        raise ChildError(
            f"state '{state.name}' would start run number {depth} in one tree, more than "
            f"{MAX_DEPTH}; call fewer levels deep"
        )
    given = loop.path / state.loop  # the key: per calling file (itself maybe a link)
    path = resolved.get(given) if resolved is not None else None
    if path is None:
        path = (loop.dir / state.loop).resolve()
        if resolved is not None:
            resolved[given] = path
    try:
        digest = sha256(path.read_bytes())
    except OSError:
        digest = ""  # load says what is wrong
    known = _LOADED.get(path)
    if known is None:
        from little_loops.load.loader import followed

        known = followed(path)  # read with its root (`ll run` loads the whole tree first)
    if digest and known is not None and known.source_sha256 == digest:
        _LOADED[path] = known
        return known  # a child called again, unchanged: parsed once (bench/nesting.py)
    try:
        child = load(path, follow=False)  # checked with its root; its own children when called
    except LoopError as exc:
        first = exc.message.splitlines()[0] if exc.message else str(exc)
        raise ChildError(f"cannot load sub-loop {state.loop}: {first}") from None
    _LOADED[path] = child
    return child


# Child loops loaded in this process, by path: a loop that calls a child many times parses it
# once while its bytes stay the same (`Loop.source_sha256`).
_LOADED: dict[Path, Loop] = {}


def bind_inputs(child: Loop, values: Mapping[str, str], file: str) -> dict[str, str]:
    """The child's context values from `with:`, checked against what it declares."""
    known = set(child.context) | set(child.inputs)
    for key in values:
        if key not in known:
            names = ", ".join(sorted(known)) or "none"
            raise ChildError(f"{file} has no context key '{key}' (it has: {names})")
    for key, spec in child.inputs.items():
        if key not in values:
            if spec.required:
                raise ChildError(f"{file} needs context key '{key}': give it under 'with:'")
            continue
        value = values[key]
        if spec.enum is not None and value not in spec.enum:
            allowed = ", ".join(spec.enum)
            raise ChildError(f"with: {key} = '{value}' is not one of {allowed} ({file})")
        if spec.type is not None and not _fits(spec.type, value):
            raise ChildError(f"with: {key} = '{value}' is not a {spec.type} ({file})")
    return dict(values)


def program_inputs(state: State, program: frozenset[str]) -> frozenset[str]:
    """The child's context keys whose `with:` template reads program, model or human text
    (`captured`, `prev`, `item`, or a key of the caller's in `program`): that kind of text in
    the child too, escaped in its commands and fenced in its judge's prompts (SPEC 7)."""
    return frozenset(
        key for key, template in state.with_.items() if reads_program_text(template, program)
    )


def _fits(kind: str, value: str) -> bool:
    if kind == "integer":
        return re.fullmatch(r"[+-]?\d+", value.strip()) is not None
    if kind == "number":
        try:
            float(value)
        except ValueError:
            return False
        return True
    if kind == "boolean":
        return value.strip().lower() in {"true", "false", "yes", "no", "1", "0"}
    return True


def child_dir(parent_root: Path, step: int, state: str, attempt: int = 1) -> Path:
    """`<parent>/sub/<step>-<state>[.<attempt>]`: the child's own full run directory."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", state)
    suffix = f".{attempt}" if attempt > 1 else ""
    return parent_root / "sub" / f"{step:04d}-{safe}{suffix}"


def open_child_dir(root: Path) -> RunDir:
    run_dir = RunDir(root)
    try:
        os.mkdir(root)
    except FileNotFoundError:  # the caller's `sub/` (its first child) or the fork's folder
        root.mkdir(parents=True, exist_ok=True)
        run_dir.check_links()
    except FileExistsError:  # resumed, or planted: never followed if it is a link
        run_dir.check_links()
    # else made just now: neither a link nor holding one (a fork's thousands skip the check)
    return run_dir


def forward(listener: Listener, segment: tuple[str, ...]) -> Listener:
    """The caller's `listener`, seeing a child's events with `segment` (the calling state, or
    a fork's state and branch key) put in front of their `path`. Each level adds its own
    part, so a grandchild's events reach the root with every calling state:
    `["call", "inner"]`."""
    chain = list(segment)

    def send(event: RunEvent) -> None:
        # `path` stays in `extra`, last on the wire as it always was (RunEvent.path reads it).
        path = [*chain, *event.path]
        listener(replace(event, extra={**event.extra, "path": path}))

    return listening_as(send, listener)


@record(frozen=True)
class ChildEnd:
    """How a child run ended, read from its result or, after a crash, its state.json."""

    run_id: str
    final_state: str
    outcome: str
    exit_code: int
    steps: int
    duration_ms: int
    cost_usd: float
    outputs: Mapping[str, str]
    error: str | None = None
    via_terminal: bool = True  # it ended at a terminal (or its on_max_iterations state)

    @classmethod
    def stubbed(cls, run_id: str, stub: ChildStub) -> ChildEnd:
        """How a child a simulation answered for (`stub`) ended, as run `run_id`."""
        return cls(
            run_id=run_id,
            final_state=stub.final_state,
            outcome=stub.outcome,
            exit_code=stub.exit_code,
            steps=stub.steps,
            duration_ms=stub.duration_ms,
            cost_usd=stub.cost_usd,
            outputs=stub.outputs,
            error=stub.error,
            via_terminal=stub.via_terminal,
        )

    @property
    def verdict(self) -> str:
        """The calling state's verdict: the child's terminal name, `error` or `timeout`."""
        if self.outcome == "timeout":
            return "timeout"
        if self.outcome in _ERROR_OUTCOMES and not (
            self.outcome == "max_iterations" and self.via_terminal
        ):
            return "error"
        if not self.via_terminal:
            return self.outcome  # stopped at an unrouted verdict: `failure`
        return self.final_state

    def record(self) -> dict[str, Json]:
        """What `prev` and `captured.X` show after the calling state."""
        return {
            "output": json.dumps(dict(self.outputs), ensure_ascii=False, sort_keys=True),
            "stderr": self.error or "",
            "exit_code": self.exit_code,
            "duration_ms": self.duration_ms,
            "state": self.final_state,
            "outputs": dict(self.outputs),
            "final_state": self.final_state,
            "outcome": self.outcome,
            "run_id": self.run_id,
            "steps": self.steps,
            "cost_usd": round(self.cost_usd, 6),
        }

    def details(self) -> Details:
        return Details(
            child_run_id=self.run_id,
            final_state=self.final_state,
            outcome=self.outcome,
            exit_code=self.exit_code,
        )

    def reason(self) -> str | None:
        if self.outcome == "success":
            return None
        why = f": {self.error}" if self.error else ""
        return f"sub-loop ended {self.outcome} at '{self.final_state}'{why}"

    @classmethod
    def of_run(cls, run_id: str, result: RunResult, progress: Progress, child: Loop) -> ChildEnd:
        """The end of a child run that just returned `result` (a `RunResult`), with its
        `progress` (cost, outputs)."""
        return cls(
            run_id=run_id,
            final_state=result.final_state,
            outcome=result.outcome,
            exit_code=result.exit_code,
            steps=result.steps,
            duration_ms=result.duration_ms,
            cost_usd=progress.cost_usd,
            outputs=progress.outputs or {},
            error=result.error,
            via_terminal=ended_at_terminal(child, result.final_state, result.outcome),
        )

    @classmethod
    def from_state(cls, data: Mapping[str, Any], child: Loop) -> ChildEnd:
        """A finished child, from its state.json (a parent resumed after the child ended)."""
        outputs = data.get("outputs")
        return cls(
            run_id=str(data.get("run_id", "")),
            final_state=str(data.get("final_state") or data.get("current") or ""),
            outcome=str(data.get("outcome") or "error"),
            exit_code=int(data.get("exit_code") or 0),
            steps=int(data.get("step") or 0),
            duration_ms=int(data.get("elapsed_ms") or 0),
            cost_usd=float(data.get("cost_usd") or 0.0),
            outputs=dict(outputs) if isinstance(outputs, Mapping) else {},
            error=data.get("error") if isinstance(data.get("error"), str) else None,
            via_terminal=ended_at_terminal(
                child, str(data.get("final_state") or ""), str(data.get("outcome") or "")
            ),
        )


def ended_at_terminal(child: Loop, final_state: str, outcome: str) -> bool:
    """True when the child stopped at a terminal or its `on_max_iterations` state, as that
    state ends a run: a terminal whose action failed made the run `failure` whatever its
    `outcome` said, and its caller sees `failure`, not the terminal's name."""
    state = child.states.get(final_state)
    if state is None or not (state.terminal or final_state == child.on_max_iterations):
        return False
    return not (state.terminal and outcome == "failure" and state.outcome != "failure")
