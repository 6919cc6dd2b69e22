"""`ask` states through the real `ll`: a question suspends the run (exit 6) with the command
that answers it; `ll resume --answer`, `ll answer`, presets, the terminal prompt (a pty),
expiry, sub-loops, a run directory copied into a fresh clone, simulation, CI outputs."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from project import Project

from little_loops.record import questions as qs

# `ll` runs in process (the `project` fixture) except at the terminal prompt (a pty, Ctrl-C):
# a process of its own.
LL = [sys.executable, "-m", "little_loops"]

RELEASE = """\
name: release
initial: build
context: {version: "1.4.0"}
states:
  build:
    action: echo built
    next: approve
  approve:
    ask: "Release ${context.version} passed all checks. Ship it?"
    choices: [approve, reject]
    timeout: TIMEOUT
    capture: approval
    route: {approve: rollout, reject: fix, timeout: abandon}
  fix:
    action: echo fixing
    next: approve
  rollout:
    action: 'echo "shipping by ${captured.approval.by} - ${captured.approval.output}"'
    next: done
  abandon: {terminal: true, outcome: failure}
  done: {terminal: true}
"""


@pytest.fixture(autouse=True)
def _asker(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ll` (in process or not) runs for a user named tester, outside CI."""
    monkeypatch.setenv("USER", "tester")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)


def write(where: Path, name: str, text: str) -> Path:
    path = where / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def release(where: Path, timeout: float = 172800) -> Path:
    return write(where, "release.yaml", RELEASE.replace("TIMEOUT", str(timeout)))


def run_root(cwd: Path) -> Path:
    (root,) = [p for p in (cwd / ".loops" / "runs").iterdir() if (p / "state.json").is_file()]
    return root


def state(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "state.json").read_text(encoding="utf-8"))
    return data


def events(root: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (root / "events.jsonl").read_text("utf-8").splitlines()]


# -- loading -----------------------------------------------------------------------------


def test_validate_reports_ask_mistakes_at_their_line(project: Project, tmp_path: Path) -> None:
    write(
        tmp_path,
        "bad.yaml",
        """\
        name: bad
        initial: approve
        states:
          approve:
            ask: "ok?"
            choices: [approve, reject, timeout]
            action: echo hi
            route: {approve: done}
          other:
            choices: [a]
            next: done
          done: {terminal: true}
        """,
    )
    out = project.ll("validate", "bad.yaml")
    assert out.returncode == 2
    lines = out.stdout.splitlines() + out.stderr.splitlines()
    text = "\n".join(lines)
    assert "bad.yaml:4:3: error: state 'approve' can give verdict 'reject'" in text
    assert "bad.yaml:6:" in text
    assert "offers the choice 'timeout'" in text
    assert "bad.yaml:7:" in text
    assert "asks a question, so it cannot have 'action'" in text
    assert "bad.yaml:10:" in text
    assert "has 'choices' but no 'ask'" in text
    assert "Traceback" not in text


def test_a_valid_ask_loop_validates_and_routes_timeout(project: Project, tmp_path: Path) -> None:
    release(tmp_path)
    assert project.ll("validate", "release.yaml").returncode == 0
    strict = project.ll("validate", "release.yaml", "--strict")
    assert "'approve'" not in strict.stdout  # every answer and the expiry are routed


# -- suspend and resume ------------------------------------------------------------------


