"""Forks through the real `ll`: `parallel:` branches and `for_each:` items run as child runs in
threads, their join decides the state's verdict, every branch's result is kept, `fail_fast`
cancels the rest, `--jobs` caps the whole tree, and a fork killed with -9 resumes without
running a finished branch again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from project import Project
from project import fork_journal as journal

from little_loops.model.fork import (
    BranchEnd,
    decide,
    make_items,
    parse_items,
    summary,
)
from little_loops.model.loop import Join

# `ll` runs in process (the `project` fixture) except where it is killed with SIGKILL or
# SIGINT mid-fork: that run keeps a process of its own; the resume runs in process.
LL = [sys.executable, "-m", "little_loops"]


def write(where: Path, name: str, text: str) -> Path:
    path = where / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def run_root(cwd: Path) -> Path:
    runs = [p for p in (cwd / ".loops" / "runs").iterdir() if (p / "state.json").is_file()]
    assert len(runs) == 1, runs
    return runs[0]


def events(root: Path) -> list[dict[str, Any]]:
    lines = (root / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def state(root: Path) -> dict[str, Any]:
    """A run's state.json, or an action branch's state from its fork's journal."""
    if not (root / "state.json").exists() and root.parent.parent.name == "sub":
        found: dict[str, Any] = journal(root.parent)[root.name]["state"]
        return found
    data: dict[str, Any] = json.loads((root / "state.json").read_text(encoding="utf-8"))
    return data


def finished(fork: Path) -> dict[str, dict[str, Any]]:
    """The records of a fork's action branches that finished, by key (the journal)."""
    return {k: e["result"] for k, e in journal(fork).items() if e["state"]["status"] == "finished"}


# -- the pure parts ---------------------------------------------------------------------------


def test_items_parse_as_json_array_or_lines_and_keys_fall_back_to_indexes() -> None:
    assert parse_items('["a", "b"]') == ["a", "b"]
    assert parse_items(" eu-west \n\n us-east\n") == ["eu-west", "us-east"]
    assert parse_items('[{"name": "x"}]') == [{"name": "x"}]
    assert [i.key for i in make_items(["eu-west", "us-east"])] == ["eu-west", "us-east"]
    # one unsafe or duplicate text: every key is the index
    assert [i.key for i in make_items(["a b", "c"])] == ["1", "2"]
    assert [i.key for i in make_items(["x", "x"])] == ["1", "2"]
    with pytest.raises(Exception, match="more than the cap of 1000"):
        make_items(list(range(1001)))


def test_join_decides_as_soon_as_it_can_and_counts_cancelled_as_not_met() -> None:
    ok, bad = BranchEnd("success", "success"), BranchEnd("failure", "failure")
    assert decide(Join("all"), 3, {"a": ok}) is None
    assert decide(Join("all"), 3, {"a": bad}) == "failure"
    assert decide(Join("any"), 3, {"a": ok}) == "success"
    assert decide(Join(2), 3, {"a": ok, "b": bad}) is None
    assert decide(Join(2), 3, {"a": ok, "b": bad, "c": ok}) == "success"
    assert decide(Join("all", "approve"), 2, {"a": BranchEnd("approve")}) is None
    assert decide(Join("all"), 0, {}) == "success"
    assert decide(Join("any"), 0, {}) == "failure"
    # a child terminal whose outcome is success counts as success
    assert decide(Join("all"), 1, {"a": BranchEnd("deployed", "success")}) == "success"
    assert decide(Join("all"), 1, {"a": BranchEnd("cancelled", "cancelled")}) == "failure"
    items = make_items(["a", "b"])
    done = summary(Join("all"), items, {"a": ok, "b": bad}, "failure")
    assert (done["succeeded"], done["failed"], done["failed_items"]) == (1, 1, "b")


# -- through the real `ll` ----------------------------------------------------------------------

FOUR = """
name: four
initial: checks
states:
  checks:
    parallel:
      a: {action: "sleep 1; echo A"}
      b: {action: "sleep 1; echo B"}
      c: {action: "sleep 1; echo C"}
      d: {action: "sleep 1; echo D"}
    max_concurrency: 4
    capture: checks
    on_success: done
    on_failure: done
  done:
    action: "echo ${captured.checks.succeeded} ${captured.checks.branches.c.output}"
    terminal: true
"""


def test_four_one_second_branches_at_once_end_well_under_two_seconds(
    project: Project, tmp_path: Path
) -> None:
    loop = write(tmp_path, "four.yaml", FOUR)
    started = time.monotonic()
    done = project.ll("run", loop)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    root = run_root(tmp_path)
    join = [e for e in events(root) if e["event"] == "evaluate" and e["state"] == "checks"]
    assert join[0]["type"] == "join"
    assert join[0]["verdict"] == "success"
    from datetime import datetime

    stamps = [datetime.fromisoformat(e["ts"].replace("Z", "+00:00")) for e in events(root)]
    kinds = [e["event"] for e in events(root)]
    span = stamps[kinds.index("evaluate")] - stamps[kinds.index("state_enter")]
    assert span.total_seconds() < 1.9  # four 1 s branches, from the fork's start to its join
    assert took < 8, took  # interpreter start-up included, on a busy machine
    assert "4 C" in done.stdout  # the terminal's output: count and one branch's output
    # one line per finished branch, then the join
    lines = done.stdout.splitlines()
    assert any(line.split()[:2] == ["c", "success"] for line in lines), done.stdout


