"""The frozen, typed form of a loop file: what the loader builds and the runner reads. No I/O."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from little_loops.model.details import EMPTY_DETAILS, Details, Json
from little_loops.model.records import field, record

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any, Literal

    ActionType = Literal["shell", "slash"]
    Outcome = Literal["success", "failure"]
    Direction = Literal["minimize", "maximize"]
else:
    ActionType = Outcome = Direction = str
Scalar = str | int | float | bool

EMPTY: Mapping[str, Any] = MappingProxyType({})

# The `paradigm:` values that are compiled to the native form (`fsm`) before loading.
PARADIGMS = ("goal", "convergence", "invariants", "imperative")

DEFAULT_JUDGE_PROMPT = "Evaluate whether this action succeeded based on its output."
DEFAULT_JUDGE_MODEL = "claude-sonnet-5-5"
DEFAULT_VERDICTS = ("success", "failure", "blocked", "partial")

# The judge's answer schemas; here rather than with the judge, so the loader and `ll validate`
# name them without importing the judge's input code.
DEFAULT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        # The reason comes first: a model writes its answer in this order, so it reasons
        # before it commits to a verdict and a confidence.
        "reason": {"type": "string", "description": "One short sentence: why this verdict."},
        "verdict": {
            "type": "string",
            "enum": list(DEFAULT_VERDICTS),
            "description": (
                "success: the action achieved its goal. failure: it did not, and trying again "
                "may help. blocked: it cannot proceed without outside help. partial: it made "
                "progress but is not done."
            ),
        },
        "confidence": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "How sure the evidence lets you be, from 0 to 1.",
        },
    },
    "required": ["reason", "verdict", "confidence"],
    "additionalProperties": False,
}


# The implicit judge of a slash state that routes by verdict with no `evaluate:` (SPEC section 3):
# the two verdicts `on_success`/`on_failure` route, so no answer falls through unrouted.
PASS_FAIL_SCHEMA: Mapping[str, Any] = {
    **DEFAULT_SCHEMA,
    "properties": {
        **DEFAULT_SCHEMA["properties"],
        "verdict": {
            "type": "string",
            "enum": ["success", "failure"],
            "description": "success: the action achieved its goal. failure: it did not.",
        },
    },
}

# The verdicts the router treats specially (SPEC section 6).
ERROR_VERDICTS = frozenset({"error", "timeout"})
UNCERTAIN_SUFFIX = "_uncertain"

# Judge providers that take no temperature, and why: the judge leaves it out of the request,
# `ll validate` warns where one is set, and `ll judge explain` says it was not sent.
NO_TEMPERATURE = {
    "anthropic": "the Anthropic API refuses sampling parameters",
    "claude": "the claude CLI takes none",
}


@record(frozen=True)
class Pos:
    """Where a node starts in the loop file: 1-based line and column."""

    line: int = 1
    col: int = 1


@record(frozen=True)
class LlmDefaults:
    """The loop's `llm:` block: defaults for every `llm_structured` evaluator."""

    model: str | None = None
    max_tokens: int = 256
    timeout: float = 30.0
    min_confidence: float = 0.5
    max_output_chars: int = 4000


@record(frozen=True)
class Example:
    """One few-shot example of a judge: an output and the verdict (and reason) it deserves."""

    output: str
    verdict: str
    reason: str = ""


@record(frozen=True)
class Evaluate:
    """One evaluator's configuration (SPEC section 4): every type's keys in one record, those
    unused by its type at their defaults. Each type's own typed view is in evaluators/configs.py.

    `None` on an `llm_structured` setting means "not set on the state": the judge then takes
    the loop's `llm:` value, then the command line / environment, then the built-in default.
    """

    type: str
    pos: Pos = Pos()
    # output_contains
    pattern: str | None = None
    literal: bool = False
    negate: bool = False
    # shared by several types
    source: str | None = None
    operator: str | None = None
    target: Scalar | None = None
    # output_json
    path: str | None = None
    # convergence
    tolerance: float = 0.0
    direction: Direction = "minimize"
    previous: str | None = None
    # all / any
    of: tuple[Evaluate, ...] = ()
    # llm_structured
    prompt: str | None = None
    schema: Mapping[str, Any] | None = None
    min_confidence: float | None = None
    uncertain_suffix: bool = False
    model: str | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    max_output_chars: int | None = None
    fail_open: bool = False
    prior_reason: bool = False
    samples: int = 1
    # a named judge (`judges:` at the top) whose settings this one starts from
    judge: str | None = None
    rubric_file: str | None = None  # as written; its text is already in `prompt`
    examples: tuple[Example, ...] = ()
    temperature: float | None = None  # None: 0, or 1 with samples > 1 (see the judge)
    models: tuple[str, ...] = ()  # a panel: every model is asked, the majority wins
    reference: str | None = None  # the expected answer (a template), fenced for the judge


@record(frozen=True)
class Retry:
    """`retry:` on a state: re-run the action in place for some verdicts before routing."""

    max_attempts: int = 3
    interval: float = 1.0
    backoff_rate: float = 2.0
    max_delay: float = 60.0
    jitter: bool = True
    on: tuple[str, ...] = ("error", "timeout")


@record(frozen=True)
class Route:
    """One route: where a verdict goes and which key of the file said so (`via`)."""

    target: str  # a state name or "$current"
    via: str  # "route", "on_success", "on_failure", "on_error", "on_timeout", "next", ...
    pos: Pos = Pos()


