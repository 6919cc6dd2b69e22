"""Evaluators: a finished action's result -> a verdict.

`contract` (the input and the `Evaluator` Protocol), `configs` (one typed config per type),
`deterministic` and the judge (`llm`), and `registry`, the one table of them all. The names
below are the ones the runner, `ll validate` and `ll graph` use.
"""

from __future__ import annotations

from .configs import judge_verdicts as judge_verdicts
from .contract import EvalInput as EvalInput
from .contract import Evaluator as Evaluator
from .registry import EVALUATOR_TYPES as EVALUATOR_TYPES
from .registry import evaluate as evaluate
from .registry import get as get
from .registry import possible_verdicts as possible_verdicts
