"""Manual mode: a dealer console drives the table over ``/ws/dealer`` on a real server.

The dealer starts a shoe, reads its opening card, opens and closes the betting, feeds the
13 cards of the round as the scanner reads them (the server says which slot each went to)
and paces the reveals. Given the cards of the seed's examples, a player's bets come back as
:func:`settle_bet` says — Example 9's Player bet of 100 returns 400.
"""

from __future__ import annotations

import uuid
from typing import Any

from dealing import between_rounds
from liveserver import (
    HANDS,
    LiveServer,
    WireClient,
    check_no_early_cards,
    close_all,
    deducted,
    expected_settlement,
)

Frame = dict[str, Any]

# burn, then P1 … P5, Banker twice (docs/design.md §1's dealing order)
BURN = "2C"
FIRST = ["10C", "KH", "AS", "5D", "2S", "9D"]
SECOND = ["10H", "9H", "KS", "5C", "3H", "7C"]
HAND_CARDS = {h: [a, b] for h, a, b in zip(HANDS, FIRST, SECOND, strict=True)}


async def open_shoe(dealer: WireClient, server: LiveServer, opening: str) -> None:
    await between_rounds(dealer, server)
    ack = await dealer.command("start_shoe")
    assert ack == {"type": "ack", "cmd": "start_shoe", "detail": {"awaiting": "opening card"}}
    # no round before the shoe's opening card is read
    assert (await dealer.command("open_betting"))["code"] == "no_shoe"
    ack = await dealer.command("card", card=opening)
    burned = 10 if opening[:-1] in ("10", "J", "Q", "K") else int(
        {"A": "1"}.get(opening[:-1], opening[:-1]))
    assert ack == {"type": "ack", "cmd": "card",
                   "detail": {"slot": "opening", "burned": burned}}
    # the event goes out before the ack (the step is stored and announced, then answered)
    started = dealer.of_type("shoe_started")[-1]
    assert (started["burn_card"], started["burned"]) == (opening, burned)


async def connect_all(server: LiveServer, balance_id: str
                      ) -> tuple[WireClient, WireClient, WireClient, str]:
    dealer_token = server.dealer_token()
    dealer = await WireClient.connect(server.ws_dealer, "dealer")
    welcome = await dealer.hello(dealer_token)
    assert welcome["player"] is None and welcome["table"]["mode"] == "manual"
    token = server.player_token(balance_id, "Malee")
    player = await WireClient.connect(server.ws, "player")
    assert (await player.hello(token))["player"]["balance"] == 5000
    viewer = await WireClient.connect(server.ws, "viewer")
    await viewer.hello()
    return dealer, player, viewer, token


