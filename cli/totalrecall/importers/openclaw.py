"""An OpenClaw installation's memory: workspace notes and session transcripts.

PATH is the state directory (default `$OPENCLAW_STATE_DIR`, else `~/.openclaw`), a workspace,
an agent's sessions directory, or single files. Found in it:

* workspace notes: `MEMORY.md` and `memory/*.md` (daily notes, `YYYY-MM-DD.md`) of a workspace
  (`<state>/workspace` is agent `main`'s, `<state>/workspace-<agent>` another agent's). Parsed as
  Total Recall's own MEMORY.md (its one parser, `totalrecall_schema.memory_md`: one memory per
  top-level bullet, one per section's prose, the category from headings or
  `<!-- category: … -->`). MEMORY.md entries get
  the file's time; a daily note's entries its date (00:00 UTC, one second per line, in order).
  Ids hash the file name and the entry's content id: an edited bullet is a new memory (the old
  one stays; Total Recall's own MEMORY.md sync is what replaces edits).
* session transcripts: OpenClaw's event stream (header `{"type": "session", "id"}`, then
  `{"type": "message", "timestamp", "message": {"role", "content"}}`, …) from
  - `<state>/agents/<agent>/agent/openclaw-agent.sqlite`, table `transcript_events` (OpenClaw
    ≥ 2026.6 keeps transcripts there; read-only; `event_zstd` rows need the `zstandard` module),
  - `<state>/agents/<agent>/sessions/*.jsonl` (older installs, reset/deleted archives, cold
    storage `*.jsonl.zst`).
  User and assistant text becomes memories exactly as the Total Recall bridge's flush stores them
  (same ids: `conversation.py`), in the agent's namespace (the bridge's default `{agentId}`),
  so a session the bridge already captured is not stored twice. Tool calls and results,
  compaction summaries, custom entries and short messages are skipped with their reason.

`--namespace` puts everything into one namespace instead of one per agent.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from totalrecall_schema.memory_md import parse_memory_md

from .base import Item, Options, Skip, file_time, json_lines, json_object, make_event, stable_id
from .conversation import flush_id, message_text, turn_event

_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_DAILY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")
AGENT_DB = "openclaw-agent.sqlite"
SOURCE = "openclaw"


def default_state_dir() -> Path:
    env = os.environ.get("OPENCLAW_STATE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".openclaw"


def agent_namespace(agent: str) -> str:
    """The bridge's default namespace `{agentId}` (integrations/openclaw/src/config.ts)."""
    filled = agent or "main"
    if _NAMESPACE_RE.match(filled):
        return filled
    cleaned = re.sub(r"^[^A-Za-z0-9]+", "", re.sub(r"[^A-Za-z0-9_.-]+", "-", filled))[:64]
    return cleaned or "default"


def agent_of(path: Path) -> str:
    """`…/agents/<agent>/…` → agent; `workspace-<agent>` → agent; else `main`."""
    parts = path.resolve().parts
    for i, part in enumerate(parts[:-1]):
        if part == "agents":
            return parts[i + 1]
    for part in reversed(parts):
        if part.startswith("workspace-"):
            return part[len("workspace-"):] or "main"
    return "main"


# --- workspace notes ---------------------------------------------------------------------------
def _note_time(path: Path, line: int) -> datetime:
    m = _DAILY.match(path.name)
    if m:
        try:
            day = datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC)
            return day + timedelta(seconds=line)
        except ValueError:
            pass
    return file_time(path)


def read_notes(path: Path, namespace: str) -> Iterator[Item]:
    """One Markdown file's entries (MEMORY.md or a daily note)."""
    daily = path.parent.name == "memory"
    label = f"memory/{path.name}" if daily else path.name
    entries = parse_memory_md(path.read_text(encoding="utf-8", errors="replace"), namespace)
    if not entries:
        yield Skip("no entries in Markdown file", str(path))
    for e in entries:
        meta: dict[str, Any] = {"file": label, "line": e.line, "tags": [SOURCE, "memory"]}
        if e.section:
            meta["section"] = " / ".join(e.section)
        yield make_event(f"{path}:{e.line}", id=stable_id("openclaw-md", label, e.id),
                         namespace=e.namespace, category=e.category, subcategory=e.subcategory,
                         timestamp=_note_time(path, e.line) if daily else file_time(path),
                         actor="user", source=SOURCE, summary=e.summary, detail=e.detail,
                         metadata=meta)


def read_workspace(ws: Path, namespace: str) -> Iterator[Item]:
    for name in ("MEMORY.md", "memory.md"):
        if (ws / name).is_file():
            yield from read_notes(ws / name, namespace)
            break
    if (ws / "memory").is_dir():
        for note in sorted((ws / "memory").glob("*.md")):
            yield from read_notes(note, namespace)


def is_workspace(path: Path) -> bool:
    return (path / "MEMORY.md").is_file() or (path / "memory.md").is_file() \
        or (path / "memory").is_dir()


# --- transcripts -------------------------------------------------------------------------------
class Transcript:
    """Turns one session's events, in order, into memories."""

    def __init__(self, session_id: str, namespace: str, label: str) -> None:
        self.session_id = session_id
        self.namespace = namespace
        self.label = label

    def event(self, ev: dict[str, Any] | Skip, where: str) -> Item | None:
        if isinstance(ev, Skip):
            return ev
        kind = ev.get("type")
        if kind == "session":
            if ev.get("id"):
                self.session_id = str(ev["id"])
            return None
        if kind != "message":
            return Skip(f"{kind or 'untyped'} entry", where)
        message = ev.get("message") or {}
        role = str(message.get("role") or "")
        text = message_text(message.get("content"))
        if not text and isinstance(message.get("text"), str):
            text = message["text"]
        ts = _event_time(ev, message)
        if ts is None:
            return Skip("no timestamp", where)
        meta = {"agent_session": self.label}
        return turn_event(where, event_id=flush_id(self.session_id, role, text),
                          namespace=self.namespace, session_id=self.session_id, role=role,
                          text=text, timestamp=ts, source=SOURCE, metadata=meta,
                          content=message.get("content"))


