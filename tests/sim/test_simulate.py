"""`ll run FILE --simulate SCRIPT`: the real runner with every action answered from a script."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from project import Project

from little_loops.actions import ActionRequest
from little_loops.load.loader import load
from little_loops.record.events import CALLS, ActionStart, read_journal
from little_loops.sim.script import (
    Entry,
    ScriptError,
    read_script,
)
from little_loops.sim.simulate import (
    SimulatedActions,
    SimulatedClock,
    _result,
)

LOOP = """\
name: sim-demo
initial: check
max_iterations: 10
states:
  check:
    action: touch {marker} && make test
    route: {{success: done, failure: fix}}
  fix:
    action: touch {marker} && make fix
    next: check
  done:
    action: touch {marker}
    terminal: true
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def demo(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "ran"
    return write(tmp_path, "loop.yaml", LOOP.format(marker=marker)), marker


def test_simulated_run_follows_the_script_and_starts_no_process(
    project: Project, tmp_path: Path
) -> None:
    loop, marker = demo(tmp_path)
    script = write(tmp_path, "s.sim.yaml", "states:\n  check: [failure, success]\n  fix: success\n")
    done = project.ll("run", str(loop), "--simulate", str(script))
    assert done.returncode == 0, done.stderr
    assert "path: check -> fix -> check -> done" in done.stdout
    assert not marker.exists()  # no action ran, terminal included
    (events,) = (tmp_path / ".loops" / "runs").glob("*/events.jsonl")
    kinds = [json.loads(line)["event"] for line in events.read_text().splitlines()]
    assert kinds.count("action_start") == 4


def test_duration_drives_the_loop_timeout_without_waiting(project: Project, tmp_path: Path) -> None:
    loop = write(
        tmp_path,
        "slow.yaml",
        "name: slow\ninitial: build\ntimeout: 30\nstates:\n"
        "  build:\n    action: make\n"
        # An hour's backoff, whole: with the default max_delay (60 s) and jitter, four
        # retries could sleep less than the 30 s left, about one run in 400.
        "    retry: {max_attempts: 5, on: [failure], interval: 3600, max_delay: 3600,"
        " jitter: false}\n"
        "    route: {success: done, failure: done}\n"
        "  done: {terminal: true}\n",
    )
    script = write(tmp_path, "s.yaml", "states:\n  build: {output: hi, duration_ms: 60000}\n")
    started = time.monotonic()
    done = project.ll("run", str(loop), "--simulate", str(script))
    assert done.returncode == 124, done.stderr
    assert "loop timeout of 30s reached" in done.stdout + done.stderr
    # A retry's hour-long backoff takes no real time either; the loop timeout ends it.
    retry = write(tmp_path, "r.yaml", "states:\n  build: {verdict: failure, duration_ms: 10}\n")
    done = project.ll("run", str(loop), "--simulate", str(retry))
    assert done.returncode == 124, done.stderr
    assert time.monotonic() - started < 30  # two runs; generous on a busy machine


def test_output_without_verdict_is_judged_by_the_real_evaluator(
    project: Project, tmp_path: Path
) -> None:
    loop = write(
        tmp_path,
        "n.yaml",
        "name: n\ninitial: count\nstates:\n"
        "  count:\n    action: wc -l < big.txt\n"
        "    evaluate: {type: output_numeric, operator: gt, target: 100}\n"
        "    route: {success: many, failure: few}\n"
        "  many: {terminal: true}\n  few: {terminal: true, outcome: failure}\n",
    )
    for value, code, end in (("250", 0, "many"), ("7", 1, "few")):
        script = write(tmp_path, "s.yaml", f'states:\n  count: {{output: "{value}"}}\n')
        done = project.ll("run", str(loop), "--simulate", str(script))
        assert done.returncode == code, done.stderr
        assert f"-> {end}" in done.stdout


def test_judged_state_with_only_output_needs_replay(project: Project, tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    loop = repo / "loops" / "judge-release-notes.yaml"
    script = write(tmp_path, "s.yaml", "states:\n  draft:\n    output: Release 1.2\n")
    done = project.ll("run", str(loop), "--simulate", str(script))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "s.yaml:3:" in done.stderr
    assert "--replay" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("states:\n  chek: success\n", 2, "no state 'chek' (did you mean 'check'?)"),
        ("states:\n  check: sucess\n", 2, "cannot give 'sucess' (did you mean 'success'?)"),
        ("states:\n  check: {verdict: success, outptu: x}\n", 2, "unknown key 'outptu'"),
        ("stats:\n  check: success\n", 1, "unknown key 'stats' (did you mean 'states'?)"),
        ("states:\n  check:\n    duration_ms: soon\n", 3, "'duration_ms' must be"),
    ],
)
def test_script_errors_are_one_line_with_file_and_line(
    project: Project, tmp_path: Path, text: str, line: int, words: str
) -> None:
    loop, _marker = demo(tmp_path)
    script = write(tmp_path, "bad.sim.yaml", text)
    done = project.ll("run", str(loop), "--simulate", str(script))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert f"bad.sim.yaml:{line}:" in done.stderr
    assert words in done.stderr
    assert not (tmp_path / ".loops").exists()  # refused before the run


