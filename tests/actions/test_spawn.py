"""How an action's process is started: `os.posix_spawn` where it can do what Popen would (the
action runs in ll's own directory), else `subprocess.Popen`. Both must give the child the same
world: a session and group of its own, stdin from /dev/null, the default disposition of the
signals Python ignores, no blocked signal, ll's environment, and none of ll's descriptors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from project import Project

from little_loops.actions import ActionStartError, process, run_shell
from little_loops.actions.reaper import GUARD

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

# What the shell sees of itself, read with builtins only (a child it started would see it
# in the middle of starting that child: signals blocked, a pipe open): its session and group
# against its pid, its stdin, the signals it ignores and blocks, one variable of the
# environment, where it runs, and its descriptors.
PROBE = r"""
read -r stat < /proc/$$/stat
set -- ${stat##*) }
echo "group=$(( $3 == $$ )) session=$(( $4 == $$ ))"
while read -r key value; do
  case $key in SigBlk:|SigIgn:) echo "$key $value";; esac
done < /proc/$$/status
echo "probe=$LL_SPAWN_PROBE"
echo "$PWD"
for fd in /proc/$$/fd/*; do printf '%s ' "${fd##*/}"; done
"""
STDIN = 'read -r line; echo "read=$? [$line]"'


def _started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The children posix_spawn starts from now on, counted (the guard that outlives ll, which
    Popen may start with posix_spawn, is started first)."""
    GUARD.ready()
    spawned: list[str] = []
    real = os.posix_spawn

    def counted(path: Any, *args: Any, **kwargs: Any) -> int:
        spawned.append(os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "posix_spawn", counted)
    return spawned


def test_both_ways_of_starting_an_action_give_the_child_the_same_world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LL_SPAWN_PROBE", "seen")
    spawned = _started(monkeypatch)
    # A descriptor a child would inherit, as one given to ll by whatever started it.
    leaked = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(leaked, True)
    # A signal ll was started with ignored (as `nohup` starts it) stays ignored in the child;
    # one ll handles is back at its default there.
    ignore = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    handle = signal.signal(signal.SIGUSR2, lambda *_: None)
    try:
        monkeypatch.setattr(process, "_INHERITED", None)  # looked for afresh at the next action
        by_spawn = run_shell(PROBE, cwd=tmp_path)
        assert spawned == ["/bin/sh"]
        monkeypatch.setattr(process, "_INHERITED", False)  # Popen from here on
        by_popen = run_shell(PROBE, cwd=tmp_path)
        assert spawned == ["/bin/sh"]
    finally:
        os.close(leaked)
        signal.signal(signal.SIGUSR1, ignore)
        signal.signal(signal.SIGUSR2, handle)
    assert by_spawn.exit_code == by_popen.exit_code == 0, by_spawn.stderr + by_popen.stderr
    spawn_seen, popen_seen = by_spawn.output.splitlines(), by_popen.output.splitlines()
    # The one difference: glibc's posix_spawn leaves its own two signals (32 and 33, which
    # it keeps from programs: no program can set them) ignored in the child; the C library of
    # the program run takes them back as it needs them. Every signal a program can use is the
    # same both ways.
    internal = 1 << (32 - 1) | 1 << (33 - 1)
    assert spawn_seen[2].startswith("SigIgn:"), spawn_seen
    ignored = [int(seen[2].split()[1], 16) & ~internal for seen in (spawn_seen, popen_seen)]
    assert ignored[0] == ignored[1], (spawn_seen[2], popen_seen[2])
    del spawn_seen[2], popen_seen[2]
    assert spawn_seen == popen_seen
    assert spawn_seen[0] == "group=1 session=1"
    assert spawn_seen[1] == "SigBlk: 0000000000000000"
    assert spawn_seen[2:4] == ["probe=seen", str(tmp_path)]
    # 0, 1, 2 and the folder the shell is listing: not `leaked`, nor the pipes' other ends.
    assert len(spawn_seen[4].split()) == 4, spawn_seen[4]
    assert str(leaked) not in spawn_seen[4].split()[3:], spawn_seen[4]
    # SIGPIPE (13) and SIGXFSZ (25), which Python ignores, are back to their default.
    assert not ignored[0] & (1 << (13 - 1) | 1 << (25 - 1)), ignored
    assert ignored[0] & 1 << (signal.SIGUSR1 - 1), ignored
    assert not ignored[0] & 1 << (signal.SIGUSR2 - 1), ignored
    # stdin is /dev/null: an action that reads it gets end of file at once
    assert run_shell(STDIN, cwd=tmp_path).output == "read=1 []\n"


