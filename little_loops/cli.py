"""The `ll` command: click options in, one core call, errors mapped to exit codes.

Start-up matters: this module imports only click and the standard library at the top.
Everything else is imported inside the command that needs it.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from . import __version__
from .errors import LoopError


class _Group(click.Group):
    """Turns every LoopError into one line on stderr and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LoopError as exc:
            click.echo(f"ll: error: {exc.message}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ll")
def main() -> None:
    """Run loops: finite-state machines written in YAML.

    \b
    Example:
      ll validate loops/*.yaml
      ll run loops/fix-until-green.yaml
    """


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=True))
@click.option("--strict", is_flag=True, help="Treat warnings as errors.")
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
    from .validate import validate_files

    code = validate_files(list(files), strict=strict, fmt=fmt, out=sys.stdout)
    sys.exit(code)


@main.command()
def schema() -> None:
    """Print the JSON Schema of loop files (for editors and yaml-language-server).

    \b
    Example:
      ll schema > loop.schema.json
    """
    from .schema import schema_text

    click.echo(schema_text(), nl=False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
