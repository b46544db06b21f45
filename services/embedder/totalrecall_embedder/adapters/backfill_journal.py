"""The backfill journal: memories that went out with `vector=None` (no model), kept durably until
they were republished with a vector.

One SQLite file under `$TOTALRECALL_HOME/spool/embedder/` (synchronous=FULL: an entry is on disk
before its source message is acked). Each row holds the EmbeddedEvent as last published, so the
backfill republishes the same memory (same key, repeat_count, last_seen) with the vector, under
`Nats-Msg-Id: <key>:backfill`; the indexer's upsert-by-key fills the vector in.

`version` grows on every update of a key: the backfill deletes a row only if nobody updated it
while its vector was being computed.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("totalrecall.embedder")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    key TEXT PRIMARY KEY,
    version INTEGER NOT NULL DEFAULT 1,
    payload BLOB NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    added REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS pending_added ON pending(added);
"""


@dataclass
class Pending:
    key: str
    version: int
    payload: bytes          # EmbeddedEvent JSON as published (vector None)
    attempts: int


class BackfillJournal:
    """Thread-safe; `path=None` keeps it in memory (not durable: only when the spool directory is
    not writable)."""

    def __init__(self, path: Path | None, max_entries: int = 200_000) -> None:
        self.path = path
        self.max_entries = max(1, max_entries)
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False,
                                   isolation_level=None, timeout=10.0)
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._keys = {r[0] for r in self._db.execute("SELECT key FROM pending")}
        self.dropped = 0

    @property
    def durable(self) -> bool:
        return self.path is not None

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def record(self, put: Sequence[tuple[str, bytes]] = (), remove: Sequence[str] = ()) -> None:
        """In one transaction: remember (key, EmbeddedEvent JSON) published without a vector;
        forget keys that were published with one."""
        remove = [k for k in remove if k in self._keys]
        if not put and not remove:
            return
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO pending (key, payload, added) VALUES (?, ?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET payload = excluded.payload, "
                    "version = pending.version + 1", [(k, p, now) for k, p in put])
                self._db.executemany("DELETE FROM pending WHERE key = ?", [(k,) for k in remove])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._keys.update(k for k, _ in put)
            self._keys.difference_update(remove)
            if len(self._keys) > self.max_entries:
                self._overflow()

    def _overflow(self) -> None:
        excess = len(self._keys) - self.max_entries
        rows = self._db.execute("SELECT key FROM pending ORDER BY added LIMIT ?",
                                (excess,)).fetchall()
        self._db.executemany("DELETE FROM pending WHERE key = ?", rows)
        self._keys.difference_update(r[0] for r in rows)
        self.dropped += len(rows)
        log.warning("backfill journal full (%d): dropped the %d oldest entries "
                    "(a rebuild re-embeds them)", self.max_entries, len(rows))

    def take(self, limit: int, max_attempts: int = 5) -> list[Pending]:
        """The oldest entries still worth trying (not removed: `done()` does that)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT key, version, payload, attempts FROM pending WHERE attempts < ? "
                "ORDER BY added LIMIT ?", (max_attempts, limit)).fetchall()
        return [Pending(k, int(v), bytes(p), int(a)) for k, v, p, a in rows]

    def done(self, key: str, version: int) -> bool:
        """Forget `key` if it was not updated since `take()`; True when it was removed."""
        with self._lock:
            cur = self._db.execute("DELETE FROM pending WHERE key = ? AND version = ?",
                                   (key, version))
            if cur.rowcount:
                self._keys.discard(key)
                return True
            return False

    def failed(self, key: str, version: int) -> None:
        with self._lock:
            self._db.execute("UPDATE pending SET attempts = attempts + 1 "
                             "WHERE key = ? AND version = ?", (key, version))

    def waiting(self, max_attempts: int = 5) -> int:
        """Entries the backfill will still try."""
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM pending WHERE attempts < ?",
                                        (max_attempts,)).fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
