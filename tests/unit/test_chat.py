"""The table chat's rules (livetable/chat.py), its in-memory room, and the gateway's chat
through a real :class:`~livetable.server.gateway.Gateway` with stand-in sockets: who may
say what, how often, what the dealer console sees, and that docs/protocol.md lists exactly
the codes the server sends."""

from __future__ import annotations

import asyncio
import json
import random
import re
from pathlib import Path
from typing import Any, get_args

import pytest

from livetable import protocol as p
from livetable.auth import mint
from livetable.bus import BATCH_ENCODER, NOTE_DECODER, TableBatch, TableNote, decode_message
from livetable.chat import (
    CHAT_REJECTIONS,
    MAX_CHARS,
    RATE_WINDOW_MS,
    RECENT,
    BlockedWords,
    blocked_words,
    clean,
    folded,
    judge,
)
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.chatroom import MemoryChatRoom
from livetable.server.gateway import Gateway
from livetable.store.sqlite import SQLiteStore

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

ROOT = Path(__file__).resolve().parents[2]
SECRET = b"s" * 32

# --- the rules -------------------------------------------------------------------------


def test_a_message_is_trimmed_and_counted_after_trimming() -> None:
    assert judge("  hello  ", role="player") == ("hello", None)
    assert judge(" " * 50 + "x" * MAX_CHARS + " " * 50, role="player")[1] is None
    assert judge("x" * (MAX_CHARS + 1), role="player")[1] == "too_long"
    assert judge("   \t\n ", role="player")[1] == "empty"
    assert judge("", role="player")[1] == "empty"


def test_control_characters_become_spaces_and_runs_of_spaces_one() -> None:
    assert clean("a\nb\r\n\tc") == "a b c"
    assert clean("left\u202eright") == "left right"  # a bidi override reorders nothing
    assert clean("a     b") == "a b"
    assert clean("ไพ่สวย 🎉") == "ไพ่สวย 🎉"  # letters and emoji stay as they are


def test_markup_is_text_not_refused() -> None:
    text = '<img src=x onerror="alert(1)">'
    assert judge(text, role="player") == (text, None)


def test_blocked_words_match_whole_words_ignoring_case_and_forms() -> None:
    words = BlockedWords.of(["spam", "Scam Site"])
    assert words.found_in("buy SPAM now")
    assert words.found_in("ＳＰＡＭ")  # full-width letters are the same word (NFKC)
    assert words.found_in("a scam site!")
    assert not words.found_in("spammer")  # a word inside another is not the word
    assert not words.found_in("hello")


def test_a_thai_blocked_word_matches_inside_a_sentence() -> None:
    # Thai is written without spaces between words: there is no boundary to stand between
    words = BlockedWords.of(["โกง"])
    assert words.found_in("โต๊ะนี้โกงแน่ๆ")
    assert not words.found_in("โต๊ะนี้ดีมาก")


def one_regex(words: list[str]) -> re.Pattern[str] | None:
    """The blocked words as they were matched before: one alternation, a whole word
    (bounded by non-word characters) or, in Thai, anywhere."""
    parts = [re.escape(word) if re.search("[\u0e00-\u0e7f]", word)
             else rf"(?<!\w){re.escape(word)}(?!\w)"
             for word in sorted({folded(w).strip() for w in words} - {""})]
    return re.compile("|".join(parts)) if parts else None


def test_blocked_words_match_exactly_as_the_one_regex_did() -> None:
    """Words of word characters are looked up in a set, one lookup a word of the text
    (one regex of 2,000 words took 6 ms a line on the event loop): what is blocked is
    exactly what the one regex blocked, phrases, signs, Thai and case included."""
    rng = random.Random(20261206)
    alphabet = "abAB _-*.éกขๆ1"
    for _ in range(400):
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
                 for _ in range(rng.randint(0, 6))]
        blocked, before = BlockedWords.of(words), one_regex(words)
        for _ in range(20):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
            expected = before is not None and before.search(folded(text)) is not None
            assert blocked.found_in(text) == expected, (words, text)


