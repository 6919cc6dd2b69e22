"""Verdict -> next state, exactly as SPEC section 6 orders the rules. Pure; no I/O."""

from __future__ import annotations

from collections.abc import Iterable

from little_loops.model.loop import (
    ERROR_VERDICTS,
    Loop,
    Route,
    State,
    base_verdict,
)
from little_loops.model.records import record

CURRENT = "$current"


@record(frozen=True)
class Decision:
    """Where a verdict goes: the resolved state name and the rule that matched (`via`)."""

    target: str
    via: str


def route(loop: Loop, state: State, verdict: str, outcome: str | None = None) -> Decision | None:
    """The first matching rule of SPEC section 6, or None when the run stops at `state`.

    `outcome` is given for a `loop:` state whose child ended at terminal `verdict`: with no
    route of its own, the terminal routes as its outcome (`success`, `failure`) would.
    """
    decision = _match(loop, state, verdict, outcome)
    if decision is None:
        return None
    target = state.name if decision.target == CURRENT else decision.target
    return Decision(target, decision.via)


def _error_way(state: State, verdict: str) -> bool:
    """True when rule 4 applies: `error`/`timeout`, or anything but success at a `next` state."""
    if verdict in ERROR_VERDICTS:
        return True
    return state.next is not None and (base_verdict(verdict) or verdict) != "success"


def _own(state: State, verdict: str) -> Route | None:
    """The state's route for `verdict`; `next: X` counts as `route.success = X`."""
    found = state.routes.get(verdict)
    if found is None and verdict == "success":
        return state.next
    return found


def _match(loop: Loop, state: State, verdict: str, outcome: str | None = None) -> Decision | None:
    routes = state.routes
    # 1. the verdict's own route (route: or a shorthand such as on_failure, or next)
    found = _own(state, verdict)
    if found is not None:
        return Decision(found.target, found.via)
    # 1b. a child's terminal without a route of its own: the route for its outcome
    if outcome is not None and outcome != verdict:
        found = _own(state, outcome)
        if found is not None:
            return Decision(found.target, f"{found.via}:{outcome}")
    # 2. X_uncertain falls back to X
    base = base_verdict(verdict)
    found = _own(state, base) if base is not None else None
    if found is not None:
        return Decision(found.target, f"{found.via}:{base}")
    # 3. the default route, never for error/timeout
    if verdict not in ERROR_VERDICTS and "_" in routes:
        return Decision(routes["_"].target, "_")
    # 4. the error way: _error, on_error (on_timeout matched in 1.), then the loop's on_error
    if not _error_way(state, verdict):
        return None
    if "_error" in routes:
        return Decision(routes["_error"].target, "_error")
    if "error" in routes:
        return Decision(routes["error"].target, routes["error"].via)
    if loop.on_error is not None:
        return Decision(loop.on_error, "loop.on_error")
    # 5. nothing: the run stops here
    return None


def stop(state: State, verdict: str, reason: str | None) -> tuple[str, str]:
    """The outcome and the one-line message of a run that stops at `state` (rule 5).

    `error`/`timeout` end the run in error (exit 3), any other verdict in failure (exit 1),
    as a CI job stops at its failing step.
    """
    outcome = "error" if verdict in ERROR_VERDICTS else "failure"
    why = f" ({reason})" if reason else ""
    return outcome, (
        f"stopped at '{state.name}': verdict '{verdict}'{why} and nothing routes it; "
        f"{route_hint(state, verdict)}"
    )


def route_hint(state: State, verdict: str) -> str:
    """What to add so that `verdict` at `state` goes somewhere instead of stopping the run."""
    if verdict in ERROR_VERDICTS or state.next is not None:
        key = {"timeout": "on_timeout", "failure": "on_failure"}.get(
            base_verdict(verdict) or verdict, "on_error"
        )
        return f"add '{key}: STATE' (or a loop-wide 'on_error')"
    return f"add '{verdict}: STATE' under 'route:'"


def fallbacks(loop: Loop, state: State, verdicts: Iterable[str]) -> dict[str, list[str]]:
    """Where the verdicts that `state`'s own keys leave unrouted go, for diagrams and plans.

    Keys are the loop's `on_error` target, or `stops (exit 1)` / `stops (exit 3)` when the
    run would stop at `state`; values are the verdicts, in `verdict_order`.
    """
    out: dict[str, list[str]] = {}
    for verdict in sorted(verdicts, key=verdict_order):
        decision = route(loop, state, verdict)
        if decision is None:
            outcome, _ = stop(state, verdict, None)
            out.setdefault(STOPS[outcome], []).append(verdict)
        elif decision.via == "loop.on_error":
            out.setdefault(decision.target, []).append(verdict)
    return out


STOPS = {"failure": "stops (exit 1)", "error": "stops (exit 3)"}


def verdict_order(verdict: str) -> tuple[int, str]:
    """Sort key: success first, then the other verdicts by name, then error and timeout."""
    if verdict in ERROR_VERDICTS:
        return (2, verdict)
    return (0 if verdict == "success" else 1, verdict)
