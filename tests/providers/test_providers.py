"""The other judges: OpenAI-compatible servers (openai://, ollama://) and the Claude Code CLI."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_server import (
    SUCCESS,
    LlmServer,
    api_error,
    chat,
    garbage,
    hang,
    llm_server_fixture,  # noqa: F401  (the llm_server fixture)
)

from little_loops.evaluators import EvalInput
from little_loops.evaluators.llm import JudgeSession, JudgeSettings
from little_loops.model.loop import (
    Evaluate,
    Verdict,
)
from little_loops.providers import RetryPolicy, model_problem, ollama_target, split_model

FAST = RetryPolicy(max_attempts=3, base=0.01, cap=0.05)
FAKE_CLAUDE = Path(__file__).parents[1] / "fake_claude_judge.py"


def run(session: JudgeSession, text: str = "3 passed", **spec: Any) -> tuple[Verdict, float]:
    started = time.monotonic()
    verdict = session.judge(
        Evaluate(type="llm_structured", **spec), EvalInput(text=text, state="s")
    )
    json.dumps(verdict.to_dict())
    return verdict, time.monotonic() - started


@pytest.fixture
def session() -> Iterator[JudgeSession]:
    s = JudgeSession(JudgeSettings(retry=FAST, claude=(sys.executable, str(FAKE_CLAUDE))), env=None)
    yield s
    s.close()


def test_model_uris() -> None:
    assert split_model("claude-haiku-4-5") == ("anthropic", "claude-haiku-4-5")
    assert split_model("anthropic://claude-opus-4-1") == ("anthropic", "claude-opus-4-1")
    assert split_model("claude://sonnet") == ("claude", "sonnet")
    assert split_model("ollama://gpu:11434/qwen3:8b") == ("ollama", "gpu:11434/qwen3:8b")
    assert ollama_target("gpu:11434/qwen3:8b") == ("http://gpu:11434/v1", "qwen3:8b")
    with pytest.raises(ValueError, match="unknown judge model scheme 'gemini://'"):
        split_model("gemini://pro")
    with pytest.raises(ValueError, match="names no model"):
        split_model("openai://")
    with pytest.raises(ValueError, match="HOST:PORT/MODEL"):
        ollama_target("localhost:11434")
    assert ollama_target("[::1]/llama3") == ("http://[::1]/v1", "llama3")
    assert ollama_target("[::1]:8080/llama3") == ("http://[::1]:8080/v1", "llama3")


@pytest.mark.parametrize(
    ("model", "problem"),
    [
        ("claude-haiku-4-5", None),
        ("claude://sonnet", None),
        ("ollama://localhost:11434/qwen3:8b", None),
        ("openai://gpt-4o-mini", None),
        ("gemini://pro", "unknown judge model scheme 'gemini://' in 'gemini://pro'"),
        ("openai://", "judge model 'openai://' names no model after 'openai://'"),
        ("ollama://localhost:11434", "ollama judge 'ollama://localhost:11434' names no model"),
        ("ollama://localhost:11434/", "ollama judge 'ollama://localhost:11434/' names no model"),
        ("ollama://localhost:port/llama3", "has port 'port', not a number from 1 to 65535"),
        ("ollama://localhost:99999/llama3", "has port '99999', not a number from 1 to 65535"),
        ("ollama://:11434/llama3", "has no valid host"),
        ("", "the judge model is empty"),
        ("${context.model}", "holds a placeholder, but a model is never interpolated"),
        ("claude haiku", "contains a space"),
    ],
)
def test_model_problem_names_every_bad_judge(model: str, problem: str | None) -> None:
    found = model_problem(model)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


# -- OpenAI-compatible ------------------------------------------------------------------------


def test_ollama_structured_answer(llm_server: LlmServer, session: JudgeSession) -> None:
    host = llm_server.url.removeprefix("http://")
    llm_server.script(chat(json.dumps(SUCCESS)))
    verdict, elapsed = run(session, model=f"ollama://{host}/llama3")
    assert verdict.verdict == "success"
    d = verdict.details
    assert d["provider"] == "ollama"
    assert d["confidence"] == 0.9
    assert d["usage"] == {"input_tokens": 900, "output_tokens": 30}
    assert d["cost_known"] is False  # a local model has no price
    assert elapsed < 30  # the first use imports the SDK's schema transform
    (req,) = llm_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.body["model"] == "llama3"
    fmt = req.body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["properties"]["verdict"]["enum"][0] == "success"
    system, user = req.body["messages"]
    assert system["role"] == "system"
    assert "JSON Schema" in system["content"]
    assert "<action_output>\n3 passed\n</action_output>" in user["content"]
    assert "authorization" not in req.headers


def test_openai_uses_base_url_and_key(
    llm_server: LlmServer, session: JudgeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test")
    llm_server.script(chat("Sure!\n```json\n" + json.dumps(SUCCESS) + "\n```", model="gpt-4o"))
    verdict, _ = run(session, model="openai://gpt-4o")
    assert verdict.verdict == "success"
    assert verdict.details["lenient"] is True
    assert verdict.details["cost_known"] is True
    assert llm_server.requests[0].headers["authorization"] == "Bearer sk-openai-test"


def test_openai_without_key_or_server(session: JudgeSession) -> None:
    verdict, _ = run(session, model="openai://gpt-4o")
    assert verdict.verdict == "error"
    assert verdict.details["no_api_key"] is True
    assert "OPENAI_API_KEY" in (verdict.details.error or "")


def test_openai_compat_text_without_json_is_an_error(
    llm_server: LlmServer, session: JudgeSession
) -> None:
    host = llm_server.url.removeprefix("http://")
    llm_server.script(chat("It worked, I think."))
    verdict, _ = run(session, model=f"ollama://{host}/llama3")
    assert verdict.verdict == "error"
    assert verdict.details["invalid_answer"] is True
    assert "It worked, I think." in (verdict.details.error or "")


def test_openai_compat_retries_and_errors(llm_server: LlmServer, session: JudgeSession) -> None:
    host = llm_server.url.removeprefix("http://")
    model = f"ollama://{host}/llama3"
    llm_server.script(
        api_error(429, "rate_limit", "busy", {"retry-after": "0"}), chat(json.dumps(SUCCESS))
    )
    verdict, _ = run(session, model=model)
    assert verdict.verdict == "success"
    assert verdict.details["attempts"] == 2
    llm_server.script(then=api_error(503, "unavailable", "down"))
    verdict, elapsed = run(session, "x", model=model)
    assert verdict.details["status"] == 503
    assert verdict.details["attempts"] == 3
    assert elapsed < 10
    llm_server.script(garbage(), then=None)
    verdict, _ = run(session, "y", model=model)
    assert verdict.details["invalid_response"] is True


def test_openai_compat_timeout(llm_server: LlmServer, session: JudgeSession) -> None:
    host = llm_server.url.removeprefix("http://")
    llm_server.script(hang(3))
    verdict, elapsed = run(session, model=f"ollama://{host}/llama3", timeout=0.4)
    assert verdict.verdict == "error"
    assert verdict.details["timeout"] is True
    assert 0.35 <= elapsed < 2.9  # the server hangs 3 s


def test_openai_compat_connection_refused(session: JudgeSession) -> None:
    verdict, elapsed = run(session, model="ollama://127.0.0.1:9/llama3", timeout=0.5)
    assert verdict.verdict == "error"
    assert verdict.details["connection_error"] is True
    assert elapsed < 10


# -- the Claude Code CLI ----------------------------------------------------------------------


@pytest.fixture
def fake_claude(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    argv_file = tmp_path / "argv.json"
    monkeypatch.setenv("FAKE_JUDGE_ARGV", str(argv_file))
    monkeypatch.setenv("FAKE_JUDGE_PROMPT", str(tmp_path / "prompt.txt"))
    return argv_file


def test_claude_cli_structured_output(
    session: JudgeSession, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_JUDGE_ANSWER", json.dumps(SUCCESS))
    verdict, elapsed = run(session, model="claude://sonnet")
    assert verdict.verdict == "success"
    d = verdict.details
    assert d["provider"] == "claude"
    assert d["cost_usd"] == 0.0123  # the CLI reports its own cost
    assert d["cost_known"] is True
    assert d["model"] == "claude-sonnet-4-5"
    assert elapsed < 30
    argv = json.loads(fake_claude.read_text())
    assert argv[0] == "-p"  # the prompt goes on stdin: no argument limit
    prompt = (fake_claude.parent / "prompt.txt").read_text(encoding="utf-8")
    assert "<action_output>\n3 passed\n</action_output>" in prompt
    assert argv[1:3] == ["--output-format", "json"]
    assert argv[3] == "--json-schema"
    assert json.loads(argv[4])["properties"]["verdict"]["enum"][-1] == "partial"
    assert argv[5:] == ["--model", "sonnet", "--tools", "", "--no-session-persistence"]


@pytest.mark.parametrize(
    ("mode", "flag", "words"),
    [
        ("is_error", "cli_error", "API Error: 401"),
        ("exit1", "cli_error", "not logged in"),
        ("max_retries", "cli_error", "error_max_structured_output_retries"),
        ("garbage", "cli_error", "without a JSON result"),
        ("no_structured", "no_structured_output", "I think it went fine."),
    ],
)
def test_claude_cli_failures(
    session: JudgeSession,
    fake_claude: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    flag: str,
    words: str,
) -> None:
    monkeypatch.setenv("FAKE_JUDGE_MODE", mode)
    verdict, _ = run(session, model="claude://sonnet")
    assert verdict.verdict == "error"
    assert verdict.details[flag] is True
    assert words in (verdict.details.error or "")


def test_claude_cli_text_answer_is_parsed_leniently(
    session: JudgeSession, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_JUDGE_MODE", "no_structured")
    monkeypatch.setenv(
        "FAKE_JUDGE_TEXT",
        'Verdict: {"verdict": "blocked", "confidence": 0.6, "reason": "needs a key"}',
    )
    verdict, _ = run(session, model="claude://haiku")
    assert verdict.verdict == "blocked"
    assert verdict.details["lenient"] is True


def test_claude_cli_timeout(
    session: JudgeSession, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_JUDGE_MODE", "sleep")
    verdict, elapsed = run(session, model="claude://sonnet", timeout=0.5)
    assert verdict.verdict == "error"
    assert verdict.details["timeout"] is True
    assert elapsed < 4.9  # the fake CLI sleeps 5 s


def test_claude_cli_timeout_kills_its_whole_process_group(
    session: JudgeSession, fake_claude: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    monkeypatch.setenv("FAKE_JUDGE_MODE", "grandchild")
    monkeypatch.setenv("FAKE_JUDGE_PIDFILE", str(pid_file))
    verdict, elapsed = run(session, model="claude://sonnet", timeout=1.5)
    assert verdict.details["timeout"] is True
    assert elapsed < 20  # not the 30 s hang
    pid = int(pid_file.read_text())
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its parent counts as gone)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        time.sleep(0.05)
    return True


def test_claude_cli_missing() -> None:
    s = JudgeSession(JudgeSettings(claude=("/nonexistent/claude",)))
    verdict, _ = run(s, model="claude://sonnet")
    s.close()
    assert verdict.details["not_found"] is True
    assert "LL_CLAUDE" in (verdict.details.error or "")


# -- strict schemas, prices -------------------------------------------------------------------

NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["ok", "bad"]},
        "score": {"type": "integer", "minimum": 1, "maximum": 10},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 9}, "minItems": 2},
        "where": {
            "type": "object",
            "properties": {"file": {"type": "string", "minLength": 1}, "line": {"type": "integer"}},
            "required": ["file"],
        },
    },
    "required": ["verdict", "where"],
}


def test_strict_schemas_pass_the_servers_rules_and_keep_the_enum() -> None:
    from llm_server import strict_problem

    from little_loops.evaluators.judge_input import DEFAULT_SCHEMA
    from little_loops.providers.strict import anthropic_schema, openai_schema

    assert (
        strict_problem(NESTED, "s")
        == "s: 'additionalProperties' must be explicitly set to false for objects"
    )
    for schema in (DEFAULT_SCHEMA, NESTED):
        tool = anthropic_schema(schema)
        assert strict_problem(tool, "s") is None
        assert strict_problem(openai_schema(schema), "s", all_required=True) is None
        assert tool["properties"]["verdict"]["enum"] == schema["properties"]["verdict"]["enum"]
    tool = anthropic_schema(NESTED)
    assert tool["properties"]["where"]["additionalProperties"] is False
    assert tool["properties"]["where"]["required"] == ["file"]
    assert "{minimum: 1, maximum: 10}" in tool["properties"]["score"]["description"]
    assert "minItems: 2" in tool["properties"]["tags"]["description"]
    assert openai_schema(NESTED)["properties"]["verdict"] == {
        "enum": ["ok", "bad"],
        "type": "string",
    }
    wide = openai_schema(NESTED)["properties"]["where"]
    assert wide["required"] == ["file", "line"]
    assert wide["properties"]["line"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert NESTED["properties"]["score"]["minimum"] == 1  # the original is untouched


def test_optional_nulls_are_dropped_before_validation() -> None:
    from little_loops.providers.strict import drop_optional_nulls

    answer = {"verdict": "ok", "score": None, "tags": None, "where": {"file": "a", "line": None}}
    assert drop_optional_nulls(answer, NESTED) == {"verdict": "ok", "where": {"file": "a"}}
    assert drop_optional_nulls({"verdict": None}, NESTED) == {"verdict": None}  # required stays


def test_a_schema_strict_mode_cannot_express_is_an_error_verdict(
    llm_server: LlmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    s = JudgeSession(JudgeSettings(retry=FAST))
    schema = {"type": "object", "properties": {"verdict": {"enum": ["a"]}, "x": {}}}
    verdict, _ = run(s, model="openai://gpt-4o", schema=schema)
    s.close()
    assert verdict.verdict == "error"
    assert verdict.details["schema_error"] is True
    assert not llm_server.requests


@pytest.mark.parametrize(
    ("model", "known"),
    [
        ("gpt-4o-2024-08-06", 2.5),
        ("gpt-4o-mini-2024-07-18", 0.15),
        ("claude-sonnet-4-5-20250929", 3.0),
        ("claude-3-5-haiku-latest", 0.8),
        ("gpt-4o-audio-preview", None),
        ("llama3", None),
    ],
)
def test_dated_ids_are_priced_by_the_listed_id_they_extend(model: str, known: float | None) -> None:
    from little_loops.providers.prices import cost_usd

    dollars, is_known = cost_usd(model, 1_000_000, 0)
    assert is_known is (known is not None)
    assert dollars == (known or 0.0)


# -- the loop's deadline bounds the judge (issue 11 item 6) -------------------------------------


def test_before_deadline_gives_up_on_slow_work_at_the_deadline() -> None:
    from little_loops.providers import ProviderError, before_deadline

    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        before_deadline(lambda: time.sleep(10), started + 0.2, "loading the SDK")
    assert time.monotonic() - started < 5  # generous: the work alone takes 10 s
    assert info.value.flags == {"timeout": True, "loop_timeout": True}
    assert info.value.message == "the loop's timeout ran out while the judge was loading the SDK"
    assert before_deadline(lambda: 42, time.monotonic() + 60, "x") == 42
    assert before_deadline(lambda: 7, None, "x") == 7
    with pytest.raises(ZeroDivisionError):
        before_deadline(lambda: 1 // 0, time.monotonic() + 60, "x")


def test_retries_never_wait_past_the_loop_deadline() -> None:
    from little_loops.providers import ProviderError, with_retries

    now = [0.0]
    budgets: list[float] = []

    def attempt(remaining: float) -> Any:
        budgets.append(remaining)
        now[0] += remaining
        raise ProviderError("timed out", flags={"timeout": True}, retryable=True)

    with pytest.raises(ProviderError):
        with_retries(
            attempt,
            budget=30,
            policy=RetryPolicy(max_attempts=4, base=0.5, cap=8),
            clock=lambda: now[0],
            sleep=lambda s: now.__setitem__(0, now[0] + s),
            rand=lambda: 0.0,
            until=2.0,
        )
    assert budgets == [2.0]  # one attempt, cut to the deadline; no wait, no second attempt


def test_the_judges_own_budget_bounds_a_slow_setup() -> None:
    """Without a loop deadline, the judge's timeout ends a setup that never finishes."""
    from little_loops.providers import ProviderError, before_deadline

    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        before_deadline(lambda: time.sleep(10), None, "loading the SDK", budget=0.2)
    assert time.monotonic() - started < 5
    assert caught.value.flags == {"timeout": True}
    assert caught.value.message == "the judge's time budget (0.2 s) ran out while loading the SDK"
    # The sooner of the two wins: the loop's deadline is a loop timeout.
    with pytest.raises(ProviderError) as caught:
        before_deadline(lambda: time.sleep(10), time.monotonic() + 0.1, "x", budget=30)
    assert caught.value.flags["loop_timeout"] is True


