"""`ll step`: a few steps, then a recorded pause (exit 6) that `ll step RUN` or `ll resume`
continues."""

from __future__ import annotations

import json
from pathlib import Path

from project import Project

from little_loops.load.loader import load
from little_loops.run.runner import (
    Runner,
    RunOptions,
    RunResult,
)
from little_loops.sim.stepping import Rig

LOOP = """\
name: stepper
initial: check
max_iterations: 10
states:
  check:
    action: echo check >> {log}; test $(grep -c fix {log}) -ge 2
    route: {{success: done, failure: fix}}
  fix:
    action: echo fix >> {log}
    next: check
  done:
    action: echo done >> {log}
    terminal: true
"""


def setup(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "actions.log"
    loop = tmp_path / "loop.yaml"
    loop.write_text(LOOP.format(log=log), encoding="utf-8")
    return loop, log


def run_id(tmp_path: Path) -> str:
    (run,) = (tmp_path / ".loops" / "runs").iterdir()
    return run.name


def test_step_pauses_with_exit_6_and_resumes_without_running_a_step_twice(
    project: Project, tmp_path: Path
) -> None:
    loop, log = setup(tmp_path)
    first = project.ll("step", str(loop))
    assert first.returncode == 6, first.stdout + first.stderr
    assert log.read_text().split() == ["check"]
    assert "next: fix (step 2)  shell: echo fix >> " in first.stdout
    assert "paused; continue with 'll step " in first.stderr
    rid = run_id(tmp_path)
    state = json.loads((tmp_path / ".loops" / "runs" / rid / "state.json").read_text())
    assert state["exit_code"] == 6
    assert state["status"] == "interrupted"
    status = project.ll("status", rid)
    assert "status:  paused: paused by ll step after step 1" in status.stdout
    assert f"continue with: ll step {rid} (or ll resume {rid})" in status.stdout
    listed = project.ll("list")
    assert "paused" in listed.stdout
    second = project.ll("step", rid, "-n", "2")
    assert second.returncode == 6, second.stdout + second.stderr
    assert log.read_text().split() == ["check", "fix", "check"]
    assert "next: fix (step 4)" in second.stdout
    assert "failure -> (stops: failure) · success -> check" in second.stdout
    last = project.ll("resume", rid)
    assert last.returncode == 0, last.stdout + last.stderr
    assert log.read_text().split() == ["check", "fix", "check", "fix", "check", "done"]


def test_until_pauses_before_the_breakpoint_state(project: Project, tmp_path: Path) -> None:
    loop, log = setup(tmp_path)
    done = project.ll("step", str(loop), "--until", "done")
    assert done.returncode == 6, done.stdout + done.stderr
    assert log.read_text().split() == ["check", "fix", "check", "fix", "check"]
    assert "next: done (step 6)" in done.stdout
    assert "terminal: the run ends with outcome 'success'" in done.stdout
    again = project.ll("step", run_id(tmp_path), "-n", "5")
    assert again.returncode == 0  # the run ended first: its own exit code
    assert log.read_text().split()[-1] == "done"


def test_step_with_a_simulation_and_its_resume_stay_simulated(
    project: Project, tmp_path: Path
) -> None:
    loop, log = setup(tmp_path)
    script = tmp_path / "s.sim.yaml"
    script.write_text("states:\n  check: [failure, success]\n  fix: success\n")
    first = project.ll("step", str(loop), "--simulate", str(script), "-n", "2")
    assert first.returncode == 6, first.stdout + first.stderr
    rest = project.ll("resume", run_id(tmp_path))
    assert rest.returncode == 0, rest.stdout + rest.stderr
    assert "success at 'done' after 4 steps" in rest.stdout
    assert not log.exists()  # nothing ran, before or after the pause


def test_until_an_unknown_state_is_one_line(project: Project, tmp_path: Path) -> None:
    loop, log = setup(tmp_path)
    done = project.ll("step", str(loop), "--until", "dne")
    assert done.returncode == 2
    assert done.stderr == "ll: error: --until: the loop has no state 'dne' (did you mean 'done'?)\n"
    assert not log.exists()


# -- units: the pause rule and the "next" text, in process ---------------------------------


def _paused_run(tmp_path: Path, steps: int | None, until: frozenset[str]) -> tuple[Rig, RunResult]:
    tmp_path.mkdir(exist_ok=True)
    loop_path, _ = setup(tmp_path)
    script = tmp_path / "s.sim.yaml"
    script.write_text("states:\n  check: [failure, failure, success]\n  fix: success\n")
    loop = load(loop_path)
    rig = Rig.simulated(script, loop, replay=False)
    rig.steps, rig.until = steps, until
    options = RunOptions(base_dir=tmp_path, allow_concurrent=True)
    runner = Runner(loop, options, listeners=rig.listeners(), **rig.runner_kwargs())
    rig.attach(runner)
    return rig, runner.run()


def test_rig_pauses_after_n_steps_of_this_session(tmp_path: Path) -> None:
    rig, result = _paused_run(tmp_path, 3, frozenset())
    assert result.exit_code == 6
    assert result.path == ("check", "fix", "check")
    assert rig.paused == "paused by ll step after step 3"
    assert rig.next_text().startswith("next: fix (step 4)  shell: echo fix >> ")


def test_rig_pauses_before_a_breakpoint_and_lets_a_run_end(tmp_path: Path) -> None:
    rig, result = _paused_run(tmp_path, None, frozenset({"done"}))
    assert result.exit_code == 6
    assert result.final_state == "done"
    assert "terminal: the run ends with outcome 'success'" in rig.next_text()
    rig, result = _paused_run(tmp_path / "again", 50, frozenset())
    assert result.exit_code == 0  # ended before the pause: its own code
    assert rig.paused is None


def test_the_next_loop_state_shows_its_child_inputs_and_terminal_routes(
    project: Project, tmp_path: Path
) -> None:
    release = Path(__file__).resolve().parents[2] / "loops" / "release.yaml"
    paused = project.ll("step", str(release), "-n", "2")
    assert paused.returncode == 6, paused.stdout + paused.stderr
    assert "ll: paused at 'us' after 2 steps in " in paused.stdout + paused.stderr
    assert ": by ll step after step 2" in paused.stdout + paused.stderr
    lines = paused.stdout.splitlines()
    at = lines.index(
        "next: us (step 3)  loop: lib/deploy-region.yaml"
        "  (with region=us-east version=1.4.0 healthy=true)"
    )
    assert lines[at + 1].split(" · ") == [
        "      error -> abandon (loop.on_error)",
        "failed -> abandon (route:failure)",  # no route of its own: its outcome's
        "live -> announce",
        "rolled_back -> abandon",
        "timeout -> abandon (loop.on_error)",
    ]
