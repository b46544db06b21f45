"""Transcript messages as memories, stored as the OpenClaw bridge's flush stores them.

`POST /memory/flush` (what the bridge sends before compaction and, with `autoCapture`, after
each turn) keeps a user or assistant message of at least 12 characters as
`"<role>: <text>"` (whitespace collapsed), actor `user`/`agent`, the session in metadata (the
conversation thread recall expands), id `flush-<sha256(session \\0 role \\0 text)[:24]>` where
the bridge cut the text to 8,000 characters first. Transcript importers make the same memories
with the same ids, plus the message's own time: a session the bridge already captured is not
stored twice, and a later flush of an imported session is a no-op.

The session goes into `metadata.session`, not `session_id`: the secret scrubber blanks every
metadata key that looks like `session_id` (a web session id is a credential), which would put
every session into one thread.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .base import Item, Skip, make_event, split_summary_detail

#: The bridge's `MAX_MESSAGE_CHARS` (integrations/openclaw/src/plugin.ts) and the flush
#: handler's shortest message (services/recall-api handlers.flush).
FLUSH_MESSAGE_CHARS = 8000
MIN_MESSAGE_CHARS = 12
ROLES = {"user": ("user", "user_request"), "assistant": ("agent", "agent_response")}


def message_text(content: Any) -> str:
    """The text blocks of a message's content (a string, or a list of typed blocks), joined by
    newlines; tool calls, tool results, thinking and images are not text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text") or "") for b in content
                         if isinstance(b, Mapping) and b.get("type") == "text" and b.get("text"))
    return ""


def no_text_reason(content: Any) -> str:
    """Why a message has no text: what its blocks are instead."""
    kinds = {str(b.get("type")) for b in content if isinstance(b, Mapping)} \
        if isinstance(content, list) else set()
    if kinds & {"tool_result", "toolResult"}:
        return "tool result"
    if kinds & {"tool_use", "toolCall"}:
        return "tool call"
    if "thinking" in kinds:
        return "thinking only"
    return "no text"


def collapse(text: str) -> str:
    return " ".join(text.split())


def flush_id(session_id: str, role: str, text: str) -> str:
    """The id `POST /memory/flush` gives this message (text as the bridge sends it)."""
    sent = collapse(text[:FLUSH_MESSAGE_CHARS])
    return "flush-" + hashlib.sha256(f"{session_id}\x00{role}\x00{sent}".encode()).hexdigest()[:24]


def turn_event(where: str, *, event_id: str, namespace: str, session_id: str, role: str,
               text: str, timestamp: datetime, source: str,
               metadata: Mapping[str, Any] | None = None, content: Any = None) -> Item:
    """One user/assistant message as a memory, or why not (`content`: the message's blocks,
    to name what a message without text holds)."""
    if role not in ROLES:
        return Skip(f"{role or 'unknown'} message", where)
    flat = collapse(text)
    if not flat:
        return Skip(no_text_reason(content), where)
    if len(flat) < MIN_MESSAGE_CHARS:
        return Skip("message under 12 characters", where)
    actor, subcategory = ROLES[role]
    summary, detail = split_summary_detail(f"{role}: {flat}")
    return make_event(where, id=event_id, namespace=namespace, timestamp=timestamp,
                      category="conversation", subcategory=subcategory, actor=actor,
                      source=source, summary=summary, detail=detail,
                      metadata={"session": session_id, "tags": [source], **dict(metadata or {})})
