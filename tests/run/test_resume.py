"""`ll resume` in process: what it refuses, what it restores (options, path), which run it picks.

tests/run/test_durable.py resumes real killed processes; these tests build the run directories
with in-process runs and edit their state files.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from project import Project

from little_loops.errors import EXIT_RUN_ERROR, LoopError
from little_loops.load.loader import load
from little_loops.record.events import RunEvent
from little_loops.record.store import (
    RunDir,
    process_start,
)
from little_loops.run.resume import (
    _resumable,
    prepare_resume,
)
from little_loops.run.runner import (
    Runner,
    RunOptions,
    RunResult,
)

STEPS = """\
name: steps
description: three steps and an end
initial: a
on_error: failed
context:
  who: world
  token: placeholder
secrets: [token]
states:
  a:
    action: echo a ${context.who}
    next: b
  b:
    action: echo b
    next: c
  c:
    action: echo c
    next: done
  done:
    terminal: true
  failed:
    terminal: true
    outcome: failure
"""


def write_loop(tmp_path: Path, text: str = STEPS, name: str = "steps.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def interrupt_at(step: int) -> Any:
    """A listener that stops the run with Ctrl-C as step `step` begins, once."""
    fired: list[bool] = []

    def listener(event: RunEvent) -> None:
        if event.name == "state_enter" and event.step == step and not fired:
            fired.append(True)
            raise KeyboardInterrupt

    return listener


def start(tmp_path: Path, *, stop_at: int | None = None, **options: Any) -> RunResult:
    loop = load(write_loop(tmp_path))
    listeners = [interrupt_at(stop_at)] if stop_at else []
    return Runner(loop, RunOptions(base_dir=tmp_path, **options), listeners=listeners).run()


def set_state(base: Path, run_id: str, **changes: Any) -> None:
    run_dir = RunDir.open(base, run_id)
    state = run_dir.read_state()
    state.update(changes)
    run_dir.write_state(state)


@pytest.fixture
def live_pid() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "30"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    first = start(tmp_path, stop_at=3)
    assert (first.outcome, first.steps, first.path) == ("interrupted", 2, ("a", "b"))
    loop, options, progress, run_dir = prepare_resume(tmp_path, first.run_id)
    assert run_dir.run_id == first.run_id
    assert (progress.status, progress.step, progress.current) == ("running", 2, "c")
    assert progress.path == ["a", "b"]
    assert loop.name == "steps"
    assert options.base_dir == tmp_path
    result = Runner(loop, options, progress=progress, run_dir=run_dir).run()
    assert (result.outcome, result.steps) == ("success", 4)
    assert result.path == ("a", "b", "c", "done")


def test_path_counts_a_re_run_step_once(tmp_path: Path) -> None:
    first = start(tmp_path, stop_at=3)
    run_dir = RunDir.open(tmp_path, first.run_id)
    # A step cut off and entered again (as after an earlier resume) appears twice in the log.
    with run_dir.events_path.open("a", encoding="utf-8") as fh:
        fh.write('{"event":"state_enter","step":2,"state":"b"}\n')
        fh.write('{"event":"state_enter","step":3,"state":"c"}\n')
    _, _, progress, _ = prepare_resume(tmp_path, first.run_id)
    assert progress.path == ["a", "b"]


def test_refuses_a_finished_run(tmp_path: Path) -> None:
    done = start(tmp_path)
    with pytest.raises(LoopError) as exc:
        prepare_resume(tmp_path, done.run_id)
    assert exc.value.message == (
        f"run {done.run_id} already finished (success); "
        f"start a new one with 'll run {tmp_path / 'steps.yaml'}'"
    )
    assert exc.value.exit_code == EXIT_RUN_ERROR


def test_refuses_a_run_whose_owner_is_alive(tmp_path: Path, live_pid: int) -> None:
    first = start(tmp_path, stop_at=2)
    set_state(
        tmp_path, first.run_id, status="running", pid=live_pid, pid_start=process_start(live_pid)
    )
    with pytest.raises(LoopError) as exc:
        prepare_resume(tmp_path, first.run_id)
    assert exc.value.message == (
        f"run {first.run_id} is still running (pid {live_pid}); "
        f"stop it first with 'll stop {first.run_id}'"
    )
    assert exc.value.exit_code == EXIT_RUN_ERROR


def test_accepts_a_running_run_whose_owner_died(tmp_path: Path) -> None:
    first = start(tmp_path, stop_at=2)
    gone = subprocess.Popen(["true"])
    gone.wait()
    set_state(tmp_path, first.run_id, status="running", pid=gone.pid)
    _, _, progress, _ = prepare_resume(tmp_path, first.run_id)
    assert (progress.status, progress.step) == ("running", 1)


def test_refuses_a_changed_loop_file_without_force(tmp_path: Path) -> None:
    first = start(tmp_path, stop_at=2)
    path = tmp_path / "steps.yaml"
    text = path.read_text(encoding="utf-8")
    changed = text.replace("    action: echo b\n", "    action: echo B\n    timeout: 5\n")
    changed += "# a note at the end\n"
    path.write_text(changed, encoding="utf-8")
    with pytest.raises(LoopError) as exc:
        prepare_resume(tmp_path, first.run_id)
    line = text.splitlines().index("    action: echo b") + 1
    assert exc.value.message == (
        f"{path} changed since run {first.run_id} started "
        f"(3 line(s) added, 1 removed, first change at line {line}); "
        "resume anyway with --force, or start a new run"
    )
    assert exc.value.exit_code == EXIT_RUN_ERROR
    loop, _, progress, _ = prepare_resume(tmp_path, first.run_id, force=True)
    assert loop.states["b"].action == "echo B"
    assert progress.status == "running"


def test_change_summary_without_the_original_copy(tmp_path: Path) -> None:
    first = start(tmp_path, stop_at=2)
    (first.run_dir / "loop.yaml").unlink()
    path = tmp_path / "steps.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    with pytest.raises(LoopError, match=r"\(no copy of the original file to compare\)"):
        prepare_resume(tmp_path, first.run_id)


def test_a_removed_line_is_counted(tmp_path: Path) -> None:
    first = start(tmp_path, stop_at=2)
    path = tmp_path / "steps.yaml"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[1].startswith("description:")
    path.write_text("".join(lines[:1] + lines[2:]), encoding="utf-8")
    with pytest.raises(LoopError) as exc:
        prepare_resume(tmp_path, first.run_id)
    assert "(0 line(s) added, 1 removed, first change at line 2)" in exc.value.message


def test_restores_the_options_of_the_run(tmp_path: Path) -> None:
    first = start(
        tmp_path,
        stop_at=2,
        overrides={"who": "Ada", "token": "s3cr3t-token"},
        max_iterations=9,
        claude=("my-claude", "--x"),
        claude_flags=("--flag",),
        model="judge-model",
        cache=False,
        record=tmp_path / "cassette.jsonl",
    )
    # Secret values are never written down, so a resumed run is given them afresh.
    with pytest.raises(LoopError, match="secret token given by --set") as info:
        prepare_resume(tmp_path, first.run_id, overrides={"extra": "1"})
    assert info.value.exit_code == 2
    again = {"extra": "1", "token": "again-token"}
    _, options, progress, _ = prepare_resume(tmp_path, first.run_id, overrides=again)
    assert options.overrides == {"who": "Ada", **again}
    assert options.max_iterations == 9 == progress.max_iterations
    assert options.claude == ("my-claude", "--x")
    assert options.claude_flags == ("--flag",)
    assert options.model == "judge-model"
    assert options.cache is False
    assert options.record == tmp_path / "cassette.jsonl"
    assert options.replay is None
    assert progress.context["who"] == "Ada"
    assert "token" not in progress.context
    assert "s3cr3t-token" not in (first.run_dir / "state.json").read_text(encoding="utf-8")


def test_overrides_given_to_resume_win(tmp_path: Path) -> None:
    first = start(tmp_path, stop_at=2, overrides={"who": "Ada"})
    _, options, _, _ = prepare_resume(tmp_path, first.run_id, overrides={"who": "Grace"})
    assert options.overrides == {"who": "Grace"}


def test_default_options_when_the_state_has_none(tmp_path: Path) -> None:
    first = start(tmp_path, stop_at=2)
    set_state(tmp_path, first.run_id, options={})
    _, options, _, _ = prepare_resume(tmp_path, first.run_id)
    assert options.claude == ("claude",)
    assert options.claude_flags == ("--dangerously-skip-permissions",)
    assert options.cache is True
    assert options.overrides == {}


def test_resumable_picks_the_latest_unfinished_run(tmp_path: Path) -> None:
    with pytest.raises(LoopError) as exc:
        _resumable(tmp_path)
    assert exc.value.message == (
        f"no resumable run under {tmp_path / '.loops' / 'runs'}; see 'll list'"
    )
    older = start(tmp_path, stop_at=2)
    newer = start(tmp_path, stop_at=3)
    latest = start(tmp_path)  # the latest, but finished
    corrupt = start(tmp_path, stop_at=2)  # the very latest, but unreadable
    # Runs begun in the same millisecond would sort by their random id suffix.
    for n, result in enumerate((older, newer, latest)):
        set_state(tmp_path, result.run_id, started_at=f"2026-01-01T00:00:00.00{n}Z")
    corrupt.run_dir.joinpath("state.json").write_text("{", encoding="utf-8")
    assert _resumable(tmp_path).run_id == newer.run_id
    _, _, progress, _ = prepare_resume(tmp_path, None)
    assert progress.run_id == newer.run_id
    set_state(tmp_path, newer.run_id, status="finished", outcome="success")
    assert _resumable(tmp_path).run_id == older.run_id
    set_state(tmp_path, older.run_id, status="finished", outcome="success")
    with pytest.raises(LoopError, match="no resumable run under"):
        prepare_resume(tmp_path, None)


def test_an_unknown_run_id(tmp_path: Path) -> None:
    start(tmp_path)
    with pytest.raises(LoopError, match="no run 'nope' under"):
        prepare_resume(tmp_path, "nope")


# A `kill -9` between a run's flushed end event and its final state.json (stop 37's closing
# note): made certain by a process that exits right there.
_KILLED_AT_THE_END = """\
import os, sys
from little_loops.run import session
persist = session.RunSession.persist
def killed(self, progress):
    if progress.status == "finished":
        self.sink.flush()  # the end event is in the log, the finished state is not written
        os._exit(137)
    return persist(self, progress)
