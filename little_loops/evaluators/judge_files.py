"""Load-time checks of named judges' extras: a rubric file beside the loop, few-shot examples.

Kept apart from `judge_config` (models and schemas) so each stays short; `value_checks` calls
both for every `llm_structured` evaluator and every entry of `judges:`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from little_loops.model.loop import Evaluate

from ..wording import NodePath, subject
from ..wording import did_you_mean as _did_you_mean

# (where in the loop file, diagnostic code, message)
Finding = tuple[NodePath, str, str]


RUBRIC_LIMIT = 100_000  # characters; the builder reads no more (builder.RUBRIC_LIMIT)
RUBRIC_MAX_BYTES = 4 * RUBRIC_LIMIT  # UTF-8 takes at most 4 bytes a character


class RubricUnreadable(Exception):
    """A rubric file that cannot be read; the message says why (after "'NAME' ")."""


def read_rubric(path: Path) -> str:
    """A rubric file's text, read safely: a regular file only (a pipe, a device such as
    /dev/zero or a directory is refused before anything is read), at most RUBRIC_MAX_BYTES,
    UTF-8. Raises FileNotFoundError, or RubricUnreadable saying why."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except ValueError:  # a NUL byte in the name
        raise RubricUnreadable("is not a file name (it holds a NUL byte)") from None
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise RubricUnreadable("is a directory, not a file") from None
    except OSError as exc:
        raise RubricUnreadable(f"cannot be read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise RubricUnreadable("is a directory, not a file")
        if not stat.S_ISREG(mode):
            raise RubricUnreadable("is not a regular file (a pipe or a device); give a file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(RUBRIC_MAX_BYTES + 1)
    except OSError as exc:
        raise RubricUnreadable(f"cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > RUBRIC_MAX_BYTES:
        raise RubricUnreadable(
            f"is larger than {RUBRIC_MAX_BYTES} bytes, more than a rubric may hold; shorten it"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise RubricUnreadable("is not UTF-8 text") from None


def rubric_findings(
    loop_dir: Path, spec: Evaluate, where: Callable[[str], NodePath]
) -> Iterator[Finding]:
    """Why the `rubric_file` of `spec` cannot be the judge's prompt, if it cannot."""
    name = spec.rubric_file
    if name is None:
        return
    at = where("rubric_file")
    path = loop_dir / name
    shown = name if len(name) <= 80 and "\0" not in name else repr(name[:60]) + "..."
    try:
        text = read_rubric(path)
    except FileNotFoundError:
        yield (
            at,
            "missing-rubric-file",
            f"{subject(at)}: '{shown}' does not exist (looked for {path}); the path is "
            "relative to the loop file's directory",
        )
        return
    except RubricUnreadable as exc:
        code = "missing-rubric-file" if "directory" in str(exc) else "bad-rubric-file"
        yield at, code, f"{subject(at)}: '{shown}' {exc}"
        return
    if len(text) > RUBRIC_LIMIT:
        yield (
            at,
            "bad-rubric-file",
            f"{subject(at)}: '{name}' holds {len(text)} characters, more than a rubric may "
            f"({RUBRIC_LIMIT}); shorten it",
        )
    elif not text.strip():
        yield at, "bad-rubric-file", f"{subject(at)}: '{name}' is empty; write the question in it"
    elif spec.prompt is not None and spec.prompt != text.strip():
        yield (
            at,
            "prompt-and-rubric-file",
            f"{subject(at)}: give 'prompt' or 'rubric_file', not both",
        )


def example_findings(spec: Evaluate, at: NodePath, schema_at: NodePath) -> Iterator[Finding]:
    """Examples whose verdict the judge's schema cannot give."""
    from .configs import judge_verdicts

    enum = judge_verdicts(spec)
    for i, example in enumerate(spec.examples):
        if example.verdict and example.verdict not in enum:
            where: NodePath = (*at, i, "verdict")
            yield (
                where,
                "unknown-example-verdict",
                f"{subject(where)} is '{example.verdict}', which the judge's schema cannot "
                f"give{_did_you_mean(example.verdict, list(enum))}; use one of: "
                f"{', '.join(enum)}",
            )
