"""Staff tokens on a real two-table manual server: dealers and supervisors scoped to tables,
and card corrections that need a supervisor's approval (docs/dealer.md, docs/protocol.md).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from liveserver import LiveServer, WireClient, close_all

OPENING = "8C"


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("studio"), mode="manual",
                        args=["--tables", "2"])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def unscoped_dealer_token(server: LiveServer) -> str:
    """A dealer token as minted before tokens named tables (no "tables" claim)."""
    secret = (server.data_dir / "secret").read_bytes().strip()
    payload = json.dumps({"k": "dealer", "sub": "old", "name": "Old",
                          "exp": int(time.time()) + 600}, separators=(",", ":")).encode()
    sig = hmac.new(secret, payload, hashlib.sha256).digest()

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return f"{b64(payload)}.{b64(sig)}"


async def refused_hello(server: LiveServer, token: str,
                        table: str) -> tuple[dict[str, Any], int | None]:
    console = await WireClient.connect(server.ws_dealer, "console")
    try:
        await console.send({"type": "hello", "v": 1, "table": table, "token": token})
        error = await console.expect("error")
        return error, await console.wait_closed()
    finally:
        await console.close()


async def test_a_dealer_token_drives_only_its_tables(studio: LiveServer) -> None:
    t1_only = studio.dealer_token("t1")
    error, code = await refused_hello(studio, t1_only, "t2")
    assert error["code"] == "not_your_table" and "t2" in error["message"]
    assert code == 4003
    error, code = await refused_hello(studio, unscoped_dealer_token(studio), "t1")
    assert error["code"] == "not_your_table" and "--tables" in error["message"]
    assert code == 4003
    # a player token is no staff token, on any table
    error, code = await refused_hello(studio, studio.player_token("p-staff"), "t1")
    assert (error["code"], code) == ("not_a_dealer", 4001)

    clients = []
    try:
        for token, table in ((t1_only, "t1"), (studio.dealer_token("t1,t2"), "t2"),
                             (studio.dealer_token("*"), "t2"),
                             (studio.supervisor_token("t2"), "t2")):
            console = await WireClient.connect(studio.ws_dealer, f"console {table}")
            clients.append(console)
            welcome = await console.hello(token, table=table)
            assert welcome["table"]["id"] == table
            answer = await console.command("round_cards")  # a harmless command: accepted
            assert answer["type"] == "ack", answer
    finally:
        await close_all(clients)


async def open_round(dealer: WireClient, server: LiveServer, table: str) -> str:
    phase = server.get(f"/api/tables/{table}").json()["phase"]
    if phase not in ("idle", "settled", "cancelled"):
        assert (await dealer.command("cancel_round", reason="setup"))["type"] == "ack"
    assert (await dealer.command("start_shoe"))["type"] == "ack"
    assert (await dealer.command("card", card=OPENING))["type"] == "ack"
    assert (await dealer.command("open_betting", betting_ms=60_000))["type"] == "ack"
    table_now = server.get(f"/api/tables/{table}").json()
    assert table_now["phase"] == "betting"
    return str(table_now["round_id"])


async def test_card_correction_needs_a_supervisor(studio: LiveServer) -> None:
    # tokens first: a connection must say hello within the (short) hello timeout
    dealer_token = studio.dealer_token("t1", name="Dee")
    player_token = studio.player_token(f"p-{uuid.uuid4().hex[:6]}")
    supervisor_token = studio.supervisor_token("t1", name="Sue")
    dealer = await WireClient.connect(studio.ws_dealer, "dealer")
    viewer = await WireClient.connect(studio.ws, "viewer")
    player = await WireClient.connect(studio.ws, "player")
    clients = [dealer, viewer, player]
    try:
        await dealer.hello(dealer_token)
        await viewer.hello()
        await player.hello(player_token)
        round_id = await open_round(dealer, studio, "t1")
        for card in ("2C", "9H", "KS", "KS"):  # the scanner read K♠ twice: the 2nd was 4H
            assert (await dealer.command("card", card=card))["type"] == "ack"

        # The money path's attack 4 (docs/security.md): a supervisor's token is a login, never an
        # approval.
        refusals = [
            ({}, "approval_required"),
            ({"approval": "not.a-token"}, "bad_approval"),
            ({"approval": studio.dealer_token("t1", name="Other dealer")}, "bad_approval"),
            ({"approval": studio.supervisor_token("t1")}, "bad_approval"),
            ({"approval": studio.supervisor_token("t2")}, "bad_approval"),
        ]
        for extra, code in refusals:
            error = await dealer.command("correct_cards", count=1, **extra)
            assert (error["type"], error["code"]) == ("error", code), (extra, error)
        assert (await dealer.command("correct_cards", count=0))["code"] == "bad_frame"
        # nothing changed: still four cards
        cards = (await dealer.command("round_cards"))["detail"]["cards"]
        assert [c["card"] for c in cards] == ["2C", "9H", "KS", "KS"]
        # a player cannot even ask
        await player.send({"type": "correct_cards", "count": 1})
        assert (await player.expect("error"))["code"] == "not_a_dealer"

        # The supervisor's console issues a one-time approval for this round and count.
        supervisor = await WireClient.connect(studio.ws_dealer, "supervisor")
        clients.append(supervisor)
        await supervisor.hello(supervisor_token)
        assert (await dealer.command("approve_correction", count=1))["code"] == \
            "not_a_supervisor"  # a dealer cannot approve
        issued = (await supervisor.command("approve_correction", count=1))["detail"]
        assert issued["round_id"] == round_id and issued["count"] == 1
        approval = issued["approval"]
        error = await dealer.command("correct_cards", count=2, approval=approval)
        assert (error["code"], "not 2" in error["message"]) == ("bad_approval", True)
        ack = await dealer.command("correct_cards", count=1, approval=approval)
        assert ack == {"type": "ack", "cmd": "correct_cards",
                       "detail": {"voided": [{"slot": "P3", "n": 1, "card": "KS"}]}}
        voided = await viewer.expect("cards_voided")
        assert {k: voided[k] for k in ("round_id", "count", "dealt", "dealer", "supervisor")} \
            == {"round_id": round_id, "count": 1, "dealt": {"P1": 1, "P2": 1},
                "dealer": "Dee", "supervisor": "Sue"}
        assert "KS" not in json.dumps(voided)
        assert studio.get("/api/tables/t1").json()["dealt"] == {"P1": 1, "P2": 1}
        assert "approved by supervisor Sue (sup-1)" in studio.log()
        ack = await dealer.command("card", card="4H")
        assert ack["detail"] == {"slot": "P3", "n": 1}
        # Replayed, the approval is refused: it was used once (by the table's engine).
        error = await dealer.command("correct_cards", count=1, approval=approval)
        assert (error["code"], error["message"]) == ("bad_approval",
                                                     "this approval was already used")
        assert len((await dealer.command("round_cards"))["detail"]["cards"]) == 4

        # A supervisor at their own console needs no second approval.
        ack = await supervisor.command("correct_cards", count=2)
        assert [v["card"] for v in ack["detail"]["voided"]] == ["KS", "4H"]
        voided = await viewer.expect("cards_voided")
        assert (voided["dealer"], voided["supervisor"], voided["count"]) == ("Sue", "Sue", 2)
        unused = (await supervisor.command("approve_correction", count=1))["detail"]["approval"]
        assert (await dealer.command("cancel_round", reason="end of test"))["type"] == "ack"
        # after the round, nothing is left to correct
        error = await dealer.command("correct_cards", count=1, approval=unused)
        assert error["code"] in ("illegal_command", "bad_approval")
        # next round: an approval issued for the last one is refused
        next_round = await open_round(dealer, studio, "t1")
        assert next_round != round_id
        assert (await dealer.command("card", card="3C"))["type"] == "ack"
        error = await dealer.command("correct_cards", count=1, approval=unused)
        assert (error["code"], f"for round {round_id}," in error["message"]) == (
            "bad_approval", True)
        assert (await dealer.command("cancel_round", reason="end of test"))["type"] == "ack"
    finally:
        await close_all(clients)


async def test_an_approval_is_bound_to_its_table_and_opens_no_console(
        studio: LiveServer) -> None:
    """The money path's attack 4 (docs/security.md): the supervisor token sent as ``approval``
    worked again the next
    round and opened /ws/dealer for 30 days. An approval now is a code for one table, one
    round and one count, and it is no token."""
    dealer_token = studio.dealer_token("t1", name="Dee")
    supervisor_t2 = studio.supervisor_token("t2", name="Sam")
    dealer = await WireClient.connect(studio.ws_dealer, "dealer")
    supervisor = await WireClient.connect(studio.ws_dealer, "supervisor t2")
    clients = [dealer, supervisor]
    try:
        await dealer.hello(dealer_token)
        await supervisor.hello(supervisor_t2, table="t2")
        await open_round(dealer, studio, "t1")
        await open_round(supervisor, studio, "t2")
        assert (await dealer.command("card", card="2C"))["type"] == "ack"
        approval = (await supervisor.command("approve_correction", count=1))["detail"]["approval"]
        error = await dealer.command("correct_cards", count=1, approval=approval)
        assert (error["code"], error["message"]) == ("bad_approval",
                                                     "the approval is for table 't2'")
        for table in ("t1", "t2"):
            error, code = await refused_hello(studio, approval, table)
            assert (error["code"], code) == ("bad_token", 4001)
        for console, table in ((dealer, "t1"), (supervisor, "t2")):
            assert (await console.command("cancel_round", reason="end"))["type"] == "ack", table
    finally:
        await close_all(clients)
