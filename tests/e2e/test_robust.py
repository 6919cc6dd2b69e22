"""Hardening (issue 11, items 17 and 19): no tracebacks, exit 70 for bugs, run files that a
planted symbolic link cannot redirect, a torn event line, capped step logs.

Every test runs the real `ll` on a loop file: in process (the `project` fixture) where only
the commands' own handling is under test; in a subprocess through the real entry point (`ll`
below) where its guard is (a bug is exit 70, an OSError one line), where a run is interrupted
by a signal it sends to its own `ll`, and where pipes, fds and terminals are. Faults the
machine does not offer on demand (a bug, Ctrl-C at one moment) are injected by a short Python
prologue that patches one function and then calls the real entry point.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from project import Project, Result

OK = """\
name: ok
initial: first
states:
  first:
    action: echo first >> side.txt
    next: last
  last:
    action: echo last >> terminal.txt
    terminal: true
"""

# Interrupts itself at its second state, once (a marker file says it already did).
STOPS_ONCE = """\
name: stops
initial: a
states:
  a:
    action: echo a >> side.txt
    next: b
  b:
    action: echo b; test -f stopped || { touch stopped; kill -INT $PPID; sleep 30; }
    next: c
  c:
    action: echo c >> terminal.txt
    terminal: true
"""

TRACEBACK = "Traceback (most recent call last)"


def write(tmp_path: Path, text: str, name: str = "loop.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def ll(
    cwd: Path,
    *args: str,
    prologue: str = "",
    env: Any = None,
    timeout: float = 120,
    **kwargs: Any,
) -> subprocess.CompletedProcess[str]:
    """The real `ll` (its entry point, as installed) in `cwd`; `prologue` runs first."""
    code = (
        f"{prologue}\nimport sys\nsys.argv[0] = 'll'\nfrom little_loops.entry import main\nmain()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        errors="replace",  # ll prints undecodable bytes as they are
        timeout=timeout,
        env=env,
        **kwargs,
    )


def no_traceback(proc: Result | subprocess.CompletedProcess[str]) -> None:
    assert TRACEBACK not in proc.stderr + proc.stdout, proc.stderr


def one_runs_state(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    runs = [p for p in (tmp_path / ".loops" / "runs").iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0], json.loads((runs[0] / "state.json").read_text())


def interrupted_run(tmp_path: Path) -> Path:
    write(tmp_path, STOPS_ONCE)
    proc = ll(tmp_path, "run", "loop.yaml", "-q")
    assert proc.returncode == 130, proc.stderr
    return one_runs_state(tmp_path)[0]


# -- 17: a bug is one line, a crash report, exit 70, and a run recorded as ended in error --


BUG_IN_STEP = """
from little_loops.run import runner
def _bug(*args, **kwargs):
    raise ZeroDivisionError("a planted bug")
runner.Runner._remember = _bug
"""


def test_a_bug_during_a_run_is_one_line_a_report_and_exit_70(
    project: Project, tmp_path: Path
) -> None:
    write(tmp_path, OK)
    proc = ll(tmp_path, "run", "loop.yaml", "--junit-xml", "report.xml", prologue=BUG_IN_STEP)
    assert proc.returncode == 70, proc.stderr
    no_traceback(proc)
    run_dir, state = one_runs_state(tmp_path)
    reports = list(run_dir.glob("crash-*.txt"))
    assert len(reports) == 1
    assert "ZeroDivisionError: a planted bug" in reports[0].read_text()
    assert TRACEBACK in reports[0].read_text()  # the traceback is for the report, not the user
    line = next(x for x in (proc.stdout + proc.stderr).splitlines() if "internal error" in x)
    assert "ZeroDivisionError: a planted bug" in line
    assert str(reports[0]) in line
    # Recorded as ended in error, never left "running" (which `ll list` shows as crashed).
    assert (state["status"], state["outcome"], state["exit_code"]) == ("finished", "error", 70)
    assert 'errors="1"' in (tmp_path / "report.xml").read_text()
    listed = project.ll("list")
    assert listed.returncode == 0
    assert " error " in listed.stdout


def test_a_bug_outside_a_run_reports_into_loops_or_the_temp_dir(tmp_path: Path) -> None:
    prologue = (
        "from little_loops.record import runs\n"
        "def _bug(*a, **k):\n    raise KeyError('planted')\n"
        "runs.list_text = _bug\n"
    )
    proc = ll(tmp_path, "list", prologue=prologue, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 70
    no_traceback(proc)
    assert proc.stderr.count("\n") == 1
    report = Path(proc.stderr.rsplit("crash report: ", 1)[1].strip())
    assert report.parent == tmp_path
    assert "KeyError: 'planted'" in report.read_text()
    (tmp_path / ".loops").mkdir()
    proc = ll(tmp_path, "list", prologue=prologue)
    assert proc.returncode == 70
    assert f"crash report: {tmp_path / '.loops'}{os.sep}crash-" in proc.stderr


def test_ctrl_c_before_the_run_is_130_not_aborted(tmp_path: Path) -> None:
    write(tmp_path, OK)
    prologue = (
        "from little_loops.load import loader\n"
        "def _ctrl_c(*a, **k):\n    raise KeyboardInterrupt\n"
        "loader.load = _ctrl_c\n"
    )
    proc = ll(tmp_path, "run", "loop.yaml", prologue=prologue)
    assert (proc.returncode, proc.stderr) == (130, "ll: interrupted\n")


SLEEPS = """\
name: sleeps
initial: a
states:
  a: {action: sleep 30, next: z}
  z: {terminal: true}
