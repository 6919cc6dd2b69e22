"""A run's story, folded from its events: its steps, their verdicts and routes, how it ended.

Every reader of a run goes through `History` rather than its own reading of event dicts: the
renderer's path, the JUnit and GitHub reports, the graph overlay, `ll resume` (the path so far),
`ll status`, `ll list` and `ll logs --step`. It is fed one event at a time (a live listener) or
a whole log (`from_file`); events it does not know are skipped, so a log of an older or newer
`ll` still reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from little_loops.errors import LoopError
from little_loops.model.details import EMPTY_DETAILS, Details
from little_loops.model.fork import join_record
from little_loops.model.loop import base_verdict
from little_loops.model.records import field, record, replace
from little_loops.record.events import (
    ActionComplete,
    ActionStart,
    ChildStart,
    Evaluate,
    JudgeFailOpen,
    LoopComplete,
    LoopStart,
    Retry,
    Route,
    RunEvent,
    StateEnter,
    parse,
    read_records,
)

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any, TypeGuard

# The source name of the jump to `on_max_iterations` in an overlay (no route event marks it).
MAX_ITERATIONS = "$max_iterations"
# The target names in an overlay for a run that stopped at a state (SPEC section 6, rule 5).
STOPPED = {1: "$stopped:1", 3: "$stopped:3"}
# Verdicts that count as a failed step (also with the `_uncertain` suffix).
FAILING_VERDICTS = frozenset({"failure", "error", "timeout"})
# Lines shown of a failure terminal's printed report, and of each fork branch's output.
_OUTPUT_LINES = 20


@record
class Step:
    """One step (one state visit) as its events tell it; a retried step's last attempt."""

    step: int
    state: str
    started: str  # the ts of its state_enter
    ended: str  # the ts of its latest event
    action: str | None = None
    action_type: str | None = None
    exit_code: int | None = None
    duration_ms: int | None = None
    timed_out: bool = False
    eval_type: str | None = None
    verdict: str | None = None
    details: Details = EMPTY_DETAILS
    retries: int = 0  # retry events since the step was (last) entered
    attempts: int = 1  # the highest attempt number, a resumed step's earlier ones included
    fail_open: str | None = None
    why: str | None = None  # the evaluate event's `reason` (reasons.py)
    tail: list[str] = field(default_factory=list)  # its `tail`: the last lines printed
    routed_to: str | None = None  # where its verdict sent the run; None: nowhere
    via: str | None = None  # which key of the state routed it
    visit: int = 1  # the how-manieth visit of this state in the run
    # Attempt -> its action_starts (indices into `History.log_marks`), once per time it ran
    # (a step cut off and run again on resume ran its attempt twice).
    logs: dict[int, list[int]] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        start, end = parse_ts(self.started), parse_ts(self.ended)
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
        for value in (self.details.reason, self.details.error):
            if value is not None and value.strip():
                return " ".join(value.split())
        if self.verdict == "timeout":
            limit = self.details.timeout_s
            return f"the action timed out after {limit:g}s" if limit is not None else "timed out"
        if self.exit_code is not None:
            return f"exit code {self.exit_code}"
        return f"verdict {self.verdict}"

    @property
    def judged(self) -> bool:
        """True when a model gave the verdict (it reports a confidence)."""
        return self.eval_type == "llm_structured" or self.details.judged

    @property
    def cost_usd(self) -> float:
        """What its judge cost, as its verdict's details say."""
        return self.details.cost_usd

    # -- folding one event into the step ---------------------------------------------------

    def add(self, event: RunEvent) -> None:
        self.ended = event.ts or self.ended
        if isinstance(event, ActionStart):
            # A retry runs the action again: only the last attempt's result counts.
            self.action = event.action
            self.action_type = event.action_type or None
            self.exit_code = self.duration_ms = self.verdict = self.eval_type = None
            self.timed_out = False
            self.details = EMPTY_DETAILS
            self.why, self.tail = None, []
        elif isinstance(event, ActionComplete):
            self.exit_code = event.exit_code
            self.duration_ms = event.duration_ms
            self.timed_out = event.timed_out
            if self.timed_out and self.verdict is None:
                self.verdict = "timeout"
        elif isinstance(event, Evaluate):
            self.eval_type = event.type or None
            self.verdict = event.verdict or None
            self.details = event.details
            self.why = event.reason
            self.tail = list(event.tail or ())
        elif isinstance(event, Retry):
            self.retries += 1
            self.attempts = max(self.attempts, event.attempt)
        elif isinstance(event, Route):
            self.routed_to = event.to
            self.via = event.via or None
        elif isinstance(event, JudgeFailOpen):
            self.fail_open = event.error or "the judge failed"


