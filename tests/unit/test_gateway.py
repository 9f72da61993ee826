"""The gateway's fan-out with fake websockets: one slow client never stalls the others.

Over real TCP a client that never reads is absorbed by kernel buffers for a long time, so
this is tested here, where "never reads" is exact: the slow socket's ``send_text`` never
returns. Given a send queue of 8, the slow client is closed with 4008 after its queue
fills, while a fast client on the same table receives every frame, in order.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from livetable import protocol as p
from livetable.auth import mint
from livetable.bus import TableBatch
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.framed_ws import EXTENSION
from livetable.server.gateway import CLOSE_INTERNAL_ERROR, CLOSE_RESYNC, CLOSE_TOO_SLOW, Gateway
from livetable.server.gateway.delivery import Census
from livetable.store.base import StoreUnavailable
from livetable.store.sqlite import SQLiteStore

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

SEND_QUEUE = 8


class FakeWebSocket:
    """What the gateway uses of a Starlette WebSocket; ``slow`` never finishes a send."""

    def __init__(self, *frames: dict[str, Any], slow: bool = False,
                 direct: bool = False) -> None:
        self.headers: dict[str, str] = {}
        # with ``direct``, the connection offers framed_ws's write_frame extension; it takes
        # frames while ``writable`` and records them (the raw websocket frames) in ``wire``
        self.scope: dict[str, Any] = {"type": "websocket", "extensions": {}}
        self.wire: list[bytes] = []
        self.writable = True
        if direct:
            self.scope["extensions"][EXTENSION] = self._write_frame
        self.slow = slow
        self.sent: list[dict[str, Any]] = []
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        for frame in frames:
            self.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(frame)})
        self.close_codes: list[int] = []
        self.stuck = asyncio.Event()  # set once a send is blocked for good

    async def accept(self) -> None:
        return None

    async def receive(self) -> dict[str, Any]:
        return await self.incoming.get()

    def _write_frame(self, frame: bytes) -> bool:
        if not self.writable:
            return False
        self.wire.append(frame)
        return True

    def received(self) -> list[dict[str, Any]]:
        """Every message in the order the peer would read it: queued sends and direct
        frames interleave in the gateway's order, so decode both into one list by seq."""
        direct = [json.loads(_payload(f)) for f in self.wire]
        return sorted(self.sent + direct, key=lambda m: m.get("seq", -1))

    async def send_text(self, text: str) -> None:
        if self.slow:
            self.stuck.set()
            await asyncio.Event().wait()  # the peer never reads: this send never completes
        self.sent.append(json.loads(text))

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.close_codes.append(code)
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": code})


def _payload(frame: bytes) -> bytes:
    """The payload of an unmasked websocket frame, checking its header."""
    assert frame[0] == 0x81  # FIN, text
    n = frame[1]
    if n == 126:
        n, start = int.from_bytes(frame[2:4], "big"), 4
    else:
        start = 2
    assert len(frame) == start + n
    return frame[start:]


def event(seq: int) -> bytes:
    return p.encode(p.TablePaused(reason=f"r{seq}", table="t1", epoch=1, seq=seq))


def snapshot(seq: int) -> bytes:
    return p.encode(p.TableSnapshot(id="t1", name="T1", phase="idle", mode="auto",
                                    epoch=1, seq=seq))


async def settle(predicate: Any, timeout: float = 2.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.001)


def _gateway(tmp_path: Path, heartbeat: float, census: Census | None = None) -> Gateway:
    """A gateway on its own SQLite store, with table t1 known and no dealer."""
    settings = Settings(data_dir=tmp_path, send_queue=SEND_QUEUE, secret=b"s" * 32,
                        event_log_size=100, frames_per_second=1000, heartbeat=heartbeat)

    async def execute(table: str, command: Any) -> p.Ack | p.Error:
        return p.Error(code="no", message="no dealer here")  # type: ignore[arg-type]

    gw = Gateway(settings, SQLiteStore(tmp_path / "db.sqlite3"), execute, Metrics(),
                 b"s" * 32, census=census)
    gw.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[], snapshot=snapshot(0)))
    return gw


@pytest.fixture
async def gateway(tmp_path: Path) -> Any:
    # no heartbeats: these tests check the exact frames a connection gets
    # (tests/integration/test_server_frames.py checks the heartbeats)
    gw = _gateway(tmp_path, heartbeat=0)
    yield gw
    await gw.store.close()


