"""Rate limits that outlive a connection, on the ``limits`` library.

What is limited, and keyed by what:

* bets, per player (``player_frames_per_second``, a burst of two seconds' worth) — kept by
  player id, so closing every socket and reconnecting does not refill it;
* Bet Record reads, per player on the websocket and per address on HTTP (the one costly
  read a client can ask for);
* the HTTP API, per client address (``api_rate``), and new demo guests per address.

``limits`` keeps the counters in memory with their own expiry (a player not seen for a
window costs nothing). In scale-out each gateway counts its own traffic: a player spread
over N gateways gets at most N times the rate, which the load balancer's affinity makes rare.

Two budgets sit on the hot path of every frame and are plain token buckets
(:class:`TokenBucket`) instead: the per-connection frame budget (it lives and dies with one
connection and needs no store or expiry) and the per-player bet budget
(:class:`PlayerBuckets`). The reason is measured: in a 20,000-bet burst (``bench/run.py
--only profile``) ``limits``' in-memory sliding window cost about 65 µs per bet — its
storage takes a lock and checks its expiry thread on every hit, which also waits for the
GIL held by the SQLite writer — a quarter of the process's CPU per bet. A bucket costs
about 1 µs.
"""

from __future__ import annotations

import time

from limits import RateLimitItem, parse, storage, strategies


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up; one per :meth:`take`."""

    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.capacity = burst
        self.tokens = burst
        self.stamp = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def full_at(self) -> float:
        """When (``time.monotonic``) this bucket is full again, as a new one would be."""
        return self.stamp + (self.capacity - self.tokens) / self.rate


class PlayerBuckets:
    """One :class:`TokenBucket` per key, forgotten once it is full again (a key not seen
    for a while costs nothing, and a forgotten bucket is exactly a new one)."""

    def __init__(self, rate: float, burst: float, *, sweep_every: int = 4096) -> None:
        self.rate = rate
        self.burst = burst
        self.buckets: dict[str, TokenBucket] = {}
        self._sweep_every = sweep_every
        self._until_sweep = sweep_every

    def take(self, key: str) -> bool:
        bucket = self.buckets.get(key)
        if bucket is None:
            self._until_sweep -= 1
            if self._until_sweep <= 0:
                self.sweep()
            bucket = self.buckets[key] = TokenBucket(self.rate, self.burst)
        return bucket.take()

    def sweep(self) -> None:
        """Forget the buckets that are full again."""
        now = time.monotonic()
        self.buckets = {k: b for k, b in self.buckets.items() if b.full_at() > now}
        self._until_sweep = max(self._sweep_every, len(self.buckets))


class RateLimits:
    def __init__(self, *, bets_per_second: float, bet_record: str, api: str,
                 guests_per_minute: float) -> None:
        self._limiter = strategies.SlidingWindowCounterRateLimiter(storage.MemoryStorage())
        self.bets = PlayerBuckets(bets_per_second, max(1.0, bets_per_second * 2))
        self.bet_record = parse(bet_record)
        self.api = parse(api)
        self.guests = (parse(f"{max(1, round(guests_per_minute))}/minute")
                       if guests_per_minute > 0 else None)

    def allow(self, item: RateLimitItem | None, *key: str) -> bool:
        """Count one hit of ``item`` for ``key``; False if it is over its limit."""
        return item is None or self._limiter.hit(item, *key)

    def retry_after(self, item: RateLimitItem, *key: str) -> int:
        """Whole seconds until ``key`` may try ``item`` again (at least 1)."""
        stats = self._limiter.get_window_stats(item, *key)
        return max(1, int(stats.reset_time - time.time()) + 1)
