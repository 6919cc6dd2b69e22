"""Events (SPEC section 10): one small typed record per event, their wire form, the sinks.

On the wire an event is one JSON object (`Event`, a dict): `event`, `ts`, `run_id`, inside a
step `step` and `state`, then the event's own fields in a fixed order. In code it is a frozen
dataclass (`LoopStart`, `Evaluate`, ...): `parse` turns a line read back into one, and never
raises (an unknown event, an extra field or a field of the wrong type from an older or newer
`ll` is kept aside in `extra`); `to_dict` gives the wire form back, byte for byte.
Over 400 lines on purpose: the records are the public contract, kept next to their wire form.
"""

from __future__ import annotations

import _thread  # a lock without importing `threading` (`ll validate` imports this module)
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from little_loops.model.details import EMPTY_DETAILS, Details, Json
from little_loops.model.records import field, fields, record

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import IO, Any, ClassVar

    Event = dict[str, Any]
else:
    Event = dict
# A listener of a run is handed each event as its typed record (`RunEvent`); a sink (the
# run's events.jsonl) is handed the wire dict it writes.
Listener = Callable[["RunEvent"], None]
Sink = Callable[[Event], None]


def _encoder() -> Callable[[Any], str]:
    """`JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode`, the same text, with its
    C encoder made once instead of once a call (each step encodes seven objects). Without the
    check for circular references: what ll encodes is parsed JSON or its own records, trees."""
    from json import encoder

    make: Any = getattr(encoder, "c_make_encoder", None)  # untyped in typeshed
    if make is None:  # an interpreter without the C accelerator
        return json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def default(value: object) -> Any:
        raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")

    chunks = make(None, default, encoder.encode_basestring, None, ":", ",", False, False, True)
    return lambda value: "".join(chunks(value, 0))


# Compact and UTF-8-keeping, as every line of events.jsonl and state.json is written.
ENCODE: Callable[[Any], str] = _encoder()


# The last whole second `utc_now` formatted, and its text: a run's events mostly share their
# second, and formatting it is most of a stamp's cost (one tuple, replaced whole: thread-safe).
_SECOND: tuple[int, str] = (-1, "")


def utc_now() -> str:
    """ISO 8601 UTC with milliseconds, e.g. 2026-11-22T04:14:30.123Z (every event has one)."""
    global _SECOND
    now = time.time()
    whole = int(now)
    second = _SECOND
    if second[0] != whole:
        second = _SECOND = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return second[1] + _MILLIS[int((now - whole) * 1000)]


_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))  # a stamp's end, made once, not formatted


_DAYS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def utc_ms(ts: str) -> float:
    """Epoch milliseconds of a time `utc_now` wrote (`YYYY-MM-DDTHH:MM:SS.mmmZ`), as
    datetime.fromisoformat reads it, without importing datetime (a millisecond of every
    `ll run`): days from the civil date, H. Hinnant's algorithm. ValueError otherwise."""
    digits = ts[0:4] + ts[5:7] + ts[8:10] + ts[11:13] + ts[14:16] + ts[17:19] + ts[20:23]
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(ts)
    if (ts[4], ts[7], ts[13], ts[16], ts[19]) != ("-", "-", ":", ":", "."):
        raise ValueError(ts)
    year, month, day = int(ts[0:4]), int(ts[5:7]), int(ts[8:10])
    hour, minute, second, milli = int(ts[11:13]), int(ts[14:16]), int(ts[17:19]), int(ts[20:23])
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not (year >= 1 and 1 <= month <= 12 and hour < 24 and minute < 60 and second < 60):
        raise ValueError(ts)
    if not 1 <= day <= (29 if month == 2 and leap else _DAYS[month]):
        raise ValueError(ts)
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    return float((((days * 24 + hour) * 60 + minute) * 60 + second) * 1000 + milli)


# -- the typed events -----------------------------------------------------------------------


# The metadata of a field left off the wire when it is None (`reason` on a success, say).
_OMIT_NONE = {"optional": True}


# Each event class is a `record` (model/records.py: a dataclass with only its `__init__`
# compiled) whose `__eq__` and `__repr__` come from `RunEvent`. Generated per class, with the
# `__hash__` of `frozen=True`, they cost twice the module's import, which every `ll run` pays
# (docs/performance.md, "Start-up of `ll run`"). A record's `__init__` writes the fields into
# the instance directly, so being frozen costs an event nothing when it is made.
@record(frozen=True, kw_only=True, eq=False, repr=False)
class RunEvent:
    """The fields every event has. `ts` and `run_id` are filled in by the `Emitter`."""

    NAME: ClassVar[str] = ""
    ts: str = ""
    run_id: str = ""
    step: int | None = None
    state: str | None = None
    # Fields this version does not know, or whose value is not of the expected type.
    extra: Mapping[str, Json] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.NAME

    @property
    def path(self) -> tuple[str, ...]:
        """The calling states (and fork branch keys) from the root run down to the run that
        emitted this event; empty for the root's own events. On the wire it is `path`, put
        last by each caller that forwards a child's events (run/subloop.forward)."""
        below = self.extra.get("path")
        return tuple(str(part) for part in below) if isinstance(below, list) else ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _field_names(type(self)))

    __hash__ = None  # type: ignore[assignment]  # events hold dicts: never hashable

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _field_names(type(self)))
        return f"{type(self).__name__}({shown})"

    def payload(self) -> Event:
        """The event's own fields, in wire order (what `Emitter.emit` takes as `fields`)."""
        out: Event = {}
        for spec in _specs(type(self)):
            value = getattr(self, spec.attr)
            if value is None and spec.optional:
                continue
            if spec.details:
                value = value.to_json()
            elif isinstance(value, tuple):
                value = list(value)
            out[spec.wire] = value
        out.update(self.extra)
        return out

    def to_dict(self) -> Event:
        """The wire form: what the runner writes for this event."""
        event: Event = {"event": self.name, "ts": self.ts, "run_id": self.run_id}
        if self.step is not None:
            event["step"] = self.step
        if self.state is not None:
            event["state"] = self.state
        event.update(self.payload())
        return event


