"""Sessions beyond the README's test command; .ci/run runs none of them.

    nox -s tests      the suite on the pinned releases (constraints/test.txt), as CI runs it
    nox -s latest     the suite on the newest releases pyproject.toml allows, no constraints
    nox -s minimums   the suite on the lowest versions pyproject.toml allows (scripts/minimums.py)
    nox -s gates      ruff, ruff format --check, mypy --strict, lint-imports, on the pinned releases

Install nox once (`pipx install nox`, or `pip install nox` in any virtualenv). Arguments after
`--` go to pytest: `nox -s latest -- -m "not slow"`. CONTRIBUTING.md says when to run which.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "gates"]
nox.options.default_venv_backend = "venv"

PINS = "constraints/test.txt"
PYTEST = ("python", "-m", "pytest", "-q", "-n", "auto")


@nox.session
def tests(session: nox.Session) -> None:
    session.install("-c", PINS, "-e", ".[test]")
    session.run(*PYTEST, *session.posargs)


@nox.session
def latest(session: nox.Session) -> None:
    session.install("--upgrade", "--upgrade-strategy", "eager", "-e", ".[test]")
    session.run("python", "-m", "pip", "list", "--format", "freeze")
    session.run(*PYTEST, *session.posargs)


@nox.session
def minimums(session: nox.Session) -> None:
    session.install("packaging")
    lowest = session.run("python", "scripts/minimums.py", silent=True)
    path = f"{session.create_tmp()}/minimums.txt"
    with open(path, "w", encoding="utf-8") as out:
        out.write(str(lowest))
    session.install("-c", path, "-e", ".[test]")
    session.run("python", "-m", "pip", "list", "--format", "freeze")
    session.run(*PYTEST, *session.posargs)


@nox.session
def gates(session: nox.Session) -> None:
    session.install("-c", PINS, "-e", ".[test]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    session.run("lint-imports")
