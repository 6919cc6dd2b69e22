"""Render `ll --help` with click into little_loops/_help.py (see little_loops/entry.py).

Run: python scripts/gen_help.py   (tests/cli/test_entry.py fails until the copy is fresh)
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

OUT = Path(__file__).resolve().parent.parent / "little_loops" / "_help.py"


def render() -> str:
    from little_loops.cli.main import main

    result = CliRunner().invoke(main, ["--help"], prog_name="ll", terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def source(text: str) -> str:
    assert '"""' not in text
    body = text.replace("\\", "\\\\")
    return (
        '"""`ll --help`, as click renders it at 80 columns; made by scripts/gen_help.py."""\n\n'
        f'HELP = """\\\n{body}"""\n'
    )


if __name__ == "__main__":
    OUT.write_text(source(render()))
    print(f"wrote {OUT}")
