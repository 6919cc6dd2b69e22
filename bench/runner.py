"""Per-step overhead of the runner: a 1,000-step loop of `true` against 1,000 bare subprocesses.

Run: python bench/runner.py [--steps 1000] [--repeat 7] [--dir DIR] [--fsync] [--write-docs]
                            [--capture-steps 50]

The floor is `subprocess.run("true", shell=True)` N times. The runner runs a loop whose one
state runs `true` and routes back to itself until `max_iterations` (N) ends it, writing its
events and replacing state.json after every step, as every real run does. Floor and runner
alternate in this process; the figure is the median of the paired differences, per step.

It also times, in the same folder, what durable state costs on its own: N replacements of a
state.json of the same size (write a temp file, rename it over the old one). On this machine
that cost belongs to the file system far more than to the runner, so it is printed apart.

The capture scenario runs two states that each print SIZE bytes and `capture` them, against the
same command run bare with its output read (`subprocess.run(..., capture_output=True)`), for
SIZE 0, 64 KiB, 1 MiB and 4 MiB: a step's cost must follow its own output, not what earlier
steps captured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _common import DOC, machine, write_section  # noqa: E402

from little_loops.load.loader import load  # noqa: E402 - after the sys.path line
from little_loops.record.store import RunDir  # noqa: E402
from little_loops.run.runner import Runner, RunOptions  # noqa: E402

TARGET_MS = 0.5
LOOP = """\
name: bench-steps
initial: spin
max_iterations: {steps}
on_error: done
states:
  spin:
    action: "true"
    on_success: $current
    on_failure: done
  done:
    terminal: true
"""


CAPTURE_TARGET_MS = 3.0
CAPTURE_SIZES = (0, 64 << 10, 1 << 20, 4 << 20)
CAPTURE_LOOP = """\
name: bench-captures
initial: a
max_iterations: {steps}
on_error: done
states:
  a:
    action: {command}
    capture: a
    on_success: b
    on_failure: done
  b:
    action: {command}
    capture: b
    on_success: a
    on_failure: done
  done:
    terminal: true
