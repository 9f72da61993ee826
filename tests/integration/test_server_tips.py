"""Tips to the dealer against a real ``livetable serve`` (docs/protocol.md §3, tip): the
answer, the balance, a re-send answered as the first send and never paid twice, every
refusal's code, the dealer consoles told (and nobody else), the Bet Record; and an
operator's registry entry turning tips off, setting their range, its sessions' limits
holding them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from dealing import Dealer
from liveserver import TABLE, LiveServer, WireClient, close_all
from walletserver import launch_body, signed_post

Frame = dict[str, object]


async def tip(client: WireClient, tip_id: str, amount: object) -> Frame:
    """Send a tip; its answer (tip_accepted, or an error naming it)."""
    await client.send({"type": "tip", "tip_id": tip_id, "amount": amount})
    return await client.expect(lambda f: f.get("type") == "tip_accepted"
                               or (f.get("type") == "error" and f.get("tip_id") == tip_id[:64]),
                               timeout=10)


async def balance(client: WireClient) -> int:
    await client.send({"type": "get_balance"})
    return int((await client.expect("balance"))["balance"])


async def test_a_tip_is_taken_once_told_to_the_dealer_and_kept_in_the_bet_record(
        manual_server: LiveServer, dealer: Dealer) -> None:
    player_id = f"tipper-{uuid.uuid4().hex[:8]}"
    token = manual_server.player_token(player_id, "Tipper")

    player = await WireClient.connect(manual_server.ws, "player")
    viewer = await WireClient.connect(manual_server.ws, "viewer")
    try:
        welcome = await player.hello(token)
        await viewer.hello()
        assert welcome["player"]["tips"] == {"min": 10, "max": 5000}
        assert welcome["player"]["balance"] == 5000
        opened = await dealer.open_round()
        taken = await tip(player, "t-1", 100)
        assert taken == {"type": "tip_accepted", "tip_id": "t-1", "amount": 100,
                         "balance": 4900, "currency": None}
        told = await dealer.console.expect("tip_received")
        assert (told["table"], told["from"], told["amount"], told["currency"]) == (
            TABLE, "Tipper", 100, None)
        # sent again (an answer lost): the same answer, nothing taken twice, no news
        assert await tip(player, "t-1", 100) == taken
        assert await balance(player) == 4900
        refusals = {
            "duplicate_tip_id": await tip(player, "t-1", 200),
            "tip_out_of_range": await tip(player, "t-2", 9),
            "bad_tip_id": await tip(player, "", 100),
            "insufficient_funds": await tip(player, "t-3", 5000),
            "not_a_player": await tip(viewer, "t-4", 100),
        }
        for code, answer in refusals.items():
            assert answer["type"] == "error" and answer["code"] == code, (code, answer)
        assert "(from 10 to 5000)" in str(refusals["tip_out_of_range"]["message"])
        assert "(needs 5000, balance 4900)" in str(
            refusals["insufficient_funds"]["message"])
        # a bet of the round still deducts from what the tip left
        bet = await player.bet("b-1", str(opened["round_id"]), "P1", 100)
        assert bet["type"] == "bet_accepted" and bet["balance"] == 4700, bet
        # a tip's amount is a whole number: anything else is not a frame
        await player.send({"type": "tip", "tip_id": "t-5", "amount": 1.5})
        assert (await player.expect("error"))["code"] == "bad_frame"
        # the Bet Record: its bets as before, the tip beside them
        await player.send({"type": "get_bets"})
        record = await player.expect("bets")
        assert [b["bet_id"] for b in record["bets"]] == ["b-1"]
        assert [(t["tip_id"], t["amount"], t["table"], t["round_id"], t["balance_after"])
                for t in record["tips"]] == [("t-1", 100, TABLE, opened["round_id"], 4900)]
        await dealer.finish()
        await player.expect("bet_settled", bet_id="b-1")
        # one tip_received, to the dealer's console only
        await dealer.console.command("round_cards")
        assert len(dealer.console.of_type("tip_received")) == 1
        assert not player.of_type("tip_received") and not viewer.of_type("tip_received")
        # dealer commands from a player are still refused
        await player.send({"type": "open_betting"})
        assert (await player.expect("error"))["code"] == "not_a_dealer"
    finally:
        await close_all([player, viewer])
    page = manual_server.get("/api/bets", token).json()
    assert [t["tip_id"] for t in page["tips"]] == ["t-1"]
    assert [b["bet_id"] for b in page["bets"]] == ["b-1"]


REGISTRY = """\
[operators.acme]
name = "ACME Casino"
operator_secrets = ["env:ACME_OP"]
tips = false

[operators.bet7]
name = "Bet Seven"
operator_secrets = ["env:BET7_OP"]

[operators.bet7.currencies.THB]
chips = [500, 1000, 5000]
player = [1000, 500000]
pair = [1000, 100000]
round_max = 2000000
tip = [500, 20000]
"""


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("tips")
    registry = base / "operators.toml"
    registry.write_text(REGISTRY)
    server = LiveServer(base / "livetable", mode="manual", env={
        "ACME_OP": "acme-secret", "BET7_OP": "bet7-secret",
        "LIVETABLE_OPERATORS": str(registry), "LIVETABLE_PLAYER_BALANCE": "100000"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


def launched(server: LiveServer, operator: str, player_id: str, **fields: Any) -> str:
    answer = signed_post(server, "/api/operator/sessions", launch_body(player_id, **fields),
                         secret=f"{operator}-secret", operator=operator)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["token"])


def test_an_operator_turns_tips_off_and_its_sessions_limits_hold_them(
        platform: LiveServer) -> None:
    off = launched(platform, "acme", f"p-{uuid.uuid4().hex[:6]}")
    on = launched(platform, "bet7", f"p-{uuid.uuid4().hex[:6]}", limits={"loss_limit": 3000})

    async def scenario() -> None:
        acme = await WireClient.connect(platform.ws, "acme")
        bet7 = await WireClient.connect(platform.ws, "bet7")
        try:
            # tips off: the welcome says nothing of them (the page shows no tip button)
            assert "tips" not in (await acme.hello(off))["player"]
            refused = await tip(acme, "a-1", 1000)
            assert refused["code"] == "tips_off", refused
            player = (await bet7.hello(on))["player"]
            assert (player["tips"], player["currency"]) == ({"min": 500, "max": 20000}, "THB")
            assert (await tip(bet7, "b-0", 499))["code"] == "tip_out_of_range"
            # a tip counts as staked and lost: 3000 of loss in all
            assert (await tip(bet7, "b-1", 2000))["balance"] == 98_000
            past = await tip(bet7, "b-2", 1500)
            assert past["code"] == "rg_limit", past
            assert "(loss_limit: 1000 left of 3000)" in str(past["message"])
            assert (await tip(bet7, "b-3", 1000))["currency"] == "THB"
            assert (await tip(bet7, "b-4", 500))["code"] == "rg_limit"
            # a re-send of a tip taken is answered so, whatever the limit leaves now
            assert (await tip(bet7, "b-1", 2000))["type"] == "tip_accepted"
            assert await balance(bet7) == 97_000
        finally:
            await close_all([acme, bet7])

    asyncio.run(scenario())
