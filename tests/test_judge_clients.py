"""The judge as the real clients behave (issue 25), through the real `ll` from YAML files,
against the loopback server (as strict as the real APIs on each point) or a fake `claude`."""

from __future__ import annotations

import json
import time
from pathlib import Path

from llm_server import (
    SUCCESS,
    LlmServer,
    chat,
    llm_server_fixture,  # noqa: F401  (the llm_server fixture)
)
from test_judge_e2e import body, ll_run, loop_file

# An `anthropic` package first on the path that takes SDK_IMPORT_SECONDS to import, then
# hands over the real SDK: a slow import on a busy machine, nothing else changed.
SLOW_REAL_SDK = """\
import importlib, os, sys, time
time.sleep(float(os.environ.get("SDK_IMPORT_SECONDS", "0")))
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
del sys.modules["anthropic"]
real = importlib.import_module("anthropic")
sys.modules["anthropic"] = real
globals().update(real.__dict__)  # a thread that waited on this import holds this module
"""


def slow_sdk(tmp_path: Path, seconds: float) -> dict[str, str]:
    package = tmp_path / "slow_sdk" / "anthropic"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(SLOW_REAL_SDK, encoding="utf-8")
    return {"PYTHONPATH": str(package.parent), "SDK_IMPORT_SECONDS": str(seconds)}


# -- 1. the SDK import is not the judge's time ----------------------------------------------


def test_a_slow_sdk_import_is_not_charged_to_the_judges_timeout(
    tmp_path: Path, llm_server: LlmServer
) -> None:
    """A `timeout: 1` judge whose SDK takes 2.5 s to import still answers: the request's
    budget starts when it is sent."""
    loop = loop_file(tmp_path, "timeout: 1")
    run = ll_run(tmp_path, loop, llm_server, "--no-cache", **slow_sdk(tmp_path, 2.5))
    assert run.verdicts() == ["success"], run.judged()[0]["details"]
    assert run.code == 0
    assert len(llm_server.requests) == 1


def test_an_openai_judge_never_imports_the_anthropic_sdk(
    tmp_path: Path, llm_server: LlmServer
) -> None:
    """The strict-schema transform is our own: a custom schema goes to an `openai://` judge
    at once, though the Anthropic SDK would take 30 s to import."""
    loop = loop_file(
        tmp_path,
        """\
        model: openai://gpt-4o
        timeout: 2
        schema:
          type: object
          properties:
            verdict: {type: string, enum: [success, failure]}
            confidence: {type: number, minimum: 0, maximum: 1}
          required: [verdict]
        """,
    )
    llm_server.script(then=chat(json.dumps({"verdict": "success", "confidence": 0.8})))
    started = time.monotonic()
    run = ll_run(tmp_path, loop, llm_server, "--no-cache", **slow_sdk(tmp_path, 30))
    assert time.monotonic() - started < 20
    assert run.verdicts() == ["success"], run.judged()[0]["details"]
    sent = body(llm_server)["response_format"]["json_schema"]["schema"]
    assert sent["properties"]["confidence"]["anyOf"][0]["description"] == (
        "{minimum: 0, maximum: 1}"
    )


# -- 2. openai:// and reasoning models --------------------------------------------------------


def test_reasoning_models_get_max_completion_tokens(
    tmp_path: Path, llm_server: LlmServer
) -> None:
    """gpt-5* refuses `max_tokens` (400, as the real API): it is sent max_completion_tokens.
    A model the client does not know as a reasoning one is asked again with it after that
    400, once; the next step asks it right at once."""
    llm_server.reasoning = ("gpt-5", "o1", "o3", "o4", "acme-reasoner")
    loop = tmp_path / "loop.yaml"
    loop.write_text(
        "name: reasoning\ninitial: a\nstates:\n"
        "  a:\n    action: echo ok\n"
        "    evaluate: {type: llm_structured, model: 'openai://gpt-5-mini', max_tokens: 900}\n"
        "    route: {_: b, error: b}\n"
        "  b:\n    action: echo ok\n"
        "    evaluate: {type: llm_structured, model: 'openai://acme-reasoner'}\n"
        "    route: {_: c, error: c}\n"
        "  c:\n    action: echo again\n"
        "    evaluate: {type: llm_structured, model: 'openai://acme-reasoner'}\n"
        "    route: {_: done, error: done}\n"
        "  done: {terminal: true}\n",
        encoding="utf-8",
    )
    llm_server.script(then=chat(json.dumps(SUCCESS)))
    run = ll_run(tmp_path, loop, llm_server, "--no-cache")
    assert run.verdicts() == ["success"] * 3, [e["details"].get("error") for e in run.judged()]
    sent = [
        (r.body["model"], "max_tokens" in r.body, r.body.get("max_completion_tokens"))
        for r in llm_server.requests
    ]
    # gpt-5-mini: at once; acme-reasoner: refused, asked again (temperature dropped, then
    # max_tokens renamed), and asked right in the next step.
    assert sent[0] == ("gpt-5-mini", False, 900)
    assert sent[-1] == ("acme-reasoner", False, 256)
    assert ("acme-reasoner", True, None) in sent
