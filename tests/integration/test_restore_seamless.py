"""A restored backup in seamless mode: the operator pays the rounds played after it.

``livetable serve`` in seamless mode against the reference operator; both files backed up
online as docs/operations.md §5 says (``sqlite3 … ".backup …"`` of the database and of the
wallet log, at the same time), rounds played, the service stopped, both backups put in place
(stale ``-wal``/``-shm`` removed), the service started, rounds played. A credit's ``tx_id`` is
hash(installation, round, player, currency); before the fix the rounds after the restore
had the ids of the rounds played after the backup, so their credits had those rounds'
``tx_id``s: the operator answered them as retries of credits it had applied, and paid none
of the new wins (their debits stayed open at the operator).
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import subprocess
from pathlib import Path

from liveserver import LiveServer, close_all
from test_operator_wallet import Player, wait_until_closed
from walletserver import OperatorServer, launch, seamless_env

PLAYERS = ["alice", "bob"]


def backup(db: Path, into: Path) -> None:
    subprocess.run(["sqlite3", str(db), f".backup '{into}'"], check=True)
    check = subprocess.run(["sqlite3", str(into), "PRAGMA integrity_check"], check=True,
                           capture_output=True, text=True)
    assert check.stdout.strip() == "ok"


def restore(from_: Path, db: Path) -> None:
    db.write_bytes(from_.read_bytes())
    for stale in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)


async def bet_rounds(players: list[Player], rounds: int, rng: random.Random) -> None:
    """``rounds`` rounds, every player betting in each."""
    watcher = players[0].client
    assert watcher is not None
    for _ in range(rounds):
        opened = await watcher.expect("round_opened", timeout=30)
        await asyncio.gather(*(p.bets(opened["round_id"], 2, rng) for p in players))
        await watcher.expect("round_settled", timeout=30, round_id=opened["round_id"])


def credits_of(wallet_db: Path) -> dict[str, tuple[int, list[str]]]:
    """livetable's credits: tx_id → (amount, the debits it closes)."""
    db = sqlite3.connect(wallet_db)
    try:
        rows = db.execute("SELECT tx_id, amount, body FROM wallet_calls "
                          "WHERE method = 'credit'").fetchall()
    finally:
        db.close()
    return {tx: (amount, json.loads(body)["debit_tx_ids"]) for tx, amount, body in rows}


def test_the_operator_pays_the_rounds_after_a_restore(tmp_path: Path) -> None:
    rng = random.Random(4)
    operator = OperatorServer(tmp_path / "operator", seed=4).start()
    data = tmp_path / "livetable"
    server = LiveServer(data, reveal_interval=0.05, betting_seconds=1.5,
                        env=seamless_env(operator))
    saved = tmp_path / "backups"
    saved.mkdir()
    try:
        server.start()
        players = [Player(pid, launch(server, pid)["token"]) for pid in PLAYERS]

        async def before() -> None:
            for player in players:
                await player.connect(server)
            await bet_rounds(players, 2, rng)
            # between rounds: no bet in the round the backup may catch open
            backup(data / "livetable.sqlite3", saved / "livetable.sqlite3")
            backup(data / "livetable-wallet.sqlite3", saved / "livetable-wallet.sqlite3")
            watcher = players[0].client
            assert watcher is not None
            opened = await watcher.expect("round_opened", timeout=30)
            await watcher.expect("round_settled", timeout=30, round_id=opened["round_id"])
            await bet_rounds(players, 3, rng)  # the rounds the restore takes back
            await close_all(p.client for p in players if p.client is not None)

        asyncio.run(before())
        wait_until_closed(server)
        server.stop()
        restore(saved / "livetable.sqlite3", data / "livetable.sqlite3")
        restore(saved / "livetable-wallet.sqlite3", data / "livetable-wallet.sqlite3")
        server.start()

        async def after() -> None:
            for player in players:
                await player.connect(server)
            await bet_rounds(players, 3, rng)
            await close_all(p.client for p in players if p.client is not None)

        asyncio.run(after())
        wait_until_closed(server)
        books = operator.state()
    finally:
        server.stop()
        operator.stop()
    ours = credits_of(data / "livetable-wallet.sqlite3")
    assert len(ours) >= 2 * 3
    # Every credit livetable made is the one the operator applied under its tx_id (not an
    # older credit of another round with the same id, answered as a retry and not paid)…
    applied = books["applied"]
    differ = {tx: (ours[tx], (applied.get(tx) or {}).get("debit_tx_ids"))
              for tx in ours if (applied.get(tx) or {}).get("debit_tx_ids") != ours[tx][1]}
    assert differ == {}
    assert set(books["applications"].values()) == {1}
    # …so every debit the operator applied is closed by one credit or rollback.
    closed = {tx: 0 for tx, call in applied.items() if call["method"] == "debit"}
    for call in applied.values():
        if call["method"] == "credit":
            for tx in call["debit_tx_ids"]:
                closed[tx] += 1
        elif call["method"] == "rollback" and call["debit_tx_id"] in closed:
            closed[call["debit_tx_id"]] += 1
    assert closed and {tx: n for tx, n in closed.items() if n != 1} == {}
