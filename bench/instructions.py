"""The runner's own work per step, per fork branch and per sub-loop call, in instructions.

    python bench/instructions.py [--repo PATH] [--small 20] [--large 120]

Counts the instructions this process executes (valgrind's callgrind, the children it spawns
not counted) for a run of SMALL and of LARGE units, and prints the difference per unit:

- step: a loop of `true` steps with the action answered in process (bench/runner.py's
  "runner without processes"): everything the runner does per step, nothing to wait for;
- branch: a `for_each` of `true` at concurrency 1 (bench/fork_scale.py): everything `ll` does
  per branch in its own process (the spawn's own cost, in the child, is not counted);
- call: a loop calling a one-step child loop again and again (bench/nesting.py);
- level: a chain of COUNT loop files, each calling the next (bench/nesting.py's depth; at most
  8, so `--units level --small 2 --large 8`): a level of nesting, its child file loaded;
- print: a step running `cat FILE` (1 KiB) for real (bench/printing.py): the runner's work
  and the action layer's around the spawn, the spawn's own cost in the child not counted;
  the action started by Popen (from another directory than the run's), which valgrind can
  follow: posix_spawn's child works in this process's memory until its exec, and is counted.
- spawn-print: the same step started from the run's directory, by posix_spawn, as `ll run`
  starts actions by default (on Linux): the action layer's own path, the child's work before
  its exec (its signals, its PATH search) counted with it.

An instruction count does not move with the machine's load the way CPU and wall times do, so a
change can be compared on a busy shared machine. `--repo` measures another checkout's code
(for instance a `git archive` of an older commit) with this script. Needs `valgrind`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
UNITS = ("step", "branch", "call", "print", "spawn-print", "level")


def one_run(repo: Path, unit: str, count: int) -> None:
    """Run `count` units with `repo`'s code, in this process (under valgrind)."""
    sys.path[:0] = [str(repo / "bench"), str(repo)]
    os.environ["LL_MAX_ITEMS"] = str(max(count, 1000))
    base = Path(tempfile.mkdtemp(prefix=".bench-instructions-"))
    try:
        if unit == "step":
            import runner

            runner.runner(count, base, False, runner.Answered())
        elif unit == "print":
            import printing

            # Started from elsewhere, so the action is started by Popen: glibc's posix_spawn
            # runs its child in this process's memory until the exec, and valgrind counts the
            # child's work there as this process's (a CPU figure: bench/printing.py).
            printing.run_loop(count, base, printing.command(base, 1 << 10), from_base=False)
        elif unit == "spawn-print":
            import printing

            # Started from the run's directory, as `ll run` starts actions by default: by
            # posix_spawn (the child's own work until its exec is counted too, see above).
            printing.run_loop(count, base, printing.command(base, 1 << 10))
        elif unit == "branch":
            import fork_scale

            fork_scale.run_fork(base, count)
        elif unit == "level":
            import nesting

            nesting.run_once(nesting.chain(base, count), base, {"value": "v"})
        else:
            import nesting

            (base / "leaf.yaml").write_text(nesting.LEAF)
            path = base / "caller.yaml"
            path.write_text(nesting.REPEATED.format(calls=count))
            nesting.run_once(path, base, {})
    finally:
        shutil.rmtree(base)


def instructions(repo: Path, unit: str, count: int) -> int:
    """Instructions of one whole process running `count` units."""
    proc = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            str(HERE),
            "--one",
            unit,
            str(count),
            "--repo",
            str(repo),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no count:\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repo", type=Path, default=HERE.parent.parent)
    parser.add_argument("--small", type=int, help="default 20 (a level: 2)")
    parser.add_argument("--large", type=int, help="default 120 (a level: 8, the deepest tree)")
    parser.add_argument("--units", default=",".join(UNITS))
    parser.add_argument("--one", nargs=2, metavar=("UNIT", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    repo = args.repo.resolve()
    if args.one:
        one_run(repo, args.one[0], int(args.one[1]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("bench/instructions.py needs valgrind (apt-get install valgrind)")
    for unit in args.units.split(","):
        deep = unit == "level"  # a tree is at most 8 runs deep
        few = args.small if args.small is not None else (2 if deep else 20)
        many = args.large if args.large is not None else (8 if deep else 120)
        small = instructions(repo, unit, few)
        large = instructions(repo, unit, many)
        each = (large - small) / (many - few)
        print(f"{unit}: {each:,.0f} instructions a {unit} ({repo})", flush=True)


if __name__ == "__main__":
    main()
