"""Questions a run asks a person (`ask:` states): their ids, answers on disk, expiry, who.

A question is a typed record (`Question`, in `model.question`), kept in `state.json`
(`pending`) while it waits: `{id, state, step, prompt, choices, asked_at, expires_at}` (times
ISO 8601 UTC, `expires_at` None without a `timeout`). Its id is the state's path from the root
run and the step of the occurrence: `approve@7`, `reviews/security@1`.

An answer is a file under the ROOT run's `answers/` (`ll answer`, `ll resume --answer`), bound
to one exact occurrence id, written atomically, and moved to `answers/used/` when the run
takes it: it is used once, and a run cut off right after taking it finds it there again.
Nothing here prints or imports click: the command line words its own messages from these.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from little_loops.errors import (
    EXIT_USAGE,
    LoopError,
)
from little_loops.model.question import (
    Answer,
    Expired,
    Question,
    Suspended,
    epoch,
    iso,
    pending_of,
)

__all__ = [
    "Answer",
    "AnswerError",
    "Expired",
    "Question",
    "Suspended",
    "epoch",
    "iso",
]

ANSWERS = "answers"
USED = "used"
# A question's id as users type it: the path (segments may be `*`), then `@STEP` optionally.
_ID = re.compile(r"^[A-Za-z0-9_*][A-Za-z0-9_.*/-]*(@[0-9]+)?$")


class AnswerError(LoopError):
    """An answer that cannot be taken (no such question, a value not offered, too late)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=EXIT_USAGE)


def question_id(path: Iterable[str], step: int) -> str:
    return "/".join(path) + f"@{step}"


def short_id(qid: str) -> str:
    """`reviews/security@1` -> `reviews/security`: what users usually type."""
    return qid.rpartition("@")[0] or qid


def default_by(env: Mapping[str, str]) -> str | None:
    """Who answers, unless told: `$LL_USER`, `$GITHUB_ACTOR`, `$USER`, in that order."""
    for key in ("LL_USER", "GITHUB_ACTOR", "USER"):
        if env.get(key):
            return env[key]
    return None


# -- matching an answer to a question ------------------------------------------------------


def split_answer(text: str) -> tuple[str | None, str]:
    """`ID=VALUE` -> (ID, VALUE); a bare VALUE (or one whose `=` follows no id) -> (None, text)."""
    key, sep, value = text.partition("=")
    if sep and _ID.match(key.strip()):
        return key.strip(), value
    return None, text


def matches(pattern: str, qid: str) -> bool:
    """`approve` matches `approve@7`; `approve@7` only itself; `*` stands for one segment."""
    want, _, want_step = pattern.partition("@")
    path, _, step = qid.partition("@")
    if want_step and want_step != step:
        return False
    parts, names = want.split("/"), path.split("/")
    return len(parts) == len(names) and all(
        p in ("*", n) for p, n in zip(parts, names, strict=True)
    )


def listing(pending: Iterable[Question]) -> str:
    return ", ".join(f"{q.id} ({'|'.join(q.choices) or 'free text'})" for q in pending)


