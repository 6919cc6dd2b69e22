"""Reports for CI, written when a run ends: a JUnit XML file and GitHub Actions output.

Both are event listeners (callables taking one event dict) that `ll run` / `ll resume` attach
next to the renderer. They gather the run's steps as events arrive and do their work on
`loop_complete`. A resumed run's listeners only see the events after the resume, so at the
end they re-read the whole event log of the run, when it is found under `base_dir`.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, TypeGuard
from xml.etree import ElementTree as ET

from .errors import EXIT_USAGE, LoopError
from .events import Event, read_events
from .model import Loop, base_verdict
from .store import RUNS, atomic_write_text

# Verdicts reported as failed steps (also with the `_uncertain` suffix).
FAILING_VERDICTS = frozenset({"failure", "error", "timeout"})
MAX_ANNOTATIONS = 10
_ACTION_CHARS = 2000
_REASON_CHARS = 300


# -- the steps of a run, from its events ----------------------------------------------------


@dataclass
class Visit:
    """One state visit (one step), as the events describe it."""

    step: int
    state: str
    started: str
    ended: str
    action: str | None = None
    action_type: str | None = None
    exit_code: int | None = None
    duration_ms: int | None = None
    timed_out: bool = False
    eval_type: str | None = None
    verdict: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    retries: int = 0
    fail_open: str | None = None
    why: str | None = None  # the evaluate event's `reason` (reasons.py)
    tail: list[str] = field(default_factory=list)  # its `tail`: the last lines printed
    routed_to: str | None = None  # where its verdict sent the run; None: nowhere
    visit: int = 1  # the how-manieth visit of this state in the run

    @property
    def seconds(self) -> float:
        start, end = _parse_ts(self.started), _parse_ts(self.ended)
        if start is not None and end is not None and end >= start:
            return (end - start).total_seconds()
        return (self.duration_ms or 0) / 1000.0

    @property
    def failed(self) -> bool:
        """A `failure`, `error` or `timeout` verdict (with or without `_uncertain`)."""
        verdict = self.verdict
        if verdict is None:
            return False
        return (base_verdict(verdict) or verdict) in FAILING_VERDICTS

    @property
    def stopped_run(self) -> bool:
        """A failed verdict no route took onward: it ended the run (or a failing terminal)."""
        return self.failed and self.routed_to is None

    @property
    def name(self) -> str:
        """The test case name, the same in every run of the loop: `check (visit 2)`."""
        return f"{self.state} (visit {self.visit})"

    @property
    def reason(self) -> str:
        """Why the verdict was given: the runner's one-line reason, the evaluator's `reason`
        or `error`, else a short fact."""
        if self.why and self.why.strip():
            return " ".join(self.why.split())
        for key in ("reason", "error"):
            value = self.details.get(key)
            if isinstance(value, str) and value.strip():
                return " ".join(value.split())
        if self.verdict == "timeout":
            limit = self.details.get("timeout_s")
            return f"the action timed out after {limit:g}s" if _is_num(limit) else "timed out"
        if self.exit_code is not None:
            return f"exit code {self.exit_code}"
        return f"verdict {self.verdict}"

    @property
    def judged(self) -> bool:
        """True when a model gave the verdict (it reports a confidence)."""
        return self.eval_type == "llm_structured" or "confidence" in self.details


class RunRecord:
    """Collects a run's events into visits; the report classes read it at `loop_complete`."""

    def __init__(self) -> None:
        self.start: Event | None = None
        self.complete: Event | None = None
        self.resumed = False
        self.path_events: list[Event] = []  # state_enter and route, for the graph overlay
        self._visits: dict[int, Visit] = {}

    @classmethod
    def from_events(cls, events: list[Event]) -> RunRecord:
        record = cls()
        for event in events:
            record.feed(event)
        return record

    @property
    def visits(self) -> list[Visit]:
        ordered = [self._visits[step] for step in sorted(self._visits)]
        seen: dict[str, int] = {}
        for visit in ordered:
            seen[visit.state] = visit.visit = seen.get(visit.state, 0) + 1
        return ordered

    def feed(self, event: Event) -> None:
        name = event.get("event")
        ts = str(event.get("ts", ""))
        if name == "loop_start":
            if self.start is None:
                self.start = event
            if event.get("resumed"):
                self.resumed = True
            return
        if name == "loop_complete":
            self.complete = event
            return
        if name in ("state_enter", "route"):
            self.path_events.append(event)
        step, state = event.get("step"), event.get("state")
        if not isinstance(step, int) or not isinstance(state, str):
            return
        if name == "state_enter":
            # A step entered again after a resume starts over: the new visit replaces it.
            self._visits[step] = Visit(step, state, ts, ts)
            return
        visit = self._visits.get(step)
        if visit is None:
            return
        visit.ended = ts or visit.ended
        if name == "action_start":
            # A retry runs the action again: only the last attempt's result counts.
            visit.action = str(event.get("action", ""))
            visit.action_type = str(event.get("action_type", "")) or None
            visit.exit_code = visit.duration_ms = visit.verdict = visit.eval_type = None
            visit.timed_out = False
            visit.details = {}
            visit.why, visit.tail = None, []
        elif name == "action_complete":
            code = event.get("exit_code")
            visit.exit_code = code if isinstance(code, int) else None
            took = event.get("duration_ms")
            visit.duration_ms = took if isinstance(took, int) else None
            visit.timed_out = bool(event.get("timed_out"))
            if visit.timed_out and visit.verdict is None:
                visit.verdict = "timeout"
        elif name == "evaluate":
            visit.eval_type = str(event.get("type", "")) or None
            visit.verdict = str(event.get("verdict", "")) or None
            details = event.get("details")
            visit.details = dict(details) if isinstance(details, Mapping) else {}
            why, tail = event.get("reason"), event.get("tail")
            visit.why = why if isinstance(why, str) else None
            visit.tail = [str(line) for line in tail] if isinstance(tail, list) else []
        elif name == "retry":
            visit.retries += 1
        elif name == "route":
            visit.routed_to = str(event.get("to", ""))
        elif name == "judge_fail_open":
            visit.fail_open = str(event.get("error", "")) or "the judge failed"

    def with_history(self, base_dir: Path | None) -> RunRecord:
        """For a resumed run: the record of the whole run from its event log, if found."""
        if not self.resumed or self.complete is None:
            return self
        run_id = self.complete.get("run_id")
        if not isinstance(run_id, str) or not run_id:
            return self
        events = read_events((base_dir or Path.cwd()) / RUNS / run_id / "events.jsonl")
        full = RunRecord.from_events(events)
        if full.complete is None or full.complete.get("ts") != self.complete.get("ts"):
            return self
        return full


