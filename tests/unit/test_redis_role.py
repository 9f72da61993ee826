"""Redis carries no money: scale-out keeps it in PostgreSQL.

The Redis ledger was retired: ``--redis`` alone is refused at start, naming what to add,
rather than running a deployment whose money has no store; and Redis keeps only the bus, the
dealer commands' queues and the leases, whose Lua is in files (no ``redis.call``
in Python, tests/unit/test_house_measures.py), every one of them loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from livetable.cli import main
from livetable.config import Settings, SettingsError
from livetable.host.scaleout import LeasedTables, _Renewals
from livetable.services import Services

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = "redis://127.0.0.1:1/0"  # never reached: refused before any connection


@pytest.mark.parametrize("command", ["serve", "gateway", "engine", "deposit"])
def test_redis_alone_is_refused_naming_postgres_and_migrate_store(
        command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.delenv("LIVETABLE_POSTGRES_URL", raising=False)
    monkeypatch.setenv("LIVETABLE_SECRET", "s" * 32)
    monkeypatch.setenv("LIVETABLE_SHOE_KEY", "k" * 32)
    extra = (["--player", "alice", "--amount", "10", "--id", "d1"] if command == "deposit"
             else [])
    code = main([command, "--redis", REDIS_URL, "--data-dir", str(tmp_path), *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--postgres" in err and "livetable migrate-store" in err, err
    assert not (tmp_path / "livetable.sqlite3").exists()  # no local ledger in its stead


def test_services_refuse_redis_without_postgres(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, redis_url=REDIS_URL, secret=b"s" * 32,
                        shoe_key=b"k" * 32)
    with pytest.raises(SettingsError, match="--postgres"):
        Services(settings, roles=("gateway",))


class _Scripts:
    """A Redis client that only records the scripts registered on it."""

    def __init__(self) -> None:
        self.scripts: list[str] = []

    def register_script(self, script: str) -> Any:
        self.scripts.append(script)
        return object()


def test_every_lua_file_is_loaded() -> None:
    files = {path.read_text() for path in (ROOT / "livetable").rglob("*.lua")}
    client = _Scripts()
    LeasedTables(client, None, ["t1"], print)  # type: ignore[arg-type]  # none is called
    _Renewals.register(client)  # type: ignore[arg-type]  # the renewals' thread's own
    assert files and set(client.scripts) == files


class _Swallowing(_Scripts):
    """A Redis whose every script call, when cancelled, answers instead of raising — as
    redis-py's asyncio client often does (livetable/tasks.py, check_cancelled)."""

    def register_script(self, script: str) -> Any:
        super().register_script(script)

        async def call(**_: Any) -> int:
            with contextlib.suppress(asyncio.CancelledError):  # the answer comes back
                await asyncio.sleep(0.05)
            return 0

        return call


async def test_a_graceful_stop_ends_even_when_a_redis_call_swallows_the_cancel() -> None:
    leases = LeasedTables(_Swallowing(), None, ["t1"], print, poll=0.01)  # type: ignore[arg-type]
    leases._task = asyncio.create_task(leases._loop())  # the lease loop alone: no thread
    for _ in range(20):  # until the loop is inside a call, where a cancel is swallowed
        await asyncio.sleep(0.013)
    await asyncio.wait_for(leases.stop(), 5)  # before: waited for ever
