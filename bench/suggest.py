"""`ll validate` on loops of 100 to 10,000 states, spelt right and with every target misspelt.

    python bench/suggest.py [--sizes 100,300,1000,3000,10000] [--repeat N] [--write-docs]

Each loop is a chain of states (`{next: ...}` only, so that 10,000 states stay under the loader's
100,000-value limit) named as generated loops name them (`check_00000`,
`fix_00001`, ...); in the misspelt copy every `next:` but the last swaps two adjacent letters of
its target, so `ll validate` gives one "did you mean" per state. Each figure is the median wall
time (and CPU time) of N runs (default 3) of `python -m little_loops validate FILE`, a fresh
process each.
The goal: misspelt costs about what spelt right costs, and both grow about linearly.
`--write-docs` replaces the "## Did you mean" section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from _common import machine, write_section  # noqa: E402

WORDS = ["check", "fix", "lint", "test", "build", "review", "deploy", "format", "draft", "judge"]


def chain(count: int, misspelt: bool) -> str:
    rng = random.Random(count)
    names = [f"{WORDS[i % len(WORDS)]}_{i:05d}" for i in range(count)]
    lines = [f"name: chain-{count}", f"initial: {names[0]}", "on_error: done", "states:"]
    for i, name in enumerate(names):
        target = names[i + 1] if i + 1 < count else "done"
        if misspelt and i + 1 < count:
            at = rng.randrange(len(target) - 1)
            target = target[:at] + target[at + 1] + target[at] + target[at + 2 :]
        lines.append(f"  {name}: {{next: {target}}}")
    lines.append("  done: {terminal: true}")
    return "\n".join(lines) + "\n"


def median_times(argv: list[str], repeat: int) -> tuple[float, float]:
    """The median wall time and the median CPU time (user + system) of `repeat` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


Row = tuple[int, tuple[float, float], tuple[float, float]]


def measure(sizes: list[int], repeat: int) -> list[Row]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for count in sizes:
            times = []
            for misspelt in (False, True):
                path = Path(tmp) / f"{count}-{misspelt}.yaml"
                path.write_text(chain(count, misspelt))
                argv = [sys.executable, "-m", "little_loops", "validate", str(path)]
                times.append(median_times(argv, repeat))
            (right, right_cpu), (wrong, wrong_cpu) = times
            out.append((count, times[0], times[1]))
            print(
                f"{count:>6} states: spelt right {right:.2f} s ({right_cpu:.2f} s CPU), "
                f"misspelt {wrong:.2f} s ({wrong_cpu:.2f} s CPU)",
                flush=True,
            )
    return out


def report(rows: list[Row], repeat: int, load: tuple[float, float]) -> str:
    table = [
        "| states | spelt right: wall | CPU | misspelt: wall | CPU | misspelt / right (CPU) |",
        "|---|---|---|---|---|---|",
    ]
    for count, (right, right_cpu), (wrong, wrong_cpu) in rows:
        table.append(
            f"| {count:,} | {right:.2f} s | {right_cpu:.2f} s | {wrong:.2f} s | "
            f"{wrong_cpu:.2f} s | {wrong_cpu / right_cpu:.1f} |"
        )
    return (
        f"`python bench/suggest.py --repeat {repeat} --write-docs`: median wall time of "
        f"{repeat} runs of `ll validate` on each file, a fresh process each (wall, and CPU "
        "time: user + system).\n\n"
        f"Machine: {machine()}; load average {load[0]:.2f} before the runs, {load[1]:.2f} after "
        "(a shared machine: other jobs ran beside it).\n\n"
        + "\n".join(table)
        + "\n\nBefore the index (difflib asked about every state for every misspelt target), "
        "3,000 misspelt targets among 3,000 states took 10.9 s against 0.45 s spelt right. How "
        "the index finds difflib's own answer: the docstring of `little_loops/wording.py`.\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100,300,1000,3000,10000")
    parser.add_argument("--repeat", type=int, default=3, help="runs per file (median)")
    parser.add_argument("--write-docs", action="store_true", help="update docs/performance.md")
    args = parser.parse_args()
    before = os.getloadavg()[0]
    rows = measure([int(n) for n in args.sizes.split(",")], args.repeat)
    body = report(rows, args.repeat, (before, os.getloadavg()[0]))
    print(body)
    if args.write_docs:
        write_section("Did you mean", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
