"""A gateway goes away; its clients carry on at another one, without missing an event.

Gateways hold no state of their own: any gateway can resume any client. A client of the
lost gateway reconnects to the other one (as behind a load balancer) with ``resume`` =
the ``{epoch, seq}`` of the last event it saw; the other gateway replays what it missed
(``resumed: true``) and the client's events run on, seq after seq, identical to what a
client of the surviving gateway saw all along. Its bet, taken by the lost gateway, settles
as usual.

* ``kill -9``: the connection just drops (1006, no close frame);
* ``SIGTERM``: a graceful stop closes every websocket with 1012 (service restart:
  reconnect elsewhere and resume).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from deployment import (
    GUEST_BALANCE,
    Deployment,
    Follower,
    assert_same_frames,
    check_settled,
    place,
    record_says,
    running,
    table_events,
    wait_for,
)
from liveserver import WireClient, hands_from

pytestmark = [
    pytest.mark.redis,
]


@pytest.mark.parametrize("how", ["kill -9", "SIGTERM"])
async def test_clients_move_to_another_gateway(tmp_path: Path, how: str) -> None:
    async with running(tmp_path, engines=1, gateways=2) as deployment:
        await clients_move(deployment, how)


async def clients_move(deployment: Deployment, how: str) -> None:
    lost, other = deployment.gateways
    token, _ = await deployment.guest(lost)
    player = Follower("A", token, lost)
    viewer = Follower("viewer", None, lost)
    witness = await WireClient.connect(other.ws, "witness@other")  # sees it all, unmoved
    try:
        await player.connect()
        await viewer.connect()
        seen_from = (await witness.hello())["seq"]
        # a round the witness sees open too (a loaded run welcomed it after the player's
        # round_opened: the three streams then overlapped one event less than counted)
        opened = await player.expect(lambda f: f.get("type") == "round_opened"
                                     and f["seq"] > seen_from, timeout=60)
        round_id = opened["round_id"]
        bets = await place(player.current, round_id, [("P1", 100), ("P3_PAIR", 20),
                                                      ("P5", 45)], "a")
        await player.expect("hand_revealed", round_id=round_id, hand="P1")
        last_seen = player.current.resume_point()["seq"]

        if how == "kill -9":
            lost.kill()
        else:
            assert lost.process is not None
            lost.process.send_signal(signal.SIGTERM)
        codes = {await c.current.wait_closed() for c in (player, viewer)}
        assert codes == ({1006} if how == "kill -9" else {1012}), codes
        # the table moves on while they are away: let the witness see two more events
        await wait_for(lambda: _past(witness, player.current.resume_point()["seq"] + 2),
                       10, "events after the gateway was lost")

        for follower in (player, viewer):
            welcome = await follower.connect(other)
            assert welcome["resumed"] is True, welcome
            assert welcome["seq"] > follower.connections[0].resume_point()["seq"]
        await player.expect("round_settled", round_id=round_id)
        for bet in bets:
            await player.expect("bet_settled", bet_id=bet["bet_id"])
        following = await witness.expect(lambda f: f.get("type") == "round_opened"
                                         and f["seq"] > opened["seq"])
        for follower in (player, viewer):
            await follower.expect("round_opened", round_id=following["round_id"])
            assert follower.check_in_step() == [False, True]  # no gap across the switch
            moved = table_events(follower.connections[1])
            assert moved[0][0] == follower.connections[0].resume_point()["seq"] + 1
        assert player.connections[0].resume_point()["seq"] >= last_seen
        # what they got, before and after the switch, is what the witness got
        witnessed = table_events(witness)
        assert assert_same_frames(player.events(), viewer.events(), witnessed) >= (
            following["seq"] - opened["seq"] + 1)

        hands = hands_from(witness.frames, round_id)
        net = check_settled(bets, player.settlements(), hands)
        await record_says(deployment, other, token, bets, "settled")
        assert await deployment.balance(other, token) == GUEST_BALANCE + net
    finally:
        await player.close()
        await viewer.close()
        await witness.close()
    report = await deployment.audit()
    assert report.ok, report.problems
    await deployment.check_event_log()


async def _past(client: WireClient, seq: int) -> bool | None:
    events = table_events(client)
    return True if events and events[-1][0] >= seq else None
