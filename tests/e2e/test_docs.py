"""The docs say only what is true: snippets load, links resolve, commands exist, codes agree.

Conventions for fenced ```yaml blocks in README.md and docs/*.md:

- a block whose top level has `states:` or `paradigm:` is a whole loop file and must load with
  no diagnostics at all (no errors, no warnings);
- a block whose first line starts with `# partial` is a fragment: it only has to be YAML;
- a block whose first (or, after a modeline, second) line starts with `# invalid` shows a
  mistake on purpose: it must be YAML and the loader must reject it;
- anything else (GitHub Actions workflows, GitLab CI, judge schemas) only has to be YAML.

docs/loop-reference.md's whole loops are loaded by tests/load/test_schema.py
(test_every_full_reference_snippet_validates), so they are not loaded again here.
"""

from __future__ import annotations

import copy
import functools
import re
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LOADED_ELSEWHERE = {REPO / "docs" / "loop-reference.md"}
PARADIGM_PENDING = "paradigm files are not supported yet"
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<lang>[\w+-]*)")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it starts, its language and its dedented text."""

    path: Path
    line: int
    end: int
    lang: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, indented ones (inside list items) included."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, fence = len(match["indent"]), match["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^ *{re.escape(fence)}\s*$", lines[j]):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        assert j < len(lines), f"{path.relative_to(REPO)}:{i + 1}: unclosed code fence"
        found.append(Block(path, i + 1, j + 1, match["lang"], "\n".join(body) + "\n"))
        i = j + 1
    return found


