"""`ll step` (run a few steps, then pause) and `ll test` (a loop's simulations checked).

Like `cli`, this imports only click and the standard library at the top; `cli.main` registers
these commands, and `step` runs through `cli.execute`, as `ll run` does.
"""

from __future__ import annotations

import sys

import click


@click.command(short_help="Run N steps (default 1) or up to a state, then pause (exit 6).")
@click.argument("target", metavar="FILE|RUN")
@click.option("-n", "count", type=click.IntRange(min=1), help="Steps to run before pausing.")
@click.option(
    "--until",
    "until",
    multiple=True,
    metavar="STATE",
    help="Pause before this state runs (repeatable); with -n, whichever comes first.",
)
@click.option(
    "--simulate",
    type=click.Path(dir_okay=False),
    metavar="SCRIPT",
    help="Answer every action from SCRIPT (a new run only).",
)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a context value.")
@click.option("--json", "json_mode", is_flag=True, help="Stream events as JSON lines on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the final line.")
@click.option(
    "--replay",
    type=click.Path(dir_okay=False, exists=True),
    help="Answer the judge from FILE (it must exist).",
)
def step(
    target: str,
    count: int | None,
    until: tuple[str, ...],
    simulate: str | None,
    sets: tuple[str, ...],
    json_mode: bool,
    quiet: bool,
    replay: str | None,
) -> None:
    """Run a loop (FILE) or continue a paused or interrupted run (RUN) for N steps, or
    until the next state is one of --until, then pause: exit 6 and print what comes next
    and where each verdict would go. A run that ends before that exits with its own code.

    \b
    Example:
      ll step loops/fix-until-green.yaml -n 2
      ll step 20261122-041430-fix-until-green-5b7c --until done
    """
    import os
    from pathlib import Path

    from little_loops.cli import execute as cli
    from little_loops.sim.stepping import (
        Rig,
        resumed_rig,
    )

    steps = count if count is not None else (None if until else 1)
    pause = Rig(steps=steps, until=frozenset(until))
    display = cli.Display(json_mode, quiet, False, None, None)
    path = Path(target)
    if path.is_file():
        from little_loops.load.loader import load
        from little_loops.run.runner import RunOptions

        loop = load(path)
        _known_states(loop, until)
        rig = pause
        if simulate:
            rig = Rig.simulated(Path(simulate), loop, replay=replay is not None)
            rig.steps, rig.until = pause.steps, pause.until
        options = RunOptions(
            overrides=cli.parse_sets(sets, loop),
            replay=Path(replay) if replay else None,
            allow_concurrent=simulate is not None,
            model=os.environ.get("LL_MODEL") or None,
        )
        cli.execute(loop, options, None, None, None, display, rig)
        return
    if simulate:
        raise click.UsageError("--simulate starts a new run: give the loop FILE, not a RUN")
    from little_loops.run.resume import prepare_resume

    loop, options, progress, run_dir = prepare_resume(
        Path.cwd(), target, overrides=cli.parse_sets(sets)
    )
    _known_states(loop, until)
    resumed = resumed_rig(loop, options, run_dir, pause)
    cli.execute(loop, options, progress, run_dir, None, display, resumed)


def _known_states(loop: object, until: tuple[str, ...]) -> None:
    from little_loops.errors import LoopError
    from little_loops.wording import did_you_mean

    states = sorted(getattr(loop, "states", {}))
    for name in until:
        if name not in states:
            raise LoopError(f"--until: the loop has no state '{name}'{did_you_mean(name, states)}")


@click.command(name="test", short_help="Run loops' simulation scripts and check `expect:`.")
@click.argument("scripts", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--junit-xml", type=click.Path(dir_okay=False), help="Write a JUnit XML report to FILE."
)
def test_(scripts: tuple[str, ...], junit_xml: str | None) -> None:
    """Run each SCRIPT's simulation of its loop (nothing runs, nothing sleeps, no run
    directory is left behind) and check its `expect:` (path, outcome, exit_code,
    final_state, outputs, steps). Prints PASS or FAIL per script, and a path diff.

    Exits 0 when every script passes, 1 when one does not, 2 when a script or its loop
    is invalid.

    \b
    Example:
      ll test loops/tests/*.test.yaml --junit-xml ll-test.xml
    """
    from pathlib import Path

    from little_loops.sim.looptest import run_tests

    code = run_tests([Path(s) for s in scripts], out=sys.stdout, junit_xml=junit_xml)
    sys.exit(code)


COMMANDS = (step, test_)
