"""Every install line in the docs installs this project, and both command names answer.

The distribution is `little-loops-fsm`: `little-loops` on the package index is an unrelated
project. An install line is any `pip install` in a fenced block of README.md or docs/*.md; its
requirements must be local paths (a checkout or a wheel built from one). The slow test runs
each distinct line in a fresh virtualenv, in a copy of this checkout laid out as the docs say
(`dist/` holds a wheel built from it, `tools/little-loops` is the submodule of docs/ci.md).

To keep the slow test within its budget, the fresh virtualenvs see this test environment's
third-party packages (pip, click, anthropic...) through a `.pth` file, so pip finds the
dependencies already satisfied and builds only this project. Our own distribution is left out
of what they see, so `ll` can only come from the line under test.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from project import copy_checkout, shared_dir

from little_loops import __version__

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
DIST = "little-loops-fsm"
INSTALL = re.compile(r"\b(?:pip3?|pipx) install\b(?P<args>[^&;|#\n]*)")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
# pip options whose value is not a requirement
VALUED = {"-r", "--requirement", "-c", "--constraint", "-t", "--target", "--prefix", "--root"}
VALUED |= {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--python"}
QUIET = {"-q", "-qq", "--quiet"}


@dataclass(frozen=True)
class Line:
    """One `pip install` in the docs: where it is and its arguments as written."""

    where: str
    args: str

    @property
    def key(self) -> str:
        """The arguments without quiet flags: lines that differ only in noise run once."""
        return " ".join(a for a in shlex.split(self.args) if a not in QUIET)


def install_lines(path: Path, root: Path = REPO) -> Iterator[Line]:
    """Every `pip install` inside a fenced block of a Markdown file."""
    fence = ""
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = FENCE.match(text)
        if match and (not fence or match[1].startswith(fence)):
            fence = "" if fence else match[1]
            continue
        if fence:
            for found in INSTALL.finditer(text):
                where = f"{path.relative_to(root)}:{number}"
                yield Line(where, found["args"].strip())


def requirements(args: str) -> list[str]:
    """The things a pip command line installs (options and their values left out)."""
    words, wanted = shlex.split(args), []
    rest = iter(words)
    for word in rest:
        if word in VALUED:
            next(rest, None)
        elif word in ("-e", "--editable"):
            wanted.append(next(rest, ""))
        elif not word.startswith("-"):
            wanted.append(word)
    return wanted


def problems(line: Line) -> list[str]:
    """Why a documented install line would not install this project, if it would not."""
    wanted = requirements(line.args)
    if not wanted:
        return [f"{line.where}: `pip install {line.args}` installs nothing"]
    found = []
    for req in wanted:
        path = req.split("[", 1)[0]
        if "://" in path or not (path.startswith((".", "/", "~")) or "/" in path):
            found.append(
                f"{line.where}: `pip install {line.args}` installs {req!r} from the package "
                f"index, where little-loops is an unrelated project; install this checkout "
                f"(`pip install .`) or a wheel built from it (`pip install dist/*.whl`)"
            )
    return found


LINES = [line for path in DOCS for line in install_lines(path)]


def test_the_docs_install_from_the_checkout() -> None:
    places = {line.where.split(":")[0] for line in LINES}
    assert {"README.md", "docs/getting-started.md", "docs/ci.md"} <= places
    assert [p for line in LINES for p in problems(line)] == []


def test_an_index_name_is_caught() -> None:
    line = Line("docs/ci.md:67", "little-loops")
    assert problems(line) == [
        "docs/ci.md:67: `pip install little-loops` installs 'little-loops' from the package "
        "index, where little-loops is an unrelated project; install this checkout "
        "(`pip install .`) or a wheel built from it (`pip install dist/*.whl`)"
    ]
    assert problems(Line("x:1", "-q -e '.[test]'")) == []
    assert problems(Line("x:1", "--upgrade pip little-loops-fsm"))[0].count("from the package") == 1
    assert len(problems(Line("x:1", "git+https://example.invalid/little-loops"))) == 1


def test_install_lines_are_found_in_every_kind_of_block(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "Prose: `pip install foo` is not a line to run.\n"
        "```sh\npython3 -m venv .venv && .venv/bin/pip install -q . && ll run a.yaml\n```\n"
        "~~~yaml\n      - run: python -m pip install ./tools/little-loops  # pinned\n~~~\n"
        "    ```sh\n    pip3 install dist/*.whl\n    ```\n"
    )
    found = [(line.where.split(":")[1], line.args) for line in install_lines(doc, tmp_path)]
    assert found == [("3", "-q ."), ("6", "./tools/little-loops"), ("9", "dist/*.whl")]


def test_readme_says_how_to_get_ll_on_path_and_what_not_to_install() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    after = quick.split("<!-- test-command -->", 1)[1].split("```", 2)[2]  # prose after both
    assert "`. .venv/bin/activate`" in after
    assert "`little-loops`" in after
    assert "never with `pip install little-loops`" in " ".join(after.split())


def test_pyproject_names_the_distribution_and_both_commands() -> None:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^name = "(.+)"$', project, re.M)[1] == DIST  # type: ignore[index]
    scripts = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    commands = dict(re.findall(r'^([\w-]+) = "(.+)"$', scripts, re.M))
    assert commands == {"ll": "little_loops.entry:main", "little-loops": "little_loops.entry:main"}


def _as(name: str, *args: str, columns: str = "100") -> subprocess.CompletedProcess[str]:
    """The entry point run the way a console script named `name` runs it."""
    code = f"import sys\nsys.argv[0] = {name!r}\nfrom little_loops.entry import main\nmain()\n"
    env = {**os.environ, "COLUMNS": columns}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize("name", ["ll", "little-loops"])
@pytest.mark.parametrize("columns", ["100", "60"])  # the copied help page, and click's own
def test_help_and_version_say_the_name_they_were_run_under(name: str, columns: str) -> None:
    prog = f"/somewhere/bin/{name}"
    assert _as(prog, "--version").stdout == f"{name}, version {__version__}\n"
    assert _as(prog, "--help", columns=columns).stdout.startswith(f"Usage: {name} [OPTIONS]")
    assert _as(prog, "run", "--help").stdout.startswith(f"Usage: {name} run [OPTIONS] FILE")


def test_python_m_is_ll(ll_cmd: list[str]) -> None:
    proc = subprocess.run(
        [*ll_cmd, "run", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.startswith("Usage: ll run [OPTIONS] FILE")


TINY = """\
name: tiny
initial: check
on_error: failed
states:
  check:
    action: echo ok
    on_success: done
    on_failure: failed
  done: {terminal: true}
  failed: {terminal: true, outcome: failure}
