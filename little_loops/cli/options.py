"""The option groups `ll run`, `ll resume` and `ll step` share, as click decorators."""

from __future__ import annotations

from typing import Any

import click


def judge(f: Any) -> Any:
    """The judge's options of `ll run` (model, cache, record, replay)."""
    for option in reversed(
        [
            click.option(
                "--claude",
                metavar="PATH",
                help="The Claude Code CLI (default: $LL_CLAUDE or claude).",
            ),
            click.option(
                "--claude-flags",
                metavar="FLAGS",
                help="Permission flags for 'claude -p' (default: $LL_CLAUDE_FLAGS or "
                "--dangerously-skip-permissions; '' for none).",
            ),
            click.option(
                "--model", help="Judge model for llm_structured states (default: $LL_MODEL)."
            ),
            click.option(
                "--no-cache",
                is_flag=True,
                help="Ask the judge again instead of using cached verdicts.",
            ),
            click.option(
                "--record",
                type=click.Path(dir_okay=False),
                help="Write every judge exchange to FILE.",
            ),
            click.option(
                "--replay",
                type=click.Path(dir_okay=False, exists=True),
                help="Answer the judge from FILE (it must exist).",
            ),
        ]
    ):
        f = option(f)
    return f


def output(f: Any) -> Any:
    """The output options `ll run`, `ll resume` and `ll step` share."""
    for option in reversed(
        [
            click.option(
                "--json", "json_mode", is_flag=True, help="Stream events as JSON lines on stdout."
            ),
            click.option("-q", "--quiet", is_flag=True, help="Print only the final line."),
            click.option(
                "-v", "--verbose", is_flag=True, help="Stream each action's output as it runs."
            ),
            click.option(
                "--junit-xml",
                type=click.Path(dir_okay=False),
                help="Write a JUnit XML report to FILE.",
            ),
            click.option(
                "--report",
                type=click.Path(dir_okay=False),
                metavar="FILE",
                help="Write the run's HTML report to FILE when it ends (also when it fails, "
                "is suspended or interrupted): see 'll report'.",
            ),
            click.option(
                "--heartbeat",
                type=click.FloatRange(min=0),
                metavar="SECONDS",
                help="Without a terminal, print a 'still running' line this often while a "
                "step runs (default 30; 0: never).",
            ),
            click.option(
                "--otel",
                is_flag=True,
                help="Export the run as an OpenTelemetry trace over OTLP/HTTP (also when "
                "$OTEL_EXPORTER_OTLP_ENDPOINT is set; needs the [otel] extra).",
            ),
        ]
    ):
        f = option(f)
    return f


def answers(command: Any) -> Any:
    """`--answer` and `--no-input`, shared by `ll run` and `ll resume`."""
    command = click.option(
        "--no-input", is_flag=True, help="Never ask at the terminal: a question suspends the run."
    )(command)
    return click.option(
        "--answer",
        "answers",
        multiple=True,
        metavar="[ID=]VALUE",
        help="Answer a question (ID: the asking state, or its id from 'll status').",
    )(command)
