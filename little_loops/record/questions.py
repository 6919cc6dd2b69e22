"""Questions a run asks a person (`ask:` states): their ids, answers on disk, expiry, who.

A question is a plain dict, kept in `state.json` (`pending`) while it waits:
`{id, state, step, prompt, choices, asked_at, expires_at}` (times ISO 8601 UTC, `expires_at`
None without a `timeout`). Its id is the state's path from the root run and the step of the
occurrence: `approve@7`, `reviews/security@1`.

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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from little_loops.errors import (
    EXIT_USAGE,
    LoopError,
)

ANSWERS = "answers"
USED = "used"
# A question's id as users type it: the path (segments may be `*`), then `@STEP` optionally.
_ID = re.compile(r"^[A-Za-z0-9_*][A-Za-z0-9_.*/-]*(@[0-9]+)?$")


class AnswerError(LoopError):
    """An answer that cannot be taken (no such question, a value not offered, too late)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=EXIT_USAGE)


class Suspended(Exception):
    """The run cannot go on until these questions are answered (raised inside a run)."""

    def __init__(self, pending: list[dict[str, Any]]) -> None:
        super().__init__(", ".join(str(q.get("id")) for q in pending))
        self.pending = pending


def question_id(path: Iterable[str], step: int) -> str:
    return "/".join(path) + f"@{step}"


def short_id(qid: str) -> str:
    """`reviews/security@1` -> `reviews/security`: what users usually type."""
    return qid.rpartition("@")[0] or qid


def new_question(
    qid: str, state: str, step: int, prompt: str, choices: Iterable[str], now: float,
    timeout: float | None,
) -> dict[str, Any]:  # fmt: skip
    return {
        "id": qid,
        "state": state,
        "step": step,
        "prompt": prompt,
        "choices": list(choices),
        "asked_at": iso(now),
        "expires_at": iso(now + timeout) if timeout is not None else None,
    }


def iso(epoch: float) -> str:
    return (
        datetime.fromtimestamp(epoch, timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def epoch(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def expired(question: Mapping[str, Any], now: float) -> bool:
    deadline = epoch(question.get("expires_at"))
    return deadline is not None and now >= deadline


def remaining(question: Mapping[str, Any], now: float) -> float | None:
    deadline = epoch(question.get("expires_at"))
    return None if deadline is None else max(0.0, deadline - now)


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


def listing(pending: Iterable[Mapping[str, Any]]) -> str:
    return ", ".join(
        f"{q.get('id')} ({'|'.join(q.get('choices') or []) or 'free text'})" for q in pending
    )


def resolve(pending: list[dict[str, Any]], key: str | None, run_id: str) -> dict[str, Any]:
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
    found = [q for q in pending if matches(key, str(q.get("id")))]
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


def check_value(question: Mapping[str, Any], value: str) -> None:
    choices = list(question.get("choices") or [])
    if choices and value not in choices:
        raise AnswerError(
            f"'{value}' is not an answer to {question.get('id')}: choose one of "
            f"{', '.join(choices)}"
        )


def check_not_expired(question: Mapping[str, Any], now: float, run_id: str) -> None:
    if expired(question, now):
        raise AnswerError(
            f"question {question.get('id')} expired at {question.get('expires_at')}; resume "
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


def write_answer(root: Path, answer: Mapping[str, Any]) -> Path:
    """Record an answer for question `answer["id"]` (atomically; a later one replaces it)."""
    folder = root / ANSWERS
    folder.mkdir(exist_ok=True)
    target = folder / _file(str(answer["id"]))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".answer-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(dict(answer), fh)
            fh.write("\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def take_answer(
    root: Path,
    question: Mapping[str, Any],
    *,
    keep: Callable[[Path, dict[str, Any]], None],
    read: Callable[[Path], Any],
) -> dict[str, Any] | None:
    """The recorded answer to `question`, kept under `answers/used/` by `keep` (the run's
    session: sealed, atomic) and removed from `answers/`; a second take reads that copy back
    through `read` (the run was cut off after taking it and runs the step again). An answer
    recorded for an earlier occurrence with the same id (a child run called again) is not
    this one's."""
    folder = root / ANSWERS
    name = _file(str(question["id"]))
    data = _read(folder / name)
    if data is not None and _for(data, question):
        (folder / USED).mkdir(exist_ok=True)
        keep(folder / USED / name, data)
        (folder / name).unlink(missing_ok=True)
        return data
    try:
        used = read(folder / USED / name)
    except (OSError, ValueError):
        return None
    return used if isinstance(used, dict) and _for(used, question) else None


def _for(answer: Mapping[str, Any], question: Mapping[str, Any]) -> bool:
    asked = answer.get("asked_at")
    return asked is None or asked == question.get("asked_at")


def waiting_answer(root: Path, qid: str) -> bool:
    return (root / ANSWERS / _file(qid)).is_file()


def recorded_answer(root: Path, question: Mapping[str, Any]) -> dict[str, Any] | None:
    """The answer `ll answer` recorded for `question`, not yet taken by a resume."""
    data = _read(root / ANSWERS / _file(str(question.get("id"))))
    return data if data is not None and _for(data, question) else None


def answer_record(
    qid: str, value: str, *, note: str | None, by: str | None, via: str, now: float,
    asked_at: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """An answer; `asked_at` ties it to one occurrence of the question."""
    return {
        "id": qid, "answer": value, "note": note, "by": by, "via": via, "at": iso(now),
        "asked_at": asked_at,
    }  # fmt: skip


def tree_pending(root: Path, state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The questions waiting in a run and in its child runs (a live child's question is in
    its own state.json until the tree suspends)."""
    found = {str(q.get("id")): q for q in state.get("pending") or [] if isinstance(q, dict)}
    for path in sorted(root.glob("sub/**/state.json")):
        child = _read(path)
        if child is None or child.get("status") == "finished":
            continue
        for q in child.get("pending") or []:
            if isinstance(q, dict):
                found.setdefault(str(q.get("id")), q)
    return list(found.values())
