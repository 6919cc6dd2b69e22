"""`ll migrate`: upstream little-loops files converted to this format (migrate.py does the work).

Like `cli`, this imports only click and the standard library at the top: ruamel.yaml, which
the conversion needs, is loaded when the command runs, never by `ll --help` or `ll validate`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command(short_help="Convert upstream little-loops files to this format, with notes.")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Write the converted files (and the sub-loops they call) and MIGRATION-NOTES.md here.",
)
def migrate(files: tuple[str, ...], out: str | None) -> None:
    """Convert loop files written for upstream little-loops. Fragments (`import:` +
    `fragment:`), `from:` and `flow:` are written out; sub-loops are converted with their
    callers. Every change of behaviour and every construct with no equivalent is noted with
    its upstream line. Without --out, one FILE is printed on stdout and its notes on stderr.
    Exit 0: all converted and valid; 1: some need hand work; 2: an input is unreadable.

    \b
    Example:
      ll migrate upstream/loops/fix-quality-and-tests.yaml > fix.yaml
      ll migrate upstream/loops/*.yaml --out converted/
    """
    from little_loops.migrate.convert import migrate as convert
    from little_loops.migrate.convert import notes_markdown

    if out is None and len(files) > 1:
        raise click.UsageError("several FILES need --out DIR (one file can go to stdout)")
    target = Path(out) if out is not None else None
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)
    result = convert([Path(f) for f in files], target)
    for problem in result.unreadable:
        click.echo(f"ll: {problem}", err=True)
    if target is None:
        for item in result.files[:1]:
            sys.stdout.write(item.text)
            notes = notes_markdown(type(result)([item], []))
            click.echo(notes.split("\n## ", 1)[-1].rstrip(), err=True)
    else:
        total = len(result.files)
        valid = sum(not m.diagnostics for m in result.files)
        done = sum(m.ok for m in result.files)
        click.echo(
            f"ll: {valid} of {total} files valid after migration, {done} with nothing left to "
            f"do by hand; notes: {target / 'MIGRATION-NOTES.md'}",
            err=True,
        )
    sys.exit(result.exit_code)


COMMANDS = (migrate,)
