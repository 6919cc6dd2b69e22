"""The shipped examples and the README's Quick start work as promised, with no API key."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from project import Project

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "loops" / "judge-release-notes.yaml"
CASSETTE = EXAMPLE.with_suffix(".cassette.jsonl")
sys.path.insert(0, str(REPO / "scripts"))


def readme_command(marker: str) -> str:
    text = (REPO / "README.md").read_text()
    match = re.search(rf"<!-- {marker} -->\s*```sh\n(.+?)\n```", text, re.S)
    assert match, f"README.md has no ```sh block after <!-- {marker} -->"
    return match.group(1).strip()


def test_quick_start_has_exactly_two_commands() -> None:
    text = (REPO / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.+?)\n```", quick, re.S)
    assert len(blocks) == 2
    assert all("\n" not in block.strip() for block in blocks)
    ci = (REPO / ".ci" / "run").read_text()
    assert "test-command" in ci  # CI runs the README's own test command


def test_readme_example_runs_a_judged_loop_offline(tmp_path: Path) -> None:
    command = readme_command("example-command")
    ll_part = command.split("&&")[-1].strip()
    assert ll_part.startswith(".venv/bin/ll run "), ll_part
    # Paths in the command are relative to the clone; run elsewhere so .loops/ lands in tmp.
    args = [str(REPO / a) if a.startswith("loops/") else a for a in ll_part.split()[1:]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_API")}
    proc = subprocess.run(
        [sys.executable, "-m", "little_loops", *args, "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    judged = [e for e in events if e["event"] == "evaluate" and e["type"] == "llm_structured"]
    assert [e["verdict"] for e in judged] == ["failure", "success"]
    assert all(e["details"]["replayed"] for e in judged)
    routes = [(e["from"], e["to"]) for e in events if e["event"] == "route"]
    assert routes == [("draft", "draft"), ("draft", "publish")]
    assert events[-1]["cost_usd"] == 0


def test_shipped_cassette_matches_the_example(project: Project, tmp_path: Path) -> None:
    """Fails when the loop or the judge's input format changed since the cassette was made."""
    from record_example_cassette import record

    fresh = tmp_path / "fresh.jsonl"
    # `ll run --record` in this process (the SDK imported once a worker, not once a test)
    proc = record(fresh, lambda args, cwd, env: project.ll(*args, cwd=cwd, env=env))
    assert proc.returncode == 0, proc.stdout + proc.stderr

    def keys(path: Path) -> list[str]:
        return [json.loads(line)["key"] for line in path.read_text().splitlines()]

    assert keys(fresh) == keys(CASSETTE), (
        "the example's cassette is stale: run python scripts/record_example_cassette.py"
    )
