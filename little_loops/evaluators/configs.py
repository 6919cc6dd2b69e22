"""One small typed config per evaluator type: exactly the keys its section of the schema allows.

The loader builds one `Evaluate` record (every type's keys, unused ones at their defaults) that
the runner, the judge and `ll graph` read; an evaluator takes its own typed config from it
(`config_of`), so its code sees only what its type may set. They are frozen records
(model/records.py), not NamedTuples: a NamedTuple's annotations are compiled one by one when
its class is made (`typing.ForwardRef`), 35 compilations in all, about 11 M instructions of
every `ll run`.
"""

from __future__ import annotations

from collections.abc import Mapping

from little_loops.model.loop import (
    DEFAULT_VERDICTS,
    UNCERTAIN_SUFFIX,
    Evaluate,
)
from little_loops.model.records import record

TYPE_CHECKING = False  # mypy reads this; `typing` is not imported at run time
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from little_loops.model.loop import Direction, Example, Scalar

    _Config = TypeVar("_Config")


@record(frozen=True)
class ExitCode:
    """`exit_code`: no settings; the action's exit code is the verdict."""


@record(frozen=True)
class OutputContains:
    pattern: str | None
    literal: bool
    negate: bool
    source: str | None


@record(frozen=True)
class OutputNumeric:
    operator: str | None
    target: Scalar | None
    source: str | None


@record(frozen=True)
class OutputJson:
    path: str | None
    operator: str | None
    target: Scalar | None
    source: str | None


@record(frozen=True)
class Convergence:
    target: Scalar | None
    tolerance: float
    direction: Direction
    source: str | None
    previous: str | None


@record(frozen=True)
class Of:
    """`all` and `any`: the evaluators they combine."""

    of: tuple[Evaluate, ...]


@record(frozen=True)
class LlmStructured:
    """The judge's settings; `None` means "not set here" (the loop's `llm:` block, then the
    command line, then the built-in default decide)."""

    prompt: str | None
    source: str | None
    schema: Mapping[str, Any] | None
    min_confidence: float | None
    uncertain_suffix: bool
    model: str | None
    max_tokens: int | None
    timeout: float | None
    max_output_chars: int | None
    fail_open: bool
    prior_reason: bool
    samples: int
    judge: str | None
    rubric_file: str | None
    examples: tuple[Example, ...]
    temperature: float | None
    models: tuple[str, ...]
    reference: str | None


def config_of(kind: type[_Config], spec: Evaluate) -> _Config:
    """The typed config `kind` (one of the classes above), taken from the loader's record."""
    return kind(*(getattr(spec, key) for key in kind.__match_args__))  # type: ignore[attr-defined]


def judge_verdicts(spec: Evaluate | LlmStructured) -> tuple[str, ...]:
    """The verdict enum of an `llm_structured` evaluator: its custom schema's or the default."""
    schema = spec.schema
    if schema is not None:
        props = schema.get("properties")
        verdict = props.get("verdict") if isinstance(props, Mapping) else None
        enum = verdict.get("enum") if isinstance(verdict, Mapping) else None
        if isinstance(enum, list | tuple):
            return tuple(str(v) for v in enum)
    return DEFAULT_VERDICTS


def judge_gives(spec: LlmStructured) -> frozenset[str]:
    """Every verdict the judge can give: its enum, `error`, the `_uncertain` forms when asked
    for, and `success` when it fails open."""
    enum = judge_verdicts(spec)
    out = {*enum, "error"}
    if spec.uncertain_suffix:
        out |= {v + UNCERTAIN_SUFFIX for v in enum}
    if spec.fail_open:
        out.add("success")
    return frozenset(out)
