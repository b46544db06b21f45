"""Firewall watcher: the ruleset changed (`nft --stateless list ruleset`, else `iptables-save`).

Every interval the ruleset is read, normalised (counters, set element timeouts, the dump's own
comments and dates dropped), each rule line qualified by where it is (`table inet filter /
chain input: tcp dport 22 accept`, `filter: -A INPUT -p tcp --dport 22 -j ACCEPT`) and hashed.
The first read is the silent baseline; a different hash is one `security/firewall` event naming
the rules added and removed. Reading the ruleset needs root (CAP_NET_ADMIN): without it, or
without either tool, the watcher is unavailable.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, Watcher

if TYPE_CHECKING:
    from ..settings import FirewallSettings

#: `argv → (returncode, stdout, stderr)`; tests give a fake.
Runner = Callable[[list[str], float], tuple[int, str, str]]

_NFT_STATE = re.compile(r"\s*(?:\bcounter packets \d+ bytes \d+|\bexpires \S+|\bused \d+ \w+"
                        r"|# handle \d+)")
_IPT_COUNTERS = re.compile(r"\s*\[\d+:\d+\]")


def run_command(argv: list[str], timeout: float) -> tuple[int, str, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                           stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        return 127, "", str(exc)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:g} s"
    return p.returncode, p.stdout, p.stderr


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


class FirewallWatcher(Watcher):
    name = "firewall"

    def __init__(self, ctx: EventContext, settings: FirewallSettings,
                 run: Runner | None = None) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.interval_s = settings.interval_s
        self.run_cmd: Runner = run or run_command
        self.tool: str | None = None
        self.commands: list[list[str]] = []
        self.prev: list[str] | None = None
        self.digest: str | None = None
        self.changes = 0

    def check_available(self) -> str | None:
        s = self.settings
        reasons: list[str] = []
        if s.tool in ("auto", "nft"):
            cmd = s.nft_command
            if shutil.which(cmd[0]) is None:
                reasons.append(f"{cmd[0]} not found on PATH")
            else:
                rc, _, err = self.run_cmd(cmd, s.timeout_s)
                if rc == 0:
                    self.tool, self.commands = "nft", [cmd]
                else:
                    reasons.append(self._why(cmd, rc, err))
        if self.tool is None and s.tool in ("auto", "iptables"):
            ok = []
            for cmd in s.iptables_commands:
                if not cmd or shutil.which(cmd[0]) is None:
                    reasons.append(f"{cmd[0] if cmd else '?'} not found on PATH")
                    continue
                rc, _, err = self.run_cmd(cmd, s.timeout_s)
                if rc == 0:
                    ok.append(cmd)
                else:
                    reasons.append(self._why(cmd, rc, err))
            if ok:
                self.tool, self.commands = "iptables", ok
        if self.tool is None:
            return "cannot read the firewall ruleset: " + "; ".join(reasons)
        self.note = "reads: " + ", ".join(" ".join(c) for c in self.commands)
        return None

    @staticmethod
    def _why(cmd: list[str], rc: int, err: str) -> str:
        first = (err.strip().splitlines() or [f"exit status {rc}"])[0][:200]
        hint = " (needs root or CAP_NET_ADMIN)" if os.geteuid() != 0 or re.search(
            r"(?i)permission denied|not permitted", err) else ""
        return f"{' '.join(cmd)}: {first}{hint}"

    def stats(self) -> dict[str, int]:
        return {"rules": len(self.prev or []), "changes": self.changes}

    def read(self) -> list[str]:
        lines: list[str] = []
        for cmd in self.commands:
            rc, out, err = self.run_cmd(cmd, self.settings.timeout_s)
            if rc != 0:
                raise RuntimeError(self._why(cmd, rc, err))
            if self.tool == "nft":
                lines += nft_lines(out)
            else:
                prefix = "ip6 " if "ip6" in os.path.basename(cmd[0]) else ""
                lines += iptables_lines(out, prefix)
        return lines

    def poll(self) -> list[MemoryEvent]:
        lines = self.read()
        digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
        prev, self.prev = self.prev, lines
        old_digest, self.digest = self.digest, digest
        if prev is None or digest == old_digest:
            return []
        new_c, old_c = Counter(lines), Counter(prev)
        added = [x for x in dict.fromkeys(lines) if new_c[x] > old_c[x]]
        removed = [x for x in dict.fromkeys(prev) if old_c[x] > new_c[x]]
        if not added and not removed:  # only the order changed
            added = ["(rules reordered)"]
        self.changes += 1
        return [self._event(added, removed, len(lines), digest)]

    def _event(self, added: list[str], removed: list[str], total: int,
               digest: str) -> MemoryEvent:
        shown = [f"+ {_short(x)}" for x in added[:3]] + [f"- {_short(x)}" for x in removed[:3]]
        shown = shown[:3]
        more = len(added) + len(removed) - len(shown)
        summary = (f"Firewall rules changed ({self.tool}): {len(added)} added, {len(removed)} "
                   f"removed — " + "; ".join(shown) + (f"; and {more} more" if more > 0 else ""))
        n = self.settings.max_diff_lines
        body = [f"+ {x}" for x in added] + [f"- {x}" for x in removed]
        detail = "\n".join([f"tool: {self.tool} ({', '.join(' '.join(c) for c in self.commands)})",
                            f"rules now: {total}", f"ruleset sha256: {digest}", "changes:",
                            *body[:n]] + ([f"… and {len(body) - n} more"] if len(body) > n else []))
        return self.ctx.event(self.name, "security", "firewall", summary, detail=detail,
                              severity=Severity.WARNING, tags=["security", "firewall", self.tool
                                                               or "firewall"],
                              tool=self.tool, added=len(added), removed=len(removed),
                              added_rules=[_short(x, 300) for x in added[:10]],
                              removed_rules=[_short(x, 300) for x in removed[:10]],
                              rules=total, ruleset_sha256=digest)
