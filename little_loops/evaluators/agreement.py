"""`ll judge test`: a judge run over labelled cases, and how far it agrees with the labels.

Cases are JSON lines, `{"output": ..., "verdict": ...}` (optionally `stderr`, `name`, and
`captured` / `context` values the judge's prompt or reference reads). Every case is checked
before the judge is asked anything, so a typo costs nothing. The judge measured is the one a
run would ask, with `uncertain_suffix` and `fail_open` off: its own verdicts are compared.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from little_loops.errors import (
    LoopError,
    UndefinedVariable,
)
from little_loops.evaluators import (
    EvalInput,
    calibration,
    judge_verdicts,
)
from little_loops.evaluators.contract import JudgeSession
from little_loops.model.loop import (
    Evaluate,
    Loop,
)
from little_loops.wording import did_you_mean

CASES_LIMIT = 10_000


@dataclass(frozen=True)
class Case:
    """One labelled case: what a step printed, and the verdict a person gives it."""

    line: int
    output: str
    verdict: str
    stderr: str = ""
    name: str = ""
    scope: Mapping[str, Any] = field(default_factory=dict)  # captured / context for templates


@dataclass(frozen=True)
class Outcome:
    """The judge's answer on one case."""

    case: Case
    verdict: str
    confidence: float
    reason: str
    cost_usd: float
    recorded_cost_usd: float = 0.0

    @property
    def agrees(self) -> bool:
        return self.verdict == self.case.verdict


def pick_judge(loop: Loop, state: str | None, judge: str | None) -> tuple[str, Evaluate]:
    """The judge to measure: a state's `llm_structured` evaluator, or a named judge."""
    if (state is None) == (judge is None):
        raise LoopError("name the judge to test: --state STATE or --judge NAME (one of them)")
    if judge is not None:
        spec = loop.judges.get(judge)
        if spec is None:
            known = sorted(loop.judges)
            hint = f"{did_you_mean(judge, known)}; it has: {', '.join(known)}" if known else ""
            raise LoopError(f"{loop.path}: no judge '{judge}' under 'judges:'{hint}")
        return f"judge {judge}", spec
    assert state is not None
    found = loop.states.get(state)
    if found is None:
        names = sorted(loop.states)
        raise LoopError(f"{loop.path}: no state '{state}'{did_you_mean(state, names)}")
    spec = found.evaluate
    if spec is None or spec.type != "llm_structured":
        kind = spec.type if spec is not None else "no evaluator"
        raise LoopError(
            f"{loop.path}: state '{state}' is judged by {kind}, not llm_structured; "
            "name a judged state or a judge (--judge NAME)"
        )
    return f"state {state}", spec