@record(frozen=True, kw_only=True, eq=False, repr=False)
class LoopStart(RunEvent):
    """A run starts, or resumes (`resumed`)."""

    NAME: ClassVar[str] = "loop_start"
    loop: str = ""
    file: str = ""
    max_iterations: int = 0
    resumed: bool = False


@record(frozen=True, kw_only=True, eq=False, repr=False)
class LockReclaimed(RunEvent):
    """The loop's lock was held by a run whose process is gone; this run took it over."""

    NAME: ClassVar[str] = "lock_reclaimed"
    previous_run_id: Json = None  # as the old lock file said
    previous_pid: Json = None


@record(frozen=True, kw_only=True, eq=False, repr=False)
class StateEnter(RunEvent):
    """A step begins: the run enters a state."""

    NAME: ClassVar[str] = "state_enter"


@record(frozen=True, kw_only=True, eq=False, repr=False)
class ActionStart(RunEvent):
    """A step's action starts (after interpolation)."""

    NAME: ClassVar[str] = "action_start"
    action: str = ""  # after interpolation, secrets redacted
    action_type: str | None = None
    # Where the attempt's output begins in the run's `steps.log` (record/store.RunLog).
    log_at: int | None = field(default=None, metadata=_OMIT_NONE)


@record(frozen=True, kw_only=True, eq=False, repr=False)
class ActionComplete(RunEvent):
    """A step's action ended."""

    NAME: ClassVar[str] = "action_complete"
    exit_code: int | None = None
    duration_ms: int | None = None
    timed_out: bool = False
    output_bytes: int | None = None


@record(frozen=True, kw_only=True, eq=False, repr=False)
class JudgeStart(RunEvent):
    """A model is asked for a verdict (not sent for a cache hit)."""

    NAME: ClassVar[str] = "judge_start"
    model: str = ""
    samples: int = 1


@record(frozen=True, kw_only=True, eq=False, repr=False)
class JudgeAsked(RunEvent):
    """What one judge model is asked (a cache hit too): what `ll judge explain` shows."""

    NAME: ClassVar[str] = "judge_request"
    model: str = ""
    provider: str = ""
    temperature: float | None = field(default=None, metadata=_OMIT_NONE)  # claude://: none
    max_tokens: int = 0
    system: str = ""
    user: str = ""
    schema: Mapping[str, Json] = field(default_factory=dict)
    examples: int = 0
    est_input_tokens: int = 0  # about 4 characters a token: system, user (examples in it), schema
    cached: bool = False


@record(frozen=True, kw_only=True, eq=False, repr=False)
class JudgeRetry(RunEvent):
    """A judge call is tried again after an error."""

    NAME: ClassVar[str] = "judge_retry"
    attempt: int = 0
    delay_s: float = 0.0
    status: int | None = field(default=None, metadata=_OMIT_NONE)  # the HTTP status, if any
    error: str = ""


@record(frozen=True, kw_only=True, eq=False, repr=False)
class JudgeFailOpen(RunEvent):
    """The judge failed and `fail_open` made the verdict success."""

    NAME: ClassVar[str] = "judge_fail_open"
    error: str = ""
    flags: tuple[str, ...] = ()


@record(frozen=True, kw_only=True, eq=False, repr=False)
class Evaluate(RunEvent):
    """A step's verdict, from its evaluator (or the action alone)."""

    NAME: ClassVar[str] = "evaluate"
    type: str = ""
    verdict: str = ""
    details: Details = EMPTY_DETAILS
    # On a verdict other than success: why, in one line, and the last lines printed.
    reason: str | None = field(default=None, metadata=_OMIT_NONE)
    tail: tuple[str, ...] | None = field(default=None, metadata=_OMIT_NONE)


@record(frozen=True, kw_only=True, eq=False, repr=False)
class Retry(RunEvent):
    """A step is run again after a delay."""

    NAME: ClassVar[str] = "retry"
    attempt: int = 0  # the attempt about to run
    delay_s: float = 0.0
    verdict: str = ""


@record(frozen=True, kw_only=True, eq=False, repr=False)
class Route(RunEvent):
    """Where a verdict sent the run, and by which key."""

    NAME: ClassVar[str] = "route"
    from_: str = field(default="", metadata={"wire": "from"})
    to: str = ""
    verdict: str = ""
    via: str = ""


@record(frozen=True, kw_only=True, eq=False, repr=False)
class LoopComplete(RunEvent):
    """The run ended: how, where, after how many steps."""

    NAME: ClassVar[str] = "loop_complete"
    final_state: str = ""
    outcome: str = ""
    exit_code: int | None = None
    steps: int = 0
    duration_ms: int | None = None
    error: str | None = None
    cost_usd: float | None = field(default=None, metadata=_OMIT_NONE)
    # A loop that declares `outputs:`: their values at the end.
    outputs: Mapping[str, Json] | None = field(default=None, metadata=_OMIT_NONE)


@record(frozen=True, kw_only=True, eq=False, repr=False)
class ChildStart(RunEvent):
    """A `loop:` state starts (or resumes) its child run, in `dir` under this run's directory."""

    NAME: ClassVar[str] = "child_start"
    kind: str = "loop"
    file: str = ""
    child_run_id: str = ""
    dir: str = ""
    attempt: int = 1
    with_: Mapping[str, Json] = field(default_factory=dict, metadata={"wire": "with"})
    resumed: bool = False
    # A fork's branch (`kind: branch`): its key, 1-based index and item (cut, redacted).
    branch: str | None = field(default=None, metadata=_OMIT_NONE)
    index: int | None = field(default=None, metadata=_OMIT_NONE)
    item: str | None = field(default=None, metadata=_OMIT_NONE)
    fork: str | None = field(default=None, metadata=_OMIT_NONE)  # parallel | for_each
    total: int | None = field(default=None, metadata=_OMIT_NONE)  # the fork's branches


