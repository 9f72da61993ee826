"""Fixtures of the server integration tests: real ``livetable serve`` processes.

One auto-mode server is shared by the session (each test waits for a fresh round, so the
tests do not depend on one another); the manual-mode server, the small-log server and the
restart tests' servers are their own, because their settings differ.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from liveserver import PLAYER_BALANCE, LiveServer


@pytest.fixture(scope="session")
def auto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("auto"),
                        env={"LIVETABLE_PLAYER_BALANCE": str(PLAYER_BALANCE)})
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
def fresh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server of the test's own (not started: the test starts it with its settings)."""
    server = LiveServer(tmp_path_factory.mktemp("own"))
    try:
        yield server
    finally:
        server.stop()
