"""The `ll` command: click options in, one core call, errors mapped to exit codes.

Start-up matters: at the top this module imports only click, the standard library, `errors`
and the companions `run` and `resume` need (`launch`, `execute`, `options`), which keep to the
same rule. Everything else is imported inside the command that needs it, and the other
commands' modules (`inspect`, `sim`, `judge`, ...) only when their command is run or listed.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from little_loops import __version__
from little_loops.cli import launch
from little_loops.cli import options as option_groups
from little_loops.cli.execute import Display, execute, parse_sets
from little_loops.errors import (
    LoopError,
)

# The commands of the other modules of cli/ (each lists its own in `COMMANDS`), by name: a
# module is imported when one of its commands is run, or when the help lists them all.
ELSEWHERE = {
    **dict.fromkeys(
        ("list", "status", "history", "stop", "logs", "graph", "compile", "init", "schema"),
        "inspect",
    ),
    **dict.fromkeys(("step", "test"), "sim"),
    "judge": "judge",
    "answer": "answer",
    "migrate": "migrate",
    **dict.fromkeys(("plan-matrix", "join"), "matrix"),
    **dict.fromkeys(("report", "prune"), "report"),
}


class _Group(click.Group):
    """Loads the other modules' commands when asked for them (click's lazy group), and turns
    every LoopError into one line on stderr and its exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *ELSEWHERE})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in ELSEWHERE:
            from importlib import import_module

            module = import_module(f"little_loops.cli.{ELSEWHERE[cmd_name]}")
            for command in module.COMMANDS:
                self.add_command(command)
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LoopError as exc:  # one line; an invalid loop file, one line a problem
            for line in exc.lines():
                click.echo(line, err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            # Before a run has started (or after it ended): nothing to resume. Click would
            # print "Aborted!" and exit 1; Ctrl-C is 130 everywhere in ll.
            click.echo("ll: interrupted", err=True)
            ctx.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__)  # named after the command run: ll or little-loops
def main() -> None:
    """Run loops: finite-state machines written in YAML. Each state runs a shell or
    Claude Code command, an evaluator turns the result into a verdict, and the
    verdict picks the next state.

    \b
    Examples:
      ll init my-loop && ll validate my-loop.yaml && ll run my-loop.yaml
      ll run loops/fix-until-green.yaml --max-iterations 10
      ll resume            # continue the latest interrupted run here

    Each command has --help with an example. Docs: docs/getting-started.md.
    """


