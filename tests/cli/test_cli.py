"""The real `ll`: every exit code of SPEC section 8, output modes and signals. It runs in process
(the `project` fixture) except where a signal or a terminal is under test."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from llm_server import LlmServer, message
from llm_server import llm_server_fixture as llm_server_fixture  # the llm_server fixture
from project import Project

from little_loops.record.store import pid_alive

LL = [sys.executable, "-m", "little_loops"]


def loop_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "loop.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


SIMPLE = """
name: simple
initial: check
on_error: bad
context:
  code: "0"
states:
  check:
    action: exit ${context.code}
    on_success: good
    on_failure: bad
  good: {terminal: true}
  bad: {terminal: true, outcome: failure}
"""


def test_exit_0_success(project: Project, tmp_path: Path) -> None:
    proc = project.ll("run", loop_file(tmp_path, SIMPLE))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("ll: success at 'good' after 2 steps")
    assert "\x1b[" not in proc.stdout


def test_exit_1_failure_terminal(project: Project, tmp_path: Path) -> None:
    proc = project.ll("run", loop_file(tmp_path, SIMPLE), "--set", "code=1")
    assert proc.returncode == 1
    assert "ll: failure at 'bad'" in proc.stdout


def test_exit_2_invalid_file_and_usage(project: Project, tmp_path: Path) -> None:
    bad = loop_file(tmp_path, "name: x\ninitial: nowhere\nstates:\n  a: {terminal: true}\n")
    proc = project.ll("run", bad)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{bad}:2:" in proc.stderr
    proc = project.ll("run", loop_file(tmp_path, SIMPLE), "--set", "nokey")
    assert proc.returncode == 2
    assert "KEY=VALUE" in proc.stderr
    proc = project.ll("run", tmp_path / "missing.yaml")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_exit_3_run_error(project: Project, tmp_path: Path) -> None:
    path = loop_file(
        tmp_path,
        """
        name: undefined
        initial: a
        on_error: z
        states:
          a: {action: "echo ${env.LL_SURELY_UNDEFINED_VAR}", next: z}
          z: {terminal: true}
        """,
    )
    proc = project.ll("run", path)
    assert proc.returncode == 3
    assert "undefined variable '${env.LL_SURELY_UNDEFINED_VAR}' in state 'a'" in proc.stdout


def test_exit_3_shell_cannot_start(project: Project, tmp_path: Path) -> None:
    path = loop_file(
        tmp_path,
        """
        name: noshell
        initial: a
        shell: /nonexistent/shell
        on_error: z
        states:
          a: {action: "true", next: z}
          z: {terminal: true}
        """,
    )
    proc = project.ll("run", path)
    assert proc.returncode == 3
    assert "/nonexistent/shell" in proc.stdout


def test_exit_4_max_iterations(project: Project, tmp_path: Path) -> None:
    path = loop_file(
        tmp_path,
        """
        name: spin
        initial: a
        on_error: a
        states:
          a: {action: "true", on_success: $current, on_failure: z}
          z: {terminal: true}
        """,
    )
    proc = project.ll("run", path, "--max-iterations", "3")
    assert proc.returncode == 4
    assert "ll: max_iterations at 'a' after 3 steps" in proc.stdout


def test_exit_124_loop_timeout(project: Project, tmp_path: Path) -> None:
    path = loop_file(
        tmp_path,
        """
        name: slow
        initial: a
        timeout: 1
        on_error: z
        states:
          a: {action: sleep 30, next: z}
          z: {terminal: true}
        """,
    )
    started = time.monotonic()
    proc = project.ll("run", path)
    assert proc.returncode == 124
    assert time.monotonic() - started < 25  # not the 30 s sleep


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signals_stop_the_run_and_its_children(tmp_path: Path, sig: int, code: int) -> None:
    pidfile = tmp_path / "child.pid"
    path = loop_file(
        tmp_path,
        f"""
        name: interrupted
        initial: a
        on_error: z
        states:
          a: {{action: "sleep 60 & echo $! > {pidfile}; wait", next: z}}
          z: {{terminal: true}}
        """,
    )
    proc = subprocess.Popen(
        [*LL, "run", str(path)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 15
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline, "the action never started"
        time.sleep(0.05)
    child = int(pidfile.read_text())
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=15)
    assert proc.returncode == code, err
    deadline = time.monotonic() + 5
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child)  # gone, or a zombie waiting for a container's init to reap it
    run_dirs = list((tmp_path / ".loops" / "runs").iterdir())
    state = json.loads((run_dirs[0] / "state.json").read_text())
    assert state["status"] == "interrupted"
    assert state["step"] == 0
    assert state["current"] == "a"


def test_json_streams_events(project: Project, tmp_path: Path) -> None:
    proc = project.ll("run", loop_file(tmp_path, SIMPLE), "--json")
    assert proc.returncode == 0
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[0]["event"] == "loop_start"
    assert events[-1]["event"] == "loop_complete"
    assert events[-1]["outcome"] == "success"
    assert events[-1]["exit_code"] == 0


def test_quiet_prints_only_the_final_line(project: Project, tmp_path: Path) -> None:
    proc = project.ll("run", loop_file(tmp_path, SIMPLE), "--quiet")
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == 1


def test_verbose_streams_action_output(project: Project, tmp_path: Path) -> None:
    path = loop_file(
        tmp_path,
        """
        name: chatty
        initial: a
        on_error: z
        states:
          a: {action: "echo streamed-$((40+2))-line", next: z}
          z: {terminal: true}
        """,
    )
    assert "streamed-42-line" not in project.ll("run", path).stdout
    assert "streamed-42-line" in project.ll("run", path, "--verbose").stdout


def test_dry_run_runs_nothing(project: Project, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = loop_file(
        tmp_path,
        f"""
        name: dry
        initial: a
        on_error: z
        context: {{who: world}}
        states:
          a:
            action: "touch {marker} && echo hello ${{context.who}}"
            on_success: z
            on_failure: a
          z: {{terminal: true}}
        """,
    )
    proc = project.ll("run", path, "--dry-run", "--set", "who=there")
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    assert f"shell action: touch {marker} && echo hello there" in proc.stdout
    assert "a --success--> z" in proc.stdout
    assert "a --failure--> a" in proc.stdout
    assert not (tmp_path / ".loops").exists()


def _run_in_pty(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 20)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=20), b"".join(chunks).decode("utf-8", "replace")


def test_terminal_view_uses_colour_unless_no_color(tmp_path: Path) -> None:
    path = loop_file(tmp_path, SIMPLE)
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm-256color"
    code, text = _run_in_pty([*LL, "run", str(path)], tmp_path, env)
    assert code == 0
    assert "\x1b[" in text
    assert "success at 'good'" in text
    code, text = _run_in_pty([*LL, "run", str(path)], tmp_path, {**env, "NO_COLOR": "1"})
    assert code == 0
    assert "\x1b[3" not in text  # no colour codes (cursor control for the spinner may remain)


def test_second_ctrl_c_ends_at_once(tmp_path: Path) -> None:
    started = tmp_path / "started"
    path = loop_file(
        tmp_path,
        f"""
        name: stubborn
        initial: a
        on_error: z
        states:
          a: {{action: "trap '' TERM; touch {started}; sleep 30", next: z}}
          z: {{terminal: true}}
        """,
    )
    proc = subprocess.Popen(
        [*LL, "run", str(path)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 15
    while not started.exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)  # the action ignores SIGTERM: ll waits out its grace
    time.sleep(0.1)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 130
    assert time.monotonic() - sent < 0.5
    assert b"Traceback" not in err


def test_set_rejects_a_key_the_loop_does_not_have(project: Project, tmp_path: Path) -> None:
    proc = project.ll("run", loop_file(tmp_path, SIMPLE), "--set", "cod=1")
    assert proc.returncode == 2
    assert "the loop has no context key 'cod'; did you mean 'code'?" in proc.stderr
    assert not (tmp_path / ".loops").exists()


SLASH = """
name: slash
initial: ask
on_error: z
states:
  ask: {action: /review the diff, evaluate: {type: exit_code}, next: z}
  z: {terminal: true}
