"""Who changed a file, the kernel's side of it read: fanotify's event records parsed, and the
writer a file event names. `adapters/file_actors.py` reads the records (fanotify needs root) and
looks the writing process up."""

from __future__ import annotations

import struct
from dataclasses import dataclass

FAN_MODIFY = 0x00000002
FAN_CLOSE_WRITE = 0x00000008
FAN_Q_OVERFLOW = 0x00004000
#: struct fanotify_event_metadata: event_len u32, vers u8, reserved u8, metadata_len u16,
#: mask u64, fd s32, pid s32.
_META = struct.Struct("=IBBHQii")
FANOTIFY_METADATA_VERSION = 3
MAX_CMDLINE = 300


@dataclass(frozen=True)
class Writer:
    pid: int
    name: str
    user: str
    cmdline: str
    at: float  # monotonic time of the write

    def words(self) -> str:
        who = f"{self.name} (pid {self.pid}" + (f", user {self.user})" if self.user else ")")
        return who

    def metadata(self) -> dict[str, object]:
        return {"pid": self.pid, "process": self.name, "user": self.user,
                "command": self.cmdline}


def parse_events(buf: bytes) -> list[tuple[int, int, int]]:
    """(mask, fd, pid) of each event in a read of the fanotify descriptor."""
    out: list[tuple[int, int, int]] = []
    off = 0
    while off + _META.size <= len(buf):
        event_len, vers, _res, _mlen, mask, fd, pid = _META.unpack_from(buf, off)
        if vers != FANOTIFY_METADATA_VERSION or event_len < _META.size:
            break
        out.append((mask, fd, pid))
        off += event_len
    return out
