"""Signals and process control through the real `ll`: exactly-once steps under kills at random
moments, the owner of a run told by pid and start time, escaped descendants, costs recorded
as soon as they are known.

`LL_KILL_RUNS=200 pytest -m slow tests/run/test_signals.py` runs the randomized kill test 200 times.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import random
import select
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from procs import alive

from little_loops.record import outputs
from little_loops.record.events import RunEvent

# Signals and kill -9 at chosen and random moments of real runs: each test waits on processes
# reaching a step, so they run one at a time on one xdist worker (not beside each other, where
# two kill tests starve each other of the 2 CPUs), and are left out of the fast set.
pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.xdist_group("processes")]

LL = [sys.executable, "-m", "little_loops"]
# Read at import: the autouse fixture removes LL_* variables from the environment of each test.
KILL_RUNS = int(os.environ.get("LL_KILL_RUNS") or 0)
KILL_SEED = os.environ.get("LL_KILL_SEED")

STATES = [f"s{i}" for i in range(8)]
CHAIN = (
    textwrap.dedent(
        """
        name: chain
        initial: s0
        context:
          out: side-effects.txt
        states:
        """
    )
    + "".join(
        f"  {name}:\n"
        f"    action: 'echo \"{name} ${{state.iteration}}\" >> ${{context.out}}'\n"
        f"    capture: {name}\n"
        f"    next: {STATES[i + 1] if i + 1 < len(STATES) else 'done'}\n"
        for i, name in enumerate(STATES)
    )
    + "  done:\n"
    + "    terminal: true\n"
    + "    action: 'echo \"done ${state.iteration}\" >> ${context.out}'\n"
)
EXPECTED = [f"{name} {i + 1}" for i, name in enumerate([*STATES, "done"])]
# Where a kill lands: right after one of these events is written (the bookkeeping around it),
# or after a random delay from the start.
TRIGGERS = ("action_start", "action_complete", "evaluate", "route", "loop_complete")
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
SOFT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def _events(run_dir: Path) -> list[dict[str, Any]]:
    try:
        lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _starts(run_dir: Path) -> int:
    return sum(1 for e in _events(run_dir) if e.get("event") == "loop_start")


def _run_dir(cwd: Path) -> Path | None:
    runs = cwd / ".loops" / "runs"
    found = [p for p in runs.iterdir() if (p / "state.json").is_file()] if runs.is_dir() else []
    assert len(found) <= 1, found
    return found[0] if found else None


def _state(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "state.json").read_text(encoding="utf-8"))
    data.update(outputs.resolve(run_dir, data))  # the records state.json points to
    return data


def _comparable(state: dict[str, Any]) -> dict[str, Any]:
    """The parts of a final state that any run of the chain must agree on."""

    def record(rec: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in rec.items() if k != "duration_ms"}

    keys = ("status", "outcome", "exit_code", "error", "step", "current", "cost_usd", "attempt")
    return {
        **{k: state.get(k) for k in keys},
        "captured": {k: record(v) for k, v in state["captured"].items()},
        "prev": record(state["prev"]),
    }


def _wait_and_kill(
    proc: subprocess.Popen[str], cwd: Path, rng: random.Random, sig: int, deadline: float
) -> None:
    """Send `sig` at a random moment: right after a chosen event, or after a random delay."""
    if rng.random() < 0.25:
        time.sleep(rng.uniform(0.0, 0.6))
    else:
        trigger = rng.choice(TRIGGERS)
        nth = rng.randint(1, {"route": 8, "loop_complete": 1}.get(trigger, 9))
        size = -1
        while proc.poll() is None and time.monotonic() < deadline:
            run_dir = _run_dir(cwd)
            events = run_dir / "events.jsonl" if run_dir else None
            current = events.stat().st_size if events and events.exists() else 0
            if current != size and run_dir is not None:
                size = current
                names = [e.get("event") for e in _events(run_dir)]
                starts = [i for i, name in enumerate(names) if name == "loop_start"]
                this_run = names[starts[-1] :] if starts else names
                if this_run.count(trigger) >= nth:
                    break
            time.sleep(0.0002)
        time.sleep(rng.choice((0.0, 0.0, rng.uniform(0.0, 0.004))))
    if proc.poll() is None:
        proc.send_signal(sig)


def _start_blocking(args: list[str], cwd: Path) -> tuple[subprocess.Popen[str], int]:
    """Start `ll ... --json` writing its events into a pipe of one page that only the test
    reads: `ll` then stops wherever the test stops reading, mostly inside a step's bookkeeping
    (each event is written as it is emitted)."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, F_SETPIPE_SZ, 4096)
    proc = subprocess.Popen(
        [*LL, *args, "--json"],
        cwd=cwd,
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},  # each event reaches the pipe as written
    )
    os.close(write_end)
    return proc, read_end


