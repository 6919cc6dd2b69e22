"""Starting an action's process: ll's own CPU for each start, posix_spawn against Popen.

    python bench/spawn.py [--starts 1500] [--repeat 7]

Starts `/bin/sh -c true` STARTS times with the process layer's own `_start` (its pipes, its
stdin, the child in a session of its own), waits for it and closes the pipes, in this
directory: once as `ll` starts an action that runs where `ll` was started (posix_spawn, on
Linux), once forced onto `subprocess.Popen` (as an action in another directory is started),
alternating. The figures are this process's CPU (`getrusage`, user + system) per start,
minimum and median of REPEAT rounds; the children's CPU is shown beside them (the same shell
either way). The runner's other work around a start is bench/printing.py's.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _common import machine  # noqa: E402

from little_loops.actions import process  # noqa: E402 - after the sys.path line
from little_loops.actions.reaper import GUARD  # noqa: E402


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def starts(count: int, spawn: bool) -> tuple[float, float]:
    """(this process's CPU, the children's CPU) per start, in seconds."""
    process._INHERITED = None if spawn else False
    here = Path.cwd()
    argv = ["/bin/sh", "-c", "true"]
    me, kids = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    for _ in range(count):
        pipes = process._Pipes()
        child: Any = process._start(argv, here, None, process._devnull(), pipes, ())
        pipes.close_writers()
        os.read(pipes.out_r, 1)
        os.read(pipes.err_r, 1)
        child.wait()
        pipes.close()
    used = _cpu(resource.RUSAGE_SELF) - me, _cpu(resource.RUSAGE_CHILDREN) - kids
    return used[0] / count, used[1] / count


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--starts", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    GUARD.ready()
    rounds: dict[str, list[tuple[float, float]]] = {"posix_spawn": [], "Popen": []}
    for _ in range(args.repeat):
        rounds["posix_spawn"].append(starts(args.starts, True))
        rounds["Popen"].append(starts(args.starts, False))
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.\n")
    print("| started by | ll's CPU a start, min | median | the child's CPU, median |")
    print("|---|---|---|---|")
    for name, got in rounds.items():
        mine = [g[0] * 1e6 for g in got]
        kids = [g[1] * 1e6 for g in got]
        print(
            f"| {name} | {min(mine):.0f} µs | {statistics.median(mine):.0f} µs | "
            f"{statistics.median(kids):.0f} µs |"
        )


if __name__ == "__main__":
    main()
