"""Token buckets per watcher and one global: a log storm cannot flood the memory."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable


class TokenBucket:
    def __init__(self, rate_per_s: float, burst: float, now: float) -> None:
        self.rate = rate_per_s
        self.burst = max(burst, 1.0)
        self.tokens = self.burst
        self.updated = now

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
            self.updated = now

    def available(self, now: float) -> float:
        self._refill(now)
        return self.tokens

    def take(self, now: float) -> bool:
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class RateLimiter:
    """`allow(watcher)`: one token from the watcher's bucket AND one from the global bucket.

    A watcher whose own bucket is empty does not drain the global bucket, so one noisy watcher
    cannot starve the others of more than its own share."""

    def __init__(self, *, per_watcher_per_hour: float, per_watcher_burst: float,
                 global_per_hour: float, global_burst: float,
                 monotonic: Callable[[], float]) -> None:
        self._mono = monotonic
        self._per_rate = per_watcher_per_hour / 3600.0
        self._per_burst = per_watcher_burst
        self.global_bucket = TokenBucket(global_per_hour / 3600.0, global_burst, monotonic())
        self.buckets: dict[str, TokenBucket] = {}
        self.allowed: Counter[str] = Counter()
        #: (watcher, "watcher" | "global") → events suppressed.
        self.suppressed: Counter[tuple[str, str]] = Counter()

    def _bucket(self, watcher: str, now: float) -> TokenBucket:
        b = self.buckets.get(watcher)
        if b is None:
            b = self.buckets[watcher] = TokenBucket(self._per_rate, self._per_burst, now)
        return b

    def allow(self, watcher: str) -> tuple[bool, str | None]:
        """(allowed, reason_if_not); reason is "watcher" or "global"."""
        now = self._mono()
        b = self._bucket(watcher, now)
        if b.available(now) < 1.0:
            self.suppressed[(watcher, "watcher")] += 1
            return False, "watcher"
        if not self.global_bucket.take(now):
            self.suppressed[(watcher, "global")] += 1
            return False, "global"
        b.take(now)
        self.allowed[watcher] += 1
        return True, None

    def snapshot(self) -> dict[str, object]:
        out: dict[str, dict[str, int]] = {}
        for (w, reason), n in self.suppressed.items():
            out.setdefault(w, {})[reason] = n
        return {"allowed": dict(self.allowed), "suppressed": out,
                "global_tokens": round(self.global_bucket.available(self._mono()), 2)}
