"""Sub-loops at load time: the `loop:`/`with:`/`outputs:` keys, typed context inputs, and
`ll validate` following children (inputs, routing of child terminals, outputs read, cycles,
depth), through the real `ll` and in process."""

from __future__ import annotations

from pathlib import Path

import pytest
from project import Project

from little_loops.errors import LoadError
from little_loops.load.children import (
    MAX_DEPTH,
    child_path,
    input_problem,
    missing_inputs,
)
from little_loops.load.loader import (
    load,
    try_load,
)
from little_loops.model.loop import Input

CHILD = """\
name: deploy-region
context:
  region: ~
  version: {type: string, description: release to deploy}
  percent: 10
  strategy: {type: string, enum: [canary, blue-green], default: canary}
outputs:
  url: https://${context.region}.example.com/v/${context.version}
initial: canary
states:
  canary:
    action: echo deploying ${context.region} ${context.version} ${context.percent}
    on_success: live
    on_failure: rolled_back
  live:
    terminal: true
  rolled_back:
    terminal: true
    outcome: failure
"""

PARENT = """\
name: release
initial: build
states:
  build:
    action: echo 1.4.0
    capture: build
    next: deploy
  deploy:
    loop: deploy-region.yaml
    with: {region: eu-west, version: "${captured.build.output}", percent: 10}
    capture: deploy
    route: {live: verify, rolled_back: report, failure: report}
  verify:
    action: echo ${captured.deploy.outputs.url} ${captured.deploy.final_state}
    next: done
  report:
    action: echo ${captured.deploy.outcome} ${captured.deploy.exit_code}
    next: done
  done:
    terminal: true
"""


def tree(tmp_path: Path, parent: str = PARENT, child: str = CHILD) -> Path:
    (tmp_path / "deploy-region.yaml").write_text(child)
    (tmp_path / "release.yaml").write_text(parent)
    return tmp_path / "release.yaml"


def lines(path: Path) -> list[str]:
    _, found = try_load(path)
    return [d.format().replace(str(path.parent) + "/", "") for d in found]


# -- the model --------------------------------------------------------------------------------


def test_the_model_holds_the_call_its_bindings_inputs_and_outputs(tmp_path: Path) -> None:
    path = tree(tmp_path)
    parent = load(path)
    deploy = parent.states["deploy"]
    assert deploy.is_loop
    assert deploy.loop == "deploy-region.yaml"
    assert deploy.action is None
    assert deploy.action_type is None
    assert child_path(parent, deploy) == (tmp_path / "deploy-region.yaml").resolve()
    assert dict(deploy.with_) == {
        "region": "eu-west",
        "version": "${captured.build.output}",
        "percent": "10",
    }
    child = load(tmp_path / "deploy-region.yaml")
    assert dict(child.outputs) == {
        "url": "https://${context.region}.example.com/v/${context.version}"
    }
    assert child.inputs["region"] == Input(required=True)
    assert child.inputs["version"] == Input(
        required=True, type="string", description="release to deploy"
    )
    assert child.inputs["percent"] == Input(default="10", type="integer")
    assert child.inputs["strategy"] == Input(
        default="canary", type="string", enum=("canary", "blue-green")
    )
    # `context` keeps the defaults only: a required key has none.
    assert dict(child.context) == {"percent": 10, "strategy": "canary"}


def test_input_values_are_checked_by_type_and_enum() -> None:
    assert input_problem("n", Input(type="integer"), "12") is None
    assert "not a whole number" in (input_problem("n", Input(type="integer"), "1.5") or "")
    assert input_problem("x", Input(type="number"), "1.5") is None
    assert "not a number" in (input_problem("x", Input(type="number"), "fast") or "")
    assert "not true or false" in (input_problem("b", Input(type="boolean"), "yes") or "")
    assert input_problem("s", Input(enum=("a", "b")), "b") is None
    assert "not one of: a, b" in (input_problem("s", Input(enum=("a", "b")), "c") or "")


def test_missing_inputs_names_the_set_to_add(tmp_path: Path) -> None:
    child = load(tree(tmp_path).parent / "deploy-region.yaml")
    assert missing_inputs(child, {}) == "context key 'region' needs a value: --set region=VALUE"
    assert missing_inputs(child, {"region": "eu"}) == (
        "context key 'version' (release to deploy) needs a value: --set version=VALUE"
    )
    assert missing_inputs(child, {"region": "eu", "version": "1"}) is None