async def test_a_slow_client_is_closed_4008_and_the_others_get_everything(
        gateway: Gateway) -> None:
    hello = {"type": "hello", "v": 1, "table": "t1"}
    fast, slow = FakeWebSocket(hello), FakeWebSocket(hello, slow=True)
    sessions = [asyncio.create_task(gateway.serve(ws, "player")) for ws in (fast, slow)]  # type: ignore[arg-type]
    feed = gateway.feeds["t1"]
    await settle(lambda: len(feed.clients) == 2 and slow.stuck.is_set())
    assert [f["type"] for f in fast.sent] == ["welcome"]

    # the slow client's welcome is stuck in the socket; its queue takes 8 frames, the 9th
    # overflows it
    for seq in range(1, SEND_QUEUE + 1):
        gateway.deliver(TableBatch(table="t1", epoch=1, seq=seq, frames=[(seq, event(seq))],
                                   snapshot=snapshot(seq)))
        await asyncio.sleep(0)
    assert slow.close_codes == [] and len(feed.clients) == 2
    for seq in range(SEND_QUEUE + 1, 31):
        gateway.deliver(TableBatch(table="t1", epoch=1, seq=seq, frames=[(seq, event(seq))],
                                   snapshot=snapshot(seq)))
        await asyncio.sleep(0)

    await settle(lambda: slow.close_codes and len(feed.clients) == 1)
    assert slow.close_codes[0] == CLOSE_TOO_SLOW
    assert gateway.metrics.counters["livetable_slow_client_closes_total"] == 1
    async with asyncio.timeout(2):
        await sessions[1]  # the slow client's session ended and it was forgotten
    assert gateway.metrics.connections == 1 and slow.sent == []

    # the fast client got every frame, in order, and goes on getting them
    await settle(lambda: len(fast.sent) == 31)
    assert [f.get("seq") for f in fast.sent[1:]] == list(range(1, 31))
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=31, frames=[(31, event(31))],
                               snapshot=snapshot(31)))
    await settle(lambda: len(fast.sent) == 32)
    assert fast.close_codes == []

    # the slow client comes back and resumes: it ends at the table's head, no gap after
    back = FakeWebSocket({**hello, "resume": {"epoch": 1, "seq": 0}})
    sessions.append(asyncio.create_task(gateway.serve(back, "player")))  # type: ignore[arg-type]
    await settle(lambda: len(feed.clients) == 2)
    await settle(lambda: len(back.sent) >= 1)
    welcome = back.sent[0]
    assert welcome["type"] == "welcome" and welcome["seq"] == 31
    # a replay of 31 frames would not fit a queue of 8: a snapshot instead of a 4008 loop
    assert welcome["resumed"] is False and back.close_codes == []
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=32, frames=[(32, event(32))],
                               snapshot=snapshot(32)))
    await settle(lambda: len(back.sent) == 2 and len(fast.sent) == 33)
    assert back.sent[1]["seq"] == 32

    for ws in (fast, back):
        await ws.close(1000)
    async with asyncio.timeout(2):
        await asyncio.gather(*sessions)
    assert gateway.metrics.connections == 0 and not feed.clients


async def test_a_short_gap_is_replayed_within_the_queue(gateway: Gateway) -> None:
    for seq in range(1, 4):
        gateway.deliver(TableBatch(table="t1", epoch=1, seq=seq, frames=[(seq, event(seq))],
                                   snapshot=snapshot(seq)))
    ws = FakeWebSocket({"type": "hello", "v": 1, "table": "t1",
                        "resume": {"epoch": 1, "seq": 1}})
    session = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    await settle(lambda: len(ws.sent) == 3)
    assert ws.sent[0]["resumed"] is True and ws.sent[0]["seq"] == 3
    assert [f["seq"] for f in ws.sent[1:]] == [2, 3]
    await ws.close(1000)
    async with asyncio.timeout(2):
        await session


