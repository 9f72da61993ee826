"""The Starlette application: websocket endpoints, the HTTP API, pages, health, metrics.

Endpoints stay thin: decode, authorize, hand over (to the gateway, the store or a table's
runner), encode. :class:`Services` is what one process runs — in the embedded default all
of it: the SQLite store, the in-process bus, a runner per table and the gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import secrets
import signal
import time
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar
from urllib.parse import urlencode

import msgspec
from brotli_asgi import BrotliMiddleware
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from livetable import protocol as p
from livetable.accounts import AccountError, check_not_guest, is_operator_player_id
from livetable.auth import Identity, TokenError, mint, new_guest_id, verify
from livetable.bus import Bus, MemoryBus, SessionEnd
from livetable.bus.keys import DEFAULT_PREFIX, RedisKeys
from livetable.chat import NO_WORDS, BlockedWords, blocked_words
from livetable.clock import now_ms
from livetable.config import Settings, SettingsError
from livetable.engine import Timing
from livetable.engine.sessions import NO_LIMITS, SessionLimits, SessionRecord
from livetable.operator import registry, signatures
from livetable.operator.launches import (
    LaunchRequests,
    MemoryLaunchRequests,
    RedisLaunchRequests,
)
from livetable.operator.registry import Operator, Registry
from livetable.server.chatroom import MemoryChatRoom, RedisChatRoom
from livetable.server.gateway import Gateway
from livetable.server.gcpolicy import Collector
from livetable.server.metrics import Metrics
from livetable.server.ratelimit import RateLimits
from livetable.server.records import record_totals
from livetable.server.runner import DealerAction, TableRunner
from livetable.store.base import Store, StoreUnavailable, UnknownPlayer
from livetable.store.sealing import StateSeal
from livetable.store.sqlite import SQLiteStore
from livetable.tasks import cancel

if TYPE_CHECKING:
    from livetable.operator.log import WalletLog
    from livetable.operator.seamless import SeamlessWallet
    from livetable.server.scaleout import LeasedTables, RedisControl

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


#: "gateway" (websockets, HTTP API) and/or "engine" (runs the tables).
Role = Literal["gateway", "engine"]


#: Why ``--redis`` alone is refused: Redis holds no money since the Redis ledger was retired.
SCALE_OUT_NEEDS_POSTGRES = (
    "scale-out keeps the money in PostgreSQL: --redis needs --postgres URL (or "
    "LIVETABLE_POSTGRES_URL) as well; Redis is the bus, the dealer commands and the leases "
    "only. A deployment whose money is still in a Redis ledger copies it to PostgreSQL "
    "first with `livetable migrate-store` (docs/operations.md)")

#: A table is busy this long after a table event went out (private results may follow).
QUIET_AFTER_EVENT = 1.0
#: ... and from this long before betting closes (the burst of late bets).
BUSY_BEFORE_CLOSE_MS = 5_000


class Services:
    """What one process runs, started and stopped together.

    Embedded (no Redis URL): the SQLite store, the in-process bus, a runner per table and
    the gateway. With a Redis URL (scale-out): the PostgreSQL store for the money
    (``postgres_url``, required) and the Redis bus; the ``engine`` role holds table
    leases and runs the tables it holds, the ``gateway`` role serves clients; ``serve``
    runs both in one process.
    """

    def __init__(self, settings: Settings, *, roles: tuple[Role, ...] = ("gateway", "engine"),
                 store: Store | None = None, bus: Bus | None = None,
                 rng: random.Random | None = None) -> None:
        self.settings = settings
        self.roles = roles
        self.secret = settings.load_secret()
        #: Seals every table's engine state at rest (store/sealing.py). Engines only: a
        #: gateway never reads a sealed state (it catches up from the public snapshot the
        #: store keeps beside it), so it never holds the shoe key.
        self.seal: StateSeal | None = None
        if "engine" in roles:
            key, source, warnings = settings.state_key()
            for warning in warnings:
                log.warning("%s", warning)
            log.info("engine states are sealed at rest with a key from %s", source)
            self.seal = StateSeal(key)
        self.metrics = Metrics()
        self.rng = rng
        self.runners: dict[str, TableRunner] = {}
        self.leases: LeasedTables | None = None
        self.redis: Any = None
        self.pubsub_redis: Any = None
        self.lease_redis: Any = None
        self.subscriber_redis: Any = None
        self.control: RedisControl | None = None
        self.redis_prefix = DEFAULT_PREFIX
        #: The store's identity when this process started on it (see Store.identity).
        self.store_identity: str | None = None
        #: Why the ledger is not to be trusted now (a failed audit, a changed store), if so.
        self.ledger_problem: str | None = None
        self._watch: asyncio.Task[None] | None = None
        #: Full garbage collections timed by the tables (set by ``livetable serve``).
        self.collector: Collector | None = None
        execute = self.execute
        if settings.redis_url and store is None:
            from redis.asyncio import Redis
            from redis.asyncio.cluster import RedisCluster

            from livetable.bus.redis import RedisBus
            from livetable.bus.redis_conn import connection_pool
            from livetable.server.scaleout import LeasedTables, RedisControl
            from livetable.store.base import FenceRefused
            from livetable.store.postgres import PostgresStore

            if not settings.postgres_url:
                raise SettingsError(SCALE_OUT_NEEDS_POSTGRES)
            # Pooled connections retry a command on a dropped connection (after a Redis
            # restart the first command on each of them fails): see connection_pool.
            self.redis = Redis(connection_pool=connection_pool(
                settings.redis_url, max_connections=512, timeout=10,
                health_check_interval=5, socket_timeout=60))
            self.pubsub_redis = (RedisCluster.from_url(settings.redis_pubsub_cluster)
                                      if settings.redis_pubsub_cluster else None)
            # the money in PostgreSQL; Redis is the bus, the commands and the leases
            fenced = PostgresStore(settings.postgres_url,
                                   event_retention=settings.event_log_size * 4,
                                   seal=self.seal, max_connections=32)
            fatal: tuple[type[BaseException], ...] = (FenceRefused,)
            self.store: Store = fenced
            # one prefix for every Redis name (livetable/bus/keys.py)
            self.redis_prefix = prefix = DEFAULT_PREFIX
            # the subscription on connections of its own that do not retry (see RedisBus)
            self.subscriber_redis = None if self.pubsub_redis else Redis(
                connection_pool=connection_pool(settings.redis_url, max_connections=4,
                                                timeout=10, retry=False,
                                                health_check_interval=5, socket_timeout=60))
            self.bus: Bus = RedisBus(self.pubsub_redis or self.redis, settings.table_names,
                                     fenced, prefix=prefix,
                                     subscriber=self.subscriber_redis,
                                     on_reconnect=self._bus_reconnected)
            if "engine" in roles:
                # leases and dealer commands on their own connections: a flood of bets
                # must never delay a lease renewal
                self.lease_redis = Redis(connection_pool=connection_pool(
                    settings.redis_url, max_connections=len(settings.table_names) + 8,
                    timeout=5, health_check_interval=5))
                self.leases = LeasedTables(self.lease_redis, fenced, settings.table_names,
                                           lambda t: self._runner(t, fatal),
                                           keys=RedisKeys(prefix))
            self.control = RedisControl(self.redis, prefix=prefix)
            if "engine" not in roles:
                execute = self.control.execute
        elif settings.postgres_url and store is None:
            from livetable.store.postgres import PostgresStore

            # one process on PostgreSQL: no lease, so no fencing token (0)
            self.store = PostgresStore(settings.postgres_url,
                                       event_retention=settings.event_log_size * 4,
                                       seal=self.seal)
            self.bus = bus or MemoryBus()
        else:
            self.store = store or SQLiteStore(settings.db_path, settings.event_log_size * 4,
                                              seal=self.seal, synchronous=settings.sqlite_sync,
                                              writer=settings.sqlite_writer)
            self.bus = bus or MemoryBus()
        #: The operators served (livetable/operator/registry.py); reloaded on SIGHUP.
        self.operators = self.load_operators()
        self.launch_requests: LaunchRequests = (
            RedisLaunchRequests(self.redis, RedisKeys(self.redis_prefix).launch_request)
            if self.redis is not None else MemoryLaunchRequests())
        self.wallet: SeamlessWallet | None = None
        self.wallet_log: WalletLog | None = None
        if settings.seamless:
            self._seamless()
        chat_room = (RedisChatRoom(self.redis, RedisKeys(self.redis_prefix))
                     if self.redis is not None else MemoryChatRoom())
        self.gateway = Gateway(settings, self.store, execute, self.metrics, self.secret,
                               self.wallet, announce=self.bus.end_session,
                               chat_room=chat_room)
        # chat lines go by the bus, to every gateway; an operator's players are held to
        # its blocked words (the registry in force, reloaded on SIGHUP)
        self.gateway.chat.publish = self.bus.publish_note
        self.gateway.chat.words_of = self.blocked_words_of

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

    def load_operators(self) -> Registry:
        """The registry file if one is set (RegistryError if it is bad), else the
        single-operator deployment's ``default``."""
        settings = self.settings
        if settings.operators is not None:
            if settings.seamless:
                # every wallet call goes to --wallet-url today: a registry's players would
                # be debited at the wrong operator's wallet. Refused, never guessed.
                raise registry.RegistryError(
                    f"{settings.operators}: a wallet per operator is not wired into the "
                    f"seamless wallet yet; run --wallet seamless with the single-operator "
                    f"settings (LIVETABLE_OPERATOR_SECRET), or the registry with the "
                    f"internal wallet")
            return registry.load(settings.operators, table_ids=settings.table_names)
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
        log.info("operator registry reloaded: %s", ", ".join(sorted(self.operators.operators))
                 or "no operators")
        return True

    def _seamless(self) -> None:
        """The operator's wallet: its log next to the ledger (same SQLite file, or the same
        PostgreSQL database), one client for debits and balances and
        one for the outbox, so that a backlog of credits never takes the connections a bet
        is waiting for."""
        from livetable.operator.client import WalletClient
        from livetable.operator.seamless import SeamlessWallet

        settings = self.settings
        assert settings.wallet_url is not None and settings.wallet_secret is not None
        if settings.demo:
            log.warning("seamless wallet: demo guests are off (they have no wallet)")
        from livetable.store.postgres import PostgresStore

        if isinstance(self.store, PostgresStore):  # the money's system of record holds it
            from livetable.operator.log_postgres import PostgresWalletLog

            self.wallet_log = PostgresWalletLog(self.store)
        else:
            from livetable.operator.log_sqlite import SQLiteWalletLog

            self.wallet_log = SQLiteWalletLog(settings.wallet_db_path, settings.sqlite_sync,
                                              moved_from=settings.db_path)

        def client(connections: int) -> WalletClient:
            assert settings.wallet_url is not None and settings.wallet_secret is not None
            return WalletClient(settings.wallet_url, settings.wallet_secret,
                                timeout=settings.wallet_timeout, connections=connections)

        # debits wait for a player: most of the pool
        total = max(2, settings.wallet_connections)
        self.wallet = SeamlessWallet(settings, self.store, self.wallet_log,
                                     client(total - total // 4), self.metrics,
                                     outbox_client=client(max(1, total // 4)))

    def _runner(self, table: str, fatal: tuple[type[BaseException], ...] = ()) -> TableRunner:
        runner = TableRunner(
            table, self.store, self.bus, name=f"Pok Deng {table.upper()}",
            mode="manual" if self.settings.mode == "manual" else "auto",
            limits=limits_of(self.settings), timing=timing_of(self.settings),
            stream=stream_of(self.settings, table), rng=self.rng,
            on_settled=self.metrics.settled, on_refused=self.metrics.step_refused,
            fatal=fatal)
        self.runners[table] = runner
        return runner

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
        self.store_identity = await self.store.identity(create=True)
        pinned = self.settings.store_id
        if pinned and pinned != self.store_identity:
            raise RuntimeError(f"the store's identity is {self.store_identity}, not the "
                               f"LIVETABLE_STORE_ID {pinned}: a wiped or different store")
        log.info("store identity %s", self.store_identity)
        self.metrics.set_gauge("livetable_ledger_ok", 1.0)
        if "engine" in self.roles and self.settings.audit_interval > 0:
            self._watch = asyncio.create_task(self._watch_ledger(), name="ledger-watch")
        if "gateway" in self.roles:
            self.bus.subscribe(self.gateway.deliver)
            self.bus.on_session_end(self.gateway.end_session)
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

    async def _watch_ledger(self) -> None:
        """Audit the ledger every ``audit_interval`` seconds. A failure holds this
        process's tables (a round in play is paused), turns /readyz red and shows in
        /metrics, until an audit passes again."""
        while True:
            await asyncio.sleep(self.settings.audit_interval)
            try:
                await self.check_ledger()
            except asyncio.CancelledError:
                raise
            except Exception:  # an unreachable store is /readyz's business, not a finding
                log.exception("ledger audit could not run")

    async def check_ledger(self) -> str | None:
        """One audit (and identity check); returns the problem found, if any."""
        current = await self.store.identity()
        pause = True
        problem: str | None
        if current != self.store_identity:
            problem = (f"the store's identity changed (started on {self.store_identity}, "
                       f"now {current}): a wiped or different store")
            pause = False  # write nothing to a store that is not ours
        else:
            report = await self.store.audit()
            problem = None if report.ok else "ledger audit failed: " + "; ".join(
                report.problems[:5])
        self.metrics.inc("livetable_ledger_audits_total")
        if problem is not None:
            if problem != self.ledger_problem:
                log.error("%s: holding tables %s", problem, ",".join(self.runners) or "-")
            self.ledger_problem = problem
            self.metrics.inc("livetable_ledger_audit_failures_total")
            self.metrics.set_gauge("livetable_ledger_ok", 0.0)
            for runner in list(self.runners.values()):
                await runner.halt(problem, pause=pause)
        elif self.ledger_problem is not None:
            log.warning("ledger audit passes again: releasing the tables")
            self.ledger_problem = None
            self.metrics.set_gauge("livetable_ledger_ok", 1.0)
            for runner in self.runners.values():
                runner.release()
        return problem

    def busy(self) -> bool:
        """Whether a table of this process is about to close betting, or is dealing,
        revealing or settling: not the moment for a full garbage collection."""
        now = now_ms()
        for feed in self.gateway.feeds.values():
            if time.monotonic() - feed.last_sent < QUIET_AFTER_EVENT:
                return True
            view = feed.view()
            if view.phase in ("dealing", "revealing"):
                return True
            if (view.phase == "betting" and view.closes_at is not None
                    and view.closes_at - now < BUSY_BEFORE_CLOSE_MS):
                return True
        return any(runner.settling for runner in self.runners.values())

    async def stop(self) -> None:
        if self.collector is not None:
            await self.collector.stop()
        await cancel(self._watch)
        await self.gateway.shutdown()
        if self.wallet is not None:
            await self.wallet.stop()
        if self.leases is not None:
            await self.leases.stop()
        for runner in self.runners.values():
            await runner.stop()
        await self.bus.close()
        if self.wallet_log is not None:
            await self.wallet_log.close()
        await self.store.close()
        if self.redis is not None:
            await self.redis.aclose()
        for client in (self.pubsub_redis, self.lease_redis, self.subscriber_redis):
            if client is not None:
                await client.aclose()

    def _store_name(self) -> str:
        """What the store is, as an operator names it: "Postgres", "SQLite" (its class's)."""
        return type(self.store).__name__.removesuffix("Store")

    async def ready(self) -> tuple[bool, dict[str, Any]]:
        checks: dict[str, Any] = {"roles": list(self.roles)}
        if "gateway" in self.roles:
            checks["bus"] = bool(getattr(self.bus, "healthy", True))
            checks["tables_known"] = sorted(self.gateway.feeds)
        if self.leases is not None:
            checks["leases_held"] = self.leases.held
            for table in self.settings.table_names:
                held = 1.0 if table in self.leases.runners else 0.0
                self.metrics.set_gauge("livetable_lease_held", held, table=table)
        elif "engine" in self.roles:
            checks["tables"] = {t: r.alive for t, r in self.runners.items()}
        halted = {t: r.halted for t, r in self.runners.items() if r.halted is not None}
        if halted:  # held by a failed audit, or by a bug in a step (see TableRunner)
            checks["halted"] = halted
        since = now_ms() - REFUSALS_SHOWN_MS
        refused = {t: r.refused[1] for t, r in self.runners.items()
                   if r.refused is not None and r.refused[0] >= since}
        if refused:  # the table reloaded from its store and went on (informative)
            checks["steps_refused"] = refused
        # the probes that ask the store, together, each bounded: see READY_PROBE_TIMEOUT
        identity, backlog = await asyncio.gather(
            _probe(self.store.identity()),
            _probe(self.wallet_log.backlog()) if self.wallet_log is not None
            else _probe(_nothing()))
        current, failure = identity
        if failure is not None:  # any store failure means not ready
            checks["store"] = f"{self._store_name()} unreachable: {failure}"
        else:
            checks["store"] = True if current == self.store_identity else (
                f"the store's identity changed (started on {self.store_identity}, now "
                f"{current}): a wiped or different store")
        if checks["store"] is not True:
            self.metrics.set_gauge("livetable_ledger_ok", 0.0)
        checks["ledger"] = self.ledger_problem or True
        owed, failure = backlog  # credits and rollbacks still owed to the operator
        if self.wallet_log is not None and failure is None and owed is not None:
            self.metrics.set_gauge("livetable_wallet_outbox", float(owed))
        if self.wallet is not None:
            # degraded, never not-ready: the tables deal and settle without the wallet
            # (bets are refused wallet_unavailable, credits wait in the outbox), and a
            # load balancer taking every gateway out would not bring it back
            trouble = self.wallet.health()
            checks["wallet"] = trouble or True
            self.metrics.set_gauge("livetable_wallet_ok", 0.0 if trouble else 1.0)
        ok = (checks["store"] is True and checks["ledger"] is True and not halted
              and checks.get("bus", True) is True
              and all(checks.get("tables", {}).values()))
        return ok, checks


#: How long ``/readyz`` names a table whose step its store refused (out of step: the engine
#: reloaded from the store): long enough for an operator to look after an alert.
REFUSALS_SHOWN_MS = 10 * 60_000

#: How long ``/readyz`` waits for any one probe (the store, the wallet log). The probes run
#: together, so it answers within about this, whatever hangs: a gateway cut off from Redis
#: by a partition answered after 2.3-10.5 s, or not at all, while its pooled connections
#: waited for their socket timeout (60 s). Long enough for a Redis busy with a settlement
#: chunk (a few ms), short enough that a load balancer's 1 s check gets an answer.
READY_PROBE_TIMEOUT = 0.7

R = TypeVar("R")


async def _probe(call: Awaitable[R]) -> tuple[R | None, str | None]:
    """A readiness probe's answer, or why there is none (at most READY_PROBE_TIMEOUT)."""
    try:
        async with asyncio.timeout(READY_PROBE_TIMEOUT):
            return await call, None
    except TimeoutError:
        return None, f"no answer within {READY_PROBE_TIMEOUT:g} s"
    except Exception as exc:  # any failure of a probe is a finding, never a 500
        return None, f"{type(exc).__name__}: {exc}"


async def _nothing() -> None:
    return None


#: The largest body an operator endpoint reads (a launch is a few hundred bytes).
MAX_OPERATOR_BODY = 16_384


#: A launch's request id: unique per launch, kept for ten minutes (operator/launches.py).
RequestId = Annotated[str, msgspec.Meta(min_length=8, max_length=128,
                                        pattern=r"^[A-Za-z0-9_.:@+\-]+$")]


class LaunchRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``POST /api/operator/sessions``: the operator puts a player at a table (launch v2)."""

    request_id: RequestId
    player_id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    #: ISO 4217 (amounts are in its minor unit); one of the operator's currencies.
    currency: Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{3}$")]
    language: Literal["en", "th", "hi"] | None = None
    table: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    #: Responsible gaming (engine/sessions.py): every one optional.
    limits: SessionLimits = NO_LIMITS


class EndRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``POST /api/operator/sessions/{session_id}/end``: why the operator ends it."""

    reason: Annotated[str, msgspec.Meta(min_length=1, max_length=64,
                                        pattern=r"^[A-Za-z0-9_.:\-]+$")]


class ReportRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The signed body of ``POST /api/operator/wallet``: which calls to list."""

    round_id: Annotated[str, msgspec.Meta(max_length=128)] | None = None
    player_id: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 10_000
    #: The per-day summary (rounds, players, stakes, returns, GGR by table and currency)
    #: instead of the calls.
    daily: bool = False


class BetsQuery(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """The query of ``GET /api/bets``: the same bounds as ``get_bets`` on the websocket."""

    limit: Annotated[int, msgspec.Meta(ge=-(2**53), le=2**53)] = 20  # clamped to 1…200
    before: p.Cursor | None = None
    #: The player's offset from UTC in minutes (east): the days of the totals are theirs.
    tz: Annotated[int, msgspec.Meta(ge=-840, le=840)] = 0


#: Paths never compressed: formats that are compressed already.
_PRECOMPRESSED = [r"\.(png|jpe?g|gif|webp|avif|ico|woff2?|gz|br|zip)$"]


def compression(settings: Settings) -> list[Middleware]:
    """Brotli for HTTP responses when the browser takes it, else gzip (pages, scripts and
    JSON shrink four- to sixfold: i18n and table.js are most of a first visit).

    HTTP only: the middleware passes every non-``http`` scope through untouched, so
    websocket frames are never compressed here — they are small, latency-bound and sent
    pre-framed to many clients (server/framed_ws.py). Responses under 500 bytes stay as they
    are. Quality 4 costs little CPU per response; ``LIVETABLE_COMPRESS=0`` turns it off
    behind a proxy that compresses (deploy/nginx.conf does, for what arrives uncompressed).
    """
    if not settings.compress:
        return []
    return [Middleware(BrotliMiddleware, quality=4, minimum_size=500, gzip_fallback=True,
                       excluded_handlers=_PRECOMPRESSED)]


async def _store_unavailable(request: Request, exc: Exception) -> Response:
    """An HTTP request the store could not serve now: 503, try again shortly."""
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    return _error(503, "unavailable", "the service is unavailable; try again shortly",
                  retry_after=1)


async def _unknown_player(request: Request, exc: Exception) -> Response:
    return _error(404, "unknown_player", str(exc))


async def _bad_player_id(request: Request, exc: Exception) -> Response:
    return _error(400, "bad_player_id", str(exc))


#: What the store raises on purpose, as HTTP answers; anything else is a bug (500, logged
#: with its traceback by Starlette).
STORE_ERRORS: dict[Any, Any] = {StoreUnavailable: _store_unavailable,
                                UnknownPlayer: _unknown_player, AccountError: _bad_player_id}


def _json(data: bytes, status: int = 200) -> Response:
    return Response(data, status_code=status, media_type="application/json")


def _error(status: int, code: str, message: str, retry_after: int | None = None
           ) -> JSONResponse:
    headers = None if retry_after is None else {"retry-after": str(retry_after)}
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status,
                        headers=headers)


class ApiRateLimit:
    """``/api/*`` requests per client address (``api_rate``): 429 with Retry-After past it.

    Pure ASGI, so websockets and static files pass untouched. The address is the peer's,
    or the one a trusted proxy forwarded (uvicorn's proxy-headers middleware, outside this).
    """

    def __init__(self, app: ASGIApp, limits: RateLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the operator's own endpoints are signed (a forgery costs one HMAC of at most
        # 16 KiB to refuse), and one operator server launches every player's session from
        # one address: a per-address limit meant for browsers would throttle it
        if (scope["type"] == "http" and scope["path"].startswith("/api/")
                and not scope["path"].startswith("/api/operator/")):
            client = scope.get("client")
            address = client[0] if client else "?"
            if not self.limits.allow(self.limits.api, "api", address):
                response = _error(429, "rate_limited", "too many requests from this address",
                                  retry_after=self.limits.retry_after(self.limits.api, "api",
                                                                      address))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


# --- endpoints: each takes the process's Services from the app (``app.state.services``) ---


def services_of(conn: HTTPConnection) -> Services:
    """The :class:`Services` of the app serving ``conn`` (set by :func:`create_app`)."""
    services: Services = conn.app.state.services
    return services


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    svc: Services = app.state.services
    await svc.start()
    try:
        yield
    finally:
        await svc.stop()


# --- the websockets: the gateway's ----------------------------------------------------


async def ws_player(websocket: WebSocket) -> None:
    await services_of(websocket).gateway.serve(websocket, "player")


async def ws_dealer(websocket: WebSocket) -> None:
    await services_of(websocket).gateway.serve(websocket, "dealer")


# --- tables, rounds and shoes: public, read from the gateway's feeds or the store -----


async def tables(request: Request) -> Response:
    return _json(services_of(request).gateway.tables_json())


async def table(request: Request) -> Response:
    feed = services_of(request).gateway.feeds.get(request.path_params["table"])
    if feed is None:
        return _error(404, "unknown_table", "no such table")
    return _json(feed.snapshot)


async def roadmap(request: Request) -> Response:
    feed = services_of(request).gateway.feeds.get(request.path_params["table"])
    if feed is None:
        return _error(404, "unknown_table", "no such table")
    snap = feed.view()
    return _json(p.ENCODER.encode({"table": snap.id, "shoe_id": snap.shoe_id,
                                   "roadmap": snap.roadmap}))


async def round_(request: Request) -> Response:
    view = await services_of(request).store.round_view(request.path_params["round_id"])
    if view is None or view.state not in ("settled", "cancelled"):
        return _error(404, "unknown_round", "no settled or cancelled round with that id")
    body = msgspec.to_builtins(view)
    if view.spots is not None:  # name the fields, so that v1 can add more
        body["spots"] = {spot: {"outcome": r[0], "odds": r[1], "returned_per_unit": r[2]}
                         for spot, r in view.spots.items()}
    return JSONResponse(body)


async def shoe(request: Request) -> Response:
    # Only an ended auto shoe has a record: nothing of a shoe in play is ever served.
    record = await services_of(request).store.shoe_view(request.path_params["shoe_id"])
    if record is None:
        return _error(404, "unknown_shoe", "no ended shoe with that id: a shoe is revealed "
                      "when it ends, and a manual (physical) shoe never is")
    return _json(p.ENCODER.encode(record))


# --- players: the Bet Record, demo guests ---------------------------------------------


def identity_of(request: Request) -> Identity | Response:
    """The player or guest a request's bearer token names; else the error to answer."""
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("bearer "):
        return _error(401, "no_token", "send Authorization: Bearer <token>")
    try:
        identity = verify(services_of(request).secret, header[7:].strip())
    except TokenError as exc:
        return _error(401, "bad_token", str(exc))
    if not identity.is_player:
        return _error(403, "not_a_player", "a player or guest token is needed")
    return identity


async def session_ended(request: Request, identity: Identity) -> Response | None:
    """401 ``session_ended`` when the operator's session ``identity`` belongs to has
    ended: its token is refused from then on."""
    if identity.session is None:
        return None
    record = await services_of(request).store.session(identity.session)
    if record is None:
        return None
    if record.ended_at is None:
        ends_at = record.ends_at  # its time limit came while no gateway was timing it
        if ends_at is None or now_ms() < ends_at:
            return None
        return _error(401, "session_ended", "this session has ended (time_limit)")
    return _error(401, "session_ended", f"this session has ended ({record.reason})")


async def bets(request: Request) -> Response:
    identity = identity_of(request)
    if isinstance(identity, Response):
        return identity
    ended = await session_ended(request, identity)
    if ended is not None:
        return ended
    svc = services_of(request)
    limits = svc.gateway.limits
    address = request.client.host if request.client else "?"
    if not limits.allow(limits.bet_record, "bets", address):
        return _error(429, "rate_limited", "too many Bet Record reads, slow down",
                      retry_after=limits.retry_after(limits.bet_record, "bets", address))
    try:
        query = msgspec.convert(dict(request.query_params), BetsQuery, strict=False)
    except msgspec.ValidationError as exc:
        return _error(400, "bad_request", str(exc))
    entries, cursor = await svc.store.bet_record(identity.id, query.limit, query.before)
    totals = await record_totals(svc.store, identity.id, entries, query.tz)
    return _json(p.ENCODER.encode({"bets": entries, "next": cursor, "days": totals.days,
                                   "rounds": totals.rounds,
                                   "totals_partial": totals.totals_partial}))


async def guest(request: Request) -> Response:
    svc = services_of(request)
    settings, limits = svc.settings, svc.gateway.limits
    if not settings.guests:
        return _error(403, "demo_off", "guest play is off on this server")
    address = request.client.host if request.client else "?"
    if not limits.allow(limits.guests, "guest", address):
        return _error(429, "rate_limited", "too many new guests from this address")
    guest_id = new_guest_id()
    name = f"Guest {guest_id[-4:].upper()}"
    token = mint(svc.secret, "guest", guest_id, name, settings.token_ttl)
    player = await svc.store.ensure_player(guest_id, name, settings.guest_balance, now_ms())
    return _json(p.ENCODER.encode({"token": token, "player": player}))


# --- the operator: signed requests (docs/design.md §5) ----------------------------------------


OperatorRequest = TypeVar("OperatorRequest", bound=msgspec.Struct)


async def operator_body(request: Request, kind: type[OperatorRequest]
                        ) -> tuple[Operator, OperatorRequest] | Response:
    """The operator named by X-Livetable-Operator (``default`` when the header is absent)
    and its request decoded, once its signature (v2: over the timestamp and the raw body,
    with any of the operator's secrets) checks; else the error response (404 when no
    operator is configured: no integration)."""
    operators = services_of(request).operators
    if not operators.operators:
        return _error(404, "not_found", "operator integration is not configured")
    operator_id = request.headers.get(signatures.OPERATOR_HEADER, registry.DEFAULT_OPERATOR)
    operator = operators.get(operator_id)
    if operator is None:
        return _error(401, "unknown_operator",
                      f"{signatures.OPERATOR_HEADER} names no operator of this platform")
    body = b""
    try:
        async for chunk in request.stream():  # bounded: never buffer a huge body
            body += chunk
            if len(body) > MAX_OPERATOR_BODY:
                return _error(413, "too_large", "the body is at most 16 KiB")
    except ClientDisconnect:  # gone, or too slow (server/guard.py answered it 408)
        return _error(408, "body_timeout", "the request body did not arrive in time")
    why = signatures.check(operator.operator_secrets, body, request.headers, now_ms())
    if why is not None:
        return _error(401, "invalid_signature", why)
    try:
        return operator, msgspec.json.decode(body, type=kind)
    except msgspec.DecodeError as exc:
        return _error(400, "bad_request", str(exc))


async def launch(request: Request) -> Response:
    signed = await operator_body(request, LaunchRequest)
    if isinstance(signed, Response):
        return signed
    operator, launch = signed
    if not is_operator_player_id(launch.player_id):
        return _error(400, "bad_player_id", f"{launch.player_id[:80]!r} is not a valid player "
                      f"id: 1 to 64 letters, digits or _ - . @ +")
    if operator.id == registry.DEFAULT_OPERATOR:  # namespaced ids never meet a guest's
        try:
            check_not_guest(launch.player_id)
        except AccountError as exc:
            return _error(400, "bad_player_id", str(exc))
    if operator.currencies and launch.currency not in operator.currencies:
        return _error(400, "unknown_currency", f"{operator.id} plays in "
                      f"{', '.join(sorted(operator.currencies))}, not {launch.currency}")
    try:
        registry.currency_decimals(launch.currency)
    except ValueError as exc:
        return _error(400, "unknown_currency", str(exc))
    svc = services_of(request)
    settings = svc.settings
    table_id = launch.table or next(
        (t for t in settings.table_names if operator.may_launch_at(t)), "")
    if table_id not in settings.table_names or not operator.may_launch_at(table_id):
        return _error(404, "unknown_table", f"no table {table_id!r} for {operator.id}")
    if not await svc.launch_requests.first(operator.id, launch.request_id):
        return _error(409, "duplicate_request", f"request_id {launch.request_id!r} was "
                      f"used already: each launch has its own")
    language = launch.language or operator.language
    session_id = secrets.token_urlsafe(12)
    player = registry.ledger_player_id(operator.id, launch.player_id)
    token = mint(svc.secret, "player", player, launch.name, settings.session_ttl,
                 currency=launch.currency, language=language, operator=operator.id,
                 session=session_id)
    expires_at = verify(svc.secret, token).expires * 1000
    # kept before the token is handed out: every gateway sees the session, its limits,
    # and (later) its end
    started_at = now_ms()
    await svc.store.open_session(SessionRecord(
        session_id=session_id, operator=operator.id, player_id=player,
        started_at=started_at, expires_at=expires_at, limits=launch.limits,
        checked_at=started_at))
    base = settings.public_url.rstrip("/") or str(request.base_url).rstrip("/")
    # the token rides in the fragment: browsers never send it to a server, so it stays
    # out of access logs, proxies and Referer headers
    fragment = urlencode({"token": token, **({"lang": language} if language else {})})
    url = f"{base}/table.html?{urlencode({'table': table_id})}#{fragment}"
    return JSONResponse({"session_id": session_id, "token": token, "url": url,
                         "expires_at": expires_at})


#: A session id as a launch makes them (``secrets.token_urlsafe(12)``).
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


async def end_session(request: Request) -> Response:
    """``POST /api/operator/sessions/{session_id}/end``: the operator that launched the
    session ends it on every gateway at once (the store keeps the end first, so a gateway
    that misses the bus still refuses the token). Ending it again answers the first end."""
    signed = await operator_body(request, EndRequest)
    if isinstance(signed, Response):
        return signed
    operator, end = signed
    session_id = request.path_params["session_id"]
    svc = services_of(request)
    record = (await svc.store.session(session_id)
              if _SESSION_ID.fullmatch(session_id) else None)
    if record is None or record.operator != operator.id:  # another's is none of its own
        return _error(404, "unknown_session",
                      f"{operator.id} has no session {session_id[:80]!r} in force")
    record = await svc.store.end_session(session_id, end.reason, now_ms())
    assert record is not None and record.ended_at is not None
    await svc.bus.end_session(SessionEnd(session_id=session_id,
                                         reason=record.reason or end.reason))
    return JSONResponse({"session_id": session_id, "ended_at": record.ended_at,
                         "reason": record.reason})


async def wallet_report(request: Request) -> Response:
    signed = await operator_body(request, ReportRequest)
    if isinstance(signed, Response):
        return signed
    operator, query = signed
    wallet_log = services_of(request).wallet_log
    if wallet_log is None:
        return _error(404, "not_seamless", "this server runs the internal wallet")
    from livetable.operator.report import daily, report

    player = (None if query.player_id is None
              else registry.ledger_player_id(operator.id, query.player_id))
    calls = await wallet_log.calls(query.round_id, player, query.limit)
    # an operator reads its own players' calls, never another operator's
    calls = [call for call in calls if registry.operator_of(call.player_id) == operator.id]
    if query.daily:
        return _json(msgspec.json.encode({"days": daily(calls, operator.id)}))
    return _json(msgspec.json.encode(report(calls)))


# --- health and metrics: every process serves them ------------------------------------


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def readyz(request: Request) -> Response:
    ok, checks = await services_of(request).ready()
    return JSONResponse({"ready": ok, "checks": checks}, status_code=200 if ok else 503)


async def metrics(request: Request) -> Response:
    svc = services_of(request)
    await svc.ready()  # refreshes the lease gauges
    return Response(svc.metrics.render(), media_type=CONTENT_TYPE_LATEST)


# --- pages ----------------------------------------------------------------------------


async def dealer_page(request: Request) -> Response:
    return RedirectResponse("/dealer.html")


#: Every process serves these.
HEALTH = (
    Route("/healthz", healthz),
    Route("/readyz", readyz),
    Route("/metrics", metrics),
)
#: A gateway serves these too (and the static files).
API = (
    WebSocketRoute("/ws", ws_player),
    WebSocketRoute("/ws/dealer", ws_dealer),
    Route("/api/tables", tables),
    Route("/api/tables/{table}", table),
    Route("/api/tables/{table}/roadmap", roadmap),
    Route("/api/rounds/{round_id}", round_),
    Route("/api/shoes/{shoe_id}", shoe),
    Route("/api/bets", bets),
    Route("/api/guest", guest, methods=["POST"]),
    Route("/api/operator/sessions", launch, methods=["POST"]),
    Route("/api/operator/sessions/{session_id}/end", end_session, methods=["POST"]),
    Route("/api/operator/wallet", wallet_report, methods=["POST"]),
    Route("/dealer", dealer_page),
)


def create_app(settings: Settings, services: Services | None = None,
               roles: tuple[Role, ...] = ("gateway", "engine")) -> Starlette:
    """The app: health and metrics for every process; with the gateway role, the
    websockets, the HTTP API, the pages and the static files too."""
    svc = services or Services(settings, roles=roles)
    if "gateway" not in svc.roles:  # an engine process serves health and metrics only
        app = Starlette(routes=list(HEALTH), lifespan=lifespan, exception_handlers=STORE_ERRORS)
        app.state.services = svc
        return app
    routes: list[Any] = [*HEALTH, *API]
    if settings.static.is_dir():
        routes.append(Mount("/", StaticFiles(directory=settings.static, html=True),
                            name="static"))
    # Rate limits first: a refused request costs no compression.
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=STORE_ERRORS,
                    middleware=[Middleware(ApiRateLimit, limits=svc.gateway.limits),
                                *compression(settings)])
    app.state.services = svc
    return app
