"""Composition as a new user meets it: forks, questions and CI (issue 24's findings 2-10).

Every test goes through the real `ll` in a subprocess, from YAML files; finding 1 (the CI
workflows of docs/ci.md) is tests/e2e/test_action.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from project import Project

REPO = Path(__file__).resolve().parents[2]
LL = [sys.executable, "-m", "little_loops"]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "loops", tmp_path / "loops")
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- 2. JUnit and the summary of a failure terminal ------------------------------------------


def test_junit_red_case_carries_cause_terminal_output_and_branches(
    project: Project, work: Path
) -> None:
    summary = work / "summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    done = project.ll(
        "run",
        "loops/rollout.yaml",
        "--set",
        "failing=ap-south",
        "--junit-xml",
        "r.xml",
        env=env,
        cwd=work,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    root = ET.parse(work / "r.xml").getroot()
    red = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in red] == ["outcome"]
    failure = red[0].find("failure")
    assert failure is not None
    message, text = failure.get("message") or "", failure.text or ""
    assert "cause: state 'rollout' (step 1) gave verdict 'failure'" in message
    assert "ap-south: failure" in text
    assert "stderr: health probe failed in ap-south" in text
    assert "output: deployed 1.4.0 to us-east" in text
    assert "what the terminal 'report' printed:" in text
    assert "1 of 3 regions failed: ap-south; rolled back" in text
    shown = summary.read_text(encoding="utf-8")
    assert "#### Why it failed" in shown
    assert "health probe failed in ap-south" in shown


# -- 3. forks and questions can be found -----------------------------------------------------


def test_composition_is_shipped_and_documented(project: Project, work: Path) -> None:
    for name in ("rollout", "gate", "publish", "release"):
        assert (work / "loops" / f"{name}.yaml").is_file()
    scripts = sorted(str(p.relative_to(work)) for p in (work / "loops" / "tests").glob("*.yaml"))
    done = project.ll("test", *scripts, cwd=work)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("rollout", "gate", "publish"):
        assert f"PASS  loops/tests/{name}" in done.stdout
    started = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert "## 7. Composing loops" in started
    for word in ("for_each", "parallel", "ask:", "loop:"):
        assert word in started.split("## 7. Composing loops")[1].split("## 8.")[0]
    cookbook = (REPO / "docs" / "cookbook.md").read_text(encoding="utf-8")
    for heading in (
        "## A fork over regions, a failed region handled",
        "## A parallel gate: lint, types and tests at once",
        "## An approval that waits in CI",
        "## Composing loops: a child with inputs and outputs",
    ):
        assert heading in cookbook
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "`for_each:`" in readme
    assert "`ask:`" in readme


def test_plan_matrix_help_example_names_a_fork(project: Project, work: Path) -> None:
    done = project.ll("plan-matrix", "loops/rollout.yaml", "rollout", cwd=work)
    assert done.returncode == 0, done.stderr
    keys = [row["key"] for row in json.loads(done.stdout)["include"]]
    assert keys == ["eu-west", "us-east", "ap-south"]


# -- 4. a loop: state's verdicts are its child's terminals -------------------------------------


def test_graph_and_dry_run_never_stop_a_loop_state_on_success(project: Project, work: Path) -> None:
    graph = project.ll("graph", "loops/release.yaml", cwd=work)
    assert graph.returncode == 0, graph.stderr
    assert '-.->|"success"| ll_stop_1' not in graph.stdout
    assert "stops (exit 1)" not in graph.stdout
    plan = project.ll("run", "loops/release.yaml", "--dry-run", cwd=work)
    assert plan.returncode == 0, plan.stderr
    assert "--success--> stops" not in plan.stdout
    summary = work / "summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    assert project.ll("run", "loops/release.yaml", env=env, cwd=work).returncode == 0
    assert "stops (exit 1)" not in summary.read_text(encoding="utf-8")


# -- 5. a suspended run: its status after ll answer, its summary --------------------------------


def test_status_after_answer_and_the_summary_of_a_suspended_run(
    project: Project, work: Path
) -> None:
    summary = work / "summary.md"
    env = {"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    asked = project.ll("run", "loops/publish.yaml", env=env, cwd=work)
    assert asked.returncode == 6, asked.stdout + asked.stderr
    (run_id,) = os.listdir(work / ".loops" / "runs")
    shown = summary.read_text(encoding="utf-8")
    assert "#### Waiting for an answer" in shown
    assert "Publish release 1.4.0?" in shown
    assert f"ll resume {run_id} --answer approve|reject [--note TEXT]" in shown
    before = project.ll("status", run_id, cwd=work)
    assert "waiting for an answer" in before.stdout
    assert project.ll("answer", run_id, "approve", "--by", "ana", cwd=work).returncode == 0
    after = project.ll("status", run_id, cwd=work)
    assert after.returncode == 0
    assert "waiting for an answer" not in after.stdout
    assert f"answered; continue it with: ll resume {run_id}" in after.stdout
    assert "answered: approve by ana" in after.stdout
    resumed = project.ll("resume", run_id, cwd=work)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (work / "public" / "index.html").is_file()


# -- 6. a fork is never silent --------------------------------------------------------------

SLOW_FORK = """\
name: slow-fork
initial: fan
on_error: done
states:
  fan:
    parallel:
      quick: {action: echo quick done}
      slow: {action: sleep 8; echo slow done}
    on_success: done
    on_failure: done
  done: {terminal: true}
