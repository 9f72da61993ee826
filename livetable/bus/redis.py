"""The Redis bus: table steps over Redis pub/sub, with a watchdog and gap repair.

Engines publish each stored step (a :class:`~livetable.bus.TableBatch`) on the table's
channel; every gateway holds ONE subscription (one connection) to the channels of its
tables and fans out in-process. Pub/sub is at-most-once: a message published while a
gateway's subscription is down is gone. Two things make that harmless:

* the step was stored before it was published: the table's event log (in PostgreSQL) has
  it, so the bus can fetch what it missed;
* the bus watches for loss. It knows the last ``seq`` it delivered per table; a batch that
  skips ahead triggers a catch-up from the log first. And it PINGs through the subscription
  every second: a subscription that stays silent past ``silence_timeout`` (a half-open TCP
  connection, a Redis restart) is torn down, re-established, and every table is caught up
  from the log before live batches flow again.

With a Redis Cluster URL the bus uses sharded pub/sub (SPUBLISH/SSUBSCRIBE): a table's
channel lives in the table's slot, so the cluster spreads pub/sub traffic by table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import msgspec
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError

from livetable.bus import (
    BALANCES_DECODER,
    BATCH_ENCODER,
    SESSION_END_DECODER,
    BalancesMoved,
    SessionEnd,
    TableBatch,
    TableNote,
    decode_message,
)
from livetable.bus.keys import DEFAULT_PREFIX, RedisKeys
from livetable.bus.redis_conn import is_redis_outage
from livetable.store.base import StoreUnavailable
from livetable.tasks import cancel, check_cancelled

log = logging.getLogger("livetable.bus")


class _Epoch(msgspec.Struct):
    epoch: int = 0


#: The epoch of a table's public snapshot (the one field of it a catch-up needs).
_SNAPSHOT_EPOCH = msgspec.json.Decoder(_Epoch)

#: Events remembered per table (see RedisBus._delivered): far more than a step holds.
RECENT_FRAMES = 512
#: How long a gateway's count of a table's watchers holds without being told again (it is
#: told every ``PRESENCE_EVERY`` s): a gateway killed without a goodbye leaves the sum after
#: this. Longer than a few presence intervals, so that a gateway's late tick (a busy loop)
#: and the gateways' clocks a second or two apart do not make its players blink out.
WATCHERS_STALE_AFTER_MS = 10_000


class StepLog(Protocol):
    """What the bus reads of the table's stored steps to repair a gap: the head and the
    public snapshot, and the events after a head (the PostgreSQL store's
    ``load_snapshot`` and ``events_after``; see there)."""

    async def load_snapshot(self, table: str) -> tuple[int, int, bytes] | None: ...

    async def events_after(self, table: str, epoch: int, seq: int,
                           limit: int) -> list[bytes] | None: ...


class RedisBus:
    def __init__(self, client: Redis | RedisCluster, tables: list[str],
                 store: StepLog, *,
                 on_reconnect: Callable[[], None] | None = None,
                 silence_timeout: float = 3.0, ping_interval: float = 1.0,
                 prefix: str = DEFAULT_PREFIX,
                 subscriber: Redis | None = None) -> None:
        """``subscriber``: the client the subscription is made on (else ``client``). Its
        connections must not retry (``bus.redis_conn.connection_pool(retry=False)``): redis-py
        reconnects a retrying subscription and subscribes again by itself, and the steps
        published meanwhile would be gone without this bus ever knowing to catch up."""
        self.redis = client
        self.subscriber = subscriber or client
        self.keys = RedisKeys(prefix)
        self.sharded = isinstance(client, RedisCluster)
        self.tables = list(tables)
        self.store = store
        self.on_reconnect = on_reconnect
        self.silence_timeout = silence_timeout
        self.ping_interval = ping_interval
        self._subscribers: list[Callable[[TableBatch], None]] = []
        self._session_ends: list[Callable[[SessionEnd], None]] = []
        self._note_subscribers: list[Callable[[TableNote], None]] = []
        self._balances: list[Callable[[list[str]], None]] = []
        self._heads: dict[str, tuple[int, int]] = {}  # table -> (epoch, seq) delivered
        #: table -> the last events delivered: a step that comes again is told from other
        #: events under the same numbers by them
        self._recent: dict[str, deque[tuple[int, bytes]]] = {}
        self._task: asyncio.Task[None] | None = None
        #: This gateway's name in the tables' watcher counts (one per process).
        self.gateway_id = uuid.uuid4().hex
        self._counted: set[str] = set()  # tables this gateway told a count of
        self.healthy = False
        self.reconnects = 0
        #: The ended-sessions channel's name as a message may carry it (bytes or text).
        self._session_channel = (self.keys.sessions_ended,
                                 self.keys.sessions_ended.encode())
        self._balances_channel = (self.keys.balances, self.keys.balances.encode())

    def subscribe(self, deliver: Callable[[TableBatch], None]) -> None:
        self._subscribers.append(deliver)

    def on_session_end(self, close: Callable[[SessionEnd], None]) -> None:
        self._session_ends.append(close)

    def subscribe_notes(self, deliver: Callable[[TableNote], None]) -> None:
        self._note_subscribers.append(deliver)

    def on_balances_elsewhere(self, tell: Callable[[list[str]], None]) -> None:
        self._balances.append(tell)

    async def publish(self, batch: TableBatch) -> None:
        """Publish a stored step; an unreachable Redis raises
        :class:`~livetable.store.base.StoreUnavailable` (the runner retries)."""
        await self._publish(self.keys.steps(batch.table), BATCH_ENCODER.encode(batch))

    async def publish_note(self, note: TableNote) -> None:
        """Publish a note (a chat line) on the table's channel, to every gateway."""
        await self._publish(self.keys.steps(note.table), BATCH_ENCODER.encode(note))

    async def end_session(self, end: SessionEnd) -> None:
        """Tell every gateway that a session ended (it was stored first: a gateway that
        misses this still refuses the token at its next hello)."""
        await self._publish(self.keys.sessions_ended, BATCH_ENCODER.encode(end))

    async def balances_moved(self, players: list[str]) -> None:
        """Tell the other gateways that these players' balances moved on this one (a
        hint: an unreachable Redis raises :class:`~livetable.store.base.StoreUnavailable`,
        and the players' connections there hear their balance at the results)."""
        await self._publish(self.keys.balances, BATCH_ENCODER.encode(
            BalancesMoved(gateway=self.gateway_id, players=players)))

    async def _publish(self, channel: str, data: bytes) -> None:
        try:
            if self.sharded:
                await self.redis.spublish(channel, data)
            else:
                await self.redis.publish(channel, data)
        except Exception as exc:
            if is_redis_outage(exc):
                raise StoreUnavailable(f"Redis bus: {exc}") from exc
            raise

    async def watchers_elsewhere(self, table: str, here: int) -> int | None:
        """Every other gateway's watchers of ``table``, having told them this one's ``here``:
        one round trip (a field of the table's hash each: count and when it goes stale, see
        :data:`WATCHERS_STALE_AFTER_MS`). Stale fields are left out and deleted. None when
        Redis cannot be reached: the count shown stays as it was — players online is
        a courtesy, never worth an error."""
        key = self.keys.watchers(table)
        now = int(time.time() * 1000)
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.hset(key, self.gateway_id, f"{here} {now + WATCHERS_STALE_AFTER_MS}")
            pipe.hgetall(key)
            _, fields = await pipe.execute()
            self._counted.add(table)
            total, stale = _sum_watchers(fields, self.gateway_id, now)
            if stale:
                await self.redis.hdel(key, *stale)
        except Exception as exc:
            if is_redis_outage(exc):
                return None
            raise
        return total

    async def _forget_watchers(self) -> None:
        """A gateway that stops takes its counts out at once (if Redis answers)."""
        for table in self._counted:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self.redis.hdel(self.keys.watchers(table), self.gateway_id), 1.0)
        self._counted.clear()

    async def start(self) -> None:
        if self._subscribers and self._task is None:
            self._task = asyncio.create_task(self._listen(), name="redis-bus")
            for _ in range(100):  # ready when subscribed (or give up waiting after 5 s)
                if self.healthy:
                    break
                await asyncio.sleep(0.05)

    async def close(self) -> None:
        await cancel(self._task)
        self._task = None
        self.healthy = False
        await self._forget_watchers()

    # --- the subscription --------------------------------------------------------------

    async def _listen(self) -> None:
        backoff = 0.1
        first = True
        while True:
            check_cancelled()  # redis-py may have swallowed it (livetable/tasks.py)
            pubsub: Any = None
            try:
                if isinstance(self.subscriber, RedisCluster):
                    # SSUBSCRIBE routes by the client's slot map, which nothing else may
                    # have loaded yet (a gateway never publishes)
                    await self.subscriber.initialize()
                pubsub = self.subscriber.pubsub()
                channels = [self.keys.steps(t) for t in self.tables]
                if self._session_ends:
                    channels.append(self.keys.sessions_ended)
                if self._balances:
                    channels.append(self.keys.balances)
                if self.sharded:
                    await pubsub.ssubscribe(*channels)
                else:
                    await pubsub.subscribe(*channels)
                await self._catch_up_all()
                self.healthy = True
                if not first:
                    self.reconnects += 1
                    if self.on_reconnect is not None:
                        self.on_reconnect()
                first = False
                backoff = 0.1
                await self._pump(pubsub)
            except asyncio.CancelledError:
                raise
            except (RedisError, RedisClusterException, OSError, TimeoutError,
                    StoreUnavailable) as exc:
                log.warning("redis bus: subscription lost (%s); reconnecting", exc)
            except Exception:  # never let the subscription die quietly: log and go on
                log.exception("redis bus: subscription failed; reconnecting")
            finally:
                self.healthy = False
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def _pump(self, pubsub: Any) -> None:
        last_heard = time.monotonic()
        last_ping = 0.0
        get = pubsub.get_sharded_message if self.sharded else pubsub.get_message
        while True:
            check_cancelled()
            now = time.monotonic()
            if now - last_ping >= self.ping_interval:
                if self.sharded:
                    # the PING must travel on the shard connections the messages come
                    # by (a cluster pubsub's own ping goes to some other node, and its
                    # PONG would never be read here)
                    for shard in list(pubsub.node_pubsub_mapping.values()):
                        await shard.ping()
                else:
                    await pubsub.ping()
                last_ping = now
            if now - last_heard > self.silence_timeout:
                raise TimeoutError(f"no word from Redis for {self.silence_timeout:g} s")
            message = await get(ignore_subscribe_messages=False, timeout=0.25)
            if message is None:
                continue
            last_heard = time.monotonic()
            if message.get("type") in ("message", "smessage"):
                if message.get("channel") in self._session_channel:
                    end = SESSION_END_DECODER.decode(message["data"])
                    for close in self._session_ends:
                        close(end)
                    continue
                if message.get("channel") in self._balances_channel:
                    moved = BALANCES_DECODER.decode(message["data"])
                    if moved.gateway != self.gateway_id:  # this one told its own
                        for tell in self._balances:
                            tell(moved.players)
                    continue
                decoded = decode_message(message["data"])
                if isinstance(decoded, TableNote):
                    for deliver in self._note_subscribers:
                        deliver(decoded)
                else:
                    await self._receive(decoded)

    # --- delivery and repair -----------------------------------------------------------

    async def _receive(self, batch: TableBatch) -> None:
        head = self._heads.get(batch.table)
        if (head is not None and head[0] == batch.epoch and batch.seq > head[1]
                and (not batch.frames or batch.frames[0][0] > head[1] + 1)):
            # Ahead of what we delivered, without the events between: a step lost on the
            # way, or a batch of settlement results (no events) whose step has not come
            # yet — at an engine takeover the new engine's results can overtake the old
            # engine's last step. The log has them: delivered as they are, the gateways
            # would see a gap and close every client (4011).
            await self._catch_up(batch.table)
            head = self._heads.get(batch.table)
        if (head is not None and head[0] == batch.epoch and batch.frames
                and batch.frames[0][0] <= head[1]):
            if self._delivered(batch):
                # A catch-up from the log delivered this step already (it was stored before
                # it was published), and the gateway fetched its private results with the
                # repair: delivered again, they would reach the player twice.
                return
            # Other events under numbers we delivered: the table went back (its engine
            # reloaded from a store that had lost its last steps). The gateways resync.
            self._heads[batch.table] = (batch.epoch, batch.frames[0][0] - 1)
        self._deliver(batch)

    def _delivered(self, batch: TableBatch) -> bool:
        """Whether every event of ``batch`` went out already, the same."""
        sent = dict(self._recent.get(batch.table, ()))
        return all(sent.get(seq) == frame for seq, frame in batch.frames)

    def _deliver(self, batch: TableBatch) -> None:
        head = self._heads.get(batch.table)
        if head is None or head[0] != batch.epoch or batch.seq >= head[1]:
            self._heads[batch.table] = (batch.epoch, batch.seq)
        if batch.frames:
            recent = self._recent.setdefault(batch.table, deque(maxlen=RECENT_FRAMES))
            while recent and recent[-1][0] >= batch.frames[0][0]:
                recent.pop()  # the table went back, or a new epoch: forget the other
            recent.extend(batch.frames)
        for deliver in self._subscribers:
            deliver(batch)

    async def _catch_up_all(self) -> None:
        for table in self.tables:
            await self._catch_up(table)

    async def _catch_up(self, table: str) -> None:
        """Deliver what the table's log holds beyond what we delivered (or its snapshot)."""
        stored = await self.store.load_snapshot(table)  # never the sealed state: see there
        if stored is None:
            return
        epoch, seq, snapshot = stored
        if seq == 0:
            # No event stored yet (a new table's first step, its recovery, has none): the
            # stores keep the head (0, 0) until one comes. The table's epoch is its
            # snapshot's — under epoch 0 the gateways would take the table's first step
            # for a new numbering and close every client who joined meanwhile (4011).
            epoch = _SNAPSHOT_EPOCH.decode(snapshot).epoch
        head = self._heads.get(table)
        frames: list[tuple[int, bytes]] = []
        if head is not None and head[0] == epoch and head[1] < seq:
            missed = await self.store.events_after(table, epoch, head[1], 100_000)
            if missed is not None:
                # up to the snapshot's head only: a step stored between the two reads is
                # past it, and delivered under the older head it would go out again when
                # its own batch came (the gateways take the batch's seq for their head)
                frames = [(head[1] + 1 + i, frame)
                          for i, frame in enumerate(missed[:seq - head[1]])]
        elif head is not None and head[0] == epoch:
            return  # nothing missed
        self._deliver(TableBatch(table=table, epoch=epoch, seq=seq, frames=frames,
                                 snapshot=snapshot, private=[], repair=True))


def _sum_watchers(fields: dict[Any, Any], own: str, now: int) -> tuple[int, list[Any]]:
    """The sum of the other gateways' fresh counts in a table's watcher hash, and the
    fields gone stale (or unreadable: nothing of ours writes them so) to delete."""
    total, stale = 0, []
    for gateway, value in fields.items():
        name = gateway.decode() if isinstance(gateway, bytes) else str(gateway)
        if name == own:
            continue
        text = value.decode() if isinstance(value, bytes) else str(value)
        count, _, until = text.partition(" ")
        if not (count.isdigit() and until.isdigit()) or int(until) < now:
            stale.append(gateway)
            continue
        total += int(count)
    return total, stale
