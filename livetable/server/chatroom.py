"""Where a table's chat is kept: its last 50 messages, its mutes, each player's rate window
and who is dealing. In memory (embedded, one process) or in Redis (scale-out).

Why the store and not the gateway: in scale-out a player's next message may reach another
gateway, and a mute set by a console on one gateway must hold on all of them. So Redis
holds what every gateway must agree on — each with its own expiry, so nothing is swept by
hand — and the rules (livetable/chat.py) stay pure. None of it is money: nothing of the
chat is in the ledger, and a lost chat room loses only chat.

The Redis room: the last messages are a stream capped at :data:`~livetable.chat.RECENT`
(``XADD MAXLEN``), whose entry id is the message's id (unique across gateways, in order); a
mute is a key with its expiry (``SET PX``); a rate window is ``SET NX PX``, so two gateways
taking the same player's messages at once let exactly one through.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import msgspec

from livetable import protocol as p
from livetable.bus.keys import RedisKeys
from livetable.bus.redis_conn import is_redis_outage
from livetable.chat import RATE_WINDOW_MS, RECENT
from livetable.store.base import StoreUnavailable

_MESSAGE = msgspec.json.Decoder(p.ChatMessage)
_STREAM_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")


class ChatRoom(Protocol):
    """What the gateway's chat needs kept; every time is epoch ms (``now``)."""

    async def take_turn(self, player_id: str, now: int) -> bool:
        """Whether the player may send now; if so their next window starts."""
        ...

    async def muted(self, table: str, player_id: str, now: int) -> int | None:
        """When the player's mute at ``table`` ends (epoch ms), or None: not muted."""
        ...

    async def mute(self, table: str, player_id: str, minutes: int, now: int) -> None:
        """Mute for ``minutes`` from ``now`` (0 lifts a mute)."""
        ...

    async def add(self, message: p.ChatMessage) -> p.ChatMessage:
        """Keep ``message`` among the table's last; it comes back with its id."""
        ...

    async def delete(self, table: str, message_id: str) -> bool: ...

    async def recent(self, table: str) -> list[p.ChatMessage]:
        """The table's last messages, oldest first, with their senders' ids."""
        ...

    async def set_presenter(self, table: str, presenter: p.Presenter) -> None: ...

    async def presenter(self, table: str) -> p.Presenter | None: ...


class MemoryChatRoom:
    """The embedded server's room: one process, so plain dicts (expiries checked on read).

    With a ``path`` (the embedded server's: ``chat.json`` beside its SQLite store) each
    table's last messages are written there on every change and read back at start, so a
    restart keeps the chat a player scrolls back through, as Redis keeps it in scale-out.
    At most :data:`RECENT` lines a table: a few kilobytes, rewritten whole (write then
    rename, so a crash leaves the old file or the new one)."""

    #: Past this many rate windows kept, the lapsed ones are dropped.
    PRUNE_AT = 10_000

    def __init__(self, path: Path | None = None) -> None:
        self._recent: dict[str, deque[p.ChatMessage]] = {}
        self._mutes: dict[tuple[str, str], int] = {}
        self._turns: dict[str, int] = {}
        self._presenters: dict[str, p.Presenter] = {}
        self._ids = itertools.count(1)
        self._path = path
        if path is not None and path.exists():
            kept = msgspec.json.decode(path.read_bytes(), type=dict[str, list[p.ChatMessage]])
            self._recent = {t: deque(lines, maxlen=RECENT) for t, lines in kept.items()}

    def _save(self) -> None:
        if self._path is None:
            return
        temp = self._path.with_suffix(".tmp")
        temp.write_bytes(msgspec.json.encode({t: list(q) for t, q in self._recent.items()}))
        os.replace(temp, self._path)

    async def take_turn(self, player_id: str, now: int) -> bool:
        if self._turns.get(player_id, 0) > now:
            return False
        if len(self._turns) >= self.PRUNE_AT:
            self._turns = {k: v for k, v in self._turns.items() if v > now}
        self._turns[player_id] = now + RATE_WINDOW_MS
        return True

    async def muted(self, table: str, player_id: str, now: int) -> int | None:
        until = self._mutes.get((table, player_id))
        if until is not None and until <= now:
            del self._mutes[(table, player_id)]
            return None
        return until

    async def mute(self, table: str, player_id: str, minutes: int, now: int) -> None:
        if minutes:
            self._mutes[(table, player_id)] = now + minutes * 60_000
        else:
            self._mutes.pop((table, player_id), None)

    async def add(self, message: p.ChatMessage) -> p.ChatMessage:
        # the same shape as a Redis stream id: the time, then a sequence
        message.id = f"{message.at}-{next(self._ids)}"
        self._recent.setdefault(message.table, deque(maxlen=RECENT)).append(message)
        self._save()
        return message

    async def delete(self, table: str, message_id: str) -> bool:
        kept = self._recent.get(table, deque())
        for message in kept:
            if message.id == message_id:
                kept.remove(message)
                self._save()
                return True
        return False

    async def recent(self, table: str) -> list[p.ChatMessage]:
        return list(self._recent.get(table, ()))

    async def set_presenter(self, table: str, presenter: p.Presenter) -> None:
        self._presenters[table] = presenter

    async def presenter(self, table: str) -> p.Presenter | None:
        return self._presenters.get(table)


