"""`ll list`, `history`, `status`, `logs` and `stop` over run directories made by real runs."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from project import Project

from little_loops.errors import EXIT_RUN_ERROR, LoopError
from little_loops.load.loader import load
from little_loops.record.events import (
    LoopComplete,
    LoopStart,
    RunEvent,
    read_records,
)
from little_loops.record.runs import (
    follow,
    history_text,
    info,
    list_text,
    status_text,
    stop,
)
from little_loops.record.store import (
    RunDir,
    process_start,
)
from little_loops.run.runner import (
    Runner,
    RunOptions,
    RunResult,
)

PASS = """
name: {name}
initial: check
on_error: broken
states:
  check:
    action: "true"
    on_success: done
    on_failure: broken
  done:
    terminal: true
  broken:
    terminal: true
    outcome: failure
"""

FAIL = """
name: {name}
initial: count
on_error: broken
states:
  count:
    action: echo not-a-number
    evaluate:
      type: output_numeric
      operator: gt
      target: 3
    on_success: done
    on_failure: done
  done:
    terminal: true
  broken:
    terminal: true
    outcome: failure
"""

MANY = """
name: many
initial: a
max_iterations: 7
on_error: done
states:
  a:
    action: "true"
    on_success: a
    on_failure: done
  done:
    terminal: true
