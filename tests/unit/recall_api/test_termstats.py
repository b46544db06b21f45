"""Keyword search's word weights (`core.term_weights`) and their reader (`termstats`)."""

from __future__ import annotations

from typing import Any

from totalrecall_recall_api.adapters.termstats import TermStats
from totalrecall_recall_api.adapters.tsquery import operand, quote
from totalrecall_recall_api.core.term_weights import Counts, is_prefix


def _stats(df: dict[str, int], n: int, asked: tuple[str, ...] = ()) -> Counts:
    """The counts a store holding `df` gives: each word as it is, and every word of `df` and
    `asked` that is searched as a prefix summed over the words it begins."""
    prefix = {w: sum(v for k, v in df.items() if k.startswith(w))
              for w in {*df, *asked} if is_prefix(w, 4)}
    return Counts(n, df, prefix)


def test_common_terms_are_dropped_and_rare_ones_weigh_more() -> None:
    ts = _stats({"time": 900, "caroline": 40, "lgbtq": 3, "support": 100}, 1000)
    picked = dict(ts.select(["time", "caroline", "lgbtq", "support", "brandnew"]))
    assert "time" not in picked  # in 90% of memories: no signal, only cost
    assert list(picked) == ["brandnew", "lgbtq", "caroline", "support"]  # rarest first
    assert picked["brandnew"] > picked["lgbtq"] > picked["caroline"] > picked["support"] > 0


def test_common_terms_left_out_of_the_search_still_score() -> None:
    """`fail` (in 30% of sshd's lines) finds nothing by itself, but among the lines of user
    webmaster it tells "Failed password …" from "Invalid user …"."""
    ts = _stats({"fail": 300, "webmast": 4, "provid": 0}, 1000)
    searched = ts.select(["webmast", "fail", "provid"])
    assert [t for t, _ in searched] == ["provid", "webmast"]
    common = dict(ts.common(["webmast", "fail", "provid"], searched))
    assert list(common) == ["fail"]
    assert 0 < common["fail"] < dict(searched)["webmast"]
    assert ts.common(["fail", "gone"], []) == [("fail", ts.idf("fail"))]  # absent: no score
    only_common = ts.select(["fail"])
    assert ts.common(["fail"], only_common) == []  # searched after all: not scored twice


def test_only_common_terms_are_kept_rather_than_nothing() -> None:
    ts = _stats({"time": 900}, 1000)
    assert [t for t, _ in ts.select(["time"])] == ["time"]
    assert ts.select([]) == []


def test_lexemes_are_quoted_for_tsquery() -> None:
    assert quote("o'neil") == "'o''neil'"
    assert quote("a|b&!c") == "'a|b&!c'"


def test_small_stores_keep_every_term() -> None:
    """With a handful of memories a document frequency says nothing: nothing is pruned."""
    ts = _stats({"port": 2, "80": 2, "nginx": 1}, 5)
    picked = dict(ts.select(["nginx", "port", "80", "problem"]))
    assert set(picked) == {"nginx", "port", "80", "problem"}
    assert picked["problem"] > picked["nginx"] > picked["port"] > 0


def test_longer_words_also_match_as_prefixes() -> None:
    assert operand("nginx") == "'nginx':*"  # reaches `nginx.service`, `nginx.conf`
    assert operand("80") == "'80'" and operand("cpu") == "'cpu'"
    assert operand("o'neil") == "'o''neil'"  # only plain words get the prefix


def test_a_prefix_is_as_common_as_the_words_it_begins() -> None:
    """"packet" is no lexeme of the store, but "packet:*" matches every PacketResponder line:
    it must weigh as a common word, not as the rarest."""
    ts = _stats({"packetrespond": 900, "packets": 50, "blk_42": 1, "pack": 3}, 1000,
                asked=("packet",))
    assert ts.doc_freq("packet") == 950
    assert ts.doc_freq("pack") == 953  # itself and every longer word it begins
    assert ts.doc_freq("blk_42") == 1 and ts.doc_freq("zzz") == 0  # exact: not a prefix
    picked = dict(ts.select(["packet", "blk_42"]))
    assert list(picked) == ["blk_42"]  # "packet" is too common to search by
    assert ts.idf("packet") < picked["blk_42"]
    assert ts.exact_idf("packet") is None  # no memory holds the word itself
    assert ts.exact_idf("pack") > ts.idf("pack")  # 3 memories hold "pack", 953 a word it begins


