"""A checked document -> the frozen model (`Loop`), taking only well-typed values.

Every default comes from the packaged schema's `default` keywords (`defaults.py`), so the
schema, the editor schema, the reference docs and the model cannot disagree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from little_loops.load.composer import SourceMap
from little_loops.load.defaults import (
    EVALUATE,
    defaults,
)
from little_loops.model.loop import (
    PASS_FAIL_SCHEMA,
    ActionType,
    Direction,
    Evaluate,
    Example,
    Input,
    Join,
    LlmDefaults,
    Loop,
    Outcome,
    Pos,
    Retry,
    Route,
    Scalar,
    State,
)
from little_loops.wording import NodePath

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any, TypeVar

    _Choice = TypeVar("_Choice", bound=str)

SHORTHANDS = {
    "on_success": "success",
    "on_failure": "failure",
    "on_error": "error",
    "on_timeout": "timeout",
}


OUTCOMES: tuple[Outcome, ...] = ("success", "failure")
DIRECTIONS: tuple[Direction, ...] = ("minimize", "maximize")


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Given:
    """One block's well-typed values; a key that is missing or of the wrong type (which the
    schema has already reported) gives the schema's `default` for it."""

    def __init__(self, raw: Mapping[str, Any], block: str) -> None:
        self.raw, self.defaults = raw, defaults(block)

    def default(self, key: str) -> Any:
        return self.defaults[key]

    def flag(self, key: str) -> bool:
        value = self.raw.get(key)
        return value if isinstance(value, bool) else bool(self.defaults[key])

    def number(self, key: str) -> float:
        value = _num(self.raw, key)
        return float(self.defaults[key]) if value is None else value

    def choice(self, key: str, options: tuple[_Choice, ...]) -> _Choice:
        value = self.raw.get(key)
        for option in options:
            if value == option:
                return option
        return next(o for o in options if o == self.defaults[key])


