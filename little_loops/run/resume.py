"""`ll resume`: pick up a run from its last finished step, refusing what cannot be resumed."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from little_loops.errors import (
    EXIT_RUN_ERROR,
    EXIT_USAGE,
    LoopError,
)
from little_loops.model.loop import Loop
from little_loops.model.progress import DEFAULT_CLAUDE_FLAGS
from little_loops.model.records import replace
from little_loops.record.store import RunDir
from little_loops.run.runner import (
    Progress,
    RunOptions,
)


def prepare_resume(
    base: Path,
    run_id: str | None,
    *,
    force: bool = False,
    overrides: Mapping[str, str] | None = None,
) -> tuple[Loop, RunOptions, Progress, RunDir]:
    """Everything `Runner` needs to continue a run from its last finished step.

    `run_id` may also be the path of a run directory (`../.loops/runs/ID`), so a run can be
    resumed from any directory; its `.loops/` then stays where it is. Refuses a finished run,
    a run whose owner is still alive, and (unless `force`) a run whose loop file changed since
    it started, with a summary of the change.
    """
    from little_loops.load.loader import load
    from little_loops.record.store import (
        find_run,
        owner_alive,
    )

    given = _run_dir_path(run_id)
    if given is not None:
        run_dir, base = RunDir(given), given.parents[2]
    elif run_id is None:
        run_dir = _resumable(base)
    else:
        run_dir = find_run(base, run_id)
    state = run_dir.read_state()
    progress = Progress.from_dict(state, str(run_dir.state_path))
    progress.path = _path_from_events(run_dir, progress.step)
    if progress.status == "finished":
        raise LoopError(
            f"run {progress.run_id} already finished ({progress.outcome}); "
            f"start a new one with 'll run {progress.loop_file}'",
            exit_code=EXIT_RUN_ERROR,
        )
    # Its owner, told by pid and start time: a reused pid is not a run to stop.
    running = progress.status == "running" and progress.pid != os.getpid()
    if running and owner_alive(run_dir, state) is True:
        raise LoopError(
            f"run {progress.run_id} is still running (pid {progress.pid}); "
            f"stop it first with 'll stop {progress.run_id}'",
            exit_code=EXIT_RUN_ERROR,
        )
    moved = _relocate(progress, base)
    path = Path(progress.loop_file)
    loop = load(path)
    if loop.source_sha256 != progress.loop_sha256 and not force:
        raise LoopError(
            f"{path} changed since run {progress.run_id} started "
            f"({_change_summary(run_dir, path, loop)}); "
            "resume anyway with --force, or start a new run",
            exit_code=EXIT_RUN_ERROR,
        )
    if not force:
        _refuse_changed_children(run_dir, progress.run_id, moved)
    if progress.current not in loop.states:
        raise LoopError(
            f"run {progress.run_id} stopped at state '{progress.current}', which {path} no "
            "longer has (renamed or removed?); restore that state to resume, or start a new run",
            exit_code=EXIT_RUN_ERROR,
        )
    saved = progress.options
    _require_secrets(progress.run_id, list(saved.secret_sets), overrides or {})
    options = RunOptions(
        base_dir=base,
        overrides={**saved.overrides, **(overrides or {})},
        max_iterations=progress.max_iterations,
        claude=saved.claude,
        # An empty list is the user's choice (`--claude-flags ""`): kept, never the default.
        claude_flags=saved.claude_flags if saved.claude_flags is not None else DEFAULT_CLAUDE_FLAGS,
        model=saved.model,
        cache=saved.cache,
        record=Path(saved.record) if saved.record else None,
        replay=Path(saved.replay) if saved.replay else None,
    )
    progress.status = "running"
    return loop, options, progress, run_dir


def _relocate(progress: Progress, base: Path) -> Callable[[str], str]:
    """A run directory copied into another checkout (a CI artifact, a fresh clone): the
    paths recorded under the old base directory are taken under the new one; returns that
    mapping, for the paths its child runs recorded."""
    saved = progress.options
    old = saved.base_dir
    new = base.resolve()
    if not isinstance(old, str) or Path(old) == new:
        return str

    def moved(recorded: str) -> str:
        try:
            return str(new / Path(recorded).relative_to(old))
        except ValueError:  # outside the old base: kept as it was
            return recorded

    progress.loop_file = moved(progress.loop_file)
    cwd = moved(saved.cwd) if saved.cwd is not None else None
    progress.options = replace(saved, cwd=cwd, base_dir=str(new))
    return moved


def _refuse_changed_children(
    run_dir: RunDir, run_id: str, moved: Callable[[str], str] = str
) -> None:
    """A child run that had not finished picks up where it was, so its file must be the one
    it started with, like the root's; a finished child is never run again and may differ."""
    from little_loops.errors import LoopError as Problem
    from little_loops.load.loader import load

    for state_file in sorted(run_dir.root.glob("sub/**/state.json")):
        child = RunDir(state_file.parent)
        try:
            data = child.read_state()
        except Problem:
            continue
        if data.get("status") == "finished" or not data.get("loop_file"):
            continue
        path = Path(moved(data["loop_file"]))
        try:
            sha = load(path).source_sha256
        except Problem as exc:
            raise LoopError(
                f"run {run_id} has a sub-loop run of {path} that cannot resume: {exc.message}; "
                "restore the file, or start a new run",
                exit_code=EXIT_RUN_ERROR,
            ) from None
        if sha != data.get("loop_sha256"):
            where = state_file.parent.relative_to(run_dir.root)
            raise LoopError(
                f"{path} changed since its sub-loop run ({where}) in run {run_id} started "
                f"({_change_summary(child, path, load(path), data.get('loop_sha256'))}); "
                "resume anyway with --force, or start a new run",
                exit_code=EXIT_RUN_ERROR,
            )


