"""Spec v2 routing through the real `ll` from YAML: `next` is the success path, and a verdict
nothing routes stops the run at its state (exit 1, or 3 for error/timeout); slash steps pay
for a judge only when they branch on its answer (SPEC sections 3 and 6)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeClaude, install_fake_claude
from llm_server import (
    LlmServer,
    llm_server_fixture,  # noqa: F401  (the llm_server fixture)
    message,
)
from project import Project


def write(tmp_path: Path, text: str, name: str = "loop.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def events(path: Path) -> list[dict[str, Any]]:
    (run_dir,) = (path.parent / ".loops" / "runs").iterdir()
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def completed(path: Path) -> dict[str, Any]:
    return next(e for e in events(path) if e["event"] == "loop_complete")


FIRST = """\
    name: first
    initial: check
    states:
      check:
        action: test -f marker
        on_success: done
        on_failure: fix
      fix:
        action: touch marker
        next: check
      done: {terminal: true}
"""


def test_a_first_check_fix_loop_validates_and_runs_to_done(
    tmp_path: Path, project: Project
) -> None:
    path = write(tmp_path, FIRST)
    check = project.ll("validate", str(path))
    assert (check.returncode, check.stdout, check.stderr) == (0, "", "")
    proc = project.ll("run", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    end = completed(path)
    assert (end["final_state"], end["outcome"], end["steps"]) == ("done", "success", 4)


BUILD = """\
    name: ship
    initial: build
    states:
      build:
        action: make build
        next: publish
      publish:
        action: touch published
        terminal: true
