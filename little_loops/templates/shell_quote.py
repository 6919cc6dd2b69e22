"""The shell lexer: where a value stands in a POSIX shell command, and how to escape it there.

Over 400 lines for one reason: it is one state machine (quoting contexts, here-documents,
arithmetic, backticks), and its states read each other's fields; cut in two it would read worse.
`interpolate.render` feeds it a template's text and asks it to `quote` each escaped value.
"""

from __future__ import annotations

import re

from little_loops.model.records import record

# Shell quoting contexts the lexer can stand in.
_CMD = "cmd"  # unquoted: top level, inside $( ... ) or inside backticks
_DQ = "dq"  # inside "..."
_SQ = "sq"  # inside '...'
_ANSI = "ansi"  # inside $'...' (bash, ksh, zsh; dash reads it as '$' then '...')
_PARAM = "param"  # inside ${...} written unquoted
_PARAM_DQ = "param_dq"  # inside ${...} written within "..."
_PARAM_SQ = "param_sq"  # inside '...' within "${...}": bash pairs the quotes, sh does not
_COMMENT = "comment"  # after an unquoted '#' that starts a word, to the end of the line
_HEREDOC = "heredoc"  # body of a here-document with an unquoted delimiter
_HEREDOC_Q = "heredoc_q"  # body of a here-document with a quoted delimiter: no expansion
_ARITH = "arith"  # inside $((...)): an arithmetic expression, where '<<' is a shift
_ARITH_CMD = "arith_cmd"  # inside ((...)): bash's arithmetic command, sh's nested subshells
_BRACKET = "bracket"  # inside $[...]: bash's old arithmetic, plain text to sh
_ARITHMETIC = frozenset({_ARITH, _ARITH_CMD, _BRACKET})
# Where the shell drops a backslash-newline before reading anything (a line continuation).
_CONTINUED = frozenset({_CMD, _DQ, _PARAM, _PARAM_DQ, _HEREDOC, *_ARITHMETIC})
# What sh and bash both read alike inside $[...]: no quote, redirection, comment or separator.
_BRACKET_CHARS = "A-Za-z0-9_ \t+*/%=!~^?:,.{}-"  # a regex class body; '-' last, so literal
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"  # (`string` costs 2.7 M)
_BRACKET_SAFE = frozenset(_ALNUM + _BRACKET_CHARS.removeprefix("A-Za-z0-9"))

_WORD_BREAK = frozenset(" \t\n;&|()<>")
# Per context, a run of characters that changes nothing but the current word; compiled by the
# first lexer (`_PLAIN`), as a run that places no value in a shell command needs none of them.
_PLAIN_SOURCE: dict[str, str] = {
    _CMD: r"[^ \t\n;&|()<>'\"\\$`]+",
    _DQ: r"[^\"\\$`]+",
    _SQ: r"[^']+",
    _ANSI: r"[^'\\]+",
    _PARAM: r"[^}'\"\\$`]+",
    _PARAM_DQ: r"[^}'\"\\$`]+",
    _PARAM_SQ: r"[^}'\"\\$`]+",
    _COMMENT: r"[^\n]+",
    _ARITH: r"[^()'\"\\$`]+",
    _ARITH_CMD: r"[^()'\"\\$`<#]+",
    _BRACKET: f"[{_BRACKET_CHARS}]+",
}
_PLAIN: dict[str, re.Pattern[str]] = {}
# Reserved words after which a command name may follow (so `case` there opens a case).
_BEFORE_COMMAND = frozenset(
    {"if", "then", "else", "elif", "while", "until", "do", "!", "{", "time"}
)


@record
class _Heredoc:
    delimiter: str
    strip_tabs: bool
    quoted: bool


