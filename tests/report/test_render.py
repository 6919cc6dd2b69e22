"""What `ll run` prints without a terminal, with `--quiet` and `--json`, pinned line by line."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest

from little_loops.record.events import Event, LoopComplete, RunEvent, parse
from little_loops.report.render import (
    JsonRenderer,
    PlainRenderer,
    clip,
    duration,
    make_renderer,
    summary_line,
)

RUN = "20261122-041430-fix-lint-3fa2"
LONG_REASON = (
    "The notes say 'various improvements' but name none of the changed functions, "
    "so a reader learns nothing."
)


def ev(name: str, step: int | None = None, state: str | None = None, **fields: Any) -> Event:
    event: Event = {"event": name, "ts": "2026-11-22T04:14:30.123Z", "run_id": RUN}
    if step is not None:
        event["step"] = step
    if state is not None:
        event["state"] = state
    event.update(fields)
    return event


def typed(name: str, step: int | None = None, state: str | None = None, **fields: Any) -> RunEvent:
    """The typed record a listener is handed, as the Emitter hands it."""
    return parse(ev(name, step, state, **fields))


def action(step: int, state: str, command: str, ms: int, code: int) -> list[Event]:
    return [
        ev("action_start", step, state, action=command, action_type="shell"),
        ev("action_complete", step, state, exit_code=code, duration_ms=ms, timed_out=False),
    ]


# A run through every kind of step: an exit-code check, a judged step that is retried once,
# an evaluate-only gate, and a terminal state.
RUN_EVENTS: list[Event] = [
    ev("loop_start", loop="fix-lint", file="fix.yaml", max_iterations=10, resumed=False),
    ev("state_enter", 1, "lint"),
    *action(1, "lint", "ruff check .", 12, 1),
    ev("evaluate", 1, "lint", type="exit_code", verdict="failure", details={"exit_code": 1}),
    ev("route", 1, "lint", **{"from": "lint", "to": "fix"}, verdict="failure", via="on_failure"),
    ev("state_enter", 2, "fix"),
    *action(2, "fix", "/fix the lint errors\nin src/", 2345, 0),
    ev(
        "evaluate",
        2,
        "fix",
        type="llm_structured",
        verdict="failure",
        details={"confidence": 0.931, "reason": LONG_REASON},
    ),
    ev("retry", 2, "fix", attempt=2, delay_s=1.5, verdict="failure"),
    *action(2, "fix", "/fix the lint errors\nin src/", 800, 0),
    ev(
        "evaluate",
        2,
        "fix",
        type="llm_structured",
        verdict="success",
        details={"confidence": 0.88, "reason": "All lint errors fixed."},
    ),
    ev("route", 2, "fix", **{"from": "fix", "to": "gate"}, verdict="success", via="on_success"),
    ev("state_enter", 3, "gate"),
    ev("evaluate", 3, "gate", type="output_contains", verdict="success", details={}),
    ev("route", 3, "gate", **{"from": "gate", "to": "lint"}, verdict="success", via="on_success"),
    ev("state_enter", 4, "lint"),
    *action(4, "lint", "ruff check .", 10, 0),
    ev("evaluate", 4, "lint", type="exit_code", verdict="success", details={"exit_code": 0}),
    ev("route", 4, "lint", **{"from": "lint", "to": "done"}, verdict="success", via="on_success"),
    ev("state_enter", 5, "done"),
    ev(
        "loop_complete",
        final_state="done",
        outcome="success",
        exit_code=0,
        steps=5,
        duration_ms=3210,
        error=None,
        cost_usd=0.01234,
    ),
]

EXPECTED = [
    f"ll: running fix-lint (run {RUN}, at most 10 steps)",
    "  1/10  lint  ruff check .",
    "             failure 12 ms -> fix",
    "  2/10  fix  /fix the lint errors...",
    "             failure 0.93 \"The notes say 'various improvements' "
    'but name none of the changed f..." 2.35 s -> retry 2 in 1.50 s',
    "  2/10  fix  /fix the lint errors...",
    '             success 0.88 "All lint errors fixed." 800 ms -> gate',
    "  3/10  gate  (no action)",
    "             success -> lint",
    "  4/10  lint  ruff check .",
    "             success 10 ms -> done",
    "             path: lint -> fix -> gate -> lint -> done",
    "ll: success at 'done' after 5 steps in 3.21 s, cost $0.0123",
]


def render(events: list[Event], **options: Any) -> str:
    out = io.StringIO()
    renderer = PlainRenderer(out, **options)
    for event in events:
        renderer(parse(event))
    return out.getvalue()


def test_plain_renderer_pins_every_line_of_a_run() -> None:
    text = render(RUN_EVENTS)
    assert text.splitlines() == EXPECTED
    assert text.endswith("\n")
    assert "\x1b" not in text


def test_quiet_prints_only_the_summary() -> None:
    assert render(RUN_EVENTS, quiet=True) == EXPECTED[-1] + "\n"


def test_renderer_keeps_the_path() -> None:
    out = io.StringIO()
    renderer = PlainRenderer(out)
    for event in RUN_EVENTS:
        renderer(parse(event))
    assert renderer.path == ["lint", "fix", "gate", "lint", "done"]
    assert renderer.cap == 10


def test_resumed_run_maintain_route_and_notices() -> None:
    events = [
        ev("loop_start", loop="watch", max_iterations=3, resumed=True),
        ev("lock_reclaimed", previous_run_id="old-run", previous_pid=4242),
        ev("state_enter", 3, "check"),
        *action(3, "check", "true", 5, 0),
        ev("judge_fail_open", 3, "check", error="judge timed out"),
        ev("evaluate", 3, "check", type="exit_code", verdict="success", details={}),
        ev(
            "route",
            3,
            "check",
            **{"from": "check", "to": "start"},
            verdict="maintain",
            via="maintain",
        ),
        ev(
            "loop_complete",
            final_state="check",
            outcome="max_iterations",
            steps=3,
            duration_ms=75_000,
            error="reached max_iterations (3)",
            cost_usd=0,
        ),
    ]
    assert render(events).splitlines() == [
        f"ll: resuming watch (run {RUN}, at most 3 steps)",
        "ll: took over the lock of run old-run (pid 4242 is gone)",
        "   3/3  check  true",
        "             judge failed; fail_open counts it as success: judge timed out",
        "             maintain -> start",
        "             path: check",
        "ll: max_iterations at 'check' after 3 steps in 1m 15s: reached max_iterations (3)",
    ]


def test_path_counts_a_step_cut_off_and_re_run_once() -> None:
    """`ll logs` of a run interrupted in step 2 and resumed: the path has one entry a step."""

    def complete(outcome: str, steps: int) -> Event:
        return ev(
            "loop_complete",
            final_state="wait",
            outcome=outcome,
            steps=steps,
            duration_ms=10,
            error=None,
            cost_usd=0,
        )

    def finished(step: int) -> list[Event]:
        return [
            ev("state_enter", step, "wait"),
            *action(step, "wait", "sleep 1", 5, 0),
            ev("evaluate", step, "wait", type="exit_code", verdict="success", details={}),
            ev("route", step, "wait", **{"from": "wait", "to": "wait"}, verdict="success", via="x"),
        ]

    first = [
        ev("loop_start", loop="slow", max_iterations=3),
        *finished(1),
        ev("state_enter", 2, "wait"),
        ev("action_start", 2, "wait", action="sleep 1", action_type="shell"),
        complete("interrupted", 1),
    ]
    second = [
        ev("loop_start", loop="slow", max_iterations=3, resumed=True),
        *finished(2),
        *finished(3),
        complete("max_iterations", 3),
    ]
    paths = [line.strip() for line in render(first + second).splitlines() if "path:" in line]
    assert paths == ["path: wait", "path: wait -> wait -> wait"]
    resumed_alone = [line.strip() for line in render(second).splitlines() if "path:" in line]
    assert resumed_alone == ["path: wait -> wait"]


def test_evaluate_error_details_and_unknown_events() -> None:
    events = [
        ev("loop_start", loop="x", max_iterations=1),
        ev("some_future_event", 1, "a", anything=True),  # ignored, never a crash
        ev("state_enter", 1, "a"),
        *action(1, "a", "make", 1500, 2),
        ev(
            "evaluate",
            1,
            "a",
            type="llm_structured",
            verdict="error",
            details={"error": "judge answered no JSON"},
        ),
        ev("route", 1, "a", **{"from": "a", "to": "b"}, verdict="error", via="on_error"),
    ]
    assert render(events).splitlines()[1:] == [
        "   1/1  a  make",
        '             error "judge answered no JSON" 1.50 s -> b',
    ]


def test_long_actions_are_clipped_to_the_width() -> None:
    command = "echo " + "x" * 200
    events = [ev("state_enter", 1, "s"), ev("action_start", 1, "s", action=command)]
    line = render(events, width=60).splitlines()[0]
    # 60 - 14 - len("s") = 45 characters of action, ending in "...".
    assert line == "   1/0  s  " + command[:42] + "..."
    narrow = render(events, width=10).splitlines()[0]
    assert narrow == "   1/0  s  " + command[:17] + "..."  # never fewer than 20


@pytest.mark.parametrize(
    ("event", "line"),
    [
        (
            {"outcome": "success", "final_state": "done", "steps": 1, "duration_ms": 5},
            "ll: success at 'done' after 1 step in 5 ms",
        ),
        (
            {
                "outcome": "failure",
                "final_state": "gave_up",
                "steps": 12,
                "duration_ms": 61_000,
                "cost_usd": 1.5,
                "error": "budget exceeded",
            },
            "ll: failure at 'gave_up' after 12 steps in 1m 01s, cost $1.5000: budget exceeded",
        ),
        (
            {"outcome": "error", "final_state": "a", "steps": 0, "duration_ms": 0, "cost_usd": 0},
            "ll: error at 'a' after 0 steps in 0 ms",
        ),
        (
            {"outcome": "error", "final_state": "a", "steps": 2, "duration_ms": None, "error": ""},
            "ll: error at 'a' after 2 steps in 0 ms",
        ),
    ],
)
def test_summary_line(event: Event, line: str) -> None:
    typed = parse({"event": "loop_complete", **event})
    assert isinstance(typed, LoopComplete)
    assert summary_line(typed) == line


@pytest.mark.parametrize(
    ("text", "width", "clipped"),
    [
        ("short", 10, "short"),
        ("  padded  ", 10, "padded"),
        ("exactly10!", 10, "exactly10!"),
        ("eleven chars", 10, "eleven..."),
        ("first line\nsecond", 80, "first line..."),
        ("a" * 10, 2, "a..."),
        ("", 5, ""),
    ],
)
def test_clip(text: str, width: int, clipped: str) -> None:
    assert clip(text, width) == clipped


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0 ms"),
        (999, "999 ms"),
        (999.6, "1000 ms"),
        (1000, "1.00 s"),
        (59_999, "60.00 s"),
        (60_000, "1m 00s"),
        (3_725_000, "62m 05s"),
        (None, "0 ms"),
        ("12", "0 ms"),
    ],
)
def test_duration(ms: object, text: str) -> None:
    assert duration(ms) == text


def test_json_renderer_writes_one_line_per_event() -> None:
    out = io.StringIO()
    renderer = JsonRenderer(out)
    for event in RUN_EVENTS:
        renderer(parse(event))
    lines = out.getvalue().splitlines()
    assert len(lines) == len(RUN_EVENTS)
    # each record's wire form (`to_dict`): a field the hand-built event left out, its default
    assert [json.loads(line) for line in lines] == [parse(e).to_dict() for e in RUN_EVENTS]
    assert lines[0] == json.dumps(RUN_EVENTS[0], separators=(",", ":"))


def test_json_renderer_keeps_non_ascii_and_escapes_newlines() -> None:
    out = io.StringIO()
    JsonRenderer(out)(parse({"event": "x", "ts": "T", "run_id": "r", "text": "café\nnext"}))
    assert out.getvalue() == '{"event":"x","ts":"T","run_id":"r","text":"café\\nnext"}\n'


def test_make_renderer_without_a_terminal() -> None:
    # pytest captures stdout, so it is not a terminal here.
    assert isinstance(make_renderer(json_mode=True, quiet=False, verbose=False), JsonRenderer)
    plain = make_renderer(json_mode=False, quiet=True, verbose=False)
    assert type(plain) is PlainRenderer
    assert plain.quiet


# -- reasons, output tails, step time ---------------------------------------------------------


def failed_step(step: int, state: str, verdict: str = "error", **extra: Any) -> list[Event]:
    return [
        ev("state_enter", step, state),
        *action(step, state, "./deploy.sh", 3, 127),
        ev(
            "evaluate",
            step,
            state,
            type="exit_code",
            verdict=verdict,
            details={"exit_code": 127, "error": "exit code 127 is neither 0 nor 1"},
            reason="command not found: ./deploy.sh",
            tail=["sh: 1: ./deploy.sh: not found"],
            **extra,
        ),
    ]


def test_a_failed_step_shows_its_reason_and_output_tail_then_stop() -> None:
    events = [
        ev("loop_start", loop="ship", max_iterations=5),
        *failed_step(1, "deploy"),
        ev(
            "loop_complete",
            final_state="deploy",
            outcome="error",
            steps=1,
            duration_ms=40,
            error="state 'deploy' gave verdict 'error' and has no route for it",
        ),
    ]
    assert render(events).splitlines()[1:4] == [
        "   1/5  deploy  ./deploy.sh",
        '             error "command not found: ./deploy.sh" 3 ms -> stop',
        "               sh: 1: ./deploy.sh: not found",
    ]


def test_a_routed_failure_shows_its_tail_under_the_route_line() -> None:
    events = [
        ev("loop_start", loop="ship", max_iterations=5),
        *failed_step(1, "deploy"),
        ev(
            "route", 1, "deploy", **{"from": "deploy", "to": "fix"}, verdict="error", via="on_error"
        ),
    ]
    assert render(events).splitlines()[2:] == [
        '             error "command not found: ./deploy.sh" 3 ms -> fix',
        "               sh: 1: ./deploy.sh: not found",
    ]


def test_tail_lines_lose_colour_codes_and_control_characters() -> None:
    events = failed_step(1, "deploy")
    events[-1]["tail"] = ["\x1b[31mFAILED\x1b[0m test_x\r", "bell\x07 done"]
    events.append(ev("route", 1, "deploy", to="fix", verdict="error", via="on_error"))
    assert render(events).splitlines()[-2:] == [
        "               FAILED test_x",
        "               bell done",
    ]


def test_the_step_time_includes_its_judge() -> None:
    """A 4 s judge call after a 12 ms action is a 4 s step, not '12 ms'."""
    enter = ev("state_enter", 1, "review")
    start, complete = action(1, "review", "make docs", 12, 0)
    verdict = ev(
        "evaluate",
        1,
        "review",
        type="llm_structured",
        verdict="success",
        details={"confidence": 0.9, "reason": "fine", "latency_ms": 4000},
    )
    route = ev("route", 1, "review", to="done", verdict="success", via="on_success")
    text = render(
        [enter, start, complete, ev("judge_start", 1, "review", model="m"), verdict, route]
    )
    assert text.splitlines()[-1] == '             success 0.90 "fine" 4.01 s -> done'
    # From the events' times when those say more (a log read back by `ll logs`).
    start["ts"] = "2026-11-22T04:14:30.000Z"
    verdict["ts"] = "2026-11-22T04:14:36.500Z"
    text = render([enter, start, complete, verdict, route])
    assert text.splitlines()[-1] == '             success 0.90 "fine" 6.50 s -> done'


def test_the_on_max_iterations_step_never_shows_a_count_past_the_cap() -> None:
    events = [
        ev("loop_start", loop="x", max_iterations=12),
        ev("state_enter", 13, "report"),
        ev("action_start", 13, "report", action="echo gave up"),
    ]
    assert render(events).splitlines()[1] == " limit  report  echo gave up"


@pytest.mark.parametrize(
    ("event", "line"),
    [
        (
            {
                "outcome": "interrupted",
                "final_state": "a",
                "steps": 2,
                "duration_ms": 5,
                "error": "interrupted (SIGINT)",
            },
            "ll: interrupted (SIGINT) at 'a' after 2 steps in 5 ms",
        ),
        (
            {
                "outcome": "budget",
                "final_state": "a",
                "steps": 3,
                "duration_ms": 5,
                "cost_usd": 0.0123,
                "error": "cost $0.0123 passed max_cost_usd $0.01",
            },
            "ll: budget at 'a' after 3 steps in 5 ms: cost $0.0123 passed max_cost_usd $0.01",
        ),
    ],
)
def test_summary_line_says_things_once(event: Event, line: str) -> None:
    typed = parse({"event": "loop_complete", **event})
    assert isinstance(typed, LoopComplete)
    assert summary_line(typed) == line


# -- progress: spinner words, heartbeat ---------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_text_counts_from_the_step_start_through_the_judge() -> None:
    clock = Clock()
    renderer = PlainRenderer(io.StringIO(), clock=clock)
    renderer(typed("state_enter", 1, "build"))
    renderer(typed("action_start", 1, "build", action="make"))
    renderer.output("stdout", b"compiling\nlinking app\n")
    clock.now += 2.25
    assert renderer.progress_text() == "build running… 2.2 s"
    assert renderer.latest_line == "linking app"
    renderer(typed("action_complete", 1, "build", exit_code=0, duration_ms=2250))
    renderer(typed("judge_start", 1, "build", model="claude-sonnet-5-5"))
    clock.now += 0.85
    assert renderer.progress_text() == "build judging with claude-sonnet-5-5… 3.1 s"
    clock.now += 150
    assert renderer.progress_text() == "build judging with claude-sonnet-5-5… 2m33s"


def test_latest_line_takes_the_last_complete_or_partial_line() -> None:
    renderer = PlainRenderer(io.StringIO())
    renderer.output("stdout", b"one\ntw")
    renderer.output("stdout", b"o\n\n  \n")
    assert renderer.latest_line == "two"
    renderer.output("stderr", b"\x1b[1mbold\x1b[0m")
    assert renderer.latest_line == "bold"


def test_heartbeat_lines_while_a_step_runs_and_none_after() -> None:
    out = io.StringIO()
    renderer = PlainRenderer(out, heartbeat=0.05)
    renderer(typed("state_enter", 1, "build"))
    renderer(typed("action_start", 1, "build", action="make"))
    renderer.output("stdout", b"compiling foo.c\n")
    deadline = time.monotonic() + 10
    while "still running" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    renderer(typed("action_complete", 1, "build", exit_code=0, duration_ms=5))
    renderer(typed("evaluate", 1, "build", type="exit_code", verdict="success", details={}))
    beat = next(line for line in out.getvalue().splitlines() if "still" in line)
    assert beat == "… build still running (0s): compiling foo.c"
    time.sleep(0.2)
    before = out.getvalue()
    time.sleep(0.2)
    assert out.getvalue() == before  # silent between steps
    renderer(typed("loop_complete", final_state="build", outcome="success", steps=1, duration_ms=1))


def test_heartbeat_default_is_30_s_without_a_terminal_and_off_when_quiet() -> None:
    assert make_renderer(json_mode=False, quiet=False, verbose=False)._heartbeat.interval == 30
    assert make_renderer(json_mode=False, quiet=True, verbose=False)._heartbeat is None
    assert (
        make_renderer(json_mode=False, quiet=False, verbose=False, heartbeat=0)._heartbeat is None
    )


def test_rich_spinner_shows_elapsed_time_and_the_latest_line() -> None:
    from rich.console import Console

    from little_loops.report.render import (
        RichRenderer,
        _Spinning,
    )

    clock = Clock()
    screen = io.StringIO()
    console = Console(file=screen, width=100, force_terminal=False, color_system=None)
    renderer = RichRenderer(console=console, clock=clock, verbose=True)  # verbose: no live spinner
    renderer(typed("state_enter", 1, "build"))
    renderer(typed("action_start", 1, "build", action="make"))
    renderer.output("stdout", b"linking app\n")
    clock.now += 3.14
    console.print(_Spinning(renderer))
    assert screen.getvalue().splitlines()[-1] == "build running… 3.1 s  linking app"


@pytest.mark.parametrize(
    "ts",
    [
        "2026-11-22T04:14:30.123Z",
        "1970-01-01T00:00:00.000Z",
        "2000-02-29T23:59:59.999Z",  # a leap day (by 400)
        "2024-02-29T12:00:00.500Z",
        "1900-03-01T00:00:00.001Z",  # 1900 is not a leap year
        "9999-12-31T23:59:59.999Z",
        "2026-02-29T00:00:00.000Z",  # no such day: None, as datetime says
        "2026-04-31T00:00:00.000Z",
        "2026-13-01T00:00:00.000Z",
        "2026-01-01T24:00:00.000Z",
        "0000-01-01T00:00:00.000Z",
        "2026-01-01T00:00:00.+00Z",
        "2026-01-01T00:00:0_.000Z",
        "2026-01-01 00:00:00.000Z",  # other forms: read by datetime
        "2026-01-01T00:00:00+00:00",
        "not a time",
    ],
)
def test_event_times_are_read_as_datetime_reads_them(ts: str) -> None:
    """The renderer reads ll's own `ts` without importing datetime (start-up, issue 27)."""
    from datetime import datetime

    from little_loops.report.render import _ts_ms

    try:
        expected: float | None = datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        expected = None
    assert _ts_ms(ts) == (None if expected is None else expected * 1000)


@pytest.mark.parametrize(
    ("given", "resumed", "note"),
    [
        ({}, False, ""),
        ({}, True, "  (resumed)"),
        ({"ref": "main"}, False, "  (with ref=main)"),
        ({"ref": "main", "n": "2"}, True, "  (with ref=main n=2, resumed)"),
    ],
)
def test_a_child_runs_line_names_what_it_was_given_and_a_resume(
    given: dict[str, str], resumed: bool, note: str
) -> None:
    start = ev("child_start", 1, "call", file="ends.yaml", dir="sub/0001-call", resumed=resumed)
    if given:
        start["with"] = given
    lines = render([RUN_EVENTS[0], ev("state_enter", 1, "call"), start]).splitlines()
    assert lines[-1] == "  1/10  call  loop ends.yaml" + note
