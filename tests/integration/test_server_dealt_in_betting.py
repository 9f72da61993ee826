"""Cards dealt while betting is open (docs/design.md §1): no surface shows one before its reveal.

The round's burn card and twelve cards now exist while bets are still taken, so every
surface a player, a viewer or anyone on the network can read is searched for them at that
moment: the table snapshots (``/api/tables``, ``/api/tables/{id}``, the roadmap), the open
round (``/api/rounds/{id}``), the Bet Record (HTTP and websocket), a fresh welcome, a resume
replay, ``/metrics``, every frame a viewer, a player and a second dealer console received,
and the stored event log. Only a dealer console that asks (``round_cards``, manual mode) is
told the cards it entered.
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from typing import Any

import pytest
from dealing import between_rounds
from liveserver import HANDS, LiveServer, WireClient, check_no_early_cards, close_all

Frame = dict[str, Any]
CARD_TOKEN = re.compile(r"(?<![0-9A-Za-z])(?:10|[2-9AJQK])[SHDC](?![0-9A-Za-z])")

OPENING = "9S"  # burns 9; not a card of the round below
BURN = "3D"
FIRST = ["4C", "QH", "7S", "AD", "6H", "JC"]
SECOND = ["2H", "8D", "KC", "5S", "10S", "QS"]
ROUND = [BURN, *FIRST, *SECOND]


def cards_in(text: str) -> set[str]:
    return set(CARD_TOKEN.findall(text))


async def public_surfaces(server: LiveServer, round_id: str, player_token: str,
                          resume_from: Frame) -> dict[str, str]:
    """What anyone but a dealer console can read about the table now, as text."""
    texts = {path: server.get(path).text for path in (
        "/api/tables", "/api/tables/t1", "/api/tables/t1/roadmap", f"/api/rounds/{round_id}",
        "/metrics")}
    assert server.get(f"/api/rounds/{round_id}").status_code == 404  # not before it ends
    texts["/api/bets"] = server.get("/api/bets", player_token).text
    late_viewer = await WireClient.connect(server.ws, "late viewer")
    late_player = await WireClient.connect(server.ws, "late player")
    resumer = await WireClient.connect(server.ws, "resumer")
    try:
        texts["welcome (viewer)"] = str((await late_viewer.hello())["table"])
        await late_player.hello(player_token)
        await late_player.send({"type": "get_bets", "limit": 50})
        await late_player.expect("bets")
        # a dealer command on the players' endpoint: refused, nothing told
        await late_player.send({"type": "round_cards"})
        assert (await late_player.expect("error"))["code"] == "not_a_dealer"
        texts["welcome + bets (player)"] = "\n".join(late_player.texts)
        welcome = await resumer.hello(resume=resume_from)
        assert welcome["resumed"] is True
        replay = await resumer.take_until("card_dealt", to="BANKER", n=2)
        assert [f["type"] for f in replay].count("card_dealt") == 12
        texts["resume replay"] = "\n".join(resumer.texts)
    finally:
        await close_all([late_viewer, late_player, resumer])
    return texts


def stored_events_after(server: LiveServer, seq: int) -> str:
    """The store's event log of table t1 after ``seq`` (what a resume is served from)."""
    db = sqlite3.connect(server.data_dir / "livetable.sqlite3")
    try:
        rows = db.execute("SELECT frame FROM events WHERE table_id = 't1' AND seq > ? "
                          "ORDER BY seq", (seq,)).fetchall()
    finally:
        db.close()
    return "\n".join(bytes(r[0]).decode() for r in rows)


