"""On a live ``livetable serve``: the disk under its database fills up
mid-betting, then space comes back.

The database lives on a small tmpfs of its own (the test mounts it: it runs as root, as
the test machine does); the server's log and secret stay outside it. Players bet through
several rounds; a filler file takes every free byte; bets are then answered
``unavailable`` on connections that stay open, ``/readyz`` says the disk is full; the
filler is deleted, and with no restart the table goes on — bets are taken, rounds settle —
and every bet that was ever acknowledged ends settled or refunded in its Bet Record.

Before the fix, a ``COMMIT`` that failed with ``SQLITE_FULL`` was followed by a
``ROLLBACK`` whose "cannot rollback - no transaction is active" replaced the disk-full
error: a bug, so the bettors' connections closed 1011, readiness never named the disk,
and after the space came back the table stayed where it stopped until a restart.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from liveserver import LiveServer, WireClient

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root")

DISK_BYTES = 24 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(disk)],
                   check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk``."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 1 << 16, 1 << 12, 512):  # big blocks, then the last bytes
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    finally:
        os.close(fd)
    return filler


def ready(server: LiveServer) -> tuple[int, dict[str, object]]:
    with httpx.Client(trust_env=False, timeout=5.0) as http:
        answer = http.get(server.http + "/readyz")
    return answer.status_code, answer.json()


class Bettor:
    """A player betting on every open round, every 100 ms, recording each answer."""

    def __init__(self, client: WireClient, name: str) -> None:
        self.client = client
        self.name = name
        self.acknowledged: set[str] = set()
        self.unavailable = 0
        self.accepted_at: list[float] = []
        self.n = 0
        self.stop = False

    async def run(self) -> None:
        while not self.stop and self.client.close_code is None:
            opened = [f for f in self.client.frames if f.get("type") == "round_opened"]
            if opened:
                self.n += 1
                await self.client.send({"type": "place_bet", "bet_id": f"{self.name}-{self.n}",
                                        "round_id": opened[-1]["round_id"], "spot": "P1",
                                        "amount": 10})
            await asyncio.sleep(0.1)

    def tally(self) -> None:
        for frame in self.client.drain():
            if frame.get("type") == "bet_accepted":
                self.acknowledged.add(frame["bet_id"])
                self.accepted_at.append(time.monotonic())
            elif frame.get("type") == "error" and frame.get("code") == "unavailable":
                self.unavailable += 1


async def wait_for(what: str, check: object, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check() if callable(check) else check:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"not within {seconds} s: {what}")


async def open_bets(client: WireClient, bet_ids: set[str]) -> set[str]:
    """Which of ``bet_ids`` the player's Bet Record does not show settled or refunded."""
    ended: set[str] = set()
    before = None
    while True:
        await client.send({"type": "get_bets", "limit": 200,
                           **({"before": before} if before else {})})
        page = await client.expect("bets", timeout=10)
        ended |= {b["bet_id"] for b in page["bets"] if b["state"] in ("settled", "refunded")}
        before = page.get("next")
        if not before:
            return bet_ids - ended


async def test_a_full_disk_is_an_outage_and_the_table_goes_on_when_space_returns(
        tmp_path: Path, small_disk: Path) -> None:
    server = LiveServer(tmp_path / "data", env={
        "LIVETABLE_DB": str(small_disk / "livetable.sqlite3"),
        "LIVETABLE_PLAYER_BALANCE": "10000000",
        "LIVETABLE_PLAYER_FRAMES_PER_SECOND": "1000",
        "LIVETABLE_LIMIT_MIN": "1"})
    server.start()
    bettors: list[Bettor] = []
    tasks: list[asyncio.Task[None]] = []
    try:
        tokens = [server.player_token(f"bettor{i}") for i in range(3)]
        for i, token in enumerate(tokens):
            client = await WireClient.connect(server.ws, f"bettor{i}")
            await client.hello(token)
            bettors.append(Bettor(client, f"b{i}"))
        tasks = [asyncio.create_task(b.run()) for b in bettors]

        def tally() -> list[Bettor]:
            for b in bettors:
                b.tally()
            return bettors

        await wait_for("bets acknowledged", lambda: sum(len(b.acknowledged)
                                                        for b in tally()) >= 30)
        filler = fill(small_disk)
        await wait_for("bets answered unavailable",
                       lambda: sum(b.unavailable for b in tally()) >= 5)
        status, body = ready(server)
        assert status == 503 and "disk is full" in str(body), body
        assert all(b.client.close_code is None for b in bettors), "a bettor was closed"

        filler.unlink()  # space again; the server is not restarted
        freed = time.monotonic()
        await wait_for("bets taken again", lambda: any(
            t > freed for b in tally() for t in b.accepted_at))
        await wait_for("ready again", lambda: ready(server)[0] == 200)
        settled_before = len([f for f in bettors[0].client.frames
                              if f.get("type") == "round_settled"])
        await wait_for("a round settles after the disk was full", lambda: len(
            [f for f in bettors[0].client.frames if f.get("type") == "round_settled"])
            > settled_before)
        for b in bettors:
            b.stop = True
        await asyncio.gather(*tasks)
        await asyncio.sleep(0.5)
        tally()
        assert all(b.client.close_code is None for b in bettors), "a bettor was closed"
        deadline = time.monotonic() + 30
        for b in bettors:  # every acknowledged bet ends settled (or refunded), once
            left = await open_bets(b.client, b.acknowledged)
            while left and time.monotonic() < deadline:
                await asyncio.sleep(1)
                left = await open_bets(b.client, left)
            assert not left, f"{b.name}: acknowledged bets never settled: {sorted(left)[:10]}"
        assert server.process is not None and server.process.poll() is None
        assert server.starts == 1
    finally:
        for b in bettors:
            b.stop = True
        for task in tasks:
            task.cancel()
        for b in bettors:
            await b.client.close()
        server.stop()
