"""`ll run` side by side with another runner's command (upstream's `ll-loop run`), interleaved.

    python bench/upstream.py --upstream "/path/to/venv/bin/ll-loop run" [--steps 1000]
                             [--repeat 3] [--write-docs]

Two loops of STEPS states in a chain (`s0 -> s1 -> ... -> done`), each state a shell action:
`true`, and `cat FILE` printing 1 KiB. The file is written in the one form both runners read
(`action_type: shell`, `next:`, a terminal `done`). Each run is a fresh process in a fresh
folder, ours and theirs alternating; the figures are the minimum wall time and the minimum CPU
time (user + system of the process and the children it waited for) over the repeats. The
other runner is only run, never imported: give its command, installed apart from this one.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from _common import DOC, machine, write_section  # noqa: E402

TARGET = 0.25


def chain(steps: int, action: str) -> str:
    lines = ["name: chain", "initial: s0", f"max_iterations: {steps * 2}", "states:"]
    for i in range(steps):
        after = f"s{i + 1}" if i + 1 < steps else "done"
        lines += [
            f"  s{i}:",
            f"    action: {action}",
            "    action_type: shell",
            f"    next: {after}",
        ]
    lines += ["  done:", "    terminal: true"]
    return "\n".join(lines) + "\n"


def timed(argv: list[str], cwd: Path) -> tuple[float, float, int]:
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    return wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def measure(ours: list[str], theirs: list[str], steps: int, repeat: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    cases: list[tuple[str, Callable[[Path], str]]] = [
        ("`true`", lambda d: "'true'"),
        ("`cat FILE` (1 KiB)", lambda d: f"'cat {d / 'kib.txt'}'"),
    ]
    for label, make in cases:
        best: dict[str, list[float]] = {"ours": [9e9, 9e9], "theirs": [9e9, 9e9]}
        for _ in range(repeat):
            for who, cmd in (("ours", ours), ("theirs", theirs)):
                where = Path(tempfile.mkdtemp(prefix=".bench-upstream-", dir="."))
                try:
                    (where / "kib.txt").write_bytes(b"x" * 1023 + b"\n")
                    (where / "chain.yaml").write_text(chain(steps, make(where.resolve())))
                    wall, cpu, code = timed([*cmd, "chain.yaml"], where)
                    if code != 0:
                        raise SystemExit(f"{who}: exit code {code} ({shlex.join(cmd)})")
                finally:
                    shutil.rmtree(where)
                best[who] = [min(best[who][0], wall), min(best[who][1], cpu)]
        rows.append({"case": label, **best})
    return rows


def report(rows: list[dict[str, object]], steps: int, repeat: int) -> str:
    lines = [
        f"`python bench/upstream.py --upstream '<venv>/bin/ll-loop run' --steps {steps} "
        f"--repeat {repeat} --write-docs`: a chain of {steps} shell states and a terminal "
        f"({steps + 1} steps for `ll`), each runner a fresh process, alternating; minimum of "
        f"{repeat} runs each. Upstream is installed in a separate virtualenv from its "
        "repository snapshot and only run.",
        "",
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} after the runs.",
        "",
        "| each step runs | `ll run -q` wall | upstream wall | ratio | `ll run -q` CPU | "
        "upstream CPU | ratio | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ours, theirs = row["ours"], row["theirs"]
        assert isinstance(ours, list)
        assert isinstance(theirs, list)
        wall, cpu = ours[0] / theirs[0], ours[1] / theirs[1]
        ok = "ok" if wall <= TARGET else "MISSED"
        lines.append(
            f"| {row['case']} | {ours[0]:.2f} s | {theirs[0]:.2f} s | {wall:.2f}x | "
            f"{ours[1]:.2f} s | {theirs[1]:.2f} s | {cpu:.2f}x | <= {TARGET}x wall: {ok} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the other runner's run command")
    parser.add_argument("--ours", default=f"{sys.executable} -m little_loops run -q")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    rows = measure(shlex.split(args.ours), shlex.split(args.upstream), args.steps, args.repeat)
    body = report(rows, args.steps, args.repeat)
    print(body)
    if args.write_docs:
        write_section("Side by side with upstream", body)
        print(f"wrote the 'Side by side with upstream' section of {DOC}")


if __name__ == "__main__":
    main()
