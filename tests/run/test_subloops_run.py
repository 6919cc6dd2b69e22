"""Sub-loops at run time, through the real `ll run` / `ll resume`: a `loop:` state runs its
child as a run of its own under `sub/<step>-<state>/`, routes on the child's terminal, inherits
deadlines and secrets, rolls costs up, and resumes as a tree after `kill -9`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from project import Project, held_after_a_childs_end

from little_loops.actions import ActionRequest, ActionResult
from little_loops.load.loader import load
from little_loops.record import outputs
from little_loops.record.events import CALLS, journaled_events, read_journal
from little_loops.record.store import RunDir
from little_loops.run import subloop
from little_loops.run.action_layer import Processes
from little_loops.run.runner import (
    Runner,
    RunOptions,
)

# `ll` runs in process (the `project` fixture) except where it is killed with SIGKILL or
# SIGINT: the run that is cut off keeps a process of its own; the resume runs in process.
LL = [sys.executable, "-m", "little_loops"]


def write(where: Path, name: str, text: str) -> Path:
    path = where / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def run_root(cwd: Path) -> Path:
    runs = [p for p in (cwd / ".loops" / "runs").iterdir() if (p / "state.json").is_file()]
    assert len(runs) == 1, runs
    return runs[0]


def events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    if not path.exists():
        # A `loop:` child that ended without a directory: its journal entry's events.
        return list(journaled_events(path) or [])
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def state(run_dir: Path) -> dict[str, Any]:
    if not (run_dir / "state.json").is_file():
        return RunDir(run_dir).read_state()  # its journal entry's (records inline)
    data: dict[str, Any] = json.loads((run_dir / "state.json").read_text(encoding="utf-8"))
    data.update(outputs.resolve(run_dir, data))
    return data


# A child with an input, an output and two terminals; the parent routes on the terminal name.
CHILD = """
name: deploy-region
initial: canary
context:
  region: nowhere
  mode: live
outputs:
  url: "https://${context.region}.example.com"
states:
  canary:
    action: "echo canary ${context.region} >> ${context.log} && test ${context.mode} = live"
    capture: canary
    route: {success: live, failure: rolled_back}
  live:
    terminal: true
  rolled_back:
    terminal: true
    outcome: failure
"""

PARENT = """
name: release
initial: deploy
context:
  log: {log}
  mode: live
states:
  deploy:
    loop: child.yaml
    with: {{region: eu-west, mode: "${{context.mode}}", log: "${{context.log}}"}}
    capture: deploy
    route: {{live: verify, rolled_back: report, success: verify, failure: report}}
  verify:
    action: "echo 'got ${{captured.deploy.output}}'"
    terminal: true
  report:
    action: "echo report"
    terminal: true
    outcome: failure
