"""How messages name what is in a loop file: a node by its path, a value as YAML writes it.

"Did you mean" suggests, for a word that names nothing, the option one typing slip away: one
character left out, added or replaced, or two neighbours swapped (the Damerau-Levenshtein
distance 1 that most typos are). Of several, the one sharing most characters with the word
(`2 * shared / (len(word) + len(option))`, the measure difflib's cutoff is set on), and of
equal ones the option sorting last. An option must share at least `cutoff` of the text that
way too, so "a" suggests nothing for "b". When no option is one slip away, the answer is
difflib's: `difflib.get_close_matches(word, options, n=1, cutoff=cutoff)`. (A word that is an
option is its own answer.)

Why slips first: difflib scores matching blocks, which can prefer an option two slips away to
the one a slip away ("lint0_0002" scored 'lint_02002' above 'lint_00002'). And it is cheap: the
options one slip away are found in an index of every option with any one character deleted
(a slip leaves the two texts equal once each loses at most one character), a few dictionary
lookups a word however many options there are. Asking difflib about every option is quadratic
when a file misspells many names among many states (3,000 unknown targets among 3,000 states
took 10.9 s).

When no option is a slip away, `closest` gives difflib's answer (tests/test_wording.py) through
the same index of the options, built once per list of options (lists under 64 go straight to
difflib), which keeps each answer (a word misspelt the same way again costs a dictionary lookup).
difflib scores each option three times, each score a bound on the next (lengths; shared
characters, counted with repeats; the matching blocks), and keeps the best final score (ties go
to the option that sorts last). The index finds that answer without scoring every option:

- a first guess: the options one deleted character away from the word (each loses at most
  one character and the rest is the same text); their longest common subsequence with the word
  follows from the lengths (the shorter is the longer less one character, or both lose one).
  Or else, when there are none, the options sharing most of the word's rarest three-letter
  runs. Scored best bound first, they set a floor t that the answer's score reaches;
- for each length of option where reaching t leaves at most one character unmatched on either
  side, those same options are all that can (a common subsequence of the needed length is
  then a text both reach by one deletion at most);
- for the other lengths, the options of that length holding each of the word's (character,
  count k) pairs, a list made when first asked for. An option whose shared-character score
  reaches t holds all but m of the word's pairs, so it is in at least r - m of the r rarest
  of those lists (the prefix filter of set-similarity joins; rarest by how often the
  character occurs in all the options), counted with set operations in C;
- each survivor's shared-character score, then its longest common subsequence (found
  bit-parallel; difflib's matching blocks are a common subsequence, so it bounds the final
  score), then difflib's own score, best bound first, until no bound can beat the best or win
  its tie.

difflib's own score is counted by `_matches`, difflib's steps without its generality (no junk:
`get_close_matches` has none, and difflib finds none of its own in a word under 200
characters; longer words are scored by difflib): half the instructions of a SequenceMatcher.

`rapidfuzz` was not taken: scoring every option, even in C, stays quadratic (10,000 x 10,000
names), and a compiled dependency for one message is a cost too.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from operator import itemgetter

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

# A node's place in the document: ("states", "fix", "evaluate", "of", 0).
NodePath = tuple[str | int, ...]


def did_you_mean(word: str, options: Sequence[str]) -> str:
    """A " (did you mean 'X'?)" for the closest of `options`, or nothing."""
    close = closest(word, options)
    return f" (did you mean '{close}'?)" if close is not None else ""


# Below this many options difflib's own loop is as quick as building an index.
_INDEX_FROM = 64

# Words this long make difflib treat their most frequent characters as junk ("autojunk"), which
# `_matches` does not copy: difflib scores them.
_AUTOJUNK_FROM = 200


def closest(word: str, options: Sequence[str], cutoff: float = 0.6) -> str | None:
    """The option one slip away from `word` (see the module's text), or else what
    `difflib.get_close_matches(word, options, n=1, cutoff=cutoff)` gives, or None."""
    if not word or cutoff <= 0.0:  # every option is close enough: difflib's best
        return _difflib_closest(word, options, cutoff)
    if len(options) < _INDEX_FROM:
        if word in options:
            return word
        slip = _nearest_slip(word, [name for name in options if _one_slip(word, name)], cutoff)
        return slip if slip is not None else _difflib_closest(word, options, cutoff)
    return _Index.of(options).closest(word, cutoff)


def _difflib_closest(word: str, options: Sequence[str], cutoff: float) -> str | None:
    import difflib  # only when there is something to suggest

    close = difflib.get_close_matches(word, options, n=1, cutoff=cutoff)
    return close[0] if close else None


def _one_slip(word: str, other: str) -> bool:
    """Whether `other` is `word` with one character left out, added or replaced, or two
    neighbours swapped."""
    size, n = len(word), len(other)
    if size == n:
        if word == other:
            return False
        i = 0
        while word[i] == other[i]:
            i += 1
        if word[i + 1 :] == other[i + 1 :]:
            return True  # replaced
        return (
            i + 1 < size
            and word[i] == other[i + 1]
            and word[i + 1] == other[i]
            and word[i + 2 :] == other[i + 2 :]
        )  # swapped
    if size == n + 1:
        word, other, size = other, word, n
    elif n != size + 1:
        return False
    # `other` is one longer: one character of it left out gives `word`.
    i = 0
    while i < size and word[i] == other[i]:
        i += 1
    return word[i:] == other[i + 1 :]


def _nearest_slip(word: str, slips: Iterable[str], cutoff: float) -> str | None:
    """Of options one slip away, the one sharing most characters (the last sorted of equals),
    if it shares `cutoff` of the two texts."""
    size = len(word)
    best: tuple[float, str] | None = None
    for name in slips:
        n = len(name)
        shared = size - 1 if n == size else min(n, size)
        found = (2.0 * shared / (size + n), name)
        if found[0] >= cutoff and (best is None or found > best):
            best = found
    return None if best is None else best[1]


# The indexes of the last few lists of options, each with a copy of its list as a tuple. A file
# with many misspelt names asks about the same states again and again: a tuple of them (the
# loader's `Ctx.state_names`) is found by identity, a list by comparing it with the copy (in C,
# each name by identity first), which is far cheaper than hashing it.
_RECENT: list[tuple[tuple[str, ...], _Index]] = []


class _Index:
    """The options of one list, indexed for `closest`; each answer is kept."""

    def __init__(self, options: Sequence[str]) -> None:
        self.names = sorted(set(options))
        self.lengths = sorted({len(name) for name in self.names})
        self.answers: dict[tuple[str, float], str | None] = {}
        self.known = frozenset(self.names)
        # For each length n and place i, the options of length n with their character at i
        # deleted, to the option giving that text (of several, the one sorting last: the names
        # are sorted). Made for a length when a word first needs it.
        self.cut: dict[int, list[dict[str, str]]] = {}
        self._deletions: dict[str, str | list[str]] | None = None
        # Built when first needed: three-letter runs to the options holding them (the first
        # guess when no option is one deleted character away), the options of each length, how
        # often each character occurs, and for a (length, character pair) the options of that
        # length holding that pair ("00": at least two zeros).
        self.grams: dict[str, list[int]] | None = None
        self.by_length: dict[int, list[str]] | None = None
        self.frequency: Counter[str] | None = None
        self.holding: dict[tuple[int, str], frozenset[str]] = {}
        # For a word's length and the floor of its score, what `_far` gives.
        self.far: dict[tuple[int, float], list[tuple[int, int]]] = {}

    @staticmethod
    def of(options: Sequence[str]) -> _Index:
        for known, index in _RECENT:
            if known is options:
                return index
        # A list, or a tuple equal to a known one but another object: compared in C, a pointer a
        # name when the names are the same objects. One made of other string objects (the same
        # file loaded again) compares every name's text once: its copy replaces the known one.
        key = options if isinstance(options, tuple) else tuple(options)
        for at, (known, index) in enumerate(_RECENT):
            if known == key:
                if key is options or (key and known[0] is not key[0]):
                    _RECENT[at] = (key, index)
                return index
        index = _Index(key)
        _RECENT.insert(0, (key, index))
        del _RECENT[4:]
        return index

    @property
    def deletions(self) -> dict[str, str | list[str]]:
        """Every option, whole and with any one character deleted, to the option (or options)
        giving that text: made when a word is first not one slip from any option."""
        if self._deletions is None:
            deletions: dict[str, str | list[str]] = {}
            had = deletions.get
            for name in self.names:
                for text in _deleted(name):
                    known = had(text)
                    if known is None:
                        deletions[text] = name
                    elif isinstance(known, str):
                        deletions[text] = [known, name]
                    else:
                        known.append(name)
            self._deletions = deletions
        return self._deletions

    def _places(self, n: int) -> list[dict[str, str]]:
        """For each place i, the options of length `n` with their character at i deleted, each
        text to the option sorting last of those giving it (the names are sorted, and a dict
        keeps the last value given for a key). Made in C: a slice of every name at once."""
        places = self.cut.get(n)
        if places is None:
            names = self._of_length().get(n, [])
            places = self.cut[n] = [
                dict(
                    zip(
                        map(_add, map(_Get(slice(i)), names), map(_Get(slice(i + 1, None)), names)),
                        names,
                        strict=True,
                    )
                )
                for i in range(n)
            ]
        return places

    def _of_length(self) -> dict[int, list[str]]:
        """The options of each length, each list sorted."""
        if self.by_length is None:
            self.by_length = {
                n: list(names) for n, names in itertools.groupby(sorted(self.names, key=len), len)
            }
        return self.by_length

    def _slip(self, word: str, cutoff: float) -> str | None:
        """The option one slip away, by lookups alone. The kinds of slip, by how many characters
        the option shares with the word (most first; of one kind the option sorting last): a
        character the word left out (the word is the option with one deleted), one it added (the
        word with one deleted is an option), one it replaced or two neighbours it swapped.

        Each kind is a few calls that loop in C (`map` over the tables of each place), not a
        loop in Python over the word's characters."""
        size = len(word)
        known = self.known
        if word in known:
            return word
        if 2.0 * size / (2 * size + 1) < cutoff:
            return None
        # Left out: an option of one more character with the one at i deleted is the word.
        cut = self.cut
        longer = cut.get(size + 1) or self._places(size + 1)
        found = list(filter(None, map(_get, longer, itertools.repeat(word))))
        if found:
            return max(found)
        if 2.0 * (size - 1) / (2 * size - 1) < cutoff:
            return None
        deleted = _deletions(word)
        shorter = known.intersection(deleted)
        if shorter:
            return max(shorter)
        if (size - 1) / size < cutoff:
            return None
        # Replaced at i: an option of the same length with the character at i deleted is the
        # word with it deleted.
        places = cut.get(size) or self._places(size)
        found = list(filter(None, map(_get, places, deleted)))
        # Two neighbours swapped at i: such an option with place i + 1 deleted is the word
        # with place i deleted. Some option is, before the swap is made and looked for.
        for i in itertools.compress(range(size - 1), map(_has, places[1:], deleted)):
            if word[i] != word[i + 1]:
                swapped = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
                if swapped in known:
                    found.append(swapped)
        return max(found) if found else None

    def closest(self, word: str, cutoff: float) -> str | None:
        """The option one slip away, or difflib's answer, found once for each word and cutoff."""
        asked = (word, cutoff)
        if asked in self.answers:
            return self.answers[asked]
        answer = self._closest(word, cutoff)
        self.answers[asked] = answer
        return answer

    def _closest(self, word: str, cutoff: float) -> str | None:
        slip = self._slip(word, cutoff)
        if slip is not None:
            return slip
        close = self._by_deletion(word)
        size = len(word)
        ratio = _scorer(word)
        masks: dict[str, int] = {}  # for `_lcs`, made when first needed
        best: tuple[float, str] | None = None
        seen: set[str] = set()

        def lcs_bound(name: str) -> float:
            if not masks:
                masks.update(_masks(word))
            return 2.0 * _lcs(masks, size, name) / (size + len(name))

        def score_best_first(bounded: list[tuple[float, str]], tight: bool) -> None:
            """difflib's score of each option that may beat the best so far, best bound first.

            Each comes with a bound of its score: the longest common subsequence (`tight`:
            difflib's matching blocks are one), or a looser one, and then that is worked out
            first. An option whose bound is below the best, or equal to it with a name that
            sorts first (difflib's tie), cannot win, nor can any after it."""
            nonlocal best
            bounded.sort(reverse=True)
            for bound, name in bounded:
                if best is not None and (bound, name) < best:
                    break
                if name in seen:
                    continue
                seen.add(name)
                if not tight:
                    bound = lcs_bound(name)
                    if bound < cutoff or (best is not None and (bound, name) < best):
                        continue
                found = (ratio(name), name)
                if found[0] >= cutoff and (best is None or found > best):
                    best = found

        # None is: difflib's answer. A first guess: the options one deleted character away, or
        # else the options that share most of the word's rarest three-letter runs.
        if close:
            # One deleted character away: the longest common subsequence follows from the
            # lengths. The shorter is the longer less one character, or both lose one.
            bounded = []
            for name in close:
                n = len(name)
                common = n - 1 if n == size and name != word else min(n, size)
                bounded.append((2.0 * common / (size + n), name))
        else:
            bounded = [(lcs_bound(name), name) for name in self._guess(word)]
        score_best_first(bounded, tight=True)
        floor = cutoff if best is None else max(cutoff, best[0])
        far = self.far.get((size, floor))
        if far is None:
            far = self.far[size, floor] = self._far(size, floor)
        if far:
            if self.frequency is None:
                self.frequency = Counter("".join(self.names))
            often = self.frequency.get
            # The word's (character, count) pairs, rarest first: the least frequent characters,
            # and of one character the most copies.
            rarest = [
                char * count
                for char in sorted(sorted(set(word)), key=lambda char: often(char, 0))
                for count in range(word.count(char), 0, -1)
            ]
            want: frozenset[str] = frozenset()
            bounded = []
            for n, misses in far:
                for name in self._by_pairs(n, rarest, misses):
                    # The count of shared characters (difflib's second score) bounds each.
                    want = want or frozenset(rarest)
                    bound = 2.0 * len(want & _pairs(name)) / (size + n)
                    if bound >= floor:
                        bounded.append((bound, name))
            score_best_first(bounded, tight=False)
        return None if best is None else best[1]

    def _by_deletion(self, word: str) -> set[str]:
        """The options that share a text with the word when each loses at most one character.

        An option of length m scoring `floor` has `_need(floor, size, m)` = L characters in its
        matching blocks, hence a common subsequence of L characters with the word: deleting
        m - L characters from the option and size - L from the word gives the same text. For
        the lengths where both are 0 or 1, every such option is found here."""
        found: set[str] = set()
        deletions = self.deletions
        for text in deletions.keys() & _deleted(word):  # in C, over the word's few texts
            known = deletions[text]
            if isinstance(known, str):
                found.add(known)
            else:
                found.update(known)
        return found

    def _far(self, size: int, floor: float) -> list[tuple[int, int]]:
        """The lengths of option that may score `floor` but not by deletion alone, each with the
        most of the word's characters such an option may lack."""
        far = []
        for n in self.lengths:
            if 2.0 * min(size, n) / (size + n) >= floor:
                need = _need(floor, size, n)
                if max(n, size) - need > 1:
                    far.append((n, size - need))
        return far

    def _guess(self, word: str) -> list[str]:
        """The (at most 5) options sharing most of the word's 4 rarest three-letter runs."""
        if self.grams is None:
            self.grams = {}
            for i, name in enumerate(self.names):
                for gram in _grams(name):
                    self.grams.setdefault(gram, []).append(i)
        grams = sorted((self.grams[g] for g in _grams(word) if g in self.grams), key=len)
        guess: Counter[int] = Counter()
        for ids in grams[:4]:
            guess.update(ids)
        return [self.names[i] for i, _ in guess.most_common(5)]

    def _holding(self, n: int, pair: str) -> frozenset[str]:
        """The options of length `n` holding `pair`: "00" is at least two zeros."""
        asked = (n, pair)
        if asked not in self.holding:
            names = self._of_length()[n]
            char, count = pair[0], len(pair)
            if count == 1:
                self.holding[asked] = frozenset([name for name in names if char in name])
            else:
                self.holding[asked] = frozenset([nm for nm in names if nm.count(char) >= count])
        return self.holding[asked]

    def _by_pairs(self, n: int, rarest: list[str], misses: int) -> set[str]:
        """Every option of length `n` holding all but `misses` of the word's pairs (`rarest`).

        Such an option is in at least (r - misses) of the r first lists of options holding one
        (the prefix filter of set-similarity joins). None: the intersection of the first three
        lists, stopping at an empty one; few: the union of the intersections of every
        (r - misses) of them; more: count the lists each option is in."""
        if misses == 0:
            found = set(self._holding(n, rarest[0]))
            for pair in rarest[1:3]:
                if not found:
                    break
                found.intersection_update(self._holding(n, pair))
            return found
        if misses <= 3 and len(rarest) > misses:
            lists = [self._holding(n, pair) for pair in rarest[: misses + 3]]
            found = set()
            for group in itertools.combinations(lists, len(lists) - misses):
                found.update(frozenset.intersection(*group))
            return found
        lists = [self._holding(n, pair) for pair in rarest[: misses + 4]]
        some: set[str] = set().union(*lists[: misses + 1])
        held: Counter[str] = Counter()
        for members in lists:
            held.update(some.intersection(members))
        enough = len(lists) - misses
        return {name for name, times in held.items() if times >= enough}


def _scorer(word: str) -> Callable[[str], float]:
    """difflib's ratio of an option against `word`: `SequenceMatcher(None, option, word)`."""
    size = len(word)
    if size >= _AUTOJUNK_FROM:
        import difflib

        matcher = difflib.SequenceMatcher()
        matcher.set_seq2(word)  # as get_close_matches does: the option is seq1, the word seq2

        def by_difflib(name: str) -> float:
            matcher.set_seq1(name)
            return matcher.ratio()

        return by_difflib
    places: dict[str, list[int]] = {}  # difflib's b2j
    for place, char in enumerate(word):
        if char in places:
            places[char].append(place)
        else:
            places[char] = [place]

    def ratio(name: str) -> float:
        return 2.0 * _matches(name, size, places) / (len(name) + size)

    return ratio


def _matches(a: str, size: int, places: dict[str, list[int]]) -> int:
    """How many characters difflib's matching blocks of `a` and a word hold (the word of
    `places`, each of its characters to where it stands; `size` its length).

    difflib's own steps for a word under `_AUTOJUNK_FROM` characters, where it finds no junk:
    the longest common run (of those, the one starting first in `a`, then in the word), then
    the same on each side of it."""
    total = 0
    todo = [(0, len(a), 0, size)]
    nothing: list[int] = []
    while todo:
        alo, ahi, blo, bhi = todo.pop()
        besti = bestj = best = 0
        runs: dict[int, int] = {}  # where in the word a run ends, to its length
        for i in range(alo, ahi):
            longer = {}
            for j in places.get(a[i], nothing):
                if j < blo:
                    continue
                if j >= bhi:
                    break
                k = longer[j] = runs.get(j - 1, 0) + 1
                if k > best:
                    besti, bestj, best = i - k + 1, j - k + 1, k
            runs = longer
        if best:
            total += best
            if alo < besti and blo < bestj:
                todo.append((alo, besti, blo, bestj))
            if besti + best < ahi and bestj + best < bhi:
                todo.append((besti + best, ahi, bestj + best, bhi))
    return total


def _pairs(text: str) -> frozenset[str]:
    """Each character of `text` with each count up to its own: "aab" gives a, aa, b."""
    return frozenset(char * k for char in set(text) for k in range(1, text.count(char) + 1))


def _deleted(text: str) -> set[str]:
    """`text`, and `text` with any one of its characters deleted."""
    texts = set(_deletions(text))
    texts.add(text)
    return texts


# The loops of `_slip` and `_places`, run in C: a string's slices by `itemgetter`, joined by
# `map(_add, ...)`; a table of each place probed by `map(_get, tables, texts)`.
_add = operator.add  # not str.__add__, whose calls go through a slower wrapper
_get = dict.get
_has = dict.__contains__
_Get = itemgetter

# For a length n, two getters: a text's n heads (text[:i]) and its n tails (text[i + 1:]).
_CUTS: dict[int, tuple[Callable[[str], tuple[str, ...]], Callable[[str], tuple[str, ...]]]] = {}


def _deletions(text: str) -> list[str]:
    """`text` with its character at i deleted, for each place i in turn."""
    n = len(text)
    cuts = _CUTS.get(n)
    if cuts is None:
        if n < 2:  # one slice: itemgetter would give it alone, not in a tuple
            return [""] if n else []
        cuts = _CUTS[n] = (
            itemgetter(*[slice(i) for i in range(n)]),
            itemgetter(*[slice(i + 1, None) for i in range(n)]),
        )
    heads, tails = cuts
    return list(map(_add, heads(text), tails(text)))


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
    """The fewest shared characters that lets an option of length `shortest` score `floor`
    (at most `size`, the word's length)."""
    total = size + shortest
    need = min(size, max(0, int(floor * total / 2.0)))  # a guess, then the exact test
    while need > 0 and 2.0 * (need - 1) / total >= floor:
        need -= 1
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
