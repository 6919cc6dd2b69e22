"""reports.py: the JUnit XML file and the GitHub Actions output, from events and from real runs."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from project import Project

from little_loops.errors import LoopError
from little_loops.model.loop import (
    Loop,
    Pos,
    Route,
    State,
)
from little_loops.report.reports import (
    GitHubReport,
    JUnitReport,
    escape_data,
    escape_property,
    github_report_from_env,
)

LL = [sys.executable, "-m", "little_loops"]
RUN_ID = "20261122-041430-demo-3fa2"

# -- a small event script -----------------------------------------------------------------


class Script:
    """Builds a run's events with timestamps 0.5 s apart (the first at 04:14:30 UTC)."""

    def __init__(self, loop: str = "demo") -> None:
        self.loop = loop
        self.events: list[dict[str, Any]] = []
        self._tick = 0

    def _ts(self) -> str:
        ms = 500 * self._tick
        self._tick += 1
        return f"2026-11-22T04:14:{30 + ms // 1000:02d}.{ms % 1000:03d}Z"

    def emit(self, name: str, **fields: Any) -> Script:
        self.events.append({"event": name, "ts": self._ts(), "run_id": RUN_ID, **fields})
        return self

    def start(self, *, resumed: bool = False) -> Script:
        return self.emit(
            "loop_start", loop=self.loop, file="demo.yaml", max_iterations=50, resumed=resumed
        )

    def step(
        self,
        n: int,
        state: str,
        verdict: str | None,
        *,
        to: str | None = None,
        action: str | None = "make check",
        exit_code: int = 0,
        kind: str = "exit_code",
        details: dict[str, Any] | None = None,
    ) -> Script:
        self.emit("state_enter", step=n, state=state)
        if action is not None:
            self.emit("action_start", step=n, state=state, action=action, action_type="shell")
            self.emit(
                "action_complete",
                step=n,
                state=state,
                exit_code=exit_code,
                duration_ms=250,
                timed_out=False,
                output_bytes=3,
            )
        if verdict is not None:
            self.emit(
                "evaluate", step=n, state=state, type=kind, verdict=verdict, details=details or {}
            )
        if to is not None:
            self.emit("route", step=n, state=state, to=to, verdict=verdict, via="route")
            self.events[-1]["from"] = state
        return self

    def complete(
        self, outcome: str, final: str, steps: int, *, code: int = 0, error: str | None = None
    ) -> Script:
        return self.emit(
            "loop_complete",
            final_state=final,
            outcome=outcome,
            exit_code=code,
            steps=steps,
            duration_ms=2500,
            error=error,
            cost_usd=0.0123,
        )


def judged(verdict: str, confidence: float, reason: str) -> dict[str, Any]:
    return {"confidence": confidence, "confident": confidence >= 0.5, "reason": reason}


def fix_run() -> Script:
    """check fails, fix is judged, check passes, done."""
    s = Script().start()
    s.step(1, "check", "failure", to="fix", exit_code=1)
    s.step(
        2,
        "fix",
        "success",
        to="check",
        action="/ll:fix",
        kind="llm_structured",
        details=judged("success", 0.91, "Edited 2 files | tests | <pass>"),
    )
    s.step(3, "check", "success", to="done")
    s.step(4, "done", None, action="echo green")
    return s.complete("success", "done", 4)


def feed(listener: Any, script: Script) -> None:
    for event in script.events:
        listener(event)


# -- JUnit ----------------------------------------------------------------------------------


def junit(tmp_path: Path, script: Script) -> ET.Element:
    path = tmp_path / "reports" / "junit.xml"
    feed(JUnitReport(path, "loops/demo.yaml", base_dir=tmp_path), script)
    return ET.parse(path).getroot()


