"""Spec v2 at run time: terminal actions count, actions run where `ll` was started, a state's
capture is readable by its own evaluator, and `${loop.run_dir}` / `${loop.dir}`.

Most tests go through the real `ll` (in process, through the `project` fixture), from a YAML file.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeClaude, install_fake_claude
from llm_server import (
    SUCCESS,
    LlmServer,
    llm_server_fixture,  # noqa: F401  (the llm_server fixture)
    message,
)
from project import Project

from little_loops.load.loader import load
from little_loops.record.events import read_events
from little_loops.run.runner import (
    Runner,
    RunOptions,
)

# `ll` runs in process (the `project` fixture) except where a terminal (a pty) or a SIGINT
# is under test: those runs keep a process of their own.
LL = [sys.executable, "-m", "little_loops"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def events(cwd: Path) -> list[dict[str, Any]]:
    (run,) = (cwd / ".loops" / "runs").iterdir()
    return read_events(run / "events.jsonl")


def state_json(cwd: Path) -> dict[str, Any]:
    (run,) = (cwd / ".loops" / "runs").iterdir()
    data: dict[str, Any] = json.loads((run / "state.json").read_text())
    return data


# -- 1. terminal actions count -----------------------------------------------------------------

PUBLISH = """
name: release
initial: build
states:
  build:
    action: echo built
    next: publish
  publish:
    action: |
      echo "pushing"; echo "fatal: could not read from remote repository" >&2; exit 128
    terminal: true
