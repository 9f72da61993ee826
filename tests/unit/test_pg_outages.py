"""Which asyncpg errors the PostgreSQL store surfaces as an outage (StoreUnavailable: the
caller retries) and which as a bug (let through: the table is held).

A failover shows them all within a second: the primary's connections die (reset, closed
under a query), new connections are refused, the standby answers but does not take writes
until it is promoted (no host of the URL matches ``target_session_attrs``), a server shuts
down or starts up (SQLSTATE class 57). Taking any of them for a bug held the table in the
middle of a settlement (found by tests/integration/test_pg_failover.py under load).
"""

from __future__ import annotations

import asyncpg
import pytest
from asyncpg import exceptions as pg

from livetable.store.postgres import is_pg_outage

OUTAGES = [
    ConnectionRefusedError(111, "Connect call failed"),
    ConnectionResetError(104, "reset by peer"),
    TimeoutError(),
    pg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    pg.TargetServerAttributeNotMatched("None of the hosts match 'read-write'"),
    pg.AdminShutdownError("terminating connection due to administrator command"),
    pg.CannotConnectNowError("the database system is starting up"),
    pg.ReadOnlySQLTransactionError("cannot execute INSERT in a read-only transaction"),
    pg.TooManyConnectionsError("sorry, too many clients already"),
    asyncpg.InterfaceError("cannot call Transaction.__aexit__(): the underlying connection "
                           "is closed"),
    # a pooled connection the lost primary left mid-protocol, met by the next call
    pg.InternalClientError("cannot switch to state 15; another operation (2) is in progress"),
]
BUGS = [
    pg.UniqueViolationError("duplicate key value violates unique constraint"),
    pg.UndefinedColumnError("column does not exist"),
    asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
    KeyError("a bug"),
]


@pytest.mark.parametrize("exc", OUTAGES, ids=lambda e: type(e).__name__)
def test_an_outage_is_an_outage(exc: BaseException) -> None:
    assert is_pg_outage(exc)


@pytest.mark.parametrize("exc", BUGS, ids=lambda e: type(e).__name__)
def test_a_bug_is_not_an_outage(exc: BaseException) -> None:
    assert not is_pg_outage(exc)
