"""The `project` fixture runs `ll` in the test's own process: what `ll run` does to its process
(signals ignored once the run is recorded, orphans adopted and swept after each step) must not
stay behind for the tests that run next in the same worker."""

from __future__ import annotations

import signal
import subprocess

from project import Project

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
