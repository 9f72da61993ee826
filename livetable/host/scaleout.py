"""Scale-out on Redis: dealer commands across processes, and one engine per table.

**Commands.** A dealer console talks to whichever gateway it reached; the table's engine
runs in some engine process. The gateway pushes the command on the table's command list
(with a deadline and a reply key) and waits for the reply; the engine holding the table
pops it, runs it, and pushes the answer. A command nobody takes before its deadline is
answered ``table_unavailable`` and dropped, so it can never run late.

**Leases.** At most one engine drives a table: it holds the table's lease (a key set with
``NX PX``, renewed well within its time to live) and a fencing token that PostgreSQL issues
when the lease is taken (:meth:`~livetable.store.postgres.PostgresStore.claim`) and checks
on every step: the database refuses an older holder's writes
(:class:`~livetable.store.base.FenceRefused`), so a Redis that failed over to a replica, or
restarted empty, and handed the lease out twice cannot let two engines write. The lease's
scripts are the files of ``host/lua/`` (package data). An engine whose renewal is
refused stops driving at once; one whose renewal gets no answer
(a Redis restart, a dead pooled connection) keeps driving, and retrying, only while the
lease surely lasts (ttl from its last renewal); a standby that finds the lease lapsed
takes it, rebuilds the engine from the store and applies the engine's recovery rule: the
round goes on (all its cards recorded) or is cancelled and refunded — within ``ttl +
poll`` of the lapse (2 s + 0.5 s by default).
On a graceful stop an engine releases its leases, so a standby takes over at once.

**Renewals on a thread of their own.** The lease says an engine is alive, not that its
event loop is idle. Renewed from the loop that also serves websockets (``livetable
serve``), a burst of bets that kept the loop busy past the lease's 2 s left the renewal
waiting in line; a standby took the lapsed lease and, by the recovery rule, cancelled the
round in betting (measured: a 100,000-bet intake, 75,997 bets refused
``betting_closed``; docs/benchmarks.md). So the renewals run on a thread with an event
loop and a Redis connection of its own (:class:`_Renewals`), which a busy loop does not
hold up; the engine's loop only takes leases, drops the tables it lost and says it is
alive (:attr:`LeasedTables.heartbeat`). A loop that has not said so for
:data:`STALL_LIMIT` seconds is stuck, not busy: its leases are left to lapse, and a
standby takes the tables over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

import msgspec
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from livetable import protocol as p
from livetable.bus.keys import DEFAULT_PREFIX, RedisKeys
from livetable.clock import now_ms
from livetable.engine.dealing import DealerAction
from livetable.host.runner import TableRunner
from livetable.store.base import FenceRefused, StoreUnavailable
from livetable.store.postgres import PostgresStore
from livetable.tasks import cancel, check_cancelled, wait_set

log = logging.getLogger("livetable.scaleout")

COMMAND_TIMEOUT = 5.0
#: Seconds without a word from the engine's event loop after which its leases are no
#: longer renewed (a stuck loop, not a busy one: see the module's docstring).
STALL_LIMIT = 20.0
#: The share of the lease's time to live that an engine cut off from Redis keeps in hand:
#: it stops driving a table when only this much of the lease surely remains (0.5 s of
#: 2 s), so that it has stopped before a standby can take the lapsed lease.
RENEWAL_MARGIN = 0.25
#: How long a renewal sent when the lease is (nearly) spent may wait for its answer.
LAST_RENEWAL_WAIT = 0.1


class CommandEnvelope(msgspec.Struct, kw_only=True):
    reply_to: str
    expires_at: int
    command: bytes  # the dealer frame as the gateway decoded it, re-encoded


def _lease_script(name: str) -> str:
    """One of the lease's Lua scripts (``host/lua/lease_<name>.lua``)."""
    return (resources.files("livetable.host") / "lua" / f"lease_{name}.lua").read_text()


_ENVELOPES = msgspec.json.Decoder(CommandEnvelope)
_ANSWERS = msgspec.json.Decoder(p.Ack | p.Error)


