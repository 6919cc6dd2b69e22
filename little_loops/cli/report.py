"""`ll report` (a run as one HTML page) and `ll prune` (retention of run directories).

Like `cli`, this imports only click and the standard library at the top: grandalf, the
report's layout library, is loaded by `ll report` alone.
"""

from __future__ import annotations

import click


@click.command(short_help="Write a run's report: one self-contained HTML page.")
@click.argument("run", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Where to write it (default: report.html in the run's directory).",
)
def report(run: str | None, output: str | None) -> None:
    """Write one self-contained HTML page of a run: its graph with the path taken, a
    timeline of every step (child loops nested, fork branches as lanes), each step's
    action, output, verdict and evaluator details, judge requests, questions, costs.

    RUN is a run id (or a unique prefix), a child run's id (RUN/0002-deploy/3) or a run
    directory's path; without it, the latest run here. Nothing in the page is fetched
    from the network: it opens from a CI artifact or an attachment.

    \b
    Example:
      ll report                                  # the latest run: .loops/runs/RUN/report.html
      ll report 20261122-041430-release-3fa2 -o release.html
    """
    from pathlib import Path

    from little_loops.report.page import env_mask, resolve_run, write_report

    base = Path.cwd()
    root = resolve_run(base, run)
    path = write_report(root, Path(output) if output else None, mask=env_mask())
    size = path.stat().st_size if path.is_file() else 0
    click.echo(f"ll: wrote the report of {root.name} to {path} ({size / 1024:.0f} KB)")


@click.command(short_help="Delete old runs; never a running or suspended one.")
@click.option(
    "--keep",
    type=click.IntRange(min=0),
    metavar="N",
    help="Keep the N newest runs (default with LL_KEEP_RUNS set: its value).",
)
@click.option("--older-than", metavar="AGE", help="Remove only runs begun longer ago: 14d, 12h.")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the total.")
def prune(keep: int | None, older_than: str | None, dry_run: bool, quiet: bool) -> None:
    """Delete the directories of old runs under .loops/runs and say what that freed.

    A run is removed when it is not among the --keep N newest and, with --older-than, began
    longer ago than AGE. Never removed: a run that is running, suspended (waiting for an
    answer), paused by 'll step', or whose loop lock is held. Child runs and fork branches
    live inside their root run's directory and go with it.

    \b
    Example:
      ll prune --keep 50 --older-than 14d --dry-run
    """
    import os
    from pathlib import Path

    from little_loops.errors import EXIT_USAGE, LoopError
    from little_loops.record.prune import env_keep, parse_age
    from little_loops.record.prune import prune as run_prune

    age = parse_age(older_than) if older_than is not None else None
    if keep is None and age is None:
        keep = env_keep(os.environ)
        if keep is None:
            raise LoopError(
                "ll prune: say what to keep: --keep N (the N newest runs), --older-than AGE "
                "(14d), or both; or set LL_KEEP_RUNS",
                exit_code=EXIT_USAGE,
            )
    text, _, _ = run_prune(
        Path.cwd(), keep=keep, older_than=age, dry_run=dry_run, verbose=not quiet
    )
    click.echo(text, nl=False)


COMMANDS = (report, prune)
