"""Answering questions from the command line: `ll answer`, `--answer` of `ll run` and
`ll resume`, the terminal prompt of a waiting run, and the message of a suspended run.

The run itself never prints: it calls the prompt made here (`terminal_prompt`) with a `poll`
that returns an answer `ll answer` recorded meanwhile, or the question's expiry (`Expired`).
"""

from __future__ import annotations

import os
import re
import select
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from little_loops.errors import (
    EXIT_RUN_ERROR,
    EXIT_USAGE,
    LoopError,
)
from little_loops.record.store import (
    RunDir,
    find_run,
    owner_alive,
)

# record/questions.py (and its imports) is loaded only when a question is asked or answered:
# a plain `ll run` imports this module for its prompt, and never needs it.
if TYPE_CHECKING:
    from little_loops.record.questions import (
        Answer,
        Expired,
        Question,
    )

_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f]")


def clean(text: str) -> str:
    """Program output inside a question cannot fake the prompt: no colours or controls."""
    return _CONTROL.sub("", text).rstrip()


# -- the prompt ----------------------------------------------------------------------------


def terminal_prompt(
    question: Question, poll: Callable[[], Answer | Expired | None]
) -> Answer | Expired | None:
    """Ask at the terminal: a number or a word of the choices (`?` lists them), optionally
    followed by a note; an empty line or Ctrl-D leaves the question pending. Meanwhile an
    answer given with `ll answer`, or the question's expiry, ends the wait."""
    choices = list(question.choices)
    out = sys.stdout
    out.write(f"\n  ? {clean(question.prompt)}\n")
    out.write(_choices_text(choices) + "\n")
    qid = question.id
    while True:
        out.write(f"  answer {qid}> ")
        out.flush()
        line = _read_line(poll)
        from little_loops.record.questions import Answer, Expired

        if isinstance(line, Answer | Expired):  # answered elsewhere, or expired
            out.write("\n")
            return line
        if line is None or not line.strip():
            out.write("  (left pending)\n")
            return None
        text = line.strip()
        if text == "?":
            out.write(_choices_text(choices) + "\n")
            continue
        if not choices:
            return _record(qid, text, None, "prompt")
        word, _, note = text.partition(" ")
        if word.isdigit() and 1 <= int(word) <= len(choices):
            word = choices[int(word) - 1]
        if word in choices:
            return _record(qid, word, note.strip() or None, "prompt")
        out.write(f"  '{word}' is not a choice; {_choices_text(choices).strip()}\n")


def _choices_text(choices: list[str]) -> str:
    if not choices:
        return "    (free text; an empty line leaves it pending)"
    listed = "  ".join(f"{i}) {c}" for i, c in enumerate(choices, 1))
    return f"    {listed}   (a number or a word, then a note if you like)"


def _read_line(
    poll: Callable[[], Answer | Expired | None],
) -> str | Answer | Expired | None:
    """A line from stdin, or what `poll` found first; None at end of input."""
    while True:
        found = poll()
        if found is not None:
            return found
        ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        if ready:
            line = sys.stdin.readline()
            return line if line else None


def _record(qid: str, value: str, note: str | None, via: str) -> Answer:
    from little_loops.record import questions as qs

    by = qs.default_by(os.environ)
    return qs.answer_record(qid, value, note=note, by=by, via=via, now=time.time())


# -- answers given on the command line -----------------------------------------------------


def presets(values: tuple[str, ...], loop: Any) -> dict[str, str]:
    """`ll run --answer ID=VALUE`: checked against the loop's `ask` states up front."""
    out: dict[str, str] = {}
    asks = {name: s for name, s in loop.states.items() if s.is_ask}
    for item in values:
        from little_loops.record import questions as qs

        key, value = qs.split_answer(item)
        if key is None:
            raise click.BadParameter(
                f"'{item}' is not ID=VALUE (ID: the asking state, e.g. approve=yes)",
                param_hint="--answer",
            )
        name = key.partition("@")[0]
        state = asks.get(name)
        if state is None and "/" not in name and "*" not in name:
            known = ", ".join(sorted(asks)) or "none"
            raise click.BadParameter(
                f"the loop has no ask state '{name}' (its ask states: {known})",
                param_hint="--answer",
            )
        if state is not None and state.choices and value not in state.choices:
            raise click.BadParameter(
                f"'{value}' is not an answer to '{name}': choose one of {', '.join(state.choices)}",
                param_hint="--answer",
            )
        out[key] = value
    return out


def record_answers(
    run_dir: RunDir,
    state: Mapping[str, Any],
    given: tuple[str, ...],
    *,
    note: str | None,
    by: str | None,
    via: str,
) -> list[Answer]:
    """Each `[ID=]VALUE` bound to exactly one pending question and written for the run to
    take; every answer is checked before any is written (exit 2 and nothing recorded)."""
    from little_loops.record import questions as qs

    run_id = str(state.get("run_id") or run_dir.run_id)
    pending = qs.tree_pending(run_dir.root, state)
    now = time.time()
    who = by or qs.default_by(os.environ)
    records: list[Answer] = []
    for item in given:
        key, value = qs.split_answer(item)
        question = qs.resolve(pending, key, run_id)
        qs.check_not_expired(question, now, run_id)
        qs.check_value(question, value)
        qid = question.id
        if any(r.id == qid for r in records):
            raise qs.AnswerError(f"two answers to {qid}; give one")
        records.append(
            qs.answer_record(
                qid, value, note=note, by=who, via=via, now=now, asked_at=question.asked_at
            )
        )
    for record in records:
        qs.write_answer(qs.tree_root(run_dir.root), record)
    return records