@record(frozen=True, kw_only=True, eq=False, repr=False)
class ChildComplete(RunEvent):
    """A `loop:` state's child run ended; `verdict` is what the calling state routes on."""

    NAME: ClassVar[str] = "child_complete"
    child_run_id: str = ""
    final_state: str = ""
    outcome: str = ""
    exit_code: int | None = None
    verdict: str = ""
    steps: int = 0
    duration_ms: int | None = None
    cost_usd: float | None = field(default=None, metadata=_OMIT_NONE)
    outputs: Mapping[str, Json] = field(default_factory=dict)
    branch: str | None = field(default=None, metadata=_OMIT_NONE)  # a fork's branch key
    reason: str | None = field(default=None, metadata=_OMIT_NONE)  # why it did not succeed


@record(frozen=True, kw_only=True, eq=False, repr=False)
class Ask(RunEvent):
    """An `ask` state asks a person; `expires_at` is None without a timeout."""

    NAME: ClassVar[str] = "ask"
    question_id: str = ""
    prompt: str = ""
    choices: tuple[str, ...] = ()
    asked_at: str = ""
    expires_at: str | None = None


@record(frozen=True, kw_only=True, eq=False, repr=False)
class Answer(RunEvent):
    """A question is answered; `via`: prompt, resume, answer, preset or simulate."""

    NAME: ClassVar[str] = "answer"
    question_id: str = ""
    answer: str = ""
    note: str | None = None
    by: str | None = None
    via: str = ""


@record(frozen=True, kw_only=True, eq=False, repr=False)
class LoopSuspended(RunEvent):
    """The run waits for answers to `pending` and exits 6; `ll resume` continues it."""

    NAME: ClassVar[str] = "loop_suspended"
    reason: str = "question"
    pending: tuple[str, ...] = ()
    exit_code: int = 6
    steps: int = 0
    duration_ms: int | None = None
    cost_usd: float | None = field(default=None, metadata=_OMIT_NONE)


@record(frozen=True, kw_only=True, eq=False, repr=False)
class UnknownEvent(RunEvent):
    """An event this version does not know (a newer `ll` wrote it); all its fields in `extra`."""

    event: str = ""

    @property
    def name(self) -> str:
        return self.event

    def payload(self) -> Event:
        return dict(self.extra)


EVENT_TYPES: dict[str, type[RunEvent]] = {
    cls.NAME: cls
    for cls in (
        LoopStart,
        StateEnter,
        ActionStart,
        ActionComplete,
        Evaluate,
        Retry,
        Route,
        LoopComplete,
        JudgeRetry,
        JudgeFailOpen,
        LockReclaimed,
        JudgeStart,
        JudgeAsked,
        ChildStart,
        ChildComplete,
        Ask,
        Answer,
        LoopSuspended,
    )
}
# The public event names; CI dashboards read them, so they only ever grow.
EVENT_NAMES = tuple(EVENT_TYPES)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_lines(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(line, str) for line in value)


# A check of a wire value for each annotation the records above use.
_CHECKS: dict[str, Callable[[Any], bool]] = {
    "str": lambda value: isinstance(value, str),
    "bool": lambda value: isinstance(value, bool),
    "int": _is_int,
    "float": _is_number,
    "Json": lambda value: True,
    "Mapping[str, Json]": lambda value: isinstance(value, Mapping),
    # What a JSON object decodes to (string keys, JSON values); the emitter's wire dicts are
    # `Details.to_json()`. A hand-built mapping of anything else stays in `extra`.
    "Details": lambda value: isinstance(value, dict),
    "tuple[str, ...]": _is_lines,
}


def _fits(hint: str) -> Callable[[Any], bool]:
    check = _CHECKS[hint.removesuffix(" | None")]
    if hint.endswith(" | None"):
        return lambda value: value is None or check(value)
    return check


@record(frozen=True)
class _Spec:
    attr: str
    wire: str
    optional: bool
    fits: Callable[[Any], bool]
    # A `Details` field: an object on the wire (`to_json`), the record read back (`read`).
    details: bool = False


_SPECS: dict[type[RunEvent], tuple[_Spec, ...]] = {}
# Each event's own fields for `Emitter.send`: (attribute, wire name, optional, a Details).
_PLANS: dict[type[RunEvent], tuple[tuple[str, str, bool, bool], ...]] = {}
_NAMES: dict[type[RunEvent], tuple[str, ...]] = {}


def _field_names(cls: type[RunEvent]) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


_BY_WIRE: dict[type[RunEvent], dict[str, _Spec]] = {}
_COMMON = frozenset(f.name for f in fields(RunEvent))


def _specs(cls: type[RunEvent]) -> tuple[_Spec, ...]:
    """The event's own fields, in wire order."""
    specs = _SPECS.get(cls)
    if specs is None:
        specs = _SPECS[cls] = tuple(
            _Spec(
                f.name,
                f.metadata.get("wire", f.name),
                bool(f.metadata.get("optional")),
                _fits(str(f.type)),
                str(f.type) == "Details",
            )
            for f in fields(cls)
            if f.name not in _COMMON and f.name != "event"
        )
    return specs


def _by_wire(cls: type[RunEvent]) -> dict[str, _Spec]:
    """Every field of the event, the common ones too, by its name on the wire."""
    found = _BY_WIRE.get(cls)
    if found is None:
        common = [
            _Spec("ts", "ts", False, _CHECKS["str"]),
            _Spec("run_id", "run_id", False, _CHECKS["str"]),
            _Spec("step", "step", False, _is_int),
            _Spec("state", "state", False, _CHECKS["str"]),
        ]
        found = _BY_WIRE[cls] = {spec.wire: spec for spec in [*common, *_specs(cls)]}
    return found


