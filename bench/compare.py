"""A printing step's CPU with the code of two checkouts, alternating, in fresh processes.

    git archive OLD | tar -x -C /tmp/old
    python bench/compare.py --old /tmp/old [--new .] [--steps 600] [--repeat 11]

Each round runs, in a fresh interpreter per checkout (the order swapped every round), a loop
of `cat FILE` (1 KiB) for `steps` steps in process (bench/printing.py's `run_loop`, a 2-step
run first, not counted), and reports that process's own CPU a step (`getrusage`), its
children's and the wall time. The paired differences (old less new, own CPU) say what a
change saved where the machine's speed moves between runs by more than the change: both
checkouts of a round run within a second or two of each other.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import resource, shutil, sys, tempfile, time
from pathlib import Path
tree, steps, where = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path[:0] = [tree + "/bench", tree]
import printing
def parts():
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime, time.perf_counter()
base = Path(tempfile.mkdtemp(dir=where, prefix=".bench-compare-"))
try:
    cmd = printing.command(base, 1024)
    printing.run_loop(2, base, cmd)
    before = parts()
    printing.run_loop(steps, base, cmd)
    after = parts()
finally:
    shutil.rmtree(base)
print(*(b - a for a, b in zip(before, after)))
"""


def one(tree: Path, steps: int, where: Path) -> list[float]:
    """Own CPU, children's CPU and wall, in ms a step, of one run with `tree`'s code."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(steps), str(where)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [float(value) / steps * 1000 for value in out.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--new", type=Path, default=REPO)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--dir", type=Path, default=Path("."))
    args = parser.parse_args()
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    runs: dict[str, list[list[float]]] = {name: [] for name in trees}
    for round_ in range(args.repeat):
        order = list(trees) if round_ % 2 == 0 else list(trees)[::-1]
        for name in order:
            runs[name].append(one(trees[name], args.steps, args.dir.resolve()))
    print("| code | own CPU a step | its children's | wall a step |")
    print("|---|---|---|---|")
    for name in trees:
        own, kids, wall = (statistics.median(r[i] for r in runs[name]) for i in range(3))
        print(f"| {name} | {own:.3f} ms | {kids:.3f} ms | {wall:.3f} ms |")
    saved = [old[0] - new[0] for old, new in zip(runs["old"], runs["new"], strict=True)]
    print(
        f"old less new, own CPU, per round: {', '.join(f'{s:+.3f}' for s in saved)}; "
        f"median {statistics.median(saved):+.3f} ms"
    )


if __name__ == "__main__":
    main()
