"""Firewall watcher: the ruleset changed (`nft --stateless list ruleset`, else `iptables-save`).

Every interval the ruleset is read, normalised (counters, set element timeouts, the dump's own
comments and dates dropped), each rule line qualified by where it is (`table inet filter /
chain input: tcp dport 22 accept`, `filter: -A INPUT -p tcp --dport 22 -j ACCEPT`) and hashed.
The first read is the silent baseline; a different hash is one `security/firewall` event naming
the rules added and removed. Reading the ruleset needs root (CAP_NET_ADMIN): without it, or
without either tool, the watcher is unavailable.

This module reads a dump and decides what changed; `adapters/firewall.py` is the watcher that runs
the tools.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext

_NFT_STATE = re.compile(r"\s*(?:\bcounter packets \d+ bytes \d+|\bexpires \S+|\bused \d+ \w+"
                        r"|# handle \d+)")
_IPT_COUNTERS = re.compile(r"\s*\[\d+:\d+\]")


def nft_lines(text: str) -> list[str]:
    """`nft list ruleset` → one line per rule or statement, qualified by its table and chain."""
    out: list[str] = []
    stack: list[str] = []
    for raw in text.splitlines():
        line = _NFT_STATE.sub("", raw).strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("{"):
            stack.append(line[:-1].strip())
            out.append(" / ".join(stack))  # the table, chain or set itself
            continue
        if line == "}":
            if stack:
                stack.pop()
            continue
        out.append(f"{' / '.join(stack)}: {line}" if stack else line)
    return out


def iptables_lines(text: str, prefix: str = "") -> list[str]:
    """`iptables-save` → `<table>: <chain or rule>` lines (counters, comments, COMMIT dropped)."""
    out: list[str] = []
    table = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line == "COMMIT":
            continue
        if line.startswith("*"):
            table = line[1:]
            continue
        out.append(f"{prefix}{table}: {_IPT_COUNTERS.sub('', line)}")
    return out


def _short(line: str, n: int = 140) -> str:
    return line if len(line) <= n else line[: n - 1] + "…"


def unreadable(cmd: list[str], rc: int, err: str, as_root: bool) -> str:
    """Why `cmd` could not read the ruleset: its first error line, and the hint that it needs
    root when we are not root or it says so."""
    first = (err.strip().splitlines() or [f"exit status {rc}"])[0][:200]
    hint = " (needs root or CAP_NET_ADMIN)" if not as_root or re.search(
        r"(?i)permission denied|not permitted", err) else ""
    return f"{' '.join(cmd)}: {first}{hint}"


@dataclass(frozen=True)
class Change:
    added: list[str]
    removed: list[str]
    total: int
    digest: str


class Ruleset:
    """The rule lines seen last; `update` says what a new read changed (None: nothing, or the
    first read: the silent baseline)."""

    def __init__(self) -> None:
        self.prev: list[str] | None = None
        self.digest: str | None = None
        self.changes = 0

    def update(self, lines: list[str]) -> Change | None:
        digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
        prev, self.prev = self.prev, lines
        old_digest, self.digest = self.digest, digest
        if prev is None or digest == old_digest:
            return None
        new_c, old_c = Counter(lines), Counter(prev)
        added = [x for x in dict.fromkeys(lines) if new_c[x] > old_c[x]]
        removed = [x for x in dict.fromkeys(prev) if old_c[x] > new_c[x]]
        if not added and not removed:  # only the order changed
            added = ["(rules reordered)"]
        self.changes += 1
        return Change(added, removed, len(lines), digest)


def change_event(ctx: EventContext, source: str, tool: str | None, commands: list[list[str]],
                 change: Change, max_diff_lines: int) -> MemoryEvent:
    added, removed, total, digest = change.added, change.removed, change.total, change.digest
    shown = [f"+ {_short(x)}" for x in added[:3]] + [f"- {_short(x)}" for x in removed[:3]]
    shown = shown[:3]
    more = len(added) + len(removed) - len(shown)
    summary = (f"Firewall rules changed ({tool}): {len(added)} added, {len(removed)} "
               f"removed — " + "; ".join(shown) + (f"; and {more} more" if more > 0 else ""))
    n = max_diff_lines
    body = [f"+ {x}" for x in added] + [f"- {x}" for x in removed]
    detail = "\n".join([f"tool: {tool} ({', '.join(' '.join(c) for c in commands)})",
                        f"rules now: {total}", f"ruleset sha256: {digest}", "changes:",
                        *body[:n]] + ([f"… and {len(body) - n} more"] if len(body) > n else []))
    return ctx.event(source, "security", "firewall", summary, detail=detail,
                     severity=Severity.WARNING, tags=["security", "firewall", tool or "firewall"],
                     tool=tool, added=len(added), removed=len(removed),
                     added_rules=[_short(x, 300) for x in added[:10]],
                     removed_rules=[_short(x, 300) for x in removed[:10]],
                     rules=total, ruleset_sha256=digest)
