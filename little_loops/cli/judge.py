"""`ll judge test` (a judge measured against labelled cases) and `ll judge explain` (what a
judged step sent and got back). Like `cli`, only click and the standard library at the top."""

from __future__ import annotations

import json
import os
import sys
import time

import click


@click.group(name="judge", short_help="Measure a judge on labelled cases; explain a verdict.")
def judge() -> None:
    """Look at the LLM judge: how often it agrees with your labels (test), and exactly
    what it was asked in a run (explain). See docs/judge.md."""


@judge.command(name="test", short_help="Run a judge over labelled cases and measure agreement.")
@click.argument("cases", type=click.Path(dir_okay=False))
@click.option("--loop", "loop_file", required=True, type=click.Path(dir_okay=False),
              help="The loop file that holds the judge.")  # fmt: skip
@click.option("--state", help="Test the judge of this state.")
@click.option("--judge", "judge_name", metavar="NAME", help="Test this judge of 'judges:'.")
@click.option("--model", metavar="MODEL", help="Ask this judge model instead of the judge's own.")
@click.option(
    "--replay",
    type=click.Path(dir_okay=False, exists=True),
    help="Answer from a recording (it must exist).",
)
@click.option("--record", type=click.Path(dir_okay=False), help="Record every exchange to FILE.")
@click.option("--min-agreement", metavar="P",
              help="Exit 1 when accuracy is below P (0.9, or 90%).")  # fmt: skip
@click.option("--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Requests in flight at once (cases, samples, panel members).")  # fmt: skip
@click.option("--suggest-min-confidence", "suggest", metavar="[P]", is_flag=False,
              flag_value="agreement", default=None,
              help="Suggest a min_confidence (best agreement, or precision P).")  # fmt: skip
@click.option("--baseline", type=click.Path(dir_okay=False),
              help="Compare with a stored --json result; exit 3 on a drop.")  # fmt: skip
