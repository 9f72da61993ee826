"""The HTTP API of a real server: tables, roadmap, rounds, the Bet Record, guests, health.

A test that needs a round deals it (:mod:`dealing`, a manual-mode server), so that it reads
the API at each phase of the round the moment the round is there.
"""

from __future__ import annotations

import uuid

import httpx
from dealing import Dealer
from liveserver import HANDS, LiveServer, WireClient, close_all, hands_from

from livetable.rules import hand_of, parse_cards

SNAPSHOT_KEYS = {"id", "phase", "round_id", "closes_at", "limits", "hands", "roadmap"}


async def test_tables_rounds_and_roadmap(manual_server: LiveServer, dealer: Dealer) -> None:
    server = manual_server
    tables = server.get("/api/tables")
    assert tables.status_code == 200 and tables.headers["content-type"] == "application/json"
    (table,) = tables.json()["tables"]
    assert set(table) >= SNAPSHOT_KEYS and table["id"] == "t1"
    assert table["limits"] == {"min": 10, "max": 5000, "pair_min": 10, "pair_max": 1000,
                               "round_max": 20000}
    assert server.get("/api/tables/nope").status_code == 404
    assert server.get("/api/tables/nope/roadmap").status_code == 404

    viewer = await WireClient.connect(server.ws, "viewer")
    try:
        welcome = await viewer.hello()
        await dealer.open_round()
        opened = await viewer.expect(lambda f: f.get("type") == "round_opened"
                                     and f["seq"] > welcome["seq"])
        round_id = opened["round_id"]
        # while the round is open: the snapshot shows it, the round itself is not served
        snap = server.get("/api/tables/t1").json()
        if snap["round_id"] == round_id and snap["phase"] == "betting":
            assert snap["closes_at"] == opened["closes_at"] and snap["hands"] == []
        unsettled = server.get(f"/api/rounds/{round_id}")
        assert unsettled.status_code == 404
        assert unsettled.json()["error"]["code"] == "unknown_round"
        await dealer.deal()
        await dealer.close_betting()
        await dealer.reveal(1)
        await viewer.expect("hand_revealed", round_id=round_id, hand="P1")
        assert server.get(f"/api/rounds/{round_id}").status_code == 404  # not settled yet
        await dealer.reveal()
        settled = await viewer.expect("round_settled", round_id=round_id)

        view = server.get(f"/api/rounds/{round_id}").json()
        assert view["round_id"] == round_id and view["state"] == "settled"
        assert view["cards"] == hands_from(viewer.frames, round_id)
        assert sorted(view["cards"]) == sorted(HANDS)
        assert server.get("/api/rounds/t1.999.999").status_code == 404

        roadmap = server.get("/api/tables/t1/roadmap").json()
        assert roadmap["table"] == "t1" and roadmap["shoe_id"] == opened["shoe_id"]
        entry = [e for e in roadmap["roadmap"] if e["round_id"] == round_id]
        banker = hand_of(parse_cards(" ".join(view["cards"]["BANKER"])))
        assert entry == [{"round_id": round_id, "round_no": opened["round_no"],
                          "results": settled["results"],
                          "banker": {"value": banker.value, "points": banker.points,
                                     "pair": banker.pair, "flush": banker.flush}}]
        snap = server.get("/api/tables/t1").json()
        assert round_id in [e["round_id"] for e in snap["roadmap"]]
    finally:
        await close_all([viewer])


async def test_bet_record_needs_a_token_and_pages(manual_server: LiveServer,
                                                   dealer: Dealer) -> None:
    server = manual_server
    assert server.get("/api/bets").status_code == 401
    assert server.get("/api/bets").json()["error"]["code"] == "no_token"
    assert server.get("/api/bets", "forged.token").status_code == 401
    assert server.get("/api/bets", server.dealer_token()).status_code == 403

    token, _ = server.guest()
    client = await WireClient.connect(server.ws, "pager")
    try:
        welcome = await client.hello(token)
        await dealer.open_round()
        opened = await client.expect(lambda f: f.get("type") == "round_opened"
                                     and f["seq"] > welcome["seq"])
        ids = [f"page-{i}-{uuid.uuid4().hex[:6]}" for i in range(5)]
        for bet_id, spot in zip(ids, ["P1", "P2", "P3", "P4", "P5"], strict=True):
            assert (await client.bet(bet_id, opened["round_id"], spot, 10))["type"] == \
                "bet_accepted"
        # accepted, not yet settled: already in the record
        first = server.get("/api/bets?limit=2", token).json()
        assert [e["bet_id"] for e in first["bets"]] == [ids[4], ids[3]]  # newest first
        assert first["bets"][0]["state"] == "accepted" and first["bets"][0]["cards"] is None
        assert first["next"] is not None
        second = server.get(f"/api/bets?limit=2&before={first['next']}", token).json()
        assert [e["bet_id"] for e in second["bets"]] == [ids[2], ids[1]]
        third = server.get(f"/api/bets?limit=2&before={second['next']}", token).json()
        assert [e["bet_id"] for e in third["bets"]] == [ids[0]] and third["next"] is None
        assert server.get("/api/bets?limit=x", token).status_code == 400
        # the same pages over the websocket
        await client.send({"type": "get_bets", "limit": 3})
        page = await client.expect("bets")
        assert [e["bet_id"] for e in page["bets"]] == ids[:1:-1]
        await client.send({"type": "get_bets", "limit": 3, "before": page["next"]})
        assert [e["bet_id"] for e in (await client.expect("bets"))["bets"]] == ids[1::-1]
    finally:
        await client.close()


