"""The importers' parsers on small committed fixtures (tests/data/importers/): what each format
becomes, what is skipped and why, and that ids do not change between runs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from totalrecall.importers import IMPORTERS, Options, Skip
from totalrecall.importers.base import since_filter
from totalrecall.importers.conversation import flush_id
from totalrecall.importers.logs import LineParser, LogRecord, log_event_fields
from totalrecall.importers.shell import detect, parse_bash, parse_fish, parse_zsh, unmetafy
from totalrecall_schema import REDACTED, MemoryEvent

DATA = Path(__file__).resolve().parents[2] / "data" / "importers"


def _read(source: str, *paths: Path, namespace: str | None = None
          ) -> tuple[list[MemoryEvent], list[Skip]]:
    items = list(IMPORTERS[source].read(list(paths), Options(namespace=namespace)))
    return ([i for i in items if isinstance(i, MemoryEvent)],
            [i for i in items if isinstance(i, Skip)])


def test_every_source_gives_the_same_ids_on_a_second_read() -> None:
    for source, paths in (("openclaw", [DATA / "openclaw"]), ("claude-code", [DATA / "claude-code"]),
                          ("shell", sorted((DATA / "shell").iterdir())),
                          ("journal", [DATA / "journal" / "journal.json"]),
                          ("logs", [DATA / "logs" / "app.log"])):
        first, _ = _read(source, *paths)
        second, _ = _read(source, *paths)
        assert first, source
        assert [e.key for e in first] == [e.key for e in second], source
        assert len({e.key for e in first}) == len(first), f"{source}: ids collide"


# --- OpenClaw ----------------------------------------------------------------------------------
def test_openclaw_state_dir_gives_notes_and_transcripts_per_agent() -> None:
    events, skips = _read("openclaw", DATA / "openclaw")
    notes = [e for e in events if e.id.startswith("openclaw-md-")]
    turns = [e for e in events if e.id.startswith("flush-")]
    assert [e.summary for e in notes] == [
        "Ada prefers podman over docker for containers on the orbit workstation.",
        "Editor: helix; never suggest vim keybindings.",
        "Wi-Fi drops after suspend: `systemctl restart iwd` fixes it.",
        "Moved the nightly backup of the photo library to the NAS (rsync over ssh, 02:30).",
        "Ada asked to be reminded about the dentist appointment on Friday."]
    # headings choose the category, as for Total Recall's own MEMORY.md
    assert (notes[0].category, notes[0].subcategory) == ("user_pattern", "preference")
    assert notes[2].category == "diagnosis"
    # a daily note's entries carry its date, in file order
    assert notes[3].timestamp.date().isoformat() == "2026-03-01"
    assert notes[3].timestamp < notes[4].timestamp
    assert {e.namespace for e in notes} == {"main"}
    # transcript: user and assistant text only, each at its own time, in its agent's namespace
    assert [(e.namespace, e.actor, e.summary[:30]) for e in turns] == [
        ("main", "user", "user: Why does the grafana con"),
        ("main", "agent", "assistant: The grafana contain"),
        ("ops", "user", "user: Rotate the TLS certifica")]
    assert turns[0].timestamp == datetime(2026, 3, 2, 9, 0, 5, tzinfo=UTC)
    assert turns[0].metadata.model_extra["session"] == "5b0c7c1e-0d7f-4d3c-9d55-3a9f0e7b2c11"
    assert sorted(s.reason for s in skips) == [
        "compaction entry", "message under 12 characters", "tool call", "toolResult message"]


def test_openclaw_transcript_ids_are_the_bridge_flush_ids() -> None:
    """services/recall-api handlers.flush: sha256(session \\0 role \\0 collapsed text)[:24]."""
    events, _ = _read("openclaw", DATA / "openclaw" / "agents" / "main" / "sessions")
    text = "Why does the grafana container keep restarting on orbit?"
    digest = hashlib.sha256(
        f"5b0c7c1e-0d7f-4d3c-9d55-3a9f0e7b2c11\x00user\x00{text}".encode()).hexdigest()
    assert events[0].id == f"flush-{digest[:24]}"
    # the bridge cuts a message at 8,000 characters before the flush hashes it
    long = "word " * 3000
    assert flush_id("s", "user", long) == flush_id("s", "user", long[:8000] + " more")


def test_openclaw_namespace_option_wins_and_a_workspace_alone_works() -> None:
    events, _ = _read("openclaw", DATA / "openclaw" / "workspace", namespace="home")
    assert len(events) == 5 and {e.namespace for e in events} == {"home"}


def test_openclaw_agent_database_transcript_events(tmp_path: Path) -> None:
    """OpenClaw ≥ 2026.6 keeps transcripts in `agents/<id>/agent/openclaw-agent.sqlite`
    (`transcript_events`, columns as the package's schema 23 creates them)."""
    db = tmp_path / "agents" / "coder" / "agent" / "openclaw-agent.sqlite"
    db.parent.mkdir(parents=True)
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE transcript_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
                "event_json TEXT, created_at INTEGER NOT NULL, event_zstd BLOB, "
                "event_utf8_bytes INTEGER, navigation_json TEXT, PRIMARY KEY (session_id, seq))")
    rows = [{"type": "session", "id": "s-1", "timestamp": "2026-03-04T10:00:00Z"},
            {"type": "message", "timestamp": "2026-03-04T10:00:01Z",
             "message": {"role": "user", "content": "Please remember the build server is hal9000."}},
            {"type": "custom", "customType": "state", "data": {}}]
    con.executemany("INSERT INTO transcript_events VALUES (?, ?, ?, 0, NULL, NULL, NULL)",
                    [("s-1", i, json.dumps(r)) for i, r in enumerate(rows)])
    con.execute("INSERT INTO transcript_events VALUES ('s-1', 9, NULL, 0, x'28b52ffd', 12, '{}')")
    con.commit()
    con.close()
    events, skips = _read("openclaw", tmp_path)
    assert [(e.namespace, e.summary) for e in events] == [
        ("coder", "user: Please remember the build server is hal9000.")]
    assert events[0].id == flush_id("s-1", "user", "Please remember the build server is hal9000.")
    reasons = sorted(s.reason for s in skips)
    assert reasons[0] == "custom entry"
    assert reasons[1].startswith("zstd-compressed event") or len(reasons) == 1


