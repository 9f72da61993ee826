"""kill -9 of a real server in the middle of a round, then a restart on the same data.

The engine's recovery rule decides: a round killed before all its cards were recorded
(betting, dealing) is cancelled and every bet refunded in full; a round killed while its
hands were being revealed is resumed and settled. Either way the player's balance says so,
and a resuming client gets the outcome replayed from the store's event log.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from liveserver import (
    HANDS,
    LiveServer,
    WireClient,
    close_all,
    deducted,
    expected_settlement,
    hands_from,
)

Frame = dict[str, Any]
FAST = {"LIVETABLE_DEAL_INTERVAL": "0.02"}


async def bet_all(client: WireClient, round_id: str, bets: list[tuple[str, int]]
                  ) -> list[tuple[str, str, int]]:
    placed = []
    for spot, amount in bets:
        bet_id = f"{spot}-{uuid.uuid4().hex[:8]}"
        answer = await client.bet(bet_id, round_id, spot, amount)
        assert answer["type"] == "bet_accepted", answer
        placed.append((bet_id, spot, amount))
    return placed


async def replay_after_restart(server: LiveServer, token: str, point: Frame) -> WireClient:
    client = await WireClient.connect(server.ws, "after-restart")
    welcome = await client.hello(token, resume=point)
    # the epoch survives the restart and the store still holds every later event
    assert welcome["resumed"] is True and welcome["epoch"] == point["epoch"]
    return client


@pytest.mark.parametrize("phase", ["betting", "dealing"])
async def test_kill_before_all_cards_are_out_cancels_and_refunds(
        fresh_server: LiveServer, phase: str) -> None:
    server = fresh_server
    if phase == "betting":
        server.start(betting_seconds=30)  # still betting when it dies
    else:
        server.start(env={"LIVETABLE_DEAL_INTERVAL": "1"})  # a card a second
    token, player = server.guest()
    client = await WireClient.connect(server.ws, "before")
    clients = [client]
    try:
        welcome = await client.hello(token)
        table = welcome["table"]
        # the first round may have opened before this client said hello (a slow start): bet
        # on it if it has time left, rather than wait a whole round for the next
        open_for = (table.get("closes_at") or 0) - welcome["server_time"]
        round_id = (table["round_id"] if table["phase"] == "betting" and open_for > 5_000
                    else (await client.expect("round_opened", timeout=60))["round_id"])
        placed = await bet_all(client, round_id, [("P1", 100), ("P5_PAIR", 20), ("P3", 250)])
        cost = sum(deducted(s, a) for _, s, a in placed)
        if phase == "dealing":  # betting closed with a few of the thirteen cards out
            await client.expect("betting_closed", round_id=round_id)
        elif not (round_id == table.get("round_id")  # every card out face down, bets
                  and table.get("dealt", {}).get("BANKER", 0) == 2):  # still open: not a
            # round to finish either. The banker's second card may be out before the welcome
            # already (a round opened >2 s before the hello, on a loaded machine): the
            # snapshot says so, and waiting for its card_dealt waited for a frame long sent.
            await client.expect("card_dealt", round_id=round_id, to="BANKER", n=2)
        assert server.get("/api/tables/t1").json()["phase"] == phase
        point = client.resume_point()

        server.kill()
        assert await client.wait_closed() == 1006  # dropped, no closing handshake
        server.start(betting_seconds=2, env=FAST)

        after = await replay_after_restart(server, token, point)
        clients.append(after)
        frames = await after.take_until("round_cancelled", round_id=round_id)
        seqs = [f["seq"] for f in frames]
        assert seqs == list(range(point["seq"] + 1, point["seq"] + 1 + len(seqs)))
        assert "restarted" in frames[-1]["reason"]
        assert not [f for f in frames if f["type"] == "hand_revealed"]
        for bet_id, spot, amount in placed:
            refund = await after.expect("bet_settled", bet_id=bet_id)
            assert (refund["outcome"], refund["odds"], refund["returned"]) == \
                ("refund", 0, deducted(spot, amount))
        assert after.of_type("bet_settled")[-1]["balance"] == player["balance"]
        assert cost > 0
        # the balance in a fresh welcome, the Bet Record and the round say the same
        fresh = await WireClient.connect(server.ws, "fresh")
        clients.append(fresh)
        assert (await fresh.hello(token))["player"]["balance"] == player["balance"] == 10_000
        record = server.get("/api/bets", token).json()["bets"]
        assert sorted((e["bet_id"], e["state"], e["returned"], e["net"]) for e in record) == \
            sorted((b, "refunded", deducted(s, a), 0) for b, s, a in placed)
        view = server.get(f"/api/rounds/{round_id}").json()
        assert view["state"] == "cancelled" and "restarted" in view["reason"]
        # and the table deals on: a new round on the same shoe
        nxt = await after.expect("round_opened")
        assert nxt["round_id"] != round_id and nxt["shoe_id"] == round_id.rsplit(".", 1)[0]
    finally:
        await close_all(clients)


async def test_kill_during_the_reveals_resumes_and_settles(fresh_server: LiveServer) -> None:
    server = fresh_server
    # time enough to kill it between two reveals (15 s after P1's: a doubly loaded run
    # read P1's reveal so late that the round had settled before its kill at 3 s a reveal)
    server.start(reveal_interval=5)
    token, player = server.guest()
    client = await WireClient.connect(server.ws, "before")
    clients = [client]
    try:
        await client.hello(token)
        # (a round's six reveals take 30 s: welcomed during them, the next round opens
        # after more than the default wait)
        round_id = (await client.expect("round_opened", timeout=90))["round_id"]
        placed = await bet_all(client, round_id, [("P1", 100), ("P2", 40), ("P3", 30),
                                                  ("P4", 20), ("P5", 10), ("P1_PAIR", 10),
                                                  ("P4_PAIR", 10)])
        first = await client.expect("hand_revealed", round_id=round_id, hand="P1")
        point = client.resume_point()
        server.kill()
        await client.wait_closed()
        # nothing of this round settled before the kill (a client welcomed during the round
        # before saw that one settle: a loaded run's start)
        assert not [f for f in client.of_type("round_settled", "bet_settled")
                    if f["round_id"] == round_id]
        server.start(reveal_interval=0.2, env=FAST)

        after = await replay_after_restart(server, token, point)
        clients.append(after)
        frames = await after.take_until("round_settled", round_id=round_id)
        assert [f["seq"] for f in frames] == list(range(point["seq"] + 1,
                                                        point["seq"] + 1 + len(frames)))
        assert not after.of_type("round_cancelled")
        hands = {"P1": first["cards"], **hands_from(frames, round_id)}
        assert sorted(hands) == sorted(HANDS)
        # the cards dealt before the crash are the ones revealed after it
        assert server.get(f"/api/rounds/{round_id}").json()["cards"] == hands
        final = player["balance"] + sum(expected_settlement(hands, s, a)[3] - deducted(s, a)
                                        for _, s, a in placed)
        for bet_id, spot, amount in placed:
            settled = await after.expect("bet_settled", bet_id=bet_id)
            outcome, odds, _, returned = expected_settlement(hands, spot, amount)
            assert (settled["outcome"], settled["odds"], settled["returned"],
                    settled["balance"]) == (outcome, odds, returned, final), spot
        fresh = await WireClient.connect(server.ws, "fresh")
        clients.append(fresh)
        assert (await fresh.hello(token))["player"]["balance"] == final
        record = server.get("/api/bets", token).json()["bets"]
        assert {e["bet_id"]: (e["state"], e["returned"]) for e in record} == {
            b: ("settled", expected_settlement(hands, s, a)[3]) for b, s, a in placed}
    finally:
        await close_all(clients)
