"""The hash-chained ledger of the agent's actions: pure chain logic and the file that holds it.

One JSON object a line (`ledger.jsonl`): `{seq, ts, actor, action, target, detail, prev_hash,
hash}`. `hash` is the SHA-256 of the canonical JSON (sorted keys, no spaces, UTF-8) of the entry
without `hash`; `prev_hash` is the previous entry's `hash` (64 zeros before the first). Editing,
deleting or reordering an entry breaks the chain at that entry; a crash in the middle of a write
leaves a torn last line, which `verify` reports and `LedgerFile.append` refuses to continue.

Shared by the recall API (the only writer) and the CLI (`totalrecall ledger verify`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from .events import (
    MAX_FUTURE_SKEW,
    MAX_SUMMARY_CHARS,
    EventMetadata,
    MemoryEvent,
    assume_utc,
    utcnow,
)
from .scrub import scrub_text

GENESIS_HASH = "0" * 64
ENTRY_FIELDS = ("seq", "ts", "actor", "action", "target", "detail", "prev_hash", "hash")
ACTION_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
MAX_TARGET_CHARS = 1_000
MAX_DETAIL_CHARS = 8_000
#: How far back from the end `last_entry` looks for the start of the last line.
_TAIL_CHUNK = 64 * 1024


class LedgerAppend(BaseModel):
    """What a writer asks to append; the ledger adds seq, ts, prev_hash and hash."""

    actor: str = Field(default="agent", min_length=1, max_length=128)
    action: str = Field(pattern=ACTION_PATTERN, description="e.g. command.run, file.write, "
                        "service.restart, package.install")
    target: str = Field(default="", max_length=MAX_TARGET_CHARS,
                        description="What was acted on: a command line, a path, a unit, a package")
    detail: str = Field(default="", max_length=MAX_DETAIL_CHARS)
    ts: datetime | None = Field(default=None, description="When it happened; default now")

    @field_validator("ts")
    @classmethod
    def _plausible_ts(cls, v: datetime | None) -> datetime | None:
        # The same bounds as a MemoryEvent's: every entry must be able to become a memory.
        if v is None:
            return v
        v = assume_utc(v)
        if v.year < 1971 or v > utcnow() + MAX_FUTURE_SKEW:
            raise ValueError("ts must be after 1970 and at most 24 hours in the future")
        return v


class LedgerEntry(BaseModel):
    seq: int = Field(ge=1)
    ts: str
    actor: str
    action: str
    target: str
    detail: str
    prev_hash: str
    hash: str


class LedgerAppendResponse(BaseModel):
    entry: LedgerEntry
    #: False when the entry is durable in the ledger but not yet in memory (NATS unreachable):
    #: it is published with the next append.
    published: bool


class LedgerReadResponse(BaseModel):
    entries: list[LedgerEntry]


class LedgerBroken(RuntimeError):
    """The chain on disk is broken: appending to it would hide the break."""


def canonical(fields: Mapping[str, Any]) -> bytes:
    """The bytes hashed: every field but `hash`, sorted keys, no whitespace, UTF-8."""
    body = {k: v for k, v in fields.items() if k != "hash"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def entry_hash(fields: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(fields)).hexdigest()


def _iso(ts: datetime) -> str:
    ts = ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def make_entry(req: LedgerAppend, *, seq: int, prev_hash: str,
               now: datetime | None = None) -> dict[str, Any]:
    """The next entry after (seq - 1, prev_hash). Text is scrubbed before it is hashed: a
    secret never reaches the file, and the hash covers exactly what is stored."""
    fields: dict[str, Any] = {
        "seq": seq, "ts": _iso(req.ts or now or datetime.now(UTC)),
        "actor": scrub_text(req.actor), "action": req.action,
        "target": scrub_text(req.target), "detail": scrub_text(req.detail),
        "prev_hash": prev_hash,
    }
    fields["hash"] = entry_hash(fields)
    return fields


def encode_line(entry: Mapping[str, Any]) -> bytes:
    return json.dumps(dict(entry), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


@dataclass(frozen=True)
class Break:
    """Where the chain breaks: the entry's seq (as expected at that position), its line, why."""

    seq: int
    line: int
    reason: str


@dataclass(frozen=True)
class Verdict:
    ok: bool
    entries: int
    last_seq: int
    last_hash: str
    first_break: Break | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, "entries": self.entries,
                               "last_seq": self.last_seq, "last_hash": self.last_hash}
        if self.first_break is not None:
            b = self.first_break
            out["first_bad_seq"], out["line"], out["reason"] = b.seq, b.line, b.reason
        return out


def check_entry(raw: bytes, *, expected_seq: int, prev_hash: str) -> tuple[dict[str, Any], str | None]:
    """Parse one line and check it continues the chain; (entry, None) or (entry, reason)."""
    if not raw.endswith(b"\n"):
        return {}, "torn last line (no newline: a write was cut off)"
    try:
        entry = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"not valid JSON ({exc.msg})"
    except ValueError:  # not UTF-8
        return {}, "not valid JSON (bad encoding)"
    if not isinstance(entry, dict) or sorted(entry) != sorted(ENTRY_FIELDS):
        got = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
        return {}, f"not a ledger entry (fields {got})"
    if entry["seq"] != expected_seq:
        return entry, f"seq {entry['seq']} where {expected_seq} was expected (deleted or reordered)"
    if entry["prev_hash"] != prev_hash:
        return entry, "prev_hash does not match the previous entry's hash (deleted or reordered)"
    if entry_hash(entry) != entry["hash"]:
        return entry, "hash does not match the entry's content (edited)"
    return entry, None


