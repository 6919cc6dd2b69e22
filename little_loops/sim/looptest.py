"""`ll test`: each script's simulation run for real (no action, no sleep), its `expect:` checked.

A script names its loop (`loop:`), context values (`set:`), the simulation (`states:`,
`default:`) and what the run must do (`expect:` keys in `EXPECT_KEYS`). Runs go into a
temporary base directory, removed afterwards, so nothing is left in the user's tree.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from xml.etree import ElementTree as ET

from little_loops.errors import (
    EXIT_FAILURE,
    EXIT_SUCCESS,
    EXIT_USAGE,
    LoopError,
)
from little_loops.load.loader import load
from little_loops.record.store import write_named_file
from little_loops.run.runner import (
    Runner,
    RunOptions,
    RunResult,
)
from little_loops.sim.script import ScriptError
from little_loops.sim.simulate import simulation
from little_loops.wording import did_you_mean

EXPECT_KEYS = ("path", "outcome", "exit_code", "final_state", "outputs", "steps")


@dataclass
class Outcome:
    """One script's result: passed, its mismatches, or why it could not run."""

    script: str
    mismatches: list[str] = field(default_factory=list)
    error: str | None = None
    steps: int = 0
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.error is None and not self.mismatches


def run_tests(scripts: list[Path], *, out: IO[str], junit_xml: str | None = None) -> int:
    """Run every script, print PASS/FAIL/ERROR lines; 0 all pass, 1 a mismatch, 2 bad input."""
    results = []
    for path in scripts:
        started = time.perf_counter()
        result = run_one(path)
        result.seconds = time.perf_counter() - started
        results.append(result)
        out.write(_report(result))
    passed = sum(r.passed for r in results)
    errors = sum(r.error is not None for r in results)
    failed = len(results) - passed - errors
    out.write(f"{len(results)} scripts: {passed} passed, {failed} failed, {errors} invalid\n")
    if junit_xml:
        write_junit(Path(junit_xml), results)
    if errors:
        return EXIT_USAGE
    return EXIT_FAILURE if failed else EXIT_SUCCESS


def run_one(path: Path) -> Outcome:
    """One script: its loop run under the simulation in a temporary base directory."""
    outcome = Outcome(str(path))
    try:
        from little_loops.sim.script import read_script

        script = read_script(path, collect=True)
        for key in script.expect:  # every mistake is told at once, by `simulation` below
            if key not in EXPECT_KEYS:
                line = script.expect_lines.get(str(key), 1)
                hint = did_you_mean(str(key), list(EXPECT_KEYS))
                script.mistakes.append(
                    ScriptError(script.file, line, f"unknown expect key '{key}'{hint}")
                )
        loop = load(script.loop_path())
        known = {*loop.context, *loop.inputs}  # inputs: the required ones have no default
        for key in script.sets:
            if key not in known:
                hint = did_you_mean(key, sorted(known))
                script.mistakes.append(
                    ScriptError(script.file, 1, f"set: the loop has no context key '{key}'{hint}")
                )
        replay = script.replay_path()
        _, actions, clock = simulation(path, loop, replay=replay is not None, script=script)
        with tempfile.TemporaryDirectory(prefix="ll-test-") as base:
            options = RunOptions(
                base_dir=Path(base),
                overrides=script.sets,
                allow_concurrent=True,
                replay=replay,
            )
            runner = Runner(
                loop,
                options,
                listeners=[actions.observe],
                clock=clock.clock(),
                action_layer=actions,
            )
            result = runner.run()
            outputs = runner.progress.outputs
    except LoopError as exc:
        outcome.error = exc.message
        return outcome
    outcome.steps = result.steps
    outcome.mismatches = compare(script.expect, result, outputs)
    return outcome


def compare(expect: dict[str, Any], result: RunResult, outputs: Any) -> list[str]:
    """Every way the run differs from `expect`, one text each (the path as a diff)."""
    out = []
    if "path" in expect:
        wanted = [str(s) for s in expect["path"] or []]
        if wanted != list(result.path):
            out.append(path_diff(wanted, list(result.path)))
    for key in ("outcome", "final_state", "exit_code", "steps"):
        if key in expect:
            got = getattr(result, key)
            if str(expect[key]) != str(got):
                out.append(f"{key}: expected {expect[key]}, got {got}")
    if "outputs" in expect:
        if outputs is None:
            out.append("outputs: expected outputs, but the run records none")
        else:
            for name, value in (expect["outputs"] or {}).items():
                got = outputs.get(name)
                if str(value) != str(got):
                    out.append(f"outputs.{name}: expected {value!r}, got {got!r}")
    if out and result.error:
        out.append(f"the run: {result.error}")
    return out


def path_diff(expected: list[str], actual: list[str]) -> str:
    """Both paths side by side, one step a line; the first difference marked with '>'."""
    first = next(
        (i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b),
        min(len(expected), len(actual)),
    )
    width = max([len("expected"), *(len(s) for s in expected)])
    lines = [f"path differs at step {first + 1}:", f"      step  {'expected':<{width}}  actual"]
    for i in range(max(len(expected), len(actual))):
        want = expected[i] if i < len(expected) else "-"
        got = actual[i] if i < len(actual) else "-"
        mark = ">" if i == first else " "
        lines.append(f"    {mark} {i + 1:>4}  {want:<{width}}  {got}")
    return "\n".join(lines)


def _report(result: Outcome) -> str:
    if result.error is not None:
        first, *more = result.error.splitlines() or [""]
        return f"ERROR {result.script}: {first}\n" + "".join(f"  {line}\n" for line in more)
    took = f"{result.steps} steps, {result.seconds * 1000:.0f} ms"
    if result.passed:
        return f"PASS  {result.script}  ({took})\n"
    body = "".join(f"  {line}\n" for text in result.mismatches for line in text.splitlines())
    return f"FAIL  {result.script}  ({took})\n{body}"


def write_junit(path: Path, results: list[Outcome]) -> None:
    """One test suite `ll test`, one test case per script."""
    suite = ET.Element(
        "testsuite",
        name="ll test",
        tests=str(len(results)),
        failures=str(sum(bool(r.mismatches) and r.error is None for r in results)),
        errors=str(sum(r.error is not None for r in results)),
        time=f"{sum(r.seconds for r in results):.3f}",
    )
    for result in results:
        case = ET.SubElement(
            suite,
            "testcase",
            name=Path(result.script).name,
            classname="ll test",
            file=result.script,
            time=f"{result.seconds:.3f}",
        )
        if result.error is not None:
            ET.SubElement(case, "error", message=result.error)
        elif result.mismatches:
            failure = ET.SubElement(case, "failure", message=result.mismatches[0].splitlines()[0])
            failure.text = "\n".join(result.mismatches)
    ET.indent(suite)
    text = ET.tostring(suite, encoding="unicode", xml_declaration=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_named_file(path, text + "\n")
    except OSError as exc:
        raise LoopError(f"cannot write the JUnit report to {path}: {exc.strerror or exc}") from exc