@record(frozen=True)
class State:
    """One state of the machine, with its routes already merged from every shorthand.

    `routes` maps a verdict, `_` (default) or `_error` to a Route; shorthands such as
    `on_success` appear under their verdict (`success`). `next` is kept apart: it is the
    success route, and every other verdict of a `next` state goes the error way (SPEC 6).
    """

    name: str
    pos: Pos = Pos()
    action: str | None = None
    action_type: ActionType | None = None  # resolved: None only when there is no action
    evaluate: Evaluate | None = None  # resolved default: exit_code / llm_structured / None
    routes: Mapping[str, Route] = field(default_factory=lambda: EMPTY)
    next: Route | None = None
    terminal: bool = False
    outcome: Outcome = "success"
    capture: str | None = None
    timeout: float | None = None
    retry: Retry | None = None
    on_maintain: str | None = None
    description: str | None = None
    # A sub-loop state (`loop:`): the child file as written, relative to this file's directory
    # (never a template), and its `with:` bindings (templates; scalars kept as strings). Such a
    # state has no `action`, so `action_type` stays None: see `is_loop`.
    loop: str | None = None
    with_: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    # A question state (`ask:`): the question (a template), and its answers, which are the
    # state's verdicts (none: free text, verdict success). `timeout` is when it expires.
    ask: str | None = None
    choices: tuple[str, ...] = ()
    # A fork (fork.py): `parallel:` branches (each a State: an action, or a `loop:`), or
    # `for_each:` items (a template, or a literal list) over this state's own work.
    parallel: Mapping[str, State] = field(default_factory=lambda: EMPTY)
    for_each: str | tuple[Json, ...] | None = None
    join: Join | None = None
    max_concurrency: int | None = None
    fail_fast: bool = False

    @property
    def is_loop(self) -> bool:
        """True for a state that runs a child loop (`loop:`) instead of an action."""
        return self.loop is not None and not self.is_fork

    @property
    def is_fork(self) -> bool:
        """True for a `parallel:` or `for_each:` state: its branches are child runs."""
        return bool(self.parallel) or self.for_each is not None

    @property
    def is_ask(self) -> bool:
        """True for a state that asks a person (`ask:`) instead of running an action."""
        return self.ask is not None

    def ask_verdicts(self) -> frozenset[str]:
        """The verdicts an `ask` state gives: its choices (or success), and timeout when it
        expires."""
        out = set(self.choices or ("success",))
        if self.timeout is not None:
            out.add("timeout")
        return frozenset(out)


@record(frozen=True)
class Join:
    """`join:` of a fork: how many branches must give `verdict` (None: succeed).

    `need` is "all", "any" or a number of branches."""

    need: str | int = "all"
    verdict: str | None = None


@record(frozen=True)
class Input:
    """One input a loop declares in `context` (a child's parameter): `key: ~` is required,
    a scalar is a default, `{type, default, enum, description}` says more."""

    required: bool = False
    default: str | None = None
    type: str | None = None  # "string", "integer", "number", "boolean"; None: any scalar
    enum: tuple[str, ...] | None = None
    description: str | None = None


@record(frozen=True)
class Loop:
    """A whole loop file, validated."""

    name: str
    initial: str
    states: Mapping[str, State]
    path: Path = Path("loop.yaml")
    description: str | None = None
    context: Mapping[str, Scalar] = field(default_factory=lambda: EMPTY)
    max_iterations: int = 50
    on_max_iterations: str | None = None
    timeout: float | None = None
    action_timeout: float = 3600.0
    backoff: float = 0.0
    maintain: bool = False
    on_error: str | None = None
    llm: LlmDefaults = LlmDefaults()
    # `judges:`: named judges (llm_structured settings) a state's `judge: NAME` starts from
    judges: Mapping[str, Evaluate] = field(default_factory=lambda: EMPTY)
    max_cost_usd: float | None = None
    keep_runs: int | None = None  # `keep_runs:`: retention after each run (ll prune --keep)
    secrets: tuple[str, ...] = ()
    shell: str = "/bin/sh"
    working_dir: Path | None = None  # None: where `ll` was started
    source_sha256: str = ""  # of the file's bytes, so a resumed run can tell the file changed
    # What a caller sees: `outputs: {name: template}` (rendered when the loop ends) and the
    # inputs declared in `context` (`context` above keeps only their default values).
    outputs: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    inputs: Mapping[str, Input] = field(default_factory=lambda: EMPTY)

    @property
    def dir(self) -> Path:
        """The absolute directory of the loop file: `${loop.dir}`."""
        return self.path.resolve().parent

    def cwd(self, start: Path) -> Path:
        """Where actions run: `working_dir` (a relative one is relative to the loop file's
        directory), else `start`, the directory `ll` was started in. Always absolute."""
        if self.working_dir is None:
            return start.resolve()
        return (self.dir / self.working_dir).resolve()  # an absolute one replaces self.dir


@record(frozen=True)
class Verdict:
    """What an evaluator returns: a lowercase word and its details (`details.py`)."""

    verdict: str
    details: Details = EMPTY_DETAILS

    def to_dict(self) -> dict[str, Json]:
        return {"verdict": self.verdict, "details": self.details.to_json()}


def base_verdict(verdict: str) -> str | None:
    """`success_uncertain` -> `success`; None for a verdict without the suffix."""
    if verdict.endswith(UNCERTAIN_SUFFIX) and len(verdict) > len(UNCERTAIN_SUFFIX):
        return verdict[: -len(UNCERTAIN_SUFFIX)]
    return None