def test_a_state_the_script_leaves_out_ends_the_run_naming_it(
    project: Project, tmp_path: Path
) -> None:
    loop, marker = demo(tmp_path)
    script = write(tmp_path, "s.yaml", "states:\n  check: failure\n")
    done = project.ll("run", str(loop), "--simulate", str(script))
    assert done.returncode == 3
    assert "no entry for state 'fix' (step 2)" in done.stdout + done.stderr
    assert not marker.exists()
    # a `default:` answers every state it leaves out
    script = write(tmp_path, "s.yaml", "default: success\nstates:\n  check: [failure]\n")
    done = project.ll("run", str(loop), "--simulate", str(script))
    assert done.returncode == 4  # check fails on every visit (the last entry repeats)
    assert "after 10 steps" in done.stdout + done.stderr


def test_cost_makes_the_budget_testable(project: Project, tmp_path: Path) -> None:
    loop = write(
        tmp_path,
        "c.yaml",
        "name: c\ninitial: ask\nmax_cost_usd: 1\nstates:\n"
        "  ask:\n    action: /ll:fix\n    route: {success: ask, failure: done}\n"
        "  done: {terminal: true}\n",
    )
    script = write(tmp_path, "s.yaml", "states:\n  ask: {verdict: success, cost_usd: 0.4}\n")
    done = project.ll("run", str(loop), "--simulate", str(script))
    assert done.returncode == 5, done.stderr
    assert "passed max_cost_usd" in done.stdout + done.stderr


# -- units ---------------------------------------------------------------------------------


def test_entries_by_path_exact_key_before_pattern(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "s.yaml",
        "states:\n  deploy/*/smoke: [error, success]\n  deploy/eu/smoke: failure\n",
    )
    script = read_script(path)
    assert [e.verdict for e in script.entries_for("deploy/us/smoke") or []] == ["error", "success"]
    assert [e.verdict for e in script.entries_for("deploy/eu/smoke") or []] == ["failure"]
    assert script.entries_for("deploy/us/canary") is None


def test_child_layer_addresses_states_under_the_calling_state(tmp_path: Path) -> None:
    script = read_script(
        write(tmp_path, "s.yaml", "states:\n  deploy/verify: [failure, success]\n")
    )
    child = SimulatedActions(script, SimulatedClock()).child("deploy")
    child.observe(ActionStart(state="verify", step=1))
    first = child.run(ActionRequest(kind="shell", text="x", cwd=tmp_path))
    second = child.run(ActionRequest(kind="shell", text="x", cwd=tmp_path))
    assert first.details["simulated_verdict"] == "failure"
    assert second.details["simulated_verdict"] == "success"


