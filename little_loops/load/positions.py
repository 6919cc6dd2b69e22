"""Where each node of a loop file stands (`SourceMap`), and how large and deep a file may be:
shared by the YAML composer (composer.py) and the plain-YAML reader (plain_yaml.py), which
the composer calls first."""

from __future__ import annotations

from little_loops.model.loop import Pos
from little_loops.model.records import field, record

TYPE_CHECKING = False  # `typing` is not imported at run time; mypy reads this
if TYPE_CHECKING:
    from little_loops.wording import NodePath

MAX_DEPTH = 100
MAX_NODES = 100_000  # after aliases are expanded


@record
class SourceMap:
    """Line and column of each node (`values`) and of each mapping key (`keys`), by path.

    `comments` holds where a YAML comment starts on the line a plain (unquoted) value ends,
    and its text: `action: /fix issue #42` sends `/fix issue`, which the author may not mean.
    """

    values: dict[NodePath, Pos] = field(default_factory=dict)
    keys: dict[NodePath, Pos] = field(default_factory=dict)
    comments: dict[NodePath, tuple[Pos, str]] = field(default_factory=dict)

    def value(self, path: NodePath) -> Pos:
        """Where the node at `path` starts, or its nearest recorded ancestor."""
        while path not in self.values and path:
            path = path[:-1]
        return self.values.get(path, Pos())

    def key(self, path: NodePath) -> Pos:
        """Where the key naming `path` stands, or the node's own position."""
        return self.keys.get(path) or self.value(path)