"""


def setup(tmp_path: Path, child: str = CHILD, parent: str = PARENT) -> Path:
    child_text = child.replace("  mode: live\n", "  mode: live\n  log: none\n", 1)
    write(tmp_path, "child.yaml", child_text)
    return write(tmp_path, "parent.yaml", parent.format(log=tmp_path / "side.log"))


def test_child_runs_as_a_run_of_its_own_and_routes_on_its_terminal_name(
    project: Project, tmp_path: Path
) -> None:
    parent = setup(tmp_path)
    done = project.ll("run", parent)
    assert done.returncode == 0, done.stdout + done.stderr
    root = run_root(tmp_path)
    sub = root / "sub" / "0001-deploy"
    # It ended without a directory: its state and events are one line of its caller's journal
    assert not (root / "sub").exists()
    assert list(read_journal(root, CALLS)) == ["sub/0001-deploy"]
    child_state = state(sub)
    assert (child_state["status"], child_state["outcome"]) == ("finished", "success")
    assert child_state["final_state"] == "live"
    assert child_state["outputs"] == {"url": "https://eu-west.example.com"}
    # the parent's log: child_start / child_complete, the verdict is the terminal's name
    names = [e["event"] for e in events(root)]
    assert names[:4] == ["loop_start", "state_enter", "child_start", "child_complete"]
    complete = next(e for e in events(root) if e["event"] == "child_complete")
    assert (complete["verdict"], complete["final_state"], complete["outcome"]) == (
        "live",
        "live",
        "success",
    )
    assert complete["outputs"] == {"url": "https://eu-west.example.com"}
    route = next(e for e in events(root) if e["event"] == "route")
    assert (route["verdict"], route["to"], route["via"]) == ("live", "verify", "route")
    # the child's own events stay in its own log, without a path
    assert next(e["event"] for e in events(sub)) == "loop_start"
    assert all("path" not in e for e in events(sub))
    # the parent captured the child's outputs (as JSON in `output`)
    assert 'got {"url": "https://eu-west.example.com"}' in done.stdout
    # one lock for the tree: the child took none
    assert len(list((tmp_path / ".loops" / "locks").iterdir())) == 1
    # the terminal shows the child inline, indented under its caller
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if "deploy  loop child.yaml" in line)
    assert "with region=eu-west" in lines[at]
    assert lines[at + 1].startswith("        1/")
    assert "canary" in lines[at + 1]
    assert any(
        line.strip() == "live (success) 2 steps" or "live (success) 2 steps" in line
        for line in lines[at + 1 : at + 5]
    )
    assert "path: deploy -> verify" in done.stdout


def test_a_terminal_without_its_own_route_falls_back_to_its_outcome(
    project: Project, tmp_path: Path
) -> None:
    parent_text = PARENT.replace(
        "route: {{live: verify, rolled_back: report, success: verify, failure: report}}",
        "route: {{success: verify, failure: report}}",
    )
    parent = setup(tmp_path, parent=parent_text)
    done = project.ll("run", parent, "--set", "mode=dry")
    assert done.returncode == 1, done.stdout + done.stderr  # report is a failure terminal
    route = next(e for e in events(run_root(tmp_path)) if e["event"] == "route")
    assert (route["verdict"], route["to"], route["via"]) == (
        "rolled_back",
        "report",
        "route:failure",
    )


def test_child_error_timeout_and_cap_reach_the_parent_as_error_or_timeout(
    project: Project, tmp_path: Path
) -> None:
    child = """
    name: flaky
    initial: work
    max_iterations: 2
    context: {how: error}
    states:
      work:
        action: >-
          if [ ${context.how} = slow ]; then sleep 20; fi;
          echo again
        evaluate: {type: output_contains, pattern: "never-there"}
        route: {success: done, failure: work}
      done: {terminal: true}
    """
    write(tmp_path, "child.yaml", child)
    parent = write(
        tmp_path,
        "parent.yaml",
        """
        name: caller
        initial: call
        context: {how: error}
        states:
          call:
            loop: child.yaml
            with: {how: "${context.how}"}
            timeout: 1
            route: {done: ok, success: ok}
            on_error: handled
            on_timeout: slow
          ok: {terminal: true}
          handled: {terminal: true, action: "echo handled-error"}
          slow: {terminal: true, action: "echo handled-timeout"}
        """,
    )
    # max_iterations in the child: error
    capped = project.ll("run", parent, "--set", "how=loop")
    assert capped.returncode == 0, capped.stdout + capped.stderr
    assert "handled-error" in capped.stdout
    # the calling state's timeout: timeout
    started = time.monotonic()
    slow = project.ll("run", parent, "--set", "how=slow")
    assert slow.returncode == 0, slow.stdout + slow.stderr
    assert "handled-timeout" in slow.stdout
    assert time.monotonic() - started < 15


def test_bad_with_values_are_the_calling_steps_error_with_a_reason(
    project: Project, tmp_path: Path
) -> None:
    write(
        tmp_path,
        "child.yaml",
        """
        name: typed
        initial: go
        context:
          region: nowhere
          count: {type: integer, default: 1}
          strategy: {type: string, enum: [canary, blue-green], default: canary}
        states:
          go: {action: "echo ${context.region} ${context.count} ${context.strategy}", next: done}
          done: {terminal: true}
        """,
    )
    parent = write(
        tmp_path,
        "parent.yaml",
        """
        name: caller
        initial: call
        context: {count: "1", strategy: canary}
        states:
          call:
            loop: child.yaml
            with: {region: eu, count: "${context.count}", strategy: "${context.strategy}"}
            route: {done: ok, success: ok}
          ok: {terminal: true}
        """,
    )
    good = project.ll("run", parent)
    assert good.returncode == 0, good.stdout + good.stderr
    bad_int = project.ll("run", parent, "--set", "count=many")
    assert bad_int.returncode == 3, bad_int.stdout + bad_int.stderr
    assert "with: count = 'many' is not a integer" in bad_int.stdout + bad_int.stderr
    bad_enum = project.ll("run", parent, "--set", "strategy=yolo")
    assert bad_enum.returncode == 3
    assert "is not one of canary, blue-green" in bad_enum.stdout + bad_enum.stderr


def test_secrets_of_the_parent_are_redacted_in_the_child(project: Project, tmp_path: Path) -> None:
    write(
        tmp_path,
        "child.yaml",
        """
        name: child
        initial: use
        context: {token: none}
        states:
          use: {action: "echo using ${context.token}", next: done}
          done: {terminal: true}
        """,
    )
    parent = write(
        tmp_path,
        "parent.yaml",
        """
        name: parent
        initial: call
        secrets: [token]
        context: {token: hunter2-very-secret}
        states:
          call:
            loop: child.yaml
            with: {token: "${context.token}"}
            route: {done: ok, success: ok}
          ok: {terminal: true}
        """,
    )
    done = project.ll("run", parent, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hunter2-very-secret" not in done.stdout
    for path in (tmp_path / ".loops").rglob("*"):
        if path.is_file():
            assert b"hunter2-very-secret" not in path.read_bytes(), path
    # the --json stream carries the child's events with their path
    child_events = [json.loads(x) for x in done.stdout.splitlines() if '"path"' in x]
    assert child_events
    assert all(e["path"] == ["call"] for e in child_events)


def test_the_parents_deadline_bounds_the_child(project: Project, tmp_path: Path) -> None:
    write(
        tmp_path,
        "child.yaml",
        """
        name: child
        initial: wait
        states:
          wait: {action: "sleep 30", next: done}
          done: {terminal: true}
        """,
    )
    parent = write(
        tmp_path,
        "parent.yaml",
        """
        name: parent
        initial: call
        timeout: 1
        states:
          call:
            loop: child.yaml
            route: {done: ok, success: ok}
            on_timeout: ok
          ok: {terminal: true}
        """,
    )
    started = time.monotonic()
    done = project.ll("run", parent)
    assert done.returncode == 124, done.stdout + done.stderr  # the parent's own deadline ended it
    assert time.monotonic() - started < 15


def test_nesting_deeper_than_eight_runs_is_an_error_at_run_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ll validate` refuses such a chain; the runner holds the limit too (a child file may
    change after the run started): here a limit of 3 runs, on a chain of 4."""
    for i in range(3):
        write(
            tmp_path,
            f"l{i}.yaml",
            f"""
            name: l{i}
            initial: call
            states:
              call:
                loop: l{i + 1}.yaml
                route: {{done: done, success: done}}
              done: {{terminal: true}}
            """,
        )
    write(tmp_path, "l3.yaml", "name: l3\ninitial: done\nstates:\n  done: {terminal: true}\n")
    loop = load(tmp_path / "l0.yaml")
    assert Runner(loop, RunOptions(base_dir=tmp_path)).run().outcome == "success"
    monkeypatch.setattr(subloop, "MAX_DEPTH", 3)
    result = Runner(loop, RunOptions(base_dir=tmp_path)).run()
    assert (result.outcome, result.exit_code) == ("error", 3)
    assert result.error is not None
    assert "would start run number 4 in one tree, more than 3" in result.error


