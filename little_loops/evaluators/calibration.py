"""Whether to trust a judge's confidence: `ll judge test`'s calibration, threshold and drift.

The outcomes of labelled cases (agreement.py) are grouped by the judge's confidence: each
band says how often the judge was right at that confidence (a reliability table), and the
expected calibration error (ECE) is the case-weighted mean gap between confidence and
accuracy. `suggest` picks a `min_confidence` from the same cases, and `drift` compares a
result with a stored one. Verdict `error` (no answer, so no confidence) is left out of all
three: it is counted as a disagreement by the accuracy, not here.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from little_loops.errors import LoopError

# Band edges: a band holds confidences from its low edge up to (not including) its high one;
# the last also holds 1.0. Below 0.5 is one band: judges rarely answer that unsure.
EDGES = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
DEFAULT_MARGIN = 0.05
DRIFT_EXIT = 3


class Scored(Protocol):
    """What calibration reads of one outcome (agreement.Outcome)."""

    @property
    def verdict(self) -> str: ...
    @property
    def confidence(self) -> float: ...
    @property
    def agrees(self) -> bool: ...


def reliability(outcomes: Sequence[Scored]) -> dict[str, Any]:
    """The reliability table (non-empty bands only) and the expected calibration error."""
    answered = [o for o in outcomes if o.verdict != "error"]
    bands = []
    ece = 0.0
    for low, high in itertools.pairwise(EDGES):
        inside = [o for o in answered if low <= o.confidence < high or o.confidence == high == 1]
        if not inside:
            continue
        right = sum(o.agrees for o in inside)
        accuracy = right / len(inside)
        confidence = sum(o.confidence for o in inside) / len(inside)
        ece += len(inside) / len(answered) * abs(accuracy - confidence)
        bands.append(
            {
                "low": low,
                "high": high,
                "cases": len(inside),
                "right": right,
                "accuracy": round(accuracy, 4),
                "mean_confidence": round(confidence, 4),
            }
        )
    return {"answered": len(answered), "ece": round(ece, 4) if answered else None, "bands": bands}


def suggest(
    outcomes: Sequence[Any], current: float, target: float | None, verdict: str = "success"
) -> dict[str, Any] | None:
    """A `min_confidence` for the judge, and what it changes on these cases; None when no
    threshold fits (no answered case, or no threshold reaches the `target` precision).

    Without `target`: the threshold at which "trust the verdict" agrees best with "the
    verdict is right" (confident and right, plus below it and wrong: the uncertain route
    catches those); the lowest such threshold wins a tie. With `target`: the lowest
    threshold at which the confident `verdict` answers are right at least that often.
    """
    answered = [o for o in outcomes if o.verdict != "error"]
    if not answered:
        return None
    # Each distinct confidence c starts one split (trust what is >= c); any threshold from
    # just above the confidence below it up to c gives the same split. Trusting none comes last.
    levels = sorted({o.confidence for o in answered})
    splits = [(lower, c) for lower, c in zip([None, *levels], levels, strict=False)]
    if levels[-1] < 1.0:
        splits.append((levels[-1], 1.0))
    chosen: tuple[float | None, float] | None = None
    best_score = -1
    for lower, level in splits:
        trusted = [o for o in answered if o.confidence >= level and o.confidence > (lower or -1)]
        if target is None:
            score = sum(o.agrees for o in trusted)
            score += sum(not o.agrees for o in answered if o not in trusted)
            if score > best_score:
                chosen, best_score = (lower, level), score
        else:
            picked = [o for o in trusted if o.verdict == verdict]
            if picked and sum(o.agrees for o in picked) / len(picked) >= target:
                chosen = (lower, level)
                break
    if chosen is None:
        return None
    best = _inside(chosen, current)
    return {
        "min_confidence": best,
        "aim": "agreement" if target is None else f"precision of {verdict}",
        "target": target,
        "current": current,
        "now": _split(answered, current),
        "then": _split(answered, best),
        "changed": [
            {
                "line": o.case.line,
                "name": o.case.name,
                "expected": o.case.verdict,
                "got": o.verdict,
                "confidence": o.confidence,
                "becomes": "uncertain" if o.confidence < best else "confident",
            }
            for o in answered
            if (o.confidence >= current) != (o.confidence >= best)
        ],
    }


def _inside(split: tuple[float | None, float], current: float) -> float:
    """A threshold giving `split`: the current one when it does, else a round value midway,
    so that a judge answering a little differently next time lands on the same side."""
    lower, level = split
    if (lower is None or current > lower) and current <= level:
        return current
    if lower is None:
        return level
    middle = round((lower + level) / 2, 2)
    return middle if lower < middle <= level else level


def _split(answered: Sequence[Scored], threshold: float) -> dict[str, int]:
    trusted = [o for o in answered if o.confidence >= threshold]
    doubted = [o for o in answered if o.confidence < threshold]
    return {
        "confident": len(trusted),
        "confident_right": sum(o.agrees for o in trusted),
        "uncertain": len(doubted),
        "uncertain_wrong": sum(not o.agrees for o in doubted),
    }


# -- drift against a stored result --------------------------------------------------------------


def read_baseline(path: Path) -> dict[str, Any]:
    """A stored `ll judge test --json` result; a LoopError (exit 2) says what is wrong."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LoopError(
            f"{path}: no such file; store one with: ll judge test ... --json > {path}"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LoopError(f"{path}: not a stored judge test result (JSON): {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("accuracy"), int | float):
        raise LoopError(
            f"{path}: not a stored judge test result (no 'accuracy'); store one with: "
            f"ll judge test ... --json > {path}"
        )
    return data


def drift(found: Mapping[str, Any], base: Mapping[str, Any], margin: float) -> dict[str, Any]:
    """Each measure now and in the baseline, and which got worse by more than `margin`:
    accuracy and kappa by falling, the calibration error by rising."""
    measures = [
        ("accuracy", found.get("accuracy"), base.get("accuracy"), 1),
        ("kappa", found.get("kappa"), base.get("kappa"), 1),
        ("ece", _ece(found), _ece(base), -1),
    ]
    rows = []
    for name, now, then, better in measures:
        if not isinstance(now, int | float) or not isinstance(then, int | float):
            rows.append({"measure": name, "now": now, "baseline": then, "worse": False})
            continue
        rows.append(
            {
                "measure": name,
                "now": now,
                "baseline": then,
                "worse": (then - now) * better > margin + 1e-9,
            }
        )
    return {
        "margin": margin,
        "measures": rows,
        "drifted": [r["measure"] for r in rows if r["worse"]],
        "same_cases": found.get("cases") == base.get("cases"),
    }


def _ece(result: Mapping[str, Any]) -> Any:
    calibration = result.get("calibration")
    return calibration.get("ece") if isinstance(calibration, Mapping) else None


# -- text ----------------------------------------------------------------------------------------


def calibration_text(cal: Mapping[str, Any]) -> list[str]:
    if not cal["bands"]:
        return []
    lines = [
        "",
        "calibration (how often the judge was right at each confidence; a band runs up to its",
        "high edge, which belongs to the next one, except 1.00)",
        "  confidence  cases  right  accuracy  mean confidence",
    ]
    for band in cal["bands"]:
        lines.append(
            f"  {band['low']:.2f}-{band['high']:.2f}{band['cases']:>7}{band['right']:>7}"
            f"{100 * band['accuracy']:>8.0f} %{band['mean_confidence']:>17.2f}"
        )
    lines.append(
        f"  expected calibration error {cal['ece']:.3f} (the mean gap between confidence"
        " and accuracy,"
    )
    lines.append("  weighted by cases: 0 means a confidence of 0.8 is right 8 times in 10)")
    return lines


def suggestion_text(found: Mapping[str, Any] | None, target: float | None) -> list[str]:
    if found is None:
        goal = "any answer" if target is None else f"a success precision of {target:g}"
        return ["", f"suggested min_confidence: none (no threshold gives {goal} on these cases)"]
    aim = (
        "agreement: trusted verdicts right, doubted ones wrong"
        if found["target"] is None
        else f"{found['aim']} at least {100 * found['target']:.0f} %"
    )
    lines = ["", f"suggested min_confidence: {found['min_confidence']:.2f} ({aim})"]
    for label, key, at in (
        ("now", "now", found["current"]),
        ("then", "then", found["min_confidence"]),
    ):
        s = found[key]
        lines.append(
            f"  {label:<5}at {at:.2f}: {s['confident']} confident ({s['confident_right']} right),"
            f" {s['uncertain']} uncertain ({s['uncertain_wrong']} of them wrong)"
        )
    if not found["changed"]:
        lines.append("  no case changes side")
    for c in found["changed"]:
        name = f" ({c['name']})" if c["name"] else ""
        lines.append(
            f"  line {c['line']}{name}: judged {c['got']} at {c['confidence']:.2f}, labelled "
            f"{c['expected']}: becomes {c['becomes']}"
        )
    return lines


def drift_text(found: Mapping[str, Any], source: str) -> list[str]:
    lines = ["", f"against the baseline {source} (margin {found['margin']:g})"]
    for row in found["measures"]:
        mark = "WORSE" if row["worse"] else "ok"
        lines.append(f"  {row['measure']:<9} {_n(row['now'])} (was {_n(row['baseline'])})  {mark}")
    if not found["same_cases"]:
        lines.append("  note: the baseline measured a different number of cases")
    return lines


def _n(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else "n/a"