class RedisControl:
    """The gateway side of dealer commands."""

    def __init__(self, client: Redis | RedisCluster, *, prefix: str = DEFAULT_PREFIX) -> None:
        self.redis = client
        self.keys = RedisKeys(prefix)

    async def execute(self, table: str, command: DealerAction) -> p.Ack | p.Error:
        reply_to = self.keys.reply(table, secrets.token_hex(8))
        envelope = CommandEnvelope(reply_to=reply_to,
                                   expires_at=now_ms() + int(COMMAND_TIMEOUT * 1000),
                                   command=p.encode(command))
        try:
            await self.redis.rpush(self.keys.commands(table), p.encode(envelope))
            answer = await self.redis.blpop([reply_to], timeout=COMMAND_TIMEOUT)
        except RedisError as exc:
            return p.Error(code="table_unavailable", message=f"Redis: {exc}")
        if answer is None:
            return p.Error(code="table_unavailable",
                           message="no engine answered for this table; try again")
        return _ANSWERS.decode(answer[1])


class LeasedTables:
    """The engine side: holds table leases, runs their runners, serves their commands."""

    def __init__(self, client: Redis, store: PostgresStore,
                 tables: list[str], make_runner: Callable[[str], TableRunner], *,
                 ttl_ms: int = 2000, poll: float = 0.5, owner: str | None = None,
                 keys: RedisKeys | None = None, stall_limit: float = STALL_LIMIT) -> None:
        self.redis = client
        #: The store whose steps carry our fencing tokens (``fence_tokens``).
        self.store = store
        #: The leases' names (under the deployment's prefix).
        self.keys = keys or RedisKeys()
        self.tables = tables
        self.make_runner = make_runner
        self.ttl_ms = ttl_ms
        self.poll = poll
        self.owner = owner or f"engine-{secrets.token_hex(6)}"
        self.runners: dict[str, TableRunner] = {}
        self._consumers: dict[str, asyncio.Task[None]] = {}
        #: table -> until when (monotonic) our lease surely lasts: ttl from the sending of
        #: the last renewal (or acquisition) that Redis answered.
        self._valid_until: dict[str, float] = {}
        #: table -> the lease's token in Redis (what a renewal of a lapsed lease checks;
        #: the fencing token is PostgreSQL's, in ``store.fence_tokens``).
        self._tokens: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._acquire = client.register_script(_lease_script("acquire"))
        self._release = client.register_script(_lease_script("release"))
        #: When (monotonic) the engine's event loop last said it is alive.
        self.heartbeat = time.monotonic()
        self.stall_limit = stall_limit
        self._renewals: _Renewals | None = None
        #: tables being dropped because their lease was lost
        self._losing: dict[str, asyncio.Task[None]] = {}

    async def start(self) -> None:
        self.heartbeat = time.monotonic()
        await self._tick()
        self._task = asyncio.create_task(self._loop(), name="leases")
        self._renewals = _Renewals(self, asyncio.get_running_loop())
        self._renewals.start()

    async def stop(self) -> None:
        """Graceful: stop each runner (its last step is stored), then release its lease."""
        await cancel(self._task)
        if self._renewals is not None:
            renewals, self._renewals = self._renewals, None
            await asyncio.to_thread(renewals.stop)
        for losing in list(self._losing.values()):
            await losing
        for table in list(self.runners):
            await self._drop(table)
            with contextlib.suppress(RedisError, OSError, TimeoutError):
                # bounded: a Redis that does not answer lets the lease lapse instead
                await asyncio.wait_for(self._release(
                    keys=[self.keys.lease_owner(table)], args=[self.owner]),
                    self.ttl_ms / 1000)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.poll)
            check_cancelled()  # redis-py may have swallowed it (livetable/tasks.py)
            self.heartbeat = time.monotonic()
            try:
                await self._tick()
            except (RedisError, OSError) as exc:
                log.warning("leases: Redis unreachable (%s)", exc)
            except Exception:  # never let one table's trouble stop the renewals of others
                log.exception("leases: unexpected error; going on")

    async def _tick(self) -> None:
        """Take the leases free to take; drop the tables whose runner stopped."""
        for table in self.tables:
            runner = self.runners.get(table)
            if runner is not None:
                if not runner.alive:
                    log.warning("table %s: its runner stopped; this engine stops driving "
                                "it", table)
                    await self._drop(table)
                continue
            sent = time.monotonic()
            token = int(await self._acquire(
                keys=[self.keys.lease_owner(table), self.keys.lease_counter(table),
                      self.keys.lease_token(table)],
                args=[self.owner, self.ttl_ms]))
            if token:
                self._valid_until[table] = sent + self.ttl_ms / 1000
                await self._take(table, token)

    def valid_until(self, table: str) -> float:
        """Until when (monotonic) our lease of ``table`` surely lasts (0: none)."""
        return self._valid_until.get(table, 0.0)

    def surely_holds(self, table: str) -> bool:
        """Whether our lease of ``table`` lasts more than the margin an engine keeps in
        hand (:data:`RENEWAL_MARGIN`): its runner takes no step otherwise."""
        spare = RENEWAL_MARGIN * self.ttl_ms / 1000
        return time.monotonic() < self.valid_until(table) - spare

    def renewed(self, table: str, sent: float) -> None:
        """A renewal sent at ``sent`` (monotonic) was taken: the lease lasts ttl from
        then. (Called from the renewals' thread: one assignment.)"""
        self._valid_until[table] = sent + self.ttl_ms / 1000

    def lost(self, table: str, token: int) -> None:
        """The lease of ``table`` taken with ``token`` is lost (called on the engine's
        loop): stop driving it — unless it was dropped since, and maybe taken again."""
        if self._tokens.get(table) == token and table in self.runners \
                and table not in self._losing:
            log.warning("table %s: lease lost; this engine stops driving it", table)
            self._losing[table] = asyncio.create_task(self._lose(table), name=f"lose-{table}")

    async def _lose(self, table: str) -> None:
        try:
            await self._drop(table)
        finally:
            self._losing.pop(table, None)

    async def _take(self, table: str, token: int) -> None:
        """Start driving ``table``, whose lease we took with ``token``."""
        self._tokens[table] = token
        runner = self.make_runner(table)
        runner.holds = lambda: self.surely_holds(table)
        try:
            # The database issues the fencing token, not Redis: a Redis that failed over
            # to a replica, or restarted empty, may hand out a lease twice; PostgreSQL's
            # counter only goes up, and refuses older holders' steps.
            token = await self.store.claim(table)
            log.info("table %s: lease taken by %s (fencing token %d)", table, self.owner,
                     token)
            await runner.start()
        except Exception as exc:  # fenced out, or a state we cannot start from
            log.warning("table %s: could not start (%s); releasing the lease", table, exc)
            self.store.fence_tokens.pop(table, None)
            with contextlib.suppress(RedisError, OSError):
                await self._release(keys=[self.keys.lease_owner(table)], args=[self.owner])
            if not isinstance(exc, FenceRefused | StoreUnavailable | RedisError | OSError):
                raise
            return
        self.runners[table] = runner
        self._consumers[table] = asyncio.create_task(self._serve_commands(table, runner))

    async def _drop(self, table: str) -> None:
        runner = self.runners.get(table)
        if runner is not None:
            runner.alive = False  # at once: it takes no step while its consumer stops
        consumer = self._consumers.pop(table, None)
        await cancel(consumer)
        runner = self.runners.pop(table, None)
        if runner is not None:
            await runner.stop()
        self.store.fence_tokens.pop(table, None)
        self._tokens.pop(table, None)

    async def _serve_commands(self, table: str, runner: TableRunner) -> None:
        while True:
            check_cancelled()  # redis-py may have swallowed it (livetable/tasks.py)
            try:
                item = await self.redis.blpop([self.keys.commands(table)], timeout=1)
                if item is None:
                    continue
                envelope = _ENVELOPES.decode(item[1])
                if envelope.expires_at < now_ms():
                    continue  # its gateway has already answered table_unavailable
                try:
                    command = p.TABLE_COMMAND_DECODER.decode(envelope.command)
                except msgspec.DecodeError as exc:
                    answer: p.Ack | p.Error = p.Error(code="bad_frame", message=str(exc))
                else:
                    answer = await runner.execute(command)
                await self.redis.rpush(envelope.reply_to, p.encode(answer))
                await self.redis.expire(envelope.reply_to, 30)
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError, StoreUnavailable) as exc:
                # the command is answered table_unavailable by its gateway's deadline
                log.warning("table %s: command queue or store unreachable (%s)", table, exc)
                await asyncio.sleep(0.5)

    @property
    def held(self) -> list[str]:
        return sorted(self.runners)


