"""An operator's sessions against a live server (the internal wallet, the single-operator
settings): the operator ends a session, and its connections get ``session_ended`` and
close 4002, its token is refused from then on — after a restart too — and a bet already
taken settles as usual."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from liveserver import LiveServer, WireClient, close_all, livetable_command
from walletserver import OPERATOR_SECRET, launch, signed_post

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