def test_only_players_are_held_to_the_blocked_words() -> None:
    words = blocked_words(("spam",))
    assert judge("no spam", role="player", blocked=words)[1] == "blocked_word"
    assert judge("no spam", role="dealer", blocked=words)[1] is None
    assert judge("no spam", role="player")[1] is None  # a player without an operator
    assert blocked_words(()).pattern is None and not blocked_words(()).words


def test_every_rejection_has_its_message_and_protocol_md_lists_exactly_them() -> None:
    codes = set(get_args(p.ChatRejectionCode))
    assert set(CHAT_REJECTIONS) == codes
    doc = (ROOT / "docs/protocol.md").read_text()
    block = doc.split("**`chat_rejected.code`**", 1)[1].split("\n\n", 2)[1]
    assert set(re.findall(r"^\| `([a-z_]+)` \|", block, re.M)) == codes


# --- the room --------------------------------------------------------------------------


async def test_one_message_per_window_per_player() -> None:
    room = MemoryChatRoom()
    assert await room.take_turn("p1", 10_000)
    assert not await room.take_turn("p1", 10_000 + RATE_WINDOW_MS - 1)
    assert await room.take_turn("p2", 10_001)  # another player's window is their own
    assert await room.take_turn("p1", 10_000 + RATE_WINDOW_MS)


async def test_a_mute_lasts_its_minutes_at_its_table_and_zero_lifts_it() -> None:
    room = MemoryChatRoom()
    await room.mute("t1", "p1", 5, now=0)
    assert await room.muted("t1", "p1", 5 * 60_000 - 1)
    assert not await room.muted("t2", "p1", 1)
    assert not await room.muted("t1", "p1", 5 * 60_000)
    await room.mute("t1", "p1", 5, now=0)
    await room.mute("t1", "p1", 0, now=1)
    assert not await room.muted("t1", "p1", 2)


async def test_a_table_keeps_its_last_fifty_and_forgets_a_deleted_one() -> None:
    room = MemoryChatRoom()
    ids = []
    for i in range(RECENT + 5):
        message = await room.add(p.ChatMessage(id="", table="t1", sender="d", role="dealer",
                                               text=str(i), at=1000 + i))
        ids.append(message.id)
    assert len(set(ids)) == len(ids)
    kept = await room.recent("t1")
    assert [m.text for m in kept] == [str(i) for i in range(5, RECENT + 5)]
    assert await room.delete("t1", ids[10])
    assert not await room.delete("t1", ids[10])
    assert not await room.delete("t1", ids[0])  # already beyond the last 50
    assert ids[10] not in [m.id for m in await room.recent("t1")]
    assert await room.recent("t2") == []


# --- notes on the bus ------------------------------------------------------------------


def test_a_note_and_a_step_share_the_table_s_channel_and_are_told_apart() -> None:
    note = TableNote(table="t1", frame=b"{}", staff=b"{}")
    assert decode_message(BATCH_ENCODER.encode(note)) == note
    batch = TableBatch(table="note", epoch=1, seq=1, frames=[], snapshot=b"")
    assert decode_message(BATCH_ENCODER.encode(batch)) == batch  # a table named "note"
    assert NOTE_DECODER.decode(BATCH_ENCODER.encode(note)).table == "t1"


# --- the gateway's chat, with stand-in sockets ----------------------------------------


class _Socket:
    """What the gateway uses of a Starlette WebSocket; ``sent`` is what it was sent."""

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.scope: dict[str, Any] = {"type": "websocket", "extensions": {}}
        self.sent: list[dict[str, Any]] = []
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.welcome: dict[str, Any] = {}

    async def accept(self) -> None:
        return None

    async def receive(self) -> dict[str, Any]:
        return await self.incoming.get()

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": code})

    def push(self, frame: dict[str, Any]) -> None:
        self.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(frame)})

    async def answer(self, kind: str, **fields: Any) -> dict[str, Any]:
        async with asyncio.timeout(5):
            while True:
                for frame in self.sent:
                    if frame["type"] == kind and all(frame.get(k) == v
                                                     for k, v in fields.items()):
                        self.sent.remove(frame)
                        return frame
                await asyncio.sleep(0.005)


