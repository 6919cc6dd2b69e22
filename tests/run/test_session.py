"""The run session's state write: the changing fields' JSON made straight from the progress
(`changing_json`) is the text the encoder gives their dict, and state.json the same file."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from project import Project

from little_loops.model.progress import _CHANGING, Progress, Routed
from little_loops.model.question import Question
from little_loops.record import store
from little_loops.record.events import ENCODE
from little_loops.record.store import RunDir
from little_loops.run.session import changing_json


def _progress(**changes: Any) -> Progress:
    p = Progress(
        run_id="20261126-000000-x-0001",
        loop_file="/tmp/x.yaml",
        loop_sha256="0" * 64,
        started_at="2026-11-26T00:00:00.000Z",
        context={},
        max_iterations=10,
        current="start",
    )
    p.__dict__.update(changes)
    return p


QUESTION = Question("approve@3", "approve", 3, "Ship it?", ("yes", "no"), "2026-11-26T00:00Z")
CASES: dict[str, dict[str, Any]] = {
    "a new run": {},
    "after a step": {
        "step": 4,
        "elapsed_ms": 1234,
        "cost_usd": 0.0123,
        "attempt": 2,
        "last_route": Routed("a", "b", "success", "on_success"),
        "convergence": {"measure": 3.5, "other": 7},
        "prior_reasons": {"judge": 'it said "no"\nthen \\ yes'},
    },
    "finished": {
        "status": "finished",
        "outcome": "failure",
        "exit_code": 1,
        "error": "state 'x' gave verdict 'failure': exit code 2",
        "final_state": "x",
        "outputs": {"report": "r.md", "nothing": ""},
        "on_max_used": True,
    },
    "suspended": {"status": "suspended", "pending": [QUESTION, QUESTION]},
    "not ascii": {"current": "état", "error": "✗ \u2028 \x00 tab\t"},
    "odd numbers": {"cost_usd": math.inf, "elapsed_ms": 10**20, "step": True},
    "not a number": {"cost_usd": math.nan},
    "a whole cost": {"cost_usd": 3},
    "a route of other types": {"last_route": Routed(1, "b", None, "x")},  # type: ignore[arg-type]
}


@pytest.mark.parametrize("changes", CASES.values(), ids=list(CASES))
@pytest.mark.parametrize(
    ("captured", "prev"),
    [
        ({}, {}),
        ({"dir": {"ref": [0, 12]}, "n": {"ref": [12, 40]}}, {"ref": [281, 142]}),
        ({"odd": {"ref": [True, 1]}}, {"ref": [True, 2.5]}),  # not a step's: the encoder's
        ({}, {"ref": [1, 2], "more": 1}),
    ],
)
def test_changing_json_is_what_the_encoder_gives_the_fields(
    changes: dict[str, Any], captured: dict[str, Any], prev: dict[str, Any]
) -> None:
    p = _progress(**changes)
    data = p.to_dict(_CHANGING)
    data["captured"], data["prev"] = captured, prev
    assert changing_json(p, captured, prev) == ENCODE(data)


def test_state_json_written_from_the_attributes_is_the_same_file(tmp_path: Path) -> None:
    """Through `RunDir`: the fast write gives the bytes of `write_state` with the fields."""
    p = _progress(**CASES["after a step"])
    fixed = store.FixedState({"run_id": p.run_id, "loop_file": p.loop_file})
    fast, slow = RunDir.create(tmp_path, "fast"), RunDir.create(tmp_path, "slow")
    refs: dict[str, Any] = {"dir": {"ref": [0, 12]}}
    for step in range(3):  # the first write is plain, the ones after it swap
        p.step = step
        data = p.to_dict(_CHANGING)
        data["captured"], data["prev"] = refs, {}
        slow.write_state(data, fixed=fixed)
        assert fast.write_state_json(changing_json(p, refs, {}), fixed=fixed)
        assert fast.state_path.read_bytes() == slow.state_path.read_bytes()


def test_a_child_run_takes_its_state_as_json_once_in_its_directory(tmp_path: Path) -> None:
    """A child run kept in memory holds its state as fields (no JSON made for it); once in
    its own directory, its state.json is written from the JSON, the bytes of the fields'."""
    caller = RunDir.create(tmp_path, "caller")
    child = store.CallDir(caller.root / "sub" / "0001-call", caller, lambda _s, _f: False)
    p = _progress(**CASES["after a step"])
    fixed = store.FixedState({"run_id": p.run_id})
    assert not child.takes_json
    assert not child.write_state_json(changing_json(p, {}, {}), fixed=fixed)
    child.spill()
    assert child.takes_json
    assert child.write_state_json(changing_json(p, {}, {}), fixed=fixed)
    slow = RunDir.create(tmp_path, "slow")
    data = p.to_dict(_CHANGING)
    data["captured"], data["prev"] = {}, {}
    slow.write_state(data, fixed=fixed)
    assert child.state_path.read_bytes() == slow.state_path.read_bytes()
    child.sink.close()
    child.close()
    slow.close()


def test_text_that_is_not_utf8_is_left_to_the_slow_write(tmp_path: Path) -> None:
    """A lone surrogate (a file name's undecodable byte) cannot be UTF-8: nothing is
    written, and the caller's `write_state` keeps it as a JSON escape."""
    p = _progress(error="bad \udcff byte")
    run = RunDir.create(tmp_path, "r")
    fixed = store.FixedState({"run_id": p.run_id})
    assert not run.write_state_json(changing_json(p, {}, {}), fixed=fixed)
    assert not run.state_path.exists()


def test_ll_runs_and_resumes_with_state_written_from_the_attributes(project: Project) -> None:
    """Through the real `ll`: a run that captures, routes and stops with a failure leaves a
    state.json that reads back whole and names where it stopped."""
    loop = project.write(
        "state.yaml",
        """\
name: state
initial: first
states:
  first:
    action: echo "état ✓"
    capture: said
    next: second
  second:
    action: exit 1
    on_success: done
    on_failure: failed
  done:
    terminal: true
  failed:
    terminal: true
    outcome: failure
""",
    )
    result = project.ll("run", loop)
    assert result.returncode == 1, result
    (run,) = (project.path / ".loops" / "runs").iterdir()
    state = json.loads((run / "state.json").read_text(encoding="utf-8"))
    assert (state["status"], state["outcome"], state["final_state"]) == (
        "finished",
        "failure",
        "failed",
    )
    assert state["step"] == 3
    assert set(state["captured"]) == {"said"}
    assert state["last_route"] == {
        "from": "second",
        "to": "failed",
        "verdict": "failure",
        "via": "on_failure",
    }
    shown = project.ll("status", state["run_id"])
    assert shown.returncode == 0, shown