async def test_table_events_go_straight_to_idle_connections_framed_once(
        gateway: Gateway) -> None:
    """With framed_ws's extension, a table event is written to each idle connection as the
    same framed bytes; a connection whose transport pushes back gets it through its queue,
    in order, and direct writes resume only once that queue is drained."""
    hello = {"type": "hello", "v": 1, "table": "t1"}
    a, b = FakeWebSocket(hello, direct=True), FakeWebSocket(hello, direct=True)
    sessions = [asyncio.create_task(gateway.serve(ws, "player")) for ws in (a, b)]  # type: ignore[arg-type]
    feed = gateway.feeds["t1"]
    await settle(lambda: len(feed.clients) == 2 and a.wire and b.wire)  # the welcomes
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=1, frames=[(1, event(1))],
                               snapshot=snapshot(1)))
    assert a.wire[1:] == b.wire[1:] and len(a.wire) == 2  # written at once, the same bytes
    assert json.loads(_payload(a.wire[1]))["seq"] == 1

    b.writable = False  # b's transport is paused: its frames queue up
    for seq in (2, 3):
        gateway.deliver(TableBatch(table="t1", epoch=1, seq=seq, frames=[(seq, event(seq))],
                                   snapshot=snapshot(seq)))
    b.writable = True
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=4, frames=[(4, event(4))],
                               snapshot=snapshot(4)))
    await settle(lambda: len(b.received()) == 5)
    assert [m.get("seq") for m in a.received()[1:]] == [1, 2, 3, 4]
    assert len(a.wire) == 5 and [m["seq"] for m in b.sent] == [2, 3, 4]  # queued, in order
    for ws in (a, b):
        await ws.close(1000)
    async with asyncio.timeout(2):
        await asyncio.gather(*sessions)


def test_metrics_escape_label_values() -> None:
    # table ids went into labels unescaped; a quote or a newline broke the page
    from prometheus_client.parser import text_string_to_metric_families

    from livetable.metrics import Metrics

    metrics = Metrics()
    metrics.set_gauge("livetable_lease_held", 1.0, table='t"1\nx')
    metrics.inc("livetable_welcomes_total", 2)
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    (sample,) = families["livetable_lease_held"].samples
    assert sample.labels == {"table": 't"1\nx'} and sample.value == 1.0
    assert families["livetable_welcomes"].samples[0].value == 2.0


def _split_frames(wire: bytes) -> list[bytes]:
    """The payloads of several unmasked websocket frames written back to back."""
    payloads = []
    while wire:
        n, start = wire[1], 2
        if n == 126:
            n, start = int.from_bytes(wire[2:4], "big"), 4
        payloads.append(_payload(wire[:start + n]))
        wire = wire[start + n:]
    return payloads


async def test_a_players_results_of_a_step_go_out_in_one_write(gateway: Gateway) -> None:
    from livetable.server.gateway import Client

    def result(bet_id: str) -> bytes:
        return p.encode(p.BetSettled(bet_id=bet_id, round_id="r1", spot="P1", amount=10,
                                     outcome="win", odds=1, returned=20, balance=100))

    idle, busy, other = (FakeWebSocket(direct=True), FakeWebSocket(),
                         FakeWebSocket(direct=True))
    clients = {}
    for name, ws in (("ann", idle), ("ann-tab2", busy), ("bob", other)):
        client = Client(ws, gateway, "player")  # type: ignore[arg-type]
        client.table = "t1"
        clients[name] = client
    gateway.players["ann"] = {clients["ann"], clients["ann-tab2"]}
    gateway.players["bob"] = {clients["bob"]}
    private = [("ann", result("a1")), ("bob", result("b1")), ("ann", result("a2")),
               ("ann", result("a3"))]
    before = gateway.metrics.frames_out
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[], snapshot=snapshot(0),
                               private=private))
    # the idle connection: one write holding ann's three frames, in order
    assert len(idle.wire) == 1
    assert [json.loads(f)["bet_id"] for f in _split_frames(idle.wire[0])] == ["a1", "a2", "a3"]
    assert [json.loads(f)["bet_id"] for f in _split_frames(b"".join(other.wire))] == ["b1"]
    # a connection without the direct write gets each through its queue, in order
    await settle(lambda: len(busy.sent) == 3)
    assert [m["bet_id"] for m in busy.sent] == ["a1", "a2", "a3"]
    assert gateway.metrics.frames_out - before == 7


