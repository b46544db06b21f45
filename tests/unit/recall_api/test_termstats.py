from totalrecall_recall_api.adapters import _quote
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


def test_only_common_terms_are_kept_rather_than_nothing() -> None:
    ts = _stats({"time": 900}, 1000)
    assert [t for t, _ in ts.select(["time"])] == ["time"]
    assert ts.select([]) == []


def test_lexemes_are_quoted_for_tsquery() -> None:
    assert _quote("o'neil") == "'o''neil'"
    assert _quote("a|b&!c") == "'a|b&!c'"
