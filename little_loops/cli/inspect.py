"""The `ll` commands that look at runs and loops without running one: list, status, history,
stop, logs, graph, compile, init and schema. `cli.main` registers them.

Like `cli`, this imports only click and the standard library at the top.
"""

from __future__ import annotations

import sys
from typing import Any

import click


@click.command(name="list", short_help="List the newest runs in this directory.")
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="Show the newest N runs (default 20).",
)
@click.option("--all", "all_runs", is_flag=True, help="Show every run, however many.")
def list_(limit: int | None, all_runs: bool) -> None:
    """List the newest runs here (20 unless told): id, loop, status, step, start, duration.

    Only the runs shown are read, so the listing stays quick with thousands of runs; a last
    line says how many older runs were left out.

    \b
    Example:
      ll list
      ll list -n 50
      ll list --all
    """
    from pathlib import Path

    from little_loops.record.runs import LIST_LIMIT, list_text

    if all_runs and limit is not None:
        raise click.UsageError("ll list takes --limit N or --all, not both")
    click.echo(list_text(Path.cwd(), None if all_runs else limit or LIST_LIMIT), nl=False)


@click.command(short_help="Show where a run is, its last verdicts and its cost.")
@click.argument("run_id", required=False)
def status(run_id: str | None) -> None:
    """Show where a run is: state, step, last verdicts, elapsed time, cost.

    \b
    Example:
      ll status            # the latest run here
    """
    from pathlib import Path

    from little_loops.record.runs import status_text

    click.echo(status_text(Path.cwd(), run_id), nl=False)


@click.command(short_help="Past runs with their outcomes, newest first.")
@click.argument("loop", required=False)
def history(loop: str | None) -> None:
    """Past runs, newest first, with their outcomes (of one loop when LOOP is given).

    \b
    Example:
      ll history fix-until-green
    """
    from pathlib import Path

    from little_loops.record.runs import history_text

    click.echo(history_text(Path.cwd(), loop), nl=False)


@click.command(short_help="Stop a running loop from any terminal.")
@click.argument("run_id")
def stop(run_id: str) -> None:
    """Stop a running loop, from any terminal; it can be resumed later.

    \b
    Example:
      ll stop 20261122-041430-fix-until-green-4e8f
    """
    from pathlib import Path

    from little_loops.record.runs import stop as stop_run

    click.echo(stop_run(Path.cwd(), run_id), nl=False)


@click.command(short_help="Show a run's events (-f: follow), or a step's output.")
@click.argument("run_id", required=False)
@click.option("-f", "--follow", is_flag=True, help="Keep showing new events until the run ends.")
@click.option("--json", "json_mode", is_flag=True, help="Print the raw events.")
@click.option(
    "--step",
    type=click.IntRange(min=1),
    metavar="N",
    help="Print what step N's action printed (every attempt, in order) instead of the events.",
)
def logs(run_id: str | None, follow: bool, json_mode: bool, step: int | None) -> None:
    """Show a run's events as readable lines (the latest run when RUN_ID is omitted).

    A step that did not succeed shows its reason and the last lines it printed; --step N
    prints everything step N's action printed, from the run's log files.

    \b
    Example:
      ll logs -f 20261122-041430-fix-until-green-3fa2
      ll logs 20261122-041430-fix-until-green-3fa2 --step 3
    """
    from pathlib import Path

    from little_loops.record.runs import follow as follow_run
    from little_loops.record.store import find_run
    from little_loops.report.render import (
        JsonRenderer,
        PlainRenderer,
    )

    run_dir = find_run(Path.cwd(), run_id)
    if step is not None:
        if follow or json_mode:
            raise click.UsageError("--step prints a step's output; it takes no -f or --json")
        _print_step(run_dir, step)
        return
    listener = JsonRenderer() if json_mode else PlainRenderer()
    follow_run(run_dir, listener, follow=follow)
    if not json_mode:
        click.echo(f"ll: a step's whole output: ll logs {run_dir.run_id} --step N", err=True)