def test_result_times_out_at_the_action_timeout_and_moves_the_clock() -> None:
    clock = SimulatedClock()
    start = clock.monotonic()
    result = _result(Entry(output="x", duration_ms=5000), 2.0, clock)
    assert result.timed_out
    assert result.exit_code is None
    assert clock.monotonic() - start == pytest.approx(2.0)
    ok = _result(Entry(output="x", duration_ms=500), 2.0, clock)
    assert not ok.timed_out
    assert ok.exit_code == 0
    assert ok.duration_ms == 500
    error = _result(Entry(verdict="error", reason="no such host"), None, clock)
    assert error.error == "no such host"


def test_an_empty_list_is_a_script_error(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match=r"s.yaml:2: an empty list"):
        read_script(write(tmp_path, "s.yaml", "states:\n  check: []\n"))


def test_check_refuses_an_entry_for_a_state_without_action(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    loop = load(repo / "loops" / "decide-on-number.yaml")
    script = read_script(write(tmp_path, "s.yaml", "states:\n  decide: success\n"))
    with pytest.raises(ScriptError, match="runs no action"):
        script.check(loop, replay=False)


def test_a_judged_output_is_decided_by_the_replayed_judge(project: Project, tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    notes = (
        "Release 1.2\\n- Fixed: a crash when the input file is empty (#41)\\n"
        "- New: a --json flag that prints machine-readable output (#57)\\n"
    )
    script = write(
        tmp_path,
        "s.yaml",
        "states:\n  draft:\n"
        '    - output: "Release 1.2: various improvements.\\n"\n'
        f'    - output: "{notes}"\n',
    )
    done = project.ll(
        "run",
        str(repo / "loops" / "judge-release-notes.yaml"),
        "--simulate",
        str(script),
        "--replay",
        str(repo / "loops" / "judge-release-notes.cassette.jsonl"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failure 0.93" in done.stdout  # the cassette's answers, not the script's words
    assert "path: draft -> draft -> publish" in done.stdout


def test_a_script_without_the_first_state_is_refused_before_the_run(
    project: Project, tmp_path: Path
) -> None:
    loop, marker = demo(tmp_path)
    script = write(tmp_path, "s.yaml", "states:\n  fix: success\n")
    done = project.ll("run", str(loop), "--simulate", str(script))
    assert done.returncode == 2
    assert "s.yaml:1: no entry for state 'check', where the run starts" in done.stderr
    assert not (tmp_path / ".loops").exists()
    assert not marker.exists()


def test_a_simulation_answers_a_childs_states_under_the_calling_state(
    project: Project, tmp_path: Path
) -> None:
    """`deploy/canary` is the child's `canary`, run from the parent's `deploy`: no process starts
    in the child either, and its visits count on their own."""
    marker = tmp_path / "ran"
    write(
        tmp_path,
        "child.yaml",
        "name: child\ninitial: canary\ncontext: {region: ~}\n"
        "outputs: {where: '${context.region}'}\nstates:\n"
        f"  canary:\n    action: touch {marker}\n"
        "    route: {success: live, failure: rolled_back}\n"
        "  live: {terminal: true}\n"
        "  rolled_back: {terminal: true, outcome: failure}\n",
    )
    parent = write(
        tmp_path,
        "parent.yaml",
        "name: parent\ninitial: deploy\nstates:\n"
        "  deploy:\n    loop: child.yaml\n    with: {region: eu-west}\n    capture: d\n"
        "    route: {live: done, rolled_back: deploy}\n"
        f"  done:\n    action: echo ${{captured.d.outputs.where}} > {marker}.done\n"
        "    terminal: true\n",
    )
    script = write(
        tmp_path, "s.sim.yaml", "states:\n  deploy/canary: [failure, success]\n  done: success\n"
    )
    run = project.ll("run", str(parent), "--simulate", str(script))
    assert run.returncode == 0, run.stderr
    assert "path: deploy -> deploy -> done" in run.stdout
    assert not marker.exists()
    assert not Path(f"{marker}.done").exists()
    [run_dir] = (tmp_path / ".loops" / "runs").iterdir()
    journal = read_journal(run_dir, CALLS)  # each child ended as a line of its caller's journal
    finals = [
        journal[key]["events"][-1]["final_state"] for key in sorted(journal)
    ]  # one child run a visit of `deploy`: the script's first answer, then its second
    assert finals == ["rolled_back", "live"]


def test_a_script_entry_for_a_loop_state_stands_for_its_whole_child(
    project: Project, tmp_path: Path
) -> None:
    """`deploy: {final_state: ..., outputs: ...}` ends the child without running it; a name
    that is not one of the child's terminals is one line naming them."""
    write(
        tmp_path,
        "child.yaml",
        "name: child\ninitial: canary\noutputs: {url: 'https://example.com'}\nstates:\n"
        "  canary:\n    action: exit 1\n    route: {success: live, failure: rolled_back}\n"
        "  live: {terminal: true}\n"
        "  rolled_back: {terminal: true, outcome: failure}\n",
    )
    parent = write(
        tmp_path,
        "parent.yaml",
        "name: parent\ninitial: deploy\nstates:\n"
        "  deploy:\n    loop: child.yaml\n    capture: d\n"
        "    route: {live: verify, rolled_back: failed}\n"
        "  verify:\n    action: echo ${captured.d.outputs.url}\n    next: done\n"
        "  failed: {terminal: true, outcome: failure}\n"
        "  done: {terminal: true}\n",
    )
    stub = "states:\n  deploy: [rolled_back, {final_state: live, outputs: {url: u1}}]\n"
    script = write(tmp_path, "s.sim.yaml", stub + "  verify: success\n")
    run = project.ll("run", str(parent), "--simulate", str(script))
    assert run.returncode == 1, run.stderr  # the first answer: rolled_back -> failed
    assert "path: deploy -> failed" in run.stdout
    assert not list((tmp_path / ".loops" / "runs").glob("*/sub"))  # no child ran
    test = write(
        tmp_path,
        "t.test.yaml",
        "loop: parent.yaml\nstates:\n  deploy: {final_state: live, outputs: {url: u1}}\n"
        "  verify: {output: u1}\nexpect: {path: [deploy, verify, done], outcome: success}\n",
    )
    assert project.ll("test", str(test)).returncode == 0
    bad = write(tmp_path, "b.sim.yaml", "states:\n  deploy: {final_state: canary}\n")
    run = project.ll("run", str(parent), "--simulate", str(bad))
    assert run.returncode == 3
    assert "ends its child at 'canary', which is not a terminal state of child.yaml" in (
        run.stdout + run.stderr
    )
    assert "Traceback" not in run.stderr


ASKING_CHILD = """\
name: gate
initial: approve
states:
  approve:
    ask: "Go?"
    choices: [approve, reject]
    route: {approve: done, reject: stopped}
  done: {terminal: true}
  stopped: {terminal: true, outcome: failure}
"""


@pytest.mark.parametrize(
    ("parent", "key"),
    [
        (
            "name: fa\ninitial: r\nstates:\n  r:\n    parallel:\n      eu: {loop: ask.yaml}\n"
            "      us: {loop: ask.yaml}\n    route: {success: ok, failure: ok}\n"
            "  ok: {terminal: true}\n",
            "r/eu/aprove",
        ),
        (
            "name: sub\ninitial: c\nstates:\n"
            "  c: {loop: ask.yaml, route: {done: ok, stopped: ok}}\n  ok: {terminal: true}\n",
            "c/aprove",
        ),
    ],
    ids=["fork-branch", "loop-child"],
)
def test_a_misspelt_state_inside_a_child_stops_the_simulated_run(
    project: Project, tmp_path: Path, parent: str, key: str
) -> None:
    """A script key for a child's state that the child lacks would never be used: the run
    stops naming it (before, a fork took it for a failed branch and the run ended green)."""
    write(tmp_path, "ask.yaml", ASKING_CHILD)
    loop = write(tmp_path, "parent.yaml", parent)
    script = write(tmp_path, "t.yaml", f"states:\n  {key}: approve\n")
    done = project.ll("run", str(loop), "--simulate", str(script))
    assert done.returncode == 3, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert f"t.yaml:2: '{key}': the loop ask.yaml" in out
    assert "has no state 'aprove' (did you mean 'approve'?)" in out
    assert "success at" not in out