"""


def test_a_failing_terminal_action_fails_the_run(project: Project, tmp_path: Path) -> None:
    proc = project.ll("run", write(tmp_path / "release.yaml", PUBLISH))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.splitlines()[-1]
    assert last.startswith("ll: failure at 'publish' after 2 steps in ")
    assert last.endswith(
        ": terminal state 'publish' gave verdict 'error': "
        "exit code 128: fatal: could not read from remote repository"
    )
    end = events(tmp_path)[-1]
    assert (end["event"], end["outcome"], end["exit_code"]) == ("loop_complete", "failure", 1)
    assert end["final_state"] == "publish"
    assert end["error"].startswith("terminal state 'publish' gave verdict 'error'")
    evaluate = [e for e in events(tmp_path) if e["event"] == "evaluate"][-1]
    assert (evaluate["state"], evaluate["type"], evaluate["verdict"]) == (
        "publish",
        "exit_code",
        "error",
    )


def test_a_terminal_action_fails_the_run_whatever_its_outcome_says(
    project: Project, tmp_path: Path
) -> None:
    path = write(
        tmp_path / "loop.yaml",
        """
        name: report
        initial: end
        states:
          end: {action: "false", terminal: true, outcome: success}
        """,
    )
    proc = project.ll("run", path, "--json")
    assert proc.returncode == 1
    end = json.loads(proc.stdout.splitlines()[-1])
    assert end["outcome"] == "failure"
    assert end["error"] == "terminal state 'end' gave verdict 'failure': exit code 1"


def test_a_terminal_with_its_own_evaluator(project: Project, tmp_path: Path) -> None:
    path = write(
        tmp_path / "loop.yaml",
        """
        name: report
        initial: end
        states:
          end:
            action: echo "3 warnings"
            evaluate: {type: output_contains, pattern: "0 warnings"}
            terminal: true
        """,
    )
    proc = project.ll("run", path)
    assert proc.returncode == 1
    assert "terminal state 'end' gave verdict 'failure'" in proc.stdout


def test_passing_terminal_actions_and_terminals_without_action_are_unchanged(
    project: Project,
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path / "loop.yaml",
        """
        name: fine
        initial: check
        on_error: bad
        states:
          check: {action: "true", on_success: done, on_failure: bad}
          done: {action: echo all good, terminal: true}
          bad: {terminal: true, outcome: failure}
        """,
    )
    assert project.ll("run", path).returncode == 0
    failing = path.read_text().replace('action: "true"', 'action: "false"')
    path.write_text(failing)
    proc = project.ll("run", path, "--allow-concurrent")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1].startswith("ll: failure at 'bad' after 2 steps")
    assert proc.stdout.rstrip().endswith("s")  # no error text: the terminal said failure itself


def test_a_failing_terminal_action_stops_a_maintained_loop(
    project: Project, tmp_path: Path
) -> None:
    path = write(
        tmp_path / "loop.yaml",
        """
        name: keep
        initial: check
        maintain: true
        max_iterations: 10
        states:
          check: {action: "true", next: notify}
          notify: {action: "exit 3", terminal: true}
        """,
    )
    proc = project.ll("run", path, "--json")
    assert proc.returncode == 1
    end = json.loads(proc.stdout.splitlines()[-1])
    assert (end["outcome"], end["steps"], end["final_state"]) == ("failure", 2, "notify")
    assert end["error"] == "terminal state 'notify' gave verdict 'error': exit code 3"


def test_a_failing_report_at_max_iterations_keeps_exit_4_and_says_why(
    project: Project, tmp_path: Path
) -> None:
    path = write(
        tmp_path / "loop.yaml",
        """
        name: spin
        initial: a
        max_iterations: 2
        on_max_iterations: report
        states:
          a: {action: "true", next: a}
          report: {action: "echo no mail server >&2; exit 5", terminal: true}
          done: {terminal: true}
        """,
    )
    proc = project.ll("run", path, "--json")
    assert proc.returncode == 4
    end = json.loads(proc.stdout.splitlines()[-1])
    assert end["outcome"] == "max_iterations"
    assert (
        end["error"] == "terminal state 'report' gave verdict 'error': exit code 5: no mail server"
    )
    piped = project.ll("run", path, "--allow-concurrent")
    assert "no mail server" in piped.stdout.splitlines()  # the report's output is shown


def test_a_terminal_slash_action_counts_by_the_cli_result(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_claude: FakeClaude = install_fake_claude(tmp_path / "bin", monkeypatch)
    path = write(
        tmp_path / "loop.yaml",
        """
        name: ship
        initial: ship
        states:
          ship: {action: /ll:ship now, terminal: true}
        """,
    )
    ok = project.ll("run", path, "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    kinds = [json.loads(line).get("type") for line in ok.stdout.splitlines()]
    assert "none" in kinds  # the CLI's own result, no judge
    fake_claude.scenario("error_result")
    bad = project.ll("run", path, "--json", "--allow-concurrent")
    assert bad.returncode == 1
    end = json.loads(bad.stdout.splitlines()[-1])
    assert end["outcome"] == "failure"
    assert end["error"].startswith("terminal state 'ship' gave verdict 'error'")


# -- 2. a terminal's output is shown -----------------------------------------------------------

SHOWN = """
name: approve
initial: prepare
states:
  prepare:
    action: echo "hidden-$((1+1))-prepare-output"
    next: ask
  ask:
    action: echo "approve with:"; echo "  ll approve $((40+2))"
    terminal: true