def _print_step(run_dir: Any, step: int) -> None:
    """Copy a step's logs to stdout as they are; a header before each when it was retried."""
    from little_loops.record.runs import step_outputs

    outputs = step_outputs(run_dir, step)
    out = sys.stdout.buffer
    for item in outputs:
        if item.label is not None:  # a child's or a branch's step, under its path
            again = f", attempt {item.attempt}" if item.attempt > 1 else ""
            out.write(f"== {item.label} (step {item.step}{again}) ==\n".encode())
        elif len(outputs) > 1:
            out.write(f"== step {step} ({item.state}), attempt {item.attempt} ==\n".encode())
        data = item.output
        if data is None:
            click.echo(
                f"ll: step {item.step} ({item.state}) attempt {item.attempt} printed nothing",
                err=True,
            )
            continue
        out.write(data)
        if data and not data.endswith(b"\n"):
            out.write(b"\n")
        out.flush()


@click.command(short_help="Draw a loop's states and routes (Mermaid or DOT).")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid", show_default=True
)
@click.option("--run", "run_id", metavar="RUN_ID", help="Overlay a run from ./.loops/runs/.")
def graph(file: str, fmt: str, run_id: str | None) -> None:
    """Draw a loop's states and routes as a Mermaid flowchart or a Graphviz DOT graph.

    With --run, states show how often the run visited them and the routes it took are
    highlighted. Mermaid output renders on GitHub inside a ```mermaid block.

    \b
    Example:
      ll graph loops/fix-until-green.yaml > graph.mmd
      ll graph loops/fix-until-green.yaml --format dot | dot -Tsvg > graph.svg
      ll graph loops/fix-until-green.yaml --run 20261122-041430-fix-until-green-3fa2
    """
    from pathlib import Path

    from little_loops.load.loader import load
    from little_loops.report.graph import draw

    loop = load(Path(file))
    run_dir = None
    if run_id is not None:
        from little_loops.record.store import find_run

        run_dir = find_run(Path.cwd(), run_id).root
    click.echo(draw(loop, fmt, run_dir=run_dir), nl=False)


@click.command(name="compile", short_help="Print the states a paradigm file compiles to.")
@click.argument("file", type=click.Path(dir_okay=False))
def compile_(file: str) -> None:
    """Print the states a paradigm file compiles to, as a loop file `ll validate` accepts.

    Comments say which line of FILE each state came from. `ll run` and `ll validate` compile
    paradigm files by themselves; a file already in the native form is printed as it is.
    Problems go to stderr with FILE's lines; exit 2 when there is an error.

    \b
    Example:
      ll compile loops/keep-invariants.yaml > keep-invariants.fsm.yaml
    """
    from pathlib import Path

    from little_loops.load.loader import compile_file
    from little_loops.load.paradigms import to_yaml

    compiled, diagnostics = compile_file(Path(file))
    for d in diagnostics:
        click.echo(d.format(), err=True)
    if any(d.severity == "error" for d in diagnostics):
        sys.exit(2)
    if compiled is None:  # already states
        click.echo(Path(file).read_text(encoding="utf-8-sig"), nl=False)
        return
    click.echo(to_yaml(compiled, file), nl=False)


@click.command(short_help="Write a commented starter loop.")
@click.argument("name", default="loop")
@click.option(
    "--paradigm",
    type=click.Choice(["fsm", "goal", "convergence", "invariants", "imperative"]),
    default="fsm",
    show_default=True,
    help="The form of the starter loop.",
)
@click.option("--force", is_flag=True, help="Overwrite NAME.yaml if it exists.")
def init(name: str, paradigm: str, force: bool) -> None:
    """Write a commented starter loop NAME.yaml (default: loop.yaml) that runs as it is.

    Its first line points yaml-language-server at ./loop.schema.json, for completion and
    hover help in editors; ll init writes that file beside the loop too (or refreshes it
    when an older ll wrote it). Commit both.

    \b
    Example:
      ll init fix-tests --paradigm goal && ll run fix-tests.yaml
    """
    from pathlib import Path

    from little_loops.load.starters import write_starter

    path = Path(name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    schema = write_starter(path, paradigm, force=force)
    also = f" and {schema} (for editors)" if schema is not None else ""
    click.echo(f"ll: wrote {path} (paradigm: {paradigm}){also}; try: ll run {path}")


@click.command(short_help="Print the JSON Schema of loop files, for editors.")
def schema() -> None:
    """Print the JSON Schema of loop files (for editors and yaml-language-server).

    \b
    Example:
      ll schema > loop.schema.json
    """
    from little_loops.load.schema import schema_text

    click.echo(schema_text(), nl=False)


COMMANDS = (list_, status, history, stop, logs, graph, compile_, init, schema)