def _read_some(read_end: int, budget: int, proc: subprocess.Popen[str]) -> None:
    """Let `budget` bytes of events through, then wait until `ll` is stuck writing the next."""
    while budget > 0 and proc.poll() is None:
        ready, _, _ = select.select([read_end], [], [], 0.05)
        if ready:
            chunk = os.read(read_end, min(budget, 512))
            if not chunk:
                return
            budget -= len(chunk)
    held, since = -1, time.monotonic()
    end = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < end:
        now_held = struct.unpack("i", fcntl.ioctl(read_end, termios.FIONREAD, b"\0" * 4))[0]
        if now_held != held:
            held, since = now_held, time.monotonic()
        elif time.monotonic() - since > 0.03:
            return
        time.sleep(0.002)


def _drain(read_end: int) -> None:
    while os.read(read_end, 1 << 16):
        pass
    os.close(read_end)


def _one_killed_run(tmp_path: Path, rng: random.Random) -> tuple[int, list[str]]:
    """Run the chain, killing it (and maybe its first resume) at random moments, then resume
    it to its end. Returns the number of kills and what the side-effect file holds."""
    loop = tmp_path / "loop.yaml"
    loop.write_text(CHAIN, encoding="utf-8")
    kills = 0
    notes: list[str] = []
    for round_ in range(3):
        run_dir = _run_dir(tmp_path)
        if run_dir is not None and _state(run_dir)["status"] == "finished":
            break
        args = ["resume"] if run_dir is not None else ["run", str(loop)]
        starts = _starts(run_dir) if run_dir is not None else 0
        last = round_ == 2 or (rng.random() < 0.4 and round_ > 0)
        sig = rng.choice((signal.SIGINT, signal.SIGTERM, signal.SIGKILL))
        if not last and rng.random() < 0.7:
            proc, read_end = _start_blocking(args, tmp_path)
            _read_some(read_end, rng.randint(0, 7000), proc)
            if proc.poll() is None:
                proc.send_signal(sig)
            _drain(read_end)
        else:
            proc = subprocess.Popen(
                [*LL, *args, "-q"],
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            if not last:
                _wait_and_kill(proc, tmp_path, rng, sig, time.monotonic() + 30)
        _out, err = proc.communicate(timeout=60)
        run_dir = _run_dir(tmp_path)
        began = run_dir is not None and _starts(run_dir) > starts
        # Python itself may report a signal that lands while the interpreter starts.
        assert "Traceback" not in err or not began, err
        if last:
            assert proc.returncode == 0, (args, proc.returncode, err)
            break
        kills += 1
        notes.append(f"{sig.name}->{proc.returncode}")
        if sig in SOFT:
            if run_dir is None or not began:
                continue  # killed while Python or ll started: no run began
            # A signal either stops the run, recorded as interrupted, or lands after its end
            # was recorded (then the process may die of it while exiting: the run stands).
            state = _state(run_dir)
            if state["status"] == "finished":
                assert proc.returncode in (0, SOFT[sig], -sig), (sig, proc.returncode, err)
            else:
                assert state["status"] == "interrupted", (sig, proc.returncode, state)
                assert proc.returncode == SOFT[sig], (sig, proc.returncode, err)
            # Every step the log says was judged is recorded as finished in state.json.
            judged = [e["step"] for e in _events(run_dir) if e.get("event") == "evaluate"]
            assert max(judged, default=0) <= state["step"], (notes, judged, state)
    else:
        raise AssertionError("the run did not end after three rounds")
    side_effects = (tmp_path / "side-effects.txt").read_text(encoding="utf-8").splitlines()
    return kills, side_effects


def _check_exactly_once(side_effects: list[str], kills: int) -> None:
    # A step cut off by a kill runs again from its start on resume: the same step, the same
    # iteration, right after itself. Nothing else may run twice, nor in another step.
    repeats = sum(1 for a, b in itertools.pairwise(side_effects) if a == b)
    deduplicated = [
        line for i, line in enumerate(side_effects) if i == 0 or line != side_effects[i - 1]
    ]
    assert deduplicated == EXPECTED, side_effects
    assert repeats <= kills, side_effects


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cwd = tmp_path_factory.mktemp("baseline")
    (cwd / "loop.yaml").write_text(CHAIN, encoding="utf-8")
    done = subprocess.run(
        [*LL, "run", "loop.yaml", "-q"], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert (cwd / "side-effects.txt").read_text(encoding="utf-8").splitlines() == EXPECTED
    run_dir = _run_dir(cwd)
    assert run_dir is not None
    return _comparable(_state(run_dir))


def _kill_runs(tmp_path: Path, count: int, uninterrupted: dict[str, Any]) -> str:
    seed = int(KILL_SEED) if KILL_SEED else random.randrange(1 << 30)
    total_kills = 0
    for i in range(count):
        rng = random.Random(seed + i)
        cwd = tmp_path / f"run{i}"
        cwd.mkdir()
        try:
            kills, side_effects = _one_killed_run(cwd, rng)
            _check_exactly_once(side_effects, kills)
            run_dir = _run_dir(cwd)
            assert run_dir is not None
            assert _comparable(_state(run_dir)) == uninterrupted
            completes = [e for e in _events(run_dir) if e.get("event") == "loop_complete"]
            assert [e["outcome"] for e in completes].count("success") == 1
        except AssertionError as exc:
            raise AssertionError(f"run {i} (LL_KILL_SEED={seed + i}): {exc}") from None
        total_kills += kills
    return f"{count} runs, {total_kills} kills, seed {seed}: every finished step ran once"


def test_runs_killed_at_random_moments_run_each_finished_step_once(
    tmp_path: Path, uninterrupted: dict[str, Any]
) -> None:
    print(_kill_runs(tmp_path, 12, uninterrupted))


@pytest.mark.slow
@pytest.mark.skipif(not KILL_RUNS, reason="set LL_KILL_RUNS=200 to run the long kill test")
def test_many_runs_killed_at_random_moments(tmp_path: Path, uninterrupted: dict[str, Any]) -> None:
    print(_kill_runs(tmp_path, KILL_RUNS, uninterrupted))


# -- signals held across the bookkeeping (in-process, at exact points) ------------------------


class _SignalAt:
    """A listener that sends this process `sig` while the runner emits event `name`."""

    def __init__(self, name: str, sig: int = signal.SIGINT, step: int = 2) -> None:
        self.name, self.sig, self.step = name, sig, step
        self.sent = False

    def __call__(self, event: RunEvent) -> None:
        at_step = self.name == "loop_complete" or event.step == self.step
        if event.name == self.name and at_step and not self.sent:
            self.sent = True
            os.kill(os.getpid(), self.sig)


def _run_in_process(tmp_path: Path, listener: _SignalAt) -> Any:
    from little_loops.load.loader import load
    from little_loops.run.runner import (
        Runner,
        RunOptions,
        signals_as_exceptions,
    )

    (tmp_path / "loop.yaml").write_text(CHAIN, encoding="utf-8")
    loop = load(tmp_path / "loop.yaml")
    with signals_as_exceptions():
        runner = Runner(loop, RunOptions(base_dir=tmp_path), listeners=[listener])
        return runner.run()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("name", ["evaluate", "route"])
def test_a_signal_in_a_steps_bookkeeping_stops_the_run_after_it_is_recorded(
    tmp_path: Path, name: str, sig: int
) -> None:
    result = _run_in_process(tmp_path, _SignalAt(name, sig, step=2))
    assert result.outcome == "interrupted"
    state = _state(result.run_dir)
    # Step 2 finished and its route is persisted: resume starts at step 3, in s2.
    assert (state["status"], state["step"], state["current"]) == ("interrupted", 2, "s2")
    assert state["last_route"]["to"] == "s2"
    done = subprocess.run(
        [*LL, "resume", "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "side-effects.txt").read_text(encoding="utf-8").splitlines()
    assert lines == EXPECTED


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_final_event_leaves_the_run_finished(tmp_path: Path, sig: int) -> None:
    result = _run_in_process(tmp_path, _SignalAt("loop_complete", sig))
    assert (result.outcome, result.exit_code) == ("success", 0)
    state = _state(result.run_dir)
    assert (state["status"], state["outcome"], state["step"]) == ("finished", "success", 9)


# -- costs ---------------------------------------------------------------------------------

from fakes import install_fake_claude  # noqa: E402
from llm_server import (  # noqa: E402
    LlmServer,
    llm_server_fixture,  # noqa: F401  (the llm_server fixture)
    message,
)

PAID = """
name: paid
initial: review
llm: {model: claude-sonnet-4-5}
states:
  review:
    action: /summarise the docs
    action_type: slash
    evaluate: {type: llm_structured, prompt: Are the docs fine?, samples: 2}
    next: done
  done: {terminal: true}
"""


def test_a_step_cut_off_while_judging_still_counts_what_it_spent(
    tmp_path: Path, llm_server: LlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The action's cost and each answer's cost are recorded as they arrive, so a step
    interrupted between two judge samples is charged for both, and again when re-run."""
    import dataclasses

    from little_loops.providers import prices

    answer = message({"verdict": "success", "confidence": 0.9, "reason": "fine"})
    llm_server.script(answer, dataclasses.replace(answer, delay=4.0), then=answer)
    per_answer = prices.cost_usd("claude-sonnet-4-5", 1200, 40)[0]
    fake_claude = install_fake_claude(tmp_path / "bin", monkeypatch)
    fake_claude.scenario("ok", cost=0.0125)
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "sk-test-not-real",
        "ANTHROPIC_BASE_URL": llm_server.url,
    }
    (tmp_path / "loop.yaml").write_text(PAID, encoding="utf-8")
    proc = subprocess.Popen(
        [*LL, "run", "loop.yaml", "-q", "--no-cache"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while len(llm_server.requests) < 2:  # the second sample is being asked
        assert time.monotonic() < deadline, "the judge was never asked twice"
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    run_dir = _run_dir(tmp_path)
    assert run_dir is not None
    state = _state(run_dir)
    assert (state["status"], state["step"]) == ("interrupted", 0)
    assert state["cost_usd"] == pytest.approx(0.0125 + per_answer)
    done = subprocess.run(
        [*LL, "resume", "-q"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    # The cut-off step ran again, in full: two actions and three answers were paid for.
    assert _state(run_dir)["cost_usd"] == pytest.approx(2 * 0.0125 + 3 * per_answer)
    assert len(fake_claude.calls()) == 2


# -- the owner of a run: pid and start time, never the pid alone ----------------------------

SLEEPER = """
name: sleeper
initial: wait
states:
  wait:
    action: test -f go || sleep 30
    next: done
  done: {terminal: true}
"""


def _wait_for_event(cwd: Path, name: str, timeout: float = 30) -> Path:
    deadline = time.monotonic() + timeout
    while True:
        run_dir = _run_dir(cwd)
        if run_dir is not None and any(e.get("event") == name for e in _events(run_dir)):
            return run_dir
        assert time.monotonic() < deadline, f"no {name} event"
        time.sleep(0.02)


@pytest.mark.parametrize("recorded", ["pid and start time", "pid only (an older run)"])
def test_stop_and_resume_leave_a_process_that_reused_a_crashed_runs_pid_alone(
    tmp_path: Path, recorded: str
) -> None:
    (tmp_path / "loop.yaml").write_text(SLEEPER, encoding="utf-8")
    owner = subprocess.Popen([*LL, "run", "loop.yaml", "-q"], cwd=tmp_path)
    run_dir = _wait_for_event(tmp_path, "action_start")
    owner.kill()  # a crash: the run stays "running" in state.json
    owner.wait()
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        state = _state(run_dir)
        assert isinstance(state["pid_start"], int)
        state["pid"] = stranger.pid  # the crashed run's pid, now someone else's
        if recorded != "pid and start time":
            del state["pid_start"]
        (run_dir / "state.json").write_text(json.dumps(state), encoding="utf-8")
        run_id = run_dir.name

        def ll(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*LL, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
            )

        status = ll("status", run_id)
        assert "status:  crashed" in status.stdout, status.stdout
        stop = ll("stop", run_id)
        assert stop.returncode == 3, stop.stdout + stop.stderr
        assert stop.stderr == (
            f"ll: error: run {run_id} is not running (crashed; pid {stranger.pid} is no "
            f"longer its ll process); resume it with 'll resume {run_id}'\n"
        )
        time.sleep(0.2)
        assert stranger.poll() is None, "ll stop signalled a stranger"
        (tmp_path / "go").touch()
        resumed = ll("resume", run_id, "-q")
        assert resumed.returncode == 0, resumed.stderr
        assert "ll stop" not in resumed.stderr
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_stop_names_a_foreign_users_process_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Signalling another user's process is refused by the kernel: one line, no traceback."""
    from little_loops.errors import LoopError
    from little_loops.record.runs import stop
    from little_loops.record.store import process_start

    (tmp_path / "loop.yaml").write_text(SLEEPER, encoding="utf-8")
    (tmp_path / "go").touch()
    done = subprocess.run([*LL, "run", "loop.yaml", "-q"], cwd=tmp_path, timeout=60)
    assert done.returncode == 0
    run_dir = _run_dir(tmp_path)
    assert run_dir is not None
    state = _state(run_dir)
    state.update(status="running", pid=1, pid_start=process_start(1))
    (run_dir / "state.json").write_text(json.dumps(state), encoding="utf-8")

    def refused(*args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", refused)
    monkeypatch.setattr(signal, "pidfd_send_signal", refused, raising=False)
    with pytest.raises(LoopError) as exc:
        stop(tmp_path, run_dir.name)
    assert exc.value.message == (
        f"run {run_dir.name}: not allowed to signal pid 1 (it belongs to another user); "
        "stop it as that user"
    )


# -- descendants that leave their process group -----------------------------------------------

ESCAPES = """
name: escapes
initial: spawn
context:
  rest: "true"
states:
  spawn:
    action: |
      setsid sh -c 'echo $$ >> pids; exec sleep 60' </dev/null >/dev/null 2>&1 &
      setsid sh -c 'sleep 60 & echo $! >> pids; echo $$ >> pids; wait' </dev/null >/dev/null 2>&1 &
      (set -m; sh -c 'echo $$ >> pids; exec sleep 60' </dev/null >/dev/null 2>&1 &)
      while [ "$(wc -l < pids 2>/dev/null || echo 0)" -lt 4 ]; do sleep 0.01; done
      echo spawned
      ${context.rest}
    timeout: 3
    next: done
    on_timeout: done
  done: {terminal: true}
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux only")
@pytest.mark.parametrize("how", ["step ends", "timeout", "SIGINT", "SIGTERM", "SIGKILL"])
def test_descendants_that_left_the_group_do_not_outlive_their_step(
    tmp_path: Path, how: str
) -> None:
    (tmp_path / "loop.yaml").write_text(ESCAPES, encoding="utf-8")
    rest = "true" if how == "step ends" else "sleep 60"
    proc = subprocess.Popen(
        [*LL, "run", "loop.yaml", "-q", "--set", f"rest={rest}"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids_file = tmp_path / "pids"
    deadline = time.monotonic() + 30
    pids: list[int] = []
    try:
        while len(pids) < 4:
            assert time.monotonic() < deadline, proc.communicate()
            text = pids_file.read_text() if pids_file.exists() else ""
            pids = [int(p) for p in text.split()]
            time.sleep(0.02)
        if how.startswith("SIG"):
            proc.send_signal(getattr(signal, how))
        _, err = proc.communicate(timeout=60)
        expected = {"SIGINT": 130, "SIGTERM": 143, "SIGKILL": -9}.get(how, 0)
        assert proc.returncode == expected, err
        # Gone when ll exits; after a kill -9, once the guard had its grace period.
        wait = time.monotonic() + (10 if how == "SIGKILL" else 0.5)
        while any(alive(pid) for pid in pids) and time.monotonic() < wait:
            time.sleep(0.02)
        assert [pid for pid in pids if alive(pid)] == []
    finally:
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- the same over a tree: parent -> for_each -> branch with a question -> sub-loop -------------

TREE = {
    "parent.yaml": """
        name: parent
        initial: before
        states:
          before: {action: 'echo before >> effects.txt', next: each}
          each:
            for_each: [a, b]
            loop: child.yaml
            with: {region: "${item.value}"}
            on_success: after
            on_failure: after
          after: {action: 'echo after >> effects.txt', next: done}
          done: {terminal: true}
        """,
    "child.yaml": """
        name: child
        initial: prep
        context:
          region: ""
        states:
          prep: {action: 'echo "prep ${context.region}" >> effects.txt', next: check}
          check:
            ask: "Ship ${context.region}?"
            choices: [go]
            route: {go: deeper}
          deeper:
            loop: grand.yaml
            with: {region: "${context.region}"}
            route: {done: done}
          done: {terminal: true}
        """,
    "grand.yaml": """
        name: grand
        initial: g1
        context:
          region: ""
        states:
          g1: {action: 'echo "g1 ${context.region}" >> effects.txt', next: g2}
          g2: {action: 'echo "g2 ${context.region}" >> effects.txt', next: done}
          done: {terminal: true}
        """,
}
TREE_LINES = {"": ["before", "after"], "a": ["prep a", "g1 a", "g2 a"]}
TREE_LINES["b"] = [line.replace(" a", " b") for line in TREE_LINES["a"]]
TREE_KILL_RUNS = 3  # under a minute on a busy 2-core machine; LL_KILL_RUNS=N runs N


def _pending_ids(run_dir: Path) -> list[str]:
    try:
        pending = _state(run_dir).get("pending") or []
    except (OSError, ValueError):
        return []
    return sorted({str(q.get("id", "")).rsplit("@", 1)[0] for q in pending if q.get("id")})


def _one_killed_tree(tmp_path: Path, rng: random.Random) -> tuple[int, list[str]]:
    """Run the tree, killing `ll` at random moments (soft signals and kill -9), answering its
    questions as they come, until it ends; the side-effect lines it left."""
    for name, text in TREE.items():
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    kills = 0
    for _round in range(12):
        run_dir = _run_dir(tmp_path)
        if run_dir is not None and _state(run_dir)["status"] == "finished":
            break
        if run_dir is None:
            args = ["run", "parent.yaml", "--no-input"]
        else:
            args = ["resume", "--no-input"]
            for qid in _pending_ids(run_dir):
                args += ["--answer", f"{qid}=go"]
        starts = _starts(run_dir) if run_dir is not None else 0
        proc = subprocess.Popen(
            [*LL, *args, "-q"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        killed = kills < 3 and rng.random() < 0.7
        sig = rng.choice((signal.SIGINT, signal.SIGTERM, signal.SIGKILL))
        if killed:
            time.sleep(rng.uniform(0.0, 0.9))
            if proc.poll() is None:
                proc.send_signal(sig)
            else:
                killed = False
        _out, err = proc.communicate(timeout=60)
        if killed:
            kills += 1
            run_dir = _run_dir(tmp_path)
            began = run_dir is not None and _starts(run_dir) > starts
            # Python itself may die of a signal that lands while the interpreter starts.
            if sig in SOFT and began and proc.returncode not in (0, 6):
                assert proc.returncode in (SOFT[sig], -sig), (sig, proc.returncode, err)
            continue
        assert "Traceback" not in err, err
        assert proc.returncode in (0, 6), (args, proc.returncode, err)
    else:
        raise AssertionError("the tree did not end in twelve rounds")
    run_dir = _run_dir(tmp_path)
    assert run_dir is not None
    final = _state(run_dir)
    assert (final["status"], final["outcome"]) == ("finished", "success"), final
    return kills, (tmp_path / "effects.txt").read_text(encoding="utf-8").splitlines()


def _check_tree_exactly_once(lines: list[str], kills: int) -> None:
    # Each run of the tree (the root, and each branch with its sub-loop) ran its steps in
    # order, each once; a step cut off by a kill may run again, right after itself.
    repeats = 0
    for branch, expected in TREE_LINES.items():
        mine = [line for line in lines if (line.split(" ")[1:] or [""])[0] == branch]
        repeats += sum(1 for a, b in itertools.pairwise(mine) if a == b)
        deduplicated = [line for i, line in enumerate(mine) if i == 0 or line != mine[i - 1]]
        assert deduplicated == expected, (branch, lines)
    assert repeats <= 2 * kills, lines  # one kill can cut a step of each running branch


def _kill_trees(tmp_path: Path, count: int) -> str:
    seed = int(KILL_SEED) if KILL_SEED else random.randrange(1 << 30)
    total = 0
    for i in range(count):
        cwd = tmp_path / f"tree{i}"
        cwd.mkdir()
        try:
            kills, lines = _one_killed_tree(cwd, random.Random(seed + i))
            _check_tree_exactly_once(lines, kills)
        except AssertionError as exc:
            raise AssertionError(f"tree {i} (LL_KILL_SEED={seed + i}): {exc}") from None
        total += kills
    return f"{count} trees, {total} kills, seed {seed}: every finished step ran once"


@pytest.mark.slow
def test_a_tree_with_a_fork_and_a_question_killed_at_random_runs_each_step_once(
    tmp_path: Path,
) -> None:
    print(_kill_trees(tmp_path, KILL_RUNS or TREE_KILL_RUNS))


@pytest.mark.slow
def test_the_same_tree_with_one_branch_at_a_time_killed_at_random_runs_each_step_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At `max_concurrency: 1` a branch runs in the forking thread, the one the signal handler
    runs in (docs/architecture.md): killed at random moments, still each step once."""
    parent = TREE["parent.yaml"]
    one = parent.replace("for_each: [a, b]\n", "for_each: [a, b]\n            max_concurrency: 1\n")
    assert one != parent
    monkeypatch.setitem(TREE, "parent.yaml", one)
    print(_kill_trees(tmp_path, KILL_RUNS or TREE_KILL_RUNS))
