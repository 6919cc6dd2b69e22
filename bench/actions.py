"""Benchmark shell actions against their floors, each measurement in a fresh Python process.

    python bench/actions.py [--repeat N] [--write-docs]

(a) 200 MB on one line through run_shell with a log file: peak RSS <= 64 MiB, wall <= 3x the
    bare command writing to /dev/null.
(b) 20 MB in 100-byte lines through run_shell with a log file: <= 2 s.
(c) `printf x; sleep 20` with timeout 2: the step ends within 2.5 s and no `sleep` survives.

`--write-docs` replaces the "## Actions" section of docs/performance.md (and only that section).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from _common import machine, write_section  # noqa: E402

ONE_LINE = "head -c 200000000 /dev/zero | tr '\\0' x"
LINES = "yes \"$(printf '%099d' 0)\" | head -c 20000000"
TIMEOUT_CMD = "printf x; sleep 20"
TAG = "LL_BENCH_TAG"


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _survivors(tag: str) -> int:
    """Processes, other than zombies, whose environment carries the tag."""
    needle = f"{TAG}={tag}".encode()
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
            state = Path(f"/proc/{name}/stat").read_bytes().rpartition(b")")[2].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state not in (b"Z", b"X"):
            count += 1
    return count


def child(kind: str) -> dict[str, Any]:
    """One measurement, in this (fresh) process."""
    from little_loops.actions import run_shell

    with tempfile.TemporaryDirectory(prefix="ll-bench-") as tmp:
        cwd = Path(tmp)
        log = cwd / "step.log"
        start = time.perf_counter()
        if kind == "bare-one-line":
            subprocess.run(["sh", "-c", f"{ONE_LINE} > /dev/null"], check=True)
        elif kind == "ll-one-line":
            result = run_shell(ONE_LINE, cwd=cwd, log_path=log)
            assert result.output_bytes == 200_000_000, result.output_bytes
        elif kind == "bare-lines":
            subprocess.run(["sh", "-c", f"{LINES} > /dev/null"], check=True)
        elif kind == "ll-lines":
            result = run_shell(LINES, cwd=cwd, log_path=log)
            assert result.output_bytes == 20_000_000, result.output_bytes
        elif kind == "ll-timeout":
            tag = uuid.uuid4().hex
            env = {**os.environ, TAG: tag}
            result = run_shell(TIMEOUT_CMD, cwd=cwd, env=env, timeout=2, log_path=log)
            wall = time.perf_counter() - start
            assert result.timed_out
            assert result.output == "x"
            return {"wall_s": wall, "rss_mib": _maxrss_mib(), "survivors": _survivors(tag)}
        else:
            raise SystemExit(f"unknown kind {kind!r}")
        wall = time.perf_counter() - start
    return {"wall_s": wall, "rss_mib": _maxrss_mib()}


def _once(kind: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    keys = runs[0].keys()
    return {
        **{k: statistics.median(r[k] for r in runs) for k in keys},
        **{f"max_{k}": max(r[k] for r in runs) for k in keys},
    }


def measure(kind: str, repeat: int) -> dict[str, float]:
    return _summary([_once(kind) for _ in range(repeat)])


def measure_pair(floor: str, kind: str, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    """Alternate floor and measured runs, so that load from elsewhere hits both alike;
    `ratio` is the median of the per-pair wall ratios."""
    floors, runs = [], []
    for _ in range(repeat):
        floors.append(_once(floor))
        runs.append(_once(kind))
    measured = _summary(runs)
    measured["ratio"] = statistics.median(
        r["wall_s"] / f["wall_s"] for f, r in zip(floors, runs, strict=True)
    )
    return _summary(floors), measured


def report(repeat: int) -> tuple[list[tuple[str, str, str, str, str]], bool]:
    a_bare, a_ll = measure_pair("bare-one-line", "ll-one-line", repeat)
    b_bare, b_ll = measure_pair("bare-lines", "ll-lines", repeat)
    c_ll = measure("ll-timeout", max(1, min(repeat, 3)))

    ratio = a_ll["ratio"]
    checks = [
        a_ll["max_rss_mib"] <= 64,
        ratio <= 3,
        b_ll["wall_s"] <= 2,
        c_ll["max_wall_s"] <= 2.5,
        c_ll["max_survivors"] == 0,
    ]
    rows = [
        (
            "(a) 200 MB, one line, log file: wall",
            f"{a_ll['wall_s']:.2f} s",
            f"{a_bare['wall_s']:.2f} s (bare, > /dev/null)",
            f"{ratio:.2f}x, median of pairs (<= 3x)",
            _ok(checks[1]),
        ),
        (
            "(a) same: peak RSS of the measuring process",
            f"{a_ll['rss_mib']:.1f} MiB (max {a_ll['max_rss_mib']:.1f})",
            f"{a_bare['rss_mib']:.1f} MiB (bare run)",
            "<= 64 MiB",
            _ok(checks[0]),
        ),
        (
            "(b) 20 MB in 100-byte lines, log file",
            f"{b_ll['wall_s']:.2f} s",
            f"{b_bare['wall_s']:.2f} s (bare, > /dev/null)",
            "<= 2 s",
            _ok(checks[2]),
        ),
        (
            "(c) `printf x; sleep 20`, timeout 2",
            f"{c_ll['wall_s']:.2f} s (max {c_ll['max_wall_s']:.2f})",
            "2.00 s (the timeout)",
            f"<= 2.5 s; {int(c_ll['max_survivors'])} survivors",
            _ok(checks[3] and checks[4]),
        ),
    ]
    return rows, all(checks)


def _ok(flag: bool) -> str:
    return "ok" if flag else "MISSED"


def table(rows: list[tuple[str, str, str, str, str]]) -> str:
    head = ("case", "run_shell", "floor", "target", "")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per case (median)")
    parser.add_argument("--write-docs", action="store_true", help="update docs/performance.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    rows, ok = report(args.repeat)
    out = table(rows)
    print(machine())
    print(out)
    if args.write_docs:
        body = (
            f"`python bench/actions.py --repeat {args.repeat} --write-docs`: each figure is the "
            "median of that many runs, floor and measured runs alternating in the same "
            "invocation, each in a fresh Python process (peak RSS is that process's "
            "`ru_maxrss`; the action itself runs in its own child).\n\n"
            f"Machine: {machine()}.\n\n{out}\n\n"
            "Output is read as raw 64 KiB chunks (selectors on non-blocking pipes), appended to "
            "the step log and kept as a 1 MiB tail per stream, so memory does not grow with "
            "output size; the 200 MB case writes its 200 MB log to a temporary directory. "
            "Survivors in (c) are processes (zombies aside) whose environment carries a tag "
            "the benchmark set, found in /proc after the step returned. On a machine shared with "
            "other jobs the (a) wall ratio moves between runs (1.8x to 2.4x seen here).\n"
        )
        write_section("Actions", body)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
