"""How messages name what is in a loop file: a node by its path, a value as YAML writes it.

"Did you mean" is difflib's answer, found without asking difflib about every option. For a
word, `difflib.get_close_matches(word, options, n=1)` scores each option three times, each
score a bound on the next (lengths; shared characters, counted with repeats; the matching
blocks), and keeps the best final score (ties go to the option that sorts last). That is
quadratic when a file misspells many names among many states: 3,000 unknown targets among
3,000 states took 10.9 s. `closest` gives the same answer (tests/test_wording.py) through an
index of the options, built once per list of options (lists under 64 go straight to difflib):

- a first guess: the options one deleted character away from the word (each loses at most
  one character and the rest is the same text), or else those sharing most of the word's
  rarest three-letter runs, are scored, which sets a floor t that the answer's score reaches;
- for each length of option where reaching t leaves at most one character unmatched on either
  side, those same options are all that can (a common subsequence of the needed length is
  then a text both reach by one deletion at most), found through an index of every option
  with any one character deleted, built when first needed; numbered names, which share
  nearly all their characters, are told apart this way without looking at the others;
- for the other lengths, for each character and count k, the options holding the character
  at least k times (kept to those lengths afterwards). An option whose shared-character score
  reaches t holds all but m of the word's (character, k) pairs, so it is in at least r - m of
  the r rarest of those lists (the prefix filter of set-similarity joins); those lists are
  counted with set operations, in C;
- each survivor's shared-character score, then its longest common subsequence (found
  bit-parallel; difflib's matching blocks are a common subsequence, so it bounds the final
  score), then difflib's own score, best bound first, until no bound can beat the best or win
  its tie.

`rapidfuzz` was not taken: its scores are not difflib's (the suggestions would change), and a
compiled dependency for one message is a cost; the index keeps difflib's exact answers.
"""

from __future__ import annotations

import itertools
from collections import Counter

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

# A node's place in the document: ("states", "fix", "evaluate", "of", 0).
NodePath = tuple[str | int, ...]


def did_you_mean(word: str, options: list[str]) -> str:
    """A " (did you mean 'X'?)" for the closest of `options`, or nothing."""
    close = closest(word, options)
    return f" (did you mean '{close}'?)" if close is not None else ""


# Below this many options difflib's own loop is as quick as building an index.
_INDEX_FROM = 64


def closest(word: str, options: list[str], cutoff: float = 0.6) -> str | None:
    """What `difflib.get_close_matches(word, options, n=1, cutoff=cutoff)` gives, or None."""
    if len(options) < _INDEX_FROM or not word:
        import difflib  # only when there is something to suggest

        close = difflib.get_close_matches(word, options, n=1, cutoff=cutoff)
        return close[0] if close else None
    return _Index.of(options).closest(word, cutoff)


# The indexes of the last few lists of options, each with a copy of its list. A file with many
# misspelt names asks about the same states again and again, each time in a new list: comparing
# two lists (in C, each name by identity first) is far cheaper than hashing one.
_RECENT: list[tuple[list[str], _Index]] = []


