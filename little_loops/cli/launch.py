"""What `ll run` and `ll resume` need around a run: checks made before it, the output hooks,
the signals after it, and the detached re-launch behind `--background`.

It imports only the standard library at the top, not even click: a plain `ll run` starts
without click (entry.py), and prints its few lines through `echo` here.
"""

from __future__ import annotations

import json
import os
import sys

from little_loops.errors import LoopError

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """`click.echo` of plain text (no colours to strip), without importing click."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n" if nl else text)
    stream.flush()


def interactive(*, no_input: bool, quiet: bool, json_mode: bool) -> bool:
    """A person can be asked here: a terminal on both ends, and nothing said otherwise."""
    if no_input or quiet or json_mode or os.environ.get("CI"):
        return False
    return sys.stdin.isatty() and sys.stdout.isatty()


def ignore_signals() -> None:
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def regular_file(file: str) -> None:
    """`ll run` reads its file again (resume, change check): a pipe or device will not do."""
    import os
    import stat

    try:
        mode = os.stat(file).st_mode
    except OSError:
        return  # the loader says what is wrong with it, at its line
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise LoopError(
            f"{file}: not a regular file (a pipe, a device or <(...)); ll run reads the loop "
            "file again to resume the run: save it to a file and run that"
        )


def writable(path: str, what: str) -> None:
    """Refuse, before the run, a file the run would fail to write at its end (its folder is
    made, as for `--junit-xml`)."""
    import os

    try:
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise LoopError(f"cannot write {what} to {path}: {exc.strerror or exc}") from None


def report_target(path: str) -> None:
    """Refuse, before the run, a `--report` FILE that cannot be written (its directory is
    made when missing, as the page is written only at the end)."""
    import os
    from pathlib import Path

    from little_loops.errors import EXIT_USAGE

    target = Path(path)
    why = None
    if target.is_dir():
        why = "it is a directory"
    else:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            why = f"{target.parent} is not a directory"
        except OSError as exc:
            why = exc.strerror or str(exc)
        else:
            if not os.access(target.parent, os.W_OK):
                why = "its directory is not writable"
    if why is not None:
        raise LoopError(f"cannot write the report to {path}: {why}", exit_code=EXIT_USAGE)


def fan_out(hooks: list[Any]) -> Any:
    """One output hook calling each of `hooks`, or the single one, or None."""
    if len(hooks) <= 1:
        return hooks[0] if hooks else None

    def both(name: str, chunk: bytes) -> None:
        for hook in hooks:
            hook(name, chunk)

    return both


BACKGROUND_SETS = "_LL_BACKGROUND_SETS"  # `--set` values of a `--background` run, as JSON


def _without_sets(args: list[str]) -> tuple[list[str], list[str]]:
    """The arguments without their `--set KEY=VALUE` pairs, and those values."""
    kept: list[str] = []
    sets: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            kept += args[i:]
            break
        if arg == "--set" and i + 1 < len(args):
            sets.append(args[i + 1])
            i += 2
            continue
        if arg.startswith("--set="):
            sets.append(arg.removeprefix("--set="))
        else:
            kept.append(arg)
        i += 1
    return kept, sets


def background_sets() -> tuple[str, ...]:
    """The `--set` values a `--background` parent passed; taken out of the environment so
    that no action of the run inherits them."""
    raw = os.environ.pop(BACKGROUND_SETS, None)
    if not raw:
        return ()
    try:
        values = json.loads(raw)
    except ValueError:
        return ()
    return tuple(str(v) for v in values) if isinstance(values, list) else ()


def start_background(loop_name: str) -> None:
    """Re-run this command detached, output to the run directory; print the run id and exit."""
    import time
    from pathlib import Path

    from little_loops.actions.process import start_detached
    from little_loops.record.store import (
        loops_dir,
        new_run_id,
    )

    run_id = new_run_id(loop_name)
    root = loops_dir(Path.cwd()) / "runs" / run_id
    root.mkdir(parents=True)
    args, sets = _without_sets([a for a in sys.argv[1:] if a != "--background"])
    argv = [sys.executable, "-m", "little_loops", *args, "--run-id", run_id]
    # `--set` values (secrets among them) go through the environment, which only this user
    # can read, never the command line every user sees in `ps`.
    env = {**os.environ, BACKGROUND_SETS: json.dumps(sets)} if sets else None
    proc = start_detached(argv, root / "output.log", env=env)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (root / "state.json").exists():
        if proc.poll() is not None:
            echo((root / "output.log").read_text(errors="replace"), err=True, nl=False)
            sys.exit(proc.returncode)
        time.sleep(0.02)
    echo(f"ll: started run {run_id} in the background (pid {proc.pid})")
    echo(f"    follow it with: ll logs -f {run_id}")
    sys.exit(0)


# report/otel.py `ENDPOINT_VARS` (tests/report/test_otel.py checks they are the same).
OTLP_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def tracer(flag: bool) -> Any:
    """The OpenTelemetry listener when export is asked for (--otel or an OTLP endpoint)."""
    import os

    if not flag and not any(os.environ.get(name) for name in OTLP_ENDPOINT_VARS):
        return None  # (report/otel.py `asked` would say no: not imported for nothing)
    from little_loops.report.otel import (
        OtelMissing,
        asked,
        otlp_listener,
    )

    if not asked(flag, os.environ):
        return None
    try:
        tracer = otlp_listener(os.environ)
    except OtelMissing as exc:
        if flag:
            from little_loops.errors import LoopError

            raise LoopError(f"--otel: {exc}") from None  # exit code 2, like a usage error
        # Only the environment asked, and it may be set for other programs: run unexported.
        echo(f"ll: warning: OTEL_EXPORTER_OTLP_ENDPOINT is set, but {exc}", err=True)
        return None
    import atexit

    atexit.register(tracer.close)  # a run that ends without reaching the flush below
    return tracer


def github_outputs(result: Any) -> None:
    """With `$GITHUB_OUTPUT` set: the run's id, exit code and pending questions, for the next
    job or step (a suspended run is resumed by a later, reviewer-gated job)."""
    import os

    target = os.environ.get("GITHUB_OUTPUT")
    if not target:
        return
    from pathlib import Path

    from little_loops.record.questions import state_pending
    from little_loops.record.store import RunDir
    from little_loops.report.reports import write_outputs

    pending: list[str] = []
    if result.outcome == "suspended":
        try:
            state = RunDir(result.run_dir).read_state()
            pending = [q.id for q in state_pending(state, result.run_dir / "state.json")]
        except LoopError:
            pending = []
    problem = write_outputs(Path(target), result.run_id, result.exit_code, pending)
    if problem:
        echo(f"ll: warning: {problem}", err=True)


def reporters(loop: Any, junit_xml: str | None, json_mode: bool) -> list[Any]:
    """JUnit and GitHub Actions listeners, when asked for."""
    import os

    out: list[Any] = []
    if junit_xml:
        from pathlib import Path

        from little_loops.report.reports import JUnitReport

        out.append(JUnitReport(Path(junit_xml), str(loop.path)))
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from little_loops.report.reports import github_report_from_env

        # With --json, stdout carries only events; workflow commands work on stderr too.
        report = github_report_from_env(loop, sys.stderr if json_mode else sys.stdout)
        if report is not None:
            out.append(report)
    return out


def after_run(loop: Any, result: Any, runner: Any, report: str | None, *, quiet: bool) -> None:
    """At a run's end, whatever the end (passed, failed, suspended, interrupted): the HTML
    report when `--report` asked for it, then retention (`keep_runs:` or `LL_KEEP_RUNS`).
    Neither changes the run's exit code: a problem is a warning."""
    import os
    from pathlib import Path

    if report and result.run_dir is not None:
        from little_loops.report.page import write_report

        redactor = getattr(runner, "redactor", None)
        try:
            path = write_report(
                Path(result.run_dir),
                Path(report),
                loop=loop,
                mask=redactor.obj if redactor else None,
            )
        except LoopError as exc:
            echo(f"ll: warning: {exc.message}", err=True)
        else:
            if not quiet:
                echo(f"ll: report: {path}", err=True)
    keep = loop.keep_runs
    if keep is None:
        from little_loops.record.prune import env_keep

        try:
            keep = env_keep(os.environ)
        except LoopError as exc:
            echo(f"ll: warning: {exc.message}; no runs were pruned", err=True)
            return
    if keep is None or result.run_dir is None:
        return
    from little_loops.record.prune import prune

    base = Path(result.run_dir).parent.parent.parent
    text, removed, _ = prune(
        base, keep=keep, older_than=None, loop_file=str(loop.path.resolve()), verbose=False
    )
    if removed and not quiet:
        echo(f"ll: keep_runs {keep}: {text.strip()}", err=True)