class _Table:
    """A gateway with one table and the sockets connected to it."""

    def __init__(self, tmp_path: Path) -> None:
        settings = Settings(data_dir=tmp_path, secret=SECRET, heartbeat=0,
                            presenters={"Mai": "/photos/mai.jpg"})

        async def execute(table: str, command: Any) -> p.Ack | p.Error:
            raise AssertionError("the chat never reaches a table's engine")

        self.gateway = Gateway(settings, SQLiteStore(tmp_path / "db.sqlite3"), execute,
                               Metrics(), SECRET)
        self.gateway.chat.words_of = lambda op: (blocked_words(("spam",)) if op == "acme"
                                                 else blocked_words(()))
        snapshot = p.encode(p.TableSnapshot(id="t1", name="T1", phase="idle", mode="auto"))
        self.gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[],
                                        snapshot=snapshot))
        self.sessions: list[tuple[_Socket, asyncio.Task[None]]] = []

    async def join(self, token: str | None, kind: str = "player") -> _Socket:
        ws = _Socket()
        ws.push({"type": "hello", "v": 1, "table": "t1",
                 **({"token": token} if token else {})})
        task = asyncio.create_task(self.gateway.serve(ws, kind))  # type: ignore[arg-type]
        self.sessions.append((ws, task))
        ws.welcome = await ws.answer("welcome")
        return ws

    async def close(self) -> None:
        for ws, task in self.sessions:
            await ws.close()
            async with asyncio.timeout(5):
                await task
        await self.gateway.store.close()


def _player(player_id: str, operator: str | None = None) -> str:
    return mint(SECRET, "player", player_id, player_id.upper(), 3600, operator=operator)


async def test_players_chat_and_the_console_moderates(tmp_path: Path) -> None:
    table = _Table(tmp_path)
    try:
        ann = await table.join(_player("ann", operator="acme"))
        bob = await table.join(_player("bob"))
        viewer = await table.join(None)
        # the staff token Mai's name is bound to (--presenter Mai=…: the staff id "mai")
        console = await table.join(mint(SECRET, "dealer", "mai", "Dee", 3600, ["t1"]),
                                   "dealer")

        viewer.push({"type": "chat_send", "client_msg_id": "v1", "text": "hi"})
        assert (await viewer.answer("chat_rejected"))["code"] == "not_a_player"

        ann.push({"type": "chat_send", "client_msg_id": "a1", "text": "  good luck  "})
        accepted = await ann.answer("chat_accepted", client_msg_id="a1")
        for ws in (ann, bob, viewer):
            line = await ws.answer("chat", id=accepted["id"])
            assert line == {"type": "chat", "id": accepted["id"], "table": "t1",
                            "from": "ANN", "role": "player", "text": "good luck",
                            "at": line["at"]}  # no player_id for players and viewers
        assert (await console.answer("chat", id=accepted["id"]))["player_id"] == "ann"

        ann.push({"type": "chat_send", "client_msg_id": "a2", "text": "again"})
        assert (await ann.answer("chat_rejected", client_msg_id="a2"))["code"] == \
            "rate_limited"
        ann.push({"type": "chat_send", "client_msg_id": "a3", "text": "cheap SPAM"})
        assert (await ann.answer("chat_rejected", client_msg_id="a3"))["code"] == \
            "blocked_word"
        bob.push({"type": "chat_send", "client_msg_id": "b1", "text": "cheap SPAM"})
        await bob.answer("chat_accepted", client_msg_id="b1")  # bob has no operator

        console.push({"type": "chat_mute", "player_id": "bob", "minutes": 5})
        assert (await console.answer("ack", cmd="chat_mute"))["detail"]["minutes"] == 5
        system = await bob.answer("chat", role="system")
        assert system["text"] == "A player was muted for 5 min."
        assert system["notice"] == {"key": "muted", "minutes": 5}  # for the page's language
        table.gateway.chat.room._turns.clear()  # type: ignore[attr-defined]  # past the window
        bob.push({"type": "chat_send", "client_msg_id": "b2", "text": "hello?"})
        assert (await bob.answer("chat_rejected", client_msg_id="b2"))["code"] == "muted"

        console.push({"type": "chat_delete", "id": accepted["id"]})
        assert (await console.answer("ack", cmd="chat_delete"))["detail"]["kept"] is True
        for ws in (ann, bob, viewer, console):
            await ws.answer("chat_deleted", id=accepted["id"])

        console.push({"type": "dealer_sign_in", "name": " mai "})
        await console.answer("ack", cmd="dealer_sign_in")
        changed = await bob.answer("dealer_changed")
        assert (changed["name"], changed["photo"]) == ("mai", "/photos/mai.jpg")
        console.push({"type": "chat_send", "client_msg_id": "d1", "text": "Welcome!"})
        await console.answer("chat_accepted", client_msg_id="d1")
        said = await bob.answer("chat", role="dealer")
        assert said["from"] == "mai"  # the name the console signed in with

        counters = table.gateway.metrics.counters
        assert counters["livetable_chat_lines_total"] == 3  # ann, bob, the dealer (not the system)
        assert counters["livetable_chat_rejected_total"] == 4
        late = await table.join(None)
        welcome = late.welcome
        assert [m["text"] for m in welcome["chat"]] == [
            "cheap SPAM", "A player was muted for 5 min.", "Welcome!"]
        assert all("player_id" not in m for m in welcome["chat"])
        assert welcome["dealer"] == {"name": "mai", "photo": "/photos/mai.jpg"}
        staff = await table.join(mint(SECRET, "dealer", "d2", "Dan", 3600, ["t1"]), "dealer")
        assert staff.welcome["chat"][0]["player_id"] == "bob"
    finally:
        await table.close()


