"""A step that prints: the runner's cost over a bare spawn of the same command, 2 B to 64 KiB.

    python bench/printing.py [--steps 300] [--repeat 7] [--dir DIR] [--write-docs]

The command is `cat FILE`, FILE holding SIZE bytes (one process whatever the size). The floor is
the same process tree `ll` starts, spawned bare N times with its output read:
`subprocess.run(["cat", FILE], capture_output=True)`, since `ll` execs a plain command without
the shell where /bin/sh is dash (docs/loop-reference.md, "Plain commands run without the
shell"); `subprocess.run("cat FILE", shell=True, ...)` where it does not (and for `true`, a
shell builtin, everywhere). The runner runs a one-state loop of that command N times (no
capture: the output goes where every step's output goes, the log and the step's record). Floor
and runner alternate; the figure is the median of the paired differences, per step, with the
run's start-up taken out (a 2-step run of the same loop is subtracted). The silent row (`true`,
0 bytes) is the reference the goal is set against.

Each pair is floor, runner, floor (half the floor's steps before the run, half after), so a
drift of the machine's speed during the pair (this virtual machine's moves by up to 1.5x) falls
on both sides alike. `--cpu` counts `getrusage` time (microseconds) of this process and its
waited-for children: `os.times` counts in ticks of 10 ms, coarse against a 300-step run.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _common import DOC, machine, write_section  # noqa: E402

from little_loops.actions.plain import plain_argv  # noqa: E402 - after the sys.path line
from little_loops.load.loader import load  # noqa: E402
from little_loops.run.runner import Runner, RunOptions  # noqa: E402

TARGET_MS = 0.3
SIZES = (0, 2, 1 << 10, 16 << 10, 64 << 10)
LOOP = """\
name: bench-print
initial: say
max_iterations: {steps}
on_error: done
states:
  say:
    action: {command}
    on_success: $current
    on_failure: done
  done:
    terminal: true
"""


def command(base: Path, size: int) -> str:
    if not size:
        return "true"
    data = base / f"out-{size}.txt"
    data.write_bytes((b"x" * 79 + b"\n") * (size // 80) + b"x" * (size % 80))
    return f"cat {data}"


CPU = False


def floor(steps: int, cmd: str, base: Path) -> None:
    """The processes `ll` starts for `cmd`, spawned bare `steps` times, from the same
    directory: the plain command itself where `ll` would exec it without the shell."""
    words = plain_argv(cmd, "/bin/sh")
    argv: list[str] | str = cmd if words is None else words
    for _ in range(steps):
        subprocess.run(argv, shell=words is None, check=False, capture_output=True, cwd=base)


def run_loop(steps: int, base: Path, cmd: str, *, from_base: bool = True) -> None:
    """A run of `steps` steps in `base` (timed by the caller), started from `base` as
    `ll run` is started from a project: its actions run in the directory it was started in
    (started by posix_spawn, on Linux). `from_base=False`: started from elsewhere, so the
    actions, in `base`, are started by Popen."""
    path = base / "print.yaml"
    path.write_text(LOOP.format(steps=steps, command=f"'{cmd}'"))
    loop = load(path)
    here = os.getcwd()
    if from_base:
        os.chdir(base)
    try:
        result = Runner(loop, RunOptions(base_dir=base)).run()
    finally:
        os.chdir(here)
    assert result.outcome == "max_iterations", result
    assert result.steps == steps, result


def parts() -> tuple[float, float, float]:
    """CPU seconds of this process and of its waited-for children, and the wall clock."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime, time.perf_counter()


def _total(part: list[float]) -> float:
    """CPU of the process and its children (`--cpu`), else wall."""
    return part[0] + part[1] if CPU else part[2]


