"""Durable runs with real processes and signals: resume, locks, run management, secrets, budget."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from little_loops.record.store import pid_alive

# kill -9 in the middle of a step, then resume: real processes waiting on each other, so one at
# a time on one xdist worker (see tests/run/test_signals.py), and out of the fast set.
pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.xdist_group("processes")]

LL = [sys.executable, "-m", "little_loops"]


def ll(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LL, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def write(tmp_path: Path, text: str, name: str = "loop.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def wait_for(predicate: object, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def only_run(tmp_path: Path) -> Path:
    runs = list((tmp_path / ".loops" / "runs").iterdir())
    assert len(runs) == 1
    return runs[0]


THREE_STEPS = """
name: three
initial: a
on_error: failed
states:
  a: {{action: "sleep {d} && echo a >> {log}", next: b}}
  b: {{action: "touch {started} && sleep {d} && echo b >> {log}", next: c}}
  c: {{action: "sleep {d} && echo c >> {log}", next: done}}
  done: {{action: "echo done >> {log}", terminal: true}}
  failed: {{terminal: true, outcome: failure}}
"""


def test_kill_9_mid_step_then_resume_runs_every_state_once(tmp_path: Path) -> None:
    log, started = tmp_path / "ran.log", tmp_path / "b-started"
    path = write(tmp_path, THREE_STEPS.format(d=1, log=log, started=started))
    proc = subprocess.Popen([*LL, "run", str(path), "--quiet"], cwd=tmp_path)
    wait_for(started.exists)
    os.kill(proc.pid, signal.SIGKILL)  # no chance to clean up anything
    proc.wait()
    time.sleep(1.5)  # long enough for an orphaned `b` to have written, had it survived
    assert log.read_text() == "a\n"
    listing = ll("list", cwd=tmp_path).stdout
    assert "crashed" in listing
    resumed = ll("resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert log.read_text() == "a\nb\nc\ndone\n"
    run_dir = only_run(tmp_path)
    state = json.loads((run_dir / "state.json").read_text())
    assert (state["status"], state["outcome"], state["step"]) == ("finished", "success", 4)
    starts = [
        json.loads(line)
        for line in (run_dir / "events.jsonl").read_text().splitlines()
        if '"loop_start"' in line
    ]
    assert [e["resumed"] for e in starts] == [False, True]


def test_sigint_persists_interrupted_and_resume_finishes(tmp_path: Path) -> None:
    log, started = tmp_path / "ran.log", tmp_path / "b-started"
    path = write(tmp_path, THREE_STEPS.format(d=1, log=log, started=started))
    proc = subprocess.Popen(
        [*LL, "run", str(path)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    wait_for(started.exists)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    run_id = only_run(tmp_path).name
    assert f"resume with: ll resume {run_id}" in err.decode()
    status = ll("status", cwd=tmp_path).stdout
    assert "status:  interrupted" in status
    assert "step:    1/50" in status
    resumed = ll("resume", run_id, "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0
    assert log.read_text() == "a\nb\nc\ndone\n"
    assert "already finished" in ll("resume", run_id, cwd=tmp_path).stderr


def test_resume_refuses_changed_loop_file_unless_forced(tmp_path: Path) -> None:
    log, started = tmp_path / "ran.log", tmp_path / "b-started"
    path = write(tmp_path, THREE_STEPS.format(d=1, log=log, started=started))
    proc = subprocess.Popen([*LL, "run", str(path), "--quiet"], cwd=tmp_path)
    wait_for(started.exists)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 143
    path.write_text(path.read_text().replace("echo c", "echo C"))
    refused = ll("resume", cwd=tmp_path)
    assert refused.returncode == 3
    assert "changed since run" in refused.stderr
    assert "1 line(s) added, 1 removed, first change at line 8" in refused.stderr
    forced = ll("resume", "--force", "--quiet", cwd=tmp_path)
    assert forced.returncode == 0
    assert log.read_text() == "a\nb\nC\ndone\n"


def test_corrupt_state_file_is_reported(tmp_path: Path) -> None:
    run_dir = tmp_path / ".loops" / "runs" / "20260101-000000-x-abcd"
    run_dir.mkdir(parents=True)
    (run_dir / "state.json").write_text('{"version": 1, "status": "runn')
    proc = ll("resume", "20260101-000000-x-abcd", cwd=tmp_path)
    assert proc.returncode == 3
    assert "corrupted or truncated state file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_lock_refuses_second_run_and_reclaims_dead_owner(tmp_path: Path) -> None:
    started = tmp_path / "started"
    path = write(
        tmp_path,
        f"""
        name: locked
        initial: a
        on_error: z
        context: {{nap: "30"}}
        states:
          a: {{action: "touch {started} && sleep ${{context.nap}}", next: z}}
          z: {{terminal: true}}
        """,
    )
    first = subprocess.Popen([*LL, "run", str(path), "--quiet"], cwd=tmp_path)
    wait_for(started.exists)
    second = ll("run", path, cwd=tmp_path)
    assert second.returncode == 3
    run_id = only_run(tmp_path).name
    assert f"already running as run {run_id} (pid {first.pid})" in second.stderr
    concurrent = ll("run", path, "--allow-concurrent", "--set", "nap=0", cwd=tmp_path)
    assert concurrent.returncode == 0
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    third = ll("run", path, "--json", "--set", "nap=0", cwd=tmp_path)
    assert third.returncode == 0
    events = [json.loads(line) for line in third.stdout.splitlines()]
    reclaimed = [e for e in events if e["event"] == "lock_reclaimed"]
    assert reclaimed
    assert reclaimed[0]["previous_pid"] == first.pid


def test_two_simultaneous_starts_one_wins(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        name: race
        initial: a
        on_error: z
        states:
          a: {action: "sleep 2", next: z}
          z: {terminal: true}
        """,
    )
    procs = [
        subprocess.Popen(
            [*LL, "run", str(path), "--quiet"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    codes = sorted(p.wait(timeout=30) for p in procs)
    for p in procs:
        assert p.stdout is not None
        assert p.stderr is not None
        p.stdout.close()
        p.stderr.close()
    assert codes == [0, 3]


def test_background_run_status_logs_and_stop(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        name: bg
        initial: a
        on_error: z
        states:
          a: {action: "echo working && sleep 30", next: z}
          z: {terminal: true}
        """,
    )
    started = ll("run", path, "--background", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    run_id = only_run(tmp_path).name
    assert f"started run {run_id} in the background" in started.stdout
    state_path = only_run(tmp_path) / "state.json"
    wait_for(lambda: "action_start" in (only_run(tmp_path) / "events.jsonl").read_text())
    pid = json.loads(state_path.read_text())["pid"]
    assert "status:  running" in ll("status", run_id, cwd=tmp_path).stdout
    follower = subprocess.Popen(
        [*LL, "logs", "-f", run_id], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    stopped = ll("stop", run_id, cwd=tmp_path)
    assert stopped.returncode == 0
    assert f"stopped run {run_id}" in stopped.stdout
    out, _ = follower.communicate(timeout=20)
    assert "ll: interrupted at 'a' after 0 steps" in out
    assert not pid_alive(pid)
    state = json.loads(state_path.read_text())
    assert (state["status"], state["exit_code"]) == ("interrupted", 143)
    history = ll("history", "bg", cwd=tmp_path).stdout
    assert run_id in history
    assert "interrupted" in history


def test_secrets_never_reach_files_under_dot_loops(tmp_path: Path) -> None:
    token = "tok-5e3c9a1f77b2"
    password = "hunter2-but-longer"
    path = write(
        tmp_path,
        """
        name: secretive
        initial: a
        on_error: z
        secrets: [password]
        context:
          password: placeholder
        states:
          a:
            action: >-
              echo "token=$DEPLOY_TOKEN pw=${context.password}" &&
              echo "$DEPLOY_TOKEN" >&2 && printf '%s' "$DEPLOY_TOKEN"
            capture: out
            next: b
          b:
            action: echo "${captured.out.output}"
            next: z
          z: {terminal: true}
        """,
    )
    proc = ll(
        "run", path, "--set", f"password={password}", "--verbose",
        cwd=tmp_path, env={"DEPLOY_TOKEN": token},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert token not in proc.stdout
    assert password not in proc.stdout
    assert "***" in proc.stdout
    files = [p for p in (tmp_path / ".loops").rglob("*") if p.is_file()]
    assert len(files) >= 4
    for file in files:
        data = file.read_bytes()
        assert token.encode() not in data, file
        assert password.encode() not in data, file


def test_cost_budget_stops_with_exit_5(tmp_path: Path) -> None:
    fake = Path(__file__).parents[1] / "fake_claude.py"
    path = write(
        tmp_path,
        """
        name: spendy
        initial: work
        max_cost_usd: 0.05
        on_error: z
        states:
          work:
            action: /fix something
            evaluate: {type: exit_code}
            on_success: $current
            on_failure: z
          z: {terminal: true}
        """,
    )
    proc = ll("run", path, "--claude", fake, cwd=tmp_path, env={"FAKE_CLAUDE_SCENARIO": "ok"})
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "ll: budget" in proc.stdout
    assert "max_cost_usd" in proc.stdout


@pytest.mark.parametrize("command", ["status", "logs", "stop", "resume"])
def test_unknown_run_is_one_clear_line(tmp_path: Path, command: str) -> None:
    (tmp_path / ".loops" / "runs").mkdir(parents=True)
    proc = ll(command, "no-such-run", cwd=tmp_path)
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_latest_run_is_the_last_started_whatever_its_name(tmp_path: Path) -> None:
    for name in ("oc", "num", "js"):
        path = write(
            tmp_path,
            f"""
            name: {name}
            initial: z
            states:
              z: {{terminal: true}}
            """,
            name=f"{name}.yaml",
        )
        assert ll("run", path, "--quiet", cwd=tmp_path).returncode == 0
    assert "loop:    js " in ll("status", cwd=tmp_path).stdout
    listed = [line.split()[1] for line in ll("list", cwd=tmp_path).stdout.splitlines()[1:]]
    assert listed == ["js", "num", "oc"]  # newest first, as `ll history`
