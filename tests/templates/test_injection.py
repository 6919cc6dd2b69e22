"""Hostile values through the real `ll`: never run, never leaked, any size (issue 11: 10-12, 15).

Each test writes a loop file, runs `python -m little_loops` in a subprocess and looks at what
the process left behind: files an injected command would create, exit codes, messages, and
every byte of the run directory.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from fakes import FakeClaude, install_fake_claude
from project import Project

from little_loops.record import outputs

HOSTILE = "x; touch PWNED;"


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeClaude:
    return install_fake_claude(tmp_path / "fake-bin", monkeypatch)


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def pwned(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("PWNED"))


def captured(base: Path, name: str) -> str:
    """The output the last run captured as `name`, from its state.json."""
    (state,) = base.glob(".loops/runs/*/state.json")
    kept = outputs.resolve(state.parent, json.loads(state.read_text()))
    return str(kept["captured"][name]["output"])


def capture_then(action: str, value: str = HOSTILE) -> str:
    """A loop that captures `value` as `p`, then runs `action` (YAML block text)."""
    body = textwrap.indent(action, " " * 6)
    return (
        "name: inject\n"
        "initial: p\n"
        "context:\n"
        f"  value: {json.dumps(value)}\n"
        "states:\n"
        "  p:\n"
        "    action: printf '%s' ${context.value|q}\n"
        "    capture: p\n"
        "    next: q\n"
        "  q:\n"
        "    action: |\n"
        f"{body}\n"
        "    capture: q\n"
        "    next: done\n"
        "  done: {terminal: true}\n"
    )


# ------------------------------------------------------------------ 10: the quoting lexer


def test_shift_in_arithmetic_is_not_a_here_document(tmp_path: Path, project: Project) -> None:
    # the case: `<<` in $((...)) once made the value after it go in unquoted
    loop = write(tmp_path / "l.yaml", capture_then("echo $((1<<2))\necho ${captured.p.output}"))
    done = project.ll("run", str(loop), "--verbose")
    assert done.returncode == 0, done.stderr
    assert captured(tmp_path, "q") == f"4\n{HOSTILE}"
    assert pwned(tmp_path) == []


@pytest.mark.parametrize(
    ("action", "why"),
    [
        ("((1<<2)) || :\necho ${captured.p.output}", "'<' inside '((...))'"),
        ("echo $[1<<2]\necho ${captured.p.output}", "'<' inside $[...]"),
        ("printf %s $'a\\'b' ${captured.p.output} '", "\\' inside $'...'"),
        ("cat <<E\\\nOF\n${captured.p.output}\nEOF", "delimiter that spans lines"),
        ("cat <<EOF\nab\nEO\\\nF\necho ${captured.p.output}\nEOF", "continued into its delimiter"),
        ("x=; echo \"$${x:-'}'} ${captured.p.output} '}\"", 'single quote inside "${...}"'),
        ("echo $((echo a); echo b) ${captured.p.output}", "'$((' that does not end"),
    ],
)
def test_unsure_spots_are_a_run_error_naming_the_placeholder(
    tmp_path: Path, project: Project, action: str, why: str
) -> None:
    loop = write(tmp_path / "l.yaml", capture_then(action))
    done = project.ll("run", str(loop))
    out = done.stdout + done.stderr
    assert done.returncode == 3, out
    assert "cannot safely place '${captured.p.output}' in state 'q'" in out
    assert why in out
    assert "Traceback" not in out
    assert pwned(tmp_path) == []


@pytest.mark.parametrize(
    "action",
    [
        "cat <\\\n<EOF\n${captured.p.output}\nEOF",  # a continuation inside '<<'
        'printf %s "$\\\n(printf %s ${captured.p.output})"',  # inside '$('
        "cat <<EOF\nab\\\nEOF\n${captured.p.output}\nEOF",  # a continued body line
    ],
)
def test_line_continuations_keep_values_quoted(
    tmp_path: Path, project: Project, action: str
) -> None:
    value = "$(touch PWNED) `touch PWNED`; touch PWNED"
    loop = write(tmp_path / "l.yaml", capture_then(action, value))
    done = project.ll("run", str(loop), "--verbose")
    assert done.returncode == 0, done.stdout + done.stderr
    assert captured(tmp_path, "q").splitlines()[-1] == value
    assert pwned(tmp_path) == []


# ------------------------------------------------------------------ 11: secrets in quoted form

PW = "hunter2'xyz"
TOKEN = "tok'en\"$x`9"  # an environment secret a step prints and a later step re-quotes
LEAKS = [PW, "hunter2'\\''xyz", "hunter2", TOKEN, "tok'\\''en", "tok'en"]

SECRET_LOOP = """\
name: secret
initial: a
context:
  pw: "hunter2'xyz"
