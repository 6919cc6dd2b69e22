"""A plain command run by `ll` itself against the same command run through /bin/sh.

    python bench/plain.py [--steps 300] [--repeat 7] [--write-docs]

Two one-state loops run `cat FILE` (1 KiB) STEPS times: `cat FILE`, which `ll` execs itself
where /bin/sh is dash (docs/loop-reference.md, "Plain commands run without the shell"), and
`cat FILE;`, which the `;` sends through `/bin/sh -c` as before. Each run is `ll run -q` in a
fresh process, the two alternating; the figures are per step, wall and CPU (the process and the
children it waited for), the median of the repeats with a 2-step run's time taken out, and the
least of them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import upstream  # noqa: E402 - its timed(): one process, waited for with its usage
from _common import machine, write_section  # noqa: E402

LOOP = """\
name: plain
initial: say
max_iterations: {steps}
on_error: done
states:
  say:
    action: "{command}"
    on_success: $current
    on_failure: done
  done:
    terminal: true
"""


def timed(where: Path, steps: int, command: str) -> tuple[float, float]:
    """Wall and CPU seconds of `ll run -q` of `command` `steps` times, in a fresh process."""
    (where / "loop.yaml").write_text(LOOP.format(steps=steps, command=command))
    argv = [sys.executable, "-m", "little_loops", "run", "-q", "loop.yaml"]
    wall, cpu, code = upstream.timed(argv, where)
    assert code == 4, f"{command!r}: exit {code} (max_iterations is 4)"
    return wall, cpu


def measure(steps: int, repeat: int) -> dict[str, list[tuple[float, float]]]:
    got: dict[str, list[tuple[float, float]]] = {"plain": [], "shell": []}
    for turn in range(repeat):
        where = Path(tempfile.mkdtemp(prefix=".bench-plain-"))
        try:
            (where / "one.txt").write_bytes((b"x" * 79 + b"\n") * 12 + b"x" * 63 + b"\n")
            kinds = ("plain", "shell") if turn % 2 == 0 else ("shell", "plain")
            for kind in kinds:
                command = "cat one.txt" if kind == "plain" else "cat one.txt;"
                shutil.rmtree(where / ".loops", ignore_errors=True)
                short = timed(where, 2, command)
                shutil.rmtree(where / ".loops", ignore_errors=True)
                long = timed(where, steps, command)
                got[kind].append(
                    ((long[0] - short[0]) / (steps - 2), (long[1] - short[1]) / (steps - 2))
                )
        finally:
            shutil.rmtree(where, ignore_errors=True)
    return got


def report(got: dict[str, list[tuple[float, float]]], steps: int, repeat: int) -> str:
    lines = [
        f"`python bench/plain.py --steps {steps} --repeat {repeat}`: `ll run -q` of a loop "
        f"running `cat FILE` (1 KiB) {steps} times, exec'd by `ll` (`cat one.txt`) and through "
        "`/bin/sh -c` (`cat one.txt;`), alternating; per step, a 2-step run taken out, median "
        "(least) of the repeats.",
        "",
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.",
        "",
        "| the step's command | wall per step | CPU per step |",
        "|---|---|---|",
    ]
    for kind, label in (("shell", "`cat one.txt;` (sh -c)"), ("plain", "`cat one.txt` (plain)")):
        walls = [w * 1000 for w, _ in got[kind]]
        cpus = [c * 1000 for _, c in got[kind]]
        lines.append(
            f"| {label} | {statistics.median(walls):.2f} ms ({min(walls):.2f}) | "
            f"{statistics.median(cpus):.2f} ms ({min(cpus):.2f}) |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    body = report(measure(args.steps, args.repeat), args.steps, args.repeat)
    print(body)
    if args.write_docs:
        write_section("Plain commands", body)


if __name__ == "__main__":
    main()
