"""The `project` fixture runs `ll` in the test's own process: what `ll run` does to its process
(signals ignored once the run is recorded, orphans adopted and swept after each step) must not
stay behind for the tests that run next in the same worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from project import Project, copy_checkout, subreaper, time_limit

from little_loops.actions.reaper import ORPHANS

LOOP = """\
name: once
initial: s
states:
  s:
    action: "true"
    terminal: true
"""


def test_an_in_process_run_leaves_the_process_as_it_found_it(project: Project) -> None:
    project.write("once.yaml", LOOP)
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    adopted = ORPHANS.enabled
    result = project.ll("run", "once.yaml")
    assert result.returncode == 0, result.stderr
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert ORPHANS.enabled == adopted
    # A child started afterwards dies of SIGTERM (it did not inherit an ignored one).
    child = subprocess.Popen(["sleep", "30"])
    child.terminate()
    assert child.wait(timeout=10) == -signal.SIGTERM


def test_an_in_process_run_leaves_the_environment_and_the_kernel_as_it_found_them(
    project: Project,
) -> None:
    project.write("once.yaml", LOOP)
    environ = dict(os.environ)
    reaper = subreaper()
    cwd = os.getcwd()
    filters = list(warnings.filters)  # ll runs under Python's defaults, pytest's come back
    result = project.ll("run", "once.yaml", env={"LL_EXTRA": "1"})
    assert result.returncode == 0, result.stderr
    # The action marked the environment for the guard (LL_ACTION_OWNER) while it ran; it and
    # the test's own variables are gone again, and the process is no child subreaper.
    assert dict(os.environ) == environ
    assert subreaper() == reaper
    assert os.getcwd() == cwd
    assert warnings.filters == filters


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers are Linux's")
def test_an_orphan_started_after_an_in_process_run_is_not_ours(project: Project) -> None:
    project.write("once.yaml", LOOP)
    assert project.ll("run", "once.yaml").returncode == 0
    # A shell that leaves a child behind: the child goes to init, not to the test's process.
    shell = subprocess.run(
        ["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True
    )
    orphan = int(shell.stdout)
    try:
        with open(f"/proc/{orphan}/stat", encoding="utf-8") as fh:
            parent = int(fh.read().rpartition(")")[2].split()[1])
        assert parent != os.getpid()
    finally:
        os.kill(orphan, signal.SIGTERM)


def test_an_ll_a_test_starts_reads_bytecode_instead_of_compiling_the_package(
    project: Project,
) -> None:
    """With PYTHONDONTWRITEBYTECODE set outside (some CI images and sandboxes), conftest.py
    has every process the tests start write and read bytecode under .pytest_cache instead:
    the second `ll` of a test session no longer compiles the package from source."""
    project.write("once.yaml", LOOP)
    code = "import sys; print(sys.flags.dont_write_bytecode, sys.pycache_prefix)"
    seen = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert seen[0] == "0", seen
    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    if prefix:
        assert seen[1] == prefix
        assert project.ll("validate", "once.yaml", process=True).returncode == 0
        compiled = list(Path(prefix).rglob("little_loops/load/loader.*.pyc"))
        assert compiled, f"no bytecode of little_loops under {prefix}"


def test_an_in_process_run_that_hangs_fails_at_its_time_limit(project: Project) -> None:
    """time_limit() stands for a subprocess's `timeout=`: the hung `ll` ends (a run error,
    exit 3, the reason on screen) and the process gets its SIGALRM handler back."""
    project.write(
        "hang.yaml",
        """\
        name: hang
        initial: a
        states:
          a: {action: sleep 30, next: done}
          done: {terminal: true}
        """,
    )
    before = signal.getsignal(signal.SIGALRM)
    with time_limit(1, "ll run hang.yaml"):
        done = project.ll("run", "hang.yaml")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "ll run hang.yaml: still running after 1 s" in done.stdout + done.stderr
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.alarm(0) == 0


@pytest.mark.parametrize("git", [True, False], ids=["a clone", "no git"])
def test_a_copy_of_the_checkout_into_a_folder_of_its_own_stops(tmp_path: Path, git: bool) -> None:
    # `nox -s minimums` puts the tests' temporary folders in `.nox/` inside the checkout: the
    # install tests' copy of the checkout then copied itself into itself until the disk was full.
    checkout = tmp_path / "checkout"
    (checkout / "little_loops").mkdir(parents=True)
    (checkout / "little_loops" / "__init__.py").write_text("")
    (checkout / ".gitignore").write_text(".venv/\n")
    (checkout / ".venv").mkdir()
    (checkout / ".venv" / "big").write_text("not the project")
    nox = checkout / ".nox"
    nox.mkdir()
    (nox / ".gitignore").write_text("*\n")  # as nox writes it
    if git:
        subprocess.run(["git", "init", "-q"], cwd=checkout, check=True)
        subprocess.run(["git", "add", "little_loops", ".gitignore"], cwd=checkout, check=True)
    (checkout / "new.txt").write_text("a file not yet added")
    dest = nox / "tmp" / "copy"
    with time_limit(60, "the copy"):
        copy_checkout(dest, source=checkout)
    copied = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    if git:
        assert copied == [".gitignore", "little_loops/__init__.py", "new.txt"]
    else:
        assert ".venv/big" not in copied
        assert "little_loops/__init__.py" in copied
        assert not any(name.startswith(".nox") for name in copied)
