"""'Did you mean': difflib's own answers, found through an index, not a scan of every option."""

from __future__ import annotations

import difflib
import random
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from little_loops import wording
from little_loops.wording import _lcs, _masks, closest, did_you_mean


def difflib_answer(word: str, options: list[str], cutoff: float = 0.6) -> str | None:
    close = difflib.get_close_matches(word, options, n=1, cutoff=cutoff)
    return close[0] if close else None


def difflib_answers(word: str, options: list[str], cutoffs: tuple[float, ...]) -> list[str | None]:
    """`difflib_answer` at each cutoff, from one scan: difflib's answer is the option of the
    highest (ratio, option) among those at or above the cutoff, so at a higher cutoff it is the
    lowest cutoff's answer while that answer's ratio reaches it, and None after."""
    best = difflib_answer(word, options, min(cutoffs))
    if best is None:
        return [None] * len(cutoffs)
    ratio = difflib.SequenceMatcher(None, best, word).ratio()  # difflib's own order: (x, word)
    return [best if ratio >= cutoff else None for cutoff in cutoffs]


def typo(rng: random.Random, name: str) -> str:
    i = rng.randrange(len(name) - 1)
    kind = rng.randrange(4)
    if kind == 0:  # two letters swapped
        return name[:i] + name[i + 1] + name[i] + name[i + 2 :]
    if kind == 1:  # one dropped
        return name[:i] + name[i + 1 :]
    if kind == 2:  # one doubled
        return name[:i] + name[i] + name[i:]
    return name[:i] + rng.choice(string.ascii_lowercase) + name[i + 1 :]  # one replaced


WORDS = ["check", "fix", "lint", "test", "build", "review", "deploy", "format", "draft", "judge"]


def numbered(count: int) -> list[str]:
    """State names as a generated loop has them: a few words and many numbers."""
    return [f"{WORDS[i % len(WORDS)]}_{i:05d}" for i in range(count)]


def test_misspelt_numbered_states_get_difflibs_answer() -> None:
    rng = random.Random(21)
    names = numbered(1500)
    words = [typo(rng, rng.choice(names)) for _ in range(150)]
    assert [closest(w, names) for w in words] == [difflib_answer(w, names) for w in words]


def test_ties_and_small_alphabets_get_difflibs_answer() -> None:
    # Few letters make many options score the same: difflib then takes the one sorting last.
    rng = random.Random(7)
    for _ in range(40):
        length = rng.randint(1, 9)
        names = ["".join(rng.choice("abc_") for _ in range(rng.randint(1, length + 3)))]
        names += ["".join(rng.choice("abc_") for _ in range(rng.randint(1, 12))) for _ in range(99)]
        for _ in range(10):
            word = "".join(rng.choice("abcd_") for _ in range(rng.randint(1, 10)))
            cutoffs = (0.6, 0.75, 0.9)
            mine = [closest(word, names, cutoff) for cutoff in cutoffs]
            assert mine == difflib_answers(word, names, cutoffs), word


def test_unrelated_words_duplicates_and_odd_text_get_difflibs_answer() -> None:
    rng = random.Random(3)
    names = numbered(300) + numbered(300) + ["é_state", "state-with-dashes", "s" * 40, "x"]
    for word in ["zzzzzz", "é_stat", "state-with-dash", "s" * 35, "x", "y", "check", "?" * 3]:
        assert closest(word, names) == difflib_answer(word, names), word
    for _ in range(50):
        word = "".join(rng.choice(string.printable) for _ in range(rng.randint(1, 15)))
        assert closest(word, names) == difflib_answer(word, names), word


def test_one_scan_gives_difflibs_answer_at_every_cutoff() -> None:
    """The reference the tests above compare with (`difflib_answers`) is difflib itself."""
    rng = random.Random(5)
    names = numbered(200) + ["".join(rng.choice("ab_") for _ in range(8)) for _ in range(50)]
    cutoffs = (0.6, 0.75, 0.8, 0.9)
    for _ in range(60):
        word = typo(rng, rng.choice(names)) if rng.random() < 0.8 else rng.choice(names)
        every = [difflib_answer(word, names, cutoff) for cutoff in cutoffs]
        assert difflib_answers(word, names, cutoffs) == every, word


def test_the_bound_is_the_longest_common_subsequence() -> None:
    def by_table(a: str, b: str) -> int:
        row = [0] * (len(b) + 1)
        for x in a:
            prev = 0
            for j, y in enumerate(b, 1):
                prev, row[j] = row[j], prev + 1 if x == y else max(row[j], row[j - 1])
        return row[-1]

    rng = random.Random(5)
    for _ in range(500):
        a = "".join(rng.choice("abcd") for _ in range(rng.randint(1, 12)))
        b = "".join(rng.choice("abcde") for _ in range(rng.randint(0, 12)))
        assert _lcs(_masks(a), len(a), b) == by_table(a, b), (a, b)


