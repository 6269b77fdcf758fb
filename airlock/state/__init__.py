"""State stores implementing ``layer0.StateStore`` (used by the runner and the controller).

- ``InMemoryStore``: a dict; tests and ephemeral runs.
- ``SqliteStore``: the embedded default that persists (one SQLite file, WAL mode), on
  ``SqliteThread``, the base of every airlock SQLite file (also the controller's job store).
- ``FsStore``: scopes as directories, one JSON file per key, atomic writes.

All three hold JSON values only (anything else raises ``StateError.serialization``),
list keys sorted, isolate scopes fully and share one basic text search: a
case-insensitive term match over each value's JSON text, scored by the fraction of
query terms found.
"""

from ._fs import FsStore
from ._memory import InMemoryStore
from ._sqlite import SqliteStore, SqliteThread

__all__ = ["FsStore", "InMemoryStore", "SqliteStore", "SqliteThread"]