class History:
    """The story of one run (or of the part of it a listener saw), built event by event."""

    def __init__(self) -> None:
        self.start: LoopStart | None = None  # the first loop_start
        self.segments: list[LoopStart] = []  # one loop_start per start or resume
        self.complete: LoopComplete | None = None  # the last loop_complete
        self.evaluations: list[Evaluate] = []  # every verdict, retried attempts too, in order
        self.taken: set[tuple[str, str]] = set()  # the (from, to) pairs routed
        self.jumps: set[str] = set()  # states entered without a route to them (the limit's)
        self._steps: dict[int, Step] = {}
        self._expected: str | None = None  # where the last route (or entry) points
        # The child runs of `loop:` states, by the calling step; live events of a child carry
        # `path` (the calling states) and are folded into the child's history, not this one.
        self.children: dict[int, History] = {}
        self.child_starts: dict[int, ChildStart] = {}
        self._calls: dict[str, int] = {}  # a calling state -> the step of its latest child
        # A fork's branches, by the forking step, then by branch key (in the order started,
        # which is item order); each a run of its own, folded as a child's is.
        self.branches: dict[int, dict[str, History]] = {}
        self.branch_starts: dict[int, dict[str, ChildStart]] = {}
        self.dir: Path | None = None  # the run directory, when read from one
        self.log_marks: list[int] = []  # every attempt's `log_at`, in order: where each ends

    @classmethod
    def from_events(cls, events: Iterable[RunEvent | Mapping[str, Any]]) -> History:
        history = cls()
        for event in events:
            history.feed(event)
        return history

    @classmethod
    def from_file(cls, path: Path) -> History:
        """The history in a run's events.jsonl, with its children's from their own run
        directories (`sub/...`); empty when the file is missing."""
        history = cls.from_events(read_records(path))
        history.dir = path.parent
        for step, start in history.child_starts.items():
            if _inside(start):
                history.children[step] = cls.from_file(path.parent / start.dir / path.name)
        for step, starts in history.branch_starts.items():
            found = history.branches.setdefault(step, {})
            for key, start in starts.items():
                if _inside(start):
                    found[key] = cls.from_file(path.parent / start.dir / path.name)
        return history

    def walk(self, path: tuple[str, ...] = ()) -> Iterator[Node]:
        """Every step of the tree in the order it ran: this run's, each followed by its
        child's (a `loop:` state) or its branches' (a fork), with the path of calling states
        (and branch keys) above it. An action branch (a run of one step named after its key)
        is the branch itself: `checks/lint`, not `checks/lint/lint`."""
        for visit in self.steps:
            yield Node(path, visit, self)
            yield from self.below(visit, path)

    def below(self, visit: Step, path: tuple[str, ...] = ()) -> Iterator[Node]:
        """The steps of the tree under one step of this run (a `loop:` state's child run, a
        fork's branches), as `walk` gives them."""
        child = self.children.get(visit.step)
        if child is not None:
            yield from child.walk((*path, visit.state))
        starts = self.branch_starts.get(visit.step, {})
        for key, branch in self.branches.get(visit.step, {}).items():
            start = starts.get(key)
            if start is not None and not start.file:  # an action branch: one step
                for inner in branch.steps:
                    yield Node((*path, visit.state), inner, branch, branch=key)
                continue
            yield from branch.walk((*path, visit.state, key))

    # -- the run ---------------------------------------------------------------------------

    @property
    def resumed(self) -> bool:
        return any(start.resumed for start in self.segments)

    @property
    def loop(self) -> str | None:
        return self.start.loop if self.start is not None else None

    @property
    def run_id(self) -> str | None:
        for event in (self.complete, self.start):
            if event is not None and event.run_id:
                return event.run_id
        return None

    @property
    def steps(self) -> list[Step]:
        """The steps in order, each numbered as the how-manieth visit of its state."""
        ordered = [self._steps[step] for step in sorted(self._steps)]
        seen: dict[str, int] = {}
        for step in ordered:
            seen[step.state] = step.visit = seen.get(step.state, 0) + 1
        return ordered

    def get(self, step: int) -> Step | None:
        return self._steps.get(step)

    def log_ranges(self, step: Step, attempt: int) -> list[tuple[int, int | None]]:
        """Where an attempt's output lies in the run's steps.log: (start, end) for each time it
        ran, end None for the last bytes of the file (a running or the latest attempt)."""
        marks = self.log_marks
        return [
            (marks[i], marks[i + 1] if i + 1 < len(marks) else None)
            for i in step.logs.get(attempt, ())
        ]

    @property
    def path(self) -> list[str]:
        """The states entered, one a step, in step order (a step entered again counts once)."""
        return [self._steps[step].state for step in sorted(self._steps)]

    def path_upto(self, last: int) -> list[str]:
        """The states of steps 1..`last`: the finished ones, when `last` is the step count."""
        return [self._steps[step].state for step in sorted(self._steps) if step <= last]

    def visit_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for state in self.path:
            counts[state] = counts.get(state, 0) + 1
        return counts

    def overlay(self, *, stops: bool = True) -> tuple[dict[str, int], set[tuple[str, str]]]:
        """What `ll graph --run` draws over the loop: visit counts per state and the (from, to)
        pairs taken.

        A step entered twice (cut off mid-action, then resumed) counts once. The jump to
        `on_max_iterations`, which no route event records, appears as `(MAX_ITERATIONS, state)`;
        a run that ended with exit code 1 or 3 appears as `(final state, STOPPED[code])` (left
        out with `stops=False`), which the drawing uses only where that state has an edge to a
        stop.
        """
        taken = set(self.taken) | {(MAX_ITERATIONS, state) for state in self.jumps}
        end = self.complete
        if stops and end is not None and end.final_state and end.exit_code in STOPPED:
            taken.add((end.final_state, STOPPED[end.exit_code]))
        return self.visit_counts(), taken

    # -- folding ---------------------------------------------------------------------------

    def __call__(self, event: RunEvent) -> None:
        """A listener of a live run (`Runner(listeners=[history])`)."""
        self.feed(event)

    def feed(self, event: RunEvent | Mapping[str, Any]) -> RunEvent:
        """Fold one event in (typed, or a dict as read from events.jsonl); returns it typed."""
        typed = event if isinstance(event, RunEvent) else parse(event)
        path = typed.extra.get("path")
        if isinstance(path, list) and path:
            self._feed_child(typed, path)
            return typed
        if isinstance(typed, ChildStart) and typed.kind == "branch" and typed.step is not None:
            key = typed.branch or ""
            self._calls[typed.state or ""] = typed.step
            self.branch_starts.setdefault(typed.step, {})[key] = typed
        elif isinstance(typed, ChildStart) and typed.step is not None and typed.state:
            self._calls[typed.state] = typed.step
            if typed.attempt != getattr(self.child_starts.get(typed.step), "attempt", None):
                self.children.pop(typed.step, None)  # a retry: the new attempt's story
            self.child_starts[typed.step] = typed
        if isinstance(typed, LoopStart):
            if self.start is None:
                self.start = typed
            self.segments.append(typed)
            return typed
        if isinstance(typed, LoopComplete):
            self.complete = typed
            return typed
        if isinstance(typed, Evaluate):
            self.evaluations.append(typed)
        if isinstance(typed, StateEnter) and typed.state is not None:
            if self._expected is not None and typed.state != self._expected:
                self.jumps.add(typed.state)
            self._expected = typed.state
        elif isinstance(typed, Route) and typed.from_ and typed.to:
            self.taken.add((typed.from_, typed.to))
            self._expected = typed.to
        if typed.step is None or typed.state is None:
            return typed
        if isinstance(typed, StateEnter):
            # A step entered again after a resume starts over: the new entry replaces it,
            # keeping the count of attempts made before.
            before = self._steps.get(typed.step)
            entered = Step(typed.step, typed.state, typed.ts, typed.ts)
            if before is not None:
                entered.attempts = before.attempts
                entered.logs = before.logs
            self._steps[typed.step] = entered
            return typed
        step = self._steps.get(typed.step)
        if step is not None:
            step.add(typed)
            if isinstance(typed, ActionStart) and typed.log_at is not None:
                step.logs.setdefault(step.attempts, []).append(len(self.log_marks))
                self.log_marks.append(typed.log_at)
        return typed

    def _feed_child(self, typed: RunEvent, path: list[Any]) -> None:
        step = self._calls.get(str(path[0]))
        if step is None:
            return
        starts = self.branch_starts.get(step)
        if starts is not None:  # a fork's step: the next part of the path is the branch
            if len(path) < 2 or str(path[1]) not in starts:
                return
            child = self.branches.setdefault(step, {}).setdefault(str(path[1]), History())
            below = path[2:]
        else:
            child = self.children.setdefault(step, History())
            below = path[1:]
        rest = {k: v for k, v in typed.extra.items() if k != "path"}
        if below:
            rest["path"] = below
        child.feed(replace(typed, extra=rest))

    def with_history(self, base_dir: Path | None) -> History:
        """For a resumed run seen live, or a run whose end alone was seen (resume found it
        logged): the whole run's history from its event log, if found."""
        from little_loops.record.store import RUNS

        if self.complete is None or not self.complete.run_id:
            return self
        if self.segments and not self.resumed:  # saw the run from its start: the whole of it
            return self
        path = (base_dir or Path.cwd()) / RUNS / self.complete.run_id / "events.jsonl"
        full = History.from_file(path)
        if full.complete is None or full.complete.ts != self.complete.ts:
            return self
        return full


