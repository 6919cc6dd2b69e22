"""Running a loop for `ll run`, `ll resume` and `ll step`: display, reports, exit code."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from little_loops.cli import launch
from little_loops.errors import EXIT_SUSPENDED
from little_loops.model.records import record, replace

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any


def parse_sets(values: tuple[str, ...], loop: Any = None) -> dict[str, str]:
    """`--set KEY=VALUE` pairs; each KEY must be one of the loop's context keys."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            import click

            raise click.BadParameter(f"'{item}' is not KEY=VALUE", param_hint="--set")
        if loop is not None and key not in loop.context and key not in loop.inputs:
            import difflib

            known = sorted(loop.inputs or loop.context)
            close = difflib.get_close_matches(key, known, n=1)
            hint = (
                f"did you mean '{close[0]}'?"
                if close
                else (f"its keys are: {', '.join(known)}" if known else "it has no 'context:'")
            )
            import click

            raise click.BadParameter(
                f"the loop has no context key '{key}'; {hint}", param_hint="--set"
            )
        out[key] = value
    return out


# Records, not NamedTuples: a NamedTuple of 26 fields costs a millisecond of every `ll run`
# to define; a record compiles its `__init__` when it is first used.
@record(frozen=True)
class Display:
    """The output options shared by `ll run` and `ll resume`."""

    json_mode: bool
    quiet: bool
    verbose: bool
    junit_xml: str | None
    heartbeat: float | None
    otel: bool = False
    no_input: bool = False
    report: str | None = None  # --report FILE: the HTML report, written at the run's end


@record(frozen=True)
class RunArgs:
    """The options of `ll run`, as the click command parses them (the defaults are its own):
    the fast path of entry.py builds these for the common options without click."""

    file: str
    sets: tuple[str, ...] = ()
    max_iterations: int | None = None
    dry_run: bool = False
    json_mode: bool = False
    quiet: bool = False
    verbose: bool = False
    junit_xml: str | None = None
    report: str | None = None
    heartbeat: float | None = None
    otel: bool = False
    claude: str | None = None
    claude_flags: str | None = None
    model: str | None = None
    no_cache: bool = False
    record: str | None = None
    replay: str | None = None
    fsync: bool = False
    allow_concurrent: bool = False
    background: bool = False
    simulate: str | None = None
    answers: tuple[str, ...] = ()
    no_input: bool = False
    jobs: int = 8
    branch: str | None = None
    run_id: str | None = None


def use_caches() -> None:
    """Keep the records' compiled `__init__`s between runs (model/records.py), beside the
    parse cache (load/source.py)."""
    from little_loops.model.records import cache_dir, use_code_cache

    root = cache_dir()
    if root is not None:
        use_code_cache(os.path.join(root, "inits"))


def _usage(message: str) -> Exception:
    import click

    return click.UsageError(message)


def prepare_run(args: RunArgs) -> Callable[[], None] | None:
    """`ll run`: every check of the file and the options, then the run to start (None after
    `--dry-run`, which only prints). A mistake is raised before anything is started or
    written: a click exception for a usage error, a LoopError for the others."""
    from pathlib import Path

    from little_loops.load.loader import load

    use_caches()

    if args.record and args.replay:
        raise _usage(
            "--record and --replay cannot be used together: replay answers from FILE without "
            "asking the judge, so there is nothing to record; drop one of them"
        )
    judge = args.model or os.environ.get("LL_MODEL") or None
    if judge is not None:
        from little_loops.providers import model_problem

        problem = model_problem(judge)
        if problem is not None:
            raise _usage(f"{'--model' if args.model else 'LL_MODEL'}: {problem}")
    launch.regular_file(args.file)
    loop = load(Path(args.file))
    overrides = parse_sets((*args.sets, *launch.background_sets()), loop)
    from little_loops.load.children import missing_inputs

    if (missing := missing_inputs(loop, overrides)) is not None:
        raise _usage(missing)
    preset: dict[str, str] = {}
    if args.answers:
        from little_loops.cli.answer import presets

        preset = presets(args.answers, loop)
    if args.dry_run:
        from little_loops.run.plan import dry_run as plan

        launch.echo(plan(loop, overrides), nl=False)
        return None
    if args.record:
        launch.writable(args.record, "the judge recording")
    from little_loops.record.store import max_log_bytes

    max_log_bytes()  # a bad LL_MAX_LOG_BYTES is a usage error before the run, not after
    from little_loops.record.prune import env_keep

    env_keep(os.environ)  # and a bad LL_KEEP_RUNS

    def go() -> None:
        if args.background:
            launch.start_background(loop.name)
        from little_loops import actions
        from little_loops.run.runner import RunOptions

        options = RunOptions(
            overrides=overrides,
            max_iterations=args.max_iterations,
            claude=tuple(actions.claude_command(args.claude, os.environ)),
            claude_flags=tuple(actions.claude_flags(args.claude_flags, os.environ)),
            model=judge,
            cache=not args.no_cache,
            record=Path(args.record) if args.record else None,
            replay=Path(args.replay) if args.replay else None,
            fsync=args.fsync,
            # a simulation takes no lock
            allow_concurrent=args.allow_concurrent or args.simulate is not None,
            answers=preset,
            jobs=args.jobs,
        )
        if args.branch is not None:
            from little_loops.cli.matrix import run_branch

            run_branch(
                loop, options, args.branch, args.run_id, json_mode=args.json_mode, quiet=args.quiet
            )
            return
        if args.report:
            launch.report_target(args.report)
        display = Display(
            args.json_mode,
            args.quiet,
            args.verbose,
            args.junit_xml,
            args.heartbeat,
            args.otel,
            args.no_input,
            args.report,
        )
        rig = None
        if args.simulate:
            from little_loops.sim.stepping import Rig

            rig = Rig.simulated(Path(args.simulate), loop, replay=args.replay is not None)
        execute(loop, options, None, None, args.run_id, display, rig)

    return go


