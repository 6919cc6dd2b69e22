"""load/plain_yaml.py reads the plain part of YAML without PyYAML (issue 27: a file's first
run); whatever it reads, it reads exactly as PyYAML and the composer do.

The oracle is `composer.compose_yaml` (PyYAML's parser and the composer): for every document
`compose_plain` answers, the values (with their types), every node's and key's position and
the comments noted must be the same, and PyYAML must find no error. Documents outside the part
(or wrong) must get None, so that their diagnostics come from PyYAML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from little_loops.load.composer import compose, compose_yaml
from little_loops.load.plain_yaml import compose_plain

REPO = Path(__file__).resolve().parents[2]


def typed(value: Any) -> Any:
    """A value with the type of every scalar beside it: `1`, `1.0` and `True` differ."""
    if isinstance(value, dict):
        return ("map", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("seq", [typed(v) for v in value])
    return (type(value).__name__, value)


def same_as_pyyaml(text: str) -> bool:
    """Whether `compose_plain` read `text` (it must then agree with PyYAML in everything)."""
    fast = compose_plain(text)
    if fast is None:
        return False
    doc, smap, diagnostics, complete = compose_yaml(text, "f.yaml")
    assert complete
    assert diagnostics == [], text
    assert typed(fast[0]) == typed(doc), text
    assert fast[1].values == smap.values, text
    assert fast[1].keys == smap.keys, text
    assert fast[1].comments == smap.comments, text
    return True


def loop_files() -> list[Path]:
    found = [*REPO.glob("loops/**/*.yaml"), *REPO.glob("tests/**/*.yaml")]
    return sorted(p for p in found if ".venv" not in p.parts)


UPSTREAM = REPO.parent / "shared" / "upstream-loops"  # never copied into the project


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="../shared/upstream-loops is not here")
def test_upstream_loop_files_read_the_same_or_are_left_to_pyyaml() -> None:
    # Files written by other people, for another runner, that this reader was not tuned to:
    # each is read exactly as PyYAML reads it, or left to PyYAML.
    files = sorted(UPSTREAM.glob("*.yaml"))
    assert len(files) > 50
    read = [p for p in files if same_as_pyyaml(p.read_text(encoding="utf-8"))]
    assert read, "some upstream files are plain YAML"


def test_every_loop_file_of_the_repository_reads_the_same() -> None:
    files = loop_files()
    assert len(files) > 20
    read = [p for p in files if same_as_pyyaml(p.read_text(encoding="utf-8"))]
    assert len(read) >= len(files) * 3 // 4, "most loop files are plain YAML"


PLAIN = [
    "name: two\ninitial: a\nstates:\n  a: {action: 'true', next: b}\n  b: {terminal: true}\n",
    "a: 1\nb: -2\nc: 0.5\nd: yes\ne: Off\nf: ~\ng: null\nh: text # note\ni: ./run.sh\n",
    "a:\n- 1\n- x\nb:\n  - c: d\n    e: f\n  - [g, 'h''s', \"i\\tj\"]\n",
    "a: |\n  one\n\n  two\n\nb: >-\n  three\n  four\n\n  five\nc: |-\n  six\n    seven\n",
    'a:   # empty\nb:\n# between\nc: {}\nd: []\ne: ""\n',
    "key with spaces: value: no\n",  # an error: PyYAML's
    "a: 'x\n  y'\n",  # a quoted scalar on two lines
    "a: b\n  c\n",  # a plain scalar on two lines
    "a: 1\na: 2\n",  # a duplicate
    "a: &x 1\nb: *x\n",
    "a: !!str 1\n",
    "- a\n- b\n",
    "a: 0x1f\nb: 1:30\nc: 2026-01-01\nd: .inf\ne: 1_000\nf: 010\n",
    "a: '<<'\n<<: {b: 1}\n",
    "a: |+\n  x\n\n",
    "a: >\n  x\n    y\n  z\n",
    "---\na: 1\n",
    "a:\tb\n",
    'a: "\\x41"\n',
]


@pytest.mark.parametrize("text", PLAIN)
def test_examples_read_the_same_or_are_left_to_pyyaml(text: str) -> None:
    same_as_pyyaml(text)


def test_what_is_read_here_and_what_is_not() -> None:
    assert same_as_pyyaml(PLAIN[0])
    assert same_as_pyyaml(PLAIN[1])
    assert same_as_pyyaml(PLAIN[2])
    assert same_as_pyyaml(PLAIN[3])
    assert same_as_pyyaml(PLAIN[4])
    for text in PLAIN[5:]:
        assert compose_plain(text) is None, text


def test_errors_come_from_pyyaml() -> None:
    """`compose` of a wrong file says what PyYAML's reading says, word for word."""
    for text in ("a: 1\na: 2\n", "a: b\n c: d\n", "a: 'x\n", "a: b: c\n"):
        assert compose(text, "f.yaml")[2] == compose_yaml(text, "f.yaml")[2] != []


