"""Two gateways and two engines, each a process of its own, on one Redis.

Whichever gateway a client reached, it sees the same table: the same events in the same
order, and for the same seq the very same bytes (the engine encodes each event once; the
gateways only pass it on). Bets taken by either gateway go into the one ledger and settle
by :func:`~livetable.rules.settle_bet` on the cards the clients saw revealed; a player
connected to both gateways hears of its results on both.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from deployment import (
    GUEST_BALANCE,
    Deployment,
    assert_in_order,
    assert_same_frames,
    check_settled,
    place,
    record_says,
    running,
    settlements,
    table_events,
)
from liveserver import all_joined, close_all, hands_from

pytestmark = [
    pytest.mark.redis,
]


async def test_clients_of_two_gateways_see_one_table(tmp_path: Path) -> None:
    async with running(tmp_path, engines=2, gateways=2) as deployment:
        await one_table_everywhere(deployment)


async def one_table_everywhere(deployment: Deployment) -> None:
    gw1, gw2 = deployment.gateways
    token_a, _ = await deployment.guest(gw1)
    token_b, _ = await deployment.guest(gw2)
    # each connection says hello as soon as it is upgraded (its timeout runs from there)
    joins = await all_joined((gw1.ws, "A@gw1", token_a),
                             (gw2.ws, "A@gw2", token_a),  # the same player on the other one
                             (gw2.ws, "B@gw2", token_b), (gw1.ws, "viewer@gw1", None))
    (a1, _), (a2, _), (b2, _), (viewer, _) = joins
    welcomes = [welcome for _, welcome in joins]
    clients = [a1, a2, b2, viewer]
    try:
        # a round every client sees open: one that opens after the last welcome
        seen_by_all = max(welcome["seq"] for welcome in welcomes)
        opened = await a1.expect(lambda f: f.get("type") == "round_opened"
                                 and f["seq"] > seen_by_all)
        round_id = opened["round_id"]
        await b2.expect("round_opened", round_id=round_id)
        bets_a = await place(a1, round_id, [("P1", 100), ("P2_PAIR", 20), ("P4", 35)], "a1")
        bets_a += await place(a2, round_id, [("P3", 70)], "a2")  # A again, via gw2
        bets_b = await place(b2, round_id, [("P1", 50), ("P5", 250), ("P5_PAIR", 10)], "b2")
        for client in clients:
            await client.expect("round_settled", round_id=round_id)
        for client, bets in ((a1, bets_a), (a2, bets_a), (b2, bets_b)):
            for bet in bets:
                await client.expect("bet_settled", bet_id=bet["bet_id"])
        round_opened_seq = opened["seq"]
        # one more event after the settlement, so both streams run past the round
        next_round = await viewer.expect(lambda f: f.get("type") == "round_opened"
                                         and f["seq"] > opened["seq"])
        for client in (a1, a2, b2):
            await client.expect("round_opened", round_id=next_round["round_id"])

        streams = [table_events(c) for c in clients]
        for stream in streams:
            assert_in_order(stream)
        overlap = assert_same_frames(*streams)
        assert overlap >= next_round["seq"] - round_opened_seq + 1  # the whole round, at least

        hands = hands_from(viewer.frames, round_id)
        assert sorted(hands) == ["BANKER", "P1", "P2", "P3", "P4", "P5"]
        net_a = check_settled(bets_a, settlements(a1), hands)
        assert settlements(a1) == settlements(a2)  # A's results reached it on both gateways
        net_b = check_settled(bets_b, settlements(b2), hands)
        balance_a = GUEST_BALANCE + net_a
        balance_b = GUEST_BALANCE + net_b
        # each gateway's answer is the ledger's: the Bet Record, the balance in a welcome
        for gateway in (gw1, gw2):
            await record_says(deployment, gateway, token_a, bets_a, "settled")
            await record_says(deployment, gateway, token_b, bets_b, "settled")
            assert await deployment.balance(gateway, token_a) == balance_a
            assert await deployment.balance(gateway, token_b) == balance_b
        assert a1.of_type("bet_settled")[-1]["balance"] == balance_a
        assert b2.of_type("bet_settled")[-1]["balance"] == balance_b
    finally:
        await close_all(clients)
    report = await deployment.audit()
    assert report.ok, report.problems
    await deployment.check_event_log()
    assert report.deposits == 2 * GUEST_BALANCE
