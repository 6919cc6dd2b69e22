"""Interpolation: scanning, rendering, context resolution and shell-safe escaping (real sh)."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from little_loops.errors import RunError, UndefinedVariable
from little_loops.templates.interpolate import (
    Placeholder,
    PlaceholderError,
    literal_text,
    placeholders,
    render,
    resolve_context,
    scan,
    single_quote,
)

X = "${captured.x.output}"


def scope_with(value: Any, **extra: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    scope: dict[str, Mapping[str, Any]] = {
        "context": {"name": "world", "dir": "/tmp/a b"},
        "captured": {"x": {"output": value, "exit_code": 0}},
        "prev": {"output": value, "exit_code": 1},
        "state": {"name": "check", "iteration": 3, "attempt": 1},
        "loop": {"name": "demo"},
        "env": {"HOME": "/home/me"},
    }
    scope.update(extra)
    return scope


def sh(command: str, cwd: Path, shell: str = "/bin/sh") -> bytes:
    done = subprocess.run(
        [shell, "-c", command], cwd=cwd, capture_output=True, timeout=10, check=False
    )
    assert done.returncode == 0, (command, done.stderr)
    return done.stdout


# --------------------------------------------------------------------------- scan


def test_scan_splits_literals_and_placeholders() -> None:
    parts = scan("a ${context.b|q} $${c} ${nope.x} ${x")
    assert parts[0] == "a "
    assert parts[1] == Placeholder(2, 16, "context", ("b",), "q")
    assert parts[2] == " ${c} "
    assert isinstance(parts[3], PlaceholderError)
    assert "unknown namespace 'nope'" in parts[3].message
    assert isinstance(parts[-1], str) or isinstance(parts[-2], PlaceholderError)
    assert [p.name for p in placeholders("${prev.output}${captured.n.exit_code}")] == [
        "prev.output",
        "captured.n.exit_code",
    ]


# --------------------------------------------------------------------------- render basics


def test_values_are_written_as_text() -> None:
    scope = {"context": {"s": "x", "i": 3, "f": 1.5, "t": True, "no": False, "none": None}}
    text = "${context.s} ${context.i} ${context.f} ${context.t} ${context.no} [${context.none}]"
    assert render(text, scope, shell=False) == "x 3 1.5 true false []"
    assert render(text, scope, shell=True) == "x 3 1.5 true false []"


def test_literal_dollar_brace() -> None:
    assert render("echo $${HOME:-x} ${context.name}", scope_with(""), shell=True) == (
        "echo ${HOME:-x} world"
    )
    assert render("no placeholders", {}, shell=True) == "no placeholders"


def test_undefined_variable_names_it_and_the_place() -> None:
    with pytest.raises(UndefinedVariable) as info:
        render("echo ${captured.y.output}", scope_with("v"), shell=True, where="state 'fix'")
    assert info.value.name == "captured.y.output"
    assert "'${captured.y.output}' in state 'fix'" in info.value.message
    with pytest.raises(UndefinedVariable):
        render("${context.name.deeper}", scope_with("v"), shell=False)
    with pytest.raises(UndefinedVariable):
        render("${prev.output}", {"context": {}}, shell=False)


def test_malformed_placeholder_is_a_run_error() -> None:
    with pytest.raises(RunError, match=r"'\$\{' is never closed .* in state 's'"):
        render("echo ${context.a", {}, shell=True, where="state 's'")
    with pytest.raises(RunError, match=r"unknown modifier '\|x'"):
        render("echo ${context.a|x}", {"context": {"a": "1"}}, shell=False)


def test_a_group_of_values_is_not_one_value() -> None:
    with pytest.raises(RunError, match=r"group of values.*exit_code, output"):
        render("echo ${captured.x}", scope_with("v"), shell=True)


def test_author_namespaces_are_written_as_is() -> None:
    scope = scope_with("v", context={"cmd": "ls -la | wc -l", "q": "it's"})
    tpl = "${context.cmd} ${state.name} ${state.iteration} ${loop.name} ${env.HOME}"
    assert render(tpl, scope, shell=True) == "ls -la | wc -l check 3 demo /home/me"
    assert render("echo ${context.q|q}", scope, shell=True) == "echo 'it'\\''s'"
    assert render("echo ${context.q|q}", scope, shell=False) == "echo 'it'\\''s'"


def test_prompts_get_values_verbatim() -> None:
    value = "$(rm -rf /) 'quoted' \"dq\""
    assert render("Output: ${captured.x.output}", scope_with(value), shell=False) == (
        f"Output: {value}"
    )
    assert render("${prev.output|q}", scope_with("a b"), shell=False) == "'a b'"


def test_raw_inserts_unescaped() -> None:
    assert render("echo ${captured.x.output|raw}", scope_with("a  b"), shell=True) == "echo a  b"


def test_escaping_by_context_is_visible_in_the_command() -> None:
    s = scope_with("it's $x")
    assert render(f"echo {X}", s, shell=True) == "echo 'it'\\''s $x'"
    assert render(f'echo "{X}"', s, shell=True) == 'echo "it\'s \\$x"'
    assert render(f"echo '{X}'", s, shell=True) == "echo 'it'\\''s $x'"
    assert render("echo ${prev.output}", s, shell=True) == "echo 'it'\\''s $x'"
    # |q inside quotes still yields the value byte for byte: it escapes for the spot
    assert render('echo "${context.name|q}"', s, shell=True) == 'echo "world"'
    assert render("echo '${context.name|q}'", s, shell=True) == "echo 'world'"


def test_render_caches_the_scan() -> None:
    from little_loops.templates.interpolate import _compile

    template = "echo cache-probe ${captured.x.output}"
    render(template, scope_with("1"), shell=True)
    before = _compile.cache_info().hits
    for i in range(50):
        render(template, scope_with(str(i)), shell=True)
    assert _compile.cache_info().hits >= before + 50


# ------------------------------------------------------------------- hostile values, real sh

HOSTILE = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "'; touch PWNED; '",
    '"; touch PWNED; "',
    "line1\nline2",
    "back\\slash",
    "\\",
    "'",
    '"',
    "$",
    "$HOME ${HOME} $((1+1))",
    "a\\'b\\\"c\\`d\\$e",
    "'\"$(touch PWNED)\"'`touch PWNED`\\\n'",
    "\\\n; touch PWNED",
    ")\ntouch PWNED\n(",
    "}; touch PWNED; {",
    "# not a comment",
    "",
    "  spaced  out  ",
    "ünïcødé ✓",
]


def _trailing_newlines_stripped(v: str) -> str:
    return v.rstrip("\n")


def _field_split(v: str) -> str:
    # unquoted `...` output is split on IFS; printf %s then joins the fields
    return "".join(f for f in re.split(r"[ \t\n]+", v.rstrip("\n")) if f)


# template -> what printf prints for value v
CONTEXTS: dict[str, Any] = {
    f"printf %s {X}": lambda v: v,
    f'printf %s "a {X} b"': lambda v: f"a {v} b",
    f"printf %s 'a {X} b'": lambda v: f"a {v} b",
    f"printf %s x{X}y": lambda v: f"x{v}y",
    f'printf %s "$(printf %s {X})"': _trailing_newlines_stripped,
    f'printf %s "$(printf %s "{X}")"': _trailing_newlines_stripped,
    f"printf %s \"$(printf %s '{X}')\"": _trailing_newlines_stripped,
    f'printf %s "`printf %s {X}`"': _trailing_newlines_stripped,
    f'printf %s "`printf %s "{X}"`"': _trailing_newlines_stripped,
    f'printf %s "$(printf %s `printf %s {X}`)"': _field_split,
    f'printf %s "$(printf %s "`printf %s {X}`")"': _trailing_newlines_stripped,
    f'printf %s "`printf %s \\`printf %s {X}\\``"': _field_split,
    f"printf %s $${{HOME:+{X}}}": lambda v: v,
    f"cat <<EOF\n{X}\nEOF": lambda v: v + "\n",
    f"cat <<-EOF\n\t{X}\n\tEOF": lambda v: v + "\n",
    f"cat <<'EOF'\n{X}\nEOF": lambda v: v + "\n",
    f"cat <<EOF\n$(printf %s {X})\nEOF": lambda v: v.rstrip("\n") + "\n",
    f"printf %s ok # {X}": lambda v: "ok",
    f'printf %s "$(case a in a) printf %s {X};; esac) / {X}"': lambda v: v.rstrip("\n") + f" / {v}",
    f'printf %s "$(echo case | tr -d x; printf %s {X}) / {X}"': lambda v: (
        f"case\n{v}".rstrip("\n") + f" / {v}"
    ),
    # arithmetic: '<<' there is a shift, never a here-document (issue 11, item 10)
    f"printf %s $((1<<2)) >/dev/null\nprintf %s {X}": lambda v: v,
    f'printf %s "$((1<<2))" {X}': lambda v: f"4{v}",
    f"printf %s $(( (1<<2) + $(printf 1) )){X}": lambda v: f"5{v}",
    f": $[1+2]; printf %s {X}": lambda v: v,
    f"((i=1)) || :; printf %s {X}": lambda v: v,
    f"cat <<EOF\n$((1<<2)) {X}\nEOF": lambda v: f"4 {v}\n",
    # line continuations are removed before the shell reads anything
    f"cat <\\\n<EOF\n{X}\nEOF": lambda v: v + "\n",
    f'printf %s "$\\\n(printf %s {X})"': _trailing_newlines_stripped,
    f"cat <<EOF\nab\\\nEOF\n{X}\nEOF": lambda v: f"abEOF\n{v}\n",
    f"printf %s a\\\n{X}": lambda v: f"a{v}",
    # quotes inside "${...}" that sh and bash both take as text
    f"x=; printf %s \"$${{x:-'a b'}}\" {X}": lambda v: f"'a b'{v}",
}


@pytest.mark.parametrize("template", list(CONTEXTS))
@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_values_never_run_and_arrive_exactly(
    template: str, value: str, tmp_path: Path
) -> None:
    command = render(template, scope_with(value), shell=True)
    assert sh(command, tmp_path) == CONTEXTS[template](value).encode()
    assert not (tmp_path / "PWNED").exists()


ECHO_FORMS = [
    f"echo {X}",
    f'echo "a {X} b"',
    f"echo 'a {X} b'",
    f'echo "$(printf %s {X})"',
    f"echo `printf %s {X}`",
    f"echo $(printf %s {X})",
]


@pytest.mark.parametrize("template", ECHO_FORMS)
@pytest.mark.parametrize("value", HOSTILE)
def test_echo_forms_never_run_the_value(template: str, value: str, tmp_path: Path) -> None:
    # echo (dash reads backslash escapes) and unquoted substitutions (split on IFS) change
    # the text by their own rules; what matters here is that nothing runs
    for name in ("captured.x.output", "prev.output"):
        command = render(template.replace("captured.x.output", name), scope_with(value), shell=True)
        sh(command, tmp_path)
        assert not (tmp_path / "PWNED").exists(), command


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
@pytest.mark.parametrize("value", HOSTILE)
def test_ansi_c_quotes_under_bash_and_dash(value: str, tmp_path: Path) -> None:
    command = render(f"printf %s $'a\\t{X} b'", scope_with(value), shell=True)
    assert sh(command, tmp_path, "/bin/bash") == f"a\t{value} b".encode()
    # dash reads $'...' as '$' then '...': different text, still never run
    assert sh(command, tmp_path) == f"$a\\t{value}$ b".encode()
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
@pytest.mark.parametrize("template", [t for t in CONTEXTS if "<<" not in t])
@pytest.mark.parametrize("value", HOSTILE[:8])
def test_bash_reads_the_same_escapes(template: str, value: str, tmp_path: Path) -> None:
    command = render(template, scope_with(value), shell=True)
    assert sh(command, tmp_path, "/bin/bash") == CONTEXTS[template](value).encode()
    assert not (tmp_path / "PWNED").exists()


# Printable ASCII plus the characters that matter to a shell; never NUL (argv cannot hold it).
FUZZ_TEXT = st.lists(
    st.sampled_from([*"ab $`'\"\\\n\t(){};&|<>*?#~!=%-", "EOF", "é"]), max_size=30
).map("".join)

FUZZ_CONTEXTS = [
    f"printf %s {X}",
    f'printf %s "a {X} b"',
    f"printf %s 'a {X} b'",
    f'printf %s "$(printf %s {X})"',
    f'printf %s "`printf %s {X}`"',
    f"cat <<EOF\n{X}\nEOF",
    f"printf %s $((1<<2)) >/dev/null\nprintf %s {X}",
    f"cat <\\\n<EOF\n{X}\nEOF",
    f'printf %s "$\\\n(printf %s {X})"',
]


@pytest.mark.slow  # fuzz: 200 random values, a shell each, in each of nine contexts
@pytest.mark.parametrize("template", FUZZ_CONTEXTS)
def test_fuzzed_values_arrive_exactly(template: str, tmp_path: Path) -> None:
    expected = CONTEXTS[template]

    @settings(
        max_examples=200,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(FUZZ_TEXT)
    def check(value: str) -> None:
        lines = value.split("\n")
        if "<EOF" in template and ("EOF" in lines or any(x.startswith("EOFé") for x in lines)):
            # a value line equal to the delimiter would end the here-document, and one that
            # starts with it and then a non-ASCII character is misread by dash: refused
            with pytest.raises(RunError, match="here-document"):
                render(template, scope_with(value), shell=True)
            return
        command = render(template, scope_with(value), shell=True)
        assert sh(command, tmp_path) == expected(value).encode()
        assert not (tmp_path / "PWNED").exists()

    check()


# Shell fragments whose order decides where a value stands: quotes, continuations, arithmetic,
# here-documents, comments, substitutions, and the bash-only forms sh reads otherwise.
FRAGMENTS = [
    *["echo ", " ", "\t", "\n", ";", "|", "&&", "x", "1", "-", "{", "}", "(", ")", "#"],
    *['"', "'", "$'", "\\'", "\\", "\\\n", "$", "`", "$(", "$((", "))", "((", "$${", "$[", "]"],
    *["<", ">", "<<", "<<-", "EOF", "'EOF'", "case x in x) ", ";; esac", "for "],
]
INJECTING = "$(touch PWNED)`touch PWNED`';touch PWNED;'\"\n touch PWNED\nEOF\ntouch PWNED\n"


@pytest.mark.parametrize(
    "template",
    [
        "`#\\\n" + X + "`",  # found by the fuzz test below: a comment that goes on
        '"`#\\\n' + X + '`"',
        'printf %s "`printf %s a\\\n' + X + '`"',
        "printf %s \"`printf %s 'a\\\n" + X + "'`\"",
    ],
)
def test_a_line_continuation_in_backticks_is_read_as_the_shells_read_it(
    tmp_path: Path, template: str
) -> None:
    """sh and bash remove a backslash-newline from a backtick body before reading it, in its
    quotes and its comments too: a comment before it goes on over the next line, where a
    value then lies. Neither shell runs the value, and where it is a word it is read whole."""
    shells = [s for s in ("/bin/sh", shutil.which("bash")) if s]
    for value, shown in ((INJECTING, None), ("b c", "ab c")):
        command = render(template, scope_with(value), shell=True)
        for shell in shells:
            done = subprocess.run(
                [shell, "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=5
            )
            assert not list(tmp_path.glob("PWNED*")), (shell, template, command)
            if shown is not None and template.startswith("printf"):
                assert done.stdout == shown, (shell, template, done.stdout, done.stderr)


@pytest.mark.slow  # fuzz: 150 random commands, run by every shell
def test_fuzzed_templates_never_run_a_value(tmp_path: Path) -> None:
    """Random commands around a placeholder: either refused, or no shell runs the value."""
    shells = [s for s in ("/bin/sh", shutil.which("bash")) if s]
    fragments = st.lists(st.sampled_from(FRAGMENTS), max_size=9).map("".join)

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(fragments, fragments, st.booleans())
    def check(before: str, after: str, twice: bool) -> None:
        template = before + X + after + (X if twice else "")
        try:
            command = render(template, scope_with(INJECTING), shell=True)
        except RunError:
            return
        for shell in shells:
            with contextlib.suppress(subprocess.TimeoutExpired):
                subprocess.run(
                    [shell, "-c", command],
                    cwd=tmp_path,
                    capture_output=True,
                    stdin=subprocess.DEVNULL,
                    timeout=5,
                    check=False,
                )
            made = [p.name for p in tmp_path.iterdir() if p.name.startswith("PWNED")]
            for p in tmp_path.iterdir():
                if p.is_file():
                    p.unlink()
            assert made == [], (shell, template)

    check()


# --------------------------------------------------------------------------- refused spots


@pytest.mark.parametrize(
    ("template", "value", "reason"),
    [
        (f"echo \\{X}", "v", "follows a backslash"),
        (f"echo `echo \\{X}`", "v", "follows a backslash"),
        (f"cat <<EOF\n{X}\nEOF", "a\nEOF\ntouch PWNED", "end the here-document early"),
        (f"cat <<EOF\n{X}\nEOF", "EOF", "end the here-document early"),
        (f"cat <<EOF\nx\n`printf %s {X}`\nEOF", "\nEOF\n", "end the here-document early"),
        (f'echo "$${{HOME:+{X}}}"', "it's", "single quote"),
        (f"cat <<{X}\nEOF", "EOF", "delimiter"),
        # where sh and bash read the command differently, or the lexer cannot follow it
        (f"((1<<2)) || :\necho {X}", "v", "'<' inside '\\(\\(...\\)\\)'"),
        (f"((#x)) || :\necho {X}", "v", "'#' inside"),
        (f"echo $[1<<2]\necho {X}", "v", "inside \\$\\[...\\]"),
        (f"printf %s $'a\\'b' {X} '", "v", "inside \\$'...'"),
        (f"cat <<E\\\nOF\n{X}\nEOF", "v", "delimiter that spans lines"),
        (f"cat <<'E\nOF'\n{X}\nE\nOF", "v", "delimiter that spans lines"),
        (f"cat <<EOF\nEO\\\nF\n{X}\nEOF", "v", "continued into its delimiter"),
        (f"x=; echo \"$${{x:-'}}'}} {X} '}}\"", "v", "single quote inside"),
        (f"x=; echo \"$${{x:-'{X}'}}\"", "v", "inside '...' within"),
        (f"echo $((echo a); echo b) {X}", "v", "does not end with"),
        (f'echo $(( "1" + 1 )) {X}', "v", "quote inside arithmetic"),
        (f"echo `echo $[1<<2]` {X}", "v", "inside \\$\\["),
        (f"echo $(( {X} + 1 ))", "1", "inside arithmetic"),
        (f"echo $[{X}]", "1", "inside arithmetic"),
    ],
)
def test_spots_that_cannot_be_made_safe_are_refused(
    template: str, value: str, reason: str, tmp_path: Path
) -> None:
    with pytest.raises(RunError, match=reason) as info:
        render(template, scope_with(value), shell=True, where="state 'w'")
    assert "'${captured.x.output}'" in info.value.message or "command" in info.value.message
    assert "state 'w'" in info.value.message


def test_a_bare_dollar_from_an_author_value_cannot_join_a_value(tmp_path: Path) -> None:
    scope = scope_with("(touch PWNED)", context={"cur": "$"})
    for template in (f'printf %s "${{context.cur}}{X}"', f"printf %s ${{context.cur}}{X}"):
        command = render(template, scope, shell=True)
        assert sh(command, tmp_path) == b"$(touch PWNED)"
    assert not (tmp_path / "PWNED").exists()


def test_raw_author_text_moves_the_quoting_state(tmp_path: Path) -> None:
    # the context value opens a double quote; the captured value is escaped for it
    scope = scope_with("$(touch PWNED)'", context={"open": '"a ', "close": ' b"'})
    command = render(f"printf %s ${{context.open}}{X}${{context.close}}", scope, shell=True)
    assert sh(command, tmp_path) == b"a $(touch PWNED)' b"
    assert not (tmp_path / "PWNED").exists()


def test_single_quote() -> None:
    assert single_quote("") == "''"
    assert single_quote("it's") == "'it'\\''s'"


# --------------------------------------------------------------------------- resolve_context


def test_context_overrides_and_references() -> None:
    context: dict[str, str | int | float | bool] = {
        "dir": "build",
        "out": "${context.dir}/out",
        "n": 3,
        "flag": True,
    }
    got = resolve_context(context, {"dir": "dist"}, env={})
    assert got == {"dir": "dist", "out": "dist/out", "n": "3", "flag": "true"}


def test_context_chain_env_loop_and_new_keys() -> None:
    context = {"a": "${context.b}!", "b": "${context.c}-${env.USER}", "c": "x"}
    got = resolve_context(
        context, {"extra": "${context.a} ${loop.name}"}, env={"USER": "u"}, loop={"name": "L"}
    )
    assert got == {"a": "x-u!", "b": "x-u", "c": "x", "extra": "x-u! L"}


def test_context_cycle_is_named() -> None:
    context = {"a": "${context.b}", "b": "${context.c}", "c": "${context.a}", "d": "ok"}
    with pytest.raises(RunError, match=r"cycle: a -> b -> c -> a"):
        resolve_context(context, {}, env={})
    with pytest.raises(RunError, match=r"cycle: s -> s"):
        resolve_context({"s": "${context.s}"}, {}, env={})


def test_context_errors() -> None:
    with pytest.raises(UndefinedVariable, match=r"'\$\{context.nope\}' in context value 'a'"):
        resolve_context({"a": "${context.nope}"}, {}, env={})
    with pytest.raises(UndefinedVariable, match=r"env\.MISSING"):
        resolve_context({"a": "${env.MISSING}"}, {}, env={})
    with pytest.raises(RunError, match=r"'a' uses '\$\{captured\.n\.output\}'"):
        resolve_context({"a": "${captured.n.output}"}, {}, env={})
    with pytest.raises(RunError, match="before the run"):
        resolve_context({"a": "${loop.name}"}, {}, env={})


def test_context_uses_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LL_TEST_VALUE", "from-env")
    assert resolve_context({"a": "${env.LL_TEST_VALUE}"}, {}) == {"a": "from-env"}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("make test", "make test"),
        ("", ""),
        ("echo $HOME $(pwd) $", "echo $HOME $(pwd) $"),
        ("echo $${not.a.placeholder}", "echo ${not.a.placeholder}"),
        ("echo ${context.x}", None),
        ("echo ${captured.x.output|raw} done", None),
        ("echo ${nope.x}", None),  # an error is never literal text
        ("echo ${", None),
    ],
)
def test_literal_text_is_what_render_gives_for_a_template_without_placeholders(
    template: str, expected: str | None
) -> None:
    assert literal_text(template) == expected
    if expected is not None:
        assert render(template, {}, shell=True) == expected
        assert render(template, {}, shell=False) == expected


def test_a_value_in_a_comment_on_each_of_two_lines_is_never_run(tmp_path: Path) -> None:
    """Found by the fuzz test: after a comment holding a value, a `#` on the next line starts a
    comment again, so the second value is kept on one line like the first."""
    command = render(f"#{X}\n#{X}", scope_with(INJECTING), shell=True)
    assert "\n" not in command.split("\n", 1)[1]
    subprocess.run(["/bin/sh", "-c", command], cwd=tmp_path, capture_output=True, check=False)
    assert not list(tmp_path.glob("PWNED*"))
