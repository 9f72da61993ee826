"""kill -9 of the engine that drives the table; the standby engine takes over.

Two engines run; one holds table t1's lease (its /readyz lists it in ``leases_held``). It is
killed without warning, its lease lapses (2 s), and the standby — polling every 0.5 s —
takes the table, rebuilds the engine from the store and applies the recovery rule:

* killed while betting: the round cannot go on (its cards were never dealt), so it is
  cancelled and every bet refunded in full — including a bet taken by a gateway after the
  engine had died (gateways take bets straight into the ledger);
* killed while revealing: every card is recorded, so the round goes on from the next hand
  and settles by the rules.

Either way each bet ends settled or refunded exactly once (the client's private frames, the
Bet Record, the balance), the event numbering goes on without a gap, and the ledger's audit
finds nothing wrong. The measured takeover times are printed (run with ``-s``).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from deployment import (
    GUEST_BALANCE,
    Deployment,
    assert_in_order,
    assert_same_frames,
    check_refunded,
    check_settled,
    place,
    record_says,
    running,
    settlements,
    table_events,
)
from liveserver import HANDS, all_joined, close_all, hands_from

pytestmark = [
    pytest.mark.redis,
]

#: The lease lives 2 s and a standby looks every 0.5 s: a takeover within 2.5 s of the
#: kill, plus the time to rebuild the engine. Allow some slack for a loaded machine.
TAKEOVER_LIMIT = 5.0


@pytest.mark.parametrize("phase", ["betting", "revealing"])
async def test_standby_engine_takes_over(tmp_path: Path, phase: str) -> None:
    # betting: 3 s, to kill well inside it; revealing: hands 0.6 s apart, so that the kill
    # lands among the reveals
    betting, reveal = (3, 0.2) if phase == "betting" else (2, 0.6)
    async with running(tmp_path, engines=2, gateways=2, betting_seconds=betting,
                       reveal_interval=reveal) as deployment:
        await standby_takes_over(deployment, phase)


async def standby_takes_over(deployment: Deployment, phase: str) -> None:
    gw1, gw2 = deployment.gateways
    token_a, _ = await deployment.guest(gw1)
    token_b, _ = await deployment.guest(gw2)
    # each connection says hello as soon as it is upgraded (its timeout runs from there)
    (a, _), (b, welcome_b) = await all_joined((gw1.ws, "A@gw1", token_a),
                                              (gw2.ws, "B@gw2", token_b))
    clients = [a, b]
    try:
        seen_from = welcome_b["seq"]
        # a round both see open (a loaded run welcomed B after A's round_opened: the two
        # streams then overlapped one event less than counted)
        opened = await a.expect(lambda f: f.get("type") == "round_opened"
                                and f["seq"] > seen_from, timeout=60)
        round_id = opened["round_id"]
        bets_a = await place(a, round_id, [("P1", 100), ("P3_PAIR", 25)], "a")
        bets_b = await place(b, round_id, [("P2", 300), ("P1", 40)], "b")
        if phase == "revealing":
            await a.expect("hand_revealed", round_id=round_id, hand="P2")
        active = await deployment.wait_holder()
        standby = next(e for e in deployment.engines if e is not active)
        assert (await deployment.readyz(standby) or {})["checks"]["leases_held"] == []
        table = (await deployment.http.get(gw2.http + "/api/tables/t1")).json()
        assert table["phase"] == phase and table["round_id"] == round_id

        killed_at = time.monotonic()
        active.kill()
        if phase == "betting":  # the ledger still takes bets until the round's close time
            late = await b.bet("b-late-P4", round_id, "P4", 60)
            if late["type"] == "bet_accepted":
                bets_b.append(late)
            else:  # only if this machine took more than the 3 s of betting to get here
                assert late["code"] == "betting_closed", late
        await deployment.wait_holder([standby], timeout=TAKEOVER_LIMIT)
        lease_after = time.monotonic() - killed_at
        end = "round_cancelled" if phase == "betting" else "round_settled"
        await a.expect(end, round_id=round_id, timeout=TAKEOVER_LIMIT + 5)
        event_after = time.monotonic() - killed_at
        print(f"\ntakeover ({phase}): lease held by the standby {lease_after:.2f} s after "
              f"kill -9; {end} reached a client {event_after:.2f} s after it")
        assert lease_after < TAKEOVER_LIMIT

        for client, bets in ((a, bets_a), (b, bets_b)):
            for bet in bets:
                await client.expect("bet_settled", bet_id=bet["bet_id"])
        # the new engine drives the table on: the next round opens and both see it
        following = await a.expect("round_opened")
        await b.expect("round_opened", round_id=following["round_id"])

        streams = [table_events(c) for c in clients]
        for stream in streams:
            assert_in_order(stream)
        assert assert_same_frames(*streams) >= following["seq"] - opened["seq"] + 1
        round_events = [f for f in a.frames if f.get("round_id") == round_id and "seq" in f]
        reveals = [f["hand"] for f in round_events if f["type"] == "hand_revealed"]
        state = "refunded" if phase == "betting" else "settled"
        if phase == "betting":
            assert reveals == []
            assert [f["type"] for f in round_events][-1] == "round_cancelled"
            check_refunded(bets_a, settlements(a))
            check_refunded(bets_b, settlements(b))
            balance_a = balance_b = GUEST_BALANCE
        else:
            assert reveals == HANDS  # each hand once, in order, across the takeover
            hands = hands_from(a.frames, round_id)
            balance_a = GUEST_BALANCE + check_settled(bets_a, settlements(a), hands)
            balance_b = GUEST_BALANCE + check_settled(bets_b, settlements(b), hands)
        assert len(a.of_type("bet_settled")) == len(bets_a)  # exactly once each
        assert len(b.of_type("bet_settled")) == len(bets_b)
        await record_says(deployment, gw2, token_a, bets_a, state)
        await record_says(deployment, gw1, token_b, bets_b, state)
        assert await deployment.balance(gw2, token_a) == balance_a
        assert await deployment.balance(gw1, token_b) == balance_b
    finally:
        await close_all(clients)
    report = await deployment.audit()
    assert report.ok, report.problems
    await deployment.check_event_log()
