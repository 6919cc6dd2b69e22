"""Checks of what a state says inside its values: evaluator settings (regexes, operators, JSON
paths, the judge's model and schema) and every `${...}` placeholder in actions and templates."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property

from little_loops.errors import (
    Diagnostic,
    Severity,
)
from little_loops.evaluators.deterministic import OPERATORS
from little_loops.evaluators.jsonpath import parse_json_path
from little_loops.load.schema import Locate
from little_loops.model.loop import (
    NO_TEMPERATURE,
    PASS_FAIL_SCHEMA,
    Evaluate,
    Loop,
    Pos,
    State,
)
from little_loops.model.records import record
from little_loops.templates.interpolate import (
    Placeholder,
    PlaceholderError,
    scan,
)
from little_loops.wording import (
    NodePath,
    did_you_mean,
    subject,
)

# The fields each namespace offers (SPEC sections 3 and 7); `env` and `context` take any name.
FIELDS: Mapping[str, tuple[str, ...]] = {
    "captured": (
        "output",
        "stderr",
        "exit_code",
        "duration_ms",
        "verdict",
        "confidence",
        "reason",
    ),
    "prev": ("output", "stderr", "exit_code", "duration_ms", "state", "verdict"),
    "state": ("name", "iteration", "attempt"),
    "loop": ("name", "run_id", "run_dir", "dir", "started_at", "elapsed_ms", "elapsed"),
    "item": ("value", "index", "key"),
}

# What a `capture:` on a fork (`parallel:`/`for_each:`) keeps, and of each of its branches.
FORK_FIELDS = (
    "verdict", "total", "succeeded", "failed", "cancelled", "succeeded_items", "failed_items",
    "cancelled_items", "failed_keys", "output", "join", "duration_ms",
)  # fmt: skip
BRANCH_FIELDS = (
    "verdict", "outcome", "exit_code", "final_state", "run_id", "duration_ms", "output",
    "stderr", "steps", "cost_usd", "item", "index",
)  # fmt: skip

# What a `capture:` on a `loop:` state keeps besides `outputs.K` (a child's output `K`).
CHILD_FIELDS = ("output", "stderr", "exit_code", "duration_ms", "verdict", "final_state", "outcome")


@record(frozen=True)
class Ctx:
    """What every check needs: the loop, its file name, and where each node is."""

    loop: Loop
    file: str
    locate: Locate

    def diag(self, pos: Pos, severity: Severity, code: str, message: str) -> Diagnostic:
        return Diagnostic(self.file, pos.line, pos.col, severity, code, message)

    @cached_property
    def state_names(self) -> tuple[str, ...]:
        """The names of the states, listed once for every "did you mean" about a state (a copy
        for each of 10,000 misspelt targets among 10,000 states cost more than the answers); a
        tuple, which "did you mean" finds its index of by identity."""
        return tuple(self.loop.states)


def suggest(word: str, options: Iterable[str]) -> str:
    """A " (did you mean 'X'?)" for the closest of `options`, or nothing."""
    return did_you_mean(word, list(options))


def check_evaluator(
    ctx: Ctx, spec: Evaluate, at: NodePath, captures: set[str]
) -> Iterator[Diagnostic]:
    what = subject(at)
    if spec.type == "output_contains" and spec.pattern is not None and not spec.literal:
        try:
            re.compile(spec.pattern)
        except re.error as exc:
            yield ctx.diag(
                ctx.locate((*at, "pattern")),
                "error",
                "invalid-regex",
                f"{subject((*at, 'pattern'))} is not a valid regular expression: {exc.msg} at "
                f"position {exc.pos}; add 'literal: true' to match it as plain text",
            )
    if (
        spec.type in ("output_numeric", "output_json")
        and spec.operator is not None
        and spec.operator not in OPERATORS
    ):
        yield ctx.diag(
            ctx.locate((*at, "operator")),
            "error",
            "unknown-operator",
            f"unknown operator '{spec.operator}' in {what}"
            f"{_suggest_operator(spec.operator)}; use one of: {', '.join(OPERATORS)}",
        )
    if spec.type == "output_json" and spec.path is not None:
        try:
            parse_json_path(spec.path)
        except ValueError as exc:
            at_path = (*at, "path")
            message = f"{exc} (in {subject(at_path)})"
            yield ctx.diag(ctx.locate(at_path), "error", "bad-json-path", message)
    if spec.type == "llm_structured":
        yield from _check_judge(ctx, spec, at)
    for key in ("prompt", "source", "previous", "reference"):
        text = getattr(spec, key)
        if isinstance(text, str):
            yield from check_template(ctx, text, judge_field_at(ctx.loop, spec, at, key), captures)
    if isinstance(spec.target, str):
        yield from check_template(ctx, spec.target, (*at, "target"), captures)
    for i, inner in enumerate(spec.of):
        yield from check_evaluator(ctx, inner, (*at, "of", i), captures)


def judge_field_at(loop: Loop, spec: Evaluate, at: NodePath, key: str) -> NodePath:
    """Where `spec`'s `key` was written: in the state, or in the named judge it comes from."""
    base = loop.judges.get(spec.judge) if spec.judge else None
    if key == "prompt" and spec.rubric_file is not None:
        key = "rubric_file"
    if base is not None and getattr(spec, key) == getattr(base, key):
        return ("judges", str(spec.judge), key)
    return (*at, key)


