"""`ll judge test` beyond agreement (issue 25): calibration per confidence band, a suggested
`min_confidence` and its effect on the cases, `--jobs` against the loopback server, and
`--baseline` drift checks, through the real `ll`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from llm_server import (
    LlmServer,
    Reply,
    chat,
    llm_server_fixture,  # noqa: F401  (the llm_server fixture)
)
from project import Project, Result

REPO = Path(__file__).resolve().parents[2]
LOOP = REPO / "loops" / "judge-release-notes.yaml"
CASES = REPO / "loops" / "judge-release-notes.cases.jsonl"
CASSETTE = REPO / "loops" / "judge-release-notes.cases.cassette.jsonl"


def ll(project: Project, *args: str, **env: str) -> Result:
    """`ll ARGS` in process, with no Anthropic or model settings but those in `env`."""
    unset: dict[str, str | None] = {
        name: None for name in os.environ if name.startswith(("ANTHROPIC", "LL_MODEL"))
    }
    proc = project.ll(*args, env={**unset, **env})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def shipped(project: Project, *extra: str) -> Result:
    return ll(
        project, "judge", "test", str(CASES), "--loop", str(LOOP), "--judge", "release_notes",
        "--replay", str(CASSETTE), *extra,
    )  # fmt: skip


CALIBRATION = """\
calibration (how often the judge was right at each confidence; a band runs up to its
high edge, which belongs to the next one, except 1.00)
  confidence  cases  right  accuracy  mean confidence
  0.50-0.60      1      0       0 %             0.58
  0.80-0.90      1      1     100 %             0.88
  0.90-1.00      6      6     100 %             0.93
  expected calibration error 0.138 (the mean gap between confidence and accuracy,
  weighted by cases: 0 means a confidence of 0.8 is right 8 times in 10)
