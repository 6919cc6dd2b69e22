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


def _parse_sets(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"'{item}' is not KEY=VALUE", param_hint="--set")
        out[key.strip()] = value
    return out


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a context value.")
@click.option("--max-iterations", type=click.IntRange(min=1), help="Override max_iterations.")
@click.option("--dry-run", is_flag=True, help="Print the plan of the first state and the routes.")
@click.option("--json", "json_mode", is_flag=True, help="Stream events as JSON lines on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the final line.")
@click.option("-v", "--verbose", is_flag=True, help="Stream each action's output as it runs.")
@click.option("--claude", metavar="PATH", help="The Claude Code CLI to run (default: $LL_CLAUDE or claude).")
@click.option("--model", help="Judge model for llm_structured states (default: $LL_MODEL).")
@click.option("--no-cache", is_flag=True, help="Ask the judge again instead of using cached verdicts.")
@click.option("--record", type=click.Path(dir_okay=False), help="Write every judge exchange to FILE.")
@click.option("--replay", type=click.Path(dir_okay=False), help="Answer the judge from FILE.")
@click.option("--fsync", is_flag=True, help="fsync state.json after every step.")
def run(
    file: str,
    sets: tuple[str, ...],
    max_iterations: int | None,
    dry_run: bool,
    json_mode: bool,
    quiet: bool,
    verbose: bool,
    claude: str | None,
    model: str | None,
    no_cache: bool,
    record: str | None,
    replay: str | None,
    fsync: bool,
) -> None:
    """Run a loop until a terminal state or a limit.

    Exit codes: 0 success, 1 failure terminal, 2 invalid file or usage, 3 run error,
    4 max_iterations reached, 5 cost budget spent, 124 loop timeout, 130 interrupted,
    143 terminated.

    \b
    Example:
      ll run loops/fix-until-green.yaml --set target=src/ --max-iterations 10
    """
    import os
    from pathlib import Path

    from .loader import load

    loop = load(Path(file))
    overrides = _parse_sets(sets)
    if dry_run:
        from .plan import dry_run as plan

        click.echo(plan(loop, overrides), nl=False)
        return

    from . import actions
    from .render import make_renderer, output_streamer
    from .runner import RunOptions, Runner, signals_as_exceptions

    options = RunOptions(
        overrides=overrides,
        max_iterations=max_iterations,
        claude=tuple(actions.claude_command(claude, os.environ)),
        model=model or os.environ.get("LL_MODEL") or None,
        cache=not no_cache,
        record=Path(record) if record else None,
        replay=Path(replay) if replay else None,
        fsync=fsync,
        on_output=output_streamer(json_mode) if verbose else None,
    )
    renderer = make_renderer(json_mode=json_mode, quiet=quiet, verbose=verbose)
    with signals_as_exceptions():
        result = Runner(loop, options, listeners=[renderer]).run()
    if result.outcome == "interrupted" and not json_mode:
        click.echo(f"ll: the run was stopped; its files are in {result.run_dir}", err=True)
    sys.exit(result.exit_code)


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
