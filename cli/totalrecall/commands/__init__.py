"""The verbs of `totalrecall`, one small module per verb or group. Each module's `register(sub)`
adds its subparsers and sets `func` (args -> exit code); verbs with their own option parser are
`stack.PASSTHROUGH`. Modules import what they need only when they run: `totalrecall --help` and
the light verbs start fast."""

from __future__ import annotations

from . import admin, doctor, memories, stack, stats, supersede, transfer

#: In the order `totalrecall --help` lists them.
MODULES = (stack, doctor, memories, supersede, stats, transfer, admin)

__all__ = ["MODULES"]
