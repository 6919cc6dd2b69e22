"""Verdict -> next state, exactly as SPEC section 6 orders the rules. Pure; no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from .model import ERROR_VERDICTS, Loop, State, base_verdict

CURRENT = "$current"


@dataclass(frozen=True)
class Decision:
    """Where a verdict goes: the resolved state name and the rule that matched (`via`)."""

    target: str
    via: str


def route(loop: Loop, state: State, verdict: str) -> Decision | None:
    """The first matching rule of SPEC section 6, or None when nothing routes the verdict."""
    decision = _match(loop, state, verdict)
    if decision is None:
        return None
    target = state.name if decision.target == CURRENT else decision.target
    return Decision(target, decision.via)


def _match(loop: Loop, state: State, verdict: str) -> Decision | None:
    routes = state.routes
    is_error = verdict in ERROR_VERDICTS
    # 1. the verdict's own route (route: or a shorthand such as on_failure)
    if verdict in routes:
        found = routes[verdict]
        return Decision(found.target, found.via)
    # `next` catches everything, except error/timeout when they are routed on their own below
    if state.next is not None and not is_error:
        return Decision(state.next.target, "next")
    # 2. X_uncertain falls back to X
    base = base_verdict(verdict)
    if base is not None and base in routes:
        found = routes[base]
        return Decision(found.target, f"{found.via}:{base}")
    # 3. the default route, never for error/timeout
    if not is_error:
        if "_" in routes:
            return Decision(routes["_"].target, "_")
        return None
    # 4. error/timeout: _error, on_timeout (matched in 1.), on_error, then the loop's on_error
    if "_error" in routes:
        return Decision(routes["_error"].target, "_error")
    if "error" in routes:
        return Decision(routes["error"].target, routes["error"].via)
    if state.next is not None:
        return Decision(state.next.target, "next")
    if loop.on_error is not None:
        return Decision(loop.on_error, "loop.on_error")
    return None