# --- Claude Code -------------------------------------------------------------------------------
def test_claude_code_keeps_the_conversation_and_says_why_it_skips_the_rest() -> None:
    events, skips = _read("claude-code", DATA / "claude-code")
    assert [(e.actor, e.subcategory, e.id) for e in events] == [
        ("user", "user_request", "claude-code:u1"), ("agent", "agent_response", "claude-code:u4")]
    user, reply = events
    assert user.summary.startswith("user: The websocket reconnect test in orbit fails")
    assert user.timestamp == datetime(2026, 2, 10, 15, 0, tzinfo=UTC)
    meta = reply.metadata.model_extra
    assert meta["session"] == "7f3a9d2e-1111-4c2b-8e0f-5d6c7b8a9e01"
    assert (meta["project"], meta["git_branch"], meta["model"]) == (
        "orbit", "main", "claude-sonnet-4-5")
    assert sorted(s.reason for s in skips) == [
        "file-history-snapshot record", "meta message", "slash command",
        "subagent (sidechain) message", "summary record", "tool call", "tool result"]


# --- shell -------------------------------------------------------------------------------------
def test_bash_history_with_timestamps_multi_line_and_secrets_scrubbed() -> None:
    events, _ = _read("shell", DATA / "shell" / "bash_history")
    assert [e.summary for e in events[:2]] == [
        "$ sudo systemctl restart nginx", '$ for f in *.log; do\n  gzip "$f"\ndone']
    assert events[0].timestamp == datetime.fromtimestamp(1767225600, UTC)
    assert (events[0].category, events[0].subcategory, events[0].actor) == (
        "user_pattern", "command", "user")
    assert "ghp_abc" not in events[2].summary and REDACTED in events[2].summary
    # the same command at another time is another memory
    assert events[0].summary == events[3].summary and events[0].id != events[3].id


