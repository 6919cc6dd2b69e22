"""A judged run's records are written byte for byte as before verdict details were typed
(`model/details.py`), and every surface still reads them: the terminal, JUnit, `ll judge
explain`, `ll status`.

One `ll run` from a YAML file against the loopback model server (tests/llm_server.py) gives
details of every shape: a deterministic verdict, a convergence value, samples (usage summed,
votes listed), a panel, a judge error with its flags, and a fail_open verdict.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from llm_server import (
    SUCCESS,
    LlmServer,
    api_error,
    llm_server_fixture,  # noqa: F401  (the llm_server fixture)
    message,
)
from project import Project

LOOP = """
name: judged
initial: measure
max_iterations: 10
states:
  measure:
    action: "echo 4"
    evaluate: {type: convergence, target: 3}
    capture: measured
    route: {_: sampled}
  sampled:
    action: "echo 3 passed"
    evaluate: {type: llm_structured, samples: 2}
    capture: verdict
    route: {_: panel, error: panel}
  panel:
    action: "echo 3 passed"
    evaluate:
      type: llm_structured
      models: [claude-haiku-4-5, claude-sonnet-4-5]
    route: {_: broken, error: broken}
  broken:
    action: "echo 3 passed"
    evaluate: {type: llm_structured}
    route: {_: open, error: open}
  open:
    action: "echo 3 passed"
    evaluate: {type: llm_structured, fail_open: true}
    route: {_: done}
  done: {terminal: true}
"""

FAILURE = {"verdict": "failure", "confidence": 0.6, "reason": "one test was skipped"}

# events.jsonl and state.json of the run below as main wrote them before details were typed
# (b812646), with time stamps, run ids, durations, latencies and the directory masked.
ON_MAIN = Path(__file__).parent / "data" / "judged_on_main.txt"


def _script(server: LlmServer) -> None:
    server.script(
        message(SUCCESS),  # sampled, 1 of 2
        message(FAILURE, input_tokens=900, output_tokens=30),  # sampled, 2 of 2
        message(SUCCESS, model="claude-haiku-4-5"),  # panel member 1
        message(FAILURE),  # panel member 2
        api_error(400, "invalid_request_error", "tools.0.strict: bad"),  # broken
        api_error(400, "invalid_request_error", "tools.0.strict: bad"),  # open
    )


def _env(server: LlmServer) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "sk-test-not-real", "ANTHROPIC_BASE_URL": server.url}


def masked(root: Path) -> str:
    """The run's events.jsonl, state.json and outputs.dat (the captured records, with the
    judge's confidence and reason) with what changes from run to run masked."""
    (run,) = (root / ".loops" / "runs").iterdir()
    out = []
    for name in ("events.jsonl", "state.json", "outputs.dat"):
        text = (run / name).read_text(encoding="utf-8")
        text = text.replace(run.name, "RUN").replace(str(root), "DIR")
        text = re.sub(r'"(ts|started_at|updated_at|expires_at)":"[^"]*"', r'"\1":"T"', text)
        text = re.sub(
            r'"(duration_ms|latency_ms|elapsed_ms|pid|pid_start)":[0-9.]+', r'"\1":0', text
        )
        text = re.sub(r'"(secret_nonce)":"[^"]*"', r'"\1":"N"', text)
        text = re.sub(r'"ref":\[\d+,\d+\]', '"ref":[0,0]', text)  # offsets: durations vary
        text = re.sub(r'"(host|hostname|owner)":"[^"]*"', r'"\1":"H"', text)
        out += [f"# {name}\n", text if text.endswith("\n") else text + "\n"]
    return "".join(out)


def _loop(root: Path) -> Path:
    path = root / "judged.yaml"
    path.write_text(textwrap.dedent(LOOP), encoding="utf-8")
    return path


def test_judged_events_and_state_bytes_are_those_main_wrote(
    project: Project, tmp_path: Path, llm_server: LlmServer
) -> None:
    _loop(tmp_path)
    _script(llm_server)
    done = project.ll("run", "judged.yaml", "--no-cache", env=_env(llm_server))
    assert done.returncode == 0, done.stdout + done.stderr
    assert masked(tmp_path) == ON_MAIN.read_text(encoding="utf-8")


def test_every_surface_reads_typed_details(
    project: Project, tmp_path: Path, llm_server: LlmServer
) -> None:
    """The terminal line, JUnit, `ll judge explain` and `ll status` of the judged run show
    reason, confidence, cost and the judge's error, read through the typed record."""
    _script(llm_server)
    junit = tmp_path / "junit.xml"
    done = project.ll(
        "run", str(_loop(tmp_path)), "--no-cache", "--junit-xml", str(junit), env=_env(llm_server)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # the terminal: verdict, confidence and reason of a judged step; the judge's error
    assert 'failure 0.30 "one test was skipped"' in done.stdout  # a tie: the less favourable
    assert "tools.0.strict: bad" in done.stdout
    xml = junit.read_text(encoding="utf-8")
    assert "confidence: 0.30" in xml
    assert "reason: all checks passed" in xml or "reason: one test was skipped" in xml
    # `ll judge explain` on the sampled step: each vote, the summed usage, the cost
    explained = project.ll("judge", "explain", "--step", "2")
    assert explained.returncode == 0, explained.stderr
    text = explained.stdout
    assert "sample: success (0.90) all checks passed" in text
    assert "sample: failure (0.60) one test was skipped" in text
    assert "2100 tokens in, 70 out" in text
    assert "cost $0.0" in text
    # the panel step lists each member's vote
    panel = project.ll("judge", "explain", "--step", "3").stdout
    assert "claude-haiku-4-5: success (0.90) all checks passed" in panel
    assert "claude-sonnet-4-5: failure (0.60) one test was skipped" in panel
    # the failed judge: its error, and `ll status` shows the last verdicts' reasons
    broken = project.ll("judge", "explain", "--step", "4").stdout
    assert "error:        " in broken
    assert "tools.0.strict: bad" in broken
    status = project.ll("status")
    assert status.returncode == 0, status.stderr
    assert "tools.0.strict: bad" in status.stdout
