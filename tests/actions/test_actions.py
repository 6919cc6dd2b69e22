"""Shell and slash actions, with real processes, real signals and real files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeClaude, install_fake_claude
from project import Project

from little_loops.actions import (
    ActionResult,
    ActionStartError,
    claude_command,
    reaper,
    run_shell,
    run_slash,
    slash,
)
from little_loops.errors import EXIT_RUN_ERROR, LoopError
from little_loops.model.details import Details

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeClaude:
    return install_fake_claude(tmp_path / "fake-bin", monkeypatch)


def live_members(pgid: int) -> list[int]:
    """Pids of the group's members that still run (zombies left to a lazy init do not count)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat.rpartition(b")")[2].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(name))
    return found


def wait_for_members(pgid: int, count: int, seconds: float = 5.0) -> None:
    end = time.monotonic() + seconds
    while len(live_members(pgid)) < count:
        assert time.monotonic() < end, f"group {pgid} never had {count} live members"
        time.sleep(0.01)


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_no_descriptor_outlives_an_action(tmp_path: Path) -> None:
    run_shell("true", cwd=tmp_path)  # the guard process and /dev/null are opened once
    before = open_fds()
    run_shell("echo out; echo err >&2", cwd=tmp_path, log_path=tmp_path / "x.log")
    run_shell("exit 3", cwd=tmp_path)
    run_shell("printf x; sleep 5", cwd=tmp_path, timeout=0.2)
    run_shell("sleep 5 & echo bg", cwd=tmp_path)
    with pytest.raises(ActionStartError):
        run_shell("true", shell=str(tmp_path / "no-shell"), cwd=tmp_path)
    assert open_fds() == before


# -- shell: capture ---------------------------------------------------------------------------


def test_stdout_stderr_and_exit_code(tmp_path: Path) -> None:
    result = run_shell("echo out; echo err >&2; exit 3", cwd=tmp_path)
    assert result.output == "out\n"
    assert result.stderr == "err\n"
    assert result.exit_code == 3
    assert result.timed_out is False
    assert result.output_bytes == 8
    assert result.error is None
    assert result.duration_ms >= 0


@pytest.mark.parametrize("code", [0, 1, 2, 42, 255])
def test_exit_codes_pass_through(tmp_path: Path, code: int) -> None:
    assert run_shell(f"exit {code}", cwd=tmp_path).exit_code == code


def test_death_by_signal_is_a_negative_exit_code(tmp_path: Path) -> None:
    result = run_shell("kill -KILL $$", cwd=tmp_path)
    assert result.exit_code == -signal.SIGKILL
    assert result.timed_out is False


