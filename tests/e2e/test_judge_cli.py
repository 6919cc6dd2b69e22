"""`ll judge test` and `ll judge explain` through the real `ll`: the shipped worked example
replayed, a judge measured against the loopback server and recorded, bad input, and what a
judged step sent, read back from a run's records (secrets redacted)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from llm_server import (
    LlmServer,
    chat,
    judge_checks,
    llm_server_fixture,  # noqa: F401  (the llm_server fixture)
)
from project import Project, Result

from little_loops.errors import LoopError
from little_loops.evaluators.agreement import (
    kappa,
    parse_share,
)
from little_loops.model.details import Details

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


def test_the_shipped_judge_measured_on_its_cases(project: Project, tmp_path: Path) -> None:
    proc = shipped(project)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        f"judge test: judge release_notes (claude-sonnet-5-5), 8 cases from {CASES}\n"
        "  accuracy    7/8 (87.5 %)\n"
        "  kappa       0.75 (Cohen's: agreement beyond chance, 1 = perfect, 0 = chance)\n"
        "  confidence  right 0.93 · wrong 0.58 (mean)\n"
        "  cost        $0.0000 (replayed; $0.0270 when recorded)\n"
        "\n"
        "confusion (rows: your label, columns: the judge's verdict)\n"
        "             success  failure\n"
        "  success          3        0\n"
        "  failure          1        4\n"
        "\n"
        "calibration (how often the judge was right at each confidence; a band runs up to its\n"
        "high edge, which belongs to the next one, except 1.00)\n"
        "  confidence  cases  right  accuracy  mean confidence\n"
        "  0.50-0.60      1      0       0 %             0.58\n"
        "  0.80-0.90      1      1     100 %             0.88\n"
        "  0.90-1.00      6      6     100 %             0.93\n"
        "  expected calibration error 0.138 (the mean gap between confidence and accuracy,\n"
        "  weighted by cases: 0 means a confidence of 0.8 is right 8 times in 10)\n"
        "\n"
        "disagreements\n"
        "  line 8 (vague bullets): labelled failure, judged success (confidence 0.58)\n"
        "    output: Release 3.1 - Fixed several issues - New features\n"
        "    reason: It lists a fix and new features.\n"
    )


@pytest.mark.parametrize(("given", "code"), [("90%", 1), ("0.9", 1), ("80%", 0), ("0.875", 0)])
def test_min_agreement_guards_the_judge(
    project: Project, tmp_path: Path, given: str, code: int
) -> None:
    proc = shipped(project, "--min-agreement", given)
    assert proc.returncode == code
    if code:
        assert proc.stderr == "ll: agreement 87.5 % is below --min-agreement 90.0 %\n"


def test_json_holds_every_measure(project: Project, tmp_path: Path) -> None:
    found = json.loads(shipped(project, "--json").stdout)
    assert (found["cases"], found["agreed"], found["kappa"], found["errors"]) == (8, 7, 0.75, 0)
    assert found["confusion"]["failure"] == {
        "success": 1,
        "failure": 4,
        "blocked": 0,
        "partial": 0,
    }
    assert found["mean_confidence_wrong"] == 0.58
    assert found["recorded_cost_usd"] == pytest.approx(0.027)
    [wrong] = found["disagreements"]
    assert (wrong["line"], wrong["expected"], wrong["got"]) == (8, "failure", "success")


JUDGED = textwrap.dedent("""\
    name: judged
    initial: check
    judges:
      tests:
        prompt: "Did the tests of ${context.project} pass?"
        model: "openai://gpt-4o-mini"
        examples:
          - {output: "3 passed", verdict: success}
    context:
      project: demo
    states:
      check:
        action: echo "2 passed"
        evaluate: {type: llm_structured, judge: tests, uncertain_suffix: true, fail_open: true}
        route: {_: done}
      done: {terminal: true}
