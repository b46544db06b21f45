"""The plain baseline: Postgres full-text search alone, nothing of ours.

The same Postgres our stack runs (its binaries and server settings, `totalrecall.infra.postgres`),
in its own data directory so that its memory is its own: one table, `to_tsvector('english')` in a
stored generated column with a GIN index, queries as `plainto_tsquery('english')` with its ANDs
turned into ORs (any word may match, as a search box would), ranked by `ts_rank`.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
from totalrecall.infra import free_port
from totalrecall.infra.postgres import PostgresServer

from .workload import Doc

SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    ns   text NOT NULL,
    id   text NOT NULL,
    body text NOT NULL,
    ts   timestamptz NOT NULL,
    tsv  tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED,
    PRIMARY KEY (ns, id)
);
CREATE INDEX IF NOT EXISTS docs_tsv ON docs USING gin (tsv);
"""
#: OR semantics: plainto_tsquery ANDs the words; a memory with any of them is a candidate.
SEARCH = """
WITH q AS (SELECT replace(plainto_tsquery('english', $2)::text, ' & ', ' | ') AS t)
SELECT id FROM docs, q
WHERE q.t <> '' AND ns = $1 AND tsv @@ to_tsquery('english', q.t)
ORDER BY ts_rank(tsv, to_tsquery('english', q.t)) DESC, id
LIMIT $3
"""


class PgFtsPeer:
    name = "Postgres FTS"

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tr-peers-pg-"))
        self.server = PostgresServer(self.root, port=free_port())
        self.loop = asyncio.new_event_loop()
        self.conn: Any = None
        self.config: dict[str, Any] = {
            "server": "a dedicated Postgres (the stack's binaries and settings)",
            "index": "tsvector('english') stored column + GIN",
            "query": "plainto_tsquery('english') with OR, ranked by ts_rank"}

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def start(self) -> None:
        self.server.start(timeout=60)
        dsn = self.server.create_database("peers_fts")
        self.conn = self._run(asyncpg.connect(dsn))
        self._run(self.conn.execute(SCHEMA))
        self.config["postgres"] = self._run(self.conn.fetchval("SHOW server_version"))

    def add(self, ns: str, docs: Sequence[Doc]) -> None:
        rows = [(ns, d.id, d.text, d.ts) for d in docs]
        self._run(self.conn.executemany(
            "INSERT INTO docs (ns, id, body, ts) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (ns, id) DO UPDATE SET body = excluded.body, ts = excluded.ts", rows))

    def flush(self) -> None:
        self._run(self.conn.execute("ANALYZE docs"))

    def search(self, ns: str, query: str, k: int) -> list[str]:
        return [str(r["id"]) for r in self._run(self.conn.fetch(SEARCH, ns, query, k))]

    def pids(self) -> list[int]:
        return [self.server.proc.pid] if self.server.proc is not None else []

    def stop(self) -> None:
        if self.conn is not None:
            self._run(self.conn.close())
            self.conn = None
        self.server.stop()
        self.loop.close()
        import shutil

        shutil.rmtree(self.root, ignore_errors=True)