def test_which_runs_warm_the_sdk(tmp_path: Path) -> None:
    from little_loops.evaluators.prefetch import needs_sdk
    from little_loops.load.loader import load

    def loop(evaluate: str, llm: str = "") -> Any:
        path = tmp_path / "loop.yaml"
        path.write_text(
            f"name: x\ninitial: a\n{llm}states:\n"
            f"  a:\n    action: echo\n    evaluate: {evaluate}\n    route: {{_: done}}\n"
            "  done: {terminal: true}\n",
            encoding="utf-8",
        )
        return load(path)

    judged = loop("{type: llm_structured}")
    assert needs_sdk(judged, None, None)  # the default model is an Anthropic one
    assert not needs_sdk(judged, None, Path("answers.jsonl"))  # replayed
    assert not needs_sdk(judged, "claude://sonnet", None)
    assert not needs_sdk(judged, "openai://gpt-4o", None)  # our own schema transform
    assert not needs_sdk(loop("{type: exit_code}"), None, None)
    nested = "{type: all, of: [{type: exit_code}, {type: llm_structured, model: 'ollama://h:1/m'}]}"
    assert not needs_sdk(loop(nested), "claude://sonnet", None)
    assert not needs_sdk(
        loop("{type: llm_structured}", "llm: {model: claude://opus}\n"), None, None
    )


