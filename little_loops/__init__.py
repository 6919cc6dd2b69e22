"""little-loops: run finite-state loops written in YAML.

The interface is the `ll` command and the file formats (README.md, "Public interface"); this
package exports its version only, and its modules may change in any release.
"""

import os as _os
import sys as _sys

__all__ = ["__version__"]

__version__ = "0.1.0"


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C while `ll` is still importing itself: one line and exit 130, not a traceback.
    The process ends here and now (`_exit`): nothing is written or started yet, and a raised
    SystemExit that lands in a callback the interpreter calls (an import lock's weakref
    callback, a finalizer) is printed as "Exception ignored" with a traceback, and `ll`
    carries on."""
    try:  # noqa: SIM105 (contextlib.suppress would be one more import while starting)
        _os.write(2, b"ll: interrupted\n")
    except OSError:
        pass
    _os._exit(130)


def _catch_interrupts_while_starting() -> None:
    """From here until `ll` installs its own handlers, Ctrl-C ends it with 130 and one line. A
    SIGINT that is ignored (a background job) stays ignored."""
    # `_signal` is built in and already loaded: importing `signal` would take a millisecond,
    # during which a Ctrl-C would still print a traceback.
    import _signal  # type: ignore[import-not-found]

    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _interrupted_while_starting)


# `ll` (the script, or `python -m little_loops`) imports this package before anything else of
# its own, so this is where Ctrl-C stops giving a traceback. Only Python's start-up comes
# before (its `site` imports, and finding this package). A program that imports the package
# for other ends keeps its own handling of Ctrl-C.
_argv0 = (getattr(_sys, "argv", None) or [""])[0]
if _argv0 == "-m" or _os.path.basename(_argv0).removesuffix(".exe") in ("ll", "little-loops"):
    _catch_interrupts_while_starting()