async def test_a_manual_round_from_the_dealer_console(manual_server: LiveServer) -> None:
    server = manual_server
    dealer, player, viewer, token = await connect_all(server, f"m-{uuid.uuid4().hex[:8]}")
    # an operator's player whose id happens to be the dealer token's subject ("dealer"):
    # its private frames are its own, not the dealer console's
    namesake = await WireClient.connect(server.ws, "namesake")
    await namesake.hello(server.player_token("dealer", "Dee"))
    clients = [dealer, player, viewer, namesake]
    try:
        await open_shoe(dealer, server, "5S")
        ack = await dealer.command("open_betting", betting_ms=60_000)
        assert ack["type"] == "ack" and ack["cmd"] == "open_betting"
        opened = await player.expect("round_opened")
        round_id = opened["round_id"]
        await viewer.expect("round_opened", round_id=round_id)
        # reveals wait for the close; bad commands are refused, nothing changes
        for cmd, fields, code in (("reveal", {}, "illegal_command"),
                                  ("start_shoe", {}, "illegal_command"),
                                  ("card", {"card": 5}, "bad_frame"),
                                  ("deal_me_a_flush", {}, "bad_frame"),
                                  ("open_betting", {"betting_ms": 10}, "illegal_command")):
            error = await dealer.command(cmd, **fields)
            assert (error["type"], error["code"]) == ("error", code), (cmd, error)

        # The dealer deals the round face down while the countdown runs (the sheet's order).
        slots = []
        for card in [BURN, *FIRST, *SECOND]:
            ack = await dealer.command("card", card=card)
            assert ack["type"] == "ack" and ack["cmd"] == "card", ack
            slots.append(ack["detail"])
        assert slots == [{"slot": "burn"},
                         *({"slot": h, "n": 1} for h in HANDS),
                         *({"slot": h, "n": 2} for h in HANDS)]
        assert (await dealer.command("card", card="4H"))["code"] == "all_dealt"
        assert (await dealer.command("reveal"))["code"] == "illegal_command"  # bets still open
        dealt = [(f["to"], f["n"]) for f in await viewer.take_until("card_dealt", to="BANKER",
                                                                      n=2)
                 if f["type"] == "card_dealt"]
        assert dealt == [(h, 1) for h in HANDS] + [(h, 2) for h in HANDS]
        assert server.get("/api/tables/t1").json()["phase"] == "betting"

        # Bets are still taken with every card on the table, face down.
        bets = [("P1", 100), ("P2", 100), ("P3", 100), ("P4_PAIR", 50), ("P5", 20),
                ("P1_PAIR", 10)]
        for spot, amount in bets:
            answer = await player.bet(f"{spot}-{uuid.uuid4().hex[:6]}", round_id, spot, amount)
            assert answer["type"] == "bet_accepted", answer
        assert (await namesake.bet("namesake", round_id, "P5", 10))["type"] == "bet_accepted"
        assert (await dealer.command("close_betting"))["cmd"] == "close_betting"
        await viewer.expect("betting_closed", round_id=round_id)
        late = await player.bet("late", round_id, "P1", 10)
        assert late["code"] == "betting_closed"
        assert server.get("/api/tables/t1").json()["phase"] == "revealing"

        for hand in HANDS:
            assert (await dealer.command("reveal"))["cmd"] == "reveal"
            shown = await viewer.expect("hand_revealed", round_id=round_id)
            assert (shown["hand"], shown["cards"]) == (hand, HAND_CARDS[hand])
        assert (await dealer.command("reveal"))["code"] == "illegal_command"
        settled = await viewer.expect("round_settled", round_id=round_id)
        assert [(r["hand"], r["outcome"], r["odds"]) for r in settled["results"]] == [
            ("P1", "win", 1), ("P2", "win", 2), ("P3", "win", 1), ("P4", "win", 1),
            ("P5", "lose", 1)]

        # settle_bet on the revealed cards; and the seed's figures, written out
        by_spot = {}
        for _ in bets:
            frame = await player.expect("bet_settled")
            by_spot[frame["spot"]] = frame
        returned = {spot: expected_settlement(HAND_CARDS, spot, amount)[3]
                    for spot, amount in bets}
        assert returned == {"P1": 300, "P2": 400, "P3": 300, "P4_PAIR": 600, "P5": 20,
                            "P1_PAIR": 120}
        final = 5000 - sum(deducted(s, a) for s, a in bets) + sum(returned.values())
        assert final == 6040
        for spot, amount in bets:
            outcome, odds, _, back = expected_settlement(HAND_CARDS, spot, amount)
            frame = by_spot[spot]
            assert (frame["outcome"], frame["odds"], frame["returned"], frame["balance"]) == \
                (outcome, odds, back, final), spot
        view = server.get(f"/api/rounds/{round_id}").json()
        assert view["state"] == "settled" and view["cards"] == HAND_CARDS
        entries = server.get("/api/bets", token).json()["bets"]
        assert {e["spot"]: e["returned"] for e in entries} == returned
        for client in clients:
            check_no_early_cards(client, {round_id: HAND_CARDS})
        await namesake.expect("bet_settled", bet_id="namesake")
        assert dealer.of_type("bet_accepted", "bet_settled") == []
    finally:
        await close_all(clients)


