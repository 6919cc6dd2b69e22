"""What a run is: the options it was given, its progress (what state.json holds), its result."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from little_loops.errors import (
    EXIT_BUDGET,
    EXIT_FAILURE,
    EXIT_MAX_ITERATIONS,
    EXIT_RUN_ERROR,
    EXIT_SUCCESS,
    EXIT_TIMEOUT,
)
from little_loops.model.question import (
    Prompt,
    Question,
    pending_of,
)

OUTCOME_EXIT = {
    "success": EXIT_SUCCESS,
    "failure": EXIT_FAILURE,
    "error": EXIT_RUN_ERROR,
    "max_iterations": EXIT_MAX_ITERATIONS,
    "budget": EXIT_BUDGET,
    "timeout": EXIT_TIMEOUT,
}


@dataclass(frozen=True)
class RunOptions:
    """What the command line adds to a loop file."""

    base_dir: Path = field(default_factory=Path.cwd)  # where .loops/ lives and actions run
    overrides: Mapping[str, str] = field(default_factory=dict)  # --set KEY=VALUE
    max_iterations: int | None = None
    claude: tuple[str, ...] = ("claude",)
    claude_flags: tuple[str, ...] = ("--dangerously-skip-permissions",)
    model: str | None = None  # --model / LL_MODEL
    cache: bool = True
    record: Path | None = None
    replay: Path | None = None
    env: Mapping[str, str] | None = None  # None: this process's environment
    fsync: bool = False
    allow_concurrent: bool = False
    on_output: Callable[[str, bytes], None] | None = None  # --verbose streaming
    # A terminal state's output, shown once its action ends (when on_output does not show it).
    on_terminal_output: Callable[[str, bytes], None] | None = None
    # `ask` states: answers given up front (`--answer ID=VALUE`: id pattern -> value), and
    # the terminal prompt (None: a question without an answer suspends the run).
    answers: Mapping[str, str] = field(default_factory=dict)
    prompt: Prompt | None = None
    jobs: int = 8  # --jobs: actions running at once in a whole tree of forks (branches.py)
    branch: tuple[str, str] | None = None  # --branch STATE=KEY: only that branch of the fork
    # A child's context keys bound through `with:` from program, model or human text
    # (`captured`, `prev`, `item`, an answer): escaped and fenced like it (SPEC section 7).
    program_context: frozenset[str] = frozenset()


@dataclass
class Progress:
    """The mutable state of a run, written whole into state.json once per step; `captured` and
    `prev` are written there as references into outputs.dat (see `RunSession.persist`)."""

    run_id: str
    loop_file: str
    loop_sha256: str
    started_at: str
    context: dict[str, str]
    max_iterations: int
    current: str  # the state the next step runs
    status: str = "running"  # running, finished, interrupted, suspended (waiting on `pending`)
    step: int = 0  # steps finished
    elapsed_ms: int = 0
    cost_usd: float = 0.0
    captured: dict[str, dict[str, Any]] = field(default_factory=dict)
    prev: dict[str, Any] = field(default_factory=dict)
    convergence: dict[str, float] = field(default_factory=dict)
    prior_reasons: dict[str, str] = field(default_factory=dict)
    path: list[str] = field(default_factory=list)  # not persisted: events.jsonl has it
    on_max_used: bool = False
    attempt: int = 0  # retry attempt of the step in progress (0 between steps)
    pid: int = 0  # the ll process that owns the run
    pid_start: int | None = None  # and when it started: with the pid, it names that process
    options: dict[str, Any] = field(default_factory=dict)  # command-line options, for resume
    last_route: dict[str, Any] | None = None
    outcome: str | None = None
    exit_code: int | None = None
    error: str | None = None
    # Set at the end: where the run stopped, and its `outputs:` (what a calling loop reads).
    final_state: str | None = None
    outputs: dict[str, str] | None = None
    # Questions waiting for an answer, this run's and its children's.
    pending: list[Question] = field(default_factory=list)

    def to_dict(self, names: tuple[str, ...] | None = None) -> dict[str, Any]:
        # Shallow on purpose: this runs after every step and json.dumps walks the rest.
        # The path grows with every step, so it stays out (events.jsonl records it).
        out = {name: getattr(self, name) for name in names or _PERSISTED}
        if "pending" in out:
            out["pending"] = [q.to_json() for q in self.pending]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "state.json") -> Progress:
        """A progress as `to_dict` wrote it; its questions checked (`RecordError` naming
        `where`)."""
        fields = {k: v for k, v in data.items() if k in _PERSISTED}
        fields["pending"] = pending_of(data.get("pending"), where)
        return cls(**fields)


_PERSISTED = tuple(name for name in Progress.__dataclass_fields__ if name != "path")
# Set when the run starts (or resumes) and never changed by a step: masked once per run.
_FIXED = (
    "run_id",
    "loop_file",
    "loop_sha256",
    "started_at",
    "context",
    "max_iterations",
    "pid",
    "pid_start",
    "options",
)
_CHANGING = tuple(name for name in _PERSISTED if name not in _FIXED)


@dataclass(frozen=True)
class RunResult:
    run_id: str
    outcome: str
    exit_code: int
    final_state: str
    steps: int
    duration_ms: int
    path: tuple[str, ...]
    run_dir: Path
    error: str | None = None
