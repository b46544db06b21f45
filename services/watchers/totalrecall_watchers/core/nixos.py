"""NixOS generations: what a new `system-N-link`, or a switch of the current generation, is
worth saying. `adapters/nixos.py` is the watcher that reads the profiles directory."""

from __future__ import annotations

import re
from collections.abc import Callable

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext

#: The name of a system generation's link in the profiles directory.
GENERATION_LINK = re.compile(r"^system-(\d+)-link$")


def generation_number(link_name: str) -> int | None:
    m = GENERATION_LINK.match(link_name)
    return int(m.group(1)) if m else None


def generation_events(ctx: EventContext, source: str, before: dict[int, str],
                      current_before: int | None, gens: dict[int, str], current: int | None,
                      diff: Callable[[str, str], str]) -> list[MemoryEvent]:
    """The generations created since `before` (each with `diff(old store path, new)`, "" for
    none) and a switch of the current generation (a rollback when it went down)."""
    events: list[MemoryEvent] = []
    prev_max = max(before, default=0)
    for n in sorted(g for g in gens if g > prev_max):
        base = before.get(prev_max, "")
        changes = diff(base, gens[n])
        events.append(ctx.event(
            source, "system.config", "generation", f"NixOS generation {n} created",
            detail=(f"generation: {n}\nstore path: {gens[n]}\nprevious: {prev_max}"
                    + (f"\nchanges (nix store diff-closures):\n{changes}" if changes else "")),
            generation=n, tags=["nixos", "generation"]))
    if current is not None and current_before is not None and current != current_before:
        rollback = current < current_before
        events.append(ctx.event(
            source, "system.package" if rollback else "system.config",
            "rollback" if rollback else "generation",
            f"NixOS switched from generation {current_before} to {current}"
            + (" (rollback)" if rollback else ""),
            detail=f"current: {current} → {gens.get(current, '?')}\nprevious: {current_before}",
            generation=current, severity=Severity.WARNING if rollback else Severity.INFO,
            tags=["nixos", "switch"] + (["rollback"] if rollback else [])))
    return events
