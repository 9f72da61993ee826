"""A store restored from a backup never deals the same cards again (docs/operations.md §5).

The backup is taken and restored exactly as operations §5 says, with the real ``sqlite3``
command on the real database file while the embedded service deals: ``.backup`` online,
``PRAGMA integrity_check``, then (service stopped) the backup put in place as
``livetable.sqlite3`` and the stale ``-wal``/``-shm`` removed, and the service started
again. Before the fix the table re-dealt the rounds played after the backup with the very
same cards (everyone who watched them knew every outcome), under the same round ids (whose
seamless credits an operator takes for retries, and pays none of the wins).
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from livetable.bus import TableBatch
from livetable.cli import main
from livetable.config import Settings
from livetable.operator.log import credit_tx_id
from livetable.rules.fairness import ShoeRecord, check_shoe
from livetable.server.health import readiness
from livetable.services import Services


def fast_settings(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir, secret=b"integration-test-secret-0123456789abcdef",
                    betting_seconds=1, deal_interval=0.01, reveal_interval=0.01,
                    between_rounds=0.05, close_grace=0)


async def started(settings: Settings) -> tuple[Services, list[dict[str, Any]]]:
    """The embedded service, started, and the table events it publishes from then on."""
    svc = Services(settings)
    published: list[dict[str, Any]] = []

    def keep(batch: TableBatch) -> None:
        published.extend(msgspec.json.decode(frame) for _, frame in batch.frames)

    svc.bus.subscribe(keep)
    await svc.start()
    return svc, published


async def rounds_settled(published: list[dict[str, Any]], count: int,
                         timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while sum(e["type"] == "round_settled" for e in published) < count:
        assert time.monotonic() < deadline, "the table did not deal"
        await asyncio.sleep(0.05)


def hands(events: list[dict[str, Any]]) -> dict[str, tuple[tuple[str, ...], ...]]:
    """Round id → the hands revealed in it, in order, of the rounds that opened here."""
    opened = {e["round_id"] for e in events if e["type"] == "round_opened"}
    out: dict[str, list[tuple[str, ...]]] = {}
    for e in events:
        if e["type"] == "hand_revealed" and e["round_id"] in opened:
            out.setdefault(e["round_id"], []).append(tuple(e["cards"]))
    return {r: tuple(h) for r, h in out.items() if len(h) == 6}


def backup_as_documented(db: Path, backups: Path) -> Path:
    """operations §5, "Online, consistent": the sqlite3 command's .backup, then the check."""
    backups.mkdir()
    target = backups / "livetable-2026-12-04-2300.sqlite3"
    subprocess.run(["sqlite3", str(db), f".backup '{target}'"], check=True)
    check = subprocess.run(["sqlite3", str(target), "PRAGMA integrity_check"], check=True,
                           capture_output=True, text=True)
    assert check.stdout.strip() == "ok"
    return target


def restore_as_documented(backup: Path, db: Path) -> None:
    """operations §5, "Restore": (stopped) the backup in place, stale -wal/-shm removed."""
    db.write_bytes(backup.read_bytes())
    for stale in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)


def stored_shoe_ids(backup: Path) -> str:
    """The shoe in play when the backup was taken (the last round it holds)."""
    db = sqlite3.connect(backup)
    try:
        return str(db.execute("SELECT shoe_id FROM rounds ORDER BY opened_at DESC "
                              "LIMIT 1").fetchone()[0])
    finally:
        db.close()


class Scenario(msgspec.Struct):
    """What the tables published before the restore, after it, and after an ordinary
    restart; what /readyz said after the restore; the retired shoe's record."""

    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    again: list[dict[str, Any]]
    retired: str
    record: ShoeRecord | None
    ready: tuple[bool, dict[str, Any]]
    acknowledged: int  # the exit code of `livetable restores --acknowledge`
    ready_again: tuple[bool, dict[str, Any]]


async def play(tmp_path: Path) -> Scenario:
    settings = fast_settings(tmp_path / "data")
    db = settings.db_path
    svc, before = await started(settings)
    try:
        await rounds_settled(before, 2)
        backup = backup_as_documented(db, tmp_path / "backups")
        await rounds_settled(before, sum(e["type"] == "round_settled" for e in before) + 3)
    finally:
        await svc.stop()
    restore_as_documented(backup, db)
    retired = stored_shoe_ids(backup)
    svc, after = await started(settings)
    try:
        await rounds_settled(after, 4)
        ready = await readiness(svc)
        record = await svc.store.shoe_view(retired)
    finally:
        await svc.stop()
    acknowledged = main(["restores", "--acknowledge", "--data-dir", str(settings.data_dir)])
    svc, again = await started(settings)  # an ordinary restart
    try:
        await rounds_settled(again, 1)
        ready_again = await readiness(svc)
    finally:
        await svc.stop()
    return Scenario(before=before, after=after, again=again, retired=retired, record=record,
                    ready=ready, acknowledged=acknowledged, ready_again=ready_again)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """Played once for the tests below (each checks one consequence of the restore)."""
    return asyncio.run(play(tmp_path_factory.mktemp("restore")))


