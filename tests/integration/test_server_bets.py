"""The bet rules over the wire, on a real server: the countdown, the balance, and the
``bet_id`` as the client's idempotency key across a reconnect.

The test deals (:mod:`dealing`, a manual-mode server): a round opens when the test is
ready for it and settles when its bets are in, with no wait for a clock.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from dealing import Dealer, dealing
from liveserver import (
    PLAYER_BALANCE,
    LiveServer,
    WireClient,
    deducted,
    expected_settlement,
    hands_from,
)


@pytest.fixture
async def small_purse(fresh_server: LiveServer) -> AsyncIterator[Dealer]:
    """The dealer of a manual server whose operator's players start with 500."""
    fresh_server.mode = "manual"
    fresh_server.start(env={"LIVETABLE_PLAYER_BALANCE": str(PLAYER_BALANCE)})
    async with dealing(fresh_server) as dealer:
        yield dealer


async def test_a_bet_after_the_countdown_is_rejected(manual_server: LiveServer,
                                                     dealer: Dealer) -> None:
    token, player = manual_server.guest()
    client = await WireClient.connect(manual_server.ws, "late-bettor")
    try:
        welcome = await client.hello(token)
        await dealer.open_round(betting_ms=1_000)  # the shortest countdown: the clock closes
        opened = await client.expect(lambda f: f.get("type") == "round_opened"
                                     and f["seq"] > welcome["seq"])
        closed = await client.expect("betting_closed", round_id=opened["round_id"])
        assert closed["seq"] > opened["seq"]
        answer = await client.bet("too-late", opened["round_id"], "P1", 100)
        assert answer["type"] == "bet_rejected" and answer["code"] == "betting_closed"
        # a round that is not this table's (or not open) is refused too
        unknown = await client.bet("nowhere", "t9.9.9", "P1", 100)
        assert unknown["code"] == "unknown_round"
    finally:
        await client.close()
    record = manual_server.get("/api/bets", token).json()  # (and the totals of no day)
    assert (record["bets"], record["next"], record["days"]) == ([], None, {})
    again = await WireClient.connect(manual_server.ws)
    try:
        assert (await again.hello(token))["player"]["balance"] == player["balance"] == 10_000
    finally:
        await again.close()


async def test_a_bet_over_the_balance_is_rejected_and_takes_nothing(
        small_purse: Dealer) -> None:
    dealer = small_purse
    server = dealer.server
    # an operator's player, minted by ``livetable token``; LIVETABLE_PLAYER_BALANCE funds it
    player_id = f"p-{uuid.uuid4().hex[:8]}"
    token = server.player_token(player_id, "Somchai")
    client = await WireClient.connect(server.ws, "somchai")
    try:
        welcome = await client.hello(token)
        assert welcome["player"] == {"id": player_id, "name": "Somchai",
                                     "balance": PLAYER_BALANCE,
                                     "tips": {"min": 10, "max": 5000}}  # the table's limits
        await dealer.open_round()
        opened = await client.expect(lambda f: f.get("type") == "round_opened"
                                     and f["seq"] > welcome["seq"])
        round_id = opened["round_id"]
        # 300 on P1 deducts 600 (bet + withholding) > 500
        answer = await client.bet("too-big", round_id, "P1", 300)
        assert answer["type"] == "bet_rejected" and answer["code"] == "insufficient_funds"
        assert "600" in answer["message"] and "500" in answer["message"]
        # nothing was taken: exactly the whole balance can still be bet
        answer = await client.bet("all-in", round_id, "P1", 250)
        assert answer == {"type": "bet_accepted", "bet_id": "all-in", "round_id": round_id,
                          "spot": "P1", "amount": 250, "deducted": 500, "balance": 0}
        answer = await client.bet("one-more", round_id, "P1_PAIR", 10)
        assert answer["code"] == "insufficient_funds"
        await dealer.finish()
        settled = await client.expect("bet_settled", bet_id="all-in")
        hands = hands_from(client.frames, round_id)
        outcome, odds, cost, returned = expected_settlement(hands, "P1", 250)
        assert cost == 500
        assert (settled["outcome"], settled["odds"], settled["returned"], settled["balance"]) \
            == (outcome, odds, returned, returned)
    finally:
        await client.close()
    record = server.get("/api/bets", token).json()
    assert [e["bet_id"] for e in record["bets"]] == ["all-in"]
    assert record["bets"][0]["balance_after"] == returned