def measure(steps: int, repeat: int, where: Path) -> list[dict[str, float]]:
    """Per size, the median over `repeat` pairs of the runner's time a step over the floor's:
    in all (CPU of `ll` and its children with `--cpu`, else wall), and with `--cpu` split into
    `ll`'s own CPU over the floor process's own, and its children's over the floor's."""
    rows = []
    for size in SIZES:
        diffs: list[float] = []
        floors: list[float] = []
        own: list[float] = []
        kids: list[float] = []
        for _ in range(repeat):
            base = Path(tempfile.mkdtemp(dir=where, prefix=".bench-print-"))
            try:
                cmd = command(base, size)
                half = (steps - 2) // 2
                t0 = parts()
                run_loop(2, base, cmd)
                t1 = parts()
                floor(half, cmd, base)
                t2 = parts()
                run_loop(steps, base, cmd)
                t3 = parts()
                floor(steps - 2 - half, cmd, base)
                t4 = parts()
            finally:
                shutil.rmtree(base)
            # each part: the runner's (its run less the 2-step run) and the floor's (both halves)
            ran = [t3[i] - t2[i] - (t1[i] - t0[i]) for i in range(3)]
            bare = [t2[i] - t1[i] + t4[i] - t3[i] for i in range(3)]
            n = steps - 2
            floors.append(_total(bare) / n)
            diffs.append((_total(ran) - _total(bare)) / n)
            own.append((ran[0] - bare[0]) / n)
            kids.append((ran[1] - bare[1]) / n)
        rows.append(
            {
                "size": size,
                "floor": statistics.median(floors) * 1000,
                "overhead": statistics.median(diffs) * 1000,
                "min": min(diffs) * 1000,
                "low": median_bounds(diffs)[0] * 1000,
                "high": median_bounds(diffs)[1] * 1000,
                "own": statistics.median(own) * 1000,
                "kids": statistics.median(kids) * 1000,
            }
        )
    return rows


def median_bounds(values: list[float]) -> tuple[float, float]:
    """A 95% confidence interval of the median, from the order statistics alone (no
    assumption about the spread): the k-th smallest and the k-th largest value, k the
    largest with P(Binomial(n, 1/2) < k) <= 2.5%. With fewer than 6 values, the extremes."""
    ordered = sorted(values)
    n = len(ordered)
    below, k = 0.0, 0
    while below + math.comb(n, k) / 2**n <= 0.025:
        below += math.comb(n, k) / 2**n
        k += 1
    k = max(k, 1)
    return ordered[k - 1], ordered[n - k]


def label(size: int) -> str:
    if size >= 1 << 10:
        return f"{size >> 10} KiB"
    return f"{size} B" if size else "0 B (`true`)"


def report(rows: list[dict[str, float]], steps: int, repeat: int) -> str:
    silent = rows[0]["overhead"]
    lines = [
        f"`python bench/printing.py --steps {steps} --repeat {repeat} --write-docs`: a one-state "
        f"loop running `cat FILE` (FILE of SIZE bytes) {steps} times against the same "
        "processes spawned bare (`subprocess.run(['cat', FILE], capture_output=True)`, as `ll` "
        "execs a plain command; `sh -c true` for `true`), alternating; median (its 95% "
        "interval, from the order statistics, and the minimum) of the paired differences per "
        "step, start-up taken out, in the working directory (disk).",
        "",
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.",
        "",
        "| output per step | bare spawn, per step | overhead (median) | median's 95% interval "
        "| overhead (min) | of it: `ll`'s own CPU / its children's (medians) | over the silent "
        "step | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in rows:
        split = f"{m['own']:+.3f} / {m['kids']:+.3f} ms" if CPU else "(with --cpu)"
        lines.append(
            f"| {label(int(m['size']))} | {m['floor']:.3f} ms | {m['overhead']:.3f} ms | "
            f"{m['low']:.3f} to {m['high']:.3f} ms | "
            f"{m['min']:.3f} ms | {split} | {m['overhead'] - silent:+.3f} ms | "
            f"<= +{TARGET_MS} ms over bare: {'ok' if m['overhead'] <= TARGET_MS else 'MISSED'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dir", default=".")
    parser.add_argument("--cpu", action="store_true", help="CPU time (self + children), not wall")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    global CPU
    CPU = args.cpu
    rows = measure(args.steps, args.repeat, Path(args.dir).resolve())
    body = report(rows, args.steps, args.repeat)
    print(body)
    if args.write_docs:
        write_section("Steps that print", body)
        print(f"wrote the 'Steps that print' section of {DOC}")


if __name__ == "__main__":
    main()
