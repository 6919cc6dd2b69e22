"""The run tree through the real `ll`: a parent calls a child that calls a grandchild, and a
fork's branches each call the same child. Every surface names a step by its path in the tree:
the events' `path`, JUnit's test cases, the GitHub step summary, `ll logs` and `ll status`
(by run id, child id or directory), and `ll logs RUN --step N` on a `loop:` or fork step."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from project import Project, Result

GRAND = """
name: grand
initial: s
context: {word: none}
states:
  s: {action: "echo grand-says-${context.word}", next: done}
  done: {terminal: true}
"""

CHILD = """
name: child
initial: inner
context: {word: none}
states:
  inner:
    loop: grand.yaml
    with: {word: "${context.word}"}
    route: {done: fin}
  fin: {terminal: true}
"""

PARENT = """
name: parent
initial: call
states:
  call:
    loop: child.yaml
    with: {word: top}
    route: {fin: regions}
  regions:
    for_each: [eu-west, us-east]
    loop: child.yaml
    with: {word: "${item.key}"}
    on_success: checks
    on_failure: checks
  checks:
    parallel:
      lint: {action: "echo lint-ok"}
      unit: {action: "echo unit-ok"}
    on_success: done
    on_failure: done
  done: {terminal: true}
"""


def tree(tmp_path: Path) -> Path:
    for name, text in (("grand.yaml", GRAND), ("child.yaml", CHILD), ("parent.yaml", PARENT)):
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path / "parent.yaml"


def run_tree(project: Project, *extra: str | Path, env: dict[str, str] | None = None) -> Result:
    done = project.ll("run", tree(project.path), *extra, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def run_id(tmp_path: Path) -> str:
    (root,) = (tmp_path / ".loops" / "runs").iterdir()
    return root.name


def test_events_carry_every_calling_state_in_their_path(project: Project, tmp_path: Path) -> None:
    done = run_tree(project, "--json")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    by_path: dict[tuple[str, ...], set[str]] = {}
    for event in events:
        if event["event"] == "action_start":
            by_path.setdefault(tuple(event.get("path", ())), set()).add(event["state"])
    assert by_path == {
        ("call", "inner"): {"s"},  # the grandchild's step: both calling states
        ("regions", "eu-west", "inner"): {"s"},  # a branch's child's step
        ("regions", "us-east", "inner"): {"s"},
        ("checks", "lint"): {"lint"},
        ("checks", "unit"): {"unit"},
    }
    child_steps = {
        e["state"] for e in events if e["event"] == "state_enter" and e.get("path") == ["call"]
    }
    assert child_steps == {"inner", "fin"}
    # the root's own events carry no path
    assert [e["state"] for e in events if e["event"] == "route" and "path" not in e] == [
        "call",
        "regions",
        "checks",
    ]


def test_junit_and_the_github_summary_name_every_step_of_the_tree_by_path(
    project: Project,
    tmp_path: Path,
) -> None:
    summary = tmp_path / "summary.md"
    run_tree(
        project,
        "--junit-xml",
        tmp_path / "junit.xml",
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)},
    )
    xml = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    names = [
        line.split('name="')[1].split('"')[0] for line in xml.splitlines() if "<testcase " in line
    ]
    assert names == [
        "call (visit 1)",
        "call/inner (visit 1)",
        "call/inner/s (visit 1)",
        "call/inner/done (visit 1)",
        "call/fin (visit 1)",
        "regions (visit 1)",
        "regions/eu-west/inner (visit 1)",
        "regions/eu-west/inner/s (visit 1)",
        "regions/eu-west/inner/done (visit 1)",
        "regions/eu-west/fin (visit 1)",
        "regions/us-east/inner (visit 1)",
        "regions/us-east/inner/s (visit 1)",
        "regions/us-east/inner/done (visit 1)",
        "regions/us-east/fin (visit 1)",
        "checks (visit 1)",
        "checks/lint (visit 1)",
        "checks/unit (visit 1)",
        "done (visit 1)",
        "outcome",
    ]
    assert 'name="call/inner/s (visit 1)" classname="parent.call.inner"' in xml
    assert (
        'name="regions/eu-west/inner/s (visit 1)" classname="parent.regions.eu-west.inner"' in xml
    )
    assert 'name="checks/lint (visit 1)" classname="parent.checks"' in xml
    text = summary.read_text(encoding="utf-8")
    assert "| 1.1.1 | `call/inner/s` | success |" in text
    assert "| 2.eu-west.1.1 | `regions/eu-west/inner/s` | success |" in text
    assert "| 3.lint | `checks/lint` | success |" in text


def test_ll_logs_and_status_take_a_run_id_a_child_id_or_a_directory(
    project: Project, tmp_path: Path
) -> None:
    run_tree(project)
    rid = run_id(tmp_path)
    root = tmp_path / ".loops" / "runs" / rid
    levels = {
        rid: "ll: running parent",
        f"{rid}/0001-call": "ll: running child",
        f"{rid}/0001-call/0001-inner": "ll: running grand",
        f"{rid}/0002-regions/eu-west": "ll: running child",
        f"{rid}/0002-regions/eu-west/0001-inner": "ll: running grand",
        str(root / "sub" / "0001-call" / "sub" / "0001-inner"): "ll: running grand",
        os.path.relpath(root / "sub" / "0002-regions" / "us-east", tmp_path): "ll: running child",
    }
    for target, first in levels.items():
        shown = project.ll("logs", target)
        assert shown.returncode == 0, (target, shown.stdout + shown.stderr)
        assert shown.stdout.startswith(first), (target, shown.stdout)
        status = project.ll("status", target)
        assert status.returncode == 0, (target, status.stdout + status.stderr)
        assert "status:  finished (success)" in status.stdout, status.stdout
    status = project.ll("status", f"{rid}/0001-call/0001-inner")
    assert f"run:     {rid}/0001-call/0001-inner" in status.stdout
    assert "loop:    grand" in status.stdout
    wrong = project.ll("logs", f"{rid}/0002-regions/nowhere")
    assert wrong.returncode == 3, wrong.stdout + wrong.stderr  # as for an unknown run id
    assert wrong.stderr.strip().splitlines() == [
        f"ll: error: no child run '{rid}/0002-regions/nowhere' "
        "(the children here: eu-west, us-east)"
    ]
    assert "Traceback" not in wrong.stderr


def test_ll_logs_step_of_a_loop_or_fork_step_shows_what_each_child_printed(
    project: Project,
    tmp_path: Path,
) -> None:
    run_tree(project)
    rid = run_id(tmp_path)
    call = project.ll("logs", rid, "--step", "1")
    assert call.returncode == 0, call.stderr
    assert call.stdout == "== call/inner/s (step 1) ==\ngrand-says-top\n"
    assert "printed nothing" not in call.stderr
    regions = project.ll("logs", rid, "--step", "2")
    assert regions.stdout == (
        "== regions/eu-west/inner/s (step 1) ==\ngrand-says-eu-west\n"
        "== regions/us-east/inner/s (step 1) ==\ngrand-says-us-east\n"
    )
    checks = project.ll("logs", rid, "--step", "3")
    assert (
        checks.stdout
        == "== checks/lint (step 1) ==\nlint-ok\n== checks/unit (step 1) ==\nunit-ok\n"
    )
    # one level down: the child's `loop:` step, by the child's id
    inner = project.ll("logs", f"{rid}/0001-call", "--step", "1")
    assert inner.stdout == "== inner/s (step 1) ==\ngrand-says-top\n"
    # the grandchild's own step, as any run's
    own = project.ll("logs", f"{rid}/0001-call/0001-inner", "--step", "1")
    assert own.stdout == "grand-says-top\n"
