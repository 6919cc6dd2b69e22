"""The JUnit XML report of a run: a test case per step and one for the outcome."""

from __future__ import annotations

import os
import re
import socket
from datetime import datetime, timezone
from pathlib import Path
from xml.etree import ElementTree as ET

from little_loops.errors import (
    EXIT_USAGE,
    LoopError,
)
from little_loops.record.events import (
    LoopComplete,
    RunEvent,
)
from little_loops.record.history import (
    History,
    Step,
    branch_lines,
    failure_cause,
    is_num,
    outcome_text,
    parse_ts,
    run_root,
    shorten,
    tail_lines,
)
from little_loops.record.store import write_named_file

_ACTION_CHARS = 2000
# Characters XML 1.0 does not allow, even escaped (ANSI escapes, NUL, ...).
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _xml(text: str) -> str:
    return _XML_INVALID.sub("\ufffd", text)


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


class JUnitReport:
    """Writes a JUnit XML file when the run ends: one test suite, a test case per state visit.

    Each visit is `STATE (visit N)` (classname: the loop's name), so names are the same from
    run to run. A `failure`, `error` or `timeout` verdict (also `_uncertain`) that stopped the
    run, or a failing terminal, is a `<failure type=VERDICT>` with the step's reason and the
    last lines it printed; such a verdict that a route took onward (the loop handled it) is a
    passed case whose `<system-out>` says so; a step cut off before it was judged is
    `<skipped>`. A last test case, `outcome`, fails when the run did not end at a success
    terminal: `<failure>` for a failure terminal, `<error>` for any other ending (error,
    limits, timeout, interruption). The file is replaced, not appended to: use one file per
    run and publish them together.
    """

    def __init__(self, path: Path, loop_file: str, *, base_dir: Path | None = None) -> None:
        self.path = path
        self.loop_file = loop_file
        self.base_dir = base_dir
        self.record = History()
        self.problem: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir():
                raise IsADirectoryError(21, "it is a directory")
            special = path.exists() and not path.is_file()  # /dev/stdout, a pipe
            if not special and not os.access(path.parent, os.W_OK):
                raise PermissionError(13, "the directory is not writable")
        except OSError as exc:
            raise LoopError(
                f"cannot write the JUnit report to {path}: {exc.strerror or exc}",
                exit_code=EXIT_USAGE,
            ) from None

    def __call__(self, event: RunEvent) -> None:
        typed = self.record.feed(event)
        if isinstance(typed, LoopComplete) and not typed.path:  # not a child's end
            self.write()

    def write(self) -> None:
        """Write the report now (done for you at `loop_complete`).

        A write that fails (disk full, a directory made read-only during the run) does not
        change how the run ended: `problem` says what went wrong, for the caller to warn.
        A path that is not a regular file (`/dev/stdout`, a pipe) is written into, never
        renamed over (`record.store.write_named_file`).
        """
        self.problem = None
        try:
            record = self.record.with_history(self.base_dir)
            text = junit_xml(record, self.loop_file, run_dir=run_root(record, self.base_dir))
            write_named_file(self.path, text)
        except OSError as exc:
            self.problem = f"cannot write the JUnit report to {self.path}: {exc.strerror or exc}"


