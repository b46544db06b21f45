"""What conversation turns concluded, published with them (the rules: core/conclusions.py).

Every route that takes turns (ingest of category `conversation`, the flush before compaction,
which the OpenClaw plugin's auto-capture uses too) hands them here before publishing: the
memories derived from them go out through the same publisher, in the same call. Extraction never
fails an ingest: a turn whose extraction raises is logged and counted
(`totalrecall_recall_conclusion_errors_total`) and stored without its conclusions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from totalrecall_schema import MemoryEvent

from ..core.conclusions import derive, is_turn, role_of, turn_text
from ..metrics import Metrics

log = logging.getLogger("totalrecall.conclusions")


@dataclass
class ConclusionExtractor:
    metrics: Metrics
    enabled: bool = True

    def derive(self, turns: Sequence[MemoryEvent],
               roles: Sequence[str | None] | None = None) -> list[MemoryEvent]:
        """The memories derived from the turns among `turns` (other events are passed over),
        each once. `roles`: who said each (else read from the turn). A decision or a correction
        keeps the turn it answers, the latest turn of the other side in the same session."""
        if not self.enabled:
            return []
        out: dict[str, MemoryEvent] = {}
        last: dict[tuple[str, str, str | None], str] = {}  # (namespace, session, role) → text
        for i, turn in enumerate(turns):
            try:
                if not is_turn(turn):
                    continue
                role = (roles[i] if roles is not None else None) or role_of(turn)
                session = str((turn.metadata.model_extra or {}).get("session") or "")
                other = "assistant" if role == "user" else "user" if role == "assistant" else None
                context = last.get((turn.namespace, session, other)) if other else None
                for e in derive(turn, role, context):
                    out.setdefault(e.key, e)
                    self.metrics.conclusions.labels(str(e.metadata.model_extra["rule"])).inc()
                if role:
                    last[(turn.namespace, session, role)] = turn_text(turn)
            except Exception as exc:  # never the ingest's failure: the turn is stored anyway
                self.metrics.conclusion_errors.inc()
                log.warning("no conclusions from turn %s: %s: %s", turn.id, type(exc).__name__,
                            exc)
        return list(out.values())
