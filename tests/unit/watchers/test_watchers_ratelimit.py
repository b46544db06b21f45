from __future__ import annotations

from totalrecall_watchers.core.base import FakeClock
from totalrecall_watchers.core.ratelimit import RateLimiter, TokenBucket


def test_token_bucket_burst_then_refill() -> None:
    b = TokenBucket(rate_per_s=1.0, burst=3, now=0.0)
    assert [b.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert b.take(0.5) is False
    assert b.take(1.0) is True
    assert b.available(100.0) == 3  # capped at burst


def make(clock: FakeClock) -> RateLimiter:
    return RateLimiter(per_watcher_per_hour=60, per_watcher_burst=5, global_per_hour=120,
                       global_burst=8, monotonic=clock.monotonic)


def test_log_storm_is_capped_and_counted() -> None:
    clock = FakeClock()
    rl = make(clock)
    allowed = sum(rl.allow("journal")[0] for _ in range(10_000))
    assert allowed == 5
    assert rl.suppressed[("journal", "watcher")] == 9_995
    # one minute later one more token (60/hour)
    clock.advance(60)
    assert rl.allow("journal") == (True, None)
    assert rl.allow("journal") == (False, "watcher")


def test_noisy_watcher_does_not_starve_others_beyond_its_share() -> None:
    clock = FakeClock()
    rl = make(clock)
    for _ in range(1000):
        rl.allow("journal")
    # journal took 5 of the 8 global tokens; process still gets the remaining 3
    results = [rl.allow("process")[0] for _ in range(5)]
    assert results == [True, True, True, False, False]
    assert rl.suppressed[("process", "global")] == 2
    snap = rl.snapshot()
    assert snap["suppressed"] == {"journal": {"watcher": 995}, "process": {"global": 2}}


def test_steady_budget_per_hour() -> None:
    clock = FakeClock()
    rl = RateLimiter(per_watcher_per_hour=1000, per_watcher_burst=10, global_per_hour=200,
                     global_burst=50, monotonic=clock.monotonic)
    allowed = 0
    for _ in range(3600):  # one attempt per second for an hour
        allowed += rl.allow("x")[0]
        clock.advance(1)
    assert 200 <= allowed <= 250  # burst + steady rate
