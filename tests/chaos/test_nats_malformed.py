"""Row: malformed and oversized NATS messages on every subject the topology defines.

Each bad message on a consumed subject (events, embedded) must reach the dead-letter stream with
a reason; each bad request on an RPC subject must get an error reply; a message over the server's
max_payload is refused by the server. Valid events published after them are recalled (the
pipeline keeps flowing) and no service crashed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.errors import MaxPayloadError
from totalrecall_schema import DeadLetter, MemoryEvent, Topology

from tests.chaos.report import ROWS, record
from tests.chaos.stack_inputs import Stack, chaos_stack

ROW = next(r for r in ROWS if r.startswith("malformed and oversized NATS"))


@dataclass
class Bad:
    label: str
    subject: str
    data: bytes
    headers: dict[str, str] | None = None
    stage: str | None = None  # the consumer expected to dead-letter it (None: RPC or unconsumed)


def _bad_payloads(tag: str, max_payload: int, full: bool) -> list[tuple[str, bytes, dict[str, str] |
                                                                          None]]:
    """(label, payload, headers): each payload carries `tag` so its dead letter can be found."""
    valid = MemoryEvent(summary=f"{tag} valid shape", category="system.service")
    body = json.loads(valid.model_dump_json())
    out: list[tuple[str, bytes, dict[str, str] | None]] = [
        ("not json", f"{tag} this is not json {{".encode(), None),
        ("empty json object", json.dumps({"why": tag}).encode(), None),
        ("wrong shape", json.dumps({"summary": 42, "detail": [tag]}).encode(), None),
        ("json array", json.dumps([tag, 1, None]).encode(), None),
        ("invalid category", json.dumps({**body, "category": "no.such.category",
                                         "id": f"{tag}-cat"}).encode(), None),
        ("binary junk", tag.encode() + os.urandom(4096), None),
        ("invalid utf-8", tag.encode() + b"\xff\xfe\xc3\x28 {\"summary\": \"x\"}", None),
        ("summary over the limit", json.dumps({**body, "id": f"{tag}-long",
                                               "summary": tag + "x" * 5000}).encode(), None),
        ("near max_payload", (tag + " " + "y" * (max_payload - 2000)).encode(), None),
        ("wrong headers", json.dumps({**body, "id": f"{tag}-hdr", "summary": 7}).encode(),
         {"Content-Type": "text/plain", "Nats-Msg-Id": "", "X-Junk": "\u00e9" * 10}),
    ]
    if full:
        out += [
            ("deeply nested json", (f'{{"t":"{tag}","x":' + "[" * 5000 + "]" * 5000
                                    + "}").encode(), None),
            ("huge json string", json.dumps({"summary": tag + "z" * (max_payload // 2)}).encode(),
             None),
            ("metadata bomb", json.dumps({**body, "id": f"{tag}-meta", "metadata": {
                f"k{i}": "v" * 100 for i in range(500)}}).encode(), None),
        ]
    return out


def _plan(topo: Topology, tag: str, max_payload: int, full: bool) -> list[Bad]:
    bads: list[Bad] = []
    payloads = _bad_payloads(tag, max_payload, full)
    for label, data, headers in payloads:
        bads.append(Bad(f"events/{label}", topo.events_subject("system.service"), data, headers,
                        "embedder"))
        bads.append(Bad(f"embedded/{label}", topo.embedded_subject("system.service"), data,
                        headers, "indexer"))
    # A category the taxonomy does not know, on its own subject.
    bads.append(Bad("events/unknown subject", topo.events_subject("bogus.thing"),
                    f"{tag} on a bogus subject".encode(), None, "embedder"))
    for label, data, headers in payloads[:4] + payloads[5:7]:
        for rpc in (topo.rpc_embed_query, topo.rpc_embed_batch, topo.rpc_vector_search,
                    topo.rpc_index_admin):
            bads.append(Bad(f"rpc {rpc.rsplit('.', 2)[-2]}.{rpc.rsplit('.', 1)[-1]}/{label}",
                            rpc, data, headers))
        bads.append(Bad(f"progress/{label}", topo.rpc_index_progress, data, headers))
        bads.append(Bad(f"dlq/{label}", topo.dlq_subject("junk"), data, headers))
    return bads


async def _dead_letters(js: Any, topo: Topology) -> list[DeadLetter]:
    sub = await js.subscribe(topo.dlq_all, ordered_consumer=True)
    letters: list[DeadLetter] = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=2)
            except nats.errors.TimeoutError:
                break
            with contextlib.suppress(ValueError):  # junk published onto the DLQ subject itself
                letters.append(DeadLetter.model_validate_json(msg.data))
    finally:
        await sub.unsubscribe()
    return letters


async def _exercise(stack: Stack, full: bool) -> tuple[dict[str, object], list[str]]:
    topo = Topology()
    tag = f"chaosnats{uuid.uuid4().hex[:8]}"
    nc = await nats.connect(stack.running.nats_url)
    js = nc.jetstream()
    max_payload = nc.max_payload
    failures: list[str] = []
    rpc_replies: dict[str, str] = {}
    bads = _plan(topo, tag, max_payload, full)
    rounds = 3 if full else 1
    for _ in range(rounds):
        for bad in bads:
            if bad.stage is not None:
                await js.publish(bad.subject, bad.data, headers=bad.headers or None)
            elif ".rpc." in bad.subject and "progress" not in bad.subject:
                try:
                    reply = await nc.request(bad.subject, bad.data, timeout=10,
                                             headers=bad.headers or None)
                    text = reply.data.decode(errors="replace")
                    ok = '"error"' in text and '"error":null' not in text.replace(" ", "")
                    rpc_replies[bad.label] = "error reply" if ok else f"reply {text[:120]!r}"
                    if not ok:
                        failures.append(f"{bad.label}: no error in the reply: {text[:200]!r}")
                except nats.errors.TimeoutError:
                    rpc_replies[bad.label] = "no reply"
                    failures.append(f"{bad.label}: no reply in 10 s")
            else:
                await nc.publish(bad.subject, bad.data, headers=bad.headers or None)
    # Over the server's max_payload: refused by the server (client-side check first, then raw).
    try:
        await nc.publish(topo.events_subject("system.service"), b"x" * (max_payload + 1))
        await nc.flush()
        oversize = "accepted"
        failures.append("a message over max_payload was accepted")
    except MaxPayloadError:
        oversize = "refused (MaxPayloadError)"
    await nc.flush()

    # Valid events after the junk: over NATS as the watchers publish them, and over the API.
    good = [MemoryEvent(summary=f"{tag} good event {i} after the junk, disk sda{i} healthy",
                        category="system.storage") for i in range(5)]
    for ev in good:
        await js.publish(topo.events_subject(ev.category), ev.model_dump_json().encode(),
                         headers={"Nats-Msg-Id": ev.key})
    api = stack.post("/memory/ingest", {"summary": f"{tag} api event after the junk",
                                        "category": "system.service"})
    assert api.status_code == 200, api.text
    t0 = time.monotonic()
    for i in range(5):
        await asyncio.to_thread(stack.wait_recallable, f"{tag} good event {i} disk sda{i}",
                                f"good event {i} ", 180)
    await asyncio.to_thread(stack.wait_recallable, f"{tag} api event", "api event", 180)
    flowing_s = time.monotonic() - t0

    consumed = [b for b in bads if b.stage]
    expected = {(b.stage, b.label) for b in consumed}

    deadline = time.monotonic() + 120
    while True:
        letters = [x for x in await _dead_letters(js, topo) if tag in x.payload or tag in x.reason]
        if len(letters) >= len(consumed) * rounds or time.monotonic() > deadline:
            break
        await asyncio.sleep(1)
    per_stage: dict[str, int] = {}
    for x in letters:
        per_stage[x.stage] = per_stage.get(x.stage, 0) + 1
    missing: list[str] = []
    for stage, label in sorted(expected):
        bad = next(b for b in consumed if (b.stage, b.label) == (stage, label))
        head = bad.data[:40].decode(errors="replace")
        if not any(x.stage == stage and x.subject == bad.subject and x.reason.strip()
                   and x.payload.startswith(head[: len(tag) + 5]) for x in letters):
            missing.append(label)
    if missing:
        failures.append(f"not dead-lettered with a reason: {missing}")
    no_reason = [x.subject for x in letters if not x.reason.strip()]
    if no_reason:
        failures.append(f"dead letters without a reason: {len(no_reason)}")
    info = {}
    for stream, durable in ((topo.events_stream, topo.embedder_durable),
                            (topo.embedded_stream, topo.indexer_durable)):
        ci = await js.consumer_info(stream, durable)
        info[durable] = {"pending": ci.num_pending, "ack_pending": ci.num_ack_pending,
                         "redelivered": ci.num_redelivered}
    await nc.drain()
    health = stack.health()
    restarts = stack.supervisor_restarts()
    if any(code != 200 for code in health.values()):
        failures.append(f"health after the junk: {health}")
    if restarts:
        failures.append(f"{restarts} service restarts")
    figures: dict[str, object] = {
        "max_payload_bytes": max_payload, "rounds": rounds,
        "bad_messages_sent": len(bads) * rounds + 1,
        "to_consumed_subjects": len(consumed) * rounds,
        "dead_letters_found": len(letters), "dead_letters_per_stage": per_stage,
        "not_dead_lettered": missing, "over_max_payload": oversize,
        "rpc_bad_requests": len(rpc_replies),
        "rpc_error_replies": sum(v == "error reply" for v in rpc_replies.values()),
        "valid_after_junk_recalled_in_s": round(flowing_s, 1),
        "consumers_after": info, "health": health, "service_restarts": restarts,
        "sample_reason": next((x.reason[:120] for x in letters), "")}
    return figures, failures


def _check(tmp_path: Path, full: bool) -> tuple[dict[str, object], list[str]]:
    with chaos_stack(tmp_path / "home") as stack:
        return asyncio.run(_exercise(stack, full))


@pytest.mark.chaos
@pytest.mark.timeout(1200)
def test_nats_malformed(tmp_path: Path) -> None:
    figures, failures = _check(tmp_path, full=True)
    record(ROW, not failures, figures, "; ".join(failures)[:800])
    assert not failures, failures


@pytest.mark.fast
def test_nats_malformed_fast(tmp_path: Path) -> None:
    figures, failures = _check(tmp_path, full=False)
    record(ROW, not failures, figures, "; ".join(failures)[:800])
    assert not failures, json.dumps({"failures": failures, **figures}, default=str)[:4000]
