"""The real `ll` process: every exit code of SPEC section 8, output modes and signals."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from little_loops.store import pid_alive

LL = [sys.executable, "-m", "little_loops"]


def loop_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "loop.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def ll(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LL, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


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


def test_exit_0_success(tmp_path: Path) -> None:
    proc = ll("run", loop_file(tmp_path, SIMPLE), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("ll: success at 'good' after 2 steps")
    assert "\x1b[" not in proc.stdout


def test_exit_1_failure_terminal(tmp_path: Path) -> None:
    proc = ll("run", loop_file(tmp_path, SIMPLE), "--set", "code=1", cwd=tmp_path)
    assert proc.returncode == 1
    assert "ll: failure at 'bad'" in proc.stdout


def test_exit_2_invalid_file_and_usage(tmp_path: Path) -> None:
    bad = loop_file(tmp_path, "name: x\ninitial: nowhere\nstates:\n  a: {terminal: true}\n")
    proc = ll("run", bad, cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{bad}:2:" in proc.stderr
    proc = ll("run", loop_file(tmp_path, SIMPLE), "--set", "nokey", cwd=tmp_path)
    assert proc.returncode == 2
    assert "KEY=VALUE" in proc.stderr
    proc = ll("run", tmp_path / "missing.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_exit_3_run_error(tmp_path: Path) -> None:
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
    proc = ll("run", path, cwd=tmp_path)
    assert proc.returncode == 3
    assert "undefined variable '${env.LL_SURELY_UNDEFINED_VAR}' in state 'a'" in proc.stdout


def test_exit_3_shell_cannot_start(tmp_path: Path) -> None:
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
    proc = ll("run", path, cwd=tmp_path)
    assert proc.returncode == 3
    assert "/nonexistent/shell" in proc.stdout


def test_exit_4_max_iterations(tmp_path: Path) -> None:
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
    proc = ll("run", path, "--max-iterations", "3", cwd=tmp_path)
    assert proc.returncode == 4
    assert "ll: max_iterations at 'a' after 3 steps" in proc.stdout


def test_exit_124_loop_timeout(tmp_path: Path) -> None:
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
    proc = ll("run", path, cwd=tmp_path)
    assert proc.returncode == 124
    assert time.monotonic() - started < 10


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


def test_json_streams_events(tmp_path: Path) -> None:
    proc = ll("run", loop_file(tmp_path, SIMPLE), "--json", cwd=tmp_path)
    assert proc.returncode == 0
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[0]["event"] == "loop_start"
    assert events[-1]["event"] == "loop_complete"
    assert events[-1]["outcome"] == "success"
    assert events[-1]["exit_code"] == 0


def test_quiet_prints_only_the_final_line(tmp_path: Path) -> None:
    proc = ll("run", loop_file(tmp_path, SIMPLE), "--quiet", cwd=tmp_path)
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == 1


def test_verbose_streams_action_output(tmp_path: Path) -> None:
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
    assert "streamed-42-line" not in ll("run", path, cwd=tmp_path).stdout
    assert "streamed-42-line" in ll("run", path, "--verbose", cwd=tmp_path).stdout


def test_dry_run_runs_nothing(tmp_path: Path) -> None:
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
    proc = ll("run", path, "--dry-run", "--set", "who=there", cwd=tmp_path)
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


def test_set_rejects_a_key_the_loop_does_not_have(tmp_path: Path) -> None:
    proc = ll("run", loop_file(tmp_path, SIMPLE), "--set", "cod=1", cwd=tmp_path)
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
    tmp_path: Path, args: list[str], env: dict[str, str], flags: list[str]
) -> None:
    fake = Path(__file__).parent / "fake_claude.py"
    argv_log = tmp_path / "argv.jsonl"
    proc = ll(
        "run", loop_file(tmp_path, SLASH), "--claude", str(fake), *args,
        cwd=tmp_path, env={"FAKE_CLAUDE_ARGV_LOG": str(argv_log), **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    argv = json.loads(argv_log.read_text().splitlines()[0])["argv"]
    tail = argv[argv.index("--verbose") + 1 :]
    assert tail == flags
