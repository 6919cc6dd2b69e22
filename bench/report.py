"""Size and render time of `ll report` for big runs: one of 20,000 steps, a fork of 1,000
branches, and the shipped fork and sub-loop example.

    python bench/report.py [--steps 20000] [--branches 1000] [--write-docs]

The big runs are written as a run directory (events.jsonl, state.json) the way `ll run` writes
them, without running 20,000 actions; the report is made by the real `ll report` (a fresh
process), then loaded in headless Chromium (`chromium`, when installed), which says how long
the page took from navigation start to the end of its script (`data-ll-render-ms`).
`--write-docs` replaces the "## The run report" section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from _common import machine, write_section  # noqa: E402

T0 = 1_764_000_000.0  # 2025-11-24, the time the generated runs begin


def _ts(seconds: float) -> str:
    whole = int(seconds)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return f"{stamp}.{int((seconds - whole) * 1000):03d}Z"


def _line(event: dict[str, Any]) -> str:
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"


def _state(run_id: str, loop_file: str, steps: int, outcome: str, code: int) -> dict[str, Any]:
    return {
        "version": 2,
        "run_id": run_id,
        "loop_file": loop_file,
        "loop_sha256": "0" * 64,
        "started_at": _ts(T0),
        "context": {},
        "max_iterations": steps + 10,
        "pid": 1,
        "options": {},
        "current": "done",
        "status": "finished",
        "step": steps,
        "elapsed_ms": steps * 100,
        "cost_usd": 0.0,
        "captured": {},
        "prev": {},
        "outcome": outcome,
        "exit_code": code,
    }


def _steps(run_id: str, count: int, t: float, *, judge_every: int = 50) -> Iterator[str]:
    """`count` steps alternating check (fails one time in 10) and fix; judged now and then."""
    base = {"run_id": run_id}
    for step in range(1, count + 1):
        state = "check" if step % 2 else "fix"
        failed = state == "check" and step % 10 == 1
        judged = step % judge_every == 0
        yield _line({"event": "state_enter", "ts": _ts(t), **base, "step": step, "state": state})
        where = {**base, "step": step, "state": state}
        action = f"make {state} TARGET=src/module_{step % 37}.py"
        yield _line(
            {
                "event": "action_start",
                "ts": _ts(t),
                **where,
                "action": action,
                "action_type": "shell",
            }
        )
        t += 0.08
        yield _line(
            {
                "event": "action_complete",
                "ts": _ts(t),
                **where,
                "exit_code": int(failed),
                "duration_ms": 80,
                "timed_out": False,
                "output_bytes": 300,
            }
        )
        if judged:
            yield _line(
                {
                    "event": "judge_request",
                    "ts": _ts(t),
                    **where,
                    "model": "claude-haiku",
                    "provider": "anthropic",
                    "temperature": 0,
                    "max_tokens": 512,
                    "system": "You judge whether the fix is complete. " * 10,
                    "user": "<output>\n" + "line of output\n" * 40 + "</output>",
                    "schema": {
                        "type": "object",
                        "properties": {"verdict": {"enum": ["success", "failure"]}},
                    },
                    "examples": 0,
                    "est_input_tokens": 400,
                    "cached": False,
                }
            )
            details = {
                "confidence": 0.9,
                "model": "claude-haiku",
                "reason": "looks complete",
                "usage": {"input_tokens": 400, "output_tokens": 30},
                "cost_usd": 0.0004,
            }
            yield _line(
                {
                    "event": "evaluate",
                    "ts": _ts(t),
                    **where,
                    "type": "llm_structured",
                    "verdict": "success",
                    "details": details,
                }
            )
        elif failed:
            tail = [f"src/module_{step % 37}.py:{i}: E501 line too long" for i in range(8)]
            yield _line(
                {
                    "event": "evaluate",
                    "ts": _ts(t),
                    **where,
                    "type": "exit_code",
                    "verdict": "failure",
                    "details": {"exit_code": 1},
                    "reason": "exit code 1",
                    "tail": tail,
                }
            )
        else:
            yield _line(
                {
                    "event": "evaluate",
                    "ts": _ts(t),
                    **where,
                    "type": "exit_code",
                    "verdict": "success",
                    "details": {"exit_code": 0},
                }
            )
        to = "fix" if state == "check" else "check"
        yield _line(
            {
                "event": "route",
                "ts": _ts(t),
                **where,
                "from": state,
                "to": to,
                "verdict": "failure" if failed else "success",
                "via": "on_failure" if failed else "next",
            }
        )
        t += 0.02


def _make(root: Path, run_id: str, lines: Iterator[str], state: dict[str, Any]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "steps").mkdir(exist_ok=True)
    with (root / "events.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(lines)
    (root / "state.json").write_text(json.dumps(state), encoding="utf-8")


def long_run(where: Path, steps: int) -> Path:
    """A run of `steps` steps (check, fix, check, ...) that ends at max_iterations."""
    run_id = "20251124-160000-long-0001"
    root = where / ".loops" / "runs" / run_id
    end = T0 + steps * 0.1

    def lines() -> Iterator[str]:
        yield _line(
            {
                "event": "loop_start",
                "ts": _ts(T0),
                "run_id": run_id,
                "loop": "long",
                "file": "long.yaml",
                "max_iterations": steps,
                "resumed": False,
            }
        )
        yield from _steps(run_id, steps, T0)
        yield _line(
            {
                "event": "loop_complete",
                "ts": _ts(end),
                "run_id": run_id,
                "final_state": "check",
                "outcome": "max_iterations",
                "exit_code": 4,
                "steps": steps,
                "duration_ms": int(steps * 100),
                "error": None,
            }
        )

    _make(
        root, run_id, lines(), _state(run_id, str(where / "long.yaml"), steps, "max_iterations", 4)
    )
    return root


def wide_fork(where: Path, branches: int, steps_each: int = 3) -> Path:
    """A run whose first step is a fork of `branches` child runs of `steps_each` steps, a
    twentieth of them failing, 8 at a time."""
    run_id = "20251124-160000-wide-0001"
    root = where / ".loops" / "runs" / run_id
    base = {"run_id": run_id}
    fork = {**base, "step": 1, "state": "fan"}
    lines = [
        _line(
            {
                "event": "loop_start",
                "ts": _ts(T0),
                **base,
                "loop": "wide",
                "file": "wide.yaml",
                "max_iterations": 50,
                "resumed": False,
            }
        ),
        _line({"event": "state_enter", "ts": _ts(T0), **fork}),
    ]
    failed = 0
    for index in range(1, branches + 1):
        key = f"b{index}"
        child_id = f"{run_id}/0001-fan/{key}"
        start = T0 + ((index - 1) // 8) * steps_each * 0.1
        rel = f"sub/0001-fan/{key}"
        lines.append(
            _line(
                {
                    "event": "child_start",
                    "ts": _ts(start),
                    **fork,
                    "kind": "branch",
                    "file": "child.yaml",
                    "child_run_id": child_id,
                    "dir": rel,
                    "attempt": 1,
                    "with": {},
                    "resumed": False,
                    "branch": key,
                    "index": index,
                    "item": key,
                    "fork": "for_each",
                    "total": branches,
                }
            )
        )
        fails = index % 20 == 0
        failed += fails
        outcome, code = ("failure", 1) if fails else ("success", 0)
        end = start + steps_each * 0.1

        def child_lines(
            child_id: str = child_id,
            start: float = start,
            end: float = end,
            outcome: str = outcome,
            code: int = code,
        ) -> Iterator[str]:
            yield _line(
                {
                    "event": "loop_start",
                    "ts": _ts(start),
                    "run_id": child_id,
                    "loop": "child",
                    "file": "child.yaml",
                    "max_iterations": 50,
                    "resumed": False,
                }
            )
            yield from _steps(child_id, steps_each, start)
            yield _line(
                {
                    "event": "loop_complete",
                    "ts": _ts(end),
                    "run_id": child_id,
                    "final_state": "check",
                    "outcome": outcome,
                    "exit_code": code,
                    "steps": steps_each,
                    "duration_ms": int(steps_each * 100),
                    "error": None,
                }
            )

        _make(
            root / rel,
            child_id,
            child_lines(),
            _state(child_id, "child.yaml", steps_each, outcome, code),
        )
        lines.append(
            _line(
                {
                    "event": "child_complete",
                    "ts": _ts(end),
                    **fork,
                    "child_run_id": child_id,
                    "final_state": "check",
                    "outcome": outcome,
                    "exit_code": code,
                    "verdict": outcome,
                    "steps": steps_each,
                    "duration_ms": int(steps_each * 100),
                    "outputs": {},
                    "branch": key,
                }
            )
        )
    end = T0 + (branches // 8 + 1) * steps_each * 0.1
    lines += [
        _line(
            {
                "event": "evaluate",
                "ts": _ts(end),
                **fork,
                "type": "join",
                "verdict": "failure",
                "details": {
                    "policy": "all",
                    "total": branches,
                    "succeeded": branches - failed,
                    "failed": failed,
                    "cancelled": 0,
                },
                "reason": f"join all: {branches - failed} of {branches} succeeded",
            }
        ),
        _line(
            {
                "event": "route",
                "ts": _ts(end),
                **fork,
                "from": "fan",
                "to": "done",
                "verdict": "failure",
                "via": "on_failure",
            }
        ),
        _line({"event": "state_enter", "ts": _ts(end), **base, "step": 2, "state": "done"}),
        _line(
            {
                "event": "loop_complete",
                "ts": _ts(end),
                **base,
                "final_state": "done",
                "outcome": "failure",
                "exit_code": 1,
                "steps": 2,
                "duration_ms": int((end - T0) * 1000),
                "error": None,
            }
        ),
    ]
    _make(root, run_id, iter(lines), _state(run_id, str(where / "wide.yaml"), 2, "failure", 1))
    return root


def many_runs(where: Path, count: int) -> Path:
    """`count` finished runs of one small loop under `where/.loops/runs/` (one second apart)."""
    runs = where / ".loops" / "runs"
    for i in range(count):
        t = T0 + i
        run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime(t)) + f"-small-{i % 65536:04x}"
        root = runs / run_id
        root.mkdir(parents=True)
        start = {
            "event": "loop_start",
            "ts": _ts(t),
            "run_id": run_id,
            "loop": "small",
            "file": "small.yaml",
            "max_iterations": 5,
            "resumed": False,
        }
        end = {
            "event": "loop_complete",
            "ts": _ts(t + 0.1),
            "run_id": run_id,
            "final_state": "done",
            "outcome": "success",
            "exit_code": 0,
            "steps": 1,
            "duration_ms": 100,
            "error": None,
        }
        (root / "events.jsonl").write_text(_line(start) + _line(end), encoding="utf-8")
        state = _state(run_id, str(where / "small.yaml"), 1, "success", 0)
        state["started_at"] = _ts(t)
        (root / "state.json").write_text(json.dumps(state), encoding="utf-8")
    return where


def timed(*args: str, cwd: Path) -> float:
    """Seconds a fresh `ll` process takes for `args`."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "little_loops", *args], check=True, capture_output=True, cwd=cwd
    )
    return time.perf_counter() - started


