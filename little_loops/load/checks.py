"""Semantic checks of a loop: targets, reachability, verdict coverage, keys; the checks of values
and placeholders are in `value_checks`, and of a `loop:` state's child in `children`.

A little over 400 lines: the checks of a state's routes, keys, kind and coverage read the same
context (`Ctx`) and are kept beside the graph checks they feed.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping

from little_loops.errors import Diagnostic
from little_loops.evaluators import possible_verdicts
from little_loops.load.children import (
    input_problem,
    loop_verdicts,
)
from little_loops.load.fork_checks import (
    FORK_VERDICTS,
    check_fork,
)
from little_loops.load.schema import Locate
from little_loops.load.value_checks import (
    Ctx,
    check_evaluator,
    check_own_capture,
    check_template,
    suggest,
)
from little_loops.model.loop import (
    ERROR_VERDICTS,
    Loop,
    Route,
    State,
)
from little_loops.model.router import (
    CURRENT,
    route,
    route_hint,
)
from little_loops.wording import NodePath, did_you_mean

# Keys that route by verdict, which `next` (the success route) cannot stand beside.
_NOT_WITH_NEXT = ("route", "on_success")

# Any route problem outside a single state: coverage is not checked then.
WHOLE_LOOP = "*"


def check_loop(
    loop: Loop,
    *,
    file: str,
    locate: Locate,
    route_entries: Mapping[str, list[tuple[str, Route]]] | None = None,
    tainted: frozenset[str] = frozenset(),
) -> list[Diagnostic]:
    """Every semantic problem of `loop`, unsorted.

    `route_entries` holds each state's routes as written, duplicates included (the model
    keeps one route per verdict). States named in `tainted` have schema errors in keys that
    decide where a run goes, so their verdict coverage is not checked and the graph checks
    assume they may go anywhere and may end the run; `WHOLE_LOOP` among them (an error in a
    loop-wide key) skips the checks that need the whole graph to be right.
    """
    ctx = Ctx(loop, file, locate)
    entries = route_entries or {
        name: list(state.routes.items()) for name, state in loop.states.items()
    }
    out: list[Diagnostic] = []
    out += _check_initial(ctx)
    out += _check_loop_targets(ctx)
    captures = {s.capture for s in loop.states.values() if s.capture}
    for state in loop.states.values():
        at: NodePath = ("states", state.name)
        out += _check_routes(ctx, state, entries.get(state.name, []))
        out += _check_state_keys(ctx, state)
        if state.evaluate is not None:
            out += check_evaluator(ctx, state.evaluate, (*at, "evaluate"), captures)
            out += check_own_capture(ctx, state.evaluate, (*at, "evaluate"), state.capture)
        if state.action is not None:
            out += check_template(ctx, state.action, (*at, "action"), captures)
        for key, bound in state.with_.items():
            out += check_template(ctx, bound, (*at, "with", key), captures)
        if state.ask is not None:
            out += check_template(ctx, state.ask, (*at, "ask"), captures)
        out += _check_kind(ctx, state)
        out += check_fork(ctx, state, captures)
        if state.is_loop:
            pass  # its coverage needs the child: `children.follow`
        elif not state.terminal and state.name not in tainted and WHOLE_LOOP not in tainted:
            out += _check_coverage(ctx, state)
    for name, judge in loop.judges.items():
        out += check_evaluator(ctx, judge, ("judges", name), captures)
    for key, value in loop.context.items():
        if isinstance(value, str):
            out += check_template(ctx, value, ("context", key), captures)
    for key, value in loop.outputs.items():
        out += check_template(ctx, value, ("outputs", key), captures)
    out += _check_inputs(ctx)
    if loop.llm.model is not None:
        from little_loops.evaluators.judge_config import model_findings

        for where, code, message in model_findings(loop.llm.model, ("llm", "model")):
            out.append(ctx.diag(ctx.locate(where), "error", code, message))
    out += _check_secret_literals(ctx)
    # A wrong target already explains any odd reachability; do not pile warnings on it.
    if WHOLE_LOOP not in tainted and not any(
        d.code in ("unknown-initial", "unknown-target") for d in out
    ):
        out += _check_graph(ctx, tainted)
    return out


def _check_initial(ctx: Ctx) -> Iterator[Diagnostic]:
    initial, states = ctx.loop.initial, ctx.loop.states
    if initial and states and initial not in states:
        yield ctx.diag(
            ctx.locate(("initial",)),
            "error",
            "unknown-initial",
            f"initial state '{initial}' is not a state{suggest(initial, states)}",
        )


def _unknown_target(ctx: Ctx, target: str, allow_current: bool) -> str | None:
    """The reason `target` names no state, or None when it is fine."""
    if target == CURRENT:
        return None if allow_current else "'$current' is not allowed here; name a state"
    if target in ctx.loop.states:
        return None
    return f"unknown state '{target}'{did_you_mean(target, ctx.state_names)}"


def _check_loop_targets(ctx: Ctx) -> Iterator[Diagnostic]:
    loop = ctx.loop
    for key, target, allow_current in (
        ("on_error", loop.on_error, True),
        ("on_max_iterations", loop.on_max_iterations, False),
    ):
        problem = _unknown_target(ctx, target, allow_current) if target else None
        if problem:
            yield ctx.diag(
                ctx.locate((key,)), "error", "unknown-target", f"'{key}' names {problem}"
            )
    for state in loop.states.values():
        target = state.on_maintain
        problem = _unknown_target(ctx, target, False) if target else None
        if problem:
            at = ("states", state.name, "on_maintain")
            message = f"state '{state.name}' has 'on_maintain' naming {problem}"
            yield ctx.diag(ctx.locate(at), "error", "unknown-target", message)


def _check_routes(ctx: Ctx, state: State, entries: list[tuple[str, Route]]) -> Iterator[Diagnostic]:
    name = state.name
    seen: dict[str, Route] = {}
    for verdict, found in entries:
        problem = _unknown_target(ctx, found.target, True)
        if problem:
            yield ctx.diag(
                found.pos,
                "error",
                "unknown-target",
                f"state '{name}' routes '{verdict}' to {problem}",
            )
        first = seen.get(verdict)
        if first is not None:
            yield ctx.diag(
                found.pos,
                "error",
                "duplicate-route",
                f"state '{name}' routes '{verdict}' twice, by '{first.via}' (line "
                f"{first.pos.line}) and by '{found.via}'; keep one",
            )
        else:
            seen[verdict] = found
    nxt = state.next
    if nxt is None:
        return
    problem = _unknown_target(ctx, nxt.target, True)
    if problem:
        yield ctx.diag(
            nxt.pos, "error", "unknown-target", f"state '{name}' has 'next' naming {problem}"
        )
    mixed = sorted({found.via for _, found in entries if found.via in _NOT_WITH_NEXT})
    if mixed:
        keys = " and ".join(f"'{k}'" for k in mixed)
        yield ctx.diag(
            nxt.pos,
            "error",
            "next-with-routes",
            f"state '{name}' has 'next', which is its success route, and also {keys}; use one "
            "or the other ('on_failure', 'on_error' and 'on_timeout' may stay beside 'next')",
        )


def _check_state_keys(ctx: Ctx, state: State) -> Iterator[Diagnostic]:
    name = state.name
    if state.terminal and (state.routes or state.next):
        yield ctx.diag(
            state.pos,
            "warning",
            "terminal-routes",
            f"state '{name}' is terminal, so its routes are never used",
        )
    if not state.terminal and state.outcome == "failure":
        yield ctx.diag(
            ctx.locate(("states", name, "outcome")),
            "warning",
            "outcome-not-terminal",
            f"state '{name}' sets 'outcome' but is not terminal; add 'terminal: true' or remove it",
        )
    if state.on_maintain and not (state.terminal and ctx.loop.maintain):
        yield ctx.diag(
            ctx.locate(("states", name, "on_maintain")),
            "warning",
            "unused-on-maintain",
            f"state '{name}' sets 'on_maintain', which only a terminal state uses, and only "
            "with 'maintain: true' at the top level",
        )


def verdicts(state: State) -> frozenset[str]:
    """Every verdict `state` can give, as far as this file tells (a `loop:` state's child
    terminals are only known once the child is loaded: `children.follow`)."""
    if state.is_fork:
        return FORK_VERDICTS
    if state.is_loop:
        return loop_verdicts(state, None)
    if state.is_ask:
        return state.ask_verdicts()
    return possible_verdicts(state.evaluate, action_type=state.action_type)


def routed_verdicts(state: State) -> frozenset[str]:
    """The verdicts whose routes a diagram, a plan or `--strict` looks for at `state`: a
    `loop:` state's others are its child's terminals, checked against the child's file."""
    return ERROR_VERDICTS if state.is_loop else verdicts(state)