class _Renewals(threading.Thread):
    """The renewals of an engine's leases, on a thread with an event loop and a Redis
    connection of its own (see the module's docstring: why)."""

    def __init__(self, leases: LeasedTables, engine_loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(name="lease-renewals", daemon=True)
        self.leases = leases
        self.engine_loop = engine_loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._started = threading.Event()

    @staticmethod
    def register(client: Redis) -> Any:
        """The renewal's script, on ``client``."""
        return client.register_script(_lease_script("renew"))

    def run(self) -> None:
        asyncio.run(self._main())

    def stop(self) -> None:
        """Stop renewing (a graceful stop: the engine releases its leases next)."""
        self._started.wait()
        if self._loop is not None and self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # its loop already ended
                self._loop.call_soon_threadsafe(self._stopping.set)
        self.join()

    async def _main(self) -> None:
        leases = self.leases
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        self._started.set()
        # a twin of the engine's lease connections (same server, options and retries),
        # made for this thread's loop: a connection belongs to the loop that uses it
        pool = leases.redis.connection_pool
        client = Redis(connection_pool=type(pool)(
            connection_class=pool.connection_class, max_connections=2,
            **pool.connection_kwargs))
        renew = self.register(client)
        try:
            while True:
                if await wait_set(self._stopping, leases.poll):
                    break
                if time.monotonic() - leases.heartbeat > leases.stall_limit:
                    continue  # the engine's loop is stuck: let its leases lapse
                for table, token in list(leases._tokens.items()):
                    await self._renew(renew, table, token)
        finally:
            await client.aclose()

    async def _renew(self, renew: Any, table: str, token: int) -> None:
        leases = self.leases
        sent = time.monotonic()
        # The answer must come while the lease surely lasts, with a margin: a renewal
        # cut off from Redis (bytes held, nothing closed) waited for its socket's timeout
        # (60 s) and never reached the check below, and the engine drove the table past
        # its 2 s lease — another engine's by then.
        spare = leases.valid_until(table) - RENEWAL_MARGIN * leases.ttl_ms / 1000
        try:
            renewed = bool(await asyncio.wait_for(renew(
                keys=[leases.keys.lease_owner(table), leases.keys.lease_token(table)],
                args=[leases.owner, leases.ttl_ms, token]),
                max(spare - sent, LAST_RENEWAL_WAIT)))
        except (RedisError, OSError, TimeoutError) as exc:
            # No answer is not a "no": the lease lasts ttl from the last renewal Redis
            # took, and no other engine can take it before. A stale connection after a
            # Redis restart, a blip, must not cancel the round in play; keep trying while
            # the lease surely lasts (fencing guards the store either way).
            if time.monotonic() < spare:
                log.warning("table %s: lease renewal failed (%s); retrying", table, exc)
                return
            renewed = False
        except Exception:  # never let one table's trouble stop the renewals of others
            log.exception("table %s: lease renewal: unexpected error; going on", table)
            return
        if renewed:
            leases.renewed(table, sent)
        else:
            with contextlib.suppress(RuntimeError):  # the engine's loop has ended
                self.engine_loop.call_soon_threadsafe(leases.lost, table, token)
