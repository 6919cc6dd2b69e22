"""The fork step kind (`parallel:`/`for_each:`): its branches, each a child run of its own in a
thread of this process, and their join.

The items are resolved once and stored (`sub/<step>-<state>/items.json`) before any branch
starts; each branch is planned here (its work rendered in this run's scope with `item`, its
child loop or one-step action loop, its run directory) and started through the context's one
door (`RunContext.start_child`) when `fork_schedule.Fork` schedules it; the join of their ends
(`fork.py`) is the state's verdict, and every branch's record is kept (`join.json`,
`captured.X.branches`). What a branch acts through, and what stops it, is `branch_layer`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from little_loops.actions import DEFAULT_TAIL_BYTES
from little_loops.errors import (
    LoopError,
    RecordError,
    RunError,
    SimulationError,
)
from little_loops.load.children import templates
from little_loops.model.details import Details, Json
from little_loops.model.fork import (
    BranchEnd,
    BranchRecord,
    Item,
    ItemsError,
    branch_items,
    decide,
    describe,
    items_json,
    items_record,
    make_items,
    max_items,
    parse_items,
    summary,
)
from little_loops.model.loop import (
    EMPTY,
    Join,
    Loop,
    State,
    Verdict,
)
from little_loops.model.records import replace
from little_loops.record import events as ev
from little_loops.run import subloop
from little_loops.run.action_branch import ActionBranches
from little_loops.run.action_layer import ActionLayer, ChildRequest, ChildStub, simulates, stub
from little_loops.run.branch_layer import (
    BranchActions,
    Scope,
    TreeSlots,
    branch_listener,
)
from little_loops.run.children import (
    Branch,
    ChildPlan,
)
from little_loops.run.context import RunContext
from little_loops.run.fork_schedule import (
    Fork,
    Job,
    loop_record,
)
from little_loops.run.steps import StepResult
from little_loops.run.subloop import (
    ChildEnd,
    ChildError,
)
from little_loops.templates.interpolate import (
    placeholders,
    render,
)

ITEMS = "items.json"
JOIN = "join.json"


def _stored_items(stored: Path, cap: int, read: Callable[[Path], object]) -> list[Item]:
    """The items a fork stored when it started (read back by the run's session, which fills
    in their sealed secrets), checked as any file read back (`items_record`). Anything else
    stops the run (exit 3), resumable once the file is repaired."""
    try:
        data = read(stored)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RecordError(
            f"{stored}: cannot be read as JSON ({type(exc).__name__}); repair it (or remove "
            "it, to resolve the items again) and run ll resume"
        ) from None
    return items_record(data, str(stored), cap)


class ForkStep:
    """A `parallel:`/`for_each:` state: run (or resume) every branch; their join is the verdict."""

    def run(self, ctx: RunContext, step: int, state: State) -> StepResult:
        result = _fork(ctx, step, state)
        ctx.settle_questions(state.name)
        return result


def _fork(ctx: RunContext, step: int, state: State) -> StepResult:
    root = subloop.child_dir(ctx.run_dir.root, step, state.name)
    join = state.join or Join()
    if not (root / ITEMS).is_file():
        _refuse_cut_items(ctx, state)
    try:
        items = _fork_items(ctx, step, state, root)
    except (ItemsError, LoopError) as exc:
        if isinstance(exc, RecordError):
            raise  # not the branches' doing: the run stops, resumable
        why = exc.message if isinstance(exc, LoopError) else str(exc)
        return _joined(ctx, step, state, join, [], {}, "error", why)
    only = ctx.options.branch
    if only is not None and only[0] == state.name and ctx.parent is None:
        chosen = [i for i in items if i.key == only[1]]  # `ll run --branch STATE=KEY`
        if not chosen:
            keys = ", ".join(i.key for i in items) or "none"
            why = f"state '{state.name}' has no branch '{only[1]}'; its keys: {keys}"
            return _joined(ctx, step, state, join, [], {}, "error", why)
        items = chosen

    # What the fork's action branches share, made at the first (a `parallel:` branch's own),
    # and the branch folders there already (a resumed fork's): only those are looked into.
    kits: dict[str, ActionBranches] = {}
    present = frozenset(os.listdir(root))

    def prepare(item: Item, base: BranchActions | TreeSlots, total: int) -> Job | BranchEnd:
        return _prepare(ctx, step, state, root, item, base, total, kits, present)

    ends = Fork(ctx, step, state, root, items, join, prepare, present).run()
    verdict = decide(join, len(items), ends) or "failure"
    done = summary(join, items, ends, verdict)
    ctx.session.write_record(root / JOIN, done["branches"])
    reason: str | None = None
    if verdict != "success":
        failed = done["failed_keys"].replace("\n", ", ")
        reason = f"join {describe(join)}: {done['succeeded']} of {len(items)} succeeded" + (
            f"; not: {failed}" if failed else ""
        )
    return _joined(ctx, step, state, join, items, ends, verdict, reason, done)


def _joined(
    ctx: RunContext,
    step: int,
    state: State,
    join: Join,
    items: list[Item],
    ends: dict[str, BranchEnd],
    verdict: str,
    reason: str | None,
    record: dict[str, Json] | None = None,
) -> StepResult:
    record = record or summary(join, items, ends, verdict)
    details: dict[str, Json] = {
        "policy": describe(join),
        **{k: record[k] for k in ("total", "succeeded", "failed", "cancelled")},
    }
    if verdict == "success":
        details["reason"] = f"join {describe(join)}: {record['succeeded']} of " + (
            f"{record['total']} succeeded"
        )
    ctx.session.emit(
        ev.Evaluate(
            step=step,
            state=state.name,
            type="join",
            verdict=verdict,
            details=Details(details),
            reason=reason,
        )
    )
    if state.capture:
        ctx.progress.captured[state.capture] = record
    return StepResult(Verdict(verdict, Details(details)), None, reason, record)


def _refuse_cut_items(ctx: RunContext, state: State) -> None:
    """A for_each over a capture that kept only the tail of a longer output would run the
    items of a cut list: the run stops (exit 3) and says why."""
    if not isinstance(state.for_each, str):
        return
    for part in placeholders(state.for_each):
        record: object = None
        if part.namespace == "captured" and part.path[1:] == ("output",):
            record = ctx.progress.captured.get(part.path[0])
        elif part.namespace == "prev" and part.path == ("output",):
            record = ctx.progress.prev
        if isinstance(record, dict) and record.get("output_cut"):
            raise RunError(
                f"state '{state.name}': for_each reads '${{{part.name}}}', which holds only "
                f"the last {DEFAULT_TAIL_BYTES // (1 << 20)} MiB of a longer output, so its "
                "items would be cut; write the items to a file in that step and list them "
                "from there in a smaller output, or split the work"
            )


def _fork_items(ctx: RunContext, step: int, state: State, root: Path) -> list[Item]:
    """The items, resolved once: read back from items.json when the fork resumes."""
    stored = root / ITEMS
    if stored.is_file():
        return _stored_items(stored, max_items(ctx.env), ctx.session.read_record)
    if state.parallel:
        items = branch_items(state)
    else:
        given = state.for_each
        if isinstance(given, str):
            text = ctx.steps.templates.render(given, step, state, 1, shell=False)
            values: list[Json] = parse_items(text)
        else:
            values = list(given or ())
        items = make_items(values, max_items(ctx.env))
    root.mkdir(parents=True, exist_ok=True)
    ctx.session.write_record(stored, items_json(items))
    return items


# -- one branch ----------------------------------------------------------------------------


def _prepare(
    ctx: RunContext,
    step: int,
    state: State,
    root: Path,
    item: Item,
    base: BranchActions | TreeSlots,
    total: int,
    kits: dict[str, ActionBranches],
    present: frozenset[str],
) -> Job | BranchEnd:
    """A `Job` ready to start, or the `BranchEnd` of a branch that cannot start."""
    work = state.parallel[item.key] if state.parallel else state
    if state.parallel and work.action is not None:  # the fork's timeout/retry: defaults
        work = replace(work, timeout=work.timeout or state.timeout, retry=work.retry or state.retry)
    path = (*ctx.path, state.name, item.key)
    where = f"state '{state.name}' branch '{item.key}'"
    scope = ctx.steps.templates.scope(step, state, 1)
    if not state.parallel:
        scope["item"] = item.scope()
    raw = base.inner  # the layer under the fork's own (`TreeSlots`, or its branch's)
    values: dict[str, str] = {}
    stand_in: ChildStub | None = None
    command = ""
    try:
        if work.loop is not None:
            child = subloop.load_child(ctx.loop, work, len(path), ctx.resolved)
            values = {k: render(t, scope, shell=False, where=where) for k, t in work.with_.items()}
            subloop.bind_inputs(child, values, work.loop)
            layer = raw.child(state.name, None).child(item.key, child)
            stand_in = stub(raw.child(state.name, None), ChildRequest(item.key, child))
        else:
            shell = work.action_type == "shell"
            assert work.action is not None
            command = render(
                work.action,
                scope,
                shell=shell,
                where=where,
                command=True,
                program=ctx.steps.templates.program,
            )
            # Not `for_loop`: a simulation answers the branch as an action, never as an
            # unanswered terminal's silent success.
            layer = raw.child(state.name, None)
    except (ChildError, LoopError) as exc:
        if isinstance(exc, SimulationError):
            raise  # the script is wrong, not the branch: the run stops
        reason = str(exc.message if isinstance(exc, LoopError) else exc)
        record = BranchRecord.of(verdict="error", error=reason, key=item.key, index=item.index)
        return BranchEnd("error", "error", record)
    child_root = root / item.key
    run_id = f"{ctx.progress.run_id}/{root.name}/{item.key}"
    if stand_in is not None:
        end = ChildEnd.stubbed(run_id, stand_in)
        return BranchEnd(end.verdict, end.outcome, loop_record(end, item))
    branch_scope = Scope(base.scope)
    # `--verbose` output goes to the root's hook, each line under this branch's path.
    out = ctx.options.on_output if base.verbose is None else base.verbose[1]
    verbose = ("/".join(path), out) if out is not None else None

    def wrap(layer: ActionLayer) -> ActionLayer:
        return BranchActions(layer, branch_scope, base.jobs, verbose)

    redactor = ctx.redactor
    branch = Branch(
        key=item.key,
        index=item.index,
        item=(redactor.text(item.text) if redactor else item.text)[:200],
        fork="parallel" if state.parallel else "for_each",
        total=total,
        wrap=wrap,
    )
    if work.loop is None:
        if _runs_here(ctx, child_root, present):
            kit = kits.get(item.key if state.parallel else "")
            if kit is None:
                first = _branch_state(work, item.key, command)
                kit = ActionBranches(ctx, root, _action_loop(ctx, first), present)
                kits[item.key if state.parallel else ""] = kit
            one = kit.one_state(item.key, command)
            segment = (state.name, item.key)
            listeners = [branch_listener(one, segment) for one in ctx.listeners]
            if layer is not ctx.steps.actions and simulates(layer):
                listeners.append(layer.observe)  # a simulation learns which state acts
            ran = kit.start(step, state.name, one, child_root, run_id, branch, listeners, layer)
            return Job(item, child_root, ran, branch_scope, True)
        child = _action_loop(ctx, _branch_state(work, item.key, command))
    started = ctx.start_child(
        ChildPlan(
            step=step,
            state=state,
            loop=child,
            root=child_root,
            run_id=run_id,
            file=work.loop or "",
            values=values,
            path=path,
            layer=lambda: layer,
            # A branch's child: keys bound from program text; an action branch runs with this
            # run's context, and its keys that hold program text.
            program_context=(
                subloop.program_inputs(work, ctx.steps.templates.program)
                if work.loop is not None
                else ctx.steps.templates.program
            ),
            timeout=None if work.action else work.timeout,
            branch=branch,
            snapshot=work.loop is not None,
        )
    )
    return Job(item, child_root, started, branch_scope, work.loop is None)


def _runs_here(ctx: RunContext, root: Path, present: frozenset[str]) -> bool:
    """Whether an action branch runs as its one step in the fork (`action_branch`): unless
    it was running as a run of its own (an older `ll`'s, resumed) or `ll run --branch` keeps
    it in a directory of its own (which `ll join` copies)."""
    if ctx.options.branch is not None:
        return False
    return root.name not in present or not (root / "state.json").is_file()


def _branch_state(work: State, key: str, command: str) -> State:
    """An action branch's one state: the branch, named by its key, and terminal."""
    return replace(
        work,
        name=key,
        action=command.replace("${", "$${"),  # rendered already: literal from here
        terminal=True,
        routes=EMPTY,
        next=None,
        capture=None,
        parallel=EMPTY,
        for_each=None,
        join=None,
        max_concurrency=None,
        fail_fast=False,
    )


def _action_loop(ctx: RunContext, state: State) -> Loop:
    """An action branch as a run of one step: `state` (`_branch_state`)."""
    key = state.name
    loop = replace(
        ctx.loop,
        initial=key,
        states={key: state},
        context=EMPTY,
        max_iterations=1,
        on_max_iterations=None,
        maintain=False,
        on_error=None,
        timeout=None,
        outputs=EMPTY,
        inputs=EMPTY,
    )
    # Only the context keys the branch's own templates read (its evaluator's: its command is
    # rendered already), never the parent's whole context: items kept in `context` would be
    # copied into every branch's state.
    used = {
        part.path[0]
        for _, text in templates(loop)
        for part in placeholders(text)
        if part.namespace == "context"
    }
    context = {k: str(v).replace("${", "$${") for k, v in ctx.progress.context.items() if k in used}
    return replace(loop, context=context)