secrets: [pw]
states:
  a:
    action: echo ${context.pw|q} >/dev/null; printf '%s\\n' "t=$MY_TOKEN"
    capture: a
    next: b
  b:
    action: echo ${captured.a.output} "${context.pw}"; false
    next: done
  done: {terminal: true}
"""


def leaked(text: str) -> list[str]:
    return [secret for secret in LEAKS if secret in text]


def run_dir_text(base: Path) -> str:
    return "\n".join(
        p.read_bytes().decode("utf-8", "replace") for p in base.rglob("*") if p.is_file()
    )


def test_quoted_secrets_never_reach_terminal_events_junit_or_files(
    tmp_path: Path, project: Project
) -> None:
    loop = write(tmp_path / "l.yaml", SECRET_LOOP)
    env = {"MY_TOKEN": TOKEN}
    for args in (["--verbose"], ["--json"], []):
        done = project.ll("run", str(loop), "--junit-xml", str(tmp_path / "j.xml"), *args, env=env)
        assert done.returncode == 1, done.stdout + done.stderr
        assert leaked(done.stdout + done.stderr) == [], done.stdout
        assert "echo '***'" in done.stdout or "echo '***'" in done.stdout.replace('\\"', '"')
    assert leaked((tmp_path / "j.xml").read_text()) == []
    assert leaked(run_dir_text(tmp_path / ".loops")) == []
    # the snapshot keeps the file's shape, with the secret literal masked
    for snapshot in (tmp_path / ".loops" / "runs").glob("*/loop.yaml"):
        assert '  pw: "***"' in snapshot.read_text()


def test_dry_run_masks_secrets(tmp_path: Path, project: Project) -> None:
    loop = write(tmp_path / "l.yaml", SECRET_LOOP)
    done = project.ll("run", str(loop), "--dry-run", "--set", "pw=s3cret'value")
    assert done.returncode == 0, done.stderr
    assert "echo '***' >/dev/null" in done.stdout
    assert "s3cret" not in done.stdout + done.stderr


def test_validate_warns_about_a_literal_secret(tmp_path: Path, project: Project) -> None:
    loop = write(tmp_path / "l.yaml", SECRET_LOOP)
    done = project.ll("validate", str(loop))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "l.yaml:4:7: warning: secret 'pw' has a literal value in the file, which is then "
        "kept wherever the file goes; pass it with --set pw=... or the environment "
        "(pw: ${env.NAME})"
    ) in done.stdout + done.stderr
    from_env = write(tmp_path / "e.yaml", SECRET_LOOP.replace('"hunter2\'xyz"', "${env.PW}"))
    done = project.ll("validate", str(from_env))
    assert "literal" not in done.stdout + done.stderr


def test_a_masked_snapshot_still_resumes_unchanged_file(tmp_path: Path, project: Project) -> None:
    # the snapshot differs from the file (masked), the change check uses the digest
    loop = write(tmp_path / "l.yaml", RESUME_LOOP.replace("pw: ''", "pw: 'file-secret-1'"))
    first = project.ll("run", str(loop), process=True)  # the loop SIGTERMs its own ll
    assert first.returncode == 143, first.stdout + first.stderr
    assert "file-secret-1" not in run_dir_text(tmp_path / ".loops")
    # a real change is still told apart from the masking, line for line
    original = loop.read_text()
    loop.write_text(original + "description: changed\n")
    changed = project.ll("resume")
    assert changed.returncode == 3
    assert "(1 line(s) added, 0 removed, first change at line" in changed.stdout + changed.stderr
    loop.write_text(original)
    again = project.ll("resume")
    assert again.returncode == 0, again.stdout + again.stderr
    assert (tmp_path / "got.txt").read_text() == "dist/file-secret-1/app|file-secret-1"


# ------------------------------------------------------------------ 12: resume with secrets

RESUME_LOOP = """\
name: resumable
initial: build
context:
  pw: ''
secrets: [pw]
states:
  build:
    action: printf 'dist/%s/app' "${context.pw}"
    capture: build
    next: stop
  stop:
    # the first time through, ll itself is terminated here
    action: if [ ! -f stopped ]; then touch stopped; kill -TERM $PPID; sleep 5; fi
    next: use
  use:
    action: printf '%s|%s' ${captured.build.output} "${context.pw}" > got.txt
    next: done
  done: {terminal: true}
