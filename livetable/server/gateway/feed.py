"""What this gateway knows of a table: the bus's last word on it.

A gateway holds no table state of its own making. Per table it keeps a :class:`TableFeed`:
the snapshot, the head ``(epoch, seq)``, a ring of recent frames (for resumes), and the
connections watching. :class:`Tables` holds the feeds and, for private frames, each
player's connections: who joins and leaves is decided in one place.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import msgspec

from livetable import protocol as p
from livetable.server.gateway.audience import Audience
from livetable.server.gateway.client import Client

_SETTLING = msgspec.json.Decoder(p.RoundSettled | p.RoundCancelled | p.TableEvent)


class Sent(NamedTuple):
    """A table event as the gateway sent it: its seq, its JSON text, and its websocket
    frame (framed once, by the fan-out: a resume writes the same bytes again)."""

    seq: int
    text: str
    wire: bytes


@dataclass
class TableFeed:
    table: str
    epoch: int
    seq: int
    snapshot: bytes
    ring: deque[Sent]
    #: The connections watching, split as the fan-out reaches them (a set of clients to
    #: everything else).
    clients: Audience = field(default_factory=Audience)
    #: When the last table event went out to the clients (monotonic): heartbeats fill quiet.
    last_sent: float = 0.0
    #: ``(agreed, head)``: the table went back from ``head`` to ``agreed`` (an engine
    #: reloaded from a store that had lost its last steps): the events this gateway sent
    #: after ``agreed`` are not the table's any more. See :meth:`rewind`.
    rewound: tuple[int, int] | None = None
    #: The watchers' count the table's connections were last told (a presence frame), when.
    online_told: int = -1
    online_at: float = 0.0
    #: The connections watching the table on the other gateways, as the bus last said
    #: (scale-out; always 0 in one process): players online is the table's, not ours.
    watching_elsewhere: int = 0
    _view: tuple[bytes, p.TableSnapshot] | None = None

    def view(self) -> p.TableSnapshot:
        """The snapshot decoded — once per table step, however many clients join."""
        if self._view is None or self._view[0] is not self.snapshot:
            self._view = (self.snapshot, msgspec.json.decode(self.snapshot,
                                                             type=p.TableSnapshot))
        return self._view[1]

    def went_back_from(self, seq: int) -> bool:
        """Whether a client at ``seq`` saw events the table went back on: it resumes from a
        snapshot, never from a replay of the other history."""
        return self.rewound is not None and self.rewound[0] < seq <= self.rewound[1]

    def agreed(self, frames: list[tuple[int, bytes]], seq: int, private: bool) -> int | None:
        """Where a step from the bus (its ``frames``, its head ``seq``, whether it carries
        private results) goes back to: the last seq both histories share, or None if it
        does not go back. It goes back if it brings an event at or below the head unlike
        the one sent (a reloaded engine numbering its events again from the store's head),
        or, without events or results, a head behind this one (its snapshot is behind)."""
        if not self.seq:
            return None
        if frames and frames[0][0] <= self.seq:
            sent = {e.seq: e.text for e in self.ring if e.seq >= frames[0][0]}
            for s, raw in frames:
                if s > self.seq:
                    return None
                if sent.get(s) != raw.decode():
                    return s - 1
            return None  # a step delivered already, the same
        if not frames and not private and seq < self.seq:
            return seq
        return None

    def rewind(self, agreed: int) -> None:
        """Go back to ``agreed``: the ring forgets what came after it, and a client that
        saw any of it resumes from a snapshot (:meth:`went_back_from`)."""
        low, high = agreed, self.seq
        if self.rewound is not None:
            low, high = min(low, self.rewound[0]), max(high, self.rewound[1])
        self.rewound = (low, high)
        while self.ring and self.ring[-1].seq > agreed:
            self.ring.pop()
        self.seq = agreed

    def online(self) -> int:
        """Players online at the table: the connections watching it on every gateway."""
        return len(self.clients) + self.watching_elsewhere

    def presence(self) -> p.Presence:
        return p.Presence(table=self.table, online=self.online())

    def frames_after(self, seq: int) -> list[Sent] | None:
        """Every frame after ``seq`` up to the head, or None if the ring no longer has them."""
        if seq == self.seq:
            return []
        if seq > self.seq or not self.ring or self.ring[0].seq > seq + 1:
            return None
        return [e for e in self.ring if e.seq > seq]


class Tables:
    """Every table this gateway has heard of (its :class:`TableFeed`), the connections
    watching each, and each player's connections (by player id) for private frames."""

    def __init__(self) -> None:
        self.feeds: dict[str, TableFeed] = {}
        self.players: dict[str, set[Client]] = {}

    def join(self, client: Client, feed: TableFeed) -> None:
        """``client`` gets ``feed``'s live frames from now on (and a player its own)."""
        feed.clients.add(client)
        feed.online_told = -1  # the newcomer hears the count on the next tick (delivery.py)
        identity = client.identity
        if identity is not None and identity.is_player:  # private frames are players' only
            self.players.setdefault(identity.id, set()).add(client)

    def leave(self, client: Client) -> None:
        if client.table and client.table in self.feeds:
            self.feeds[client.table].clients.discard(client)
        if client.identity is not None:
            others = self.players.get(client.identity.id)
            if others is not None:
                others.discard(client)
                if not others:
                    del self.players[client.identity.id]


def settled_rounds(frames: Iterable[str]) -> list[str]:
    """Round ids of the round_settled / round_cancelled events among ``frames`` (JSON)."""
    rounds = []
    for frame in frames:
        if '"round_settled"' in frame or '"round_cancelled"' in frame:
            event = _SETTLING.decode(frame)
            if isinstance(event, p.RoundSettled | p.RoundCancelled):
                rounds.append(event.round_id)
    return rounds
