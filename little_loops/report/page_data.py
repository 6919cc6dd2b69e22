"""What `ll report` shows, read from a run directory: the whole tree of runs (children, fork
branches), every step in a compact row, the details of the steps that matter most, judge
requests, questions, costs and times; every size bounded.

Everything is read through `History` (fed the events of `read_records` one by one, so the events
it does not fold, `judge_request`, `ask`, `answer`, `child_start`, are seen in the same pass).
The result is a plain JSON value the page (`report_page`) embeds. Budgets keep a run of 20,000
steps or a fork of 1,000 branches under a few megabytes: every step keeps a compact row (its
time, verdict, retries), and the details (action, output, evaluator) are kept for the failing,
judged, first and last steps until `DETAIL_BUDGET` bytes are spent; the others say where to
look (`ll logs RUN --step N`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from little_loops.record.events import (
    Answer,
    Ask,
    ChildComplete,
    ChildStart,
    JudgeAsked,
    LoopSuspended,
    RunEvent,
    read_records,
)
from little_loops.record.history import History, Step, is_num, outcome_text, parse_ts

# The bounds of one report (docs/observability.md, "The run report").
MAX_RUNS = 3000  # runs of the tree read (the root, children, branches); the rest counted
MAX_ROWS = 60_000  # compact step rows across the tree
DETAIL_BUDGET = 1_000_000  # bytes of step details across the tree
ACTION_CHARS = 2000
TAIL_LINES = 12
LINE_CHARS = 300
OUTPUT_BYTES = 8192  # the end of a step's log, behind a fold
FOLDS = 400  # steps whose log end is read (the most important first)
DETAIL_JSON_CHARS = 4000
JUDGE_TEXT_CHARS = 6000
MAX_QUESTIONS = 500
CAPTURE_CHARS = 1500

# Verdict classes the page colours by.
_FAIL = frozenset({"failure", "error", "timeout"})


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def _tail_cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1) :]


def _json_cut(value: Any, limit: int) -> Any:
    """`value` itself when its JSON is short, else its JSON text cut."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return _cut(str(value), limit)
    return value if len(text) <= limit else _cut(text, limit)


def verdict_class(verdict: str | None) -> str:
    """ok, fail, warn (uncertain), other or none: the colour of a step."""
    if not verdict:
        return "none"
    base = verdict.removesuffix("_uncertain")
    if base in _FAIL:
        return "fail"
    if verdict.endswith("_uncertain"):
        return "warn"
    if base == "success":
        return "ok"
    return "other"


@dataclass
class RunRead:
    """One run of the tree as read from its directory."""

    root: Path
    label: str
    history: History
    depth: int
    kind: str = "run"  # run, loop or branch
    file: str = ""  # the loop file its caller named ("" for a fork's action branch)
    fork: str | None = None
    key: str | None = None
    parent_step: int | None = None
    judge: dict[int, list[JudgeAsked]] = field(default_factory=dict)
    questions: list[dict[str, Any]] = field(default_factory=list)
    children: list[RunRead] = field(default_factory=list)
    ends: dict[str, ChildComplete] = field(default_factory=dict)  # by child dir
    end: ChildComplete | None = None  # how the caller saw this run end (a child's)
    suspended: LoopSuspended | None = None