def test_a_question_suspends_the_run_and_resume_answers_it(
    project: Project, tmp_path: Path
) -> None:
    release(tmp_path)
    out = project.ll("run", "release.yaml")
    assert out.returncode == 6, out.stderr
    root = run_root(tmp_path)
    run_id = root.name
    assert (
        "ll: suspended at 'approve' (step 2): Release 1.4.0 passed all checks. Ship it?\n"
        in out.stderr
    )
    assert f"    answer: ll resume {run_id} --answer approve|reject [--note TEXT]\n" in out.stderr
    data = state(root)
    assert data["status"] == "suspended"
    assert data["exit_code"] == 6
    (question,) = data["pending"]
    assert question["id"] == "approve@2"
    assert question["choices"] == ["approve", "reject"]
    names = [e["event"] for e in events(root)]
    assert "ask" in names
    assert names[-2:] == ["loop_suspended", "loop_complete"]
    suspended = next(e for e in events(root) if e["event"] == "loop_suspended")
    assert suspended["pending"] == ["approve@2"]
    assert suspended["exit_code"] == 6

    listing = project.ll("list")
    assert "suspended (1 question)" in listing.stdout
    status = project.ll("status", run_id)
    assert "approve@2: Release 1.4.0 passed all checks. Ship it?" in status.stdout
    assert f"answer: ll resume {run_id} --answer approve|reject" in status.stdout

    wrong = project.ll("resume", run_id, "--answer", "maybe")
    assert wrong.returncode == 2
    assert "'maybe' is not an answer to approve@2: choose one of approve, reject" in wrong.stderr
    assert state(root)["status"] == "suspended"  # nothing changed

    done = project.ll(
        "resume", run_id, "--answer", "approve", "--note", "canary ok", "--by", "alice",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "shipping by alice - canary ok" in done.stdout
    answer = next(e for e in events(root) if e["event"] == "answer")
    assert answer["question_id"] == "approve@2"
    assert answer["answer"] == "approve"
    assert answer["by"] == "alice"
    assert answer["via"] == "resume"
    assert answer["note"] == "canary ok"
    assert state(root)["pending"] == []
    assert state(root)["status"] == "finished"


def test_an_answer_is_used_once(project: Project, tmp_path: Path) -> None:
    release(tmp_path)
    project.ll("run", "release.yaml")
    run_id = run_root(tmp_path).name
    # reject -> fix -> approve again: a new occurrence, which the first answer does not answer
    again = project.ll("resume", run_id, "--answer", "reject")
    assert again.returncode == 6, again.stderr
    assert "ll: suspended at 'approve' (step 4)" in again.stderr
    assert [q["id"] for q in state(run_root(tmp_path))["pending"]] == ["approve@4"]
    # resuming without an answer asks again and changes nothing
    same = project.ll("resume", run_id)
    assert same.returncode == 6
    assert "(step 4)" in same.stderr
    assert project.ll("resume", run_id, "--answer", "approve=approve").returncode == 0


def test_answer_records_for_a_suspended_run_and_refuses_bad_ids(
    project: Project, tmp_path: Path
) -> None:
    release(tmp_path)
    project.ll("run", "release.yaml")
    run_id = run_root(tmp_path).name
    unknown = project.ll("answer", run_id, "deploy=approve")
    assert unknown.returncode == 2
    assert "has no pending question 'deploy'; pending: approve@2 (approve|reject)" in (
        unknown.stderr
    )
    given = project.ll("answer", run_id, "approve", "--note", "fine")
    assert given.returncode == 0
    assert f"continue it with: ll resume {run_id}" in given.stdout
    assert state(run_root(tmp_path))["status"] == "suspended"
    done = project.ll("resume", run_id, env={"USER": "bob"})
    assert done.returncode == 0
    assert "shipping by tester - fine" in done.stdout
    finished = project.ll("answer", run_id, "approve")
    assert finished.returncode == 2
    assert "already finished" in finished.stderr


def test_an_expired_question_takes_the_timeout_route_and_refuses_late_answers(
    project: Project,
    tmp_path: Path,
) -> None:
    release(tmp_path, timeout=1)
    assert project.ll("run", "release.yaml").returncode == 6
    run_id = run_root(tmp_path).name
    time.sleep(1.5)
    late = project.ll("resume", run_id, "--answer", "approve")
    assert late.returncode == 2
    assert "question approve@2 expired at" in late.stderr
    assert f"resume without --answer to take the timeout route: ll resume {run_id}" in late.stderr
    out = project.ll("resume", run_id)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "abandon" in out.stdout
    verdicts = [e for e in events(run_root(tmp_path)) if e["event"] == "evaluate"]
    assert verdicts[-1]["type"] == "ask"
    assert verdicts[-1]["verdict"] == "timeout"


def test_presets_answer_every_matching_question(project: Project, tmp_path: Path) -> None:
    release(tmp_path)
    out = project.ll("run", "release.yaml", "--answer", "approve=approve")
    assert out.returncode == 0, out.stderr
    answer = next(e for e in events(run_root(tmp_path)) if e["event"] == "answer")
    assert answer["via"] == "preset"
    assert answer["by"] == "tester"
    bad = project.ll("run", "release.yaml", "--answer", "approve=yes")
    assert bad.returncode == 2
    assert "'yes' is not an answer to 'approve'" in bad.stderr
    nobody = project.ll("run", "release.yaml", "--answer", "deploy=yes")
    assert nobody.returncode == 2
    assert "no ask state 'deploy'" in nobody.stderr


def test_by_defaults_to_ll_user_then_github_actor_then_user(
    project: Project, tmp_path: Path
) -> None:
    assert qs.default_by({"USER": "u", "GITHUB_ACTOR": "g", "LL_USER": "l"}) == "l"
    assert qs.default_by({"USER": "u", "GITHUB_ACTOR": "g"}) == "g"
    assert qs.default_by({"USER": "u"}) == "u"
    assert qs.default_by({}) is None
    release(tmp_path)
    project.ll("run", "release.yaml")
    out = project.ll(
        "resume", run_root(tmp_path).name, "--answer", "approve",
        env={"GITHUB_ACTOR": "octocat"},
    )  # fmt: skip
    assert "shipping by octocat" in out.stdout


def test_several_pending_questions_refuse_a_bare_answer() -> None:
    choices = ("approve", "reject")
    pending = [
        qs.Question("reviews/security@1", "security", 1, "ok?", choices, "2026-01-01T00:00:00Z"),
        qs.Question("reviews/legal@1", "legal", 1, "ok?", choices, "2026-01-01T00:00:00Z"),
    ]
    with pytest.raises(qs.AnswerError) as bare:
        qs.resolve(pending, None, "RUN")
    assert "has 2 pending questions: reviews/security@1 (approve|reject), reviews/legal@1" in (
        str(bare.value)
    )
    assert qs.resolve(pending, "reviews/legal", "RUN").id == "reviews/legal@1"
    assert qs.resolve(pending, "reviews/security@1", "RUN").id == "reviews/security@1"
    with pytest.raises(qs.AnswerError, match="matches 2 pending questions"):
        qs.resolve(pending, "reviews/*", "RUN")
    with pytest.raises(qs.AnswerError, match="no pending question"):
        qs.resolve([], None, "RUN")
    assert qs.split_answer("reviews/security=approve") == ("reviews/security", "approve")
    assert qs.split_answer("a = b") == ("a", " b")
    assert qs.split_answer("x y=z") == (None, "x y=z")


# -- sub-loops and moving the run --------------------------------------------------------

PARENT = """\
name: parent
initial: reviews
states:
  reviews:
    loop: review.yaml
    route: {approved: ship, rejected: stop}
  ship: {action: echo shipped, next: done}
  stop: {terminal: true, outcome: failure}
  done: {terminal: true}
"""
REVIEW = """\
name: review
initial: security
states:
  security:
    ask: "Security review OK?"
    choices: [approve, reject]
    route: {approve: approved, reject: rejected}
  approved: {terminal: true}
  rejected: {terminal: true, outcome: failure}
"""


def test_a_child_question_suspends_the_tree_and_resume_answers_into_it(
    project: Project, tmp_path: Path
) -> None:
    write(tmp_path, "parent.yaml", PARENT)
    write(tmp_path, "review.yaml", REVIEW)
    out = project.ll("run", "parent.yaml")
    assert out.returncode == 6, out.stdout + out.stderr
    root = run_root(tmp_path)
    assert "ll: suspended at 'reviews/security' (step 1): Security review OK?" in out.stderr
    assert [q["id"] for q in state(root)["pending"]] == ["reviews/security@1"]
    done = project.ll("resume", root.name, "--answer", "reviews/security=approve")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "shipped" in done.stdout
    (child,) = (root / "sub").iterdir()
    assert any(e["event"] == "answer" for e in events(child))


def test_a_run_directory_copied_into_a_fresh_clone_resumes_there(
    project: Project, tmp_path: Path
) -> None:
    first, clone, elsewhere = tmp_path / "ci-job-1", tmp_path / "clone", tmp_path / "other"
    for d in (first, clone, elsewhere):
        d.mkdir()
    for d in (first, clone):
        write(d, "parent.yaml", PARENT)
        write(d, "review.yaml", REVIEW)
    assert project.ll("run", "parent.yaml", cwd=first).returncode == 6
    root = run_root(first)
    shutil.copytree(first / ".loops", clone / ".loops")
    shutil.rmtree(first)  # the first job's checkout is gone
    moved = clone / ".loops" / "runs" / root.name
    out = project.ll("resume", moved, "--answer", "approve", cwd=elsewhere)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "shipped" in out.stdout
    data = state(moved)
    assert data["loop_file"] == str((clone / "parent.yaml").resolve())
    assert not (elsewhere / ".loops").exists()


# -- simulation ----------------------------------------------------------------------------


def test_ll_test_answers_questions_from_the_script_both_branches(
    project: Project, tmp_path: Path
) -> None:
    release(tmp_path, timeout=3600)
    write(
        tmp_path,
        "ship.sim.yaml",
        """\
        loop: release.yaml
        states:
          build: success
          approve: {verdict: approve, output: looks good}
          rollout: success
        expect: {final_state: done}
        """,
    )
    write(
        tmp_path,
        "late.sim.yaml",
        """\
        loop: release.yaml
        states:
          build: success
          approve: {verdict: approve, duration_ms: 7200000}
        expect: {final_state: abandon}
        """,
    )
    write(
        tmp_path,
        "reject.sim.yaml",
        """\
        loop: release.yaml
        states:
          build: success
          fix: success
          approve: [reject, approve]
          rollout: success
        expect: {path: [build, approve, fix, approve, rollout, done]}
        """,
    )
    out = project.ll("test", "ship.sim.yaml", "late.sim.yaml", "reject.sim.yaml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 passed" in out.stdout
    write(tmp_path, "bad.sim.yaml", "loop: release.yaml\nstates:\n  approve: maybe\n")
    bad = project.ll("test", "bad.sim.yaml")
    assert "bad.sim.yaml:3: state 'approve' cannot be answered" in bad.stdout + bad.stderr


# -- CI ------------------------------------------------------------------------------------


def test_github_output_and_junit_say_suspended_not_failed(project: Project, tmp_path: Path) -> None:
    release(tmp_path)
    outputs = tmp_path / "gh-output"
    out = project.ll(
        "run", "release.yaml", "--junit-xml", "report.xml",
        env={"GITHUB_OUTPUT": str(outputs)},
    )  # fmt: skip
    assert out.returncode == 6
    run_id = run_root(tmp_path).name
    assert outputs.read_text().splitlines() == [
        f"run_id={run_id}",
        "exit_code=6",
        "suspended=true",
        "pending=approve@2",
    ]
    xml = (tmp_path / "report.xml").read_text()
    assert 'failures="0"' in xml
    assert 'errors="0"' in xml
    assert "suspended" in xml
    project.ll("resume", run_id, "--answer", "approve", env={"GITHUB_OUTPUT": str(outputs)})
    assert outputs.read_text().splitlines()[-3:] == [
        "exit_code=0",
        "suspended=false",
        "pending=",
    ]


# -- the terminal prompt (a pty) -----------------------------------------------------------


class Pty:
    """`ll` with a terminal on stdin and stdout, as a person would run it."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        import pty

        self.master, slave = pty.openpty()
        base = {k: v for k, v in os.environ.items() if k != "CI"}
        self.proc = subprocess.Popen(
            [*LL, *args], cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
            env={**base, "USER": "tester", "TERM": "dumb", **(env or {})},
        )  # fmt: skip
        os.close(slave)
        self.seen = b""

    def expect(self, text: str, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while text.encode() not in self.seen:
            left = end - time.monotonic()
            assert left > 0, f"never saw {text!r}; saw {self.seen.decode(errors='replace')!r}"
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if ready:
                try:
                    self.seen += os.read(self.master, 4096)
                except OSError:  # the child closed the terminal
                    assert text.encode() in self.seen, self.seen
                    return

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait(self) -> int:
        try:
            while True:  # drain, so the child never blocks on a full terminal
                ready, _, _ = select.select([self.master], [], [], 0.5)
                if ready:
                    chunk = os.read(self.master, 4096)
                    if not chunk:
                        break
                    self.seen += chunk
                elif self.proc.poll() is not None:
                    break
        except OSError:
            pass
        code = self.proc.wait(timeout=60)
        os.close(self.master)
        return code


def test_in_a_terminal_the_question_is_asked_and_answered(tmp_path: Path) -> None:
    release(tmp_path)
    term = Pty(["run", "release.yaml"], tmp_path)
    term.expect("answer approve@2> ")
    term.send("maybe\n")
    term.expect("'maybe' is not a choice")
    term.send("1 all green\n")
    assert term.wait() == 0, term.seen
    assert b"shipping by tester - all green" in term.seen


def test_ll_answer_reaches_a_run_waiting_at_its_prompt(project: Project, tmp_path: Path) -> None:
    release(tmp_path)
    term = Pty(["run", "release.yaml"], tmp_path)
    term.expect("answer approve@2> ")
    run_id = run_root(tmp_path).name
    given = project.ll("answer", run_id, "approve", "--by", "carol")
    assert given.returncode == 0, given.stderr
    assert given.stdout.rstrip().endswith("; the running run took it"), given.stdout
    assert term.wait() == 0, term.seen
    assert b"shipping by carol" in term.seen


def test_no_input_in_a_terminal_suspends_instead_of_asking(tmp_path: Path) -> None:
    release(tmp_path)
    term = Pty(["run", "release.yaml", "--no-input"], tmp_path)
    assert term.wait() == 6, term.seen
    assert b"answer approve@2>" not in term.seen
    assert b"ll: suspended at 'approve' (step 2)" in term.seen


def test_ctrl_c_at_the_prompt_stops_the_run_and_the_question_stays(
    project: Project, tmp_path: Path
) -> None:
    release(tmp_path)
    term = Pty(["run", "release.yaml"], tmp_path)
    term.expect("answer approve@2> ")
    term.proc.send_signal(signal.SIGINT)
    assert term.wait() == 130, term.seen
    run_id = run_root(tmp_path).name
    assert [q["id"] for q in state(run_root(tmp_path))["pending"]] == ["approve@2"]
    assert project.ll("resume", run_id, "--answer", "approve").returncode == 0


def test_ll_answer_reaches_a_child_question_waiting_at_the_prompt(
    project: Project, tmp_path: Path
) -> None:
    write(tmp_path, "parent.yaml", PARENT)
    write(tmp_path, "review.yaml", REVIEW)
    term = Pty(["run", "parent.yaml"], tmp_path)
    term.expect("answer reviews/security@1> ")
    given = project.ll("answer", run_root(tmp_path).name, "reviews/security=approve")
    assert given.returncode == 0, given.stderr
    assert term.wait() == 0, term.seen
    assert b"shipped" in term.seen


def test_under_ci_a_terminal_is_not_asked(tmp_path: Path) -> None:
    release(tmp_path)
    term = Pty(["run", "release.yaml"], tmp_path, env={"CI": "true"})
    assert term.wait() == 6, term.seen
    assert b"answer approve@2>" not in term.seen


def test_free_text_questions_take_any_answer_as_the_output(
    project: Project, tmp_path: Path
) -> None:
    write(
        tmp_path,
        "notes.yaml",
        """\
        name: notes
        initial: why
        states:
          why:
            ask: "What changed?"
            capture: why
            next: show
          show:
            action: 'echo "${captured.why.output} (${captured.why.verdict})"'
            next: done
          done: {terminal: true}
        """,
    )
    assert project.ll("run", "notes.yaml").returncode == 6
    run_id = run_root(tmp_path).name
    out = project.ll("resume", run_id, "--answer", "the cache key; see #12")
    assert out.returncode == 0, out.stderr
    assert "the cache key; see #12 (success)" in out.stdout


def test_with_two_questions_pending_a_bare_answer_is_refused_with_the_list(
    project: Project,
    tmp_path: Path,
) -> None:
    release(tmp_path)
    project.ll("run", "release.yaml")
    root = run_root(tmp_path)
    data = state(root)
    # a second question, as a fork's other branch would leave it
    data["pending"].append({**data["pending"][0], "id": "other/approve@1"})
    (root / "state.json").write_text(json.dumps(data), encoding="utf-8")
    bare = project.ll("resume", root.name, "--answer", "approve")
    assert bare.returncode == 2
    assert (
        f"run {root.name} has 2 pending questions: approve@2 (approve|reject), "
        "other/approve@1 (approve|reject); say which one: --answer ID=VALUE"
    ) in bare.stderr
    aimed = project.ll("resume", root.name, "--answer", "approve=approve")
    assert aimed.returncode == 0, aimed.stderr


def test_a_question_expires_while_its_prompt_waits(tmp_path: Path) -> None:
    release(tmp_path, timeout=1)
    term = Pty(["run", "release.yaml"], tmp_path)
    term.expect("answer approve@2> ")
    assert term.wait() == 1, term.seen  # nobody typed: timeout -> abandon
    verdicts = [e for e in events(run_root(tmp_path)) if e["event"] == "evaluate"]
    assert verdicts[-1]["verdict"] == "timeout"


def test_a_child_called_again_asks_again_and_the_parent_keeps_no_stale_question(
    project: Project,
    tmp_path: Path,
) -> None:
    write(tmp_path, "review.yaml", REVIEW)
    write(
        tmp_path,
        "twice.yaml",
        """\
        name: twice
        initial: reviews
        states:
          reviews:
            loop: review.yaml
            route: {approved: again, rejected: stop}
          again:
            action: test -f marker || { touch marker; exit 1; }
            on_success: done
            on_failure: reviews
          stop: {terminal: true, outcome: failure}
          done: {terminal: true}
        """,
    )
    assert project.ll("run", "twice.yaml").returncode == 6
    root = run_root(tmp_path)
    second = project.ll("resume", root.name, "--answer", "approve")
    assert second.returncode == 6, second.stdout + second.stderr  # the same question, again
    assert [q["id"] for q in state(root)["pending"]] == ["reviews/security@1"]
    assert "ll: suspended at 'reviews/security' (step 1)" in second.stderr
    done = project.ll("resume", root.name, "--answer", "approve")
    assert done.returncode == 0, done.stdout + done.stderr
    assert state(root)["pending"] == []


def test_the_github_summary_shows_a_suspended_run_as_waiting(
    project: Project, tmp_path: Path
) -> None:
    release(tmp_path)
    summary = tmp_path / "summary.md"
    out = project.ll(
        "run", "release.yaml",
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)},
    )  # fmt: skip
    assert out.returncode == 6
    assert "### ⏸️ ll: release — suspended" in summary.read_text(encoding="utf-8")
    assert "::notice " in out.stdout
    assert "::error " not in out.stdout
