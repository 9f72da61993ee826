"""Connections to the Redis of scale-out, made one way, and what counts as its outage.

Redis carries no money (that is PostgreSQL's: :mod:`livetable.store.postgres`); it carries
the bus (:mod:`livetable.bus.redis`), the dealer commands' queues and the table leases
(:mod:`livetable.host.scaleout`), the chat room and the launch request ids. Every one of
them takes its connections from :func:`connection_pool` and tells an outage from a bug with
:func:`is_redis_outage`, so that a Redis restart or failover is handled the same way
everywhere: retried where a retry is safe, answered ``unavailable`` where it is not.
"""

from __future__ import annotations

from typing import Any

from redis import exceptions as redis_errors
from redis.asyncio import BlockingConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ResponseError

#: redis-py's errors for "Redis cannot serve us now": no connection (refused, dropped, the
#: pool exhausted, still loading its data set), no answer in time, a primary turned
#: replica by a failover, out of memory, a cluster resharding. Anything else it raises (a
#: script's error, a wrong type) is a bug, not an outage.
REDIS_OUTAGES: tuple[type[BaseException], ...] = (
    redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.ReadOnlyError,
    redis_errors.OutOfMemoryError, redis_errors.TryAgainError, redis_errors.ClusterDownError,
    redis_errors.MasterDownError, OSError)


def connection_pool(url: str, *, max_connections: int, timeout: float, retry: bool = True,
                    **options: Any) -> BlockingConnectionPool:
    """A pool of connections to ``url`` that retry a command on a dropped connection.

    After a Redis restart or a failover every idle pooled connection is dead, and its next
    command fails. redis-py retries only as the *connection* says: a ``retry`` given to
    ``Redis(connection_pool=…)`` is ignored (the pool's own configuration is used, and
    without one a pooled connection retries 0 times), so the retry goes on the pool's
    connection options here — the one way every pool of livetable is made. A retry
    reconnects and sends the command again: safe, every command sent this way is
    idempotent (a lease renewal, a publish of a stored step that the bus tells apart) or
    answered by its deadline (a dealer command). ``options``: the pool's other connection
    options (``socket_timeout``, …). Without ``retry``, a pool whose connections fail at
    once: the bus's subscription (see :class:`~livetable.bus.redis.RedisBus`).
    """
    if retry:
        options.update(retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
                       retry_on_error=[redis_errors.ConnectionError,
                                       redis_errors.TimeoutError])
    return BlockingConnectionPool.from_url(url, max_connections=max_connections,
                                           timeout=timeout, **options)


def is_redis_outage(exc: BaseException) -> bool:
    """Whether ``exc`` (out of redis-py) says Redis cannot serve us now; also a server busy
    running a long script past ``busy-reply-threshold`` (a ``BUSY`` reply)."""
    return isinstance(exc, REDIS_OUTAGES) or (
        isinstance(exc, ResponseError) and str(exc).startswith("BUSY"))