def test_junit_structure_and_counts(tmp_path: Path) -> None:
    root = junit(tmp_path, fix_run())
    assert root.tag == "testsuites"
    (suite,) = root
    assert suite.tag == "testsuite"
    assert suite.get("name") == "demo"
    # check's failure was routed to fix and the loop recovered: no failed test case.
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("5", "0", "0")
    assert suite.get("skipped") == "0"
    assert suite.get("time") == "2.500"
    assert suite.get("timestamp") == "2026-11-22T04:14:30"
    assert root.get("tests") == "5"
    assert root.get("failures") == "0"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "check (visit 1)",
        "fix (visit 1)",
        "check (visit 2)",
        "done (visit 1)",
        "outcome",
    ]
    assert {c.get("classname") for c in cases} == {"demo"}
    # state_enter -> last event of the step, at 0.5 s a tick
    assert cases[0].get("time") == "2.000"
    assert cases[3].get("time") == "1.000"
    assert cases[0].find("failure") is None
    out = cases[0].findtext("system-out") or ""
    assert "verdict: failure (exit_code)\nrouted to 'fix': the loop handled this verdict" in out
    assert "reason: exit code 1" in out
    assert cases[1].find("failure") is None
    assert cases[4].find("failure") is None
    assert cases[4].find("error") is None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["run_id"] == RUN_ID
    assert props["loop_file"] == "loops/demo.yaml"
    assert props["outcome"] == "success"
    assert props["cost_usd"] == "0.0123"


def test_junit_system_out_holds_action_verdict_and_reason(tmp_path: Path) -> None:
    cases = junit(tmp_path, fix_run()).findall("testsuite/testcase")
    out = cases[1].findtext("system-out") or ""
    assert "action (shell): /ll:fix" in out
    assert "verdict: success (llm_structured)" in out
    assert "confidence: 0.91" in out
    assert "reason: Edited 2 files | tests | <pass>" in out


def test_junit_routed_failures_pass_and_the_stopping_one_fails_with_reason_and_tail(
    tmp_path: Path,
) -> None:
    s = Script().start()
    s.step(1, "build", "error", to="build", exit_code=2, details={"error": "exit code 2: no make"})
    s.step(2, "build", "timeout", to="check", details={"timeout_s": 5})
    s.step(3, "check", "failure_uncertain", to="check", details=judged("failure", 0.3, "unsure"))
    s.step(4, "check", "error", exit_code=6)
    s.events[-1]["reason"] = "exit code 6: curl: (6) Could not resolve host"
    s.events[-1]["tail"] = ["  % Total", "curl: (6) Could not resolve host"]
    s.complete("error", "check", 4, code=3, error="state 'check' gave verdict 'error'")
    suite = junit(tmp_path, s).find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    names = [c.get("name") for c in cases]
    assert names == [
        "build (visit 1)",
        "build (visit 2)",
        "check (visit 1)",
        "check (visit 2)",
        "outcome",
    ]
    failures = [c.find("failure") for c in cases]
    assert [None if f is None else f.get("type") for f in failures] == [
        None,
        None,
        None,
        "error",
        None,
    ]
    out = [c.findtext("system-out") or "" for c in cases]
    assert "reason: exit code 2: no make" in out[0]
    assert "reason: the action timed out after 5s" in out[1]
    assert "routed to 'check'" in out[2]
    failure = failures[3]
    assert failure is not None
    assert failure.get("message") == (
        "state 'check' gave verdict 'error': exit code 6: curl: (6) Could not resolve host"
    )
    assert (failure.text or "").splitlines() == [
        "exit code 6: curl: (6) Could not resolve host",
        "",
        "last 2 lines of output:",
        "  % Total",
        "curl: (6) Could not resolve host",
    ]
    assert "curl: (6) Could not resolve host" in out[3]
    assert cases[4].find("error") is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("5", "1", "1")


def test_junit_run_error_is_an_error_and_cut_step_is_skipped(tmp_path: Path) -> None:
    s = Script().start()
    s.step(1, "check", "success", to="slow")
    s.emit("state_enter", step=2, state="slow")
    s.emit("action_start", step=2, state="slow", action="sleep 100", action_type="shell")
    s.complete("interrupted", "slow", 1, code=130, error="interrupted (SIGINT)")
    suite = junit(tmp_path, s).find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    skipped = cases[1].find("skipped")
    assert skipped is not None
    assert "before this step was judged" in (skipped.get("message") or "")
    error = cases[2].find("error")
    assert error is not None
    assert error.get("type") == "interrupted"
    assert error.get("message") == "was interrupted (SIGINT) at 'slow'"
    counts = [suite.get(k) for k in ("tests", "failures", "errors", "skipped")]
    assert counts == ["3", "0", "1", "1"]