def find_run_dir(run_id: str) -> RunDir:
    """A run by id under the current directory, or by the path of its directory."""
    if os.sep in run_id:
        path = Path(run_id).resolve()
        if not (path / "state.json").is_file():
            raise LoopError(
                f"{run_id} is not a run directory (no state.json); give a run id from "
                "'ll list', or the path of its directory",
                exit_code=EXIT_RUN_ERROR,
            )
        return RunDir(path)
    return find_run(Path.cwd(), run_id)


@click.command(short_help="Answer a question of a waiting or suspended run.")
@click.argument("run_id", metavar="RUN")
@click.argument("answer", metavar="[ID=]VALUE")
@click.option("--note", help="A note with the answer (${captured.X.output}).")
@click.option("--by", help="Who answers (default: $LL_USER, $GITHUB_ACTOR, $USER).")
def answer(run_id: str, answer: str, note: str | None, by: str | None) -> None:
    """Record an answer to a question of run RUN, without running anything.

    A run waiting at its terminal prompt, or a fork whose branch asked while the
    others work, takes it at once, and 'll answer' waits a moment to say so; a
    suspended run takes it when continued with 'll resume RUN'. ID is the question's
    id as 'll status RUN' shows it (approve@7), or its state path (approve); with one
    question pending, VALUE alone is enough. Exit 0 recorded, 2 refused.

    \b
    Example:
      ll answer 20261122-041430-publish-7a1c approve --note "checked the page"
    """
    from little_loops.record import questions as qs

    run_dir = find_run_dir(run_id)
    state = run_dir.read_state()
    status = state.get("status")
    if status == "finished":
        raise LoopError(
            f"run {run_dir.run_id} already finished ({state.get('outcome')}); nothing to answer",
            exit_code=EXIT_USAGE,
        )
    root = qs.tree_root(run_dir.root)
    pending = qs.tree_pending(run_dir.root, state)
    earlier = [q for q in pending if qs.waiting_answer(root, q.id)]
    (record,) = record_answers(run_dir, state, (answer,), note=note, by=by, via="answer")
    told = f"ll: recorded '{record.answer}' for {record.id} of run {run_dir.run_id}"
    if any(q.id == record.id for q in earlier):
        told += " (it replaces the answer recorded before)"
    if status == "running" and owner_alive(run_dir, state):
        click.echo(f"{told}; {_live(run_dir, record.id)}")
    else:
        click.echo(f"{told}; continue it with: ll resume {run_dir.run_id}")


LIVE_WAIT_S = 3.0  # how long `ll answer` watches a live run take an answer


def _live(run_dir: RunDir, qid: str) -> str:
    """What a live run did with the answer, as seen: taken (at its prompt, or by the fork
    whose branch asked), left when the run stopped, or not yet taken (the run is busy)."""
    from little_loops.record import questions as qs

    root = qs.tree_root(run_dir.root)
    resume = f"ll resume {run_dir.run_id}"
    deadline = time.monotonic() + LIVE_WAIT_S
    while qs.waiting_answer(root, qid):
        try:
            state = run_dir.read_state()
        except LoopError:
            state = {"status": "running"}
        status = state.get("status")
        if status == "finished":
            return f"the run finished ({state.get('outcome')}) without taking it"
        if status != "running" or owner_alive(run_dir, state) is False:
            how = "suspended" if status == "suspended" else "stopped"
            return f"the run {how} before taking it; continue it with: {resume}"
        if time.monotonic() >= deadline:
            return (
                "the run is busy in another process and has not taken it yet: it takes it "
                f"when the branch that asked can go on, or else on: {resume}"
            )
        time.sleep(0.1)
    return "the running run took it"


# -- the message of a suspended run --------------------------------------------------------


def suspended_text(run_root: Path, run_id: str) -> str:
    """What `ll` prints when a run suspends: each question and the command that answers it."""
    from little_loops.record import questions as qs

    try:
        state = RunDir(run_root).read_state()
    except LoopError:
        return f"ll: run {run_id} is suspended; see: ll status {run_id}\n"
    pending = qs.state_pending(state, run_root / "state.json")
    lines = []
    for q in pending:
        where, _, step = q.id.rpartition("@")
        choices = "|".join(q.choices) or "TEXT"
        key = "" if len(pending) == 1 else f"{qs.short_id(q.id)}="
        lines.append(f"ll: suspended at '{where}' (step {step}): {clean(q.prompt)}")
        if q.expires_at:
            lines.append(f"    expires: {q.expires_at}")
        lines.append(f"    answer: ll resume {run_id} --answer {key}{choices} [--note TEXT]")
    return "\n".join(lines) + "\n" if lines else ""


def pending_ids(run_root: Path) -> list[str]:
    from little_loops.record import questions as qs

    try:
        state = RunDir(run_root).read_state()
    except LoopError:
        return []
    return [q.id for q in qs.state_pending(state, run_root / "state.json")]


COMMANDS = [answer]
