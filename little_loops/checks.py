"""Semantic checks of a loop: targets, reachability, verdict coverage, fields, placeholders."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from .errors import Diagnostic, Severity
from .evaluators import possible_verdicts
from .evaluators.deterministic import OPERATORS, parse_json_path
from .interpolate import Placeholder, PlaceholderError, scan
from .model import ERROR_VERDICTS, PASS_FAIL_SCHEMA, Evaluate, Loop, Pos, Route, State
from .router import CURRENT, route, route_hint
from .schema import Locate, NodePath, subject

# The fields each namespace offers (SPEC sections 3 and 7); `env` and `context` take any name.
FIELDS: Mapping[str, tuple[str, ...]] = {
    "captured": (
        "output",
        "stderr",
        "exit_code",
        "duration_ms",
        "verdict",
        "confidence",
        "reason",
    ),
    "prev": ("output", "stderr", "exit_code", "duration_ms", "state", "verdict"),
    "state": ("name", "iteration", "attempt"),
    "loop": ("name", "run_id", "run_dir", "dir", "started_at", "elapsed_ms", "elapsed"),
}
# Keys that route by verdict, which `next` (the success route) cannot stand beside.
_NOT_WITH_NEXT = ("route", "on_success")

# Any route problem outside a single state: coverage is not checked then.
WHOLE_LOOP = "*"


@dataclass(frozen=True)
class _Ctx:
    loop: Loop
    file: str
    locate: Locate

    def diag(self, pos: Pos, severity: Severity, code: str, message: str) -> Diagnostic:
        return Diagnostic(self.file, pos.line, pos.col, severity, code, message)


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
    ctx = _Ctx(loop, file, locate)
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
            out += _check_evaluator(ctx, state.evaluate, (*at, "evaluate"), captures)
            out += _check_own_capture(ctx, state.evaluate, (*at, "evaluate"), state.capture)
        if state.action is not None:
            out += _check_template(ctx, state.action, (*at, "action"), captures)
        if not state.terminal and state.name not in tainted and WHOLE_LOOP not in tainted:
            out += _check_coverage(ctx, state)
    for key, value in loop.context.items():
        if isinstance(value, str):
            out += _check_template(ctx, value, ("context", key), captures)
    if loop.llm.model is not None:
        from .evaluators.judge_config import model_findings

        for where, code, message in model_findings(loop.llm.model, ("llm", "model")):
            out.append(ctx.diag(ctx.locate(where), "error", code, message))
    out += _check_secret_literals(ctx)
    # A wrong target already explains any odd reachability; do not pile warnings on it.
    if WHOLE_LOOP not in tainted and not any(
        d.code in ("unknown-initial", "unknown-target") for d in out
    ):
        out += _check_graph(ctx, tainted)
    return out


def _suggest(word: str, options: Iterable[str]) -> str:
    import difflib  # only when there is something to suggest

    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _check_initial(ctx: _Ctx) -> Iterator[Diagnostic]:
    initial, states = ctx.loop.initial, ctx.loop.states
    if initial and states and initial not in states:
        yield ctx.diag(
            ctx.locate(("initial",)),
            "error",
            "unknown-initial",
            f"initial state '{initial}' is not a state{_suggest(initial, states)}",
        )


def _unknown_target(ctx: _Ctx, target: str, allow_current: bool) -> str | None:
    """The reason `target` names no state, or None when it is fine."""
    if target == CURRENT:
        return None if allow_current else "'$current' is not allowed here; name a state"
    if target in ctx.loop.states:
        return None
    return f"unknown state '{target}'{_suggest(target, ctx.loop.states)}"


def _check_loop_targets(ctx: _Ctx) -> Iterator[Diagnostic]:
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


def _check_routes(
    ctx: _Ctx, state: State, entries: list[tuple[str, Route]]
) -> Iterator[Diagnostic]:
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


def _check_state_keys(ctx: _Ctx, state: State) -> Iterator[Diagnostic]:
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


def _check_coverage(ctx: _Ctx, state: State) -> Iterator[Diagnostic]:
    """A state that branches on its verdict must say where each one goes (SPEC section 6).

    `error`/`timeout`, and every non-success verdict of a `next` state, may stop the run
    instead; `stops` lists those for `ll validate --strict`.
    """
    possible = possible_verdicts(state.evaluate, action_type=state.action_type)
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
        possible = possible_verdicts(state.evaluate, action_type=state.action_type)
        for verdict in sorted(possible):
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


def _check_evaluator(
    ctx: _Ctx, spec: Evaluate, at: NodePath, captures: set[str]
) -> Iterator[Diagnostic]:
    what = subject(at)
    if spec.type == "output_contains" and spec.pattern is not None and not spec.literal:
        try:
            re.compile(spec.pattern)
        except re.error as exc:
            yield ctx.diag(
                ctx.locate((*at, "pattern")),
                "error",
                "invalid-regex",
                f"{subject((*at, 'pattern'))} is not a valid regular expression: {exc.msg} at "
                f"position {exc.pos}; add 'literal: true' to match it as plain text",
            )
    if (
        spec.type in ("output_numeric", "output_json")
        and spec.operator is not None
        and spec.operator not in OPERATORS
    ):
        yield ctx.diag(
            ctx.locate((*at, "operator")),
            "error",
            "unknown-operator",
            f"unknown operator '{spec.operator}' in {what}"
            f"{_suggest_operator(spec.operator)}; use one of: {', '.join(OPERATORS)}",
        )
    if spec.type == "output_json" and spec.path is not None:
        try:
            parse_json_path(spec.path)
        except ValueError as exc:
            at_path = (*at, "path")
            message = f"{exc} (in {subject(at_path)})"
            yield ctx.diag(ctx.locate(at_path), "error", "bad-json-path", message)
    if spec.type == "llm_structured":
        yield from _check_judge(ctx, spec, at)
    for key in ("prompt", "source", "previous"):
        text = getattr(spec, key)
        if isinstance(text, str):
            yield from _check_template(ctx, text, (*at, key), captures)
    if isinstance(spec.target, str):
        yield from _check_template(ctx, spec.target, (*at, "target"), captures)
    for i, inner in enumerate(spec.of):
        yield from _check_evaluator(ctx, inner, (*at, "of", i), captures)


def _check_judge(ctx: _Ctx, spec: Evaluate, at: NodePath) -> Iterator[Diagnostic]:
    from .evaluators import judge_config

    found: list[judge_config.Finding] = []
    if spec.model is not None:
        found += judge_config.model_findings(spec.model, (*at, "model"))
    if spec.schema is not None and spec.schema is not PASS_FAIL_SCHEMA:  # not the built-in one
        model = spec.model or ctx.loop.llm.model
        strict = not found and judge_config.uses_strict_schema(model)
        found += judge_config.schema_findings(spec.schema, (*at, "schema"), strict=strict)
    for where, code, message in found:
        yield ctx.diag(ctx.locate(where), "error", code, message)


def _check_template(ctx: _Ctx, text: str, at: NodePath, captures: set[str]) -> Iterator[Diagnostic]:
    what = subject(at)
    pos = ctx.locate(at)
    for part in scan(text):
        if isinstance(part, PlaceholderError):
            message = _placeholder_hint(text, part) or part.message
            yield ctx.diag(pos, "error", "bad-placeholder", f"{message} (in {what})")
        elif isinstance(part, Placeholder):
            problem = _placeholder_problem(ctx, part, captures)
            if problem is not None:
                code, message = problem
                yield ctx.diag(pos, "error", code, f"'${{{part.name}}}' in {what}: {message}")


def _placeholder_hint(text: str, part: PlaceholderError) -> str | None:
    """A message that says how to write what the author meant (`$${HOME}`, `|q`), if known."""
    close = text.find("}", part.start + 2)
    if close < 0:
        return None
    from .hints import placeholder_message

    return placeholder_message(text[part.start + 2 : close].strip())


def _suggest_operator(word: str) -> str:
    from .hints import operator_for

    meant = operator_for(word)
    return f" (did you mean '{meant}'?)" if meant in OPERATORS else _suggest(word, OPERATORS)


def _placeholder_problem(
    ctx: _Ctx, part: Placeholder, captures: set[str]
) -> tuple[str, str] | None:
    ns, path = part.namespace, part.path
    if ns == "context":
        if path[0] not in ctx.loop.context:
            keys = ctx.loop.context
            if path == ("run_dir",):  # upstream little-loops' scratch folder
                return (
                    "unknown-context",
                    "there is no context key 'run_dir'; the run's own folder is "
                    "'${loop.run_dir}' here",
                )
            return (
                "unknown-context",
                f"there is no context key '{path[0]}'{_suggest(path[0], keys)}; "
                "define it under 'context:'",
            )
        return None
    if ns == "captured":
        if path[0] not in captures:
            return (
                "unknown-capture",
                f"no state has 'capture: {path[0]}'{_suggest(path[0], captures)}",
            )
        fields = FIELDS["captured"]
        if len(path) != 2 or path[1] not in fields:
            got = f"'{'.'.join(path[1:])}'" if len(path) > 1 else "nothing"
            return (
                "unknown-field",
                f"name one of {', '.join(fields)} after the capture name, not {got}",
            )
        return None
    offered = FIELDS.get(ns)
    if offered is not None and (len(path) != 1 or path[0] not in offered):
        return (
            "unknown-field",
            f"'{ns}' has no '{'.'.join(path)}'{_suggest(path[0], offered)}; "
            f"it offers: {', '.join(offered)}",
        )
    return None


# Set once the state's evaluator has given its verdict, so that evaluator cannot read them.
_AFTER_EVALUATION = ("verdict", "confidence", "reason")


def _check_own_capture(
    ctx: _Ctx, spec: Evaluate, at: NodePath, capture: str | None
) -> Iterator[Diagnostic]:
    if capture is None:
        return
    for key in ("prompt", "source", "previous", "target"):
        text = getattr(spec, key)
        if not isinstance(text, str):
            continue
        for part in scan(text):
            if (
                isinstance(part, Placeholder)
                and part.namespace == "captured"
                and len(part.path) == 2
                and part.path[0] == capture
                and part.path[1] in _AFTER_EVALUATION
            ):
                yield ctx.diag(
                    ctx.locate((*at, key)),
                    "error",
                    "own-capture-verdict",
                    f"'${{{part.name}}}' in {subject((*at, key))}: this state's "
                    f"'{part.path[1]}' is only known after its evaluator has run; read its "
                    "output, stderr, exit_code or duration_ms here, or the verdict in a "
                    "later state",
                )
    for i, inner in enumerate(spec.of):
        yield from _check_own_capture(ctx, inner, (*at, "of", i), capture)


def _edges(loop: Loop, state: State, tainted: frozenset[str]) -> set[str]:
    """The states a run can go to from `state`; any state when its routing keys are broken."""
    if state.name in tainted:
        return set(loop.states)
    if state.terminal:
        if loop.maintain:
            return {state.on_maintain or loop.initial}
        return set()
    out = set()
    for verdict in possible_verdicts(state.evaluate, action_type=state.action_type):
        decision = route(loop, state, verdict)
        if decision is not None:
            out.add(decision.target)
    return out & set(loop.states)


def _check_graph(ctx: _Ctx, tainted: frozenset[str] = frozenset()) -> Iterator[Diagnostic]:
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
    edges = {name: _edges(loop, s, tainted) for name, s in loop.states.items()}
    roots = {loop.initial}
    if loop.on_max_iterations is not None and loop.on_max_iterations in loop.states:
        roots.add(loop.on_max_iterations)
    reachable = _closure(roots, edges)
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


def _check_secret_literals(ctx: _Ctx) -> Iterator[Diagnostic]:
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