async def test_a_steps_events_go_out_in_one_write_to_each_connection(
        gateway: Gateway) -> None:
    """A step of two events (a round's settlement: the banker's hand, then round_settled)
    is one write to an idle connection, not two (10,000 system calls for 5,000 watchers,
    docs/decisions.md#the-seamless-wallet-at-table-speed); a connection without the direct write
    gets each through its queue."""
    from livetable.server.gateway import Client

    idle, busy = FakeWebSocket(direct=True), FakeWebSocket()
    for ws in (idle, busy):
        client = Client(ws, gateway, "player")  # type: ignore[arg-type]
        client.table = "t1"
        gateway.feeds["t1"].clients.add(client)
    before = gateway.metrics.frames_out
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=2, frames=[(1, event(1)),
                                                                   (2, event(2))],
                               snapshot=snapshot(2)))
    assert len(idle.wire) == 1
    assert [json.loads(f)["seq"] for f in _split_frames(idle.wire[0])] == [1, 2]
    await settle(lambda: len(busy.sent) == 2)
    assert [m["seq"] for m in busy.sent] == [1, 2]
    assert gateway.metrics.frames_out - before == 4
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=3, frames=[(3, event(3))],
                               snapshot=snapshot(3)))
    assert [json.loads(_payload(f))["seq"] for f in idle.wire[1:]] == [3]


def _player_betting_once() -> FakeWebSocket:
    """A signed-in player's connection that sends one bet after its hello."""
    token = mint(b"s" * 32, "player", "p1", "P1", 3600)
    return FakeWebSocket({"type": "hello", "v": 1, "table": "t1", "token": token},
                         {"type": "place_bet", "bet_id": "b1", "round_id": "r1", "spot": "P1",
                          "amount": 100})


async def test_a_bug_while_taking_a_bet_closes_1011_not_unavailable(
        gateway: Gateway, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A bug in the store (here a KeyError) is not an outage. Answered
    ``unavailable``, the client would resend the same bet into the same bug forever; it is
    logged with its traceback and the connection is closed 1011 (internal error)."""
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("a bug")

    monkeypatch.setattr(gateway.store, "place_slip", broken)
    ws = _player_betting_once()
    session = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    async with asyncio.timeout(2):
        await session
    assert ws.close_codes == [CLOSE_INTERNAL_ERROR]
    assert [m["type"] for m in ws.sent] == ["welcome"]  # no "unavailable": nothing to retry
    assert "livetable_unavailable_total" not in gateway.metrics.counters
    assert gateway.metrics.counters["livetable_internal_errors_total"] == 1
    (record,) = [r for r in caplog.records if r.exc_info]
    assert isinstance(record.exc_info[1], KeyError)  # type: ignore[index]  # set just above


async def test_an_unreachable_store_answers_unavailable_and_keeps_the_connection(
        gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """An outage is answered ``unavailable`` for that bet (resend it: it is taken once);
    the connection stays open."""
    async def down(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("the store is down")

    monkeypatch.setattr(gateway.store, "place_slip", down)
    ws = _player_betting_once()
    session = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    await settle(lambda: len(ws.sent) == 2)
    assert ws.sent[1]["type"] == "error" and ws.sent[1]["code"] == "unavailable"
    assert ws.sent[1]["bet_id"] == "b1" and ws.close_codes == []
    assert gateway.metrics.counters["livetable_unavailable_total"] == 1
    await ws.close(1000)
    async with asyncio.timeout(2):
        await session


async def test_a_client_answered_lately_gets_no_heartbeat(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a burst of bets every client is being answered: a heartbeat to each would be a
    write per client for nothing. The others still get theirs."""
    from livetable.server.gateway import Client, delivery
    from livetable.server.gateway import client as connection

    # The gateway's clock moves 20 ms with each answer, whenever the beats are checked: a
    # loaded run's stall between two answers (past half an interval, on the real clock) had
    # made the busy client look quiet.
    clock = [1000.0]
    for module in (connection, delivery):
        monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    gw = _gateway(tmp_path, heartbeat=0.2)
    busy_ws, idle_ws = FakeWebSocket(direct=True), FakeWebSocket(direct=True)
    busy, idle = (Client(ws, gw, "player") for ws in (busy_ws, idle_ws))  # type: ignore[arg-type]
    for client in (busy, idle):
        client.table = "t1"
        gw.feeds["t1"].clients.add(client)
    gw.start()
    try:
        async with asyncio.timeout(5):
            while len(idle_ws.wire) < 4:  # four beats for the idle client...
                clock[0] += 0.02
                busy.send_message(p.Pong(t=1, server_time=2))  # ...while busy is answered
                await asyncio.sleep(0.02)
        # (both also hear the table's players online once: a count, not a beat)
        beats = [json.loads(_payload(f)) for f in busy_ws.wire]
        assert {m["type"] for m in beats} == {"pong", "presence"}  # no heartbeat among them
        assert {json.loads(_payload(f))["type"] for f in idle_ws.wire} == {"heartbeat",
                                                                            "presence"}
    finally:
        await gw.shutdown()
        await gw.store.close()


@pytest.mark.parametrize("bus_first", [False, True])
async def test_a_repaired_rounds_results_reach_a_player_once(
        gateway: Gateway, monkeypatch: pytest.MonkeyPatch, bus_first: bool) -> None:
    """A round's settling step reached this gateway by repair, so its results are read
    back from the store — where a later chunk is already stored whose batch is still on
    its way over the bus. Whether the bus brings that chunk while the store is read
    (``bus_first``) or after, every result reaches the player once (seen as 4
    ``bet_settled`` for 2 bets)."""
    from livetable.server.gateway import Client

    def result(bet_id: str) -> p.BetSettled:
        return p.BetSettled(bet_id=bet_id, round_id="r1", spot="P1", amount=10,
                            outcome="win", odds=1, returned=20, balance=100)

    reading = asyncio.Event()
    read_may_end = asyncio.Event()

    async def settlements_for_rounds(player_id: str, rounds: list[str]) -> list[p.BetSettled]:
        assert rounds == ["r1"]
        reading.set()
        await read_may_end.wait()
        return [result("chunk1"), result("chunk2")]  # ann's chunk is stored by now

    monkeypatch.setattr(gateway.store, "settlements_for_rounds", settlements_for_rounds)
    ws = FakeWebSocket(direct=True)
    client = Client(ws, gateway, "player")  # type: ignore[arg-type]
    client.table = "t1"
    gateway.players["ann"] = {client}
    settled = p.encode(p.RoundSettled(round_id="r1", results=[], last_round=False,
                                      table="t1", epoch=1, seq=1))
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=1, frames=[(1, settled)],
                               snapshot=snapshot(1), repair=True))
    await reading.wait()
    # a player's results of a round are in one chunk (store/bets.py): ann's, both bets
    later_chunk = TableBatch(table="t1", epoch=1, seq=1, frames=[], snapshot=snapshot(1),
                             private=[("ann", p.encode(result("chunk1"))),
                                      ("ann", p.encode(result("chunk2")))])
    if bus_first:
        gateway.deliver(later_chunk)
    read_may_end.set()
    await settle(lambda: not gateway._tasks)
    if not bus_first:
        gateway.deliver(later_chunk)
    got = [json.loads(f)["bet_id"] for w in ws.wire for f in _split_frames(w)
           if json.loads(f)["type"] == "bet_settled"]
    assert sorted(got) == ["chunk1", "chunk2"]