def test_junit_retry_keeps_the_last_attempt(tmp_path: Path) -> None:
    s = Script().start()
    s.step(1, "flaky", "error", details={"error": "boom"}, exit_code=2)
    s.emit("retry", step=1, state="flaky", attempt=2, delay_s=0.1, verdict="error")
    s.emit("action_start", step=1, state="flaky", action="try again", action_type="shell")
    s.emit("action_complete", step=1, state="flaky", exit_code=0, duration_ms=10, timed_out=False)
    s.emit("evaluate", step=1, state="flaky", type="exit_code", verdict="success", details={})
    s.complete("success", "flaky", 1)
    (case, _outcome) = junit(tmp_path, s).findall("testsuite/testcase")
    assert case.find("failure") is None
    out = case.findtext("system-out") or ""
    assert "retried 1 time" in out
    assert "action (shell): try again" in out


def test_junit_strips_characters_xml_cannot_hold_and_truncates(tmp_path: Path) -> None:
    s = Script().start()
    s.step(1, "check", "failure", action="echo \x1b[31mred\x00" + "x" * 5000, exit_code=1)
    s.complete("failure", "check", 1, code=1)
    case = junit(tmp_path, s).find("testsuite/testcase")
    assert case is not None
    out = case.findtext("system-out") or ""
    assert "\x1b" not in out
    assert "\x00" not in out
    assert "red" in out
    assert len(out) < 2300


def test_junit_resumed_run_reads_the_whole_history(tmp_path: Path) -> None:
    first = Script().start()
    first.step(1, "check", "failure", to="fix", exit_code=1)
    first.emit("state_enter", step=2, state="fix")
    first.complete("interrupted", "fix", 1, code=130)
    resumed = Script()
    resumed._tick = 20
    resumed.start(resumed=True)
    resumed.step(2, "fix", "success", to="done")
    resumed.step(3, "done", None, action=None)
    resumed.complete("success", "done", 3)
    log = tmp_path / ".loops" / "runs" / RUN_ID / "events.jsonl"
    log.parent.mkdir(parents=True)
    all_events = first.events + resumed.events
    log.write_text("".join(json.dumps(e) + "\n" for e in all_events), encoding="utf-8")
    suite = junit(tmp_path, resumed).find("testsuite")
    assert suite is not None
    names = [c.get("name") for c in suite.findall("testcase")]
    assert names == ["check (visit 1)", "fix (visit 1)", "done (visit 1)", "outcome"]
    assert suite.get("failures") == "0"  # check's failure was routed to fix


def test_junit_unwritable_path_is_a_loop_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LoopError, match="cannot write the JUnit report"):
        JUnitReport(blocker / "sub" / "junit.xml", "demo.yaml")