def resolve(pending: list[Question], key: str | None, run_id: str) -> Question:
    """The one pending question an answer is for; refused (exit 2) with the list otherwise."""
    if not pending:
        raise AnswerError(f"run {run_id} has no pending question")
    if key is None:
        if len(pending) > 1:
            raise AnswerError(
                f"run {run_id} has {len(pending)} pending questions: {listing(pending)}; "
                "say which one: --answer ID=VALUE"
            )
        return pending[0]
    found = [q for q in pending if matches(key, q.id)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise AnswerError(
            f"run {run_id} has no pending question '{key}'; pending: {listing(pending)}"
        )
    raise AnswerError(
        f"'{key}' matches {len(found)} pending questions of run {run_id}: {listing(found)}; "
        "give the full id"
    )


def check_value(question: Question, value: str) -> None:
    if question.choices and value not in question.choices:
        raise AnswerError(
            f"'{value}' is not an answer to {question.id}: choose one of "
            f"{', '.join(question.choices)}"
        )


def check_not_expired(question: Question, now: float, run_id: str) -> None:
    if question.expired(now):
        raise AnswerError(
            f"question {question.id} expired at {question.expires_at}; resume "
            f"without --answer to take the timeout route: ll resume {run_id}"
        )


# -- answers on disk -----------------------------------------------------------------------


def tree_root(run_root: Path) -> Path:
    """The root run's directory of a (child) run directory: `<root>/sub/<x>/sub/<y>` -> root,
    and a fork's branch, `<root>/sub/<step>-<state>/<key>` -> root."""
    root = run_root
    while True:
        if root.parent.name == "sub":
            root = root.parent.parent
        elif root.parent.parent.name == "sub":
            root = root.parent.parent.parent
        else:
            return root


def _file(qid: str) -> str:
    return qid.replace("/", "~") + ".json"


def write_answer(root: Path, answer: Answer) -> Path:
    """Record an answer for question `answer.id` (atomically; a later one replaces it)."""
    folder = root / ANSWERS
    folder.mkdir(exist_ok=True)
    target = folder / _file(answer.id)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".answer-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(answer.to_json(), fh)
            fh.write("\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _read(path: Path) -> Answer | None:
    """An answer file `ll answer` wrote; a torn or missing one is no answer (yet), and one
    that is JSON but not an answer is refused naming the file."""
    data = _read_json(path)
    return None if data is None else Answer.from_json(data, str(path))


def take_answer(
    root: Path,
    question: Question,
    *,
    keep: Callable[[Path, dict[str, Any]], None],
    read: Callable[[Path], object],
) -> Answer | None:
    """The recorded answer to `question`, kept under `answers/used/` by `keep` (the run's
    session: sealed, atomic) and removed from `answers/`; a second take reads that copy back
    through `read` (the run was cut off after taking it and runs the step again). An answer
    recorded for an earlier occurrence with the same id (a child run called again) is not
    this one's."""
    folder = root / ANSWERS
    name = _file(question.id)
    found = _read(folder / name)
    if found is not None and found.is_for(question):
        (folder / USED).mkdir(exist_ok=True)
        keep(folder / USED / name, found.to_json())
        (folder / name).unlink(missing_ok=True)
        return found
    try:
        data = read(folder / USED / name)
    except (OSError, ValueError):
        return None
    used = Answer.from_json(data, str(folder / USED / name))
    return used if used.is_for(question) else None


def waiting_answer(root: Path, qid: str) -> bool:
    return (root / ANSWERS / _file(qid)).is_file()


def recorded_answer(root: Path, question: Question) -> Answer | None:
    """The answer `ll answer` recorded for `question`, not yet taken by a resume."""
    found = _read(root / ANSWERS / _file(question.id))
    return found if found is not None and found.is_for(question) else None


def answer_record(
    qid: str, value: str, *, note: str | None, by: str | None, via: str, now: float,
    asked_at: str | None = None,
) -> Answer:  # fmt: skip
    """An answer; `asked_at` ties it to one occurrence of the question."""
    return Answer(qid, value, note=note, by=by, via=via, at=iso(now), asked_at=asked_at)


def state_pending(state: Mapping[str, Any], where: Path | str) -> list[Question]:
    """The questions a state.json holds waiting, each checked (`RecordError` naming it)."""
    return pending_of(state.get("pending"), str(where))


def tree_pending(root: Path, state: Mapping[str, Any]) -> list[Question]:
    """The questions waiting in a run and in its child runs (a live child's question is in
    its own state.json until the tree suspends)."""
    found = {q.id: q for q in state_pending(state, root / "state.json")}
    for path in sorted(root.glob("sub/**/state.json")):
        child = _read_json(path)
        if not isinstance(child, dict) or child.get("status") == "finished":
            continue
        for q in state_pending(child, path):
            found.setdefault(q.id, q)
    return list(found.values())
