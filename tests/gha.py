"""A small local stand-in for a GitHub Actions runner, for the workflows of docs/ci.md and the
composite Action (action.yml): enough to run them job by job on this machine.

Each job runs in a directory of its own (its `GITHUB_WORKSPACE`), as on separate runners. What
it understands: `needs`, `if`, `outputs`, `strategy.matrix` (a mapping of lists, `include`, or
`${{ fromJSON(...) }}`), `run:` steps (bash with `-eo pipefail`, `working-directory`, `env`,
`id`, and the files `GITHUB_OUTPUT`/`GITHUB_STEP_SUMMARY`), and these `uses:`:

- `actions/checkout@v4`: the sample repository copied into the workspace;
- `actions/setup-python@v5`: the Python of the job's PATH (the test's venv), nothing to do;
- `actions/upload-artifact@v4` / `actions/download-artifact@v4`: a folder per artifact
  (`name`, `path`, `pattern`, `merge-multiple`, `overwrite`);
- the little-loops Action (`OWNER/little-loops@v0`, `./`): action.yml's steps, in order, with
  `GITHUB_ACTION_PATH` at the repository.

Expressions `${{ ... }}` take `inputs`, `matrix`, `needs`, `steps`, `github`, `runner`,
`strategy`, `secrets`, `env`, `fromJSON()`, `always()`, `success()`, `failure()`,
`cancelled()`, `!`, `==`, `!=`, `&&`, `||` and quoted strings. Anything else fails the test
rather than being skipped.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from project import copy_checkout

REPO = Path(__file__).resolve().parent.parent
ACTION = "OWNER/little-loops@v0"
_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_REF = re.compile(
    r"\b(inputs|matrix|needs|steps|github|runner|strategy|secrets|env)((?:\.[A-Za-z_][\w-]*)+)"
)


class UnknownStep(AssertionError):
    """A step this stand-in does not know how to run."""


@dataclass
class StepRun:
    name: str
    code: int
    outputs: dict[str, str]
    stdout: str = ""


@dataclass
class JobRun:
    name: str
    workspace: Path
    result: str = "success"
    outputs: dict[str, str] = field(default_factory=dict)
    steps: list[StepRun] = field(default_factory=list)
    summary: str = ""
    matrix: dict[str, Any] = field(default_factory=dict)


class Expr:
    """`${{ ... }}` in a context of plain dictionaries."""

    def __init__(self, context: dict[str, Any], status: str = "success") -> None:
        self.context = context
        self.status = status

    def value(self, text: Any) -> Any:
        """`text` with its expressions; a text that is one expression gives its value."""
        if not isinstance(text, str):
            return text
        whole = _EXPR.fullmatch(text.strip())
        if whole:
            return self.eval(whole.group(1))
        return _EXPR.sub(lambda m: _str(self.eval(m.group(1))), text)

    def condition(self, text: Any) -> bool:
        if text is None:
            return self.status == "success"
        if isinstance(text, bool):
            return text
        body = str(text).strip()
        whole = _EXPR.fullmatch(body)
        body = whole.group(1) if whole else body
        status_called = re.search(r"\b(always|success|failure|cancelled)\(\)", body)
        result = bool(self.eval(body))
        return result if status_called else (result and self.status == "success")

    def eval(self, body: str) -> Any:
        refs: list[Any] = []

        def ref(match: re.Match[str]) -> str:
            node: Any = self.context.get(match.group(1), {})
            for part in match.group(2).split(".")[1:]:
                node = node.get(part, "") if isinstance(node, dict) else ""
            refs.append(node)
            return f"_r[{len(refs) - 1}]"

        code = _REF.sub(ref, body)
        code = code.replace("&&", " and ").replace("||", " or ")
        code = re.sub(r"!(?!=)", " not ", code)
        names = {
            "_r": refs,
            "fromJSON": lambda s: json.loads(s) if s else None,
            "always": lambda: True,
            "cancelled": lambda: False,
            "success": lambda: self.status == "success",
            "failure": lambda: self.status == "failure",
            "true": True,
            "false": False,
            "null": None,
        }
        return eval(code, {"__builtins__": {}}, names)


def _str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def _read_outputs(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    if not path.exists():
        return out
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and "=" not in line.split("<<", 1)[0]:
            key, delim = line.split("<<", 1)
            body = []
            i += 1
            while lines[i] != delim:
                body.append(lines[i])
                i += 1
            out[key] = "\n".join(body)
        elif "=" in line:
            key, value = line.split("=", 1)
            out[key] = value
        i += 1
    return out


class Runner:
    """Runs workflows (or the Action alone) with jobs in separate directories under `root`."""

    def __init__(self, root: Path, sample: Path, python_bin: Path, env: dict[str, str]) -> None:
        self.root = root
        self.sample = sample  # what actions/checkout checks out
        self.python_bin = python_bin
        self.env = env
        self.artifacts = root / "artifacts"
        # The Action's own checkout (`github.action_path`): a private copy of this repository,
        # so that what the Action installs is this test's alone, whatever else works in the
        # checkout meanwhile (a build backend that wrote into the tree it builds, as setuptools
        # did with `build/` and the egg-info, made two builds at once collide).
        self.action_path = root / "action"
        copy_checkout(self.action_path)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.counter = itertools.count(1)
        self.log: list[str] = []

    # -- workflows --------------------------------------------------------------------------

    def workflow(
        self, doc: dict[str, Any], event: str = "workflow_dispatch"
    ) -> dict[str, list[JobRun]]:
        jobs: dict[str, Any] = doc["jobs"]
        done: dict[str, list[JobRun]] = {}
        while len(done) < len(jobs):
            ready = [
                name
                for name, job in jobs.items()
                if name not in done and all(n in done for n in _needs(job))
            ]
            assert ready, f"jobs wait on each other: {sorted(set(jobs) - set(done))}"
            for name in ready:
                done[name] = self._job(name, jobs[name], done, event)
        return done

    def _job(
        self, name: str, job: dict[str, Any], done: dict[str, list[JobRun]], event: str
    ) -> list[JobRun]:
        needs = {}
        upstream_ok = True
        for need in _needs(job):
            runs = done[need]
            result = "success"
            if any(r.result == "failure" for r in runs):
                result = "failure"
            elif runs and all(r.result == "skipped" for r in runs):
                result = "skipped"
            merged: dict[str, str] = {}
            for run in runs:
                merged.update(run.outputs)
            needs[need] = {"result": result, "outputs": merged}
            upstream_ok = upstream_ok and result == "success"
        base = {"needs": needs, "github": self._github(event), "secrets": {}}
        status = "success" if upstream_ok else "failure"
        if not Expr(base, status).condition(job.get("if")):
            return [JobRun(name, self.root, result="skipped")]
        runs = []
        for index, matrix in enumerate(self._matrix(job, base)):
            context = {**base, "matrix": matrix, "strategy": {"job-index": str(index)}}
            runs.append(self._job_instance(name, job, context, matrix))
        return runs

    def _matrix(self, job: dict[str, Any], context: dict[str, Any]) -> list[dict[str, Any]]:
        strategy = job.get("strategy") or {}
        spec = Expr(context).value(strategy.get("matrix")) if "matrix" in strategy else None
        if not spec:
            return [{}]
        assert isinstance(spec, dict), spec
        axes = {k: v for k, v in spec.items() if k not in ("include", "exclude")}
        combos: list[dict[str, Any]] = [
            dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())
        ]
        combos = [c for c in combos if c]
        combos += list(spec.get("include") or [])
        return combos or [{}]

    def _job_instance(
        self, name: str, job: dict[str, Any], context: dict[str, Any], matrix: dict[str, Any]
    ) -> JobRun:
        workspace = self.root / f"{name}-{next(self.counter)}"
        workspace.mkdir()
        temp = self.root / f"{workspace.name}-temp"
        temp.mkdir()
        summary = temp / "summary.md"
        summary.touch()
        run = JobRun(name, workspace, matrix=matrix)
        context = {**context, "steps": {}, "runner": {"temp": str(temp)}}
        env = {
            **self.env,
            "GITHUB_ACTIONS": "true",
            "CI": "true",
            "GITHUB_WORKSPACE": str(workspace),
            "RUNNER_TEMP": str(temp),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_ACTOR": "octocat",
            "GITHUB_RUN_ID": "4242",
            "GITHUB_JOB": name,
            "PATH": f"{self.python_bin}{os.pathsep}{self.env.get('PATH', '')}",
        }
        env.update({k: _str(Expr(context).value(v)) for k, v in (job.get("env") or {}).items()})
        status = "success"
        for step in job.get("steps") or []:
            expr = Expr(context, status)
            if not expr.condition(step.get("if")):
                continue
            outputs, code = self._step(step, context, env, workspace, temp, run)
            if step.get("id"):
                context["steps"][step["id"]] = {"outputs": outputs}
            if code != 0 and not step.get("continue-on-error"):
                status = "failure"
        run.result = status
        run.outputs = {
            k: _str(Expr(context).value(v)) for k, v in (job.get("outputs") or {}).items()
        }
        run.summary = summary.read_text(encoding="utf-8")
        return run

    def _github(self, event: str) -> dict[str, Any]:
        return {
            "event_name": event,
            "run_id": "4242",
            "actor": "octocat",
            "action_path": str(self.action_path),
        }

    # -- steps ------------------------------------------------------------------------------

    def _step(
        self,
        step: dict[str, Any],
        context: dict[str, Any],
        env: dict[str, str],
        workspace: Path,
        temp: Path,
        run: JobRun,
    ) -> tuple[dict[str, str], int]:
        expr = Expr(context)
        if "run" in step:
            step_env = {
                **env,
                **{k: _str(expr.value(v)) for k, v in (step.get("env") or {}).items()},
            }
            where = workspace / _str(expr.value(step.get("working-directory") or "."))
            return self._run(str(expr.value(step["run"])), step_env, where, temp, run, step)
        uses = str(step["uses"])
        given = {k: expr.value(v) for k, v in (step.get("with") or {}).items()}
        name = uses.split("@", 1)[0]
        if name == "actions/checkout":
            shutil.copytree(self.sample, workspace, dirs_exist_ok=True, symlinks=True)
            return {}, 0
        if name == "actions/setup-python":
            assert given.get("python-version"), "setup-python without a python-version"
            return {}, 0
        if name == "actions/upload-artifact":
            return self._upload(given, workspace), 0
        if name == "actions/download-artifact":
            return self._download(given, workspace), 0
        if uses in (ACTION, "./"):
            return self._action(given, context, env, workspace, temp, run)
        raise UnknownStep(f"no stand-in for uses: {uses}")

    def _run(
        self,
        script: str,
        env: dict[str, str],
        cwd: Path,
        temp: Path,
        run: JobRun,
        step: dict[str, Any],
    ) -> tuple[dict[str, str], int]:
        out = temp / f"output-{next(self.counter)}"
        out.touch()
        path = temp / f"step-{next(self.counter)}.sh"
        path.write_text(script, encoding="utf-8")
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
            cwd=cwd,
            env={**env, "GITHUB_OUTPUT": str(out)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        label = step.get("name") or script.strip().splitlines()[0]
        self.log.append(f"[{run.name}] {label}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
        outputs = _read_outputs(out)
        run.steps.append(StepRun(str(label), proc.returncode, outputs, proc.stdout + proc.stderr))
        return outputs, proc.returncode

    def _upload(self, given: dict[str, Any], workspace: Path) -> dict[str, str]:
        name = str(given["name"])
        target = self.artifacts / name
        if target.exists():
            assert given.get("overwrite") in (True, "true"), f"artifact {name} uploaded twice"
            shutil.rmtree(target)
        paths = [p.strip() for p in str(given["path"]).splitlines() if p.strip()]
        target.mkdir(parents=True)
        for raw in paths:
            source = Path(raw) if Path(raw).is_absolute() else workspace / raw
            if len(paths) == 1 and source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True, symlinks=True)
            elif source.is_dir():
                shutil.copytree(source, target / raw, dirs_exist_ok=True, symlinks=True)
            elif source.exists():
                (target / raw).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / raw)
        return {"artifact-id": name}

    def _download(self, given: dict[str, Any], workspace: Path) -> dict[str, str]:
        raw = str(given.get("path") or ".")
        dest = Path(raw) if Path(raw).is_absolute() else workspace / raw
        if given.get("name"):
            source = self.artifacts / str(given["name"])
            assert source.is_dir(), f"no artifact {given['name']}"
            shutil.copytree(source, dest, dirs_exist_ok=True, symlinks=True)
            return {"download-path": str(dest)}
        pattern = str(given.get("pattern") or "*")
        merge = given.get("merge-multiple") in (True, "true")
        for source in sorted(self.artifacts.iterdir()):
            if fnmatch.fnmatch(source.name, pattern):
                into = dest if merge else dest / source.name
                shutil.copytree(source, into, dirs_exist_ok=True, symlinks=True)
        return {"download-path": str(dest)}

    # -- the composite Action -----------------------------------------------------------------

    def _action(
        self,
        given: dict[str, Any],
        context: dict[str, Any],
        env: dict[str, str],
        workspace: Path,
        temp: Path,
        run: JobRun,
    ) -> tuple[dict[str, str], int]:
        action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
        declared = action["inputs"]
        unknown = set(given) - set(declared)
        assert not unknown, f"the Action has no input {sorted(unknown)}"
        inputs = {k: _str(given.get(k, spec.get("default", ""))) for k, spec in declared.items()}
        inner = {
            **context,
            "inputs": inputs,
            "steps": {},
            "github": {**context["github"], "action_path": str(self.action_path)},
        }
        action_env = {**env, "GITHUB_ACTION_PATH": str(self.action_path)}
        status = "success"
        for step in action["runs"]["steps"]:
            if not Expr(inner, status).condition(step.get("if")):
                continue
            assert "run" not in step or step.get("shell") == "bash", "a composite run: needs shell"
            outputs, code = self._step(step, inner, action_env, workspace, temp, run)
            if step.get("id"):
                inner["steps"][step["id"]] = {"outputs": outputs}
            if code != 0:
                status = "failure"
        outputs = {k: _str(Expr(inner).value(v["value"])) for k, v in action["outputs"].items()}
        return outputs, 0 if status == "success" else 1


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)