def report(run: Path, out: Path) -> tuple[float, int]:
    """Seconds `ll report` took (a fresh process) and the page's size in bytes."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "little_loops", "report", str(run), "-o", str(out)],
        check=True,
        capture_output=True,
        cwd=out.parent,
    )
    return time.perf_counter() - started, out.stat().st_size


def render_ms(page: Path) -> int | None:
    """The page's own time to interactive in headless Chromium (None: no chromium)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        return None
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                f"--user-data-dir={profile}",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
    found = re.search(r'data-ll-render-ms="(\d+)"', done.stdout)
    if found is None or "data-ll-errors" in done.stdout[:2000]:
        raise SystemExit(f"the page did not render: {done.stdout[:300]} {done.stderr[-500:]}")
    return int(found.group(1))


def shipped_example(where: Path) -> Path:
    """loops/deploy-tree.yaml run for real, its report written by `--report`."""
    out = where / "deploy-tree.html"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "little_loops",
            "run",
            str(REPO / "loops" / "deploy-tree.yaml"),
            "--quiet",
            "--report",
            str(out),
        ],
        cwd=where,
        capture_output=True,
        check=False,
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--branches", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=10_000, help="runs for ll list and prune")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        cases = [
            (f"a run of {args.steps:,} steps", long_run(where / "long", args.steps)),
            (
                f"a fork of {args.branches:,} branches (3 steps each)",
                wide_fork(where / "wide", args.branches),
            ),
        ]
        for name, run in cases:
            out = where / f"{run.name}.html"
            took, size = report(run, out)
            ms = render_ms(out)
            rows.append((name, took, size, ms))
            shown = f"{ms} ms" if ms is not None else "no chromium"
            print(f"{name}: ll report {took:.2f} s, {size / 1e6:.2f} MB, render {shown}")
        example = shipped_example(where)
        ms = render_ms(example)
        rows.append(("the shipped loops/deploy-tree.yaml", 0.0, example.stat().st_size, ms))
        print(f"loops/deploy-tree.yaml: {example.stat().st_size / 1e3:.0f} KB, render {ms} ms")
        lots = many_runs(where / "many", args.runs)
        listing = timed("list", cwd=lots)
        dry = timed("prune", "--keep", "100", "--dry-run", "-q", cwd=lots)
        pruned = timed("prune", "--keep", "100", "-q", cwd=lots)
        after = timed("list", cwd=lots)
        print(
            f"{args.runs:,} runs: ll list {listing:.2f} s, ll prune --keep 100 --dry-run "
            f"{dry:.2f} s, ll prune --keep 100 {pruned:.2f} s, then ll list {after:.2f} s"
        )
    load = os.getloadavg()[0]
    print(f"load average {load:.1f}")
    if args.write_docs:
        table = "\n".join(
            f"| {name} | {f'{took:.2f} s' if took else '(ll run --report)'} | "
            f"{size / 1e6:.2f} MB | {f'{ms} ms' if ms is not None else '-'} |"
            for name, took, size, ms in rows
        )
        body = (
            "`python bench/report.py` makes the report of big runs with the real `ll report` "
            "and loads each page in headless Chromium; render is the page's own time from "
            "navigation start to the end of its script (`data-ll-render-ms`). Targets: under "
            "5 MB and under 2 s.\n\n"
            "| run | ll report | size | render in Chromium |\n|---|---|---|---|\n"
            f"{table}\n\nWith {args.runs:,} finished runs in `.loops/runs/`: `ll list` "
            f"{listing:.2f} s, `ll prune --keep 100 --dry-run` {dry:.2f} s, `ll prune --keep "
            f"100` {pruned:.2f} s (removing {args.runs - 100:,} runs), then `ll list` {after:.2f} "
            f"s.\n\n{machine()}; load average {load:.1f} while measuring."
        )
        write_section("The run report", body)


if __name__ == "__main__":
    main()
