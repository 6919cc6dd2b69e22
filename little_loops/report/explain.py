"""`ll judge explain`: what a judged step sent the judge and what came back, from the run's log.

Every judgement writes a `judge_request` event (the system prompt, the user message with its
fenced output, examples and reference, the answer schema, the temperature), redacted like
every event, before its `evaluate` event; this module reads them back for one step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from little_loops.errors import LoopError
from little_loops.model.details import Details
from little_loops.model.loop import NO_TEMPERATURE
from little_loops.record.events import Evaluate, JudgeAsked, JudgeRetry, read_records
from little_loops.record.store import RunDir


def explain(run_dir: RunDir, step: int | None) -> dict[str, Any]:
    """The requests and the verdict of one judged step (the last judged one when None)."""
    events = [e for e in read_records(run_dir.events_path) if not e.path]
    judged = sorted({e.step for e in events if isinstance(e, JudgeAsked) and e.step is not None})
    if not judged:
        raise LoopError(
            f"run {run_dir.run_id} has no judged step with its request recorded (runs "
            "before this version of ll did not record it)"
        )
    if step is None:
        step = judged[-1]
    elif step not in judged:
        raise LoopError(
            f"step {step} of run {run_dir.run_id} asked no judge; judged steps: "
            + ", ".join(map(str, judged))
        )
    mine = [e for e in events if e.step == step]
    # The last attempt's requests: those after the step's previous evaluate event.
    last = max(i for i, e in enumerate(mine) if isinstance(e, JudgeAsked | Evaluate))
    verdict = next((e for e in reversed(mine[: last + 1]) if isinstance(e, Evaluate)), None)
    end = mine.index(verdict) if verdict is not None else len(mine)
    before = [i for i, e in enumerate(mine[:end]) if isinstance(e, Evaluate)]
    start = before[-1] + 1 if before else 0
    requests = [e for e in mine[start:end] if isinstance(e, JudgeAsked)]
    return {
        "run_id": run_dir.run_id,
        "step": step,
        "state": requests[0].state if requests else None,
        "requests": [_request(e) for e in requests],
        "retries": [e.to_dict() for e in mine[start:end] if isinstance(e, JudgeRetry)],
        "verdict": None if verdict is None else verdict.verdict,
        "details": {} if verdict is None else verdict.details.to_json(),
    }


def _request(event: JudgeAsked) -> dict[str, Any]:
    return {
        "model": event.model,
        "provider": event.provider,
        "temperature": event.temperature,
        "max_tokens": event.max_tokens,
        "examples": event.examples,
        "est_input_tokens": event.est_input_tokens,
        "cached": event.cached,
        "system": event.system,
        "user": event.user,
        "schema": event.schema,
    }


def explain_text(found: Mapping[str, Any]) -> str:
    """The explanation as people read it."""
    out = [f"run {found['run_id']}, step {found['step']} ({found['state']})"]
    details = Details(found["details"])
    answered = (
        "the recording (--replay; nothing sent)"
        if details.replayed or details.replay_miss
        else "the cache (nothing sent)"
        if details.cached
        else "the model"
    )
    for i, req in enumerate(found["requests"], 1):
        if len(found["requests"]) > 1:
            out += ["", f"== panel member {i} of {len(found['requests'])} =="]
        temperature = req["temperature"]
        why = NO_TEMPERATURE.get(str(req["provider"]))
        if temperature is not None:
            shown = f"{temperature:g}"
        else:
            shown = f"not sent ({why})" if why else "not sent"
        out += [
            f"judge:        {req['model']} ({req['provider']})",
            f"temperature:  {shown}",
            f"max_tokens:   {req['max_tokens']}",
            f"examples:     {req['examples']}",
            f"input:        about {req['est_input_tokens']} tokens",
            f"answered by:  {answered}",
            "",
            "-- system prompt --",
            str(req["system"]),
            "",
            "-- user message (question, examples, reference, fenced output) --",
            str(req["user"]),
            "",
            "-- answer schema (as sent) --",
            json.dumps(req["schema"], indent=2, ensure_ascii=False),
        ]
    out += ["", "-- what came back --"]
    if found["verdict"] is None:
        out.append("nothing yet: the step was cut off before its verdict")
        return "\n".join(out) + "\n"
    confident = "confident" if details.confident else "not confident"
    out.append(
        f"verdict:      {found['verdict']} (confidence {details.confidence or 0:.2f}, {confident})"
    )
    out.append(f"reason:       {details.reason or ''}")
    if details.error:
        out.append(f"error:        {details.error}")
    for member in details.panel:
        out.append(
            f"  {member.model}: {member.verdict} "
            f"({member.confidence or 0:.2f}) {member.reason or ''}"
        )
    for sample in details.samples:
        out.append(
            f"  sample: {sample.verdict} ({sample.confidence or 0:.2f}) {sample.reason or ''}"
        )
    if details.raw is not None:
        out.append("raw answer:   " + json.dumps(details.raw, ensure_ascii=False))
    usage = details.usage
    facts = [
        f"model {details.model or '?'}",
        f"{usage.get('input_tokens', 0)} tokens in, {usage.get('output_tokens', 0)} out",
        f"cost ${details.cost_usd:.4f}",
    ]
    if details.replayed:
        facts.append(f"replayed (recorded cost ${details.recorded_cost_usd:.4f})")
    if details.cached:
        facts.append("from the cache")
    if details.latency_ms is not None:
        facts.append(f"{details.latency_ms:.0f} ms")
    if found["retries"]:
        facts.append(f"{len(found['retries'])} retries")
    out.append("              " + " · ".join(facts))
    return "\n".join(out) + "\n"
