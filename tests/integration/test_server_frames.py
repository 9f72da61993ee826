"""Frames a server must refuse, and who may do what, on a real server.

Every bad frame gets an ``error {code, message}`` (or the bet its ``bet_rejected``) and the
connection goes on serving; the fatal ones (no hello in time, a forged token, the wrong kind
of token) close it with the documented code. After each, a fresh client still works.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from liveserver import LiveServer, WireClient, close_all
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus


async def assert_serving(server: LiveServer) -> None:
    """A fresh client gets its welcome and a pong: the server is still serving."""
    client = await WireClient.connect(server.ws, "fresh")
    try:
        welcome = await client.hello()
        assert welcome["v"] == 1 and welcome["table"]["id"] == "t1"
        await client.send({"type": "ping", "t": 7})
        pong = await client.expect("pong")
        assert pong["t"] == 7 and isinstance(pong["server_time"], int)
    finally:
        await client.close()


async def assert_alive(client: WireClient, t: int = 42) -> None:
    """The same connection still answers."""
    await client.send({"type": "ping", "t": t})
    assert (await client.expect("pong"))["t"] == t


BAD_FRAMES: list[tuple[str, Any, str, str]] = [
    # (case, frame, error code, a word the message must hold)
    ("not json", "this is not json", "bad_frame", "JSON"),
    ("not an object", "[1, 2, 3]", "bad_frame", "object"),
    ("no type", {"bet_id": "x"}, "bad_frame", "type"),
    ("unknown type", {"type": "fly_to_the_moon"}, "bad_frame", "type"),
    ("wrong field type", {"type": "place_bet", "bet_id": "b", "round_id": "r", "spot": "P1",
                          "amount": "100"}, "bad_frame", "$.amount"),
    ("float amount", {"type": "place_bet", "bet_id": "b", "round_id": "r", "spot": "P1",
                      "amount": 10.5}, "bad_frame", "$.amount"),
    ("missing field", {"type": "place_bet", "bet_id": "b", "round_id": "r", "spot": "P1"},
     "bad_frame", "amount"),
    ("oversized", {"type": "ping", "t": 1, "pad": "x" * 4200}, "frame_too_large", "4096"),
    ("oversized in bytes, not characters",  # 1,500 characters, 4,500 bytes of UTF-8
     json.dumps({"type": "ping", "t": 1, "pad": "€" * 1500}, ensure_ascii=False),
     "frame_too_large", "4096"),
    ("binary frame", json.dumps({"type": "ping", "t": 1}).encode(), "bad_frame", "text"),
    ("second hello", {"type": "hello", "v": 1, "table": "t1"}, "already_hello", "hello"),
    # The first security round's attack 6 (docs/security.md): these crashed a handler
    # (RecursionError; OverflowError in SQLite)
    ("nested 2,000 deep", '{"type": "ping", "pad": ' + "[" * 2000 + "]" * 2000 + "}",
     "bad_frame", "nested"),
    ("nested 2,000 deep, no type", "[" * 2000 + "]" * 2000, "bad_frame", "object"),
    ("cursor past 2^63", {"type": "get_bets", "before": "1" + "0" * 26}, "bad_frame",
     "$.before"),
    ("cursor not a number", {"type": "get_bets", "before": "abc"}, "bad_frame", "$.before"),
    ("round id of 4,000 characters", {"type": "place_bet", "bet_id": "b", "round_id": "r" * 4000,
                                      "spot": "P1", "amount": 10}, "bad_frame", "$.round_id"),
]


@pytest.mark.parametrize(("frame", "code", "word"), [c[1:] for c in BAD_FRAMES],
                         ids=[c[0] for c in BAD_FRAMES])
async def test_a_bad_frame_gets_an_error_and_the_server_goes_on(
        auto_server: LiveServer, frame: Any, code: str, word: str) -> None:
    token, _ = auto_server.guest()
    client = await WireClient.connect(auto_server.ws, "bad")
    try:
        await client.hello(token)
        await client.send(frame)
        error = await client.expect("error")
        assert error["code"] == code and word in error["message"], error
        await assert_alive(client)
        assert not client.closed.is_set()
    finally:
        await client.close()
    await assert_serving(auto_server)


@pytest.mark.parametrize("amount", [-5, 0])
async def test_a_negative_or_zero_amount_is_a_rejected_bet(auto_server: LiveServer,
                                                            amount: int) -> None:
    token, player = auto_server.guest()
    client = await WireClient.connect(auto_server.ws, "bad")
    try:
        welcome = await client.hello(token)
        round_id = welcome["table"]["round_id"] or "t1.1.1"
        answer = await client.bet("neg", round_id, "P1", amount)
        assert answer["type"] == "bet_rejected" and answer["code"] == "bad_amount"
        assert answer["bet_id"] == "neg" and answer["message"]
        for bet_id, spot, code in (("", "P1", "bad_bet_id"), ("s", "P6", "bad_spot"),
                                   ("s2", "BANKER", "bad_spot")):
            rejected = await client.bet(bet_id, round_id, spot, 10)
            assert rejected["code"] == code, rejected
        await assert_alive(client)
    finally:
        await client.close()
    record = auto_server.get("/api/bets", token).json()  # (and the totals of no day)
    assert (record["bets"], record["next"], record["days"]) == ([], None, {})
    again = await WireClient.connect(auto_server.ws)
    try:
        assert (await again.hello(token))["player"]["balance"] == player["balance"]
    finally:
        await again.close()


async def test_frames_before_hello_get_hello_required(auto_server: LiveServer) -> None:
    client = await WireClient.connect(auto_server.ws, "early")
    try:
        await client.send({"type": "ping", "t": 1})
        assert (await client.expect("error"))["code"] == "hello_required"
        await client.send({"type": "place_bet", "bet_id": "b", "round_id": "r", "spot": "P1",
                           "amount": 10})
        assert (await client.expect("error"))["code"] == "hello_required"
        await client.send("{not json")
        assert (await client.expect("error"))["code"] == "bad_frame"
        # nothing was answered but errors, and the hello still works afterwards
        assert {f["type"] for f in client.frames} == {"error"}
        welcome = await client.hello()
        assert welcome["resumed"] is False
        await assert_alive(client)
    finally:
        await client.close()


async def test_no_hello_in_time_is_closed_4002(auto_server: LiveServer) -> None:
    client = await WireClient.connect(auto_server.ws, "silent")
    try:
        error = await client.expect("error", timeout=10)  # LIVETABLE_HELLO_TIMEOUT is 1.5 s
        assert error["code"] == "hello_timeout"
        assert await client.wait_closed() == 4002
        assert [f["type"] for f in client.frames] == ["error"]
    finally:
        await client.close()
    await assert_serving(auto_server)


def _tampered(token: str) -> str:
    """The same token with its payload changed (another player id), signature kept."""
    import base64

    payload, signature = token.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    data["sub"] = "g_someone_else"
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    return f"{forged}.{signature}"


async def test_forged_or_expired_tokens_are_closed_4001(auto_server: LiveServer) -> None:
    token, _ = auto_server.guest()
    expired = auto_server.token("--player", "p-expired", "--ttl", "-60")
    for bad, word in ((_tampered(token), "signature"), ("abc.dew", "signature"),
                      ("abc.def", "malformed"),  # trailing bits set: not canonical base64
                      ("no-dot-at-all", "malformed"), (expired, "expired")):
        client = await WireClient.connect(auto_server.ws, "forger")
        try:
            await client.send({"type": "hello", "v": 1, "table": "t1", "token": bad})
            error = await client.expect("error")
            assert error["code"] == "bad_token" and word in error["message"], error
            assert await client.wait_closed() == 4001
            assert "welcome" not in {f["type"] for f in client.frames}
        finally:
            await client.close()
    await assert_serving(auto_server)


async def test_unknown_table_and_bad_version_are_closed(auto_server: LiveServer) -> None:
    for hello, code, close_code in (({"table": "nope", "v": 1}, "unknown_table", 4004),
                                    ({"table": "t1", "v": 2}, "bad_version", 4000)):
        client = await WireClient.connect(auto_server.ws)
        try:
            await client.send({"type": "hello", **hello})
            assert (await client.expect("error"))["code"] == code
            assert await client.wait_closed() == close_code
        finally:
            await client.close()
    await assert_serving(auto_server)


async def test_a_bad_origin_is_refused_at_the_upgrade(auto_server: LiveServer) -> None:
    with pytest.raises(InvalidStatus) as refused:
        await WireClient.connect(auto_server.ws, origin="http://evil.example")
    assert refused.value.response.status_code == 403
    # the page's own origin is welcome
    same = await WireClient.connect(auto_server.ws,
                                    origin=f"http://127.0.0.1:{auto_server.port}")
    try:
        await same.hello()
    finally:
        await same.close()
    metrics = auto_server.get("/metrics").text
    assert "livetable_rejected_upgrades_total" in metrics
    await assert_serving(auto_server)


async def test_a_player_cannot_use_dealer_commands(auto_server: LiveServer) -> None:
    token, _ = auto_server.guest()
    player = await WireClient.connect(auto_server.ws, "player")
    try:
        welcome = await player.hello(token)
        for command in ({"type": "reveal"}, {"type": "start_shoe"},
                        {"type": "cancel_round", "reason": "mine"},
                        {"type": "pause", "reason": "mine"}, {"type": "set_mode", "auto": False},
                        {"type": "card", "card": "KH"}, {"type": "close_betting"}):
            await player.send(command)
            error = await player.expect("error")
            assert error["code"] == "not_a_dealer", (command, error)
            assert not player.of_type("ack")
        await assert_alive(player)
        # the table went on as before: no pause, no cancellation, the same mode
        await player.expect(lambda f: "seq" in f and f["seq"] > welcome["seq"])
        assert not player.of_type("table_paused", "round_cancelled")
        assert auto_server.get("/api/tables/t1").json()["mode"] == "auto"
    finally:
        await player.close()

    # on /ws/dealer a player's (or a guest's, or no) token is refused with 4001
    player_token = auto_server.player_token(f"p-{uuid.uuid4().hex[:8]}")
    for bad in (token, player_token, None):
        dealer = await WireClient.connect(auto_server.ws_dealer, "not-a-dealer")
        try:
            message: dict[str, Any] = {"type": "hello", "v": 1, "table": "t1"}
            if bad is not None:
                message["token"] = bad
            await dealer.send(message)
            assert (await dealer.expect("error"))["code"] == "not_a_dealer"
            assert await dealer.wait_closed() == 4001
        finally:
            await dealer.close()
    # and a dealer token is for the dealer console only
    misplaced = await WireClient.connect(auto_server.ws, "dealer-on-ws")
    try:
        await misplaced.send({"type": "hello", "v": 1, "table": "t1",
                              "token": auto_server.dealer_token()})
        assert (await misplaced.expect("error"))["code"] == "bad_token"
        assert await misplaced.wait_closed() == 4001
    finally:
        await misplaced.close()
    await assert_serving(auto_server)


async def test_a_resume_point_past_2_53_is_a_bad_frame(auto_server: LiveServer) -> None:
    client = await WireClient.connect(auto_server.ws, "resume")
    try:
        await client.send({"type": "hello", "v": 1, "table": "t1",
                           "resume": {"epoch": 1, "seq": 10**26}})
        error = await client.expect("error")
        assert error["code"] == "bad_frame" and "$.resume.seq" in error["message"], error
    finally:
        await client.close()
    await assert_serving(auto_server)


@pytest.mark.parametrize(("query", "word"), [("before=" + "1" + "0" * 26, "before"),
                                             ("before=abc", "before"),
                                             ("limit=" + "9" * 30, "limit"),
                                             ("limit=x", "limit")])
def test_a_bad_bet_record_query_is_a_400(auto_server: LiveServer, query: str,
                                         word: str) -> None:
    token, _ = auto_server.guest()
    answer = auto_server.get(f"/api/bets?{query}", token)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "bad_request"
    assert word in answer.json()["error"]["message"]
    assert auto_server.get("/api/bets?limit=5", token).status_code == 200


async def test_a_quiet_table_sends_heartbeats_a_client_can_time(
        manual_server: LiveServer) -> None:
    """An idle manual table sends no events: heartbeats every interval keep the line timed,
    so a browser can tell a silently dropped connection within seconds."""
    viewer = await WireClient.connect(manual_server.ws, "viewer")
    try:
        welcome = await viewer.hello()
        first = await viewer.next(timeout=2)
        assert first["type"] == "heartbeat", first  # right after the welcome: the interval
        beats = [first] + [await viewer.expect("heartbeat", timeout=10) for _ in range(2)]
        for beat in beats:
            assert set(beat) == {"type", "interval_ms", "server_time"}, beat  # not a table event
            assert beat["interval_ms"] == 1500
        assert welcome["server_time"] <= beats[0]["server_time"] < beats[1]["server_time"]
    finally:
        await viewer.close()


async def test_no_heartbeats_when_turned_off(fresh_server: LiveServer) -> None:
    """A quiet (manual) table, where a beat would come right after the welcome and then
    every 1.5 s: none comes in an interval and a half of the server's own clock."""
    fresh_server.mode = "manual"
    fresh_server.start(env={"LIVETABLE_HEARTBEAT": "0"})
    viewer = await WireClient.connect(fresh_server.ws, "viewer")
    clock = await WireClient.connect(fresh_server.ws, "clock")  # pings: the viewer must not
    try:
        welcome = await viewer.hello()
        await clock.hello()
        while True:
            await clock.send({"type": "ping"})
            if (await clock.expect("pong"))["server_time"] - welcome["server_time"] > 2_250:
                break
            await asyncio.sleep(0.25)
        await viewer.send({"type": "ping", "t": 1})  # whatever was sent before is in
        assert (await viewer.expect("pong"))["t"] == 1
        assert not viewer.of_type("heartbeat")
    finally:
        await close_all([viewer, clock])


async def test_permessage_deflate_is_not_negotiated(auto_server: LiveServer) -> None:
    """A browser offers permessage-deflate; the server declines it. Its frames go out
    framed once and uncompressed to every connection (server/framed_ws.py), so
    compression would only inflate the client's small frames, at about 45 KB of zlib state
    a connection (80 KB a connection with it, 35 KB without: docs/benchmarks.md)."""
    async with connect(auto_server.ws, compression="deflate") as ws:
        assert ws.response is not None
        assert "Sec-WebSocket-Extensions" not in ws.response.headers
        await ws.send(json.dumps({"type": "hello", "v": 1, "table": "t1"}))
        assert json.loads(await ws.recv())["type"] == "welcome"