async def test_impossible_card_pause_resume_cancel_refunds(manual_server: LiveServer) -> None:
    server = manual_server
    dealer, player, viewer, token = await connect_all(server, f"m-{uuid.uuid4().hex[:8]}")
    clients = [dealer, player, viewer]
    try:
        await open_shoe(dealer, server, "KH")  # the first K♥ of eight (and it burns 10)
        assert (await dealer.command("open_betting", betting_ms=60_000))["type"] == "ack"
        round_id = (await player.expect("round_opened"))["round_id"]
        # paused while betting: bets wait; resumed: at least 5 s of betting come back
        assert (await dealer.command("pause", reason="camera"))["type"] == "ack"
        assert (await viewer.expect("table_paused"))["reason"] == "camera"
        assert (await player.bet("while-paused", round_id, "P1", 10))["code"] == "paused"
        assert (await dealer.command("resume"))["type"] == "ack"
        resumed = await player.expect("table_resumed")
        await player.send({"type": "ping"})
        server_time = (await player.expect("pong"))["server_time"]
        assert resumed["closes_at"] - server_time > 4_000  # ~59 s left of the 60
        bets = [("P1", 100), ("P2_PAIR", 30)]
        for spot, amount in bets:
            assert (await player.bet(f"{spot}-{uuid.uuid4().hex[:6]}", round_id, spot,
                                     amount))["type"] == "bet_accepted"
        assert (await dealer.command("close_betting"))["type"] == "ack"
        for _ in range(7):  # K♥ number 2 … 8: the burn, then P1 … Banker (after the close)
            assert (await dealer.command("card", card="KH"))["type"] == "ack"
        # a ninth K♥ cannot come out of eight decks: refused, and the table pauses
        error = await dealer.command("card", card="KH")
        assert error["type"] == "error" and error["code"] == "impossible_card"
        assert "KH" in error["message"]
        paused = await viewer.expect("table_paused")
        assert "KH" in paused["reason"]
        table = server.get("/api/tables/t1").json()
        assert (table["phase"], table["resume_phase"]) == ("paused", "dealing")
        assert (await dealer.command("card", card="2C"))["code"] == "illegal_command"

        ack = await dealer.command("resume")
        assert ack["type"] == "ack" and ack["cmd"] == "resume"
        await viewer.expect("table_resumed")
        ack = await dealer.command("card", card="2C")  # dealing goes on where it was
        assert ack["detail"] == {"slot": "P1", "n": 2}
        assert (await dealer.command("pause", reason="shuffle check"))["type"] == "ack"
        assert (await viewer.expect("table_paused"))["reason"] == "shuffle check"
        assert (await dealer.command("pause"))["code"] == "illegal_command"
        ack = await dealer.command("cancel_round", reason="misdeal")
        assert ack["type"] == "ack" and ack["cmd"] == "cancel_round"
        cancelled = await viewer.expect("round_cancelled")
        assert cancelled["round_id"] == round_id and cancelled["reason"] == "misdeal"

        # every bet comes back in full: stake and withholding
        for spot, amount in bets:
            frame = await player.expect("bet_settled", spot=spot)
            assert (frame["outcome"], frame["odds"], frame["returned"]) == \
                ("refund", 0, deducted(spot, amount))
        assert player.of_type("bet_settled")[-1]["balance"] == 5000
        view = server.get(f"/api/rounds/{round_id}").json()
        assert (view["state"], view["reason"]) == ("cancelled", "misdeal")
        record = server.get("/api/bets", token).json()["bets"]
        assert sorted((e["spot"], e["state"], e["outcome"], e["returned"], e["net"])
                      for e in record) == [("P1", "refunded", "refund", 200, 0),
                                           ("P2_PAIR", "refunded", "refund", 30, 0)]
        again = await WireClient.connect(server.ws)
        clients.append(again)
        assert (await again.hello(token))["player"]["balance"] == 5000
        # the table goes on: the next round opens on the same shoe
        assert (await dealer.command("open_betting", betting_ms=60_000))["type"] == "ack"
        assert (await viewer.expect("round_opened"))["round_id"] != round_id
        assert (await dealer.command("cancel_round", reason="end of test"))["type"] == "ack"
        for client in clients:
            check_no_early_cards(client, {})
    finally:
        await close_all(clients)


async def test_next_round_opens_by_itself_after_the_set_pause(fresh_server: LiveServer
                                                              ) -> None:
    """``--next-round-after``: in manual mode the next round opens by itself — after the
    shoe's opening card, and after each round — but never into a new shoe."""
    server = fresh_server
    server.mode = "manual"
    server.args = ["--next-round-after", "1"]
    server.start(betting_seconds=30)
    token = server.dealer_token()
    dealer = await WireClient.connect(server.ws_dealer, "dealer")
    try:
        await dealer.hello(token)
        assert (await dealer.command("start_shoe"))["type"] == "ack"
        assert server.get("/api/tables/t1").json()["opens_at"] is None  # not before the card
        assert (await dealer.command("card", card="AS"))["type"] == "ack"
        opens_at = server.get("/api/tables/t1").json()["opens_at"]
        assert isinstance(opens_at, int)
        first = await dealer.expect("round_opened", timeout=10)  # nobody pressed open
        for card in [BURN, *FIRST, *SECOND]:
            assert (await dealer.command("card", card=card))["type"] == "ack"
        assert (await dealer.command("close_betting"))["type"] == "ack"
        for _ in HANDS:
            assert (await dealer.command("reveal"))["type"] == "ack"
        # (command() consumed the frames up to each answer: the history has them)
        assert [f["round_id"] for f in dealer.of_type("round_settled")] == [first["round_id"]]
        second = await dealer.expect("round_opened", timeout=10)
        assert second["round_no"] == first["round_no"] + 1
        # the cut card: this round is the shoe's last, and no round opens into a new shoe
        assert (await dealer.command("card", card="CUT"))["detail"]["last_round"] is True
        assert (await dealer.command("cancel_round", reason="end of shoe"))["type"] == "ack"
        table = server.get("/api/tables/t1").json()
        assert (table["phase"], table["opens_at"]) == ("cancelled", None)
    finally:
        await dealer.close()
