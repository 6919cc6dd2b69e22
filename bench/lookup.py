"""Run lookup against the number of runs: `ll status`, `ll status RUN`, `ll resume RUN`, `ll list`.

    python bench/lookup.py [--runs 5,100,1000,10000] [--repeat 5] [--instructions] [--write-docs]

One real run of a two-state loop is made, then copied under new run ids (one a second, as
`ll run` names them) until `.loops/runs/` holds N runs; the copies are dated a minute back, as
runs made earlier are, and one `ll list` reads them in (the first lookup after runs were added
by something other than `ll run` lists the folder and writes the runs' index,
record/run_index.py: its CPU is the "first lookup" column); then one more real `ll run`,
which adds itself to the index, as every run does. Each command is then a fresh `ll` process
in that folder; the figures are the minimum over `--repeat` runs (the machine is shared: the
minimum is the figure least moved by other work) of its CPU time (user + system, `wait4`) and
of its wall time. `ll resume RUN` names a finished run, so it stops after the lookup with its
refusal; `ll list` prints the newest 20 runs (its default) and reads only those.

The in-process columns are the lookup alone, without the process start that dominates the
others on a loaded machine: the minimum CPU time of `--repeat` calls of `find_run(base,
None)` (the latest run: `ll status`) and of `list_text(base, 5)` (`ll list -n 5`: five rows
at every size, so that only the lookup can grow). `--instructions` adds the instructions of one `ll
status` process (valgrind's callgrind): a count the load does not move.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from _common import DOC, instructions, machine, write_section  # noqa: E402

LOOP = "name: two\ninitial: a\nstates:\n  a: {action: 'true', next: b}\n  b: {terminal: true}\n"
LL = [sys.executable, "-m", "little_loops"]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as users run


def populate(base: Path, count: int) -> str:
    """`count` runs under base (the real one included); the id of the oldest."""
    (base / "two.yaml").write_text(LOOP)
    subprocess.run([*LL, "run", "two.yaml", "--quiet"], cwd=base, check=True)
    runs = base / ".loops" / "runs"
    (real,) = list(runs.iterdir())
    state = (real / "state.json").read_text()
    events = (real / "events.jsonl").read_text()
    start = time.time() - 10 * 86400
    for i in range(count - 1):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(start + i))
        run_id = f"{stamp}-two-{i % 65536:04x}"
        d = runs / run_id
        d.mkdir()
        (d / "state.json").write_text(state.replace(real.name, run_id))
        (d / "events.jsonl").write_text(events.replace(real.name, run_id))
    return min(p.name for p in runs.iterdir())


def timed(argv: list[str], cwd: Path, repeat: int) -> tuple[float, float]:
    """Minimum CPU time (user + system, `wait4`) and minimum wall time of `repeat` runs."""
    cpu = wall = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _, _, usage = os.wait4(proc.pid, 0)
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, usage.ru_utime + usage.ru_stime)
    return cpu, wall


def first_lookup(base: Path) -> float:
    """CPU time of the first `ll list` after the copies: it lists the folder, writes the index."""
    proc = subprocess.Popen([*LL, "list"], cwd=base, env=ENV, stdout=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime


def in_process(base: Path, repeat: int) -> tuple[float, float]:
    """Minimum CPU time of `find_run(base, None)` and of `list_text(base, 5)`, in process."""
    sys.path.insert(0, str(REPO))
    from little_loops.record.runs import list_text
    from little_loops.record.store import find_run

    found = listed = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        find_run(base, None)
        found = min(found, time.process_time() - started)
        started = time.process_time()
        list_text(base, 5)  # 5 rows at every size: the lookup's growth, not the rows'
        listed = min(listed, time.process_time() - started)
    return found, listed


def measure(counts: list[int], repeat: int, count: bool) -> list[dict[str, Any]]:
    rows = []
    for n in counts:
        base = Path(tempfile.mkdtemp(prefix=".bench-lookup-", dir="."))
        try:
            oldest = populate(base, n)
            then = time.time() - 60
            os.utime(base / ".loops" / "runs", (then, then))  # made earlier, by copying
            first = first_lookup(base)
            subprocess.run([*LL, "run", "two.yaml", "--quiet"], cwd=base, check=True)
            row: dict[str, Any] = {"runs": n, "first": first}
            for key, argv in (
                ("status", [*LL, "status"]),
                ("status_id", [*LL, "status", oldest]),
                ("resume_id", [*LL, "resume", oldest]),
                ("list", [*LL, "list"]),
            ):
                row[key], row[f"{key}_wall"] = timed(argv, base, repeat)
            row["find"], row["list_text"] = in_process(base, repeat)
            counted = instructions([*LL, "status"], cwd=base, env=ENV) if count else None
            row["ir"] = None if counted is None else counted / 1e6
            rows.append(row)
        finally:
            shutil.rmtree(base)
    return rows


def report(rows: list[dict[str, Any]], counts: str, repeat: int, count: bool) -> str:
    first = rows[0]
    lines = [
        f"`python bench/lookup.py --runs {counts} --repeat {repeat}"
        f"{' --instructions' if count else ''}`: minimum CPU time (user + system) and, in "
        f"brackets, minimum wall time of {repeat} fresh `ll` processes, with N runs under "
        "`.loops/runs/`; the ratio to the first row after each CPU time.",
        "",
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.",
        "",
        "| runs | `ll status` | `ll status OLDEST` | `ll resume OLDEST` (refused: finished) | "
        "`ll list` | in process: latest run / `list_text`, 5 rows | `ll status` instructions | "
        "first lookup (lists, writes the index) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    keys = ("status", "status_id", "resume_id", "list")
    for m in rows:
        cells = [
            f"{m[k] * 1000:.0f} ms ({m[k] / first[k]:.2f}x) [{m[f'{k}_wall'] * 1000:.0f} ms]"
            for k in keys
        ]
        cells.append(
            f"{m['find'] * 1000:.2f} ms ({m['find'] / first['find']:.2f}x) / "
            f"{m['list_text'] * 1000:.1f} ms ({m['list_text'] / first['list_text']:.2f}x)"
        )
        ir = m["ir"]
        cells.append(f"{ir:.1f} M ({ir / first['ir']:.3f}x)" if ir and first["ir"] else "-")
        cells.append(f"{m['first'] * 1000:.0f} ms")
        lines.append(f"| {int(m['runs']):,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", default="5,100,1000,10000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="count them (valgrind)")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    counts = [int(n) for n in args.runs.split(",")]
    rows = measure(counts, args.repeat, args.instructions)
    body = report(rows, args.runs, args.repeat, args.instructions)
    print(body)
    if args.write_docs:
        write_section("Run lookup", body)
        print(f"wrote the 'Run lookup' section of {DOC}")


if __name__ == "__main__":
    main()