def outside_blocks(path: Path, langs: tuple[str, ...] | None = None) -> str:
    """The file with its fenced blocks (or only those in `langs`) blanked out, lines kept."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for block in blocks(path):
        if langs is None or block.lang in langs:
            lines[block.line - 1 : block.end] = [""] * (block.end - block.line + 1)
    return "\n".join(lines)


def prose(path: Path) -> str:
    """The file without its fenced blocks, for links."""
    return outside_blocks(path)


YAML_BLOCKS = [b for path in DOCS for b in blocks(path) if b.lang in ("yaml", "yml")]


@functools.cache
def _parsed(text: str) -> Any:
    return yaml.safe_load(text)


def yaml_of(text: str) -> Any:
    """A docs block's YAML, parsed once for the three modules that read every block at
    collection (this one, test_doc_loops.py, test_action.py), each caller given its own
    copy. A block that is not YAML raises `yaml.YAMLError`, each time."""
    return copy.deepcopy(_parsed(text))


def kind(block: Block) -> str:
    first = block.text.lstrip().split("\n", 1)[0]
    if first.startswith("# partial"):
        return "partial"
    # `# invalid` may follow a yaml-language-server modeline, which must come first
    head = block.text.lstrip().split("\n", 2)[:2]
    if any(line.startswith("# invalid") for line in head):
        return "invalid"
    try:
        doc = yaml_of(block.text)
    except yaml.YAMLError:
        return "broken"  # test_yaml_block_is_yaml says where
    if isinstance(doc, dict) and ("states" in doc or "paradigm" in doc):
        return "loop"
    return "other"


def test_the_docs_hold_yaml_of_every_kind() -> None:
    kinds = {kind(b) for b in YAML_BLOCKS}
    assert kinds >= {"loop", "partial", "invalid", "other"}


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=lambda b: b.id)
def test_yaml_block_is_yaml(block: Block) -> None:
    yaml.safe_load(block.text)


LOOP_BLOCKS = [
    b for b in YAML_BLOCKS if kind(b) in ("loop", "invalid") and b.path not in LOADED_ELSEWHERE
]


@pytest.mark.parametrize("block", LOOP_BLOCKS, ids=lambda b: b.id)
def test_loop_snippet_loads(block: Block, tmp_path: Path) -> None:
    from little_loops.load.loader import try_load

    path = tmp_path / "loop.yaml"
    path.write_text(block.text, encoding="utf-8")
    loop, diagnostics = try_load(path)
    messages = [d.format() for d in diagnostics]
    if kind(block) == "invalid":
        assert loop is None, f"{block.id}: marked '# invalid' but it loads"
        return
    if any(PARADIGM_PENDING in m for m in messages):
        pytest.xfail("the paradigm compiler is pending")
    assert messages == [], block.id
    assert loop is not None


def test_at_least_twenty_loop_snippets_are_checked() -> None:
    assert len([b for b in LOOP_BLOCKS if kind(b) == "loop"]) >= 20


# Links: [text](target) outside code; a target with a scheme is not checked.
LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]{2,}|`", "", heading.strip()).lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in ("L", "N"))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = prose(path)
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.M):
        base = slug(heading)
        name, n = base, 1
        while name in found:
            name, n = f"{base}-{n}", n + 1
        found.add(name)
    return found


def links() -> list[tuple[Path, str]]:
    return [(p, m["target"]) for p in DOCS for m in LINK.finditer(prose(p))]


def test_the_docs_link_to_each_other() -> None:
    assert len(links()) >= 20


@pytest.mark.parametrize(("path", "target"), links(), ids=[f"{p.name}->{t}" for p, t in links()])
def test_relative_link_resolves(path: Path, target: str) -> None:
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        return  # https:, mailto:
    file_part, _, anchor = target.partition("#")
    dest = (path.parent / file_part).resolve() if file_part else path
    assert dest.exists(), f"{path.relative_to(REPO)}: link to missing {target}"
    if anchor and dest.suffix == ".md":
        where = path.relative_to(REPO)
        assert anchor in anchors(dest), f"{where}: no heading #{anchor} in {dest.name}"


def test_slug_follows_github() -> None:
    assert slug("`llm_structured`: the judge") == "llm_structured-the-judge"
    assert slug("Retry with backoff") == "retry-with-backoff"
    assert slug("5. What `.loops/` holds") == "5-what-loops-holds"


def ll_commands() -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "little_loops", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    section = out.split("Commands:", 1)[1]
    return set(re.findall(r"^  ([a-z][a-z-]*)\b", section, re.M))


# `ll run`, `.venv/bin/ll run`; not `ll gr<Tab>` (a word being completed)
MENTION = re.compile(r"(?:(?<![\w./-])|/bin/)ll ([a-z][a-z-]*)(?![\w<-])")


def without_output(path: Path) -> str:
    """The file without its ```text blocks: printed output may say "run ll as a user"."""
    return outside_blocks(path, ("text",))


def test_every_ll_command_in_the_docs_exists() -> None:
    known = ll_commands()
    assert {"run", "validate", "resume", "schema"} <= known
    mentions = [(p, m[1]) for p in DOCS for m in MENTION.finditer(without_output(p))]
    assert {"run", "validate", "resume", "schema", "init", "logs"} <= {n for _, n in mentions}
    unknown = sorted(f"{p.relative_to(REPO)}: ll {n}" for p, n in mentions if n not in known)
    assert unknown == []


SHIPPED = sorted((REPO / "loops").glob("*.y*ml"))
MODELINE = "# yaml-language-server: $schema="


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_loop_starts_with_the_schema_modeline(path: Path) -> None:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    assert first.startswith(MODELINE), f"{path.name}: first line is {first!r}"
    schema = (path.parent / first[len(MODELINE) :].strip()).resolve()
    assert schema == REPO / "schemas" / "loop.schema.json"


def exit_code_tables() -> list[tuple[Path, set[str]]]:
    """(file, codes) for every Markdown table whose first column is headed `code`."""
    tables = []
    for path in DOCS:
        rows: list[list[str]] = []
        for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
            if line.lstrip().startswith("|"):
                rows.append([c.strip().strip("`*") for c in line.strip().strip("|").split("|")])
                continue
            if rows and rows[0][0].lower() in ("code", "exit code", "exit"):
                tables.append((path, {r[0] for r in rows[2:]}))
            rows = []
    return tables


def run_help_codes() -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "little_loops", "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    said = " ".join(out.split("Exit codes:", 1)[1].split("Example", 1)[0].split())
    return set(re.findall(r"\b(\d+) [a-z]", said))


def test_exit_code_tables_list_every_code_of_ll_run() -> None:
    codes = run_help_codes()
    assert {"0", "1", "2", "3", "4", "5", "124", "130", "143"} <= codes
    tables = exit_code_tables()
    assert {p.name for p, _ in tables} >= {"ci.md", "troubleshooting.md"}
    for path, listed in tables:
        assert "5" in listed, path.name
        assert codes <= listed, (path.name, sorted(codes - listed))


def test_documentation_list_links_every_doc() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Documentation", 1)[1].split("\n## ", 1)[0]
    linked = {t for t in re.findall(r"\]\(([^)#]+)", section)}
    docs = {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert docs <= linked, sorted(docs - linked)