def test_a_restored_backup_never_deals_the_same_cards_again(scenario: Scenario) -> None:
    seen, dealt = hands(scenario.before), hands(scenario.after)
    assert len(dealt) >= 3 and len(seen) >= 4
    # No round opened after the restore deals a round anyone saw before it.
    assert not set(dealt.values()) & set(seen.values())
    # The shoe in play at the backup was retired: revealed, its record says why, verifies.
    record = scenario.record
    assert record is not None and record.ended_by == "restored"
    assert check_shoe(record, seen_commitment=record.commitment) == []
    assert all(not r.startswith(scenario.retired + ".") for r in dealt)
    revealed = [e for e in scenario.after if e["type"] == "shoe_revealed"]
    assert [(e["shoe_id"], e["ended_by"]) for e in revealed][:1] == [
        (scenario.retired, "restored")]
    # A new event epoch: no client resumes into numbers the restored store reuses.
    assert min(e["epoch"] for e in scenario.after) > max(e["epoch"] for e in scenario.before)


def test_no_round_id_and_so_no_credit_id_repeats_after_a_restore(scenario: Scenario) -> None:
    """A seamless credit's tx_id is hash(installation, round, player, currency): the
    installation is the restored store's, so only new round ids keep the new rounds'
    credits from being taken for retries of the first ones (and not paid)."""
    seen, dealt = hands(scenario.before), hands(scenario.after)
    assert not set(dealt) & set(seen)
    installation = "the-restored-installation"
    assert not ({credit_tx_id(installation, r, "p1", "THB") for r in dealt}
                & {credit_tx_id(installation, r, "p1", "THB") for r in seen})


def test_a_restore_is_shown_on_readyz_until_acknowledged(scenario: Scenario) -> None:
    ok, checks = scenario.ready
    # informative: the table goes on, from a new shoe
    assert ok and "restored from a backup" in checks.get("restored", {}).get("t1", "")
    assert scenario.acknowledged == 0
    ok, checks = scenario.ready_again
    assert ok and "restored" not in checks


def test_an_ordinary_restart_retires_nothing(scenario: Scenario) -> None:
    assert not [e for e in scenario.again if e["type"] == "shoe_revealed"]
    assert min(e["epoch"] for e in scenario.again) == max(e["epoch"] for e in scenario.after)
    assert min(e["seq"] for e in scenario.again) > max(
        e["seq"] for e in scenario.after if e["epoch"] == scenario.again[0]["epoch"])


# --- PostgreSQL: the same check, one process on a restored database ------------------------


async def test_a_restored_postgres_database_never_deals_the_same_cards_again(
        tmp_path: Path) -> None:
    """``livetable serve --postgres``: a copy of the database taken while it deals
    (``pg_dump -Fc``), rounds played, the copy restored into it (``pg_restore --clean``, the
    service stopped), the service started: the marker beside the engine's data directory
    sees the database went back, as on SQLite."""
    from pg_util import fresh_database, pg_bin

    binaries = pg_bin()
    assert binaries is not None
    url = fresh_database()
    settings = Settings(data_dir=tmp_path / "data", postgres_url=url, postgres_replication="none",
                        secret=b"integration-test-secret-0123456789abcdef",
                        betting_seconds=1, deal_interval=0.01, reveal_interval=0.01,
                        between_rounds=0.05, close_grace=0)
    dump = tmp_path / "livetable.dump"
    svc, before = await started(settings)
    try:
        await rounds_settled(before, 2)
        subprocess.run([str(binaries / "pg_dump"), "-Fc", "-f", str(dump), url], check=True)
        await rounds_settled(before, sum(e["type"] == "round_settled" for e in before) + 3)
    finally:
        await svc.stop()
    subprocess.run([str(binaries / "pg_restore"), "--clean", "--if-exists", "--no-owner",
                    "-d", url, str(dump)], check=True)
    svc, after = await started(settings)
    try:
        await rounds_settled(after, 3)
        ok, checks = await readiness(svc)
    finally:
        await svc.stop()
    seen, dealt = hands(before), hands(after)
    assert len(dealt) >= 2
    assert not set(dealt.values()) & set(seen.values())
    assert not set(dealt) & set(seen)
    assert [e["ended_by"] for e in after if e["type"] == "shoe_revealed"][:1] == ["restored"]
    assert ok and "t1" in checks["restored"]