"""


def run(tmp_path: Path, template: str, name: str, file: str | None = None) -> RunResult:
    path = tmp_path / (file or f"{name}.yaml")
    path.write_text(textwrap.dedent(template.format(name=name)), encoding="utf-8")
    return Runner(load(path), RunOptions(base_dir=tmp_path)).run()


def rows(text: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]


def set_state(run_id: str, base: Path, **changes: Any) -> None:
    run_dir = RunDir.open(base, run_id)
    state = run_dir.read_state()
    state.update(changes)
    run_dir.write_state(state)


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "30"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_nothing_to_show(tmp_path: Path) -> None:
    assert list_text(tmp_path) == "no runs here yet; start one with 'll run FILE'\n"
    assert history_text(tmp_path, None) == "no runs here yet\n"
    assert history_text(tmp_path, "fix") == "no runs of 'fix' here yet\n"
    with pytest.raises(LoopError, match="no runs under"):
        status_text(tmp_path, None)


def test_list_text(tmp_path: Path) -> None:
    ok = run(tmp_path, PASS, "ok")
    bad = run(tmp_path, FAIL, "bad")
    many = run(tmp_path, MANY, "many")
    table = rows(list_text(tmp_path))
    assert table[0] == ["RUN", "LOOP", "STATUS", "STEP", "STARTED (UTC)", "DURATION"]
    assert [r[:4] for r in table[1:]] == [  # newest first, as `ll history`
        [many.run_id, "many", "max_iterations", "7/7"],
        [bad.run_id, "bad", "failure", "2/50"],
        [ok.run_id, "ok", "success", "2/50"],
    ]
    for r in table[1:]:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", r[4])
        assert re.fullmatch(r"\d+\.\ds", r[5])
    lines = list_text(tmp_path).splitlines()
    assert lines[0].index("LOOP") == lines[3].index("  ok  ") + 2  # columns line up


def test_list_text_shows_unfinished_statuses_and_skips_corrupt_runs(
    tmp_path: Path, dead_pid: int
) -> None:
    first = run(tmp_path, PASS, "first")
    second = run(tmp_path, PASS, "second")
    third = run(tmp_path, PASS, "third")
    set_state(first.run_id, tmp_path, status="interrupted", outcome=None)
    set_state(second.run_id, tmp_path, status="running", outcome=None, pid=dead_pid)
    RunDir.open(tmp_path, third.run_id).state_path.write_text("{", encoding="utf-8")
    table = rows(list_text(tmp_path))
    assert [r[:3] for r in table[1:]] == [
        [second.run_id, "second", "crashed"],
        [first.run_id, "first", "interrupted"],
    ]


def test_history_text_filters_by_loop_and_lists_newest_first(tmp_path: Path) -> None:
    one = run(tmp_path, PASS, "deploy")
    other = run(tmp_path, FAIL, "lint")
    two = run(tmp_path, FAIL, "deploy", file="deploy-again.yaml")
    table = rows(history_text(tmp_path, None))
    assert table[0] == ["STARTED (UTC)", "RUN", "LOOP", "OUTCOME", "STEPS", "DURATION", "COST"]
    assert [(r[1], r[2], r[3], r[4], r[6]) for r in table[1:]] == [
        (two.run_id, "deploy", "failure", "2", "-"),
        (other.run_id, "lint", "failure", "2", "-"),
        (one.run_id, "deploy", "success", "2", "-"),
    ]
    by_name = [r[1] for r in rows(history_text(tmp_path, "deploy"))[1:]]
    assert by_name == [two.run_id, one.run_id]
    by_file_name = [r[1] for r in rows(history_text(tmp_path, "deploy-again.yaml"))[1:]]
    assert by_file_name == [two.run_id]
    by_path = [r[1] for r in rows(history_text(tmp_path, str(tmp_path / "lint.yaml")))[1:]]
    assert by_path == [other.run_id]
    assert history_text(tmp_path, "nope") == "no runs of 'nope' here yet\n"


def test_list_and_history_show_runs_in_the_same_order(tmp_path: Path) -> None:
    ids = [run(tmp_path, PASS, name).run_id for name in ("a", "b", "c")]
    listed = [r[0] for r in rows(list_text(tmp_path))[1:]]
    history = [r[1] for r in rows(history_text(tmp_path, None))[1:]]
    assert listed == history == ids[::-1]


def test_history_shows_cost(tmp_path: Path) -> None:
    result = run(tmp_path, PASS, "paid")
    set_state(result.run_id, tmp_path, cost_usd=0.123456)
    assert rows(history_text(tmp_path, None))[1][6] == "$0.1235"


def test_status_text_of_a_finished_run(tmp_path: Path) -> None:
    result = run(tmp_path, FAIL, "bad")
    lines = status_text(tmp_path, None).splitlines()
    assert lines[:5] == [
        f"run:     {result.run_id}",
        f"loop:    bad ({tmp_path / 'bad.yaml'})",
        "status:  finished (failure)",
        "state:   broken",
        "step:    2/50",
    ]
    assert re.fullmatch(r"elapsed: \d+\.\ds", lines[5])
    assert lines[6:] == [
        "cost:    $0.0000",
        "last verdicts:",
        # The step's reason: the evaluator's error and the last line the action printed.
        "  step 1 count: error - the output is not a number; print only the number, "
        "or point `source` at it: not-a-number",
    ]
    assert status_text(tmp_path, result.run_id[:20]) == status_text(tmp_path, result.run_id)


def test_status_text_keeps_the_last_five_verdicts(tmp_path: Path) -> None:
    result = run(tmp_path, MANY, "many")
    text = status_text(tmp_path, result.run_id)
    verdicts = text.split("last verdicts:\n")[1].splitlines()
    assert verdicts == [f"  step {i} a: success" for i in range(3, 8)]
    assert "status:  finished (max_iterations)\n" in text
    assert "resume with" not in text


def test_status_text_of_an_interrupted_run_says_how_to_resume(tmp_path: Path) -> None:
    result = run(tmp_path, PASS, "ok")
    set_state(
        result.run_id,
        tmp_path,
        status="interrupted",
        outcome="interrupted",
        error="terminated (SIGTERM)",
    )
    text = status_text(tmp_path, result.run_id)
    assert "status:  interrupted: terminated (SIGTERM)\n" in text
    assert text.endswith(f"resume with: ll resume {result.run_id}\n")
    assert "pid:" not in text


def test_a_running_run_whose_owner_died_is_crashed(tmp_path: Path, dead_pid: int) -> None:
    result = run(tmp_path, PASS, "ok")
    set_state(result.run_id, tmp_path, status="running", outcome=None, pid=dead_pid)
    i = info(RunDir.open(tmp_path, result.run_id))
    assert (i.status, i.pid, i.loop, i.step) == ("crashed", dead_pid, "ok", 2)
    text = status_text(tmp_path, result.run_id)
    assert "status:  crashed\n" in text
    assert "pid:" not in text
    assert text.endswith(f"resume with: ll resume {result.run_id}\n")


def test_a_running_run_with_a_live_owner(tmp_path: Path, live_pid: int) -> None:
    result = run(tmp_path, PASS, "ok")
    set_state(
        result.run_id,
        tmp_path,
        status="running",
        outcome=None,
        pid=live_pid,
        pid_start=process_start(live_pid),
        started_at="2000-01-01T00:00:00.000Z",
        elapsed_ms=5,
    )
    i = info(RunDir.open(tmp_path, result.run_id))
    assert (i.status, i.pid) == ("running", live_pid)
    text = status_text(tmp_path, result.run_id)
    assert "status:  running\n" in text
    assert f"pid:     {live_pid}\n" in text
    # Elapsed counts from the start while the run is still going.
    assert re.search(r"^elapsed: \d+h\d\dm$", text, re.MULTILINE)
    assert "resume with" not in text
    assert rows(list_text(tmp_path))[1][4] == "2000-01-01 00:00:00"


def test_info_falls_back_to_the_file_name_without_events(tmp_path: Path) -> None:
    result = run(tmp_path, PASS, "ok", file="named-file.yaml")
    run_dir = RunDir.open(tmp_path, result.run_id)
    assert info(run_dir).loop == "ok"
    run_dir.events_path.unlink()
    assert info(run_dir).loop == "named-file"


def test_follow_without_follow_feeds_every_event(tmp_path: Path) -> None:
    result = run(tmp_path, FAIL, "bad")
    run_dir = RunDir.open(tmp_path, result.run_id)
    seen: list[RunEvent] = []
    follow(run_dir, seen.append, follow=False)
    assert seen == read_records(run_dir.events_path)
    assert isinstance(seen[0], LoopStart)
    assert isinstance(seen[-1], LoopComplete)


def test_follow_skips_a_torn_last_line_and_returns_for_an_ended_run(tmp_path: Path) -> None:
    result = run(tmp_path, PASS, "ok")
    run_dir = RunDir.open(tmp_path, result.run_id)
    complete = read_records(run_dir.events_path)
    with run_dir.events_path.open("a", encoding="utf-8") as fh:
        fh.write('{"event":"state_ent')
    seen: list[RunEvent] = []
    follow(run_dir, seen.append, follow=True, poll=0.01)  # finished: returns at once
    assert seen == complete


def test_follow_of_a_run_without_events(tmp_path: Path) -> None:
    run_dir = RunDir.create(tmp_path, "empty")
    run_dir.write_state({"status": "finished"})
    seen: list[RunEvent] = []
    follow(run_dir, seen.append, follow=True, poll=0.01)
    assert seen == []


def test_stop_refuses_a_run_that_is_not_running(tmp_path: Path) -> None:
    result = run(tmp_path, PASS, "ok")
    with pytest.raises(LoopError) as exc:
        stop(tmp_path, result.run_id)
    assert exc.value.message == f"run {result.run_id} is not running (finished)"
    assert exc.value.exit_code == EXIT_RUN_ERROR


def test_stop_sends_sigterm_to_the_owner(tmp_path: Path) -> None:
    result = run(tmp_path, PASS, "ok")
    owner = subprocess.Popen(["sleep", "30"])
    try:
        set_state(
            result.run_id,
            tmp_path,
            status="running",
            pid=owner.pid,
            pid_start=process_start(owner.pid),
        )
        message = stop(tmp_path, result.run_id, wait=5)
        assert message == f"stopped run {result.run_id}; resume with: ll resume {result.run_id}\n"
    finally:
        owner.kill()
        assert owner.wait() == -15  # it died of the SIGTERM, before the kill


# `ll list` through the real `ll`: the newest 20 runs by default, read alone.

LL_MAIN = "import sys\nsys.argv[0] = 'll'\nfrom little_loops.entry import main\nmain()\n"
# Counts every file ll opens named state.json (an audit hook sees builtins.open and os.open).
COUNT_STATE_OPENS = """
import atexit, os, sys
opened = []
def _hook(event, args):
    if event == "open" and str(args[0]).endswith("state.json"):
        opened.append(str(args[0]))
