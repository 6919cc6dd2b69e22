"""A plain command (words the shell would only split and exec) runs without /bin/sh, and gives
what `/bin/sh -c` gives: the same exit code, output, error lines and environment, for every
ending (an exit status, a signal, a program not found or not runnable)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from procs import alive
from project import Project

from little_loops.actions import plain, process, run_shell
from little_loops.actions.reaper import GUARD

pytestmark = pytest.mark.skipif(
    not plain.sh_is_dash(), reason="plain commands skip /bin/sh only where it is dash"
)


@pytest.mark.parametrize(
    "command",
    [
        "cat one.txt",
        "pytest -q tests/test_x.py",
        "make CC=gcc -j4",
        "  git status  \n",
        "./build.sh --out=dist/x,y:z@1%2+3",
    ],
)
def test_words_the_shell_only_splits_are_plain(command: str) -> None:
    assert plain.plain_argv(command, "/bin/sh") == command.split()


@pytest.mark.parametrize(
    "command",
    [
        "echo hi",  # builtins: the shell's own, not /bin/echo
        "true",
        "printf x",
        "cd /tmp",
        "exec cat x",
        ". ./env.sh",
        "if",
        "time make",  # a keyword in bash
        "FOO=1 make",  # an assignment
        "cat *.txt",  # a glob
        "cat 'a b'",
        'cat "a"',
        "cat a\\ b",
        "cat $HOME",
        "cat ~/x",
        "cat a > b",
        "a | b",
        "a; b",
        "a && b",
        "a &",
        "cat a#b",
        "cat `x`",
        "cat a\nls",
        "{ cat a; }",
        "",
        "   ",
    ],
)
def test_anything_the_shell_would_read_more_into_is_left_to_it(command: str) -> None:
    assert plain.plain_argv(command, "/bin/sh") is None


def test_another_shell_keeps_every_action() -> None:
    assert plain.plain_argv("cat one.txt", "/bin/bash") is None
    assert plain.plain_argv("cat one.txt", "/usr/bin/sh") is None


def _dash_says(word: str) -> str:
    return subprocess.run(
        ["/bin/sh", "-c", f"type {word}"], capture_output=True, text=True, check=False
    ).stdout


def test_every_builtin_and_keyword_dash_or_bash_knows_is_left_to_the_shell() -> None:
    """Asks dash about every builtin and keyword bash lists (and the list's own words): each
    one dash runs itself must be in SHELL_WORDS, or `ll` would exec a program of that name."""
    words = set(plain.SHELL_WORDS) | {"cat", "ls", "env", "sleep", "make", "git", "kill"}
    if shutil.which("bash"):
        listed = subprocess.run(
            ["bash", "-c", "compgen -b; compgen -k"], capture_output=True, text=True, check=True
        ).stdout.split()
        words |= set(listed)
    missing = []
    for word in sorted(words):
        said = _dash_says(word)
        if ("builtin" in said or "keyword" in said or "reserved" in said) and (
            word not in plain.SHELL_WORDS
        ):
            missing.append(f"{word}: {said.strip()}")
    assert not missing, missing
    # and the programs are programs
    assert plain.plain_argv("kill 1", "/bin/sh") is None  # dash's builtin kill
    assert plain.plain_argv("sleep 1", "/bin/sh") == ["sleep", "1"]


def _spawned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The programs `ll` execs without a shell from now on."""
    GUARD.ready()
    seen: list[str] = []
    real = os.posix_spawnp

    def counted(path: Any, *args: Any, **kwargs: Any) -> int:
        pid = real(path, *args, **kwargs)
        seen.append(os.fspath(path))
        return pid

    monkeypatch.setattr(os, "posix_spawnp", counted)
    return seen


def _script(where: Path, name: str, text: str, mode: int = 0o755) -> None:
    path = where / name
    path.write_text(text)
    path.chmod(mode)


def _by_sh(command: str, cwd: Path, env: dict[str, str] | None) -> tuple[int, str, str]:
    """What `/bin/sh -c command` gives, started as `ll` starts an action."""
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        start_new_session=True,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


CASES = {
    "prints": ("cat data.txt", True),
    "fails": ("ls no-such-file", True),
    "terminated": ("./die TERM", True),
    "killed": ("./die KILL", True),
    "segfault": ("./die SEGV", True),
    "user signal": ("./die USR1", True),
    "interrupted": ("./die INT", True),  # SIGINT: dash says nothing
    "broken pipe": ("./die PIPE", True),  # SIGPIPE: dash says nothing
    "not found": ("no-such-program-xyz --flag", False),
    "not executable": ("./not-executable", False),
    "no #! line": ("./no-hashbang arg", False),  # dash reads it as a script itself
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_plain_command_gives_what_sh_gives(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command, direct = CASES[case]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.txt").write_text("one\ntwo\n")
    _script(tmp_path, "die", "#!/bin/sh\necho before\nkill -s $1 $$\necho after\n")
    _script(tmp_path, "not-executable", "#!/bin/sh\necho no\n", mode=0o644)
    _script(tmp_path, "no-hashbang", 'echo "read by the shell: $1"\n')
    env = {**os.environ, "PWD": str(tmp_path)}
    spawned = _spawned(monkeypatch)
    got = run_shell(command, cwd=tmp_path, env=env)
    assert spawned == ([command.split()[0]] if direct else [])
    expected = _by_sh(command, tmp_path, GUARD.marked(env))
    assert (got.exit_code, got.output, got.stderr) == expected


def test_a_plain_command_gets_the_environment_dash_would_give_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dash exports PWD (kept where it names the directory, else the physical path) and drops
    variables with names it cannot hold; `env` prints what the program got."""
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.chdir(real)
    spawned = _spawned(monkeypatch)
    base = {"PATH": os.environ["PATH"], "LANG": "C"}
    for env in (
        base,  # no PWD: dash sets it
        {**base, "PWD": "/nowhere"},  # a PWD naming another place: replaced
        {**base, "PWD": str(link)},  # a PWD naming this directory by a link: kept
        {**base, "PWD": f"{real}/."},
        {**base, "a-b": "1", "BASH_FUNC_f%%": "() { :; }"},  # dropped by dash
    ):
        got = run_shell("env", cwd=Path(os.getcwd()), env=env)
        expected = _by_sh("env", Path(os.getcwd()), GUARD.marked(env))
        assert (got.exit_code, sorted(got.output.splitlines())) == (
            expected[0],
            sorted(expected[1].splitlines()),
        ), env
    assert len(spawned) == 4  # the names dash drops send the last one through the shell


def test_a_command_killed_by_ll_for_its_timeout_is_still_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spawned = _spawned(monkeypatch)
    got = run_shell("sleep 30", cwd=tmp_path, timeout=0.3)
    assert spawned == ["sleep"]
    assert (got.timed_out, got.exit_code, got.stderr) == (True, None, "")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (signal.SIGTERM, (143, b"Terminated\n")),
        (signal.SIGSEGV | 0x80, (139, b"Segmentation fault (core dumped)\n")),
        (signal.SIGINT, (130, b"")),
        (signal.SIGPIPE, (141, b"")),
        (3 << 8, None),  # exit 3: not a signal
    ],
)
def test_a_signal_ending_reads_as_dash_reports_it(
    status: int, expected: tuple[int, bytes] | None
) -> None:
    """Wait statuses in the kernel's form (the core bit is 0x80)."""
    assert plain.signal_ending(status) == expected


SHOW = """\
name: plain
initial: who
states:
  who:
    action: ./parent
    capture: parent
    next: die
  die:
    action: ./die TERM
    next: done
  done:
    terminal: true
"""


def test_ll_runs_a_plain_action_itself_and_tells_its_signal_as_sh_would(
    project: Project,
) -> None:
    """Through the real `ll`: the action's parent is `ll` (python), not a shell, and the
    command a signal ended fails with dash's exit code and line."""
    _script(project.path, "parent", "#!/bin/sh\ncat /proc/$PPID/comm\n")
    _script(project.path, "die", "#!/bin/sh\necho before\nkill -s $1 $$\n")
    loop = project.write("plain.yaml", SHOW)
    result = project.ll("run", loop, process=True)
    assert result.returncode != 0
    assert "exit code 143" in result.stdout + result.stderr, result
    assert "Terminated" in result.stdout + result.stderr, result
    (run,) = (project.path / ".loops" / "runs").iterdir()
    log = (run / "steps.log").read_text()
    assert log.startswith("python"), log  # `ll`, a python process, started ./parent
    assert "before\nTerminated\n" in log


def test_process_keeps_the_wait_status_of_a_plain_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _script(tmp_path, "die", "#!/bin/sh\nkill -s TERM $$\n")
    got = run_shell("./die", cwd=tmp_path)
    assert (got.exit_code, got.stderr) == (143, "Terminated\n")
    assert process._Spawned(1, plain=True).plain


def _children(pid: int) -> list[int]:
    """The children of `pid`, from /proc (any of its threads)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(p) for p in (task / "children").read_text().split()]
    return found


@pytest.mark.xdist_group("processes")
@pytest.mark.parametrize(("how", "code"), [("SIGTERM", 143), ("SIGKILL", -9)])
def test_a_plain_action_goes_with_a_stopped_or_killed_ll(
    project: Project, how: str, code: int
) -> None:
    """A plain command is `ll`'s own child, with no shell between: stopping `ll` ends it, and
    after a `kill -9` the guard does."""
    loop = project.write(
        "wait.yaml",
        """\
        name: wait
        initial: nap
        states:
          nap:
            action: sleep 60
            next: done
          done:
            terminal: true
        """,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "little_loops", "run", "-q", str(loop)],
        cwd=project.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sleeper = None
    try:
        deadline = time.monotonic() + 30
        while sleeper is None:
            assert time.monotonic() < deadline, "no sleep started"
            for pid in _children(proc.pid):
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                        sleeper = pid
            time.sleep(0.02)
        proc.send_signal(getattr(signal, how))
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == code, err
        gone = time.monotonic() + 10  # after a kill -9, the guard's grace
        while alive(sleeper) and time.monotonic() < gone:
            time.sleep(0.02)
        assert not alive(sleeper), f"the plain action outlived ll ({how})"
    finally:
        if sleeper is not None:
            with contextlib.suppress(OSError):
                os.kill(sleeper, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_another_path_than_lls_goes_through_the_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """posix_spawnp searches `ll`'s own PATH: an action given another one is run by the shell,
    which searches that one (here a folder holding a `tool` that PATH alone finds)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bin").mkdir()
    _script(tmp_path / "bin", "tool", "#!/bin/sh\necho found in bin\n")
    spawned = _spawned(monkeypatch)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    got = run_shell("tool", cwd=tmp_path, env=env)
    assert (got.exit_code, got.output, spawned) == (0, "found in bin\n", [])
    assert run_shell("no-such-tool", cwd=tmp_path).exit_code == 127  # ours: not found either
    assert spawned == []


def test_a_path_changed_in_lls_own_environment_is_the_one_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An action given `ll`'s own environment (no `env:`) is exec'd without a comparison of
    PATHs, which are one: a PATH changed in that environment between two actions (by a
    caller of `ll` in process) is the one posix_spawnp searches."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bin").mkdir()
    _script(tmp_path / "bin", "tool", "#!/bin/sh\necho found in bin\n")
    spawned = _spawned(monkeypatch)
    assert run_shell("tool", cwd=tmp_path).exit_code == 127  # not on PATH yet (by the shell)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    got = run_shell("tool", cwd=tmp_path)
    assert (got.exit_code, got.output) == (0, "found in bin\n")
    assert spawned == ["tool"]  # exec'd without the shell (the first, not found, went to it)


def test_a_plain_commands_words_are_a_new_list_at_each_call() -> None:
    """plain_argv keeps its answers by command text: what a caller does with the list it got
    never reaches the next caller, another shell still gets None, and the answers kept stay
    few."""
    words = plain.plain_argv("cat one.txt", "/bin/sh")
    assert words == ["cat", "one.txt"]
    words.append("two.txt")
    assert plain.plain_argv("cat one.txt", "/bin/sh") == ["cat", "one.txt"]
    assert plain.plain_argv("cat one.txt", "/bin/bash") is None
    assert plain.plain_argv("echo hi", "/bin/sh") is None  # a builtin, kept as None
    for n in range(600):
        assert plain.plain_argv(f"cat file{n}.txt", "/bin/sh") == ["cat", f"file{n}.txt"]
    assert len(plain._PLAIN_SEEN) <= 257
