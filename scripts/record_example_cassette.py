"""Write the judge cassettes of loops/judge-release-notes.yaml, so the example runs offline:
the run's (`ll run --record`) and the labelled cases' (`ll judge test --record`).

Run: python scripts/record_example_cassette.py [OUT [CASES_OUT]]

The answers are scripted here (this is a demo, not a real model's judgement): the judge
calls the thin first draft a failure and the second draft a success. A local server on
127.0.0.1 speaks the Messages API, the real `ll run --record` asks it, and the exchanges
land in the cassette. Re-run this after changing the judge's input format or the loop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from llm_server import LlmServer, message  # noqa: E402

LOOP = REPO / "loops" / "judge-release-notes.yaml"
CASSETTE = REPO / "loops" / "judge-release-notes.cassette.jsonl"
CASES = REPO / "loops" / "judge-release-notes.cases.jsonl"
CASES_CASSETTE = REPO / "loops" / "judge-release-notes.cases.cassette.jsonl"

ANSWERS = [
    {
        "verdict": "failure",
        "confidence": 0.93,
        "reason": "The notes say 'various improvements' but name no specific fix or feature.",
    },
    {
        "verdict": "success",
        "confidence": 0.95,
        "reason": "They name a fix (crash on empty input, #41) and a feature (--json, #57).",
    },
]


# The scripted judge on the labelled cases, in their order: it agrees on 7 of 8 and is
# fooled by the vague bullets of the last case ("Fixed several issues", "New features").
CASE_ANSWERS = [
    ("failure", 0.95, "'Various improvements' names no specific fix or feature."),
    ("success", 0.94, "It names a fix (empty input crash, #41) and a feature (--json, #57)."),
    ("failure", 0.9, "It names two features but no fix."),
    ("failure", 0.88, "It names a fix (#90) but no new feature."),
    ("success", 0.93, "It names a fix (#95) and a feature (--since, #97)."),
    ("failure", 0.97, "Boilerplate: it names nothing specific."),
    ("success", 0.91, "It names a fix (#102) and a feature (plugins, #110)."),
    ("success", 0.58, "It lists a fix and new features."),
]


class Ran(Protocol):
    """What an `ll` command did."""

    @property
    def returncode(self) -> int: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...


# `ll ARGS` in a directory with some environment variables set (None: taken out).
Runner = Callable[[list[str], Path, Mapping[str, str | None]], Ran]


def ll_process(args: list[str], cwd: Path, env: Mapping[str, str | None]) -> Ran:
    """`ll ARGS` in a process of its own."""
    full = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-m", "little_loops", *args],
        cwd=cwd,
        env={name: value for name, value in full.items() if value is not None},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def record(out: Path, ll: Runner = ll_process) -> Ran:
    """Run the example against the scripted server with --record OUT; returns the run."""
    if out.exists():
        out.unlink()
    with LlmServer() as server, tempfile.TemporaryDirectory() as work:
        server.script(
            *(
                message(a, model="claude-sonnet-5-5", input_tokens=420, output_tokens=60)
                for a in ANSWERS
            )
        )
        env = {
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "demo-key-for-the-local-server",
            "LL_MODEL": None,
        }
        args = ["run", str(LOOP), "--record", str(out), "--no-cache", "--quiet"]
        return ll(args, Path(work), env)


def record_cases(out: Path) -> subprocess.CompletedProcess[str]:
    """`ll judge test` of the cases against the scripted server with --record OUT."""
    if out.exists():
        out.unlink()
    with LlmServer() as server, tempfile.TemporaryDirectory() as work:
        server.script(
            *(
                message(
                    {"reason": reason, "verdict": verdict, "confidence": confidence},
                    model="claude-sonnet-5-5",
                    input_tokens=900,
                    output_tokens=45,
                )
                for verdict, confidence, reason in CASE_ANSWERS
            )
        )
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "demo-key-for-the-local-server",
        }
        env.pop("LL_MODEL", None)
        return subprocess.run(
            [sys.executable, "-m", "little_loops", "judge", "test", str(CASES), "--loop",
             str(LOOP), "--judge", "release_notes", "--record", str(out)],
            cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else CASSETTE
    cases_out = Path(sys.argv[2]) if len(sys.argv) > 2 else CASES_CASSETTE
    for made, proc in ((out, record(out)), (cases_out, record_cases(cases_out))):
        sys.stdout.write(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            sys.exit(f"recording failed with exit code {proc.returncode}")
        print(f"wrote {made}")


if __name__ == "__main__":
    main()