def read_cases(path: Path, spec: Evaluate) -> list[Case]:
    """The cases of a JSONL file, each checked; a LoopError (exit 2) names the first bad line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LoopError(
            f"{path}: no such file (the labelled cases, one JSON object a line)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LoopError(f"{path}: cannot read the cases: {exc}") from None
    enum = judge_verdicts(spec)
    cases: list[Case] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        cases.append(_case(path, number, line, enum))
        if len(cases) > CASES_LIMIT:
            raise LoopError(f"{path}: more than {CASES_LIMIT} cases; split the file")
    if not cases:
        raise LoopError(
            f'{path}: no cases; write one JSON object a line: {{"output": "...", "verdict": '
            f'"{enum[0]}"}}'
        )
    return cases


def _case(path: Path, number: int, line: str, enum: tuple[str, ...]) -> Case:
    where = f"{path}:{number}"
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LoopError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(raw, dict):
        raise LoopError(f'{where}: a case is a JSON object: {{"output": ..., "verdict": ...}}')
    unknown = sorted(set(raw) - {"output", "verdict", "stderr", "name", "captured", "context"})
    if unknown:
        raise LoopError(
            f"{where}: unknown key '{unknown[0]}'; a case has output, verdict, and optionally "
            "stderr, name, captured, context"
        )
    for key in ("output", "verdict"):
        if not isinstance(raw.get(key), str):
            raise LoopError(f"{where}: '{key}' must be text")
    verdict = raw["verdict"]
    if verdict not in enum:
        raise LoopError(
            f"{where}: verdict '{verdict}' is not one the judge can give"
            f"{did_you_mean(verdict, list(enum))}; it gives: {', '.join(enum)}"
        )
    for key in ("stderr", "name"):
        if key in raw and not isinstance(raw[key], str):
            raise LoopError(f"{where}: '{key}' must be text")
    scope = {k: raw[k] for k in ("captured", "context") if k in raw}
    if any(not isinstance(v, dict) for v in scope.values()):
        raise LoopError(f"{where}: 'captured' and 'context' must be JSON objects")
    return Case(number, raw["output"], verdict, raw.get("stderr", ""), raw.get("name", ""), scope)


def measured(spec: Evaluate, model: str | None) -> Evaluate:
    """The judge as measured: its own verdicts (no `_uncertain`, no fail-open), the case's
    output as what it reads, and `model` (from --model) instead of its own when given."""
    spec = dataclasses.replace(spec, uncertain_suffix=False, fail_open=False, source=None)
    if model is not None:
        spec = dataclasses.replace(spec, model=model, models=())
    return spec


def resolver(loop: Loop, case: Case) -> Any:
    """`resolve` for the judge's templates: the loop's context, and what the case gives."""
    from little_loops.templates.interpolate import render

    scope: dict[str, Any] = {
        "context": {**loop.context, **case.scope.get("context", {})},
        "captured": case.scope.get("captured", {}),
        "prev": {"output": case.output, "stderr": case.stderr},
        "state": {"name": "judge-test", "iteration": 1, "attempt": 1},
        "loop": {"name": loop.name, "dir": str(loop.dir)},
        "env": os.environ,  # read, never changed: no copy per case
    }

    def resolve(template: str) -> str:
        return render(template, scope, shell=False)

    return resolve


def check_templates(path: Path, loop: Loop, spec: Evaluate, cases: list[Case]) -> None:
    """Every case can fill the judge's prompt and reference, before anything is asked."""
    for case in cases:
        resolve = resolver(loop, case)
        for key in ("prompt", "reference"):
            template = getattr(spec, key)
            if template is None:
                continue
            try:
                resolve(template)
            except UndefinedVariable as exc:
                raise LoopError(
                    f"{path}:{case.line}: the judge's {key} reads '${{{exc.name}}}', which this "
                    'case does not give; add it, e.g. "captured": {"NAME": {"output": "..."}}'
                ) from None


def run_cases(
    loop: Loop,
    spec: Evaluate,
    cases: list[Case],
    session: JudgeSession,
    on_case: Callable[[int, int], None] | None = None,
    jobs: int = 1,
) -> list[Outcome]:
    """Ask the judge about every case; `on_case(done, total)` after each. With `jobs` above 1,
    up to `jobs` cases are judged at once (the session bounds the requests in flight the
    same way); the outcomes keep the cases' order."""

    def one(case: Case) -> Outcome:
        inp = EvalInput(
            text=case.output,
            stderr=case.stderr,
            state=case.name or f"case line {case.line}",
            resolve=resolver(loop, case),
            judge=session,
        )
        verdict = session.judge(spec, inp)
        details = verdict.details
        return Outcome(
            case=case,
            verdict=verdict.verdict,
            confidence=details.confidence or 0.0,
            reason=details.error or details.reason or "",
            cost_usd=details.cost_usd,
            recorded_cost_usd=details.recorded_cost_usd,
        )

    done = 0
    lock = threading.Lock()

    def counted(case: Case) -> Outcome:
        nonlocal done
        outcome = one(case)
        with lock:
            done += 1
            if on_case is not None:
                on_case(done, len(cases))
        return outcome

    if jobs <= 1:
        return [counted(case) for case in cases]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="ll-judge-case") as pool:
        return list(pool.map(counted, cases))


# -- the measures ---------------------------------------------------------------------------