def test_junit_and_github_summary_show_child_steps_under_their_caller(
    project: Project, tmp_path: Path
) -> None:
    parent = setup(tmp_path)
    summary = tmp_path / "summary.md"
    done = project.ll(
        "run",
        parent,
        "--junit-xml",
        tmp_path / "junit.xml",
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    xml = (tmp_path / "junit.xml").read_text()
    assert 'name="deploy/canary (visit 1)" classname="release.deploy"' in xml
    assert (
        xml.index('name="deploy (visit 1)"')
        < xml.index("deploy/canary")
        < xml.index('name="verify')
    )
    text = summary.read_text()
    assert "| 1.1 | `deploy/canary` | success |" in text


# -- costs (the action layer seam: a child's runner gets the parent's) ----------------------


class PaidShell(Processes):
    """Every action costs $0.25 and succeeds."""

    def run(self, request: ActionRequest) -> ActionResult:
        return ActionResult(
            output="ok\n",
            stderr="",
            exit_code=0,
            duration_ms=1,
            timed_out=False,
            output_bytes=3,
            cost_usd=0.25,
        )

    def kill_orphans(self) -> None:
        pass


def test_costs_roll_up_to_the_root_and_its_budget(tmp_path: Path) -> None:
    write(
        tmp_path,
        "child.yaml",
        """
        name: child
        initial: a
        states:
          a: {action: "pay", next: b}
          b: {action: "pay", next: done}
          done: {terminal: true}
        """,
    )
    parent = write(
        tmp_path,
        "parent.yaml",
        """
        name: parent
        initial: call
        max_cost_usd: 0.4
        states:
          call:
            loop: child.yaml
            route: {done: again, success: again}
          again:
            loop: child.yaml
            route: {done: ok, success: ok}
          ok: {terminal: true}
        """,
    )
    result = Runner(load(parent), RunOptions(base_dir=tmp_path), action_layer=PaidShell()).run()
    assert (result.outcome, result.final_state, result.steps) == ("budget", "call", 1)
    root = result.run_dir
    assert state(root)["cost_usd"] == 0.5
    assert state(root / "sub" / "0001-call")["cost_usd"] == 0.5


def test_outputs_are_read_through_captured_outputs(project: Project, tmp_path: Path) -> None:
    parent = setup(
        tmp_path,
        parent=PARENT.replace(
            "echo 'got ${{captured.deploy.output}}'",
            "echo url=${{captured.deploy.outputs.url}} at=${{captured.deploy.final_state}} "
            "outcome=${{captured.deploy.outcome}} code=${{captured.deploy.exit_code}}",
        ),
    )
    done = project.ll("run", parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "url=https://eu-west.example.com at=live outcome=success code=0" in done.stdout


# -- kill -9 inside a child, then resume the tree ------------------------------------------

KILL_CHILD = """
name: worker
initial: a
context: {log: none, gate: none}
outputs:
  last: "${captured.b.output}"
  pad: "PADDING"
states:
  a: {action: "echo a >> ${context.log}", next: b}
  b:
    action: >-
      if [ -e ${context.gate} ]; then echo b >> ${context.log}; echo b-out;
      else touch ${context.gate}.waiting; sleep 30; exit 1; fi
    capture: b
    next: c
  c: {action: "echo c >> ${context.log}", next: done}
  done: {terminal: true}
"""

KILL_PARENT = """
name: boss
initial: first
context: {{log: {log}, gate: {gate}}}
states:
  first: {{action: "echo first >> ${{context.log}}", next: work}}
  work:
    loop: child.yaml
    with: {{log: "${{context.log}}", gate: "${{context.gate}}"}}
    capture: work
    route: {{done: last, success: last}}
  last: {{action: "echo last-${{captured.work.output}} >> ${{context.log}}", terminal: true}}
"""


def _kill_setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    log, gate = tmp_path / "side.log", tmp_path / "gate"
    write(tmp_path, "child.yaml", KILL_CHILD.replace("PADDING", "x" * 6000))
    parent = write(tmp_path, "parent.yaml", KILL_PARENT.format(log=log, gate=gate))
    return parent, log, gate


def _wait(predicate: Any, proc: subprocess.Popen[Any], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, "ll ended before the kill point"
        assert time.monotonic() < deadline, "timed out waiting for the kill point"
        time.sleep(0.01)


def _resume_and_check(project: Project, tmp_path: Path, log: Path, gate: Path) -> Path:
    gate.touch()  # the step runs through this time
    resumed = project.ll("resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    lines = log.read_text().splitlines()
    assert lines[:4] == ["first", "a", "b", "c"]
    assert len(lines) == 5
    assert lines[4].startswith('last-{"last": "b-out", "pad": "xxx')
    root = run_root(tmp_path)
    assert state(root)["status"] == "finished"
    child = state(root / "sub" / "0002-work")
    assert (child["status"], child["outcome"], child["step"]) == ("finished", "success", 4)
    return root


def test_kill_9_mid_action_inside_a_child_then_resume(project: Project, tmp_path: Path) -> None:
    parent, log, gate = _kill_setup(tmp_path)
    proc = subprocess.Popen([*LL, "run", str(parent), "--quiet"], cwd=tmp_path)
    _wait(Path(f"{gate}.waiting").exists, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert log.read_text().splitlines() == ["first", "a"]
    root = _resume_and_check(project, tmp_path, log, gate)
    starts = [e for e in events(root) if e["event"] == "child_start"]
    assert [e["resumed"] for e in starts] == [False, True]
    child_starts = [
        e["resumed"] for e in events(root / "sub" / "0002-work") if e["event"] == "loop_start"
    ]
    assert child_starts == [False, True]


def test_a_changed_child_file_stops_the_resume_unless_forced(
    project: Project, tmp_path: Path
) -> None:
    parent, log, gate = _kill_setup(tmp_path)
    proc = subprocess.Popen([*LL, "run", str(parent), "--quiet"], cwd=tmp_path)
    _wait(Path(f"{gate}.waiting").exists, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    child = tmp_path / "child.yaml"
    child.write_text(child.read_text().replace("echo c >>", "echo C >>"))
    gate.touch()
    refused = project.ll("resume")
    assert refused.returncode == 3, refused.stdout + refused.stderr
    message = refused.stderr.strip()
    assert message.startswith(f"ll: error: {child} changed since its sub-loop run (sub/0002-work)")
    assert "1 line(s) added, 1 removed, first change at line" in message
    assert message.endswith("resume anyway with --force, or start a new run")
    assert log.read_text().splitlines() == ["first", "a"]  # nothing ran
    forced = project.ll("resume", "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert log.read_text().splitlines()[:4] == ["first", "a", "b", "C"]


def test_kill_9_between_steps_inside_a_child_then_resume(project: Project, tmp_path: Path) -> None:
    parent, log, gate = _kill_setup(tmp_path)
    proc = subprocess.Popen([*LL, "run", str(parent), "--quiet"], cwd=tmp_path)
    sub = None

    def routed_a() -> bool:
        nonlocal sub
        runs = tmp_path / ".loops" / "runs"
        found = list(runs.glob("*/sub/0002-work")) if runs.is_dir() else []
        if not found:
            return False
        sub = found[0]
        # The route is written first, then the state that names it (one persist point): `a`
        # is recorded once both are there.
        routed = any(e["event"] == "route" and e["state"] == "a" for e in events(sub))
        return routed and (sub / "state.json").is_file() and state(sub).get("step") == 1

    _wait(routed_a, proc)
    os.kill(proc.pid, signal.SIGKILL)  # a is recorded; b has not done anything yet
    proc.wait()
    # A `b` caught between fork and exec by the kill escapes the guard (its environment does
    # not carry the owner mark yet); let it find the gate shut before the resume opens it.
    time.sleep(0.5)
    assert sub is not None
    assert state(sub)["step"] == 1
    _resume_and_check(project, tmp_path, log, gate)


def test_kill_9_between_the_childs_end_and_the_parents_record(
    project: Project, tmp_path: Path
) -> None:
    """The child's end is written, the parent's step is not: the child is read back, not run."""
    parent, log, gate = _kill_setup(tmp_path)
    gate.touch()
    # Read the event stream up to the child's loop_complete, then stop reading: `ll` blocks
    # writing the parent's child_complete, which the child's padded outputs make larger
    # than the pipe.
    proc, read_end = held_after_a_childs_end([*LL, "run", str(parent), "--json"], tmp_path)
    root = run_root(tmp_path)
    sub = root / "sub" / "0002-work"
    _wait(lambda: state(sub)["status"] == "finished", proc)
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    os.close(read_end)
    assert state(root)["step"] == 1  # the parent has not recorded `work`
    assert log.read_text().splitlines() == ["first", "a", "b", "c"]
    _resume_and_check(project, tmp_path, log, gate)
    starts = [e for e in events(root) if e["event"] == "child_start"]
    assert len(starts) == 1  # the finished child was read back, not started again


# -- a randomized crash test over a two-level tree -----------------------------------------

TREE_CHILD = (
    "name: leaf\ninitial: c0\ncontext: {log: none}\nstates:\n"
    + "".join(
        f"  c{i}: {{action: 'sleep 0.02; echo c{i} >> ${{context.log}}', next: "
        f"{f'c{i + 1}' if i < 3 else 'done'}}}\n"
        for i in range(4)
    )
    + "  done: {terminal: true}\n"
)

TREE_PARENT = """
name: tree
initial: p0
context: {{log: {log}}}
states:
  p0: {{action: 'sleep 0.02; echo p0 >> ${{context.log}}', next: call}}
  call:
    loop: leaf.yaml
    with: {{log: "${{context.log}}"}}
    route: {{done: p1, success: p1}}
  p1: {{action: 'sleep 0.02; echo p1 >> ${{context.log}}', next: again}}
  again:
    loop: leaf.yaml
    with: {{log: "${{context.log}}"}}
    route: {{done: end, success: end}}
  end: {{action: 'echo end >> ${{context.log}}', terminal: true}}
"""
TREE_EXPECTED = ["p0", "c0", "c1", "c2", "c3", "p1", "c0", "c1", "c2", "c3", "end"]
TREE_RUNS = int(os.environ.get("LL_TREE_KILL_RUNS") or 3)


@pytest.mark.slow  # random kills
def test_random_kills_over_a_two_level_tree_resume_to_the_same_end(
    project: Project, tmp_path: Path
) -> None:
    import random

    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    for n in range(TREE_RUNS):
        where = tmp_path / f"run{n}"
        where.mkdir()
        log = where / "side.log"
        write(where, "leaf.yaml", TREE_CHILD)
        parent = write(where, "tree.yaml", TREE_PARENT.format(log=log))
        kills = 0
        args: list[str] = ["run", str(parent), "--quiet"]
        for _ in range(6):
            proc = subprocess.Popen([*LL, *args], cwd=where)
            try:
                proc.wait(timeout=rng.uniform(0.3, 1.2))
            except subprocess.TimeoutExpired:
                proc.send_signal(rng.choice((signal.SIGKILL, signal.SIGKILL, signal.SIGINT)))
                proc.wait()
                kills += 1
                time.sleep(0.2)  # an action caught between fork and exec ends before we go on
            runs = where / ".loops" / "runs"
            if not runs.is_dir() or not any(runs.glob("*/state.json")):
                continue  # killed before the run began: start it again
            if state(run_root(where))["status"] == "finished":
                break
            args = ["resume"]
        else:  # `run` again when a busy machine never let the run begin in the time given
            done = project.ll(*args, cwd=where)
            assert done.returncode == 0, f"seed {seed}: {done.stdout}{done.stderr}"
        root = run_root(where)
        end = state(root)
        assert (end["status"], end["outcome"]) == ("finished", "success"), f"seed {seed}"
        lines = log.read_text().splitlines()
        # A step cut off mid-action runs again (its line twice, adjacent); none is lost.
        squeezed = [x for i, x in enumerate(lines) if i == 0 or lines[i - 1] != x]
        assert squeezed == TREE_EXPECTED, f"seed {seed}, {kills} kills: {lines}"
        assert len(lines) <= len(TREE_EXPECTED) + kills, f"seed {seed}: {lines}"
        for sub in ("0002-call", "0004-again"):
            child = state(root / "sub" / sub)
            assert (child["status"], child["step"]) == ("finished", 5), f"seed {seed}"


def test_a_childs_events_do_not_end_its_callers_trace(tmp_path: Path) -> None:
    """The trace listener sees a child's events (with `path`) but keeps one run span: the
    child's time is inside its calling step's span."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from little_loops.report.otel import TraceListener

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = TraceListener(provider)
    parent = setup(tmp_path)
    result = Runner(load(parent), RunOptions(base_dir=tmp_path), listeners=[tracer]).run()
    tracer.close()
    assert result.outcome == "success"
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert names == ["ll run release", "step deploy", "step verify"]


def test_how_a_childs_end_becomes_its_callers_verdict(tmp_path: Path) -> None:
    child = load(
        write(
            tmp_path,
            "c.yaml",
            """
            name: c
            initial: work
            on_max_iterations: capped
            states:
              work: {action: "true", route: {success: live, failure: work}}
              live: {terminal: true, action: "true"}
              rolled_back: {terminal: true, outcome: failure}
              capped: {terminal: true, outcome: failure}
            """,
        )
    )

    def verdict(final_state: str, outcome: str) -> str:
        via = subloop.ended_at_terminal(child, final_state, outcome)
        end = subloop.ChildEnd("id", final_state, outcome, 0, 1, 1, 0.0, {}, via_terminal=via)
        return end.verdict

    assert verdict("live", "success") == "live"
    assert verdict("rolled_back", "failure") == "rolled_back"
    assert verdict("capped", "max_iterations") == "capped"  # its on_max_iterations terminal
    assert verdict("live", "failure") == "failure"  # the terminal's action failed
    assert verdict("work", "failure") == "failure"  # stopped at an unrouted failure
    assert verdict("work", "error") == "error"
    assert verdict("work", "max_iterations") == "error"
    assert verdict("work", "budget") == "error"
    assert verdict("work", "timeout") == "timeout"


def test_retry_on_a_loop_state_runs_a_fresh_child_per_attempt(
    project: Project, tmp_path: Path
) -> None:
    write(
        tmp_path,
        "child.yaml",
        """
        name: flaky
        initial: work
        states:
          work: {action: "test -e marker || { touch marker; exit 7; }", next: done}
          done: {terminal: true}
        """,
    )
    parent = write(
        tmp_path,
        "parent.yaml",
        """
        name: parent
        initial: call
        states:
          call:
            loop: child.yaml
            retry: {max_attempts: 2, on: [error], interval: 0}
            route: {done: ok, success: ok}
          ok: {terminal: true}
        """,
    )
    done = project.ll("run", parent)
    assert done.returncode == 0, done.stdout + done.stderr
    root = run_root(tmp_path)
    assert state(root / "sub" / "0001-call")["outcome"] == "error"
    assert state(root / "sub" / "0001-call.2")["outcome"] == "success"
    names = [(e["event"], e.get("attempt")) for e in events(root)]
    assert ("retry", 2) in names
    assert [e["verdict"] for e in events(root) if e["event"] == "child_complete"] == [
        "error",
        "done",
    ]


def test_ll_graph_draws_a_child_as_a_subgraph(project: Project, tmp_path: Path) -> None:
    parent = setup(tmp_path)
    drawn = project.ll("graph", parent)
    assert drawn.returncode == 0, drawn.stderr
    text = drawn.stdout
    assert 'subgraph s0_child ["deploy: loop child.yaml"]' in text
    assert 's0_child_s0["canary"]' in text
    assert 's0_child_s0 -->|"success"| s0_child_s1' in text
    assert "    s0 -.- s0_child" in text


def test_ll_graph_dot_draws_a_child_as_a_cluster(project: Project, tmp_path: Path) -> None:
    parent = setup(tmp_path)
    drawn = project.ll("graph", parent, "--format", "dot")
    assert drawn.returncode == 0, drawn.stderr
    text = drawn.stdout
    assert "    subgraph cluster_s0_child {" in text
    assert '        label="deploy: loop child.yaml";' in text
    assert '        s0_child_s0 [label="canary", ' in text
    assert '        s0_child_s0 -> s0_child_s1 [label="success"];' in text
    assert '    s0 -> s0_child_ll_start [style=dotted, arrowhead=none, color="#868e96"];' in text
    assert text.count("{") == text.count("}")
    assert text.rstrip().endswith("}")
    if shutil.which("dot"):
        proc = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_the_terminal_follows_a_childs_running_step(tmp_path: Path) -> None:
    """The caller's spinner words and CI heartbeat name the child's step while it runs."""
    import io

    from little_loops.record.events import parse
    from little_loops.report.render import PlainRenderer

    out = io.StringIO()
    view = PlainRenderer(out)
    base = {"ts": "2026-11-23T00:00:00.000Z", "run_id": "r"}
    view(parse({**base, "event": "loop_start", "loop": "p", "max_iterations": 5}))
    view(parse({**base, "event": "state_enter", "step": 1, "state": "deploy"}))
    view(parse({**base, "event": "child_start", "step": 1, "state": "deploy", "file": "c.yaml"}))
    child = {**base, "path": ["deploy"]}
    view(parse({**child, "event": "loop_start", "loop": "c", "max_iterations": 3}))
    view(parse({**child, "event": "state_enter", "step": 1, "state": "canary"}))
    view(parse({**child, "event": "action_start", "step": 1, "state": "canary", "action": "x"}))
    assert view.running == "deploy/canary"
    view(parse({**child, "event": "action_complete", "step": 1, "state": "canary", "exit_code": 0}))
    view(parse({**child, "event": "evaluate", "step": 1, "state": "canary", "verdict": "success"}))
    assert view.running is None
    assert "      1/3  canary  x" in out.getvalue()


def test_a_callers_budget_stops_the_child_at_once(tmp_path: Path) -> None:
    """After every step of a child, its callers' budgets are checked too: the child stops
    when the caller's `max_cost_usd` is passed, and the caller ends with `budget` (exit 5)."""
    write(
        tmp_path,
        "child.yaml",
        "name: child\ninitial: s0\nstates:\n"
        + "".join(f"  s{i}: {{action: pay, next: s{i + 1}}}\n" for i in range(4))
        + "  s4: {terminal: true}\n",
    )
    parent = write(
        tmp_path,
        "parent.yaml",
        """
        name: parent
        initial: call
        max_cost_usd: 0.4
        states:
          call:
            loop: child.yaml
            route: {s4: ok, success: ok}
          ok: {terminal: true}
        """,
    )
    result = Runner(load(parent), RunOptions(base_dir=tmp_path), action_layer=PaidShell()).run()
    assert (result.outcome, result.exit_code) == ("budget", 5)
    child = state(result.run_dir / "sub" / "0001-call")
    assert (child["outcome"], child["step"], child["cost_usd"]) == ("budget", 2, 0.5)
    assert state(result.run_dir)["cost_usd"] == 0.5


# -- a call's own work does not grow with the calls before it -----------------------------------

CALLER = """
name: caller
initial: call
max_iterations: CALLS
on_max_iterations: done
states:
  call:
    loop: leaf.yaml
    with: {value: "${loop.run_id}"}
    capture: call
    route: {done: $current}
  done: {terminal: true}
"""

LEAF = """
name: leaf
initial: work
context: {value: ~}
outputs: {seen: "${context.value}"}
states:
  work: {action: "true", next: done}
  done: {terminal: true}
"""


def test_a_child_called_again_resolves_imports_and_asks_nothing_again(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a call looked up is kept for the tree: the child's path and its run directory's
    are resolved once, the SHA-256 implementation is found once (a failed `import _sha2`
    searched sys.path at every call on Python 3.11) and whether the action layer simulates
    is asked once a class (`simulates`: it looks up the protocol's methods).
    Counted through `ll run`, 2 calls against 6: the counts are the same."""
    import builtins

    from little_loops.run import action_layer

    counts = {"resolve": 0, "import": 0, "protocol": 0}
    resolve, importer = Path.resolve, builtins.__import__

    class CountedAnswers(dict[type, bool]):
        """`simulates`' answers: each one stored is one class examined."""

        def __setitem__(self, kind: type, answer: bool) -> None:
            counts["protocol"] += 1
            super().__setitem__(kind, answer)

    def counted_resolve(self: Path, strict: bool = False) -> Path:
        counts["resolve"] += 1
        return resolve(self, strict)

    def counted_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name in ("_sha2", "_sha256", "hashlib"):
            counts["import"] += 1
        return importer(name, *args, **kwargs)

    project.write("leaf.yaml", LEAF)
    seen = []
    for calls in (1, 2, 6):  # the first: what a process finds once
        loop = project.write(f"caller{calls}.yaml", CALLER.replace("CALLS", str(calls)))
        counts.update(dict.fromkeys(counts, 0))
        with monkeypatch.context() as patch:
            patch.setattr(Path, "resolve", counted_resolve)
            patch.setattr(builtins, "__import__", counted_import)
            patch.setattr(action_layer, "_SIMULATES", CountedAnswers())
            done = project.ll("run", loop, "--quiet")
        assert done.returncode == 4, done.stdout + done.stderr  # max_iterations, as meant
        assert f"after {calls + 1} steps" in done.stdout
        seen.append(dict(counts))
    assert seen[1] == seen[2], seen


SAYER = """\
name: leaf
initial: say
context: {word: x}
states:
  say: {action: 'echo ${context.word}', next: done}
  done: {terminal: true}
"""

SAYER_CALLS = """\
name: calls
initial: each
states:
  each:
    for_each: [a, b, c, d, e]
    loop: leaf.yaml
    with: {word: "${item.value}"}
    on_success: again
    on_failure: again
  again: {loop: leaf.yaml, next: done}
  done: {terminal: true}
"""


def test_a_child_called_again_and_again_keeps_one_copy_of_its_file_in_the_tree(
    project: Project,
) -> None:
    """Six runs of one child file: one copy under the root's `loops/`, named by the digest of
    the source each child's state.json records, and no `loop.yaml` in any child's folder."""
    leaf = project.write("leaf.yaml", SAYER)
    project.write("calls.yaml", SAYER_CALLS)
    done = project.ll("run", "calls.yaml", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    root = run_root(project.path)
    [copy] = (root / "loops").iterdir()
    assert copy.read_text(encoding="utf-8") == leaf.read_text(encoding="utf-8")
    children = [p.parent for p in (root / "sub").rglob("state.json")]
    assert len(children) == 5  # the branches; the sixth call ended in its caller's journal
    assert list(read_journal(root, CALLS)) == ["sub/0002-again"]
    children.append(root / "sub" / "0002-again")
    for child in children:
        assert state(child)["loop_sha256"] + ".yaml" == copy.name
        assert not (child / "loop.yaml").exists()


def test_child_runs_that_judged_nothing_leave_the_orphan_sweep_to_each_action(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each action sweeps its escaped descendants when it ends (actions/process.py); a child
    run's end sweeps again only if a judge ran in it, the root's end once whatever ran."""
    from little_loops import actions

    swept: list[int] = []
    real = actions.kill_orphans

    def counted() -> None:
        swept.append(1)
        real()

    monkeypatch.setattr(actions, "kill_orphans", counted)
    project.write("leaf.yaml", SAYER)
    project.write("calls.yaml", SAYER_CALLS)
    done = project.ll("run", "calls.yaml", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(swept) == 1  # six child runs, one root


MIDDLE = """\
name: middle
initial: call
context: {word: x}
states:
  call: {loop: leaf.yaml, with: {word: "${context.word}"}, next: done}
  done: {terminal: true}
"""

FAN_OF_MIDDLES = """\
name: fan
initial: each
states:
  each:
    for_each: [a, b, c, d]
    loop: middle.yaml
    with: {word: "${item.value}"}
    max_concurrency: 4
    on_success: done
    on_failure: done
  done: {terminal: true}
"""


def test_branches_calling_one_child_at_once_make_its_tree_copy_one_at_a_time(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four branches, in threads, each run `middle.yaml` at the same moment: the tree's copy of
    it is written by one at a time (a temp file's name holds only the process id, so two
    writers at once took each other's temp file, and a branch stopped with exit 3). The
    `leaf.yaml` each calls ends in memory (its branch's journal): it is never resumed, so
    it needs no copy."""
    from little_loops.record import store

    real = store._write_all

    def slow(fd: int, data: bytes, path: str | None = None) -> None:
        if path is not None and f"{os.sep}loops{os.sep}" in path and path.endswith(".yaml"):
            time.sleep(0.3)  # the writers overlap
        real(fd, data, path)

    monkeypatch.setattr(store, "_write_all", slow)
    project.write("leaf.yaml", SAYER)
    project.write("middle.yaml", MIDDLE)
    project.write("fan.yaml", FAN_OF_MIDDLES)
    done = project.ll("run", "fan.yaml", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    root = run_root(project.path)
    assert len(list((root / "loops").iterdir())) == 1  # middle.yaml, once