def _check_judge(ctx: Ctx, spec: Evaluate, at: NodePath) -> Iterator[Diagnostic]:
    from little_loops.evaluators import (
        judge_config,
        judge_files,
    )

    def where(key: str) -> NodePath:
        return judge_field_at(ctx.loop, spec, at, key)

    found: list[judge_config.Finding] = []
    if spec.judge is not None and spec.judge not in ctx.loop.judges:
        names = ctx.loop.judges
        fix = (
            f"{suggest(spec.judge, names)}; define it under 'judges:'"
            if names
            else "; define it in a top-level 'judges:' map (judges: {NAME: {prompt: ...}})"
        )
        found.append(
            ((*at, "judge"), "unknown-judge", f"{subject(at)} names judge '{spec.judge}', "
             f"which is not defined{fix}")
        )  # fmt: skip
    found += judge_files.rubric_findings(ctx.loop.dir, spec, where)
    if spec.model is not None:
        found += judge_config.model_findings(spec.model, where("model"))
    for i, model in enumerate(spec.models):
        found += judge_config.model_findings(model, (*where("models"), i))
    if spec.model is not None and spec.models:
        found.append(
            (where("models"), "judge-model-and-models",
             f"{subject(where('models'))}: give 'model' (one judge) or 'models' (a panel), "
             "not both")
        )  # fmt: skip
    if spec.schema is not None and spec.schema is not PASS_FAIL_SCHEMA:  # not the built-in one
        models = spec.models or (spec.model or ctx.loop.llm.model,)
        strict = not found and any(judge_config.uses_strict_schema(m) for m in models)
        found += judge_config.schema_findings(spec.schema, where("schema"), strict=strict)
    if not any(code != "unknown-judge" for _, code, _ in found):
        found += judge_files.example_findings(spec, where("examples"), where("schema"))
        found += judge_config.max_tokens_findings(
            spec.max_tokens if spec.max_tokens is not None else ctx.loop.llm.max_tokens,
            spec.models or (spec.model or ctx.loop.llm.model,),
            where("max_tokens"),
        )
    for place, code, message in found:
        yield ctx.diag(ctx.locate(place), "error", code, message)
    yield from _unsent_temperature(ctx, spec, where("temperature"))


def _unsent_temperature(ctx: Ctx, spec: Evaluate, at: NodePath) -> Iterator[Diagnostic]:
    """A temperature no model of this judge takes (Anthropic, claude://) is never sent."""
    if spec.temperature is None:
        return
    models = spec.models or (spec.model or ctx.loop.llm.model or "anthropic://default",)
    providers = {m.partition("://")[0] if "://" in m else "anthropic" for m in models}
    if providers <= set(NO_TEMPERATURE):
        yield ctx.diag(
            ctx.locate(at),
            "warning",
            "temperature-not-sent",
            f"{subject(at)} is not sent to this judge: "
            + "; ".join(NO_TEMPERATURE[p] for p in sorted(providers))
            + ". Remove it, or use an openai:// or ollama:// judge",
        )


def check_template(ctx: Ctx, text: str, at: NodePath, captures: set[str]) -> Iterator[Diagnostic]:
    what = subject(at)
    pos = ctx.locate(at)
    for part in scan(text):
        if isinstance(part, PlaceholderError):
            message = _placeholder_hint(text, part) or part.message
            yield ctx.diag(pos, "error", "bad-placeholder", f"{message} (in {what})")
        elif isinstance(part, Placeholder):
            problem = _placeholder_problem(ctx, part, captures)
            if problem is not None:
                code, message = problem
                yield ctx.diag(pos, "error", code, f"'${{{part.name}}}' in {what}: {message}")


def _placeholder_hint(text: str, part: PlaceholderError) -> str | None:
    """A message that says how to write what the author meant (`$${HOME}`, `|q`), if known."""
    close = text.find("}", part.start + 2)
    if close < 0:
        return None
    from little_loops.load.hints import placeholder_message

    return placeholder_message(text[part.start + 2 : close].strip())


