"""What a process says of itself: alive (``/healthz``), ready (``/readyz``) and its metrics
(``/metrics``). Every process serves them, an engine as well as a gateway.

Readiness is for a load balancer and an operator's alert: not ready when the store is
unreachable or not the one the process started on, when the ledger watch holds the tables
(``host/ledger_watch.py``), when the bus is down, when a gateway on the Redis bus has not
yet heard of one of the tables it serves (its hello would be closed 4004), when an engine
cannot reach the Redis of its leases or holds a lease it cannot renew, or a table is
halted (a failed audit, a bug in a step) or its runner died. The wallet of a
seamless deployment is never a reason: without it the tables still deal and settle (bets are
refused, credits wait in the outbox), and taking every gateway out would not bring it back —
it shows as degraded. The probes that ask the store run together, each bounded, so a
partitioned store gives a prompt 503 rather than no answer.

On PostgreSQL the store's probe is a write (``Services.write_probe``): a read answered
through commits hung 45 s behind a stalled standby and through a full disk. Its commit
time is in the body (``store_commit_ms``) and in ``livetable_store_commit_seconds``; and
without the synchronous standby bets are refused, so ``replication`` names it
(``livetable_postgres_replication_ok`` 0).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from livetable.clock import now_ms
from livetable.server.process import Process, services_of
from livetable.store.base import Store

if TYPE_CHECKING:
    from livetable.host.scaleout import LeasedTables

#: How long ``/readyz`` names a table whose step its store refused (out of step: the engine
#: reloaded from the store): long enough for an operator to look after an alert.
REFUSALS_SHOWN_MS = 10 * 60_000

#: How long the store's write probe waits for its commit (PostgreSQL), inside the probe's
#: own bound, so that what it found of the standby is told even when the commit hangs.
COMMIT_PROBE_TIMEOUT = 0.5

#: How long ``/readyz`` waits for any one probe (the store, the wallet log). The probes run
#: together, so it answers within about this, whatever hangs: a gateway cut off from Redis
#: by a partition answered after 2.3-10.5 s, or not at all, while its pooled connections
#: waited for their socket timeout (60 s). Long enough for a Redis busy with a settlement
#: chunk (a few ms), short enough that a load balancer's 1 s check gets an answer.
READY_PROBE_TIMEOUT = 0.7

R = TypeVar("R")

_UNANSWERED = f"no answer within {READY_PROBE_TIMEOUT:g} s"


async def _probe(call: Awaitable[R]) -> tuple[R | None, str | None]:
    """A readiness probe's answer, or why there is none (at most READY_PROBE_TIMEOUT)."""
    try:
        async with asyncio.timeout(READY_PROBE_TIMEOUT):
            return await call, None
    except TimeoutError:
        return None, _UNANSWERED
    except Exception as exc:  # any failure of a probe is a finding, never a 500
        return None, f"{type(exc).__name__}: {exc}"


async def _nothing() -> None:
    return None


async def readiness(svc: Process) -> tuple[bool, dict[str, Any]]:
    """Whether this process is ready to serve, and the checks that say so (``/readyz``);
    sets the gauges ``/metrics`` shows of them."""
    checks: dict[str, Any] = {"roles": list(svc.roles)}
    if "gateway" in svc.roles:
        checks["bus"] = bool(getattr(svc.bus, "healthy", True))
        checks["tables_known"] = sorted(svc.gateway.feeds)
        if svc.settings.redis_url:
            # a hello for a table the gateway has not heard of yet is closed 4004 (unknown
            # table): a load balancer must not send players to it before. On the Redis bus
            # the gateway serves HTTP before the first step of each table reaches it (from
            # an engine elsewhere, or its own through Redis); on the in-process bus its own
            # runners are the tables, checked below.
            unknown = [t for t in svc.settings.table_names if t not in svc.gateway.feeds]
            if unknown:
                checks["tables_unknown"] = unknown
    halted = _tables(svc, checks)
    restored = svc.announced.unacknowledged() if svc.announced is not None else {}
    if restored:  # a shoe retired by a restore, until acknowledged (informative)
        checks["restored"] = restored
    # the probes that ask the store, together, each bounded: see READY_PROBE_TIMEOUT
    identity, backlog, written, leases = await asyncio.gather(
        _probe(svc.store.identity()),
        _probe(svc.wallet_log.backlog()) if svc.wallet_log is not None
        else _probe(_nothing()),
        _probe(svc.write_probe(COMMIT_PROBE_TIMEOUT)) if svc.write_probe is not None
        else _probe(_nothing()),
        _probe(svc.lease_redis.ping()) if svc.leases is not None else _probe(_nothing()))
    if svc.leases is not None:
        _leases(svc.leases, checks, leases[1])
    current, failure = identity
    if failure is not None:  # any store failure means not ready
        checks["store"] = f"{_store_name(svc.store)} unreachable: {failure}"
    else:
        checks["store"] = True if current == svc.ledger.identity else (
            f"the store's identity changed (started on {svc.ledger.identity}, now "
            f"{current}): a wiped or different store")
    if checks["store"] is True and svc.write_probe is not None:
        _written(svc, checks, *written)
    if checks["store"] is not True:
        svc.metrics.set_gauge("livetable_ledger_ok", 0.0)
    checks["ledger"] = svc.ledger.problem or True
    owed, failure = backlog  # credits and rollbacks still owed to the operator
    if svc.wallet_log is not None and failure is None and owed is not None:
        svc.metrics.set_gauge("livetable_wallet_outbox", float(owed))
    if svc.wallet is not None:
        # degraded, never not-ready: the tables deal and settle without the wallet
        # (bets are refused wallet_unavailable, credits wait in the outbox), and a
        # load balancer taking every gateway out would not bring it back
        trouble = svc.wallet.health()
        checks["wallet"] = trouble or True
        svc.metrics.set_gauge("livetable_wallet_ok", 0.0 if trouble else 1.0)
    ok = (checks["store"] is True and checks["ledger"] is True and not halted
          and checks.get("replication", True) is True
          and checks.get("bus", True) is True and checks.get("redis", True) is True
          and not checks.get("leases_in_doubt") and not checks.get("tables_unknown")
          and all(checks.get("tables", {}).values()))
    return ok, checks


