"""The firewall watcher: reads the ruleset with `nft --stateless list ruleset`, else
`iptables-save` (and `ip6tables-save`), whichever works here; `core/firewall.py` normalises the
dump and decides what changed."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING

from totalrecall_schema import MemoryEvent

from ..core.base import EventContext, Watcher
from ..core.firewall import Ruleset, change_event, iptables_lines, nft_lines, unreadable

if TYPE_CHECKING:
    from ..settings import FirewallSettings

#: `argv → (returncode, stdout, stderr)`; tests give a fake.
Runner = Callable[[list[str], float], tuple[int, str, str]]


def run_command(argv: list[str], timeout: float) -> tuple[int, str, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                           stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        return 127, "", str(exc)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:g} s"
    return p.returncode, p.stdout, p.stderr


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
        self.ruleset = Ruleset()

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
        return unreadable(cmd, rc, err, as_root=os.geteuid() == 0)

    def stats(self) -> dict[str, int]:
        return {"rules": len(self.ruleset.prev or []), "changes": self.ruleset.changes}

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
        change = self.ruleset.update(self.read())
        if change is None:
            return []
        return [change_event(self.ctx, self.name, self.tool, self.commands, change,
                             self.settings.max_diff_lines)]