def _suggest_operator(word: str) -> str:
    from little_loops.load.hints import operator_for

    meant = operator_for(word)
    return f" (did you mean '{meant}'?)" if meant in OPERATORS else suggest(word, OPERATORS)


def _placeholder_problem(ctx: Ctx, part: Placeholder, captures: set[str]) -> tuple[str, str] | None:
    ns, path = part.namespace, part.path
    if ns == "context":
        if path[0] not in ctx.loop.context and path[0] not in ctx.loop.inputs:
            keys = ctx.loop.context
            if path == ("run_dir",):  # upstream little-loops' scratch folder
                return (
                    "unknown-context",
                    "there is no context key 'run_dir'; the run's own folder is "
                    "'${loop.run_dir}' here",
                )
            return (
                "unknown-context",
                f"there is no context key '{path[0]}'{suggest(path[0], keys)}; "
                "define it under 'context:'",
            )
        return None
    if ns == "captured":
        if path[0] not in captures:
            return (
                "unknown-capture",
                f"no state has 'capture: {path[0]}'{suggest(path[0], captures)}",
            )
        fields = FIELDS["captured"]
        fork = next(
            (s for s in ctx.loop.states.values() if s.capture == path[0] and s.is_fork), None
        )
        if fork is not None:
            return _fork_field_problem(fork, path)
        if any(s.capture == path[0] and s.is_loop for s in ctx.loop.states.values()):
            if len(path) == 3 and path[1] == "outputs":
                return None  # the child's outputs are checked with the child: `children`
            fields = (*CHILD_FIELDS, "outputs.NAME")
        if any(s.capture == path[0] and s.is_ask for s in ctx.loop.states.values()):
            fields = (*fields, "by")  # who answered the question
        if len(path) != 2 or path[1] not in fields:
            got = f"'{'.'.join(path[1:])}'" if len(path) > 1 else "nothing"
            return (
                "unknown-field",
                f"name one of {', '.join(fields)} after the capture name, not {got}",
            )
        return None
    if ns == "item" and path[0] == "value":
        return None  # an object item: `${item.value.name}`
    offered = FIELDS.get(ns)
    if offered is not None and (len(path) != 1 or path[0] not in offered):
        return (
            "unknown-field",
            f"'{ns}' has no '{'.'.join(path)}'{suggest(path[0], offered)}; "
            f"it offers: {', '.join(offered)}",
        )
    return None


def _fork_field_problem(fork: State, path: tuple[str, ...]) -> tuple[str, str] | None:
    if len(path) == 2 and path[1] in FORK_FIELDS:
        return None
    if len(path) >= 3 and path[1] == "branches":
        key = path[2]
        if fork.parallel and key not in fork.parallel:
            names = ", ".join(fork.parallel)
            return (
                "unknown-output",
                f"state '{fork.name}' has no branch '{key}'{suggest(key, fork.parallel)}; "
                f"its branches: {names}",
            )
        if len(path) == 4 and path[3] in BRANCH_FIELDS:
            return None
        if len(path) == 5 and path[3] == "outputs":
            return None
        return (
            "unknown-field",
            f"name one of {', '.join(BRANCH_FIELDS)} or outputs.NAME after "
            f"'branches.{key}', not '{'.'.join(path[3:]) or 'nothing'}'",
        )
    got = f"'{'.'.join(path[1:])}'" if len(path) > 1 else "nothing"
    return (
        "unknown-field",
        f"name one of {', '.join(FORK_FIELDS)} or branches.KEY.FIELD after the capture "
        f"name of a fork, not {got}",
    )


# Set once the state's evaluator has given its verdict, so that evaluator cannot read them.
_AFTER_EVALUATION = ("verdict", "confidence", "reason")


def check_own_capture(
    ctx: Ctx, spec: Evaluate, at: NodePath, capture: str | None
) -> Iterator[Diagnostic]:
    if capture is None:
        return
    for key in ("prompt", "source", "previous", "target", "reference"):
        text = getattr(spec, key)
        if not isinstance(text, str):
            continue
        for part in scan(text):
            if (
                isinstance(part, Placeholder)
                and part.namespace == "captured"
                and len(part.path) == 2
                and part.path[0] == capture
                and part.path[1] in _AFTER_EVALUATION
            ):
                yield ctx.diag(
                    ctx.locate((*at, key)),
                    "error",
                    "own-capture-verdict",
                    f"'${{{part.name}}}' in {subject((*at, key))}: this state's "
                    f"'{part.path[1]}' is only known after its evaluator has run; read its "
                    "output, stderr, exit_code or duration_ms here, or the verdict in a "
                    "later state",
                )
    for i, inner in enumerate(spec.of):
        yield from check_own_capture(ctx, inner, (*at, "of", i), capture)
