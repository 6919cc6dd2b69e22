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
        BranchRecord,
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
        raw = json.loads((where / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        click.echo(f"ll: branch {name}/{key} did not run: {result.error}", err=True)
        sys.exit(3)
    record = BranchRecord.from_json(raw, str(where / "result.json"), need=("verdict",))
    mark = {
        "loop": loop.name,
        "state": name,
        "key": key,
        "dir": str(where.relative_to(result.run_dir)),
    }
    (result.run_dir / MARK).write_text(json.dumps(mark) + "\n", encoding="utf-8")
    end = BranchEnd(str(record.verdict), record.outcome or "")
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
    from little_loops.record.store import find_run
    from little_loops.run.subloop import child_dir

    run = find_run(Path.cwd(), run_id)
    data = run.read_state()
    current, step = str(data.get("current") or ""), int(data.get("step") or 0) + 1
    if data.get("status") == "finished":
        raise click.UsageError(f"run {run_id} has finished; there is nothing to join")
    fork = child_dir(run.root, step, current)
    planned = _planned_keys(data, current, fork)
    budget = _JoinBudget(_max_bytes())
    found: list[str] = []
    for source in sources:
        for mark in _marks(Path(source)):
            key, branch = _read_mark(mark, current, run_id, planned)
            target = fork / key
            if not (target / "result.json").is_file():
                _copy_branch(branch, target, budget)
            found.append(key)
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


def _refused(message: str) -> Exception:
    """A branch run ll join refuses: one line, exit 2 (`LoopError`)."""
    from little_loops.errors import LoopError

    return LoopError(message)


MARK_MAX_BYTES = 64 * 1024  # a branch.json is a few lines
JOIN_MAX_BYTES = 1 << 30  # what `ll join` copies in all, unless LL_JOIN_MAX_BYTES says


def _max_bytes() -> int:
    import os

    given = os.environ.get("LL_JOIN_MAX_BYTES", "").strip()
    if not given:
        return JOIN_MAX_BYTES
    try:
        value = int(given)
    except ValueError:
        raise _refused(f"LL_JOIN_MAX_BYTES={given!r} is not a whole number of bytes") from None
    return max(value, 0)


def _marks(source: Path) -> list[Path]:
    """Every `branch.json` under `source`, walking real directories only (no link followed)."""
    import os

    found: list[Path] = []
    for top, dirs, files in os.walk(source, followlinks=False):
        dirs.sort()
        if MARK in files:
            found.append(Path(top) / MARK)
    return sorted(found)


def _planned_keys(data: dict[str, Any], current: str, fork: Path) -> frozenset[str] | None:
    """The branch keys the paused run's fork will have, when they are known before it runs:
    its `items.json`, or items the loop file lists or builds from context and env."""
    import os

    from little_loops.errors import LoopError
    from little_loops.load.loader import load
    from little_loops.model.fork import (
        branch_items,
        items_record,
        make_items,
        max_items,
        parse_items,
    )
    from little_loops.model.progress import SavedOptions
    from little_loops.templates.interpolate import (
        render,
        resolve_context,
    )

    stored = fork / "items.json"
    if stored.is_file() and not stored.is_symlink():
        try:
            rows = json.loads(stored.read_text(encoding="utf-8"))
            return frozenset(i.key for i in items_record(rows, str(stored), max_items()))
        except (OSError, ValueError, LoopError):
            pass  # the run says what is wrong with it when it resumes
    try:
        loop = load(Path(str(data.get("loop_file") or "")))
        state = loop.states[current]
        if state.parallel:
            return frozenset(i.key for i in branch_items(state))
        if isinstance(state.for_each, str):
            saved = SavedOptions.from_json(data.get("options"), "state.json")
            sets = dict(saved.overrides)
            context = resolve_context(loop.context, sets, env=os.environ, loop=None)
            scope = {"context": context, "env": os.environ}
            text = render(state.for_each, scope, shell=False)
            return frozenset(i.key for i in make_items(parse_items(text), max_items()))
        return frozenset(i.key for i in make_items(list(state.for_each or ()), max_items()))
    except Exception:  # LoopError, ItemsError, a missing file
        return None  # known only when the fork runs: the key's form is checked still


def _read_mark(
    mark: Path, current: str, run_id: str, planned: frozenset[str] | None
) -> tuple[str, Path]:
    """A `branch.json`, checked: its state is the paused fork, its key one of the fork's,
    its `dir` the branch run's own directory inside the marked run. Anything else is a
    UsageError naming the file."""
    import os
    import stat

    from little_loops.model.fork import KEY_PATTERN
    from little_loops.run.subloop import child_dir

    def bad(why: str) -> Exception:
        return _refused(f"{mark}: {why}; remove it or make it again with ll run --branch")

    try:
        info = os.lstat(mark)
        if not stat.S_ISREG(info.st_mode):
            raise bad("is not a regular file")
        if info.st_size > MARK_MAX_BYTES:
            raise bad(f"is {info.st_size} bytes, more than a branch.json's {MARK_MAX_BYTES}")
        data = json.loads(mark.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise bad(f"is not JSON ({exc.msg}, line {exc.lineno})") from None
        raise bad(f"cannot be read ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise bad("is not a JSON object")
    state, key, where = data.get("state"), data.get("key"), data.get("dir")
    if not (isinstance(state, str) and isinstance(key, str) and isinstance(where, str)):
        raise bad("needs the text fields state, key and dir")
    if state != current:
        raise _refused(
            f"{mark.parent} is a branch of '{state[:80]}', but run {run_id} is "
            f"at '{current}'; pause it before that fork: ll step FILE --until {state[:80]}"
        )
    if not KEY_PATTERN.fullmatch(key):
        raise bad(f"its key {key[:80]!r} is not a branch key (letters, digits, _ and -)")
    if planned is not None and key not in planned:
        keys = ", ".join(sorted(planned)) or "none"
        raise bad(f"its key '{key}' is not a branch of '{current}' (its keys: {keys})")
    expected = child_dir(Path("."), 1, current) / key
    if Path(where) != expected:
        raise bad(f"its dir {where[:120]!r} is not the branch's own directory '{expected}'")
    branch = mark.parent / expected
    try:
        if not stat.S_ISDIR(os.lstat(branch).st_mode):
            raise bad(f"'{expected}' is not a directory")
    except OSError:
        raise bad(f"'{expected}' does not exist beside it") from None
    return key, branch


class _JoinBudget:
    def __init__(self, limit: int) -> None:
        self.left = limit
        self.limit = limit

    def take(self, size: int, path: Path) -> None:
        self.left -= size
        if self.left < 0:
            raise _refused(
                f"{path}: the branch runs hold more than {self.limit} bytes in all; "
                "raise LL_JOIN_MAX_BYTES if that is expected"
            )


def _copy_branch(branch: Path, target: Path, budget: _JoinBudget) -> None:
    """Copy a branch run's directory: directories and regular files only, no link followed
    and none copied; a device, pipe or socket stops the join. Checked whole before anything
    is written, so a refused branch leaves the run as it was."""
    import os
    import shutil
    import stat

    plan: list[tuple[Path, Path, bool]] = []  # (source, relative, is_dir)
    for top, dirs, files in os.walk(branch, followlinks=False):
        here = Path(top)
        for name in sorted(dirs) + sorted(files):
            path = here / name
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                raise _refused(
                    f"{path}: a branch run holds a symbolic link, which ll join never follows "
                    "or copies; remove it"
                )
            if stat.S_ISDIR(info.st_mode):
                plan.append((path, path.relative_to(branch), True))
            elif stat.S_ISREG(info.st_mode):
                budget.take(info.st_size, path)
                plan.append((path, path.relative_to(branch), False))
            else:
                raise _refused(
                    f"{path}: a branch run holds something that is not a regular file "
                    "(a device, pipe or socket); remove it"
                )
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    for source, relative, is_dir in plan:
        dest = target / relative
        if is_dir:
            dest.mkdir(exist_ok=True)
            continue
        fd = os.open(source, flags)  # the file checked above, not a link put in its place
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise _refused(f"{source}: changed into something not a regular file")
            with os.fdopen(fd, "rb", closefd=False) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
        finally:
            os.close(fd)


COMMANDS = (plan_matrix, join)