class Reader:
    """Reads a run directory and its children, counting what the bounds left out."""

    def __init__(self) -> None:
        self.runs = 0
        self.runs_left_out = 0

    def read(
        self, root: Path, label: str, depth: int = 0, start: ChildStart | None = None
    ) -> RunRead:
        self.runs += 1
        history = History()
        run = RunRead(root, label, history, depth)
        starts: dict[str, ChildStart] = {}
        asked: dict[str, dict[str, Any]] = {}
        for typed in read_records(root / "events.jsonl"):
            history.feed(typed)
            if typed.path:
                continue  # a child's event streamed through: read from the child's own log
            self._note(run, typed, starts, asked)
        run.questions = list(asked.values())
        if start is not None:
            run.kind = start.kind if start.kind in ("loop", "branch") else "loop"
            run.fork, run.key, run.parent_step = start.fork, start.branch, start.step
            run.file = start.file
        for rel, child_start in starts.items():
            if ".." in Path(rel).parts or Path(rel).is_absolute():
                continue
            if self.runs >= MAX_RUNS:
                self.runs_left_out += 1
                continue
            name = child_start.branch or child_start.state or rel
            if child_start.kind == "branch":
                name = f"{child_start.state}[{child_start.branch}]"
            child = self.read(root / rel, name, depth + 1, child_start)
            child.end = run.ends.get(rel)
            run.children.append(child)
        return run

    def _note(
        self,
        run: RunRead,
        typed: RunEvent,
        starts: dict[str, ChildStart],
        asked: dict[str, dict[str, Any]],
    ) -> None:
        if isinstance(typed, ChildStart) and typed.dir:
            starts[typed.dir] = typed  # a retried or resumed child: its latest start
        elif isinstance(typed, ChildComplete):
            for rel, start in starts.items():
                if start.child_run_id == typed.child_run_id:
                    run.ends[rel] = typed
        elif isinstance(typed, JudgeAsked) and typed.step is not None:
            run.judge.setdefault(typed.step, []).append(typed)
        elif isinstance(typed, Ask):
            if len(asked) < MAX_QUESTIONS:
                asked[typed.question_id] = {
                    "id": typed.question_id,
                    "state": typed.state,
                    "step": typed.step,
                    "prompt": _cut(typed.prompt, 1000),
                    "choices": list(typed.choices),
                    "asked_at": typed.asked_at or typed.ts,
                    "expires_at": typed.expires_at,
                }
        elif isinstance(typed, Answer):
            entry = asked.get(typed.question_id)
            if entry is not None:
                entry.update(
                    answer=_cut(typed.answer, 1000),
                    note=_cut(typed.note or "", 1000) or None,
                    by=typed.by,
                    via=typed.via,
                    answered_at=typed.ts,
                )
        elif isinstance(typed, LoopSuspended):
            run.suspended = typed


def _ms(ts: str | None, t0: float) -> int:
    parsed = parse_ts(ts or "")
    if parsed is None:
        return 0
    return max(0, round((parsed.timestamp() - t0) * 1000))


def _walk(run: RunRead) -> Iterator[RunRead]:
    yield run
    for child in run.children:
        yield from _walk(child)


def _read_end(path: Path, limit: int) -> tuple[str, int]:
    """The last `limit` bytes of a file as text, and its whole size (0: missing)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return "", 0
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, limit, max(0, size - limit))
    except OSError:
        return "", 0
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace"), size


def _step_output_end(run: RunRead, step: Step, limit: int) -> tuple[str, int]:
    """The last `limit` bytes of what the step's last attempt printed, and its whole size: its
    part of the run's steps.log, or (a run an older ll recorded) its own file under steps/."""
    from little_loops.errors import LoopError
    from little_loops.record.store import LOG_NAME, RunLog

    ranges = run.history.log_ranges(step, step.attempts)
    if not ranges:
        return _read_end(_log_path(run.root, step), limit)
    start, end = ranges[-1]
    if end is None:
        try:
            end = os.stat(run.root / LOG_NAME, follow_symlinks=False).st_size
        except OSError:
            return "", 0
    try:
        data = RunLog.read(run.root, max(start, end - limit), end)
    except LoopError:
        return "", 0
    return data.decode("utf-8", "replace"), max(end - start, 0)


def _log_path(root: Path, step: Step) -> Path:
    import re

    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", step.state)
    suffix = f"-attempt{step.attempts}" if step.attempts > 1 else ""
    return root / "steps" / f"{step.step:04d}-{safe}{suffix}.log"


def _first_ts(run: RunRead) -> float | None:
    for event in (run.history.start, *(s for s in run.history.segments)):
        if event is not None:
            parsed = parse_ts(event.ts)
            if parsed is not None:
                return parsed.timestamp()
    return None


def _priority(run: RunRead, step: Step, index: int, count: int) -> int:
    """Lower first: which steps keep their details when the budget is short."""
    if step.stopped_run:
        return 0
    if step.failed or step.fail_open:
        return 1
    if step.judged or step.step in run.judge:
        return 2
    if index >= count - 20:
        return 3
    if index < 10:
        return 4
    return 5