def execute(
    loop: Any,
    options: Any,
    progress: Any,
    run_dir: Any,
    run_id: str | None,
    display: Display,
    rig: Any = None,
) -> None:
    """Run (or resume) with the chosen display and reports, then exit with the run's code."""
    from little_loops.report.render import (
        make_renderer,
        output_streamer,
    )
    from little_loops.run.runner import (
        Runner,
        signals_as_exceptions,
    )

    json_mode = display.json_mode
    renderer = make_renderer(
        json_mode=json_mode,
        quiet=display.quiet,
        verbose=display.verbose,
        heartbeat=display.heartbeat,
    )
    # The renderer keeps the latest output line for its spinner and heartbeat (none: quiet).
    hooks = [getattr(renderer, "output_hook", None)]
    if display.verbose:
        hooks.append(output_streamer(json_mode))
    elif not (display.quiet or json_mode):  # a terminal's report is shown without -v
        options = replace(options, on_terminal_output=output_streamer(False))
    on_output = launch.fan_out([hook for hook in hooks if hook is not None])
    if on_output is not None:
        options = replace(options, on_output=on_output)
    if launch.interactive(no_input=display.no_input, quiet=display.quiet, json_mode=json_mode):
        from little_loops.cli.answer import terminal_prompt

        options = replace(options, prompt=terminal_prompt)
    reporters = launch.reporters(loop, display.junit_xml, json_mode)
    tracer = launch.tracer(display.otel)
    # A simulation's layer learns from the events which state each action belongs to.
    plugged = rig.listeners() if rig is not None else []
    listeners = [*plugged, renderer, *reporters, *([tracer] if tracer else [])]
    from little_loops.actions import adopt_orphans

    adopt_orphans()  # descendants that leave their group come back to us, and are killed
    from little_loops.evaluators.prefetch import warm_judges

    warm_judges(loop, options.model, options.replay)  # the SDK loads while the first steps run
    if rig is None or rig.actions is None:  # a simulation answers the judge itself
        import os

        from little_loops.evaluators.prefetch import no_key_hint

        hint = no_key_hint(loop, options.model, options.replay, dict(options.env or os.environ))
        if hint is not None and not display.quiet:
            launch.echo(hint, err=True)
    with signals_as_exceptions():
        runner = Runner(
            loop,
            options,
            listeners=listeners,
            progress=progress,
            run_dir=run_dir,
            run_id=run_id,
            **(rig.runner_kwargs() if rig is not None else {}),
        )
        if rig is not None:
            rig.attach(runner)
        result = runner.run()
    # The run's end is recorded: a late signal neither changes its exit code nor breaks into
    # the interpreter's shutdown.
    launch.ignore_signals()
    if tracer is not None:
        tracer.close()  # flush the trace: after the signals are ignored, so it is not cut off
        if tracer.problem:
            launch.echo(f"ll: warning: {tracer.problem}", err=True)
    if runner.ended_before and not (display.quiet or json_mode):
        launch.echo(
            f"ll: run {result.run_id} had already ended ({result.outcome}) when its process "
            "stopped; its end is recorded now, and nothing was run again",
            err=True,
        )
    launch.after_run(loop, result, runner, display.report, quiet=display.quiet or json_mode)
    for reporter in reporters:
        # The run is over and recorded; a report that could not be written does not change
        # its exit code (nor make `ll resume` run its terminal again).
        problem = getattr(reporter, "problem", None)
        if problem:
            launch.echo(f"ll: warning: {problem}", err=True)
    if rig is not None and rig.paused and result.exit_code == EXIT_SUSPENDED:
        if not json_mode:
            launch.echo(rig.next_text(), nl=False)
            launch.echo(
                f"ll: paused; continue with 'll step {result.run_id}' or "
                f"'ll resume {result.run_id}'",
                err=True,
            )
    elif result.outcome == "suspended" and not json_mode:
        from little_loops.cli.answer import suspended_text

        launch.echo(suspended_text(result.run_dir, result.run_id), nl=False, err=True)
    elif result.outcome == "interrupted" and not json_mode:
        launch.echo(
            f"ll: run {result.run_id} stopped at step {result.steps + 1}; "
            f"resume with: ll resume {result.run_id}",
            err=True,
        )
    launch.github_outputs(result)
    sys.exit(result.exit_code)
