"""The table chat across two gateways on one Redis: a line said on one is heard on the
other, the last 50 and the presenter are the same from either, and a player's rate window
and a console's mute hold on both (they live in Redis, not in a gateway). A tip to the
dealer travels the same way, to the dealer consoles only."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from deployment import running
from liveserver import WireClient, all_joined, close_all

pytestmark = [pytest.mark.redis]


async def say(client: WireClient, msg_id: str, text: str) -> dict[str, Any]:
    await client.send({"type": "chat_send", "client_msg_id": msg_id, "text": text})
    return await client.expect(lambda f: f.get("type") in ("chat_accepted", "chat_rejected")
                               and f.get("client_msg_id") == msg_id, timeout=10)


async def test_chat_goes_from_one_gateway_to_the_other(tmp_path: Path) -> None:
    async with running(tmp_path, engines=1, gateways=2) as deployment:
        gw1, gw2 = deployment.gateways
        token_a, _ = await deployment.guest(gw1)
        # each connection says hello as soon as it is upgraded (its hello timeout runs from
        # there: connected all first, the first waited for the others' upgrades, over 5 s
        # on a loaded run)
        (a1, _), (a2, _), (viewer2, _), (console2, _) = await all_joined(
            (gw1.ws, "A@gw1", token_a),
            (gw2.ws, "A@gw2", token_a),  # the same player on the other one
            (gw2.ws, "viewer@gw2", None),
            (gw2.ws_dealer, "console@gw2", gw2.dealer_token(name="Dee")))
        clients = [a1, a2, viewer2, console2]
        try:

            sent = await say(a1, "a1", "hello from gateway 1")
            assert sent["type"] == "chat_accepted"
            line = await viewer2.expect("chat", id=sent["id"])
            assert line["text"] == "hello from gateway 1" and "player_id" not in line
            staff = await console2.expect("chat", id=sent["id"])
            # the rate window is the player's, whichever gateway takes the next line
            assert (await say(a2, "a2", "and from 2"))["code"] == "rate_limited"

            answer = await console2.command("chat_mute", player_id=staff["player_id"],
                                            minutes=1)
            assert answer["type"] == "ack"
            await a1.expect("chat", role="system")  # said on gw2, heard on gw1
            await asyncio.sleep(2.1)  # past the rate window: the mute answers
            assert (await say(a1, "a3", "still here?"))["code"] == "muted"

            answer = await console2.command("chat_delete", id=sent["id"])
            assert answer["detail"]["kept"] is True
            await a1.expect("chat_deleted", id=sent["id"])
            await console2.command("dealer_sign_in", name="Mai")
            assert (await a1.expect("dealer_changed"))["name"] == "Mai"

            # the last 50 and the presenter, from the other gateway's welcome
            late = await WireClient.connect(gw1.ws, "late@gw1")
            clients.append(late)
            welcome = await late.hello()
            assert [m["text"] for m in welcome["chat"]] == ["A player was muted for 1 min."]
            assert welcome["dealer"] == {"name": "Mai", "photo": None}
            # capped at 50, and nothing of it in the ledger's keys
            assert await deployment.redis_command("XLEN", "lt:table:{t1}:chat") == 1
            ledger_keys = await deployment.redis_command("KEYS", "lt:{ledger}:*chat*")
            assert ledger_keys == []
            for i in range(55):
                assert (await say(console2, f"d{i}", f"line {i}"))["type"] == "chat_accepted"
            assert await deployment.redis_command("XLEN", "lt:table:{t1}:chat") == 50
            later = await WireClient.connect(gw1.ws, "later@gw1")
            clients.append(later)
            lines = (await later.hello())["chat"]
            assert [m["text"] for m in lines] == [f"line {i}" for i in range(5, 55)]
        finally:
            await close_all(clients)


async def test_a_tip_on_one_gateway_reaches_the_dealer_console_on_the_other(
        tmp_path: Path) -> None:
    async with running(tmp_path, engines=1, gateways=2) as deployment:
        gw1, gw2 = deployment.gateways
        token, _ = await deployment.guest(gw1)
        (player, welcome), (viewer2, _), (console2, _) = await all_joined(
            (gw1.ws, "player@gw1", token), (gw2.ws, "viewer@gw2", None),
            (gw2.ws_dealer, "console@gw2", gw2.dealer_token(name="Dee")))
        clients = [player, viewer2, console2]
        try:
            name = welcome["player"]["name"]
            await player.send({"type": "tip", "tip_id": "t-1", "amount": 50})
            taken = await player.expect("tip_accepted")
            assert taken["amount"] == 50
            told = await console2.expect("tip_received")
            assert (told["amount"], told["from"]) == (50, name)
            # players and viewers never hear of it: a chat line said after it is the next
            # frame they get
            sent = await say(player, "c1", "after the tip")
            await viewer2.expect("chat", id=sent["id"])
            assert not viewer2.of_type("tip_received") and not player.of_type("tip_received")
        finally:
            await close_all(clients)
