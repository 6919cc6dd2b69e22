"""`ll validate` of a fork (`parallel:` / `for_each:`): what the state holds, its join, its
items, and `${item.…}` only where there is an item. Its verdicts are the join's."""

from __future__ import annotations

from collections.abc import Iterator

from little_loops.errors import Diagnostic
from little_loops.load.value_checks import (
    Ctx,
    check_evaluator,
    check_template,
)
from little_loops.model.fork import (
    KEY_PATTERN,
    MAX_ITEMS,
    make_items,
)
from little_loops.model.loop import (
    Join,
    State,
)
from little_loops.templates.interpolate import (
    Placeholder,
    scan,
)
from little_loops.wording import NodePath

# What a fork state can give: the join met, not met, or the fork could not start.
FORK_VERDICTS = frozenset({"success", "failure", "error"})

_FORK_KEYS = ("join", "max_concurrency", "fail_fast")


def check_fork(ctx: Ctx, state: State, captures: set[str]) -> Iterator[Diagnostic]:
    """Every problem of a fork state; for another state, `${item…}` and fork-only keys."""
    at: NodePath = ("states", state.name)
    if not state.is_fork:
        for key, given in (
            ("join", state.join is not None),
            ("max_concurrency", state.max_concurrency is not None),
            ("fail_fast", state.fail_fast),
        ):
            if given:
                yield _kind(
                    ctx,
                    (*at, key),
                    f"state '{state.name}' has '{key}', which only a "
                    "fork uses; add 'parallel:' or 'for_each:', or remove it",
                )
        yield from _item_outside(ctx, state, at)
        return
    name = state.name
    if state.parallel and state.for_each is not None:
        yield _kind(
            ctx,
            (*at, "for_each"),
            f"state '{name}' has both 'parallel' and 'for_each'; a fork is one of them",
        )
    if state.parallel:
        for key in ("action", "loop"):
            if getattr(state, key) is not None:
                yield _kind(
                    ctx,
                    (*at, key),
                    f"state '{name}' has 'parallel' and '{key}'; "
                    f"put the {key} in a branch under 'parallel:'",
                )
        if state.evaluate is not None:
            yield _kind(
                ctx,
                (*at, "evaluate"),
                f"state '{name}' has 'parallel' and "
                "'evaluate'; a branch's evaluate goes in the branch, and the join "
                "gives the state's verdict",
            )
        if len(state.parallel) < 2:
            yield ctx.diag(
                ctx.locate((*at, "parallel")),
                "warning",
                "bad-branch-name",
                f"state '{name}' has one branch; a 'loop:' state does the same without a fork",
            )
        for key, branch in state.parallel.items():
            yield from _check_branch(ctx, branch, (*at, "parallel", key), captures)
    else:
        if state.action is None and state.loop is None:
            yield _kind(
                ctx,
                (*at, "for_each"),
                f"state '{name}' has 'for_each' but no work: "
                "give it an 'action' or a 'loop' to run once per item",
            )
        if state.action is not None and state.loop is not None:
            yield _kind(
                ctx,
                (*at, "loop"),
                f"state '{name}' has both 'action' and 'loop'; a "
                "for_each runs one of them per item",
            )
        if state.with_ and state.loop is None:
            yield _kind(
                ctx,
                (*at, "with"),
                f"state '{name}' has 'with' but no 'loop'; add 'loop: FILE.yaml' or remove 'with'",
            )
        yield from _check_items(ctx, state, at)
        yield from _check_branch(ctx, state, at, captures, own=False)
    if state.terminal:
        yield _kind(
            ctx,
            (*at, "terminal"),
            f"state '{name}' is a fork and terminal; route its join to a terminal state instead",
        )
    if state.join is not None:
        yield from _check_join(ctx, state, state.join, (*at, "join"))


def _kind(ctx: Ctx, at: NodePath, message: str) -> Diagnostic:
    return ctx.diag(ctx.locate(at), "error", "state-kind", message)