async def test_guest_health_readiness_and_metrics(auto_server: LiveServer) -> None:
    server = auto_server
    token, player = server.guest()
    assert player["balance"] == 10_000 and player["id"].startswith("g_")
    assert token.count(".") == 1
    with httpx.Client(trust_env=False, timeout=5) as http:
        assert http.get(server.http + "/api/guest").status_code in (404, 405)  # POST only
        health = http.get(server.http + "/healthz")
        ready = http.get(server.http + "/readyz")
    assert health.status_code == 200 and health.json() == {"ok": True}
    assert ready.status_code == 200
    body = ready.json()
    assert body["ready"] is True and body["checks"]["store"] is True
    assert body["checks"]["tables"] == {"t1": True}

    client = await WireClient.connect(server.ws, "counted")
    try:
        await client.hello(token)
        metrics = server.get("/metrics")
        assert metrics.status_code == 200
        assert metrics.headers["content-type"].startswith("text/plain")
        text = metrics.text
        lines = dict(line.rsplit(" ", 1) for line in text.splitlines()
                     if line and not line.startswith("#"))
        assert float(lines["livetable_connections"]) >= 1
        assert float(lines["livetable_frames_in_total"]) >= 1
        assert float(lines["livetable_frames_out_total"]) >= 1
        for name in ("livetable_fanout_seconds_count", "livetable_settlement_seconds_count"):
            assert name in lines
        assert "# TYPE livetable_connections gauge" in text
    finally:
        await client.close()


async def test_pages_and_json_are_compressed_the_websocket_is_not(
        manual_server: LiveServer, dealer: Dealer) -> None:
    """Brotli when the browser takes it, else gzip, for scripts, pages and JSON; the
    websocket upgrade passes the middleware untouched."""
    # a round played: the table list holds its hands and its roadmap, as a live one does
    await dealer.open_round()
    await dealer.finish()
    with httpx.Client(trust_env=False, timeout=5.0) as http:
        base = manual_server.http
        for path in ("/js/table.js", "/table.html", "/api/tables", "/js/i18n/th.js"):
            plain = http.get(base + path, headers={"Accept-Encoding": "identity"})
            assert plain.status_code == 200 and "content-encoding" not in plain.headers
            for encoding in ("br", "gzip"):
                r = http.get(base + path, headers={"Accept-Encoding": encoding})
                if len(r.content) < 500:  # the table list before any round: too small
                    assert path == "/api/tables" and "content-encoding" not in r.headers
                    continue
                assert r.headers.get("content-encoding") == encoding, (path, r.headers)
                assert "accept-encoding" in r.headers.get("vary", "").lower()
                assert int(r.headers["content-length"]) < len(plain.content) / 2, path
                if path.startswith("/api/"):  # a live table: it may move on in between
                    ours, theirs = r.json()["tables"], plain.json()["tables"]
                    assert [(t["id"], sorted(t)) for t in ours] == [
                        (t["id"], sorted(t)) for t in theirs]
                else:
                    assert r.content == plain.content  # httpx decodes: the same bytes
        # a response too small to be worth it is sent as it is
        small = http.get(base + "/healthz", headers={"Accept-Encoding": "br, gzip"})
        assert "content-encoding" not in small.headers
    viewer = await WireClient.connect(
        manual_server.ws, "viewer", additional_headers={"Accept-Encoding": "gzip, br"})
    try:
        welcome = await viewer.hello()
        assert welcome["table"]["id"] == "t1"
        assert viewer.texts[0].startswith('{"type":"welcome"')  # plain JSON text frames
    finally:
        await viewer.close()
