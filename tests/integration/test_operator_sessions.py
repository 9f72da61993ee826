"""An operator's sessions against a live server (the internal wallet, the single-operator
settings): the operator ends a session, and its connections get ``session_ended`` and
close 4002, its token is refused from then on — after a restart too — and a bet already
taken settles as usual."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from liveserver import LiveServer, WireClient, close_all, livetable_command
from walletserver import OPERATOR_SECRET, launch, launch_body, signed_post

from livetable.clock import now_ms

#: What a test player is given to bet with (minor units).
DEPOSIT = 100_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("sessions")
    live = LiveServer(base / "livetable", env={"LIVETABLE_OPERATOR_SECRET": OPERATOR_SECRET})
    live.start()
    try:
        yield live
    finally:
        live.stop()


def deposit(server: LiveServer, player: str, amount: int = DEPOSIT) -> None:
    subprocess.run([*livetable_command(), "deposit", "--data-dir", str(server.data_dir),
                    "--player", player, "--amount", str(amount),
                    "--id", f"dep-{player}"],
                   check=True, capture_output=True, env={**os.environ, **server.env})


def end(server: LiveServer, session_id: str, reason: str = "self_exclusion",
        **kwargs: Any) -> httpx.Response:
    return signed_post(server, f"/api/operator/sessions/{session_id}/end",
                       {"reason": reason}, **kwargs)


def bet_record(server: LiveServer, token: str) -> httpx.Response:
    return server.get("/api/bets", token)


async def refused_at_hello(server: LiveServer, token: str, reason: str) -> None:
    client = await WireClient.connect(server.ws, "again")
    try:
        await client.send({"type": "hello", "v": 1, "table": "t1", "token": token})
        assert await client.expect("session_ended") == {"type": "session_ended",
                                                        "reason": reason}
        assert await client.wait_closed() == 4002
        assert not client.of_type("welcome")
    finally:
        await client.close()


def test_an_ended_session_closes_its_sockets_and_its_token_is_refused(
        server: LiveServer) -> None:
    deposit(server, "p-end")
    ending = launch(server, "p-end")
    other = launch(server, "p-end")  # the same player's other session is not ended

    async def scenario() -> dict[str, Any]:
        tab1 = await WireClient.connect(server.ws, "tab1")
        tab2 = await WireClient.connect(server.ws, "tab2")
        keeps = await WireClient.connect(server.ws, "other session")
        clients = [tab1, tab2, keeps]
        try:
            await tab1.hello(ending["token"])
            await tab2.hello(ending["token"])
            await keeps.hello(other["token"])
            opened = await tab1.expect("round_opened")
            accepted = await tab1.bet("before-end", opened["round_id"], "P1", 1000)
            assert accepted["type"] == "bet_accepted", accepted
            answer = end(server, ending["session_id"])
            assert answer.status_code == 200, answer.text
            assert answer.json()["reason"] == "self_exclusion"
            for tab in (tab1, tab2):
                assert await tab.expect("session_ended") == {"type": "session_ended",
                                                             "reason": "self_exclusion"}
                assert await tab.wait_closed() == 4002
            # the bet taken before the end settles as usual, seen by the other session
            settled = await keeps.expect("round_settled", round_id=opened["round_id"],
                                         timeout=30)
            assert settled and not keeps.closed.is_set()
            await refused_at_hello(server, ending["token"], "self_exclusion")
            return answer.json()  # type: ignore[no-any-return]
        finally:
            await close_all(clients)

    first = asyncio.run(scenario())
    refused = bet_record(server, ending["token"])
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "session_ended"
    record = bet_record(server, other["token"])
    assert record.status_code == 200
    bet = next(b for b in record.json()["bets"] if b["bet_id"] == "before-end")
    assert bet["state"] == "settled"
    # ending it again answers the first end: the first reason stays
    again = end(server, ending["session_id"], "account_closed")
    assert again.status_code == 200 and again.json() == first
    # the end is the store's: a restart keeps it
    server.stop()
    server.start()
    asyncio.run(refused_at_hello(server, ending["token"], "self_exclusion"))
    assert bet_record(server, ending["token"]).status_code == 401
    assert bet_record(server, other["token"]).status_code == 200


def test_a_launch_captured_and_replayed_after_a_restart_is_refused(
        server: LiveServer) -> None:
    """The request ids are the store's: a restart of the service (its memory gone) does
    not make a captured launch, replayed within its timestamp's five minutes, a login."""
    body = json.dumps(launch_body("p-replay")).encode()
    at = now_ms()
    first = signed_post(server, "/api/operator/sessions", body, at=at)
    assert first.status_code == 200, first.text
    server.stop()
    server.start()
    again = signed_post(server, "/api/operator/sessions", body, at=at)
    assert again.status_code == 409, again.text
    assert again.json()["error"]["code"] == "duplicate_request"


