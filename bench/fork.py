"""Wall time of a fork: N branches that each sleep S seconds, at several `max_concurrency`.

    python bench/fork.py [--branches 4] [--seconds 1] [--repeat 3] [--write-docs]

Each figure is the median of `--repeat` runs of the real `ll run` (a fresh process: start-up
included) on a generated `for_each` loop. The ideal is ceil(N / max_concurrency) * S; what is
above it is ll's own cost (start-up, one child run per branch, threads, the join).
`--write-docs` replaces the "## Forks" section of docs/performance.md (and only that one).
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from _common import machine, write_section  # noqa: E402


def fork_loop(branches: int, seconds: float, concurrency: int) -> str:
    items = ", ".join(f"b{i}" for i in range(1, branches + 1))
    return (
        "name: bench-fork\n"
        "initial: fan\n"
        "states:\n"
        "  fan:\n"
        f"    for_each: [{items}]\n"
        f"    action: sleep {seconds}\n"
        f"    max_concurrency: {concurrency}\n"
        "    on_success: done\n"
        "    on_failure: done\n"
        "  done: {terminal: true}\n"
    )


def time_run(loop: Path, cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "little_loops", "run", str(loop), "--quiet"],
        cwd=cwd,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branches", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    n, s = args.branches, args.seconds
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        floor_loop = where / "floor.yaml"
        floor_loop.write_text(fork_loop(1, 0, 1))
        floor = statistics.median(time_run(floor_loop, where) for _ in range(args.repeat))
        print(f"floor (a one-branch fork of sleep 0): {floor:.2f} s")
        for concurrency in (1, 2, n):
            loop = where / f"fork-{concurrency}.yaml"
            loop.write_text(fork_loop(n, s, concurrency))
            took = statistics.median(time_run(loop, where) for _ in range(args.repeat))
            ideal = math.ceil(n / concurrency) * s
            rows.append((concurrency, took, ideal))
            print(f"max_concurrency {concurrency}: {took:.2f} s (ideal {ideal:.2f} s)")
    table = "\n".join(
        f"| {c} | {took:.2f} s | {ideal:.2f} s | {took - ideal - floor:+.2f} s |"
        for c, took, ideal in rows
    )
    body = f"""
`python bench/fork.py --branches {n} --seconds {s:g} --repeat {args.repeat}`: a `for_each` of
{n} branches, each `sleep {s:g}`, run by the real `ll run --quiet` (a fresh process, start-up
included); the median of {args.repeat} runs. Machine: {machine()}.

| max_concurrency | wall time | ideal | over ideal + floor |
|---|---|---|---|
{table}

The floor is the same command on a fork of one branch that sleeps 0 s: {floor:.2f} s here
(interpreter start-up, imports, the run directory; an editable install on a busy shared
machine). The branches run as threads of one `ll` process, each a child run with its own run
directory; four one-second branches at `max_concurrency: 4` end in about one second plus the
floor, so what a fork itself adds is tens of milliseconds.
"""
    if args.write_docs:
        write_section("Forks", body)
    else:
        print(body)


if __name__ == "__main__":
    main()