class Builder:
    """Builds the model from a document, taking only well-typed values (others keep defaults)."""

    def __init__(self, smap: SourceMap) -> None:
        self.smap = smap
        self.judges_raw: Mapping[str, Any] = {}  # `judges:` as written, for `judge: NAME`
        self.base_dir = Path(".")  # the loop file's directory: rubric files are beside it

    def loop(
        self, doc: Mapping[str, Any], *, path: Path, sha256: str
    ) -> tuple[Loop, dict[str, list[tuple[str, Route]]]]:
        raw_judges = doc.get("judges")
        self.judges_raw = raw_judges if isinstance(raw_judges, dict) else {}
        self.base_dir = path.parent
        judges = {
            name: self.evaluate({**raw, "type": "llm_structured"}, ("judges", name), own=True)
            for name, raw in self.judges_raw.items()
            if isinstance(raw, dict)
        }
        raw_states = doc.get("states")
        states: dict[str, State] = {}
        entries: dict[str, list[tuple[str, Route]]] = {}
        if isinstance(raw_states, dict):
            for name, raw in raw_states.items():
                at: NodePath = ("states", name)
                state, entries[name] = self.state(name, raw if isinstance(raw, dict) else {}, at)
                states[name] = state
        context, inputs = _context(doc.get("context"))
        raw_outputs = doc.get("outputs")
        outputs = (
            {k: v for k, v in raw_outputs.items() if isinstance(v, str)}
            if isinstance(raw_outputs, dict)
            else {}
        )
        secrets = doc.get("secrets")
        top = _Given(doc, "loop")
        working_dir = _str(doc, "working_dir")
        loop = Loop(
            name=_str(doc, "name") or "",
            initial=_str(doc, "initial") or "",
            states=MappingProxyType(states),
            path=path,
            description=_str(doc, "description"),
            context=MappingProxyType(context),
            max_iterations=int(top.number("max_iterations")),
            on_max_iterations=_str(doc, "on_max_iterations"),
            timeout=_opt_num(doc, "timeout"),
            action_timeout=top.number("action_timeout"),
            backoff=top.number("backoff"),
            maintain=top.flag("maintain"),
            on_error=_str(doc, "on_error"),
            llm=self.llm(doc.get("llm")),
            judges=MappingProxyType(judges),
            max_cost_usd=_opt_num(doc, "max_cost_usd"),
            keep_runs=_opt_int(doc, "keep_runs"),
            secrets=tuple(s for s in secrets if isinstance(s, str))
            if isinstance(secrets, list)
            else (),
            shell=_str(doc, "shell") or top.default("shell"),
            working_dir=Path(working_dir) if working_dir else None,
            source_sha256=sha256,
            outputs=MappingProxyType(outputs),
            inputs=MappingProxyType(inputs),
        )
        return loop, entries

    def llm(self, raw: Any) -> LlmDefaults:
        if not isinstance(raw, dict):
            raw = {}
        given = _Given(raw, "llm")
        return LlmDefaults(
            model=_str(raw, "model"),
            max_tokens=int(given.number("max_tokens")),
            timeout=given.number("timeout"),
            min_confidence=given.number("min_confidence"),
            max_output_chars=int(given.number("max_output_chars")),
        )

    def state(
        self, name: str, raw: Mapping[str, Any], at: NodePath
    ) -> tuple[State, list[tuple[str, Route]]]:
        action = _str(raw, "action") or None
        action_type: ActionType | None = None
        if action is not None:
            given = raw.get("action_type")
            action_type = given if given in ("shell", "slash") else guess_action_type(action)
        raw_eval = raw.get("evaluate")
        evaluate: Evaluate | None
        if isinstance(raw_eval, dict):
            evaluate = self.evaluate(raw_eval, (*at, "evaluate"))
        elif action_type == "shell":
            evaluate = Evaluate(type="exit_code", pos=self.smap.key(at))
        elif (
            action_type == "slash"
            and raw.get("terminal") is not True
            and any(raw.get(k) for k in ("route", "on_success", "on_failure"))
        ):
            # Branching on a slash step's result asks the judge, and only success or failure.
            evaluate = Evaluate(
                type="llm_structured", pos=self.smap.key(at), schema=PASS_FAIL_SCHEMA
            )
        else:
            evaluate = None  # a `next` or terminal slash step: the CLI's own result, no judge
        entries = self.route_entries(raw, at)
        routes: dict[str, Route] = {}
        for verdict, found in entries:
            routes.setdefault(verdict, found)
        next_target = _str(raw, "next")
        next_route = (
            Route(next_target, "next", self.smap.value((*at, "next"))) if next_target else None
        )
        raw_retry = raw.get("retry")
        raw_with = raw.get("with")
        with_ = (
            {k: scalar_text(v) for k, v in raw_with.items() if _is_scalar(v)}
            if isinstance(raw_with, dict)
            else {}
        )
        given = _Given(raw, "state")
        state = State(
            name=name,
            pos=self.smap.key(at),
            action=action,
            action_type=action_type,
            evaluate=evaluate,
            routes=MappingProxyType(routes),
            next=next_route,
            terminal=given.flag("terminal"),
            outcome=given.choice("outcome", OUTCOMES),
            capture=_str(raw, "capture"),
            timeout=_opt_num(raw, "timeout"),
            retry=self.retry(raw_retry) if isinstance(raw_retry, dict) else None,
            on_maintain=_str(raw, "on_maintain"),
            description=_str(raw, "description"),
            loop=_str(raw, "loop") or None,
            with_=MappingProxyType(with_),
            ask=_str(raw, "ask") or None,
            choices=tuple(c for c in raw.get("choices") or () if isinstance(c, str))
            if isinstance(raw.get("choices"), list)
            else (),
            **self.fork(raw, at),
        )
        return state, entries

    def fork(self, raw: Mapping[str, Any], at: NodePath) -> dict[str, Any]:
        """The keys of a `parallel:`/`for_each:` state (fork.py runs them); none elsewhere."""
        out: dict[str, Any] = {}
        branches = raw.get("parallel")
        if isinstance(branches, dict):
            out["parallel"] = MappingProxyType(
                {
                    str(key): self.state(str(key), value, (*at, "parallel", key))[0]
                    for key, value in branches.items()
                    if isinstance(value, dict)
                }
            )
        items = raw.get("for_each")
        if isinstance(items, str):
            out["for_each"] = items
        elif isinstance(items, list):
            out["for_each"] = tuple(items)
        if "join" in raw:
            out["join"] = join_of(raw.get("join"))
        given = _opt_int(raw, "max_concurrency")
        if given is not None:
            out["max_concurrency"] = given
        if isinstance(raw.get("fail_fast"), bool):
            out["fail_fast"] = raw["fail_fast"]
        return out

    def route_entries(self, raw: Mapping[str, Any], at: NodePath) -> list[tuple[str, Route]]:
        """Every (verdict, route) the state's keys give, in file order, duplicates kept."""
        found: list[tuple[Pos, str, Route]] = []
        table = raw.get("route")
        if isinstance(table, dict):
            for verdict, target in table.items():
                if isinstance(target, str) and target:
                    pos = self.smap.value((*at, "route", verdict))
                    found.append((pos, verdict, Route(target, "route", pos)))
        for key, verdict in SHORTHANDS.items():
            target = raw.get(key)
            if isinstance(target, str) and target:
                pos = self.smap.value((*at, key))
                found.append((pos, verdict, Route(target, key, pos)))
        found.sort(key=lambda item: (item[0].line, item[0].col))
        return [(verdict, r) for _, verdict, r in found]

    def retry(self, raw: Mapping[str, Any]) -> Retry:
        on = raw.get("on")
        given = _Given(raw, "retry")
        return Retry(
            max_attempts=int(given.number("max_attempts")),
            interval=given.number("interval"),
            backoff_rate=given.number("backoff_rate"),
            max_delay=given.number("max_delay"),
            jitter=given.flag("jitter"),
            on=tuple(v for v in on if isinstance(v, str))
            if isinstance(on, list)
            else given.default("on"),
        )

    def evaluate(self, raw: Mapping[str, Any], at: NodePath, *, own: bool = False) -> Evaluate:
        """`raw` as a record; with `judge: NAME`, the named judge's keys fill in what `raw`
        leaves out (`own`: a judge's own block, which names no other judge)."""
        if not own and isinstance(raw.get("judge"), str):
            raw = with_judge(raw, self.judges_raw.get(raw["judge"]))
        of = raw.get("of")
        nested: tuple[Evaluate, ...] = ()
        if isinstance(of, list):
            nested = tuple(
                self.evaluate(item, (*at, "of", i))
                for i, item in enumerate(of)
                if isinstance(item, dict)
            )
        target = raw.get("target")
        schema = raw.get("schema")
        models = raw.get("models")
        given = _Given(raw, EVALUATE)
        return Evaluate(
            type=_str(raw, "type") or "",
            pos=self.smap.value(at),
            pattern=_str(raw, "pattern"),
            literal=given.flag("literal"),
            negate=given.flag("negate"),
            source=_str(raw, "source"),
            operator=_str(raw, "operator"),
            target=target if isinstance(target, str | int | float | bool) else None,
            path=_str(raw, "path"),
            tolerance=given.number("tolerance"),
            direction=given.choice("direction", DIRECTIONS),
            previous=_str(raw, "previous"),
            of=nested,
            prompt=_str(raw, "prompt") or _rubric(self.base_dir, _str(raw, "rubric_file")),
            schema=MappingProxyType(schema) if isinstance(schema, dict) else None,
            min_confidence=_opt_num(raw, "min_confidence"),
            uncertain_suffix=given.flag("uncertain_suffix"),
            model=_str(raw, "model"),
            max_tokens=_opt_int(raw, "max_tokens"),
            timeout=_opt_num(raw, "timeout"),
            max_output_chars=_opt_int(raw, "max_output_chars"),
            fail_open=given.flag("fail_open"),
            prior_reason=given.flag("prior_reason"),
            samples=int(given.number("samples")),
            judge=None if own else _str(raw, "judge"),
            rubric_file=_str(raw, "rubric_file"),
            examples=_examples(raw.get("examples")),
            temperature=_opt_num(raw, "temperature"),
            models=tuple(m for m in models if isinstance(m, str))
            if isinstance(models, list)
            else (),
            reference=_str(raw, "reference"),
        )


