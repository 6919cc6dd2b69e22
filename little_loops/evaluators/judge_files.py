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


def rubric_findings(
    loop_dir: Path, spec: Evaluate, where: Callable[[str], NodePath]
) -> Iterator[Finding]:
    """Why the `rubric_file` of `spec` cannot be the judge's prompt, if it cannot."""
    name = spec.rubric_file
    if name is None:
        return
    at = where("rubric_file")
    path = loop_dir / name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        yield (
            at,
            "missing-rubric-file",
            f"{subject(at)}: '{name}' does not exist (looked for {path}); the path is "
            "relative to the loop file's directory",
        )
        return
    except IsADirectoryError:
        yield at, "missing-rubric-file", f"{subject(at)}: '{name}' is a directory, not a file"
        return
    except UnicodeDecodeError:
        yield at, "bad-rubric-file", f"{subject(at)}: '{name}' is not UTF-8 text"
        return
    except OSError as exc:
        yield at, "bad-rubric-file", f"{subject(at)}: cannot read '{name}': {exc.strerror}"
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
