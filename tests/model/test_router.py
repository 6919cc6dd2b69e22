"""Routing (SPEC section 6): every rule, in order, on hand-built states."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from little_loops.model.loop import (
    Loop,
    Route,
    State,
)
from little_loops.model.router import (
    Decision,
    fallbacks,
    route,
    stop,
)


def make_state(
    name: str = "s", routes: Mapping[str, tuple[str, str]] | None = None, next_: str | None = None
) -> State:
    return State(
        name,
        routes={v: Route(target, via) for v, (target, via) in (routes or {}).items()},
        next=Route(next_, "next") if next_ is not None else None,
    )


def make_loop(state: State, on_error: str | None = None) -> Loop:
    return Loop("l", state.name, {state.name: state}, on_error=on_error)


def go(state: State, verdict: str, on_error: str | None = None) -> Decision | None:
    return route(make_loop(state, on_error), state, verdict)


def test_direct_route_and_shorthands() -> None:
    s = make_state(
        routes={
            "success": ("done", "on_success"),
            "failure": ("fix", "on_failure"),
            "blocked": ("esc", "route"),
        }
    )
    assert go(s, "success") == Decision("done", "on_success")
    assert go(s, "failure") == Decision("fix", "on_failure")
    assert go(s, "blocked") == Decision("esc", "route")


def test_uncertain_falls_back_to_its_base() -> None:
    s = make_state(
        routes={
            "success": ("done", "route"),
            "failure_uncertain": ("ask", "route"),
            "failure": ("fix", "route"),
        }
    )
    assert go(s, "success_uncertain") == Decision("done", "route:success")
    assert go(s, "failure_uncertain") == Decision("ask", "route")  # its own route first
    assert go(s, "partial_uncertain") is None


def test_uncertain_prefers_its_base_over_the_default() -> None:
    s = make_state(routes={"success": ("done", "on_success"), "_": ("other", "route")})
    assert go(s, "success_uncertain") == Decision("done", "on_success:success")
    assert go(s, "failure_uncertain") == Decision("other", "_")
    assert go(s, "_uncertain") == Decision("other", "_")  # no base: the suffix alone


def test_default_never_catches_error_or_timeout() -> None:
    s = make_state(routes={"_": ("any", "route")})
    assert go(s, "failure") == Decision("any", "_")
    assert go(s, "blocked") == Decision("any", "_")
    assert go(s, "error") is None
    assert go(s, "timeout") is None
    assert go(s, "error", on_error="report") == Decision("report", "loop.on_error")


def test_error_route_catches_error_and_timeout() -> None:
    s = make_state(routes={"_": ("any", "route"), "_error": ("oops", "route")})
    assert go(s, "error") == Decision("oops", "_error")
    assert go(s, "timeout") == Decision("oops", "_error")
    assert go(s, "failure") == Decision("any", "_")


def test_on_timeout_before_on_error_for_timeout() -> None:
    s = make_state(routes={"error": ("e", "on_error"), "timeout": ("t", "on_timeout")})
    assert go(s, "timeout") == Decision("t", "on_timeout")
    assert go(s, "error") == Decision("e", "on_error")
    only_error = make_state(routes={"error": ("e", "on_error")})
    assert go(only_error, "timeout") == Decision("e", "on_error")
    only_timeout = make_state(routes={"timeout": ("t", "on_timeout")})
    assert go(only_timeout, "error") is None
    assert go(only_timeout, "error", on_error="r") == Decision("r", "loop.on_error")


def test_state_routes_before_the_loop_on_error() -> None:
    s = make_state(routes={"_error": ("mine", "route")})
    assert go(s, "error", on_error="loop") == Decision("mine", "_error")
    bare = make_state()
    assert go(bare, "error", on_error="loop") == Decision("loop", "loop.on_error")
    assert go(bare, "timeout", on_error="loop") == Decision("loop", "loop.on_error")
    assert go(bare, "success", on_error="loop") is None  # only error/timeout


def test_next_is_the_success_path() -> None:
    s = make_state(next_="after")
    assert go(s, "success") == Decision("after", "next")
    assert go(s, "success_uncertain") == Decision("after", "next:success")


@pytest.mark.parametrize(
    "verdict", ["failure", "blocked", "partial", "failure_uncertain", "error", "timeout"]
)
def test_next_never_takes_another_verdict(verdict: str) -> None:
    # unrouted, the run stops at the state; a loop-wide on_error catches it
    s = make_state(next_="after")
    assert go(s, verdict) is None
    assert go(s, verdict, on_error="loop") == Decision("loop", "loop.on_error")


def test_next_state_failures_go_the_error_way() -> None:
    # rule 1 (on_failure / on_timeout), then on_error, then the loop's on_error
    s = make_state(routes={"failure": ("f", "on_failure"), "error": ("e", "on_error")}, next_="a")
    assert go(s, "failure", on_error="loop") == Decision("f", "on_failure")
    assert go(s, "failure_uncertain") == Decision("f", "on_failure:failure")
    assert go(s, "blocked", on_error="loop") == Decision("e", "on_error")
    assert go(s, "timeout") == Decision("e", "on_error")
    assert go(s, "error") == Decision("e", "on_error")
    t = make_state(routes={"timeout": ("t", "on_timeout")}, next_="a")
    assert go(t, "timeout") == Decision("t", "on_timeout")
    assert go(t, "error") is None
    assert go(t, "failure", on_error="loop") == Decision("loop", "loop.on_error")


def test_error_route_catches_a_next_states_failures() -> None:
    s = make_state(routes={"_error": ("oops", "route")}, next_="a")
    assert go(s, "failure") == Decision("oops", "_error")
    assert go(s, "success") == Decision("a", "next")


def test_a_verdict_routing_state_sends_only_error_and_timeout_to_on_error() -> None:
    s = make_state(routes={"success": ("done", "on_success")})
    assert go(s, "failure", on_error="loop") is None
    assert go(s, "error", on_error="loop") == Decision("loop", "loop.on_error")


def test_stop_outcome_and_message() -> None:
    nxt = make_state("build", next_="publish")
    assert stop(nxt, "error", "command not found: make") == (
        "error",
        "stopped at 'build': verdict 'error' (command not found: make) and nothing routes it; "
        "add 'on_error: STATE' (or a loop-wide 'on_error')",
    )
    assert stop(nxt, "timeout", None)[0] == "error"
    assert stop(nxt, "failure", "exit code 1: nope") == (
        "failure",
        "stopped at 'build': verdict 'failure' (exit code 1: nope) and nothing routes it; "
        "add 'on_failure: STATE' (or a loop-wide 'on_error')",
    )
    assert stop(nxt, "blocked", None)[1].endswith(
        "add 'on_error: STATE' (or a loop-wide 'on_error')"
    )
    branching = make_state("judge", routes={"success": ("done", "on_success")})
    assert stop(branching, "partial", None) == (
        "failure",
        "stopped at 'judge': verdict 'partial' and nothing routes it; "
        "add 'partial: STATE' under 'route:'",
    )


def test_fallbacks_group_what_a_state_leaves_unrouted() -> None:
    s = make_state(routes={"failure": ("fix", "on_failure")}, next_="after")
    verdicts = ["timeout", "success", "failure", "error", "blocked"]
    assert fallbacks(make_loop(s), s, verdicts) == {
        "stops (exit 1)": ["blocked"],
        "stops (exit 3)": ["error", "timeout"],
    }
    assert fallbacks(make_loop(s, on_error="r"), s, verdicts) == {
        "r": ["blocked", "error", "timeout"]
    }


def test_current_resolves_to_the_state() -> None:
    s = make_state("poll", next_="$current")
    assert go(s, "success") == Decision("poll", "next")
    assert go(s, "error", on_error="$current") == Decision("poll", "loop.on_error")
    r = make_state("poll", routes={"failure": ("$current", "on_failure")})
    assert go(r, "failure") == Decision("poll", "on_failure")
    u = make_state("poll", routes={"failure": ("$current", "route")})
    assert go(u, "failure_uncertain") == Decision("poll", "route:failure")


def test_own_route_wins_over_error_route() -> None:
    # rule 1 (the verdict's own route or shorthand) comes before rule 4 (`_error`)
    s = make_state(routes={"_error": ("any_err", "route"), "timeout": ("t", "on_timeout")})
    assert go(s, "timeout") == Decision("t", "on_timeout")
    assert go(s, "error") == Decision("any_err", "_error")


def test_unrouted_verdict_is_none() -> None:
    s = make_state(routes={"success": ("done", "on_success")})
    assert go(s, "failure") is None
    assert go(s, "error") is None
    assert go(s, "stall") is None
    assert go(make_state(), "success") is None