"""


def test_a_failed_build_never_publishes(tmp_path: Path, project: Project) -> None:
    path = write(tmp_path, BUILD)  # no Makefile here (and perhaps no make at all)
    proc = project.ll("run", path)
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 3, shown
    assert not (tmp_path / "published").exists()
    assert "stopped at 'build': verdict 'error' (" in shown
    assert "command not found: make" in shown or "make: " in shown
    assert "add 'on_error: STATE' (or a loop-wide 'on_error')" in shown
    end = completed(path)
    assert (end["final_state"], end["outcome"], end["exit_code"]) == ("build", "error", 3)
    assert [e["state"] for e in events(path) if e["event"] == "state_enter"] == ["build"]


def test_a_next_state_whose_check_exits_1_stops_with_failure(
    tmp_path: Path, project: Project
) -> None:
    path = write(
        tmp_path,
        """\
        name: gate
        initial: check
        states:
          check:
            action: echo "2 tests failed" >&2; exit 1
            next: deploy
          deploy:
            action: touch deployed
            terminal: true
        """,
    )
    proc = project.ll("run", path)
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 1, shown
    assert not (tmp_path / "deployed").exists()
    assert (
        "stopped at 'check': verdict 'failure' (exit code 1: 2 tests failed) and nothing "
        "routes it; add 'on_failure: STATE' (or a loop-wide 'on_error')"
    ) in shown
    end = completed(path)
    assert (end["final_state"], end["outcome"], end["exit_code"]) == ("check", "failure", 1)


def test_a_failing_next_state_goes_to_the_loops_on_error(tmp_path: Path, project: Project) -> None:
    path = write(
        tmp_path,
        """\
        name: caught
        initial: check
        on_error: report
        states:
          check:
            action: exit 1
            next: deploy
          deploy:
            action: touch deployed
            terminal: true
          report:
            action: touch reported
            terminal: true
            outcome: failure
        """,
    )
    proc = project.ll("run", path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (tmp_path / "reported").exists()
    assert not (tmp_path / "deployed").exists()
    (hop,) = [e for e in events(path) if e["event"] == "route"]
    assert (hop["from"], hop["to"], hop["verdict"], hop["via"]) == (
        "check",
        "report",
        "failure",
        "loop.on_error",
    )


def test_on_failure_beside_next_takes_the_failure(tmp_path: Path, project: Project) -> None:
    path = write(
        tmp_path,
        """\
        name: beside
        initial: try
        states:
          try:
            action: test -f ok
            next: done
            on_failure: fix
          fix:
            action: touch ok
            next: try
          done: {terminal: true}
        """,
    )
    proc = project.ll("run", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hops = [(e["from"], e["to"], e["via"]) for e in events(path) if e["event"] == "route"]
    assert hops == [("try", "fix", "on_failure"), ("fix", "try", "next"), ("try", "done", "next")]


def test_dry_run_and_graph_show_the_stops(tmp_path: Path, project: Project) -> None:
    path = write(tmp_path, BUILD)
    plan = project.ll("run", path, "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.endswith(
        "routes:\n"
        "  build --success--> publish  (next)\n"
        "  build --failure--> stops (exit 1)\n"
        "  build --error/timeout--> stops (exit 3)\n"
        "  publish: terminal (success)\n"
    )
    assert not (tmp_path / ".loops").exists() or not list((tmp_path / ".loops").rglob("*.jsonl"))
    graph = project.ll("graph", str(path))
    assert graph.returncode == 0, graph.stderr
    assert '-->|"success (next)"| s1' in graph.stdout
    assert '-.->|"failure"| ll_stop_1' in graph.stdout
    assert '-.->|"error / timeout"| ll_stop_3' in graph.stdout


def test_graph_of_a_stopped_run_highlights_the_stop(tmp_path: Path, project: Project) -> None:
    path = write(tmp_path, BUILD)
    assert project.ll("run", path).returncode == 3
    (run_dir,) = (tmp_path / ".loops" / "runs").iterdir()
    graph = project.ll("graph", str(path), "--run", run_dir.name)
    assert graph.returncode == 0, graph.stderr
    assert 's0 ==>|"error / timeout"| ll_stop_3' in graph.stdout
    assert 's0 -.->|"failure"| ll_stop_1' in graph.stdout  # drawn, not taken
    assert 's0 -->|"success (next)"| s1' in graph.stdout


# -- the implicit judge of slash states ------------------------------------------------------

JUDGED = {"verdict": "failure", "confidence": 0.9, "reason": "no tests were run"}


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeClaude:
    return install_fake_claude(tmp_path / "fake-bin", monkeypatch)


@pytest.fixture
def judge(llm_server: LlmServer, monkeypatch: pytest.MonkeyPatch) -> LlmServer:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm_server.url)
    llm_server.script(then=message(JUDGED))
    return llm_server


def test_a_slash_next_state_asks_no_judge(
    tmp_path: Path, project: Project, fake_claude: FakeClaude, judge: LlmServer
) -> None:
    path = write(
        tmp_path,
        """\
        name: plain
        initial: fix
        states:
          fix:
            action: /ll:fix all
            next: done
          done:
            action: /ll:report
            terminal: true
        """,
    )
    proc = project.ll("run", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(fake_claude.calls()) == 2
    assert judge.requests == []
    judged = [(e["state"], e["verdict"]) for e in events(path) if e["event"] == "evaluate"]
    assert judged == [("fix", "success"), ("done", "success")]


def test_a_failing_slash_next_state_stops_in_error_without_a_judge(
    tmp_path: Path, project: Project, fake_claude: FakeClaude, judge: LlmServer
) -> None:
    fake_claude.scenario("error_result")
    path = write(
        tmp_path,
        """\
        name: plain
        initial: fix
        states:
          fix:
            action: /ll:fix all
            next: done
          done: {terminal: true}
        """,
    )
    proc = project.ll("run", path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "stopped at 'fix': verdict 'error'" in proc.stdout + proc.stderr
    assert len(fake_claude.calls()) == 1  # not retried until the step cap
    assert judge.requests == []


def test_a_branching_slash_state_asks_a_two_verdict_judge(
    tmp_path: Path, project: Project, fake_claude: FakeClaude, judge: LlmServer
) -> None:
    path = write(
        tmp_path,
        """\
        name: branch
        initial: review
        states:
          review:
            action: /ll:review
            on_success: done
            on_failure: rework
          rework: {terminal: true, outcome: failure}
          done: {terminal: true}
        """,
    )
    check = project.ll("validate", "--strict", str(path))
    # on_success + on_failure cover the judge; only error/timeout are left to --strict
    assert [line.split(": ", 2)[2] for line in check.stdout.splitlines()] == [
        "state 'review' can give verdict 'error', which nothing routes, so the run would stop "
        "there (exit 3); add 'on_error: STATE' (or a loop-wide 'on_error')",
        "state 'review' can give verdict 'timeout', which nothing routes, so the run would stop "
        "there (exit 3); add 'on_timeout: STATE' (or a loop-wide 'on_error')",
    ]
    proc = project.ll("run", path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert completed(path)["final_state"] == "rework"
    (request,) = judge.requests
    (tool,) = request.body["tools"]
    assert tool["input_schema"]["properties"]["verdict"]["enum"] == ["success", "failure"]


def test_a_written_out_judge_keeps_the_full_schema(
    tmp_path: Path, project: Project, fake_claude: FakeClaude, judge: LlmServer
) -> None:
    path = write(
        tmp_path,
        """\
        name: full
        initial: review
        states:
          review:
            action: /ll:review
            evaluate: {type: llm_structured}
            route: {success: done, _: rework}
          rework: {terminal: true, outcome: failure}
          done: {terminal: true}
        """,
    )
    proc = project.ll("run", path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (request,) = judge.requests
    enum = request.body["tools"][0]["input_schema"]["properties"]["verdict"]["enum"]
    assert enum == ["success", "failure", "blocked", "partial"]