def parse(raw: Json) -> RunEvent:
    """The typed event of one line of events.jsonl (a dict); never raises.

    A field missing takes its default; one this version does not know, or whose value is not
    of the expected type, is kept in `extra`; an unknown event is an `UnknownEvent`.
    """
    if not isinstance(raw, Mapping):
        return UnknownEvent(extra={"value": raw})
    name = raw.get("event")
    cls = EVENT_TYPES.get(name) if isinstance(name, str) else None
    fields = _by_wire(cls or UnknownEvent)
    values: dict[str, Any] = {}
    extra: Event = {}
    for key, value in raw.items():
        if key == "event":
            continue
        spec = fields.get(key)
        if spec is None or not spec.fits(value):
            extra[key] = value
        else:
            if spec.details and isinstance(value, dict):
                values[spec.attr] = Details(value)
            else:
                values[spec.attr] = tuple(value) if isinstance(value, list) else value
    if cls is None:
        return UnknownEvent(event=name if isinstance(name, str) else "", extra=extra, **values)
    return cls(extra=extra, **values)


# -- sinks and the emitter -----------------------------------------------------------------


# -- an event's line, straight from its record ----------------------------------------------

# json's own string encoder (the C one where there is one): what `ENCODE` uses for each string,
# so a line made here is the text `ENCODE` gives the wire dict, byte for byte.
json_string: Callable[[str], str] = json.encoder.encode_basestring
_STR = json_string
_INT_REPR = int.__repr__


