"""The results' outbox: whatever a commit settled reaches the players connected, once.

A settlement chunk is stored first and published after (host/runner.py). An engine killed
between the two, or a commit whose reply a PostgreSQL failover lost, left results stored
that no gateway ever received: in a fault run 50 players connected never got
``bet_settled`` for 400 bets (the Bet Record had them; the standby found nothing left to
settle, so it published nothing).

The stored rounds are the outbox. A round is marked ``published`` once the table's runner
has published every result of it (:meth:`ResultsOutbox.mark_published`, after a settlement
in which no call and no publication failed). A runner that cannot vouch for what was stored
— it has just taken the table over, or a chunk's call or its publication failed — first
publishes again the results of every round not marked (:func:`publish_again`), read back
from the store. Gateways drop the results they delivered already: a player's results of a
round are always in one chunk, so a gateway remembers, per recent round, the players it
served (server/gateway/delivery.py), and a result published twice reaches a client once.

The SQLite store keeps no such marks: its engine, its gateway and their clients live and
die in one process, and the clients of a restarted process get their results with their
resume (server/gateway/admission.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from livetable import protocol as p
from livetable.bus import Bus, TableBatch
from livetable.store.base import Store

#: Results a batch published again holds at most (whole players): a settlement chunk's.
BATCH_RESULTS = 2000


@runtime_checkable
class ResultsOutbox(Protocol):
    """A store that marks the rounds whose results all reached the bus (PostgreSQL)."""

    async def unpublished_rounds(self, table: str) -> list[str]: ...

    async def mark_published(self, table: str) -> None: ...


async def publish_again(store: Store, outbox: ResultsOutbox, bus: Bus, table: str,
                        head: tuple[int, int, bytes]) -> int:
    """Publish again every result of the rounds of ``table`` not marked published, as
    private batches at ``head`` (the epoch, seq and snapshot of the last step published);
    how many results."""
    epoch, seq, snapshot = head
    count = 0
    for round_id in await outbox.unpublished_rounds(table):
        results = await store.round_settlements(round_id)
        for private in _batches(results):
            await bus.publish(TableBatch(table=table, epoch=epoch, seq=seq, frames=[],
                                         snapshot=snapshot, private=private))
        count += len(results)
    return count


def _batches(results: list[tuple[str, p.BetSettled]]) -> Iterator[list[tuple[str, bytes]]]:
    """A round's results, a player's together, in batches of about :data:`BATCH_RESULTS`."""
    by_player: dict[str, list[bytes]] = {}
    for player_id, message in results:
        by_player.setdefault(player_id, []).append(p.encode(message))
    batch: list[tuple[str, bytes]] = []
    for player_id, frames in by_player.items():
        if batch and len(batch) + len(frames) > BATCH_RESULTS:
            yield batch
            batch = []
        batch.extend((player_id, frame) for frame in frames)
    if batch:
        yield batch