"""


def test_resume_refills_captured_secrets_and_asks_for_set_ones(
    tmp_path: Path, project: Project
) -> None:
    secret = "s3cr3t-Value"
    loop = write(tmp_path / "l.yaml", RESUME_LOOP)
    first = project.ll("run", str(loop), "--set", f"pw={secret}", process=True)  # SIGTERMs its ll
    assert first.returncode == 143, first.stdout + first.stderr
    assert secret not in run_dir_text(tmp_path / ".loops")
    # not given again: refused, naming the key, rather than quietly using the file's ''
    refused = project.ll("resume")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "secret pw given by --set" in refused.stdout + refused.stderr
    assert "--set pw=..." in refused.stdout + refused.stderr
    assert not (tmp_path / "got.txt").exists()
    again = project.ll("resume", "--set", f"pw={secret}")
    assert again.returncode == 0, again.stdout + again.stderr
    assert (tmp_path / "got.txt").read_text() == f"dist/{secret}/app|{secret}"
    assert secret not in run_dir_text(tmp_path / ".loops")


def test_resume_refuses_when_an_environment_secret_is_gone(
    tmp_path: Path, project: Project
) -> None:
    loop = write(
        tmp_path / "l.yaml",
        RESUME_LOOP.replace(
            "printf 'dist/%s/app' \"${context.pw}\"", "printf '%s' \"$MY_TOKEN\""
        ).replace("pw: ''", "pw: 'x'"),
    )
    env = {"MY_TOKEN": "env-secret-42"}
    # The loop ends its own `ll` with SIGTERM: that takes a process of its own.
    first = project.ll("run", str(loop), env=env, process=True)
    assert first.returncode == 143, first.stdout + first.stderr
    assert "env-secret-42" not in run_dir_text(tmp_path / ".loops")
    # In a process of its own: this refusal comes after the loop file's lock is taken, and in
    # process the lock (and an open file) would stay held until the process ends.
    refused = project.ll("resume", process=True)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "env.MY_TOKEN" in refused.stdout + refused.stderr
    again = project.ll("resume", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (tmp_path / "got.txt").read_text() == "env-secret-42|x"


# ------------------------------------------------------------------ 15: any size, no NUL

NUL_LOOP = """\
name: nul
initial: a
states:
  a:
    action: printf 'a\\0b'
    capture: a
    next: b
  b:
    action: ACTION
    next: done
  done: {terminal: true}
"""


@pytest.mark.parametrize("action", ["echo ${captured.a.output}", "/ll:fix ${captured.a.output}"])
def test_a_nul_byte_in_a_value_is_a_run_error_naming_it(
    tmp_path: Path, project: Project, claude: FakeClaude, action: str
) -> None:
    loop = write(tmp_path / "l.yaml", NUL_LOOP.replace("ACTION", action))
    done = project.ll("run", str(loop))
    out = done.stdout + done.stderr
    assert done.returncode == 3, out
    assert "'${captured.a.output}' in state 'b' holds a NUL byte" in out
    assert "Traceback" not in out
    state = json.loads(next(tmp_path.glob(".loops/runs/*/state.json")).read_text())
    assert state["status"] == "finished"
    assert state["outcome"] == "error"


BIG_LOOP = """\
name: big
initial: make
states:
  make:
    action: head -c 300000 /dev/zero | tr '\\0' x
    capture: big
    next: shell
  shell:
    action: printf %s ${captured.big.output} | wc -c
    capture: shell
    next: slash
  slash:
    action: /ll:check ${captured.big.output}
    capture: slash
    next: done
  done: {terminal: true}
"""


def test_commands_and_prompts_of_any_length_run(
    tmp_path: Path, project: Project, claude: FakeClaude
) -> None:
    # 300 KB, over the kernel's 128 KiB limit for one argument
    loop = write(tmp_path / "l.yaml", BIG_LOOP)
    done = project.ll("run", str(loop))
    assert done.returncode == 0, done.stdout + done.stderr
    assert captured(tmp_path, "shell").strip() == "300000"
    assert captured(tmp_path, "slash") == "fake claude: /ll:check " + "x" * 300000
    # the long prompt went in on stdin: the argument list stays short
    (call,) = [json.loads(line) for line in claude.argv_log.read_text().splitlines()]
    assert sum(len(arg) for arg in call["argv"]) < 1000