class ShellLexer:
    """Follows the quoting state of a POSIX shell command as its text is written.

    It knows unquoted text, "...", '...', $'...', ${...}, $( ... ) and `...` (both nest a
    fresh unquoted context), backslash escapes and line continuations, comments,
    here-documents and arithmetic ($((...)), ((...)), $[...]). Backtick bodies are handed,
    with their backslash escapes removed, to a nested lexer, as the shell does.

    Where `sh` and `bash` read the text differently (`((` is arithmetic to bash and two
    subshells to sh; `\'` inside $'...'; a quote inside "${...}"), or where the lexer cannot
    follow the shell, it records why in `unsure`: no value is placed after that point.
    """

    def __init__(self) -> None:
        if not _PLAIN:
            # built whole, then added in one step: another thread sees all of them or none
            _PLAIN.update({kind: re.compile(text) for kind, text in _PLAIN_SOURCE.items()})
        self.frames: list[str] = [_CMD]
        self.parens: list[int] = [0]  # open '(' per frame, so ')' closes the right $(
        self.cases: list[int] = [0]  # open `case` per frame: its patterns end in ')'
        self.saved: list[tuple[list[str], bool, bool]] = []  # outer word state per frame
        self.word: list[str] = []  # the unquoted word being read at command level
        self.word_tainted = False  # that word has quotes or expansions: never a keyword
        self.cmd_pos = True  # the next word is a command name (where keywords count)
        self.escape = False  # the previous character was an unquoted-by-anything backslash
        self.dollar = False  # the previous character was an unescaped '$'
        self.word_start = True
        self.lt = 0  # consecutive unquoted '<' just seen
        self.hd_word: list[str] | None = None  # reading a here-document delimiter
        self.hd_quote = ""  # the quote open inside that delimiter word
        self.hd_quoted = False
        self.hd_strip = False
        self.hd_pending: list[_Heredoc] = []
        self.heredoc: _Heredoc | None = None  # the body being read
        self.hd_line: list[str] = []  # the body's current raw line
        self.hd_line_has_value = False
        self.hd_depth = 0  # frames below the here-document's own frame
        self.bq: ShellLexer | None = None  # the body of an open backtick substitution
        self.bq_escape = False
        self.bq_in_dq = False
        self.unsure: str | None = None  # why the lexer no longer knows where it stands
        self.pending = ""  # "$(" or "(" that a "(" makes arithmetic; ")" that needs a ")"
        self.before_escape: tuple[bool, int, bool, bool, str] = (False, 0, True, False, "")
        self.hd_joined = False  # the body line being read continues the previous one
        self.keyword = ""  # the last word read where a command name may stand

    # ---------------------------------------------------------------- reading text
    def feed(self, text: str) -> None:
        i, n = 0, len(text)
        while i < n:
            if self.bq is None and self.heredoc is None and self.hd_word is None:
                # a run of characters that cannot change the state is skipped at once
                kind = self.frames[-1]
                plain = _PLAIN.get(kind)
                if plain is not None and not (
                    self.escape or self.dollar or self.lt or self.pending
                ):
                    m = plain.match(text, i)
                    if m is not None and not (kind == _CMD and self.word_start and text[i] == "#"):
                        if kind == _CMD:
                            self.word.append(m.group())
                            self.word_start = False
                        i = m.end()
                        continue
            self._char(text[i])
            i += 1

    def _char(self, ch: str) -> None:
        if self.heredoc is not None:
            self._heredoc_line(ch)
            if self.heredoc is None:  # that newline ended the body
                return
        if self.bq is not None:
            self._backtick_char(ch)
            return
        if self.hd_word is not None:
            self._delimiter_char(ch)
            return
        kind = self.frames[-1]
        if self.escape and ch == "\n" and kind in _CONTINUED:
            # a line continuation: the shell reads on as if neither character were there
            self.escape = False
            self.dollar, self.lt, self.word_start, self.word_tainted, self.pending = (
                self.before_escape
            )
            return
        if ch == "\\" and not self.escape and kind in _CONTINUED:
            self.before_escape = (
                self.dollar,
                self.lt,
                self.word_start,
                self.word_tainted,
                self.pending,
            )
        elif self.pending:
            pending, self.pending = self.pending, ""
            if self._after(pending, "\\" if self.escape else ch):
                return
            kind = self.frames[-1]
        if kind == _SQ:
            if ch == "'":
                self._pop()
            return
        if kind == _HEREDOC_Q:
            return
        if kind == _PARAM_SQ:
            if ch != "'":
                # a character whose meaning depends on whether the quote counts
                self._unsure("""a single quote inside "${...}" around '}', '"', '$' or '\\'""")
            self._pop()
            return
        if kind == _COMMENT:
            if ch == "\n":
                self._pop()
                self._newline()
                self.word_start = True  # a `#` on the next line starts a comment again
                self.lt = 0
            return
        if kind == _ANSI:
            if self.escape:
                self.escape = False
                if ch == "'":
                    self._unsure("\\' inside $'...', which bash reads as a quote and sh as the end")
            elif ch == "\\":
                self.escape = True
            elif ch == "'":
                self._pop()
            return
        if kind == _CMD and (self.escape or ch in "\\'\"$`"):
            self.word_tainted = True
        if self.escape:
            self.escape = False
            self.word_start = False
            if kind in _ARITHMETIC:
                self._unsure("a backslash inside arithmetic")
            return
        dollar, self.dollar = self.dollar, False
        if ch == "\\":
            self.escape = True
            self.lt = 0
            return
        if ch == "`":
            self.bq = ShellLexer()
            self.bq_in_dq = kind in (_DQ, _PARAM_DQ)
            self.word_start = False
            self.lt = 0
            return
        if dollar and ch == "(":
            self._push(_CMD)
            self.word_start = True
            self.pending = "$("
            return
        if dollar and ch == "[":
            self._push(_BRACKET)
            return
        if dollar and ch == "{":
            self._push(_PARAM_DQ if kind in (_DQ, _PARAM_DQ, _HEREDOC) else _PARAM)
            return
        if ch == "$":
            self.dollar = True
            self.word_start = False
            self.lt = 0
            return
        if kind == _DQ:
            if ch == '"':
                self._pop()
            return
        if kind == _HEREDOC:
            return
        if kind == _PARAM_DQ:
            if ch == '"':
                self._push(_DQ)
            elif ch == "}":
                self._pop()
            elif ch == "'":
                self._push(_PARAM_SQ)
            return
        if kind in _ARITHMETIC:
            self._arith_char(kind, ch)
            return
        # _CMD or _PARAM
        if ch == '"':
            self._push(_DQ)
        elif ch == "'":
            self._push(_ANSI if dollar else _SQ)
        elif kind == _PARAM:
            if ch == "}":
                self._pop()
        else:
            self._cmd_char(ch)
            return
        self.word_start = False
        self.lt = 0

    def _cmd_char(self, ch: str) -> None:
        if ch == "#" and self.word_start:
            self._push(_COMMENT)
            return
        if ch == "(" and self.word_start and not self.word and not self.word_tainted:
            self.pending = "("  # a second '(' right after makes it `((`
        if ch in _WORD_BREAK:
            self._end_word(ch)
        else:
            self.word.append(ch)
        if ch == "<":
            self.lt += 1
            if self.lt == 2:
                self.hd_word, self.hd_quote, self.hd_quoted, self.hd_strip = [], "", False, False
            elif self.lt == 3:  # '<<<' is a here-string, not a here-document
                self.hd_word = None
            self.word_start = True
            return
        self.lt = 0
        if ch == "(":
            self.parens[-1] += 1
        elif ch == ")":
            if self.parens[-1] > 0:
                self.parens[-1] -= 1
            elif self.cases[-1] > 0:
                pass  # the end of a `case` pattern
            elif len(self.frames) > 1:
                self._pop()
        elif ch == "\n":
            self._newline()
        self.word_start = ch in _WORD_BREAK

    def _after(self, pending: str, ch: str) -> bool:
        """Settle what the character after `$(`, `(` or an arithmetic `)` makes of it; True
        when `ch` was used up doing so."""
        kind = self.frames[-1]
        if pending == "$(" and ch == "(":
            self.frames[-1] = _ARITH
            return True
        if pending == "(" and ch == "(":
            # `for ((;;))` is arithmetic to bash and a syntax error to sh, which stops there
            for_loop = self.keyword == "for"
            self.parens[-1] -= 1
            self._push(_ARITH if for_loop else _ARITH_CMD)
            return True
        if pending == ")" and kind in _ARITHMETIC:
            self._pop()
            if ch == ")":
                self.word_start = kind == _ARITH_CMD
                return True
            self._unsure(f"a '{'$((' if kind == _ARITH else '(('}' that does not end with '))'")
        return False

    def _arith_char(self, kind: str, ch: str) -> None:
        if kind == _BRACKET:
            if ch == "[":
                self.parens[-1] += 1
            elif ch == "]" and self.parens[-1] > 0:
                self.parens[-1] -= 1
            elif ch == "]":
                self._pop()
                self.word_start = False
            elif ch not in _BRACKET_SAFE:
                self._unsure(f"'{ch}' inside $[...], which bash reads as arithmetic, sh as text")
            return
        if ch == "(":
            self.parens[-1] += 1
        elif ch == ")":
            if self.parens[-1] > 0:
                self.parens[-1] -= 1
            else:
                self.pending = ")"
        elif ch in "'\"":
            self._unsure("a quote inside arithmetic, which bash and sh read differently")
        elif kind == _ARITH_CMD and ch in "<#":
            self._unsure(
                f"'{ch}' inside '((...))', which sh reads as a command, bash as arithmetic"
            )

    def _unsure(self, why: str) -> None:
        if self.unsure is None and why:
            self.unsure = why

    def _end_word(self, ch: str) -> None:
        """An unquoted word ended at `ch`: follow `case`/`esac` where a command may start."""
        word = "".join(self.word)
        if word or self.word_tainted:
            self.keyword = word if self.cmd_pos and not self.word_tainted else ""
            if self.cmd_pos and not self.word_tainted:
                if word == "case":
                    self.cases[-1] += 1
                elif word == "esac" and self.cases[-1] > 0:
                    self.cases[-1] -= 1
                self.cmd_pos = word in _BEFORE_COMMAND
            else:
                self.cmd_pos = False
        self.word = []
        self.word_tainted = False
        if ch in ";&|()\n":
            self.cmd_pos = True

    def _push(self, kind: str) -> None:
        self.frames.append(kind)
        self.parens.append(0)
        self.cases.append(0)
        self.saved.append((self.word, self.word_tainted, self.cmd_pos))
        self.word, self.word_tainted, self.cmd_pos = [], False, True
        if self.heredoc is not None:
            self.hd_depth += 1

    def _pop_frame(self) -> None:
        self.frames.pop()
        self.parens.pop()
        self.cases.pop()
        self.word, self.word_tainted, self.cmd_pos = self.saved.pop()

    def _pop(self) -> None:
        if len(self.frames) > 1:
            self._pop_frame()
            if self.heredoc is not None and self.hd_depth > 0:
                self.hd_depth -= 1

    # ---------------------------------------------------------------- backticks
    def _backtick_char(self, ch: str) -> None:
        inner = self.bq
        assert inner is not None
        if self.bq_escape:
            self.bq_escape = False
            if ch == "\n":
                # A line continuation, removed (by sh and bash alike) before the body is read:
                # in a quote of the body too, and in a comment, which then goes on.
                return
            if ch in "$`\\" or (self.bq_in_dq and ch == '"'):
                inner._char(ch)
            else:
                inner._char("\\")
                inner._char(ch)
        elif ch == "\\":
            self.bq_escape = True
        elif ch == "`":
            self.bq = None
            self._unsure(inner.unsure or "")
        else:
            inner._char(ch)

    # ---------------------------------------------------------------- here-documents
    def _delimiter_char(self, ch: str) -> None:
        word = self.hd_word
        assert word is not None
        if ch == "\n" and (self.hd_quote or self.escape):
            # sh and bash disagree on such a delimiter (a quoted newline, a continuation)
            self._unsure("a here-document delimiter that spans lines")
        if self.hd_quote:
            if ch == self.hd_quote:
                self.hd_quote = ""
            else:
                word.append(ch)
            return
        if self.escape:
            self.escape = False
            word.append(ch)
            return
        if not word and not self.hd_quoted:
            if ch == "<":  # '<<<': a here-string
                self.hd_word = None
                self.lt = 0
                return
            if ch == "-" and not self.hd_strip:
                self.hd_strip = True
                return
            if ch in " \t":
                return
        if ch == "\\":
            self.escape = True
            self.hd_quoted = True
        elif ch in "'\"":
            self.hd_quote = ch
            self.hd_quoted = True
        elif ch in _WORD_BREAK:
            self.hd_pending.append(_Heredoc("".join(word), self.hd_strip, self.hd_quoted))
            self.hd_word = None
            self.lt = 0
            self._char(ch)
        else:
            word.append(ch)

    def _newline(self) -> None:
        """An unquoted newline at command level: pending here-document bodies start."""
        if self.hd_pending and self.heredoc is None:
            self._start_heredoc()

    def _start_heredoc(self) -> None:
        doc = self.hd_pending.pop(0)
        self.heredoc = None
        self._push(_HEREDOC_Q if doc.quoted else _HEREDOC)
        self.heredoc = doc
        self.hd_line = []
        self.hd_line_has_value = False
        self.hd_joined = False
        self.hd_depth = 0

    def _line_ends_body(self, line: str) -> bool:
        doc = self.heredoc
        assert doc is not None
        if doc.strip_tabs:
            line = line.lstrip("\t")
        return line == doc.delimiter

    def _line_trips_dash(self, line: str) -> bool:
        """dash drops the byte after a line's leading delimiter when it is not ASCII (`EOFé`
        comes out as `EOF` plus half a character), so such a value line cannot arrive intact."""
        doc = self.heredoc
        assert doc is not None
        if doc.strip_tabs:
            line = line.lstrip("\t")
        rest = line[len(doc.delimiter) :] if line.startswith(doc.delimiter) else ""
        return bool(rest) and not rest[0].isascii()

    def _heredoc_line(self, ch: str) -> None:
        if ch != "\n":
            self.hd_line.append(ch)
            return
        doc = self.heredoc
        assert doc is not None
        line = "".join(self.hd_line)
        if not doc.quoted and _odd_backslashes(line):
            # a line continuation: the shell joins this line and the next
            self.hd_line = [line[:-1]]
            self.hd_joined = True
            return
        self.hd_line = []
        joined, self.hd_joined = self.hd_joined, False
        has_value, self.hd_line_has_value = self.hd_line_has_value, False
        if has_value and self._line_trips_dash(line):
            raise UnsafeValue("a line of it starts with the here-document's delimiter")
        if not self._line_ends_body(line):
            return
        if has_value:
            raise UnsafeValue("a value would end the here-document early")
        if joined:
            # bash ends the body at a joined line equal to the delimiter, sh does not
            self._unsure("a here-document line continued into its delimiter")
            return
        for _ in range(self.hd_depth + 1):
            self._pop_frame()
        self.heredoc = None
        self.hd_depth = 0
        self.escape = self.dollar = False
        self.word_start = True
        self.bq = None
        if self.hd_pending:
            self._start_heredoc()

    # ---------------------------------------------------------------- writing values
    def chain(self) -> list[ShellLexer]:
        """This lexer and the nested backtick lexers down to the one reading now."""
        chain = [self]
        while chain[-1].bq is not None:
            inner = chain[-1].bq
            assert inner is not None
            chain.append(inner)
        return chain

    def quote(self, value: str) -> str:
        """`value` escaped so that the shell reads it back byte for byte, where we stand."""
        chain = self.chain()
        lexer = chain[-1]
        kind = lexer.frames[-1]
        dollar = lexer.dollar
        for level in chain:
            if level.unsure is not None:
                raise UnsafeValue(
                    f"the command before it has {level.unsure}, so where the value would "
                    "stand is uncertain",
                    hint="rewrite that part, or pass the value in a file or variable",
                )
        if lexer.hd_word is not None:
            raise UnsafeValue("it stands in a here-document's delimiter word")
        if kind in _ARITHMETIC:
            raise UnsafeValue(
                "it stands inside arithmetic, where the shell would evaluate it",
                hint='set a variable first (n="${captured.NAME.output}") and use $((n))',
            )
        if any(outer.bq_escape for outer in chain[:-1]) or (
            lexer.escape and kind not in (_SQ, _HEREDOC_Q, _COMMENT)
        ):
            raise UnsafeValue("it follows a backslash")
        if dollar and kind in (_PARAM, _PARAM_DQ, _HEREDOC):
            raise UnsafeValue("it follows a bare '$'")
        if kind == _PARAM_SQ:
            raise UnsafeValue(
                """it stands inside '...' within "${...}", which sh and bash read differently"""
            )
        if kind == _PARAM_DQ and "'" in value:
            # bash pairs single quotes inside "${...}" while dash reads them literally
            raise UnsafeValue('its value has a single quote and it stands inside "${...}"')
        if kind in (_CMD, _PARAM):
            # '""' after a bare '$' keeps '$' from joining the quote ($'...' or $(...)).
            text = ('""' if dollar else "") + single_quote(value)
        elif kind in (_DQ, _PARAM_DQ):
            text = ('""' if dollar else "") + _dq_escape(value)
        elif kind == _HEREDOC:
            text = _dq_escape(value, quote_char=False)
        elif kind == _SQ:
            text = value.replace("'", "'\\''")
        elif kind == _ANSI:
            # close $'...', write a plain '...' word, reopen: byte-exact whether or not the
            # shell knows $'...', since the value never sees ANSI-C escapes either way
            text = "'" + single_quote(value) + "$'"
        elif kind == _COMMENT:
            text = value.replace("\n", " ")  # a newline would end the comment
        else:  # _HEREDOC_Q: nothing expands there, so nothing needs escaping
            text = value
        texts = [text]
        for outer in reversed(chain[:-1]):
            texts.append(_backtick_escape(texts[-1], in_dq=outer.bq_in_dq))
        for level, written in zip(chain, reversed(texts), strict=True):
            level.note_value(written)
        lexer.dollar = False
        lexer.word_start = False
        lexer.lt = 0
        return texts[-1]

    def line_pending(self) -> bool:
        """A here-document line holds a value and has not ended yet."""
        return any(level.heredoc is not None and level.hd_line_has_value for level in self.chain())

    def note_value(self, text: str) -> None:
        """Escaped text was written here; only a here-document body needs to know."""
        if self.heredoc is None:
            return
        lines = text.split("\n")
        if len(lines) > 1:
            lines[0] = "".join(self.hd_line) + lines[0]
            self.hd_line = []
            self.hd_joined = False
            if any(self._line_ends_body(line) for line in lines[:-1]):
                raise UnsafeValue("a line of it would end the here-document early")
            if any(self._line_trips_dash(line) for line in lines[:-1]):
                raise UnsafeValue("a line of it starts with the here-document's delimiter")
        self.hd_line.append(lines[-1])
        self.hd_line_has_value = True


class UnsafeValue(Exception):
    """A value stands where no escaping can keep it inert."""

    def __init__(self, message: str, hint: str = 'move it to a plain spot such as "..."') -> None:
        super().__init__(message)
        self.hint = hint


def _odd_backslashes(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def single_quote(value: str) -> str:
    """`value` as one single-quoted shell word: `'...'`, each `'` written `'\\''`."""
    return "'" + value.replace("'", "'\\''") + "'"


def _dq_escape(value: str, *, quote_char: bool = True) -> str:
    out = value.replace("\\", "\\\\").replace("$", "\\$").replace("`", "\\`")
    return out.replace('"', '\\"') if quote_char else out


def _backtick_escape(text: str, *, in_dq: bool) -> str:
    out = text.replace("\\", "\\\\").replace("$", "\\$").replace("`", "\\`")
    return out.replace('"', '\\"') if in_dq else out