@click.option("--margin", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="How far a measure may drop below --baseline.")  # fmt: skip
@click.option("--json", "json_mode", is_flag=True, help="Print the measures as one JSON object.")
def test_(
    cases: str,
    loop_file: str,
    state: str | None,
    judge_name: str | None,
    model: str | None,
    replay: str | None,
    record: str | None,
    min_agreement: str | None,
    jobs: int,
    suggest: str | None,
    baseline: str | None,
    margin: float,
    json_mode: bool,
) -> None:
    """Ask a judge about every labelled case of CASES (JSON lines: {"output": ...,
    "verdict": ...}) and print how far it agrees: accuracy, a confusion matrix, Cohen's
    kappa, mean confidence of right and wrong answers, how often it was right at each
    confidence (calibration), the cost, and each disagreement with the judge's reason. The
    judge's own verdicts are compared (no _uncertain, no fail_open).

    Exits 0, 1 when accuracy is below --min-agreement, 2 for bad input, 3 when accuracy,
    kappa or the calibration error got worse than in --baseline by more than --margin.

    \b
    Example:
      ll judge test loops/judge-release-notes.cases.jsonl \\
        --loop loops/judge-release-notes.yaml --judge release_notes \\
        --replay loops/judge-release-notes.cases.cassette.jsonl --min-agreement 80%
    """
    from pathlib import Path

    from little_loops.actions.slash import claude_command
    from little_loops.errors import LoopError
    from little_loops.evaluators import agreement, calibration, judge_verdicts
    from little_loops.evaluators.llm import (
        JudgeSession,
        JudgeSettings,
    )
    from little_loops.load.loader import load
    from little_loops.model.loop import DEFAULT_JUDGE_MODEL

    if replay and record:
        raise click.UsageError("--record and --replay cannot be used together")
    share = agreement.parse_share(min_agreement) if min_agreement is not None else None
    target = None
    if suggest is not None and suggest != "agreement":
        target = agreement.parse_share(suggest, "--suggest-min-confidence")
    base = calibration.read_baseline(Path(baseline)) if baseline else None
    override = model or os.environ.get("LL_MODEL") or None
    if override is not None:
        from little_loops.providers import model_problem

        problem = model_problem(override)
        if problem is not None:
            raise LoopError(f"{'--model' if model else 'LL_MODEL'}: {problem}")
    loop = load(Path(loop_file))
    label, spec = agreement.pick_judge(loop, state, judge_name)
    spec = agreement.measured(spec, model)
    labelled = agreement.read_cases(Path(cases), spec)
    agreement.check_templates(Path(cases), loop, spec, labelled)
    session = JudgeSession(
        JudgeSettings(
            model_override=override,
            llm=loop.llm,
            record=Path(record) if record else None,
            replay=Path(replay) if replay else None,
            claude=tuple(claude_command(None, os.environ)),
            jobs=jobs,
        )
    )
    progress = None
    if not json_mode and sys.stderr.isatty():

        def progress(done: int, total: int) -> None:  # a live count while the judge works
            click.echo(f"\rjudged {done}/{total}", err=True, nl=done == total)

    started = time.monotonic()
    try:
        outcomes = agreement.run_cases(loop, spec, labelled, session, progress, jobs=jobs)
    finally:
        session.close()
    seconds = round(time.monotonic() - started, 3)
    shown = ", ".join(spec.models) or spec.model or loop.llm.model or override
    found = agreement.summary(label, shown or DEFAULT_JUDGE_MODEL, outcomes, judge_verdicts(spec))
    extra: dict[str, object] = {"min_agreement": share, "jobs": jobs, "seconds": seconds}
    lines: list[str] = []
    if suggest is not None:
        current = (
            spec.min_confidence if spec.min_confidence is not None else loop.llm.min_confidence
        )
        advice = calibration.suggest(outcomes, current, target)
        extra["suggestion"] = advice
        lines += calibration.suggestion_text(advice, target)
    drifted = None
    if base is not None:
        drifted = calibration.drift(found, base, margin)
        extra["drift"] = drifted
        lines += calibration.drift_text(drifted, str(baseline))
    if json_mode:
        click.echo(json.dumps({**found, **extra}, ensure_ascii=False))
    else:
        text = agreement.report_text(found, cases)
        click.echo(text + "\n".join(lines) + ("\n" if lines else ""), nl=False)
    if share is not None and found["accuracy"] < share:
        click.echo(
            f"ll: agreement {100 * found['accuracy']:.1f} % is below --min-agreement "
            f"{100 * share:.1f} %",
            err=True,
        )
        sys.exit(1)
    if drifted is not None and drifted["drifted"]:
        click.echo(
            f"ll: {', '.join(drifted['drifted'])} got worse than in {baseline} by more than "
            f"{margin:g}",
            err=True,
        )
        sys.exit(calibration.DRIFT_EXIT)


@judge.command(name="explain", short_help="Show what a judged step sent and what came back.")
@click.argument("run_id", metavar="RUN", required=False)
@click.option("--step", type=click.IntRange(min=1), help="The step (default: the last judged).")
@click.option("--json", "json_mode", is_flag=True, help="Print it as one JSON object.")
def explain(run_id: str | None, step: int | None, json_mode: bool) -> None:
    """Show exactly what the judge of one step of RUN (default: the latest run here) was
    sent (system prompt, user message with the fenced output, examples and reference, the
    answer schema, the temperature) and what it answered, from the run's records.

    \b
    Example:
      ll judge explain 20261122-041430-judge-release-notes-3fa2 --step 1
    """
    from pathlib import Path

    from little_loops.record.store import find_run
    from little_loops.report.explain import explain as find
    from little_loops.report.explain import explain_text

    found = find(find_run(Path.cwd(), run_id), step)
    if json_mode:
        click.echo(json.dumps(found, ensure_ascii=False))
    else:
        click.echo(explain_text(found), nl=False)


COMMANDS = (judge,)