def test_zsh_extended_history_continuations_and_metafied_bytes() -> None:
    data = (DATA / "shell" / "zsh_history").read_bytes()
    assert detect(data) == "zsh"
    cmds = parse_zsh(data)
    assert [c.text for c in cmds] == ["rsync -av ~/photos nas:/backup/photos",
                                      "echo cafÉ \n  && ls", "make -C ~/src/orbit test"]
    assert (cmds[2].epoch, cmds[2].duration_s) == (1767312120, 12)
    assert unmetafy(b"\x83\xbc") == b"\x9c"
    events, _ = _read("shell", DATA / "shell" / "zsh_history")
    assert events[2].metadata.duration_ms == 12000


def test_fish_history_unescapes_and_keeps_paths() -> None:
    cmds = parse_fish((DATA / "shell" / "fish_history").read_bytes())
    assert cmds[0].paths == ("grafana:/var/lib/grafana",) and cmds[0].epoch == 1767398400
    assert cmds[1].text == "echo one\ntwo \\ end"


def test_plain_history_without_timestamps_keeps_file_order(tmp_path: Path) -> None:
    path = tmp_path / "history"
    shutil.copy(DATA / "shell" / "plain_history", path)
    os.utime(path, (1767225600, 1767225600))
    assert detect(path.read_bytes()) == "bash" and len(parse_bash(path.read_bytes())) == 3
    events, _ = _read("shell", path)
    assert [e.summary for e in events] == ["$ ls -la", "$ git status", "$ ls -la"]
    assert events[0].timestamp < events[1].timestamp < events[2].timestamp == \
        datetime.fromtimestamp(1767225600, UTC)
    assert len({e.id for e in events}) == 3  # a repeated command is another memory
    # appending to the history keeps the earlier commands' ids
    path.write_text(path.read_text() + "make test\n")
    again, _ = _read("shell", path)
    assert {e.id for e in events} <= {e.id for e in again}


# --- journal -----------------------------------------------------------------------------------
def test_journal_entries_become_log_memories_with_their_own_time() -> None:
    events, skips = _read("journal", DATA / "journal" / "journal.json")
    pg, nginx, kernel = events
    assert pg.summary.startswith("ERROR postgres[812]: FATAL:  could not bind IPv4 address")
    assert pg.timestamp == datetime.fromtimestamp(1767225600, UTC)
    assert (pg.category, pg.source, pg.metadata.service, pg.severity) == (
        "system.service", "journal", "postgresql.service", "error")
    assert nginx.summary == "systemd[1]: Started nginx.service - A high performance web server."
    assert nginx.metadata.service == "nginx.service" and nginx.severity == "info"
    assert kernel.summary == "WARNING kernel: usb 1-1: device descriptor read error"
    assert sorted(s.reason for s in skips) == ["empty MESSAGE", "not JSON"]


def test_journal_live_needs_since() -> None:
    from totalrecall.importers.journal import JournalUnavailable

    with pytest.raises(JournalUnavailable, match="--since"):
        list(IMPORTERS["journal"].read([], Options()))


# --- logs --------------------------------------------------------------------------------------
def test_log_lines_of_each_format() -> None:
    events, skips = _read("logs", DATA / "logs" / "app.log")
    texts = [e.summary for e in events]
    assert texts[0] == ("INFO dfs.DataNode$PacketResponder[148]: PacketResponder 1 for block "
                        "blk_38865049064139660 terminating")
    assert events[0].timestamp == datetime(2008, 11, 9, 20, 36, 15, tzinfo=UTC)
    assert texts[1].startswith("INFO executor.CoarseGrainedExecutorBackend: Registered")
    assert events[1].timestamp == datetime(2017, 6, 9, 20, 10, 40, tzinfo=UTC)
    assert texts[2] == "sshd[24200]: Invalid user webmaster from 173.234.31.186"
    assert events[2].metadata.host == "labsz"  # the host the line names (compared without case)
    assert texts[3] == "ERROR app.db: connection refused to 10.0.0.5:5432"
    assert events[3].severity == "error" and events[3].metadata.service == "app.db"
    # a line without a time (a stack trace) has the time of the line before it
    assert texts[4] == "at Connection.connect (db.js:42)"
    assert events[4].timestamp == events[3].timestamp
    assert texts[5] == "WARNING orbit.worker: retrying in 5 s" and events[5].severity == "warning"
    assert [s.reason for s in skips] == ["blank line"]