XSD = """<?xml version="1.0" encoding="UTF-8"?>
<!-- The JUnit shape CI servers read: suites of cases with failures, errors, skips, output. -->
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">
  <xs:simpleType name="seconds">
    <xs:restriction base="xs:decimal"><xs:minInclusive value="0"/></xs:restriction>
  </xs:simpleType>
  <xs:simpleType name="localTime">
    <xs:restriction base="xs:string">
      <xs:pattern value="[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"/>
    </xs:restriction>
  </xs:simpleType>
  <xs:complexType name="problem">
    <xs:simpleContent>
      <xs:extension base="xs:string">
        <xs:attribute name="message" type="xs:string"/>
        <xs:attribute name="type" type="xs:string" use="required"/>
      </xs:extension>
    </xs:simpleContent>
  </xs:complexType>
  <xs:complexType name="skip">
    <xs:attribute name="message" type="xs:string"/>
  </xs:complexType>
  <xs:element name="testsuites">
    <xs:complexType>
      <xs:sequence>
        <xs:element ref="testsuite" minOccurs="0" maxOccurs="unbounded"/>
      </xs:sequence>
      <xs:attribute name="name" type="xs:string"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger"/>
      <xs:attribute name="skipped" type="xs:nonNegativeInteger"/>
      <xs:attribute name="time" type="seconds"/>
    </xs:complexType>
  </xs:element>
  <xs:element name="testsuite">
    <xs:complexType>
      <xs:sequence>
        <xs:element name="properties" minOccurs="0">
          <xs:complexType>
            <xs:sequence>
              <xs:element name="property" minOccurs="0" maxOccurs="unbounded">
                <xs:complexType>
                  <xs:attribute name="name" type="xs:string" use="required"/>
                  <xs:attribute name="value" type="xs:string" use="required"/>
                </xs:complexType>
              </xs:element>
            </xs:sequence>
          </xs:complexType>
        </xs:element>
        <xs:element name="testcase" minOccurs="0" maxOccurs="unbounded">
          <xs:complexType>
            <xs:sequence>
              <xs:choice minOccurs="0">
                <xs:element name="skipped" type="skip"/>
                <xs:element name="error" type="problem" maxOccurs="unbounded"/>
                <xs:element name="failure" type="problem" maxOccurs="unbounded"/>
              </xs:choice>
              <xs:element name="system-out" type="xs:string" minOccurs="0"/>
              <xs:element name="system-err" type="xs:string" minOccurs="0"/>
            </xs:sequence>
            <xs:attribute name="name" type="xs:string" use="required"/>
            <xs:attribute name="classname" type="xs:string" use="required"/>
            <xs:attribute name="time" type="seconds" use="required"/>
          </xs:complexType>
        </xs:element>
        <xs:element name="system-out" type="xs:string" minOccurs="0"/>
        <xs:element name="system-err" type="xs:string" minOccurs="0"/>
      </xs:sequence>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="skipped" type="xs:nonNegativeInteger"/>
      <xs:attribute name="time" type="seconds" use="required"/>
      <xs:attribute name="timestamp" type="localTime" use="required"/>
      <xs:attribute name="hostname" type="xs:string"/>
    </xs:complexType>
  </xs:element>
</xs:schema>
"""


@pytest.fixture
def xsd(tmp_path: Path) -> Path:
    if shutil.which("xmllint") is None:
        pytest.skip("xmllint (libxml2-utils) is not installed")
    path = tmp_path / "junit.xsd"
    path.write_text(XSD, encoding="utf-8")
    return path