"""


def printing(size: int) -> str:
    """A command that prints `size` bytes (no output at all for 0)."""
    return f"head -c {size} /dev/zero | tr '\\0' x" if size else "true"


def capture_floor(steps: int, command: str) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        subprocess.run(command, shell=True, check=False, capture_output=True)
    return time.perf_counter() - started


def capture_runner(steps: int, base: Path, size: int) -> tuple[float, int]:
    """Seconds per step of the two-state capture loop, its start-up taken out (a 2-step run of
    the same loop is subtracted), and the size of its final state.json."""
    path = base / "captures.yaml"
    times, state_size = [], 0
    for n in (2, steps):
        path.write_text(CAPTURE_LOOP.format(steps=n, command=json.dumps(printing(size))))
        loop = load(path)
        started = time.perf_counter()
        result = Runner(loop, RunOptions(base_dir=base)).run()
        times.append(time.perf_counter() - started)
        assert result.outcome == "max_iterations", result
        assert result.steps == n, result
        state_size = (result.run_dir / "state.json").stat().st_size
    return (times[1] - times[0]) / (steps - 2), state_size


def capture_layer(steps: int, base: Path, command: str) -> float:
    """Seconds per `run_shell` of the command, with its step log, as the runner calls it."""
    from little_loops.actions import run_shell

    started = time.perf_counter()
    for i in range(steps):
        run_shell(command, cwd=base, log_path=os.fspath(base / f"{i}.log"))
    return (time.perf_counter() - started) / steps


def measure_captures(steps: int, repeat: int, where: Path) -> list[dict[str, float]]:
    rows = []
    for size in CAPTURE_SIZES:
        floors, diffs, layers, states = [], [], [], []
        for _ in range(repeat):
            f = capture_floor(steps, printing(size)) / steps
            base = Path(tempfile.mkdtemp(dir=where, prefix=".bench-captures-"))
            try:
                r, state_size = capture_runner(steps, base, size)
                layer = capture_layer(steps, base, printing(size)) - f
            finally:
                shutil.rmtree(base)
            floors.append(f)
            diffs.append(r - f)
            layers.append(layer)
            states.append(state_size)
        rows.append(
            {
                "size": size,
                "floor": statistics.median(floors) * 1000,
                "overhead": statistics.median(diffs) * 1000,
                "layer": statistics.median(layers) * 1000,
                "state": max(states),
            }
        )
    return rows


def capture_report(rows: list[dict[str, float]], steps: int, repeat: int) -> str:
    lines = [
        f"`python bench/runner.py --capture-steps {steps} --repeat {repeat} --write-docs`: two "
        f"states alternating for {steps} steps, each printing SIZE bytes and capturing them, "
        "against the same command run bare with its output read; median of the paired "
        "differences, in the working directory (disk); the run's start-up (run directory, "
        "lock, guard process) is taken out by subtracting a 2-step run.",
        "",
        "| capture per state | bare command, per step | overhead over it | target | "
        "largest state.json | of which run_shell (with the step log) |",
        "|---|---|---|---|---|---|",
    ]
    for m in rows:
        size = int(m["size"])
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        ok = "ok" if m["overhead"] <= CAPTURE_TARGET_MS and m["state"] < 64 << 10 else "MISSED"
        lines.append(
            f"| {label} | {m['floor']:.3f} ms | {m['overhead']:.3f} ms | "
            f"<= {CAPTURE_TARGET_MS:g} ms and state.json < 64 KiB: {ok} | "
            f"{int(m['state']):,} bytes | {m['layer']:.3f} ms |"
        )
    return "\n".join(lines) + "\n"


def floor(steps: int) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        subprocess.run("true", shell=True, check=False)
    return time.perf_counter() - started


def runner(steps: int, base: Path, fsync: bool, layer: Any = None) -> tuple[float, int]:
    """Seconds for the whole loop, and the size of its final state.json."""
    path = base / "loop.yaml"
    path.write_text(LOOP.format(steps=steps))
    loop = load(path)
    options = RunOptions(base_dir=base, fsync=fsync)
    started = time.perf_counter()
    result = Runner(loop, options, action_layer=layer).run()
    elapsed = time.perf_counter() - started
    assert result.outcome == "max_iterations", result
    assert result.steps == steps, result
    return elapsed, (result.run_dir / "state.json").stat().st_size


class Answered:
    """An action layer that answers every action at once, in process (the runner's seam)."""

    def __init__(self) -> None:
        from little_loops.actions import ActionResult

        self.result = ActionResult(
            output="", stderr="", exit_code=0, duration_ms=0, timed_out=False, output_bytes=0
        )

    def run(self, request: Any) -> Any:
        return self.result

    def kill_orphans(self) -> None:
        pass

    def child(self, state: str, loop: Any) -> Answered:
        return self  # a sub-loop's actions are answered the same way (bench/nesting.py)

    def resumed(self, events_path: Path) -> Answered:
        return self


def runner_without_processes(steps: int, base: Path, fsync: bool) -> float:
    """The same loop with the action answered at once, in process: the runner's own work."""
    return runner(steps, base, fsync, Answered())[0]


def action_layer(steps: int, base: Path) -> float:
    """`run_shell("true")` alone, N times: pipes, process group, reading, reaping."""
    from little_loops.actions import run_shell

    started = time.perf_counter()
    for _ in range(steps):
        run_shell("true", cwd=base)
    return time.perf_counter() - started


def persistence(steps: int, base: Path, size: int, fsync: bool) -> float:
    """Seconds for `steps` state.json replacements of `size` bytes, as the runner makes them."""
    run = RunDir.create(base, "persistence")
    data = {"pad": "x" * max(size - 30, 1)}
    started = time.perf_counter()
    for _ in range(steps):
        run.write_state(data, fsync=fsync)
    return time.perf_counter() - started


def measure(steps: int, repeat: int, where: Path, fsync: bool) -> dict[str, float]:
    floors, runs, diffs, persists, logic, layer = [], [], [], [], [], []
    for _ in range(repeat):
        f = floor(steps)
        base = Path(tempfile.mkdtemp(dir=where, prefix=".bench-runner-"))
        try:
            r, size = runner(steps, base, fsync)
            p = persistence(steps, base, size, fsync)
            (base / "stub").mkdir()
            logic.append(runner_without_processes(steps, base / "stub", fsync))
            layer.append(action_layer(steps, base) - floor(steps))
        finally:
            shutil.rmtree(base)
        floors.append(f)
        runs.append(r)
        diffs.append(r - f)
        persists.append(p)
    per = 1000 / steps  # seconds over N steps -> ms per step
    overhead = statistics.median(diffs) * per
    persist = statistics.median(persists) * per
    return {
        "floor": statistics.median(floors) * per,
        "runner": statistics.median(runs) * per,
        "overhead": overhead,
        "persist": persist,
        "logic": statistics.median(logic) * per,
        "layer": statistics.median(layer) * per,
    }


def report(rows: list[tuple[str, dict[str, float]]], steps: int, repeat: int) -> str:
    lines = [
        f"`python bench/runner.py --steps {steps} --repeat {repeat} --write-docs`: one loop "
        f'state running `true` {steps} times against {steps} `subprocess.run("true", '
        "shell=True)`, alternating, median of the paired differences.",
        "",
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.",
        "",
        "| where the run's files go | floor, per step | runner, per step | overhead | target | "
        "state.json replace alone | runner without processes | run_shell over the floor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, m in rows:
        ok = "ok" if m["overhead"] <= TARGET_MS else "MISSED"
        lines.append(
            f"| {label} | {m['floor']:.3f} ms | {m['runner']:.3f} ms | {m['overhead']:.3f} ms | "
            f"<= {TARGET_MS} ms: {ok} | {m['persist']:.3f} ms | {m['logic']:.3f} ms | "
            f"{m['layer']:.3f} ms |"
        )
    return "\n".join(lines) + "\n"


NOTES = """\
Each step writes five events to `events.jsonl` (buffered: written out just before the action
starts, so `ll logs -f` shows the running step, and again before the state file), appends its
output record to `outputs.dat` (a JSON line, then the texts raw), and replaces `state.json`
whole: the new state is written into the run's spare file `.state.next` and the two names are
swapped in one atomic rename (`RENAME_EXCHANGE`; a temp file renamed over state.json where that
is unavailable), so a reader or a `kill -9` never sees half a file. state.json holds only
references to the output records, so its size and cost do not grow with what steps captured
(the capture table). `--fsync` adds an fsync per step, for runs that must also survive a power
cut.

The last three columns take the overhead apart, each timed alone in the same folder:
"state.json replace alone" is N replacements of a state of the same size, made as the runner
makes them; "runner without processes" is the whole loop with the action answered in process
(through the runner's action-layer seam), so everything the runner does per step
(interpolation, evaluation, routing, five events, the output record, state.json) with nothing
to wait for; "run_shell over the floor" is what the action layer adds to a bare
`subprocess.run` (two pipes read as they fill, a new process group, a pidfd to see the exit,
the check that no member of the group is left). The parts do not simply add up: the work
between two actions runs slower right after a process exits than it does alone (cold caches on
this 2-CPU virtual machine).

In the capture table the bare command is read whole by `subprocess.run`; the runner also
writes it to the step's log and once to `outputs.dat`. The last column is the part of the
overhead that belongs to the action layer alone (`run_shell` with its step log, over the same
bare command); the rest, the runner's own, is what the output record costs. The captured text
is at most the output's last 1 MiB (the action layer's tail), so the 4 MiB row costs about the
1 MiB row plus the log. Before the records moved out of state.json (issue 12), the 1 MiB row
cost +21.6 ms a step: every step rewrote a 3 MiB state.json holding both captures and `prev`.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--fsync", action="store_true", help="fsync state.json every step")
    parser.add_argument(
        "--dir",
        action="append",
        help="where the runs' files go; repeat to compare (default: this folder, and /dev/shm "
        "when it exists)",
    )
    parser.add_argument(
        "--capture-steps", type=int, default=50, help="steps of the capture scenario (0: skip)"
    )
    parser.add_argument("--write-docs", action="store_true", help="update docs/performance.md")
    args = parser.parse_args()
    dirs = args.dir or ["."] + (["/dev/shm"] if Path("/dev/shm").is_dir() else [])
    rows = []
    for where in dirs:
        path = Path(where).resolve()
        fs = "tmpfs" if str(path).startswith("/dev/shm") else "disk"
        # The docs name the kind of file system, never a path of the machine.
        label = "/dev/shm (tmpfs)" if fs == "tmpfs" else "the working directory (disk)"
        rows.append((label, measure(args.steps, args.repeat, path, args.fsync)))
    body = report(rows, args.steps, args.repeat)
    if args.capture_steps:
        captures = measure_captures(args.capture_steps, args.repeat, Path(dirs[0]).resolve())
        body += "\n" + capture_report(captures, args.capture_steps, args.repeat)
    print(body)
    if args.write_docs:
        write_section("Runner", f"{body.strip()}\n\n{NOTES.strip()}")
        print(f"wrote the Runner section of {DOC}")


if __name__ == "__main__":
    main()
