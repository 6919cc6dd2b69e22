"""Which values are secret, and their masking in text, bytes, JSON values and byte streams."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from little_loops.record.secrets import (
    MASK,
    MIN_SECRET_LENGTH,
    RedactingStream,
    Redactor,
    secret_env_names,
)


@pytest.mark.parametrize(
    "name",
    [
        "API_KEY",
        "api_key",
        "Stripe_Api_Key",
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "github_token",
        "CLIENT_SECRET",
        "PASSWORD",
        "DB_PASSWORD",
        "password_file",
        "MYSQL_ROOT_PASSWORD_X",
        "ANTHROPIC_API_KEY",
    ],
)
def test_secret_env_names_match(name: str) -> None:
    assert secret_env_names({name: "value"}) == [name]


@pytest.mark.parametrize(
    "name",
    ["KEY", "MONKEY", "KEYBOARD", "TOKEN", "TOKENS_USED", "SECRETARY", "PASSWD", "HOME", "PATH"],
)
def test_secret_env_names_ignore(name: str) -> None:
    assert secret_env_names({name: "value"}) == []


def test_secret_env_names_keeps_env_order() -> None:
    env = {"HOME": "/h", "B_TOKEN": "t", "PATH": "/bin", "A_KEY": "k", "USER_PASSWORD": "p"}
    assert secret_env_names(env) == ["B_TOKEN", "A_KEY", "USER_PASSWORD"]


def test_redactor_masks_longest_first() -> None:
    r = Redactor(["hunter", "hunter2024"])
    assert r.values == ("hunter2024", "hunter")
    assert r.text("pw=hunter2024 old=hunter") == f"pw={MASK} old={MASK}"
    assert r.data(b"pw=hunter2024 old=hunter") == f"pw={MASK} old={MASK}".encode()


def test_redactor_ignores_short_and_non_string_values() -> None:
    short = "x" * (MIN_SECRET_LENGTH - 1)
    exact = "y" * MIN_SECRET_LENGTH
    r = Redactor([short, exact, "", None, 12345])  # type: ignore[list-item]
    assert r.values == (exact,)
    assert r.text(f"{short} {exact}") == f"{short} {MASK}"
    assert r.longest == MIN_SECRET_LENGTH


def test_redactor_deduplicates_and_measures_bytes() -> None:
    r = Redactor(["pässwörd", "pässwörd"])
    assert r.values == ("pässwörd",)
    assert r.longest == len("pässwörd".encode())
    assert r.data("x pässwörd y".encode()) == b"x *** y"


def test_redactor_obj_walks_nested_json_including_keys() -> None:
    r = Redactor(["s3cr3t-value"])
    value = {
        "event": "action_complete",
        "stdout": "token is s3cr3t-value\n",
        "details": {"s3cr3t-value": ["a", "s3cr3t-value", 3, None, True, 1.5]},
        "pair": ("x", "s3cr3t-value!"),
        "count": 2,
    }
    assert r.obj(value) == {
        "event": "action_complete",
        "stdout": "token is ***\n",
        "details": {"***": ["a", "***", 3, None, True, 1.5]},
        "pair": ["x", "***!"],
        "count": 2,
    }
    assert value["stdout"] == "token is s3cr3t-value\n"  # a copy; the original is untouched


def test_redactor_obj_stringifies_non_string_keys() -> None:
    r = Redactor(["12345"])
    assert r.obj({12345: "v", 7: "12345"}) == {"***": "v", "7": "***"}


def test_empty_redactor_is_falsy_and_passes_everything_through() -> None:
    r = Redactor(["abc"])  # too short to count
    assert not r
    value = {1: ("abc",)}
    assert r.obj(value) is value
    assert r.text("abc") == "abc"
    assert r.data(b"abc") == b"abc"
    assert r.longest == 0


def test_for_run_takes_secret_env_values_and_secret_context_keys() -> None:
    r = Redactor.for_run(
        {"GITHUB_TOKEN": "ghp_aaaa", "HOME": "/home/someone"},
        {"db_pass": "correct-horse", "branch": "main-branch"},
        ["db_pass", "missing"],
    )
    assert set(r.values) == {"ghp_aaaa", "correct-horse"}
    assert r.text("ghp_aaaa correct-horse main-branch /home/someone") == (
        "*** *** main-branch /home/someone"
    )


def stream_through(redactor: Redactor, chunks: list[bytes]) -> bytes:
    out: list[bytes] = []
    stream = RedactingStream(out.append, redactor)
    for chunk in chunks:
        stream.write(chunk)
    stream.flush()
    return b"".join(out)


def test_stream_masks_a_secret_split_across_chunks() -> None:
    r = Redactor(["TOPSECRET"])
    assert stream_through(r, [b"key=TOP", b"SEC", b"RET done\n"]) == b"key=*** done\n"


def test_stream_holds_back_until_flush() -> None:
    out: list[bytes] = []
    stream = RedactingStream(out.append, Redactor(["TOPSECRET"]))
    stream.write(b"ab")
    assert out == []  # shorter than the hold-back: nothing passed on yet
    stream.write(b"cdefghijkl")
    assert b"".join(out) == b"abcd"  # all but the last len(secret) - 1 bytes
    stream.flush()
    assert b"".join(out) == b"abcdefghijkl"
    stream.flush()
    assert len(out) == 2  # nothing pending: flush writes nothing


def test_stream_without_secrets_passes_chunks_on_unchanged() -> None:
    out: list[bytes] = []
    stream = RedactingStream(out.append, Redactor([]))
    stream.write(b"one")
    stream.write(b"two")
    assert out == [b"one", b"two"]
    stream.flush()
    assert out == [b"one", b"two"]


# Secrets drawn from characters the filler never uses, so no two can overlap in a text.
SECRETS = ["SECRET-ONE", "Q7Z9", "t0ken_XYZ_long_value", "KKKK"]
FILLER = st.text(alphabet="ab \n=.", max_size=12)


@given(
    pieces=st.lists(st.one_of(FILLER, st.sampled_from(SECRETS)), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
)
def test_stream_equals_whole_redaction_for_any_split(pieces: list[str], cuts: list[int]) -> None:
    r = Redactor(SECRETS)
    text = "".join(pieces).encode()
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    chunks = [text[a:b] for a, b in itertools.pairwise(points)]
    out = stream_through(r, chunks)
    for secret in SECRETS:
        assert secret.encode() not in out
    assert out == r.data(text)


def test_stream_masks_a_secret_that_contains_another_whole() -> None:
    r = Redactor(["hunter", "hunter2024"])
    out = stream_through(r, [b"pw=hunter", b"2024\n"])
    assert out == r.data(b"pw=hunter2024\n") == b"pw=***\n"


def test_quoted_forms_of_a_secret_are_masked() -> None:
    r = Redactor(["hunter2'x\"y"])
    assert r.values == ("hunter2'x\"y",)
    assert r.text("echo 'hunter2'\\''x\"y'") == "echo '***'"
    assert r.text('echo "hunter2\'x\\"y"') == 'echo "***"'
    assert r.text('{"pw": "hunter2\'x\\"y"}') == '{"pw": "***"}'


def test_sealer_names_each_secret_and_fills_it_back() -> None:
    from little_loops.errors import LoopError
    from little_loops.record.secrets import Sealer

    sources = {"context.pw": "hunter2'x", "env.GH_TOKEN": "ghp-123456"}
    sealer = Sealer(sources, "ab12")
    data = {"out": {"output": "dist/hunter2'x/app", "q": "'hunter2'\\''x' ghp-123456"}}
    sealed = sealer.seal(data)
    text = repr(sealed)
    assert "hunter2" not in text
    assert "ghp-123456" not in text
    assert "\u27e6secret context.pw 0 ab12\u27e7" in sealed["out"]["output"]
    assert sealer.unseal(sealed, sources) == data
    # a different nonce leaves look-alike text alone
    assert Sealer(sources, "zz99").unseal(sealed, sources) == sealed
    with pytest.raises(LoopError, match=r"context\.pw.*--set pw=\.\.\.") as info:
        sealer.unseal(sealed, {"env.GH_TOKEN": "ghp-123456"})
    assert info.value.exit_code == 2
