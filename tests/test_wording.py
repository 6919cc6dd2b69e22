"""'Did you mean': the option one slip away, or else difflib's own answer, found through an index,
not a scan of every option."""

from __future__ import annotations

import difflib
import functools
import random
import string
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from project import Project

from little_loops import wording
from little_loops.wording import _lcs, _masks, _matches, closest, did_you_mean


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


def slip_distance(a: str, b: str) -> int:
    """Edits from `a` to `b`, a swap of two neighbours counting as one (optimal string alignment),
    by the textbook table."""
    table = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
    return table[-1][-1]


def nearest_slip(word: str, options: list[str]) -> tuple[float, str] | None:
    """The (share, option) of the best option one slip away: the most characters shared in
    order, then the option sorting last."""
    best = None
    letters = letters_of(word)
    for option in set(options):
        if abs(len(option) - len(word)) > 1:
            continue  # quick noes, before the table: a slip adds and drops a character at most
        theirs = letters_of(option)
        if (theirs - letters).total() > 1 or (letters - theirs).total() > 1:
            continue
        if slip_distance(word, option) == 1:
            found = (2.0 * common(word, option) / (len(word) + len(option)), option)
            best = found if best is None or found > best else best
    return best


@functools.cache
def letters_of(text: str) -> Counter[str]:
    return Counter(text)


def common(a: str, b: str) -> int:
    """The longest common subsequence, by the textbook table."""
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], prev + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def suggested(word: str, options: list[str], cutoff: float = 0.6) -> str | None:
    """What "did you mean" should answer: the nearest option one slip away that shares `cutoff`
    of the two texts, or else difflib's answer."""
    return expected_at(word, options, (cutoff,))[0]


def expected_at(word: str, options: list[str], cutoffs: tuple[float, ...]) -> list[str | None]:
    if word in options:
        return [word] * len(cutoffs)  # itself, as difflib scores it: all shared
    slip = nearest_slip(word, options) if word else None
    if slip is not None and slip[0] >= max(cutoffs):
        return [slip[1]] * len(cutoffs)
    rest = difflib_answers(word, options, cutoffs)
    return [
        slip[1] if slip and slip[0] >= c else answer
        for c, answer in zip(cutoffs, rest, strict=True)
    ]


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


def test_misspelt_numbered_states_get_the_rules_answer() -> None:
    rng = random.Random(21)
    names = numbered(1500)
    words = [typo(rng, rng.choice(names)) for _ in range(150)]
    assert [closest(w, names) for w in words] == [suggested(w, names) for w in words]


def test_ties_and_small_alphabets_get_the_rules_answer() -> None:
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
            assert mine == expected_at(word, names, cutoffs), word


def test_unrelated_words_duplicates_and_odd_text_get_the_rules_answer() -> None:
    rng = random.Random(3)
    names = numbered(300) + numbered(300) + ["é_state", "state-with-dashes", "s" * 40, "x"]
    for word in ["zzzzzz", "é_stat", "state-with-dash", "s" * 35, "x", "y", "check", "?" * 3]:
        assert closest(word, names) == suggested(word, names), word
    for _ in range(50):
        word = "".join(rng.choice(string.printable) for _ in range(rng.randint(1, 15)))
        assert closest(word, names) == suggested(word, names), word


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
    rng = random.Random(5)
    for _ in range(500):
        a = "".join(rng.choice("abcd") for _ in range(rng.randint(1, 12)))
        b = "".join(rng.choice("abcde") for _ in range(rng.randint(0, 12)))
        assert _lcs(_masks(a), len(a), b) == common(a, b), (a, b)


def test_a_misspelt_name_among_many_scores_few_options(monkeypatch: pytest.MonkeyPatch) -> None:
    # difflib alone scores every option whose letters are close enough: hundreds here.
    scored = 0
    matches = wording._matches

    def counting(*args: Any) -> int:
        nonlocal scored
        scored += 1
        return matches(*args)

    monkeypatch.setattr(wording, "_matches", counting)
    names = numbered(3000)
    assert did_you_mean("fomrat_01237", names) == " (did you mean 'format_01237'?)"
    assert scored <= 30


