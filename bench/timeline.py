"""Where a printing step's wall time goes: `ll`'s step cut into its parts, beside a bare spawn's.

    python bench/timeline.py [--steps 1000] [--size 1024] [--repeat 3] [--keep-busy]

bench/printing.py says how much a step costs over a bare spawn; this says where. It runs the
same one-state loop (`cat FILE`, FILE of SIZE bytes; `true` for 0) in this process, with a
time stamp (`perf_counter_ns`) taken at five points of every step by wrapping the functions
there, and prints the median of each part over the steps (the first ten left out):

- the runner between two actions: from one action's result to the next action's request
  (the step's output record, its events, state.json, the route, the next state's entry);
- the action layer before the spawn (`run_shell`, `execute`: pipes, the checks, the child's
  environment and signals);
- the spawn: `posix_spawn` itself, which returns once the child has exec'd (vfork);
- the child's run: from the spawn's return until its exit and the end of its output are seen
  (the action layer's own set-up overlaps it);
- the action layer after the exit (the group checked, the pipes closed, the result made).

Beside it, the runner's part of the same loop with each action answered at once in this
process (bench/runner.py's answered loop): the same work with no process run between steps.

The bare spawn (`subprocess.Popen(argv, stdout=PIPE, stderr=PIPE)` and `communicate()`, as
bench/printing.py's floor) is cut into its start (Python's work and the vfork) and the rest.

`--keep-busy` is a diagnostic, not a figure to quote as `ll`'s: it runs one busy process a CPU
at the SCHED_IDLE policy (it gets a CPU only when nothing else wants it) while measuring, so no
CPU goes idle. On a virtual machine whose idle CPUs halt (`/sys/devices/system/cpu/cpuidle/
current_driver` says none), a process that waits for its child wakes on a halted CPU, and its
next few hundred microseconds of work run slower; with `--keep-busy` they do not, and the
difference between the two runs is that cost. The wrapping adds about a microsecond to each
part it bounds.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _common import machine  # noqa: E402
from printing import command, run_loop  # noqa: E402
from runner import Answered  # noqa: E402
from runner import runner as answered_run  # noqa: E402

import little_loops.actions as actions  # noqa: E402 - after the sys.path line
from little_loops.actions import process  # noqa: E402
from little_loops.actions.plain import plain_argv  # noqa: E402

PARTS = (  # (from, to, name) within an action; the runner's part lies between two actions
    ("request", "spawn", "the action layer before the spawn"),
    ("spawn", "spawned", "the spawn (posix_spawn, until the child's exec)"),
    ("spawned", "exited", "the child's run, until its exit and output are seen"),
    ("exited", "result", "the action layer after the exit"),
)
Marks = list[tuple[str, int]]


@contextmanager
def stamped(marks: Marks) -> Iterator[None]:
    """Wrap the functions a step passes through so that each appends (point, ns) to `marks`."""
    saved: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, before: str | None, after: str | None) -> None:
        real: Callable[..., Any] = getattr(owner, name)
        clock, add = time.perf_counter_ns, marks.append

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if before:
                add((before, clock()))
            result = real(*args, **kwargs)
            if after:
                add((after, clock()))
            return result

        saved.append((owner, name, real))
        setattr(owner, name, wrapper)

    wrap(actions, "run_shell", "request", "result")
    wrap(os, "posix_spawn", "spawn", "spawned")
    wrap(os, "posix_spawnp", "spawn", "spawned")
    wrap(process, "_pump", None, "exited")
    try:
        yield
    finally:
        for owner, name, real in reversed(saved):
            setattr(owner, name, real)


def ll_parts(marks: Marks) -> dict[str, float]:
    """The median microseconds of each part over the steps, from the stamps of one run."""
    steps: list[dict[str, int]] = []
    for point, ns in marks:
        if point == "request":
            steps.append({})
        if steps:
            steps[-1].setdefault(point, ns)
    whole = [s for s in steps[10:-1] if len(s) == 5]
    if not whole:
        raise SystemExit("timeline: no whole step was stamped (too few --steps?)")
    # the runner's part of a step lies between the previous step's result and its request
    runner = [b["request"] - a["result"] for a, b in itertools.pairwise(whole)]
    out = {"the runner between two actions": statistics.median(runner) / 1000}
    for start, end, name in PARTS:
        out[name] = statistics.median(s[end] - s[start] for s in whole) / 1000
    return out


def answered_part(steps: int, base: Path) -> float:
    """The runner between two actions when each action is answered at once in this process
    (bench/runner.py's loop, no child): the same work, with no process run between steps."""
    marks: Marks = []
    clock, add = time.perf_counter_ns, marks.append

    class Stamped(Answered):
        def run(self, request: Any) -> Any:
            add(("request", clock()))
            result = super().run(request)
            add(("result", clock()))
            return result

    answered_run(steps, base, False, Stamped())
    pairs = [(marks[i][1], marks[i + 1][1]) for i in range(0, len(marks) - 1, 2)][10:]
    between = [b[0] - a[1] for a, b in itertools.pairwise(pairs)]
    return statistics.median(between) / 1000


def bare_parts(steps: int, cmd: str, base: Path) -> dict[str, float]:
    """The same split for the bare spawn: Popen() (its Python and the vfork), the rest."""
    words = plain_argv(cmd, "/bin/sh")  # the processes `ll` starts, as printing.floor does
    argv: list[str] | str = cmd if words is None else words
    starts, rests = [], []
    clock = time.perf_counter_ns
    for _ in range(steps):
        t0 = clock()
        proc = subprocess.Popen(
            argv, shell=words is None, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=base
        )
        t1 = clock()
        proc.communicate()
        t2 = clock()
        starts.append(t1 - t0)
        rests.append(t2 - t1)
    return {
        "start: Popen() (its Python and the vfork)": statistics.median(starts[10:]) / 1000,
        "the child's run, reading and waiting: communicate()": statistics.median(rests[10:]) / 1000,
    }


@contextmanager
def busy(on: bool) -> Iterator[None]:
    """One SCHED_IDLE busy process a CPU while the block runs (nothing when `on` is False)."""
    procs: list[subprocess.Popen[bytes]] = []
    if on:
        code = (
            "import os\nos.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\nwhile 1: pass"
        )
        procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 1)]
        time.sleep(0.5)
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1024, help="bytes printed a step (0: true)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=".")
    parser.add_argument("--keep-busy", action="store_true", help="no CPU idle (a diagnostic)")
    args = parser.parse_args()
    if args.steps < 30:
        parser.error("--steps must be at least 30")
    runs: list[dict[str, float]] = []
    bares: list[dict[str, float]] = []
    alone: list[float] = []
    with busy(args.keep_busy):
        for _ in range(args.repeat):
            base = Path(tempfile.mkdtemp(dir=Path(args.dir).resolve(), prefix=".bench-timeline-"))
            try:
                cmd = command(base, args.size)
                marks: Marks = []
                with stamped(marks):
                    run_loop(args.steps, base, cmd)
                runs.append(ll_parts(marks))
                alone.append(answered_part(args.steps, base))
                bares.append(bare_parts(args.steps, cmd, base))
            finally:
                shutil.rmtree(base)
    what = "`true`" if not args.size else f"`cat FILE`, {args.size} bytes"
    print(
        f"`python bench/timeline.py --steps {args.steps} --size {args.size} --repeat "
        f"{args.repeat}{' --keep-busy' if args.keep_busy else ''}`: {what} a step; the median "
        "over the steps of each part, in microseconds, one column a run"
        f"{'; one SCHED_IDLE busy process a CPU (no CPU idle)' if args.keep_busy else ''}.\n"
    )
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.\n")
    print("| part of a step | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |")
    print("|---|" + "---|" * len(runs))
    for rows in (runs, bares):
        for name in rows[0]:
            print(f"| {name} | " + " | ".join(f"{row[name]:.0f}" for row in rows) + " |")
        total = " | ".join(f"**{sum(row.values()):.0f}**" for row in rows)
        print(f"| **{'`ll`' if rows is runs else 'bare spawn'}, in all** | {total} |")
        if rows is runs:
            cells = " | ".join(f"{value:.0f}" for value in alone)
            print(f"| (the runner between two actions answered in process, no child) | {cells} |")


if __name__ == "__main__":
    main()