async def test_a_head_gone_backwards_resyncs_the_clients_with_a_fresh_snapshot(
        gateway: Gateway) -> None:
    """An engine reloaded from a store that had lost its last steps numbers its
    events again from the store's head. The gateway, ahead, dropped them as seen — a
    cancellation and the next round_opened among them. Now the clients resync: closed
    4011, and their resume gets a fresh snapshot, not a replay of the other history."""
    for seq in range(1, 6):
        gateway.deliver(TableBatch(table="t1", epoch=1, seq=seq, frames=[(seq, event(seq))],
                                   snapshot=snapshot(seq)))
    hello = {"type": "hello", "v": 1, "table": "t1"}
    ws = FakeWebSocket({**hello, "resume": {"epoch": 1, "seq": 5}})
    session = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    feed = gateway.feeds["t1"]
    await settle(lambda: len(feed.clients) == 1)

    # the same step again (a bus that brings it twice) is no step back
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=5, frames=[(5, event(5))],
                               snapshot=snapshot(5)))
    assert ws.close_codes == [] and feed.seq == 5

    # the store kept up to seq 3: the reloaded engine's next step is 4, another event
    other = p.encode(p.RoundCancelled(round_id="r", reason="restarted", table="t1",
                                      epoch=1, seq=4))
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=4, frames=[(4, other)],
                               snapshot=snapshot(4)))
    await settle(lambda: ws.close_codes != [])
    assert ws.close_codes == [CLOSE_RESYNC]
    assert gateway.metrics.counters["livetable_feed_rewinds_total"] == 1
    async with asyncio.timeout(2):
        await session
    assert feed.seq == 4
    assert [(e.seq, e.text) for e in feed.frames_after(3) or ()] == [(4, other.decode())]

    # the client resumes from what it saw (seq 5): a fresh snapshot at the table's head
    back = FakeWebSocket({**hello, "resume": {"epoch": 1, "seq": 5}})
    session = asyncio.create_task(gateway.serve(back, "player"))  # type: ignore[arg-type]
    await settle(lambda: len(back.sent) >= 1)
    assert (back.sent[0]["resumed"], back.sent[0]["seq"]) == (False, 4)
    # one that saw only events both histories share is replayed the new one
    early = FakeWebSocket({**hello, "resume": {"epoch": 1, "seq": 3}})
    sessions = [session, asyncio.create_task(gateway.serve(early, "player"))]  # type: ignore[arg-type]
    await settle(lambda: len(early.sent) >= 2)
    assert early.sent[0]["resumed"] is True and early.sent[1]["type"] == "round_cancelled"

    # a snapshot behind the head, without events (the reloaded engine's first step): too
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=2, frames=[], snapshot=snapshot(2)))
    await settle(lambda: back.close_codes == [CLOSE_RESYNC] == early.close_codes)
    assert feed.seq == 2
    async with asyncio.timeout(2):
        await asyncio.gather(*sessions)


