"""`ll validate` on loops of 100 to 10,000 states, spelt right and with every target misspelt.

    python bench/suggest.py [--sizes 100,300,1000,3000,10000] [--repeat N] [--instructions]
                            [--write-docs]

Each loop is a chain of states (`{next: ...}` only, so that 10,000 states stay under the loader's
100,000-value limit) named as generated loops name them (`check_00000`,
`fix_00001`, ...); in the misspelt copy every `next:` but the last misspells its target, the
four common typos in turn (two neighbouring letters swapped, one left out, one doubled, one
replaced), so `ll validate` gives one "did you mean" per state (fewer where a typo happens to
spell another state). Each figure is the median wall
time and CPU time, and the least CPU time, of N runs (default 3) of `python -m little_loops
validate FILE`, a fresh process each (the least CPU time is the figure the goal is judged by:
the machine's load adds to a run, never takes away), after one run that warms the caches a
user's second run has: bytecode (written
under a temporary PYTHONPYCACHEPREFIX, PYTHONDONTWRITEBYTECODE removed) and the parse cache
(a temporary XDG_CACHE_HOME). `--instructions` adds the instructions of one run of each file
(valgrind's callgrind), which the machine's load does not move.
The goal: misspelt costs about what spelt right costs, and both grow about linearly.
`--write-docs` replaces the "## Did you mean" section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from _common import instructions, machine, write_section  # noqa: E402

WORDS = ["check", "fix", "lint", "test", "build", "review", "deploy", "format", "draft", "judge"]


def chain(count: int, misspelt: bool) -> str:
    rng = random.Random(count)
    names = [f"{WORDS[i % len(WORDS)]}_{i:05d}" for i in range(count)]
    lines = [f"name: chain-{count}", f"initial: {names[0]}", "on_error: done", "states:"]
    for i, name in enumerate(names):
        target = names[i + 1] if i + 1 < count else "done"
        if misspelt and i + 1 < count:
            target = typo(rng, target, i % 4)
        lines.append(f"  {name}: {{next: {target}}}")
    lines.append("  done: {terminal: true}")
    return "\n".join(lines) + "\n"


def typo(rng: random.Random, name: str, kind: int) -> str:
    """`name` with two neighbouring letters swapped (kind 0), one letter left out (1), one
    doubled (2) or one replaced by another letter or digit (3)."""
    at = rng.randrange(len(name) - 1)
    if kind == 0:
        return name[:at] + name[at + 1] + name[at] + name[at + 2 :]
    if kind == 1:
        return name[:at] + name[at + 1 :]
    if kind == 2:
        return name[:at] + name[at] + name[at:]
    other = rng.choice([c for c in "abcdefghijklmnopqrstuvwxyz0123456789" if c != name[at]])
    return name[:at] + other + name[at + 1 :]


def median_times(argv: list[str], repeat: int, env: dict[str, str]) -> Times:
    """The median wall time, the median CPU time (user + system) and the least CPU time of
    `repeat` runs, after one that warms the caches."""
    out = subprocess.DEVNULL
    subprocess.run(argv, stdout=out, stderr=out, env=env, check=False)
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=out, stderr=out, env=env, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus), min(cpus)


def counted(argv: list[str], env: dict[str, str]) -> int:
    """The instructions of one run (caches warm), counted by valgrind's callgrind."""
    found = instructions(argv, env=env)
    if found is None:
        raise SystemExit(f"valgrind counted nothing for {' '.join(argv)}")
    return found


Times = tuple[float, float, float]
Row = tuple[int, Times, Times, tuple[int, int] | None]


def measure(sizes: list[int], repeat: int, count_instructions: bool) -> list[Row]:
    out: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        for count in sizes:
            times, counts = [], []
            for misspelt in (False, True):
                path = Path(tmp) / f"{count}-{misspelt}.yaml"
                path.write_text(chain(count, misspelt))
                argv = [sys.executable, "-m", "little_loops", "validate", str(path)]
                times.append(median_times(argv, repeat, env))
                if count_instructions:
                    counts.append(counted(argv, env))
            (right, right_cpu, right_min), (wrong, wrong_cpu, wrong_min) = times
            both = (counts[0], counts[1]) if counts else None
            out.append((count, times[0], times[1], both))
            extra = (
                f"; {both[0] / 1e6:,.0f} M against {both[1] / 1e6:,.0f} M instructions"
                if both
                else ""
            )
            print(
                f"{count:>6} states: spelt right {right:.2f} s ({right_cpu:.2f} s CPU), "
                f"misspelt {wrong:.2f} s ({wrong_cpu:.2f} s CPU); least CPU {right_min:.3f} s "
                f"against {wrong_min:.3f} s: {wrong_min / right_min:.2f}x{extra}",
                flush=True,
            )
    return out


def report(rows: list[Row], repeat: int, load: tuple[float, float]) -> str:
    counted = all(row[3] is not None for row in rows)
    head = (
        "| states | spelt right: wall | CPU | least CPU | misspelt: wall | CPU | least CPU "
        "| misspelt / right (least CPU) |"
    )
    rule = "|---|---|---|---|---|---|---|---|"
    if counted:
        head += " instructions: spelt right | misspelt | misspelt / right |"
        rule += "---|---|---|"
    table = [head, rule]
    for count, (right, right_cpu, right_min), (wrong, wrong_cpu, wrong_min), both in rows:
        line = (
            f"| {count:,} | {right:.2f} s | {right_cpu:.2f} s | {right_min:.3f} s | {wrong:.2f} s "
            f"| {wrong_cpu:.2f} s | {wrong_min:.3f} s | {wrong_min / right_min:.2f} |"
        )
        if both is not None:
            line += f" {both[0] / 1e6:,.0f} M | {both[1] / 1e6:,.0f} M | {both[1] / both[0]:.2f} |"
        table.append(line)
    flag = " --instructions" if counted else ""
    return (
        f"`python bench/suggest.py --repeat {repeat}{flag} --write-docs`: median wall time and "
        f"CPU time, and least CPU time, of {repeat} runs of `ll validate` on each file, a fresh "
        "process each, caches warm "
        "(bytecode, parse cache) as for a user's second run (wall, and CPU time: user + "
        "system" + ("; and the instructions of one run, callgrind" if counted else "") + ").\n\n"
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
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per file (median, and least CPU)"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions too (needs valgrind)"
    )
    parser.add_argument("--write-docs", action="store_true", help="update docs/performance.md")
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    before = os.getloadavg()[0]
    rows = measure([int(n) for n in args.sizes.split(",")], args.repeat, args.instructions)
    body = report(rows, args.repeat, (before, os.getloadavg()[0]))
    print(body)
    if args.write_docs:
        write_section("Did you mean", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