def _tables(svc: Process, checks: dict[str, Any]) -> dict[str, str]:
    """The tables this process runs, into ``checks``: leases held, each runner alive,
    halted (returned: any makes the process not ready) or lately refused a step."""
    if svc.leases is not None:
        checks["leases_held"] = svc.leases.held
        for table in svc.settings.table_names:
            held = 1.0 if table in svc.leases.runners else 0.0
            svc.metrics.set_gauge("livetable_lease_held", held, table=table)
    elif "engine" in svc.roles:
        checks["tables"] = {t: r.alive for t, r in svc.runners.items()}
    halted = {t: r.halted for t, r in svc.runners.items() if r.halted is not None}
    if halted:  # held by a failed audit, or by a bug in a step (see TableRunner)
        checks["halted"] = halted
    since = now_ms() - REFUSALS_SHOWN_MS
    refused = {t: r.refused[1] for t, r in svc.runners.items()
               if r.refused is not None and r.refused[0] >= since}
    if refused:  # the table reloaded from its store and went on (informative)
        checks["steps_refused"] = refused
    return halted


def _leases(leases: LeasedTables, checks: dict[str, Any], unreachable: str | None) -> None:
    """An engine cut off from Redis can neither keep nor take a lease: it answered 200
    through Redis kills and partitions, holding no table."""
    checks["redis"] = True if unreachable is None else f"Redis unreachable: {unreachable}"
    doubt = [t for t in leases.held if not leases.surely_holds(t)]
    if doubt:  # renewals unanswered: the runner takes no step (host/scaleout.py)
        checks["leases_in_doubt"] = doubt


def _written(svc: Process, checks: dict[str, Any],
             result: tuple[float | None, str | None] | None, failure: str | None) -> None:
    """What the store's write probe found: its commit time, the synchronous standby."""
    limit = COMMIT_PROBE_TIMEOUT
    if result is None and failure == _UNANSWERED:
        # past even the probe's own bound (a loaded loop, a slow pool): a commit not
        # answered all the same, and nothing known of the standby (a loaded run said
        # "commit failed", as if the store had refused it)
        limit, result = READY_PROBE_TIMEOUT, (None, "not known: the write probe did not answer")
    if result is None:
        checks["store"] = f"{_store_name(svc.store)} commit failed: {failure}"
        return
    seconds, refused = result
    if seconds is None:
        checks["store"] = f"{_store_name(svc.store)} commit: no answer within {limit:g} s"
        seconds = limit  # at least: what an alert on the gauge sees
    else:
        checks["store_commit_ms"] = round(seconds * 1000, 1)
    svc.metrics.set_gauge("livetable_store_commit_seconds", seconds)
    if svc.settings.postgres_replication == "sync":
        checks["replication"] = refused or True
        svc.metrics.set_gauge("livetable_postgres_replication_ok", 0.0 if refused else 1.0)


def _store_name(store: Store) -> str:
    """What the store is, as an operator names it: "Redis", "SQLite" (its class's)."""
    return type(store).__name__.removesuffix("Store")


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def readyz(request: Request) -> Response:
    ok, checks = await readiness(services_of(request))
    return JSONResponse({"ready": ok, "checks": checks}, status_code=200 if ok else 503)


async def metrics(request: Request) -> Response:
    svc = services_of(request)
    await readiness(svc)  # refreshes the lease gauges
    return Response(svc.metrics.render(), media_type=CONTENT_TYPE_LATEST)