"""


@pytest.mark.parametrize(
    ("args", "env", "flags"),
    [
        ([], {}, ["--dangerously-skip-permissions"]),
        (
            ["--claude-flags", "--permission-mode acceptEdits"],
            {},
            ["--permission-mode", "acceptEdits"],
        ),
        ([], {"LL_CLAUDE_FLAGS": "--allowedTools Read"}, ["--allowedTools", "Read"]),
        (["--claude-flags", ""], {"LL_CLAUDE_FLAGS": "--x"}, []),
    ],
)
def test_claude_permission_flags_are_configurable(
    project: Project, tmp_path: Path, args: list[str], env: dict[str, str], flags: list[str]
) -> None:
    fake = Path(__file__).parents[1] / "fake_claude.py"
    argv_log = tmp_path / "argv.jsonl"
    proc = project.ll(
        "run",
        loop_file(tmp_path, SLASH),
        "--claude",
        str(fake),
        *args,
        env={"FAKE_CLAUDE_ARGV_LOG": str(argv_log), **env},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    argv = json.loads(argv_log.read_text().splitlines()[0])["argv"]
    tail = argv[argv.index("--verbose") + 1 :]
    assert tail == flags


# -- what a newcomer sees: reasons, output, progress -------------------------------------------

FAILING = """
name: ship
initial: fetch
states:
  fetch:
    action: |
      echo "  % Total"
      echo "curl: (6) Could not resolve host: example.invalid" >&2
      exit 6
    next: deploy
    on_error: deploy
  deploy:
    action: ./deploy.sh
    next: gave_up
    on_error: gave_up
  gave_up: {terminal: true, outcome: failure}