sys.addaudithook(_hook)
atexit.register(lambda: os.write(2, f"STATE-OPENS {len(opened)}\\n".encode()))
"""


# A fresh interpreter where an audit hook counts what `ll` opens (a hook cannot be removed).
def real_ll(cwd: Path, *args: str, prologue: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", prologue + LL_MAIN, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def many_runs(project: Project, count: int, garbage: bool = False) -> list[str]:
    """One real run of a YAML loop, copied under `count - 1` older ids (one a second);
    `garbage`: the copies' state.json is not JSON. The ids, newest first."""
    tmp_path = project.path
    (tmp_path / "ok.yaml").write_text(textwrap.dedent(PASS.format(name="ok")), encoding="utf-8")
    done = project.ll("run", "ok.yaml", "--quiet")
    assert done.returncode == 0, done.stderr
    runs = tmp_path / ".loops" / "runs"
    (real,) = list(runs.iterdir())
    state = (real / "state.json").read_text(encoding="utf-8")
    start = time.time() - 30 * 86400
    for i in range(count - 1):
        run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime(start + i)) + f"-ok-{i:04x}"
        (runs / run_id).mkdir()
        text = "{not json" if garbage else state.replace(real.name, run_id)
        (runs / run_id / "state.json").write_text(text, encoding="utf-8")
    return sorted((p.name for p in runs.iterdir()), reverse=True)