def _require_secrets(run_id: str, given: list[str], overrides: Mapping[str, str]) -> None:
    """Secrets given with --set are never written down: a resume must give them again, or
    it would quietly run with the file's defaults."""
    missing = [key for key in given if key not in overrides]
    if missing:
        sets = " ".join(f"--set {key}=..." for key in missing)
        raise LoopError(
            f"run {run_id} was started with secret {', '.join(missing)} given by --set, which "
            f"is never saved; give it again: ll resume {run_id} {sets}",
            exit_code=EXIT_USAGE,
        )


def _run_dir_path(run_id: str | None) -> Path | None:
    """The run directory `run_id` names as a path, or None when it is a run id."""
    if run_id is None or os.sep not in run_id:
        return None
    path = Path(run_id).resolve()
    if not (path / "state.json").is_file() or path.parents[1].name != ".loops":
        raise LoopError(
            f"{run_id} is not a run directory (one under .loops/runs/ with a state.json); "
            "give a run id from 'll list', or the path of its directory",
            exit_code=EXIT_RUN_ERROR,
        )
    return path


def _resumable(base: Path) -> RunDir:
    from little_loops.record.store import newest_first

    for run_dir in newest_first(base):
        try:
            status = run_dir.read_state().get("status")
        except LoopError:
            continue
        if status != "finished":
            return run_dir
    raise LoopError(
        f"no resumable run under {base / '.loops' / 'runs'}; see 'll list'",
        exit_code=EXIT_RUN_ERROR,
    )


def _change_summary(run_dir: RunDir, path: Path, loop: Loop, recorded: object = None) -> str:
    """What changed in `path` since the run's copy of it: its own `loop.yaml` (a root run, a
    child an older ll ran), or the tree's one copy of the source its state records
    (`recorded`, the digest of the file it started with)."""
    import difflib

    from little_loops.record.secrets import Redactor
    from little_loops.run.runner import file_secrets
    from little_loops.run.session import tree_copy

    snapshot = run_dir.root / "loop.yaml"
    if not snapshot.is_file() and isinstance(recorded, str) and recorded.isalnum():
        snapshot = tree_copy(run_dir.root, recorded)
    if not snapshot.is_file():
        return "no copy of the original file to compare"
    before = snapshot.read_text(encoding="utf-8", errors="replace").splitlines()
    # the copy has the file's secret literals masked: compare like with like
    after_text = Redactor(file_secrets(loop)).text(path.read_text("utf-8", errors="replace"))
    after = after_text.splitlines()
    added = removed = 0
    first: int | None = None
    for group in difflib.SequenceMatcher(None, before, after).get_opcodes():
        tag, i1, i2, j1, j2 = group
        if tag == "equal":
            continue
        removed += i2 - i1
        added += j2 - j1
        if first is None:
            first = j1 + 1
    return f"{added} line(s) added, {removed} removed, first change at line {first}"


def _path_from_events(run_dir: RunDir, steps: int) -> list[str]:
    """The states of finished steps 1..`steps`, in order (a re-run step counts once)."""
    from little_loops.record.history import History

    return History.from_file(run_dir.events_path).path_upto(steps)
