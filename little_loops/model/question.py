"""A question a run asks a person (`ask:` states), its answer, and its expiry: typed records
that read and write the JSON kept in `state.json` (`pending`) and under `answers/`.

Reading validates: a record that is not what these classes write is a `RecordError` naming
the file and what is wrong, never a `KeyError` later. Writing gives the same keys, in the same
order, as the run has always written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from little_loops.errors import RecordError
from little_loops.model.records import record

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any


def iso(epoch: float) -> str:
    from datetime import datetime, timezone  # (not needed by a run without questions)

    return (
        datetime.fromtimestamp(epoch, timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def epoch(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class Suspended(Exception):
    """The run cannot go on until these questions are answered (raised inside a run). Here
    rather than in record/questions.py, so that the runner catches it without loading that."""

    def __init__(self, pending: list[Question]) -> None:
        super().__init__(", ".join(q.id for q in pending))
        self.pending = pending


def _field(data: Mapping[str, Any], key: str, where: str, kind: str) -> Any:
    value = data.get(key)
    ok = {
        "str": isinstance(value, str),
        "str?": value is None or isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
    }[kind]
    if not ok:
        want = {"str": "a string", "str?": "a string or null", "int": "a whole number"}[kind]
        raise RecordError(
            f"{where}: '{key}' is {json_kind(value)}, not {want}; repair or remove the file "
            "and run the command again"
        )
    return value


def json_kind(value: object) -> str:
    """How a JSON value is named in a message: `missing`, `a list`, `the number 3`."""
    if value is None:
        return "missing (or null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _object(data: object, where: str, what: str) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise RecordError(
            f"{where}: {what} is {json_kind(data)}, not an object; repair or remove the file "
            "and run the command again"
        )
    return data


@record(frozen=True)
class Question:
    """One occurrence of an `ask` state's question. Its id is the state's path from the root
    run and the step: `approve@7`, `reviews/security@1`. Times are ISO 8601 UTC;
    `expires_at` is None without a `timeout`."""

    id: str
    state: str
    step: int
    prompt: str
    choices: tuple[str, ...]
    asked_at: str
    expires_at: str | None = None

    @classmethod
    def new(
        cls, qid: str, state: str, step: int, prompt: str, choices: tuple[str, ...], now: float,
        timeout: float | None,
    ) -> Question:  # fmt: skip
        expires = iso(now + timeout) if timeout is not None else None
        return cls(qid, state, step, prompt, tuple(choices), iso(now), expires)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "step": self.step,
            "prompt": self.prompt,
            "choices": list(self.choices),
            "asked_at": self.asked_at,
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> Question:
        """A question as `to_json` wrote it; `where` names the file in the error."""
        d = _object(data, where, "a pending question")
        choices = d.get("choices")
        if choices is None:
            choices = []
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise RecordError(
                f"{where}: the choices of question {d.get('id')!r} are not a list of strings; "
                "repair or remove the file and run the command again"
            )
        return cls(
            id=_field(d, "id", where, "str"),
            state=_field(d, "state", where, "str"),
            step=_field(d, "step", where, "int"),
            prompt=_field(d, "prompt", where, "str"),
            choices=tuple(choices),
            asked_at=_field(d, "asked_at", where, "str"),
            expires_at=_field(d, "expires_at", where, "str?"),
        )

    @property
    def deadline(self) -> float | None:
        return epoch(self.expires_at)

    def expired(self, now: float) -> bool:
        deadline = self.deadline
        return deadline is not None and now >= deadline

    def remaining(self, now: float) -> float | None:
        deadline = self.deadline
        return None if deadline is None else max(0.0, deadline - now)


def pending_of(data: object, where: str) -> list[Question]:
    """A state.json's `pending` list, each question checked."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise RecordError(
            f"{where}: 'pending' is {json_kind(data)}, not a list of questions; repair or "
            "remove the file and run the command again"
        )
    return [Question.from_json(q, where) for q in data]


@record(frozen=True)
class Answer:
    """An answer to one question (`ll answer`, `--answer`, the prompt, a preset, the
    simulation); `asked_at` ties it to one occurrence of the question."""

    id: str
    answer: str
    note: str | None = None
    by: str | None = None
    via: str = "answer"
    at: str | None = None
    asked_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "answer": self.answer,
            "note": self.note,
            "by": self.by,
            "via": self.via,
            "at": self.at,
            "asked_at": self.asked_at,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> Answer:
        d = _object(data, where, "an answer")
        via = d.get("via")
        return cls(
            id=_field(d, "id", where, "str"),
            answer=_field(d, "answer", where, "str"),
            note=_field(d, "note", where, "str?"),
            by=_field(d, "by", where, "str?"),
            via=via if isinstance(via, str) and via else "answer",
            at=_field(d, "at", where, "str?"),
            asked_at=_field(d, "asked_at", where, "str?"),
        )

    def is_for(self, question: Question) -> bool:
        """Given to this occurrence of the question (an answer recorded for an earlier one
        with the same id, a child run called again, is not)."""
        return self.asked_at is None or self.asked_at == question.asked_at


@record(frozen=True)
class Expired:
    """What a waiting prompt is told when its question's time is up: nobody answered."""

    question_id: str
    expires_at: str | None


# What the prompt's `poll` finds meanwhile, and what the prompt returns: an answer, the
# question's expiry, or nothing (the question stays pending).
Reply = Answer | Expired | None
Poll = Callable[[], Reply]
Prompt = Callable[[Question, Poll], Reply]
