"""The evaluator registry: every type name, its `Evaluator`, and the verdicts a state can give.

Registration is this one table. The deterministic evaluators are imported with it (they are
cheap); the judge's code is imported on its first judgement, so `ll validate` never loads an SDK.
No evaluator module imports this one: `all`/`any` are handed `evaluate` when they are built.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from little_loops.model.loop import (
    Evaluate,
    Verdict,
)

from .configs import LlmStructured, config_of, judge_gives
from .contract import EvalInput, Evaluator
from .deterministic import Combine, pure_evaluators


class _Judge:
    """`llm_structured`: the verdicts come from its schema; `llm.py` is imported when first used."""

    config = LlmStructured

    def verdicts(self, spec: Evaluate) -> frozenset[str]:
        return judge_gives(config_of(LlmStructured, spec))

    def evaluate(self, spec: Evaluate, inp: EvalInput) -> Verdict:
        from . import llm

        return llm.evaluate(spec, inp)


def evaluate(spec: Evaluate, inp: EvalInput) -> Verdict:
    """Run the evaluator `spec` names (KeyError for a type the registry does not have)."""
    return EVALUATORS[spec.type].evaluate(spec, inp)


EVALUATORS: Mapping[str, Evaluator] = MappingProxyType(
    {
        **pure_evaluators(),
        "llm_structured": _Judge(),
        "all": Combine(need_all=True, dispatch=evaluate),
        "any": Combine(need_all=False, dispatch=evaluate),
    }
)
EVALUATOR_TYPES: tuple[str, ...] = tuple(EVALUATORS)


def get(type_name: str) -> Evaluator:
    """The evaluator of a type name (KeyError for an unknown type)."""
    return EVALUATORS[type_name]


def possible_verdicts(spec: Evaluate | None, *, action_type: str | None) -> frozenset[str]:
    """Every verdict a state with this evaluator can produce (SPEC section 4).

    The evaluator's own verdicts, plus what the action can give without it: any action can be
    killed by a timeout (`timeout`, without running the evaluator); a slash action can also
    fail in the `claude` CLI itself (missing binary, `is_error`, non-zero exit), which is
    verdict `error` whatever the evaluator. A shell action that cannot start ends the run
    (exit 3) instead. A state with neither action nor evaluator gives `success`.
    """
    out: set[str] = set()
    if action_type is not None:
        out.add("timeout")
    if action_type == "slash":
        out.add("error")
    if spec is None:
        return frozenset(out | {"success"})
    found = EVALUATORS.get(spec.type)
    return frozenset(out) if found is None else frozenset(out | found.verdicts(spec))