def split_lines(data: bytes) -> Iterator[bytes]:
    """Lines with their newline; a last line without one is yielded as it is (torn)."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        if end < 0:
            yield data[start:]
            return
        yield data[start:end + 1]
        start = end + 1


def verify_lines(lines: Iterable[bytes]) -> Verdict:
    """Walk the chain from the genesis; stop at the first break."""
    seq, prev, count = 0, GENESIS_HASH, 0
    for number, raw in enumerate(lines, start=1):
        entry, reason = check_entry(raw, expected_seq=seq + 1, prev_hash=prev)
        if reason is not None:
            return Verdict(False, count, seq, prev, Break(seq + 1, number, reason))
        seq, prev, count = entry["seq"], entry["hash"], count + 1
    return Verdict(True, count, seq, prev)


def verify_file(path: Path) -> Verdict:
    """Verify a ledger file; a missing file is an empty (valid) ledger."""
    if not path.exists():
        return Verdict(True, 0, 0, GENESIS_HASH)
    with path.open("rb") as f:
        return verify_lines(_read_lines(f))


def _read_lines(f: Any) -> Iterator[bytes]:
    """Lines of an open binary file, the last one possibly without its newline."""
    while True:
        line = f.readline()
        if not line:
            return
        yield line


def _last_line(f: Any) -> bytes:
    """The file's last line (with its newline if it has one), read backwards from the end."""
    end = f.seek(0, os.SEEK_END)
    if end == 0:
        return b""
    pos, tail = end, b""
    while pos > 0:
        step = min(_TAIL_CHUNK, pos)
        pos -= step
        f.seek(pos)
        tail = f.read(step) + tail
        # The last line starts after the last newline that is not the file's final byte.
        cut = tail.rfind(b"\n", 0, len(tail) - 1)
        if cut >= 0:
            return tail[cut + 1:]
    return tail


#: Entries are written with `seq` first: the seq of a line without parsing all of it.
_SEQ = re.compile(rb'\{"seq":(\d+),')


class LedgerFile:
    """The ledger on disk. `append` holds an exclusive `flock` on the file while it reads the
    last entry and writes the next one, then fsyncs before returning: concurrent writers (tasks,
    threads, processes) are serialised, and an answered append survives a crash."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _tip(self, f: Any) -> tuple[int, str]:
        """(seq, hash) of the last entry, checked; raises LedgerBroken if it cannot be trusted."""
        raw = _last_line(f)
        if not raw:
            return 0, GENESIS_HASH
        m = _SEQ.match(raw)
        if not raw.endswith(b"\n"):
            seq = int(m.group(1)) if m else "?"
            raise LedgerBroken(
                f"{self.path}: the last line (seq {seq}?) is torn, a write was cut off by a "
                "crash; it was never acknowledged. Check with `totalrecall ledger verify`, "
                "then move the file aside or remove the torn line by hand.")
        try:
            entry = json.loads(raw)
            ok = (isinstance(entry, dict) and sorted(entry) == sorted(ENTRY_FIELDS)
                  and isinstance(entry["seq"], int) and entry_hash(entry) == entry["hash"])
        except ValueError:
            ok = False
        if not ok:
            raise LedgerBroken(f"{self.path}: the last entry does not verify; refusing to "
                               "continue a broken chain (see `totalrecall ledger verify`).")
        return int(entry["seq"]), str(entry["hash"])

    def append(self, req: LedgerAppend, now: datetime | None = None) -> dict[str, Any]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o640)
        with os.fdopen(fd, "r+b", buffering=0) as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                seq, prev = self._tip(f)
                entry = make_entry(req, seq=seq + 1, prev_hash=prev, now=now)
                line = memoryview(encode_line(entry))
                while line:  # O_APPEND: each write lands at the end, after the one before
                    line = line[f.write(line):]
                os.fsync(f.fileno())
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        if seq == 0:  # the file is new: make its directory entry durable too
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        return entry

    def read(self, since_seq: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Entries with seq > since_seq, in order (complete lines only; not verified)."""
        if not self.path.exists():
            return []
        out: list[dict[str, Any]] = []
        with self.path.open("rb") as f:
            for raw in _read_lines(f):
                if not raw.endswith(b"\n"):
                    break
                m = _SEQ.match(raw)
                if m is None or int(m.group(1)) <= since_seq:
                    continue
                try:
                    out.append(json.loads(raw))
                except ValueError:
                    break
                if limit is not None and len(out) >= limit:
                    break
        return out


def memory_event(entry: Mapping[str, Any], namespace: str = "default") -> MemoryEvent:
    """The memory an entry becomes (docs/design.md §12: the ledger feeds memory). Its id comes
    from the entry's hash, so publishing an entry again is idempotent."""
    target = entry["target"]
    summary = f"{entry['actor']} {entry['action']}" + (f": {target}" if target else "")
    detail = (entry["detail"] + "\n\n" if entry["detail"] else "") + (
        f"Ledger entry {entry['seq']} (hash {entry['hash'][:16]}).")
    return MemoryEvent(
        id=f"ledger-{entry['seq']}-{entry['hash'][:16]}", namespace=namespace,
        timestamp=datetime.fromisoformat(entry["ts"].replace("Z", "+00:00")),
        category="agent.action", subcategory=entry["action"], actor=entry["actor"],
        source="ledger", summary=summary[:MAX_SUMMARY_CHARS], detail=detail,
        metadata=EventMetadata.model_validate({
            "ledger_seq": entry["seq"], "ledger_hash": entry["hash"], "action": entry["action"],
            "target": target[:MAX_TARGET_CHARS]}))