"""


@pytest.mark.slow
def test_a_fork_has_a_heartbeat_and_its_log_shows_finished_branches(
    project: Project, tmp_path: Path
) -> None:
    write(tmp_path / "fork.yaml", SLOW_FORK)
    proc = subprocess.Popen(
        [*LL, "run", "fork.yaml", "--heartbeat", "1"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def quick_ended(text: str) -> bool:
            # its child_start names the branch too: wait for its end
            return any(
                '"event":"child_complete"' in line and '"branch":"quick"' in line
                for line in text.splitlines()
            )

        seen = ""
        deadline = time.monotonic() + 7
        while time.monotonic() < deadline and not quick_ended(seen):
            time.sleep(0.2)
            logs = list((tmp_path / ".loops" / "runs").glob("*/events.jsonl"))
            seen = logs[0].read_text(encoding="utf-8") if logs else ""
        # the quick branch's end is in the run's log while the slow one still runs
        assert quick_ended(seen)
        assert proc.poll() is None
        logs_out = project.ll("logs")
        assert "quick" in logs_out.stdout
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    assert "… fan still running (1s): branches running: slow" in out


# -- 7. a terminal reached on the last allowed step ------------------------------------------


def test_terminal_reached_by_the_last_allowed_step_runs_and_decides(
    project: Project, tmp_path: Path
) -> None:
    write(
        tmp_path / "last.yaml",
        """\
name: last
initial: check
max_iterations: 1
states:
  check:
    action: echo broken >&2; exit 1
    on_success: done
    on_failure: report
  report:
    action: echo "the report"
    terminal: true
    outcome: failure
  done: {terminal: true}
""",
    )
    done = project.ll("run", "last.yaml")
    assert done.returncode == 1, done.stdout
    assert "the report" in done.stdout
    assert "ll: failure at 'report' after 2 steps" in done.stdout


# -- 8. messages --------------------------------------------------------------------------


def test_unquoted_yes_no_choices_is_one_message_saying_quote_them(
    project: Project, tmp_path: Path
) -> None:
    write(
        tmp_path / "ask.yaml",
        """\
name: ask
initial: approve
states:
  approve:
    ask: Ship?
    choices: [yes, no]
    route: {yes: done, no: stop}
  done: {terminal: true}
  stop: {terminal: true, outcome: failure}
""",
    )
    done = project.ll("validate", "ask.yaml")
    assert done.returncode == 2
    lines = done.stdout.strip().splitlines() + done.stderr.strip().splitlines()
    lines = [line for line in lines if line.strip()]
    assert len(lines) == 1, lines
    assert "ask.yaml:6:" in lines[0]
    assert 'quote them: choices: ["yes", "no"]' in lines[0]


def test_a_tab_and_a_wrong_indent_are_named(project: Project, tmp_path: Path) -> None:
    write(tmp_path / "tab.yaml", "name: t\ninitial: a\nstates:\n  a:\n\taction: echo\n")
    tab = project.ll("validate", "tab.yaml")
    assert tab.returncode == 2
    assert "tab.yaml:5:1: error: invalid YAML: line 5 is indented with a tab" in tab.stdout
    write(
        tmp_path / "indent.yaml",
        "name: t\ninitial: a\nstates:\n  a:\n    action: echo hi\n     next: done\n",
    )
    indent = project.ll("validate", "indent.yaml")
    assert indent.returncode == 2
    assert "check the indentation: line 6 is indented 5 spaces, line 5 4" in indent.stdout


def test_join_over_a_shorter_literal_list_is_refused(project: Project, tmp_path: Path) -> None:
    write(
        tmp_path / "fan.yaml",
        """\
name: fan
initial: fan
on_error: done
states:
  fan:
    for_each: [a, b, c, d, e]
    action: echo ${item.value}
    join: 7
    on_success: done
    on_failure: done
  done: {terminal: true}
""",
    )
    done = project.ll("validate", "fan.yaml")
    assert done.returncode == 2
    assert "waits for 7 branches but its for_each list has 5 items" in done.stdout


def test_ll_test_reports_every_script_mistake_in_one_run(project: Project, work: Path) -> None:
    write(
        work / "loops" / "tests" / "bad.test.yaml",
        """\