def xmllint(xsd: Path, report: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["xmllint", "--noout", "--schema", str(xsd), str(report)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_junit_validates_against_the_schema(tmp_path: Path, xsd: Path) -> None:
    for i, script in enumerate([fix_run()]):
        path = tmp_path / f"r{i}.xml"
        feed(JUnitReport(path, "demo.yaml", base_dir=tmp_path), script)
        proc = xmllint(xsd, path)
        assert proc.returncode == 0, proc.stderr
    # and the schema does reject a broken report
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="x"/></testsuites>')
    assert xmllint(xsd, bad).returncode != 0


# -- GitHub Actions -------------------------------------------------------------------------


def test_workflow_command_escaping() -> None:
    assert escape_data("50% done\r\nnext: a, b") == "50%25 done%0D%0Anext: a, b"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def github(tmp_path: Path, script: Script, **kw: Any) -> tuple[str, str]:
    out = io.StringIO()
    summary = tmp_path / "summary.md"
    lines = {"check": 7, "fix": 12, "done": 20, "give-up": 22}
    report = GitHubReport(summary, Path("loops/demo.yaml"), lines, out, base_dir=tmp_path, **kw)
    feed(report, script)
    return out.getvalue(), summary.read_text(encoding="utf-8") if summary.exists() else ""


def test_github_success_run_warns_once_per_failing_state(tmp_path: Path) -> None:
    s = Script().start()
    s.step(1, "check", "failure", to="fix", exit_code=1)
    s.step(2, "fix", "success", to="check")
    s.step(3, "check", "failure", to="fix", exit_code=1)
    s.step(4, "fix", "success", to="check")
    s.step(5, "check", "success", to="done")
    s.step(6, "done", None)
    s.complete("success", "done", 6)
    out, _ = github(tmp_path, s)
    assert out.splitlines() == [
        "::warning file=loops/demo.yaml,line=7,title=ll%3A check gave failure::"
        "state 'check' gave verdict 'failure' (2 times, steps 1, 3): exit code 1"
    ]


def test_github_failed_run_errors_at_the_states_line(tmp_path: Path) -> None:
    s = Script().start()
    s.step(1, "check", "error", to="give-up", details={"error": "bad: 100%\nreally"})
    s.step(2, "give-up", None, action=None)
    s.complete("failure", "give-up", 2, code=1)
    out, _ = github(tmp_path, s)
    assert out.splitlines() == [
        "::error file=loops/demo.yaml,line=22,title=ll%3A demo failure::"
        "loop 'demo' reached the failure terminal 'give-up'",
        # Routed onward, the loop handled it: a warning; the run's ending is the error.
        "::warning file=loops/demo.yaml,line=7,title=ll%3A check gave error::"
        "state 'check' gave verdict 'error' (step 1): bad: 100%25 really",
    ]


def test_github_at_most_ten_annotations_then_a_count(tmp_path: Path) -> None:
    s = Script().start()
    for n in range(1, 15):
        s.step(n, "check", "failure", to="check", exit_code=n)
    s.complete("max_iterations", "check", 14, code=4)
    out, _ = github(tmp_path, s)
    lines = out.splitlines()
    assert len(lines) == 11
    assert lines[0].startswith("::error file=loops/demo.yaml,line=7,")
    assert all(line.startswith("::warning file=loops/demo.yaml,line=7,") for line in lines[1:10])
    assert "hit max_iterations at 'check'" in lines[0]
    assert lines[10] == "::notice::ll: 5 more annotations not shown; see the step summary"


def test_github_annotation_without_a_known_line(tmp_path: Path) -> None:
    s = Script().start()
    s.step(1, "elsewhere", "failure", exit_code=1)
    s.complete("error", "elsewhere", 1, code=3, error="no route")
    out, _ = github(tmp_path, s)
    assert "::error file=loops/demo.yaml,title=ll%3A elsewhere gave failure::" in out


def test_github_summary_content(tmp_path: Path) -> None:
    _, summary = github(tmp_path, fix_run())
    assert summary.startswith("### ✅ ll: demo — success\n")
    assert f"| success | `done` | 0 | 4 | 2.50 s | $0.0123 | `{RUN_ID}` |" in summary
    assert "#### Judge verdicts" in summary
    assert "| 2 | `fix` | success | 0.91 | Edited 2 files \\| tests \\| &lt;pass> |" in summary
    assert "`check` → `fix` → `check` → `done`" in summary
    assert "<details><summary>All 4 steps</summary>" in summary
    assert "| 1 | `check` | failure | 2.00 s | exit code 1 |" in summary


def test_github_summary_draws_the_path_with_the_loop(tmp_path: Path) -> None:
    loop = Loop(
        "demo",
        "check",
        {
            "check": State(
                "check",
                action="x",
                routes={
                    "success": Route("done", "on_success"),
                    "failure": Route("fix", "on_failure"),
                },
            ),
            "fix": State("fix", action="/ll:fix", next=Route("check", "next")),
            "done": State("done", terminal=True),
        },
    )
    _, summary = github(tmp_path, fix_run(), loop=loop)
    block = summary.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert block.startswith("flowchart TD\n")
    assert 's0["check<br/>2 visits"]' in block
    assert 's0 ==>|"failure"| s1' in block
    assert 's1 ==>|"success (next)"| s0' in block


def test_github_summary_appends_and_no_judge(tmp_path: Path) -> None:
    s = Script().start()
    s.step(1, "check", "success", to="done")
    s.step(2, "done", None)
    s.complete("success", "done", 2)
    github(tmp_path, s)
    _, summary = github(tmp_path, s)
    assert summary.count("### ✅ ll: demo — success") == 2
    assert "No state was judged by a model in this run." in summary


def test_github_unwritable_summary_is_a_warning(tmp_path: Path) -> None:
    out = io.StringIO()
    report = GitHubReport(tmp_path / "missing-dir" / "s.md", Path("l.yaml"), {}, out)
    feed(report, fix_run())
    assert (
        out.getvalue().splitlines()[-1].startswith("::warning::ll: cannot write the step summary")
    )


def test_report_from_env_only_in_github_actions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_path = tmp_path / "loops" / "demo.yaml"
    loop = Loop("demo", "a", {"a": State("a", pos=Pos(9, 3), terminal=True)}, path=loop_path)
    assert github_report_from_env(loop, io.StringIO()) is None
    monkeypatch.setenv("GITHUB_ACTIONS", "false")
    assert github_report_from_env(loop, io.StringIO()) is None
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "sum.md"))
    report = github_report_from_env(loop, io.StringIO())
    assert report is not None
    assert report.loop_file == Path("loops/demo.yaml")
    assert report.state_lines == {"a": 9}
    assert report.summary_path == tmp_path / "sum.md"
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    report = github_report_from_env(loop, io.StringIO(), env={"GITHUB_ACTIONS": "true"})
    assert report is not None
    assert report.summary_path is None