"""


def test_a_failed_step_shows_why_and_what_it_printed(project: Project, tmp_path: Path) -> None:
    proc = project.ll("run", loop_file(tmp_path, FAILING))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    fetch = lines.index(next(line for line in lines if "1/50  fetch" in line))
    assert lines[fetch + 1].startswith(
        '             error "exit code 6: curl: (6) Could not resolve host: example.invalid" '
    )
    assert lines[fetch + 1].endswith(" -> deploy")
    assert lines[fetch + 2] == "               curl: (6) Could not resolve host: example.invalid"
    assert '             error "command not found: ./deploy.sh"' in proc.stdout
    assert "               /bin/sh: 1: ./deploy.sh: not found" in proc.stdout or (
        "./deploy.sh: No such file or directory" in proc.stdout
    )
    assert "neither 0 nor 1" not in proc.stdout
    # The same lines come back from the run's events.
    logs = project.ll("logs")
    assert "               curl: (6) Could not resolve host: example.invalid" in logs.stdout
    assert "ll logs " in logs.stderr
    assert "--step N" in logs.stderr


def test_logs_step_prints_every_attempt_of_a_step(project: Project, tmp_path: Path) -> None:
    path = loop_file(
        tmp_path,
        """
        name: flaky
        initial: try
        states:
          try:
            action: |
              echo "attempt ${state.attempt} out"
              echo "attempt ${state.attempt} err" >&2
              exit 2
            retry: {max_attempts: 2, interval: 0, jitter: false}
            next: quiet
            on_error: quiet
          quiet: {action: "true", next: done}
          done: {terminal: true}
        """,
    )
    assert project.ll("run", path).returncode == 0
    run_id = next((tmp_path / ".loops" / "runs").iterdir()).name
    proc = project.ll("logs", run_id, "--step", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "== step 1 (try), attempt 1 ==",
        "attempt 1 out",
        "attempt 1 err",
        "== step 1 (try), attempt 2 ==",
        "attempt 2 out",
        "attempt 2 err",
    ]
    silent = project.ll("logs", "--step", "2")
    assert (silent.returncode, silent.stdout) == (0, "")
    assert silent.stderr == "ll: step 2 (quiet) attempt 1 printed nothing\n"
    missing = project.ll("logs", run_id, "--step", "9")
    assert missing.returncode == 2
    assert missing.stderr == (
        f"ll: error: run {run_id} has no step 9; its steps are 1 to 3 (see 'll logs {run_id}')\n"
    )


def test_heartbeat_lines_in_piped_output(project: Project, tmp_path: Path) -> None:
    path = loop_file(
        tmp_path,
        """
        name: slow
        initial: build
        context: {nap: "2.2"}
        states:
          build: {action: "echo compiling; sleep ${context.nap}; echo linked", next: done}
          done: {terminal: true}
        """,
    )
    proc = project.ll("run", path, "--heartbeat", "1")
    assert proc.returncode == 0, proc.stderr
    beats = [line for line in proc.stdout.splitlines() if line.startswith("… build still")]
    assert beats, proc.stdout
    assert beats[0] == "… build still running (1s): compiling"
    assert len(beats) <= 3
    # 0 is never, not "as often as possible": a step of a second passes without a line.
    quiet = project.ll("run", path, "--heartbeat", "0", "--set", "nap=1")
    assert quiet.returncode == 0, quiet.stderr
    assert "still running" not in quiet.stdout
    assert "--heartbeat SECONDS" in project.ll("resume", "--help").stdout


def test_terminal_view_spins_with_elapsed_time_and_the_latest_line(tmp_path: Path) -> None:
    path = loop_file(
        tmp_path,
        """
        name: slow
        initial: build
        states:
          build:
            action: "echo compiling; sleep 1.5; echo bad >&2; exit 2"
            next: done
            on_error: done
          done: {terminal: true}
        """,
    )
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"}
    code, text = _run_in_pty([*LL, "run", str(path)], tmp_path, env)
    assert code == 0, text
    assert "build running… " in text
    assert "compiling" in text
    assert 'error "exit code 2: bad"' in text
    assert "               bad" in text


def test_the_on_max_iterations_step_is_counted_as_the_limit(
    project: Project, tmp_path: Path
) -> None:
    path = loop_file(
        tmp_path,
        """
        name: capped
        initial: spin
        max_iterations: 2
        on_max_iterations: report
        states:
          spin: {action: "true", next: spin}
          report: {action: echo gave up, terminal: true}
        """,
    )
    proc = project.ll("run", path)
    assert proc.returncode == 4, proc.stderr
    assert " limit  report  echo gave up" in proc.stdout.splitlines()
    assert "3/2" not in proc.stdout


def test_loops_dir_gets_a_gitignore_on_first_use(project: Project, tmp_path: Path) -> None:
    path = loop_file(tmp_path, SIMPLE)
    assert project.ll("run", path).returncode == 0
    ignore = tmp_path / ".loops" / ".gitignore"
    assert ignore.read_text().splitlines()[-1] == "*"
    ignore.write_text("runs/\n")
    assert project.ll("run", path).returncode == 0
    assert ignore.read_text() == "runs/\n"  # never overwritten


def test_list_and_history_agree_on_the_order(project: Project, tmp_path: Path) -> None:
    path = loop_file(tmp_path, SIMPLE)
    for _ in range(2):
        assert project.ll("run", path).returncode == 0
    runs = (tmp_path / ".loops" / "runs").iterdir()
    # Oldest first by start time: two runs in the same second have ids that sort at random.
    ids = [p.name for p in sorted(runs, key=lambda p: _state(p)["started_at"])]
    listed = [line.split()[0] for line in project.ll("list").stdout.splitlines()[1:]]
    history = [line.split()[2] for line in project.ll("history").stdout.splitlines()[1:]]
    assert listed == history == ids[::-1]


JUDGED = """
name: judged
initial: review
llm: {model: claude-test-judge}
states:
  review:
    action: echo "docs built"
    evaluate: {type: llm_structured, prompt: Are the docs fine?}
    route: {_: done, _error: done}
  done: {terminal: true}
