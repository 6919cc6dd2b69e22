"""history.py: a run's story folded from its events, from real runs and from small scripts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from project import Project

from little_loops.record.events import (
    LoopComplete,
    Route,
    StateEnter,
    UnknownEvent,
)
from little_loops.record.history import (
    MAX_ITERATIONS,
    STOPPED,
    History,
)

LL = [sys.executable, "-m", "little_loops"]

STORY = """\
name: story
initial: count
max_iterations: 6
on_max_iterations: report
states:
  count:
    action: 'n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; echo "try $n"; [ $n -ge 2 ]'
    retry: {max_attempts: 3, interval: 0.01, jitter: false, on: [failure]}
    on_success: check
    on_failure: report
  check:
    action: 'echo "bad thing" >&2; exit 1'
    on_success: done
    on_failure: count
  report:
    action: echo reporting
    next: done
  done: {terminal: true}
"""

# The second state stops `ll` (SIGTERM to its parent) the first time it runs.
CUT = """\
name: cut
initial: first
states:
  first:
    action: echo one
    next: second
  second:
    action: '[ -f killed ] || { touch killed; kill -TERM $PPID; sleep 5; }; echo two'
    next: done
  done: {terminal: true}
"""


def one_run(base: Path) -> Path:
    (run,) = (base / ".loops" / "runs").iterdir()
    return run


def test_the_story_of_a_real_run(tmp_path: Path, project: Project) -> None:
    (tmp_path / "story.yaml").write_text(STORY, encoding="utf-8")
    assert project.ll("run", "story.yaml", process=True).returncode == 4
    run = one_run(tmp_path)
    history = History.from_file(run / "events.jsonl")

    assert history.path == ["count", "check", "count", "check", "count", "check", "report"]
    assert history.loop == "story"
    assert history.run_id == run.name
    assert not history.resumed
    end = history.complete
    assert end is not None
    assert (end.outcome, end.exit_code, end.final_state, end.steps) == (
        "max_iterations",
        4,
        "report",
        7,
    )
    first, second, *_, last = history.steps
    assert (first.attempts, first.retries, first.verdict) == (2, 1, "success")
    assert (first.routed_to, first.via) == ("check", "on_success")
    assert second.verdict == "failure"
    assert second.why == "exit code 1: bad thing"
    assert second.tail == ["bad thing"]
    assert (second.routed_to, second.via, second.failed, second.stopped_run) == (
        "count",
        "on_failure",
        True,
        False,
    )
    assert [s.name for s in history.steps][-2:] == ["check (visit 3)", "report (visit 1)"]
    assert last.routed_to is None
    assert history.jumps == {"report"}  # no route event leads to the on_max_iterations state
    visits, taken = history.overlay()
    assert visits == {"count": 3, "check": 3, "report": 1}
    assert (MAX_ITERATIONS, "report") in taken
    assert ("check", "count") in taken
    # The retried attempt's verdict is one of the run's verdicts, as `ll status` lists them.
    assert [e.verdict for e in history.evaluations][:3] == ["failure", "success", "failure"]

    status = project.ll("status", run.name, process=True).stdout
    shown = status.split("last verdicts:\n")[1].splitlines()[:5]
    expected = [
        f"  step {e.step} {e.state}: {e.verdict}" + (f" - {e.reason}" if e.reason else "")
        for e in history.evaluations[-5:]
    ]
    assert shown == expected
    logs = project.ll("logs", run.name, "--step", "1", process=True).stdout
    assert "== step 1 (count), attempt 1 ==\ntry 1" in logs
    assert "== step 1 (count), attempt 2 ==\ntry 2" in logs


def test_the_story_of_a_run_cut_off_and_resumed(tmp_path: Path, project: Project) -> None:
    (tmp_path / "cut.yaml").write_text(CUT, encoding="utf-8")
    assert project.ll("run", "cut.yaml", process=True).returncode == 143
    run = one_run(tmp_path)
    cut = History.from_file(run / "events.jsonl")
    assert cut.path == ["first", "second"]  # step 2 was entered, then cut off
    assert cut.complete is not None
    assert cut.path_upto(cut.complete.steps) == ["first"]  # what a resume continues from

    resumed = project.ll("resume", run.name, process=True)
    assert resumed.returncode == 0, resumed.stderr
    history = History.from_file(run / "events.jsonl")
    assert [s.loop for s in history.segments] == ["cut", "cut"]
    assert history.resumed
    assert history.path == ["first", "second", "done"]  # step 2 counted once
    assert history.visit_counts() == {"first": 1, "second": 1, "done": 1}
    second = history.get(2)
    assert second is not None
    assert (second.verdict, second.exit_code) == ("success", 0)
    graph = project.ll("graph", "cut.yaml", "--run", run.name, process=True).stdout
    assert 's1["second<br/>1 visit"]' in graph


def test_a_live_listener_folds_the_same_story_as_the_log(tmp_path: Path) -> None:
    from little_loops.load.loader import load
    from little_loops.run.runner import (
        Runner,
        RunOptions,
    )

    (tmp_path / "story.yaml").write_text(STORY.replace("echo $n > n", "echo $n > ../n"))
    (tmp_path / "work").mkdir()
    live = History()
    loop = load(tmp_path / "story.yaml")
    result = Runner(loop, RunOptions(base_dir=tmp_path / "work"), listeners=[live]).run()
    read = History.from_file(result.run_dir / "events.jsonl")
    assert live.path == read.path
    assert live.steps == read.steps
    assert live.complete == read.complete
    assert live.overlay() == read.overlay()


# -- small scripts --------------------------------------------------------------------------


def ev(name: str, step: int | None = None, state: str | None = None, **fields: Any) -> Any:
    event: dict[str, Any] = {"event": name, "ts": f"2026-11-22T04:14:{30 + (step or 0)}.000Z"}
    event["run_id"] = "r1"
    if step is not None:
        event["step"] = step
    if state is not None:
        event["state"] = state
    return event | fields


def test_feed_takes_typed_events_and_dicts_and_returns_the_typed_event() -> None:
    history = History()
    assert isinstance(history.feed(StateEnter(step=1, state="a")), StateEnter)
    typed = history.feed(ev("route", 1, "a", **{"from": "a", "to": "b", "via": "next"}))
    assert isinstance(typed, Route)
    assert isinstance(history.feed(ev("something_new", 1, "a", x=1)), UnknownEvent)
    history.feed(ev("state_enter", 2, "b"))
    assert history.path == ["a", "b"]
    assert history.taken == {("a", "b")}
    assert history.jumps == set()


def test_a_step_entered_again_keeps_its_attempts_and_starts_over() -> None:
    history = History.from_events(
        [
            ev("loop_start", loop="x", resumed=False),
            ev("state_enter", 1, "a"),
            ev("action_start", 1, "a", action="try", action_type="shell"),
            ev("evaluate", 1, "a", type="exit_code", verdict="failure", details={}),
            ev("retry", 1, "a", attempt=2, delay_s=0.1, verdict="failure"),
            ev("loop_complete", final_state="a", outcome="interrupted", exit_code=130, steps=0),
            ev("loop_start", loop="x", resumed=True),
            ev("state_enter", 1, "a"),
            ev("action_start", 1, "a", action="try", action_type="shell"),
            ev("evaluate", 1, "a", type="exit_code", verdict="failure", details={}),
            ev("retry", 1, "a", attempt=3, delay_s=0.1, verdict="failure"),
            ev("evaluate", 1, "a", type="exit_code", verdict="success", details={}),
        ]
    )
    (step,) = history.steps
    assert (step.attempts, step.retries, step.verdict) == (3, 1, "success")
    assert len(history.evaluations) == 3
    assert len(history.segments) == 2


def test_overlay_marks_where_the_run_stopped_unless_asked_not_to() -> None:
    history = History.from_events(
        [
            ev("state_enter", 1, "a"),
            ev("loop_complete", final_state="a", outcome="error", exit_code=3, steps=1),
        ]
    )
    assert history.overlay()[1] == {("a", STOPPED[3])}
    assert history.overlay(stops=False)[1] == set()
    assert isinstance(history.complete, LoopComplete)


def test_with_history_reads_the_whole_log_of_a_resumed_run(tmp_path: Path) -> None:
    first = [ev("loop_start", loop="x"), ev("state_enter", 1, "a")]
    later = [
        ev("loop_start", loop="x", resumed=True),
        ev("state_enter", 2, "b"),
        ev("loop_complete", final_state="b", outcome="success", exit_code=0, steps=2),
    ]
    log = tmp_path / ".loops" / "runs" / "r1" / "events.jsonl"
    log.parent.mkdir(parents=True)
    import json

    log.write_text("".join(json.dumps(e) + "\n" for e in first + later), encoding="utf-8")
    seen = History.from_events(later)
    assert seen.path == ["b"]
    assert seen.with_history(tmp_path).path == ["a", "b"]
    assert History.from_events(first).with_history(tmp_path).path == ["a"]  # not resumed
