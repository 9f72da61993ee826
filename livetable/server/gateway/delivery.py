"""Delivery: the table steps the bus brings, fanned out to the connections watching.

Each table event is encoded once, by the engine, and framed once here: the same bytes go
to every connection (see :mod:`livetable.server.framed_ws`). A step that does not follow the
last one delivered tells the table's clients to resume (:data:`CLOSE_RESYNC`) — nothing is
skipped silently. A player's private results go to that player's connections at the table,
written together; those of rounds that reached this gateway by repair are read back from
the store; a result that comes again (published again after a takeover, or read by a repair
as the bus brings it) is dropped. Quiet tables get heartbeats.

:class:`Delivery` is the gateway's bus side: it changes the :class:`Tables` (a new feed, a
step remembered) and writes to the connections watching; it never reads a frame from one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable

import msgspec

from livetable import protocol as p
from livetable.bus import TableBatch
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.framed_ws import text_frame
from livetable.server.gateway.audience import fan_out
from livetable.server.gateway.codes import CLOSE_RESYNC
from livetable.server.gateway.feed import Sent, TableFeed, Tables, settled_rounds
from livetable.store.base import Store, StoreUnavailable
from livetable.tasks import check_cancelled

log = logging.getLogger("livetable.gateway")

#: Rounds per table whose results' players a gateway remembers (see :class:`Served`):
#: results come again only for the last rounds (host/results.py).
ROUNDS_REMEMBERED = 8


class _RoundOf(msgspec.Struct):
    round_id: str = ""


_ROUND_OF = msgspec.json.Decoder(_RoundOf)


def round_of(frame: bytes) -> str:
    """The round of an encoded ``bet_settled``."""
    return _ROUND_OF.decode(frame).round_id


class Served:
    """The players a table's recent rounds delivered results to, per round.

    A player's results of a round are always stored, and published, in one chunk
    (store/bets.py): a second batch naming the player and the round is a repeat — the
    results published again by a runner that could not vouch for them (host/results.py),
    or read from the store by a repair while the bus brought them — and is dropped, so that
    a client gets each result once.
    """

    __slots__ = ("rounds",)

    def __init__(self) -> None:
        self.rounds: OrderedDict[str, set[str]] = OrderedDict()

    def of(self, round_id: str) -> set[str]:
        """The players ``round_id`` delivered results to (remembered from now on)."""
        players = self.rounds.get(round_id)
        if players is None:
            players = self.rounds[round_id] = set()
            while len(self.rounds) > ROUNDS_REMEMBERED:
                self.rounds.popitem(last=False)
        return players


def tell_presence(feed: TableFeed, now: float, metrics: Metrics) -> None:
    """Players online: a table's connections hear its new count when it changed, at most
    every ``PRESENCE_EVERY`` seconds (joins and leaves between two frames make one frame).
    Checked with the heartbeats, on the same tick: no task of its own."""
    online = feed.online()
    if online == feed.online_told or now - feed.online_at < p.PRESENCE_EVERY:
        return
    feed.online_told, feed.online_at = online, now
    data = p.encode(feed.presence())
    fan_out(feed.clients, [(data.decode(), text_frame(data))], metrics)


#: The bus's census: this gateway's watchers of a table in, every other gateway's out
#: (None: not known now). :meth:`livetable.bus.Bus.watchers_elsewhere`.
Census = Callable[[str, int], Awaitable[int | None]]


def heartbeat_message(settings: Settings) -> p.Heartbeat:
    """The heartbeat frame (its interval, and the server's clock)."""
    return p.Heartbeat(interval_ms=round(settings.heartbeat * 1000),
                       server_time=now_ms())


class Delivery:
    """Table steps from the bus to the connections watching (see the module docstring)."""

    def __init__(self, settings: Settings, store: Store, metrics: Metrics, tables: Tables,
                 keep: Callable[[asyncio.Task[None]], None]) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.tables = tables
        self.keep = keep
        #: Per table: the players each recent round delivered results to.
        self.served: dict[str, Served] = {}

    def deliver(self, batch: TableBatch) -> None:
        """A table step from the bus: remember it, then fan it out. Synchronous on purpose.

        If the step does not follow what this gateway delivered last (a new epoch, a gap the
        bus could not fill, or a head gone backwards: :meth:`TableFeed.agreed`), the clients
        of the table are told to resume (:data:`CLOSE_RESYNC`): their resume, served from
        the store's log or a snapshot, brings them back in step. Nothing is skipped silently.
        """
        feed = self.tables.feeds.get(batch.table)
        if feed is None or feed.epoch != batch.epoch:
            if feed is not None:
                self._resync(feed, "the table's event numbering changed")
            feed = TableFeed(batch.table, batch.epoch, 0, batch.snapshot,
                             deque(maxlen=self.settings.event_log_size))
            self.tables.feeds[batch.table] = feed
        agreed = feed.agreed(batch.frames, batch.seq, bool(batch.private))
        if agreed is not None:
            # The table went back (its engine reloaded from a store that lost its last
            # steps): the events after ``agreed`` that the clients have are not the
            # table's. Dropping the new ones as already seen would leave the clients in the
            # other history (a cancellation, the next round never shown); they resume
            # instead, and get a snapshot.
            self.metrics.inc("livetable_feed_rewinds_total")
            feed.rewind(agreed)
            self._resync(feed, "the table went back to an earlier point")
        new = [(seq, raw) for seq, raw in batch.frames if seq > feed.seq]
        fresh = [(seq, raw.decode()) for seq, raw in new]
        if feed.seq and ((fresh and fresh[0][0] != feed.seq + 1)
                         or (not fresh and batch.seq > feed.seq)):
            self.metrics.inc("livetable_feed_gaps_total")
            feed.ring.clear()  # resumers fall back to the store's log
            self._resync(feed, "events were lost on the way to this gateway")
        if batch.seq >= feed.seq:
            feed.snapshot = batch.snapshot
            feed.seq = batch.seq
        if fresh:
            sent_at = feed.last_sent = time.monotonic()
            # framed once per event: the same bytes go to every connection, and to a
            # resume's replay (the ring keeps them)
            sent = [Sent(seq, text, text_frame(raw))
                    for (seq, text), (_, raw) in zip(fresh, new, strict=True)]
            feed.ring.extend(sent)
            fan_out(feed.clients, [(e.text, e.wire) for e in sent], self.metrics)
            self.metrics.fanout(len(fresh) * len(feed.clients), time.monotonic() - sent_at)
        if batch.private:
            self._deliver_private(batch.table, batch.private)
        if batch.repair and fresh:
            rounds = settled_rounds(text for _, text in fresh)
            if rounds:
                self.keep(asyncio.get_running_loop().create_task(
                    self._repair_private(batch.table, rounds)))

    def _deliver_private(self, table: str, private: list[tuple[str, bytes]]) -> None:
        """Each player's private results of a step (a settlement chunk holds whole
        players, of one round), framed and written together; once (:class:`Served`)."""
        first, last = round_of(private[0][1]), round_of(private[-1][1])
        rounds: dict[str, list[tuple[str, bytes]]] = {first: private}
        if first != last:  # not made so: judged result by result
            rounds = {}
            for player_id, frame in private:
                rounds.setdefault(round_of(frame), []).append((player_id, frame))
        served = self.served.setdefault(table, Served())
        for round_id, results in rounds.items():
            players = served.of(round_id)
            by_player: dict[str, list[bytes]] = {}
            for player_id, frame in results:
                frames = by_player.get(player_id)
                if frames is None:
                    if player_id in players:
                        continue  # delivered before: a repeat
                    frames = by_player[player_id] = []
                frames.append(frame)
            players.update(by_player)
            for player_id, frames in by_player.items():
                clients = [c for c in self.tables.players.get(player_id, ())
                           if c.table == table]
                if clients:
                    framed = b"".join([text_frame(frame) for frame in frames])
                    for client in clients:
                        client.send_all(frames, framed)

    def _resync(self, feed: TableFeed, why: str) -> None:
        for client in list(feed.clients):
            client.close(CLOSE_RESYNC, why)
        feed.clients.clear()

    async def _repair_private(self, table: str, rounds: list[str]) -> None:
        """The private results of rounds whose step reached us by repair, not by the bus.
        With the store unreachable they are left out: the Bet Record holds them.

        The round's later settlement chunks still come over the bus, and one of them may have
        been stored — so read here — before its batch arrives, or arrive while this reads:
        each player's results of a round go out once, whichever way comes first
        (:class:`Served`)."""
        served = self.served.setdefault(table, Served())
        for player_id, clients in list(self.tables.players.items()):
            watching = [c for c in clients if c.table == table]
            if not watching:
                continue
            try:
                messages = await self.store.settlements_for_rounds(player_id, rounds)
            except StoreUnavailable as exc:
                log.warning("table %s: private results not repaired: %s", table, exc)
                return
            fresh: set[str] = set()  # the rounds of these results not sent before
            for message in messages:
                players = served.of(message.round_id)
                if player_id in players and message.round_id not in fresh:
                    continue  # the bus brought them while this read
                players.add(player_id)
                fresh.add(message.round_id)
                for client in watching:
                    client.send_message(message)

    async def census(self, count_elsewhere: Census) -> None:
        """Every ``PRESENCE_EVERY`` s, tell the bus how many watch each table here and
        learn how many watch it on the other gateways: the heartbeat tick's presence
        frames then carry the table's players online, not this gateway's share. A bus
        that cannot answer leaves the last count; a fault in the count is logged and the
        census goes on (a count is never worth the loop)."""
        while True:
            await asyncio.sleep(p.PRESENCE_EVERY)
            for feed in list(self.tables.feeds.values()):
                try:
                    elsewhere = await count_elsewhere(feed.table, len(feed.clients))
                    check_cancelled()  # redis-py may have swallowed it (livetable/tasks.py)
                except Exception:
                    log.exception("players online: the count of table %s failed", feed.table)
                    continue
                if elsewhere is not None:
                    feed.watching_elsewhere = elsewhere

    async def heartbeats(self) -> None:
        """A heartbeat to every connection of a table that sent nothing for an interval.

        Why: a connection that the network drops silently (no FIN, no RST: a phone losing
        its signal) looks open to both ends for minutes. A client that knows a frame comes
        at least every interval can tell within about two intervals that it is gone, and
        show it. Only quiet tables get them — a table dealing a round is heard anyway — and
        one frame, framed once, serves every connection of the table. A new connection gets
        one right after its welcome, so that it knows the interval before the table is quiet.
        """
        interval = self.settings.heartbeat
        check_every = min(0.25, interval / 4)  # a beat is due at most this late
        while True:
            await asyncio.sleep(check_every)
            now = time.monotonic()
            for feed in list(self.tables.feeds.values()):
                tell_presence(feed, now, self.metrics)
                if not feed.clients or now - feed.last_sent < interval:
                    continue
                feed.last_sent = now
                data = p.encode(heartbeat_message(self.settings))
                text, wire = data.decode(), text_frame(data)
                # A client answered within half an interval has just had a frame: it needs no
                # beat now (in a burst of bets, that is nearly every client: one write each
                # saved). It hears again at most 1.5 intervals and a check after that answer;
                # the page waits 2 intervals and a second (static/js/conn.js).
                answered_since = now - interval / 2
                for client in feed.clients:
                    if client.answered_at < answered_since:
                        client.send_all((text,), wire)
