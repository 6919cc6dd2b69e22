"""Events: typed records and their wire form, timestamps, the JSONL sink, the emitter."""

from __future__ import annotations

import json
import math
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from project import Project

from little_loops.model.details import Details, Json
from little_loops.record.events import (
    ENCODE,
    EVENT_NAMES,
    EVENT_TYPES,
    ActionComplete,
    ActionStart,
    Emitter,
    Evaluate,
    JsonlSink,
    JudgeRetry,
    LoopComplete,
    Route,
    RunEvent,
    StateEnter,
    UnknownEvent,
    parse,
    read_events,
    read_records,
    utc_now,
)
from little_loops.record.secrets import Redactor

TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


def test_utc_now_format_and_value() -> None:
    before = time.time()
    stamp = utc_now()
    after = time.time()
    assert TIMESTAMP.fullmatch(stamp), stamp
    parsed = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert before - 0.001 <= parsed.timestamp() <= after


def test_utc_now_is_monotonic_across_calls() -> None:
    stamps = [utc_now() for _ in range(200)]
    assert all(TIMESTAMP.fullmatch(s) for s in stamps)
    assert stamps == sorted(stamps)


def test_utc_now_formats_a_second_once_and_each_new_second_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Events of one second share its formatted text (the hot path formats it once); the
    milliseconds, and a new second, are always the clock's."""
    calls: list[float] = []
    real = time.strftime

    def strftime(form: str, when: time.struct_time) -> str:
        calls.append(0)
        return real(form, when)

    monkeypatch.setattr(time, "strftime", strftime)
    now = [1_795_000_000.25]
    monkeypatch.setattr(time, "time", lambda: now[0])
    assert utc_now() == "2026-11-18T11:06:40.250Z"
    now[0] = 1_795_000_000.999
    assert utc_now() == "2026-11-18T11:06:40.999Z"
    now[0] = 1_795_000_001.0
    assert utc_now() == "2026-11-18T11:06:41.000Z"
    now[0] = 1_795_000_000.5  # a clock set back: that second again, not the cached one
    assert utc_now() == "2026-11-18T11:06:40.500Z"
    assert len(calls) == 3


@pytest.mark.parametrize(
    "value",
    [
        {"event": "x", "text": 'é\u2028\x00"q"', "n": 10**30, "f": 1.5, "inf": math.inf},
        {"nested": [1, {"a": [], "b": {}}, None, True], 3: 4, 1.5: 0, None: 2, False: 1},
        {"bad": "\udcff not UTF-8"},
        ["a", ("t", "u")],
        "plain",
    ],
)
def test_encode_writes_what_the_standard_encoder_writes(value: object) -> None:
    standard = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    assert ENCODE(value) == standard(value)


