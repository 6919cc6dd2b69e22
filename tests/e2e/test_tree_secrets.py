"""No secret in any file of a run tree, through the real `ll`: a fork's `items.json`, a
branch's `result.json`, the journal of a fork's action branches, the fork's `join.json`, a
used answer's note under `answers/used/`, and a crash report's `--set` values; in clear,
JSON-escaped or shell-quoted. A resumed fork still gets the real values back (the records
are sealed, not masked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from little_loops.record.secrets import quoted_forms

# Quotes, a dollar and a backslash: its shell-quoted and JSON-escaped forms differ from it.
TOKEN = "tok$en\"q'x\\9-77731"

CHILD = """
name: child
initial: say
context: {word: none}
outputs: {said: "${captured.said.output}"}
states:
  say:
    action: 'printf "%s|child\\n" "$API_TOKEN"'
    capture: said
    next: done
  done: {terminal: true}
"""

PARENT = """
name: parent
initial: regions
states:
  regions:
    for_each: "${env.ITEMS}"
    loop: child.yaml
    with: {word: "${item.value}"}
    capture: regions
    on_success: checks
    on_failure: checks
  checks:
    parallel:
      a: {action: 'printf "%s\\n" "$API_TOKEN"'}
      b: {action: 'printf "%s\\n" "$API_TOKEN"; exit 1'}
    capture: checks
    on_success: ask
    on_failure: ask
  ask:
    ask: "ship it?"
    choices: [go, stop]
    capture: answer
    route: {go: done, stop: done}
  done:
    action: 'echo "${captured.checks.branches.a.output} ${captured.answer.output}"'
    terminal: true
"""


def ll(cwd: Path, *args: str, prologue: str = "") -> subprocess.CompletedProcess[str]:
    code = (
        f"{prologue}\nimport sys\nsys.argv[0] = 'll'\nfrom little_loops.entry import main\nmain()\n"
    )
    env = {**os.environ, "API_TOKEN": TOKEN, "ITEMS": json.dumps([f"a-{TOKEN}", "plain"])}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def leaks(root: Path, secret: str) -> list[str]:
    """Every file under `root` holding `secret` in any of its quoted forms."""
    forms = {form.encode() for form in quoted_forms(secret)}
    forms.add(json.dumps(secret).encode())  # ASCII escapes too
    return [
        str(path.relative_to(root))
        for path in sorted(root.rglob("*"))
        if path.is_file() and any(form in path.read_bytes() for form in forms)
    ]


def test_no_file_of_the_tree_holds_a_secret_and_a_resume_gets_the_values_back(
    tmp_path: Path,
) -> None:
    for name, text in (("child.yaml", CHILD), ("parent.yaml", PARENT)):
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    first = ll(tmp_path, "run", "parent.yaml", "--no-input")
    assert first.returncode == 6, first.stdout + first.stderr  # suspended at the question
    (run,) = (tmp_path / ".loops" / "runs").iterdir()
    fork = run / "sub" / "0001-regions"
    items = json.loads((fork / "items.json").read_text(encoding="utf-8"))
    assert [i["key"] for i in items] == ["1", "2"]  # a secret is never a branch key
    # a sealed record keeps a marker where the secret stood
    assert "\u27e6secret env.API_TOKEN" in (fork / "items.json").read_text(encoding="utf-8")
    done = ll(tmp_path, "resume", run.name, "--answer", "go", "--note", f"note {TOKEN} end")
    assert done.returncode == 0, done.stdout + done.stderr
    assert leaks(tmp_path / ".loops", TOKEN) == []
    assert TOKEN not in done.stdout + done.stderr
    for name in ("items.json", "join.json", "1/result.json"):
        assert (fork / name).is_file(), name
    # the action branches' records, states and outputs: the fork's journal, sealed too
    journal = run / "sub" / "0002-checks" / "branches.jsonl"
    entries = {e["key"]: e for e in map(json.loads, journal.read_text().splitlines())}
    assert "\u27e6secret" in entries["b"]["result"]["output"]
    assert "\u27e6secret" in entries["b"]["state"]["prev"]["output"]
    assert list((run / "answers" / "used").glob("*.json"))
    # the records hold the values, sealed; the steps saw them whole (masked in their logs)
    shown = json.loads((fork / "1" / "result.json").read_text(encoding="utf-8"))
    assert "\u27e6secret" in shown["outputs"]["said"]
    last = ll(tmp_path, "logs", run.name, "--step", "4")
    assert last.returncode == 0, last.stderr
    assert "***" in last.stdout
    assert TOKEN not in last.stdout


def test_a_resumed_fork_reads_its_sealed_items_back_whole(tmp_path: Path) -> None:
    """The items are resolved once and stored sealed; a branch started after a resume gets
    the real value (here: stopped after the fork's items were stored, before any branch)."""
    (tmp_path / "child.yaml").write_text(textwrap.dedent(CHILD), encoding="utf-8")
    loop = """
    name: parent
    initial: regions
    states:
      regions:
        for_each: "${env.ITEMS}"
        action: 'test "${item.value}" = "a-$API_TOKEN" -o "${item.value}" = plain'
        on_success: done
        on_failure: failed
      failed: {terminal: true, outcome: failure}
      done: {terminal: true}
    """
    (tmp_path / "parent.yaml").write_text(textwrap.dedent(loop), encoding="utf-8")
    prologue = (
        "from little_loops.run import fork_schedule\n"
        "def _stop(*a, **k):\n    raise KeyboardInterrupt\n"
        "fork_schedule.Fork.run = _stop\n"
    )
    stopped = ll(tmp_path, "run", "parent.yaml", prologue=prologue)
    assert stopped.returncode == 130, stopped.stdout + stopped.stderr
    (run,) = (tmp_path / ".loops" / "runs").iterdir()
    assert (run / "sub" / "0001-regions" / "items.json").is_file()
    assert leaks(tmp_path / ".loops", TOKEN) == []
    done = ll(tmp_path, "resume", run.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert leaks(tmp_path / ".loops", TOKEN) == []


def test_a_crash_report_holds_no_set_value_and_no_secret(tmp_path: Path) -> None:
    loop = """
    name: crashy
    initial: one
    secrets: [password]
    context: {password: none}
    states:
      one: {action: "echo hi", next: done}
      done: {terminal: true}
    """
    (tmp_path / "loop.yaml").write_text(textwrap.dedent(loop), encoding="utf-8")
    prologue = (
        "from little_loops.run import runner\n"
        "def _bug(self, *a, **k):\n"
        "    raise ZeroDivisionError('planted ' + self.progress.context['password'])\n"
        "runner.Runner._remember = _bug\n"
    )
    secret = "pa$$-w'o\"rd-4471"
    proc = ll(tmp_path, "run", "loop.yaml", "--set", f"password={secret}", prologue=prologue)
    assert proc.returncode == 70, proc.stdout + proc.stderr
    (run,) = (tmp_path / ".loops" / "runs").iterdir()
    (report,) = run.glob("crash-*.txt")
    text = report.read_text(encoding="utf-8")
    assert "ZeroDivisionError: planted ***" in text
    assert "--set password=***" in text
    assert leaks(tmp_path / ".loops", secret) == []
    assert leaks(tmp_path / ".loops", TOKEN) == []
    assert secret not in proc.stdout + proc.stderr