class _Index:
    """The options of one list, indexed by (character, count) for `closest`."""

    def __init__(self, options: tuple[str, ...]) -> None:
        self.names = sorted(set(options))
        # An option's characters as a set of "pairs": "0", "00", "000" for three zeros.
        self.pairs = [_pairs(name) for name in self.names]
        postings: dict[str, list[int]] = {}
        for i, pairs in enumerate(self.pairs):
            for pair in pairs:
                postings.setdefault(pair, []).append(i)
        self.postings = {pair: frozenset(ids) for pair, ids in postings.items()}
        self.sizes = [len(name) for name in self.names]
        self.lengths = sorted(set(self.sizes))
        by_length: dict[int, list[int]] = {}
        for i, n in enumerate(self.sizes):
            by_length.setdefault(n, []).append(i)
        self.by_length = {n: frozenset(ids) for n, ids in by_length.items()}
        self.deletions: dict[str, list[int]] | None = None  # built when first needed
        self.grams: dict[str, list[int]] = {}  # for the first guess: order counts there
        for i, name in enumerate(self.names):
            for gram in _grams(name):
                self.grams.setdefault(gram, []).append(i)

    @staticmethod
    def of(options: list[str]) -> _Index:
        # A list equal to a known one whose names are the same objects compares in C, a pointer
        # a name. One made of other string objects (the same file loaded again, or another with
        # the same states) compares every name's text: its copy replaces the known one, so the
        # next question about it takes the quick way.
        for at, (known, index) in enumerate(_RECENT):
            if known == options:
                if options and known[0] is not options[0]:
                    _RECENT[at] = (list(options), index)
                return index
        index = _Index(tuple(options))
        _RECENT.insert(0, (list(options), index))
        del _RECENT[4:]
        return index

    def closest(self, word: str, cutoff: float) -> str | None:
        import difflib

        matcher = difflib.SequenceMatcher()
        matcher.set_seq2(word)  # as get_close_matches does: the option is seq1, the word seq2
        size, masks = len(word), _masks(word)
        best: tuple[float, str] | None = None

        def score_best_first(bounded: list[tuple[float, str]]) -> None:
            """difflib's score of each option that may beat the best so far, best bound first.

            Each comes with a bound of its score; a second, tighter one is the longest common
            subsequence (difflib's matching blocks are one). An option whose bound is below the
            best, or equal to it with a name that sorts first (difflib's tie), cannot win."""
            nonlocal best
            bounded.sort(reverse=True)
            for bound, name in bounded:
                if best is not None and (bound, name) < best:
                    break  # neither it nor any after it
                tighter = 2.0 * _lcs(masks, size, name) / (size + len(name))
                if tighter < cutoff or (best is not None and (tighter, name) <= best):
                    continue  # `<=`: the best itself is not scored twice
                matcher.set_seq1(name)
                found = (matcher.ratio(), name)
                if found[0] >= cutoff and (best is None or found > best):
                    best = found

        # A first guess: the options one deleted character away (on either side), or else the
        # options that share most of the word's rarest three-letter runs.
        close = self._by_deletion(word)
        if close:
            first = [self.names[i] for i in close]
        else:
            grams = sorted((self.grams[g] for g in _grams(word) if g in self.grams), key=len)
            guess: Counter[int] = Counter()
            for ids in grams[:4]:
                guess.update(ids)
            first = [self.names[i] for i, _ in guess.most_common(5)]
        score_best_first([(1.0, name) for name in first])
        floor = cutoff if best is None else max(cutoff, best[0])
        lengths = [n for n in self.lengths if 2.0 * min(size, n) / (size + n) >= floor]
        if not lengths:
            return None if best is None else best[1]
        # Lengths whose options differ from the word by at most one deleted character on either
        # side are found by deletion, the others by the characters they share.
        want = _pairs(word)
        near = [n for n in lengths if max(n, size) - _need(floor, size, n) <= 1]
        far = [n for n in lengths if n not in near]
        found = set(close) if near else set()
        if far:
            by_pairs = self._by_pairs(want, size, floor, far)
            for n in far:
                found |= by_pairs & self.by_length[n]
        # Then the exact count of shared characters (difflib's second score) bounds each.
        names, sets, sizes = self.names, self.pairs, self.sizes
        bounded = []
        for i in found:
            bound = 2.0 * len(want & sets[i]) / (size + sizes[i])
            if bound >= floor:
                bounded.append((bound, names[i]))
        score_best_first(bounded)
        return None if best is None else best[1]

    def _by_deletion(self, word: str) -> set[int]:
        """The options that share a text with the word when each loses at most one character.

        An option of length m scoring `floor` has `_need(floor, size, m)` = L characters in its
        matching blocks, hence a common subsequence of L characters with the word: deleting
        m - L characters from the option and size - L from the word gives the same text. For
        the lengths where both are 0 or 1, every such option is found here."""
        if self.deletions is None:
            self.deletions = {}
            for i, name in enumerate(self.names):
                for text in _deleted(name):
                    self.deletions.setdefault(text, []).append(i)
        found: set[int] = set()
        for text in _deleted(word):
            found.update(self.deletions.get(text, ()))
        return found

    def _by_pairs(
        self, want: frozenset[str], size: int, floor: float, lengths: list[int]
    ) -> set[int]:
        """Every option that may score `floor`, by the characters it shares with the word."""
        # An option scoring `floor` holds all but `misses` of the word's pairs, so it is in at
        # least (r - misses) of the r rarest lists. Few misses: the union of the intersections
        # of every (r - misses) of them; more: count the lists each option is in. Both in C.
        pairs = sorted(want, key=lambda pair: len(self.postings.get(pair, ())))
        misses = size - _need(floor, size, lengths[0])
        empty: frozenset[int] = frozenset()
        if misses <= 3 and len(pairs) > misses:
            lists = [self.postings.get(pair, empty) for pair in pairs[: misses + 3]]
            found: set[int] = set()
            for group in itertools.combinations(lists, len(lists) - misses):
                found.update(frozenset.intersection(*group))
        else:
            lists = [self.postings.get(pair, empty) for pair in pairs[: misses + 4]]
            some: set[int] = set().union(*lists[: misses + 1])
            held: Counter[int] = Counter()
            for members in lists:
                held.update(some.intersection(members))
            enough = len(lists) - misses
            found = {i for i, times in held.items() if times >= enough}
        return found