FAILING = """
name: failing
initial: checks
states:
  checks:
    parallel:
      lint:  {action: "echo lint-ok"}
      types: {action: "echo types broke >&2; exit 1"}
      tests: {action: "sleep 0.3; echo tests-ok"}
    join: all
    capture: checks
    on_success: ship
    on_failure: fix
  ship: {action: "echo shipped", terminal: true}
  fix:
    action: "echo fix:${captured.checks.failed_keys}:${captured.checks.branches.tests.output}"
    terminal: true
    outcome: failure
"""


def test_a_failing_branch_with_join_all_routes_failure_and_every_result_is_kept(
    project: Project,
    tmp_path: Path,
) -> None:
    loop = write(tmp_path, "failing.yaml", FAILING)
    done = project.ll("run", loop)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "fix:types:tests-ok" in done.stdout
    root = run_root(tmp_path)
    ends = {e["branch"]: e for e in events(root) if e["event"] == "child_complete"}
    assert {k: e["verdict"] for k, e in ends.items()} == {
        "lint": "success",
        "types": "failure",
        "tests": "success",
    }
    assert ends["types"]["reason"]  # why it failed, in one line
    join = json.loads((root / "sub" / "0001-checks" / "join.json").read_text())
    assert list(join) == ["lint", "types", "tests"]  # item order, whatever the finish order
    assert join["lint"]["output"] == "lint-ok"
    # An action branch is one entry of the fork's journal; its folder holds only what its
    # action printed (one that prints nothing has none).
    fork = root / "sub" / "0001-checks"
    assert sorted(p.name for p in fork.iterdir() if p.is_file()) == [
        "branches.jsonl",
        "items.json",
        "join.json",
    ]
    assert {p.name for p in fork.glob("*/*")} == {"steps.log"}
    assert finished(root / "sub" / "0001-checks")["types"]["verdict"] == "failure"
    assert "join all: 2 of 3 succeeded; not: types" in done.stdout


FOR_EACH = """
name: rollout
initial: regions
context: {out: OUT}
states:
  regions:
    action: printf 'eu-west\\nus-east\\nap-south\\n'
    capture: regions
    next: rollout
  rollout:
    for_each: ${captured.regions.output}
    loop: deploy.yaml
    with: {region: "${item.value}", n: "${item.index}"}
    max_concurrency: 2
    capture: rollout
    on_success: listed
    on_failure: listed
  listed:
    for_each: ['{"name": "x"}', b]
    action: "echo ${item.key}=${item.value} >> ${context.out}"
    on_success: done
    on_failure: done
  done:
    action: >-
      echo ${captured.rollout.branches.us-east.outputs.where}
      ${captured.rollout.failed_items}
    terminal: true
"""

DEPLOY = """
name: deploy
initial: go
context: {region: ~, n: "0"}
outputs: {where: "${context.region}-${context.n}"}
states:
  go:
    action: "test ${context.region} != ap-south"
    on_success: live
    on_failure: rolled_back
  live: {terminal: true}
  rolled_back: {terminal: true, outcome: failure}
"""


def test_for_each_runs_a_child_per_item_with_item_values_and_keys(
    project: Project, tmp_path: Path
) -> None:
    out = tmp_path / "out.txt"
    write(tmp_path, "deploy.yaml", DEPLOY)
    loop = write(tmp_path, "rollout.yaml", FOR_EACH.replace("OUT", str(out)))
    check = project.ll("validate", loop)
    assert check.returncode == 0, check.stdout + check.stderr
    done = project.ll("run", loop)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "us-east-2 ap-south" in done.stdout
    root = run_root(tmp_path)
    items = json.loads((root / "sub" / "0002-rollout" / "items.json").read_text())
    assert [i["key"] for i in items] == ["eu-west", "us-east", "ap-south"]
    ends = {e["branch"]: e for e in events(root) if e["event"] == "child_complete"}
    assert ends["ap-south"]["verdict"] == "rolled_back"
    assert ends["eu-west"]["verdict"] == "live"
    assert (root / "sub" / "0002-rollout" / "us-east" / "state.json").is_file()
    # a JSON object item is not a safe key: indexes for every item
    assert sorted(out.read_text().splitlines()) == ['1={"name": "x"}', "2=b"]


FAIL_FAST = """
name: fast
initial: checks
states:
  checks:
    parallel:
      quick: {action: "exit 1"}
      slow:  {action: "echo $$ > PIDFILE.new && mv PIDFILE.new PIDFILE; sleep 30"}
      later: {action: "sleep 30"}
    max_concurrency: 2
    fail_fast: true
    capture: checks
    on_success: done
    on_failure: done
  done:
    action: "echo cancelled=${captured.checks.cancelled_items}"
    terminal: true
"""


