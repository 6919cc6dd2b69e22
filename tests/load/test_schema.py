"""The JSON Schema: packaged as shipped, fresh against the model and registry, and the fast
interpreter in `little_loops.load.schema` agreeing with jsonschema's Draft 2020-12 validator."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from project import Project

from little_loops.evaluators import EVALUATOR_TYPES
from little_loops.load import schema as schema_mod
from little_loops.model.loop import (
    Evaluate,
    LlmDefaults,
    Loop,
    Retry,
    State,
)

REPO = Path(__file__).resolve().parents[2]
SCHEMA_FILE = REPO / "schemas" / "loop.schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
DEFS = SCHEMA["$defs"]


def fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_packaged_schema_is_the_repository_file() -> None:
    assert schema_mod.schema_text() == SCHEMA_FILE.read_text()
    packaged = REPO / "little_loops" / "loop.schema.json"
    assert packaged.read_bytes() == SCHEMA_FILE.read_bytes()


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_evaluator_types_match_the_registry() -> None:
    enum = DEFS["evaluator"]["properties"]["type"]["enum"]
    branches = [b["if"]["properties"]["type"]["const"] for b in DEFS["evaluator"]["allOf"]]
    assert sorted(enum) == sorted(branches) == sorted(EVALUATOR_TYPES)
    assert len(set(enum)) == len(enum)
    for name in EVALUATOR_TYPES:
        assert DEFS[name]["properties"]["type"] == {
            "const": name,
            "description": DEFS[name]["description"],
        }


def test_state_keys_match_the_state_model() -> None:
    from little_loops.load.builder import SHORTHANDS

    in_model = (fields(State) - {"name", "pos", "routes", "with_"}) | {"route", "with", *SHORTHANDS}
    assert set(DEFS["state"]["properties"]) == in_model


def test_top_level_keys_match_the_loop_model() -> None:
    # `metadata` is for people and tools; the loader never puts it in the model.
    # `inputs` is read from `context`.
    in_model = (fields(Loop) - {"path", "source_sha256", "inputs"}) | {"paradigm", "metadata"}
    assert set(SCHEMA["properties"]) == in_model


def test_evaluator_fields_match_the_evaluate_model() -> None:
    in_schema = set().union(*(DEFS[t]["properties"] for t in EVALUATOR_TYPES))
    assert in_schema == fields(Evaluate) - {"pos"}


@pytest.mark.parametrize(("cls", "name"), [(Retry, "retry"), (LlmDefaults, "llm")])
def test_block_fields_and_defaults_match_the_model(cls: type, name: str) -> None:
    props = DEFS[name]["properties"]
    assert set(props) == fields(cls)
    for f in dataclasses.fields(cls):
        if "default" in props[f.name]:
            default = f.default
            expected = list(default) if isinstance(default, tuple) else default
            assert props[f.name]["default"] == expected, f.name


def test_defaults_match_the_model() -> None:
    loop_defaults = {f.name: f.default for f in dataclasses.fields(Loop)}
    for key in ("max_iterations", "action_timeout", "backoff", "maintain", "shell"):
        assert SCHEMA["properties"][key]["default"] == loop_defaults[key], key
    state_defaults = {f.name: f.default for f in dataclasses.fields(State)}
    for key in ("terminal", "outcome"):
        assert DEFS["state"]["properties"][key]["default"] == state_defaults[key], key
    eval_defaults = {f.name: f.default for f in dataclasses.fields(Evaluate)}
    for t in EVALUATOR_TYPES:
        for key, prop in DEFS[t]["properties"].items():
            if "default" in prop and key != "prompt":
                assert prop["default"] == eval_defaults[key], (t, key)


def walk(node: Any, path: str = "#") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema, with where it is."""
    if not isinstance(node, dict):
        return
    yield path, node
    for key, value in node.items():
        if key in ("properties", "patternProperties", "$defs"):
            for name, sub in value.items():
                yield from walk(sub, f"{path}/{key}/{name}")
        elif key in ("items", "additionalProperties", "propertyNames", "if", "then"):
            yield from walk(value, f"{path}/{key}")
        elif key == "allOf":
            for i, sub in enumerate(value):
                yield from walk(sub, f"{path}/allOf/{i}")


def test_schema_uses_only_keywords_the_fast_interpreter_knows() -> None:
    for where, node in walk(SCHEMA):
        unknown = set(node) - schema_mod.KEYWORDS - schema_mod.ANNOTATIONS
        assert not unknown, (where, unknown)