session.RunSession.persist = killed
from little_loops.entry import main
sys.argv = ["ll", *sys.argv[1:]]
main()
"""
_ENDS_BY_ECHOING = """\
name: ends
initial: first
states:
  first:
    action: echo first >> done.txt
    next: last
  last:
    terminal: true
    action: echo last >> done.txt
"""


@pytest.mark.xfail(
    strict=True,
    reason="known since stop 37: events are flushed before the state, so a run killed between "
    "its end event and its final state runs its terminal step again on resume",
)
def test_a_run_killed_after_its_end_event_is_not_ended_twice_by_resume(project: Project) -> None:
    project.write("ends.yaml", _ENDS_BY_ECHOING)
    killed = project.write("killed.py", _KILLED_AT_THE_END)
    first = subprocess.run(
        [sys.executable, str(killed), "run", "ends.yaml", "-q"],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert first.returncode == 137, first.stderr
    again = project.ll("resume", "-q", process=True)
    (run,) = (project.path / ".loops" / "runs").iterdir()
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    ends = [e["outcome"] for e in events if e["event"] == "loop_complete"]
    # What resume should do: see the run ended, and neither run its last step nor end it again.
    assert (project.path / "done.txt").read_text().splitlines() == ["first", "last"], again.stderr
    assert ends == ["success"]