def test_ll_list_shows_the_newest_20_runs_and_says_how_many_are_older(
    project: Project, tmp_path: Path
) -> None:
    ids = many_runs(project, 25)
    proc = project.ll("list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:2] == ["RUN", "LOOP"]
    assert [line.split()[0] for line in lines[1:21]] == ids[:20]  # newest first
    assert lines[21:] == ["5 older runs not shown; see every run with: ll list --all"]
    assert rows(proc.stdout)[1][1:4] == ["ok", "success", "2/50"]  # the row is as before


def test_ll_list_limit_and_all(project: Project, tmp_path: Path) -> None:
    ids = many_runs(project, 25)
    for flag in ("--limit", "-n"):
        proc = project.ll("list", flag, "3")
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert [line.split()[0] for line in lines[1:4]] == ids[:3]
        assert lines[4:] == ["22 older runs not shown; see every run with: ll list --all"]
    proc = project.ll("list", "--all")
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[0] for line in proc.stdout.splitlines()[1:]] == ids  # no last line
    one = project.ll("list", "-n", "24")
    assert one.stdout.splitlines()[-1] == "1 older run not shown; see every run with: ll list --all"
    assert "older" not in project.ll("list", "-n", "25").stdout
    both = project.ll("list", "--all", "-n", "3")
    assert both.returncode == 2
    assert "--limit N or --all, not both" in both.stderr
    zero = project.ll("list", "-n", "0")
    assert zero.returncode == 2
    assert "Traceback" not in zero.stderr


def test_ll_list_with_few_runs_has_no_last_line(project: Project, tmp_path: Path) -> None:
    ids = many_runs(project, 3)
    proc = project.ll("list")
    assert [line.split()[0] for line in proc.stdout.splitlines()[1:]] == ids


def test_ll_list_reads_only_the_runs_it_prints(project: Project, tmp_path: Path) -> None:
    ids = many_runs(project, 2000, garbage=True)
    # The 20 newest of the copies get real state back; the other 1,979 stay garbage.
    good = (tmp_path / ".loops" / "runs" / ids[0] / "state.json").read_text(encoding="utf-8")
    for run_id in ids[1:21]:
        state = good.replace(ids[0], run_id)
        (tmp_path / ".loops" / "runs" / run_id / "state.json").write_text(state, encoding="utf-8")
    proc = real_ll(tmp_path, "list", prologue=COUNT_STATE_OPENS)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:21]] == ids[:20]
    assert lines[21:] == ["1,980 older runs not shown; see every run with: ll list --all"]
    assert not any(run_id in proc.stdout for run_id in ids[21:])
    opens = int(re.search(r"STATE-OPENS (\d+)", proc.stderr).group(1))  # type: ignore[union-attr]
    assert opens <= 20 + 3, opens  # the 20 shown, and nothing of the 1,980 others
    every = real_ll(tmp_path, "list", "--all", prologue=COUNT_STATE_OPENS)
    assert every.returncode == 0, every.stderr
    assert int(re.search(r"STATE-OPENS (\d+)", every.stderr).group(1)) >= 2000  # type: ignore[union-attr]
