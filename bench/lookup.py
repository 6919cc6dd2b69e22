"""Run lookup against the number of runs: `ll status`, `ll status RUN`, `ll resume RUN`, `ll list`.

    python bench/lookup.py [--runs 5,100,1000,10000] [--repeat 5] [--write-docs]

One real run of a two-state loop is made, then copied under new run ids (one a second, as
`ll run` names them) until `.loops/runs/` holds N runs. Each command is a fresh `ll` process
in that folder; the figure is the minimum wall time of `--repeat` runs (the machine is shared:
the minimum is the figure least moved by other work). `ll resume RUN` names a finished run, so
it stops after the lookup with its refusal; `ll list` prints the newest 20 runs (its default) and
reads only those. `list_text` in process is the listing alone: the minimum CPU time of
`--repeat` calls, without the process start that dominates the other columns on a loaded machine.
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

from _common import DOC, machine, write_section  # noqa: E402

LOOP = "name: two\ninitial: a\nstates:\n  a: {action: 'true', next: b}\n  b: {terminal: true}\n"
LL = [sys.executable, "-m", "little_loops"]


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


def timed(argv: list[str], cwd: Path, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
        best = min(best, time.perf_counter() - started)
    return best


def in_process(base: Path, repeat: int) -> float:
    """Minimum CPU time of `list_text(base)` (the default `ll list`), in this process."""
    sys.path.insert(0, str(REPO))
    from little_loops.record.runs import list_text

    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        list_text(base)
        best = min(best, time.process_time() - started)
    return best


def measure(counts: list[int], repeat: int) -> list[dict[str, Any]]:
    rows = []
    for n in counts:
        base = Path(tempfile.mkdtemp(prefix=".bench-lookup-", dir="."))
        try:
            oldest = populate(base, n)
            rows.append(
                {
                    "runs": n,
                    "status": timed([*LL, "status"], base, repeat),
                    "status_id": timed([*LL, "status", oldest], base, repeat),
                    "resume_id": timed([*LL, "resume", oldest], base, repeat),
                    "list": timed([*LL, "list"], base, repeat),
                    "list_text": in_process(base, repeat),
                }
            )
        finally:
            shutil.rmtree(base)
    return rows


def report(rows: list[dict[str, Any]], counts: str, repeat: int) -> str:
    first = rows[0]
    lines = [
        f"`python bench/lookup.py --runs {counts} --repeat {repeat} --write-docs`: minimum wall "
        f"time of {repeat} fresh `ll` processes, with N runs under `.loops/runs/`.",
        "",
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.",
        "",
        "| runs | `ll status` | `ll status OLDEST` | `ll resume OLDEST` (refused: finished) | "
        "`ll list` | `list_text` in process |",
        "|---|---|---|---|---|---|",
    ]
    keys = ("status", "status_id", "resume_id", "list")
    for m in rows:
        ratio = {k: m[k] / first[k] for k in (*keys, "list_text")}
        cells = [f"{m[k] * 1000:.0f} ms ({ratio[k]:.2f}x)" for k in keys]
        cells.append(f"{m['list_text'] * 1000:.1f} ms ({ratio['list_text']:.2f}x)")
        lines.append(f"| {int(m['runs']):,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", default="5,100,1000,10000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    counts = [int(n) for n in args.runs.split(",")]
    body = report(measure(counts, args.repeat), args.runs, args.repeat)
    print(body)
    if args.write_docs:
        write_section("Run lookup", body)
        print(f"wrote the 'Run lookup' section of {DOC}")


if __name__ == "__main__":
    main()
