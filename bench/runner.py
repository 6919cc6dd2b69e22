"""Per-step overhead of the runner: a 1,000-step loop of `true` against 1,000 bare subprocesses.

Run: python bench/runner.py [--steps 1000] [--repeat 5] [--fsync]

Both sides run in this process, alternating, and the medians are compared: the floor is
`subprocess.run("true", shell=True)` N times; the runner runs a loop whose one state runs
`true` and routes back to itself until `max_iterations` (N) ends it, writing its events,
step logs and state.json (durable state after every step) as a real run does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from little_loops.loader import load
from little_loops.runner import Runner, RunOptions

LOOP = """\
name: bench-steps
initial: spin
max_iterations: {steps}
on_error: done
states:
  spin:
    action: "true"
    on_success: $current
    on_failure: done
  done:
    terminal: true
"""


def floor(steps: int) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        subprocess.run("true", shell=True, check=False)
    return time.perf_counter() - started


def runner(steps: int, base: Path, fsync: bool) -> float:
    path = base / "loop.yaml"
    path.write_text(LOOP.format(steps=steps))
    loop = load(path)
    options = RunOptions(base_dir=base, fsync=fsync)
    started = time.perf_counter()
    result = Runner(loop, options).run()
    elapsed = time.perf_counter() - started
    assert result.outcome == "max_iterations", result
    assert result.steps == steps, result
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--fsync", action="store_true", help="fsync state.json every step")
    parser.add_argument(
        "--dir",
        default=".",
        help="where the runs' files go (default: a temporary folder under the current one; "
        "the file system matters: on this machine creating a file under /tmp costs ~0.4 ms, "
        "under /work ~0.05 ms)",
    )
    args = parser.parse_args()
    floors: list[float] = []
    runs: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix=".bench-runner-") as tmp:
        for i in range(args.repeat):
            floors.append(floor(args.steps))
            base = Path(tmp) / str(i)
            base.mkdir()
            runs.append(runner(args.steps, base, args.fsync))
    f, r = statistics.median(floors), statistics.median(runs)
    per_step_ms = (r - f) / args.steps * 1000
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    print(f"steps: {args.steps}, repeats: {args.repeat}, fsync: {args.fsync}, dir: {args.dir}")
    each_f, each_r = f / args.steps * 1000, r / args.steps * 1000
    print(f"floor  (subprocess.run 'true' x{args.steps}): median {f:.3f} s ({each_f:.3f} ms each)")
    print(f"runner (loop of 'true', {args.steps} steps):  median {r:.3f} s ({each_r:.3f} ms each)")
    print(f"overhead per step: {per_step_ms:.3f} ms (target <= 0.5 ms)")


if __name__ == "__main__":
    main()
