"""`ll test`: simulation scripts with `expect:`, a path diff on mismatch, JUnit, exit 0/1/2."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from project import Project

from little_loops.sim.looptest import path_diff

REPO = Path(__file__).resolve().parents[2]
SHIPPED_TESTS = sorted((REPO / "loops" / "tests").glob("*.test.yaml"))


def test_every_shipped_loop_has_a_passing_test(project: Project, tmp_path: Path) -> None:
    for loop in (REPO / "loops").glob("*.yaml"):
        assert any(p.name.startswith(loop.stem) for p in SHIPPED_TESTS), loop.name
    done = project.ll("test", *map(str, SHIPPED_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASS ") == len(SHIPPED_TESTS)
    assert list(tmp_path.iterdir()) == []  # no run directory left behind


def test_a_mismatch_prints_the_path_diff_and_exits_1(project: Project, tmp_path: Path) -> None:
    script = tmp_path / "wrong.test.yaml"
    script.write_text(
        f"loop: {REPO / 'loops' / 'fix-until-green.yaml'}\n"
        "states:\n  setup: {output: /tmp/w}\n  check: [failure, success]\n  fix: success\n"
        "expect:\n  path: [setup, check, fix, fix, check, done]\n  outcome: success\n",
        encoding="utf-8",
    )
    report = tmp_path / "out" / "ll-test.xml"
    done = project.ll("test", str(script), "--junit-xml", str(report))
    assert done.returncode == 1, done.stderr
    assert "FAIL  " in done.stdout
    assert "path differs at step 4:" in done.stdout
    marked = [line for line in done.stdout.splitlines() if line.lstrip().startswith(">")]
    assert marked
    assert marked[0].split()[1:] == ["4", "fix", "check"]
    suite = ET.parse(report).getroot()
    assert suite.get("tests") == "1"
    assert suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert failure is not None
    assert "path differs at step 4" in (failure.text or "")


def test_bad_input_exits_2_with_one_line(project: Project, tmp_path: Path) -> None:
    good = REPO / "loops" / "tests" / "fix-until-green.test.yaml"
    bad = tmp_path / "bad.test.yaml"
    bad.write_text(
        f"loop: {REPO / 'loops' / 'fix-until-green.yaml'}\nstates:\n  check: success\n"
        "expect:\n  pth: [check]\n",
        encoding="utf-8",
    )
    missing = tmp_path / "missing.test.yaml"
    missing.write_text("states: {}\n", encoding="utf-8")
    done = project.ll("test", str(good), str(bad), str(missing))
    assert done.returncode == 2
    assert "PASS  " in done.stdout
    assert "bad.test.yaml:5: unknown expect key 'pth' (did you mean 'path'?)" in done.stdout
    assert "missing.test.yaml:1: names no 'loop:'" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_set_values_reach_the_run(project: Project, tmp_path: Path) -> None:
    script = tmp_path / "s.test.yaml"
    base = f"loop: {REPO / 'loops' / 'decide-on-number.yaml'}\nstates:\n  count: {{output: '4'}}\n"
    script.write_text(base + "set: {threshold: '9'}\nexpect: {final_state: fine}\n")
    assert project.ll("test", str(script)).returncode == 0
    script.write_text(base + "expect: {final_state: fine}\n")
    done = project.ll("test", str(script))
    assert done.returncode == 1
    assert "final_state: expected fine, got triage" in done.stdout


def test_expected_outputs_are_the_runs_outputs(project: Project, tmp_path: Path) -> None:
    """`expect: outputs:` is held against what the loop's `outputs:` rendered at its end."""
    (tmp_path / "child.yaml").write_text(
        "name: child\ninitial: build\ncontext: {region: ~}\n"
        "outputs: {url: 'https://${context.region}.example.com', built: '${captured.b.output}'}\n"
        "states:\n  build:\n    action: make\n    capture: b\n    next: done\n"
        "  done: {terminal: true}\n"
    )
    script = tmp_path / "s.test.yaml"
    head = "loop: child.yaml\nset: {region: eu}\nstates:\n  build: {output: v2}\n"
    good = "expect: {outputs: {url: 'https://eu.example.com', built: v2}}\n"
    script.write_text(head + good)
    done = project.ll("test", str(script))
    assert done.returncode == 0, done.stdout + done.stderr
    script.write_text(head + "expect: {outputs: {url: 'https://us.example.com', built: v2}}\n")
    done = project.ll("test", str(script))
    assert done.returncode == 1
    assert "https://us.example.com" in done.stdout


def test_path_diff_marks_the_first_difference() -> None:
    text = path_diff(["a", "b", "c"], ["a", "b"])
    lines = text.splitlines()
    assert lines[0] == "path differs at step 3:"
    assert lines[-1].split() == [">", "3", "c", "-"]
    assert path_diff(["a"], ["b"]).splitlines()[2].split() == [">", "1", "a", "b"]


def test_compare_names_each_difference() -> None:
    from little_loops.run.runner import RunResult
    from little_loops.sim.looptest import compare

    result = RunResult(
        run_id="r",
        outcome="failure",
        exit_code=1,
        final_state="broken",
        steps=2,
        duration_ms=0,
        path=("a", "broken"),
        run_dir=Path("."),
        error="state 'a' gave verdict 'error'",
    )
    expect = {"path": ["a", "b"], "outcome": "success", "exit_code": 1, "outputs": {"url": "x"}}
    found = compare(expect, result, None)
    assert found[0].startswith("path differs at step 2:")
    assert "outcome: expected success, got failure" in found
    assert "outputs: expected outputs, but the run records none" in found
    assert found[-1] == "the run: state 'a' gave verdict 'error'"
    assert compare({"exit_code": 1, "steps": 2}, result, None) == []
    assert compare({"outputs": {"url": "x"}}, result, {"url": "x"}) == []


def test_junit_through_a_link_to_standard_output_never_replaces_the_link(
    tmp_path: Path, ll_cmd: list[str]
) -> None:
    # `ll test ... --junit-xml /dev/stdout > log`, as root, would have renamed a file over the
    # system's /dev/stdout link, as `ll run --junit-xml` once did. The same link made here
    # (never the real /dev/stdout) stays a link and the report lands in the log. A process:
    # the link names this process's own fd 1.
    script = REPO / "loops" / "tests" / "gate.test.yaml"
    link = tmp_path / "stdout-link"
    link.symlink_to("/proc/self/fd/1")
    log = tmp_path / "log.txt"
    with log.open("w") as out:
        done = subprocess.run(
            [*ll_cmd, "test", str(script), "--junit-xml", str(link)],
            cwd=tmp_path, stdout=out, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert link.is_symlink()
    assert os.readlink(link) == "/proc/self/fd/1"
    text = log.read_text()
    assert "PASS " in text
    assert text.index("<testsuite") > text.index("PASS ")  # appended after what ll printed


def test_junit_to_a_link_replaces_its_target_and_keeps_the_link(
    project: Project, tmp_path: Path
) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "real.xml").write_text("old")
    (tmp_path / "ll-test.xml").symlink_to("reports/real.xml")
    script = REPO / "loops" / "tests" / "gate.test.yaml"
    done = project.ll("test", str(script), "--junit-xml", "ll-test.xml")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ll-test.xml").is_symlink()
    assert ET.parse(tmp_path / "reports" / "real.xml").getroot().tag == "testsuite"