# -- ll validate through the real ll ------------------------------------------------------------


def test_a_good_tree_validates(tmp_path: Path, project: Project) -> None:
    result = project.ll("validate", "release.yaml", cwd=tree(tmp_path).parent)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_validate_reports_every_misuse_of_with_routes_and_outputs(
    tmp_path: Path, project: Project
) -> None:
    parent = (
        PARENT.replace("percent: 10}", "percent: ten, regoin: x, strategy: rolling}")
        .replace("live: verify, ", "")
        .replace("outputs.url", "outputs.link")
        .replace("region: eu-west, ", "")
    )
    result = project.ll("validate", "release.yaml", cwd=tree(tmp_path, parent).parent)
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        "release.yaml:8:3: error: state 'deploy' can end as 'deploy-region.yaml' terminal "
        "'live' (outcome success), but nothing routes it; add 'live: STATE' or 'success: "
        "STATE' under 'route:', or a default '_: STATE'",
        "release.yaml:9:11: error: state 'deploy' runs 'deploy-region.yaml' without its "
        "required context key 'region'; add 'with: {region: VALUE}'",
        "release.yaml:10:58: error: state 'deploy' passes 'percent' = 'ten', which is not a "
        "whole number (its type is integer)",
        "release.yaml:10:71: error: state 'deploy' passes 'regoin', which is not a context key "
        "of 'deploy-region.yaml' (did you mean 'region'?); its keys: percent, region, strategy, "
        "version",
        "release.yaml:10:84: error: state 'deploy' passes 'strategy' = 'rolling', which is not "
        "one of: canary, blue-green",
        "release.yaml:13:3: warning: state 'verify' cannot be reached from initial state 'build'",
        "release.yaml:14:13: error: '${captured.deploy.outputs.link}': 'deploy-region.yaml' "
        "declares no output 'link'; its outputs: url",
    ]


def test_a_child_terminal_falls_back_to_its_outcome_then_to_the_default(tmp_path: Path) -> None:
    by_outcome = PARENT.replace("live: verify, rolled_back: report", "success: verify")
    assert lines(tree(tmp_path, by_outcome)) == []
    by_default = PARENT.replace("live: verify, rolled_back: report, failure: report", "_: verify")
    assert [line for line in lines(tree(tmp_path, by_default)) if "error" in line] == []


def test_a_missing_child_file_is_named_with_a_guess(tmp_path: Path, project: Project) -> None:
    parent = PARENT.replace("loop: deploy-region.yaml", "loop: deploy-regoin.yaml")
    result = project.ll("validate", "release.yaml", cwd=tree(tmp_path, parent).parent)
    assert result.returncode == 2
    assert result.stdout == (
        "release.yaml:9:11: error: state 'deploy' runs loop file 'deploy-regoin.yaml', which "
        f"does not exist (looked for {tmp_path.resolve()}/deploy-regoin.yaml) (did you mean "
        "'deploy-region.yaml'?)\n"
    )


def test_a_child_with_errors_is_reported_at_its_own_file(tmp_path: Path, project: Project) -> None:
    child = CHILD.replace("on_failure: rolled_back", "on_failure: rolled_bak")
    result = project.ll("validate", "release.yaml", cwd=tree(tmp_path, child=child).parent)
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        "deploy-region.yaml:14:17: error: state 'canary' routes 'failure' to unknown state "
        "'rolled_bak' (did you mean 'rolled_back'?)",
        "release.yaml:9:11: error: state 'deploy' runs 'deploy-region.yaml', which has 1 error "
        "(listed with its own file name); fix the child first",
    ]


CALLER = """\
name: {name}
initial: call
states:
  call:
    loop: {callee}
    next: done
  done:
    terminal: true
"""