class _Pool:
    """Postgres as the reader sees it: the namespaces' sizes and the words' counts of a store
    (`term_stats`), and how many reads it was asked for."""

    def __init__(self, sizes: dict[str, int], words: dict[str, dict[str, int]]) -> None:
        self.sizes, self.words, self.reads = sizes, words, 0

    async def fetchrow(self, sql: str, namespace: str | None) -> dict[str, Any]:
        self.reads += 1
        return {"n_ns": self.sizes.get(namespace or ""), "n_all": sum(self.sizes.values())}

    async def fetch(self, sql: str, namespace: str | None, words: list[str],
                    prefixed: list[bool]) -> list[dict[str, Any]]:
        self.reads += 1
        scopes = [namespace] if namespace is not None else list(self.words)
        out = []
        for w, p in zip(words, prefixed, strict=True):
            held = [(k, v) for ns in scopes for k, v in self.words.get(ns or "", {}).items()]
            out.append({"lexeme": w, "exact": sum(v for k, v in held if k == w) or None,
                        "prefix": sum(v for k, v in held if k.startswith(w)) if p else None})
        return out


async def test_a_namespace_big_enough_is_weighed_by_its_own_counts() -> None:
    pool = _Pool({"logs": 100, "chat": 100, "tiny": 1},
                 {"logs": {"nginx": 90, "disk": 1}, "chat": {"nginx": 1, "disk": 1},
                  "tiny": {"nginx": 1}})
    ts = TermStats(pool, min_namespace_docs=10)  # type: ignore[arg-type]
    logs, chat = await ts.counts("logs", ["nginx", "disk"]), await ts.counts("chat", ["nginx"])
    tiny, every = await ts.counts("tiny", ["nginx"]), await ts.counts(None, ["nginx"])
    assert logs and chat and tiny and every
    assert chat.idf("nginx") > logs.idf("nginx")  # rare here, common there
    assert (tiny.scope, tiny.n_docs, tiny.doc_freq("nginx")) == ("all", 201, 92)
    assert tiny.idf("nginx") == every.idf("nginx")  # too small: the counts over all
    assert (await ts.counts("unknown", ["nginx"])).scope == "all"  # type: ignore[union-attr]
    assert [t for t, _ in logs.select(["nginx", "disk"], min_docs_to_prune=50)] == ["disk"]


async def test_counts_read_are_reused_for_their_max_age_only() -> None:
    pool = _Pool({"logs": 100}, {"logs": {"nginx": 90, "nginxd": 5}})
    ts = TermStats(pool, max_age_s=3600)  # type: ignore[arg-type]
    first = await ts.counts("logs", ["nginx", "disk"])
    assert first is not None and pool.reads == 2  # the sizes, then the words
    assert (first.doc_freq("nginx"), first.exact_idf("nginx") is not None) == (95, True)
    again = await ts.counts("logs", ["disk", "nginx"])
    assert pool.reads == 2 and again == first
    await ts.counts("logs", ["nginx", "kiln"])
    assert pool.reads == 3  # only the new word is read
    ts.max_age_s = 0.0
    await ts.counts("logs", ["nginx"])
    assert pool.reads == 5


async def test_a_store_without_counts_weighs_every_word_alike() -> None:
    import asyncpg

    class Old(_Pool):
        async def fetchrow(self, sql: str, namespace: str | None) -> dict[str, Any]:
            raise asyncpg.UndefinedTableError("relation \"namespace_stats\" does not exist")

    ts = TermStats(Old({}, {}))  # type: ignore[arg-type]
    assert await ts.counts("logs", ["nginx"]) is None
    assert await ts.describe("logs") is None
    assert await TermStats(_Pool({}, {})).counts("logs", ["x"]) is None  # type: ignore[arg-type]


async def test_an_empty_store_is_not_kept_for_the_searches_after_a_load() -> None:
    """Asked before the first memories, and again once they arrived: the second search weighs
    by them at once, not after `max_age_s` of weighing every word alike."""
    pool = _Pool({}, {})
    ts = TermStats(pool, max_age_s=3600)  # type: ignore[arg-type]
    assert await ts.counts("conv", ["potteri"]) is None
    pool.sizes, pool.words = {"conv": 100}, {"conv": {"potteri": 3}}
    counts = await ts.counts("conv", ["potteri"])
    assert counts is not None and (counts.scope, counts.n_docs) == ("namespace", 100)


async def test_stats_read_the_sizes_the_next_searches_weigh_by() -> None:
    """A client polls `/memory/stats` (`describe`) until its load is counted: the searches that
    follow use those sizes, not ones kept from a poll in the middle of the load."""
    pool = _Pool({"conv": 10, "other": 500}, {"conv": {"potteri": 3}})
    ts = TermStats(pool, max_age_s=3600, min_namespace_docs=50)  # type: ignore[arg-type]
    assert await ts.describe("conv") == {"scope": "all", "memories": 510, "age_s": 0.0}
    pool.sizes["conv"] = 100  # the rest of the load committed
    assert await ts.describe("conv") == {"scope": "namespace", "memories": 100, "age_s": 0.0}
    reads = pool.reads
    counts = await ts.counts("conv", ["potteri"])
    assert counts is not None and (counts.scope, counts.n_docs) == ("namespace", 100)
    assert pool.reads == reads + 1  # the words only: the sizes the poll read are reused