def _step_detail(run: RunRead, step: Step, fold: bool) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "reason": _cut(step.reason, 1000) if step.verdict not in (None, "success") else None,
        "action": _cut(step.action or "", ACTION_CHARS) or None,
        "type": step.action_type,
        "exit": step.exit_code,
        "ms": step.duration_ms,
        "timed_out": step.timed_out or None,
        "eval": step.eval_type,
        "via": step.via,
        "to": step.routed_to,
        "fail_open": step.fail_open,
        "details": _json_cut(step.details.to_json(), DETAIL_JSON_CHARS) if step.details else None,
        "tail": [_cut(line, LINE_CHARS) for line in step.tail[-TAIL_LINES:]] or None,
    }
    if fold and step.action is not None:
        text, size = _step_output_end(run, step, OUTPUT_BYTES)
        if size:
            detail["output"] = text
            detail["output_bytes"] = size
            if not detail["tail"]:
                lines = [line for line in text.splitlines() if line.strip()]
                detail["tail"] = [_cut(line, LINE_CHARS) for line in lines[-TAIL_LINES:]] or None
    asks = run.judge.get(step.step)
    if asks:
        detail["judge"] = [
            {
                "model": ask.model,
                "provider": ask.provider,
                "temperature": ask.temperature,
                "max_tokens": ask.max_tokens,
                "system": _cut(ask.system, JUDGE_TEXT_CHARS),
                "user": _cut(ask.user, JUDGE_TEXT_CHARS),
                "schema": _json_cut(dict(ask.schema), DETAIL_JSON_CHARS),
                "est_input_tokens": ask.est_input_tokens,
                "cached": ask.cached,
            }
            for ask in asks[-3:]
        ]
    return {k: v for k, v in detail.items() if v is not None}


def _captured(root: Path) -> dict[str, Any]:
    """The run's captured values (as stored: secrets sealed), cut."""
    from little_loops.errors import LoopError
    from little_loops.record.outputs import resolve
    from little_loops.record.store import RunDir

    try:
        state = RunDir(root).read_state()
        captured = resolve(root, state)["captured"]
    except (LoopError, OSError, KeyError, ValueError, TypeError):
        return {}
    out: dict[str, Any] = {}
    for name, record in list(captured.items())[:50]:
        if not isinstance(record, dict):
            continue
        kept: dict[str, Any] = {}
        for key, value in record.items():
            if key in ("output", "stderr") and isinstance(value, str):
                kept[key] = _tail_cut(value, CAPTURE_CHARS)
            else:
                kept[key] = _json_cut(value, CAPTURE_CHARS)
        out[name] = kept
    return out


def read_tree(run_root: Path) -> tuple[RunRead, Reader]:
    """The run in `run_root` (a run directory) and every child and branch under it."""
    reader = Reader()
    return reader.read(run_root, run_root.name), reader


def walk(top: RunRead) -> list[RunRead]:
    """The runs of a tree, each before its children (the timeline's lanes, top to bottom)."""
    return list(_walk(top))


