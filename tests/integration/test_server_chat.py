"""The table chat and the presenter on a real ``livetable serve``: two players, a viewer
and a dealer console, over real websockets (docs/protocol.md §3 chat_send, §5, §11).

One player was launched by an operator whose registry entry blocks words; the other has
no operator and is held to none. The server is given a dealer's photo (``--presenter``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from liveserver import LiveServer, WireClient, close_all

from livetable.auth import mint
from livetable.chat import RECENT
from livetable.operator.registry import ledger_player_id

REGISTRY = """\
[operators.acme]
name = "ACME Casino"
operator_secrets = ["env:ACME_OP"]
blocked_words = ["spam", "โกง"]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("chat")
    registry = base / "operators.toml"
    registry.write_text(REGISTRY)
    live = LiveServer(base / "livetable", env={
        "ACME_OP": "acme-secret", "LIVETABLE_OPERATORS": str(registry),
        "LIVETABLE_PRESENTERS": "dealer:Mai=/photos/mai.jpg"})  # the console's token id
    live.start()
    try:
        yield live
    finally:
        live.stop()


def acme_player(server: LiveServer, player_id: str, name: str) -> str:
    """A token as a launch by ``acme`` mints it (its ``op`` claim names the operator)."""
    secret = (server.data_dir / "secret").read_bytes().strip()
    return mint(secret, "player", ledger_player_id("acme", player_id), name, 600,
                operator="acme")


async def seated(server: LiveServer, name: str, token: str | None = None,
                 dealer: bool = False) -> WireClient:
    client = await WireClient.connect(server.ws_dealer if dealer else server.ws, name)
    await client.hello(token)
    return client


async def say(client: WireClient, msg_id: str, text: str) -> dict[str, object]:
    """Send a chat line; its answer (chat_accepted or chat_rejected)."""
    await client.send({"type": "chat_send", "client_msg_id": msg_id, "text": text})
    return await client.expect(lambda f: f.get("type") in ("chat_accepted", "chat_rejected")
                               and f.get("client_msg_id") == msg_id, timeout=10)


async def test_two_players_a_viewer_and_a_dealer(server: LiveServer) -> None:
    ann = await seated(server, "ann", acme_player(server, "ann", "Ann"))
    bob = await seated(server, "bob", server.player_token("bob", "Bob"))
    viewer = await seated(server, "viewer")
    console = await seated(server, "console", server.dealer_token(name="Dee"), dealer=True)
    clients = [ann, bob, viewer, console]
    try:
        assert (await say(viewer, "v1", "hello"))["code"] == "not_a_player"

        sent = await say(ann, "a1", "  good luck, table  ")
        assert sent["type"] == "chat_accepted"
        for client in clients:
            line = await client.expect("chat", id=sent["id"])
            assert (line["from"], line["role"], line["text"], line["table"]) == (
                "Ann", "player", "good luck, table", "t1")
            # the sender's id is the console's only (for chat_mute)
            assert ("player_id" in line) is (client is console)
        mute_id = line["player_id"]

        assert (await say(ann, "a2", "again")).get("code") == "rate_limited"
        assert (await say(ann, "a3", "x" * 201)).get("code") == "too_long"
        assert (await say(ann, "a4", "free SPAM here")).get("code") == "blocked_word"
        assert (await say(ann, "a5", "โต๊ะนี้โกง")).get("code") == "blocked_word"
        # bob has no operator: no blocked words
        assert (await say(bob, "b1", "free SPAM here"))["type"] == "chat_accepted"

        answer = await console.command("chat_mute", player_id=mute_id, minutes=1)
        assert answer["type"] == "ack" and answer["cmd"] == "chat_mute"
        assert (await bob.expect("chat", role="system"))["text"] == \
            "A player was muted for 1 min."
        await ann.expect("chat", role="system")
        await asyncio.sleep(2.1)  # past ann's rate window: what answers now is the mute
        assert (await say(ann, "a6", "let me talk")).get("code") == "muted"
        await console.command("chat_mute", player_id=mute_id, minutes=0)
        assert (await say(ann, "a7", "thanks"))["type"] == "chat_accepted"

        answer = await console.command("chat_delete", id=sent["id"])
        assert answer["type"] == "ack" and answer["detail"]["kept"] is True
        for client in clients:
            await client.expect("chat_deleted", id=sent["id"])

        assert (await say(console, "d1", "Welcome to Pok Deng!"))["type"] == "chat_accepted"
        assert (await bob.expect("chat", role="dealer"))["from"] == "Dee"
        answer = await console.command("dealer_sign_in", name="Mai")
        assert answer["detail"] == {"name": "Mai", "photo": "/photos/mai.jpg"}
        for client in clients:
            changed = await client.expect("dealer_changed")
            assert (changed["name"], changed["photo"]) == ("Mai", "/photos/mai.jpg")
        await say(console, "d2", "I'm Mai, dealing now")
        assert (await viewer.expect("chat", role="dealer"))["from"] == "Mai"

        late = await WireClient.connect(server.ws, "late")
        clients.append(late)
        welcome = await late.hello()
        texts = [m["text"] for m in welcome["chat"]]
        assert "good luck, table" not in texts  # deleted
        assert texts[-4:] == ["A player was muted for 1 min.", "thanks",
                              "Welcome to Pok Deng!", "I'm Mai, dealing now"]
        assert welcome["dealer"] == {"name": "Mai", "photo": "/photos/mai.jpg"}
        assert all("player_id" not in m for m in welcome["chat"])
    finally:
        await close_all(clients)


async def test_the_welcome_carries_the_last_fifty(server: LiveServer) -> None:
    console = await seated(server, "console", server.dealer_token(name="Dee"), dealer=True)
    try:
        for i in range(RECENT + 7):
            assert (await say(console, f"n{i}", f"line {i}"))["type"] == "chat_accepted"
        viewer = await WireClient.connect(server.ws, "viewer")
        lines = (await viewer.hello())["chat"]
        assert [m["text"] for m in lines] == [f"line {i}" for i in range(7, RECENT + 7)]
        assert len({m["id"] for m in lines}) == RECENT
        await viewer.close()
    finally:
        await console.close()


async def test_markup_reaches_everyone_as_the_same_text(server: LiveServer) -> None:
    eve = await seated(server, "eve", server.player_token("eve", "<b>Eve</b>"))
    viewer = await seated(server, "viewer")
    try:
        text = "<img src=x onerror=alert(1)>"
        assert (await say(eve, "e1", text))["type"] == "chat_accepted"
        line = await viewer.expect("chat", text=text)
        assert line["from"] == "<b>Eve</b>"
    finally:
        await close_all([eve, viewer])