def test_a_call_cycle_is_an_error(tmp_path: Path, project: Project) -> None:
    (tmp_path / "a.yaml").write_text(CALLER.format(name="a", callee="b.yaml"))
    (tmp_path / "b.yaml").write_text(CALLER.format(name="b", callee="a.yaml"))
    result = project.ll("validate", "a.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        "a.yaml:5:11: error: state 'call' runs 'b.yaml', which has 1 error (listed with its "
        "own file name); fix the child first",
        "b.yaml:5:11: error: state 'call' calls 'a.yaml', which is already running above it: "
        "a.yaml → b.yaml → a.yaml; a loop cannot call itself, directly or through others",
    ]
    (tmp_path / "self.yaml").write_text(CALLER.format(name="self", callee="self.yaml"))
    assert [line.split(": ", 2)[2] for line in lines(tmp_path / "self.yaml")] == [
        "state 'call' calls 'self.yaml', which is already running above it: self.yaml → "
        "self.yaml; a loop cannot call itself, directly or through others"
    ]


def test_nesting_deeper_than_eight_runs_is_an_error(tmp_path: Path, project: Project) -> None:
    for i in range(1, MAX_DEPTH + 2):
        (tmp_path / f"d{i}.yaml").write_text(CALLER.format(name=f"d{i}", callee=f"d{i + 1}.yaml"))
    (tmp_path / f"d{MAX_DEPTH + 2}.yaml").write_text(
        "name: leaf\ninitial: x\nstates:\n  x: {terminal: true}\n"
    )
    assert lines(tmp_path / "d3.yaml") == []  # d3 .. d9 and the leaf d10: 8 runs
    result = project.ll("validate", "d1.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout.splitlines()[-1] == (
        "d8.yaml:5:11: error: state 'call' would start run number 9 in one tree, more than 8: "
        "d1.yaml → d2.yaml → d3.yaml → d4.yaml → d5.yaml → d6.yaml → d7.yaml → d8.yaml → "
        "d9.yaml; call fewer levels deep"
    )


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("    capture: deploy\n", "    capture: deploy\n    action: ./deploy.sh\n"),
            "release.yaml:12:13: error: state 'deploy' has both 'action' and 'loop'; a state "
            "runs one of them: move the action to a state of its own",
        ),
        (
            ("    next: deploy\n", "    next: deploy\n    with: {a: b}\n"),
            "release.yaml:8:11: error: state 'build' has 'with', which passes values to a child "
            "loop, but no 'loop'; add 'loop: FILE.yaml' or remove 'with'",
        ),
        (
            ("loop: deploy-region.yaml", "loop: ${context.file}.yaml"),
            "release.yaml:9:11: error: state 'deploy' names its loop file with a placeholder "
            "('${context.file}.yaml'); a 'loop:' file is a fixed path relative to this file, so "
            "`ll validate` can check it before anything runs",
        ),
        (
            ("loop: deploy-region.yaml", "loop: deploy-region.json"),
            "release.yaml:9:11: error: 'loop' of state 'deploy' is 'deploy-region.json'; a loop "
            "file ends in .yaml or .yml",
        ),
    ],
    ids=["action-and-loop", "with-without-loop", "templated-loop", "not-yaml"],
)
def test_a_state_does_one_thing(tmp_path: Path, edit: tuple[str, str], expected: str) -> None:
    found = lines(tree(tmp_path, PARENT.replace(*edit)))
    assert expected in found, found


def test_a_child_terminal_named_like_an_end_kind_is_refused(tmp_path: Path) -> None:
    child = CHILD.replace("rolled_back", "error")
    parent = PARENT.replace("rolled_back: report", "error: report")
    assert lines(tree(tmp_path, parent, child)) == [
        "release.yaml:9:11: error: 'deploy-region.yaml' has a terminal named 'error' (outcome "
        "failure), which a calling state cannot tell from the verdict 'error'; rename it in the "
        "child",
    ]


def test_typed_context_defaults_must_fit_their_type(tmp_path: Path) -> None:
    child = CHILD.replace("enum: [canary, blue-green], default: canary", "enum: [a], default: b")
    path = tmp_path / "c.yaml"
    path.write_text(child)
    assert lines(path) == [
        "c.yaml:6:48: error: the default of 'strategy' = 'b', which is not one of: a",
    ]


def test_captured_fields_of_a_loop_state_are_checked(tmp_path: Path) -> None:
    parent = PARENT.replace("${captured.deploy.final_state}", "${captured.deploy.confidence}")
    assert lines(tree(tmp_path, parent)) == [
        "release.yaml:14:13: error: '${captured.deploy.confidence}' in 'action' of state 'verify': "
        "name one of output, stderr, exit_code, duration_ms, verdict, final_state, outcome, "
        "outputs.NAME after the capture name, not 'confidence'",
    ]


# -- ll run of a child on its own ---------------------------------------------------------------


