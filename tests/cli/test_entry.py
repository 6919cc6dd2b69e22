"""The `ll` entry point answers --help and --version without click, exactly as click would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from little_loops import __version__
from little_loops._help import HELP
from little_loops.cli.main import main

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))


def test_help_copy_is_clicks_page() -> None:
    from gen_help import render, source

    assert render() == HELP, "little_loops/_help.py is stale: run python scripts/gen_help.py"
    assert source(render()) == (REPO / "little_loops" / "_help.py").read_text()


def test_version_matches_click() -> None:
    result = CliRunner().invoke(main, ["--version"], prog_name="ll")
    assert result.output == f"ll, version {__version__}\n"


def _ll(*args: str, columns: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    code = (
        "import sys\nfrom little_loops.entry import main\nsys.argv[0] = 'll'\n"
        "try:\n    main()\nfinally:\n"
        "    print('CLICK' if 'click' in sys.modules else 'NO-CLICK', file=sys.stderr)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=30
    )


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]])
def test_fast_paths_skip_click(args: list[str]) -> None:
    proc = _ll(*args)
    assert proc.returncode == 0
    assert proc.stderr.strip() == "NO-CLICK"
    expected = HELP if args != ["--version"] else f"ll, version {__version__}\n"
    assert proc.stdout == expected


def test_narrow_terminal_and_other_commands_go_to_click() -> None:
    narrow = _ll("--help", columns="60")
    assert "CLICK" in narrow.stderr
    assert narrow.stdout.startswith("Usage: ll [OPTIONS] COMMAND [ARGS]...")
    schema = _ll("schema")
    assert "CLICK" in schema.stderr


LOOP = """\
name: tiny
initial: a
states:
  a: {action: "true", on_success: z, on_failure: z}
  z: {terminal: true}
"""


@pytest.mark.parametrize(
    "args",
    [
        ["good.yaml"],
        ["good.yaml", "bad.yaml"],
        ["--strict", "warn.yaml"],
        ["warn.yaml"],
        ["--format", "json", "bad.yaml"],
        ["--format=json", "good.yaml", "missing.yaml"],
        ["--", "good.yaml"],
    ],
)
def test_fast_validate_equals_click(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "good.yaml").write_text(LOOP)
    (tmp_path / "bad.yaml").write_text(LOOP.replace("on_success: z", "on_success: zz"))
    (tmp_path / "warn.yaml").write_text(LOOP + "  orphan: {terminal: true}\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        clicked = CliRunner().invoke(main, ["validate", *args], prog_name="ll")
    finally:
        os.chdir(cwd)
    code = (
        "import sys\nfrom little_loops.entry import main\n"
        "try:\n    main()\nfinally:\n"
        "    print('CLICK' if 'click' in sys.modules else 'NO-CLICK', file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "validate", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.stderr.strip().endswith("NO-CLICK")
    assert (proc.returncode, proc.stdout) == (clicked.exit_code, clicked.output)


@pytest.mark.parametrize("args", [["--help"], [], ["--format", "xml", "a.yaml"], ["-x", "a"]])
def test_other_validate_arguments_go_to_click(args: list[str]) -> None:
    proc = _ll("validate", *args)
    assert "CLICK" in proc.stderr
    assert "NO-CLICK" not in proc.stderr


def test_ctrl_c_the_moment_its_handler_is_installed_is_an_interrupt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A SIGINT delivered right after `_note_interrupts` put its handler in place, before
    # `main` reached its `try`, escaped as a KeyboardInterrupt traceback through ll's frames
    # (seen once in 13 timed Ctrl-Cs of test_robust's start-up test). Raising where the
    # handler would is that signal, at that moment.
    from little_loops import entry

    installed = entry._note_interrupts

    def then_ctrl_c() -> None:
        installed()
        raise KeyboardInterrupt

    monkeypatch.setattr(entry, "_note_interrupts", then_ctrl_c)
    monkeypatch.setattr(sys, "argv", ["ll", "--version"])
    before = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as ended:
            entry.main()
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C escaped main() as a KeyboardInterrupt (a traceback for users)")
    finally:
        signal.signal(signal.SIGINT, before)
    assert ended.value.code == 130
    assert capsys.readouterr().err == "ll: interrupted\n"


def test_ctrl_c_while_starting_inside_a_callback_ends_the_process() -> None:
    # The start-up handler raised SystemExit; a Ctrl-C that the interpreter ran inside a
    # callback of its own (an import lock's weakref callback, seen under `nox -s minimums`)
    # printed "Exception ignored ... SystemExit: 130" with a traceback, and ll carried on.
    script = (
        "import sys\n"
        "sys.argv = ['ll']\n"
        "import little_loops\n"
        "import os, signal, time, weakref\n"
        "class A: pass\n"
        "a = A()\n"
        "r = weakref.ref(a, lambda _: os.kill(os.getpid(), signal.SIGINT))\n"
        "del a\n"
        "time.sleep(2)\n"
        "print('carried on')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "ll: interrupted\n")
