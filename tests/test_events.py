"""Event records: timestamps, the JSONL sink, the emitter's common fields, reading a log back."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timezone
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from little_loops.events import (
    ENCODE,
    EVENT_NAMES,
    Emitter,
    Event,
    JsonlSink,
    read_events,
    utc_now,
)
from little_loops.secrets import Redactor

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
    seen: list[Event] = []
    emitter = Emitter("run-1", [seen.append], clock=lambda: "2026-01-01T00:00:00.000Z")
    event = emitter.emit("route", {"from": "a", "to": "b"}, step=2, state="a")
    assert event == seen[0]
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
        [lambda e: calls.append(f"first:{e['event']}"), lambda e: calls.append("second")],
    )
    emitter.emit("a")
    emitter.emit("b")
    assert calls == ["first:a", "second", "first:b", "second"]


def test_emitter_redacts_before_any_listener_sees_the_event(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    seen: list[Event] = []
    emitter = Emitter("r", [sink, seen.append], redact=Redactor(["hunter2024"]).obj)
    fields = {"stdout": "pw is hunter2024", "details": {"hunter2024": ["hunter2024"]}}
    returned = emitter.emit("action_complete", fields, state="hunter2024")
    sink.close()
    assert seen == [returned]
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


def test_read_events_tolerates_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"event":"a","out":"\xff"}\n{"event":"b"}\n')
    events = read_events(path)
    assert [e["event"] for e in events] == ["a", "b"]
    assert events[0]["out"] == "\ufffd"


def test_written_events_read_back(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    emitter = Emitter("run-9", [sink], clock=lambda: "T")
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