def json_value(value: Any) -> str:
    """One JSON value, as `ENCODE` writes it inside an object."""
    kind = value.__class__
    if kind is str:
        return _STR(value)
    if kind is int:
        return _INT_REPR(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return ENCODE(value)  # a float, a list, an object, a tuple (an array), a subclass


if TYPE_CHECKING:
    _Writer = Callable[[dict[str, Any], str, str], str]
# How a field's value is written: a `str` or an `int` field's without a call where the value
# has that type, a `Details` field's as its JSON object, any other through `json_value`.
_STR_KIND, _INT_KIND, _DETAILS, _ANY = "str", "int", "details", "any"
_KINDS = {"str": _STR_KIND, "int": _INT_KIND}
# The line writer of each event class, made at its first `send`. A class with a wire form of
# its own (`UnknownEvent`) has none: it goes through its wire dict.
_LINE_WRITERS: dict[type[RunEvent], _Writer] = {}


def _line_writer(cls: type[RunEvent]) -> _Writer | None:
    """A function (record's attributes, its stamp JSON-encoded, its run id JSON-encoded) ->
    the event's line: `ENCODE` of the wire dict `Emitter.wire` builds, the same keys in the
    same order, each key's text made once. (A function compiled per class would be a little
    quicker, but a run compiles no code: tests/cli/test_run_start.py.)"""
    if cls.payload is not RunEvent.payload or cls.name is not RunEvent.name:
        return None
    head = "{" + _STR("event") + ":" + _STR(cls.NAME) + "," + _STR("ts") + ":"
    to_run, to_step, to_state = (f",{_STR(key)}:" for key in ("run_id", "step", "state"))
    hints = {f.name: str(f.type).removesuffix(" | None") for f in fields(cls)}
    plan = tuple(
        (
            f",{_STR(spec.wire)}:",
            spec.attr,
            spec.optional,
            _DETAILS if spec.details else _KINDS.get(hints[spec.attr], _ANY),
        )
        for spec in _specs(cls)
    )

    def write(v: dict[str, Any], ts: str, run_id: str) -> str:
        out = head + ts + to_run + run_id
        x = v["step"]
        if x is not None:
            out += to_step + (_INT_REPR(x) if x.__class__ is int else json_value(x))
        x = v["state"]
        if x is not None:
            out += to_state + (_STR(x) if x.__class__ is str else json_value(x))
        for key, attr, optional, kind in plan:
            x = v[attr]
            if x is None:
                if not optional:
                    out += key + "null"
            elif kind is _STR_KIND and x.__class__ is str:
                out += key + _STR(x)
            elif kind is _INT_KIND and x.__class__ is int:
                out += key + _INT_REPR(x)
            elif kind is _DETAILS:
                out += key + json_value(x.to_json())
            else:
                out += key + json_value(x)
        return out + "}"

    made = _STEP_WRITERS.get(cls)
    writer = write if made is None else made(write)
    _LINE_WRITERS[cls] = writer
    return writer


# -- the five events of every step, written by hand --------------------------------------
#
# Each step writes these five lines, where the generic writer above walks its plan field by
# field. Each function here writes its class's line in one f-string where every field holds
# the type a step gives it, and hands any other record to the generic writer (`other`): the
# same text either way (tests/record/test_events.py draws records of every type and value).
# A field added to one of these classes must be added here too (the same test fails until
# it is).


def _state_enter_line(other: _Writer) -> _Writer:
    def write(v: dict[str, Any], ts: str, run_id: str) -> str:
        step, state = v["step"], v["state"]
        if step.__class__ is int and state.__class__ is str:
            return (
                f'{{"event":"state_enter","ts":{ts},"run_id":{run_id},"step":{step},'
                f'"state":{_STR(state)}}}'
            )
        return other(v, ts, run_id)

    return write


def _action_start_line(other: _Writer) -> _Writer:
    def write(v: dict[str, Any], ts: str, run_id: str) -> str:
        step, state, action, kind, at = (
            v["step"], v["state"], v["action"], v["action_type"], v["log_at"]
        )  # fmt: skip
        if step.__class__ is int and state.__class__ is action.__class__ is kind.__class__ is str:
            line = (
                f'{{"event":"action_start","ts":{ts},"run_id":{run_id},"step":{step},'
                f'"state":{_STR(state)},"action":{_STR(action)},"action_type":{_STR(kind)}'
            )
            if at is None:
                return line + "}"
            if at.__class__ is int:
                return f'{line},"log_at":{at}}}'
        return other(v, ts, run_id)

    return write


def _action_complete_line(other: _Writer) -> _Writer:
    def write(v: dict[str, Any], ts: str, run_id: str) -> str:
        step, state, code, ms, out = (
            v["step"], v["state"], v["exit_code"], v["duration_ms"], v["output_bytes"]
        )  # fmt: skip
        late = v["timed_out"]
        if (
            step.__class__ is code.__class__ is ms.__class__ is out.__class__ is int
            and state.__class__ is str
            and (late is False or late is True)
        ):
            return (
                f'{{"event":"action_complete","ts":{ts},"run_id":{run_id},"step":{step},'
                f'"state":{_STR(state)},"exit_code":{code},"duration_ms":{ms},'
                f'"timed_out":{"true" if late else "false"},"output_bytes":{out}}}'
            )
        return other(v, ts, run_id)

    return write


def _evaluate_line(other: _Writer) -> _Writer:
    def write(v: dict[str, Any], ts: str, run_id: str) -> str:
        step, state, kind, verdict = v["step"], v["state"], v["type"], v["verdict"]
        if (
            step.__class__ is int
            and state.__class__ is kind.__class__ is verdict.__class__ is str
            and v["reason"] is None
            and v["tail"] is None
        ):
            return (
                f'{{"event":"evaluate","ts":{ts},"run_id":{run_id},"step":{step},'
                f'"state":{_STR(state)},"type":{_STR(kind)},"verdict":{_STR(verdict)},'
                f'"details":{_details_json(v["details"])}}}'
            )
        return other(v, ts, run_id)

    return write


def _details_json(details: Details) -> str:
    """`json_value(details.to_json())`; an exit code's verdict (one name, one `int`: most
    steps) without the encoder."""
    data = details.to_json()
    if len(data) == 1:
        for key, value in data.items():
            if key.__class__ is str and value.__class__ is int:
                return f"{{{_STR(key)}:{value}}}"
    return json_value(data)


def _route_line(other: _Writer) -> _Writer:
    def write(v: dict[str, Any], ts: str, run_id: str) -> str:
        step, state, from_, to, verdict, via = (
            v["step"], v["state"], v["from_"], v["to"], v["verdict"], v["via"]
        )  # fmt: skip
        if (
            step.__class__ is int
            and state.__class__ is from_.__class__ is to.__class__ is str
            and verdict.__class__ is via.__class__ is str
        ):
            return (
                f'{{"event":"route","ts":{ts},"run_id":{run_id},"step":{step},'
                f'"state":{_STR(state)},"from":{_STR(from_)},"to":{_STR(to)},'
                f'"verdict":{_STR(verdict)},"via":{_STR(via)}}}'
            )
        return other(v, ts, run_id)

    return write


_STEP_WRITERS: dict[type[RunEvent], Callable[[_Writer], _Writer]] = {
    StateEnter: _state_enter_line,
    ActionStart: _action_start_line,
    ActionComplete: _action_complete_line,
    Evaluate: _evaluate_line,
    Route: _route_line,
}


class _Unusual(Exception):
    """A field of a step's event holds a value its hand-written line does not take."""


def _unusual(v: dict[str, Any], ts: str, run_id: str) -> str:
    raise _Unusual


# The same writers, for `Emitter.send_fields`: given the fields alone, no record; any other
# value raises `_Unusual`, and the record is made and sent the usual way.
_FIELD_WRITERS: dict[type[RunEvent], _Writer] = {
    cls: made(_unusual) for cls, made in _STEP_WRITERS.items()
}


class JsonlSink:
    """Appends one JSON object a line.

    Lines are buffered until `flush`, which the runner calls once an action's process has
    started (so `ll logs -f` shows a running step) and before it writes state.json (so the
    log is never behind the state). A crash loses at most the events of the step it cut off, which a
    resumed run re-runs anyway.
    """

    def __init__(self, path: Path) -> None:
        import os

        from little_loops.errors import RunError

        self._path = path
        # Never through a symbolic link (a planted one would make the run append to its
        # target), and after a torn last line (a crash mid-write) on a line of its own, so the
        # first event of a resumed run is not glued to the fragment and lost with it.
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            try:
                fd = os.open(path, flags, 0o644)
            except FileNotFoundError:  # its folder first (a run's is made already)
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, flags, 0o644)
        except OSError as exc:
            why = exc.strerror or str(exc)
            if os.path.islink(path):
                why = "it is a symbolic link, which ll does not follow inside .loops/ (remove it)"
            raise RunError(f"cannot open {path}: {why}") from None
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.write(fd, b"\n")
        self._file: IO[str] = open(fd, "a", encoding="utf-8")  # noqa: SIM115 - see close()
        # Appends a line made by `Emitter` (the same text `ENCODE` gives its wire dict): the
        # file's own `write`, no call of ours. UnicodeEncodeError, nothing written, for text
        # that is not UTF-8 (the emitter then writes the wire dict, JSON-escaped).
        self.write_text = self._file.write

    def __call__(self, event: Event) -> None:
        line = ENCODE(event)
        try:
            self._file.write(line + "\n")
        except UnicodeEncodeError:
            # Bytes that are not UTF-8 (an environment value, a file name): JSON escapes.
            self._file.write(json.dumps(event, separators=(",", ":")) + "\n")

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError as exc:  # a full disk: say which file
            raise OSError(exc.errno, exc.strerror, str(self._path)) from None

    def close(self) -> None:
        # A flush that failed was reported already; those events are lost either way.
        with contextlib.suppress(OSError):
            self._file.close()


class _Listening(dict[str, list["Listener"]]):
    """The listeners that use events named NAME (`listens_to`), found at its first event."""

    def __init__(self, listeners: list[Listener]) -> None:
        super().__init__()
        self._listeners = listeners

    def __missing__(self, name: str) -> list[Listener]:
        found = self[name] = [one for one in self._listeners if _listens(one, name)]
        return found


