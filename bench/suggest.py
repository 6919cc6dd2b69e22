"""`ll validate` on loops of 100 to 10,000 states, spelt right and with every target misspelt.

    python bench/suggest.py [--sizes 100,300,1000,3000,10000] [--repeat N] [--write-docs]

Each loop is a chain of states (`{next: ...}` only, so that 10,000 states stay under the loader's
100,000-value limit) named as generated loops name them (`check_00000`,
`fix_00001`, ...); in the misspelt copy every `next:` but the last swaps two adjacent letters of
its target, so `ll validate` gives one "did you mean" per state. Each figure is the median wall
time of N runs (default 3) of `python -m little_loops validate FILE`, a fresh process each.
The goal: misspelt costs about what spelt right costs, and both grow about linearly.
`--write-docs` replaces the "## Did you mean" section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import random
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


def median_wall(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(sizes: list[int], repeat: int) -> list[tuple[int, float, float]]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for count in sizes:
            walls = []
            for misspelt in (False, True):
                path = Path(tmp) / f"{count}-{misspelt}.yaml"
                path.write_text(chain(count, misspelt))
                walls.append(
                    median_wall(
                        [sys.executable, "-m", "little_loops", "validate", str(path)], repeat
                    )
                )
            out.append((count, walls[0], walls[1]))
            print(
                f"{count:>6} states: spelt right {walls[0]:.2f} s, misspelt {walls[1]:.2f} s",
                flush=True,
            )
    return out


def report(rows: list[tuple[int, float, float]], repeat: int, load: tuple[float, float]) -> str:
    table = ["| states | spelt right | misspelt | misspelt / right |", "|---|---|---|---|"]
    for count, right, wrong in rows:
        table.append(f"| {count:,} | {right:.2f} s | {wrong:.2f} s | {wrong / right:.1f} |")
    return (
        f"`python bench/suggest.py --repeat {repeat} --write-docs`: median wall time of "
        f"{repeat} runs of `ll validate` on each file, a fresh process each.\n\n"
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
