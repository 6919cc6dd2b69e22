"""The action seam: one `ActionRequest` carries every setting of an action, and each layer
(real processes, a fork's branch, the simulation) is one `run(request)`."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fakes import install_fake_claude

from little_loops.actions import ActionRequest, run
from little_loops.record.events import ActionStart
from little_loops.run.action_layer import Processes
from little_loops.run.branch_layer import BranchActions, Scope
from little_loops.sim.script import read_script
from little_loops.sim.simulate import SimulatedActions, SimulatedClock


def test_a_shell_request_runs_with_its_settings(tmp_path: Path) -> None:
    seen: list[bytes] = []
    started: list[int] = []
    result = run(
        ActionRequest(
            kind="shell",
            text='echo "$WHO in $PWD"',
            cwd=tmp_path,
            env={"WHO": "ann", "PATH": "/usr/bin:/bin"},
            timeout=30,
            on_output=lambda _name, chunk: seen.append(chunk),
            on_start=started.append,
        )
    )
    assert result.output == f"ann in {tmp_path}\n"
    assert b"".join(seen) == f"ann in {tmp_path}\n".encode()
    assert len(started) == 1


def test_a_slash_request_runs_claude_with_its_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = install_fake_claude(tmp_path / "bin", monkeypatch)
    request = ActionRequest(kind="slash", text="/go", cwd=tmp_path, flags=("--x",), timeout=30)
    result = Processes().run(request)
    assert result.output == "fake claude: /go"
    [call] = fake.calls()
    assert call["argv"][-1] == "--x"


def test_a_branch_layer_takes_a_slot_and_registers_the_process(tmp_path: Path) -> None:
    jobs = threading.Semaphore(1)
    scope = Scope()
    layer = BranchActions(Processes(), scope, jobs, verbose=None)
    result = layer.run(ActionRequest(kind="shell", text="echo hi", cwd=tmp_path, timeout=30))
    assert result.output == "hi\n"
    assert jobs.acquire(blocking=False)  # the slot is given back


def test_the_simulation_answers_a_request_from_its_script(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("states:\n  a: [failure]\n", encoding="utf-8")
    layer = SimulatedActions(read_script(tmp_path / "s.yaml"), SimulatedClock())
    layer.observe(ActionStart(state="a", step=1))
    result = layer.run(ActionRequest(kind="shell", text="rm -rf /", cwd=tmp_path))
    assert result.details["simulated_verdict"] == "failure"