def test_a_launch_name_is_cleaned_like_a_chat_line(server: LiveServer) -> None:
    """A name with a bidi override, a newline and zero-width characters reaches the table
    as one plain line; a name of only fillers is refused."""
    session = launch(server, "p-name", name="Mallory\u202e\u2066gnp.exe\nSYSTEM\u200b:")

    async def welcomed() -> dict[str, Any]:
        client = await WireClient.connect(server.ws, "named")
        try:
            return await client.hello(session["token"])
        finally:
            await client.close()

    assert asyncio.run(welcomed())["player"]["name"] == "Mallory gnp.exe SYSTEM:"
    empty = signed_post(server, "/api/operator/sessions",
                        launch_body("p-name", name="\u3164\u200b\u2800"))
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "bad_request"


def test_only_a_signed_end_of_a_known_session_ends_it(server: LiveServer) -> None:
    session = launch(server, "p-keep")
    forged = end(server, session["session_id"], secret="not-the-operators")
    assert forged.status_code == 401
    assert forged.json()["error"]["code"] == "invalid_signature"
    for unknown in ("no-such-session", "x" * 65, "a:b"):
        answer = end(server, unknown)
        assert answer.status_code == 404, (unknown, answer.text)
        assert answer.json()["error"]["code"] == "unknown_session"
    bad = end(server, session["session_id"], reason="")
    assert bad.status_code == 400
    assert bet_record(server, session["token"]).status_code == 200  # none of it ended it


# --- responsible gaming: the limits of a launch ------------------------------------------


def shift_start(server: LiveServer, session_id: str, ms: int) -> None:
    """Move the session's start (and its last reality check) ``ms`` into the past, as if
    that much of it had been played: a test cannot wait a real minute per limit."""
    with sqlite3.connect(server.data_dir / "livetable.sqlite3", timeout=10) as db:
        changed = db.execute(
            "UPDATE sessions SET started_at = started_at - ?, checked_at = checked_at - ? "
            "WHERE session_id = ?", (ms, ms, session_id)).rowcount
    assert changed == 1


async def next_round(client: WireClient, after: str | None = None) -> str:
    """The id of the next round that opens (after round ``after``, if given)."""
    opened = await client.expect(lambda f: f.get("type") == "round_opened"
                                 and f.get("round_id") != after, timeout=30)
    return str(opened["round_id"])


def test_max_stake_per_round_refuses_what_passes_it_in_each_round(
        server: LiveServer) -> None:
    deposit(server, "p-stake")
    session = launch(server, "p-stake", limits={"max_stake_per_round": 3000})

    async def scenario() -> None:
        client = await WireClient.connect(server.ws, "stake")
        try:
            await client.hello(session["token"])
            round_id = await next_round(client)
            # a Player bet of 1000 stakes 2000 (its withholding counts), a Pair bet 1000
            assert (await client.bet("s1", round_id, "P1", 1000))["type"] == "bet_accepted"
            over = await client.bet("s2", round_id, "P2", 1000)
            assert over["code"] == "rg_limit", over
            assert "max_stake_per_round: 1000 left of 3000" in over["message"]
            slip = await client.slip("slip-1", round_id, [("s3", "P2", 400), ("s4", "P3", 200)])
            assert slip["type"] == "slip_rejected" and slip["code"] == "rg_limit", slip
            assert (await client.bet("s5", round_id, "P2_PAIR", 1000))["type"] == (
                "bet_accepted")  # exactly the limit
            # the next round has its own
            round_2 = await next_round(client, after=round_id)
            assert (await client.bet("s6", round_2, "P1", 1500))["type"] == "bet_accepted"
        finally:
            await client.close()

    asyncio.run(scenario())


