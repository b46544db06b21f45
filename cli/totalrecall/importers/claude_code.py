"""Claude Code transcripts: `~/.claude/projects/<project>/<session>.jsonl`.

Each line is one record: `{"type": "user"|"assistant", "uuid", "sessionId", "timestamp", "cwd",
"gitBranch", "message": {"role", "content"}, …}`; other types (`summary`, `system`,
`file-history-snapshot`, …) are not conversation. A user or assistant message with text becomes
one memory (`conversation/user_request|agent_response`, `"<role>: <text>"`, the record's time,
`metadata.session` = the session, so recall expands within it). Not imported, each counted with
its reason: tool calls and tool results (no text), thinking, `isMeta` records (caveats the CLI
adds), slash-command records (`<command-name>…`, `<local-command-stdout>…`), subagent
(`isSidechain`) records, messages under 12 characters. An assistant reply streamed as several
records (one per content block) gives one memory per text block.

Ids: `claude-code:<uuid>` (the record's own uuid), so importing a growing transcript again adds
only its new records.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from .base import Item, Options, Skip, expand, json_lines, stable_id
from .conversation import message_text, turn_event

_COMMAND_TEXT = re.compile(r"^\s*<(command-name|command-message|local-command-stdout|"
                           r"local-command-stderr|command-args)>")
_UUID = re.compile(r"^[A-Za-z0-9-]{1,80}$")


def default_dir() -> Path:
    return Path.home() / ".claude" / "projects"


def record_event(rec: dict[str, Any], where: str, namespace: str) -> Item:
    kind = rec.get("type")
    if kind not in ("user", "assistant"):
        return Skip(f"{kind or 'untyped'} record", where)
    if rec.get("isSidechain"):
        return Skip("subagent (sidechain) message", where)
    if rec.get("isMeta"):
        return Skip("meta message", where)
    message = rec.get("message") or {}
    role = str(message.get("role") or kind)
    text = message_text(message.get("content"))
    if _COMMAND_TEXT.match(text):
        return Skip("slash command", where)
    try:
        ts = datetime.fromisoformat(str(rec.get("timestamp", "")).replace("Z", "+00:00"))
    except ValueError:
        return Skip("no timestamp", where)
    uuid = str(rec.get("uuid") or "")
    session = str(rec.get("sessionId") or "")
    event_id = f"claude-code:{uuid}" if _UUID.match(uuid) else stable_id(
        "claude-code", session, where, text)
    meta: dict[str, Any] = {}
    if rec.get("cwd"):
        meta["cwd"] = str(rec["cwd"])
        meta["project"] = Path(str(rec["cwd"])).name
    if rec.get("gitBranch"):
        meta["git_branch"] = str(rec["gitBranch"])
    if role == "assistant" and message.get("model"):
        meta["model"] = str(message["model"])
    return turn_event(where, event_id=event_id, namespace=namespace,
                      session_id=session or where.rsplit(":", 1)[0], role=role, text=text,
                      timestamp=ts, source="claude-code", metadata=meta,
                      content=message.get("content"))


def read_transcript(path: Path, namespace: str) -> Iterator[Item]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for rec in json_lines(fh, str(path)):
            yield rec if isinstance(rec, Skip) else record_event(rec[1], rec[0], namespace)


class ClaudeCodeImporter:
    name = "claude-code"
    help = "Claude Code transcripts (*.jsonl; default: ~/.claude/projects)"

    def read(self, paths: list[Path], opts: Options) -> Iterator[Item]:
        roots = paths or [default_dir()]
        for path in expand(roots, ("*.jsonl",)):
            yield from read_transcript(path, opts.namespace or "default")
