"""`samples: N`: the majority verdict of several judge answers, ties to the less favourable."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from little_loops.model.details import EMPTY_DETAILS, Details, Json
from little_loops.model.loop import DEFAULT_VERDICTS

# Tie-break order for `samples`, least favourable first (see docs/judge.md).
DEFAULT_RANK = ("error", "blocked", "failure", "partial", "success")


@dataclass(frozen=True)
class Sample:
    """One answer from the judge, before aggregation: an enum value or `error`."""

    verdict: str
    details: Details = EMPTY_DETAILS


def rank(verdict: str, enum: tuple[str, ...]) -> int:
    """Favourability for tie-breaks: higher is more favourable; `error` is always lowest."""
    if verdict == "error":
        return -1
    if set(enum) == set(DEFAULT_VERDICTS):
        return DEFAULT_RANK.index(verdict)
    return len(enum) - enum.index(verdict) if verdict in enum else -1


def aggregate(samples: list[Sample], enum: tuple[str, ...]) -> Sample:
    """Majority verdict; confidence = agreement x mean confidence of the majority."""
    if len(samples) == 1:
        return samples[0]
    votes = Counter(s.verdict for s in samples)
    top = max(votes.values())
    winner = min((v for v, n in votes.items() if n == top), key=lambda v: rank(v, enum))
    majority = [s for s in samples if s.verdict == winner]
    agreement = top / len(samples)
    usage: dict[str, Json] = {
        k: sum(s.details.usage.get(k, 0) for s in samples)
        for k in ("input_tokens", "output_tokens")
    }
    # Each vote's values are copied as they are, not read: the wire keeps what the judge said.
    votes_of: list[Json] = [
        {
            "verdict": s.verdict,
            "confidence": s.details.get("confidence", 0.0),
            "reason": s.details.get("reason", ""),
        }
        for s in samples
    ]
    first = majority[0].details.with_(
        usage=usage,
        cost_usd=round(sum(s.details.cost_usd for s in samples), 8),
        cost_known=all(s.details.cost_known for s in samples),
        agreement=round(agreement, 4),
        samples=votes_of,
    )
    if winner != "error":
        mean = sum(s.details.confidence or 0.0 for s in majority) / len(majority)
        first = first.with_(confidence=round(agreement * mean, 6))
    return Sample(winner, first)


def panel(votes: list[Sample], models: list[str], enum: tuple[str, ...]) -> Sample:
    """A panel's verdict: each model's answer (its own majority with `samples`) is one vote,
    counted like samples; `details.panel` lists every model's verdict."""
    result = aggregate(votes, enum)
    votes_of: list[Json] = [
        {
            "model": model,
            "verdict": vote.verdict,
            "confidence": vote.details.get("confidence", 0.0),
            "reason": vote.details.get("reason", ""),
            "cost_usd": vote.details.get("cost_usd", 0.0),
            **({"error": vote.details["error"]} if "error" in vote.details else {}),
        }
        for model, vote in zip(models, votes, strict=True)
    ]
    # The votes are listed per model under `panel`, not under `samples`.
    details = result.details.without("samples").with_(panel=votes_of)
    if len(votes) == 1:
        details = details.with_(agreement=1.0)
    return Sample(result.verdict, details)
