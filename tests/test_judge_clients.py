"""The judge as the real clients behave (issue 25), through the real `ll` from YAML files,
against the loopback server (as strict as the real APIs on each point) or a fake `claude`."""

from __future__ import annotations

import json
import time
from pathlib import Path

from llm_server import (
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