def test_runs_in_cwd_with_stdin_from_dev_null(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("here")
    result = run_shell("cat marker.txt; pwd; cat; echo done", cwd=tmp_path, timeout=5)
    assert result.output == f"here{tmp_path}\ndone\n"


def test_env_is_the_whole_environment(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "LL_TEST_VALUE": "a b $c"}
    result = run_shell('printf "%s|%s" "$LL_TEST_VALUE" "${HOME-unset}"', cwd=tmp_path, env=env)
    assert result.output == "a b $c|unset"


def test_env_none_inherits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LL_TEST_INHERITED", "yes")
    assert run_shell('printf %s "$LL_TEST_INHERITED"', cwd=tmp_path).output == "yes"


def test_other_shell(tmp_path: Path) -> None:
    result = run_shell("echo $0", shell="bash", cwd=tmp_path)
    assert result.output == "bash\n"


def test_non_utf8_output_is_replaced(tmp_path: Path) -> None:
    result = run_shell(r"printf 'a\377b'", cwd=tmp_path)
    assert result.output == "a\ufffdb"


# -- shell: log file and streaming -----------------------------------------------------------


# Order of arrival across two pipes, 50 ms apart: on a machine busy with other tests' processes
# the reader can be scheduled late and see them swapped, so these run on the one xdist worker of
# the timed process tests (tests/run/test_signals.py), one at a time.
@pytest.mark.xdist_group("processes")
def test_log_gets_both_streams_in_arrival_order(tmp_path: Path) -> None:
    log = tmp_path / "runs" / "r1" / "001-check.log"
    command = "echo one; sleep 0.05; echo two >&2; sleep 0.05; echo three"
    run_shell(command, cwd=tmp_path, log_path=log)
    assert log.read_bytes() == b"one\ntwo\nthree\n"
    run_shell("echo again", cwd=tmp_path, log_path=log)
    assert log.read_bytes() == b"one\ntwo\nthree\nagain\n"


@pytest.mark.xdist_group("processes")
def test_on_output_gets_every_chunk_with_its_stream(tmp_path: Path) -> None:
    seen: list[tuple[str, bytes]] = []
    command = "printf a; sleep 0.05; printf b >&2; sleep 0.05; printf c"
    run_shell(command, cwd=tmp_path, on_output=lambda name, chunk: seen.append((name, chunk)))
    joined: dict[str, bytes] = {}
    for name, chunk in seen:
        joined[name] = joined.get(name, b"") + chunk
    assert joined == {"stdout": b"ac", "stderr": b"b"}
    assert [name for name, _ in seen] == ["stdout", "stderr", "stdout"]


@pytest.mark.xdist_group("processes")
def test_partial_line_arrives_before_the_command_ends(tmp_path: Path) -> None:
    start = time.monotonic()
    arrivals: list[float] = []

    def arrived(_name: str, _chunk: bytes) -> None:
        arrivals.append(time.monotonic() - start)
        (tmp_path / "released").touch()  # the command waits for this, at most 6 s

    run_shell(
        "printf 'no newline'; "
        "for i in $(seq 600); do test -e released && exit 0; sleep 0.01; done; exit 1",
        cwd=tmp_path,
        on_output=arrived,
    )
    assert arrivals
    assert arrivals[0] < 2.5  # long before the command ends, even on a busy machine


def test_tail_is_bounded_but_every_byte_is_counted_and_logged(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    command = "head -c 3000000 /dev/zero | tr '\\0' x; printf END; head -c 5000 /dev/zero >&2"
    result = run_shell(command, cwd=tmp_path, log_path=log, tail_bytes=1000)
    assert len(result.output) == 1000
    assert result.output.endswith("xxxEND")
    assert len(result.stderr) == 1000
    assert result.output_bytes == 3000003 + 5000
    assert log.stat().st_size == 3000003 + 5000


def test_tail_cut_inside_a_multibyte_character(tmp_path: Path) -> None:
    # "é" is 2 bytes: an odd tail size cuts one in half at the start of the tail.
    result = run_shell(
        "i=0; while [ $i -lt 3000 ]; do printf é; i=$((i+1)); done", cwd=tmp_path, tail_bytes=1001
    )
    assert "\ufffd" not in result.output
    assert result.output == "é" * 500


def test_tail_bytes_zero_keeps_nothing(tmp_path: Path) -> None:
    result = run_shell("echo hi", cwd=tmp_path, tail_bytes=0)
    assert result.output == ""
    assert result.output_bytes == 3


def test_many_lines(tmp_path: Path) -> None:
    result = run_shell("seq 1 200000", cwd=tmp_path, log_path=tmp_path / "seq.log")
    assert result.output.endswith("199999\n200000\n")
    assert (tmp_path / "seq.log").read_text().count("\n") == 200000


# -- shell: timeouts and process groups ------------------------------------------------------


def test_timeout_with_a_partial_line(tmp_path: Path) -> None:
    start = time.monotonic()
    result = run_shell("printf x; sleep 20", cwd=tmp_path, timeout=0.5)
    elapsed = time.monotonic() - start
    assert result.timed_out is True
    assert result.exit_code is None
    assert result.output == "x"
    assert elapsed < 15  # not the 20 s sleep


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    result = run_shell("echo $$; sleep 100 & sleep 100", cwd=tmp_path, timeout=0.5)
    assert result.timed_out
    pgid = int(result.output)
    assert live_members(pgid) == []


def test_background_child_holding_the_pipe_does_not_hang(tmp_path: Path) -> None:
    start = time.monotonic()
    result = run_shell("echo $$; sleep 100 &", cwd=tmp_path, timeout=30)
    assert time.monotonic() - start < 20  # not the 30 s timeout
    assert result.timed_out is False
    assert result.exit_code == 0
    assert live_members(int(result.output)) == []


def test_background_child_with_its_own_output_is_killed(tmp_path: Path) -> None:
    result = run_shell("echo $$; sleep 100 >/dev/null 2>&1 &", cwd=tmp_path, timeout=30)
    assert result.exit_code == 0
    assert live_members(int(result.output)) == []


def test_output_written_just_after_exit_is_kept(tmp_path: Path) -> None:
    result = run_shell("(sleep 0.05; echo late) & echo early", cwd=tmp_path)
    assert result.output == "early\nlate\n"


def test_a_child_ignoring_sigterm_gets_sigkill(tmp_path: Path) -> None:
    start = time.monotonic()
    result = run_shell("trap '' TERM; echo $$; sleep 100 & sleep 100", cwd=tmp_path, timeout=0.3)
    elapsed = time.monotonic() - start
    assert result.timed_out
    assert live_members(int(result.output)) == []
    assert elapsed >= 0.3 + reaper.KILL_GRACE_S
    assert elapsed < 0.3 + reaper.KILL_GRACE_S + 30  # not the 100 s sleep


def test_exception_from_on_output_kills_the_group_and_propagates(tmp_path: Path) -> None:
    seen: list[bytes] = []

    def explode(_name: str, chunk: bytes) -> None:
        seen.append(chunk)
        wait_for_members(int(chunk), 3)
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        run_shell("echo $$; sleep 100 & sleep 100", cwd=tmp_path, on_output=explode)
    assert live_members(int(seen[0])) == []


_INTERRUPTIBLE = textwrap.dedent(
    """
    import signal, sys
    from pathlib import Path
    from little_loops.actions import run_shell

    class Terminated(BaseException):
        pass

    def on_term(signum, frame):
        raise Terminated

    signal.signal(signal.SIGTERM, on_term)

    def show(name, chunk):
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()

    try:
        run_shell("echo $$; sleep 100 & sleep 100", cwd=Path("."), on_output=show)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
    except Terminated:
        print("terminated", flush=True)
        sys.exit(143)
    """
)


# A signal sent to a runner in the middle of an action: timed process work, so with the other
# signal tests on one xdist worker (it failed once beside the rest of the suite at load 17).
@pytest.mark.xdist_group("processes")
@pytest.mark.parametrize(
    ("sig", "code", "word"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_a_signal_to_the_runner_kills_the_group(
    tmp_path: Path, sig: signal.Signals, code: int, word: str
) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTIBLE], cwd=tmp_path, stdout=subprocess.PIPE
    ) as runner:
        assert runner.stdout is not None
        pgid = int(runner.stdout.readline())
        wait_for_members(pgid, 3)  # the shell and both sleeps
        runner.send_signal(sig)
        rest = runner.stdout.read().decode()
        assert runner.wait(timeout=10) == code
    assert rest == f"{word}\n"
    assert live_members(pgid) == []


@pytest.mark.xdist_group("processes")
def test_a_sigkilled_runner_leaves_no_action_behind(tmp_path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTIBLE], cwd=tmp_path, stdout=subprocess.PIPE
    ) as runner:
        assert runner.stdout is not None
        pgid = int(runner.stdout.readline())
        wait_for_members(pgid, 3)
        runner.kill()  # no handler runs: the guard process must do the killing
        assert runner.wait(timeout=10) == -signal.SIGKILL
    end = time.monotonic() + 5
    while live_members(pgid):
        assert time.monotonic() < end, "the action outlived its SIGKILLed runner"
        time.sleep(0.02)


def test_no_timeout_means_wait(tmp_path: Path) -> None:
    assert run_shell("sleep 0.2; echo ok", cwd=tmp_path, timeout=None).output == "ok\n"


# -- shell: start errors ---------------------------------------------------------------------


def test_missing_shell(tmp_path: Path) -> None:
    with pytest.raises(ActionStartError) as info:
        run_shell("true", shell="/no/such/shell", cwd=tmp_path)
    assert info.value.message == (
        "cannot run shell action: shell '/no/such/shell' not found; install it or set 'shell:' "
        "in the loop file to an existing shell such as /bin/sh"
    )
    assert info.value.exit_code == EXIT_RUN_ERROR


def test_shell_not_executable(tmp_path: Path) -> None:
    shell = tmp_path / "notexec"
    shell.write_text("")
    with pytest.raises(ActionStartError, match="is not executable"):
        run_shell("true", shell=str(shell), cwd=tmp_path)


def test_missing_cwd(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ActionStartError) as info:
        run_shell("true", cwd=missing)
    assert info.value.message == (
        f"cannot run action: working directory '{missing}' does not exist; create it or "
        "fix 'working_dir:' in the loop file"
    )
    assert info.value.exit_code == EXIT_RUN_ERROR
    with pytest.raises(ActionStartError, match="does not exist"):
        run_slash("/x", cwd=missing)


def test_cwd_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("")
    with pytest.raises(ActionStartError, match="is not a directory"):
        run_shell("true", cwd=target)


def test_start_error_leaves_no_log_handle_open(tmp_path: Path) -> None:
    with pytest.raises(ActionStartError):
        run_shell("true", shell="/no/such/shell", cwd=tmp_path, log_path=tmp_path / "l.log")


# -- the result record ------------------------------------------------------------------------


def test_result_round_trips(tmp_path: Path) -> None:
    result = run_shell("echo hi; exit 4", cwd=tmp_path)
    assert ActionResult.from_dict(result.to_dict()) == result
    slashy = ActionResult(
        "text", "", 0, 5, False, 10, error="boom", cost_usd=0.5, details=Details(usage={"a": 1})
    )
    again = ActionResult.from_dict(slashy.to_dict())
    assert again.to_dict() == slashy.to_dict()
    assert ActionResult.from_dict({"exit_code": None}).exit_code is None


# -- claude_command ---------------------------------------------------------------------------


def test_claude_command_precedence() -> None:
    assert claude_command("/opt/claude", {"LL_CLAUDE": "other"}) == ["/opt/claude"]
    assert claude_command(None, {"LL_CLAUDE": "npx 'claude code' --x"}) == [
        "npx",
        "claude code",
        "--x",
    ]
    assert claude_command(None, {"LL_CLAUDE": "  "}) == ["claude"]
    assert claude_command(None, {}) == ["claude"]
    with pytest.raises(LoopError, match="LL_CLAUDE"):
        claude_command(None, {"LL_CLAUDE": "claude 'open"})


# -- slash actions ----------------------------------------------------------------------------


def test_slash_ok(tmp_path: Path, fake_claude: FakeClaude) -> None:
    log = tmp_path / "logs" / "slash.log"
    result = run_slash("/ll:check_code fix", cwd=tmp_path, log_path=log, timeout=30)
    assert result.error is None
    assert result.output == "fake claude: /ll:check_code fix"
    assert result.exit_code == 0
    assert result.cost_usd == pytest.approx(0.0123)
    assert result.details["is_error"] is False
    assert result.details["subtype"] == "success"
    assert result.details["num_turns"] == 2
    assert result.details.usage["output_tokens"] == 56
    assert result.details["model"] == "claude-fake-1"
    assert result.details["session_id"]
    [call] = fake_claude.calls()
    assert call["argv"] == [
        "-p",
        "/ll:check_code fix",
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
    ]
    assert call["cwd"] == str(tmp_path)
    logged = log.read_text()
    assert '"type": "system"' in logged
    assert '"type": "result"' in logged
    assert result.output_bytes == len(log.read_bytes())
    assert ActionResult.from_dict(result.to_dict()) == result


def test_slash_text_split_across_reads(tmp_path: Path, fake_claude: FakeClaude) -> None:
    fake_claude.scenario("multi")
    chunks: list[bytes] = []
    result = run_slash("go", cwd=tmp_path, on_output=lambda _n, c: chunks.append(c))
    assert result.error is None
    assert result.output == "first part\nsecond part\nthird"
    assert len(chunks) > 20


def test_slash_result_only(tmp_path: Path, fake_claude: FakeClaude) -> None:
    fake_claude.scenario("result_only", result="the answer")
    result = run_slash("go", cwd=tmp_path)
    assert result.error is None
    assert result.output == "the answer"


def test_slash_error_result_with_exit_zero(tmp_path: Path, fake_claude: FakeClaude) -> None:
    fake_claude.scenario("error_result")
    result = run_slash("go", cwd=tmp_path)
    assert result.exit_code == 0
    assert result.error == (
        "claude CLI reported an error (error_during_execution): API Error: 529 overloaded"
    )
    assert result.details["is_error"] is True
    assert result.output == "fake claude: go"


def test_slash_max_turns(tmp_path: Path, fake_claude: FakeClaude) -> None:
    fake_claude.scenario("max_turns")
    result = run_slash("go", cwd=tmp_path)
    assert result.error == "claude CLI reported an error (error_max_turns)"
    assert result.output == ""


def test_slash_exit_nonzero(tmp_path: Path, fake_claude: FakeClaude) -> None:
    fake_claude.scenario("exit_nonzero", exit=3)
    result = run_slash("go", cwd=tmp_path)
    assert result.exit_code == 3
    assert result.error == "claude CLI exited with code 3: Error: fake claude failed on purpose"
    assert result.stderr == "Error: fake claude failed on purpose\n"


def test_slash_no_result_event(tmp_path: Path, fake_claude: FakeClaude) -> None:
    fake_claude.scenario("no_result")
    result = run_slash("go", cwd=tmp_path)
    assert result.exit_code == 0
    assert result.error == "claude CLI ended without a result event"
    assert result.output == "fake claude: go"


def test_slash_tolerates_non_json_lines(tmp_path: Path, fake_claude: FakeClaude) -> None:
    fake_claude.scenario("garbage")
    log = tmp_path / "g.log"
    result = run_slash("go", cwd=tmp_path, log_path=log)
    assert result.error is None
    assert result.output == "fake claude: go"
    assert "this is not JSON" in log.read_text()


def test_slash_hang_times_out_and_leaves_nothing(tmp_path: Path, fake_claude: FakeClaude) -> None:
    fake_claude.scenario("hang")
    start = time.monotonic()
    result = run_slash("go", cwd=tmp_path, timeout=1.0)
    assert time.monotonic() - start < 30  # not the hour-long hang
    assert result.timed_out
    assert result.exit_code is None
    assert result.error is None
    [call] = fake_claude.calls()
    assert live_members(call["pid"]) == []


def test_slash_root_refusal_explains_is_sandbox(tmp_path: Path, fake_claude: FakeClaude) -> None:
    fake_claude.scenario("root_refusal")
    result = run_slash("go", cwd=tmp_path)
    assert result.exit_code == 1
    assert result.error == (
        "claude CLI exited with code 1: --dangerously-skip-permissions cannot be used with "
        "root/sudo privileges for security reasons; the claude CLI refuses "
        "--dangerously-skip-permissions when running as root unless IS_SANDBOX=1 is set: inside "
        "a disposable container or VM run `export IS_SANDBOX=1` before `ll run`, or run ll as a "
        "non-root user"
    )
    sandboxed = run_slash("go", cwd=tmp_path, env={**os.environ, "IS_SANDBOX": "1"})
    assert sandboxed.error is None
    no_flag = run_slash("go", cwd=tmp_path, flags=("--permission-mode", "acceptEdits"))
    assert no_flag.error is None
    assert fake_claude.calls()[-1]["argv"][-2:] == ["--permission-mode", "acceptEdits"]


def test_slash_missing_cli(tmp_path: Path) -> None:
    result = run_slash("go", claude=("/no/such/claude",), cwd=tmp_path)
    assert result.error == (
        "claude CLI not found: '/no/such/claude'; install Claude Code or set LL_CLAUDE / --claude"
    )
    assert result.exit_code is None
    assert result.timed_out is False
    on_path = run_slash("go", claude=("ll-no-such-claude-xyz",), cwd=tmp_path)
    assert on_path.error is not None
    assert on_path.error.startswith("claude CLI not found: 'll-no-such-claude-xyz'")


def test_slash_command_from_ll_claude(tmp_path: Path, fake_claude: FakeClaude) -> None:
    argv = claude_command(None, {"LL_CLAUDE": f"{fake_claude.executable} --model haiku"})
    result = run_slash("go", claude=argv, flags=(), cwd=tmp_path)
    assert result.error is None
    assert fake_claude.calls()[0]["argv"] == [
        "--model",
        "haiku",
        "-p",
        "go",
        "--output-format",
        "stream-json",
        "--verbose",
    ]


def test_slash_output_is_bounded(tmp_path: Path, fake_claude: FakeClaude) -> None:
    fake_claude.scenario("big", text_bytes=3_000_000)
    result = run_slash("go", cwd=tmp_path, tail_bytes=1000)
    assert result.error is None
    assert result.output == "y" * 1000
    assert result.output_bytes > 3_000_000


def test_slash_sequence_of_scenarios(tmp_path: Path, fake_claude: FakeClaude) -> None:
    fake_claude.sequence("error_result", "ok")
    assert run_slash("a", cwd=tmp_path).error is not None
    assert run_slash("b", cwd=tmp_path).error is None
    assert run_slash("c", cwd=tmp_path).error is None
    assert [c["scenario"] for c in fake_claude.calls()] == ["error_result", "ok", "ok"]


def test_stream_parser_survives_any_split() -> None:
    stream = (
        '{"type":"system","subtype":"init","model":"m"}\n'
        "not json\n"
        '{"type":"assistant","message":{"content":[{"type":"text","text":"héllo ✓"}]}}\n'
        '{"type":"result","subtype":"success","is_error":false,"result":"x"}'
    ).encode()
    for size in (1, 2, 3, 5, len(stream)):
        parser = slash.StreamJson(1000)
        for i in range(0, len(stream), size):
            parser.feed(stream[i : i + size])
        parser.close()
        assert parser.output() == "héllo ✓"
        assert parser.result is not None
        assert parser.result["subtype"] == "success"
        assert parser.model == "m"


def test_fake_claude_is_executable_on_its_own() -> None:
    fake = REPO / "tests" / "fake_claude.py"
    assert os.access(fake, os.X_OK)
    assert fake.read_text().startswith("#!/usr/bin/env python3\n")


def test_output_and_end_of_file_there_at_the_childs_exit_are_read_without_a_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the child has exited by the time its pipes are first watched (the usual case on a
    busy machine), its last output and the end of both pipes are read at once, without a wait
    (a poll round) only to find what is there already (docs/performance.md)."""
    from little_loops.actions import process

    waits: list[float | None] = []

    base: Any = process._Selector

    class Counted(base):  # type: ignore[misc]
        def select(self, timeout: float | None = None) -> Any:
            waits.append(timeout)
            return super().select(timeout)

    monkeypatch.setattr(process, "_Selector", Counted)

    def exited(pid: int) -> None:  # the child is gone (not reaped) before the first wait
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)

    log = tmp_path / "step.log"
    result = run_shell("printf xx; printf yy >&2", cwd=tmp_path, log_path=log, on_start=exited)
    assert (result.output, result.stderr, result.exit_code) == ("xx", "yy", 0)
    assert sorted(log.read_bytes()) == sorted(b"xxyy")
    assert waits == []


STEPS = """
name: steps
initial: a
max_iterations: N
states:
  a: {action: 'true', on_success: $current, on_failure: done}
  done: {terminal: true}
"""


def test_a_step_does_not_ask_for_lls_own_pid(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard knows it was started in this process (a fork starts it afresh) and the
    orphan sweep reads /proc/self: `getpid()` is asked a fixed number of times a run, not
    three or four times a step. Counted through `ll run`, 2 steps against 8."""
    real = os.getpid
    counts = []
    calls = [0]

    def counted() -> int:
        calls[0] += 1
        return real()

    for steps in (1, 2, 8):  # the first: the guard's start, once a process
        loop = project.write(f"steps{steps}.yaml", STEPS.replace("N", str(steps)))
        calls[0] = 0
        with monkeypatch.context() as patch:
            patch.setattr(os, "getpid", counted)
            done = project.ll("run", loop, "--quiet")
        assert done.returncode == 4, done.stdout + done.stderr  # max_iterations, as meant
        counts.append(calls[0])
    assert counts[1] == counts[2], counts


def test_a_forked_child_starts_a_guard_of_its_own(tmp_path: Path) -> None:
    run_shell("true", cwd=tmp_path)  # this process's guard runs
    parent_guard = reaper.GUARD.pid
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: an action starts its own guard, marked with its own pid
        try:
            run_shell("true", cwd=tmp_path)
            ok = reaper.GUARD.owner == os.getpid() and reaper.GUARD.pid != parent_guard
            os.write(write_end, b"ok" if ok else b"no")
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    assert os.read(read_end, 2) == b"ok"
    os.close(read_end)
    assert reaper.GUARD.owner == os.getpid()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_prctl_from_ctypes_c_half_answers_as_ctypes_does() -> None:
    """reaper.py calls prctl (and store.py renameat2) without importing ctypes (start-up,
    issue 27): same results, same errno; no such function is an AttributeError."""
    import ctypes

    from little_loops.record.store import libc_function

    mine, theirs = libc_function("prctl"), ctypes.CDLL(None, use_errno=True).prctl
    assert type(mine).__module__ == "little_loops.record.store"  # not ctypes' fallback
    pr_get_dumpable = 3
    assert mine(pr_get_dumpable, 0, 0, 0, 0) == theirs(pr_get_dumpable, 0, 0, 0, 0)
    assert isinstance(mine(pr_get_dumpable, 0, 0, 0, 0), int)
    ctypes.set_errno(0)
    assert mine(9999, 0, 0, 0, 0) == -1  # no such option
    assert ctypes.get_errno() == 22  # EINVAL, kept as use_errno=True keeps it
    with pytest.raises(AttributeError):
        libc_function("no_such_function_in_libc")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc's children lists")
def test_the_orphan_sweep_reads_one_open_list_a_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """After every action the sweep looks for adopted orphans. Linux hands an orphan to the
    main thread, so the sweep reads that thread's list of children, kept open: one `pread` a
    step, instead of listing /proc/self/task and opening a file per thread (14 system calls
    a step, issue 27). The list still shows a live child of ours."""
    orphans = reaper._Orphans()
    calls: dict[str, int] = {"open": 0, "os.open": 0, "listdir": 0, "pread": 0}

    def counting(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return call

    child = subprocess.Popen(["sleep", "30"])
    try:
        with monkeypatch.context() as patch:
            patch.setattr("builtins.open", counting("open", open))
            patch.setattr(os, "open", counting("os.open", os.open))
            patch.setattr(os, "listdir", counting("listdir", os.listdir))
            patch.setattr(os, "pread", counting("pread", os.pread))
            seen = [orphans._children() for _ in range(10)]
    finally:
        child.kill()
        child.wait()
    assert all(child.pid in found for found in seen)
    assert calls == {"open": 0, "os.open": 1, "listdir": 0, "pread": 10}, calls
    orphans._forked()  # closes the list it held


def test_what_both_pipes_hold_at_once_is_read_stdout_first_whatever_their_numbers() -> None:
    # Descriptors 8k+7 and 8k+8 fall in a two-int set's table as 8k+8 first: a set of open
    # pipes read stderr first, so a step's log showed its stderr line above the stdout line it
    # printed first (test_cli's `ll logs --step` test failed about half the time on a busy
    # machine). Two free numbers of that shape are taken, never ones the process uses.
    import fcntl

    from little_loops.actions.process import Tail, _Sink

    def free(number: int) -> bool:
        try:
            fcntl.fcntl(number, fcntl.F_GETFD)
        except OSError:
            return True
        return False

    out_fd = next(n for n in range(255, 4096, 8) if free(n) and free(n + 1))
    seen: list[tuple[str, bytes]] = []
    sink = _Sink(Tail(1024), Tail(1024), None, lambda name, chunk: seen.append((name, chunk)), None)
    made: list[int] = []
    try:
        for number, text in ((out_fd, b"out\n"), (out_fd + 1, b"err\n")):
            read_end, write_end = os.pipe()
            os.dup2(read_end, number)
            made.append(number)
            os.close(read_end)
            os.write(write_end, text)
            os.close(write_end)
        sink.attach(out_fd, out_fd + 1, os.getpid())
        sink.read_held()
        assert seen == [("stdout", b"out\n"), ("stderr", b"err\n")]
    finally:
        sink.close()
        for number in made:
            os.close(number)