# -- real runs ------------------------------------------------------------------------------

LOOP = """
name: ci-demo
initial: check
on_error: broken
states:
  check:
    action: test -f marker
    on_success: done
    on_failure: fix
  fix:
    action: touch marker
    next: check
  done: {terminal: true}
  broken: {terminal: true, outcome: failure}
"""


@pytest.fixture
def loop_file(tmp_path: Path) -> Path:
    path = tmp_path / "ci-demo.yaml"
    path.write_text(textwrap.dedent(LOOP), encoding="utf-8")
    return path


def test_ll_run_junit_xml(project: Project, tmp_path: Path, loop_file: Path) -> None:
    out = tmp_path / "reports" / "junit.xml"
    proc = project.ll("run", loop_file, "--junit-xml", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    suite = ET.parse(out).getroot().find("testsuite")
    assert suite is not None
    assert suite.get("name") == "ci-demo"
    names = [c.get("name") for c in suite.findall("testcase")]
    assert names == [
        "check (visit 1)",
        "fix (visit 1)",
        "check (visit 2)",
        "done (visit 1)",
        "outcome",
    ]
    # check failed, was routed to fix, and the loop recovered: nothing failed.
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("5", "0", "0")
    if shutil.which("xmllint"):
        xsd = tmp_path / "junit.xsd"
        xsd.write_text(XSD, encoding="utf-8")
        check = xmllint(xsd, out)
        assert check.returncode == 0, check.stderr


def test_ll_run_in_github_actions(project: Project, tmp_path: Path, loop_file: Path) -> None:
    summary = tmp_path / "summary.md"
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_WORKSPACE": str(tmp_path),
    }
    proc = project.ll("run", loop_file, "-q", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "::warning file=ci-demo.yaml,line=6,title=ll%3A check gave failure::"
        "state 'check' gave verdict 'failure' (step 1): exit code 1"
    ) in proc.stdout.splitlines()
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("### ✅ ll: ci-demo — success")
    assert "```mermaid\nflowchart TD\n" in text


STOPS = """
name: stops
initial: fetch
states:
  fetch:
    action: |
      echo "  % Total"
      echo "curl: (6) Could not resolve host: example.invalid" >&2
      exit 6
    next: done
  done: {terminal: true}
"""


def test_ll_run_reports_carry_the_reason_and_output(project: Project, tmp_path: Path) -> None:
    path = tmp_path / "stops.yaml"
    path.write_text(textwrap.dedent(STOPS), encoding="utf-8")
    report = tmp_path / "junit.xml"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)}
    proc = project.ll("run", path, "--junit-xml", report, "-q", env=env)
    reason = "exit code 6: curl: (6) Could not resolve host: example.invalid"
    assert f"(step 1): {reason}" in proc.stdout, proc.stdout + proc.stderr
    case = ET.parse(report).getroot().find("testsuite/testcase")
    assert case is not None
    assert case.get("name") == "fetch (visit 1)"
    out = case.findtext("system-out") or ""
    assert f"reason: {reason}" in out
    assert out.endswith(
        "last 1 lines of output:\ncurl: (6) Could not resolve host: example.invalid"
    )
    failure = case.find("failure")
    if proc.returncode != 0:  # the run stopped at fetch (SPEC v2: `next` takes success only)
        assert failure is not None
        assert failure.get("message") == f"state 'fetch' gave verdict 'error': {reason}"
        assert "curl: (6)" in (failure.text or "")
    else:  # routed onward by `next` (before SPEC v2): the loop handled it, nothing failed
        assert failure is None
        assert "routed to 'done'" in out
