"""Disconnect and resume with ``{epoch, seq}`` on a real server.

The replay path: the server still holds every later event, so a resuming client gets
``resumed: true``, the missed events in order with no gap in ``seq``, then its own
``bet_settled`` of the rounds settled while it was away, then the live events.
The snapshot path: the server no longer holds them (the log is small here), or the epoch is
not the table's: ``resumed: false`` and a fresh snapshot. Either way the settled bet reaches
the player.

The test deals (:mod:`dealing`, manual-mode servers): it drops a client at the step it
chooses, and makes the live event a resumed client waits for, instead of a clock.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from dealing import Dealer, dealing
from liveserver import (
    LiveServer,
    WireClient,
    close_all,
    deducted,
    expected_settlement,
    hands_from,
)

Frame = dict[str, Any]
#: The small server's ring holds 5 events and its store 4 × 5 = 20 (one round is 21).
SMALL_LOG = 5


@pytest.fixture(scope="module")
def small_log_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("small-log"), mode="manual",
                        env={"LIVETABLE_EVENT_LOG_SIZE": str(SMALL_LOG)})
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def small_log(small_log_server: LiveServer) -> AsyncIterator[Dealer]:
    """The dealer of the small-log server."""
    async with dealing(small_log_server) as dealer:
        yield dealer


@pytest.fixture
async def short_queue(fresh_server: LiveServer) -> AsyncIterator[Dealer]:
    """The dealer of a manual server whose send queues hold 16 frames."""
    fresh_server.mode = "manual"
    fresh_server.start(env={"LIVETABLE_SEND_QUEUE": "16"})
    async with dealing(fresh_server) as dealer:
        yield dealer


async def join(server: LiveServer, name: str, token: str | None = None) -> WireClient:
    client = await WireClient.connect(server.ws, name)
    await client.hello(token)
    return client


async def common_round(clients: list[WireClient]) -> Frame:
    head = max(c.welcome["seq"] for c in clients if c.welcome is not None)
    first = await clients[0].expect(lambda f: f.get("type") == "round_opened"
                                    and f["seq"] > head)
    for client in clients[1:]:
        await client.expect("round_opened", round_id=first["round_id"])
    return first


async def resume_and_check_replay(server: LiveServer, token: str, point: Frame,
                                  viewer: WireClient, bets: list[tuple[str, str, int]],
                                  next_event: Callable[[], Awaitable[object]]
                                  ) -> tuple[WireClient, list[Frame]]:
    """Resume at ``point``; check the replay frame by frame against what ``viewer`` saw.

    ``next_event`` moves the table on (a dealer's step), for the first live event.
    """
    client = await WireClient.connect(server.ws, "resumer")
    welcome = await client.hello(token, resume=point)
    assert welcome["resumed"] is True, welcome
    assert welcome["epoch"] == point["epoch"]
    head = welcome["seq"]
    assert head > point["seq"]
    replay = [await client.next() for _ in range(head - point["seq"])]
    # every missed event, in order, no gap, no duplicate: exactly what the viewer saw live
    assert [f["seq"] for f in replay] == list(range(point["seq"] + 1, head + 1))
    seen_live = {f["seq"]: f for f in viewer.frames if "seq" in f and f["type"] != "welcome"}
    assert replay == [seen_live[f["seq"]] for f in replay]
    # then this player's results of the rounds settled while away, in the order of its bets
    results = [await client.next() for _ in bets]
    assert [f["type"] for f in results] == ["bet_settled"] * len(bets)
    assert [f["bet_id"] for f in results] == [b for b, _, _ in bets]
    # then the live events, from head + 1 on
    await next_event()
    live = await client.expect(lambda f: "seq" in f)
    assert live["seq"] == head + 1, live
    return client, replay + results


async def test_resume_replays_the_missed_events_then_the_results(
        manual_server: LiveServer, dealer: Dealer) -> None:
    a_token, a_player = manual_server.guest()
    b_token, b_player = manual_server.guest()
    alice = await join(manual_server, "alice", a_token)
    bob = await join(manual_server, "bob", b_token)
    viewer = await join(manual_server, "viewer")
    clients = [alice, bob, viewer]
    try:
        await dealer.open_round()
        round_id = (await common_round(clients))["round_id"]
        a_bets = [(f"a-{uuid.uuid4().hex}", "P1", 100), (f"a-{uuid.uuid4().hex}", "P1_PAIR", 10)]
        b_bets = [(f"b-{uuid.uuid4().hex}", "P2", 100)]
        for client, bets in ((alice, a_bets), (bob, b_bets)):
            for bet_id, spot, amount in bets:
                assert (await client.bet(bet_id, round_id, spot, amount))["type"] == \
                    "bet_accepted"
        # alice drops in the middle of the betting, bob in the middle of the reveals
        a_point = alice.resume_point()
        await alice.close()
        await dealer.deal()
        await dealer.close_betting()
        await dealer.reveal(1)
        await bob.expect("hand_revealed", round_id=round_id, hand="P1")
        b_point = bob.resume_point()
        await bob.close()
        await dealer.reveal()
        await viewer.expect("round_settled", round_id=round_id)
        await dealer.next_round()
        await dealer.deal(1)  # the burn card: no event
        await viewer.expect("round_opened")  # and the next round opens while they are away

        async def next_card() -> None:
            """The next card, face down: seen by the viewer before the next resume."""
            await dealer.deal(1)
            await viewer.expect("card_dealt")

        hands = hands_from(viewer.frames, round_id)
        for token, player, point, bets in ((a_token, a_player, a_point, a_bets),
                                           (b_token, b_player, b_point, b_bets)):
            client, frames = await resume_and_check_replay(manual_server, token, point,
                                                           viewer, bets, next_card)
            clients.append(client)
            final = player["balance"] + sum(expected_settlement(hands, s, a)[3] - deducted(s, a)
                                            for _, s, a in bets)
            for (bet_id, spot, amount), settled in zip(bets, frames[-len(bets):],
                                                       strict=True):
                outcome, odds, _, returned = expected_settlement(hands, spot, amount)
                assert settled == {"type": "bet_settled", "bet_id": bet_id,
                                   "round_id": round_id, "spot": spot, "amount": amount,
                                   "outcome": outcome, "odds": odds, "returned": returned,
                                   "balance": final}
            assert client.welcome is not None
            assert client.welcome["player"]["balance"] == final
    finally:
        await close_all(clients)


async def test_resume_from_the_store_when_the_ring_is_too_small(small_log: Dealer) -> None:
    """6 missed events: more than the gateway's ring of 5, fewer than the store's 20."""
    dealer = small_log
    server = dealer.server
    token, player = server.guest()
    alice = await join(server, "alice", token)
    viewer = await join(server, "viewer")
    clients = [alice, viewer]
    try:
        await dealer.open_round()
        round_id = (await common_round(clients))["round_id"]
        bet = (f"a-{uuid.uuid4().hex}", "P4", 50)
        assert (await alice.bet(bet[0], round_id, bet[1], bet[2]))["type"] == "bet_accepted"
        await dealer.deal()
        await dealer.close_betting()
        await dealer.reveal(1)
        await alice.expect("hand_revealed", round_id=round_id, hand="P1")
        point = alice.resume_point()
        await alice.close()
        await dealer.reveal()
        await viewer.expect("round_settled", round_id=round_id)
        client, frames = await resume_and_check_replay(server, token, point, viewer, [bet],
                                                       dealer.next_round)
        clients.append(client)
        assert len(frames) - 1 > SMALL_LOG
        hands = hands_from(viewer.frames, round_id)
        outcome, _, cost, returned = expected_settlement(hands, "P4", 50)
        assert (frames[-1]["outcome"], frames[-1]["returned"], frames[-1]["balance"]) == \
            (outcome, returned, player["balance"] - cost + returned)
    finally:
        await close_all(clients)


async def test_resume_older_than_the_log_gets_a_snapshot(small_log: Dealer) -> None:
    dealer = small_log
    server = dealer.server
    token, player = server.guest()
    alice = await join(server, "alice", token)
    viewer = await join(server, "viewer")
    clients = [alice, viewer]
    try:
        await dealer.open_round()
        round_id = (await common_round(clients))["round_id"]
        bet_id = f"a-{uuid.uuid4().hex}"
        assert (await alice.bet(bet_id, round_id, "P2", 100))["type"] == "bet_accepted"
        point = alice.resume_point()
        await alice.close()
        await dealer.finish()
        await viewer.expect("round_settled", round_id=round_id)
        # the next round's betting_closed: 34 events missed, more than the store's 20
        await dealer.next_round()
        await dealer.deal()
        await dealer.close_betting()
        await viewer.expect("betting_closed")

        hands = hands_from(viewer.frames, round_id)
        outcome, odds, cost, returned = expected_settlement(hands, "P2", 100)
        final = player["balance"] - cost + returned
        expected = {"type": "bet_settled", "bet_id": bet_id, "round_id": round_id, "spot": "P2",
                    "amount": 100, "outcome": outcome, "odds": odds, "returned": returned,
                    "balance": final}

        for name, resume in (("too old", point),
                             ("wrong epoch", {"epoch": point["epoch"] + 1, "seq": 3}),
                             ("from the future", {"epoch": point["epoch"],
                                                  "seq": point["seq"] + 10_000})):
            client = await WireClient.connect(server.ws, name)
            clients.append(client)
            welcome = await client.hello(token, resume=resume)
            assert welcome["resumed"] is False, name
            assert welcome["player"]["balance"] == final
            snap = welcome["table"]
            assert (snap["epoch"], snap["seq"]) == (welcome["epoch"], welcome["seq"])
            assert round_id in [r["round_id"] for r in snap["roadmap"]]
            # the result it missed still reaches it (it de-duplicates by bet_id) ...
            settled = await client.expect("bet_settled", bet_id=bet_id)
            assert settled == expected, name
            # ... and the live events go on from the snapshot's seq, no gap
            await dealer.reveal(1)
            live = await client.expect(lambda f: "seq" in f)
            assert live["seq"] == welcome["seq"] + 1, name
        # the Bet Record holds it, over the websocket and over HTTP
        await client.send({"type": "get_bets", "limit": 10})
        bets = (await client.expect("bets"))["bets"]
        http = server.get("/api/bets?limit=10", token).json()["bets"]
        for entries in (bets, http):
            assert [(e["bet_id"], e["state"], e["outcome"], e["returned"], e["balance_after"])
                    for e in entries] == [(bet_id, "settled", outcome, returned, final)]
    finally:
        await close_all(clients)


async def test_a_replay_too_big_for_the_send_queue_becomes_a_snapshot(
        short_queue: Dealer) -> None:
    """A round missed is 20 events; queued at once they would overflow a send queue of 16
    and close the client as too slow (4008) at every retry. It gets a snapshot instead."""
    dealer = short_queue
    server = dealer.server
    token, player = server.guest()
    alice = await join(server, "alice", token)
    viewer = await join(server, "viewer")
    clients = [alice, viewer]
    try:
        await dealer.open_round()
        round_id = (await common_round(clients))["round_id"]
        bet_id = f"a-{uuid.uuid4().hex}"
        assert (await alice.bet(bet_id, round_id, "P5", 100))["type"] == "bet_accepted"
        point = alice.resume_point()
        await alice.close()
        await dealer.finish()
        await viewer.expect("round_settled", round_id=round_id)
        hands = hands_from(viewer.frames, round_id)
        _, _, cost, returned = expected_settlement(hands, "P5", 100)
        for attempt in range(2):
            client = await WireClient.connect(server.ws, f"resumer{attempt}")
            clients.append(client)
            welcome = await client.hello(token, resume=point)
            assert welcome["resumed"] is False
            assert welcome["player"]["balance"] == player["balance"] - cost + returned
            settled = await client.expect("bet_settled", bet_id=bet_id)
            assert settled["returned"] == returned
            await client.send({"type": "ping", "t": attempt})
            assert (await client.expect("pong"))["t"] == attempt
            assert not client.closed.is_set()
    finally:
        await close_all(clients)
