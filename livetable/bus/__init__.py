"""The bus: carries each table step, already encoded, from the table's engine to gateways.

A :class:`TableBatch` is what one engine step announces: the step's table events (encoded
once, as the frames every client receives), the table's snapshot after the step, and the
private ``bet_settled`` frames addressed to players. A gateway keeps the latest snapshot and
a ring of recent frames per table (for resume) and fans the frames out to its connections.

It carries one thing more: a :class:`SessionEnd` when an operator's session ends, so
that every gateway closes that session's connections at once (the store keeps the end,
which refuses the token from then on; the bus only makes it immediate).
A :class:`TableNote` is a frame for a table's watchers that is not a numbered table event: a
chat message, a deletion, a change of dealer (livetable/server/gateway/chat.py). It goes the
same way to every gateway, on the same channel, and no gap repair applies to it: a note lost
on the way is a chat line missed, never money.

A :class:`BalancesMoved` names the players whose balance a bet or a tip taken on one
gateway moved, so that the player's connections on the others (another phone, on another
gateway) hear their balance then, not only at the round's results; the gateway that took
it tells its own (livetable/server/gateway/players.py). It too is a hint: one lost on the
way is a balance shown late, never money.

It also sums the players online: each gateway counts the connections watching a table; the
bus gives it every other gateway's count (:meth:`Bus.watchers_elsewhere`), so that a
table's ``presence`` frame says the same number on every gateway.

Embedded mode uses :class:`MemoryBus` (a direct call); scale-out uses the Redis bus
(``livetable.bus.redis``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import msgspec


class TableBatch(msgspec.Struct, kw_only=True, array_like=True):
    table: str
    epoch: int
    seq: int  # the seq of the snapshot (the last event's, or the table's head if none)
    frames: list[tuple[int, bytes]]  # (seq, encoded table event)
    snapshot: bytes  # encoded TableSnapshot
    private: list[tuple[str, bytes]] = []  # (player id, encoded private frame)
    #: Rebuilt from the store after a loss on the bus: it carries no private frames, so the
    #: gateway fetches the results of the rounds it settles for the players connected.
    repair: bool = False


class SessionEnd(msgspec.Struct, kw_only=True, array_like=True):
    """An operator's session ended: its connections get ``session_ended`` and close."""

    session_id: str
    reason: str


class TableNote(msgspec.Struct, kw_only=True, array_like=True, tag="note"):
    table: str
    frame: bytes  # the encoded frame, for every watcher; empty: for dealer consoles only
    #: The same frame for dealer consoles when theirs says more (a chat sender's id), or
    #: theirs alone (a tip, with ``frame`` empty).
    staff: bytes | None = None


class BalancesMoved(msgspec.Struct, kw_only=True, array_like=True):
    """Players whose balance moved at gateway ``gateway`` (the bus's name for it)."""

    gateway: str
    players: list[str]


BATCH_ENCODER = msgspec.msgpack.Encoder()
BATCH_DECODER = msgspec.msgpack.Decoder(TableBatch)
SESSION_END_DECODER = msgspec.msgpack.Decoder(SessionEnd)
NOTE_DECODER = msgspec.msgpack.Decoder(TableNote)
BALANCES_DECODER = msgspec.msgpack.Decoder(BalancesMoved)
#: How an encoded note starts: an array whose first item is its tag (a batch's is its table).
NOTE_HEAD = b"\xa4note"


def decode_message(data: bytes) -> TableBatch | TableNote:
    """A message of a table's channel: a step, or a note."""
    if data[1:6] == NOTE_HEAD:
        try:
            return NOTE_DECODER.decode(data)
        except msgspec.ValidationError:
            pass  # a step of a table named "note"
    return BATCH_DECODER.decode(data)


class Bus(Protocol):
    async def publish(self, batch: TableBatch) -> None: ...

    def subscribe(self, deliver: Callable[[TableBatch], None]) -> None: ...

    async def end_session(self, end: SessionEnd) -> None:
        """Tell every gateway (this one too) that a session ended."""
        ...

    def on_session_end(self, close: Callable[[SessionEnd], None]) -> None: ...
    async def publish_note(self, note: TableNote) -> None: ...

    def subscribe_notes(self, deliver: Callable[[TableNote], None]) -> None: ...

    async def watchers_elsewhere(self, table: str, here: int) -> int | None:
        """Tell the other gateways that ``here`` connections watch ``table`` on this one,
        and return how many watch it on all the others (None: not known now)."""
        ...

    async def balances_moved(self, players: list[str]) -> None:
        """Tell the other gateways that these players' balances moved here."""
        ...

    def on_balances_elsewhere(self, tell: Callable[[list[str]], None]) -> None:
        """``tell`` hears the players whose balances moved on another gateway."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


class MemoryBus:
    """In-process bus: publish calls every subscriber directly."""

    def __init__(self) -> None:
        self._subscribers: list[Callable[[TableBatch], None]] = []
        self._session_ends: list[Callable[[SessionEnd], None]] = []
        self._note_subscribers: list[Callable[[TableNote], None]] = []

    def subscribe(self, deliver: Callable[[TableBatch], None]) -> None:
        self._subscribers.append(deliver)

    async def end_session(self, end: SessionEnd) -> None:
        for close in self._session_ends:
            close(end)

    def on_session_end(self, close: Callable[[SessionEnd], None]) -> None:
        self._session_ends.append(close)

    async def publish(self, batch: TableBatch) -> None:
        for deliver in self._subscribers:
            deliver(batch)

    def subscribe_notes(self, deliver: Callable[[TableNote], None]) -> None:
        self._note_subscribers.append(deliver)

    async def publish_note(self, note: TableNote) -> None:
        for deliver in self._note_subscribers:
            deliver(note)

    async def watchers_elsewhere(self, table: str, here: int) -> int | None:
        return 0  # one process: there is no other gateway

    async def balances_moved(self, players: list[str]) -> None:
        return None  # one process: no other gateway to tell

    def on_balances_elsewhere(self, tell: Callable[[list[str]], None]) -> None:
        return None  # nothing moves elsewhere

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        self._subscribers.clear()
        self._session_ends.clear()
        self._note_subscribers.clear()

    @property
    def healthy(self) -> bool:
        return True