"""


@pytest.mark.slow  # judge timing: it waits out a slow judge twice, once in a terminal
def test_judging_is_shown_and_counted_in_the_step_time(
    project: Project, tmp_path: Path, llm_server: LlmServer
) -> None:
    """A slow judge: heartbeat lines while judging, and the step's time includes the call."""
    import dataclasses

    verdict = {"verdict": "success", "confidence": 0.9, "reason": "fine"}
    llm_server.script(dataclasses.replace(message(verdict), delay=1.6))
    env = {"ANTHROPIC_API_KEY": "sk-test-not-real", "ANTHROPIC_BASE_URL": llm_server.url}
    path = loop_file(tmp_path, JUDGED)
    proc = project.ll("run", path, "--heartbeat", "1", "--no-cache", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    beats = [line for line in proc.stdout.splitlines() if line.startswith("… review still")]
    assert beats, proc.stdout
    assert beats[0] == "… review still judging with claude-test-judge (1s): docs built"
    result = next(line for line in proc.stdout.splitlines() if "-> done" in line)
    seconds = float(re.search(r" ([0-9.]+) s -> done", result).group(1))  # type: ignore[union-attr]
    assert seconds >= 1.5, result  # the judge's 1.6 s, not the action's few ms
    events = project.ll("logs", "--json").stdout
    judge_start = [json.loads(e) for e in events.splitlines() if '"judge_start"' in e]
    assert judge_start[0]["model"] == "claude-test-judge"
    assert (judge_start[0]["step"], judge_start[0]["state"]) == (1, "review")
    # In a terminal, the spinner says so while the judge thinks.
    llm_server.script(dataclasses.replace(message(verdict), delay=1.5))
    tty_env = {**os.environ, **env, "TERM": "xterm-256color", "COLUMNS": "120"}
    code, text = _run_in_pty([*LL, "run", str(path), "--no-cache"], tmp_path, tty_env)
    assert code == 0, text
    assert "review judging with claude-test-judge… 1." in text


def _state(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "state.json").read_text())
    return data
