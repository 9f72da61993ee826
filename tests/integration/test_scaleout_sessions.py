"""Scale-out: an operator ends a session through one gateway, and its connections on every
gateway close at once (the end is kept in PostgreSQL, then announced on the bus); a session's
figures are the same on every gateway."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from deployment import running
from liveserver import WireClient, all_joined, close_all
from walletserver import OPERATOR_SECRET, launch, signed_post

pytestmark = [
    pytest.mark.redis,
]


async def test_an_ended_session_closes_on_both_gateways_at_once(tmp_path: Path) -> None:
    async with running(tmp_path, engines=1, gateways=2,
                       env={"LIVETABLE_OPERATOR_SECRET": OPERATOR_SECRET}) as deployment:
        gw1, gw2 = deployment.gateways
        session = await asyncio.to_thread(launch, gw1, "p-scale")
        other = await asyncio.to_thread(launch, gw2, "p-scale")
        # each connection says hello as soon as it is upgraded (its timeout runs from there)
        (on1, _), (on2, _), (stays, _) = await all_joined(
            (gw1.ws, "on gw1", session["token"]), (gw2.ws, "on gw2", session["token"]),
            (gw2.ws, "other session on gw2", other["token"]))
        clients = [on1, on2, stays]
        try:
            answer = await asyncio.to_thread(
                signed_post, gw2, f"/api/operator/sessions/{session['session_id']}/end",
                {"reason": "account_closed"})
            assert answer.status_code == 200, answer.text
            for client in (on1, on2):
                ended = await client.expect("session_ended", timeout=5)
                assert ended["reason"] == "account_closed"
                assert await client.wait_closed(timeout=5) == 4002
            # the other session of the same player is not ended, on either gateway
            await asyncio.sleep(0.3)
            assert not stays.closed.is_set()
            # and the token is refused at every gateway's door, whichever ended it
            for gateway in (gw1, gw2):
                again = await WireClient.connect(gateway.ws, "again")
                clients.append(again)
                await again.send({"type": "hello", "v": 1, "table": "t1",
                                  "token": session["token"]})
                assert (await again.expect("session_ended"))["reason"] == "account_closed"
                assert await again.wait_closed() == 4002
                record = await deployment.http.get(
                    gateway.http + "/api/bets",
                    headers={"Authorization": f"Bearer {session['token']}"})
                assert record.status_code == 401
                assert record.json()["error"]["code"] == "session_ended"
        finally:
            await close_all(clients)


async def test_a_sessions_stakes_count_on_every_gateway(tmp_path: Path) -> None:
    async with running(tmp_path, engines=1, gateways=2,
                       env={"LIVETABLE_OPERATOR_SECRET": OPERATOR_SECRET}) as deployment:
        gw1, gw2 = deployment.gateways
        await deployment.deposit("p-two", 50000)
        session = await asyncio.to_thread(launch, gw1, "p-two",
                                          limits={"max_stake_per_round": 3000})
        (on1, _), (on2, _) = await all_joined((gw1.ws, "on gw1", session["token"]),
                                              (gw2.ws, "on gw2", session["token"]))
        try:
            round_id = (await on1.expect("round_opened", timeout=20))["round_id"]
            taken = await on1.bet("g1", round_id, "P1", 1000)  # stakes 2000 of 3000
            assert taken["type"] == "bet_accepted", taken
            # the other gateway judges by the same figures
            over = await on2.bet("g2", round_id, "P2", 1000)
            assert over["code"] == "rg_limit", over
            assert "max_stake_per_round: 1000 left of 3000" in over["message"]
            assert (await on2.bet("g3", round_id, "P2", 500))["type"] == "bet_accepted"
        finally:
            await close_all([on1, on2])
