"""`ll prune` and retention after each run (`keep_runs:`, `LL_KEEP_RUNS`), through the real `ll`:
finished runs go, a running, suspended or locked run never does, whatever the options."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from project import Project

from little_loops.record.prune import parse_age
from little_loops.record.store import LoopLock

# `ll` runs in process (the `project` fixture) except the run that must be alive while
# `ll prune` looks at it: a process of its own.
LL = [sys.executable, "-m", "little_loops"]


def write(where: Path, name: str, text: str) -> Path:
    path = where / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def runs(cwd: Path) -> list[str]:
    root = cwd / ".loops" / "runs"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def quick(cwd: Path, name: str = "quick", extra: str = "") -> Path:
    return write(
        cwd,
        f"{name}.yaml",
        f"""\
        name: {name}
        initial: work
        {extra}
        states:
          work: {{action: echo done, next: done}}
          done: {{terminal: true}}
        """,
    )


def finished(
    project: Project, cwd: Path, loop: Path, count: int, env: dict[str, str] | None = None
) -> list[str]:
    """The runs of `count` runs of `loop` still there, oldest first: in the order they ran
    (two runs in one second may sort the other way by name)."""
    made: list[str] = []
    for _ in range(count):
        before = set(runs(cwd))
        done = project.ll("run", loop, "-q", cwd=cwd, env=env)
        assert done.returncode == 0, done.stderr
        made.extend(sorted(set(runs(cwd)) - before))
    left = set(runs(cwd))
    return [run for run in made if run in left]


def age(cwd: Path, run_id: str, days: float) -> None:
    """Make a run look as if it began `days` ago."""
    path = cwd / ".loops" / "runs" / run_id / "state.json"
    state = json.loads(path.read_text(encoding="utf-8"))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - days * 86400))
    state["started_at"] = stamp
    path.write_text(json.dumps(state), encoding="utf-8")


def test_prune_keeps_the_newest_and_says_what_it_freed(project: Project, tmp_path: Path) -> None:
    made = finished(project, tmp_path, quick(tmp_path), 5)
    dry = project.ll("prune", "--keep", "2", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert runs(tmp_path) == sorted(made)  # nothing removed
    assert [line.split()[2] for line in dry.stdout.splitlines()[:3]] == made[:3][::-1]
    assert dry.stdout.splitlines()[-1].startswith("would remove 3 runs, would free ")
    done = project.ll("prune", "--keep", "2")
    assert done.returncode == 0, done.stderr
    assert runs(tmp_path) == sorted(made[3:])
    last = done.stdout.splitlines()[-1]
    assert re.fullmatch(r"removed 3 runs, freed \d+\.\d KB", last), last
    assert len(project.ll("list").stdout.splitlines()) == 3  # the header and 2 runs


def test_older_than_removes_only_old_runs(project: Project, tmp_path: Path) -> None:
    made = finished(project, tmp_path, quick(tmp_path), 3)
    age(tmp_path, made[0], 20)
    done = project.ll("prune", "--older-than", "14d")
    assert done.returncode == 0, done.stderr
    assert runs(tmp_path) == sorted(made[1:])
    assert "removed 1 run, freed" in done.stdout
    bad = project.ll("prune", "--older-than", "two weeks")
    assert bad.returncode == 2
    assert bad.stderr == (
        "ll: error: --older-than 'two weeks': not an age; give a number and a unit: 90s, 30m, "
        "12h, 14d or 2w\n"
    )
    nothing = project.ll("prune")
    assert nothing.returncode == 2
    assert "give --keep N" in nothing.stderr or "--keep N (the N newest runs)" in nothing.stderr


def test_prune_never_touches_a_running_suspended_or_locked_run(
    project: Project, tmp_path: Path
) -> None:
    slow = write(
        tmp_path,
        "slow.yaml",
        """\
        name: slow
        initial: wait
        states:
          wait: {action: sleep 60, next: done}
          done: {terminal: true}
        """,
    )
    ask = write(
        tmp_path,
        "ask.yaml",
        """\
        name: ask
        initial: approve
        states:
          approve:
            ask: "Ship it?"
            choices: [approve, reject]
            route: {approve: done, reject: done}
          done: {terminal: true}
        """,
    )
    old = finished(project, tmp_path, quick(tmp_path), 2)
    waiting = project.ll("run", ask, "--no-input")
    assert waiting.returncode == 6, waiting.stderr
    (suspended,) = set(runs(tmp_path)) - set(old)
    # A run interrupted earlier whose loop lock is now held on its behalf (a resume starting).
    locked_loop = quick(tmp_path, "locked")
    (locked,) = finished(project, tmp_path, locked_loop, 1)
    state_path = tmp_path / ".loops" / "runs" / locked / "state.json"
    state = json.loads(state_path.read_text(encoding="utf-8"))
    state["status"] = "interrupted"
    state_path.write_text(json.dumps(state), encoding="utf-8")
    lock = LoopLock(tmp_path, locked_loop)
    lock.acquire(locked, locked_loop)
    proc = subprocess.Popen([*LL, "run", str(slow), "-q"], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        running = None
        while time.monotonic() < deadline and running is None:
            for name in set(runs(tmp_path)) - {*old, suspended, locked}:
                events = tmp_path / ".loops" / "runs" / name / "events.jsonl"
                if events.is_file() and "action_start" in events.read_text(encoding="utf-8"):
                    running = name
            time.sleep(0.05)
        assert running is not None
        for name in (running, suspended, locked, *old):
            age(tmp_path, name, 30)
        done = project.ll("prune", "--keep", "0", "--older-than", "1d")
        assert done.returncode == 0, done.stderr
        assert sorted(runs(tmp_path)) == sorted([running, suspended, locked])
        assert f"kept {running}: running" in done.stdout
        assert f"kept {suspended}: suspended (waiting for an answer)" in done.stdout
        assert f"kept {locked}: its loop lock is held" in done.stdout
        assert done.stdout.splitlines()[-1].startswith("removed 2 runs, freed ")
        assert done.stdout.splitlines()[-1].endswith("kept 3 live (running, suspended or locked)")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        lock.release()
    # Stopped now (interrupted, resumable) and unlocked: an explicit prune may remove them.
    done = project.ll("prune", "--keep", "0")
    assert sorted(runs(tmp_path)) == [suspended]


def test_keep_runs_key_applies_after_each_run(project: Project, tmp_path: Path) -> None:
    kept = quick(tmp_path, "kept", extra="keep_runs: 2")
    other = quick(tmp_path, "other")
    others = finished(project, tmp_path, other, 3)
    made = finished(project, tmp_path, kept, 4)  # the runs left of the 4
    assert len(made) == 2
    assert sorted(runs(tmp_path)) == sorted(others + made)  # other loops' runs untouched
    loud = project.ll("run", kept)
    assert loud.returncode == 0
    assert "ll: keep_runs 2: removed 1 run, freed" in loud.stderr


def test_ll_keep_runs_environment_applies_after_each_run(project: Project, tmp_path: Path) -> None:
    loop = quick(tmp_path)
    env = {**os.environ, "LL_KEEP_RUNS": "1"}
    made = finished(project, tmp_path, loop, 3, env=env)
    assert len(made) == 1
    assert runs(tmp_path) == sorted(made)
    by_env = project.ll("prune", "--dry-run", env=env)  # the default --keep
    assert by_env.returncode == 0
    assert "would remove 0 runs" in by_env.stdout
    bad = project.ll("run", loop, env={**os.environ, "LL_KEEP_RUNS": "all"})
    assert bad.returncode == 2
    assert bad.stderr.startswith("ll: error: LL_KEEP_RUNS='all': give the number of runs")
    assert bad.stderr.count("\n") == 1


def test_keep_runs_is_checked_by_validate(project: Project, tmp_path: Path) -> None:
    loop = quick(tmp_path, "bad", extra="keep_runs: 0")
    done = project.ll("validate", loop)
    assert done.returncode == 2
    assert "keep_runs" in done.stderr or "keep_runs" in done.stdout


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("30m", 1800), ("12h", 43200), ("14d", 1209600)]
)
def test_ages(text: str, seconds: int) -> None:
    assert parse_age(text) == seconds
