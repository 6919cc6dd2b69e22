"""The action seam (`run/action_layer.py`): one way in for an action, and a simulation as a
typed implementation of it (`Simulation`: `ChildRequest`/`AnswerRequest` -> `ChildStub`/
`AnswerStub`), found with `isinstance`, never a hidden `callable()` hook or a loose dict."""

from __future__ import annotations

import json
import re
from pathlib import Path

from project import Project

from little_loops.load.loader import load
from little_loops.run import action_layer
from little_loops.run.action_layer import (
    ActionLayer,
    AnswerRequest,
    AnswerStub,
    ChildRequest,
    ChildStub,
    Processes,
    simulates,
    stub,
)
from little_loops.sim.script import read_script
from little_loops.sim.simulate import SimulatedActions, SimulatedClock

CHILD = """\
name: child
initial: a
states:
  a: {action: "exit 1", route: {success: live, failure: rolled_back}}
  live: {terminal: true}
  rolled_back: {terminal: true, outcome: failure}
"""

PARENT = """\
name: parent
initial: deploy
states:
  deploy:
    loop: child.yaml
    capture: d
    route: {live: gate, rolled_back: failed}
  gate:
    ask: "Ship ${captured.d.outputs.url}?"
    choices: [ship, hold]
    route: {ship: fan, hold: failed}
  fan:
    parallel:
      eu: {loop: child.yaml}
      us: {loop: child.yaml}
    route: {success: done, failure: failed}
  failed: {terminal: true, outcome: failure}
  done: {terminal: true}
"""

ANSWERS = """\
  deploy: {final_state: live, outputs: {url: u1}}
  gate: {verdict: ship, output: looks good}
  fan/eu: live
  fan/us: {final_state: rolled_back}
"""


def test_the_action_layer_protocol_has_no_simulation_hooks() -> None:
    """A simulation is not extra methods on every layer: the protocol declares the action
    (`run`) and the layer's life (`child`, `resumed`, `kill_orphans`), nothing else."""
    members = {name for name in vars(ActionLayer) if not name.startswith("_")}
    assert members == {"run", "kill_orphans", "child", "resumed"}
    assert not hasattr(Processes(), "stub_child")
    assert not hasattr(Processes(), "stub_answer")
    assert not simulates(Processes())


def test_no_layer_is_found_by_being_callable() -> None:
    """The run package asks `simulates(layer)`, never `callable(layer)`."""
    package = Path(action_layer.__file__).parent
    found = [
        f"{path.name}:{n}"
        for path in sorted(package.glob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bcallable\(", line)
    ]
    assert found == []


def test_the_simulation_answers_a_child_and_an_ask_with_typed_records(tmp_path: Path) -> None:
    (tmp_path / "child.yaml").write_text(CHILD, encoding="utf-8")
    (tmp_path / "s.yaml").write_text("states:\n" + ANSWERS, encoding="utf-8")
    child = load(tmp_path / "child.yaml")
    layer = SimulatedActions(read_script(tmp_path / "s.yaml"), SimulatedClock())
    assert simulates(layer)
    ended = stub(layer, ChildRequest("deploy", child))
    assert ended == ChildStub(
        final_state="live", outcome="success", exit_code=0, outputs={"url": "u1"}
    )
    answered = stub(layer, AnswerRequest("gate"))
    assert answered == AnswerStub(verdict="ship", note="looks good", duration_ms=0)
    assert stub(layer, AnswerRequest("nobody")) is None  # unscripted: a person answers
    assert stub(Processes(), ChildRequest("deploy", child)) is None  # a real child runs
    assert stub(Processes(), AnswerRequest("gate")) is None


def test_ll_test_stubs_a_loop_child_an_ask_and_fork_branches(project: Project) -> None:
    project.write("child.yaml", CHILD)
    project.write("parent.yaml", PARENT)
    script = project.write(
        "t.test.yaml",
        "loop: parent.yaml\nstates:\n"
        + ANSWERS
        + "expect: {path: [deploy, gate, fan, failed], outcome: failure}\n",
    )
    done = project.ll("test", script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_ll_run_simulate_records_the_stand_ins_and_runs_no_child(project: Project) -> None:
    project.write("child.yaml", CHILD)
    loop = project.write("parent.yaml", PARENT)
    script = project.write("s.yaml", "states:\n" + ANSWERS)
    done = project.ll("run", loop, "--simulate", script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "path: deploy -> gate -> fan -> failed" in done.stdout
    (run,) = (project.path / ".loops" / "runs").iterdir()
    assert not list(run.glob("sub/**/state.json"))  # no child run started (the fork's own
    # records, items.json and join.json, are there)
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    ends = {
        e["child_run_id"].rsplit("/", 1)[-1]: e for e in events if e["event"] == "child_complete"
    }
    assert ends["0001-deploy"]["outputs"] == {"url": "u1"}
    assert (ends["eu"]["final_state"], ends["us"]["outcome"]) == ("live", "failure")
    (answer,) = [e for e in events if e["event"] == "answer"]
    assert (answer["answer"], answer["note"], answer["via"]) == ("ship", "looks good", "simulate")


def test_an_ask_inside_a_fork_branch_is_answered_through_the_branch_layer(
    project: Project,
) -> None:
    """A branch's layer (`BranchActions`) is as simulated as the layer under it."""
    project.write(
        "ask.yaml",
        "name: gate\ninitial: approve\nstates:\n"
        "  approve:\n    ask: Go?\n    choices: [approve, reject]\n"
        "    route: {approve: done, reject: stopped}\n"
        "  done: {terminal: true}\n  stopped: {terminal: true, outcome: failure}\n",
    )
    project.write(
        "fork.yaml",
        "name: fa\ninitial: r\nstates:\n  r:\n    parallel:\n      eu: {loop: ask.yaml}\n"
        "      us: {loop: ask.yaml}\n    route: {success: ok, failure: nay}\n"
        "  ok: {terminal: true}\n  nay: {terminal: true, outcome: failure}\n",
    )
    script = project.write(
        "t.test.yaml",
        "loop: fork.yaml\nstates:\n  r/eu/approve: approve\n  r/us/approve: reject\n"
        "expect: {path: [r, nay], outcome: failure}\n",
    )
    done = project.ll("test", script)
    assert done.returncode == 0, done.stdout + done.stderr