""")


def test_a_state_judge_measured_live_recorded_then_replayed(
    project: Project, tmp_path: Path, llm_server: LlmServer
) -> None:
    (tmp_path / "loop.yaml").write_text(JUDGED, encoding="utf-8")
    cases = [
        {"output": "5 passed", "verdict": "success"},
        {"output": "1 failed, 4 passed", "verdict": "failure"},
        {"output": "ImportError", "verdict": "failure", "name": "crash"},
    ]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    llm_server.expect(judge_checks(examples=1, temperature=0.0))
    llm_server.script(
        chat(json.dumps({"reason": "all passed", "verdict": "success", "confidence": 0.9})),
        chat(json.dumps({"reason": "one failed", "verdict": "failure", "confidence": 0.8})),
        chat(json.dumps({"reason": "unsure", "verdict": "success", "confidence": 0.3})),
    )
    env = {"OPENAI_BASE_URL": llm_server.url + "/v1", "OPENAI_API_KEY": "sk-test"}
    args = ["judge", "test", "cases.jsonl", "--loop", "loop.yaml", "--state", "check", "--json"]
    live = ll(project, *args, "--record", "rec.jsonl", **env)
    assert live.returncode == 0, live.stderr
    found = json.loads(live.stdout)
    assert (found["judge"], found["model"], found["agreed"]) == (
        "state check",
        "openai://gpt-4o-mini",
        2,
    )
    # The judge's own verdict counts: no _uncertain (0.3 is below 0.5), no fail-open.
    assert found["disagreements"][0]["got"] == "success"
    assert found["kappa"] == 0.4
    assert "Did the tests of demo pass?" in llm_server.requests[0].body["messages"][1]["content"]
    replayed = ll(project, *args, "--replay", "rec.jsonl")
    assert json.loads(replayed.stdout)["agreed"] == 2
    assert len(llm_server.requests) == 3  # the replay asked nothing


@pytest.mark.parametrize(
    ("cases", "args", "message"),
    [
        ('{"output": "x", "verdict": "success"}\nnot json\n', [],
         "cases.jsonl:2: not JSON (Expecting value at column 1)"),
        ('{"output": "x", "verdict": "sucess"}\n', [],
         "cases.jsonl:1: verdict 'sucess' is not one the judge can give (did you mean "
         "'success'?); it gives: success, failure, blocked, partial"),
        ('{"output": "x", "verdit": "success"}\n', [],
         "cases.jsonl:1: unknown key 'verdit'; a case has output, verdict, and optionally "
         "stderr, name, captured, context"),
        ("\n", [], 'cases.jsonl: no cases; write one JSON object a line: {"output": "...", '
         '"verdict": "success"}'),
        ('{"output": "x", "verdict": "success"}\n', ["--state", "chek"],
         "loop.yaml: no state 'chek' (did you mean 'check'?)"),
        ('{"output": "x", "verdict": "success"}\n', ["--judge", "test"],
         "loop.yaml: no judge 'test' under 'judges:' (did you mean 'tests'?); it has: tests"),
        ('{"output": "x", "verdict": "success"}\n', ["--state", "done"],
         "loop.yaml: state 'done' is judged by no evaluator, not llm_structured; name a judged "
         "state or a judge (--judge NAME)"),
        ('{"output": "x", "verdict": "success"}\n', ["--state", "check", "--judge", "tests"],
         "name the judge to test: --state STATE or --judge NAME (one of them)"),
        ('{"output": "x", "verdict": "success"}\n', ["--judge", "tests", "--min-agreement", "95"],
         "--min-agreement: '95' is outside 0..1; write a fraction (0.9) or a percentage (90%)"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    project: Project, tmp_path: Path, cases: str, args: list[str], message: str
) -> None:
    (tmp_path / "loop.yaml").write_text(JUDGED, encoding="utf-8")
    (tmp_path / "cases.jsonl").write_text(cases, encoding="utf-8")
    args = args or ["--judge", "tests"]
    proc = ll(project, "judge", "test", "cases.jsonl", "--loop", "loop.yaml", *args)
    assert proc.returncode == 2
    assert proc.stderr == f"ll: error: {message}\n"
    assert proc.stdout == ""


def test_a_template_a_case_cannot_fill_is_refused_before_any_request(
    project: Project, tmp_path: Path
) -> None:
    text = JUDGED.replace("${context.project}", "${captured.build.output}").replace(
        'action: echo "2 passed"', 'action: echo "2 passed"\n    capture: build'
    )
    (tmp_path / "loop.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "cases.jsonl").write_text('{"output": "x", "verdict": "success"}\n')
    proc = ll(project, "judge", "test", "cases.jsonl", "--loop", "loop.yaml", "--judge", "tests")
    assert proc.returncode == 2
    assert proc.stderr == (
        "ll: error: cases.jsonl:1: the judge's prompt reads '${captured.build.output}', which "
        'this case does not give; add it, e.g. "captured": {"NAME": {"output": "..."}}\n'
    )


def test_kappa_and_shares() -> None:
    assert kappa([("a", "a"), ("b", "b")]) == 1.0
    assert kappa([("a", "a"), ("a", "a")]) is None  # chance agreement is certain
    assert kappa([("a", "b"), ("b", "a")]) == -1.0
    assert parse_share("90%") == 0.9
    assert parse_share("0.25") == 0.25
    with pytest.raises(LoopError):
        parse_share("lots")


def test_explain_shows_what_a_replayed_step_sent_and_got(project: Project, tmp_path: Path) -> None:
    run = ll(
        project, "run", str(LOOP), "--replay",
        str(REPO / "loops" / "judge-release-notes.cassette.jsonl"), "--quiet",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    proc = ll(project, "judge", "explain", "--step", "1")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.startswith("run ")
    assert text.splitlines()[0].endswith(", step 1 (draft)")
    assert "temperature:  not sent (the Anthropic API refuses sampling parameters)\n" in text
    assert "examples:     2\n" in text
    assert "answered by:  the recording (--replay; nothing sent)\n" in text
    assert "-- system prompt --\nYou judge one step of an automated loop." in text
    assert '<example n="2">\n<example_output>\nRelease 1.0\n' in text
    assert "<action_output>\nRelease 1.2: various improvements.\n" in text
    assert '"required": [\n    "reason",\n    "verdict",\n    "confidence"\n  ]' in text
    assert "verdict:      failure (confidence 0.93, confident)\n" in text
    latest = json.loads(ll(project, "judge", "explain", "--json").stdout)
    assert (latest["step"], latest["verdict"]) == (2, "success")
    missing = ll(project, "judge", "explain", "--step", "3")
    assert missing.returncode == 2
    assert "step 3 of run" in missing.stderr
    assert missing.stderr.endswith("asked no judge; judged steps: 1, 2\n")


def test_explain_keeps_secrets_out(project: Project, tmp_path: Path, llm_server: LlmServer) -> None:
    text = textwrap.dedent("""\
        name: secret
        initial: check
        context:
          token: ""
        secrets: [token]
        states:
          check:
            action: echo "deploying with ${context.token}"
            evaluate:
              type: llm_structured
              prompt: "Did the deploy with ${context.token} work?"
            route: {_: done, error: done}
          done: {terminal: true}
    """)
    (tmp_path / "loop.yaml").write_text(text, encoding="utf-8")
    env = {"ANTHROPIC_BASE_URL": llm_server.url, "ANTHROPIC_API_KEY": "sk-test"}
    run = ll(project, "run", "loop.yaml", "--set", "token=hunter2-secret", "--quiet", **env)
    assert run.returncode == 0, run.stderr
    shown = ll(project, "judge", "explain")
    assert shown.returncode == 0, shown.stderr
    assert "Did the deploy with *** work?" in shown.stdout
    assert "hunter2-secret" not in shown.stdout
    for path in (tmp_path / ".loops" / "runs").rglob("events.jsonl"):
        assert "hunter2-secret" not in path.read_text()


def test_the_docs_show_the_real_output_of_the_worked_example() -> None:
    doc = (REPO / "docs" / "judge.md").read_text(encoding="utf-8")
    command = doc.split("## Measuring a judge before trusting it", 1)[1]
    command = command.split("```sh\n", 1)[1].split("\n```", 1)[0]
    shown = doc.split("<!-- judge-test-output -->\n```text\n", 1)[1].split("```", 1)[0]
    args = command.split()
    assert args[:3] == ["ll", "judge", "test"]
    proc = ll(Project(REPO), *args[1:])  # in the repository, as the docs say
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown


def test_run_cases_reports_progress_and_reads_each_answer() -> None:
    from little_loops.evaluators.agreement import (
        Case,
        run_cases,
    )
    from little_loops.model.loop import (
        Evaluate,
        Loop,
        Verdict,
    )

    class Session:
        def judge(self, spec: Evaluate, inp: object) -> Verdict:
            return Verdict("failure", Details(confidence=0.4, reason="no", cost_usd=0.01))

    seen: list[tuple[int, int]] = []
    cases = [Case(1, "a", "failure"), Case(2, "b", "success")]
    loop = Loop(name="x", initial="a", states={})
    outcomes = run_cases(
        loop, Evaluate(type="llm_structured"), cases, Session(), lambda d, t: seen.append((d, t))
    )
    assert seen == [(1, 2), (2, 2)]
    assert [o.agrees for o in outcomes] == [True, False]
    assert outcomes[1].reason == "no"
