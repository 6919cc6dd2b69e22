"""The runner's own work per step, alone and between real processes.

    python bench/interleave.py [--steps 400] [--repeat 9]

A step's bookkeeping (its five events, state.json, the output record) is measured in process
with the action answered at once (bench/runner.py's `Answered`): "alone". The same runs are
then made with each action answered after a wait that is not work of the runner's, and the
wait's own CPU taken out (measured around it, step by step):

- "after a sleep": `time.sleep` for a child's usual life (0.8 ms): the CPU goes idle and
  wakes, as it does while `ll` waits for an action;
- "after a spawn": `subprocess.run(["cat", FILE])` of 1 KiB, the process a printing step
  starts (bench/printing.py's floor): idle, and a process that runs and ends meanwhile.

Each figure is the median over `repeat` rounds of this process's own CPU (`getrusage`) a step;
the ratios say how much dearer the same bookkeeping is between real processes than alone,
which a bench of the runner alone does not show. The three kinds alternate within each round.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

import runner
from _common import machine


def cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


class Waiting(runner.Answered):
    """Answers each action after `wait()`, counting the CPU the wait itself took."""

    def __init__(self, wait: Any) -> None:
        super().__init__()
        self.wait = wait
        self.spent = 0.0

    def run(self, request: Any) -> Any:
        started = cpu()
        self.wait()
        self.spent += cpu() - started
        return self.result


def bookkeeping(steps: int, base: Path, layer: runner.Answered) -> float:
    """Own CPU a step of a run of `steps`, less what `layer`'s waits took."""
    started = cpu()
    runner.runner(steps, base, False, layer)
    spent = cpu() - started - getattr(layer, "spent", 0.0)
    return spent / steps


def measure(steps: int, repeat: int) -> dict[str, float]:
    runs: dict[str, list[float]] = {"alone": [], "after a sleep": [], "after a spawn": []}
    for _ in range(repeat):
        base = Path(tempfile.mkdtemp(prefix=".bench-interleave-", dir="."))
        try:
            data = base / "out.txt"
            data.write_bytes(b"x" * 1024)
            argv = ["cat", str(data)]
            layers: dict[str, runner.Answered] = {
                "alone": runner.Answered(),
                "after a sleep": Waiting(lambda: time.sleep(0.0008)),
                "after a spawn": Waiting(lambda a=argv: subprocess.run(a, capture_output=True)),
            }
            for name, layer in layers.items():
                (base / name).mkdir()
                runs[name].append(bookkeeping(steps, base / name, layer))
        finally:
            shutil.rmtree(base)
    return {name: statistics.median(values) * 1000 for name, values in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    figures = measure(args.steps, args.repeat)
    alone = figures["alone"]
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.")
    print("| the runner's own work a step | CPU (median) | against alone |")
    print("|---|---|---|")
    for name, value in figures.items():
        print(f"| {name} | {value:.3f} ms | {value / alone:.2f}x |")


if __name__ == "__main__":
    main()