def test_every_object_is_closed_except_maps_and_the_judge_schema() -> None:
    open_ok = {"#/$defs/llm_structured/properties/schema", "#/$defs/evaluator"}
    for where, node in walk(SCHEMA):
        if node.get("type") == "object" and where not in open_ok:
            assert "additionalProperties" in node, where


def test_every_property_has_a_description() -> None:
    for where, node in walk(SCHEMA):
        for name, prop in node.get("properties", {}).items():
            if "$ref" in prop or ("const" in prop and where.endswith("/if")):
                continue  # described where it is defined / only a discriminator
            if prop == {} and name in SCHEMA["properties"]:
                continue  # a paradigm branch allowing a top-level key described at the top
            assert prop.get("description"), f"{where}/properties/{name}"


def agree(doc: Any) -> None:
    expected = jsonschema.Draft202012Validator(SCHEMA).is_valid(doc)
    assert (schema_mod.schema_issues(doc) == []) is expected, doc


DOCS = [
    {},
    [],
    {"name": "x", "initial": "a", "states": {"a": {"terminal": True}}},
    {"name": "x y", "initial": "a", "states": {"a": {}}},
    {"name": "x", "initial": "a", "states": {}},
    {"name": "x", "initial": "a", "states": {"a": {"evaluate": {"type": "nope"}}}},
    {"name": "x", "initial": "a", "states": {"a": {"evaluate": {"type": "exit_code", "x": 1}}}},
    {"name": "x", "initial": "a", "states": {"a": {"evaluate": {"type": "all", "of": []}}}},
    {
        "name": "x",
        "initial": "a",
        "states": {"a": {"evaluate": {"type": "any", "of": [{"type": "exit_code"}]}}},
    },
    {"name": "x", "initial": "a", "states": {"a": {"retry": {"on": ["error", "error"]}}}},
    {"name": "x", "initial": "a", "states": {"a": {"route": {"Bad": "a"}}}},
    {"name": "x", "initial": "a", "states": {"a": {"timeout": 0}}},
    {"name": "x", "initial": "a", "states": {"a": {"timeout": True}}},
    {"name": "x", "initial": "a", "max_iterations": 2.0, "states": {"a": {}}},
    {"name": "x", "initial": "a", "max_iterations": 2.5, "states": {"a": {}}},
    {"name": "x", "initial": "a", "context": {"k": None}, "states": {"a": {}}},
    {"name": "x", "initial": "a", "llm": {"min_confidence": 1.5}, "states": {"a": {}}},
    {"name": "x", "initial": "a", "paradigm": "fsm", "states": {"a": {"outcome": "fail"}}},
    # metadata is free-form; x- keys are ignored where the format names the keys
    {"name": "x", "initial": "a", "metadata": {"a": [1, {"b": None}]}, "states": {"a": {}}},
    {"name": "x", "initial": "a", "metadata": "ci", "states": {"a": {}}},
    {"name": "x", "initial": "a", "x-any": [1], "states": {"a": {"x-note": {"k": 1}}}},
    {"name": "x", "initial": "a", "llm": {"x-a": 1}, "states": {"a": {"retry": {"x-b": 2}}}},
    {"name": "x", "initial": "a", "states": {"a": {"evaluate": {"type": "exit_code", "x-c": 0}}}},
    {"name": "x", "initial": "a", "states": {"x-a": {}}, "context": {"x-k": "v"}},
    {"name": "x", "initial": "a", "states": {"a": {"route": {"x-r": "a"}}}},
    {"name": "x", "initial": "a", "states": {"a": {"X-note": 1}}},
    {"name": "g", "paradigm": "goal", "goal": "g", "tools": ["a", "b"], "x-n": 1, "metadata": {}},
    {
        "name": "g",
        "paradigm": "invariants",
        "constraints": [{"name": "a", "check": "a", "fix": "b", "x-y": 1}],
    },
]


@pytest.mark.parametrize("doc", DOCS, ids=range(len(DOCS)))
def test_interpreter_agrees_with_jsonschema(doc: Any) -> None:
    agree(doc)


def test_interpreter_agrees_on_every_shipped_loop_and_reference_snippet() -> None:
    from little_loops.load.composer import compose as _compose  # keys as text: `on:` stays `on`

    texts = [p.read_text() for p in (REPO / "loops").glob("*.yaml")]
    texts += full_snippets((REPO / "docs" / "loop-reference.md").read_text())
    docs = [_compose(text, "x")[0] for text in texts]
    assert docs
    for doc in docs:
        agree(doc)


