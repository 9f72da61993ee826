"""What PostgreSQL (through asyncpg) says when it cannot serve us, told from a bug.

An outage (no connection, a failover under way, the server shutting down, a standby
reached) is :class:`~livetable.store.base.StoreUnavailable` to the store's callers, who
answer ``unavailable`` and let the client retry; anything else is a bug and surfaces as
itself. A deadlock or serialization victim is neither: nothing of it was written, and the
store runs it again. Apart from the store because the wallet log on PostgreSQL
(livetable/operator/log_postgres.py) draws the same line.
"""

from __future__ import annotations

import asyncpg
from asyncpg.exceptions import InternalClientError  # TargetServerAttributeNotMatched too

#: SQLSTATE classes of "the database cannot serve us now": connection exceptions (08),
#: insufficient resources (53), operator intervention (57: shutting down, starting up),
#: and a read-only transaction (25006: we reached a standby).
_OUTAGE_STATES = ("08", "53", "57", "25006")
#: A transaction the server rolled back to break a deadlock or a serialization conflict.
RETRY_STATES = ("40001", "40P01")


def is_pg_outage(exc: BaseException) -> bool:
    """Whether ``exc`` (out of asyncpg) says PostgreSQL cannot serve us now: no connection
    (refused, dropped, closed under us, timed out, left mid-protocol), no host of the URL
    taking writes yet (a failover under way: ``TargetServerAttributeNotMatched``), or the
    server's own word (see ``_OUTAGE_STATES``)."""
    if isinstance(exc, OSError | TimeoutError | asyncpg.PostgresConnectionError
                  | InternalClientError):
        return True  # InternalClientError: a connection left mid-protocol by a lost server
    if isinstance(exc, asyncpg.InterfaceError):  # also a bug's ("another operation …")
        return "closed" in str(exc) or "connection" in str(exc)
    state = getattr(exc, "sqlstate", None)
    return isinstance(state, str) and state.startswith(_OUTAGE_STATES)
