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
from little_loops.record.outputs import resolve
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


# A `kill -9` between a run's flushed end event and its final state.json (found by the kill
# test at stop 37): made certain by a process that exits right there, at the first state
# written as finished (the child's, in a tree).
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
    action: echo last >> done.txt; echo the last words
    capture: words
"""
_CALLS_IT = """\
name: calls
initial: call
states:
  call:
    loop: ends.yaml
    next: after
  after:
    terminal: true
    action: echo after >> done.txt
"""


_FANS_OUT = """\
name: fans
initial: fan
states:
  fan:
    for_each: ["x"]
    loop: ends.yaml
    next: after
  after:
    terminal: true
    action: echo after >> done.txt
"""


def _killed_at_its_end(project: Project, loop: str) -> Path:
    """Run `loop` in a process killed right after its first end event is logged; the run's
    directory."""
    project.write("ends.yaml", _ENDS_BY_ECHOING)
    project.write("calls.yaml", _CALLS_IT)
    project.write("fans.yaml", _FANS_OUT)
    killed = project.write("killed.py", _KILLED_AT_THE_END)
    first = subprocess.run(
        [sys.executable, str(killed), "run", loop, "-q"],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert first.returncode == 137, first.stderr
    (run,) = (project.path / ".loops" / "runs").iterdir()
    return run


def _ends(run: Path) -> list[str]:
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    return [e["outcome"] for e in events if e["event"] == "loop_complete"]


def test_a_run_killed_after_its_end_event_is_finished_by_resume_not_run_again(
    project: Project,
) -> None:
    run = _killed_at_its_end(project, "ends.yaml")
    state = json.loads((run / "state.json").read_text())
    assert (state["status"], state["step"], state["captured"]) == ("running", 1, {})
    again = project.ll("resume", "--junit-xml", "report.xml", process=True)
    # Neither its last step run again nor its end logged again; told, with the run's own code.
    assert again.returncode == 0, again.stderr
    assert (project.path / "done.txt").read_text().splitlines() == ["first", "last"]
    assert _ends(run) == ["success"]
    assert "had already ended (success) when its process stopped" in again.stderr
    assert "success at 'last' after 2 steps" in again.stdout
    # The finished state, with what the last step captured (its record, which no state
    # pointed to yet), as a run that was never cut off has it.
    state = json.loads((run / "state.json").read_text())
    assert (state["status"], state["outcome"], state["exit_code"]) == ("finished", "success", 0)
    assert (state["step"], state["final_state"]) == (2, "last")
    assert state["captured"]["words"] == state["prev"]
    shown = resolve(run, state)
    assert shown["captured"]["words"]["output"] == "the last words"
    assert shown["prev"]["state"] == "last"
    # The report reads the whole run from the log, though the resume saw only its end.
    report = (project.path / "report.xml").read_text()
    assert "first (visit 1)" in report
    assert "last (visit 1)" in report
    refused = project.ll("resume", run.name, process=True)
    assert refused.returncode == EXIT_RUN_ERROR
    assert "already finished (success)" in refused.stderr


@pytest.mark.parametrize(
    ("loop", "child_dir"),
    [("calls.yaml", "sub/0001-call"), ("fans.yaml", "sub/0001-fan/x")],
    ids=["a sub-loop's child", "a fork's branch"],
)
def test_a_child_killed_after_its_end_event_is_finished_and_its_caller_goes_on(
    project: Project, loop: str, child_dir: str
) -> None:
    run = _killed_at_its_end(project, loop)
    child = run / child_dir
    assert json.loads((child / "state.json").read_text())["status"] == "running"
    again = project.ll("resume", "-q", process=True)
    assert again.returncode == 0, again.stderr
    assert (project.path / "done.txt").read_text().splitlines() == ["first", "last", "after"]
    assert _ends(child) == ["success"]
    assert _ends(run) == ["success"]
    state = json.loads((child / "state.json").read_text())
    assert (state["status"], state["step"]) == ("finished", 2)
    assert resolve(child, state)["captured"]["words"]["output"] == "the last words"


def _ended_then_cut_back(tmp_path: Path, **end: Any) -> tuple[Path, str]:
    """A run of `ends` that finished, its state put back to before its last step and the
    last line of its log (its end) edited: as a run cut off after that line was written."""
    path = write_loop(tmp_path, _ENDS_BY_ECHOING, "ends.yaml")
    done = Runner(load(path), RunOptions(base_dir=tmp_path)).run()
    run_dir = RunDir.open(tmp_path, done.run_id)
    state = run_dir.read_state()
    state.update(status="running", step=1, outcome=None, exit_code=None, final_state=None)
    state["captured"], state["prev"] = {}, {"ref": [0, state["prev"]["ref"][0]]}
    run_dir.write_state(state)
    lines = run_dir.events_path.read_bytes().splitlines(keepends=True)
    last = json.loads(lines[-1])
    last.update(end)
    text = json.dumps(last).encode() + b"\n"
    run_dir.events_path.write_bytes(b"".join(lines[:-1]) + text[: end.pop("_cut", len(text))])
    return tmp_path / "done.txt", done.run_id


@pytest.mark.parametrize(
    ("end", "ran_again"),
    [
        ({}, False),
        ({"outcome": "failure", "exit_code": 1}, False),
        ({"outcome": "interrupted"}, True),  # resume continues an interruption
        ({"outcome": "suspended"}, True),
        ({"outcome": "no such outcome"}, True),
        ({"run_id": "another-run"}, True),  # an end that is not this run's
        ({"steps": 7}, True),  # not the step after its state's
        ({"steps": "2"}, True),
        ({"path": ["call"]}, True),  # a child's end
        ({"event": "route"}, True),
        ({"_cut": -5}, True),  # torn: no newline, no JSON
    ],
)
def test_only_the_runs_own_whole_end_as_its_last_line_finishes_it(
    tmp_path: Path, end: dict[str, Any], ran_again: bool
) -> None:
    done_txt, run_id = _ended_then_cut_back(tmp_path, **end)
    loop, options, progress, run_dir = prepare_resume(tmp_path, run_id)
    runner = Runner(loop, options, progress=progress, run_dir=run_dir)
    result = runner.run()
    assert runner.ended_before is not ran_again
    assert done_txt.read_text().splitlines() == ["first", "last", *(["last"] if ran_again else [])]
    assert result.steps == 2
    if not ran_again:
        assert (result.outcome, result.exit_code) == (
            end.get("outcome", "success"),
            end.get("exit_code", 0),
        )
        assert run_dir.read_state()["status"] == "finished"