class Emitter:
    """Builds events with the common fields, writes each to the `sinks` (its wire dict, so
    events.jsonl holds exactly what was emitted) and hands its typed record (`parse`) to
    every listener, in order.

    `redact` is applied to each event before any sink or listener sees it, so none can leak
    a secret value.
    """

    def __init__(
        self,
        run_id: str,
        listeners: list[Listener],
        *,
        sinks: Iterable[Sink] = (),
        redact: Callable[[Event], Event] | None = None,
        clock: Callable[[], str] = utc_now,
    ) -> None:
        self.run_id = run_id
        self.listeners = listeners
        self.sinks = list(sinks)
        self._redact = redact
        self._clock = clock
        self._own_clock = clock is utc_now
        # The listeners each event name is handed to (`listens_to`), found at its first emit.
        self._by_name = _Listening(listeners)
        self._run_id_json = _STR(run_id)
        # Where the one sink takes lines (`JsonlSink.write_text`: a run's events.jsonl) and
        # nothing is redacted, `send` and `send_fields` write lines; else wire dicts.
        self._write: Callable[[str], object] | None = (
            getattr(self.sinks[0], "write_text", None)
            if redact is None and len(self.sinks) == 1
            else None
        )

    def emit(
        self,
        name: str,
        fields: Mapping[str, Any] | None = None,
        *,
        step: int | None = None,
        state: str | None = None,
        typed: RunEvent | None = None,
    ) -> Event:
        """Write one event; `typed`, when given, is the record whose wire form `fields` is
        (`send`): without redaction, listeners are handed it with `ts` and `run_id` filled in
        instead of the wire form parsed back."""
        event: Event = {"event": name, "ts": self._clock(), "run_id": self.run_id}
        if step is not None:
            event["step"] = step
        if state is not None:
            event["state"] = state
        if fields:
            event.update(fields)
        return self._out(name, event, typed)

    def _out(self, name: str, event: Event, typed: RunEvent | None) -> Event:
        """The wire dict `event` redacted, written to the sinks, and handed to the listeners
        that use `name` (as `typed` stamped, or parsed back)."""
        if self._redact is not None:
            event = self._redact(event)
        for sink in self.sinks:
            sink(event)
        listeners = self._by_name[name]
        if listeners:
            if typed is not None and self._redact is None:
                record = _stamped(typed, event["ts"], self.run_id)
            else:
                record = parse(event)
            for listener in listeners:
                listener(record)
        return event

    def _hand_on(self, name: str, typed: RunEvent, ts: str) -> None:
        """`typed`, stamped, to the listeners that use `name` (its line is written)."""
        listeners = self._by_name[name]
        if listeners:
            record = _stamped(typed, ts, self.run_id)
            for listener in listeners:
                listener(record)

    def tell(self, event: RunEvent) -> None:
        """Hand an event the log holds already (read back from it, stamped) to the listeners
        that use it, writing nothing."""
        for listener in self._by_name[event.NAME]:
            listener(event)

    def send_fields(self, cls: type[RunEvent], fields: dict[str, Any]) -> None:
        """Emit an event of one of the five classes every step writes, given its fields: the
        same as `send(cls(**fields))`. Where no listener takes events of `cls`, nothing is
        redacted and the one sink takes lines, its line is written straight from `fields`
        and no record is made (a step makes five; a record costs as much as its line). The
        fields given are those the call site names, which are all its line reads."""
        write = self._write
        if write is not None and not self._by_name[cls.NAME]:
            ts = self._clock()
            stamp = '"' + ts + '"' if self._own_clock else json_value(ts)
            try:
                write(_FIELD_WRITERS[cls](fields, stamp, self._run_id_json) + "\n")
            except (_Unusual, KeyError, UnicodeEncodeError):
                pass  # (text that is not UTF-8 is refused whole: nothing was written)
            else:
                return
        self.send(cls(**fields))

    def send(self, event: RunEvent) -> None:
        """Emit a typed event: the same line as `emit(event.name, event.payload(), ...)`.

        Where nothing is redacted, the event has no `extra` fields and the one sink takes a
        line (a run's events.jsonl), the line is made straight from the record's attributes
        by a function made once for its class (`_line_writer`): no wire dict, and no JSON
        encoder call for its plain values (five events a step)."""
        write = self._write
        if write is not None and not event.__dict__["extra"]:
            cls = event.__class__
            writer = _LINE_WRITERS.get(cls) or _line_writer(cls)
            if writer is not None:
                ts = self._clock()
                # `utc_now`'s stamps hold nothing JSON escapes: quoted as they are.
                stamp = '"' + ts + '"' if self._own_clock else json_value(ts)
                try:
                    write(writer(event.__dict__, stamp, self._run_id_json) + "\n")
                except UnicodeEncodeError:
                    pass  # a lone surrogate: nothing was written; the wire dict is, escaped
                else:
                    self._hand_on(cls.NAME, event, ts)
                    return
        self.wire(event)

    def wire(self, event: RunEvent) -> Event:
        """Emit a typed event through its wire dict, built in one pass from the record's
        attributes; the dict written is returned."""
        cls = event.__class__
        plan = _PLANS.get(cls)
        if plan is None:
            if cls.payload is not RunEvent.payload or cls.name is not RunEvent.name:
                # a wire form of its own (`UnknownEvent`)
                return self.emit(
                    event.name, event.payload(), step=event.step, state=event.state, typed=event
                )
            plan = _PLANS[cls] = tuple((s.attr, s.wire, s.optional, s.details) for s in _specs(cls))
        values = event.__dict__
        name = cls.NAME
        wire: Event = {"event": name, "ts": self._clock(), "run_id": self.run_id}
        step = values["step"]
        if step is not None:
            wire["step"] = step
        state = values["state"]
        if state is not None:
            wire["state"] = state
        for attr, key, optional, details in plan:
            value = values[attr]
            if value is None:
                if optional:
                    continue
            elif details:
                value = value.to_json()
            elif isinstance(value, tuple):
                value = list(value)
            wire[key] = value
        extra = values["extra"]
        if extra:
            wire.update(extra)
        return self._out(name, wire, event)