SNIPPET = re.compile(r"```yaml\n(.*?)```", re.DOTALL)


def snippets(text: str) -> list[str]:
    return SNIPPET.findall(text)


def full_snippets(text: str) -> list[str]:
    """Snippets that are whole loops; a snippet starting with `# partial` is a fragment."""
    return [s for s in snippets(text) if not s.startswith("# partial")]


def test_reference_mentions_every_schema_property() -> None:
    text = (REPO / "docs" / "loop-reference.md").read_text()
    names = {name for _, node in walk(SCHEMA) for name in node.get("properties", {})}
    missing = sorted(n for n in names if f"`{n}`" not in text)
    assert missing == []
    for verdict in ("success", "failure", "error", "timeout", "target", "progress", "stall"):
        assert f"`{verdict}`" in text
    for name in EVALUATOR_TYPES:
        assert f"`{name}`" in text


def test_every_full_reference_snippet_validates(tmp_path: Path) -> None:
    from little_loops.load.loader import try_load

    text = (REPO / "docs" / "loop-reference.md").read_text()
    whole = full_snippets(text)
    assert len(whole) >= 5
    for i, snippet in enumerate(whole):
        path = tmp_path / f"snippet{i}.yaml"
        path.write_text(snippet)
        loop, diagnostics = try_load(path)
        assert loop is not None, (snippet, [d.format() for d in diagnostics])
        assert diagnostics == [], (snippet, [d.format() for d in diagnostics])
    for snippet in snippets(text):
        yaml.safe_load(snippet)  # fragments are YAML too


def test_x_keys_are_allowed_wherever_the_format_names_the_keys() -> None:
    for where, node in walk(SCHEMA):
        if node.get("additionalProperties") is False:
            assert set(node.get("patternProperties", {})) == {"^x-"}, where


def test_metadata_is_a_free_form_mapping_in_every_form() -> None:
    assert SCHEMA["properties"]["metadata"]["type"] == "object"
    assert SCHEMA["properties"]["metadata"]["additionalProperties"] is True
    for name in ("fsm", "paradigm_goal", "paradigm_convergence", "paradigm_invariants"):
        assert "metadata" in DEFS[name]["properties"], name
    assert "metadata" in DEFS["paradigm_imperative"]["properties"]


# -- `ll init`: the modeline names a schema file that outlives the venv --------------------------


def test_init_modeline_names_a_schema_beside_the_loop(tmp_path: Path, project: Project) -> None:
    (tmp_path / "loops").mkdir()
    made = project.ll("init", "loops/nightly", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert made.stdout == (
        "ll: wrote loops/nightly.yaml (paradigm: fsm) and loops/loop.schema.json (for editors); "
        "try: ll run loops/nightly.yaml\n"
    )
    first = (tmp_path / "loops" / "nightly.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=./loop.schema.json"
    # Relative to the loop file, and outside the venv: recreating the venv cannot break it.
    schema = tmp_path / "loops" / "loop.schema.json"
    assert schema.read_text() == project.ll("schema", cwd=tmp_path).stdout
    # A file of its own beside the loop, not a link into the installed package. (Not "outside
    # sys.prefix": nox puts the tests' temporary folders inside the session's venv.)
    assert not schema.is_symlink()
    assert schema.resolve().parent == (tmp_path / "loops").resolve()


def test_init_refreshes_a_stale_schema_and_leaves_a_current_one(
    tmp_path: Path, project: Project
) -> None:
    schema = tmp_path / "loop.schema.json"
    schema.write_text("{}\n")  # written by an older ll
    made = project.ll("init", "one", cwd=tmp_path)
    assert "and loop.schema.json (for editors)" in made.stdout
    assert schema.read_text() == schema_mod.schema_text()
    before = schema.stat().st_mtime_ns
    again = project.ll("init", "two", cwd=tmp_path)
    assert again.stdout == "ll: wrote two.yaml (paradigm: fsm); try: ll run two.yaml\n"
    assert schema.stat().st_mtime_ns == before
    checked = project.ll("validate", "--strict", "one.yaml", "two.yaml", cwd=tmp_path)
    assert (checked.returncode, checked.stdout) == (0, "")
