"""The step kinds by composition: one `RunContext`, a table of kinds, one child start."""

from __future__ import annotations

import inspect
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from project import Project

from little_loops.model.progress import RunOptions
from little_loops.record.events import CALLS, read_journal
from little_loops.run import children, fork_schedule, kinds
from little_loops.run.action_branch import ActionBranch
from little_loops.run.children import Child, ChildPlan
from little_loops.run.context import RunContext
from little_loops.run.runner import Runner

CHILD = """
name: child
initial: work
context: {who: nobody}
states:
  work:
    action: echo "child ${context.who}"
    next: done
  done: {terminal: true}
"""

PARENT = """
name: parent
initial: call
states:
  call:
    loop: child.yaml
    with: {who: caller}
    route: {done: regions}
  regions:
    for_each: ["eu", "us"]
    loop: child.yaml
    with: {who: "${item.value}"}
    on_success: checks
    on_failure: failed
  checks:
    parallel:
      lint: {action: "echo lint"}
    on_success: done
    on_failure: failed
  failed: {terminal: true, outcome: failure}
  done: {terminal: true}
"""


def test_each_kind_is_a_small_class_in_the_table() -> None:
    assert set(kinds.KINDS) == {"action", "loop", "fork", "ask"}
    for name, kind in kinds.KINDS.items():
        cls = type(kind)
        assert cls.__bases__ == (object,), name  # composed, never a mixin of the runner
        public = [m for m in vars(cls) if not m.startswith("_")]
        assert public == ["run"], (name, public)
        assert list(inspect.signature(kind.run).parameters) == ["ctx", "step", "state"]


def test_the_runner_is_composed_not_mixed_in() -> None:
    assert Runner.__bases__ == (object,)
    for gone in ("_call", "_fork", "_ask", "_dispatch", "_suspend", "_check_budget"):
        assert not hasattr(Runner, gone), gone


def test_a_state_is_run_by_the_kind_its_shape_names(tmp_path: Path) -> None:
    from little_loops.load.loader import load

    (tmp_path / "child.yaml").write_text(CHILD, encoding="utf-8")
    (tmp_path / "parent.yaml").write_text(PARENT, encoding="utf-8")
    loop = load(tmp_path / "parent.yaml")
    got = {name: kinds.kind_of(state) for name, state in loop.states.items()}
    assert got == {
        "call": "loop",
        "regions": "fork",
        "checks": "fork",
        "failed": "action",
        "done": "action",
    }


def test_the_fork_scheduler_meets_the_run_through_the_typed_context() -> None:
    hints = typing.get_type_hints(fork_schedule.Fork.__init__)
    assert hints["ctx"] is RunContext
    job = typing.get_type_hints(fork_schedule.Job)
    # A branch runs as a child run, or (an action branch) as its one step in the fork.
    assert set(typing.get_args(job["child"])) == {Child, ActionBranch}
    assert all(hint is not Any for hint in (*hints.values(), *job.values()))


def test_a_loop_state_and_every_fork_branch_start_through_the_one_door(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ll run` of a loop with a `loop:` state, a for_each of `loop:` branches and an action
    branch: every child run, at every level, is started by `children.start`. An action branch
    is no child run: its one step runs in the fork (`action_branch`)."""
    started: list[tuple[tuple[str, ...], str | None]] = []
    real = children.start

    def spy(ctx: RunContext, plan: ChildPlan) -> Child:
        started.append((plan.path, plan.branch.key if plan.branch else None))
        return real(ctx, plan)

    monkeypatch.setattr(children, "start", spy)
    project.write("child.yaml", CHILD)
    project.write("parent.yaml", PARENT)
    done = project.ll("run", "parent.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert started == [
        (("call",), None),
        (("regions", "eu"), "eu"),
        (("regions", "us"), "us"),
    ]
    (run,) = (project.path / ".loops" / "runs").iterdir()
    lines = (run / "events.jsonl").read_text(encoding="utf-8").splitlines()
    kinds_seen = [json.loads(line).get("kind") for line in lines if "child_start" in line]
    assert kinds_seen == ["loop", "branch", "branch", "branch"]
    # Each child wrote its own story: a run directory of its own (a `loop:` branch), or an
    # entry of a journal: its caller's (a `loop:` state's child), its fork's (an action branch).
    outputs = sorted(p.parent.name for p in (run / "sub").rglob("state.json"))
    assert outputs == ["eu", "us"]
    assert list(read_journal(run, CALLS)) == ["sub/0001-call"]
    [journal] = (run / "sub").rglob("branches.jsonl")
    assert [json.loads(line)["key"] for line in journal.read_text().splitlines()] == ["lint"]


def test_a_child_run_is_made_by_the_context_s_factory(tmp_path: Path) -> None:
    """The run gives its steps a context whose child factory is the runner itself."""
    from little_loops.load.loader import load

    (tmp_path / "child.yaml").write_text(CHILD, encoding="utf-8")
    runner = Runner(load(tmp_path / "child.yaml"), RunOptions(base_dir=tmp_path))
    try:
        ctx = runner.ctx
        assert ctx.new_run is Runner
        assert ctx.progress is runner.progress
        assert ctx.session is runner.session
        assert ctx.path == ()
        assert ctx.budget_left() is None
    finally:
        runner.session.close()


def test_a_suspension_ends_the_run_through_the_one_finish(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    ends: list[str] = []
    real = Runner._finish

    def spy(self: Runner, outcome: str, *args: Any, **kwargs: Any) -> Any:
        ends.append(outcome)
        return real(self, outcome, *args, **kwargs)

    monkeypatch.setattr(Runner, "_finish", spy)
    project.write(
        "ask.yaml",
        """
        name: ask
        initial: approve
        states:
          approve:
            ask: "ship it?"
            choices: [ship, hold]
            route: {ship: done, hold: done}
          done: {terminal: true}
        """,
    )
    waiting = project.ll("run", "ask.yaml", "--no-input")
    assert waiting.returncode == 6, waiting.stdout + waiting.stderr
    assert ends == ["suspended"]


def test_an_action_branch_holds_only_the_context_keys_its_work_reads(project: Project) -> None:
    """Items kept in `context` are not copied into every branch's state.json; a key the
    branch's evaluator reads still reaches it."""
    items = ",".join(f'"item-{n:03d}"' for n in range(50))
    project.write(
        "fan.yaml",
        f"""
        name: fan
        initial: fan
        context:
          items: '[{items}]'
          said: "all good"
          unused: "never read by a branch"
        states:
          fan:
            for_each: "${{context.items}}"
            action: 'echo "${{item.value}}"'
            evaluate: {{type: output_contains, pattern: "good", source: "${{context.said}}"}}
            max_concurrency: 4
            on_success: done
            on_failure: failed
          failed: {{terminal: true, outcome: failure}}
          done: {{terminal: true}}
        """,
    )
    done = project.ll("run", "fan.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = (project.path / ".loops" / "runs").iterdir()
    journal = (run / "sub" / "0001-fan" / "branches.jsonl").read_text(encoding="utf-8")
    branches = [json.loads(line) for line in journal.splitlines()]
    assert len(branches) == 50
    for entry in branches:
        text = json.dumps(entry["state"])
        assert entry["state"]["context"] == {"said": "all good"}, entry["key"]
        if entry["key"] != "item-049":
            assert "item-049" not in text, entry["key"]