# Keys that say one thing together: a block that sets one of them replaces the judge's pair.
_PAIRED = (("prompt", "rubric_file"), ("model", "models"))
RUBRIC_LIMIT = 100_000  # characters of a rubric file; more is an error (judge_config)


def with_judge(raw: Mapping[str, Any], judge: Any) -> dict[str, Any]:
    """A state's `evaluate:` over the named judge's settings, key by key: the state's own
    keys win; a state that sets `prompt` or `rubric_file` (`model` or `models`) replaces
    the judge's whole pair."""
    if not isinstance(judge, dict):
        return dict(raw)
    base = dict(judge)
    for pair in _PAIRED:
        if any(key in raw for key in pair):
            for key in pair:
                base.pop(key, None)
    return {**base, **raw}


def _rubric(base_dir: Path, name: str | None) -> str | None:
    """The text of a rubric file beside the loop; None when it cannot be read (the checks
    say why)."""
    if name is None:
        return None
    from little_loops.evaluators.judge_files import (
        RubricUnreadable,
        read_rubric,
    )

    try:
        text = read_rubric(base_dir / name)
    except (OSError, RubricUnreadable):
        return None
    return text.strip() if len(text) <= RUBRIC_LIMIT else None


def _examples(raw: Any) -> tuple[Example, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(
        Example(
            output=scalar_text(item["output"]) if _is_scalar(item.get("output")) else "",
            verdict=item["verdict"] if isinstance(item.get("verdict"), str) else "",
            reason=item["reason"] if isinstance(item.get("reason"), str) else "",
        )
        for item in raw
        if isinstance(item, dict)
    )


def join_of(raw: Any) -> Join:
    """`join:` as written: `all`, `any`, N, or `{VERDICT: all|any|N}`. A form that is none
    of these keeps its text in `need`, for `ll validate` to name (`checks`)."""
    if isinstance(raw, dict) and len(raw) == 1:
        verdict, need = next(iter(raw.items()))
        inner = join_of(need)
        return Join(inner.need, str(verdict))
    if isinstance(raw, bool):
        return Join(str(raw).lower())
    if isinstance(raw, int):
        return Join(raw)
    return Join(str(raw))


def _context(raw: Any) -> tuple[dict[str, Scalar], dict[str, Input]]:
    """`context:` -> (the default values, every key as an input).

    A required key (`~`, or a typed mapping without `default`) has no default, so it is not in
    the first mapping; it must come from `--set` or a caller's `with:`.
    """
    context: dict[str, Scalar] = {}
    inputs: dict[str, Input] = {}
    if not isinstance(raw, dict):
        return context, inputs
    for key, value in raw.items():
        if isinstance(value, dict):
            default = value.get("default")
            enum = value.get("enum")
            kind = value.get("type")
            description = value.get("description")
            inputs[key] = Input(
                required=not _is_scalar(default),
                default=scalar_text(default) if _is_scalar(default) else None,
                type=kind if isinstance(kind, str) else _type_of(default),
                enum=tuple(scalar_text(e) for e in enum if _is_scalar(e))
                if isinstance(enum, list)
                else None,
                description=description if isinstance(description, str) else None,
            )
            if isinstance(default, str | int | float | bool):
                context[key] = default
        elif value is None:
            inputs[key] = Input(required=True)
        else:
            # A value the schema refused still makes a key: `${context.KEY}` is no error.
            scalar = value if _is_scalar(value) else ""
            context[key] = scalar
            inputs[key] = Input(default=scalar_text(scalar), type=_type_of(scalar))
    return context, inputs


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _type_of(value: Any) -> str | None:
    """The input type a default implies: none for text (any value is text)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return None


def scalar_text(value: Any) -> str:
    """A YAML scalar as the text a `${...}` placeholder gives: true/false, 3, 2.5, text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def guess_action_type(action: str) -> ActionType:
    """SPEC section 3: slash when the first word is `/name` or `/ns:name` with no other `/`."""
    words = action.split(None, 1)
    first = words[0] if words else ""
    if len(first) > 1 and first.startswith("/") and "/" not in first[1:]:
        return "slash"
    return "shell"


def _str(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) else None


def _num(raw: Mapping[str, Any], key: str) -> float | None:
    value = raw.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _opt_num(raw: Mapping[str, Any], key: str) -> float | None:
    return _num(raw, key) if _is_num(raw.get(key)) else None


def _opt_int(raw: Mapping[str, Any], key: str) -> int | None:
    value = _opt_num(raw, key)
    return None if value is None else int(value)