"""


def test_calibration_of_the_shipped_worked_example(project: Project, tmp_path: Path) -> None:
    """By hand: confidences 0.58 (wrong), 0.88, and six from 0.90 up (all right, mean 0.932);
    ECE = (1 * 0.58 + 1 * 0.12 + 6 * 0.068) / 8 = 0.138."""
    proc = shipped(project)
    assert proc.returncode == 0, proc.stderr
    assert "\n\n" + CALIBRATION + "\ndisagreements\n" in proc.stdout
    found = json.loads(shipped(project, "--json").stdout)
    cal = found["calibration"]
    assert cal["answered"] == 8
    assert cal["ece"] == 0.1375
    assert [(b["low"], b["cases"], b["right"]) for b in cal["bands"]] == [
        (0.5, 1, 0),
        (0.8, 1, 1),
        (0.9, 6, 6),
    ]


def test_suggested_min_confidence_and_its_effect(project: Project, tmp_path: Path) -> None:
    proc = shipped(project, "--suggest-min-confidence")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith(
        "suggested min_confidence: 0.70 (agreement: trusted verdicts right, doubted ones wrong)\n"
        "  now  at 0.70: 7 confident (7 right), 1 uncertain (1 of them wrong)\n"
        "  then at 0.70: 7 confident (7 right), 1 uncertain (1 of them wrong)\n"
        "  no case changes side\n"
    )
    # A loop whose judge trusts everything (min_confidence 0.5) is told to move to 0.73,
    # midway between the wrong 0.58 and the right 0.88, and which case that moves.
    for rubric in LOOP.parent.glob("judge-release-notes.*.md"):
        (tmp_path / rubric.name).write_text(rubric.read_text(encoding="utf-8"), encoding="utf-8")
    loose = tmp_path / "loose.yaml"
    loose.write_text(
        LOOP.read_text(encoding="utf-8").replace("min_confidence: 0.7", "min_confidence: 0.5"),
        encoding="utf-8",
    )
    assert "min_confidence: 0.5" in loose.read_text(encoding="utf-8")
    proc = ll(
        project, "judge", "test", str(CASES), "--loop", str(loose), "--judge", "release_notes",
        "--replay", str(CASSETTE), "--suggest-min-confidence", "--json",
    )  # fmt: skip
    advice = json.loads(proc.stdout)["suggestion"]
    assert advice["min_confidence"] == 0.73
    assert advice["now"] == {
        "confident": 8, "confident_right": 7, "uncertain": 0, "uncertain_wrong": 0,
    }  # fmt: skip
    assert advice["then"] == {
        "confident": 7, "confident_right": 7, "uncertain": 1, "uncertain_wrong": 1,
    }  # fmt: skip
    assert [(c["line"], c["becomes"]) for c in advice["changed"]] == [(8, "uncertain")]
    # A success precision nobody can reach says so; a bad value is one line, exit 2.
    assert "suggested min_confidence: 0.73 (precision of success at least 100 %)" in ll(
        project, "judge", "test", str(CASES), "--loop", str(loose), "--judge", "release_notes",
        "--replay", str(CASSETTE), "--suggest-min-confidence", "100%",
    ).stdout  # fmt: skip
    bad = shipped(project, "--suggest-min-confidence", "lots")
    assert bad.returncode == 2
    assert bad.stderr.strip().endswith(
        "--suggest-min-confidence: 'lots' is not a number; write a fraction (0.9) or a "
        "percentage (90%)"
    )


def test_baseline_drift_fails_with_exit_3(project: Project, tmp_path: Path) -> None:
    stored = tmp_path / "baseline.json"
    stored.write_text(shipped(project, "--json").stdout, encoding="utf-8")
    same = shipped(project, "--baseline", str(stored))
    assert same.returncode == 0, same.stderr
    assert "  accuracy  0.875 (was 0.875)  ok\n" in same.stdout
    better = json.loads(stored.read_text(encoding="utf-8"))
    better.update(accuracy=1.0, kappa=1.0, calibration={**better["calibration"], "ece": 0.05})
    stored.write_text(json.dumps(better), encoding="utf-8")
    worse = shipped(project, "--baseline", str(stored))
    assert worse.returncode == 3
    assert worse.stderr == (
        f"ll: accuracy, kappa, ece got worse than in {stored} by more than 0.05\n"
    )
    assert "  kappa     0.750 (was 1.000)  WORSE\n" in worse.stdout
    assert "  ece       0.138 (was 0.050)  WORSE\n" in worse.stdout
    assert shipped(project, "--baseline", str(stored), "--margin", "0.3").returncode == 0
    stored.write_text("not json", encoding="utf-8")
    bad = shipped(project, "--baseline", str(stored))
    assert bad.returncode == 2
    assert "not a stored judge test result (JSON)" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # it waits out 400 answers of 100 ms each (20 s serial) by design
def test_jobs_judges_200_cases_in_a_quarter_of_the_serial_time(
    project: Project, tmp_path: Path, llm_server: LlmServer
) -> None:
    """Each answer takes 100 ms, as a fast API would. --jobs 8 asks 8 at once (never more)
    and judges the 200 cases in at most a quarter of the serial time; same verdicts."""
    answer = chat(json.dumps({"reason": "fine", "verdict": "success", "confidence": 0.9}))
    llm_server.script(then=Reply(delay=0.1, body=answer.body))
    loop = tmp_path / "loop.yaml"
    loop.write_text(
        "name: j\ninitial: check\njudges:\n"
        "  quick: {model: 'openai://gpt-4o-mini', prompt: 'Did it pass?'}\n"
        "states:\n  check:\n    action: echo ok\n    evaluate: {type: llm_structured, "
        "judge: quick}\n    route: {_: done}\n  done: {terminal: true}\n",
        encoding="utf-8",
    )
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        "".join(json.dumps({"output": f"run {i}: ok", "verdict": "success"}) + "\n"
                for i in range(200)),
        encoding="utf-8",
    )  # fmt: skip
    env = {"OPENAI_BASE_URL": llm_server.url + "/v1", "OPENAI_API_KEY": "k"}

    def measure(*extra: str) -> dict[str, object]:
        proc = ll(
            project, "judge", "test", str(cases), "--loop", str(loop), "--judge", "quick",
            "--json", *extra, **env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        found: dict[str, object] = json.loads(proc.stdout)
        return found

    started = time.monotonic()
    serial = measure()
    assert llm_server.max_in_flight == 1
    parallel = measure("--jobs", "8")
    assert llm_server.max_in_flight == 8
    assert serial["agreed"] == parallel["agreed"] == 200
    assert len(llm_server.requests) == 400
    assert isinstance(serial["seconds"], float)
    assert isinstance(parallel["seconds"], float)
    assert parallel["seconds"] <= serial["seconds"] / 4, (serial["seconds"], parallel["seconds"])
    assert time.monotonic() - started < 200