async def test_markup_goes_out_as_the_same_text(tmp_path: Path) -> None:
    table = _Table(tmp_path)
    try:
        ann = await table.join(_player("ann"))
        text = "<img src=x onerror=alert(1)><b>bold</b>"
        ann.push({"type": "chat_send", "client_msg_id": "a1", "text": text})
        assert (await ann.answer("chat"))["text"] == text
    finally:
        await table.close()


async def test_a_dealer_command_of_the_chat_is_refused_on_the_players_endpoint(
        tmp_path: Path) -> None:
    table = _Table(tmp_path)
    try:
        ann = await table.join(_player("ann"))
        ann.push({"type": "chat_mute", "player_id": "bob", "minutes": 5})
        assert (await ann.answer("error"))["code"] == "not_a_dealer"
    finally:
        await table.close()


@pytest.mark.parametrize("minutes", [-1, 10_081])
def test_a_mute_s_minutes_are_bounded(minutes: int) -> None:
    import msgspec

    with pytest.raises(msgspec.ValidationError):
        p.DEALER_DECODER.decode(json.dumps({"type": "chat_mute", "player_id": "p",
                                            "minutes": minutes}))


async def test_redis_out_of_reach_is_an_outage_not_a_bug() -> None:
    # the session answers an outage ``unavailable`` and goes on; anything else closes 1011
    from redis.exceptions import ConnectionError as RedisConnectionError

    from livetable.bus.keys import RedisKeys
    from livetable.server.chatroom import RedisChatRoom
    from livetable.store.base import StoreUnavailable

    class Down:
        async def set(self, *args: Any, **kwargs: Any) -> None:
            raise RedisConnectionError("Connection refused")

        async def xdel(self, *args: Any) -> int:
            raise AssertionError("an id Redis never gave is not looked up")

    room = RedisChatRoom(Down(), RedisKeys())
    with pytest.raises(StoreUnavailable):
        await room.take_turn("p1", 0)
    assert not await room.delete("t1", "not-an-id")


async def test_the_embedded_room_keeps_its_last_lines_across_a_restart(tmp_path: Path) -> None:
    """The chat a player scrolls back through survives a restart of the embedded server."""
    room = MemoryChatRoom(tmp_path / "chat.json")
    first = await room.add(p.ChatMessage(id="", table="t1", sender="Ann", role="player",
                                         text="before the restart", at=1_000, player_id="p1"))
    gone = await room.add(p.ChatMessage(id="", table="t1", sender="Bob", role="player",
                                        text="deleted", at=2_000, player_id="p2"))
    assert await room.delete("t1", gone.id)
    again = MemoryChatRoom(tmp_path / "chat.json")
    assert [(m.id, m.text, m.player_id) for m in await again.recent("t1")] == [
        (first.id, "before the restart", "p1")]
    assert await again.recent("t2") == []
