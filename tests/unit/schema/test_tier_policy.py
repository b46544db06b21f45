"""One tier policy: the indexer's settings and recall-api's read the same ages."""

from __future__ import annotations

import pytest
from totalrecall_indexer.settings import Settings as IndexerSettings
from totalrecall_recall_api.settings import Settings as RecallSettings
from totalrecall_schema import TierPolicy


def test_both_services_read_one_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TR_INDEXER_HOT_MAX_AGE_S", "3600")
    monkeypatch.setenv("TR_INDEXER_WARM_MAX_AGE_S", "86400")
    idx = IndexerSettings()
    assert (idx.hot_max_age_s, idx.warm_max_age_s) == (3600, 86400)
    assert RecallSettings().tier_policy == TierPolicy(3600, 86400)


def test_policy_ages() -> None:
    p = TierPolicy(10, 100)
    assert [p.tier_for_age(a) for a in (0, 10, 99, 100)] == ["hot", "warm", "warm", "cold"]
    assert [p.tiers_reaching(a) for a in (10, 11, 101)] == [
        ("hot",), ("hot", "warm"), ("hot", "warm", "cold")]
    with pytest.raises(ValueError):
        TierPolicy(100, 10)
