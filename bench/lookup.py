"""Run lookup against the number of runs: `ll status`, `ll status RUN`, `ll resume RUN`, `ll list`.

    python bench/lookup.py [--runs 5,100,1000,10000] [--repeat 5] [--write-docs]

One real run of a two-state loop is made, then copied under new run ids (one a second, as
`ll run` names them) until `.loops/runs/` holds N runs. Each command is a fresh `ll` process
in that folder; the figure is the minimum wall time of `--repeat` runs (the machine is shared:
the minimum is the figure least moved by other work). `ll resume RUN` names a finished run, so
it stops after the lookup with its refusal; `ll list` prints every run, so it grows with them by
design (its figure per run is given).
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


def measure(counts: list[int], repeat: int) -> list[dict[str, float]]:
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
                }
            )
        finally:
            shutil.rmtree(base)
    return rows


def report(rows: list[dict[str, float]], counts: str, repeat: int) -> str:
    first = rows[0]
    lines = [
        f"`python bench/lookup.py --runs {counts} --repeat {repeat} --write-docs`: minimum wall "
        f"time of {repeat} fresh `ll` processes, with N runs under `.loops/runs/`.",
        "",
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.",
        "",
        "| runs | `ll status` | `ll status OLDEST` | `ll resume OLDEST` (refused: finished) | "
        "`ll list` | `ll list` per run |",
        "|---|---|---|---|---|---|",
    ]
    for m in rows:
        ratio = {k: m[k] / first[k] for k in ("status", "status_id", "resume_id")}
        per = (m["list"] - first["list"]) / max(m["runs"] - first["runs"], 1) * 1000
        lines.append(
            f"| {int(m['runs']):,} | {m['status'] * 1000:.0f} ms ({ratio['status']:.2f}x) | "
            f"{m['status_id'] * 1000:.0f} ms ({ratio['status_id']:.2f}x) | "
            f"{m['resume_id'] * 1000:.0f} ms ({ratio['resume_id']:.2f}x) | "
            f"{m['list'] * 1000:.0f} ms | " + (f"{per:.3f} ms |" if m is not first else "- |")
        )
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
