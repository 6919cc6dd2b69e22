"""A `loop:` child kept in memory (`store.CallDir`), through the real `ll`: a call that ends
leaves no directory, only a line of the journal (`calls.jsonl`) of the nearest run above it
with one; `ll status`/`ll logs`/`ll report` of `RUN/0001-call` read it there; a child that
must not lose a finished step moves to its own directory first; a caller resumed after its
child's end reads the child back, whichever layout holds it (runs an older `ll` wrote too)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from project import Project, held_after_a_childs_end

from little_loops.record.events import CALLS, ENCODE, read_journal
from little_loops.record.outputs import Outputs

LL = [sys.executable, "-m", "little_loops"]

LEAF = """\
name: leaf
initial: work
context: {word: x}
outputs: {said: "${context.word}"}
states:
  work: {action: "echo ${context.word} >> side.log", next: done}
  done: {terminal: true}
"""

MIDDLE = """\
name: middle
initial: call
context: {word: x}
outputs: {said: "${captured.call.outputs.said}"}
states:
  call:
    loop: leaf.yaml
    with: {word: "${context.word}"}
    capture: call
    route: {done: done}
  done: {terminal: true}
"""

TOP = """\
name: top
initial: call
states:
  call:
    loop: middle.yaml
    with: {word: hello}
    capture: call
    route: {done: done}
  done: {terminal: true}