@contextlib.contextmanager
def _outage() -> Iterator[None]:
    """Redis out of reach is an outage (answered ``unavailable``), not a bug."""
    try:
        yield
    except Exception as exc:
        if is_redis_outage(exc):
            raise StoreUnavailable(f"chat: {exc}") from exc
        raise


class RedisChatRoom:
    """The scale-out room: shared by every gateway (see the module docstring). An
    unreachable Redis raises redis-py's error; the gateway answers it ``unavailable``."""

    def __init__(self, redis: Any, keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys

    async def take_turn(self, player_id: str, now: int) -> bool:
        with _outage():
            return bool(await self.redis.set(self.keys.chat_turn(player_id), now, nx=True,
                                             px=RATE_WINDOW_MS))

    async def muted(self, table: str, player_id: str, now: int) -> int | None:
        with _outage():
            until = await self.redis.get(self.keys.chat_mute(table, player_id))
        return None if until is None else int(until)

    async def mute(self, table: str, player_id: str, minutes: int, now: int) -> None:
        key = self.keys.chat_mute(table, player_id)
        with _outage():
            if minutes:
                await self.redis.set(key, now + minutes * 60_000, px=minutes * 60_000)
            else:
                await self.redis.delete(key)

    async def add(self, message: p.ChatMessage) -> p.ChatMessage:
        # kept without its id: the entry id Redis gives it is the id
        with _outage():
            entry_id = await self.redis.xadd(self.keys.chat(message.table),
                                             {"m": p.encode(message)}, maxlen=RECENT,
                                             approximate=False)
        message.id = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        return message

    async def delete(self, table: str, message_id: str) -> bool:
        if not _STREAM_ID.fullmatch(message_id):
            return False  # not an id Redis could have given: no such message
        with _outage():
            return bool(await self.redis.xdel(self.keys.chat(table), message_id))

    async def recent(self, table: str) -> list[p.ChatMessage]:
        with _outage():
            entries = await self.redis.xrange(self.keys.chat(table), count=RECENT)
        messages = []
        for entry_id, fields in entries:
            message = _MESSAGE.decode(fields[b"m"])
            message.id = entry_id.decode()
            messages.append(message)
        return messages

    async def set_presenter(self, table: str, presenter: p.Presenter) -> None:
        with _outage():
            await self.redis.set(self.keys.presenter(table), p.encode(presenter))

    async def presenter(self, table: str) -> p.Presenter | None:
        with _outage():
            data = await self.redis.get(self.keys.presenter(table))
        return None if data is None else msgspec.json.decode(data, type=p.Presenter)
