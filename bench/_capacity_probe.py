"""What ``bench/capacity.py`` counts: the stand-in's API requests by verb and resource, the
controller's CPU seconds and RSS (``/proc``), and the store's commits, row changes and WAL bytes
(PostgreSQL's statistics views)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

#: Each stand-in request as (verb, resource): the Kubernetes audit log's words.
Key = tuple[str, str]
_TICK = os.sysconf("SC_CLK_TCK")


def classify(method: str, path: str) -> Key:
    """(verb, resource) of a request, as the API server's authorizer names them: ``GET`` of a
    named object is ``get``, of a collection ``list``; a subresource is ``pods/log``."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        rest = parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        rest = parts[3:]
    else:
        return (method.lower(), path)  # /version and the like
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource, named = (rest[0] if rest else ""), len(rest) >= 2
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"
    verb = {
        "GET": "get" if named else "list",
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if named else "deletecollection",
    }.get(method, method.lower())
    return verb, resource


def count(requests: list[tuple[str, str]]) -> Counter[Key]:
    """How many requests of each (verb, resource)."""
    return Counter(classify(m, p) for m, p in requests)


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (now)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


@dataclass(frozen=True)
class Proc:
    """CPU seconds (user + system, the process tree's, waited-for children included) and RSS."""

    cpu_s: float
    rss_mib: float

    @classmethod
    def of(cls, pid: int) -> Proc:
        cpu = rss = 0.0
        for p in tree(pid):
            try:
                fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
                status = Path(f"/proc/{p}/status").read_text()
            except OSError:
                continue
            cpu += sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime
            rss += next((int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS:")), 0)
        return cls(cpu, rss / 1024)


@dataclass(frozen=True)
class Store:
    """PostgreSQL's counters for one database: commits, rows inserted/updated/deleted per table,
    WAL bytes written (the server's, this database's writes almost all of it here)."""

    commits: int
    wal_bytes: int
    inserted: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)

    @classmethod
    async def of(cls, dsn: str) -> Store:
        import psycopg

        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            row = await (
                await conn.execute(
                    "SELECT xact_commit, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint "
                    "FROM pg_stat_database WHERE datname = current_database()"
                )
            ).fetchone()
            tables = await (
                await conn.execute("SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables")
            ).fetchall()
        assert row is not None
        return cls(
            int(row[0]),
            int(row[1]),
            {t[0]: int(t[1]) for t in tables},
            {t[0]: int(t[2]) for t in tables},
            {t[0]: int(t[3]) for t in tables},
        )

    def minus(self, before: Store) -> Store:
        def diff(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
            return {k: v - b.get(k, 0) for k, v in a.items() if v - b.get(k, 0)}

        return Store(
            self.commits - before.commits,
            self.wal_bytes - before.wal_bytes,
            diff(self.inserted, before.inserted),
            diff(self.updated, before.updated),
            diff(self.deleted, before.deleted),
        )

    @property
    def rows(self) -> int:
        """Rows written (inserted + updated + deleted)."""
        return sum(self.inserted.values()) + sum(self.updated.values()) + sum(self.deleted.values())