loop: ../rollout.yaml
states:
  rolout: success
  anounce: {output: x}
  report: {verdikt: failure}
expect:
  pathh: [rollout]
""",
    )
    done = project.ll("test", "loops/tests/bad.test.yaml", cwd=work)
    assert done.returncode == 2
    for said in (
        "bad.test.yaml:3: the loop has no state 'rolout' (did you mean 'rollout'?)",
        "bad.test.yaml:4: the loop has no state 'anounce' (did you mean 'announce'?)",
        "bad.test.yaml:5: unknown key 'verdikt' (did you mean 'verdict'?)",
        "bad.test.yaml:7: unknown expect key 'pathh' (did you mean 'path'?)",
    ):
        assert said in done.stdout, done.stdout


# -- a bug met on the way: ll step --until the initial state ---------------------------------


def test_step_until_the_initial_state_pauses_before_it(project: Project, work: Path) -> None:
    done = project.ll("step", "loops/rollout.yaml", "--until", "rollout", cwd=work)
    assert done.returncode == 6, done.stdout + done.stderr
    assert "paused at 'rollout' after 0 steps" in done.stdout + done.stderr
    (run_id,) = os.listdir(work / ".loops" / "runs")
    state = json.loads((work / ".loops" / "runs" / run_id / "state.json").read_text())
    assert state["step"] == 0


# -- 10. drift ------------------------------------------------------------------------------


def test_documented_valid_keys_are_what_ll_prints(project: Project, tmp_path: Path) -> None:
    write(
        tmp_path / "demo.yaml",
        "name: demo\ninitial: check\nstates:\n  check:\n    action: echo hi\n"
        "    on_falure: done\n    on_success: done\n  done: {terminal: true}\nmax_iteration: 3\n",
    )
    done = project.ll("validate", "demo.yaml")
    said = [line.split("valid keys: ", 1)[1] for line in done.stdout.splitlines()]
    assert len(said) == 2
    for doc in ("editors.md", "troubleshooting.md"):
        text = (REPO / "docs" / doc).read_text(encoding="utf-8")
        shown = [
            line.split("valid keys: ", 1)[1] for line in text.splitlines() if "valid keys: " in line
        ]
        assert shown, doc
        assert set(shown) <= set(said), doc


def test_completion_list_and_readme_table_name_every_command(
    project: Project, tmp_path: Path
) -> None:
    listed = project.ll("--help").stdout.split("Commands:", 1)[1].splitlines()
    commands = {line.split()[0] for line in listed if line.startswith("  ") and line.strip()}
    completing = subprocess.run(
        [*LL],
        env={**os.environ, "_LL_COMPLETE": "bash_complete", "COMP_WORDS": "ll ", "COMP_CWORD": "1"},
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    offered = {line.split(",", 1)[1] for line in completing.splitlines() if "," in line}
    assert commands <= offered
    editors = (REPO / "docs" / "editors.md").read_text(encoding="utf-8")
    shown = editors.split("are the commands,", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    assert set(shown.split()) == offered
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Commands", 1)[1].split("Exit codes", 1)[0]
    missing = sorted(c for c in offered if f"`ll {c}" not in table)
    assert missing == []


def test_every_exit_code_6_row_names_questions() -> None:
    rows = [
        (path.name, line)
        for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("| 6 |")
    ]
    assert len(rows) >= 3
    for name, line in rows:
        assert "question" in line, name
        assert "ll step" in line, name


# -- 9. converted files pass the strict check the CI workflows run --------------------------

UPSTREAM_TIDY = """\
name: tidy
description: Lint, fix, report.
initial: lint
max_steps: 9
states:
  lint:
    action: "true"
    action_type: shell
    on_yes: report
    on_no: fix
    on_error: broken
  fix:
    action: "echo FIXED"
    action_type: shell
    evaluate:
      type: output_contains
      pattern: FIXED
    on_success: lint
    on_failure: broken
    on_error: broken
  report:
    action: "echo all clean"
    action_type: shell
    next: done
  done:
    terminal: true
  broken:
    terminal: true
    failure: true
"""


def test_migrated_file_passes_validate_strict(project: Project, tmp_path: Path) -> None:
    write(tmp_path / "tidy.yaml", UPSTREAM_TIDY)
    converted = project.ll("migrate", "tidy.yaml", "--out", "out")
    assert converted.returncode == 0, converted.stdout + converted.stderr
    strict = project.ll("validate", "--strict", "out/tidy.yaml")
    assert strict.returncode == 0, strict.stdout + strict.stderr
    run = project.ll("run", "out/tidy.yaml")
    assert run.returncode == 0, run.stdout + run.stderr