def test_an_action_elsewhere_than_lls_directory_is_started_by_popen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """posix_spawn cannot change the child's directory: Popen does it."""
    monkeypatch.chdir(tmp_path)
    spawned = _started(monkeypatch)
    (tmp_path / "sub").mkdir()
    assert run_shell("pwd", cwd=tmp_path / "sub").output == f"{tmp_path / 'sub'}\n"
    assert spawned == []


def test_a_missing_or_unrunnable_shell_says_so_when_started_by_posix_spawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spawned = _started(monkeypatch)
    with pytest.raises(ActionStartError) as missing:
        run_shell("true", shell="/no/such/shell", cwd=tmp_path)
    assert missing.value.message.startswith("cannot run shell action: shell '/no/such/shell'")
    shell = tmp_path / "notexec"
    shell.write_text("")
    with pytest.raises(ActionStartError, match="is not executable"):
        run_shell("true", shell=str(shell), cwd=tmp_path)
    assert spawned == ["/no/such/shell", str(shell)]


def test_a_child_that_dies_of_a_signal_has_its_number_negated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Popen's `returncode` says it, which the exit-code evaluator and the stop message read."""
    monkeypatch.chdir(tmp_path)
    spawned = _started(monkeypatch)
    assert run_shell("kill -TERM $$", cwd=tmp_path).exit_code == -15
    assert run_shell("exit 7", cwd=tmp_path).exit_code == 7
    assert len(spawned) == 2


LEAK = """\
name: leak
initial: look
states:
  look:
    action: "cd /proc/$$/fd && for fd in *; do printf '%s ' $fd; done"
    capture: fds
    next: done
  done:
    terminal: true
"""


def test_ll_gives_its_actions_none_of_the_descriptors_it_was_given(project: Project) -> None:
    """Through the real `ll`, started with a descriptor it inherits (as a CI runner may give
    one): its action, started by posix_spawn from the directory `ll` runs in, sees only its
    three standard streams."""
    loop = project.write("leak.yaml", LEAK)
    given = os.open(os.devnull, os.O_RDONLY)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "little_loops", "run", "-q", str(loop)],
            cwd=project.path,
            pass_fds=(given,),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(given)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run,) = (project.path / ".loops" / "runs").iterdir()
    # 0, 1, 2 and the folder the shell lists (3: the lowest free number), not `given`
    assert (run / "steps.log").read_text() == "0 1 2 3 ", f"fd {given} was given to ll"


SIGNALS = """\
name: signals
initial: show
states:
  show:
    action: cat /proc/self/status
    on_success: done
    on_failure: done
  done:
    terminal: true
"""


def _mask(status: str, key: str) -> int:
    (line,) = (one for one in status.splitlines() if one.startswith(key + ":"))
    return int(line.split()[1], 16)


def test_ll_started_with_a_signal_ignored_gives_its_plain_action_the_same(
    project: Project,
) -> None:
    """Through the real `ll`, started as `nohup` starts it (SIGHUP ignored): its plain action,
    which `ll` execs itself, ignores SIGHUP too, and catches nothing (`ll`'s own handlers for
    SIGINT and SIGTERM are back at their default in it), as under `sh -c`."""
    loop = project.write("signals.yaml", SIGNALS)
    proc = subprocess.run(
        [sys.executable, "-m", "little_loops", "run", "-q", str(loop)],
        cwd=project.path,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run,) = (project.path / ".loops" / "runs").iterdir()
    status = (run / "steps.log").read_text()
    assert status.startswith("Name:\tcat"), status[:200]
    ignored = _mask(status, "SigIgn")
    assert ignored & 1 << (signal.SIGHUP - 1), hex(ignored)
    # Python ignores SIGPIPE and SIGXFSZ; a child gets them back at their default.
    assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)), hex(ignored)
    assert _mask(status, "SigCgt") == 0
