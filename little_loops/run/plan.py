"""`ll run --dry-run`: what would run first, and every route of the graph, without running."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from little_loops.errors import LoopError
from little_loops.load.checks import routed_verdicts
from little_loops.model import router
from little_loops.model.loop import (
    Loop,
    State,
)
from little_loops.record.secrets import (
    MaskedView,
    Redactor,
)
from little_loops.record.store import RUNS
from little_loops.templates.interpolate import (
    render,
    resolve_context,
)


def dry_run(loop: Loop, overrides: Mapping[str, str]) -> str:
    """The interpolated plan of the first state and the routes of every state, as text."""
    run_dir = str(Path.cwd().resolve() / RUNS / "(dry-run)")
    loop_scope = {"name": loop.name, "run_id": "(dry-run)", "started_at": ""}
    loop_scope |= {"run_dir": run_dir, "dir": str(loop.dir)}
    context = resolve_context(loop.context, overrides, loop=loop_scope)
    first = loop.states[loop.initial]
    lines = [
        f"loop: {loop.name} ({loop.path})",
        f"max_iterations: {loop.max_iterations}"
        + (f", timeout: {loop.timeout:g}s" if loop.timeout is not None else ""),
        f"working directory: {loop.cwd(Path.cwd())}",
        f"first state: {first.name}",
    ]
    if first.action is not None:
        scope: dict[str, Mapping[str, object]] = {
            "context": context,
            "state": {"name": first.name, "iteration": 1, "attempt": 1},
            "loop": {
                **loop_scope,
                "elapsed_ms": 0,
                "elapsed": "0s",
            },
            "env": dict(os.environ),
            "captured": {},
            "prev": {},
        }
        # secrets masked before quoting, as the run shows its commands
        redactor = Redactor.for_run(os.environ, context, loop.secrets)
        if redactor:
            scope = {name: MaskedView(values, redactor.text) for name, values in scope.items()}
        try:
            command = redactor.text(render(first.action, scope, shell=first.action_type == "shell"))
        except LoopError as exc:
            command = f"{first.action}    # cannot interpolate before the run: {exc.message}"
        lines.append(f"  {first.action_type} action: {command}")
    if first.evaluate is not None:
        lines.append(f"  evaluate: {first.evaluate.type}")
    lines.append("routes:")
    for state in loop.states.values():
        lines.extend(_routes(loop, state))
    if loop.on_max_iterations is not None:
        lines.append(
            f"  (at max_iterations) --> {loop.on_max_iterations}  (loop on_max_iterations)"
        )
    return "\n".join(lines) + "\n"


def _routes(loop: Loop, state: State) -> list[str]:
    """The state's routes as written, then where the verdicts they leave out go."""
    if state.terminal:
        return [f"  {state.name}: terminal ({state.outcome})"]
    out = [
        f"  {state.name} --{verdict}--> {route.target}" for verdict, route in state.routes.items()
    ]
    if state.next is not None:
        out.append(f"  {state.name} --success--> {state.next.target}  (next)")
    possible = routed_verdicts(state)
    for where, verdicts in router.fallbacks(loop, state, possible).items():
        note = "" if where in router.STOPS.values() else "  (loop on_error)"
        out.append(f"  {state.name} --{'/'.join(verdicts)}--> {where}{note}")
    return out