def test_fail_fast_cancels_running_and_unstarted_branches_and_kills_their_processes(
    project: Project,
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "slow.pid"
    loop = write(tmp_path, "fast.yaml", FAIL_FAST.replace("PIDFILE", str(pidfile)))
    started = time.monotonic()
    done = project.ll("run", loop)
    assert time.monotonic() - started < 20
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cancelled=slow\nlater" in done.stdout.replace("\r", "")
    root = run_root(tmp_path)
    ends = {e["branch"]: e for e in events(root) if e["event"] == "child_complete"}
    assert {k: e["verdict"] for k, e in ends.items()} == {
        "quick": "failure",
        "slow": "cancelled",
        "later": "cancelled",
    }
    slow = state(root / "sub" / "0001-checks" / "slow")
    assert (slow["status"], slow["outcome"]) == ("finished", "cancelled")
    assert not (root / "sub" / "0001-checks" / "later").exists()  # never started
    if pidfile.exists():  # written whole or not at all: the branch may be cut off at any line
        pid = int(pidfile.read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


JOBS = """
name: jobs
initial: outer
states:
  outer:
    for_each: [a, b, c, d]
    action: "echo start >> LOG; sleep 0.4; echo end >> LOG"
    max_concurrency: 4
    on_success: done
    on_failure: done
  done: {terminal: true}
"""


def _max_overlap(log: Path) -> int:
    running = most = 0
    for line in log.read_text().splitlines():
        running += 1 if line == "start" else -1
        most = max(most, running)
    return most


def test_jobs_caps_actions_running_at_once(project: Project, tmp_path: Path) -> None:
    log = tmp_path / "log"
    loop = write(tmp_path, "jobs.yaml", JOBS.replace("LOG", str(log)))
    done = project.ll("run", loop, "--jobs", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _max_overlap(log) == 2
    log.unlink()
    done = project.ll("run", loop)  # default 8: all four at once
    assert _max_overlap(log) == 4


def test_json_events_of_branches_carry_their_path(project: Project, tmp_path: Path) -> None:
    loop = write(tmp_path, "failing.yaml", FAILING)
    done = project.ll("run", loop, "--json")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    paths = {tuple(e["path"]) for e in lines if "path" in e}
    assert {("checks", "lint"), ("checks", "types"), ("checks", "tests")} <= paths
    starts = [e for e in lines if e["event"] == "child_start" and "path" not in e]
    assert [e["branch"] for e in starts] == ["lint", "types", "tests"]
    assert all(e["kind"] == "branch" for e in starts)


KILL = """
name: killme
initial: work
states:
  work:
    for_each: [i1, i2, i3, i4, i5, i6]
    action: >-
      if [ ${item.key} = i4 ] && [ ! -e GATE ]; then touch GATE.waiting; sleep 30; fi;
      echo ${item.key} >> LEDGER
    max_concurrency: 3
    capture: work
    on_success: done
    on_failure: done
  done:
    action: "echo joined ${captured.work.succeeded}"
    terminal: true
"""


def test_kill_9_mid_fork_then_resume_runs_no_finished_branch_again(
    project: Project, tmp_path: Path
) -> None:
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    text = KILL.replace("LEDGER", str(ledger)).replace("GATE", str(gate))
    loop = write(tmp_path, "kill.yaml", text)
    proc = subprocess.Popen([*LL, "run", str(loop), "--quiet"], cwd=tmp_path)
    deadline = time.monotonic() + 30

    def settled() -> bool:  # i4 waits; every other branch ran and its end is written down
        done = {k for f in tmp_path.glob(".loops/runs/*/sub/0001-work") for k in finished(f)}
        return Path(f"{gate}.waiting").exists() and done == {"i1", "i2", "i3", "i5", "i6"}

    while not settled():
        assert proc.poll() is None, "ll ended before the kill point"
        assert time.monotonic() < deadline, "timed out waiting for the kill point"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _lines(ledger)
    assert "i4" not in before
    gate.touch()
    resumed = project.ll("resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = _lines(ledger)
    assert sorted(after) == ["i1", "i2", "i3", "i4", "i5", "i6"]  # each exactly once
    assert after[: len(before)] == before
    root = run_root(tmp_path)
    assert state(root)["status"] == "finished"
    # i4, cut off mid-action, had no journal entry: it started again from its start.
    starts = [e["branch"] for e in events(root) if e["event"] == "child_start"]
    assert starts.count("i4") == 2
    assert all(starts.count(k) == 1 for k in ("i1", "i5"))
    assert sorted(finished(root / "sub" / "0001-work")) == ["i1", "i2", "i3", "i4", "i5", "i6"]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ("    parallel: {a: {action: 'true'}, b: {action: 'true'}}\n    join: most\n",
         "bad-join", "join most"),
        ("    parallel: {a: {action: 'true'}, b: {action: 'true'}}\n    join: 3\n",
         "bad-join", "waits for 3 branches but has 2"),
        ("    action: echo ${item.value}\n", "bad-placeholder", "only set in a 'for_each'"),
        ("    parallel: {a: {action: 'true'}, b: {action: 'true'}}\n    action: 'true'\n",
         "state-kind", "put the action in a branch"),
        ("    action: 'true'\n    fail_fast: true\n", "state-kind", "only a fork uses"),
        ("    parallel: {a: {action: 'true'}, 'b c': {action: 'true'}}\n", "schema", "b c"),
    ],
)  # fmt: skip
def test_validate_names_what_is_wrong_with_a_fork(
    project: Project, tmp_path: Path, body: str, code: str, words: str
) -> None:
    text = "name: bad\ninitial: s\nstates:\n  s:\n" + body + "    next: done\n"
    text += "  done: {terminal: true}\n"
    loop = tmp_path / "bad.yaml"
    loop.write_text(text, encoding="utf-8")
    checked = project.ll("validate", loop)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    out = checked.stdout + checked.stderr
    assert "bad.yaml:" in out, out
    assert words in out, out
    assert "Traceback" not in out


def test_a_fork_must_route_its_failure_and_too_many_items_is_its_error(
    project: Project, tmp_path: Path
) -> None:
    uncovered = write(
        tmp_path,
        "uncovered.yaml",
        """
        name: u
        initial: s
        states:
          s:
            parallel: {a: {action: "true"}, b: {action: "true"}}
            route: {success: done}
          done: {terminal: true}
        """,
    )
    checked = project.ll("validate", uncovered)
    assert checked.returncode == 2
    assert "'failure'" in checked.stdout + checked.stderr
    many = write(
        tmp_path,
        "many.yaml",
        """
        name: many
        initial: s
        states:
          s:
            for_each: "${captured.n.output}"
            action: "true"
            on_success: done
            on_failure: done
            on_error: broken
          done: {terminal: true}
          broken: {action: "echo never", terminal: true, outcome: failure}
        """,
    )
    text = (
        many.read_text().replace("initial: s", "initial: n")
        + "  n: {action: 'seq 1001', capture: n, next: s}\n"
    )
    many.write_text(text)
    done = project.ll("run", many)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "more than the cap of 1000" in done.stdout
    assert not (run_root(tmp_path) / "sub" / "0002-s" / "1").exists()


MATRIX = """
name: mx
initial: build
states:
  build: {action: "echo built >> LEDGER", next: rollout}
  rollout:
    for_each: [eu-west, us-east, ap-south]
    action: "echo ${item.value} >> LEDGER; test ${item.value} != us-east"
    capture: rollout
    on_success: announce
    on_failure: announce
  announce:
    action: "echo ok=${captured.rollout.succeeded} failed=${captured.rollout.failed_items}"
    terminal: true
"""


def test_matrix_round_trip_as_two_jobs_in_separate_directories(
    project: Project, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    loop = write(tmp_path, "mx.yaml", MATRIX.replace("LEDGER", str(ledger)))
    plan = project.ll("plan-matrix", loop, "rollout")
    assert plan.returncode == 0, plan.stderr
    matrix = json.loads(plan.stdout)
    assert [row["key"] for row in matrix["include"]] == ["eu-west", "us-east", "ap-south"]
    parent = tmp_path / "parent"
    parent.mkdir()
    paused = project.ll("step", loop, "--until", "rollout", cwd=parent)
    assert paused.returncode == 6, paused.stdout + paused.stderr
    # two matrix jobs, each in its own checkout
    codes = {}
    for key in ("eu-west", "us-east"):
        job = tmp_path / f"job-{key}"
        job.mkdir()
        ran = project.ll("run", loop, "--branch", f"rollout={key}", cwd=job)
        codes[key] = ran.returncode
        assert list((job / ".loops" / "runs").glob("*/branch.json")), ran.stdout + ran.stderr
    assert codes == {"eu-west": 0, "us-east": 1}
    assert sorted(_lines(ledger)) == ["built", "eu-west", "us-east"]
    # a branch killed between its end and its record: read back from its own files
    for gone in (tmp_path / "job-eu-west" / ".loops").rglob("result.json"):
        gone.unlink()
    run_id = run_root(parent).name
    joined = project.ll(
        "join", run_id, "--from", tmp_path / "job-eu-west", "--from", tmp_path / "job-us-east",
        cwd=parent,
    )  # fmt: skip
    assert joined.returncode == 0, joined.stdout + joined.stderr
    assert "ok=2 failed=us-east" in joined.stdout
    # no branch ran twice: ap-south, which no job ran, ran in the join
    assert sorted(_lines(ledger)) == ["ap-south", "built", "eu-west", "us-east"]
    unknown = project.ll("run", loop, "--branch", "rollout=nowhere", cwd=tmp_path / "job-eu-west")
    assert unknown.returncode == 3
    assert "has no branch 'nowhere'" in unknown.stdout + unknown.stderr


SIM_SCRIPT = """
loop: failing.yaml
states:
  checks/lint: success
  checks/types: failure
  checks/tests: {exit_code: 0, output: tests-ok}
  fix: {output: fixed}
expect:
  path: [checks, fix]
  outcome: failure
"""


def test_a_simulation_answers_branches_by_path(project: Project, tmp_path: Path) -> None:
    write(tmp_path, "failing.yaml", FAILING)
    script = write(tmp_path, "failing.sim.yaml", SIM_SCRIPT)
    tested = project.ll("test", script)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    wrong = write(tmp_path, "wrong.sim.yaml", SIM_SCRIPT.replace("checks/lint", "checks"))
    tested = project.ll("test", wrong)
    assert tested.returncode == 2
    assert "answer its branches instead, as 'checks/KEY'" in tested.stdout + tested.stderr


NESTED = """
name: nested
initial: outer
states:
  outer:
    for_each: [a, b, c]
    loop: inner.yaml
    with: {tag: "${item.key}"}
    max_concurrency: 3
    on_success: done
    on_failure: done
  done: {terminal: true}
"""

INNER = """
name: inner
initial: fan
context: {tag: ~}
states:
  fan:
    for_each: [x, y, z, w]
    action: "echo start >> LOG; sleep 0.2; echo end >> LOG"
    max_concurrency: 4
    on_success: ok
    on_failure: ok
  ok: {terminal: true}
"""


FAN = """\
name: fan
initial: fan
states:
  fan:
    for_each: "ITEMS"
    action: "echo ${item.value}"
    max_concurrency: 2
    on_success: done
    on_failure: done
  done: {terminal: true}
"""


def test_branches_take_turns_on_worker_threads_instead_of_a_thread_each(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork starts at most `max_concurrency` threads, each running branch after branch:
    six branches at two at a time start one more thread than a single branch does."""
    started: list[str] = []
    real = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        started.append(thread.name)
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    counts = []
    for where, items in (("one", "a"), ("six", "a\nb\nc\nd\ne\nf")):
        project.write(f"{where}/fan.yaml", FAN.replace("ITEMS", items.replace("\n", "\\n")))
        started.clear()
        done = project.ll("run", "fan.yaml", cwd=project.path / where)
        assert done.returncode == 0, done.stdout + done.stderr
        counts.append(len(started))
    assert counts[1] - counts[0] == 1, counts
    (root,) = (project.path / "six" / ".loops" / "runs").iterdir()
    [fork] = (root / "sub").iterdir()
    records = finished(fork)
    assert sorted(records) == ["a", "b", "c", "d", "e", "f"]
    for key in records:  # every branch ran its own action, and its result was kept
        assert records[key]["verdict"] == "success"


def test_a_branch_starts_without_copying_the_environment_or_resolving_the_loop_again(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tree takes the environment once and resolves its loop file, its base directory
    and the fork's folder once: five more branches resolve nothing (a branch's run directory
    is the fork's folder, resolved, and its key)."""
    resolved: list[Path] = []
    copies: list[int] = []
    real_resolve, real_iter = Path.resolve, type(os.environ).__iter__

    def resolve(path: Path, strict: bool = False) -> Path:
        resolved.append(path)
        return real_resolve(path, strict)

    def iterate(environ: Any) -> Any:
        copies.append(1)
        return real_iter(environ)

    monkeypatch.setattr(Path, "resolve", resolve)
    monkeypatch.setattr(type(os.environ), "__iter__", iterate)
    counts = []
    for where, items in (("one", "a"), ("six", "a\\nb\\nc\\nd\\ne\\nf")):
        project.write(f"{where}/fan.yaml", FAN.replace("ITEMS", items))
        resolved.clear()
        copies.clear()
        done = project.ll("run", "fan.yaml", cwd=project.path / where)
        assert done.returncode == 0, done.stdout + done.stderr
        counts.append((len(resolved), len(copies)))
    (one_resolved, one_copies), (six_resolved, six_copies) = counts
    assert six_copies == one_copies, counts
    assert six_resolved == one_resolved, counts


def test_a_fork_without_fail_fast_does_not_copy_its_ends_after_every_branch(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the join is decided early matters only with `fail_fast`; asking it after each
    branch copied every end so far (quadratic in the items: 50 million at 10,000)."""
    from little_loops.run import fork_schedule

    copied: list[int] = []
    real = fork_schedule._settled

    def settled(ends: dict[str, BranchEnd]) -> dict[str, BranchEnd]:
        copied.append(len(ends))
        return real(ends)

    monkeypatch.setattr(fork_schedule, "_settled", settled)
    project.write("fan.yaml", FAN.replace("ITEMS", "a\\nb\\nc\\nd\\ne\\nf"))
    done = project.ll("run", "fan.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert copied == []
    project.write(
        "fan.yaml", FAN.replace("ITEMS", "a\\nb").replace("max_c", "fail_fast: true\n    max_c")
    )
    copied.clear()
    done = project.ll("run", "fan.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert copied == [1, 2]  # after each branch


def test_jobs_caps_a_tree_of_nested_forks_without_deadlock(
    project: Project, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    write(tmp_path, "inner.yaml", INNER.replace("LOG", str(log)))
    loop = write(tmp_path, "nested.yaml", NESTED)
    done = project.ll("run", loop, "--jobs", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(_lines(log)) == 24  # 3 x 4 actions, each a start and an end
    assert _max_overlap(log) <= 3
    root = run_root(tmp_path)
    assert "w" in finished(root / "sub" / "0001-outer" / "b" / "sub" / "0001-fan")


INTERRUPT = """
name: stopme
initial: work
states:
  work:
    parallel:
      a: {action: "touch STARTED.a; sleep 30"}
      b: {action: "touch STARTED.b; sleep 30"}
    on_success: done
    on_failure: done
  done: {terminal: true}
"""


def test_sigint_mid_fork_kills_every_branch_and_the_run_resumes(tmp_path: Path) -> None:
    started = tmp_path / "started"
    loop = write(tmp_path, "stop.yaml", INTERRUPT.replace("STARTED", str(started)))
    proc = subprocess.Popen([*LL, "run", str(loop), "--quiet"], cwd=tmp_path)
    deadline = time.monotonic() + 30
    while not all(Path(f"{started}.{k}").exists() for k in "ab"):
        assert proc.poll() is None
        assert time.monotonic() < deadline
        time.sleep(0.02)
    stopped_at = time.monotonic()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 130
    assert time.monotonic() - stopped_at < 10
    root = run_root(tmp_path)
    for key in "ab":
        branch = state(root / "sub" / "0001-work" / key)
        assert branch["status"] == "interrupted"
    assert state(root)["status"] == "interrupted"


def test_plain_terminal_writes_one_whole_line_per_finished_branch() -> None:
    import io

    from little_loops.record.events import parse
    from little_loops.report.fork_view import ForkView
    from little_loops.report.render import PlainRenderer

    out = io.StringIO()
    view = PlainRenderer(out)
    view(parse({"event": "loop_start", "max_iterations": 10, "run_id": "r", "loop": "x"}))
    view(parse({"event": "state_enter", "step": 1, "state": "checks"}))
    for key in ("lint", "types"):
        view(parse({"event": "child_start", "step": 1, "state": "checks", "kind": "branch",
              "branch": key, "total": 2, "fork": "parallel"}))  # fmt: skip
    # a branch's own events (from its thread) print nothing: they feed the live block
    view(parse({"event": "loop_start", "path": ["checks", "lint"]}))
    view(parse({"event": "state_enter", "step": 1, "state": "lint", "path": ["checks", "lint"]}))
    view(parse({"event": "action_start", "step": 1, "state": "lint", "action": "make lint",
          "path": ["checks", "lint"]}))  # fmt: skip
    view(parse({"event": "child_complete", "step": 1, "state": "checks", "branch": "types",
          "verdict": "failure", "outcome": "failure", "final_state": "types", "steps": 1,
          "duration_ms": 1010, "reason": "exit code 1: types broke"}))  # fmt: skip
    lines = out.getvalue().splitlines()
    assert lines[-2].split() == ["1/10", "checks", "parallel", "2", "branches"]
    assert lines[-1].split()[:4] == ["types", "failure", "1", "step"]
    assert lines[-1].endswith("exit code 1: types broke")
    assert "make lint" not in out.getvalue()
    clock = iter([0.0, 2.5])
    live = ForkView(lambda: next(clock))
    live(parse({"event": "loop_start", "path": ["lint"]}))
    live(parse({"event": "state_enter", "state": "lint", "path": ["lint"]}))
    assert live.rows(80)[0].split() == ["lint", "running", "2.5", "s"]


def test_ll_graph_draws_a_fork_with_its_branches_and_join(project: Project, tmp_path: Path) -> None:
    loop = write(tmp_path, "failing.yaml", FAILING)
    drawn = project.ll("graph", loop)
    assert drawn.returncode == 0, drawn.stderr
    assert "parallel: lint ‖ types ‖ tests · join all" in drawn.stdout


KILL_CHILD = """
name: two
initial: a
context: {key: ~}
outputs: {said: "${captured.b.output}"}
states:
  a: {action: "echo a-${context.key} >> LEDGER", next: b}
  b:
    action: >-
      if [ ${context.key} = k2 ] && [ ! -e GATE ]; then touch GATE.waiting; sleep 30; fi;
      echo b-${context.key} >> LEDGER; echo said-${context.key}
    capture: b
    next: done
  done: {terminal: true}
"""

KILL_PARENT = """
name: fan
initial: work
states:
  work:
    for_each: '[{"k": "k1"}, {"k": "k2"}, {"k": "k3"}]'
    loop: two.yaml
    with: {key: "${item.value.k}"}
    max_concurrency: 3
    capture: work
    on_success: done
    on_failure: done
  done:
    action: "echo ${captured.work.branches.2.outputs.said}"
    terminal: true
"""


def test_kill_9_inside_a_loop_branch_resumes_it_from_its_last_finished_step(
    project: Project,
    tmp_path: Path,
) -> None:
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    write(
        tmp_path, "two.yaml", KILL_CHILD.replace("LEDGER", str(ledger)).replace("GATE", str(gate))
    )
    loop = write(tmp_path, "fan.yaml", KILL_PARENT)
    proc = subprocess.Popen([*LL, "run", str(loop), "--quiet"], cwd=tmp_path)
    deadline = time.monotonic() + 30

    def recorded(key: str) -> bool:  # the branch ended and its end is written down
        return any((tmp_path / ".loops" / "runs").glob(f"*/sub/0001-work/{key}/result.json"))

    while not (Path(f"{gate}.waiting").exists() and recorded("1") and recorded("3")):
        assert proc.poll() is None, "ll ended before the kill point"
        assert time.monotonic() < deadline, "timed out waiting for the kill point"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert sorted(_lines(ledger)) == ["a-k1", "a-k2", "a-k3", "b-k1", "b-k3"]
    gate.touch()
    resumed = project.ll("resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # k2 went on from its step b: no step ran twice
    assert sorted(_lines(ledger)) == ["a-k1", "a-k2", "a-k3", "b-k1", "b-k2", "b-k3"]
    assert "said-k2" in resumed.stdout


def test_validate_checks_a_loop_branch_against_its_child_at_the_branchs_line(
    project: Project,
    tmp_path: Path,
) -> None:
    child = "name: c\ninitial: a\ncontext: {suite: ~}\nstates:\n"
    child += "  a: {action: 'echo ${context.suite}', next: done}\n  done: {terminal: true}\n"
    write(tmp_path, "child.yaml", child)
    loop = write(
        tmp_path,
        "pl.yaml",
        """
        name: pl
        initial: checks
        states:
          checks:
            parallel:
              lint: {action: "true"}
              tests: {loop: child.yaml, with: {suit: full}}
            on_success: done
            on_failure: done
          done: {terminal: true}
        """,
    )
    checked = project.ll("validate", loop)
    assert checked.returncode == 2
    assert "pl.yaml:8:" in checked.stdout
    assert "state 'checks/tests' passes 'suit'" in checked.stdout


BUDGET = """
name: budget
initial: fan
max_cost_usd: 0.5
states:
  fan:
    parallel:
      a: {action: "/ll:do a"}
      b: {action: "/ll:do b"}
      c: {action: "/ll:do c"}
    on_success: done
    on_failure: done
  done: {terminal: true}
"""


def test_the_roots_budget_spent_by_branches_stops_the_fork_with_exit_5(
    project: Project, tmp_path: Path
) -> None:
    loop = write(tmp_path, "budget.yaml", BUDGET)
    script = write(
        tmp_path,
        "budget.sim.yaml",
        "states:\n" + "".join(f"  fan/{k}: {{verdict: success, cost_usd: 0.4}}\n" for k in "abc"),
    )
    done = project.ll("run", loop, "--simulate", script)
    assert done.returncode == 5, done.stdout + done.stderr
    assert "passed max_cost_usd" in done.stdout
    root = run_root(tmp_path)
    assert not (root / "sub" / "0001-fan" / "c").exists()  # never started


def test_verbose_prefixes_each_whole_line_with_its_branchs_path(
    project: Project, tmp_path: Path
) -> None:
    loop = write(tmp_path, "failing.yaml", FAILING)
    done = project.ll("run", loop, "-v")
    lines = done.stdout.splitlines()
    assert "[checks/lint] lint-ok" in lines
    assert "[checks/tests] tests-ok" in lines
    assert "[checks/types] types broke" in lines


def test_a_parallel_states_timeout_is_each_action_branchs_default(
    project: Project, tmp_path: Path
) -> None:
    loop = write(
        tmp_path,
        "slow.yaml",
        """
        name: slow
        initial: checks
        states:
          checks:
            parallel:
              quick: {action: "true"}
              slow: {action: "sleep 20"}
              own: {action: "sleep 0.5", timeout: 5}
            timeout: 0.3
            capture: checks
            on_success: done
            on_failure: done
          done:
            action: >-
              echo ${captured.checks.branches.slow.verdict}
              ${captured.checks.branches.own.verdict}
            terminal: true
        """,
    )
    started = time.monotonic()
    done = project.ll("run", loop)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "timeout success" in done.stdout
    assert time.monotonic() - started < 15


def test_a_join_waiting_on_branch_questions_suspends_and_resumes_with_their_answers(
    project: Project,
    tmp_path: Path,
) -> None:
    """Each branch asks; nothing else can progress, so the run suspends (exit 6) with both
    questions; answered one by one (`ll answer`), `ll resume` finishes the fork."""
    write(
        tmp_path,
        "gate.yaml",
        """
        name: gate
        initial: approve
        context: {region: ~}
        states:
          approve:
            ask: "Deploy ${context.region}?"
            choices: [approve, reject]
            route: {approve: done, reject: stopped}
          done: {terminal: true}
          stopped: {terminal: true, outcome: failure}
        """,
    )
    parent = write(
        tmp_path,
        "rollout.yaml",
        """
        name: rollout
        initial: regions
        states:
          regions:
            for_each: [eu, us]
            loop: gate.yaml
            with: {region: "${item.value}"}
            route: {success: shipped, failure: held}
          shipped: {action: echo shipped, terminal: true}
          held: {action: echo held, terminal: true, outcome: failure}
        """,
    )
    waiting = project.ll("run", parent)
    assert waiting.returncode == 6, waiting.stdout + waiting.stderr
    assert "waiting for an answer to regions/eu/approve@1, regions/us/approve@1" in (
        waiting.stderr + waiting.stdout
    )
    root = run_root(tmp_path)
    assert state(root)["status"] == "suspended"
    for qid in ("regions/eu/approve", "regions/us/approve"):
        answered = project.ll("answer", root.name, f"{qid}=approve")
        assert answered.returncode == 0, answered.stdout + answered.stderr
    done = project.ll("resume", root.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [e["to"] for e in events(root) if e["event"] == "route"] == ["shipped"]
    for key in ("eu", "us"):
        assert state(root / "sub" / "0001-regions" / key)["final_state"] == "done"


def test_a_branch_writes_the_same_bytes_however_many_items_the_fork_lists(
    project: Project,
    tmp_path: Path,
) -> None:
    """A branch keeps no copy of the loop file (with its inline items): its files do not grow
    with the fork; the root keeps the one copy."""

    def branch_bytes(count: int) -> int:
        where = tmp_path / str(count)
        where.mkdir()
        items = ", ".join(f"item{n:05d}" for n in range(count))
        text = (
            "name: fan\ninitial: fan\nstates:\n  fan:\n"
            f"    for_each: [{items}]\n    action: 'true'\n    max_concurrency: 1\n"
            "    on_success: done\n    on_failure: done\n  done: {terminal: true}\n"
        )
        done = project.ll("run", write(where, "fan.yaml", text), "-q", cwd=where)
        assert done.returncode == 0, done.stdout + done.stderr
        root = run_root(where)
        assert (root / "loop.yaml").read_text() == text
        [fork] = (root / "sub").iterdir()
        assert sorted(p.name for p in fork.iterdir()) == [
            "branches.jsonl",
            "items.json",
            "join.json",
        ]
        first = (fork / "branches.jsonl").read_bytes().splitlines()[0]
        return len(first)

    few, many = branch_bytes(3), branch_bytes(300)
    assert abs(few - many) < 64, (few, many)  # times and durations may differ by a digit


# -- one branch at a time: in the forking thread ------------------------------------------------

ONE_AT_A_TIME = """
name: turns
initial: work
states:
  work:
    for_each: [a, b, c]
    action: >-
      if [ -f BLOCK ] && [ ${item.key} = b ]; then touch STARTED; sleep 30; fi;
      echo ${item.key} >> RAN
    max_concurrency: CONCURRENCY
    on_success: done
    on_failure: done
  done: {terminal: true}
"""


def _turns(where: Path, concurrency: int) -> Path:
    text = ONE_AT_A_TIME.replace("CONCURRENCY", str(concurrency))
    for name in ("BLOCK", "STARTED", "RAN"):
        text = text.replace(name, str(where / name.lower()))
    return write(where, "turns.yaml", text)


@pytest.mark.parametrize("concurrency", [1, 2])
def test_one_branch_at_a_time_runs_in_the_forking_thread(
    project: Project, monkeypatch: pytest.MonkeyPatch, concurrency: int
) -> None:
    """At `max_concurrency: 1` no worker thread is started: handing each branch to a worker
    and back cost two thread wake-ups a branch (docs/performance.md). The branches run in
    item order with the same records either way."""
    workers: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        workers.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    loop = _turns(project.path, concurrency)
    done = project.ll("run", loop, "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workers.count("ll-branch") == 0) == (concurrency == 1), workers
    root = run_root(project.path)
    ends = [e for e in events(root) if e["event"] == "child_complete"]
    assert sorted(e["branch"] for e in ends) == ["a", "b", "c"]
    assert {e["verdict"] for e in ends} == {"success"}
    records = finished(root / "sub" / "0001-work")
    assert {key: records[key]["verdict"] for key in "abc"} == dict.fromkeys("abc", "success")
    if concurrency == 1:
        assert (project.path / "ran").read_text().split() == ["a", "b", "c"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_in_a_one_at_a_time_fork_stops_it_and_resume_runs_each_branch_once(
    project: Project, tmp_path: Path, signum: int
) -> None:
    """The branch runs in the thread the signal handler runs in: the signal stops the
    branch's action and then the run (exit 130 or 143), recorded as interrupted; the
    finished branch is not run again by `ll resume`, the stopped one and the next run once."""
    loop = _turns(tmp_path, 1)
    (tmp_path / "block").touch()
    proc = subprocess.Popen([*LL, "run", str(loop), "--quiet"], cwd=tmp_path)
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists():
        assert proc.poll() is None
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signum)
    assert proc.wait(timeout=20) == (130 if signum == signal.SIGINT else 143)
    root = run_root(tmp_path)
    assert state(root)["status"] == "interrupted"
    fork = root / "sub" / "0001-work"
    assert sorted(finished(fork)) == ["a"]
    assert state(fork / "b")["status"] == "interrupted"  # kept, without a record
    assert "c" not in journal(fork)
    assert (tmp_path / "ran").read_text().split() == ["a"]
    (tmp_path / "block").unlink()
    resumed = project.ll("resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (tmp_path / "ran").read_text().split() == ["a", "b", "c"]
    assert state(root)["status"] == "finished"


def test_a_branch_made_just_now_is_not_checked_for_links(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A branch's directory that `ll` has just made can be no planted link, nor hold one:
    only a directory that was there already is checked (`RunDir.check_links`), so the checks
    a fork makes do not grow with its items. A planted one is still refused
    (tests/e2e/test_tree_holes.py)."""
    from little_loops.record.store import RunDir

    checked: list[Path] = []
    check = RunDir.check_links

    def counted(self: RunDir) -> None:
        checked.append(self.root)
        check(self)

    monkeypatch.setattr(RunDir, "check_links", counted)
    seen = []
    for items in (2, 6):
        listed = ", ".join(f"i{n}" for n in range(items))
        loop = write(
            project.path,
            f"fan{items}.yaml",
            f"""
            name: fan{items}
            initial: fan
            states:
              fan:
                for_each: [{listed}]
                action: 'true'
                on_success: done
                on_failure: done
              done: {{terminal: true}}
            """,
        )
        checked.clear()
        done = project.ll("run", loop, "--quiet")
        assert done.returncode == 0, done.stdout + done.stderr
        seen.append(len(checked))
    assert seen[0] == seen[1], seen
