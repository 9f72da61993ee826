"""Rate limits that outlive a connection, on the ``limits`` library.

What is limited, and keyed by what:

* bets, per player (``player_frames_per_second``) — kept by player id, so closing every
  socket and reconnecting does not refill it;
* Bet Record reads, per player on the websocket and per address on HTTP (the one costly
  read a client can ask for);
* the HTTP API, per client address (``api_rate``), and new demo guests per address.

``limits`` keeps the counters in memory with their own expiry (a player not seen for a
window costs nothing). In scale-out each gateway counts its own traffic: a player spread
over N gateways gets at most N times the rate, which the load balancer's affinity makes rare.

The per-connection frame budget stays a plain token bucket
(:class:`livetable.server.gateway.TokenBucket`): it lives and dies with one connection, sits
on the hot path of every frame, and needs no shared store or expiry.
"""

from __future__ import annotations

import time

from limits import RateLimitItem, parse, storage, strategies


class RateLimits:
    def __init__(self, *, bets_per_second: float, bet_record: str, api: str,
                 guests_per_minute: float) -> None:
        self._limiter = strategies.SlidingWindowCounterRateLimiter(storage.MemoryStorage())
        # bets: the rate, with a burst of two seconds' worth (as the token bucket had)
        self.bets = parse(f"{max(1, round(bets_per_second * 2))}/2 seconds")
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