def _check_kind(ctx: Ctx, state: State) -> Iterator[Diagnostic]:
    """A state does one thing: an action or a child loop; `with` belongs to `loop`."""
    name = state.name
    at: NodePath = ("states", name)
    if state.is_fork:
        return  # `check_fork`
    if state.with_ and not state.is_loop:
        yield ctx.diag(
            ctx.locate((*at, "with")),
            "error",
            "state-kind",
            f"state '{name}' has 'with', which passes values to a child loop, but no 'loop'; "
            "add 'loop: FILE.yaml' or remove 'with'",
        )
    if state.choices and not state.is_ask:
        yield ctx.diag(
            ctx.locate((*at, "choices")),
            "error",
            "state-kind",
            f"state '{name}' has 'choices' but no 'ask'; add the question as 'ask: TEXT' or "
            "remove 'choices'",
        )
    if state.is_ask:
        yield from _check_ask(ctx, state)
    if not state.is_loop:
        return
    if state.action is not None:
        yield ctx.diag(
            ctx.locate((*at, "action")),
            "error",
            "state-kind",
            f"state '{name}' has both 'action' and 'loop'; a state runs one of them: move the "
            "action to a state of its own",
        )
    if state.action_type is not None and state.action is None:
        yield ctx.diag(
            ctx.locate((*at, "action_type")),
            "error",
            "state-kind",
            f"state '{name}' runs a loop, so 'action_type' means nothing there; remove it",
        )
    if state.terminal:
        yield ctx.diag(
            ctx.locate((*at, "terminal")),
            "error",
            "state-kind",
            f"state '{name}' runs a loop and is terminal; the run would end before routing on "
            "the child's end: route the child's end to a terminal state instead",
        )