async def test_manual_round_dealt_while_betting_shows_no_card(manual_server: LiveServer
                                                              ) -> None:
    server = manual_server
    # tokens first: a connection must say hello within the (short) hello timeout
    dealer_token = server.dealer_token()
    token = server.player_token(f"d-{uuid.uuid4().hex[:8]}", "Somchai")
    dealer = await WireClient.connect(server.ws_dealer, "dealer")
    await dealer.hello(dealer_token)
    clients = [dealer]
    try:
        await between_rounds(dealer, server)
        assert (await dealer.command("start_shoe"))["type"] == "ack"
        assert (await dealer.command("card", card=OPENING))["detail"]["slot"] == "opening"
        second_console = await WireClient.connect(server.ws_dealer, "second console")
        clients.append(second_console)
        await second_console.hello(dealer_token)
        viewer = await WireClient.connect(server.ws, "viewer")
        clients.append(viewer)
        await viewer.hello()
        player = await WireClient.connect(server.ws, "player")
        clients.append(player)
        await player.hello(token)
        assert (await dealer.command("open_betting", betting_ms=60_000))["type"] == "ack"
        opened = await viewer.expect("round_opened")
        round_id = opened["round_id"]
        for card in ROUND:
            assert (await dealer.command("card", card=card))["type"] == "ack"
        await viewer.expect("card_dealt", to="BANKER", n=2)
        answer = await player.bet("after-the-deal", round_id, "P2", 100)
        assert answer["type"] == "bet_accepted"  # every card out, bets still open

        texts = await public_surfaces(server, round_id, token,
                                      {"epoch": opened["epoch"], "seq": opened["seq"]})
        texts["stored events"] = stored_events_after(server, opened["seq"] - 1)
        for client in (viewer, player, second_console):
            texts[f"frames of {client.name}"] = "\n".join(client.texts)
        assert server.get("/api/tables/t1").json()["phase"] == "betting"
        for where, text in texts.items():
            assert not cards_in(text) & set(ROUND), (where, cards_in(text) & set(ROUND))

        # The console that entered them may ask for them after a reload: its own answer.
        answer = await dealer.command("round_cards")
        assert answer["detail"] == {
            "round_id": round_id, "phase": "betting",
            "cards": [{"slot": "burn", "card": BURN},
                      *({"slot": h, "n": 1, "card": c} for h, c in zip(HANDS, FIRST,
                                                                         strict=True)),
                      *({"slot": h, "n": 2, "card": c} for h, c in zip(HANDS, SECOND,
                                                                         strict=True))]}
        assert not cards_in("\n".join(second_console.texts)) & set(ROUND)

        # Then the close, the reveals: each card shows first in its hand's reveal, and the
        # burn card never shows at all.
        assert (await dealer.command("close_betting"))["type"] == "ack"
        for _ in HANDS:
            assert (await dealer.command("reveal"))["type"] == "ack"
        for client in (viewer, player, second_console):
            await client.expect("round_settled", round_id=round_id)
        truth = {h: [a, b] for h, a, b in zip(HANDS, FIRST, SECOND, strict=True)}
        assert server.get(f"/api/rounds/{round_id}").json()["cards"] == truth
        for client in (viewer, player, second_console):
            check_no_early_cards(client, {round_id: truth})
        await player.expect("bet_settled", bet_id="after-the-deal")
    finally:
        await close_all(clients)


@pytest.fixture
def slow_auto_server(fresh_server: LiveServer) -> LiveServer:
    """Auto rounds with a long countdown: the thirteen cards are out long before it ends,
    and the test has read everything while it runs (its dealer then closes the betting).

    The server starts in manual mode, so that no round opens before the test's clients are
    in: the test switches the table to auto then, and the first auto round opens at once.
    """
    fresh_server.mode = "manual"
    fresh_server.betting_seconds = 60
    return fresh_server.start()


async def test_auto_round_dealt_while_betting_shows_no_card(slow_auto_server: LiveServer
                                                            ) -> None:
    server = slow_auto_server
    token = server.player_token("auto-watch", "Anong")
    dealer_token = server.dealer_token()
    viewer = await WireClient.connect(server.ws, "viewer")
    player = await WireClient.connect(server.ws, "player")
    dealer = await WireClient.connect(server.ws_dealer, "dealer")
    clients = [viewer, player, dealer]
    try:
        await viewer.hello()
        await player.hello(token)
        await dealer.hello(dealer_token)
        assert (await dealer.command("set_mode", auto=True))["type"] == "ack"
        opened = await viewer.expect(lambda f: f.get("type") == "round_opened"
                                     and f["seq"] > viewer.welcome["seq"])  # type: ignore[index]
        round_id = opened["round_id"]
        taken = await viewer.take_until("card_dealt", to="BANKER", n=2)
        assert "betting_closed" not in [f["type"] for f in taken]
        assert server.get("/api/tables/t1").json()["phase"] == "betting"
        # the server's shoe stays secret from dealer consoles too
        assert (await dealer.command("round_cards"))["code"] == "wrong_mode"

        texts = await public_surfaces(server, round_id, token,
                                      {"epoch": opened["epoch"], "seq": opened["seq"]})
        texts["stored events"] = stored_events_after(server, opened["seq"] - 1)
        for client in clients:  # from this round's opening on (the last round's reveals
            # may be before it: this client may have joined during them)
            # (a client whose hello came after the opening has its welcome of this
            # round's betting first: no card of any round is face up there)
            start = next((i for i, f in enumerate(client.frames)
                          if f.get("type") == "round_opened" and f["round_id"] == round_id),
                         0)
            texts[f"frames of {client.name}"] = "\n".join(client.texts[start:])
        # still betting once everything was read: nothing above can hold a revealed card
        assert server.get("/api/tables/t1").json()["phase"] == "betting"
        shoe_cards = {f["burn_card"] for c in clients for f in c.of_type("shoe_started")}
        for where, text in texts.items():
            # the only card anywhere is the shoe's face-up opening card
            assert cards_in(text) <= shoe_cards, (where, cards_in(text))

        # the dealer ends the countdown; the reveals are the auto clock's
        assert (await dealer.command("close_betting"))["type"] == "ack"
        for client in clients:
            await client.expect("round_settled", round_id=round_id, timeout=30)
        truth = server.get(f"/api/rounds/{round_id}").json()["cards"]
        for client in clients:
            check_no_early_cards(client, {round_id: truth})
    finally:
        await close_all(clients)
