"""A plain `ll run` loads only what it uses (issue 27: the fixed cost of every run).

Not timed: the modules a run of a two-state loop imports are listed from the process itself,
so a module that comes back (an import moved to the top of a file) fails here, whatever the
machine's speed. docs/performance.md ("Start-up of `ll run`") has the figures. `ll run` with
only common options starts without click (entry.py `_run`): it must say and do exactly what
the click command does, which LL_JOBS forces here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from project import Project

TWO = "name: two\ninitial: a\nstates:\n  a: {action: 'true', next: b}\n  b: {terminal: true}\n"
# An anchor: beyond the plain YAML that load/plain_yaml.py reads, so PyYAML reads it.
ANCHORED = TWO.replace("  b: {", "  b: &end {")

# What a run without a judge, a fork, a sub-loop or a question never needs; each was imported
# by every `ll run` before issue 27.
NOT_LOADED = (
    "click",  # entry.py runs `ll run FILE -q` itself
    "anthropic",
    "little_loops.providers",  # the judge's providers
    "little_loops.record.questions",  # questions: `ask:` states, `ll answer`
    "little_loops.run.asking",
    "little_loops.run.branches",  # forks
    "little_loops.run.fork_schedule",
    "little_loops.run.children",  # child runs: forks and `loop:` states
    "little_loops.run.calls",
    "little_loops.cli.inspect",  # the other commands
    "little_loops.cli.judge",
    "little_loops.cli.matrix",
    "little_loops.cli.migrate",
    "little_loops.cli.report",
    "little_loops.cli.sim",
    "little_loops.sim",
    "little_loops.migrate",
    "little_loops.report.page",
    "little_loops.report.otel",  # without --otel or an OTLP endpoint in the environment
    "logging",  # OpenTelemetry's, only when exporting
    "secrets",  # a run id's random part is os.urandom
    "hashlib",  # its OpenSSL: SHA-256 by the built-in module (record/store.py `sha256`)
    "shutil",  # only to delete runs (it imports bz2 and lzma)
    "jsonschema",
    "rich",
    "grandalf",
    # model/records.py's `record` instead of dataclasses, which imports inspect (and ast,
    # dis, tokenize, linecache with it); errors.Diagnostic is written by hand
    "dataclasses",
    "inspect",
    "ast",
    "dis",
    "tokenize",
    "linecache",
    "copy",
    "random",  # a retry's jitter makes its generator when there is one (run/steps.py)
    "ctypes",  # the subreaper's prctl comes from _ctypes (actions/reaper.py `_prctl`)
    # The type checker's names are imported under `TYPE_CHECKING = False` (13 M instructions
    # of every run); the protocols are plain classes at run time, `simulates` asks for the
    # methods of a `Simulation` (run/action_layer.py)
    "typing",
    "string",  # the shell lexer's letters and digits are written out (templates/shell_quote.py)
    "shlex",  # only to split LL_CLAUDE or --claude-flags (actions/slash.py)
    # Actions in `ll`'s own directory start by posix_spawn on Linux: Popen, and what its module
    # imports, only where it is used (actions/process.py; 10 M instructions of every run)
    "subprocess",
    "locale",
    "selectors",
    "_posixsubprocess",
)

LIST_MODULES = (
    "import json, sys\nfrom little_loops.entry import main\nsys.argv[0] = 'll'\n"
    "try:\n    main()\nfinally:\n"
    "    sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)) + '\\n')\n"
)


def modules_of(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `ll ARGS` in a fresh interpreter; what it did and the modules it had loaded."""
    proc = subprocess.run(
        [sys.executable, "-c", LIST_MODULES, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    line = proc.stderr.rpartition("\nMODULES ")[2]
    return proc, set(json.loads(line))


# What a run of a file whose bytes are in the parse cache (load/source.py) does without:
# PyYAML, and what only its import needs.
NOT_LOADED_AGAIN = (
    "yaml",
    "datetime",  # PyYAML's timestamps; the renderer reads ll's own times itself
    "base64",  # PyYAML's binary values
)


def test_a_plain_run_loads_no_optional_module(tmp_path: Path) -> None:
    (tmp_path / "two.yaml").write_text(TWO, encoding="utf-8")
    proc, modules = modules_of(tmp_path, "run", "-q", "two.yaml")
    assert proc.returncode == 0, proc.stderr
    loaded = sorted(m for m in modules if m.split(".")[0] in NOT_LOADED or m in NOT_LOADED)
    assert not loaded, f"a plain `ll run` imported {loaded}: import them where they are used"
    # The first run of a file in plain YAML reads it without PyYAML (load/plain_yaml.py):
    # its import was most of what a first run cost over the next ones (44 M instructions).
    first = sorted(m for m in modules if m.split(".")[0] in NOT_LOADED_AGAIN)
    assert not first, f"the first run of a plain file imported {first}"
    assert "little_loops.load.plain_yaml" in modules


def test_a_first_run_of_a_file_beyond_plain_yaml_reads_it_with_pyyaml(tmp_path: Path) -> None:
    (tmp_path / "anchor.yaml").write_text(ANCHORED, encoding="utf-8")
    proc, modules = modules_of(tmp_path, "run", "-q", "anchor.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "yaml" in modules


FIRST_RUN_PATTERN = (
    "import sys\nfrom little_loops.entry import main\nsys.argv[0] = 'll'\n"
    "try:\n    main()\nfinally:\n"
    "    from little_loops.load.composer import _FORBIDDEN\n"
    "    pattern = sys.modules['yaml'].reader.Reader.NON_PRINTABLE.pattern\n"
    "    sys.stderr.write(f'\\nDIRECT {pattern == _FORBIDDEN}\\n')\n"
)


def test_a_first_run_imports_pyyaml_without_its_slow_pattern(tmp_path: Path) -> None:
    """load/composer.py `yaml_module`: the reader's pattern is compiled in its cheap form
    (57 M instructions less; tests/load/test_composer_yaml.py proves it the same set)."""
    (tmp_path / "two.yaml").write_text(ANCHORED, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_RUN_PATTERN, "run", "-q", "two.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "two.yaml")},  # no caches
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.endswith("\nDIRECT True\n"), proc.stderr


def test_a_second_run_of_the_same_file_does_without_yaml(tmp_path: Path) -> None:
    (tmp_path / "two.yaml").write_text(TWO, encoding="utf-8")
    first, _ = modules_of(tmp_path, "run", "-q", "two.yaml")
    proc, modules = modules_of(tmp_path, "run", "-q", "two.yaml")
    assert first.returncode == proc.returncode == 0, proc.stderr
    loaded = sorted(m for m in modules if m.split(".")[0] in NOT_LOADED_AGAIN)
    assert not loaded, f"a run of a cached file imported {loaded}"
    assert "little_loops.load.plain_yaml" not in modules  # the parse cache had it
    # The records' `__init__`s come compiled with the package (model/_inits.py): none was
    # compiled, so the code cache (model/records.py `use_code_cache`) was not written.
    assert not Path(os.environ["HOME"], ".cache", "little-loops", "inits").exists()
    # An edit is seen: other bytes are composed again.
    (tmp_path / "two.yaml").write_text(TWO.replace("'true'", "'exit 3'"), encoding="utf-8")
    edited, modules = modules_of(tmp_path, "run", "-q", "two.yaml")
    assert edited.returncode == 3, edited.stderr
    (tmp_path / "two.yaml").write_text(ANCHORED, encoding="utf-8")  # composed by PyYAML
    again, modules = modules_of(tmp_path, "run", "-q", "two.yaml")
    assert again.returncode == 0, again.stderr
    assert "yaml" in modules
    again, modules = modules_of(tmp_path, "run", "-q", "two.yaml")  # now from the cache
    assert "yaml" not in modules


COUNT_COMPILES = (
    "import builtins, json, sys\nfrom little_loops.entry import main\nsys.argv[0] = 'll'\n"
    "made = []\ncompile_source = builtins.compile\n"
    "def counted(source, *args, **kwargs):\n"
    "    made.append(str(source)[:80])\n"
    "    return compile_source(source, *args, **kwargs)\n"
    "builtins.compile = counted\n"
    "try:\n    main()\nfinally:\n"
    "    sys.stderr.write('\\nCOMPILED ' + json.dumps(made) + '\\n')\n"
)


def test_a_run_compiles_no_code(tmp_path: Path) -> None:
    """Counted work: a run compiles nothing, its first (no caches) as the next ones. The
    records' `__init__`s come compiled with the package (model/_inits.py; about 30 compiled
    by a first run before); the evaluators' configs were NamedTuples, whose annotations
    `typing` compiled one by one in every run (35 compilations, 11 M instructions)."""
    (tmp_path / "two.yaml").write_text(TWO, encoding="utf-8")
    argv = [sys.executable, "-c", COUNT_COMPILES, "run", "-q", "two.yaml"]
    for caches in ({"XDG_CACHE_HOME": str(tmp_path / "two.yaml")}, {}, {}):
        env = {**os.environ, **caches}
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stderr.rpartition("\nCOMPILED ")[2]) == [], caches


def test_a_run_with_a_question_and_a_fork_loads_them_when_it_gets_there(
    project: Project,
) -> None:
    """The kinds imported on the way (run/kinds.py `_Later`) work as the others do."""
    project.write(
        "both.yaml",
        """\
        name: both
        initial: fork
        states:
          fork:
            parallel:
              one: {action: "echo one"}
              two: {action: "echo two"}
            next: ask
          ask:
            ask: "Ship it?"
            choices: [ship, wait]
            route: {ship: done, wait: done}
          done: {terminal: true}
        """,
    )
    result = project.ll("run", "both.yaml", "--answer", "ask=ship")
    assert result.returncode == 0, result.stderr
    assert "success at 'done'" in result.stdout + result.stderr


def test_every_command_is_listed_and_found() -> None:
    """The commands of cli/'s other modules are loaded by name (cli/main.py `ELSEWHERE`):
    every one of them is there, under the module that defines it."""
    from importlib import import_module

    from click.testing import CliRunner

    from little_loops.cli.main import ELSEWHERE, main

    for module in set(ELSEWHERE.values()):
        names = {c.name for c in import_module(f"little_loops.cli.{module}").COMMANDS}
        assert names == {n for n, m in ELSEWHERE.items() if m == module}, module
    listed = CliRunner().invoke(main, ["--help"], prog_name="ll", terminal_width=200).output
    for name in [*ELSEWHERE, "run", "resume", "validate"]:
        assert f"\n  {name} " in listed, name


@pytest.mark.parametrize("command", ["status", "list", "schema"])
def test_a_command_of_another_module_runs(project: Project, command: str) -> None:
    result = project.ll(command)
    assert "No such command" not in result.stderr
    assert result.returncode in (0, 3), result.stderr


FAIL = "name: fail\ninitial: a\nstates:\n  a: {action: 'exit 3', next: b}\n  b: {terminal: true}\n"
CONTEXT = (
    "name: ctx\ninitial: a\ncontext: {who: world}\nstates:\n"
    "  a: {action: 'echo hello ${context.who}', next: b}\n  b: {terminal: true}\n"
)
BAD = "name: bad\ninitial: a\nstates:\n  a: {action: 'true', next: nowhere}\n"

FAST = [
    ["run", "two.yaml"],
    ["run", "-q", "two.yaml"],
    ["run", "--json", "two.yaml"],
    ["run", "two.yaml", "--quiet", "--max-iterations", "1"],
    ["run", "-v", "ctx.yaml", "--set", "who=you"],
    ["run", "--verbose", "ctx.yaml", "--set=who=me", "--max-iterations=3"],
    ["run", "fail.yaml"],
    ["run", "bad.yaml"],
    ["run", "missing.yaml"],
    ["run", "--", "two.yaml"],
]
TO_CLICK = [
    ["run", "ctx.yaml", "--set", "nobody=1"],  # a usage error found by the checks
    ["run", "ctx.yaml", "--set", "no-equals"],
    ["run", "two.yaml", "--max-iterations", "0"],
    ["run", "two.yaml", "--max-iterations"],
    ["run", "-qv", "two.yaml"],
    ["run", "two.yaml", "--dry-run"],
    ["run"],
    ["run", "two.yaml", "ctx.yaml"],
]


def _same(text: str) -> str:
    """Output with what differs from run to run (ids, durations) blanked."""
    text = re.sub(r"\d{8}-\d{6}-[\w.-]+?-[0-9a-f]{4}", "RUN", text)
    text = re.sub(r'"(ts|\w+_ms)":("[^"]*"|[\d.]+)', r'"\1":X', text)
    return re.sub(r"\d+(\.\d+)? ?(ms|s)\b", "T", text)


@pytest.mark.parametrize("args", FAST + TO_CLICK, ids=" ".join)
def test_run_without_click_says_and_does_what_click_does(tmp_path: Path, args: list[str]) -> None:
    for name, text in (("two", TWO), ("fail", FAIL), ("ctx", CONTEXT), ("bad", BAD)):
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
    fast, fast_modules = modules_of(tmp_path, *args)
    slow, slow_modules = modules_of(tmp_path, *args, env={"LL_JOBS": "8"})
    assert "click" in slow_modules
    assert ("click" in fast_modules) == (args in TO_CLICK), "took the wrong path"
    assert fast.returncode == slow.returncode, (fast.stderr, slow.stderr)
    assert _same(fast.stdout) == _same(slow.stdout)
    strip = re.compile(r"\nMODULES .*", re.DOTALL)
    assert _same(strip.sub("", fast.stderr)) == _same(strip.sub("", slow.stderr))