"""


def test_a_terminal_action_output_is_shown_when_piped(project: Project, tmp_path: Path) -> None:
    proc = project.ll("run", write(tmp_path / "loop.yaml", SHOWN))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "approve with:" in lines
    assert "  ll approve 42" in lines
    assert lines.index("approve with:") < len(lines) - 1  # before the final line
    assert "hidden-2-prepare-output" not in proc.stdout  # other states stay quiet without -v


def test_terminal_output_is_not_shown_with_quiet_or_json_and_once_with_verbose(
    project: Project,
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "loop.yaml", SHOWN)
    quiet = project.ll("run", path, "--quiet")
    assert "approve with" not in quiet.stdout
    assert len(quiet.stdout.splitlines()) == 1
    as_json = project.ll("run", path, "--json", "--allow-concurrent")
    for line in as_json.stdout.splitlines():
        json.loads(line)  # only events on stdout
    verbose = project.ll("run", path, "-v", "--allow-concurrent")
    assert verbose.stdout.count("ll approve 42") == 1
    assert "hidden-2-prepare-output" in verbose.stdout


def test_a_failing_terminal_shows_its_output_and_stderr(project: Project, tmp_path: Path) -> None:
    proc = project.ll("run", write(tmp_path / "release.yaml", PUBLISH))
    lines = proc.stdout.splitlines()
    assert "pushing" in lines
    assert "fatal: could not read from remote repository" in lines


def test_terminal_output_hides_secrets(project: Project, tmp_path: Path) -> None:
    path = write(
        tmp_path / "loop.yaml",
        """
        name: secretive
        initial: tell
        context: {token: ""}
        secrets: [token]
        states:
          tell: {action: 'echo "token is ${context.token}"', terminal: true}
        """,
    )
    proc = project.ll("run", path, "--set", "token=hunter2-very-secret")
    assert proc.returncode == 0, proc.stdout
    assert "token is ***" in proc.stdout.splitlines()
    assert "hunter2-very-secret" not in proc.stdout


def test_a_terminal_action_output_is_shown_in_a_terminal(tmp_path: Path) -> None:
    path = write(tmp_path / "loop.yaml", SHOWN)
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color"}
    proc = subprocess.Popen(
        [*LL, "run", str(path)], cwd=tmp_path, stdin=slave, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    chunks: list[bytes] = []
    while select.select([master], [], [], 30)[0]:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=30) == 0
    text = b"".join(chunks).decode("utf-8", "replace")
    lines = text.replace("\r", "").split("\n")
    assert "  ll approve 42" in lines  # the terminal's report, printed as it is
    # Other steps' output flashes by on the spinner's line only; it is never printed as a line.
    assert "hidden-2-prepare-output" not in lines


# -- 3. the working directory ------------------------------------------------------------------


def test_actions_run_where_ll_was_started(project: Project, tmp_path: Path) -> None:
    (tmp_path / "marker").write_text("here\n")
    path = write(
        tmp_path / "loops" / "check.yaml",
        """
        name: check
        initial: check
        on_error: bad
        states:
          check: {action: test -f marker, on_success: done, on_failure: bad}
          done: {terminal: true}
          bad: {terminal: true, outcome: failure}
        """,
    )
    proc = project.ll("run", "loops/check.yaml")
    assert proc.returncode == 0, proc.stdout
    assert state_json(tmp_path)["options"]["cwd"] == str(tmp_path.resolve())
    dry = project.ll("run", path, "--dry-run")
    assert f"working directory: {tmp_path.resolve()}" in dry.stdout.splitlines()


def test_a_relative_working_dir_is_relative_to_the_loop_file(
    project: Project, tmp_path: Path
) -> None:
    write(tmp_path / "project" / "data" / "marker", "x")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = write(
        tmp_path / "project" / "loops" / "check.yaml",
        """
        name: check
        initial: check
        working_dir: ../data
        states:
          check: {action: test -f marker && pwd, next: done}
          done: {terminal: true}
        """,
    )
    proc = project.ll("run", path, "-v", cwd=elsewhere)
    assert proc.returncode == 0, proc.stdout
    assert str((tmp_path / "project" / "data").resolve()) in proc.stdout.splitlines()
    assert (elsewhere / ".loops" / "runs").is_dir()  # the run's files stay where ll started


def test_an_absolute_working_dir_stays(project: Project, tmp_path: Path) -> None:
    write(tmp_path / "abs" / "marker", "x")
    path = write(
        tmp_path / "loop.yaml",
        f"""
        name: check
        initial: check
        working_dir: {tmp_path / "abs"}
        states:
          check: {{action: test -f marker, next: done}}
          done: {{terminal: true}}
        """,
    )
    assert project.ll("run", path).returncode == 0


def test_a_resumed_run_acts_in_the_recorded_directory(project: Project, tmp_path: Path) -> None:
    start, other = tmp_path / "start", tmp_path / "other"
    other.mkdir()
    write(start / "marker", "x")
    path = write(
        start / "loops" / "slow.yaml",
        """
        name: slow
        initial: a
        on_error: bad
        states:
          a: {action: test -f marker, next: b}
          b:
            action: test -f marker || exit 1; [ -f waited ] && exit 0; touch waited; sleep 60
            on_success: done
            on_failure: bad
          done: {terminal: true}
          bad: {terminal: true, outcome: failure}
        """,
    )
    proc = subprocess.Popen(
        [*LL, "run", str(path)], cwd=start, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 30
    while not (start / "waited").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "step b never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    (run,) = (start / ".loops" / "runs").iterdir()
    resumed = project.ll("resume", run, "--json", cwd=other)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    end = json.loads(resumed.stdout.splitlines()[-1])
    assert (end["outcome"], end["final_state"]) == ("success", "done")
    assert not (other / ".loops").exists()  # the run stayed in its own directory
    assert not (other / "waited").exists()


def test_resume_refuses_a_path_that_is_not_a_run(project: Project, tmp_path: Path) -> None:
    proc = project.ll("resume", tmp_path / "nothing")
    assert proc.returncode == 3
    assert proc.stderr.strip().endswith(
        "is not a run directory (one under .loops/runs/ with a state.json); "
        "give a run id from 'll list', or the path of its directory"
    )
    assert "Traceback" not in proc.stderr


def test_a_run_recorded_before_v2_resumes_in_the_loop_file_directory(tmp_path: Path) -> None:
    write(tmp_path / "loops" / "marker", "x")
    path = write(
        tmp_path / "loops" / "old.yaml",
        """
        name: old
        initial: a
        states:
          a: {action: test -f marker, next: done}
          done: {terminal: true}
        """,
    )
    loop = load(path)
    first = Runner(loop, RunOptions(base_dir=tmp_path))
    first.session.persist(first.progress)
    first.session.close()
    # As a run started by an older ll left it: no recorded cwd. (Popping it from the live
    # progress is not enough: the fixed head of state.json is encoded once, at the start.)
    state_file = tmp_path / ".loops" / "runs" / first.progress.run_id / "state.json"
    data = json.loads(state_file.read_text())
    del data["options"]["cwd"]
    state_file.write_text(json.dumps(data))
    from little_loops.run.resume import prepare_resume

    loop, options, progress, run_dir = prepare_resume(tmp_path, first.progress.run_id)
    result = Runner(loop, options, progress=progress, run_dir=run_dir).run()
    assert (result.outcome, result.exit_code) == ("success", 0)


# -- 4. capture before evaluate ----------------------------------------------------------------


def test_an_evaluator_reads_its_own_capture(project: Project, tmp_path: Path) -> None:
    path = write(
        tmp_path / "loop.yaml",
        """
        name: own
        initial: count
        on_error: bad
        states:
          count:
            action: echo 3; echo warn >&2
            capture: c
            evaluate:
              type: all
              of:
                - {type: output_numeric, source: "${captured.c.output}", operator: eq, target: 3}
                - {type: output_contains, source: "${captured.c.stderr}", pattern: warn}
                - {type: output_numeric, source: "${captured.c.exit_code}", operator: eq, target: 0}
                - type: output_numeric
                  source: ${captured.c.duration_ms}
                  operator: ge
                  target: 0
            on_success: done
            on_failure: bad
          done: {action: 'echo "kept ${captured.c.output} ${captured.c.verdict}"', terminal: true}
          bad: {terminal: true, outcome: failure}
        """,
    )
    assert project.ll("validate", path).returncode == 0
    proc = project.ll("run", path)
    assert proc.returncode == 0, proc.stdout
    assert "kept 3 success" in proc.stdout.splitlines()


def test_a_judge_prompt_reads_its_own_capture(
    project: Project, tmp_path: Path, llm_server: LlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm_server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    llm_server.script(then=message(SUCCESS))
    path = write(
        tmp_path / "loop.yaml",
        """
        name: judged
        initial: draft
        on_error: draft
        states:
          draft:
            action: echo "notes-$((6*7))"
            capture: draft
            evaluate:
              type: llm_structured
              prompt: "Is '${captured.draft.output}' ready?"
            route: {success: done, failure: draft, blocked: done, partial: draft}
          done: {terminal: true}
        """,
    )
    proc = project.ll("run", path, "--no-cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # captured values go into the judge's prompt fenced as data (the judge's prompt fencing)
    fenced = '<loop_data name="captured.draft.output">\nnotes-42\n</loop_data>'
    assert f"Is '{fenced}' ready?" in llm_server.requests[0].body["messages"][0]["content"]


def test_validate_rejects_reading_the_own_verdict(project: Project, tmp_path: Path) -> None:
    path = write(
        tmp_path / "loop.yaml",
        """
        name: own
        initial: count
        on_error: bad
        states:
          count:
            action: echo 3
            capture: c
            evaluate:
              type: output_contains
              source: ${captured.c.verdict}
              pattern: success
            on_success: done
            on_failure: done
          done: {terminal: true}
          bad: {terminal: true, outcome: failure}
        """,
    )
    proc = project.ll("validate", path)
    assert proc.returncode == 2
    assert (
        f"{path}:11:15: error: '${{captured.c.verdict}}' in 'evaluate.source' of state "
        "'count': this state's 'verdict' is only known after its evaluator has run; read its "
        "output, stderr, exit_code or duration_ms here, or the verdict in a later state"
    ) in proc.stdout + proc.stderr


def test_validate_checks_every_evaluator_text_for_the_own_verdict_fields(tmp_path: Path) -> None:
    from little_loops.load.loader import try_load

    path = write(
        tmp_path / "loop.yaml",
        """
        name: own
        initial: a
        on_error: done
        states:
          a:
            action: echo 1
            capture: first
            next: b
          b:
            action: echo 2
            capture: c
            evaluate:
              type: any
              of:
                - type: llm_structured
                  prompt: "was ${captured.c.confidence} ok after ${captured.first.verdict}?"
                - {type: output_numeric, operator: eq, target: "${captured.c.reason}"}
                - {type: output_contains, source: "${captured.c.output}", pattern: "2"}
            next: done
          done: {terminal: true}
        """,
    )
    _, diagnostics = try_load(path)
    found = [(d.line, d.code, d.message.split(":")[0]) for d in diagnostics]
    assert found == [
        (
            17,
            "own-capture-verdict",
            "'${captured.c.confidence}' in 'evaluate.of[0].prompt' of state 'b'",
        ),
        (
            18,
            "own-capture-verdict",
            "'${captured.c.reason}' in 'evaluate.of[1].target' of state 'b'",
        ),
    ]


# -- 5. ${loop.run_dir} and ${loop.dir} --------------------------------------------------------


def test_loop_run_dir_and_loop_dir(project: Project, tmp_path: Path) -> None:
    write(tmp_path / "loops" / "data.txt", "from-the-loop-folder\n")
    path = write(
        tmp_path / "loops" / "scratch.yaml",
        """
        name: scratch
        initial: write
        on_error: bad
        context:
          notes: ${loop.run_dir}/notes.txt
        states:
          write:
            action: cat ${loop.dir}/data.txt > ${context.notes}
            next: read
          read:
            action: cat ${loop.run_dir}/notes.txt
            evaluate: {type: output_contains, pattern: from-the-loop-folder}
            on_success: done
            on_failure: bad
          done: {action: 'echo "dirs: ${loop.run_dir} ${loop.dir}"', terminal: true}
          bad: {terminal: true, outcome: failure}
        """,
    )
    assert project.ll("validate", path).returncode == 0
    proc = project.ll("run", "loops/scratch.yaml")
    assert proc.returncode == 0, proc.stdout
    (run,) = (tmp_path / ".loops" / "runs").iterdir()
    assert (run / "notes.txt").read_text() == "from-the-loop-folder\n"
    assert f"dirs: {run.resolve()} {(tmp_path / 'loops').resolve()}" in proc.stdout.splitlines()
    dry = project.ll("run", path, "--dry-run")
    assert f"shell action: cat {(tmp_path / 'loops').resolve()}/data.txt > " in dry.stdout
    assert "/.loops/runs/" in dry.stdout


def test_validate_names_the_loop_fields(project: Project, tmp_path: Path) -> None:
    path = write(
        tmp_path / "loop.yaml",
        """
        name: typo
        initial: a
        states:
          a: {action: "ls ${loop.rundir}", next: done}
          done: {terminal: true}
        """,
    )
    proc = project.ll("validate", path)
    assert proc.returncode == 2
    assert "did you mean 'run_dir'?" in proc.stdout + proc.stderr
    assert (
        "name, run_id, run_dir, dir, started_at, elapsed_ms, elapsed" in proc.stdout + proc.stderr
    )