def _parse_ts(text: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _is_num(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m {secs}s"


def _outcome_text(complete: Event) -> str:
    outcome = complete.get("outcome")
    where = complete.get("final_state")
    text = {
        "success": f"reached the success terminal '{where}'",
        "failure": f"reached the failure terminal '{where}'",
        "max_iterations": f"hit max_iterations at '{where}'",
        "budget": f"spent its cost budget at '{where}'",
        "timeout": f"hit the loop timeout at '{where}'",
        "interrupted": f"was interrupted at '{where}'",
        "error": f"ended in error at '{where}'",
    }.get(str(outcome), f"ended with outcome {outcome} at '{where}'")
    error = complete.get("error")
    if outcome == "interrupted" and isinstance(error, str) and error.startswith(("int", "term")):
        return f"was {error} at '{where}'"  # "interrupted (SIGINT)": the outcome said once
    return f"{text}: {error}" if error else text


# -- JUnit XML ------------------------------------------------------------------------------

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
        self.record = RunRecord()
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

    def __call__(self, event: Event) -> None:
        self.record.feed(event)
        if event.get("event") == "loop_complete":
            self.write()

    def write(self) -> None:
        """Write the report now (done for you at `loop_complete`).

        A write that fails (disk full, a directory made read-only during the run) does not
        change how the run ended: `problem` says what went wrong, for the caller to warn.
        A path that is not a regular file (`/dev/stdout`, a pipe) is written to directly.
        """
        self.problem = None
        try:
            text = junit_xml(self.record.with_history(self.base_dir), self.loop_file)
            if self.path.exists() and not self.path.is_file():
                with self.path.open("w", encoding="utf-8") as fh:
                    fh.write(text)
            else:
                atomic_write_text(self.path, text)
        except OSError as exc:
            self.problem = f"cannot write the JUnit report to {self.path}: {exc.strerror or exc}"


def junit_xml(record: RunRecord, loop_file: str) -> str:
    """The JUnit XML text of one run (`<testsuites>` holding one `<testsuite>`)."""
    start = record.start or {}
    complete = record.complete or {}
    loop_name = str(start.get("loop") or Path(loop_file).stem)
    suite = ET.Element("testsuite", name=_xml(loop_name))
    properties = ET.SubElement(suite, "properties")
    props = {
        "run_id": complete.get("run_id") or start.get("run_id"),
        "loop_file": loop_file,
        "outcome": complete.get("outcome"),
        "exit_code": complete.get("exit_code"),
        "final_state": complete.get("final_state"),
        "steps": complete.get("steps"),
        "cost_usd": complete.get("cost_usd"),
    }
    for key, value in props.items():
        if value is not None:
            ET.SubElement(properties, "property", name=key, value=_xml(str(value)))

    failures = errors = skipped = 0
    visits = record.visits
    for index, visit in enumerate(visits):
        case = ET.SubElement(
            suite,
            "testcase",
            name=_xml(visit.name),
            classname=_xml(loop_name),
            time=_seconds(visit.seconds),
        )
        last = index == len(visits) - 1
        if visit.stopped_run:
            failures += 1
            verdict = visit.verdict or "failure"
            message = f"state '{visit.state}' gave verdict '{verdict}': {visit.reason}"
            failure = ET.SubElement(
                case, "failure", message=_xml(_shorten(message, 1000)), type=_xml(verdict)
            )
            failure.text = _xml("\n".join([visit.reason, *_tail_lines(visit)]))
        elif (
            visit.verdict is None
            and last
            and complete.get("outcome")
            not in (
                "success",
                "failure",
                "max_iterations",
            )
        ):
            skipped += 1
            ET.SubElement(
                case,
                "skipped",
                message=_xml(
                    f"the run ended ({complete.get('outcome')}) before this step was judged"
                ),
            )
        out = ET.SubElement(case, "system-out")
        out.text = _xml(_step_text(visit))

    outcome = complete.get("outcome")
    case = ET.SubElement(suite, "testcase", name="outcome", classname=_xml(loop_name), time="0.000")
    if complete and outcome != "success":
        text = _outcome_text(complete)
        if outcome == "failure":
            failures += 1
            ET.SubElement(case, "failure", message=_xml(text), type="failure").text = _xml(text)
        else:
            errors += 1
            ET.SubElement(case, "error", message=_xml(text), type=_xml(str(outcome))).text = _xml(
                text
            )
    elif not complete:
        errors += 1
        ET.SubElement(case, "error", message="the run did not finish", type="incomplete")

    total = len(visits) + 1
    duration = complete.get("duration_ms")
    seconds = duration / 1000.0 if _is_num(duration) else sum(v.seconds for v in visits)
    started = _parse_ts(str(start.get("ts", ""))) or datetime.now(timezone.utc)
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


def _tail_lines(visit: Visit) -> list[str]:
    if not visit.tail:
        return []
    return ["", f"last {len(visit.tail)} lines of output:", *visit.tail]


def _step_text(visit: Visit) -> str:
    lines: list[str] = [f"step {visit.step}"]
    if visit.action is not None:
        kind = f" ({visit.action_type})" if visit.action_type else ""
        lines.append(f"action{kind}: {_shorten(visit.action.rstrip(), _ACTION_CHARS)}")
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
        confidence = visit.details.get("confidence")
        if _is_num(confidence):
            lines.append(f"confidence: {confidence:.2f}")
        if visit.failed or visit.judged:
            lines.append(f"reason: {_shorten(visit.reason, _ACTION_CHARS)}")
    if visit.fail_open:
        lines.append(f"judge failed, fail_open made it success: {visit.fail_open}")
    if visit.failed:
        lines += _tail_lines(visit)
    return "\n".join(lines)


# -- GitHub Actions -------------------------------------------------------------------------


def escape_data(text: str) -> str:
    """A workflow command's message: `%`, CR and LF encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as `escape_data`, plus `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _cell(text: str, limit: int = _REASON_CHARS) -> str:
    """Text safe in one Markdown table cell."""
    text = _shorten(" ".join(text.split()), limit)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")


@dataclass(frozen=True)
class Annotation:
    """One `::error` / `::warning` workflow command."""

    level: str  # "error" or "warning"
    title: str
    message: str
    line: int | None

    def command(self, file: str) -> str:
        props = [f"file={escape_property(file)}"]
        if self.line is not None:
            props.append(f"line={self.line}")
        props.append(f"title={escape_property(self.title)}")
        return f"::{self.level} {','.join(props)}::{escape_data(self.message)}"


class GitHubReport:
    """On `loop_complete`: annotations on `out` and a Markdown summary appended to a file.

    Annotations point at the loop file's line of each failing state: steps with a `failure`,
    `error` or `timeout` verdict, grouped by state, verdict and the first line of the reason,
    after one for the run's ending when it was not a success. A verdict that stopped the run
    is an error; one a route took onward (the loop handled it) is a warning. At most 10, then
    one `::notice` saying how many were cut.
    `summary_path` (`$GITHUB_STEP_SUMMARY`) gets the outcome, steps, time, cost, the judge's
    verdicts with confidence and reasons, and the path taken (a Mermaid diagram when `loop`
    is given).
    """

    def __init__(
        self,
        summary_path: Path | None,
        loop_file: Path,
        state_lines: Mapping[str, int],
        out: IO[str],
        *,
        loop: Loop | None = None,
        base_dir: Path | None = None,
    ) -> None:
        self.summary_path = summary_path
        self.loop_file = loop_file
        self.state_lines = dict(state_lines)
        self.out = out
        self.loop = loop
        self.base_dir = base_dir
        self.record = RunRecord()

    def __call__(self, event: Event) -> None:
        self.record.feed(event)
        if event.get("event") == "loop_complete":
            self.finish()

    def finish(self) -> None:
        """Print the annotations and append the summary (done for you at `loop_complete`)."""
        record = self.record.with_history(self.base_dir)
        lines = self.annotation_lines(record)
        if lines:
            self.out.write("\n".join(lines) + "\n")
            self.out.flush()
        if self.summary_path is not None:
            try:
                with self.summary_path.open("a", encoding="utf-8") as fh:
                    fh.write(self.summary(record))
            except OSError as exc:
                message = f"ll: cannot write the step summary to {self.summary_path}: {exc}"
                self.out.write(f"::warning::{escape_data(message)}\n")
                self.out.flush()

    # -- annotations ----------------------------------------------------------------------

    def annotations(self, record: RunRecord) -> list[Annotation]:
        """Every annotation for the run, most important first, before the cap."""
        complete = record.complete or {}
        succeeded = complete.get("outcome") == "success"
        loop_name = str((record.start or {}).get("loop") or self.loop_file.stem)
        found: list[Annotation] = []
        if complete and not succeeded:
            where = str(complete.get("final_state", ""))
            found.append(
                Annotation(
                    "error",
                    f"ll: {loop_name} {complete.get('outcome')}",
                    f"loop '{loop_name}' {_outcome_text(complete)}",
                    self.state_lines.get(where),
                )
            )
        groups: dict[tuple[str, str, str, bool], list[int]] = {}
        for visit in record.visits:
            if visit.failed:
                key = (visit.state, visit.verdict or "failure", visit.reason, visit.stopped_run)
                groups.setdefault(key, []).append(visit.step)
        for (state, verdict, reason, stopped), steps in groups.items():
            where = f"step {steps[0]}" if len(steps) == 1 else _steps_text(steps)
            found.append(
                Annotation(
                    "error" if stopped and not succeeded else "warning",
                    f"ll: {state} gave {verdict}",
                    f"state '{state}' gave verdict '{verdict}' ({where}): {reason}",
                    self.state_lines.get(state),
                )
            )
        return found

    def annotation_lines(self, record: RunRecord) -> list[str]:
        """The workflow commands to print: at most 10 annotations, then the count cut."""
        found = self.annotations(record)
        file = self.loop_file.as_posix()
        lines = [a.command(file) for a in found[:MAX_ANNOTATIONS]]
        cut = len(found) - MAX_ANNOTATIONS
        if cut > 0:
            lines.append(
                f"::notice::{escape_data(f'll: {cut} more annotation')}"
                f"{'s' if cut != 1 else ''} not shown; see the step summary"
            )
        return lines

    # -- summary --------------------------------------------------------------------------

    def summary(self, record: RunRecord) -> str:
        """The Markdown appended to the step summary."""
        complete = record.complete or {}
        start = record.start or {}
        outcome = str(complete.get("outcome", "unknown"))
        loop_name = str(start.get("loop") or self.loop_file.stem)
        mark = "✅" if outcome == "success" else "❌"
        duration = complete.get("duration_ms")
        seconds = duration / 1000.0 if _is_num(duration) else 0.0
        cost = complete.get("cost_usd")
        parts = [
            f"### {mark} ll: {_cell(loop_name)} — {_cell(outcome)}",
            "",
            "| outcome | final state | exit code | steps | time | cost | run |",
            "|---|---|---:|---:|---:|---:|---|",
            f"| {_cell(outcome)} | `{_cell(str(complete.get('final_state', '')))}` "
            f"| {complete.get('exit_code', '')} | {complete.get('steps', len(record.visits))} "
            f"| {_duration(seconds)} | ${cost if _is_num(cost) else 0:.4f} "
            f"| `{_cell(str(complete.get('run_id', '')))}` |",
            "",
            f"`{_cell(self.loop_file.as_posix())}` {_cell(_outcome_text(complete))}."
            if complete
            else "The run did not finish.",
            "",
        ]
        judged = [v for v in record.visits if v.judged]
        parts.append("#### Judge verdicts")
        parts.append("")
        if judged:
            parts.append("| step | state | verdict | confidence | reason |")
            parts.append("|---:|---|---|---:|---|")
            for visit in judged:
                confidence = visit.details.get("confidence")
                conf = f"{confidence:.2f}" if _is_num(confidence) else ""
                parts.append(
                    f"| {visit.step} | `{_cell(visit.state)}` | {_cell(visit.verdict or '')} "
                    f"| {conf} | {_cell(visit.reason)} |"
                )
        else:
            parts.append("No state was judged by a model in this run.")
        parts.append("")
        parts.append("#### Path taken")
        parts.append("")
        if self.loop is not None:
            from .graph import mermaid, overlay_from_events

            visits, taken = overlay_from_events(record.path_events)
            parts.extend(
                ["```mermaid", mermaid(self.loop, visits=visits, taken=taken).rstrip(), "```"]
            )
        else:
            parts.append(" → ".join(f"`{_cell(v.state)}`" for v in record.visits) or "(no steps)")
        parts.append("")
        if record.visits:
            parts.append(f"<details><summary>All {len(record.visits)} steps</summary>")
            parts.append("")
            parts.append("| step | state | verdict | time | reason |")
            parts.append("|---:|---|---|---:|---|")
            for visit in record.visits:
                why = visit.reason if visit.failed or visit.judged else ""
                parts.append(
                    f"| {visit.step} | `{_cell(visit.state)}` | {_cell(visit.verdict or '-')} "
                    f"| {_duration(visit.seconds)} | {_cell(why)} |"
                )
            parts.append("")
            parts.append("</details>")
            parts.append("")
        return "\n".join(parts) + "\n"


def _steps_text(steps: list[int]) -> str:
    shown = ", ".join(map(str, steps[:8]))
    more = f" and {len(steps) - 8} more" if len(steps) > 8 else ""
    return f"{len(steps)} times, steps {shown}{more}"


def github_report_from_env(
    loop: Loop,
    out: IO[str],
    *,
    env: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> GitHubReport | None:
    """A GitHubReport when running in GitHub Actions (`GITHUB_ACTIONS=true`), else None.

    The loop file is named relative to `GITHUB_WORKSPACE` (else the working directory), as
    annotations need; the summary goes to `GITHUB_STEP_SUMMARY` when it is set.
    """
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS") != "true":
        return None
    summary = env.get("GITHUB_STEP_SUMMARY")
    root = Path(env.get("GITHUB_WORKSPACE") or Path.cwd())
    path = loop.path
    with contextlib.suppress(ValueError, OSError):
        path = path.resolve().relative_to(root.resolve())
    lines = {name: state.pos.line for name, state in loop.states.items()}
    return GitHubReport(
        Path(summary) if summary else None, path, lines, out, loop=loop, base_dir=base_dir
    )
