"""The work of a step, counted through a real `ll run` (issue 27: a printing step within
+0.3 ms of a bare spawn): what a step does not need done is not done at all."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest
from project import Project

from little_loops.actions import process
from little_loops.record.events import RunEvent

PRINTING = """
name: printing
initial: say
max_iterations: 3
on_error: done
states:
  say:
    action: "printf hi"
    on_success: $current
    on_failure: done
  done:
    terminal: true
"""


def _recorded(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Wrap the terminal renderer `ll run` makes: the events it is handed, the lines it
    formats (`write`, whether shown or not), the output chunks it is given."""
    from little_loops.report import render

    seen: dict[str, list[Any]] = {"events": [], "writes": [], "chunks": []}
    real = render.make_renderer

    def recording(**options: Any) -> Any:
        inner = real(**options)

        class Recording(type(inner)):  # type: ignore[misc]
            def __call__(self, event: RunEvent) -> None:
                seen["events"].append(event.name)
                super().__call__(event)

            def write(self, text: str, style: str | None = None) -> None:
                seen["writes"].append(text)
                super().write(text, style)

            def output(self, name: str, chunk: bytes) -> None:
                seen["chunks"].append(chunk)
                super().output(name, chunk)

        inner.__class__ = Recording
        return inner

    monkeypatch.setattr(render, "make_renderer", recording)
    return seen


def test_quiet_hands_the_terminal_only_the_runs_end(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-q` shows only the summary: its renderer is handed the run's last event and no other,
    formats no step line it would not print, and is given no output to keep."""
    seen = _recorded(monkeypatch)
    loop = project.write("printing.yaml", PRINTING)
    done = project.ll("run", loop, "-q")
    assert done.returncode == 4, done.stdout + done.stderr  # max_iterations
    assert done.stdout.startswith("ll: max_iterations at 'say' after 3 steps")
    assert done.stdout.count("\n") == 1
    assert seen == {"events": ["loop_complete"], "writes": [], "chunks": []}


def test_without_quiet_the_terminal_sees_every_event_and_output(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _recorded(monkeypatch)
    loop = project.write("printing.yaml", PRINTING)
    done = project.ll("run", loop)
    assert done.returncode == 4, done.stdout + done.stderr
    names = seen["events"]
    assert (names[0], names[-1]) == ("loop_start", "loop_complete")
    assert (names.count("state_enter"), names.count("route")) == (3, 3)
    assert seen["chunks"] == [b"hi"] * 3
    assert "   1/3  say  printf hi" in done.stdout


def test_quiet_with_a_heartbeat_still_follows_every_step(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heartbeat asked for with `-q` names the running step and its latest line: that
    renderer is handed every event, and the output."""
    seen = _recorded(monkeypatch)
    loop = project.write("printing.yaml", PRINTING)
    done = project.ll("run", loop, "-q", "--heartbeat", "30")
    assert done.returncode == 4, done.stdout + done.stderr
    assert seen["events"].count("state_enter") == 3
    assert seen["chunks"] == [b"hi"] * 3
    assert done.stdout.count("\n") == 1


CHUNKS = """
name: chunks
initial: say
max_iterations: 1
on_error: done
states:
  say:
    action: "printf a; sleep 0.05; printf b; sleep 0.05; printf c"
    on_success: $current
    on_failure: done
  done:
    terminal: true
"""


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the exit is watched through a pidfd")
def test_a_step_asks_whether_its_child_exited_when_the_child_says_so(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each chunk of output wakes the wait; the child's exit is looked at (`waitpid`) only at
    the start and once its pidfd says it exited, not at every chunk."""
    polls: list[int] = []
    # A child started by posix_spawn (the action runs in ll's own directory) or by Popen.
    for kind in (subprocess.Popen, process._Spawned):
        real = kind.poll

        def counted(self: Any, real: Any = real) -> int | None:
            polls.append(self.pid)
            return real(self)  # type: ignore[no-any-return]

        monkeypatch.setattr(kind, "poll", counted)
    loop = project.write("chunks.yaml", CHUNKS)
    done = project.ll("run", loop, "-q")
    assert done.returncode == 4, done.stdout + done.stderr
    (run,) = (project.path / ".loops" / "runs").iterdir()
    assert (run / "steps.log").read_bytes() == b"abc"
    assert len(polls) == 2, polls


TREE = """
name: tree
initial: fan
states:
  fan:
    for_each: ["a", "b", "c", "d", "e"]
    action: "printf ${item.value}"
    next: call
  call:
    loop: child.yaml
    next: done
  done:
    terminal: true
"""

CHILD = """
name: child
initial: one
states:
  one:
    action: "printf one"
    next: two
  two:
    action: "printf two"
    next: end
  end:
    terminal: true
"""


def test_quiet_is_handed_no_step_event_of_a_branch_or_a_child(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wrappers that hand a fork's branches' and a child run's events to the root's
    listeners ask for what those listeners ask for: under `-q`, the ends of runs alone, not a
    copy of each branch's and child's step events made for a renderer that ignores them."""
    seen = _recorded(monkeypatch)
    project.write("child.yaml", CHILD)
    loop = project.write("tree.yaml", TREE)
    done = project.ll("run", loop, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("\n") == 1, done.stdout
    assert set(seen["events"]) == {"loop_complete"}, seen["events"]
    assert seen["writes"] == []
    assert seen["chunks"] == []
