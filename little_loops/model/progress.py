"""What a run is: the options it was given, its progress (what state.json holds), its result."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import itemgetter
from pathlib import Path

from little_loops.errors import (
    EXIT_BUDGET,
    EXIT_FAILURE,
    EXIT_MAX_ITERATIONS,
    EXIT_RUN_ERROR,
    EXIT_SUCCESS,
    EXIT_TIMEOUT,
    RecordError,
)
from little_loops.model.details import Json
from little_loops.model.question import (
    Prompt,
    Question,
    json_kind,
    pending_of,
)
from little_loops.model.records import field, fields, record

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

OUTCOME_EXIT = {
    "success": EXIT_SUCCESS,
    "failure": EXIT_FAILURE,
    "error": EXIT_RUN_ERROR,
    "max_iterations": EXIT_MAX_ITERATIONS,
    "budget": EXIT_BUDGET,
    "timeout": EXIT_TIMEOUT,
}


@record(frozen=True)
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


DEFAULT_CLAUDE = ("claude",)
DEFAULT_CLAUDE_FLAGS = ("--dangerously-skip-permissions",)


@record(frozen=True)
class SavedOptions:
    """The command-line options a run keeps in state.json (`options`), which `ll resume`
    reads back: where it acts, its `--set` values (secrets left out), its judge's settings,
    and the nonce its sealed secrets are keyed by."""

    cwd: str | None = None  # where its actions run (a moved run directory maps it)
    base_dir: str | None = None  # where .loops/ was: a resume elsewhere maps paths by it
    overrides: Mapping[str, str] = field(default_factory=dict)
    model: str | None = None
    cache: bool = True
    record: str | None = None
    replay: str | None = None
    claude: tuple[str, ...] = DEFAULT_CLAUDE
    # None: not saved (an older run), the default; an empty tuple is the user's choice.
    claude_flags: tuple[str, ...] | None = None
    secret_sets: tuple[str, ...] = ()  # secrets given by --set: a resume asks for them again
    secret_nonce: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "cwd": self.cwd,
            "base_dir": self.base_dir,
            "overrides": dict(self.overrides),
            "model": self.model,
            "cache": self.cache,
            "record": self.record,
            "replay": self.replay,
            "claude": list(self.claude),
            "claude_flags": list(
                self.claude_flags if self.claude_flags is not None else DEFAULT_CLAUDE_FLAGS
            ),
            "secret_sets": list(self.secret_sets),
            "secret_nonce": self.secret_nonce,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> SavedOptions:
        """The options as `to_json` wrote them (or an older run, with fewer keys); a value of
        the wrong kind is a `RecordError` naming `where`."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise _bad_option(where, "", data, "an object")
        d: Mapping[str, Any] = data

        def text(key: str) -> str | None:
            value = d.get(key)
            if value is not None and not isinstance(value, str):
                raise _bad_option(where, key, value, "a string")
            return value

        def texts(key: str) -> tuple[str, ...] | None:
            value = d.get(key)
            if value is None:
                return None
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _bad_option(where, key, value, "a list of strings")
            return tuple(value)

        overrides = d.get("overrides") or {}
        if not isinstance(overrides, dict) or not all(
            isinstance(v, str) for v in overrides.values()
        ):
            raise _bad_option(where, "overrides", overrides, "an object of strings")
        cache = d.get("cache", True)
        if not isinstance(cache, bool):
            raise _bad_option(where, "cache", cache, "true or false")
        return cls(
            cwd=text("cwd"),
            base_dir=text("base_dir"),
            overrides=dict(overrides),
            model=text("model"),
            cache=cache,
            record=text("record"),
            replay=text("replay"),
            claude=texts("claude") or DEFAULT_CLAUDE,
            claude_flags=texts("claude_flags"),
            secret_sets=texts("secret_sets") or (),
            secret_nonce=text("secret_nonce") or "",
        )


@record(frozen=True)
class Routed:
    """The route a step took: the `route` event, and state.json's `last_route`."""

    from_: str
    to: str
    verdict: str
    via: str

    def to_json(self) -> dict[str, str]:
        return {"from": self.from_, "to": self.to, "verdict": self.verdict, "via": self.via}

    @classmethod
    def from_json(cls, data: object, where: str) -> Routed | None:
        if data is None:
            return None
        if not isinstance(data, dict):
            raise _bad_option(where, "", data, "an object", name="'last_route'")
        values = []
        for key in ("from", "to", "verdict", "via"):
            value = data.get(key)
            if not isinstance(value, str):
                raise _bad_option(where, key, value, "a string", name=f"'last_route.{key}'")
            values.append(value)
        return cls(*values)


def _bad_option(
    where: str, key: str, value: object, want: str, name: str | None = None
) -> RecordError:
    name = name or (f"'options.{key}'" if key else "'options'")
    return RecordError(
        f"{where}: corrupted state file ({name} should be {want}, not {json_kind(value)}); "
        "the run cannot be resumed"
    )


@record
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
    captured: dict[str, dict[str, Json]] = field(default_factory=dict)
    prev: dict[str, Json] = field(default_factory=dict)
    convergence: dict[str, float] = field(default_factory=dict)
    prior_reasons: dict[str, str] = field(default_factory=dict)
    path: list[str] = field(default_factory=list)  # not persisted: events.jsonl has it
    on_max_used: bool = False
    attempt: int = 0  # retry attempt of the step in progress (0 between steps)
    pid: int = 0  # the ll process that owns the run
    pid_start: int | None = None  # and when it started: with the pid, it names that process
    options: SavedOptions = field(default_factory=SavedOptions)  # for resume
    last_route: Routed | None = None
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
        names = names or _PERSISTED
        getter = _GETTERS.get(names)
        if getter is None:
            getter = _GETTERS[names] = itemgetter(*names)
        # The fields are the instance's attributes: read at once, in C (once a step).
        values = getter(self.__dict__)
        out = dict(zip(names, values if len(names) > 1 else (values,), strict=True))
        if "pending" in out:
            out["pending"] = [q.to_json() for q in self.pending]
        if "options" in out:
            out["options"] = self.options.to_json()
        if self.last_route is not None and "last_route" in out:
            out["last_route"] = self.last_route.to_json()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "state.json") -> Progress:
        """A progress as `to_dict` wrote it; its questions checked (`RecordError` naming
        `where`)."""
        fields = {k: v for k, v in data.items() if k in _PERSISTED}
        fields["pending"] = pending_of(data.get("pending"), where)
        fields["options"] = SavedOptions.from_json(data.get("options"), where)
        fields["last_route"] = Routed.from_json(data.get("last_route"), where)
        return cls(**fields)


_PERSISTED = tuple(f.name for f in fields(Progress) if f.name != "path")
_GETTERS: dict[tuple[str, ...], Callable[[dict[str, Any]], Any]] = {}
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


@record(frozen=True)
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
