"""A fork's branches on other machines: `ll plan-matrix`, `ll run --branch`, `ll join`.

`ll plan-matrix FILE STATE` prints a fork's items as a GitHub Actions `strategy.matrix`
(`{"include": [{"key", "index", "value"}…]}`); each matrix job runs one branch with
`ll run FILE --branch STATE=KEY`, which leaves a run directory marked by `branch.json`; and
`ll join RUN --from DIR…` copies those branches into RUN's fork (paused there by
`ll step FILE --until STATE`) and resumes RUN, which reads them back as finished and runs
only the branches no job ran. No scheduler of our own: the CI engine is the scheduler.

Like `cli`, this imports only click and the standard library at the top.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

MARK = "branch.json"


def _fork_state(loop: Any, name: str) -> Any:
    state = loop.states.get(name)
    if state is None or not state.is_fork:
        forks = ", ".join(s.name for s in loop.states.values() if s.is_fork) or "none"
        what = "is not a fork" if state is not None else "does not exist"
        raise click.UsageError(
            f"state '{name}' {what} in {loop.path.name}; its for_each/parallel states: {forks}"
        )
    return state


def _sets(sets: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for given in sets:
        key, eq, value = given.partition("=")
        if not eq or not key:
            raise click.BadParameter(f"'{given}' is not KEY=VALUE", param_hint="--set")
        out[key] = value
    return out


@click.command("plan-matrix", short_help="Print a fork's items as a GitHub Actions matrix.")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("state")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a context value.")
def plan_matrix(file: str, state: str, sets: tuple[str, ...]) -> None:
    """Print the items of STATE (a for_each or parallel state) as `strategy.matrix` JSON.

    Each matrix job then runs its branch with `ll run FILE --branch STATE=${{ matrix.key }}`.
    The items must be known before the run: a YAML list, or a template of `context`/`env`.

    \b
    Example:
      ll plan-matrix loops/rollout.yaml rollout
    """
    import os

    from little_loops.errors import LoopError
    from little_loops.load.loader import load
    from little_loops.model.fork import (
        branch_items,
        make_items,
        max_items,
        parse_items,
    )
    from little_loops.templates.interpolate import (
        render,
        resolve_context,
    )

    loop = load(Path(file))
    fork = _fork_state(loop, state)
    try:
        if fork.parallel:
            items = branch_items(fork)
        elif isinstance(fork.for_each, str):
            context = resolve_context(loop.context, _sets(sets), env=os.environ, loop=None)
            scope = {"context": context, "env": os.environ}
            text = render(fork.for_each, scope, shell=False, where=f"state '{state}'")
            items = make_items(parse_items(text), max_items())
        else:
            items = make_items(list(fork.for_each or ()), max_items())
    except LoopError as exc:
        raise click.UsageError(
            f"the items of '{state}' are not known before the run ({exc.message}); a matrix "
            "needs a YAML list, or a for_each template of context or env values"
        ) from None
    except Exception as exc:  # ItemsError: too many
        raise click.UsageError(str(exc)) from None
    rows = [{"key": i.key, "index": i.index, "value": i.text} for i in items]
    click.echo(json.dumps({"include": rows}, ensure_ascii=False))


def run_branch(
    loop: Any, options: Any, branch: str, run_id: str | None, *, json_mode: bool, quiet: bool
) -> None:
    """`ll run FILE --branch STATE=KEY`: the fork state alone, with that one branch; its run
    directory is marked (`branch.json`) for `ll join`. Exit 0 when the branch succeeded."""
    import dataclasses

    from little_loops.actions import adopt_orphans
    from little_loops.model.fork import (
        BranchEnd,
        counts,
    )
    from little_loops.model.loop import Join
    from little_loops.report.render import make_renderer
    from little_loops.run.runner import (
        Runner,
        signals_as_exceptions,
    )
    from little_loops.run.subloop import child_dir

    name, eq, key = branch.partition("=")
    if not eq or not key:
        raise click.BadParameter(f"'{branch}' is not STATE=KEY", param_hint="--branch")
    _fork_state(loop, name)
    alone = dataclasses.replace(loop, initial=name, on_max_iterations=None, maintain=False)
    options = dataclasses.replace(options, max_iterations=1, branch=(name, key))
    renderer = make_renderer(json_mode=json_mode, quiet=quiet, verbose=False)
    adopt_orphans()
    with signals_as_exceptions():
        result = Runner(alone, options, listeners=[renderer], run_id=run_id).run()
    where = child_dir(result.run_dir, 1, name) / key
    try:
        record = json.loads((where / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        click.echo(f"ll: branch {name}/{key} did not run: {result.error}", err=True)
        sys.exit(3)
    mark = {
        "loop": loop.name,
        "state": name,
        "key": key,
        "dir": str(where.relative_to(result.run_dir)),
    }
    (result.run_dir / MARK).write_text(json.dumps(mark) + "\n", encoding="utf-8")
    end = BranchEnd(str(record.get("verdict")), str(record.get("outcome") or ""))
    if not json_mode:
        click.echo(
            f"ll: branch {name}/{key} ended {end.verdict}; its run: {result.run_dir}", err=True
        )
    code = 0 if counts(Join(), end) else 1
    target = os.environ.get("GITHUB_OUTPUT")
    if target:  # for the step that uploads this run (the Action, a matrix job)
        from little_loops.report.reports import write_outputs

        problem = write_outputs(Path(target), result.run_id, code, [])
        if problem:
            click.echo(f"ll: warning: {problem}", err=True)
    sys.exit(code)


@click.command("join", short_help="Gather branch runs of other jobs into a run and resume it.")
@click.argument("run_id", metavar="RUN")
@click.option(
    "--from",
    "sources",
    multiple=True,
    required=True,
    type=click.Path(exists=True, file_okay=False),
    metavar="DIR",
    help="A directory holding branch runs (`ll run --branch`), searched below; repeatable.",
)
@click.option("--json", "json_mode", is_flag=True, help="Stream events as JSON lines on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the final line.")
def join(run_id: str, sources: tuple[str, ...], json_mode: bool, quiet: bool) -> None:
    """Copy the branch runs found under each DIR into RUN's fork, then resume RUN.

    RUN must be about to run the fork (`ll step FILE --until STATE` pauses it there). A branch
    gathered is read back as finished; a branch no job ran runs here.

    \b
    Example:
      ll join 20261122-041430-rollout-3fa2 --from artifacts/
    """
    import shutil

    from little_loops.record.store import find_run
    from little_loops.run.subloop import child_dir

    run = find_run(Path.cwd(), run_id)
    data = run.read_state()
    current, step = str(data.get("current") or ""), int(data.get("step") or 0) + 1
    if data.get("status") == "finished":
        raise click.UsageError(f"run {run_id} has finished; there is nothing to join")
    fork = child_dir(run.root, step, current)
    found: list[str] = []
    for source in sources:
        for mark in sorted(Path(source).rglob(MARK)):
            info = json.loads(mark.read_text(encoding="utf-8"))
            if info.get("state") != current:
                raise click.UsageError(
                    f"{mark.parent} is a branch of '{info.get('state')}', but run {run_id} is "
                    f"at '{current}'; pause it before that fork: ll step FILE --until "
                    f"{info.get('state')}"
                )
            target = fork / str(info["key"])
            if not (target / "result.json").is_file():
                if target.exists():
                    shutil.rmtree(target)
                shutil.copytree(mark.parent / str(info["dir"]), target)
            found.append(str(info["key"]))
    if not found:
        raise click.UsageError(f"no branch runs ({MARK}) under {', '.join(sources)}")
    if not json_mode:
        click.echo(f"ll: gathered {len(found)} branches of '{current}': {', '.join(found)}")
    ctx = click.get_current_context()
    assert ctx.parent is not None
    assert isinstance(ctx.parent.command, click.Group)
    resume = ctx.parent.command.get_command(ctx.parent, "resume")
    assert resume is not None
    ctx.invoke(resume, run_id=str(run.root), json_mode=json_mode, quiet=quiet)


COMMANDS = (plan_matrix, join)