def _event_time(ev: dict[str, Any], message: dict[str, Any]) -> datetime | None:
    raw = ev.get("timestamp")
    if isinstance(raw, str):
        try:
            ts = datetime.fromisoformat(raw.replace("Z", "+00:00"))
            return ts if ts.tzinfo else ts.replace(tzinfo=UTC)
        except ValueError:
            pass
    ms = message.get("timestamp")
    if isinstance(ms, int | float) and not isinstance(ms, bool):
        return datetime.fromtimestamp(ms / 1000, UTC)
    return None


def _zstd_decompress(data: bytes) -> bytes | None:
    try:
        import zstandard  # optional: OpenClaw's compressed rows and cold archives
    except ImportError:
        return None
    return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(data))


def _session_id_of_file(path: Path) -> str:
    return path.name.split(".jsonl", 1)[0]


def read_transcript_file(path: Path, namespace: str) -> Iterator[Item]:
    if path.name.endswith(".zst"):
        raw = _zstd_decompress(path.read_bytes())
        if raw is None:
            yield Skip("zstd-compressed transcript (pip install zstandard)", str(path))
            return
        lines: Iterable[str] = raw.decode("utf-8", "replace").splitlines()
    else:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    tr = Transcript(_session_id_of_file(path), namespace, path.name)
    for rec in json_lines(lines, str(path)):
        item = rec if isinstance(rec, Skip) else tr.event(rec[1], rec[0])
        if item is not None:
            yield item


def read_agent_db(path: Path, namespace: str) -> Iterator[Item]:
    """`transcript_events` of a per-agent database, read-only, session by session."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        try:
            rows = con.execute("SELECT session_id, seq, event_json, event_zstd "
                               "FROM transcript_events ORDER BY session_id, seq")
        except sqlite3.DatabaseError as exc:
            yield Skip(f"no readable transcript_events table ({exc})", str(path))
            return
        tr: Transcript | None = None
        for session_id, seq, event_json, event_zstd in rows:
            if tr is None or tr.label != session_id:
                tr = Transcript(str(session_id), namespace, str(session_id))
            where = f"{path}#{session_id}/{seq}"
            if event_json is None:
                raw = _zstd_decompress(event_zstd) if event_zstd is not None else None
                if raw is None:
                    yield Skip("zstd-compressed event (pip install zstandard)", where)
                    continue
                event_json = raw.decode("utf-8", "replace")
            item = tr.event(json_object(event_json, where), where)
            if item is not None:
                yield item
    finally:
        con.close()


def _is_transcript(path: Path) -> bool:
    return ".jsonl" in path.name


def read_agent_dir(agent_dir: Path, namespace: str) -> Iterator[Item]:
    db = agent_dir / "agent" / AGENT_DB
    if db.is_file():
        yield from read_agent_db(db, namespace)
    sessions = agent_dir / "sessions"
    if sessions.is_dir():
        for f in sorted(p for p in sessions.rglob("*") if p.is_file() and _is_transcript(p)):
            yield from read_transcript_file(f, namespace)


# --- what a PATH is ----------------------------------------------------------------------------
def read_path(path: Path, forced_ns: str | None) -> Iterator[Item]:
    def ns(p: Path) -> str:
        return forced_ns or agent_namespace(agent_of(p))

    if path.is_file():
        if path.name.endswith((".sqlite", ".db")):
            yield from read_agent_db(path, ns(path))
        elif _is_transcript(path):
            yield from read_transcript_file(path, ns(path))
        elif path.suffix == ".md":
            yield from read_notes(path, ns(path))
        else:
            yield Skip("not an OpenClaw file (.md, .jsonl, .sqlite)", str(path))
        return
    if not path.is_dir():
        raise FileNotFoundError(f"no OpenClaw state directory or file at {path}")
    found = False
    if is_workspace(path):
        found = True
        yield from read_workspace(path, ns(path))
    for ws in sorted(path.glob("workspace*")):
        if ws.is_dir() and is_workspace(ws):
            found = True
            yield from read_workspace(ws, ns(ws))
    agents = path / "agents"
    agent_dirs = sorted(d for d in agents.iterdir() if d.is_dir()) if agents.is_dir() else []
    if (path / "sessions").is_dir() or (path / "agent" / AGENT_DB).is_file():
        agent_dirs.append(path)  # an agent's own directory
    for d in agent_dirs:
        found = True
        yield from read_agent_dir(d, ns(d / "sessions"))
    if not found and any(_is_transcript(p) for p in path.iterdir()):
        found = True  # a sessions directory
        for f in sorted(p for p in path.iterdir() if p.is_file() and _is_transcript(p)):
            yield from read_transcript_file(f, ns(f))
    if not found:
        yield Skip("no OpenClaw workspace, agents/ or transcripts here", str(path))


class OpenClawImporter:
    name = "openclaw"
    help = "an OpenClaw state dir / workspace: MEMORY.md, memory/*.md and session transcripts " \
           "(default: ~/.openclaw)"

    def read(self, paths: list[Path], opts: Options) -> Iterator[Item]:
        for path in paths or [default_state_dir()]:
            yield from read_path(path, opts.namespace)
