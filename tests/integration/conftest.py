"""Fixtures of the server integration tests: real ``livetable serve`` processes.

Two servers are shared by the session. On the manual-mode one a test deals its own rounds
(:mod:`dealing`; each starts from a new shoe and leaves the table between rounds), so it
never waits for a clock; the auto-mode one serves the tests of what needs no round, or of
the auto clock itself (each waits for a fresh round, so the tests do not depend on one
another). The small-log server and the restart tests' servers are their own, because their
settings differ.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from dealing import Dealer, dealing
from liveserver import LiveServer
from pg_util import PgCluster, shared_pg
from redis_util import RedisServer, start_redis


@pytest.fixture(scope="session")
def auto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("auto"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def manual_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("manual"), mode="manual",
                        env={"LIVETABLE_PLAYER_BALANCE": "5000"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def dealer(manual_server: LiveServer) -> AsyncIterator[Dealer]:
    """The test as the dealer of the manual server's table."""
    async with dealing(manual_server) as seated:
        yield seated


@pytest.fixture
def fresh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server of the test's own (not started: the test starts it with its settings)."""
    server = LiveServer(tmp_path_factory.mktemp("own"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of the module's own, on a free port (a test that needs a fresh one
    per test defines its own fixture of this name)."""
    server = start_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="session")
def pg_cluster() -> PgCluster:
    """The session's PostgreSQL primary (no standby; tests/pg_util.py): tests on it keep to
    a schema or a database of their own, and never kill it."""
    return shared_pg()
