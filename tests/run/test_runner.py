"""The runner, in process, with real shell actions and real run directories."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from little_loops.errors import RunError
from little_loops.load.loader import load
from little_loops.record import outputs
from little_loops.record.events import read_events
from little_loops.record.runs import step_outputs
from little_loops.record.store import RunDir
from little_loops.run.runner import (
    Runner,
    RunOptions,
    RunResult,
)


def write_loop(tmp_path: Path, text: str, name: str = "loop.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def run_loop(
    tmp_path: Path, text: str, *, sleeps: list[float] | None = None, **options: Any
) -> RunResult:
    loop = load(write_loop(tmp_path, text))
    recorded = sleeps if sleeps is not None else []
    opts = RunOptions(base_dir=tmp_path, **options)
    return Runner(loop, opts, sleep=recorded.append).run()


def events_of(result: RunResult) -> list[dict[str, Any]]:
    return read_events(result.run_dir / "events.jsonl")


def test_success_path_events_and_state(tmp_path: Path) -> None:
    result = run_loop(
        tmp_path,
        """
        name: two-steps
        initial: first
        on_error: done
        states:
          first:
            action: echo hello
            capture: greeting
            on_success: second
            on_failure: done
          second:
            action: test "${captured.greeting.output}" = hello
            on_success: done
            on_failure: first
          done:
            terminal: true
        """,
    )
    assert (result.outcome, result.exit_code, result.steps) == ("success", 0, 3)
    assert result.path == ("first", "second", "done")
    names = [e["event"] for e in events_of(result)]
    assert names[0] == "loop_start"
    assert names[-1] == "loop_complete"
    assert names.count("state_enter") == 3
    assert names.count("route") == 2
    for event in events_of(result):
        assert event["run_id"] == result.run_id
        assert event["ts"].endswith("Z")
    route = next(e for e in events_of(result) if e["event"] == "route")
    assert route == {
        **route,
        "from": "first",
        "to": "second",
        "verdict": "success",
        "via": "on_success",
        "step": 1,
        "state": "first",
    }
    state = json.loads((result.run_dir / "state.json").read_text())
    assert state["version"] == 2
    assert state["status"] == "finished"
    assert len(state["captured"]["greeting"]) == 1  # a reference into outputs.dat
    kept = outputs.resolve(result.run_dir, state)
    assert kept["captured"]["greeting"]["output"] == "hello"
    assert state["step"] == 3
    assert not (result.run_dir / "steps").exists()  # no file a step: one log for the run
    assert (result.run_dir / "steps.log").read_text() == "hello\n"
    starts = [e.get("log_at") for e in events_of(result) if e["event"] == "action_start"]
    assert starts == [0, 6]  # the silent second step adds nothing
    assert [o.output for o in step_outputs(RunDir(result.run_dir), 1)] == [b"hello\n"]
    assert [o.output for o in step_outputs(RunDir(result.run_dir), 2)] == [None]


def test_failure_terminal_exit_1(tmp_path: Path) -> None:
    result = run_loop(
        tmp_path,
        """
        name: fails
        initial: check
        on_error: bad
        states:
          check: {action: "false", on_success: good, on_failure: bad}
          good: {terminal: true}
          bad: {terminal: true, outcome: failure}
        """,
    )
    assert (result.outcome, result.exit_code, result.final_state) == ("failure", 1, "bad")


def test_failing_terminal_action_fails_the_run(tmp_path: Path) -> None:
    marker = tmp_path / "reported"
    result = run_loop(
        tmp_path,
        f"""
        name: report
        initial: end
        states:
          end:
            action: touch {marker} && echo "cannot notify" >&2 && exit 7
            terminal: true
        """,
    )
    assert marker.exists()
    assert (result.outcome, result.exit_code, result.final_state) == ("failure", 1, "end")
    assert result.error == ("terminal state 'end' gave verdict 'error': exit code 7: cannot notify")


def test_max_iterations_and_on_max_iterations_runs_once(tmp_path: Path) -> None:
    result = run_loop(
        tmp_path,
        """
        name: spin
        initial: a
        max_iterations: 3
        on_max_iterations: report
        on_error: report
        states:
          a: {action: "true", next: b}
          b: {action: "true", next: a}
          report: {action: echo capped, terminal: true}
        """,
    )
    assert (result.outcome, result.exit_code) == ("max_iterations", 4)
    assert result.path == ("a", "b", "a", "report")


def test_max_iterations_override(tmp_path: Path) -> None:
    result = run_loop(
        tmp_path,
        """
        name: spin
        initial: a
        on_error: a
        states:
          a: {action: "true", on_success: $current, on_failure: z}
          z: {terminal: true}
        """,
        max_iterations=5,
    )
    assert (result.outcome, result.steps) == ("max_iterations", 5)


def test_convergence_remembers_previous_value(tmp_path: Path) -> None:
    counter = tmp_path / "n"
    counter.write_text("9\n")
    result = run_loop(
        tmp_path,
        f"""
        name: converge
        initial: measure
        on_error: stuck
        states:
          measure:
            action: cat {counter}
            evaluate: {{type: convergence, target: 0}}
            route: {{target: done, progress: lower, stall: stuck}}
          lower:
            action: echo $(( $(cat {counter}) - 3 )) > {counter}
            next: measure
          done: {{terminal: true}}
          stuck: {{terminal: true, outcome: failure}}
        """,
    )
    assert (result.outcome, result.final_state) == ("success", "done")
    measured = [
        (e["verdict"], e["details"].get("value"))
        for e in events_of(result)
        if e["event"] == "evaluate" and e["state"] == "measure"
    ]
    assert measured == [("progress", 9), ("progress", 6), ("progress", 3), ("target", 0)]
    state = json.loads((result.run_dir / "state.json").read_text())
    assert state["convergence"] == {"measure": 0.0}


def test_retry_in_place_with_backoff(tmp_path: Path) -> None:
    sleeps: list[float] = []
    tries = tmp_path / "tries"
    result = run_loop(
        tmp_path,
        f"""
        name: flaky
        initial: fetch
        on_error: gave_up
        states:
          fetch:
            action: |
              n=$(( $(cat {tries} 2>/dev/null || echo 0) + 1 )); echo $n > {tries}
              echo "try $n"
              [ $n -ge 3 ] || exit 2
            retry: {{max_attempts: 5, interval: 1, backoff_rate: 2, max_delay: 3, jitter: false}}
            on_success: done
            on_failure: gave_up
          done: {{terminal: true}}
          gave_up: {{terminal: true, outcome: failure}}
        """,
        sleeps=sleeps,
    )
    assert result.outcome == "success"
    assert sleeps == [1.0, 2.0]
    retries = [e for e in events_of(result) if e["event"] == "retry"]
    assert [(e["attempt"], e["verdict"], e["delay_s"]) for e in retries] == [
        (2, "error", 1.0),
        (3, "error", 2.0),
    ]
    shown = [(o.attempt, o.output) for o in step_outputs(RunDir(result.run_dir), 1)]
    assert shown == [(1, b"try 1\n"), (2, b"try 2\n"), (3, b"try 3\n")]


def test_retry_jitter_stays_within_cap(tmp_path: Path) -> None:
    sleeps: list[float] = []
    result = run_loop(
        tmp_path,
        """
        name: always-flaky
        initial: fetch
        on_error: gave_up
        states:
          fetch:
            action: exit 3
            retry: {max_attempts: 6, interval: 1, backoff_rate: 10, max_delay: 4}
            on_success: done
            on_failure: gave_up
          done: {terminal: true}
          gave_up: {terminal: true, outcome: failure}
        """,
        sleeps=sleeps,
    )
    assert result.outcome == "failure"
    assert len(sleeps) == 5
    assert all(0 <= s <= 4 for s in sleeps)


def test_undefined_variable_ends_run_with_exit_3(tmp_path: Path) -> None:
    result = run_loop(
        tmp_path,
        """
        name: undefined
        initial: a
        on_error: z
        states:
          a: {action: "echo ${env.LL_TEST_SURELY_UNDEFINED}", next: z}
          z: {terminal: true}
        """,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert (result.outcome, result.exit_code) == ("error", 3)
    assert result.error is not None
    assert "env.LL_TEST_SURELY_UNDEFINED" in result.error
    assert "state 'a'" in result.error


def test_action_timeout_gives_timeout_verdict(tmp_path: Path) -> None:
    result = run_loop(
        tmp_path,
        """
        name: slow
        initial: wait
        states:
          wait:
            action: sleep 30
            timeout: 0.5
            on_success: done
            on_failure: done
            on_timeout: late
            on_error: late
          done: {terminal: true}
          late: {terminal: true, outcome: failure}
        """,
    )
    assert (result.final_state, result.exit_code) == ("late", 1)
    evaluate = next(e for e in events_of(result) if e["event"] == "evaluate")
    assert evaluate["verdict"] == "timeout"


def test_loop_timeout_enforced_while_action_runs(tmp_path: Path) -> None:
    result = run_loop(
        tmp_path,
        """
        name: slow-loop
        initial: wait
        timeout: 1
        on_error: late
        states:
          wait: {action: sleep 30, next: done}
          done: {terminal: true}
          late: {terminal: true, outcome: failure}
        """,
    )
    assert (result.outcome, result.exit_code) == ("timeout", 124)
    assert result.duration_ms < 25000  # not the 30 s sleep


def test_maintain_restarts_until_a_limit(tmp_path: Path) -> None:
    result = run_loop(
        tmp_path,
        """
        name: keep
        initial: check
        maintain: true
        max_iterations: 5
        on_error: check
        states:
          check: {action: "true", next: ok}
          ok: {terminal: true}
        """,
    )
    assert result.outcome == "max_iterations"
    assert result.path == ("check", "ok", "check", "ok", "check")


def test_prev_namespace_and_state_iteration(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    result = run_loop(
        tmp_path,
        f"""
        name: prev
        initial: a
        on_error: z
        states:
          a:
            action: printf '%s' "it's \\$HOME"
            next: b
          b:
            action: >-
              printf '%s|%s|%s|%s' ${{prev.output}} "${{prev.state}}"
              ${{state.iteration}} ${{prev.exit_code}} > {out}
            next: z
          z: {{terminal: true}}
        """,
    )
    assert result.outcome == "success"
    assert out.read_text() == "it's $HOME|a|2|0"


def test_events_stream_to_listener_in_order(tmp_path: Path) -> None:
    seen: list[str] = []
    loop = load(
        write_loop(
            tmp_path,
            """
            name: listen
            initial: a
            on_error: z
            states:
              a: {action: "true", next: z}
              z: {terminal: true}
            """,
        )
    )
    Runner(loop, RunOptions(base_dir=tmp_path), listeners=[lambda e: seen.append(e.name)]).run()
    assert seen == [
        "loop_start",
        "state_enter",
        "action_start",
        "action_complete",
        "evaluate",
        "route",
        "state_enter",
        "loop_complete",
    ]


# Shipped loops that end otherwise on purpose: deploy-tree's ap-south probe fails (the report's
# example of a failing branch), and publish asks for an approval (exit 6, suspended).
SHIPPED_ENDS = {"deploy-tree.yaml": ("failure", 1), "publish.yaml": ("suspended", 6)}


@pytest.mark.parametrize("shipped", sorted((Path(__file__).parents[2] / "loops").glob("*.yaml")))
def test_every_shipped_loop_runs(shipped: Path, tmp_path: Path) -> None:
    loop = load(shipped)
    if any(s.action_type == "slash" for s in loop.states.values()):
        pytest.skip("slash actions need the claude CLI; covered by the action tests")
    cassette = shipped.with_suffix(".cassette.jsonl")
    options = RunOptions(base_dir=tmp_path, replay=cassette if cassette.exists() else None)
    result = Runner(loop, options, sleep=lambda s: None).run()
    outcome, code = SHIPPED_ENDS.get(shipped.name, ("success", 0))
    assert (result.outcome, result.exit_code) == (outcome, code), result


def test_context_may_use_loop_and_env(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_loop(
        tmp_path,
        f"""
        name: ctx
        initial: a
        on_error: z
        context:
          tag: "${{loop.name}}-${{loop.run_id}}"
          home: "${{env.LL_TEST_HOME_VALUE}}"
        states:
          a: {{action: "printf '%s %s' '${{context.tag}}' '${{context.home}}' > {out}", next: z}}
          z: {{terminal: true}}
        """,
        env={"LL_TEST_HOME_VALUE": "here", "PATH": "/usr/bin:/bin"},
    )
    assert result.outcome == "success", result.error
    assert out.read_text() == f"ctx-{result.run_id} here"


def test_a_start_that_fails_after_taking_the_lock_releases_it(tmp_path: Path) -> None:
    loop = load(
        write_loop(tmp_path, "name: once\ninitial: done\nstates:\n  done: {terminal: true}\n")
    )
    first = Runner(loop, RunOptions(base_dir=tmp_path)).run()
    # The lock is taken, then the run directory cannot be made: that run id exists.
    with pytest.raises(RunError, match="already exists"):
        Runner(loop, RunOptions(base_dir=tmp_path), run_id=first.run_id)
    again = Runner(loop, RunOptions(base_dir=tmp_path)).run()  # not "already running"
    assert again.outcome == "success"


def test_the_clock_and_the_action_layer_are_seams(tmp_path: Path) -> None:
    """A simulation swaps both: no process starts, time is what the clock says."""
    from little_loops.actions import ActionRequest, ActionResult
    from little_loops.run.action_layer import Processes
    from little_loops.run.runner import Clock

    ran: list[str] = []

    class Answers(Processes):
        def run(self, request: ActionRequest) -> ActionResult:
            assert request.kind == "shell", "no slash state here"
            command = request.text
            ran.append(command)
            return ActionResult(
                output=f"did {command}", stderr="", exit_code=0, duration_ms=5, timed_out=False,
                output_bytes=9,
            )  # fmt: skip

        def kill_orphans(self) -> None:
            pass

    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    clock = Clock(monotonic=lambda: now[0], wall=lambda: "2030-01-01T00:00:00.000Z", sleep=sleep)
    loop = load(
        write_loop(
            tmp_path,
            """
            name: simulated
            initial: a
            backoff: 7
            timeout: 20
            states:
              a: {action: "make one", capture: x, next: b}
              b: {action: "make ${captured.x.output}", next: a, on_failure: done}
              done: {terminal: true}
            """,
        )
    )
    result = Runner(loop, RunOptions(base_dir=tmp_path), clock=clock, action_layer=Answers()).run()
    assert ran == ["make one", "make 'did make one'", "make one"]
    assert slept == [7, 7, 6]  # the last backoff is cut to what the loop's timeout leaves
    assert (result.outcome, result.duration_ms) == ("timeout", 20_000)
    assert {e["ts"] for e in events_of(result)} == {"2030-01-01T00:00:00.000Z"}
