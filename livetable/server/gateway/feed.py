"""What this gateway knows of a table: the bus's last word on it.

A gateway holds no table state of its own making. Per table it keeps a :class:`TableFeed`:
the snapshot, the head ``(epoch, seq)``, a ring of recent frames (for resumes), and the
connections watching.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from livetable import protocol as p

if TYPE_CHECKING:
    from livetable.server.gateway.client import Client

_SETTLING = msgspec.json.Decoder(p.RoundSettled | p.RoundCancelled | p.TableEvent)


@dataclass
class TableFeed:
    table: str
    epoch: int
    seq: int
    snapshot: bytes
    ring: deque[tuple[int, str]]
    clients: set[Client] = field(default_factory=set)
    #: When the last table event went out to the clients (monotonic): heartbeats fill quiet.
    last_sent: float = 0.0
    #: The watchers' count the table's connections were last told (a presence frame), when.
    online_told: int = -1
    online_at: float = 0.0
    _view: tuple[bytes, p.TableSnapshot] | None = None

    def view(self) -> p.TableSnapshot:
        """The snapshot decoded — once per table step, however many clients join."""
        if self._view is None or self._view[0] is not self.snapshot:
            self._view = (self.snapshot, msgspec.json.decode(self.snapshot,
                                                             type=p.TableSnapshot))
        return self._view[1]

    def presence(self) -> p.Presence:
        return p.Presence(table=self.table, online=len(self.clients))

    def frames_after(self, seq: int) -> list[tuple[int, str]] | None:
        """Every frame after ``seq`` up to the head, or None if the ring no longer has them."""
        if seq == self.seq:
            return []
        if seq > self.seq or not self.ring or self.ring[0][0] > seq + 1:
            return None
        return [(s, f) for s, f in self.ring if s > seq]



def settled_rounds(frames: list[tuple[int, str]]) -> list[str]:
    """Round ids of the round_settled / round_cancelled events among ``frames``."""
    rounds = []
    for _, frame in frames:
        if '"round_settled"' in frame or '"round_cancelled"' in frame:
            event = _SETTLING.decode(frame)
            if isinstance(event, p.RoundSettled | p.RoundCancelled):
                rounds.append(event.round_id)
    return rounds
