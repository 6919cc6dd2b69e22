"""`ll run`'s fixed CPU cost: a two-state loop (one `true`, one terminal), each run a fresh process.

    python bench/run_cost.py [--repeat 15] [--write-docs]

The figure is the minimum CPU time (user + system of the `ll` process and the children it
waited for, from `wait4`) over the repeats: the least moved by other work on a shared machine.
Beside it: `python -c pass` (the interpreter alone) and the import of `little_loops.record.events`
alone (the event classes). Run it with the Python of a regular install for users' figures; an
editable install adds its path finder to every process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from _common import DOC, machine, write_section  # noqa: E402

TARGET_S = 0.1
LOOP = "name: two\ninitial: a\nstates:\n  a: {action: 'true', next: b}\n  b: {terminal: true}\n"


def cpu(argv: list[str], cwd: Path, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, _, usage = os.wait4(proc.pid, 0)
        best = min(best, usage.ru_utime + usage.ru_stime)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix=".bench-run-cost-", dir=".") as tmp:
        where = Path(tmp)
        (where / "two.yaml").write_text(LOOP)
        rows = [
            ("`python -c pass`", cpu([py, "-c", "pass"], where, args.repeat)),
            (
                "`python -c 'import little_loops.record.events'`",
                cpu([py, "-c", "import little_loops.record.events"], where, args.repeat),
            ),
            (
                "`ll run -q two.yaml`",
                cpu([py, "-m", "little_loops", "run", "-q", "two.yaml"], where, args.repeat),
            ),
        ]
    floor = rows[0][1]
    lines = [
        f"`python bench/run_cost.py --repeat {args.repeat} --write-docs`: minimum CPU time "
        f"(user + system, `wait4`) of {args.repeat} fresh processes each.",
        "",
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.",
        "",
        "| command | CPU | minus `python -c pass` | target |",
        "|---|---|---|---|",
    ]
    for label, value in rows:
        target = ""
        if label.startswith("`ll run"):
            target = f"<= {TARGET_S} s: {'ok' if value <= TARGET_S else 'MISSED'}"
        lines.append(
            f"| {label} | {value * 1000:.0f} ms | +{(value - floor) * 1000:.0f} ms | {target} |"
        )
    body = "\n".join(lines) + "\n"
    print(body)
    if args.write_docs:
        write_section("Start-up of ll run", body)
        print(f"wrote the 'Start-up of ll run' section of {DOC}")


if __name__ == "__main__":
    main()
