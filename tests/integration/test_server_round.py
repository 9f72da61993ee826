"""Whole rounds over the wire, on a real server: money, secrecy, privacy.

Given three players and a viewer at one table, and bets on all ten spots, every
``bet_settled`` and every final balance is what :func:`settle_bet` says for the cards the
``hand_revealed`` frames showed. No frame carries a card of a hand before that hand is
revealed, and no player hears another player's bets.

The test deals (:mod:`dealing`, a manual-mode server): each round opens once every client is
in and goes on the moment the bets are placed.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from dealing import Dealer
from liveserver import (
    HANDS,
    TABLE,
    LiveServer,
    WireClient,
    check_no_early_cards,
    close_all,
    deducted,
    expected_settlement,
    hands_from,
)

PRIVATE = ("bet_accepted", "bet_rejected", "bet_settled", "bets")


async def common_round(clients: list[WireClient]) -> dict[str, Any]:
    """A round that opens after every client is registered, so that all of them see it."""
    head = max(c.welcome["seq"] for c in clients if c.welcome is not None)
    first = await clients[0].expect(lambda f: f.get("type") == "round_opened"
                                    and f["seq"] > head)
    for client in clients[1:]:
        await client.expect("round_opened", round_id=first["round_id"])
    return first


async def guests(server: LiveServer, n: int) -> list[tuple[WireClient, str, dict[str, Any]]]:
    out = []
    for i in range(n):
        token, player = server.guest()
        client = await WireClient.connect(server.ws, f"player{i}")
        welcome = await client.hello(token)
        # the guest as /api/guest made it, and the tip range the table's limits give
        assert welcome["player"] == {**player, "tips": {"min": 10, "max": 5000}}
        assert welcome["resumed"] is False
        out.append((client, token, player))
    return out


async def test_full_round_three_players_ten_spots(manual_server: LiveServer,
                                                  dealer: Dealer) -> None:
    players = await guests(manual_server, 3)
    viewer = await WireClient.connect(manual_server.ws, "viewer")
    welcome = await viewer.hello()
    assert welcome["player"] is None and welcome["table"]["id"] == TABLE
    clients = [c for c, _, _ in players] + [viewer]
    try:
        await dealer.open_round()
        opened = await common_round(clients)
        round_id = opened["round_id"]
        plan = [
            [("P1", 100), ("P1_PAIR", 20), ("P2", 50), ("P2_PAIR", 10)],
            [("P3", 200), ("P3_PAIR", 30), ("P4", 70), ("P4_PAIR", 40)],
            [("P5", 500), ("P5_PAIR", 60), ("P1", 10)],
        ]
        assert {s for bets in plan for s, _ in bets} == {
            "P1", "P2", "P3", "P4", "P5", "P1_PAIR", "P2_PAIR", "P3_PAIR", "P4_PAIR", "P5_PAIR"}
        tag = uuid.uuid4().hex[:8]

        async def place(i: int) -> list[tuple[str, str, int]]:
            client, _, player = players[i]
            balance = player["balance"]
            placed = []
            for k, (spot, amount) in enumerate(plan[i]):
                bet_id = f"{tag}-p{i}-{k}"
                answer = await client.bet(bet_id, round_id, spot, amount)
                balance -= deducted(spot, amount)
                assert answer == {"type": "bet_accepted", "bet_id": bet_id,
                                  "round_id": round_id, "spot": spot, "amount": amount,
                                  "deducted": deducted(spot, amount), "balance": balance}
                placed.append((bet_id, spot, amount))
            return placed

        placed = await asyncio.gather(*(place(i) for i in range(3)))

        await dealer.finish()
        settled = await viewer.expect("round_settled", round_id=round_id)
        hands = hands_from(viewer.frames, round_id)
        assert sorted(hands) == sorted(HANDS)
        # the results the table announced are the rules' results for those cards
        for result in settled["results"]:
            outcome, odds, _, _ = expected_settlement(hands, result["hand"], 100)
            assert (result["outcome"], result["odds"]) == (outcome, odds), result

        for i, (client, token, player) in enumerate(players):
            # the balance a bet_settled carries is the player's balance after the round
            final = player["balance"] + sum(
                expected_settlement(hands, s, a)[3] - deducted(s, a) for _, s, a in placed[i])
            for bet_id, spot, amount in placed[i]:
                frame = await client.expect("bet_settled", bet_id=bet_id)
                outcome, odds, _, returned = expected_settlement(hands, spot, amount)
                assert frame == {"type": "bet_settled", "bet_id": bet_id, "round_id": round_id,
                                 "spot": spot, "amount": amount, "outcome": outcome,
                                 "odds": odds, "returned": returned, "balance": final}
            # every player saw the same cards as the viewer
            assert hands_from(client.frames, round_id) == hands
            # the Bet Record over HTTP, newest first, agrees to the unit
            record = manual_server.get("/api/bets?limit=50", token).json()
            entries = {e["bet_id"]: e for e in record["bets"]}
            assert len(entries) == len(placed[i]) and record["next"] is None
            for bet_id, spot, amount in placed[i]:
                e = entries[bet_id]
                outcome, odds, cost, returned = expected_settlement(hands, spot, amount)
                position = spot[:2]
                assert (e["state"], e["outcome"], e["odds"], e["deducted"], e["returned"],
                        e["net"]) == ("settled", outcome, odds, cost, returned, returned - cost)
                assert e["cards"] == hands[position] and e["banker_cards"] == hands["BANKER"]
                assert e["balance_after"] == final
            # a new connection's welcome shows the same final balance
            again = await WireClient.connect(manual_server.ws, "again")
            try:
                assert (await again.hello(token))["player"]["balance"] == final
            finally:
                await again.close()
        assert viewer.of_type(*PRIVATE) == []
    finally:
        await close_all(clients)


async def test_no_card_identity_before_its_reveal(manual_server: LiveServer,
                                                   dealer: Dealer) -> None:
    (player, _, _), = await guests(manual_server, 1)
    viewer = await WireClient.connect(manual_server.ws, "viewer")
    await viewer.hello()
    # a second dealer console, which only watches
    console = await WireClient.connect(manual_server.ws_dealer, "dealer")
    assert (await console.hello(manual_server.dealer_token()))["player"] is None
    clients = [player, viewer, console]
    late: WireClient | None = None
    try:
        await dealer.open_round()
        opened = await common_round(clients)
        round_id = opened["round_id"]
        for spot in ("P1", "P3_PAIR"):
            answer = await player.bet(f"{uuid.uuid4().hex}", round_id, spot, 10)
            assert answer["type"] == "bet_accepted"
        # a viewer who joins in the middle of the reveals gets the revealed hands only
        await dealer.deal()
        await dealer.close_betting()
        await dealer.reveal(2)
        await viewer.expect("hand_revealed", round_id=round_id, hand="P2")
        late = await WireClient.connect(manual_server.ws, "late")
        snap = (await late.hello())["table"]
        if snap["round_id"] == round_id and snap["phase"] == "revealing":
            shown = [h["hand"] for h in snap["hands"]]
            assert shown == HANDS[: len(shown)] and "BANKER" not in shown
        await dealer.reveal()
        for client in [*clients, late]:
            await client.expect("round_settled", round_id=round_id)
        await player.send({"type": "get_bets", "limit": 5})
        await player.expect("bets")
        view = manual_server.get(f"/api/rounds/{round_id}").json()
        truth = {round_id: view["cards"]}
        assert hands_from(viewer.frames, round_id) == view["cards"]
        for client in [*clients, late]:
            check_no_early_cards(client, truth)
    finally:
        await close_all([*clients, *([late] if late else [])])


async def test_players_never_hear_each_others_bets(manual_server: LiveServer,
                                                   dealer: Dealer) -> None:
    (alice, alice_token, _), (bob, _, _) = await guests(manual_server, 2)
    viewer = await WireClient.connect(manual_server.ws, "viewer")
    await viewer.hello()
    # alice's second tab, signed in: it hears alice's results too (same player)
    alice2 = await WireClient.connect(manual_server.ws, "alice2")
    await alice2.hello(alice_token)
    clients = [alice, bob, viewer, alice2]
    try:
        await dealer.open_round()
        opened = await common_round(clients)
        round_id = opened["round_id"]
        a_ok, a_low, b_ok = (f"alice-{uuid.uuid4().hex}", f"alice-{uuid.uuid4().hex}",
                             f"bob-{uuid.uuid4().hex}")
        assert (await alice.bet(a_ok, round_id, "P1", 100))["type"] == "bet_accepted"
        assert (await alice.bet(a_low, round_id, "P1", 5))["code"] == "below_min"
        assert (await bob.bet(b_ok, round_id, "P2", 50))["type"] == "bet_accepted"
        # a viewer has no money: its bet is refused, its Bet Record request too
        refused = await viewer.bet("viewer-bet", round_id, "P1", 10)
        assert refused["type"] == "bet_rejected" and refused["code"] == "not_a_player"
        await viewer.send({"type": "get_bets"})
        assert (await viewer.expect("error"))["code"] == "not_a_player"
        await dealer.finish()
        await alice.expect("bet_settled", bet_id=a_ok)
        await alice2.expect("bet_settled", bet_id=a_ok)
        await bob.expect("bet_settled", bet_id=b_ok)
        await viewer.expect("round_settled", round_id=round_id)
        # after bob's own result, nothing more of anyone's can be in flight for this round
        ids = {"alice": {a_ok, a_low}, "bob": {b_ok}, "viewer": {"viewer-bet"}}
        for client, own in ((alice, ids["alice"]), (bob, ids["bob"]),
                            (viewer, ids["viewer"]), (alice2, {a_ok})):
            for frame in client.of_type("bet_accepted", "bet_rejected", "bet_settled"):
                assert frame["bet_id"] in own, (client.name, frame)
            others = set().union(*ids.values()) - own
            assert not any(b in text for text in client.texts for b in others), client.name
        assert [f["bet_id"] for f in bob.of_type("bet_settled")] == [b_ok]
        assert [f["bet_id"] for f in alice2.of_type("bet_settled")] == [a_ok]
        assert alice2.of_type("bet_accepted", "bet_rejected") == []  # answers go to the asker
    finally:
        await close_all(clients)
