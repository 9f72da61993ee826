"""kill -9 of Redis itself in the middle of a round, and a restart from its AOF.

Redis runs with ``appendonly yes`` and ``appendfsync always``: what it acknowledged is on
disk when it dies. Everything of livetable loses its connections at once — the engines'
lease renewals and steps, the gateways' subscriptions and bet intake — and must come back on
its own once Redis is up again: the gateways' /readyz turns ready (their bus re-subscribed
and caught up from the event log), an engine holds the table's lease, and the round ends by
the recovery rule (cancelled and refunded, or settled if all its cards were recorded).

Clients may be closed on the way (as a real client, they reconnect and resume from the last
event they saw): each one ends in step — every event in order across its connections, or a
fresh snapshot — and no accepted bet is lost: each one is settled or refunded, once, in the
Bet Record and the balance, and the ledger's audit is clean.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from deployment import (
    GUEST_BALANCE,
    Deployment,
    Follower,
    place,
    record_says,
    running,
)
from liveserver import expected_settlement

pytestmark = [
    pytest.mark.redis,
]


@pytest.mark.parametrize(("phase", "down"), [("dealing", 0.0), ("betting", 3.0)])
async def test_redis_crash_mid_round(tmp_path: Path, phase: str, down: float) -> None:
    """Killed while cards are dealt (every 0.1 s: steps fail to commit) and restarted at
    once, the round goes on; killed while betting and kept down past the lease's 2 s, the
    table's lease lapses, and the engine that takes it cancels the round and refunds it."""
    async with running(tmp_path, engines=2, gateways=2,
                       env={"LIVETABLE_DEAL_INTERVAL": "0.1"}) as deployment:
        await redis_crash_mid_round(deployment, phase, down)


async def redis_crash_mid_round(deployment: Deployment, phase: str, down: float) -> None:
    gw1, gw2 = deployment.gateways
    token_a, _ = await deployment.guest(gw1)
    token_b, _ = await deployment.guest(gw2)
    a = Follower("A", token_a, gw1)
    b = Follower("B", token_b, gw2)
    viewer = Follower("viewer", None, gw2)
    followers = [a, b, viewer]
    try:
        for follower in followers:
            await follower.connect()
        opened = await a.expect("round_opened")
        round_id = opened["round_id"]
        bets_a = await place(a.current, round_id, [("P1", 100), ("P2_PAIR", 15)], "a")
        bets_b = await place(b.current, round_id, [("P5", 80), ("P1", 200)], "b")
        if phase == "dealing":
            await a.expect("card_dealt", round_id=round_id)
        table = (await deployment.http.get(gw1.http + "/api/tables/t1")).json()
        assert table["round_id"] == round_id
        at_kill = table["phase"]

        down_at = time.monotonic()
        deployment.redis.kill()
        if down:
            await asyncio.sleep(down)  # the length of the outage (nothing is asserted here)
        deployment.redis.restart()  # same port, same AOF
        outage = time.monotonic() - down_at
        for gateway in deployment.gateways:
            await deployment.wait_gateway_ready(gateway, timeout=15)
        ready_after = time.monotonic() - down_at
        await deployment.wait_holder(timeout=10)
        holder_after = time.monotonic() - down_at

        # each client stays (or comes back) and sees the round end and the next one open
        ends: dict[str, str] = {}
        for follower in followers:
            await follower.reconnect_if_closed()
            await follower.expect(lambda f: f.get("type") == "round_opened"
                                  and f["seq"] > opened["seq"], timeout=20)
        for follower in followers:
            follower.check_in_step()
            for client in follower.connections:
                for frame in client.frames:
                    if frame.get("round_id") == round_id and frame["type"] in (
                            "round_settled", "round_cancelled"):
                        ends[follower.name] = frame["type"]
        print(f"\nRedis kill -9 while {at_kill}: down {outage:.2f} s; gateways ready "
              f"{ready_after:.2f} s, lease held {holder_after:.2f} s after the kill; "
              f"round ended by {set(ends.values())}; connections per client "
              f"{[len(f.connections) for f in followers]}, close codes "
              f"{[f.close_codes for f in followers]}")

        view = (await deployment.http.get(f"{gw1.http}/api/rounds/{round_id}")).json()
        assert view["state"] in ("settled", "cancelled"), view
        if down:  # the lease lapsed: the recovery rule decides
            expected = "settled" if at_kill == "revealing" else "cancelled"
            assert view["state"] == expected, (at_kill, view)
        for name, end in ends.items():  # whoever saw the end saw the same end
            assert end == f"round_{view['state']}", (name, end, view)
        state = "refunded" if view["state"] == "cancelled" else "settled"
        for follower, gateway, token, bets in ((a, gw2, token_a, bets_a),
                                               (b, gw1, token_b, bets_b)):
            record = await record_says(deployment, gateway, token, bets, state)
            net = 0
            for entry in record:
                if state == "settled":
                    outcome, odds, cost, returned = expected_settlement(
                        view["cards"], entry["spot"], entry["amount"])
                    assert (entry["outcome"], entry["odds"], entry["deducted"],
                            entry["returned"]) == (outcome, odds, cost, returned), entry
                else:
                    assert entry["returned"] == entry["deducted"], entry
                net += entry["returned"] - entry["deducted"]
            assert await deployment.balance(gateway, token) == GUEST_BALANCE + net
            # the client heard of each bet's end, live or on resume, and of nothing else
            heard = follower.settlements()
            assert {b["bet_id"] for b in bets} <= set(heard), (heard, bets)
            for entry in record:
                assert heard[entry["bet_id"]]["returned"] == entry["returned"]
    finally:
        for follower in followers:
            await follower.close()
    report = await deployment.audit()
    assert report.ok, report.problems
    await deployment.check_event_log()
