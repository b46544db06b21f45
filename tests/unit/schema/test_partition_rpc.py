"""Asking a partitioned index (`totalrecall_schema.partition_rpc`): answers gathered until
every partition is heard from, and admin answers merged."""

from __future__ import annotations

import asyncio
from typing import Any

from totalrecall_schema import AdminReply
from totalrecall_schema.partition_rpc import admin_partitions, gather, merge_admin_replies


class _Sub:
    def __init__(self, answers: list[bytes]) -> None:
        self.answers = answers

    async def next_msg(self, timeout: float) -> Any:
        if not self.answers:
            await asyncio.sleep(timeout)  # nothing more comes: the caller's timeout runs out
            raise TimeoutError
        return type("Msg", (), {"data": self.answers.pop(0)})()

    async def unsubscribe(self) -> None:
        pass


class _Nats:
    """Answers a published request with the given answers, in order."""

    def __init__(self, answers: list[AdminReply]) -> None:
        self.sub = _Sub([a.model_dump_json().encode() for a in answers])
        self.published: list[tuple[str, bytes, str]] = []

    def new_inbox(self) -> str:
        return "_INBOX.test"

    async def subscribe(self, subject: str) -> _Sub:
        return self.sub

    async def publish(self, subject: str, body: bytes, reply: str) -> None:
        self.published.append((subject, body, reply))


async def test_gather_waits_past_a_standby_until_every_partition_answered() -> None:
    standby = AdminReply(result={"standby": True}, partitions=[])
    nc = _Nats([standby, AdminReply(partitions=[1]), AdminReply(partitions=[0]),
                AdminReply(partitions=[0])])
    got = await gather(nc, "idx.admin", b"{}", 5.0, 2, AdminReply.model_validate_json,
                       admin_partitions)
    assert [r.partitions for r in got] == [[], [1], [0]]  # stops once both are heard
    assert nc.published == [("idx.admin", b"{}", "_INBOX.test")]  # asked once


async def test_gather_returns_what_came_when_a_partition_never_answers() -> None:
    nc = _Nats([AdminReply(partitions=[0])])
    got = await gather(nc, "idx.admin", b"{}", 0.2, 2, AdminReply.model_validate_json,
                       admin_partitions)
    assert [r.partitions for r in got] == [[0]]


def test_rebuild_answers_are_summed_and_the_slowest_owner_timed() -> None:
    a = AdminReply(result={"records": 10, "embedded": 9, "unembedded": 1, "took_s": 2.5,
                           "model": "m"}, partitions=[0])
    b = AdminReply(result={"records": 5, "embedded": 5, "unembedded": 0, "took_s": 4.0,
                           "model": "m"}, partitions=[1])
    merged = merge_admin_replies("rebuild", [a, b], 2)
    assert merged.ok and merged.result["records"] == 15 and merged.result["embedded"] == 14
    assert merged.result["unembedded"] == 1 and merged.result["took_s"] == 4.0
    # One owner only: the rebuild is not done everywhere.
    assert not merge_admin_replies("rebuild", [a], 2).ok


def test_admin_answers_of_every_owner_are_merged_and_a_standby_is_left_out() -> None:
    a = AdminReply(result={"forgotten": 1, "found": ["k1"], "postgres": 1, "zvec": 1},
                   partitions=[0])
    b = AdminReply(result={"forgotten": 1, "found": ["k2"], "postgres": 1, "zvec": 2},
                   partitions=[1])
    standby = AdminReply(result={"standby": True}, partitions=[])
    merged = merge_admin_replies("forget", [standby, a, b], 2)
    assert merged.ok and merged.partitions == [0, 1] and merged.missing_partitions == []
    assert merged.result["found"] == ["k1", "k2"] and merged.result["forgotten"] == 2
    assert merged.result["zvec"] == 3 and len(merged.result["owners"]) == 2  # type: ignore[arg-type]

    # An owner missing: the forget is not done everywhere, and says where it was not.
    half = merge_admin_replies("forget", [a], 2)
    assert not half.ok and half.missing_partitions == [1] and "[1]" in (half.error or "")
    # A failing owner: not ok, its error named with its partitions.
    bad = AdminReply(ok=False, error="zvec tier hot takes no writes yet", partitions=[1])
    failed = merge_admin_replies("forget", [a, bad], 2)
    assert not failed.ok and "partitions [1]: zvec tier hot" in (failed.error or "")


def test_stats_of_every_owner_are_summed_and_shown_even_with_one_missing() -> None:
    def stats(hot: int, completeness: float, pg: int) -> dict[str, Any]:
        return {"tiers": {"hot": {"doc_count": hot, "index_completeness": completeness}},
                "model": "m", "dim": 384, "pg_count": pg, "pg_by_tier": {"hot": pg},
                "markdown_days": 3, "writes_held": {}, "reindex": {},
                "builds": {"hot": "due"} if completeness < 1.0 else {}}
    merged = merge_admin_replies("stats", [
        AdminReply(result=stats(10, 1.0, 10), partitions=[0]),
        AdminReply(result=stats(5, 0.5, 6), partitions=[1])], 3)
    assert merged.ok and merged.missing_partitions == [2]
    r = merged.result
    assert r["docs"] == {"hot": 15} and r["index_completeness"] == {"hot": 0.5}
    assert r["pg_count"] == 16 and r["pg_by_tier"] == {"hot": 16}
    assert r["model"] == "m" and r["dim"] == 384 and r["missing_partitions"] == [2]
    assert r["builds"] == {"hot (owner 1)": "due"}
