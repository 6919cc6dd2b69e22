"""GitHub Actions output of a run: annotations at the loop file's lines and a step summary."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from little_loops.errors import LoopError
from little_loops.model.loop import Loop
from little_loops.record.events import (
    LoopComplete,
    RunEvent,
)
from little_loops.record.history import (
    History,
    Step,
    failure_cause,
    is_num,
    outcome_text,
    run_root,
    shorten,
)

MAX_ANNOTATIONS = 10
_REASON_CHARS = 300


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m {secs}s"


def escape_data(text: str) -> str:
    """A workflow command's message: `%`, CR and LF encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as `escape_data`, plus `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _cell(text: str, limit: int = _REASON_CHARS) -> str:
    """Text safe in one Markdown table cell."""
    text = shorten(" ".join(text.split()), limit)
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
        self.record = History()

    def __call__(self, event: RunEvent) -> None:
        typed = self.record.feed(event)
        if isinstance(typed, LoopComplete) and not typed.path:  # not a child's end
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

    def annotations(self, record: History) -> list[Annotation]:
        """Every annotation for the run, most important first, before the cap."""
        complete = record.complete
        succeeded = complete is not None and complete.outcome == "success"
        loop_name = record.loop or self.loop_file.stem
        found: list[Annotation] = []
        if complete is not None and not succeeded:
            where = complete.final_state
            found.append(
                Annotation(
                    "notice" if complete.exit_code == 6 else "error",  # suspended, paused
                    f"ll: {loop_name} {complete.outcome}",
                    f"loop '{loop_name}' {outcome_text(complete)}",
                    self.state_lines.get(where),
                )
            )
        groups: dict[tuple[str, str, str, bool], list[int]] = {}
        for visit in record.steps:
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

    def annotation_lines(self, record: History) -> list[str]:
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

    def summary(self, record: History) -> str:
        """The Markdown appended to the step summary."""
        complete = record.complete
        steps = record.steps
        outcome = complete.outcome if complete else "unknown"
        loop_name = record.loop or self.loop_file.stem
        mark = {"success": "✅", "suspended": "⏸️"}.get(outcome, "❌")
        duration = complete.duration_ms if complete else None
        seconds = duration / 1000.0 if is_num(duration) else 0.0
        cost = complete.cost_usd if complete else None
        final_state, exit_code, run_id = (
            (complete.final_state, complete.exit_code, complete.run_id)
            if complete
            else ("", "", "")
        )
        parts = [
            f"### {mark} ll: {_cell(loop_name)} — {_cell(outcome)}",
            "",
            "| outcome | final state | exit code | steps | time | cost | run |",
            "|---|---|---:|---:|---:|---:|---|",
            f"| {_cell(outcome)} | `{_cell(final_state)}` "
            f"| {exit_code} | {complete.steps if complete else len(steps)} "
            f"| {_duration(seconds)} | ${cost if is_num(cost) else 0:.4f} "
            f"| `{_cell(run_id)}` |",
            "",
            f"`{_cell(self.loop_file.as_posix())}` {_cell(outcome_text(complete))}."
            if complete
            else "The run did not finish.",
            "",
        ]
        parts.extend(self._why(record))
        judged = [v for v in steps if v.judged]
        parts.append("#### Judge verdicts")
        parts.append("")
        if judged:
            parts.append("| step | state | verdict | confidence | reason |")
            parts.append("|---:|---|---|---:|---|")
            for visit in judged:
                confidence = visit.details.confidence
                conf = f"{confidence:.2f}" if confidence is not None else ""
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
            from little_loops.report.graph import mermaid

            # The stops are not drawn here (they never were): only the states and routes.
            visits, taken = record.overlay(stops=False)
            parts.extend(
                ["```mermaid", mermaid(self.loop, visits=visits, taken=taken).rstrip(), "```"]
            )
        else:
            parts.append(" → ".join(f"`{_cell(v.state)}`" for v in steps) or "(no steps)")
        parts.append("")
        if steps:
            parts.append(f"<details><summary>All {len(steps)} steps</summary>")
            parts.append("")
            parts.append("| step | state | verdict | time | reason |")
            parts.append("|---:|---|---|---:|---|")
            parts.extend(_step_rows(record))
            parts.append("")
            parts.append("</details>")
            parts.append("")
        return "\n".join(parts) + "\n"

    def _why(self, record: History) -> list[str]:
        """A failure terminal's cause (with a fork's branches and what the terminal printed),
        or a suspended run's questions with the command that answers each."""
        complete = record.complete
        if complete is None:
            return []
        root = run_root(record, self.base_dir)
        if complete.outcome == "failure":
            _, body = failure_cause(outcome_text(complete), record.steps, root)
            details = body.split("\n", 2)[2] if body.count("\n") >= 2 else ""
            if not details:
                return []
            fenced = details.replace("```", "` ` `")
            return ["#### Why it failed", "", "```text", fenced, "```", ""]
        if complete.outcome != "suspended" or root is None:
            return []
        from little_loops.record.questions import tree_pending

        try:
            state = json.loads((root / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        try:
            pending = tree_pending(root, state) if isinstance(state, dict) else []
        except LoopError:  # a malformed question: `ll status` names the file
            return []
        if not pending:
            return []
        run_id = complete.run_id or root.name
        lines = ["#### Waiting for an answer", ""]
        for q in pending:
            qid = q.id
            choices = "|".join(q.choices) or "TEXT"
            key = "" if len(pending) == 1 else f"{qid.rpartition('@')[0]}="
            expires = f" (expires {q.expires_at})" if q.expires_at else ""
            lines.append(f"- **{_cell(qid)}**: {_cell(q.prompt)}{expires}")
            lines.append("")
            lines.append("  ```bash")
            lines.append(f"  ll resume {run_id} --answer {key}{choices} [--note TEXT]")
            lines.append("  ```")
        lines.append("")
        return lines


def write_outputs(path: Path, run_id: str, exit_code: int, pending: list[str]) -> str | None:
    """Append `run_id`, `exit_code`, `suspended` and `pending` (space-separated question ids)
    to `$GITHUB_OUTPUT`, for a later job or step; the problem in one line when it cannot."""
    lines = [
        f"run_id={run_id}",
        f"exit_code={exit_code}",
        f"suspended={'true' if pending else 'false'}",
        f"pending={' '.join(pending)}",
    ]
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    except OSError as exc:
        return f"cannot write the step outputs to {path}: {exc}"
    return None


def _step_rows(record: History) -> list[str]:
    """A row a step; a `loop:` state's child steps follow it (`3.1`, `deploy/canary`), and a
    fork's branches (`2.eu-west.1`, `regions/eu-west/canary`; an action branch `2.lint`)."""
    rows: list[str] = []
    numbers: dict[int, str] = {id(record): ""}
    for node in record.walk():
        visit, run = node.step, node.run
        prefix = numbers.get(id(run), "")
        step = f"{prefix}{node.branch}" if node.branch is not None else f"{prefix}{visit.step}"
        why = visit.reason if visit.failed or visit.judged else ""
        rows.append(
            f"| {step} | `{_cell(node.where)}` | {_cell(visit.verdict or '-')} "
            f"| {_duration(visit.seconds)} | {_cell(why)} |"
        )
        child = run.children.get(visit.step)
        if child is not None:
            numbers[id(child)] = f"{step}."
        for key, branch in run.branches.get(visit.step, {}).items():
            numbers[id(branch)] = f"{step}." if _action(run, visit, key) else f"{step}.{key}."
    return rows


def _action(run: History, visit: Step, key: str) -> bool:
    start = run.branch_starts.get(visit.step, {}).get(key)
    return start is not None and not start.file


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
