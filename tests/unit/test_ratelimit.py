"""The per-player bet budget: a token bucket per player, forgotten once full again."""

from __future__ import annotations

import time

import pytest

from livetable.server import ratelimit
from livetable.server.ratelimit import PlayerBuckets


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(ratelimit.time, "monotonic", c)  # type: ignore[attr-defined]
    return c


def test_a_player_gets_the_burst_then_the_rate(clock: Clock) -> None:
    buckets = PlayerBuckets(rate=5, burst=10)
    assert all(buckets.take("ann") for _ in range(10))
    assert not buckets.take("ann")
    assert buckets.take("bob")  # another player's budget is their own
    clock.now += 0.2  # one token back
    assert buckets.take("ann")
    assert not buckets.take("ann")


def test_a_spent_bucket_is_kept_and_a_full_one_forgotten(clock: Clock) -> None:
    buckets = PlayerBuckets(rate=5, burst=10, sweep_every=1)
    for _ in range(10):
        buckets.take("ann")
    buckets.take("bob")
    clock.now += 0.5  # bob is full again (1 token spent, 2.5 back); ann is not
    buckets.sweep()
    assert set(buckets.buckets) == {"ann"}
    assert sum(buckets.take("ann") for _ in range(10)) == 2  # sweeping refilled nothing
    clock.now += 10
    buckets.take("carol")  # a new key triggers the sweep
    assert set(buckets.buckets) == {"carol"}


def test_the_sweep_is_amortised_over_new_keys(clock: Clock) -> None:
    buckets = PlayerBuckets(rate=1, burst=1, sweep_every=4)
    for i in range(100):
        buckets.take(f"p{i}")  # each spends its only token: none may be forgotten
    assert len(buckets.buckets) == 100
    assert time.monotonic() == clock.now