@record(frozen=True)
class Node:
    """One step of a run tree (`History.walk`): where it is and the run it belongs to."""

    path: tuple[str, ...]  # the calling states (and branch keys) above its run, root first
    step: Step
    run: History
    branch: str | None = None  # an action branch: the step is the branch itself

    @property
    def name(self) -> str:
        """The step's name in the tree: `call/inner/s (visit 1)`, `checks/lint (visit 1)`."""
        if self.branch is not None:
            return "/".join((*self.path, f"{self.branch} (visit {self.step.visit})"))
        return "/".join((*self.path, self.step.name))

    @property
    def where(self) -> str:
        """The state's path in the tree: `call/inner/s`, `checks/lint`."""
        return "/".join((*self.path, self.branch or self.step.state))


def _inside(start: ChildStart) -> bool:
    """A child (or branch) start of this run whose directory lies under its own."""
    return start.extra.get("path") is None and bool(start.dir) and ".." not in Path(start.dir).parts


def parse_ts(text: str) -> datetime | None:
    from datetime import datetime, timezone  # (a plain run never reads a time back)

    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def is_num(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def outcome_text(complete: LoopComplete) -> str:
    """How the run ended, in words: `reached the failure terminal 'failed': ...`."""
    outcome = complete.outcome
    where = complete.final_state
    text = {
        "success": f"reached the success terminal '{where}'",
        "failure": f"reached the failure terminal '{where}'",
        "max_iterations": f"hit max_iterations at '{where}'",
        "budget": f"spent its cost budget at '{where}'",
        "timeout": f"hit the loop timeout at '{where}'",
        "interrupted": f"was interrupted at '{where}'",
        "suspended": f"is suspended at '{where}'",  # the error says what it waits for
        "error": f"ended in error at '{where}'",
    }.get(outcome, f"ended with outcome {outcome} at '{where}'")
    error = complete.error
    if outcome == "interrupted" and isinstance(error, str) and error.startswith(("int", "term")):
        return f"was {error} at '{where}'"  # "interrupted (SIGINT)": the outcome said once
    return f"{text}: {error}" if error else text


# -- what the run directory adds: a step's printed lines, a fork's branches -----------------


def run_root(record: History, base_dir: Path | None) -> Path | None:
    """The run's directory (`.loops/runs/ID` under `base_dir`), where the steps' logs and the
    forks' branches are; None for a child's history or a directory not found."""
    from little_loops.record.store import RUNS

    run_id = record.run_id
    if not run_id or "/" in run_id or ".." in run_id:
        return None
    root = (base_dir or Path.cwd()) / RUNS / run_id
    return root if root.is_dir() else None


def tail_lines(visit: Step) -> list[str]:
    if not visit.tail:
        return []
    return ["", f"last {len(visit.tail)} lines of output:", *visit.tail]


def failure_cause(text: str, visits: list[Step], run_dir: Path | None) -> tuple[str, str]:
    """The `outcome` case of a run that ended at a failure terminal: the message and text.

    The cause is the last failed verdict before the end that a route took onward (the check
    that failed, the fork whose join was not met): its reason goes into the message, its last
    lines and branches into the text, then the lines the terminal printed.
    """
    final = visits[-1] if visits else None
    cause = next((v for v in reversed(visits[:-1]) if v.failed and v.routed_to), None)
    message = text
    lines = [text]
    if cause is not None:
        verdict = cause.verdict or "failure"
        said = f"state '{cause.state}' (step {cause.step}) gave verdict '{verdict}': {cause.reason}"
        message = f"{text}; cause: {said}"
        lines += ["", f"cause: {said}", *tail_lines(cause), *branch_lines(run_dir, cause)]
    if final is not None:
        printed = log_tail(run_dir, final)
        if printed:
            lines += ["", f"what the terminal '{final.state}' printed:", *printed]
    return message, "\n".join(lines)


def log_tail(run_dir: Path | None, visit: Step) -> list[str]:
    """The last lines a step's action printed: its part of the run's `steps.log`, or its own
    file under `steps/` (a run an older ll recorded)."""
    if run_dir is None:
        return []
    from little_loops.record.store import RunLog

    data = b""
    try:
        history = History.from_file(run_dir / "events.jsonl")
        told = history.get(visit.step)
        if told is not None:
            ranges = history.log_ranges(told, told.attempts)
            data = b"".join(RunLog.read(run_dir, a, b) for a, b in ranges)
        if not data:
            logs = sorted((run_dir / "steps").glob(f"{visit.step:04d}-*.log"))
            data = logs[-1].read_bytes() if logs else b""
    except (OSError, LoopError):
        return []
    text = data.decode("utf-8", errors="replace")
    return [line for line in text.splitlines() if line.strip()][-_OUTPUT_LINES:]


def branch_lines(run_dir: Path | None, visit: Step) -> list[str]:
    """A fork step's branches (from its `join.json`): verdict, reason and last lines of each."""
    if run_dir is None or visit.eval_type != "join":
        return []
    joins = sorted((run_dir / "sub").glob(f"{visit.step:04d}-*/join.json"))
    try:
        data = json.loads(joins[-1].read_text(encoding="utf-8")) if joins else {}
        branches = join_record(data, str(joins[-1])) if joins else {}
    except (OSError, ValueError, LoopError):  # a report draws what it can read
        return []
    if not branches:
        return []
    lines = ["", "branches:"]
    for key, branch in branches.items():
        verdict = branch.verdict or branch.outcome or "?"
        line = f"  {key}: {verdict}"
        error = branch.error
        if error and verdict != "success":
            line += f" ({error})"
        lines.append(line)
        for stream, value in (("output", branch.output), ("stderr", branch.stderr)):
            if value and value.strip():
                tail = [x for x in value.splitlines() if x.strip()][-_OUTPUT_LINES:]
                lines += [f"    {stream}: {x}" for x in tail]
    return lines