def test_ll_run_of_a_child_alone_asks_for_its_required_keys(
    tmp_path: Path, project: Project
) -> None:
    tree(tmp_path)
    result = project.ll("run", "deploy-region.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "Error: context key 'region' needs a value: --set region=VALUE" in result.stderr
    assert "Traceback" not in result.stderr
    result = project.ll(
        "run", "deploy-region.yaml", "--set", "region=eu", "--set", "version=1", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "deploying eu 1 10" in result.stdout + result.stderr
    result = project.ll(
        "run", "deploy-region.yaml", "--set", "region=eu", "--set", "version=1",
        "--set", "percent=lots", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--set 'percent' = 'lots', which is not a whole number" in result.stderr


def test_outputs_are_checked_like_any_template(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CHILD.replace("outputs:\n", "outputs:\n  log: ${captured.smoke.output}\n"))
    assert lines(path) == [
        "c.yaml:8:8: error: '${captured.smoke.output}' in 'outputs.log': no state has "
        "'capture: smoke'",
    ]
    path.write_text(CHILD.replace("outputs:\n", "outputs:\n  the url: x\n"))
    assert lines(path) == [
        "c.yaml:8:3: error: key 'the url' in 'outputs' is not valid; use only letters, digits, "
        "'_' and '-'",
    ]


def test_a_typed_context_key_takes_only_the_input_keys(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CHILD.replace("{type: string, description", "{type: text, descripton"))
    found = lines(path)
    assert len(found) == 2
    assert found[0] == (
        "c.yaml:4:19: error: unknown type 'text' for context key 'version'; valid types: "
        "string, integer, number, boolean"
    )
    assert "unknown key 'descripton'" in found[1]
    assert "(did you mean 'description'?)" in found[1]


def test_a_route_for_a_terminal_the_child_lacks_is_a_warning(tmp_path: Path) -> None:
    parent = PARENT.replace("rolled_back: report", "rolled_back: report, rollback: report")
    assert lines(tree(tmp_path, parent)) == [
        "release.yaml:12:58: warning: state 'deploy' routes 'rollback', which "
        "'deploy-region.yaml' never ends with (its terminals: live, rolled_back)",
    ]


def test_strict_warns_only_about_a_loop_states_unrouted_error_and_timeout(
    tmp_path: Path, project: Project
) -> None:
    result = project.ll("validate", "--strict", "release.yaml", cwd=tree(tmp_path).parent)
    found = [line for line in result.stdout.splitlines() if "'deploy'" in line]
    assert [line.split("verdict ")[1].split(",")[0] for line in found] == ["'error'", "'timeout'"]


def test_a_misspelt_routing_key_hides_the_coverage_check(tmp_path: Path) -> None:
    parent = PARENT.replace("    route: {live: verify, rolled_back: report, failure: report}\n",
                            "    rute: {live: verify}\n")  # fmt: skip
    found = lines(tree(tmp_path, parent))
    assert len(found) == 1, found  # no uncovered 'live'/'rolled_back' beside it
    assert "unknown key 'rute' in state 'deploy' (did you mean 'route'?)" in found[0]


def test_a_child_about_to_run_is_loaded_alone_and_once_while_unchanged(tmp_path: Path) -> None:
    """At run time a child is read without its own children (checked with the root, loaded
    when called), and a child called again is parsed again only when its file changed."""
    from little_loops.load.loader import load
    from little_loops.run.subloop import load_child

    (tmp_path / "grandchild.yaml").write_text("this: [is not a loop\n")
    (tmp_path / "child.yaml").write_text(
        "name: child\ninitial: go\nstates:\n"
        "  go: {loop: grandchild.yaml, route: {done: end}}\n  end: {terminal: true}\n"
    )
    (tmp_path / "parent.yaml").write_text(
        "name: parent\ninitial: call\nstates:\n"
        "  call: {loop: child.yaml, route: {end: done}}\n  done: {terminal: true}\n"
    )
    with pytest.raises(LoadError):
        load(tmp_path / "child.yaml")  # a load that follows finds the broken grandchild
    parent = load(tmp_path / "parent.yaml", follow=False)
    first = load_child(parent, parent.states["call"], 2)
    assert first.states["go"].loop == "grandchild.yaml"
    assert load_child(parent, parent.states["call"], 2) is first
    child = tmp_path / "child.yaml"
    child.write_text(child.read_text().replace("end: {terminal: true}", "end: {terminal: true}\n"))
    again = load_child(parent, parent.states["call"], 2)
    assert again is not first
    assert again.source_sha256 != first.source_sha256