def _check_ask(ctx: Ctx, state: State) -> Iterator[Diagnostic]:
    """An `ask` state asks and does nothing else: no action, child, retry or judge."""
    name = state.name
    for key, present in (
        ("action", state.action is not None),
        ("action_type", state.action_type is not None and state.action is None),
        ("loop", state.is_loop),
        ("retry", state.retry is not None),
        ("evaluate", state.evaluate is not None and state.action is None),
        ("terminal", state.terminal),
    ):
        if present:
            yield ctx.diag(
                ctx.locate(("states", name, key)),
                "error",
                "state-kind",
                f"state '{name}' asks a question, so it cannot have '{key}'; move it to a "
                "state of its own and route the answer there",
            )
    for reserved in sorted(set(state.choices) & {"error", "timeout"}):
        yield ctx.diag(
            ctx.locate(("states", name, "choices")),
            "error",
            "bad-choice",
            f"state '{name}' offers the choice '{reserved}', a verdict ll gives itself; "
            "name the answer otherwise (e.g. 'reject')",
        )


def _check_inputs(ctx: Ctx) -> Iterator[Diagnostic]:
    """A typed context key whose `default` does not fit its own `type` or `enum`."""
    for key, spec in ctx.loop.inputs.items():
        if spec.default is None or (spec.type is None and spec.enum is None):
            continue
        problem = input_problem(key, spec, spec.default)
        if problem is not None:
            yield ctx.diag(
                ctx.locate(("context", key, "default")),
                "error",
                "bad-context-spec",
                f"the default of {problem}",
            )


def _check_coverage(ctx: Ctx, state: State) -> Iterator[Diagnostic]:
    """A state that branches on its verdict must say where each one goes (SPEC section 6).

    `error`/`timeout`, and every non-success verdict of a `next` state, may stop the run
    instead; `stops` lists those for `ll validate --strict`.
    """
    possible = verdicts(state)
    if state.next is None:
        for verdict in sorted(possible - ERROR_VERDICTS):
            if route(ctx.loop, state, verdict) is not None:
                continue
            yield ctx.diag(
                state.pos,
                "error",
                "uncovered-verdict",
                f"state '{state.name}' can give verdict '{verdict}' but nothing routes it; add "
                f"'{verdict}: STATE' under 'route:', or a default '_: STATE'",
            )
    for verdict, found in state.routes.items():
        if verdict.startswith("_") or verdict in possible:
            continue
        yield ctx.diag(
            found.pos,
            "warning",
            "unused-route",
            f"state '{state.name}' routes '{verdict}', a verdict it never gives "
            f"(it can give: {', '.join(sorted(possible))})",
        )


