"""Noticing that nats-server's JetStream store stopped writing after the disk was full.

nats-server (checked with 2.15.1) keeps a stream's block-file write error ("no space left on
device") until it restarts: once the disk has room again every publish to that stream still
fails, and the publisher only sees a timeout (no PubAck). `/healthz` stays ok, so the one signal is
the server's own log line. The supervisor reads the log it owns, and restarts nats-server once the
store's disk has room again (a restart re-opens the store; JetStream keeps every acknowledged
message, the `nats-server killed and restarted` chaos row shows it).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

#: The line nats-server logs for each message it failed to store.
_FAILED = "JetStream failed to store a msg"
_NO_SPACE = "no space left on device"
#: Room the store's disk needs before a restart is worth it (nats sizes JetStream from it).
MIN_FREE_BYTES = 64 << 20


@dataclass
class NatsStoreWatch:
    log_path: Path
    store_dir: Path
    min_free: int = MIN_FREE_BYTES
    offset: int = 0
    failing: bool = False

    def skip_existing(self) -> None:
        """Only lines logged from now on count (an earlier run's failures were restarted)."""
        try:
            self.offset = self.log_path.stat().st_size
        except OSError:
            self.offset = 0

    def _new_lines(self) -> list[str]:
        try:
            size = self.log_path.stat().st_size
            if size < self.offset:  # rotated or truncated
                self.offset = 0
            with open(self.log_path, "rb") as f:
                f.seek(self.offset)
                data = f.read(size - self.offset)
        except OSError:
            return []
        # Only whole lines; a partial last line is read again next time.
        end = data.rfind(b"\n") + 1
        self.offset += end
        return data[:end].decode(errors="replace").splitlines()

    def free_bytes(self) -> int:
        for path in (self.store_dir, *self.store_dir.parents):
            if path.exists():
                return shutil.disk_usage(path).free
        return 0

    def restart_reason(self) -> str | None:
        """Why nats-server must restart now (its store failed on a full disk, which has room
        again), else None. Call it every supervision round."""
        if any(_FAILED in line and _NO_SPACE in line.lower() for line in self._new_lines()):
            self.failing = True
        if not self.failing:
            return None
        free = self.free_bytes()
        if free < self.min_free:
            return None
        self.failing = False
        return (f"its JetStream store failed to write on a full disk; {free >> 20} MiB free "
                "again, and it only recovers from that by restarting")
