"""A fork's cost per branch against its number of items: a `for_each` of `true`, concurrency 1.

    python bench/fork_scale.py [--items 10,100,1000,10000] [--repeat 3] [--cpu] [--write-docs]

The loop lists its items inline (a JSON array in `context`), so the loop file grows with them.
The runner runs the fork in this process; the floor is N bare `subprocess.run("true",
shell=True)`. Per branch: (the fork's time minus the floor's) / N, the run's fixed start-up
taken out by subtracting a fork of 1 item. Also per branch: the bytes and files the branch left
under the run directory (they must not grow with N). `--cpu` counts CPU seconds of this
process and its children instead of wall time (steadier on a shared machine). `LL_MAX_ITEMS`
is raised to the largest N (the default cap is 1,000 items).
"""

from __future__ import annotations

import argparse
import os
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

from little_loops.load.loader import load  # noqa: E402 - after the sys.path line
from little_loops.run.runner import Runner, RunOptions  # noqa: E402

TARGET_MS = 1.5
CPU = False


def clock() -> float:
    if CPU:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system
    return time.perf_counter()


def fork_loop(items: int) -> str:
    """The items inline in the file, as a JSON array in `context` (the loader caps literal
    lists at 1,000 items; a rendered list is capped by `LL_MAX_ITEMS` at run time)."""
    listed = ",".join(f'"i{n}"' for n in range(items))
    return (
        "name: bench-fan\n"
        "initial: fan\n"
        "context:\n"
        f"  items: '[{listed}]'\n"
        "states:\n"
        "  fan:\n"
        '    for_each: "${context.items}"\n'
        "    action: 'true'\n"
        "    max_concurrency: 1\n"
        "    on_success: done\n"
        "    on_failure: done\n"
        "  done: {terminal: true}\n"
    )


def run_fork(base: Path, items: int) -> tuple[float, Path]:
    path = base / f"fan{items}.yaml"
    path.write_text(fork_loop(items))
    loop = load(path)
    started = clock()
    result = Runner(loop, RunOptions(base_dir=base)).run()
    elapsed = clock() - started
    assert result.outcome == "success", result
    return elapsed, result.run_dir


def floor(n: int) -> float:
    started = clock()
    for _ in range(n):
        subprocess.run("true", shell=True, check=False)
    return clock() - started


def footprint(run_dir: Path) -> tuple[int, int]:
    """Bytes and files of the fork's branches (under `sub/`)."""
    size = files = 0
    for root, _dirs, names in os.walk(run_dir / "sub"):
        for name in names:
            files += 1
            size += os.path.getsize(os.path.join(root, name))
    return size, files


def measure(counts: list[int], repeat: int, where: Path) -> list[dict[str, float]]:
    rows = []
    for n in counts:
        per, sizes, files = [], 0, 0
        for _ in range(repeat):
            base = Path(tempfile.mkdtemp(dir=where, prefix=".bench-fan-"))
            try:
                one, _ = run_fork(base, 1)
                f = floor(n - 1)
                whole, run_dir = run_fork(base, n)
                size, count = footprint(run_dir)
            finally:
                shutil.rmtree(base)
            per.append((whole - one - f) / (n - 1))
            sizes, files = size, count
        rows.append(
            {
                "items": n,
                "per": statistics.median(per) * 1000,
                "min": min(per) * 1000,
                "bytes": sizes / n,
                "files": files / n,
            }
        )
    return rows


def report(rows: list[dict[str, float]], counts: str, repeat: int) -> str:
    unit = "CPU" if CPU else "wall"
    lines = [
        f"`python bench/fork_scale.py --items {counts} --repeat {repeat}"
        f"{' --cpu' if CPU else ''} --write-docs`: a `for_each` of N inline items running "
        f"`true` at `max_concurrency: 1`, in process; {unit} time per branch over a bare spawn "
        "(the fork of 1 item and N bare spawns taken out), median and minimum of the repeats; "
        "bytes and files each branch left under `sub/`.",
        "",
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.",
        "",
        "| items | per branch over a bare spawn (median) | (min) | bytes a branch | "
        "files a branch | target |",
        "|---|---|---|---|---|---|",
    ]
    for m in rows:
        ok = "ok" if m["min"] <= TARGET_MS else "MISSED"
        lines.append(
            f"| {int(m['items']):,} | {m['per']:.2f} ms | {m['min']:.2f} ms | "
            f"{m['bytes']:.0f} | {m['files']:.1f} | <= {TARGET_MS} ms: {ok} |"
        )
    first, last = rows[0], rows[-1]
    # With --cpu a few branches may take no whole 10 ms tick: no ratio to give then.
    growth = f"{last['min'] / first['min']:.2f}x" if first["min"] > 0 else "n/a"
    lines.append("")
    lines.append(
        f"Growth, {int(last['items']):,} items over {int(first['items']):,}: "
        f"{growth} per branch (min), "
        f"{last['bytes'] / first['bytes']:.2f}x bytes a branch."
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", default="10,100,1000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=".")
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    global CPU
    CPU = args.cpu
    os.environ.setdefault("LL_MAX_ITEMS", str(max(int(n) for n in args.items.split(","))))
    counts = [int(n) for n in args.items.split(",")]
    body = report(measure(counts, args.repeat, Path(args.dir).resolve()), args.items, args.repeat)
    print(body)
    if args.write_docs:
        write_section("Forks at scale", body)
        print(f"wrote the 'Forks at scale' section of {DOC}")


if __name__ == "__main__":
    main()