def _check_branch(
    ctx: Ctx, branch: State, at: NodePath, captures: set[str], *, own: bool = True
) -> Iterator[Diagnostic]:
    """A branch's own keys (`own`: a `parallel:` entry; else the for_each state's work)."""
    if own:
        if branch.action is None and branch.loop is None:
            yield _kind(
                ctx, at, f"branch '{branch.name}' has no work: give it an 'action' or a 'loop'"
            )
        if branch.action is not None and branch.loop is not None:
            yield _kind(
                ctx,
                (*at, "loop"),
                f"branch '{branch.name}' has both 'action' and 'loop'; a branch runs one of them",
            )
        if branch.with_ and branch.loop is None:
            yield _kind(
                ctx,
                (*at, "with"),
                f"branch '{branch.name}' has 'with' but no "
                "'loop'; add 'loop: FILE.yaml' or remove 'with'",
            )
        if branch.action is not None:
            yield from check_template(ctx, branch.action, (*at, "action"), captures)
        for key, bound in branch.with_.items():
            yield from check_template(ctx, bound, (*at, "with", key), captures)
        if branch.evaluate is not None:
            yield from check_evaluator(ctx, branch.evaluate, (*at, "evaluate"), captures)
        yield from _item_outside(ctx, branch, at)
    if branch.loop is not None and branch.retry is not None:
        yield _kind(
            ctx,
            (*at, "retry"),
            f"'{branch.name}' runs a loop in a fork; 'retry' "
            "there is not supported yet: retry inside the child loop",
        )


def _check_items(ctx: Ctx, state: State, at: NodePath) -> Iterator[Diagnostic]:
    items = state.for_each
    if not isinstance(items, tuple):
        return
    if len(items) > MAX_ITEMS:
        yield ctx.diag(
            ctx.locate((*at, "for_each")),
            "error",
            "bad-items",
            f"state '{state.name}' lists {len(items)} items, more than the cap "
            f"of {MAX_ITEMS}; split the work",
        )
        return
    keys = [i.key for i in make_items(items)]
    if items and keys[0] == "1" and str(items[0]) != "1":
        yield ctx.diag(
            ctx.locate((*at, "for_each")),
            "warning",
            "bad-items",
            f"the items of state '{state.name}' are not all distinct names of "
            "letters, digits, '-' and '_' (40 at most), so the branches are "
            "keyed by index: 1, 2, …",
        )


def _check_join(ctx: Ctx, state: State, join: Join, at: NodePath) -> Iterator[Diagnostic]:
    need = join.need
    if not (need in ("all", "any") or (isinstance(need, int) and need >= 1)):
        yield ctx.diag(
            ctx.locate(at),
            "error",
            "bad-join",
            f"state '{state.name}' has join {need!s}; write all, any, a number "
            "N of branches (1 or more), or {VERDICT: all|any|N}",
        )
        return
    if isinstance(need, int) and state.parallel and need > len(state.parallel):
        yield ctx.diag(
            ctx.locate(at),
            "error",
            "bad-join",
            f"state '{state.name}' waits for {need} branches but has {len(state.parallel)}",
        )
    items = state.for_each
    if isinstance(need, int) and isinstance(items, tuple) and need > len(items):
        yield ctx.diag(
            ctx.locate(at),
            "error",
            "bad-join",
            f"state '{state.name}' waits for {need} branches but its for_each list has "
            f"{len(items)} items; write join: {len(items)} (or all)",
        )
    bad = ("error", "timeout", "cancelled")
    if join.verdict is not None and (
        join.verdict in bad or not KEY_PATTERN.fullmatch(join.verdict)
    ):
        yield ctx.diag(
            ctx.locate(at),
            "error",
            "bad-join",
            f"state '{state.name}' joins on verdict '{join.verdict}', which a "
            "branch cannot be counted by; name a verdict such as success",
        )


def _item_outside(ctx: Ctx, state: State, at: NodePath) -> Iterator[Diagnostic]:
    """`${item.…}` exists only in a `for_each` state's work."""
    texts: list[tuple[NodePath, str]] = []
    if state.action is not None:
        texts.append(((*at, "action"), state.action))
    texts += [((*at, "with", k), v) for k, v in state.with_.items()]
    for where, text in texts:
        for part in scan(text):
            if isinstance(part, Placeholder) and part.namespace == "item":
                yield ctx.diag(
                    ctx.locate(where),
                    "error",
                    "bad-placeholder",
                    f"'${{{part.name}}}' is only set in a 'for_each' state's "
                    "work; this state has no item",
                )
                break
