"""How a process ended, decoded from its wait status (the `waitpid(2)` form: low 7 bits the
signal, 0x80 the core flag, bits 8–15 the exit code). `adapters/proc_connector.py` reads it from
the kernel's process connector or a zombie's `/proc/<pid>/stat`."""

from __future__ import annotations

import signal
from dataclasses import dataclass


@dataclass(frozen=True)
class ExitStatus:
    """A decoded wait status."""

    status: int

    @property
    def signal(self) -> int | None:
        sig = self.status & 0x7F
        return sig or None

    @property
    def exit_code(self) -> int | None:
        return None if self.signal else (self.status >> 8) & 0xFF

    @property
    def core_dumped(self) -> bool:
        return bool(self.status & 0x80)

    @property
    def signal_name(self) -> str | None:
        if not self.signal:
            return None
        try:
            return signal.Signals(self.signal).name
        except ValueError:
            return f"signal {self.signal}"

    def describe(self) -> str:
        if self.signal:
            return f"killed by {self.signal_name}" + (" (core dumped)" if self.core_dumped else "")
        return f"exited with code {self.exit_code}"