# -- generated documents --------------------------------------------------------------------

ATOMS = [
    "a", "b", "x y", "yes", "No", "on", "OFF", "true", "null", "Null", "~", "0", "1", "-1",
    "+2", "07", "1.5", "-0.5", ".5", ".inf", "-.inf", ".NaN", "1e3", "1_0", "0x1f", "1:30",
    "2026-01-01", "<<", "=", "<x", "=y", "~x", "./a", "../b", "-", "-x", "?", "?x", ":", ":x",
    "a:b", "a: b", "a #b", "a#b", "#", "'", '"', "''", "\\", "\\n", "it's", "é", "—", "$x",
    "${context.x}", "*", "&", "!", "%", "@", "`", ",", "[", "]", "{", "}", "|", ">", " ",
    "  ", "a ", " a", "\t", "\u2028",
]  # fmt: skip
KEYS = ["a", "b", "k", "on", "y", "2", "a b", "a/b", "x-y", "a.b", "*k", "k*", "'q'", "<<", "a:"]
TAME = ["a", "b c", "yes", "No", "~", "null", "0", "12", "-3", "1.5", "./x", "é", "x#y", "$x"]

text_atom = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=3).map("".join)
tame_atom = st.lists(st.sampled_from(TAME), min_size=1, max_size=2).map(" ".join)


def scalar(draw: st.DrawFn, wild: bool = True) -> str:
    text = draw(text_atom if wild else tame_atom)
    style = draw(st.sampled_from(["plain", "plain", "single", "double", "empty"]))
    if style == "single":
        return "'" + text.replace("'", draw(st.sampled_from(["''", "'"]))) + "'"
    if style == "double":
        return '"' + text.replace('"', draw(st.sampled_from(['\\"', '"']))) + '"'
    if style == "empty":
        return ""
    return text


@st.composite
def flow(draw: st.DrawFn, wild: bool, depth: int = 0) -> str:
    items = []
    is_map = draw(st.booleans())
    for _ in range(draw(st.integers(0, 3))):
        nested = depth < 2 and draw(st.integers(0, 4)) == 0
        item = draw(flow(wild, depth + 1)) if nested else scalar(draw, wild)
        items.append(f"{draw(st.sampled_from(KEYS))}: {item}" if is_map else item)
    sep = draw(st.sampled_from([", ", ",", " , "] if wild else [", "]))
    body = sep.join(items)
    return "{" + body + "}" if is_map else "[" + body + "]"


@st.composite
def block(draw: st.DrawFn, indent: int, depth: int = 0, wild: bool = True) -> list[str]:
    """Lines of a block mapping or sequence at `indent` (`wild`: often not plain YAML)."""
    pad = " " * indent
    lines: list[str] = []
    is_seq = depth > 0 and draw(st.integers(0, 3)) == 0
    keys: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(KEYS if wild else [k for k in KEYS[:10] if k not in keys]))
        keys.append(key)
        head = f"{pad}- " if is_seq else f"{pad}{key}: "
        kind = draw(st.sampled_from(["scalar"] * 4 + ["flow", "block", "nested", "text", "blank"]))
        comment = draw(st.sampled_from(["", "", " # c", "  #c", "#c"] if wild else ["", " # c"]))
        if kind == "scalar":
            lines.append(head + scalar(draw, wild) + comment)
        elif kind == "flow":
            lines.append(head + draw(flow(wild)) + comment)
        elif kind == "block":
            chomps = ["|", "|-", ">", ">-", "|+", "|2"] if wild else ["|", "|-", ">", ">-"]
            lines.append(head + draw(st.sampled_from(chomps)) + comment)
            deeper = " " * (indent + draw(st.integers(1, 3)))
            for _ in range(draw(st.integers(0, 3))):
                extra = draw(st.sampled_from(["", "", " ", "  "]))
                line = draw(st.sampled_from(["", "", "x", "y z", "# n", "a: b"]))
                lines.append(deeper + extra + line if line else draw(st.sampled_from(["", deeper])))
        elif kind == "nested" and depth < 4:
            lines.append(head.rstrip(" ") + comment)
            shift = draw(st.sampled_from([0, 1, 2, 2, 4] if wild else [2, 2, 4]))
            lines.extend(draw(block(indent + shift, depth + 1, wild)))
        elif kind == "text":
            lines.append(head + scalar(draw, wild))
            lines.append(" " * (indent + draw(st.integers(0, 3))) + scalar(draw, wild))
        else:
            lines.append(head.rstrip(" ") + comment)
            lines.append(draw(st.sampled_from(["", pad + "# c", " " * (indent + 3) + "# c"])))
    return lines


ENDS = ["\n", "", "\n\n", "\n  \n"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans().flatmap(lambda wild: block(0, 0, wild)), st.sampled_from(ENDS))
def test_generated_documents_read_the_same(lines: list[str], end: str) -> None:
    same_as_pyyaml("\n".join(lines) + end)