def test_encode_makes_its_c_encoder_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line of events.jsonl and state.json goes through ENCODE: its encoder is made
    once, not once a call as `JSONEncoder.encode` makes it."""
    from json import encoder

    made: list[int] = []
    real = getattr(encoder, "c_make_encoder")  # noqa: B009 - untyped in typeshed
    assert real is not None

    def make(*args: object) -> object:
        made.append(1)
        return real(*args)

    monkeypatch.setattr(encoder, "c_make_encoder", make)
    for step in range(5):
        ENCODE({"event": "route", "step": step})
    assert made == []
    with pytest.raises(TypeError, match="Object of type object is not JSON serializable"):
        ENCODE({"x": object()})


def test_event_names_are_the_public_set() -> None:
    assert EVENT_NAMES[:8] == (
        "loop_start",
        "state_enter",
        "action_start",
        "action_complete",
        "evaluate",
        "retry",
        "route",
        "loop_complete",
    )
    assert len(set(EVENT_NAMES)) == len(EVENT_NAMES)


def test_jsonl_sink_in_an_existing_folder_makes_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every run (and every fork branch) opens its log in the folder it just made: no
    `mkdir` is tried again; a missing folder is still made."""
    made: list[Path] = []
    real = Path.mkdir

    def mkdir(path: Path, *args: Any, **kwargs: Any) -> None:
        made.append(path)
        real(path, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    JsonlSink(tmp_path / "events.jsonl").close()
    assert made == []
    JsonlSink(tmp_path / "new" / "events.jsonl").close()
    assert made == [tmp_path / "new"]


def test_jsonl_sink_buffers_until_flush(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "run" / "events.jsonl"
    sink = JsonlSink(path)  # creates the parent directories
    try:
        sink({"event": "loop_start", "loop": "démo", "n": 1})
        sink({"event": "state_enter", "state": "a", "nested": {"x": [1, None, True]}})
        assert path.read_text(encoding="utf-8") == ""
        sink.flush()
        assert path.read_text(encoding="utf-8") == (
            '{"event":"loop_start","loop":"démo","n":1}\n'
            '{"event":"state_enter","state":"a","nested":{"x":[1,null,true]}}\n'
        )
    finally:
        sink.close()


def test_jsonl_sink_appends_to_an_existing_log(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"event":"loop_start"}\n', encoding="utf-8")
    sink = JsonlSink(path)
    sink({"event": "loop_start", "resumed": True})
    sink.close()  # closing flushes too
    assert [e["event"] for e in read_events(path)] == ["loop_start", "loop_start"]
    assert read_events(path)[1] == {"event": "loop_start", "resumed": True}


def test_jsonl_sink_escapes_newlines_so_each_event_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    sink({"event": "action_complete", "stdout": "line 1\nline 2\r\n"})
    sink.close()
    assert len(path.read_text(encoding="utf-8").splitlines()) == 1
    assert read_events(path) == [{"event": "action_complete", "stdout": "line 1\nline 2\r\n"}]


def test_emitter_common_fields_and_order() -> None:
    seen: list[RunEvent] = []
    emitter = Emitter("run-1", [seen.append], clock=lambda: "2026-01-01T00:00:00.000Z")
    event = emitter.emit("route", {"from": "a", "to": "b"}, step=2, state="a")
    assert seen == [
        Route(ts="2026-01-01T00:00:00.000Z", run_id="run-1", step=2, state="a", from_="a", to="b")
    ]
    assert list(event.items()) == [
        ("event", "route"),
        ("ts", "2026-01-01T00:00:00.000Z"),
        ("run_id", "run-1"),
        ("step", 2),
        ("state", "a"),
        ("from", "a"),
        ("to", "b"),
    ]


def test_emitter_leaves_out_step_and_state_when_not_given() -> None:
    emitter = Emitter("run-1", [], clock=lambda: "T")
    assert emitter.emit("loop_start") == {"event": "loop_start", "ts": "T", "run_id": "run-1"}
    assert emitter.emit("x", {}, step=0) == {"event": "x", "ts": "T", "run_id": "run-1", "step": 0}


def test_emitter_uses_the_real_clock_by_default() -> None:
    event = Emitter("r", []).emit("loop_start")
    assert TIMESTAMP.fullmatch(event["ts"])


def test_emitter_calls_listeners_in_order() -> None:
    calls: list[str] = []
    emitter = Emitter(
        "r",
        [lambda e: calls.append(f"first:{e.name}"), lambda e: calls.append("second")],
    )
    emitter.emit("a")
    emitter.emit("b")
    assert calls == ["first:a", "second", "first:b", "second"]


def test_emitter_redacts_before_any_listener_sees_the_event(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    seen: list[RunEvent] = []
    emitter = Emitter("r", [seen.append], sinks=[sink], redact=Redactor(["hunter2024"]).obj)
    fields = {"stdout": "pw is hunter2024", "details": {"hunter2024": ["hunter2024"]}}
    returned = emitter.emit("action_complete", fields, state="hunter2024")
    sink.close()
    assert seen == [parse(returned)]
    assert seen[0].state == "***"
    assert seen[0].extra["stdout"] == "pw is ***"
    assert returned["stdout"] == "pw is ***"
    assert returned["details"] == {"***": ["***"]}
    assert returned["state"] == "***"
    assert "hunter2024" not in path.read_text(encoding="utf-8")
    assert fields["stdout"] == "pw is hunter2024"  # the caller's mapping is left alone


def test_read_events_missing_file(tmp_path: Path) -> None:
    assert read_events(tmp_path / "nope.jsonl") == []


def test_read_events_skips_a_torn_last_line_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = [
        json.dumps({"event": "loop_start", "step": None}),
        "",
        "   ",
        json.dumps({"event": "state_enter", "step": 1}),
        '["not", "an", "object"]',
        "42",
        json.dumps({"event": "route", "step": 1}),
        '{"event":"action_sta',
    ]
    path.write_text("\n".join(lines), encoding="utf-8")
    assert [e["event"] for e in read_events(path)] == ["loop_start", "state_enter", "route"]


def test_read_records_gives_typed_events_and_skips_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = [
        json.dumps({"event": "state_enter", "ts": "t", "run_id": "r", "step": 1, "state": "a"}),
        json.dumps({"event": "route", "step": 1, "from": "a", "to": "b", "via": "next"}),
        json.dumps({"event": "from_the_future", "step": 2, "x": 1}),
        '{"event":"action_sta',
    ]
    path.write_text("\n".join(lines), encoding="utf-8")
    records = read_records(path)
    assert [type(r).__name__ for r in records] == ["StateEnter", "Route", "UnknownEvent"]
    enter, route, unknown = records
    assert isinstance(enter, StateEnter)
    assert (enter.step, enter.state) == (1, "a")
    assert isinstance(route, Route)
    assert (route.from_, route.to, route.via) == ("a", "b", "next")
    assert unknown.name == "from_the_future"
    assert unknown.extra == {"x": 1}
    assert [r.to_dict() for r in records[:1]] == read_events(path)[:1]


def test_read_events_tolerates_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"event":"a","out":"\xff"}\n{"event":"b"}\n')
    events = read_events(path)
    assert [e["event"] for e in events] == ["a", "b"]
    assert events[0]["out"] == "\ufffd"


def test_written_events_read_back(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    emitter = Emitter("run-9", [], sinks=[sink], clock=lambda: "T")
    sent = [emitter.emit("state_enter", {"i": i}, step=i, state="s") for i in range(1, 4)]
    sink.flush()
    assert read_events(path) == sent
    sink.close()


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
def test_encode_matches_compact_json_dumps(value: object) -> None:
    assert ENCODE(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- typed events ---------------------------------------------------------------------------

STORY = """\
name: story
initial: count
max_iterations: 6
on_max_iterations: report
states:
  count:
    action: 'n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; echo "try $n"; [ $n -ge 2 ]'
    retry: {max_attempts: 3, interval: 0.01, jitter: false, on: [failure]}
    on_success: check
    on_failure: report
  check:
    action: 'echo "bad thing" >&2; exit 1'
    on_success: done
    on_failure: count
  report:
    action: echo reporting
    next: done
  done: {terminal: true}
"""


def run_story(project: Project) -> Path:
    """A real `ll run` of STORY (a retry, routed failures, the on_max_iterations jump)."""
    tmp_path = project.path
    project.write("story.yaml", STORY)
    done = project.ll("run", "story.yaml")
    assert done.returncode == 4, done.stderr  # max_iterations
    (run,) = (tmp_path / ".loops" / "runs").iterdir()
    return run / "events.jsonl"


def test_every_line_of_a_real_run_parses_typed_and_writes_back_byte_for_byte(
    project: Project,
) -> None:
    lines = run_story(project).read_text(encoding="utf-8").splitlines()
    typed = [parse(json.loads(line)) for line in lines]
    assert not [e for e in typed if isinstance(e, UnknownEvent)]
    assert {e.name for e in typed} >= {
        "loop_start",
        "state_enter",
        "action_start",
        "action_complete",
        "evaluate",
        "retry",
        "route",
        "loop_complete",
    }
    assert [ENCODE(e.to_dict()) for e in typed] == lines
    assert all(not e.extra for e in typed)
    failed = next(e for e in typed if isinstance(e, Evaluate) and e.verdict == "failure")
    assert failed.reason == "exit code 1: try 1"
    assert failed.tail == ("try 1",)
    route = next(e for e in typed if isinstance(e, Route))
    assert (route.from_, route.to, route.via) == ("count", "check", "on_success")


def test_send_writes_the_same_line_as_emit(tmp_path: Path) -> None:
    clock = "2026-01-01T00:00:00.000Z"
    by_name = Emitter("r", [], clock=lambda: clock)
    events = [
        (Route(step=2, state="a", from_="a", to="b", verdict="success", via="next"), None),
        (
            Evaluate(step=1, state="a", type="exit_code", verdict="success", details=Details(x=1)),
            None,
        ),
        (
            Evaluate(step=1, state="a", type="t", verdict="error", reason="why", tail=("x",)),
            None,
        ),
        (LoopComplete(final_state="d", outcome="success", exit_code=0, steps=3, error=None), None),
        (JudgeRetry(step=1, state="a", attempt=2, delay_s=0.5, error="busy"), None),
        (StateEnter(step=1, state="a"), None),
    ]
    for event, _ in events:
        sent = by_name.wire(event)
        emitted = by_name.emit(event.name, event.payload(), step=event.step, state=event.state)
        assert ENCODE(sent) == ENCODE(emitted)
        assert ENCODE(sent) == ENCODE(event.to_dict() | {"ts": clock, "run_id": "r"})
    assert by_name.wire(Route(from_="a", to="b"))["from"] == "a"
    assert "reason" not in by_name.wire(Evaluate(verdict="success"))
    assert by_name.wire(LoopComplete())["error"] is None  # null on the wire, as always


_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)
_JSON: st.SearchStrategy[Json] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_BY_HINT: dict[str, st.SearchStrategy[Any]] = {
    "str": _TEXT,
    "bool": st.booleans(),
    "int": st.integers(-(2**70), 2**70),
    "float": st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5),
    "Json": _JSON,
    "Mapping[str, Json]": st.dictionaries(_TEXT, _JSON, max_size=3),
    "Details": st.dictionaries(_TEXT, _JSON, max_size=3).map(lambda d: Details(d)),
    "tuple[str, ...]": st.lists(_TEXT, max_size=3).map(tuple),
}


_EVERY_TYPE = tuple(c for c in EVENT_TYPES.values() if c is not UnknownEvent)
# The five events of every step, whose lines are written by hand (record/events.py).
_STEP_TYPES = (StateEnter, ActionStart, ActionComplete, Evaluate, Route)


@st.composite
def _typed_events(draw: st.DrawFn, among: tuple[type[RunEvent], ...] = _EVERY_TYPE) -> RunEvent:
    from dataclasses import fields as dataclass_fields

    cls = draw(st.sampled_from(among))
    values: dict[str, Any] = {
        "step": draw(st.none() | st.integers(0, 10**6)),
        "state": draw(st.none() | _TEXT),
    }
    for f in dataclass_fields(cls):
        hint = str(f.type)
        if f.name in ("ts", "run_id", "step", "state", "extra"):
            continue
        strategy = _BY_HINT[hint.removesuffix(" | None")]
        if hint.endswith(" | None"):
            strategy = st.none() | strategy
        values[f.name] = draw(strategy)
    return cls(**values)


def _lines_are_their_wire_dicts(folder: Path, events: list[RunEvent], run_id: str) -> None:
    """`send` writes each line straight from the record: byte for byte the line `ENCODE`
    gives the wire dict that `wire` builds."""
    sink = JsonlSink(folder / "events.jsonl")
    clock = "2026-01-01T00:00:00.000Z"
    by_line = Emitter(run_id, [], sinks=[sink], clock=lambda: clock)
    by_dict = Emitter(run_id, [], clock=lambda: clock)
    for event in events:
        by_line.send(event)
    sink.close()
    written = (folder / "events.jsonl").read_text(encoding="utf-8")
    assert written == "".join(ENCODE(by_dict.wire(event)) + "\n" for event in events)


@settings(max_examples=60)  # 60 draws of up to 6 events: every event type many times over
@given(events=st.lists(_typed_events(), min_size=1, max_size=6), run_id=_TEXT)
def test_a_runs_line_is_what_its_wire_dict_encodes_to(
    tmp_path_factory: pytest.TempPathFactory, events: list[RunEvent], run_id: str
) -> None:
    """`send` writes each line straight from the record (no wire dict): byte for byte the
    line `ENCODE` gives the wire dict, for every event type and any value its fields hold."""
    _lines_are_their_wire_dicts(tmp_path_factory.mktemp("lines"), events, run_id)


@settings(max_examples=150)
@given(events=st.lists(_typed_events(_STEP_TYPES), min_size=1, max_size=5), run_id=_TEXT)
def test_a_steps_five_lines_written_by_hand_are_what_their_wire_dicts_encode_to(
    tmp_path_factory: pytest.TempPathFactory, events: list[RunEvent], run_id: str
) -> None:
    """The five events of every step have writers of their own: the same line as the wire
    dict's, whatever their fields hold (the types a step gives them, or any other)."""
    _lines_are_their_wire_dicts(tmp_path_factory.mktemp("step-lines"), events, run_id)


def _fields(event: RunEvent) -> dict[str, Any]:
    """The fields a step's call site gives `send_fields`: every field but the stamp's."""
    return {k: v for k, v in event.__dict__.items() if k not in ("ts", "run_id", "extra")}


@settings(max_examples=150)
@given(
    events=st.lists(_typed_events(_STEP_TYPES), min_size=1, max_size=5),
    run_id=_TEXT,
    listened=st.booleans(),
)
def test_a_steps_events_sent_as_fields_are_the_lines_and_records_their_records_give(
    tmp_path_factory: pytest.TempPathFactory,
    events: list[RunEvent],
    run_id: str,
    listened: bool,
) -> None:
    """`send_fields` (no record made where nobody listens): the same lines as `send` of the
    record, whatever the fields hold; a listener is handed the record `send` would hand it."""
    folder = tmp_path_factory.mktemp("fields")
    clock = "2026-01-01T00:00:00.000Z"
    heard: list[RunEvent] = []
    sink = JsonlSink(folder / "events.jsonl")
    by_fields = Emitter(
        run_id, [heard.append] if listened else [], sinks=[sink], clock=lambda: clock
    )
    for event in events:
        by_fields.send_fields(type(event), _fields(event))
    sink.close()
    by_dict = Emitter(run_id, [], clock=lambda: clock)
    expected = "".join(ENCODE(by_dict.wire(event)) + "\n" for event in events)
    assert (folder / "events.jsonl").read_text(encoding="utf-8") == expected
    if listened:
        assert [e.to_dict() for e in heard] == [
            {**e.to_dict(), "ts": clock, "run_id": run_id} for e in events
        ]


def test_no_record_is_made_for_a_step_event_nobody_listens_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's five events cost no record where no listener takes them (a quiet run), and
    one where a listener does."""
    made: list[str] = []
    for cls in _STEP_TYPES:
        init = cls.__init__

        def counted(self: Any, *args: Any, _init: Any = init, **kwargs: Any) -> None:
            made.append(type(self).NAME)
            _init(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counted)
    sink = JsonlSink(tmp_path / "events.jsonl")

    class Ends:
        listens_to = frozenset({"route"})

        def __call__(self, event: RunEvent) -> None:
            made.append("heard " + event.name)

    emitter = Emitter("r", [Ends()], sinks=[sink])
    emitter.send_fields(StateEnter, {"step": 1, "state": "a"})
    emitter.send_fields(
        Route,
        {"step": 1, "state": "a", "from_": "a", "to": "b", "verdict": "success", "via": "next"},
    )
    emitter.send_fields(StateEnter, {"step": 2, "state": "b\udcff"})  # not UTF-8: a record
    sink.close()
    assert made == ["route", "heard route", "state_enter"]
    assert [e["event"] for e in read_events(tmp_path / "events.jsonl")] == [
        "state_enter",
        "route",
        "state_enter",
    ]


def test_a_steps_lines_are_written_by_their_own_writers() -> None:
    """Each of the five is written by its own function (not the generic walk), which a
    step's values take whole."""
    from little_loops.record import events

    step = [
        StateEnter(step=1, state="a"),
        ActionStart(step=1, state="a", action="cat f", action_type="shell", log_at=0),
        ActionComplete(
            step=1, state="a", exit_code=0, duration_ms=3, timed_out=False, output_bytes=2
        ),
        Evaluate(step=1, state="a", type="exit_code", verdict="success", details=Details(x=1)),
        Route(step=1, state="a", from_="a", to="a", verdict="success", via="on_success"),
    ]
    for event in step:
        writer = events._line_writer(type(event))
        assert writer is not None
        assert writer.__qualname__.startswith(events._STEP_WRITERS[type(event)].__name__)
        line = writer(event.__dict__, '"t"', '"r"')
        assert json.loads(line) == event.to_dict() | {"ts": "t", "run_id": "r"}


def test_a_line_that_is_not_utf8_is_written_json_escaped(tmp_path: Path) -> None:
    """A lone surrogate (bytes of a file name that are not UTF-8) cannot be written as
    UTF-8: the event is written with JSON escapes instead, and the next one as usual."""
    sink = JsonlSink(tmp_path / "events.jsonl")
    emitter = Emitter("r", [], sinks=[sink])
    emitter.send(StateEnter(step=1, state="bad\udcff"))
    emitter.send(StateEnter(step=2, state="good"))
    sink.close()
    raw = (tmp_path / "events.jsonl").read_text(encoding="utf-8").split("\n")
    assert '"state":"bad\\udcff"' in raw[0]
    assert [e["state"] for e in read_events(tmp_path / "events.jsonl")] == ["bad\udcff", "good"]


def test_parse_keeps_what_it_does_not_know_and_never_raises() -> None:
    newer = parse({"event": "route", "from": "a", "to": "b", "weight": 3, "step": "two"})
    assert isinstance(newer, Route)
    assert (newer.from_, newer.to, newer.step) == ("a", "b", None)
    assert newer.extra == {"step": "two", "weight": 3}
    wrong = parse({"event": "action_complete", "exit_code": "0", "timed_out": False})
    assert isinstance(wrong, ActionComplete)
    assert wrong.exit_code is None
    assert wrong.extra == {"exit_code": "0"}
    unknown = parse({"event": "fork_start", "ts": "T", "run_id": "r", "child": "x"})
    assert isinstance(unknown, UnknownEvent)
    assert unknown.name == "fork_start"
    assert unknown.to_dict() == {
        "event": "fork_start",
        "ts": "T",
        "run_id": "r",
        "child": "x",
    }
    assert isinstance(parse([1, 2]), UnknownEvent)
    assert isinstance(parse({"no": "name"}), UnknownEvent)
    assert parse({"event": "evaluate", "tail": ["a", 1]}).extra == {"tail": ["a", 1]}


@given(
    st.dictionaries(
        st.sampled_from(["event", "ts", "run_id", "step", "state", "from", "details", "tail", "x"]),
        st.none()
        | st.booleans()
        | st.integers()
        | st.text(max_size=5)
        | st.sampled_from(EVENT_NAMES)
        | st.lists(st.text(max_size=3), max_size=2)
        | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        max_size=8,
    )
)
def test_parse_takes_any_line(raw: dict[str, Json]) -> None:
    event = parse(raw)
    again = event.to_dict()
    assert isinstance(again, dict)
    assert json.loads(ENCODE(again)) is not None


def test_every_event_the_code_emits_has_a_typed_record() -> None:
    """The run writes events only as typed records (or a step's, as a record's fields), and
    every record is written somewhere."""
    import little_loops

    root = Path(little_loops.__file__).parent
    by_name: list[str] = []
    built: set[str] = set()
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        by_name += [f"{path.name}: {m}" for m in re.findall(r"\bemit\(\s*\"(\w+)\"", text)]
        if path.name != "events.py":  # where the records are declared, not built
            built |= set(re.findall(r"\b(?:ev\.)?([A-Z][A-Za-z]+)\(", text))
            # a step's events, sent as their fields (`emit_fields(ev.Route, {...})`)
            built |= set(re.findall(r"\bemit_fields\(\s*(?:ev\.)?([A-Z][A-Za-z]+),", text))
    assert not by_name, f"events written by name, not as records: {by_name}"
    records = {cls.__name__ for cls in EVENT_TYPES.values()}
    assert records <= built, records - built
    assert set(EVENT_NAMES) == set(EVENT_TYPES)


def test_event_classes_are_cheap_to_define_and_still_immutable_values() -> None:
    """Only `__init__` is compiled per class (every `ll run` imports all of them, through
    model/records.py); equality and repr come from `RunEvent` once, and the refusal of an
    assignment is one function shared by every record."""
    import dataclasses

    import pytest

    from little_loops.record import events as ev

    shared = vars(ev.RunEvent)["__setattr__"]
    for cls in ev.EVENT_TYPES.values():
        own = set(vars(cls))
        assert not own & {"__eq__", "__repr__"}, cls.__name__
        assert vars(cls)["__setattr__"] is shared, cls.__name__
        # A class without a docstring makes dataclass build one from its signature (slow).
        assert cls.__doc__, cls.__name__
        assert not cls.__doc__.startswith(cls.__name__ + "("), cls.__name__
    route = ev.Route(step=2, state="a", from_="a", to="b", verdict="success", via="on_success")
    assert route == ev.Route(
        step=2, state="a", from_="a", to="b", verdict="success", via="on_success"
    )
    assert route != ev.Route(step=2, state="a", from_="a", to="c")
    assert route != ev.Retry(step=2, state="a")
    assert repr(route).startswith("Route(ts='', run_id='', step=2, state='a', extra={}, from_='a'")
    assert dataclasses.replace(route, to="c").to == "c"
    with pytest.raises(TypeError):
        hash(route)
    with pytest.raises(dataclasses.FrozenInstanceError):
        route.to = "c"  # type: ignore[misc]


def test_the_event_log_reader_skips_a_torn_line_and_follows_a_growing_log(tmp_path: Path) -> None:
    """The one reader of events.jsonl (`EventLog`): `ll logs -f`, `ll status`, the listing,
    the fork's read-back and the simulation's resume all go through it."""
    from little_loops.record.events import EventLog

    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"event": "loop_start"}\n{"event": "state_en')
    assert [e["event"] for e in read_events(path)] == ["loop_start"]  # a crash cut it short
    log = EventLog(path)
    assert [e["event"] for e in log.read()] == ["loop_start"]
    assert log.read() == []  # the writer is mid-line: it waits
    with path.open("ab") as fh:
        fh.write(b'ter", "step": 1}\n\n[1, 2]\n{"event": "route"}\n')
    assert [e["event"] for e in log.read()] == ["state_enter", "route"]  # non-objects skipped
    assert [e["event"] for e in EventLog(path).head(2)] == ["loop_start", "state_enter"]
    assert EventLog(tmp_path / "missing.jsonl").read() == []
    assert EventLog(tmp_path / "missing.jsonl").head(3) == []


def test_the_last_event_is_read_from_the_end_of_the_log_whole_or_not_at_all(
    tmp_path: Path,
) -> None:
    """`EventLog.last`: what resume asks to find a run's logged end; only a whole last line."""
    from little_loops.record.events import EventLog

    path = tmp_path / "events.jsonl"
    assert EventLog(path).last() is None  # missing
    path.write_bytes(b"")
    assert EventLog(path).last() is None
    path.write_bytes(b'{"event": "loop_start"}\n')
    assert EventLog(path).last() == {"event": "loop_start"}  # the only line
    long = json.dumps({"event": "loop_complete", "outputs": {"x": "y" * 200_000}})
    path.write_bytes(b'{"event": "loop_start"}\n' + long.encode() + b"\n")
    assert EventLog(path).last() == json.loads(long)  # longer than one read from the end
    path.write_bytes(b'{"event": "loop_start"}\n' + long.encode()[:-3])
    assert EventLog(path).last() is None  # torn: no newline
    path.write_bytes(b'{"event": "loop_start"}\n{"event": "route"')  # torn, then no newline
    assert EventLog(path).last() is None
    path.write_bytes(b'{"event": "loop_start"}\n{"event": "rou\n')  # ends, does not parse
    assert EventLog(path).last() is None
    path.write_bytes(b'{"event": "loop_start"}\n[1, 2]\n')  # not an object
    assert EventLog(path).last() is None