def collect(
    top: RunRead, reader: Reader, *, mask: Callable[[Any], Any] | None = None
) -> dict[str, Any]:
    """The report's data for a tree read by `read_tree`, bounded in size.

    `mask` (a `Redactor.obj`) is applied to the whole value at the end: the run wrote its
    files redacted already; this masks what the reporting process knows to be secret too.
    """
    run_root = top.root
    runs = list(_walk(top))
    t0 = _first_ts(top) or 0.0
    states: list[str] = []
    state_ids: dict[str, int] = {}
    verdicts: list[str] = []
    verdict_ids: dict[str, int] = {}

    def sid(name: str) -> int:
        if name not in state_ids:
            state_ids[name] = len(states)
            states.append(name)
        return state_ids[name]

    def vid(name: str | None) -> int:
        key = name or ""
        if key not in verdict_ids:
            verdict_ids[key] = len(verdicts)
            verdicts.append(key)
        return verdict_ids[key]

    # Which steps keep details: by priority, then tree order, until the budget is spent.
    candidates: list[tuple[int, int, int, RunRead, Step]] = []
    all_steps: list[list[Step]] = []
    for r_index, run in enumerate(runs):
        steps = run.history.steps
        all_steps.append(steps)
        for index, step in enumerate(steps):
            candidates.append((_priority(run, step, index, len(steps)), r_index, index, run, step))
    candidates.sort(key=lambda c: (c[0], c[1], c[2]))
    details: dict[str, dict[str, Any]] = {}
    spent = 0
    folds = 0
    left_out = 0
    for _, r_index, _, run, step in candidates:
        if spent >= DETAIL_BUDGET:
            left_out += 1
            continue
        fold = folds < FOLDS
        folds += fold
        detail = _step_detail(run, step, fold)
        spent += len(json.dumps(detail, ensure_ascii=False, default=str)) + 16
        details[f"{r_index}:{step.step}"] = detail

    rows_left = MAX_ROWS
    out_runs: list[dict[str, Any]] = []
    parent_of: dict[int, int] = {}
    index_of = {id(run): i for i, run in enumerate(runs)}
    for run in runs:
        for child in run.children:
            parent_of[index_of[id(child)]] = index_of[id(run)]
    for r_index, run in enumerate(runs):
        history = run.history
        steps = all_steps[r_index]
        rows: list[list[int]] = []
        # Steps whose child loop ended in a failing outcome (its verdict is a terminal's name).
        failed_calls = {
            child.parent_step
            for child in run.children
            if child.kind == "loop"
            and child.history.complete is not None
            and verdict_class(child.history.complete.outcome) == "fail"
        }
        per_state: dict[str, list[float]] = {}
        for step in steps:
            cost = step.cost_usd
            seconds = step.seconds
            totals = per_state.setdefault(step.state, [0, 0.0, 0.0, 0])
            totals[0] += 1
            totals[1] += seconds
            totals[2] += cost
            totals[3] += step.failed
            if rows_left <= 0:
                continue
            rows_left -= 1
            flags = (
                (1 if step.judged or step.step in run.judge else 0)
                | (2 if step.stopped_run else 0)
                | (4 if step.fail_open else 0)
                | (8 if f"{r_index}:{step.step}" in details else 0)
                | (16 if step.step in failed_calls else 0)
            )
            start = _ms(step.started, t0)
            rows.append(
                [
                    step.step,
                    sid(step.state),
                    start,
                    max(_ms(step.ended, t0) - start, 0),
                    vid(step.verdict),
                    step.attempts,
                    flags,
                ]
            )
        complete = history.complete
        end = run.end
        outcome = complete.outcome if complete else ("suspended" if run.suspended else None)
        started = history.start.ts if history.start else None
        ended = complete.ts if complete else (history.steps[-1].ended if history.steps else None)
        entry: dict[str, Any] = {
            "label": run.label,
            "id": history.run_id or run.root.name,
            "loop": history.loop or "",
            "file": history.start.file if history.start else "",
            "kind": run.kind,
            "fork": run.fork,
            "key": run.key,
            "parent": parent_of.get(r_index),
            "parent_step": run.parent_step,
            "depth": run.depth,
            "start": _ms(started, t0) if started else 0,
            "end": _ms(ended, t0) if ended else 0,
            "outcome": outcome,
            "exit": complete.exit_code if complete else None,
            "final": complete.final_state if complete else None,
            "why": outcome_text(complete) if complete else None,
            "verdict": end.verdict if end else None,
            "cost": complete.cost_usd
            if complete and is_num(complete.cost_usd)
            else sum(s.cost_usd for s in steps),
            "steps": len(steps),
            "rows": rows,
            "resumed": history.resumed or None,
            "per_state": {
                name: [n, round(sec, 3), round(cost, 6), failed]
                for name, (n, sec, cost, failed) in per_state.items()
            },
            "questions": run.questions or None,
            "pending": list(run.suspended.pending)
            if run.suspended and (complete is None or complete.outcome == "suspended")
            else None,
        }
        # Empty fields left out: a fork of 1,000 branches repeats them 1,000 times.
        out_runs.append({k: v for k, v in entry.items() if v is not None})
    data: dict[str, Any] = {
        "version": 1,
        "states": states,
        "verdicts": verdicts,
        "vclass": [verdict_class(v) for v in verdicts],
        "runs": out_runs,
        "details": details,
        "captured": _captured(run_root),
        "left_out": {
            "runs": reader.runs_left_out,
            "rows": sum(len(s) for s in all_steps) - sum(len(r["rows"]) for r in out_runs),
            "details": left_out,
        },
    }
    return mask(data) if mask is not None else data
