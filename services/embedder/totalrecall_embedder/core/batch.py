"""Planning one consumed batch: validate, fold repeats, decide what to embed and publish.

Pure logic: no I/O. The handler embeds `plan.texts`, calls `plan.finish(vectors)`, publishes each
`Outgoing`, acks its `sources` after the PubAck and then `commit()`s it into the dedup window.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import ValidationError
from totalrecall_schema import DeadLetter, EmbeddedEvent, MemoryEvent, Topology, utcnow
from totalrecall_schema.host import check_publisher_host

from .dedup import (
    DedupKey,
    DedupWindow,
    Seen,
    TemplateVector,
    TemplateVectors,
    dedup_key,
    event_template,
)

STAGE = "embedder"
MAX_REASON_CHARS = 2_000


@dataclass
class Incoming:
    subject: str
    data: bytes


@dataclass
class Outgoing:
    subject: str
    msg_id: str
    embedded: EmbeddedEvent
    sources: list[int]                 # indices into the batch settled by this publish
    kind: str                          # "embedded" | "reused" | "fallback" | "repeat"
    dkey: DedupKey | None = None
    first_ts: datetime | None = None
    folded: int = 0                    # repeats from this batch folded into this memory

    def to_seen(self) -> Seen:
        assert self.first_ts is not None
        return Seen(key=self.embedded.event.key, first_ts=self.first_ts,
                    count=self.embedded.repeat_count,
                    last_seen=self.embedded.last_seen or self.embedded.event.timestamp,
                    embedded=self.embedded, msg_id=self.msg_id)


@dataclass
class _Group:
    event: MemoryEvent                 # the first event of the memory
    sources: list[int]
    base: Seen | None                  # already published earlier (a repeat), else None
    dkey: DedupKey | None
    added: int = 0                     # new repeats folded in from this batch
    last_seen: datetime | None = None
    text_index: int | None = None      # index into Plan.texts when it needs embedding
    template: str | None = None        # its template, when it may share a vector
    reused: TemplateVector | None = None  # the template's vector from an earlier batch


@dataclass
class Plan:
    dead: list[tuple[int, DeadLetter]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    folded: int = 0                    # repeats folded into another memory (not re-embedded)
    reused: int = 0                    # memories whose vector is another's of their template
    templates: TemplateVectors | None = None
    _groups: list[_Group] = field(default_factory=list)

    def finish(self, vectors: Sequence[list[float] | None] | None, model: str | None,
               topology: Topology) -> list[Outgoing]:
        """Build the messages to publish; `vectors[i]` belongs to `texts[i]` (None: no model)."""
        out: list[Outgoing] = []
        now = utcnow()
        for g in self._groups:
            if g.base is not None:
                base = g.base
                count = base.count + g.added
                last = max(base.last_seen, g.last_seen) if g.last_seen else base.last_seen
                emb = base.embedded.model_copy(update={
                    "repeat_count": count, "last_seen": last, "embedded_at": now})
                # A new repeat needs a new Nats-Msg-Id (JetStream would drop the same id as a
                # duplicate); a pure redelivery reuses the last one.
                msg_id = base.msg_id if g.added == 0 else f"{base.key}:r{count}"
                out.append(Outgoing(topology.embedded_subject_of(base.embedded.event),
                                    msg_id, emb, g.sources, "repeat", g.dkey, base.first_ts,
                                    g.added))
                continue
            vec = None
            vmodel = model
            if g.reused is not None:
                vec, vmodel = g.reused.vector, g.reused.model
            if vectors is not None and g.text_index is not None:
                vec = vectors[g.text_index]
            if (self.templates is not None and g.template is not None and g.reused is None
                    and vec is not None and vmodel is not None):
                self.templates.put(g.template, TemplateVector(vmodel, vec))
            count = 1 + g.added
            # Constructed, not validated: `g.event` was validated (so scrubbed) when its message
            # was parsed, and validating the wrapper would run its validator again (pydantic
            # re-runs a model's "after" validator on an instance passed as a field).
            emb = EmbeddedEvent.model_construct(
                event=g.event, vector=vec, model=vmodel if vec is not None else None,
                dim=len(vec) if vec is not None else None, repeat_count=count,
                last_seen=g.last_seen if count > 1 else None, embedded_at=now)
            kind = "fallback" if vec is None else "reused" if g.reused else "embedded"
            out.append(Outgoing(topology.embedded_subject_of(g.event), g.event.key, emb,
                                g.sources, kind, g.dkey, g.event.timestamp, g.added))
        return out


def dead_letter(msg: Incoming, reason: str) -> DeadLetter:
    return DeadLetter(stage=STAGE, reason=reason[:MAX_REASON_CHARS], subject=msg.subject,
                      payload=msg.data.decode("utf-8", errors="replace"))


def parse_event(msg: Incoming, topology: Topology | None) -> MemoryEvent | DeadLetter:
    """The event of `msg`, or the dead letter saying why it has none. An event that came in on
    a remote host's subject (`Topology.host_of_subject`) must be that host's: its missing
    `metadata.host` is that host, another host's is refused (a host may publish only its own
    events; its NATS user may publish only on its own subjects)."""
    try:
        publisher = topology.host_of_subject(msg.subject) if topology is not None else None
    except ValueError as exc:
        return dead_letter(msg, str(exc))
    try:
        if publisher is None:
            return MemoryEvent.model_validate_json(msg.data)
        raw = json.loads(msg.data)
        if not isinstance(raw, dict):
            raise ValueError(f"a MemoryEvent is a JSON object, not {type(raw).__name__}")
        refused = check_publisher_host(publisher, raw)
        if refused is not None:
            return dead_letter(msg, refused)
        return MemoryEvent.model_validate(raw)
    except (ValidationError, ValueError) as exc:
        return dead_letter(msg, f"invalid MemoryEvent: {exc}")


def plan_batch(msgs: Sequence[Incoming], window: DedupWindow | None, *,
               can_embed: bool = True, skip_categories: Collection[str] = (),
               templates: TemplateVectors | None = None, model: str | None = None,
               topology: Topology | None = None) -> Plan:
    """Validate every message and group repeats.

    `window` None disables dedup; events of `skip_categories` are never folded (what a person
    said is not noise: "port 8080" and "port 8081" are two facts).
    Repeats are events equal but for timestamps; events of one template (differing in numbers
    or ids) are distinct memories that share one embedding: one text per template in the batch,
    or the vector `templates` holds for `model` from an earlier batch (None: no sharing).
    A repeat of a memory published earlier is republished with
    `repeat_count` + n and `last_seen` (same key: the indexer upserts); a repeat inside the batch
    is folded into its first occurrence. A redelivered message (same key as the memory it matches)
    is settled by republishing, without counting it again. With `topology`, an event of a
    remote host's subject that is not that host's is dead-lettered (`parse_event`).
    """
    plan = Plan(templates=templates)
    open_groups: dict[DedupKey, _Group] = {}
    for i, msg in enumerate(msgs):
        event = parse_event(msg, topology)
        if isinstance(event, DeadLetter):
            plan.dead.append((i, event))
            continue
        if window is None or event.category in skip_categories:
            plan._groups.append(_Group(event, [i], None, None))
            continue
        dkey = dedup_key(event)
        group = open_groups.get(dkey)
        if group is not None and not _within(group, event, window.window_s):
            group = None
        if group is None:
            seen = window.get(dkey, event.timestamp)
            if seen is not None and seen.embedded.vector is None and can_embed:
                seen = None  # published without a vector while degraded: embed it now
            group = _Group(seen.embedded.event if seen else event, [], seen, dkey)
            open_groups[dkey] = group
            plan._groups.append(group)
            if seen is None:
                group.sources.append(i)
                continue
        group.sources.append(i)
        if event.key == group.event.key:
            continue  # the same event again (redelivery): settle it, count nothing
        group.added += 1
        plan.folded += 1
        ts = event.timestamp
        group.last_seen = ts if group.last_seen is None else max(group.last_seen, ts)
    by_template: dict[str, int] = {}
    for g in plan._groups:
        if g.base is not None:
            continue
        if templates is not None and g.event.category not in skip_categories:
            g.template = event_template(g.event)
            g.reused = templates.get(g.template, model) if can_embed else None
            if g.reused is not None:
                plan.reused += 1
                continue
            shared = by_template.get(g.template)
            if shared is not None:
                g.text_index = shared
                plan.reused += 1
                continue
        g.text_index = len(plan.texts)
        plan.texts.append(g.event.embedding_text())
        if g.template is not None:
            by_template[g.template] = g.text_index
    return plan


def _within(group: _Group, event: MemoryEvent, window_s: float) -> bool:
    first = group.base.first_ts if group.base else group.event.timestamp
    return abs((event.timestamp - first).total_seconds()) <= window_s