"""


def test_little_loops_command_runs_a_loop(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "little-loops"
    assert script.exists(), (
        f"{script} is missing: pyproject.toml gained the little-loops command; "
        "run .venv/bin/pip install -e '.[test]' again"
    )
    (tmp_path / "tiny.yaml").write_text(TINY)
    proc = subprocess.run(
        [str(script), "run", "tiny.yaml", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    last = json.loads(proc.stdout.splitlines()[-1])
    assert (last["event"], last["final_state"], last["outcome"]) == (
        "loop_complete",
        "done",
        "success",
    )


@dataclass(frozen=True)
class Layout:
    """A copy of this checkout as the docs describe it, and what fresh venvs may borrow."""

    work: Path
    deps: Path
    cache: Path


@pytest.fixture(scope="session")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    # Made once a session for every xdist worker (the copies and the wheel: about 8 CPU
    # seconds each time). The tests only read it: each installs into a venv of its own, and
    # the build backend (flit_core) writes nothing into the tree it builds.
    with shared_dir(tmp_path_factory, "install") as (root, first):
        work, deps, cache = root / "little-loops", root / "deps", root / "pip-cache"
        if first:
            copy_checkout(work)
            copy_checkout(work / "tools" / "little-loops")  # docs/ci.md's submodule
            env = {**os.environ, "PIP_CACHE_DIR": str(cache)}
            wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", "dist", "."]
            subprocess.run(wheel, cwd=work, env=env, check=True, capture_output=True, timeout=300)
            # Everything this environment has installed, except this project.
            deps.mkdir()
            for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
                if not entry.name.startswith(("little_loops", "little-loops", "__editable__")):
                    (deps / entry.name).symlink_to(entry)
    return Layout(work, deps, cache)


@pytest.mark.slow
@pytest.mark.integration
def test_the_wheel_holds_the_package_and_the_build_leaves_the_checkout_alone(
    layout: Layout,
) -> None:
    """The build backend (flit_core) zips the package: the wheel `pip wheel .` built in the copy
    holds every file of little_loops/ (the code, py.typed, loop.schema.json, data/), both
    commands and the licence, and the build wrote nothing into the tree (setuptools left
    `build/` and an egg-info there, which two builds at once overwrote)."""
    written = [p.name for p in layout.work.iterdir() if p.name == "build" or "egg-info" in p.name]
    assert written == []
    (wheel,) = (layout.work / "dist").glob("little_loops_fsm-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(f"{info}/METADATA").decode()
        commands = archive.read(f"{info}/entry_points.txt").decode()
    package = layout.work / "little_loops"
    files = {
        p.relative_to(layout.work).as_posix()
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert {n for n in names if not n.startswith(info)} == files
    for data in ("py.typed", "loop.schema.json", "data/report.html", "data/prices.json"):
        assert f"little_loops/{data}" in files
    assert f"Name: {DIST}\n" in metadata
    assert "License-Expression: MIT\n" in metadata
    found = dict(re.findall(r"^([\w-]+) ?= ?(\S+)$", commands, re.M))
    assert found == {"ll": "little_loops.entry:main", "little-loops": "little_loops.entry:main"}


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize(
    "args", sorted({line.key for line in LINES}), ids=lambda a: a.replace(" ", "_")
)
def test_documented_install_line_installs_both_commands(
    args: str, layout: Layout, tmp_path: Path
) -> None:
    same = [line for line in LINES if line.key == args]
    where = ", ".join(line.where for line in same)
    # Never run a line that would fetch a stranger's package (the fast test says which).
    assert [p for line in same for p in problems(line)] == []
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "borrowed.pth").write_text(f"{layout.deps}\n")
    env = {**os.environ, "PIP_CACHE_DIR": str(layout.cache), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    install = subprocess.run(
        f"{shlex.quote(str(python))} -m pip install {args}",
        shell=True, cwd=layout.work, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, f"{where}: pip install {args}\n{install.stderr[-3000:]}"
    for name in ("ll", "little-loops"):
        proc = subprocess.run(
            [str(venv / "bin" / name), "--version"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.stdout == f"{name}, version {__version__}\n", f"{where}: {proc.stderr}"
    where_from = subprocess.run(
        [str(python), "-c", "import little_loops; print(little_loops.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    # From the venv (a regular install) or the copied checkout (editable), never from here.
    assert Path(where_from).is_relative_to(venv) or Path(where_from).is_relative_to(layout.work)