def _listens(listener: Listener, name: str) -> bool:
    """Whether `listener` is handed events named `name`: its `listens_to` (a set of event
    names) holds the name, or it has none (every event). A listener that uses a few events (a
    quiet terminal uses only the run's end) costs the other events nothing, not even a copy."""
    wanted = getattr(listener, "listens_to", None)
    return wanted is None or name in wanted


def listening_as(wrapper: Listener, listener: Listener) -> Listener:
    """`wrapper`, which hands events on to `listener` (a child's events forwarded to the root),
    asking for the events `listener` asks for (`listens_to`): a child's events that the root's
    quiet terminal would ignore are then not even copied."""
    wanted = getattr(listener, "listens_to", None)
    if wanted is not None:
        wrapper.listens_to = wanted  # type: ignore[attr-defined]
    return wrapper


def _stamped(event: RunEvent, ts: str, run_id: str) -> RunEvent:
    """`replace(event, ts=ts, run_id=run_id)` for a record made by its own `__init__` (the
    fields are its instance's attributes): its attributes copied, a third of the cost."""
    new = object.__new__(event.__class__)
    new.__dict__.update(event.__dict__, ts=ts, run_id=run_id)
    return new


def read_events(path: Path) -> list[Event]:
    """Every complete event of a JSONL file, as written; a torn last line (from a crash) is
    skipped. For a program that reads fields, `read_records` gives them typed."""
    return EventLog(path).read(whole=True)


def read_records(path: Path) -> list[RunEvent]:
    """Every complete event of a JSONL file as its typed record (`parse`); a torn last line
    (from a crash) is skipped."""
    return EventLog(path).records(whole=True)


class EventLog:
    """The one reader of a run's `events.jsonl`: read whole, from where it last stopped (to
    follow a live run), or its first few events. A line that does not parse (a crash cut the
    last one short) is skipped; a live log's last line without its newline waits for it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.position = 0  # the byte after the last line read

    def read(self, *, whole: bool = False) -> list[Event]:
        """The events after `position`. `whole`: the last line too when it parses (a file
        read once); else only lines ended by a newline (the writer may be mid-line). A
        fork's action branch has no file of its own: its events are its journal entry's."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.position)
                data = fh.read()
        except FileNotFoundError:
            told = journaled_events(self.path)
            if self.position or told is None:
                return []
            self.position = 1  # read once: a journal entry is written whole
            return told
        end = len(data) if whole else data.rfind(b"\n") + 1
        self.position += end
        return list(_parse_lines(data[:end].splitlines()))

    def records(self, *, whole: bool = False) -> list[RunEvent]:
        """`read`, each event its typed record (an unknown one an `UnknownEvent`)."""
        return [parse(event) for event in self.read(whole=whole)]

    def head(self, count: int) -> list[Event]:
        """Its first `count` lines' events, without reading a long log whole."""
        if not self.path.exists():
            return (journaled_events(self.path) or [])[:count]
        lines: list[bytes] = []
        try:
            with self.path.open("rb") as fh:
                for _ in range(count):
                    line = fh.readline()
                    if not line:
                        break
                    lines.append(line)
        except OSError:  # missing, unreadable: the caller shows what it can without it
            return []
        return list(_parse_lines(lines))

    def last(self) -> Event | None:
        """Its last whole line's event, read from the end: None when the file is missing or
        empty, or that line is torn (no newline) or does not parse."""
        try:
            with self.path.open("rb") as fh:
                end = fh.seek(0, os.SEEK_END)
                tail = b""
                while end > len(tail) and b"\n" not in tail[:-1]:
                    take = min(1 << 16, end - len(tail))
                    fh.seek(end - len(tail) - take)
                    tail = fh.read(take) + tail
        except OSError:
            return None
        if not tail.endswith(b"\n"):
            return None
        found = list(_parse_lines([tail[tail.rfind(b"\n", 0, -1) + 1 :]]))
        return found[0] if found else None