async def test_players_online_go_out_when_the_count_changes_at_most_every_interval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table's connections hear how many watch it (a presence frame): once when they
    join, again when the number changed, never more often than ``PRESENCE_EVERY``."""
    from livetable.server.gateway import Client

    monkeypatch.setattr(p, "PRESENCE_EVERY", 0.3)
    gw = _gateway(tmp_path, heartbeat=5)  # the presence check runs on the heartbeat tick
    first_ws, second_ws = FakeWebSocket(direct=True), FakeWebSocket(direct=True)
    first, second = (Client(ws, gw, "player") for ws in (first_ws, second_ws))  # type: ignore[arg-type]

    def counts(ws: FakeWebSocket) -> list[int]:
        frames = [json.loads(_payload(f)) for f in ws.wire]
        return [m["online"] for m in frames if m["type"] == "presence"]

    first.table = "t1"
    gw.feeds["t1"].clients.add(first)
    gw.feeds["t1"].online_told = -1
    gw.start()
    try:
        await settle(lambda: counts(first_ws) == [1])
        second.table = "t1"
        gw.feeds["t1"].clients.add(second)
        await asyncio.sleep(0.1)
        assert counts(first_ws) == [1]  # not yet: at most one frame per interval
        await settle(lambda: counts(first_ws) == [1, 2] and counts(second_ws) == [2])
        gw.feeds["t1"].clients.discard(second)
        await settle(lambda: counts(first_ws) == [1, 2, 1])
        await asyncio.sleep(0.5)
        assert counts(first_ws) == [1, 2, 1]  # nothing changed: nothing sent
    finally:
        await gw.shutdown()
        await gw.store.close()


async def test_players_online_count_the_connections_of_every_gateway(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In scale-out a table's watchers are spread over gateways: the presence frame says
    the table's count (this gateway's connections and what the bus's census says of the
    others), not this gateway's share. A census that cannot answer (None) or fails keeps
    the last count (each gateway used to count only its own)."""
    from livetable.server.gateway import Client

    monkeypatch.setattr(p, "PRESENCE_EVERY", 0.1)
    told: list[tuple[str, int]] = []
    answers: list[int | Exception | None] = [4, None, RuntimeError("bug"), 6]

    async def census(table: str, here: int) -> int | None:
        told.append((table, here))
        answer = answers.pop(0) if answers else 6
        if isinstance(answer, Exception):
            raise answer
        return answer

    gw = _gateway(tmp_path, heartbeat=5, census=census)  # Services: the bus's census
    ws = FakeWebSocket(direct=True)
    client = Client(ws, gw, "player")  # type: ignore[arg-type]
    client.table = "t1"
    gw.tables.join(client, gw.feeds["t1"])

    def counts() -> list[int]:
        frames = [json.loads(_payload(f)) for f in ws.wire]
        return [m["online"] for m in frames if m["type"] == "presence"]

    gw.start()
    try:
        await settle(lambda: counts()[-1:] == [7])  # 1 here + 6 elsewhere
        assert told[0] == ("t1", 1)  # this gateway's own count goes to the others
        assert 5 in counts()  # 1 here + 4 elsewhere; kept through the None and the fault
        assert counts() == sorted(counts())
    finally:
        await gw.shutdown()
        await gw.store.close()