def _work(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts, from now on, of each costly step of a lookup: difflib's score (`_matches`), the
    bound by common subsequence (`_lcs`), the options looked at by shared characters."""
    work: Counter[str] = Counter()
    matches, lcs, by_pairs = wording._matches, wording._lcs, wording._Index._by_pairs

    def counted_matches(*args: Any) -> int:
        work["scored"] += 1
        return matches(*args)

    def counted_lcs(*args: Any) -> int:
        work["bounded"] += 1
        return lcs(*args)

    def counted_pairs(self: Any, *args: Any) -> set[str]:
        found = by_pairs(self, *args)
        work["by characters"] += len(found)
        return found

    monkeypatch.setattr(wording, "_matches", counted_matches)
    monkeypatch.setattr(wording, "_lcs", counted_lcs)
    monkeypatch.setattr(wording._Index, "_by_pairs", counted_pairs)
    return work


def test_the_work_of_a_misspelt_name_does_not_grow_with_the_states(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 21: the bench's file (every target of a chain of numbered states misspelt by two
    letters swapped) at 1,000 and at 10,000 states. Each lookup scores about one option with
    difflib's measure and bounds a handful more, however many states there are (before: about
    ten bounds a name, and more as the states grew)."""

    def per_name(count: int) -> dict[str, float]:
        names = tuple(numbered(count))
        rng = random.Random(count)
        words = []
        for name in rng.sample(names, 300):
            at = rng.randrange(len(name) - 1)
            word = name[:at] + name[at + 1] + name[at] + name[at + 2 :]
            if word not in names:
                words.append(word)
        closest(words[0], names)  # builds the index
        work = _work(monkeypatch)
        for word in words[1:]:
            closest(word, names)
        monkeypatch.undo()
        return {
            step: work[step] / (len(words) - 1) for step in ("scored", "bounded", "by characters")
        }

    small, large = per_name(1000), per_name(10000)
    # Each is one slip (two neighbours swapped) from its state: found by deletion alone.
    assert large["scored"] == 0, large
    assert large["bounded"] == 0, large
    assert large["by characters"] == 0, large
    for step in small:
        assert large[step] <= small[step] * 1.2 + 0.5, (step, small, large)


def test_a_name_one_slip_away_is_suggested_before_difflibs_choice() -> None:
    # difflib's matching blocks score 'lint_02002' above 'lint_00002' for 'lint0_0002', which is
    # 'lint_00002' with two neighbours swapped. Short lists and indexed ones answer the same.
    assert difflib_answer("lint0_0002", ["lint_00002", "lint_02002"]) == "lint_02002"
    assert closest("lint0_0002", ["lint_00002", "lint_02002"]) == "lint_00002"
    names = numbered(3000)
    assert closest("lint0_0002", names) == "lint_00002"
    # Of several a slip away, the one sharing most characters: one added beats one replaced.
    assert closest("fix_0001", ["fix_0002", "fix_00001"]) == "fix_00001"
    # A slip must still share enough of the two texts: one letter replaced in 'a' is not close.
    assert closest("a", ["b"]) is None
    assert closest("ab", ["ba"]) is None  # half shared, under the 0.6 cutoff
    assert closest("abc", ["acb"]) == "acb"


def test_ll_validate_suggests_the_state_one_slip_away(project: Project) -> None:
    project.write(
        "slip.yaml",
        "name: slip\ninitial: lint_00002\nstates:\n"
        "  lint_00002: {action: 'true', next: lint0_0002}\n"
        "  lint_02002: {action: 'true', next: done}\n"
        "  done: {terminal: true}\n",
    )
    result = project.ll("validate", "slip.yaml")
    assert result.returncode == 2, result.stderr
    assert "unknown state 'lint0_0002' (did you mean 'lint_00002'?)" in result.stdout


def test_each_distinct_misspelling_is_looked_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # 3,000 misspellings of a few words: one search each, the rest from the index's answers.
    names = tuple(numbered(2000))
    wording._RECENT.clear()
    looked_up: list[str] = []
    search = wording._Index._closest

    def counted(self: Any, word: str, cutoff: float) -> str | None:
        looked_up.append(word)
        return search(self, word, cutoff)

    monkeypatch.setattr(wording._Index, "_closest", counted)
    words = ["fomrat_01237", "chekc_00000", "tset_00003"] * 1000
    answers = [closest(word, names) for word in words]
    assert sorted(looked_up) == ["chekc_00000", "fomrat_01237", "tset_00003"]
    assert answers[:3] == ["format_01237", "check_00000", "test_00003"]
    assert answers == answers[:3] * 1000
    # Another cutoff is another question.
    assert closest("fomrat_01237", names, 0.99) is None
    assert looked_up[-1] == "fomrat_01237"


def test_the_loaders_tuple_of_states_is_found_by_identity() -> None:
    # The loader hands "did you mean" the same tuple of state names for every misspelt target:
    # it is found without comparing a single name.
    names = tuple(_Counted(f"state_{i:05d}") for i in range(2000))
    wording._RECENT.clear()
    assert closest("sttae_00007", names) == "state_00007"
    _Counted.compared = 0
    assert closest("sttae_00008", names) == "state_00008"
    assert closest("satte_00011", names) == "state_00011"
    assert _Counted.compared < 100  # the answers' own few comparisons, none of the list


def test_the_short_lists_of_most_messages_go_straight_to_difflib() -> None:
    wording._RECENT.clear()
    assert did_you_mean("on_sucess", ["on_success", "on_failure", "next"]) == (
        " (did you mean 'on_success'?)"
    )
    assert wording._RECENT == []


def test_ll_validate_suggests_the_rules_answers_for_many_misspelt_targets(tmp_path: Path) -> None:
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
        close = suggested(target, states)
        hint = f" (did you mean '{close}'?)" if close else ""
        name = names[line - 5]
        expected.append(
            f"{path}:{line}:{len(name) + 28}: error: state '{name}' has 'next' naming unknown "
            f"state '{target}'{hint}"
        )
    errors = [line for line in result.stdout.splitlines() if ": error: " in line]
    assert errors == expected


def test_ll_validate_looks_up_each_misspelt_target_once(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 300 states whose targets misspell three of them, each 100 times: `ll validate` prints a
    # "did you mean" on each of the 300 lines, from three searches.
    names = numbered(300)
    typos = ["fomrat_00007", "chekc_00010", "tset_00003"]
    lines = [f"name: many\ninitial: {names[0]}\non_error: done\nstates:"]
    for i, name in enumerate(names):
        lines.append(f"  {name}: {{action: 'true', next: {typos[i % 3]}}}")
    lines.append("  done: {terminal: true}\n")
    project.write("many.yaml", "\n".join(lines))
    looked_up: list[str] = []
    search = wording._Index._closest

    def counted(self: Any, word: str, cutoff: float) -> str | None:
        looked_up.append(word)
        return search(self, word, cutoff)

    monkeypatch.setattr(wording._Index, "_closest", counted)
    result = project.ll("validate", "many.yaml")
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stdout.splitlines() if ": error: " in line]
    assert len(errors) == 300
    for line, (i, name) in zip(errors, enumerate(names), strict=True):
        typo = typos[i % 3]
        close = suggested(typo, [*names, "done"])
        hint = f" (did you mean '{close}'?)" if close else ""
        assert line == (
            f"many.yaml:{i + 5}:{len(name) + 28}: error: state '{name}' has 'next' naming "
            f"unknown state '{typo}'{hint}"
        )
    assert sorted(looked_up) == sorted(typos)
    assert "(did you mean 'format_00007'?)" in errors[0]


def test_near_misses_at_high_cutoffs_get_the_rules_answer() -> None:
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
        assert mine == expected_at(word, names, cutoffs), word


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


def _places(word: str) -> dict[str, list[int]]:
    places: dict[str, list[int]] = {}
    for place, char in enumerate(word):
        places.setdefault(char, []).append(place)
    return places


def _blocks(option: str, word: str) -> int:
    """What difflib's matching blocks hold, as `get_close_matches` matches (option, word)."""
    return sum(
        block.size for block in difflib.SequenceMatcher(None, option, word).get_matching_blocks()
    )


@settings(max_examples=400)
@given(st.text("ab0_c", max_size=16), st.text("ab0_c", min_size=1, max_size=16))
def test_the_count_of_matching_characters_is_difflibs(option: str, word: str) -> None:
    # Few letters give many equally long runs: difflib's choice among them (first in the option,
    # then first in the word) decides what is left on each side, hence the count.
    assert _matches(option, len(word), _places(word)) == _blocks(option, word)


_NAME = st.text("abc_01", min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(_NAME, min_size=64, max_size=120),
    st.lists(_NAME, min_size=1, max_size=8),
    st.sampled_from([0.6, 0.75, 0.9]),
)
def test_the_index_gives_what_a_scan_of_every_option_gives(
    names: list[str], words: list[str], cutoff: float
) -> None:
    wording._RECENT.clear()
    for word in words + [name[::-1] for name in names[:4]]:
        assert closest(word, names, cutoff) == suggested(word, names, cutoff), word


def test_words_of_200_characters_and_more_are_scored_by_difflib_itself() -> None:
    # From 200 characters difflib treats a word's most frequent characters as junk, which the
    # index's own count does not copy; such a word is scored by difflib.
    rng = random.Random(200)
    names = ["".join(rng.choice("ab ") for _ in range(rng.randint(180, 230))) for _ in range(64)]
    for _ in range(3):
        base = rng.choice(names)
        word = typo(rng, base) + "".join(rng.choice("ab ") for _ in range(rng.randint(0, 40)))
        cutoffs = (0.6, 0.9)
        mine = [closest(word, names, cutoff) for cutoff in cutoffs]
        assert mine == expected_at(word, names, cutoffs)


class _Writes:
    """A text stream that keeps each write."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)


def test_ll_validate_prints_every_error_in_order_in_one_write(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stop 35: thousands of "did you mean" lines went out one write each, which cost as much as
    # finding them. Every line is still there, in file and line order, once; the exit code is 2.
    names = numbered(120)
    for file, count in (("b.yaml", 60), ("a.yaml", 120)):
        lines = [f"name: {file[0]}\ninitial: {names[0]}\non_error: done\nstates:"]
        for i, name in enumerate(names[:count]):
            target = names[i + 1] if i + 1 < count else "done"
            lines.append(f"  {name}: {{action: 'true', next: {target[::-1]}}}")
        lines.append("  done: {terminal: true}\n")
        project.write(file, "\n".join(lines))
    result = project.ll("validate", "b.yaml", "a.yaml")
    assert result.returncode == 2, result.stderr
    printed = result.stdout.splitlines()
    assert len(printed) == 60 + 120
    expected = [
        f"{file}:{i + 5}:{len(name) + 28}: error: state '{name}' has 'next' naming unknown "
        f"state '{target[::-1]}'{did_you_mean(target[::-1], [*names[:count], 'done'])}"
        for file, count in (("b.yaml", 60), ("a.yaml", 120))
        for i, (name, target) in enumerate(
            zip(names[:count], [*names[1:count], "done"], strict=True)
        )
    ]
    assert printed == expected
    # One write of all of them, the same text.
    from little_loops.cli.validate import validate_files

    out = _Writes()
    code = validate_files(
        [str(project.path / "b.yaml"), str(project.path / "a.yaml")],
        strict=False,
        fmt="text",
        out=out,  # type: ignore[arg-type]
    )
    assert code == 2
    assert len(out.writes) == 1
    assert out.writes[0].splitlines() == [
        line.replace("b.yaml", str(project.path / "b.yaml")).replace(
            "a.yaml", str(project.path / "a.yaml")
        )
        for line in expected
    ]


def test_diagnostics_are_sorted_said_once_and_printable() -> None:
    from little_loops.errors import Diagnostic
    from little_loops.load.source import sorted_diagnostics

    a = Diagnostic("f.yaml", 3, 1, "error", "x", "third")
    b = Diagnostic("f.yaml", 1, 5, "warning", "y", "first\nline")
    c = Diagnostic("e.yaml", 9, 1, "error", "z", "other file")
    same = Diagnostic("f.yaml", 3, 1, "error", "x", "third")
    assert sorted_diagnostics([a, b, same, c, a]) == [
        c,
        Diagnostic("f.yaml", 1, 5, "warning", "y", "first\\nline"),
        a,
    ]
    assert sorted_diagnostics([]) == []