def test_a_misspelt_name_among_many_scores_few_options(monkeypatch: pytest.MonkeyPatch) -> None:
    # difflib alone scores every option whose letters are close enough: hundreds here.
    scored = 0
    ratio = difflib.SequenceMatcher.ratio

    def counting(self: Any) -> float:
        nonlocal scored
        scored += 1
        return ratio(self)

    monkeypatch.setattr(difflib.SequenceMatcher, "ratio", counting)
    names = numbered(3000)
    assert did_you_mean("fomrat_01237", names) == " (did you mean 'format_01237'?)"
    assert scored <= 30


def test_the_short_lists_of_most_messages_go_straight_to_difflib() -> None:
    wording._RECENT.clear()
    assert did_you_mean("on_sucess", ["on_success", "on_failure", "next"]) == (
        " (did you mean 'on_success'?)"
    )
    assert wording._RECENT == []


def test_ll_validate_suggests_difflibs_answers_for_many_misspelt_targets(tmp_path: Path) -> None:
    rng = random.Random(11)
    names = numbered(400)
    targets = [typo(rng, name) for name in names[1:]] + ["done"]
    lines = [f"name: many\ninitial: {names[0]}\non_error: done\nstates:"]
    lines += [f"  {n}: {{action: 'true', next: {t}}}" for n, t in zip(names, targets, strict=True)]
    lines.append("  done: {terminal: true}\n")
    path = tmp_path / "many.yaml"
    path.write_text("\n".join(lines))
    result = subprocess.run(
        [sys.executable, "-m", "little_loops", "validate", str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    states = [*names, "done"]
    expected = []
    for line, target in enumerate(targets[:-1], start=5):
        if target in states:
            continue
        close = difflib_answer(target, states)
        hint = f" (did you mean '{close}'?)" if close else ""
        name = names[line - 5]
        expected.append(
            f"{path}:{line}:{len(name) + 28}: error: state '{name}' has 'next' naming unknown "
            f"state '{target}'{hint}"
        )
    errors = [line for line in result.stdout.splitlines() if ": error: " in line]
    assert errors == expected


def test_near_misses_at_high_cutoffs_get_difflibs_answer() -> None:
    # Names of many lengths and high cutoffs: the options one deleted character away on either
    # side are looked up by deletion, the other lengths by shared characters; both together
    # must still give difflib's answer.
    rng = random.Random(11)
    names = numbered(2000) + [f"{w}_{i}" for i in range(200) for w in WORDS[:3]]
    names += ["".join(rng.choice("ab_") for _ in range(rng.randint(1, 14))) for _ in range(300)]
    cutoffs = (0.6, 0.8, 0.9)
    for _ in range(120):
        word = typo(rng, rng.choice(names)) if rng.random() < 0.8 else rng.choice(names)
        mine = [closest(word, names, cutoff) for cutoff in cutoffs]
        assert mine == difflib_answers(word, names, cutoffs), word


def test_the_cost_of_a_misspelt_name_hardly_grows_with_the_states() -> None:
    """Issue 21: each misspelt name looked at a share of all the states (numbered names share
    nearly all their characters), so 10,000 misspelt targets among 10,000 states grew as the
    square. CPU time per name among 10,000 names against 1,000, best of three (the index built
    beforehand): about 1.5 now, about 8 before; the test allows 4."""
    import time

    def per_name(count: int) -> float:
        names = numbered(count)
        rng = random.Random(count)
        words = [typo(rng, rng.choice(names)) for _ in range(300)]
        closest(words[0], names)  # builds the index
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            for word in words:
                closest(word, names)
            best = min(best, time.process_time() - start)
        return best

    small, large = per_name(1000), per_name(10000)
    assert large < 4 * max(small, 1e-3), (small, large)


class _Counted(str):
    """A name that counts how often its text is compared (an equal name of another object)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Counted.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_the_same_states_loaded_again_are_compared_once_not_for_every_name() -> None:
    # A file loaded twice in one process (ll validate of two files with the same states, ll test,
    # the in-process test runner) gives equal lists of other string objects. Each "did you mean"
    # compared the whole list by text: 7,763 misspelt targets among 10,000 states took 16 s more
    # on the second load. The second list now replaces the first, and is found by identity.
    names = [f"state_{i:05d}" for i in range(2000)]
    wording._RECENT.clear()
    assert closest("sttae_00007", names) == "state_00007"
    again: list[str] = [_Counted(name) for name in names]
    _Counted.compared = 0
    assert closest("sttae_00008", again) == "state_00008"
    first = _Counted.compared
    assert first >= len(names)  # the one comparison by text
    for word in ("sttae_00009", "stat_e00010", "satte_00011"):
        _Counted.compared = 0
        assert closest(word, again) == word.replace("sttae", "state").replace(
            "stat_e", "state_"
        ).replace("satte", "state")
        assert _Counted.compared < len(names) // 10
