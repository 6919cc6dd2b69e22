"""Following `loop:` states at load time: each child file is loaded (relative to its parent's
directory) and checked against the state that calls it: the file exists, `with:` fits the
child's inputs, every child terminal the parent can receive is routed, `${captured.X.outputs.K}`
names a declared output; call cycles and nesting deeper than `MAX_DEPTH` runs are errors.

The loader hands in its own `load` function, so this module never imports the loader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from little_loops.errors import Diagnostic
from little_loops.load.schema import Locate
from little_loops.load.value_checks import (
    Ctx,
    suggest,
)
from little_loops.model.loop import (
    ERROR_VERDICTS,
    Evaluate,
    Input,
    Loop,
    State,
)
from little_loops.model.records import record, replace
from little_loops.model.router import route
from little_loops.templates.interpolate import (
    Placeholder,
    scan,
)
from little_loops.wording import (
    NodePath,
    show,
)

# Runs in one tree, the root counting as 1 (a chain of 8 files is the most).
MAX_DEPTH = 8

# What a run of a child can end as, besides the name of its terminal.
OUTCOMES = ("success", "failure")

LoadChild = Callable[[Path, str], tuple[Loop | None, list[Diagnostic]]]


@record
class _Tree:
    """The files being loaded, outermost first, and the results already known for a chain."""

    stack: list[Path]
    cache: dict[tuple[Path, tuple[Path, ...]], tuple[Loop | None, list[Diagnostic]]]


_TREE = _Tree([], {})


def follow(
    loop: Loop,
    *,
    file: str,
    locate: Locate,
    load: LoadChild,
    tainted: frozenset[str] = frozenset(),
) -> list[Diagnostic]:
    """Every problem of `loop`'s `loop:` states and their children, the children's own
    problems reported at the children's files. States in `tainted` (a schema error in a key
    that routes, `checks.WHOLE_LOOP` for the whole loop) are not checked for coverage."""
    ctx = Ctx(loop, file, locate)
    calls = [s for s in loop.states.values() if s.is_loop]
    # A fork's `loop:` work (its own, or a branch's) is followed too; the fork's verdicts
    # are its join's (success, failure, error), so the child's terminals need no routes.
    work = [s for s in loop.states.values() if s.is_fork and s.loop is not None]
    work += [
        replace(b, name=f"{s.name}/{key}")  # a branch: named, and found, under its fork
        for s in loop.states.values()
        for key, b in s.parallel.items()
        if b.loop is not None
    ]
    if not calls and not work:
        return []
    me = loop.path.resolve()
    outer = not _TREE.stack
    _TREE.stack.append(me)
    try:
        out: list[Diagnostic] = []
        for state in calls:
            covered = state.name not in tainted and "*" not in tainted
            out += _follow_state(ctx, state, file=file, load=load, coverage=covered)
        for state in work:
            out += _follow_state(ctx, state, file=file, load=load, coverage=False)
        return out
    finally:
        _TREE.stack.pop()
        if outer:
            _TREE.cache.clear()


def _where(state: State) -> NodePath:
    """Where a state (or a fork's branch, named `fork/key`) is in the file."""
    fork, slash, key = state.name.partition("/")
    return ("states", fork, "parallel", key) if slash else ("states", state.name)


def child_path(parent: Loop, state: State) -> Path:
    """The absolute path of the file a `loop:` state runs: relative to the parent's directory."""
    return (parent.dir / (state.loop or "")).resolve()


def _not_a_loop_file(parent: Loop, written: str) -> str | None:
    """Why `written` cannot name a loop file at all (", which ..."), else None: a NUL byte,
    a name too long for the file system, a link to nowhere, a pipe or a device."""
    import os
    import stat

    if "\0" in written:
        return ", a name with a NUL byte in it; write the file's path"
    path = parent.dir / written
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            return f", a symbolic link to {os.readlink(path)!r}, which does not exist"
        return None  # said below, with the files beside it
    except OSError as exc:
        return f", which cannot be used: {exc.strerror or exc}"
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return ", which is not a regular file (a pipe or a device); give a loop file"
    return None


def _child_file(parent_file: str, written: str) -> str:
    """The child's name as the user will recognise it: beside the parent's name as given."""
    parent = Path(parent_file).parent
    return written if str(parent) == "." else str(parent / written)


def _follow_state(
    ctx: Ctx, state: State, *, file: str, load: LoadChild, coverage: bool
) -> list[Diagnostic]:
    written = state.loop or ""
    at: NodePath = (*_where(state), "loop")
    pos = ctx.locate(at)
    if "${" in written:
        return [
            ctx.diag(
                pos,
                "error",
                "loop-template",
                f"state '{state.name}' names its loop file with a placeholder ({show(written)}); "
                "a 'loop:' file is a fixed path relative to this file, so `ll validate` can "
                "check it before anything runs",
            )
        ]
    what = _not_a_loop_file(ctx.loop, written)
    if what is not None:
        shown = show(written) if len(written) <= 80 else show(written[:60] + "...")
        return [ctx.diag(pos, "error", "no-such-loop", f"state '{state.name}' runs {shown}{what}")]
    path = child_path(ctx.loop, state)
    if not path.is_file():
        siblings = sorted(
            p.name
            for p in path.parent.glob("*.y*ml")
            if p.suffix in (".yaml", ".yml") and p.is_file()
        )
        what = "is a directory" if path.is_dir() else "does not exist"
        return [
            ctx.diag(
                pos,
                "error",
                "no-such-loop",
                f"state '{state.name}' runs loop file '{written}', which {what} (looked for "
                f"{path}){suggest(Path(written).name, siblings)}",
            )
        ]
    stack = _TREE.stack
    if path in stack:
        chain = " → ".join(p.name for p in (*stack[stack.index(path) :], path))
        return [
            ctx.diag(
                pos,
                "error",
                "loop-cycle",
                f"state '{state.name}' calls '{written}', which is already running above it: "
                f"{chain}; a loop cannot call itself, directly or through others",
            )
        ]
    if len(stack) >= MAX_DEPTH:
        chain = " → ".join(p.name for p in (*stack, path))
        return [
            ctx.diag(
                pos,
                "error",
                "too-deep",
                f"state '{state.name}' would start run number {len(stack) + 1} in one tree, "
                f"more than {MAX_DEPTH}: {chain}; call fewer levels deep",
            )
        ]
    key = (path, tuple(stack))
    child_file = _child_file(file, written)
    if key not in _TREE.cache:
        _TREE.cache[key] = load(path, child_file)
    child, found = _TREE.cache[key]
    out = list(found)
    errors = sum(d.severity == "error" and d.file == child_file for d in found)
    if child is None or errors:
        n = f"{errors} error{'s' * (errors != 1)}" if errors else "errors"
        out.append(
            ctx.diag(
                pos,
                "error",
                "bad-child",
                f"state '{state.name}' runs '{written}', which has {n} (listed with its own "
                "file name); fix the child first",
            )
        )
        return out
    out += _check_with(ctx, state, child)
    out += _check_terminals(ctx, state, child, written, coverage=coverage)
    out += _check_outputs_read(ctx, state, child, written)
    if child.maintain:
        out.append(
            ctx.diag(
                pos,
                "warning",
                "child-maintain",
                f"'{written}' has 'maintain: true', so it ends only at a limit, which state "
                f"'{state.name}' receives as verdict 'error'",
            )
        )
    return out


# -- `with:` against the child's inputs ---------------------------------------------------------


def _check_with(ctx: Ctx, state: State, child: Loop) -> Iterator[Diagnostic]:
    inputs = child.inputs
    for key, value in state.with_.items():
        at: NodePath = (*_where(state), "with", key)
        spec = inputs.get(key)
        if spec is None:
            known = ", ".join(sorted(inputs)) or "none"
            yield ctx.diag(
                ctx.locate(at),
                "error",
                "unknown-input",
                f"state '{state.name}' passes '{key}', which is not a context key of "
                f"'{state.loop}'{suggest(key, inputs)}; its keys: {known}",
            )
            continue
        if "${" in value:
            continue  # rendered at run time, checked then
        problem = input_problem(key, spec, value)
        if problem is not None:
            yield ctx.diag(
                ctx.locate(at),
                "error",
                "bad-input-type",
                f"state '{state.name}' passes {problem}",
            )
    for key, spec in inputs.items():
        if spec.required and key not in state.with_:
            about = f" ({spec.description})" if spec.description else ""
            yield ctx.diag(
                ctx.locate((*_where(state), "loop")),
                "error",
                "missing-input",
                f"state '{state.name}' runs '{state.loop}' without its required context key "
                f"'{key}'{about}; add 'with: {{{key}: VALUE}}'",
            )


_INTEGER = re.compile(r"[+-]?\d+")


def input_problem(key: str, spec: Input, text: str) -> str | None:
    """What is wrong with `text` as the value of input `key`, or None when it fits."""
    if spec.type == "integer" and not _INTEGER.fullmatch(text.strip()):
        return f"'{key}' = {show(text)}, which is not a whole number (its type is integer)"
    if spec.type == "number":
        try:
            float(text)
        except ValueError:
            return f"'{key}' = {show(text)}, which is not a number (its type is number)"
    if spec.type == "boolean" and text not in ("true", "false"):
        return f"'{key}' = {show(text)}, which is not true or false (its type is boolean)"
    if spec.enum is not None and text not in spec.enum:
        return f"'{key}' = {show(text)}, which is not one of: {', '.join(spec.enum)}"
    return None


def missing_inputs(loop: Loop, given: Mapping[str, str]) -> str | None:
    """`ll run` of a loop whose required context keys are not all given: one line saying which
    `--set` to add; also a `--set` value that does not fit its key's type. None when fine."""
    for key, spec in loop.inputs.items():
        if spec.required and key not in given:
            about = f" ({spec.description})" if spec.description else ""
            return f"context key '{key}'{about} needs a value: --set {key}=VALUE"
        if key in given:
            problem = input_problem(key, spec, given[key])
            if problem is not None:
                return f"--set {problem}"
    return None


# -- routing the child's ends --------------------------------------------------------------------


def terminals(child: Loop) -> dict[str, str]:
    """The child's terminal states and their outcomes: what a `loop:` state's verdict can be,
    besides `error` and `timeout`."""
    return {s.name: s.outcome for s in child.states.values() if s.terminal}


def loop_verdicts(state: State, child: Loop | None) -> frozenset[str]:
    """Every verdict a `loop:` state can give. Without the child: any verdict it routes, the
    outcomes, `error` and `timeout` (the child's terminal names are not known then)."""
    out = set(ERROR_VERDICTS)
    if state.evaluate is not None:
        from little_loops.evaluators import possible_verdicts

        return frozenset(out | possible_verdicts(state.evaluate, action_type=None))
    if child is None:
        return frozenset(out | set(OUTCOMES) | {v for v in state.routes if not v.startswith("_")})
    return frozenset(out | set(terminals(child)))


def _check_terminals(
    ctx: Ctx, state: State, child: Loop, written: str, *, coverage: bool
) -> Iterator[Diagnostic]:
    ends = terminals(child)
    for name, outcome in sorted(ends.items()):
        reserved = name in ERROR_VERDICTS or (name in OUTCOMES and name != outcome)
        if reserved:
            yield ctx.diag(
                ctx.locate((*_where(state), "loop")),
                "error",
                "reserved-terminal",
                f"'{written}' has a terminal named '{name}' (outcome {outcome}), which a "
                f"calling state cannot tell from the verdict '{name}'; rename it in the child",
            )
    if state.evaluate is not None or not coverage:
        return  # an evaluator judges the child's outputs: its verdicts route
    if state.next is None:
        for name, outcome in sorted(ends.items()):
            if name in state.routes or route(ctx.loop, state, outcome) is not None:
                continue
            yield ctx.diag(
                state.pos,
                "error",
                "uncovered-verdict",
                f"state '{state.name}' can end as '{written}' terminal '{name}' (outcome "
                f"{outcome}), but nothing routes it; add '{name}: STATE' or '{outcome}: STATE' "
                "under 'route:', or a default '_: STATE'",
            )
    known = set(ends) | set(OUTCOMES) | ERROR_VERDICTS
    for verdict, found in state.routes.items():
        if verdict.startswith("_") or verdict in known:
            continue
        yield ctx.diag(
            found.pos,
            "warning",
            "unused-route",
            f"state '{state.name}' routes '{verdict}', which '{written}' never ends with "
            f"(its terminals: {', '.join(sorted(ends)) or 'none'})",
        )


# -- `${captured.X.outputs.K}` -----------------------------------------------------------------


def _check_outputs_read(ctx: Ctx, state: State, child: Loop, written: str) -> Iterator[Diagnostic]:
    if state.capture is None:
        return
    for at, text in templates(ctx.loop):
        for part in scan(text):
            if not (
                isinstance(part, Placeholder)
                and part.namespace == "captured"
                and len(part.path) == 3
                and part.path[0] == state.capture
                and part.path[1] == "outputs"
            ):
                continue
            name = part.path[2]
            if name in child.outputs:
                continue
            declared = ", ".join(sorted(child.outputs)) or "none"
            yield ctx.diag(
                ctx.locate(at),
                "error",
                "unknown-output",
                f"'${{{part.name}}}': '{written}' declares no output '{name}'"
                f"{suggest(name, child.outputs)}; its outputs: {declared}",
            )


def templates(loop: Loop) -> Iterator[tuple[NodePath, str]]:
    """Every template in the loop and where it is."""
    for state in loop.states.values():
        at: NodePath = ("states", state.name)
        if state.action is not None:
            yield (*at, "action"), state.action
        for key, value in state.with_.items():
            yield (*at, "with", key), value
        if state.evaluate is not None:
            yield from _evaluate_templates(state.evaluate, (*at, "evaluate"))
    for key, value in loop.outputs.items():
        yield ("outputs", key), value
    for key, scalar in loop.context.items():
        if isinstance(scalar, str):
            yield ("context", key), scalar


def _evaluate_templates(spec: Evaluate, at: NodePath) -> Iterator[tuple[NodePath, str]]:
    for key in ("prompt", "source", "previous", "target"):
        value = getattr(spec, key)
        if isinstance(value, str):
            yield (*at, key), value
    for i, inner in enumerate(spec.of):
        yield from _evaluate_templates(inner, (*at, "of", i))
