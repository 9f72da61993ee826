"""The Redis bus's gap repair delivers each table step once.

A step is stored before it is published, so a catch-up from the table's log covers the
batch that triggered it (and any batch buffered while the subscription was re-made). Such a
batch must not be delivered again after the repair: the gateway drops its frames as seen,
but would send its private ``bet_settled`` results a second time — the repair already
fetched them from the store. (Seen as 4 ``bet_settled`` for 2 bets in the failover test.)
"""

from __future__ import annotations

from livetable.bus import TableBatch
from livetable.bus.redis import RedisBus
from livetable.engine import TableEngine
from livetable.protocol import encode


def frame(seq: int) -> bytes:
    return f'{{"type":"event","seq":{seq}}}'.encode()


class LogOnly:
    """The two reads of a catch-up: the table's public snapshot and its event log."""

    def __init__(self, seq: int) -> None:
        self.engine = TableEngine.new("t1")
        self.engine.state.seq = seq

    async def load_snapshot(self, table: str) -> tuple[int, int, bytes]:
        state = self.engine.state
        return state.epoch, state.seq, encode(self.engine.snapshot())

    async def events_after(self, table: str, epoch: int, seq: int, limit: int
                           ) -> list[bytes]:
        return [frame(s) for s in range(seq + 1, self.engine.state.seq + 1)][:limit]


def batch(*seqs: int, private: list[tuple[str, bytes]] | None = None) -> TableBatch:
    return TableBatch(table="t1", epoch=1, seq=seqs[-1], frames=[(s, frame(s)) for s in seqs],
                      snapshot=b"{}", private=private or [])


async def test_a_batch_the_repair_covered_is_not_delivered_again() -> None:
    store = LogOnly(seq=5)  # steps 3 to 5 stored; 3 and 4 were lost on the bus
    bus = RedisBus(None, ["t1"], store)  # type: ignore[arg-type]  # _receive needs no Redis
    delivered: list[TableBatch] = []
    bus.subscribe(delivered.append)
    await bus._receive(batch(1, 2))
    settles = batch(5, private=[("pA", b'{"type":"bet_settled","bet_id":"a1"}')])
    await bus._receive(settles)  # skips ahead: caught up from the log, 3 to 5
    assert [[s for s, _ in b.frames] for b in delivered] == [[1, 2], [3, 4, 5]]
    assert delivered[1].repair and delivered[1].private == []  # the gateway fetches them
    # buffered while the subscription was re-made: covered by the catch-up too
    await bus._receive(batch(4, 5, private=[("pA", b'{"type":"bet_settled"}')]))
    assert len(delivered) == 2
    await bus._receive(batch(6))  # the next step goes on as usual
    assert [s for s, _ in delivered[-1].frames] == [6] and not delivered[-1].repair


async def test_results_ahead_of_their_step_are_caught_up_first() -> None:
    """At an engine takeover mid-settlement the new engine's first batches — its
    recovery step and its settlement results, without events, at the store's head — can
    reach a gateway before the old engine's last step (published late, or never: killed
    between storing and publishing it). Delivered as they were, ahead of the gateway's
    head with nothing between, every client was closed 4011. The log has the step."""
    store = LogOnly(seq=4)  # the old engine stored step 3-4 and published only up to 2
    bus = RedisBus(None, ["t1"], store)  # type: ignore[arg-type]  # _receive needs no Redis
    delivered: list[TableBatch] = []
    bus.subscribe(delivered.append)
    await bus._receive(batch(1, 2))
    results = TableBatch(table="t1", epoch=1, seq=4, frames=[], snapshot=b"{}",
                         private=[("pA", b'{"type":"bet_settled","bet_id":"a1"}')])
    await bus._receive(results)
    assert [[s for s, _ in b.frames] for b in delivered] == [[1, 2], [3, 4], []]
    assert delivered[1].repair and delivered[2].private == results.private
    # the old engine's step arrives at last: delivered already
    await bus._receive(batch(3, 4))
    assert len(delivered) == 3


async def test_other_events_under_numbers_delivered_go_through() -> None:
    """A reloaded engine numbers its events again from the store's head: the bus passes
    them on (the gateways resync their clients), where it drops a step that comes again."""
    bus = RedisBus(None, ["t1"], LogOnly(seq=3))  # type: ignore[arg-type]
    delivered: list[TableBatch] = []
    bus.subscribe(delivered.append)
    await bus._receive(batch(1, 2, 3))
    await bus._receive(batch(3))  # the same step again
    assert len(delivered) == 1
    other = TableBatch(table="t1", epoch=1, seq=2, frames=[(2, b'{"type":"other"}')],
                       snapshot=b"{}")
    await bus._receive(other)
    assert delivered[-1] is other
    await bus._receive(batch(3))  # the new history's next step goes on as usual
    assert delivered[-1].frames == [(3, frame(3))]


async def test_a_table_without_events_is_caught_up_under_its_own_epoch() -> None:
    """A new table's first step (its recovery) stores no event: the Redis and PostgreSQL
    stores keep the head (0, 0) until one comes, beside the snapshot. Caught up under epoch
    0, a gateway's feed was replaced by the table's first real step (shoe_started), and
    every client that joined in between was closed 4011 ("the table's event numbering
    changed"). The epoch is the snapshot's."""
    store = LogOnly(seq=0)
    epoch = store.engine.state.epoch
    assert epoch > 0

    async def no_events_yet(table: str) -> tuple[int, int, bytes]:
        return 0, 0, encode(store.engine.snapshot())

    store.load_snapshot = no_events_yet  # type: ignore[method-assign]
    bus = RedisBus(None, ["t1"], store)  # type: ignore[arg-type]  # _catch_up needs no Redis
    delivered: list[TableBatch] = []
    bus.subscribe(delivered.append)
    await bus._catch_up("t1")
    assert [(b.epoch, b.seq) for b in delivered] == [(epoch, 0)]
    first = TableBatch(table="t1", epoch=epoch, seq=1, frames=[(1, frame(1))],
                       snapshot=b"{}", private=[])
    await bus._receive(first)
    assert delivered[-1] is first  # in step: no repair, no new numbering


async def test_a_step_stored_between_the_repairs_two_reads_goes_out_once() -> None:
    """A catch-up reads the snapshot, then the log: a step stored between the two was in
    the log's answer, past the snapshot's head. Delivered with the snapshot's (older)
    head, the gateways sent it, took that head for theirs, and sent it again when its own
    batch came: a client saw seq 29 twice after a Redis restart mid-deal."""
    store = LogOnly(seq=5)
    read_snapshot = store.load_snapshot

    async def snapshot_then_a_step(table: str) -> tuple[int, int, bytes]:
        head = await read_snapshot(table)
        store.engine.state.seq = 6  # stored (and to be published) before the log is read
        return head

    store.load_snapshot = snapshot_then_a_step  # type: ignore[method-assign]
    bus = RedisBus(None, ["t1"], store)  # type: ignore[arg-type]  # _receive needs no Redis
    delivered: list[TableBatch] = []
    bus.subscribe(delivered.append)
    await bus._receive(batch(1, 2))
    await bus._receive(batch(5))  # skips ahead: a catch-up
    await bus._receive(batch(6))  # step 6's own batch
    sent = [s for b in delivered for s, _ in b.frames]
    assert sent == [1, 2, 3, 4, 5, 6], sent
    assert all(s <= b.seq for b in delivered for s, _ in b.frames)