"""


def the_run(where: Path) -> Path:
    [run] = (where / ".loops" / "runs").iterdir()
    return run


def files_under(run: Path) -> list[str]:
    return sorted(str(p.relative_to(run)) for p in run.rglob("*"))


def test_a_call_that_ends_leaves_no_directory_only_a_journal_line(project: Project) -> None:
    """Three runs in a tree, each child of one step that prints nothing: the root's files and
    one `calls.jsonl` with a line per child; no `sub/`, no copy of a child's file."""
    project.write("leaf.yaml", LEAF)
    project.write("middle.yaml", MIDDLE)
    project.write("top.yaml", TOP)
    done = project.ll("run", "top.yaml", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    run = the_run(project.path)
    assert files_under(run) == [
        ".state.next",
        "calls.jsonl",
        "events.jsonl",
        "loop.yaml",
        "outputs.dat",
        "state.json",
    ]
    entries = read_journal(run, CALLS)
    assert list(entries) == ["sub/0001-call/sub/0001-call", "sub/0001-call"]
    leaf = entries["sub/0001-call/sub/0001-call"]["state"]
    assert (leaf["status"], leaf["outcome"], leaf["final_state"]) == ("finished", "success", "done")
    assert leaf["run_id"] == f"{run.name}/0001-call/0001-call"
    assert leaf["outputs"] == {"said": "hello"}
    assert (project.path / "side.log").read_text() == "hello\n"
    # What the grandchild said reached the root, through the child.
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    [complete] = [e for e in events if e["event"] == "child_complete"]
    assert complete["outputs"] == {"said": "hello"}


def test_status_logs_and_report_of_a_journaled_child_show_it(project: Project) -> None:
    project.write("leaf.yaml", LEAF)
    project.write("middle.yaml", MIDDLE)
    project.write("top.yaml", TOP)
    done = project.ll("run", "top.yaml", "-q", "--junit-xml", "junit.xml")
    assert done.returncode == 0, done.stdout + done.stderr
    run = the_run(project.path)
    for child, loop in (
        (f"{run.name}/0001-call", "middle"),
        (f"{run.name}/0001-call/0001-call", "leaf"),
    ):
        status = project.ll("status", child)
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"run:     {child}\n" in status.stdout
        assert f"loop:    {loop} (" in status.stdout
        assert "status:  finished (success)" in status.stdout
        logs = project.ll("logs", child)
        assert logs.returncode == 0, logs.stdout + logs.stderr
        assert logs.stdout.startswith(f"ll: running {loop} (run {child},")
        report = project.ll("report", child, "-o", "child.html")
        assert report.returncode == 0, report.stdout + report.stderr
    # By its path as well: a directory that does not exist, a journal entry that does.
    path = run / "sub" / "0001-call" / "sub" / "0001-call"
    assert not path.exists()
    status = project.ll("status", str(path))
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"run:     {run.name}/0001-call/0001-call\n" in status.stdout
    step = project.ll("logs", f"{run.name}/0001-call/0001-call", "--step", "1")
    assert step.returncode == 0, step.stdout + step.stderr
    missing = project.ll("status", f"{run.name}/0002-call")
    assert missing.returncode != 0
    assert "(the children here: 0001-call)" in missing.stdout + missing.stderr
    junit = (project.path / "junit.xml").read_text(encoding="utf-8")
    assert 'name="call/call/work' in junit


TWO_STEPS = """\
name: two
initial: first
states:
  first: {action: "echo first >> side.log", next: second}
  second:
    action: "if [ -e gate ]; then echo second >> side.log; else touch waiting; sleep 30; fi"
    next: done
  done: {terminal: true}
"""

CALLS_TWO = """\
name: caller
initial: call
states:
  call: {loop: two.yaml, route: {done: done}}
  done: {terminal: true}
"""


def _wait(predicate: Any, proc: subprocess.Popen[Any], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, "ll ended before the kill point"
        assert time.monotonic() < deadline, "timed out waiting for the kill point"
        time.sleep(0.01)


def test_a_child_moves_to_its_directory_before_its_second_step_acts(
    project: Project, tmp_path: Path
) -> None:
    """Its first step is recorded (in its own directory) before the second one starts: killed
    in the second, the resumed tree runs the first step no more."""
    project.write("two.yaml", TWO_STEPS)
    project.write("caller.yaml", CALLS_TWO)
    proc = subprocess.Popen([*LL, "run", "caller.yaml", "-q"], cwd=project.path)
    _wait((project.path / "waiting").exists, proc)
    run = the_run(project.path)
    child = run / "sub" / "0001-call"
    files = {p.name for p in child.iterdir()}
    assert {"state.json", "events.jsonl"} <= files, files
    assert json.loads((child / "state.json").read_text())["step"] == 1  # its record inline
    # Its file is kept for the change summary of a resume: it may be resumed now.
    assert len(list((run / "loops").iterdir())) == 1
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(0.3)  # a `sleep` caught between fork and exec finds the gate shut
    (project.path / "gate").touch()
    resumed = project.ll("resume", "-q")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (project.path / "side.log").read_text().splitlines() == ["first", "second"]
    assert not (run / CALLS).exists()  # it ended in its directory


PADDED_LEAF = """\
name: leaf
initial: work
outputs: {pad: "PADDING"}
states:
  work: {action: "echo leaf >> side.log", next: done}
  done: {terminal: true}
"""

AFTER = """\
name: boss
initial: work
states:
  work: {loop: leaf.yaml, route: {done: last}}
  last: {action: "echo last >> side.log", terminal: true}
"""


def _kill_after_the_childs_end(project: Project) -> Path:
    """Run `boss` with `--json` into a pipe nobody reads once the child ended: `ll` blocks
    writing its caller's `child_complete` (padded past the pipe's size), after the child's
    journal line, before the caller's step is recorded; kill it there."""
    project.write("leaf.yaml", PADDED_LEAF.replace("PADDING", "x" * 6000))
    project.write("boss.yaml", AFTER)
    proc, read_end = held_after_a_childs_end([*LL, "run", "boss.yaml", "--json"], project.path)
    run = the_run(project.path)
    _wait(lambda: bool(read_journal(run, CALLS)), proc)
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    os.close(read_end)
    state = json.loads((run / "state.json").read_text())
    assert state["step"] == 0  # the caller has not recorded `work`
    assert (project.path / "side.log").read_text() == "leaf\n"
    return run


def test_kill_9_between_a_journaled_childs_end_and_its_callers_record(
    project: Project,
) -> None:
    """The child's end is a journal line, its caller's step is not recorded: the resumed caller
    reads the child back from the journal, never runs it again."""
    run = _kill_after_the_childs_end(project)
    resumed = project.ll("resume", "-q")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (project.path / "side.log").read_text().splitlines() == ["leaf", "last"]
    starts = [
        json.loads(line)
        for line in (run / "events.jsonl").read_text().splitlines()
        if '"event":"child_start"' in line
    ]
    assert len(starts) == 1  # read back, not started again


def to_old_layout(run: Path) -> None:
    """Rewrite every journaled child of `run` as an older `ll` kept it: a directory with its
    state.json (records in outputs.dat, pointed to), events.jsonl; no journal."""
    for key, entry in read_journal(run, CALLS).items():
        root = run / key
        root.mkdir(parents=True, exist_ok=True)
        state = dict(entry["state"])
        store = Outputs(root)
        state["captured"] = {k: store.append(v) for k, v in state["captured"].items()}
        if state.get("prev"):
            state["prev"] = store.append(state["prev"])
        store.close()
        (root / "state.json").write_text(ENCODE(state) + "\n", encoding="utf-8")
        lines = "".join(ENCODE(event) + "\n" for event in entry["events"])
        (root / "events.jsonl").write_text(lines, encoding="utf-8")
    (run / CALLS).unlink()


def test_an_old_layout_child_reads_the_same_and_resumes_once(project: Project) -> None:
    """A finished child in a directory of its own, as an older `ll` left it: status, logs and
    the report say the same of it as of its journal line, and a caller cut off after the
    child's end reads it back from there."""
    run = _kill_after_the_childs_end(project)
    child = f"{run.name}/0001-work"
    asks = [("status", child), ("logs", child), ("logs", child, "--step", "1")]
    before = [project.ll(*ask) for ask in asks]
    to_old_layout(run)
    assert (run / "sub" / "0001-work" / "state.json").is_file()
    after = [project.ll(*ask) for ask in asks]
    for ask, one, other in zip(asks, before, after, strict=True):
        assert one.returncode == other.returncode == 0, (ask, other.stdout + other.stderr)
        assert one.stdout == other.stdout, ask
    assert project.ll("report", child, "-o", "child.html").returncode == 0
    resumed = project.ll("resume", "-q")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (project.path / "side.log").read_text().splitlines() == ["leaf", "last"]
    assert not (run / CALLS).exists()  # nothing new was journaled: the child was read back


WAITS = """\
name: waits
initial: work
states:
  work: {action: "touch waiting; while [ ! -e gate ]; do sleep 0.05; done", next: done}
  done: {terminal: true}
"""


def test_status_of_a_child_still_in_memory_says_it_has_not_ended(project: Project) -> None:
    project.write("waits.yaml", WAITS)
    project.write("caller.yaml", CALLS_TWO.replace("two.yaml", "waits.yaml"))
    proc = subprocess.Popen([*LL, "run", "caller.yaml", "-q"], cwd=project.path)
    try:
        _wait((project.path / "waiting").exists, proc)
        run = the_run(project.path)
        assert not (run / "sub").exists()  # its first step runs: nothing to lose yet
        status = project.ll("status", f"{run.name}/0001-call")
        assert status.returncode != 0
        said = (status.stdout + status.stderr).strip()
        assert said == (
            f"ll: error: child run '{run.name}/0001-call' has not ended: a sub-loop's run is "
            "recorded when it ends (or once it has a step to resume from); follow the run "
            f"with 'll logs -f {run.name}'"
        )
    finally:
        (project.path / "gate").touch()
        assert proc.wait(timeout=60) == 0
    assert project.ll("status", f"{run.name}/0001-call").returncode == 0


def test_a_journal_is_read_on_from_where_it_stopped(tmp_path: Path) -> None:
    """Appended to only: each read takes the new lines; a torn line is skipped (the entry
    before it of the same key stands), a last line still without its newline is read then
    and read again once whole."""
    from little_loops.record.events import journal_get

    path = tmp_path / CALLS

    def line(key: str, step: int) -> bytes:
        return (ENCODE({"key": key, "state": {"step": step}, "events": []}) + "\n").encode()

    path.write_bytes(line("sub/0001-a", 1))
    assert journal_get(tmp_path, CALLS, "sub/0001-a") == {
        "key": "sub/0001-a",
        "state": {"step": 1},
        "events": [],
    }
    assert journal_get(tmp_path, CALLS, "sub/0002-b") is None
    with path.open("ab") as fh:
        fh.write(line("sub/0002-b", 2) + line("sub/0001-a", 3)[:20] + b"\n")  # torn
    assert journal_get(tmp_path, CALLS, "sub/0002-b")["state"] == {"step": 2}  # type: ignore[index]
    assert journal_get(tmp_path, CALLS, "sub/0001-a")["state"] == {"step": 1}  # type: ignore[index]
    with path.open("ab") as fh:
        fh.write(line("sub/0003-c", 4)[:-1])  # no newline yet
    assert journal_get(tmp_path, CALLS, "sub/0003-c")["state"] == {"step": 4}  # type: ignore[index]
    with path.open("ab") as fh:
        fh.write(b"\n" + line("sub/0004-d", 5))
    assert sorted(read_journal(tmp_path, CALLS)) == [
        "sub/0001-a",
        "sub/0002-b",
        "sub/0003-c",
        "sub/0004-d",
    ]
