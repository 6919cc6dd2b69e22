"""The public surface: the package exports its version only (README, "Public interface")."""

from __future__ import annotations

import types
from pathlib import Path

import little_loops

REPO = Path(__file__).resolve().parent.parent


def test_exported_members() -> None:
    # Everything public at the top of the package, submodules aside, is in __all__ and no more.
    public = {
        name
        for name, value in vars(little_loops).items()
        if not isinstance(value, types.ModuleType)
        and (not name.startswith("_") or name == "__version__")
    }
    assert sorted(little_loops.__all__) == sorted(public) == ["__version__"]


def test_the_readme_says_the_cli_and_file_formats_are_the_interface() -> None:
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    section = readme.split("## Public interface", 1)[1].split(" ## ", 1)[0]
    assert "the `ll` command" in section
    assert "the file formats" in section
    assert "not an API" in section
    for name in ("CHANGELOG.md", "CONTRIBUTING.md"):
        assert (REPO / name).exists()