def kappa(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's kappa of (label, answer) pairs; None when chance agreement is certain."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(a == b for a, b in pairs) / n
    labels, answers = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(labels[c] * answers[c] for c in labels) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summary(
    label: str, model: str, outcomes: list[Outcome], enum: tuple[str, ...]
) -> dict[str, Any]:
    """Every measure, as `--json` prints it and the text report reads it."""
    n = len(outcomes)
    agreed = sum(o.agrees for o in outcomes)
    answered = [o for o in outcomes if o.verdict != "error"]
    columns = [*enum, *sorted({o.verdict for o in outcomes} - set(enum))]
    matrix = {
        expected: {got: sum(o.case.verdict == expected and o.verdict == got for o in outcomes)
                   for got in columns}
        for expected in enum
        if any(o.case.verdict == expected for o in outcomes)
    }  # fmt: skip
    k = kappa([(o.case.verdict, o.verdict) for o in outcomes])
    return {
        "judge": label,
        "model": model,
        "cases": n,
        "agreed": agreed,
        "accuracy": agreed / n if n else 0.0,
        "kappa": None if k is None else round(k, 4),
        "errors": sum(o.verdict == "error" for o in outcomes),
        "mean_confidence_right": _mean([o.confidence for o in answered if o.agrees]),
        "mean_confidence_wrong": _mean([o.confidence for o in answered if not o.agrees]),
        "cost_usd": round(sum(o.cost_usd for o in outcomes), 6),
        "recorded_cost_usd": round(sum(o.recorded_cost_usd for o in outcomes), 6),
        "confusion": matrix,
        "calibration": calibration.reliability(outcomes),
        "disagreements": [
            {
                "line": o.case.line,
                "name": o.case.name,
                "expected": o.case.verdict,
                "got": o.verdict,
                "confidence": o.confidence,
                "reason": o.reason,
                "output": o.case.output,
            }
            for o in outcomes
            if not o.agrees
        ],
    }


def report_text(found: Mapping[str, Any], source: str) -> str:
    """The summary as people read it."""
    n, agreed = found["cases"], found["agreed"]
    lines = [
        f"judge test: {found['judge']} ({found['model']}), {n} cases from {source}",
        f"  accuracy    {agreed}/{n} ({100 * found['accuracy']:.1f} %)",
        "  kappa       "
        + (
            "n/a (every label and answer is the same verdict)"
            if found["kappa"] is None
            else f"{found['kappa']:.2f} (Cohen's: agreement beyond chance, 1 = perfect, 0 = chance)"
        ),
        "  confidence  right "
        + _num(found["mean_confidence_right"])
        + " · wrong "
        + _num(found["mean_confidence_wrong"])
        + " (mean)",
        "  cost        " + _cost(found),
    ]
    if found["errors"]:
        lines.append(f"  errors      {found['errors']} (the judge gave no verdict; see below)")
    lines += ["", "confusion (rows: your label, columns: the judge's verdict)"]
    matrix: Mapping[str, Mapping[str, int]] = found["confusion"]
    every = list(next(iter(matrix.values()), {}))  # the enum, then any other answer
    columns = [c for c in every if c in matrix or any(row[c] for row in matrix.values())]
    width = max(len(x) for x in [*columns, *matrix, "label"]) + 2
    lines.append(" " * (width + 2) + "".join(c.rjust(width) for c in columns))
    for expected, row in matrix.items():
        lines.append(
            f"  {expected.ljust(width)}" + "".join(str(row[c]).rjust(width) for c in columns)
        )
    lines += calibration.calibration_text(found["calibration"])
    if found["disagreements"]:
        lines += ["", "disagreements"]
        for d in found["disagreements"]:
            name = f" ({d['name']})" if d["name"] else ""
            lines.append(
                f"  line {d['line']}{name}: labelled {d['expected']}, judged {d['got']} "
                f"(confidence {d['confidence']:.2f})"
            )
            lines.append(f"    output: {_clip(d['output'])}")
            lines.append(f"    reason: {_clip(d['reason'], 200)}")
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _cost(found: Mapping[str, Any]) -> str:
    text = f"${found['cost_usd']:.4f}"
    if found["recorded_cost_usd"]:
        text += f" (replayed; ${found['recorded_cost_usd']:.4f} when recorded)"
    return text


def _clip(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def parse_share(text: str, option: str = "--min-agreement") -> float:
    """`--min-agreement`: a fraction (0.9) or a percentage (90%) -> a fraction."""
    value = text.strip()
    percent = value.endswith("%")
    try:
        number = float(value.rstrip("%").strip())
    except ValueError:
        raise LoopError(
            f"{option}: '{text}' is not a number; write a fraction (0.9) or a percentage (90%)"
        ) from None
    share = number / 100 if percent else number
    if not 0 <= share <= 1:
        raise LoopError(
            f"{option}: '{text}' is outside 0..1; write a fraction (0.9) or a percentage (90%)"
        )
    return share
