"""A fork's action branches through the real `ll`: each finished branch is one entry of its
fork's journal (`sub/STEP-STATE/branches.jsonl`) instead of a run directory of its own; every
reader (`ll status`, `ll logs`, `ll report`, JUnit, `ll resume`) finds a branch by its path
there, and still reads runs an older `ll` wrote with a directory a branch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from project import Project
from project import fork_journal as journal

from little_loops.run.runner import Runner

LL = [sys.executable, "-m", "little_loops"]

FAN = """\
name: fan
initial: fan
states:
  fan:
    for_each: [ITEMS]
    action: ACTION
    max_concurrency: CONCURRENCY
    capture: fan
    on_success: done
    on_failure: done
  done: {terminal: true}
"""


def fan(items: list[str], action: str = "'true'", concurrency: int = 1) -> str:
    return (
        FAN.replace("ITEMS", ", ".join(items))
        .replace("ACTION", action)
        .replace("CONCURRENCY", str(concurrency))
    )


def the_run(cwd: Path) -> Path:
    (run,) = (cwd / ".loops" / "runs").iterdir()
    return run


def to_old_layout(fork: Path) -> None:
    """Rewrite a fork's journal as an older `ll` left its action branches: a run directory a
    branch, with its `state.json`, `events.jsonl` and `result.json` (its output record kept
    inline in state.json, as the oldest runs did)."""
    for key, entry in journal(fork).items():
        where = fork / key
        where.mkdir(exist_ok=True)
        (where / "state.json").write_text(json.dumps(entry["state"]) + "\n", encoding="utf-8")
        lines = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entry["events"])
        (where / "events.jsonl").write_text(lines, encoding="utf-8")
        if entry["result"] is not None:
            (where / "result.json").write_text(json.dumps(entry["result"]), encoding="utf-8")
    (fork / "branches.jsonl").unlink()


def test_a_fifty_item_action_fork_creates_no_file_per_branch(project: Project) -> None:
    items = [f"i{n:02d}" for n in range(50)]
    project.write("fan.yaml", fan(items))
    done = project.ll("run", "fan.yaml", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    fork = the_run(project.path) / "sub" / "0001-fan"
    # The fork's own three files, whatever its size: no folder, no file a branch.
    assert sorted(p.name for p in (the_run(project.path) / "sub").rglob("*")) == [
        "0001-fan",
        "branches.jsonl",
        "items.json",
        "join.json",
    ]
    entries = journal(fork)
    assert list(entries) == items  # in the order they ended (here, item order)
    for entry in entries.values():
        assert entry["result"]["verdict"] == "success"
        assert entry["state"]["status"] == "finished"
        assert [e["event"] for e in entry["events"]] == [
            "loop_start",
            "state_enter",
            "action_start",
            "action_complete",
            "evaluate",
            "loop_complete",
        ]


def test_a_fifty_item_action_fork_makes_no_run_per_branch(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An action branch is its one step, run in the fork's own code: the whole fork of 50
    branches makes one `Runner` (the root's) and one run context, not one a branch (it made
    51 of each), and each branch is still journaled whole."""
    made: list[str] = []
    original = Runner.__init__

    def counting(self: Runner, *args: Any, **kwargs: Any) -> None:
        made.append(type(self).__name__)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Runner, "__init__", counting)
    items = [f"i{n:02d}" for n in range(50)]
    project.write("fan.yaml", fan(items, action="'echo ${item.key}'"))
    done = project.ll("run", "fan.yaml", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert made == ["Runner"]  # the root run's own
    entries = journal(the_run(project.path) / "sub" / "0001-fan")
    assert list(entries) == items
    assert [e["result"]["output"] for e in entries.values()] == items


def test_status_of_a_branch_still_running_says_it_has_not_ended(project: Project) -> None:
    # A running action branch has no record yet (its fork journals it when it ends): `ll
    # status`/`ll logs` of it said "no child run ...; a fork's branch is RUN/STEP-STATE/KEY",
    # which is what the user typed. Each branch asks about itself, and about a key the fork
    # does not have, while it runs.
    me = "${loop.run_id}/0001-fan/${item.key}"
    ll = " ".join(LL)
    ask = f"{ll} status {me}; {ll} logs {me}; {ll} status {me}x; true"
    project.write("fan.yaml", fan(["eu", "us"], action=json.dumps(ask)))
    done = project.ll("run", "fan.yaml", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    run = the_run(project.path)
    for key in ("eu", "us"):
        result = journal(run / "sub" / "0001-fan")[key]["result"]
        said = result["output"] + result["stderr"]
        branch = f"{run.name}/0001-fan/{key}"
        ended = f"ll: error: branch '{branch}' has not ended: a fork records an action branch "
        ended += f"when it ends; follow the run with 'll logs -f {run.name}'"
        assert said.count(ended) == 2, said
        assert f"no child run '{branch}x' (the children here: " in said


def test_status_logs_and_report_of_a_journaled_branch_show_it(project: Project) -> None:
    project.write("fan.yaml", fan(["eu", "us"], action="'echo hello-${item.key}'"))
    done = project.ll("run", "fan.yaml", "-q", "--junit-xml", "junit.xml")
    assert done.returncode == 0, done.stdout + done.stderr
    run = the_run(project.path)
    branch = f"{run.name}/0001-fan/us"
    status = project.ll("status", branch)
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"run:     {branch}" in status.stdout
    assert "finished (success)" in status.stdout
    logs = project.ll("logs", branch)
    assert logs.returncode == 0, logs.stdout + logs.stderr
    assert "echo hello-" in logs.stdout
    assert "success" in logs.stdout
    output = project.ll("logs", branch, "--step", "1")
    assert output.returncode == 0, output.stdout + output.stderr
    assert "hello-us" in output.stdout
    assert "hello-eu" not in output.stdout
    report = project.ll("report", branch, "-o", "us.html")
    assert report.returncode == 0, report.stdout + report.stderr
    assert "hello-us" in (project.path / "us.html").read_text(encoding="utf-8")
    whole = project.ll("report", run.name, "-o", "all.html")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    junit = (project.path / "junit.xml").read_text(encoding="utf-8")
    assert 'name="fan/eu (visit 1)"' in junit
    assert 'name="fan/us (visit 1)"' in junit
    missing = project.ll("status", f"{run.name}/0001-fan/asia")
    assert missing.returncode != 0
    assert "eu, us" in missing.stdout + missing.stderr  # the branches there, by name


def test_an_old_layout_run_reads_the_same_as_the_journal(project: Project) -> None:
    """Runs an older `ll` wrote (a run directory a branch) are read as before: status, logs,
    a branch's output and the report say the same of both layouts."""
    project.write("fan.yaml", fan(["eu", "us"], action="'echo hello-${item.key}'"))
    assert project.ll("run", "fan.yaml", "-q").returncode == 0
    run = the_run(project.path)
    branch = f"{run.name}/0001-fan/us"
    asks = [
        ("status", branch),
        ("logs", branch),
        ("logs", branch, "--step", "1"),
        ("logs", run.name),
        ("status", run.name),
    ]
    before = [project.ll(*ask) for ask in asks]
    to_old_layout(run / "sub" / "0001-fan")
    assert (run / "sub" / "0001-fan" / "us" / "result.json").is_file()
    after = [project.ll(*ask) for ask in asks]
    for ask, one, other in zip(asks, before, after, strict=True):
        assert one.returncode == other.returncode == 0, (ask, other.stdout + other.stderr)
        assert one.stdout == other.stdout, ask
    report = project.ll("report", branch, "-o", "us.html")
    assert report.returncode == 0, report.stdout + report.stderr


ONE_BLOCKS = """\
name: turns
initial: work
states:
  work:
    for_each: [a, b, c]
    action: >-
      if [ -f BLOCK ] && [ ${item.key} = b ]; then touch STARTED; sleep 30; fi;
      echo ${item.key} >> RAN
    max_concurrency: 1
    on_success: done
    on_failure: done
  done: {terminal: true}
"""


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert proc.poll() is None, "ll ended before the kill point"
        assert time.monotonic() < deadline, "timed out waiting for the kill point"
        time.sleep(0.02)


def test_an_old_layout_fork_cut_off_resumes_each_branch_once(
    project: Project, tmp_path: Path
) -> None:
    """A fork an older `ll` was running when it was killed (a finished branch in a directory
    with its result.json) resumes: the finished branch never runs again, the others run (the
    new ones into the journal), and the report reads both."""
    text = ONE_BLOCKS
    for name in ("BLOCK", "STARTED", "RAN"):
        text = text.replace(name, str(tmp_path / name.lower()))
    loop = project.write("turns.yaml", text)
    (tmp_path / "block").touch()
    proc = subprocess.Popen([*LL, "run", str(loop), "--quiet"], cwd=project.path)
    _wait_for(tmp_path / "started", proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run = the_run(project.path)
    fork = run / "sub" / "0001-work"
    assert list(journal(fork)) == ["a"]  # b was cut off mid-action: no entry
    to_old_layout(fork)
    (tmp_path / "block").unlink()
    resumed = project.ll("resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (tmp_path / "ran").read_text().split() == ["a", "b", "c"]
    assert sorted(journal(fork)) == ["b", "c"]
    joined = json.loads((fork / "join.json").read_text(encoding="utf-8"))
    assert {k: v["verdict"] for k, v in joined.items()} == dict.fromkeys("abc", "success")
    for key in "abc":
        shown = project.ll("status", f"{run.name}/0001-work/{key}")
        assert "finished (success)" in shown.stdout, (key, shown.stdout + shown.stderr)
    report = project.ll("report", run.name, "-o", "r.html")
    assert report.returncode == 0, report.stdout + report.stderr


KILLED = """\
name: many
initial: work
states:
  work:
    for_each: "${context.items}"
    action: 'echo ${item.key} >> LEDGER'
    max_concurrency: 4
    capture: work
    on_success: done
    on_failure: done
  done: {terminal: true}
context:
  items: 'ITEMS'
"""


def test_a_kill_in_the_middle_of_a_200_item_fork_then_resume_runs_each_branch_once(
    project: Project, tmp_path: Path
) -> None:
    """kill -9 while the fork's branches run: every branch the journal holds never runs again,
    a branch cut off mid-action runs again, each other branch runs once."""
    ledger = tmp_path / "ledger"
    keys = [f"k{n:03d}" for n in range(200)]
    text = KILLED.replace("LEDGER", str(ledger)).replace("ITEMS", json.dumps(keys))
    loop = project.write("many.yaml", text)
    proc = subprocess.Popen([*LL, "run", str(loop), "--quiet"], cwd=project.path)
    deadline = time.monotonic() + 60
    while len(ledger.read_text().split()) < 60 if ledger.exists() else True:
        assert proc.poll() is None, "ll ended before the kill point"
        assert time.monotonic() < deadline, "timed out waiting for the kill point"
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # The actions ll had started go on without it (each in a group of its own) and may append
    # after the kill: the ledger is read once it has stayed the same for a second.
    seen, still = ledger.read_text(), time.monotonic()
    while time.monotonic() - still < 1.0:
        time.sleep(0.05)
        if ledger.read_text() != seen:
            seen, still = ledger.read_text(), time.monotonic()
    fork = the_run(project.path) / "sub" / "0001-work"
    kept = {k for k, e in journal(fork).items() if e["state"]["status"] == "finished"}
    ran_before = seen.split()
    assert 0 < len(kept) < 200, len(kept)
    resumed = project.ll("resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    counts: dict[str, int] = {}
    for key in ledger.read_text().split():
        counts[key] = counts.get(key, 0) + 1
    assert sorted(counts) == keys
    assert all(counts[k] == 1 for k in kept), [k for k in kept if counts[k] != 1]
    again = [k for k, n in counts.items() if n > 1]
    # Only a branch that was running at the kill (at most max_concurrency) runs twice.
    assert len(again) <= 4, again
    assert all(k in ran_before for k in again), again
    assert sorted(journal(fork)) == keys
    joined = json.loads((fork / "join.json").read_text(encoding="utf-8"))
    assert {v["verdict"] for v in joined.values()} == {"success"}