def test_the_loss_limit_counts_stakes_and_returns_across_reconnects(
        server: LiveServer) -> None:
    deposit(server, "p-loss")
    session = launch(server, "p-loss", limits={"loss_limit": 3000})

    async def scenario() -> None:
        client = await WireClient.connect(server.ws, "loss")
        try:
            await client.hello(session["token"])
            round_id = await next_round(client)
            assert (await client.bet("l1", round_id, "P1", 1000))["type"] == "bet_accepted"
            over = await client.bet("l2", round_id, "P2", 600)  # could lose 1200 more
            assert over["code"] == "rg_limit", over
            assert "loss_limit: 1000 left of 3000" in over["message"]
            assert (await client.bet("l3", round_id, "P2", 500))["type"] == "bet_accepted"
            returned = 0
            for bet_id in ("l1", "l3"):
                returned += (await client.expect("bet_settled", bet_id=bet_id,
                                                 timeout=30))["returned"]
        finally:
            await client.close()
        # a new connection (the figures are the store's): what is left is what came back
        again = await WireClient.connect(server.ws, "loss again")
        try:
            await again.hello(session["token"])
            round_2 = await next_round(again, after=round_id)
            if returned:  # a multiple of 500: a Player bet of half of it stakes it all
                taken = await again.bet("l4", round_2, "P4", returned // 2)
                assert taken["type"] == "bet_accepted", (returned, taken)
            refused = await again.bet("l5", round_2, "P2_PAIR", 10)
            assert refused["code"] == "rg_limit", refused
            assert "loss_limit: 0 left of 3000" in refused["message"]
        finally:
            await again.close()

    asyncio.run(scenario())


def test_a_reality_check_holds_betting_until_answered_and_survives_a_reconnect(
        server: LiveServer) -> None:
    deposit(server, "p-check")
    session = launch(server, "p-check", limits={"reality_check_minutes": 1})
    shift_start(server, session["session_id"], 59_000)  # the check is due in a second

    async def scenario() -> None:
        client = await WireClient.connect(server.ws, "check")
        try:
            await client.hello(session["token"])
            check = await client.expect("reality_check", timeout=10)
            assert check == {"type": "reality_check", "minutes": 1, "staked": 0,
                             "returned": 0, "net": 0}
            round_id = await next_round(client)
            held = await client.bet("c1", round_id, "P1", 100)
            assert held["code"] == "reality_check_pending", held
        finally:
            await client.close()
        # unanswered, it is still due on a new connection: shown again after the welcome
        again = await WireClient.connect(server.ws, "check again")
        try:
            await again.hello(session["token"])
            assert (await again.expect("reality_check", timeout=5))["minutes"] == 1
            await again.send({"type": "reality_check_ack"})
            assert (await again.expect("ack"))["cmd"] == "reality_check_ack"
            round_2 = await next_round(again, after=round_id)
            taken = await again.bet("c2", round_2, "P1", 100)
            assert taken["type"] == "bet_accepted", taken
        finally:
            await again.close()

    asyncio.run(scenario())


def test_session_minutes_end_the_session(server: LiveServer) -> None:
    session = launch(server, "p-time", limits={"session_minutes": 1})
    shift_start(server, session["session_id"], 58_500)  # a minute is up in 1.5 s

    async def scenario() -> None:
        client = await WireClient.connect(server.ws, "time")
        try:
            await client.hello(session["token"])
            ended = await client.expect("session_ended", timeout=10)
            assert ended == {"type": "session_ended", "reason": "time_limit"}
            assert await client.wait_closed() == 4002
        finally:
            await client.close()
        await refused_at_hello(server, session["token"], "time_limit")

    asyncio.run(scenario())
    assert bet_record(server, session["token"]).status_code == 401


def test_a_time_limit_that_came_while_away_refuses_the_bet_record(server: LiveServer) -> None:
    session = launch(server, "p-away", limits={"session_minutes": 1})
    assert bet_record(server, session["token"]).status_code == 200
    shift_start(server, session["session_id"], 61_000)  # its minute is up, nobody connected
    refused = bet_record(server, session["token"])
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["code"] == "session_ended"


def test_limits_in_a_launch_are_checked(server: LiveServer) -> None:
    for limits in ({"loss_limit": 0}, {"session_minutes": -5}, {"max_stake": 100},
                   {"reality_check_minutes": "10"}):
        answer = signed_post(server, "/api/operator/sessions",
                             {"request_id": f"bad-limits-{len(str(limits))}-{next(iter(limits))}",
                              "player_id": "p-bad", "name": "Bad", "currency": "THB",
                              "limits": limits})
        assert answer.status_code == 400, (limits, answer.text)
        assert answer.json()["error"]["code"] == "bad_request"