def stops(loop: Loop, file: str) -> list[Diagnostic]:
    """`ll validate --strict`: a warning for each verdict that would stop the run at a state.

    These are the verdicts SPEC section 6 lets stop a run (`error`/`timeout`, and the
    non-success verdicts of a `next` state); teams that want every path explicit route them.
    """
    out: list[Diagnostic] = []
    for state in loop.states.values():
        if state.terminal:
            continue
        for verdict in sorted(routed_verdicts(state)):
            if route(loop, state, verdict) is not None:
                continue
            code = 3 if verdict in ERROR_VERDICTS else 1
            out.append(
                Diagnostic(
                    file,
                    state.pos.line,
                    state.pos.col,
                    "warning",
                    "unrouted-stop",
                    f"state '{state.name}' can give verdict '{verdict}', which nothing routes, "
                    f"so the run would stop there (exit {code}); {route_hint(state, verdict)}",
                )
            )
    return out


def _edges(loop: Loop, state: State, names: Container[str]) -> set[str]:
    """The states (among `names`) a run can go to from `state` by its routes."""
    if state.terminal:
        if loop.maintain:
            return {state.on_maintain or loop.initial}
        return set()
    out = set()
    for verdict in verdicts(state):
        decision = route(loop, state, verdict)
        if decision is not None and decision.target in names:
            out.add(decision.target)
    return out


def _check_graph(ctx: Ctx, tainted: frozenset[str] = frozenset()) -> Iterator[Diagnostic]:
    loop = ctx.loop
    if loop.initial not in loop.states:
        return
    # A state with broken routing keys may be meant as a terminal.
    terminals = {n for n, s in loop.states.items() if s.terminal or n in tainted}
    if not terminals:
        yield ctx.diag(
            ctx.locate(("states",)),
            "error",
            "no-terminal",
            "no state is terminal, so the run can only end at a limit; mark the state where it "
            "should end with 'terminal: true'",
        )
        return
    # A state with broken routing keys may go to any state. Rather than an edge to every state
    # from each of them (quadratic in a large file with many), such a state has no edges, and
    # reaching one reaches everything; backwards, those edges add nothing, since a tainted
    # state is already a terminal (a root of `can_finish`).
    names = loop.states.keys()
    edges = {
        name: set() if name in tainted else _edges(loop, s, names)
        for name, s in loop.states.items()
    }
    roots = {loop.initial}
    if loop.on_max_iterations is not None and loop.on_max_iterations in loop.states:
        roots.add(loop.on_max_iterations)
    reachable = _closure(roots, edges)
    if not reachable.isdisjoint(tainted):
        reachable = set(loop.states)
    backwards: dict[str, set[str]] = {name: set() for name in loop.states}
    for name, targets in edges.items():
        for target in targets:
            backwards[target].add(name)
    can_finish = _closure(terminals, backwards)
    if not reachable & terminals:
        yield ctx.diag(
            ctx.locate(("initial",)),
            "error",
            "unreachable-terminal",
            f"no terminal state can be reached from initial state '{loop.initial}', so the run "
            "can only end at a limit",
        )
    for name, state in loop.states.items():
        if name not in reachable:
            yield ctx.diag(
                state.pos,
                "warning",
                "unreachable-state",
                f"state '{name}' cannot be reached from initial state '{loop.initial}'",
            )
        elif name not in can_finish:
            yield ctx.diag(
                state.pos,
                "warning",
                "no-path-to-terminal",
                f"state '{name}' has no path to a terminal state; a run that gets there can "
                "only end at a limit",
            )


def _check_secret_literals(ctx: Ctx) -> Iterator[Diagnostic]:
    """A secret written in the file travels with it (repositories, CI artifacts)."""
    for key in dict.fromkeys(ctx.loop.secrets):
        value = ctx.loop.context.get(key)
        if value is None or value == "" or (isinstance(value, str) and "${" in value):
            continue
        yield ctx.diag(
            ctx.locate(("context", key)),
            "warning",
            "literal-secret",
            f"secret '{key}' has a literal value in the file, which is then kept wherever the "
            f"file goes; pass it with --set {key}=... or the environment "
            f"({key}: ${{env.NAME}})",
        )


def _closure(roots: set[str], edges: Mapping[str, set[str]]) -> set[str]:
    seen = set(roots)
    todo = list(roots)
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
