import asyncio

import pytest
from totalrecall_recall_api.adapters import _operand, _quote
from totalrecall_recall_api.termstats import TermStats


def _stats(df: dict[str, int], n: int) -> TermStats:
    ts = TermStats(pool=None)  # type: ignore[arg-type]
    ts.df, ts.n_docs = df, n
    return ts


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
    assert _quote("o'neil") == "'o''neil'"
    assert _quote("a|b&!c") == "'a|b&!c'"


def test_small_stores_keep_every_term() -> None:
    """With a handful of memories a document frequency says nothing: nothing is pruned."""
    ts = _stats({"port": 2, "80": 2, "nginx": 1}, 5)
    picked = dict(ts.select(["nginx", "port", "80", "problem"]))
    assert set(picked) == {"nginx", "port", "80", "problem"}
    assert picked["problem"] > picked["nginx"] > picked["port"] > 0


def test_longer_words_also_match_as_prefixes() -> None:
    assert _operand("nginx") == "'nginx':*"  # reaches `nginx.service`, `nginx.conf`
    assert _operand("80") == "'80'" and _operand("cpu") == "'cpu'"
    assert _operand("o'neil") == "'o''neil'"  # only plain words get the prefix


def test_a_burst_of_inserts_triggers_an_early_refresh() -> None:
    ts = _stats({"nginx": 10}, 1000)
    ts.inserted_at_refresh = 5000
    assert not ts.grown(5000) and not ts.grown(5100)  # 100 new rows of 1000: under 20 %
    assert ts.grown(5200)
    small = _stats({}, 0)  # an empty store: the first 50 rows are worth a refresh
    assert not small.grown(49) and small.grown(50)


def test_a_load_that_has_ended_triggers_a_refresh_and_steady_ingest_does_not() -> None:
    ts = _stats({"nginx": 10}, 1000)
    ts.inserted_at_refresh = 5000
    assert not ts.settled(5000, 5000)  # nothing new since the refresh
    assert not ts.settled(5100, 5050)  # still arriving
    assert ts.settled(5100, 5100)  # 100 new rows, then quiet for a check


async def test_the_refresher_refreshes_once_a_load_has_settled() -> None:
    """A load of 100 rows into 1,000 (under the 20 % of an early refresh) is counted at the
    first check that finds no new rows, not `refresh_s` later."""
    ts = _stats({"nginx": 10}, 1000)
    ts.refresh_s, ts.check_s = 3600.0, 0.0
    counts = iter([1000, 1050, 1100, 1100])
    refreshes: list[int] = []

    async def inserted() -> int:
        return next(counts)

    async def refresh() -> None:
        refreshes.append(ts.inserted_at_refresh)
        if len(refreshes) == 2:
            raise asyncio.CancelledError  # stop the loop after the early refresh
        ts.inserted_at_refresh = 1000

    ts.inserted, ts.refresh = inserted, refresh  # type: ignore[method-assign]
    with pytest.raises(asyncio.CancelledError):
        await ts.run()
    assert refreshes == [0, 1000]  # the first at start, the second once 1,100 held still


def test_a_prefix_is_as_common_as_the_words_it_begins() -> None:
    """"packet" is no lexeme of the store, but "packet:*" matches every PacketResponder line:
    it must weigh as a common word, not as the rarest."""
    ts = _stats({"packetrespond": 900, "packets": 50, "blk_42": 1, "pack": 3}, 1000)
    assert ts.doc_freq("packet") == 950
    assert ts.doc_freq("pack") == 953  # itself and every longer word it begins
    assert ts.doc_freq("blk_42") == 1 and ts.doc_freq("zzz") == 0  # exact: not a prefix
    picked = dict(ts.select(["packet", "blk_42"]))
    assert list(picked) == ["blk_42"]  # "packet" is too common to search by
    assert ts.idf("packet") < picked["blk_42"]
    ts.df = {**ts.df, "packetloss": 10}  # a refresh: a new corpus, a new index
    assert ts.doc_freq("packet") == 960


def test_a_refresh_frees_the_statistics_it_replaced() -> None:
    """The prefix index keeps one entry per corpus: a namespace refreshed a hundred times (a
    load that keeps growing) holds one map, not every map it ever had."""
    ts = _stats({"packetrespond": 900}, 1000)
    ts.ns_docs = {"ns": 500}
    for i in range(100):
        ts.ns_df = {"ns": {"packetrespond": 400 + i, f"run{i}": 1}}
        ts.df = {"packetrespond": 900 + i}
        assert ts.doc_freq("packet", "ns") == 400 + i
        assert ts.doc_freq("packet", "elsewhere") == 900 + i  # the overall corpus
    assert len(ts._prefix_index) == 2