def junit_xml(record: History, loop_file: str, *, run_dir: Path | None = None) -> str:
    """The JUnit XML text of one run (`<testsuites>` holding one `<testsuite>`).

    With `run_dir`, a fork's test case lists its branches with their verdicts and output,
    and a run that ended at a failure terminal has the cause in its `outcome` case: the
    failed verdict the loop routed there, that state's branches, and what the terminal
    printed.
    """
    start, complete = record.start, record.complete
    loop_name = (start.loop if start else "") or Path(loop_file).stem
    suite = ET.Element("testsuite", name=_xml(loop_name))
    properties = ET.SubElement(suite, "properties")
    props: dict[str, object] = {"run_id": record.run_id, "loop_file": loop_file}
    if complete is not None:
        props.update(
            outcome=complete.outcome,
            exit_code=complete.exit_code,
            final_state=complete.final_state,
            steps=complete.steps,
            cost_usd=complete.cost_usd,
        )
    for key, value in props.items():
        if value is not None:
            ET.SubElement(properties, "property", name=key, value=_xml(str(value)))

    outcome = complete.outcome if complete else None
    failures = errors = skipped = 0
    visits = record.steps
    last_step = visits[-1].step if visits else None
    # Every step of the tree is a case, a child's and a branch's named by its path
    # (`call/inner/s (visit 1)`). A step that stopped its run is a failure when every step
    # calling it stopped its own run too, up to this one.
    stopping: dict[int, bool] = {id(record): True}
    for node in record.walk():
        visit, run = node.step, node.run
        top = run is record
        where = run_dir if top else run.dir  # the directory of the run the step is in
        case = ET.SubElement(
            suite,
            "testcase",
            name=_xml(node.name),
            classname=_xml(".".join((loop_name, *node.path))),
            time=_seconds(visit.seconds),
        )
        stops = visit.stopped_run and stopping.get(id(run), False)
        if stops:
            failures += 1
            verdict = visit.verdict or "failure"
            message = f"state '{visit.state}' gave verdict '{verdict}': {visit.reason}"
            failure = ET.SubElement(
                case, "failure", message=_xml(shorten(message, 1000)), type=_xml(verdict)
            )
            failure.text = _xml(
                "\n".join([visit.reason, *tail_lines(visit), *branch_lines(where, visit)])
            )
        elif (
            top
            and visit.verdict is None
            and visit.step == last_step
            and outcome not in ("success", "failure", "max_iterations")
        ):
            skipped += 1
            ET.SubElement(
                case,
                "skipped",
                message=_xml(f"the run ended ({outcome}) before this step was judged"),
            )
        out = ET.SubElement(case, "system-out")
        out.text = _xml("\n".join([_step_text(visit), *branch_lines(where, visit)]))
        below = [run.children.get(visit.step), *run.branches.get(visit.step, {}).values()]
        for child in below:
            if child is not None:
                stopping[id(child)] = stops

    case = ET.SubElement(suite, "testcase", name="outcome", classname=_xml(loop_name), time="0.000")
    if complete is not None and outcome != "success":
        text = outcome_text(complete)
        if outcome == "suspended":  # waiting for a person: neither failed nor passed yet
            skipped += 1
            ET.SubElement(case, "skipped", message=_xml(text))
        elif outcome == "failure":
            failures += 1
            message, body = failure_cause(text, visits, run_dir)
            ET.SubElement(
                case, "failure", message=_xml(shorten(message, 1000)), type="failure"
            ).text = _xml(body)
        else:
            errors += 1
            ET.SubElement(case, "error", message=_xml(text), type=_xml(str(outcome))).text = _xml(
                text
            )
    elif complete is None:
        errors += 1
        ET.SubElement(case, "error", message="the run did not finish", type="incomplete")

    total = len(suite.findall("testcase"))
    duration = complete.duration_ms if complete else None
    seconds = duration / 1000.0 if is_num(duration) else sum(v.seconds for v in visits)
    started = parse_ts(start.ts if start else "") or datetime.now(timezone.utc)
    suite.attrib.update(
        tests=str(total),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        time=_seconds(seconds),
        timestamp=started.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
        hostname=_xml(socket.gethostname() or "localhost"),
    )
    # ElementTree keeps attribute insertion order; put name first for readers.
    suite.attrib = {"name": suite.attrib.pop("name"), **suite.attrib}
    root = ET.Element(
        "testsuites",
        name="ll",
        tests=str(total),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        time=_seconds(seconds),
    )
    root.append(suite)
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _step_text(visit: Step) -> str:
    lines: list[str] = [f"step {visit.step}"]
    if visit.action is not None:
        kind = f" ({visit.action_type})" if visit.action_type else ""
        lines.append(f"action{kind}: {shorten(visit.action.rstrip(), _ACTION_CHARS)}")
    if visit.timed_out:
        lines.append(f"timed out after {(visit.duration_ms or 0) / 1000:.2f} s")
    elif visit.exit_code is not None:
        lines.append(f"exit code {visit.exit_code} after {(visit.duration_ms or 0) / 1000:.2f} s")
    if visit.retries:
        lines.append(f"retried {visit.retries} time{'s' if visit.retries != 1 else ''}")
    if visit.verdict is not None:
        how = f" ({visit.eval_type})" if visit.eval_type else ""
        lines.append(f"verdict: {visit.verdict}{how}")
        if visit.failed and visit.routed_to is not None:
            lines.append(f"routed to '{visit.routed_to}': the loop handled this verdict")
        confidence = visit.details.confidence
        if confidence is not None:
            lines.append(f"confidence: {confidence:.2f}")
        if visit.failed or visit.judged:
            lines.append(f"reason: {shorten(visit.reason, _ACTION_CHARS)}")
    if visit.fail_open:
        lines.append(f"judge failed, fail_open made it success: {visit.fail_open}")
    if visit.failed:
        lines += tail_lines(visit)
    return "\n".join(lines)