async def test_the_same_bet_id_after_a_reconnect_is_taken_once(
        manual_server: LiveServer, dealer: Dealer) -> None:
    token, player = manual_server.guest()
    start = player["balance"]
    first = await WireClient.connect(manual_server.ws, "first")
    second: WireClient | None = None
    bet_id = f"retry-{uuid.uuid4().hex}"
    try:
        welcome = await first.hello(token)
        await dealer.open_round()
        opened = await first.expect(lambda f: f.get("type") == "round_opened"
                                    and f["seq"] > welcome["seq"])
        round_id = opened["round_id"]
        accepted = await first.bet(bet_id, round_id, "P3", 100)
        assert accepted == {"type": "bet_accepted", "bet_id": bet_id, "round_id": round_id,
                            "spot": "P3", "amount": 100, "deducted": 200,
                            "balance": start - 200}
        resume = first.resume_point()
        await first.close()  # the connection drops; did the bet get through? retry it

        second = await WireClient.connect(manual_server.ws, "second")
        again = await second.hello(token, resume=resume)
        assert again["player"]["balance"] == start - 200
        assert await second.bet(bet_id, round_id, "P3", 100) == accepted  # the same answer
        for spot, amount, other_round in (("P3", 200, round_id), ("P4", 100, round_id),
                                          ("P3", 100, "t1.0.0")):
            answer = await second.bet(bet_id, other_round, spot, amount)
            assert answer["type"] == "bet_rejected" and answer["code"] == "duplicate_bet_id"
        # one deduction only: the next bet starts from start - 200
        pair = await second.bet(f"pair-{uuid.uuid4().hex}", round_id, "P3_PAIR", 10)
        assert pair["type"] == "bet_accepted" and pair["balance"] == start - 210

        await dealer.finish()
        settled = await second.expect("bet_settled", bet_id=bet_id)
        await second.expect("bet_settled", bet_id=pair["bet_id"])
        hands = hands_from(second.frames, round_id)
        _, _, _, returned = expected_settlement(hands, "P3", 100)
        _, _, _, pair_returned = expected_settlement(hands, "P3_PAIR", 10)
        assert settled["returned"] == returned
        assert settled["balance"] == start - 210 + returned + pair_returned
        await dealer.next_round()
        await second.expect("round_opened")  # the next round: no second settlement came
        assert [f["bet_id"] for f in second.of_type("bet_settled")].count(bet_id) == 1
    finally:
        await first.close()
        if second is not None:
            await second.close()
    record = manual_server.get("/api/bets", token).json()["bets"]
    assert sorted(e["bet_id"] for e in record) == sorted([bet_id, pair["bet_id"]])
    assert [e["deducted"] for e in record if e["bet_id"] == bet_id] == [deducted("P3", 100)]


async def test_a_bet_slip_is_taken_whole_or_not_at_all(manual_server: LiveServer,
                                                       dealer: Dealer) -> None:
    token, player = manual_server.guest()
    start = player["balance"]
    client = await WireClient.connect(manual_server.ws, "slip")
    slip_id = f"slip-{uuid.uuid4().hex}"
    try:
        welcome = await client.hello(token)
        await dealer.open_round()
        opened = await client.expect(lambda f: f.get("type") == "round_opened"
                                     and f["seq"] > welcome["seq"])
        round_id = opened["round_id"]
        # one bet of three below the minimum: the slip is refused, nothing is taken
        refused = await client.slip(slip_id, round_id, [("s-a", "P1", 100), ("s-b", "P2", 1),
                                                        ("s-c", "P2_PAIR", 10)])
        assert refused == {"type": "slip_rejected", "slip_id": slip_id, "code": "below_min",
                           "bet_id": "s-b", "message": refused["message"]}
        bets = [("s-a", "P1", 100), ("s-b", "P2", 50), ("s-c", "P2_PAIR", 10)]
        taken = await client.slip(slip_id, round_id, bets)
        assert taken == {
            "type": "slip_accepted", "slip_id": slip_id, "round_id": round_id,
            "bets": [{"bet_id": "s-a", "spot": "P1", "amount": 100, "deducted": 200},
                     {"bet_id": "s-b", "spot": "P2", "amount": 50, "deducted": 100},
                     {"bet_id": "s-c", "spot": "P2_PAIR", "amount": 10, "deducted": 10}],
            "deducted": 310, "balance": start - 310}
        assert await client.slip(slip_id, round_id, bets) == taken  # a retry: once
        other = await client.slip(slip_id, round_id, bets[:1])
        assert other["code"] == "duplicate_slip_id"
        await dealer.finish()
        for bet_id in ("s-a", "s-b", "s-c"):
            await client.expect("bet_settled", bet_id=bet_id)
    finally:
        await client.close()
    record = manual_server.get("/api/bets", token).json()["bets"]
    assert sorted(e["bet_id"] for e in record) == ["s-a", "s-b", "s-c"]