@main.command(short_help="Check loop files; report every problem at its line.")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=True))
@click.option(
    "--strict",
    is_flag=True,
    help="Treat warnings as errors, and warn of every verdict that would stop a run.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def validate(files: tuple[str, ...], strict: bool, fmt: str) -> None:
    """Check loop files and report every problem at its line and column.

    Exits 0 when every file is valid (warnings allowed unless --strict), 2 otherwise.

    \b
    Example:
      ll validate loops/*.yaml --strict
    """
    from little_loops.cli.validate import validate_files

    code = validate_files(list(files), strict=strict, fmt=fmt, out=sys.stdout)
    sys.exit(code)


@main.command(short_help="Run a loop until a terminal state or a limit.")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a context value.")
@click.option("--max-iterations", type=click.IntRange(min=1), help="Override max_iterations.")
@click.option("--dry-run", is_flag=True, help="Print the plan of the first state and the routes.")
@option_groups.output
@option_groups.judge
@click.option("--fsync", is_flag=True, help="fsync state.json after every step.")
@click.option("--allow-concurrent", is_flag=True, help="Allow a second run of the same loop here.")
@click.option("--background", is_flag=True, help="Run detached; follow with 'll logs -f RUN'.")
@click.option(
    "--simulate",
    type=click.Path(dir_okay=False),
    metavar="SCRIPT",
    help="Answer every action from SCRIPT (YAML); nothing runs, nothing sleeps.",
)
@option_groups.answers
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=8,
    envvar="LL_JOBS",
    show_default=True,
    help="Actions running at once in the whole run, forks included (also LL_JOBS).",
)
@click.option(
    "--branch",
    metavar="STATE=KEY",
    help="Run only this branch of a for_each/parallel state (a matrix job: ll plan-matrix).",
)
@click.option("--run-id", hidden=True)
def run(
    file: str,
    sets: tuple[str, ...],
    max_iterations: int | None,
    dry_run: bool,
    json_mode: bool,
    quiet: bool,
    verbose: bool,
    junit_xml: str | None,
    report: str | None,
    heartbeat: float | None,
    otel: bool,
    claude: str | None,
    claude_flags: str | None,
    model: str | None,
    no_cache: bool,
    record: str | None,
    replay: str | None,
    fsync: bool,
    allow_concurrent: bool,
    background: bool,
    simulate: str | None,
    answers: tuple[str, ...],
    no_input: bool,
    jobs: int,
    branch: str | None,
    run_id: str | None,
) -> None:
    """Run a loop until a terminal state or a limit.

    Exit codes: 0 success, 1 failure terminal, 2 invalid file or usage, 3 run error,
    4 max_iterations reached, 5 cost budget spent, 6 suspended (a question waits for
    'll resume RUN --answer VALUE'), 70 internal error (a bug in ll: see
    the crash report it names), 124 loop timeout, 130 interrupted, 143 terminated.

    \b
    Example:
      ll run loops/rollout.yaml --set failing=ap-south --max-iterations 10
    """
    from little_loops.cli.execute import RunArgs, prepare_run

    go = prepare_run(
        RunArgs(
            file=file,
            sets=sets,
            max_iterations=max_iterations,
            dry_run=dry_run,
            json_mode=json_mode,
            quiet=quiet,
            verbose=verbose,
            junit_xml=junit_xml,
            report=report,
            heartbeat=heartbeat,
            otel=otel,
            claude=claude,
            claude_flags=claude_flags,
            model=model,
            no_cache=no_cache,
            record=record,
            replay=replay,
            fsync=fsync,
            allow_concurrent=allow_concurrent,
            background=background,
            simulate=simulate,
            answers=answers,
            no_input=no_input,
            jobs=jobs,
            branch=branch,
            run_id=run_id,
        )
    )
    if go is not None:
        go()


@main.command(short_help="Continue an interrupted run from its last finished step.")
@click.argument("run_id", required=False)
@click.option("--force", is_flag=True, help="Resume even though the loop file changed.")
@click.option(
    "--set", "sets", multiple=True, metavar="KEY=VALUE", help="Give secret context values again."
)
@option_groups.output
@option_groups.answers
@click.option("--note", help="With --answer: a note kept with the answer.")
@click.option("--by", help="With --answer: who answers (default: $LL_USER, $GITHUB_ACTOR, $USER).")
def resume(
    run_id: str | None,
    force: bool,
    sets: tuple[str, ...],
    answers: tuple[str, ...],
    no_input: bool,
    note: str | None,
    by: str | None,
    json_mode: bool,
    quiet: bool,
    verbose: bool,
    junit_xml: str | None,
    report: str | None,
    heartbeat: float | None,
    otel: bool,
) -> None:
    """Continue an interrupted run from its last finished step.

    Finished steps are neither re-run nor re-judged; a step cut off mid-action runs again
    from its start. Without RUN_ID, the latest resumable run of this directory. RUN_ID may
    also be a run directory's path, to resume from elsewhere; actions run where the run began.
    A suspended run takes its answers with --answer [ID=]VALUE (ID when several questions
    wait: 'll status RUN' lists them).

    \b
    Example:
      ll resume 20261122-041430-fix-until-green-9d2e
      ll resume 20261122-041430-publish-3fa2 --answer approve --note "the page is fine"
    """
    from pathlib import Path

    from little_loops.run.resume import prepare_resume

    loop, options, progress, run_dir = prepare_resume(
        Path.cwd(), run_id, force=force, overrides=parse_sets(sets)
    )
    if answers:
        from little_loops.cli.answer import record_answers

        state = run_dir.read_state()
        record_answers(run_dir, state, answers, note=note, by=by, via="resume")
    elif note or by:
        raise click.UsageError("--note and --by go with --answer")
    if report:
        launch.report_target(report)
    display = Display(json_mode, quiet, verbose, junit_xml, heartbeat, otel, no_input, report)
    from little_loops.sim.stepping import resumed_rig

    execute(loop, options, progress, run_dir, None, display, resumed_rig(loop, options, run_dir))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
