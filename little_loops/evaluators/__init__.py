"""The evaluator registry: type name -> function, and the verdicts each type can produce.

An evaluator is a function `(spec, inp) -> Verdict` that never raises for bad input; it
returns verdict `error` with details saying what went wrong. The judge (`llm_structured`)
is imported only when a loop uses it, so `ll validate` never loads an SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..model import DEFAULT_VERDICTS, EMPTY, UNCERTAIN_SUFFIX, Evaluate, Verdict

if TYPE_CHECKING:
    from .llm import JudgeSession


@dataclass(frozen=True)
class EvalInput:
    """What an evaluator sees of a finished action.

    `text` is the action's stdout (or nothing for a state with no action); evaluators that
    take `source:` call `resolve(spec.source)` instead. `resolve` interpolates a template
    with the step's scope (SPEC section 7) and may raise UndefinedVariable.
    """

    text: str
    stderr: str = ""
    exit_code: int | None = None
    state: str = ""
    resolve: Callable[[str], str] = lambda s: s
    previous_value: float | None = None  # convergence: the state's last value this run
    prior_reason: str | None = None  # judge: this state's last judged reason this run
    judge: JudgeSession | None = None  # per-run judge session (clients, cache, cassette)
    deadline: float | None = None  # time.monotonic() when the loop's `timeout` runs out
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)


class Evaluator(Protocol):
    def __call__(self, spec: Evaluate, inp: EvalInput, /) -> Verdict: ...


# type name -> "module:function", imported on first use
_REGISTRY: dict[str, str] = {
    "exit_code": "little_loops.evaluators.deterministic:exit_code",
    "output_contains": "little_loops.evaluators.deterministic:output_contains",
    "output_numeric": "little_loops.evaluators.deterministic:output_numeric",
    "output_json": "little_loops.evaluators.deterministic:output_json",
    "convergence": "little_loops.evaluators.deterministic:convergence",
    "all": "little_loops.evaluators.deterministic:all_of",
    "any": "little_loops.evaluators.deterministic:any_of",
    "llm_structured": "little_loops.evaluators.llm:evaluate",
}

EVALUATOR_TYPES: tuple[str, ...] = tuple(_REGISTRY)


_LOADED: dict[str, Evaluator] = {}


def get(type_name: str) -> Evaluator:
    """The evaluator function for a type name (KeyError for an unknown type).

    Imported on first use and kept: this runs once per step.
    """
    fn = _LOADED.get(type_name)
    if fn is None:
        module_name, _, attr = _REGISTRY[type_name].partition(":")
        fn = _LOADED[type_name] = getattr(importlib.import_module(module_name), attr)
    return fn


def evaluate(spec: Evaluate, inp: EvalInput) -> Verdict:
    """Run the evaluator `spec` names."""
    return get(spec.type)(spec, inp)


def judge_verdicts(spec: Evaluate) -> tuple[str, ...]:
    """The verdict enum of an `llm_structured` evaluator: its custom schema's or the default."""
    schema = spec.schema
    if schema is not None:
        props = schema.get("properties")
        verdict = props.get("verdict") if isinstance(props, Mapping) else None
        enum = verdict.get("enum") if isinstance(verdict, Mapping) else None
        if isinstance(enum, list | tuple):
            return tuple(str(v) for v in enum)
    return DEFAULT_VERDICTS


def possible_verdicts(spec: Evaluate | None, *, action_type: str | None) -> frozenset[str]:
    """Every verdict a state with this evaluator can produce (SPEC section 4).

    Any action can be killed by a timeout (`timeout`, without running the evaluator). A slash
    action can also fail in the `claude` CLI itself (missing binary, `is_error`, non-zero
    exit), which is verdict `error` whatever the evaluator. A shell action that cannot start
    ends the run (exit 3) instead. A state with neither action nor evaluator gives `success`.
    """
    out: set[str] = set()
    if action_type is not None:
        out.add("timeout")
    if action_type == "slash":
        out.add("error")
    if spec is None:
        return frozenset(out | {"success"})
    t = spec.type
    if t == "exit_code":
        out |= {"success", "failure", "error"}
    elif t == "output_contains":
        out |= {"success", "failure"}
    elif t in ("output_numeric", "output_json", "all", "any"):
        out |= {"success", "failure", "error"}
    elif t == "convergence":
        out |= {"target", "progress", "stall", "error"}
    elif t == "llm_structured":
        enum = judge_verdicts(spec)
        out |= set(enum) | {"error"}
        if spec.uncertain_suffix:
            out |= {v + UNCERTAIN_SUFFIX for v in enum}
        if spec.fail_open:
            out |= {"success"}
    return frozenset(out)