"""

# Sends SIGINT to itself the moment `ll` opens its entry module (after the package itself is
# imported): Ctrl-C landing while `ll` is still starting up, at a moment a test can choose.
CTRL_C_AT_IMPORT = """\
import os, signal, sys

def _hook(event, args):
    if event == "open" and not _hook.done and isinstance(args[0], str):
        if os.path.basename(args[0]).startswith("entry.") and "little_loops" in args[0]:
            _hook.done = True
            os.kill(os.getpid(), signal.SIGINT)

_hook.done = False
sys.addaudithook(_hook)
"""


def _launchers() -> dict[str, list[str]]:
    script = Path(sys.executable).parent / "ll"
    found = {"python -m little_loops": [sys.executable, "-m", "little_loops"]}
    if script.exists():
        found["ll"] = [str(script)]
    return found


@pytest.mark.parametrize("launcher", ["python -m little_loops", "ll"])
def test_ctrl_c_while_ll_imports_itself_is_130_and_one_line(tmp_path: Path, launcher: str) -> None:
    command = _launchers().get(launcher)
    if command is None:
        pytest.skip("the ll script is not installed beside this Python")
    write(tmp_path, SLEEPS)
    (tmp_path / "inject").mkdir()
    (tmp_path / "inject" / "sitecustomize.py").write_text(CTRL_C_AT_IMPORT)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "inject")}
    proc = subprocess.run(
        [*command, "run", "loop.yaml"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (proc.returncode, proc.stderr) == (130, "ll: interrupted\n")


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["python -m little_loops", "ll"])
def test_ctrl_c_in_the_first_milliseconds_never_shows_a_traceback(
    tmp_path: Path, launcher: str
) -> None:
    command = _launchers().get(launcher)
    if command is None:
        pytest.skip("the ll script is not installed beside this Python")
    write(tmp_path, SLEEPS)
    for delay_ms in (0, 5, 10, 20, 40, 60, 80, 100, 130, 160, 200, 250, 300):
        proc = subprocess.Popen(
            [*command, "run", "loop.yaml"], cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(delay_ms / 1000)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        if TRACEBACK in err:
            # Python's own start-up (its `site` imports, finding the package, loading its
            # first module) comes before any line of ll and cannot be covered: no line of ll
            # may be in the traceback. A Ctrl-C that lands while the interpreter reads the
            # package's `__init__` is raised as its code starts, before its first line: the
            # frame reads "line 0", and no line of ll has run (seen once in CI, at 20 ms).
            sep = re.escape(os.sep)
            ours = re.findall(rf'File "[^"]*{sep}little_loops{sep}([^"]*)", line (\d+)', err)
            assert all(where == ("__init__.py", "0") for where in ours), (delay_ms, err)
        elif proc.returncode == -signal.SIGINT:
            # Before Python installs its own handler the signal ends the process as it ends
            # any program (a shell shows 130), silently.
            assert err == "", (delay_ms, err)
        else:
            assert proc.returncode == 130, (delay_ms, err)
            # Still starting, or (ll starts in less than the longest delay) its run had begun
            # and stopped resumably.
            assert err.startswith("ll: interrupted") or re.fullmatch(
                r"ll: run \S+ stopped at step \d+; resume with: ll resume \S+\n", err
            ), (delay_ms, err)


def test_ctrl_c_while_the_judge_client_is_built_stops_the_run_resumably(tmp_path: Path) -> None:
    write(
        tmp_path,
        """\
        name: judged
        initial: a
        states:
          a:
            action: echo done
            evaluate: {type: llm_structured, prompt: Is it done?}
            route: {_: end}
          end: {terminal: true}
        """,
    )
    prologue = (
        "from little_loops.evaluators import llm\n"
        "def _ctrl_c(*a, **k):\n    raise KeyboardInterrupt\n"
        "llm.JudgeSession.__init__ = _ctrl_c\n"
    )
    proc = ll(tmp_path, "run", "loop.yaml", prologue=prologue)
    assert proc.returncode == 130, proc.stderr
    no_traceback(proc)
    _, state = one_runs_state(tmp_path)
    assert (state["status"], state["current"]) == ("interrupted", "a")


def test_disk_full_is_one_line_and_leaves_a_resumable_state(tmp_path: Path) -> None:
    if shutil.which("unshare") is None or sys.platform != "linux":
        pytest.skip("needs unshare(1) to mount a tiny tmpfs")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not available here")
    write(
        tmp_path,
        """\
        name: big
        initial: a
        states:
          a:
            action: head -c 400000 /dev/zero | tr '\\0' x
            next: b
          b: {terminal: true}
        """,
    )
    mnt = tmp_path / "small"
    mnt.mkdir()
    script = (
        f"mount -t tmpfs -o size=256k tmpfs {mnt} && cp loop.yaml {mnt}/ && cd {mnt} && "
        f"{sys.executable} -m little_loops run loop.yaml; echo rc=$?; "
        "cat .loops/runs/*/state.json"
    )
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    no_traceback(proc)
    assert "rc=3" in proc.stdout
    # The run records that it stopped (the torn write gives its space back), or, when even
    # that cannot be written, `ll` says so itself.
    said = (proc.stdout + proc.stderr).splitlines()
    errors = [x for x in said if x.startswith(("ll: error", "ll: interrupted at 'a'"))]
    assert errors, said
    assert "No space left on device; free some space" in errors[0]
    assert f"{mnt}{os.sep}.loops{os.sep}runs{os.sep}" in errors[0]  # names the file
    # state.json is whole (never swapped in half-written), so the run can be resumed.
    state = json.loads(proc.stdout.split("rc=3\n", 1)[1])
    assert state["current"] == "a"


def test_a_read_only_directory_is_one_line(project: Project, tmp_path: Path) -> None:
    write(tmp_path, OK)
    # `.loops` that cannot be a directory: the same path through the code as a read-only one.
    (tmp_path / ".loops").write_text("not a directory")
    proc = project.ll("run", "loop.yaml")
    no_traceback(proc)
    assert proc.returncode == 3
    assert proc.stderr.startswith("ll: error: cannot ")
    assert proc.stderr.count("\n") == 1


def test_read_only_file_system_names_the_fix(tmp_path: Path) -> None:
    if shutil.which("unshare") is None or sys.platform != "linux":
        pytest.skip("needs unshare(1)")
    if subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("user namespaces are not available here")
    write(tmp_path, OK)
    script = (
        f"mount --bind {tmp_path} {tmp_path} && mount -o remount,bind,ro {tmp_path} && "
        f"cd {tmp_path} && {sys.executable} -m little_loops run loop.yaml"
    )
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=60
    )
    if "mount" in proc.stderr:
        pytest.skip(f"cannot remount read-only here: {proc.stderr.strip()}")
    no_traceback(proc)
    assert proc.returncode == 3
    assert proc.stderr == (
        f"ll: error: cannot create {tmp_path / '.loops'}: Read-only file system; "
        "run ll in a directory on a writable file system\n"
    )


def test_unreadable_run_files_are_one_line_and_do_not_break_list(
    project: Project, tmp_path: Path
) -> None:
    write(tmp_path, OK)
    assert project.ll("run", "loop.yaml", "-q").returncode == 0
    good, _ = one_runs_state(tmp_path)
    bad = good.parent / "20200101-000000-ok-dead"
    shutil.copytree(good, bad)
    # Unreadable as a file whoever runs the test (root reads a file of mode 000).
    (bad / "events.jsonl").unlink()
    (bad / "events.jsonl").mkdir()
    if os.geteuid() != 0:
        (bad / "state.json").chmod(0)
    listed = project.ll("list")
    assert listed.returncode == 0, listed.stderr
    assert good.name in listed.stdout
    for args in (["status", bad.name], ["logs", bad.name], ["logs", bad.name, "--step", "1"]):
        proc = ll(tmp_path, *args)  # the entry point's guard makes an OSError one line
        no_traceback(proc)
        assert proc.returncode == 3, args
        assert proc.stderr.startswith("ll: error: "), args
        assert proc.stderr.count("\n") == 1, args


def test_a_state_file_with_wrong_types(project: Project, tmp_path: Path) -> None:
    write(tmp_path, OK)
    assert project.ll("run", "loop.yaml", "-q").returncode == 0
    good, state = one_runs_state(tmp_path)
    bad = good.parent / "20200101-000000-ok-bad1"
    shutil.copytree(good, bad)
    state.update(step="three", max_iterations=[1], status="interrupted")
    (bad / "state.json").write_text(json.dumps(state))
    listed = project.ll("list")
    assert listed.returncode == 0, listed.stderr
    assert good.name in listed.stdout
    assert project.ll("history").returncode == 0
    for args in (["status", bad.name], ["resume", bad.name]):
        proc = project.ll(*args)
        no_traceback(proc)
        assert proc.returncode == 3
        assert "corrupted state file ('max_iterations' should be int" in proc.stderr


def test_junit_write_failure_after_a_good_run_keeps_its_exit_code(
    project: Project, tmp_path: Path
) -> None:
    # The report's directory exists when the run starts; the terminal action replaces it
    # with a file, so writing the report at the end fails (as a full disk would).
    write(
        tmp_path,
        """\
        name: ok
        initial: first
        states:
          first:
            action: echo first >> side.txt
            next: last
          last:
            action: rm -r out && echo not a directory > out && echo last >> terminal.txt
            terminal: true
        """,
    )
    proc = project.ll("run", "loop.yaml", "-q", "--junit-xml", "out/report.xml")
    no_traceback(proc)
    assert proc.returncode == 0
    assert proc.stderr == (
        "ll: warning: cannot write the JUnit report to out/report.xml: Not a directory\n"
    )
    _, state = one_runs_state(tmp_path)
    assert (state["status"], state["outcome"]) == ("finished", "success")
    again = project.ll("resume", state["run_id"])
    assert again.returncode == 3
    assert "already finished" in again.stderr
    assert (tmp_path / "terminal.txt").read_text() == "last\n"  # the terminal ran once


def test_junit_to_a_device_writes_into_it(project: Project, tmp_path: Path) -> None:
    write(tmp_path, OK)
    # /dev/stdout is the process's own standard output: `ll` needs a process of its own.
    proc = project.ll("run", "loop.yaml", "-q", "--junit-xml", "/dev/stdout", process=True)
    assert proc.returncode == 0, proc.stderr
    assert "<testsuites" in proc.stdout


def test_junit_through_a_link_to_standard_output_never_replaces_the_link(
    tmp_path: Path, ll_cmd: list[str]
) -> None:
    # `ll run --junit-xml /dev/stdout > log`, as root, replaced the system's /dev/stdout link
    # with a regular file: fd 1 was a regular file, so the path passed as one and was renamed
    # over. The same link made here (never the real /dev/stdout) must stay a link, and the
    # report must land in the log after what the run printed, not over it.
    write(tmp_path, OK)
    link = tmp_path / "stdout-link"
    link.symlink_to("/proc/self/fd/1")
    log = tmp_path / "log.txt"
    with log.open("w") as out:
        proc = subprocess.run(
            [*ll_cmd, "run", "loop.yaml", "--junit-xml", str(link)],
            cwd=tmp_path, stdout=out, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink()
    assert os.readlink(link) == "/proc/self/fd/1"
    text = log.read_text()
    assert "<testsuites" in text
    assert text.index("<testsuites") > 0  # after the run's own lines, which were kept


def test_junit_to_a_link_replaces_its_target_and_keeps_the_link(
    project: Project, tmp_path: Path
) -> None:
    write(tmp_path, OK)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "real.xml").write_text("old")
    (tmp_path / "report.xml").symlink_to("reports/real.xml")
    proc = project.ll("run", "loop.yaml", "-q", "--junit-xml", "report.xml")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "report.xml").is_symlink()
    assert (tmp_path / "reports" / "real.xml").read_text().startswith("<?xml")


def test_unwritable_report_paths_are_refused_before_the_run(
    project: Project, tmp_path: Path
) -> None:
    write(tmp_path, OK)
    (tmp_path / "afile").write_text("")
    for option in ("--junit-xml", "--record"):
        proc = project.ll("run", "loop.yaml", option, "afile/report")
        no_traceback(proc)
        assert proc.returncode == 2, (option, proc.stderr)
        assert proc.stderr.startswith("ll: error: cannot write ")
        assert "afile" in proc.stderr
    assert not (tmp_path / "side.txt").exists()


def test_huge_timeouts_and_backoff_are_load_errors(project: Project, tmp_path: Path) -> None:
    write(
        tmp_path,
        """\
        name: huge
        initial: a
        timeout: 3000000
        backoff: 9999999999
        states:
          a:
            action: sleep 0.2
            timeout: 2200000
            retry: {max_attempts: 99999, max_delay: 9999999999}
            next: b
          b: {terminal: true}
        """,
    )
    proc = project.ll("validate", "loop.yaml")
    assert proc.returncode == 2
    assert proc.stdout.splitlines() == [
        "loop.yaml:3:10: error: 'timeout' must be at most 2000000, not 3000000",
        "loop.yaml:4:10: error: 'backoff' must be at most 2000000, not 9999999999",
        "loop.yaml:8:14: error: 'timeout' of state 'a' must be at most 2000000, not 2200000",
        "loop.yaml:9:27: error: 'retry.max_attempts' of state 'a' must be at most 10000, not 99999",
        "loop.yaml:9:45: error: 'retry.max_delay' of state 'a' must be at most 2000000, "
        "not 9999999999",
    ]


def test_a_steep_retry_backoff_does_not_overflow(project: Project, tmp_path: Path) -> None:
    write(
        tmp_path,
        """\
        name: steep
        initial: a
        states:
          a:
            action: exit 2
            retry: {max_attempts: 150, interval: 0.5, backoff_rate: 1000, max_delay: 0,
                    on: [error]}
            next: b
            on_error: b
          b: {terminal: true}
        """,
    )
    proc = project.ll("run", "loop.yaml", "-q")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr


def test_deep_json_is_an_error_verdict(project: Project, tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    write(
        tmp_path,
        """\
        name: deep
        initial: a
        states:
          a:
            action: cat deep.json
            evaluate: {type: output_json, path: ., operator: eq, target: "1"}
            on_success: b
            on_failure: b
            on_error: b
          b: {terminal: true}
        """,
    )
    proc = project.ll("run", "loop.yaml", "--json")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    [judged] = [json.loads(x) for x in proc.stdout.splitlines() if '"evaluate"' in x]
    assert judged["verdict"] == "error"
    assert "nested more than 200 levels" in judged["reason"]


def test_run_from_a_pipe_is_refused(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, textwrap.dedent(OK).encode())
    os.close(write_end)
    try:
        proc = ll(tmp_path, "run", f"/dev/fd/{read_end}", pass_fds=(read_end,))
    finally:
        os.close(read_end)
    no_traceback(proc)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"ll: error: /dev/fd/{read_end}: not a regular file (a pipe, a device or <(...)); "
        "ll run reads the loop file again to resume the run: save it to a file and run that\n"
    )
    assert not (tmp_path / "side.txt").exists()


@pytest.mark.slow  # it waits out ll's fixed 5 s for a pipe's writer
def test_validate_reads_a_pipe_and_gives_up_on_a_fifo_nobody_writes(tmp_path: Path) -> None:
    proc = ll(tmp_path, "validate", "/dev/stdin", input=textwrap.dedent(OK))
    assert (proc.returncode, proc.stdout) == (0, "")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    proc = ll(tmp_path, "validate", str(fifo), timeout=60)
    assert time.monotonic() - started < 50  # it used to wait for ever
    assert proc.returncode == 2
    assert (
        proc.stdout == f"{fifo}:1:1: error: a pipe nobody wrote to within 5 s; give a loop file\n"
    )


def test_bytes_that_are_not_utf8_in_env_cwd_and_path(tmp_path: Path) -> None:
    odd = Path(os.fsdecode(os.fsencode(tmp_path) + b"/dir-\xff"))
    odd.mkdir()
    name = os.fsdecode(b"loop-\xfe.yaml")
    write(
        odd,
        """\
        name: odd
        initial: a
        states:
          a:
            action: printf '%s\\n' "${env.ODD}" "$PWD"
            capture: a
            next: b
          b:
            action: echo "${captured.a.output}" | od -c | head -1
            terminal: true
        """,
        name=name,
    )
    env = os.environ.copy()
    env["ODD"] = os.fsdecode(b"value-\xff\xfe")
    proc = ll(odd, "run", name, env=env)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    run_dir, state = one_runs_state(odd)
    assert state["outcome"] == "success"
    assert state["options"]["cwd"] == str(odd)  # the odd bytes read back as they were
    for line in (run_dir / "events.jsonl").read_bytes().splitlines():
        json.loads(line.decode("utf-8"))  # valid UTF-8 JSON, every line
    assert ll(odd, "list").returncode == 0
    assert ll(odd, "logs").returncode == 0


def test_resume_force_after_the_current_state_was_renamed(project: Project, tmp_path: Path) -> None:
    interrupted_run(tmp_path)
    path = tmp_path / "loop.yaml"
    path.write_text(
        path.read_text().replace("  b:\n", "  b2:\n").replace("next: b\n", "next: b2\n")
    )
    proc = project.ll("resume", "--force")
    no_traceback(proc)
    assert proc.returncode == 3
    assert "stopped at state 'b', which" in proc.stderr
    assert "restore that state" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_closed_stdout_does_not_stop_the_run(tmp_path: Path) -> None:
    write(
        tmp_path,
        """\
        name: chatty
        initial: a
        states:
          a:
            action: seq 1 2000; sleep 0.5; echo done > finished.txt
            next: b
          b:
            action: seq 1 2000
            terminal: true
        """,
    )
    code = "import sys\nsys.argv[0] = 'll'\nfrom little_loops.entry import main\nmain()\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "run", "loop.yaml", "-v"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 0, err
    assert TRACEBACK not in err
    assert "BrokenPipe" not in err
    assert (tmp_path / "finished.txt").read_text() == "done\n"
    _, state = one_runs_state(tmp_path)
    assert state["outcome"] == "success"


def test_validate_into_a_closed_pipe(tmp_path: Path) -> None:
    bad = "name: x\ninitial: nowhere\nstates:\n" + "".join(
        f"  s{i}: {{action: 'true', next: s{i + 1}x}}\n" for i in range(3000)
    )
    write(tmp_path, bad)
    code = "import sys\nsys.argv[0] = 'll'\nfrom little_loops.entry import main\nmain()\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "validate", "loop.yaml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 2
    assert err == ""


# -- 19: planted symbolic links, a torn event line, capped step logs ----------------------


def test_a_planted_link_for_the_run_log_is_not_followed(project: Project, tmp_path: Path) -> None:
    run_dir = interrupted_run(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run_dir / "steps.log").unlink(missing_ok=True)
    (run_dir / "steps.log").symlink_to(victim)
    proc = project.ll("resume")
    no_traceback(proc)
    assert victim.read_text() == "precious\n"
    assert proc.returncode == 3
    assert "steps.log: it is a symbolic link, which ll does not follow" in proc.stdout


@pytest.mark.parametrize("name", ["events.jsonl", ".state.next"])
def test_a_planted_link_for_a_run_file_is_not_followed(
    project: Project, tmp_path: Path, name: str
) -> None:
    run_dir = interrupted_run(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run_dir / name).unlink(missing_ok=True)
    (run_dir / name).symlink_to(victim)
    proc = ll(tmp_path, "resume")  # the entry point's guard makes an OSError one line
    no_traceback(proc)
    assert victim.read_text() == "precious\n"
    assert proc.returncode == 3
    assert "is a symbolic link, which ll does not follow inside .loops/" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_a_planted_link_for_the_lock_file_is_not_followed(project: Project, tmp_path: Path) -> None:
    import hashlib

    path = write(tmp_path, OK)
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    locks = tmp_path / ".loops" / "locks"
    locks.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (locks / f"{key}.lock").symlink_to(victim)
    proc = project.ll("run", "loop.yaml")
    no_traceback(proc)
    assert victim.read_text() == "precious\n"
    assert proc.returncode == 3
    assert "symbolic link" in proc.stderr


def test_a_symlinked_run_directory_is_refused(project: Project, tmp_path: Path) -> None:
    run_dir = interrupted_run(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    run_dir.rename(elsewhere)
    run_dir.symlink_to(elsewhere)
    proc = project.ll("resume", run_dir.name)
    no_traceback(proc)
    assert proc.returncode == 3
    assert f"{run_dir} is a symbolic link; ll does not follow links" in proc.stderr
    assert project.ll("resume", str(run_dir)).returncode == 3
    assert not (elsewhere / "terminal.txt").exists()
    listed = project.ll("list")
    assert listed.returncode == 0
    assert run_dir.name not in listed.stdout


def test_a_torn_last_event_line_does_not_swallow_the_resumed_start(
    project: Project, tmp_path: Path
) -> None:
    run_dir = interrupted_run(tmp_path)
    events = run_dir / "events.jsonl"
    with events.open("a") as fh:
        fh.write('{"event":"state_enter","ts":"2026-')  # a crash mid-write
    proc = project.ll("resume", "-q")
    assert proc.returncode == 0, proc.stderr
    lines = events.read_text().splitlines()
    parsed = [json.loads(x) for x in lines if x.endswith("}")]
    starts = [e for e in parsed if e["event"] == "loop_start"]
    assert [e["resumed"] for e in starts] == [False, True]
    assert sum(1 for x in lines if not x.endswith("}")) == 1  # the fragment, on its own line


def test_step_logs_are_capped_with_a_marker(project: Project, tmp_path: Path) -> None:
    write(
        tmp_path,
        """\
        name: loud
        initial: a
        context: {token: hunter2}
        secrets: [token]
        states:
          a:
            action: head -c 100000 /dev/zero | tr '\\0' x
            next: b
          b:
            action: "echo ${context.token}; head -c 100000 /dev/zero | tr '\\\\0' y"
            terminal: true
        """,
    )
    env = {"LL_MAX_LOG_BYTES": "10K"}
    proc = project.ll("run", "loop.yaml", "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    run_dir, _ = one_runs_state(tmp_path)
    marker = b"\n[ll: log cut at 10240 bytes (LL_MAX_LOG_BYTES); the rest of this step's output"
    for step in (1, 2):  # the plain and the redacting writer
        shown = project.ll("logs", run_dir.name, "--step", str(step))
        data = shown.stdout.encode()
        assert data.startswith(b"***\ny" if step == 2 else b"xxx")
        assert len(data) < 10240 + 200, step
        assert marker in data, step
    bad = project.ll("run", "loop.yaml", env={"LL_MAX_LOG_BYTES": "lots"})
    assert bad.returncode == 2
    assert "LL_MAX_LOG_BYTES='lots' is not a size" in bad.stderr


def test_step_logs_keep_50_mib_by_default(project: Project, tmp_path: Path) -> None:
    write(
        tmp_path,
        """\
        name: loud
        initial: a
        states:
          a:
            action: head -c 300000 /dev/zero
            terminal: true
        """,
    )
    proc = project.ll("run", "loop.yaml", "-q")
    assert proc.returncode == 0
    run_dir, _ = one_runs_state(tmp_path)
    assert (run_dir / "steps.log").stat().st_size == 300000
