"""The SQLite store's writer in a child process (store/sqlite/writer.py).

The store contract runs against it too (``sqlite-process`` in test_store_contract.py);
here is what only a child process can do wrong: die, outlive its server, be killed by the
terminal's Ctrl-C, start badly, or send back an error the server cannot tell apart.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from procutil import kill

from livetable import protocol as p
from livetable.engine.effects import OpenRound
from livetable.store.base import StoreUnavailable, UnknownPlayer
from livetable.store.sealing import StateSeal
from livetable.store.sqlite import SQLiteStore
from livetable.store.sqlite.writer import _HEAD, _raised

#: Starts processes: not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.process

T0 = 1_700_000_000_000


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "db.sqlite3", writer="process")
    yield store
    await store.close()


async def test_the_database_is_opened_by_the_child_only(store: SQLiteStore) -> None:
    assert store.process is not None and store.process.pid is not None
    assert store.process.pid != os.getpid()
    with pytest.raises(RuntimeError, match="writer process"):
        store.db.execute("SELECT 1")
    view = await store.ensure_player("alice", "Alice", 1_000, T0)
    assert view.balance == 1_000


async def test_a_dead_child_is_an_outage_and_the_next_call_starts_another(
        store: SQLiteStore) -> None:
    await store.ensure_player("alice", "Alice", 1_000, T0)
    assert store.process is not None
    first = store.process.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    with pytest.raises(StoreUnavailable, match="writer process ended"):
        await store.deposit("d1", "alice", 5, T0)
    # the next call starts a new child on the same file: nothing committed is lost
    assert await store.deposit("d1", "alice", 5, T0) == 1_005
    assert store.process.pid not in (None, first)
    assert (await store.audit()).ok


async def test_calls_waiting_when_the_child_dies_all_fail_as_an_outage(
        store: SQLiteStore) -> None:
    await store.ensure_player("alice", "Alice", 1_000, T0)
    assert store.process is not None and store.process.pid is not None
    calls = [asyncio.ensure_future(store.deposit(f"d{i}", "alice", 1, T0)) for i in range(50)]
    await asyncio.sleep(0)
    os.kill(store.process.pid, signal.SIGKILL)
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, int | StoreUnavailable) for r in results), results
    assert any(isinstance(r, StoreUnavailable) for r in results)  # killed mid-flight
    # each deposit was applied exactly once or not at all: resending them all is safe
    again = [await store.deposit(f"d{i}", "alice", 1, T0) for i in range(50)]
    assert again[-1] == 1_050
    assert (await store.audit()).ok


async def test_ctrl_c_in_the_terminal_does_not_kill_the_ledger(store: SQLiteStore) -> None:
    assert store.process is not None and store.process.pid is not None
    os.kill(store.process.pid, signal.SIGINT)
    os.kill(store.process.pid, signal.SIGTERM)
    await asyncio.sleep(0.2)
    assert alive(store.process.pid)
    assert (await store.ensure_player("bob", "Bob", 10, T0)).balance == 10


async def test_close_ends_the_child(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3", writer="process")
    assert store.process is not None
    pid = store.process.pid
    assert pid is not None
    await store.ensure_player("alice", "Alice", 1_000, T0)
    await store.close()
    assert not alive(pid)
    with pytest.raises(StoreUnavailable):
        await store.player("alice")
    # what it wrote is in the file
    reopened = SQLiteStore(tmp_path / "db.sqlite3")
    assert (await reopened.player("alice")) is not None
    await reopened.close()


async def test_a_store_closed_before_any_call_ends_its_child(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3", writer="process")
    assert store.process is not None and store.process.pid is not None
    pid = store.process.pid
    await store.close()
    assert not alive(pid)


def test_the_child_does_not_outlive_a_killed_server(tmp_path: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from livetable.store.sqlite import SQLiteStore
            store = SQLiteStore({str(tmp_path / 'db.sqlite3')!r}, writer="process")
            print(store.process.pid, flush=True)
            time.sleep(600)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        child = int(server.stdout.readline())
        assert alive(child)
        kill(server)
        assert wait_gone(child), "the writer process outlived its server"
    finally:
        kill(server)


def test_an_error_opening_the_database_is_raised_where_the_store_is_built(
        tmp_path: Path) -> None:
    (tmp_path / "a-directory").mkdir()
    with pytest.raises(StoreUnavailable, match="unable to open"):
        SQLiteStore(tmp_path / "a-directory", writer="process")


async def test_errors_cross_as_what_they_are(store: SQLiteStore) -> None:
    with pytest.raises(UnknownPlayer):
        await store.deposit("d1", "nobody", 5, T0)
    # a bug is not an outage, and says where it happened: here an argument the method's
    # signature does not allow, refused by the schema its arguments are decoded with
    with pytest.raises(msgspec.ValidationError, match="Expected `object`") as caught:
        await store.commit_step("t1", b"{}", [], ["not an effect"], T0)  # type: ignore[list-item]
    assert any("in the SQLite writer process" in note
               for note in getattr(caught.value, "__notes__", []))


async def test_a_sealed_store_seals_in_the_child(tmp_path: Path) -> None:
    seal = StateSeal(b"k" * 32)
    store = SQLiteStore(tmp_path / "db.sqlite3", seal=seal, writer="process")
    try:
        await store.commit_step("t1", b'{"plain": 1}', [], [OpenRound(
            table="t1", round_id="t1.1.1", shoe_id="t1.1", round_no=1, closes_at=T0,
            limits=p.Limits())], T0)
        assert await store.load_table("t1") == b'{"plain": 1}'
    finally:
        await store.close()
    raw = sqlite3.connect(tmp_path / "db.sqlite3").execute(
        "SELECT state FROM tables").fetchone()[0]
    assert b"plain" not in bytes(raw) and seal.open("t1", bytes(raw)) == b'{"plain": 1}'


def crossed(exc: BaseException) -> BaseException:
    """``exc`` as the server gets it from the child (the answer frame that raises it)."""
    raised = pickle.loads(bytes(_raised(exc))[_HEAD + 1:])
    assert isinstance(raised, BaseException)
    return raised


def test_sqlite_outages_cross_as_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    with pytest.raises(sqlite3.OperationalError) as caught:
        other.execute("BEGIN IMMEDIATE")
    assert isinstance(crossed(caught.value), StoreUnavailable)
    assert isinstance(crossed(KeyError("x")), KeyError)
    holder.execute("ROLLBACK")