def test_our_strict_transform_gives_what_the_sdks_gives() -> None:
    """The transform is our own (no SDK import in `ll validate` or for openai://), and sends
    what the Anthropic SDK's transform_schema sends, for every schema that function takes."""
    import copy
    from importlib.metadata import version

    from anthropic.lib._parse._transform import transform_schema

    if tuple(int(part) for part in version("anthropic").split(".")[:2]) < (2, 7):
        # Before 2.7 the SDK kept `type` beside an `enum` or `const`; both forms are accepted
        # by the API, and ours is 2.7's. The product never calls the SDK's transform, so older
        # releases (pyproject allows 1.0: nox -s minimums) are fine, only not comparable here.
        pytest.skip("the SDK's transform before 2.7 keeps `type` beside an enum; ours is 2.7's")

    from little_loops.evaluators.judge_input import DEFAULT_SCHEMA
    from little_loops.providers.strict import normalise, to_strict

    described = {
        "type": "object",
        "description": "an answer",
        "properties": {
            "verdict": {"type": "string", "enum": ["ok", "bad"]},
            "when": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "format": "slug", "pattern": "^[a-z]+$"},
            "maybe": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
            "one": {"oneOf": [{"type": "boolean"}, {"const": "x"}]},
            "where": {"$ref": "#/$defs/place"},
            "few": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 3},
        },
        "required": ["verdict"],
        "$defs": {"place": {"type": "object", "properties": {"file": {"type": "string"}}}},
    }
    for schema in (DEFAULT_SCHEMA, NESTED, described):
        assert to_strict(normalise(schema)) == transform_schema(copy.deepcopy(dict(schema)))