def test_syslog_lines_without_a_year_take_the_files() -> None:
    p = LineParser(default_time=datetime(2026, 1, 3, tzinfo=UTC))
    jan, _ = p.parse("Jan  2 10:00:00 host cron[1]: ok")
    dec, _ = p.parse("Dec 31 23:59:00 host cron[1]: ok")
    assert jan.timestamp.year == 2026 and dec.timestamp.year == 2025


def test_logqa_lines_load_as_the_importer_maps_them() -> None:
    """eval/logqa.py uses this mapping: a LogHub HDFS line read from a plain file gives the
    event LogQA ingests for the same line (but for its id, source and LogQA metadata)."""
    from eval.logqa import LogLine

    raw = ("081109 203518 143 INFO dfs.DataNode$DataXceiver: Receiving block "
           "blk_-1608999687919862906 src: /10.250.19.102:54106 dest: /10.250.19.102:50010")
    rec, _ = LineParser(default_time=datetime(2026, 1, 1, tzinfo=UTC)).parse(raw)
    line = LogLine(system="HDFS", line_id=1, timestamp=datetime(2008, 11, 9, 20, 35, 18,
                                                                tzinfo=UTC),
                   component="dfs.DataNode$DataXceiver", content=rec.content, level="INFO",
                   pid="143")
    assert rec == line.record
    ours = log_event_fields(rec, id="hdfs:1", namespace="n", source="journal",
                            metadata={"system": "HDFS", "line": 1})
    assert ours == line.to_ingest("n")


def test_a_long_line_is_split_into_summary_and_detail() -> None:
    rec = LogRecord(timestamp=datetime(2026, 1, 1, tzinfo=UTC), content="blk_1 " * 600)
    fields = log_event_fields(rec, id="x", namespace="n", source="logs")
    assert len(fields["summary"]) <= 1900 and fields["detail"]
    MemoryEvent(**fields)


def test_since_skips_older_records() -> None:
    events, _ = _read("logs", DATA / "logs" / "app.log")
    kept = list(since_filter(events, datetime(2020, 1, 1, tzinfo=UTC)))
    assert sum(isinstance(i, MemoryEvent) for i in kept) == 4  # the syslog line: the file's year
    assert sum(isinstance(i, Skip) and i.reason == "before --since" for i in kept) == 2


def test_openclaw_real_gateway_transcript_gives_the_ids_the_bridge_stored(tmp_path: Path) -> None:
    """Rows of a real OpenClaw 2026.9.6 agent database after one turn with the bridge's
    autoCapture (tests/data/importers/openclaw-2026.9.6/): the import makes the very ids the
    bridge's capture stored, so importing a captured session adds nothing."""
    real = json.loads((DATA / "openclaw-2026.9.6" / "transcript_events.json").read_text())
    db = tmp_path / "state" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    db.parent.mkdir(parents=True)
    con = sqlite3.connect(db)
    # the schema's CHECK uses octet_length (SQLite >= 3.43); Python's SQLite may be older
    con.create_function("octet_length", 1, lambda v: None if v is None else len(str(v).encode()))
    con.execute(real["schema"])
    con.executemany("INSERT INTO transcript_events (session_id, seq, event_json, created_at) "
                    "VALUES (?, ?, ?, ?)", real["rows"])
    con.commit()
    con.close()
    events, skips = _read("openclaw", tmp_path / "state")
    assert [e.id for e in events] == real["bridge_flush_ids"]
    assert [(e.namespace, e.actor) for e in events] == [("main", "user"), ("main", "agent")]
    assert events[0].summary.startswith("user: My favourite hiking trail is the")
    assert sorted(s.reason for s in skips) == [
        "custom entry", "custom entry", "model_change entry", "thinking_level_change entry"]