def _parse_lines(lines: Iterable[bytes]) -> Iterator[Event]:
    for line in lines:
        if not line.strip():
            continue
        try:
            item = json.loads(line.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            continue
        if isinstance(item, dict):
            yield item


# -- a fork's journal of action branches ---------------------------------------------------

JOURNAL = "branches.jsonl"


def read_journal(fork: Path | str, name: str = JOURNAL) -> dict[str, Event]:
    """The entries of a fork's journal (`sub/STEP-STATE/branches.jsonl`) by branch key: one
    line a finished action branch (`{"key", "result", "state", "events"}`), appended whole
    when the branch ended; a torn line (a crash mid-write) is skipped, its branch not
    finished. Read once while the file is unchanged (a report of thousands of branches asks
    for each). `name`: `CALLS`, a run's journal of the `loop:` children it kept (the same
    lines, keyed by the child's path from that run's directory)."""
    journal = _journal(os.path.join(fork, name))
    return journal.entries() if journal is not None else {}


def journal_get(fork: Path | str, name: str, key: str) -> Event | None:
    """One entry of a journal, parsing only that entry's line: a loop calling a child
    thousands of times asks at each call whether that call ended before."""
    journal = _journal(os.path.join(fork, name))
    return journal.get(key) if journal is not None else None


class _Journal:
    """Where each key's lines lie in a journal file (a loop calling a child for days keeps
    offsets, not the lines), each line read and parsed when its key is asked for."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.mark = (0, 0, 0)
        self.end = 0  # after the last whole line read
        self.lines: dict[str, list[tuple[int, int]]] = {}
        self.tail: dict[str, bytes] = {}  # a last line without its newline, read this time
        self._entries: dict[str, Event] | None = None

    def add(self, data: bytes, at: int) -> None:
        self._entries = None
        for line in data.splitlines(keepends=True):
            key = _key_of(line) if line.strip() else None
            if key is not None:
                self.lines.setdefault(key, []).append((at, len(line)))
            at += len(line)

    def get(self, key: str) -> Event | None:
        found = self.tail.get(key)
        if found is not None:
            entry = _entry(found, key)
            if entry is not None:
                return entry
        places = self.lines.get(key)
        if not places:
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            for at, size in reversed(places):  # a later entry of a key wins
                entry = _entry(os.pread(fd, size, at), key)
                if entry is not None:
                    return entry
        except OSError:
            return None
        finally:
            os.close(fd)
        return None

    def entries(self) -> dict[str, Event]:
        if self._entries is None:
            keys = [*self.lines, *(key for key in self.tail if key not in self.lines)]
            found = {key: self.get(key) for key in keys}  # in the file's order
            self._entries = {key: entry for key, entry in found.items() if entry is not None}
        return self._entries


def _entry(line: bytes, key: str) -> Event | None:
    for entry in _parse_lines((line,)):
        if entry.get("key") == key and isinstance(entry.get("state"), dict):
            return entry
    return None


def _key_of(line: bytes) -> str | None:
    """The key a journal line names: read off its start (`{"key":"..."`, as the journal's
    writer puts it first) when plain, else from the parsed line; None for a torn line."""
    if line.startswith(b'{"key":"'):
        end = line.find(b'"', 8)
        if end > 8 and b"\\" not in line[8:end]:
            try:
                return line[8:end].decode("utf-8")
            except UnicodeDecodeError:
                pass
    for entry in _parse_lines((line,)):
        key = entry.get("key")
        return key if isinstance(key, str) else None
    return None


def _journal(path: str) -> _Journal | None:
    with _JOURNALS_LOCK:  # the `loop:` branches of a fork look their children up in threads
        return _read_on(path)


def _read_on(path: str) -> _Journal | None:
    try:
        seen = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    mark = (seen.st_size, seen.st_mtime_ns, seen.st_ino)
    journal = _JOURNALS.get(path)
    if journal is not None and journal.mark == mark:
        return journal
    # Appended to only: a file read before is read on from the end of its last whole line.
    if journal is None or journal.mark[2] != seen.st_ino or journal.end > seen.st_size:
        journal = _Journal(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            fh.seek(journal.end)
            data = fh.read()
    except OSError:
        return None
    whole = data.rfind(b"\n") + 1
    journal.add(data[:whole], journal.end)
    journal.end += whole
    journal.mark = mark
    journal.tail = {}
    if whole < len(data):  # a last line without its newline (torn, or being written)
        key = _key_of(data[whole:])
        if key is not None:
            journal.tail[key] = data[whole:]
        journal._entries = None
        journal.mark = (-1, 0, seen.st_ino)  # read on from before it next time
    _JOURNALS[path] = journal
    return journal


_JOURNALS: dict[str, _Journal] = {}
_JOURNALS_LOCK = _thread.allocate_lock()


def journal_entry(root: Path) -> Event | None:
    """The journal entry of the action branch (`sub/STEP-STATE/KEY`) or of the `loop:` child
    (`sub/STEP-STATE`) whose run would live at `root`, or None (not journaled: a directory of
    its own, or not ended)."""
    if root.parent.parent.name == "sub":
        entry = read_journal(root.parent).get(root.name)
        if entry is not None:
            return entry
    if root.parent.name == "sub":
        return call_entry(root)
    return None


# A run's journal of the `loop:` children that ran without a directory of their own
# (`store.CallDir`): in the nearest run above them that has one, keyed by the child's path
# from there (`sub/0001-call`, `sub/0001-call/sub/0002-check`).
CALLS = "calls.jsonl"


def call_entry(root: Path) -> Event | None:
    """The entry of the `loop:` child whose run would live at `root` (`.../sub/STEP-STATE`)
    in the journal of a run above it: its caller's, or, when its caller kept no directory
    either, the next run up that did."""
    for above, key in _runs_above(root):
        if key:
            entry = journal_get(above, CALLS, key)
            if entry is not None:
                return entry
    return None


def call_children(run: Path) -> set[str]:
    """The names (`0001-call`) of the `loop:` children of the run at `run` that journals
    above it, or its own, record."""
    names: set[str] = set()
    for above, key in _runs_above(run):
        prefix = f"{key}/sub/" if key else "sub/"
        for found in read_journal(above, CALLS):
            rest = found[len(prefix) :]
            if found.startswith(prefix) and rest and "/" not in rest:
                names.add(rest)
    return names


def _runs_above(run: Path) -> Iterator[tuple[str, str]]:
    """`run` itself (key ""), then each run above it with the path from there to `run`
    (`sub/0001-call`, `sub/0002-fan/eu/sub/0001-call`), up to its tree's root."""
    parts = os.fspath(run).split(os.sep)
    key: list[str] = []
    end = len(parts)  # the run is parts[:end]
    while True:
        yield os.sep.join(parts[:end]), "/".join(key)
        if end >= 3 and parts[end - 2] == "sub":  # a `loop:` child
            key[:0] = ["sub", parts[end - 1]]
            end -= 2
        elif end >= 4 and parts[end - 3] == "sub":  # a fork's branch: `sub/STEP-STATE/KEY`
            key[:0] = ["sub", parts[end - 2], parts[end - 1]]
            end -= 3
        else:
            return


def journaled_events(path: Path) -> list[Event] | None:
    """The events of the branch whose `events.jsonl` would be `path`, from its fork's
    journal; None when it has no entry there."""
    if path.name != "events.jsonl":
        return None
    entry = journal_entry(path.parent)
    events = entry.get("events") if entry is not None else None
    if not isinstance(events, list):
        return None
    return [e for e in events if isinstance(e, dict)]
