"""Retention of run directories: `ll prune`, and the `keep_runs:` key or `LL_KEEP_RUNS` applied
after each run.

A run is removed only when it has ended for good or stopped (finished, interrupted, crashed);
never one that is running, suspended (waiting for an answer), paused by `ll step`, whose owner
process may still run it, or whose loop lock is held on its behalf. A run is renamed aside
first (`.loops/runs/.pruning-<id>`) and checked again there, so a `ll resume` racing the prune
either finds its run whole or not at all; then the directory is deleted.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from little_loops.errors import EXIT_USAGE, LoopError
from little_loops.model.records import record
from little_loops.record.run_index import forget
from little_loops.record.store import RUNS, RunDir, list_runs, lock_held_by, owner_alive

# Statuses (state.json's `status`) a prune may remove; anything else is kept.
REMOVABLE = frozenset({"finished", "interrupted", "crashed"})
_AGE = re.compile(r"^\s*(\d{1,9})\s*([smhdw])\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
ENV = "LL_KEEP_RUNS"


def parse_age(text: str) -> float:
    """`14d`, `12h`, `30m`, `2w` or `90s` in seconds; a usage error otherwise."""
    found = _AGE.match(text)
    if found is None:
        raise LoopError(
            f"--older-than {text!r}: not an age; give a number and a unit: 90s, 30m, 12h, 14d "
            "or 2w",
            exit_code=EXIT_USAGE,
        )
    return int(found[1]) * _SECONDS[found[2]]


def env_keep(environ: Mapping[str, str]) -> int | None:
    """`LL_KEEP_RUNS`: how many runs of a loop to keep after each run (unset or empty: no
    retention); a value that is not a whole number >= 1 is a usage error."""
    text = environ.get(ENV, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise LoopError(
            f"{ENV}={text!r}: give the number of runs of a loop to keep (a whole number, 1 or "
            f"more), or unset it to keep every run",
            exit_code=EXIT_USAGE,
        )
    return int(text)


@record(frozen=True)
class Verdict:
    """What a prune decided about one run."""

    run_id: str
    remove: bool
    why: str  # why it is kept (or "" when removed)
    size: int = 0  # bytes on disk, of the runs removed


def _size(root: Path) -> int:
    total = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                continue
    return total


def _started(run: RunDir, state: dict[str, object]) -> float | None:
    text = state.get("started_at")
    if isinstance(text, str):
        from little_loops.record.history import parse_ts

        parsed = parse_ts(text)
        if parsed is not None:
            return parsed.timestamp()
    try:
        return run.state_path.stat().st_mtime
    except OSError:
        return None


def _live(run: RunDir, state: dict[str, object]) -> str | None:
    """Why a run must be kept whatever its age, or None."""
    status = state.get("status")
    if status == "suspended":
        return "suspended (waiting for an answer)"
    if status == "interrupted" and state.get("exit_code") == 6:
        return "paused by ll step"
    if status not in REMOVABLE and status != "running":
        return f"status {status!r}"
    alive = owner_alive(run, state)
    if status == "running" and alive is not False:
        return "running" if alive else "maybe running (its owner cannot be checked)"
    if lock_held_by(run, state):
        return "its loop lock is held"
    return None


def plan(
    base: Path,
    *,
    keep: int | None,
    older_than: float | None,
    loop_file: str | None = None,
    now: float | None = None,
) -> Iterator[Verdict]:
    """Each run of `base` (of `loop_file` only, when given), newest first, with what a prune
    does to it: a run is removed when it is older than the `keep` newest (counting every run)
    and, with `older_than`, began more than that many seconds ago."""
    now = time.time() if now is None else now
    runs = list_runs(base)[::-1]
    rank = 0
    for run in runs:
        try:
            state = run.read_state()
        except LoopError as exc:
            yield Verdict(run.run_id, False, f"unreadable ({exc.message})")
            continue
        if loop_file is not None and state.get("loop_file") != loop_file:
            continue
        rank += 1
        if keep is not None and rank <= keep:
            yield Verdict(run.run_id, False, f"among the {keep} newest")
            continue
        started = _started(run, state)
        if older_than is not None and (started is None or now - started < older_than):
            yield Verdict(run.run_id, False, "newer than --older-than")
            continue
        why = _live(run, state)
        if why is not None:
            yield Verdict(run.run_id, False, why)
            continue
        yield Verdict(run.run_id, True, "", _size(run.root))


def remove(base: Path, run_id: str) -> bool:
    """Delete one run's directory, checked again after it is renamed aside; False when it
    came back to life in between (it is put back)."""
    runs = base / RUNS
    source = runs / run_id
    aside = runs / f".pruning-{run_id}"
    forget(runs)  # the runs' index no longer says what the folder holds
    try:
        os.rename(source, aside)
    except OSError:
        return False
    moved = RunDir(aside)
    try:
        state = moved.read_state()
        why = _live(moved, state)
    except LoopError:
        why = None
    if why is not None:
        os.rename(aside, source)
        return False
    import shutil  # only when a run is deleted: it imports bz2 and lzma

    shutil.rmtree(aside, ignore_errors=True)
    return True


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def prune(
    base: Path,
    *,
    keep: int | None,
    older_than: float | None,
    dry_run: bool = False,
    loop_file: str | None = None,
    verbose: bool = True,
) -> tuple[str, int, int]:
    """Prune and say what was freed: (the text, runs removed, bytes freed)."""
    lines: list[str] = []
    removed = freed = kept_live = 0
    verb = "would remove" if dry_run else "removed"
    for verdict in plan(base, keep=keep, older_than=older_than, loop_file=loop_file):
        if not verdict.remove:
            if verdict.why.startswith(("running", "maybe", "suspended", "paused", "its loop")):
                kept_live += 1
                if verbose:
                    lines.append(f"kept {verdict.run_id}: {verdict.why}")
            continue
        if not dry_run and not remove(base, verdict.run_id):
            lines.append(f"kept {verdict.run_id}: it started again during the prune")
            continue
        removed += 1
        freed += verdict.size
        if verbose:
            lines.append(f"{verb} {verdict.run_id} ({human(verdict.size)})")
    total = (
        f"{verb} {removed} run{'s' if removed != 1 else ''}, "
        f"{'would free' if dry_run else 'freed'} {human(freed)}"
    )
    if kept_live:
        total += f"; kept {kept_live} live (running, suspended or locked)"
    lines.append(total)
    return "\n".join(lines) + "\n", removed, freed
