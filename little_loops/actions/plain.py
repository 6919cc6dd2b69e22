"""A shell action that is one plain command runs without the shell, as make runs such lines.

`sh -c 'pytest -q tests'` starts /bin/sh, which looks `pytest` up in PATH, forks, execs it and
waits: two processes and two execs where one would do (docs/performance.md, "Plain commands,
and what a printing step's cost was"). When the command text is words the shell would only
split on blanks (letters, digits and `_ . / : , + = @ % -`, no quote, no `$`, no glob, no
redirection, no operator) and its first word is neither a shell builtin nor a reserved word,
`ll` execs it itself, with the same result the shell would have given:

- the same program: PATH is searched by `posix_spawnp` as dash searches it, entry by entry,
  an empty entry meaning the current directory; where the search or the exec fails (not
  found, not executable, a script without `#!` that the shell would read itself), the action
  is started through the shell after all, which then says and does what it always did;
- the same environment: dash passes on only variables with valid names and exports `PWD`
  (kept when it names the current directory, else the physical path); an environment with an
  invalid name runs through the shell, and `PWD` is set as dash sets it;
- the same ending: a command ended by signal N gives exit code 128+N and, except for SIGINT
  and SIGPIPE, the line dash writes to stderr ("Terminated", "Segmentation fault (core
  dumped)"), see `signal_ending`.

Only where /bin/sh is dash (Debian, Ubuntu, their CI images): bash and busybox as /bin/sh set
variables of their own (`SHLVL`, `_`), so there the shell still runs every action. The one
difference left: the command's parent process is `ll`, not a shell.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from typing import Any

Environment = Mapping[str, str] | Mapping[bytes, bytes]

# The characters of a plain command: its words' (nothing in them is expanded, quoted or
# redirected) and the blanks between them. Checked as a set, in C: no regular expression to
# compile when `ll` starts.
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:,+=@%-")
_PLAIN_CHARS = _WORD_CHARS | frozenset(" \t")


def _valid_name(name: str | bytes) -> bool:
    """A name dash keeps in the environment: ASCII letters, digits and `_`, not led by a digit."""
    text = name.decode("latin-1") if isinstance(name, bytes) else name
    return text.isascii() and text.isidentifier()


# First words the shell runs itself: dash's builtins and reserved words, and bash's, so that a
# word that is a builtin in any shell a reader may have in mind is never taken for a program
# (tests/actions/test_plain.py asks dash about each of them).
_SHELL_WORDS = """
    ! { } [[ ]] . : [ alias bg break builtin caller case cd chdir command compgen complete
    compopt continue coproc declare dirs disown do done echo elif else enable esac eval exec
    exit export false fc fg fi for function getopts hash help history if in jobs kill let local
    logout mapfile nlsbuiltin popd printf pushd pwd read readarray readonly return select set
    shift shopt source suspend test then time times trap true type typeset ulimit umask
    unalias unset until wait while
"""
SHELL_WORDS = frozenset(_SHELL_WORDS.split())

_DASH: bool | None = None


def sh_is_dash() -> bool:
    """Whether /bin/sh is dash (looked up once per process)."""
    global _DASH
    if _DASH is None:
        try:
            _DASH = os.path.basename(os.path.realpath("/bin/sh")) == "dash"
        except OSError:
            _DASH = False
    return _DASH


# plain_argv's answers by command text: a loop runs the same few commands step after step.
_PLAIN_SEEN: dict[str, list[str] | None] = {}


def plain_argv(command: str, shell: str) -> list[str] | None:
    """The words of `command` when `shell` would only split it and exec its first word (and
    is dash, as /bin/sh); None where the shell has more to do. A new list at every call."""
    if shell != "/bin/sh":
        return None
    try:
        words = _PLAIN_SEEN[command]
    except KeyError:
        if len(_PLAIN_SEEN) > 256:
            _PLAIN_SEEN.clear()
        words = _PLAIN_SEEN[command] = _plain_words(command)
    return None if words is None else list(words)


def _plain_words(command: str) -> list[str] | None:
    text = command.rstrip("\n")
    if len(text) > 4096 or not _PLAIN_CHARS.issuperset(text):
        return None
    words = text.split()  # blanks only: no other white space got past the check above
    if not words:
        return None
    first = words[0]
    if first in SHELL_WORDS or "=" in first:  # a builtin, a reserved word, an assignment
        return None
    return words if sh_is_dash() else None


def own_environment() -> Environment:
    """This process's environment for a child. CPython keeps `os.environ`'s encoded keys and
    values in a plain dict (`_data`, updated with every change made through `os.environ`);
    handed that, posix_spawn reads it in C, where `os.environ` itself costs a Python call a
    variable (about 50 µs a step). Elsewhere, `os.environ`."""
    data = getattr(os.environ, "_data", None)
    return data if type(data) is dict else os.environ


# The variable names found valid so far (an environment's names rarely change between steps).
_NAMES_SEEN: set[str | bytes] = set()
# The last PWD check: (PWD, cwd) -> whether PWD names cwd; both rarely change between steps.
_PWD_SEEN: dict[tuple[str | bytes | None, str], bool] = {}


def dash_environment(env: Environment, cwd: str) -> Environment | None:
    """`env` as dash would pass it to a command: None if it has a name dash would drop or a
    PATH other than this process's (the shell then runs the action); a copy with `PWD` set
    when `PWD` does not name `cwd`. `env` has text or bytes (`os.environ`'s own dict) keys."""
    given: Mapping[Any, Any] = env
    binary = bool(given) and isinstance(next(iter(given)), bytes)
    pwd_key: str | bytes = b"PWD" if binary else "PWD"
    path = given.get(b"PATH" if binary else "PATH")
    # posix_spawnp searches this process's PATH: the child's must be the same (it is, where
    # the child is given this process's own environment).
    if path is None:
        return None
    own = given is own_environment()
    if not own and (os.fsdecode(path) if binary else path) != os.environ.get("PATH"):
        return None
    if not _NAMES_SEEN.issuperset(given):  # a name not seen before (hashing only, in C)
        if not all(map(_valid_name, given)):
            return None
        if len(_NAMES_SEEN) > 4096:
            _NAMES_SEEN.clear()
        _NAMES_SEEN.update(given)
    pwd = given.get(pwd_key)
    key = (pwd, cwd)
    ok = _PWD_SEEN.get(key)
    if ok is None:
        if len(_PWD_SEEN) > 64:
            _PWD_SEEN.clear()
        ok = _PWD_SEEN[key] = _names_cwd(pwd, cwd)
    if ok:
        return env
    fixed: dict[Any, Any] = dict(given)
    fixed[pwd_key] = os.fsencode(cwd) if binary else cwd
    return fixed


def _names_cwd(pwd: str | bytes | None, cwd: str) -> bool:
    """Whether dash would keep `PWD` as it is: an absolute path naming the directory `cwd`."""
    if not pwd or not os.fsdecode(pwd).startswith("/"):
        return False
    try:
        there, here = os.stat(pwd), os.stat(cwd)
    except OSError:
        return False
    return (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino)


def signal_ending(status: int) -> tuple[int, bytes] | None:
    """For a wait status ending a plainly exec'd command by a signal: the exit code and the
    stderr line dash gives for it (none for SIGINT and SIGPIPE); None for a normal exit."""
    if not os.WIFSIGNALED(status):
        return None
    number = os.WTERMSIG(status)
    if number in (signal.SIGINT, signal.SIGPIPE):
        return 128 + number, b""
    try:
        name = signal.strsignal(number) or f"Unknown signal {number}"
    except ValueError:
        name = f"Unknown signal {number}"
    core = " (core dumped)" if os.WCOREDUMP(status) else ""
    return 128 + number, f"{name}{core}\n".encode()
