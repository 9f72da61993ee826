"""The Redis bus's watchdog: a subscription that goes quiet, or is killed, is replaced.

Pub/sub is at-most-once: what is published while a gateway's subscription is dead is gone
for that gateway. The gateway must (a) notice — even when the connection is not closed but
merely silent, as a half-open TCP connection is — and (b) fill the hole from the table's
event log before live events flow again, so that its clients never skip an event.

Gateway 1 reaches Redis through a proxy of the test (:class:`~deployment.RedisProxy`).

1. The proxy swallows everything on gateway 1's subscription from the moment betting closes
   — without closing it. The round is dealt, revealed and settled meanwhile. The watchdog
   PINGs every second, hears nothing for 3 s, re-subscribes (a new connection, which the
   proxy lets through; /metrics counts ``livetable_redis_reconnects_total``) and catches up
   from the log: its clients get the missed events in order (or are closed with 4011 and
   resume), and the player its ``bet_settled``.
2. ``CLIENT KILL TYPE pubsub`` on Redis while hands are revealed: both gateways lose their
   subscription outright and come back the same way.

Throughout, the clients of gateway 1 end with exactly the frames a client of gateway 2 saw,
and the money is exact.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from deployment import (
    GUEST_BALANCE,
    Deployment,
    Follower,
    RedisProxy,
    assert_same_frames,
    check_settled,
    place,
    record_says,
    table_events,
    wait_for,
)
from liveserver import WireClient, hands_from
from redis_util import start_redis

pytestmark = [
    pytest.mark.redis,
]

RECONNECTS = "livetable_redis_reconnects_total"


@pytest.fixture
async def deployment(tmp_path: Path) -> AsyncIterator[tuple[Deployment, RedisProxy]]:
    redis = start_redis(tmp_path / "redis", appendonly=True)
    proxy = await RedisProxy(redis.port).start()
    deployment = Deployment(tmp_path, redis, engines=1, gateways=2,
                            redis_urls={"gateway1": proxy.url})
    try:
        await deployment.start()
        yield deployment, proxy
    finally:
        await deployment.close()
        await proxy.close()
        redis.kill()


async def reconnects_above(deployment: Deployment, gateway_index: int, count: float
                           ) -> float | None:
    value = await deployment.metric(deployment.gateways[gateway_index], RECONNECTS)
    return value if value > count else None


async def test_silent_or_killed_subscription_is_replaced(
        deployment: tuple[Deployment, RedisProxy]) -> None:
    d, proxy = deployment
    gw1, gw2 = d.gateways
    token, _ = await d.guest(gw1)
    player = Follower("A", token, gw1)
    viewer = Follower("viewer", None, gw1)
    witness = await WireClient.connect(gw2.ws, "witness@gw2")
    all_bets: list[dict[str, object]] = []
    balance = GUEST_BALANCE
    try:
        await player.connect()
        await viewer.connect()
        seen_from = (await witness.hello())["seq"]
        assert await d.metric(gw1, RECONNECTS) == 0

        # 1. a silent subscription, from the close of betting to past the settlement, in a
        # round the witness sees open too (a loaded run welcomed it after the player's first
        # round_opened: the three streams then overlapped fewer events than counted)
        first = await player.expect(lambda f: f.get("type") == "round_opened"
                                    and f["seq"] > seen_from, timeout=60)
        round_id = first["round_id"]
        bets = await place(player.current, round_id, [("P1", 100), ("P2_PAIR", 10)], "s")
        await player.expect("betting_closed", round_id=round_id)
        assert proxy.silence_subscriptions() == 1  # gateway 1's, and only that
        await witness.expect("round_settled", round_id=round_id)  # settled while silent
        assert [f for f in viewer.current.frames if f.get("type") == "round_settled"
                and f["round_id"] == round_id] == []
        count = await wait_for(lambda: reconnects_above(d, 0, 0), 10,
                               "gateway 1 to re-subscribe")
        assert count == 1
        assert proxy.silenced_still_open() == 1  # it was never closed: only silent
        await player.expect("round_settled", round_id=round_id, timeout=10)
        for bet in bets:
            await player.expect("bet_settled", bet_id=bet["bet_id"], timeout=10)
        balance += check_settled(bets, player.settlements(),
                                 hands_from(witness.frames, round_id))
        all_bets += bets

        # 2. the subscriptions killed outright, while hands are revealed
        opened = await player.expect(lambda f: f.get("type") == "round_opened"
                                     and f["seq"] > first["seq"])
        round_id = opened["round_id"]
        bets = await place(player.current, round_id, [("P5", 200)], "k")
        await player.expect("hand_revealed", round_id=round_id, hand="P2")
        before = [await d.metric(g, RECONNECTS) for g in (gw1, gw2)]
        killed = await d.redis_command("CLIENT", "KILL", "TYPE", "pubsub")
        assert int(killed) == 3  # both gateways', and the proxy's silenced leftover
        for i, gateway in enumerate((gw1, gw2)):
            await wait_for(lambda i=i: reconnects_above(d, i, before[i]), 10,  # type: ignore[misc]
                           f"gateway {i + 1} to re-subscribe")
            await d.wait_gateway_ready(gateway)
        await player.expect("round_settled", round_id=round_id)
        for bet in bets:
            await player.expect("bet_settled", bet_id=bet["bet_id"])
        # gateway 2 catches up on its own time: its client has the whole round when settled
        await witness.expect("round_settled", round_id=round_id)
        balance += check_settled(bets, player.settlements(),
                                 hands_from(witness.frames, round_id))
        all_bets += bets

        # in step: no gap, the same frames as gateway 2's client, each result once
        following = await witness.expect(lambda f: f.get("type") == "round_opened"
                                         and f["seq"] > opened["seq"])
        for follower in (player, viewer):
            await follower.expect("round_opened", round_id=following["round_id"])
            follower.check_in_step()
        assert assert_same_frames(player.events(), viewer.events(), table_events(witness)) \
            >= following["seq"] - first["seq"] + 1
        assert len(player.settlements()) == len(all_bets)
        if len(player.connections) == 1:  # (a resume may repeat results; clients de-dupe)
            assert len(player.current.of_type("bet_settled")) == len(all_bets)
        await record_says(d, gw2, token, all_bets, "settled")
        assert await d.balance(gw1, token) == balance
        print(f"\nwatchdog: close codes {player.close_codes} {viewer.close_codes}; "
              f"connections {len(player.connections)} {len(viewer.connections)}")
    finally:
        await player.close()
        await viewer.close()
        await witness.close()
    report = await d.audit()
    assert report.ok, report.problems
    await d.check_event_log()