def _pairs(text: str) -> frozenset[str]:
    """Each character of `text` with each count up to its own: "aab" gives a, aa, b."""
    return frozenset(char * k for char, times in Counter(text).items() for k in range(1, times + 1))


def _deleted(text: str) -> set[str]:
    """`text`, and `text` with any one of its characters deleted."""
    return {text} | {text[:i] + text[i + 1 :] for i in range(len(text))}


def _grams(text: str) -> set[str]:
    return {text[i : i + 3] for i in range(len(text) - 2)}


def _masks(word: str) -> dict[str, int]:
    masks: dict[str, int] = {}
    for place, char in enumerate(word):
        masks[char] = masks.get(char, 0) | 1 << place
    return masks


def _lcs(masks: dict[str, int], size: int, other: str) -> int:
    """The length of the longest common subsequence of the word of `masks` and `other`.

    Bit-parallel (Allison and Dix; Hyyro): one pass over `other`, a bit per character of the word.
    """
    full = (1 << size) - 1
    row = full
    for char in other:
        match = row & masks.get(char, 0)
        row = ((row + match) | (row - match)) & full
    return size - row.bit_count()


def _need(floor: float, size: int, shortest: int) -> int:
    """The fewest shared characters that lets an option of length `shortest` score `floor`."""
    total = size + shortest
    need = 0
    while need < size and 2.0 * need / total < floor:
        need += 1
    return need


def _dotted(path: NodePath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def subject(path: NodePath) -> str:
    """How a message names the node at `path`: "'timeout' of state 'fix'"."""
    if len(path) >= 2 and path[0] == "states":
        if len(path) == 2:
            return f"state '{path[1]}'"
        return f"'{_dotted(path[2:])}' of state '{path[1]}'"
    return f"'{_dotted(path)}'" if path else "the loop file"


def where(path: NodePath) -> str:
    """Where a key stands: 'at the top level', "in state 'fix'", "in 'retry' of state 'fix'"."""
    if not path:
        return "at the top level"
    if len(path) == 2 and path[0] == "states":
        return f"in state '{path[1]}'"
    return f"in {subject(path)}"


def describe(value: Any) -> str:
    """What kind of value this is, for 'must be X, not Y'."""
    if value is None:
        return "empty"
    if isinstance(value, bool | int | float | str):
        kind = {bool: "true/false", str: "text"}.get(type(value), "a number")
        return f"{kind} ({show(value)})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__} value"


def show(value: Any) -> str:
    """A value as the author would write it in YAML, shortened."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return "'" + text.replace("\n", "\\n") + "'"
    return str(value)


def or_words(words: list[str]) -> str:
    """'a, b or c'."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
