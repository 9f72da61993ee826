"""What one process runs: :class:`Services`, its store, bus, runners and gateway, wired for
the deployment and started and stopped together.

The wiring is the one place that knows the deployments apart — embedded (SQLite and the
in-process bus), one process on PostgreSQL, and scale-out (Redis for the bus, the leases
and the dealer commands; the money in PostgreSQL: ``--redis`` alone is refused) — so the
endpoints, the gateway and the runners never ask which one they run in. Each deployment is
one named step of ``__init__`` (``_embedded``, ``_postgres``, ``_scaleout``), which imports
the drivers only it needs; the seamless wallet is one more (``_seamless``).

The process's life is here too, because it is the wiring's: ``start`` in the order the
parts depend on each other, ``stop`` in reverse. The periodic ledger audit that holds this
process's tables is ``host/ledger_watch.py``'s, and what the process says of its health
(``/readyz``) ``server/health.py``'s; the HTTP endpoints find their :class:`Services` with
:func:`livetable.server.process.services_of`, through the parts of it they name
(:class:`livetable.server.process.Process`): the web side never imports this module.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from livetable import protocol as p
from livetable.auth import Identity
from livetable.betting.tips import TIPS_ON, TipPolicy
from livetable.bus import Bus, MemoryBus
from livetable.bus.keys import DEFAULT_PREFIX, RedisKeys
from livetable.chat import NO_WORDS, BlockedWords, blocked_words
from livetable.config import Settings, SettingsError
from livetable.engine import Timing
from livetable.engine.announce import NameShown
from livetable.engine.dealing import DealerAction
from livetable.host.ledger_watch import LedgerWatch
from livetable.host.restores import Announced
from livetable.host.runner import TableRunner
from livetable.metrics import Metrics
from livetable.operator import registry
from livetable.operator.registry import Currency, Registry
from livetable.server.chatroom import MemoryChatRoom, RedisChatRoom
from livetable.server.gateway import Execute, Gateway
from livetable.server.gcpolicy import Collector, tables_busy, tables_closing
from livetable.server.process import Role
from livetable.server.stills import Stills
from livetable.store.base import Store
from livetable.store.sealing import StateSeal, load_key_ring
from livetable.store.sqlite import SQLiteStore
from livetable.tasks import cancel, within

if TYPE_CHECKING:
    from livetable.host.scaleout import LeasedTables, RedisControl
    from livetable.operator.log import WalletLog
    from livetable.operator.seamless import SeamlessWallet
    from livetable.operator.wallets import OperatorWallets
    from livetable.store.postgres import PostgresStore

log = logging.getLogger("livetable.app")


def limits_of(settings: Settings) -> p.Limits:
    return p.Limits(min=settings.limit_min, max=settings.limit_max, pair_min=settings.pair_min,
                    pair_max=settings.pair_max, round_max=settings.round_max)


def timing_of(settings: Settings) -> Timing:
    return Timing(
        betting_ms=int(settings.betting_seconds * 1000),
        deal_interval_ms=int(settings.deal_interval * 1000),
        reveal_interval_ms=int(settings.reveal_interval * 1000),
        between_rounds_ms=int(settings.between_rounds * 1000),
        close_grace_ms=int(settings.close_grace * 1000),
        manual_open_ms=int(settings.next_round_after * 1000),
    )


def stream_of(settings: Settings, table: str) -> p.StreamView | None:
    url = settings.streams.get(table)
    return p.StreamView(hls=url) if url else None


#: Why ``--redis`` alone is refused: Redis holds no money since the Redis ledger was retired.
SCALE_OUT_NEEDS_POSTGRES = (
    "scale-out keeps the money in PostgreSQL: --redis needs --postgres URL (or "
    "LIVETABLE_POSTGRES_URL) as well; Redis is the bus, the dealer commands and the leases "
    "only. A deployment whose money is still in a Redis ledger copies it to PostgreSQL "
    "first with `livetable migrate-store` (docs/operations.md)")

#: How long the app's part of a graceful stop may take (seconds): with uvicorn's 5 s for
#: connections, inside the 15 s docs/operations.md §9 asks to allow before SIGKILL. A stop
#: after a PostgreSQL stall took over 15 s, waiting on calls hung on its connections.
STOP_WITHIN = 8.0


class Services:
    """What one process runs, started and stopped together.

    Embedded (no Redis URL): the SQLite store, the in-process bus, a runner per table and
    the gateway. With a Redis URL (scale-out): the PostgreSQL store for the money
    (``postgres_url``, required) and the Redis bus; the ``engine`` role holds table
    leases and runs the tables it holds, the ``gateway`` role serves clients; ``serve``
    runs both in one process.
    """

    #: The ledger and the bus the tables publish on, as the deployment wires them
    #: (``_embedded``, ``_postgres``, ``_scaleout``).
    store: Store
    bus: Bus

    def __init__(self, settings: Settings, *, roles: tuple[Role, ...] = ("gateway", "engine"),
                 store: Store | None = None, bus: Bus | None = None,
                 rng: random.Random | None = None) -> None:
        self.settings = settings
        self.roles = roles
        self.secret = settings.load_secret()
        #: Seals every table's engine state at rest (store/sealing.py). Engines only: a
        #: gateway never reads a sealed state (it catches up from the public snapshot the
        #: store keeps beside it), so it never holds the shoe key.
        self.seal = self._state_seal() if "engine" in roles else None
        self.metrics = Metrics()
        self.rng = rng
        #: What this engine announced of each table, kept beside the database, outside the
        #: store: how a restored store is known (host/restores.py).
        self.announced = Announced(settings.db_path) if "engine" in roles else None
        self.runners: dict[str, TableRunner] = {}
        self.leases: LeasedTables | None = None
        self.redis: Any = None
        self.pubsub_redis: Any = None
        self.lease_redis: Any = None
        self.subscriber_redis: Any = None
        self.control: RedisControl | None = None
        self.redis_prefix = DEFAULT_PREFIX
        self._watch: asyncio.Task[None] | None = None
        #: How long a graceful stop may take (see :meth:`stop`).
        self.stop_within = STOP_WITHIN
        #: Full garbage collections timed by the tables (set by ``livetable serve``).
        self.collector: Collector | None = None
        self._bets_answered = 0  # as closing() last saw it
        #: PostgreSQL: readiness's write, its commit timed, and why bets are refused now
        #: (store/postgres/replication.py); None on SQLite (its outage is ``identity``'s).
        self.write_probe: Callable[[float], Awaitable[tuple[float | None, str | None]]] \
            | None = None
        execute: Execute = self.execute
        if settings.redis_url and store is None:
            execute = self._scaleout(settings.redis_url)
        elif settings.postgres_url and store is None:
            self._postgres(settings.postgres_url, bus)
        else:
            self._embedded(store, bus)
        #: The audits of the ledger, and what readiness reports of them.
        self.ledger = LedgerWatch(self.store, self.metrics, self.runners)
        #: The operators served (livetable/operator/registry.py); reloaded on SIGHUP.
        self.operators = self.load_operators()
        self.wallet: SeamlessWallet | None = None
        self.wallet_log: WalletLog | None = None
        self.wallets: OperatorWallets | None = None
        if settings.seamless:
            self._seamless()
        self.gateway = self._gateway(execute)
        self.stills = Stills()  # the lobby's stills of the tables' videos (server/stills.py)

    def _state_seal(self) -> StateSeal:
        """The seal of the engine states, with the key the settings name (an engine's)."""
        key, source, warnings = load_key_ring(self.settings)
        for warning in warnings:
            log.warning("%s", warning)
        log.info("engine states are sealed at rest with a key from %s", source)
        return StateSeal(key)

    def _embedded(self, store: Store | None, bus: Bus | None) -> None:
        """The default, one process: the SQLite ledger (or the store given: tests pass
        their own) and the in-process bus (or the bus given)."""
        settings = self.settings
        self.store = store or SQLiteStore(settings.db_path, settings.event_log_size * 4,
                                          seal=self.seal, synchronous=settings.sqlite_sync,
                                          writer=settings.sqlite_writer)
        self.bus = bus or MemoryBus()

    def _postgres(self, url: str, bus: Bus | None) -> None:
        """One process on PostgreSQL: no lease, so no fencing token (0)."""
        from livetable.store.postgres import PostgresStore

        store = PostgresStore(url, event_retention=self.settings.event_log_size * 4,
                              seal=self.seal, replication=self.settings.postgres_replication)
        self.store, self.write_probe = store, store.probe
        self.bus = bus or MemoryBus()

    def _scaleout(self, url: str) -> Execute:
        """Scale-out (a Redis URL): the PostgreSQL ledger fenced by table leases, the Redis
        bus, the leases for an engine, and dealer commands through Redis for a gateway
        (which holds no table: its ``execute`` is the control channel's)."""
        from redis.asyncio import Redis
        from redis.asyncio.cluster import RedisCluster

        from livetable.bus.redis import RedisBus
        from livetable.bus.redis_conn import connection_pool
        from livetable.host.scaleout import RedisControl

        settings = self.settings
        # Pooled connections retry a command on a dropped connection (after a Redis
        # restart the first command on each of them fails): see connection_pool.
        self.redis = Redis(connection_pool=connection_pool(
            url, max_connections=512, timeout=10,
            health_check_interval=5, socket_timeout=60))
        self.pubsub_redis = (RedisCluster.from_url(settings.redis_pubsub_cluster)
                                  if settings.redis_pubsub_cluster else None)
        fenced, fatal = self._fenced_ledger()
        self.store = fenced
        self.write_probe = fenced.probe
        # one prefix for every Redis name (livetable/bus/keys.py)
        self.redis_prefix = prefix = DEFAULT_PREFIX
        # the subscription on connections of its own that do not retry (see RedisBus)
        self.subscriber_redis = None if self.pubsub_redis else Redis(
            connection_pool=connection_pool(url, max_connections=4,
                                            timeout=10, retry=False,
                                            health_check_interval=5, socket_timeout=60))
        self.bus = RedisBus(self.pubsub_redis or self.redis, settings.table_names,
                            fenced, prefix=prefix,
                            subscriber=self.subscriber_redis,
                            on_reconnect=self._bus_reconnected)
        if "engine" in self.roles:
            self._lease_tables(url, fenced, fatal)
        self.control = RedisControl(self.redis, prefix=prefix)
        return self.execute if "engine" in self.roles else self.control.execute

    def _fenced_ledger(self) -> tuple[PostgresStore, tuple[type[BaseException], ...]]:
        """Scale-out's ledger, PostgreSQL, whose writes a table's lease fences, and the
        refusals that mean this engine lost the table (its runner stops on them)."""
        from livetable.store.base import FenceRefused
        from livetable.store.postgres import PostgresStore

        settings = self.settings
        if not settings.postgres_url:
            raise SettingsError(SCALE_OUT_NEEDS_POSTGRES)
        fenced = PostgresStore(settings.postgres_url,
                               event_retention=settings.event_log_size * 4,
                               seal=self.seal, max_connections=32,
                               replication=settings.postgres_replication)
        return fenced, (FenceRefused,)

    def _lease_tables(self, url: str, fenced: PostgresStore,
                      fatal: tuple[type[BaseException], ...]) -> None:
        """An engine's table leases: it runs the tables it holds."""
        from redis.asyncio import Redis

        from livetable.bus.redis_conn import connection_pool
        from livetable.host.scaleout import LeasedTables

        settings = self.settings
        # leases and dealer commands on their own connections: a flood of bets
        # must never delay a lease renewal
        self.lease_redis = Redis(connection_pool=connection_pool(
            url, max_connections=len(settings.table_names) + 8,
            timeout=5, health_check_interval=5))
        self.leases = LeasedTables(self.lease_redis, fenced, settings.table_names,
                                   lambda t: self._runner(t, fatal),
                                   keys=RedisKeys(self.redis_prefix))

    def _gateway(self, execute: Execute) -> Gateway:
        """The gateway, serving clients: dealer commands go to ``execute``."""
        chat_room = (RedisChatRoom(self.redis, RedisKeys(self.redis_prefix))
                     if self.redis is not None
                     else MemoryChatRoom(self.settings.data_dir / "chat.json"))
        gateway = Gateway(self.settings, self.store, execute, self.metrics, self.secret,
                          self.wallet, announce=self.bus.end_session,
                          chat_room=chat_room, census=self.bus.watchers_elsewhere,
                          terms_of=self.terms_of, standing=self.standing,
                          tips_of=self.tips_of,
                          balances=self.bus.balances_moved if self.redis is not None else None)
        # chat lines go by the bus, to every gateway; an operator's players are held to
        # its blocked words (the registry in force, reloaded on SIGHUP)
        gateway.chat.publish = self.bus.publish_note
        gateway.chat.words_of = self.blocked_words_of
        return gateway

    def _bus_reconnected(self) -> None:
        """The Redis bus subscribed again: what it missed meanwhile may include ended
        sessions, so the gateway asks the store about the sessions it has connected."""
        self.metrics.inc("livetable_redis_reconnects_total")
        if "gateway" in self.roles:
            self.gateway.keep(asyncio.get_running_loop().create_task(
                self.gateway.recheck_sessions()))

    def blocked_words_of(self, operator_id: str | None) -> BlockedWords:
        """The blocked words of a player's operator; none for a player without one."""
        operator = self.operators.get(operator_id) if operator_id else None
        return blocked_words(operator.blocked_words) if operator is not None else NO_WORDS

    def standing(self, identity: Identity, table: str) -> registry.Refusal | None:
        """Why the registry in force refuses a launched player at ``table``, or None."""
        if identity.operator is None:
            return None
        return self.operators.refusal(identity.operator, table)
    def winner_terms(self, player_id: str) -> tuple[NameShown, str | None]:
        """How a winner's name is shown (their operator's ``winner_names``, masked by
        default) and the currency of their win (their operator's one currency, else None:
        the table's), as the registry in force has them."""
        return self.operators.winner_terms(player_id)

    def terms_of(self, identity: Identity) -> Currency | None:
        """A launched player's chips and limits: their operator's, for the session's
        currency, as the registry in force has them (None: the table's)."""
        operator = self.operators.get(identity.operator) if identity.operator else None
        return operator.terms(identity.currency) if operator is not None else None

    def tips_of(self, identity: Identity) -> TipPolicy:
        """A player's operator's word on tips (the registry in force; none: tips on)."""
        operator = self.operators.get(identity.operator) if identity.operator else None
        return operator.tip_policy(identity.currency) if operator is not None else TIPS_ON

    def load_operators(self) -> Registry:
        """The registry file if one is set (RegistryError if it is bad), else the
        single-operator deployment's ``default``."""
        settings = self.settings
        if settings.operators is not None:
            # seamless: each operator's players are paid by its own wallet, so each needs one
            return registry.load(settings.operators, table_ids=settings.table_names,
                                 wallets=settings.seamless)
        return registry.from_settings(settings.operator_secret, settings.wallet_url,
                                      settings.wallet_secret)

    def reload_operators(self) -> bool:
        """Read the registry again (SIGHUP): a bad file is refused whole and logged with
        its line, and the registry in force stays."""
        try:
            self.operators = self.load_operators()
        except registry.RegistryError as exc:
            log.error("operator registry not reloaded, the one in force stays: %s", exc)
            self.metrics.inc("livetable_operator_registry_refused_total")
            return False
        if self.wallets is not None:  # new and changed wallets from the next call on
            self.wallets.update(self.operators)  # (a removed one's kept: credits owed)
        if "gateway" in self.roles and self.gateway.clients:
            # the removed operators' sessions end at once (SIGHUP runs in the loop)
            self.gateway.keep(asyncio.get_running_loop().create_task(
                self.gateway.recheck_standing()))
        log.info("operator registry reloaded: %s", ", ".join(sorted(self.operators.operators))
                 or "no operators")
        return True

    def _seamless(self) -> None:
        """The operator's wallet: its log next to the ledger (same SQLite file, or the same
        PostgreSQL database), one client for debits and balances and
        one for the outbox, so that a backlog of credits never takes the connections a bet
        is waiting for."""
        from livetable.operator.seamless import SeamlessWallet
        from livetable.operator.wallets import OperatorWallets

        settings = self.settings
        if settings.demo:
            log.warning("seamless wallet: demo guests are off (they have no wallet)")
        from livetable.store.postgres import PostgresStore

        if isinstance(self.store, PostgresStore):  # the money's system of record holds it
            from livetable.operator.log_postgres import PostgresWalletLog

            self.wallet_log = PostgresWalletLog(self.store)
        else:
            from livetable.operator.log_sqlite import SQLiteWalletLog

            # its batches in the ledger's writer process, if it has one (off this
            # process's interpreter lock: operator/log_sqlite.py)
            self.wallet_log = SQLiteWalletLog(settings.wallet_db_path, settings.sqlite_sync,
                                              moved_from=settings.db_path,
                                              writer=self.store.process if isinstance(
                                                  self.store, SQLiteStore) else None)

        # each operator's players to its own wallet (operator/wallets.py); the
        # single-operator deployment's is --wallet-url, as the operator "default"
        self.wallets = OperatorWallets(timeout=settings.wallet_timeout,
                                       connections=settings.wallet_connections)
        if settings.operators is None:
            assert settings.wallet_url is not None and settings.wallet_secret is not None
            self.wallets.serve(registry.DEFAULT_OPERATOR, settings.wallet_url,
                               settings.wallet_secret)
        else:
            self.wallets.update(self.operators)
        self.wallet = SeamlessWallet(settings, self.store, self.wallet_log, self.wallets,
                                     self.metrics)

    def _runner(self, table: str, fatal: tuple[type[BaseException], ...] = ()) -> TableRunner:
        runner = TableRunner(
            table, self.store, self.bus, name=f"Pok Deng {table.upper()}",
            mode="manual" if self.settings.mode == "manual" else "auto",
            limits=limits_of(self.settings), timing=timing_of(self.settings),
            stream=stream_of(self.settings, table), rng=self.rng,
            on_settled=self._settled, on_refused=self.metrics.step_refused,
            fatal=fatal, announced=self.announced, winner_terms=self.winner_terms)
        self.runners[table] = runner
        return runner

    def _settled(self, bets: int, seconds: float) -> None:
        """A runner settled bets: counted, and their seamless credits queued at once."""
        self.metrics.settled(bets, seconds)
        if self.wallet is not None:
            self.wallet.settled()

    async def execute(self, table: str, command: DealerAction) -> p.Ack | p.Error:
        runner = self.runners.get(table)
        if runner is None or not runner.alive:
            if self.control is not None:  # the table may be held by another engine
                return await self.control.execute(table, command)
            return p.Error(code="unknown_table", message=f"no table {table!r} here")
        return await runner.execute(command)

    async def start(self) -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            # the main thread's loop only (uvicorn's); tests that run an app elsewhere
            # reload by calling reload_operators()
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP,
                                                          self.reload_operators)
        load_scripts = getattr(self.store, "load_scripts", None)
        if load_scripts is not None:
            await load_scripts()
        connect = getattr(self.store, "open", None)  # PostgreSQL: connect and migrate now
        if connect is not None:
            await connect()
        identity = self.ledger.identity = await self.store.identity(create=True)
        pinned = self.settings.store_id
        if pinned and pinned != identity:
            raise RuntimeError(f"the store's identity is {identity}, not the "
                               f"LIVETABLE_STORE_ID {pinned}: a wiped or different store")
        log.info("store identity %s", identity)
        if self.announced is not None and identity is not None:
            self.announced.open(identity)
        self.metrics.set_gauge("livetable_ledger_ok", 1.0)
        if "engine" in self.roles and self.settings.audit_interval > 0:
            self._watch = asyncio.create_task(self.ledger.watch(self.settings.audit_interval),
                                              name="ledger-watch")
        if "gateway" in self.roles:
            self.bus.subscribe(self.gateway.deliver)
            self.bus.on_session_end(self.gateway.end_session)
            self.bus.on_balances_elsewhere(self.gateway.others.moved_elsewhere)
            self.bus.subscribe_notes(self.gateway.chat.deliver)
            self.gateway.start()
        if self.collector is not None:
            self.collector.start()
        await self.bus.start()
        if "engine" not in self.roles:
            return
        if self.wallet is not None:
            self.wallet.start()  # credits and rollbacks: with the tables, never in their way
        if self.leases is not None:
            await self.leases.start()
            return
        for table in self.settings.table_names:
            await self._runner(table).start()

    def busy(self) -> bool:
        """Not the moment for a full garbage collection (server/gcpolicy.py)."""
        return tables_busy(self.gateway.feeds.values(),
                           any(runner.settling for runner in self.runners.values()))

    def closing(self) -> bool:
        """A table is in the close of its betting and bets are being answered (since the
        last call): the young collections wait (server/gcpolicy.py). Without bets there
        is nothing in flight to spare: a table watched only, its close runs as any time."""
        answered = sum(self.metrics.bets.values())
        flowing, self._bets_answered = answered > self._bets_answered, answered
        return flowing and tables_closing(self.gateway.feeds.values())

    async def stop(self) -> None:
        """Stop every part, in the reverse order of :meth:`start`, all within
        :attr:`stop_within` seconds whatever the store or Redis did before: a part still
        waiting then (a call hung on a stalled connection) is left behind and the store's
        connections are cut (docs/operations.md §9)."""
        deadline = time.monotonic() + self.stop_within
        if self.collector is not None:
            await within(deadline, self.collector.stop(), "the garbage collector's timer")
        await within(deadline, cancel(self._watch), "the ledger watch")
        await within(deadline, self.gateway.shutdown(), "the gateway")
        await within(deadline, self.stills.close(), "the lobby's stills")
        if self.wallet is not None:
            await within(deadline, self.wallet.stop(), "the seamless wallet")
        if self.leases is not None:
            await within(deadline, self.leases.stop(), "the leases")
        for table, runner in self.runners.items():
            await within(deadline, runner.stop(), f"table {table}")
        await within(deadline, self.bus.close(), "the bus")
        if self.wallet_log is not None:
            await within(deadline, self.wallet_log.close(), "the wallet log")
        if not await within(deadline, self.store.close(), "the store"):
            terminate = getattr(self.store, "terminate", None)  # PostgreSQL's pool
            if terminate is not None:
                terminate()
        if self.announced is not None:
            self.announced.close()
        for client in (self.redis, self.pubsub_redis, self.lease_redis,
                       self.subscriber_redis):
            if client is not None:
                await within(deadline, client.aclose(), "a Redis connection pool")

