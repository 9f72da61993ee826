"""Scale-out: a player's phone on one gateway and laptop on another (the load balancer's
choice). A bet taken on the phone's gateway shows its balance on the laptop at once — it
showed only at the round's results, where a connection on the same gateway heard it at
once. The gateway that took it names the player on the bus (one message a turn of its
loop); the other reads the balance and tells its connections of that player."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from deployment import running
from liveserver import all_joined, close_all
from walletserver import OPERATOR_SECRET, launch

pytestmark = [
    pytest.mark.redis,
]


async def test_a_bet_on_one_gateway_shows_its_balance_on_the_players_other_gateway(
        tmp_path: Path) -> None:
    # six seconds of betting: both bets go in one round, with the balance's trip between
    # them, on a loaded run too
    async with running(tmp_path, engines=1, gateways=2, betting_seconds=6,
                       env={"LIVETABLE_OPERATOR_SECRET": OPERATOR_SECRET}) as deployment:
        gw1, gw2 = deployment.gateways
        await deployment.deposit("p-two", 50000)
        phone_session = await asyncio.to_thread(launch, gw1, "p-two")
        laptop_session = await asyncio.to_thread(launch, gw2, "p-two")
        someone_session = await asyncio.to_thread(launch, gw2, "p-else")
        (phone, _), (laptop, _), (someone, _) = await all_joined(
            (gw1.ws, "phone on gw1", phone_session["token"]),
            (gw2.ws, "laptop on gw2", laptop_session["token"]),
            (gw2.ws, "someone else on gw2", someone_session["token"]))
        try:
            round_id = (await phone.expect("round_opened", timeout=20))["round_id"]
            taken = await phone.bet("b1", round_id, "P1", 1000)
            assert taken["type"] == "bet_accepted", taken
            seen = await laptop.take_until("balance", timeout=5)
            assert seen[-1]["balance"] == taken["balance"] == 50000 - 2000
            # before the round's results, not with them
            assert not [f for f in seen if f.get("type") in ("bet_settled", "round_settled")
                        and f.get("round_id") == round_id]
            # and the other way round
            again = await laptop.bet("b2", round_id, "P2", 500)
            assert again["type"] == "bet_accepted", again
            heard = await phone.expect("balance", timeout=5)
            assert heard["balance"] == again["balance"] == 50000 - 3000
            # someone else on gw2 heard no balance of theirs
            await someone.send({"type": "ping", "t": 1})
            assert not [f for f in await someone.take_until("pong")
                        if f.get("type") == "balance"]
        finally:
            await close_all([phone, laptop, someone])
