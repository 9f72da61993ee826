"""The Redis bus's gap repair delivers each table step once (issue 16).

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
