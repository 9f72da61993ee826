"""The rooms a bet passes through, in order, and how many times one is entered again.

    .venv/bin/python bench/bet_path.py [--store postgres] [--wallet seamless]

One ``place_bet`` from a signed-in player's connection to its ``bet_accepted``, through the
real gateway and a SQLite store whose writer is a thread, profiled like the event loop's
(under ``livetable serve`` the writer is a child process: the same calls, in another
process); with ``--store postgres``, a PostgreSQL store instead (a primary of its own, no
standby); with ``--wallet seamless``, paid by the reference operator's wallet, served in
this process (its side left out: :data:`OUTSIDE`). Every call into one of livetable's
modules is recorded.

A *room* is a module, but for the SQLite ledger (``store/sqlite/ledger/``, :data:`ROOMS`):
one transaction on the writer, entered through one door (``calls.perform``), whose modules
— the ledger and its one way money moves, its schema, its slips — call one another inside
it; counted by module, the ledger's slips "re-entered" the ledger's core each time they
asked it for a placeholder list or a post. A call is an *entry* when its nearest caller in
livetable is in another room, or outside livetable (a task of the event loop, the writer
thread); a coroutine resumed after an await is not one. The rooms in the order entered form
the path, and a *re-entry* is an entry into a room the bet had already left for another
one. ``modules`` counts every module that ran for the bet, within rooms too.

Helpers every frame uses and that say nothing of the design (the clock, the metrics, the
rate limits, the frame codec, the tokens) are left out. Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dis
import json
import sys
import tempfile
import threading
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from livetable import protocol as p
from livetable.auth import mint
from livetable.bus import TableBatch
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.engine.effects import OpenRound
from livetable.metrics import Metrics
from livetable.operator.client import WalletClient
from livetable.operator.log_sqlite import SQLiteWalletLog
from livetable.operator.reference import create_operator_app
from livetable.operator.seamless import SeamlessWallet
from livetable.server.gateway import Gateway
from livetable.store.base import Store
from livetable.store.postgres import PostgresStore
from livetable.store.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

T0 = 1_700_000_000_000
SECRET = b"s" * 32
HELPERS = {"livetable.clock", "livetable.metrics", "livetable.server.ratelimit",
           "livetable.protocol", "livetable.auth", "livetable.server.framed_ws",
           "livetable.tasks"}
#: Packages that are one room each (see the docstring): the SQLite ledger.
ROOMS = ("livetable.store.sqlite.ledger",)
#: The operator's side, served in this process for ``--wallet seamless`` only to answer
#: the wallet's calls: another company's server, not the bet's path. What runs on its
#: behalf (its check of a call's signature) is left out with it.
OUTSIDE = ("livetable.operator.reference",)


class Socket:
    """What the gateway uses of a Starlette WebSocket: frames in, answers recorded."""

    def __init__(self, *frames: dict[str, Any]) -> None:
        self.headers: dict[str, str] = {}
        self.scope: dict[str, Any] = {"type": "websocket", "extensions": {}}
        self.sent: list[dict[str, Any]] = []
        self._more = asyncio.Event()
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        for frame in frames:
            self.push(frame)

    def push(self, frame: dict[str, Any]) -> None:
        self.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(frame)})

    async def accept(self) -> None:
        return None

    async def receive(self) -> dict[str, Any]:
        return await self.incoming.get()

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))
        self._more.set()

    async def answered(self, count: int) -> None:
        """Once ``count`` frames were sent (no polling: the wait is the gateway's)."""
        while len(self.sent) < count:
            self._more.clear()
            await self._more.wait()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": code})


def _module(frame: FrameType | None) -> str:
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def _ours(module: str) -> bool:
    """A module of livetable's that says something of the design: not a helper, nor a
    module of a helper package (the protocol is one: ``livetable.protocol.codec``)."""
    return module.startswith("livetable") and not any(
        module == helper or module.startswith(helper + ".") for helper in HELPERS)


def _on_behalf_of_outside(frame: FrameType) -> bool:
    caller = frame.f_back
    while caller is not None:
        if _module(caller) in OUTSIDE:
            return True
        caller = caller.f_back
    return False


def room_of(module: str) -> str:
    """The room ``module`` is part of: itself, or the package of :data:`ROOMS` it is in."""
    return next((room for room in ROOMS
                 if module == room or module.startswith(room + ".")), module)


def _starts(code: CodeType) -> int:
    """The offset of ``code``'s first RESUME: a frame at it has just started (a coroutine
    resumed after an await is at a later one)."""
    return next(i.offset for i in dis.get_instructions(code) if i.opname == "RESUME")


class Recorder:
    """Each *entry* into a room of livetable: a call that starts a function (not a
    coroutine resumed) whose nearest caller in livetable is in another room, or outside
    livetable (a task of the event loop, the writer thread), as (room, the caller's room
    or None); and every module that ran."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str | None]] = []
        self.modules: set[str] = set()
        self.on = False
        self._start: dict[CodeType, int] = {}

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or not self.on:
            return
        module = _module(frame)
        if not _ours(module):
            return
        code = frame.f_code
        start = self._start.get(code)
        if start is None:
            start = self._start[code] = int(_starts(code))
        if frame.f_lasti != start:
            return  # resumed after an await
        if module in OUTSIDE or _on_behalf_of_outside(frame):
            return
        self.modules.add(module)
        room = room_of(module)
        caller = frame.f_back
        while caller is not None and not _ours(_module(caller)):
            caller = caller.f_back
        came_from = None if caller is None else room_of(_module(caller))
        if came_from != room:
            self.entries.append((room, came_from))


def path_of(entries: list[tuple[str, str | None]], modules: set[str]) -> dict[str, Any]:
    """The rooms in the order entered, each stay once. Entries one after another into the
    same room are one stay, not a re-entry, when the later one is a task or a thread the
    room started (no caller in livetable) or comes from the room the one before came from
    (a room asking another twice in a row): the bet did not leave the room for another one
    in between. The same room asked by another (the bet went on, and came back to it) is a
    re-entry."""
    stays = [room for i, (room, came_from) in enumerate(entries)
             if i == 0 or entries[i - 1][0] != room
             or came_from not in (None, entries[i - 1][1])]
    count: dict[str, int] = {}
    for room in stays:
        count[room] = count.get(room, 0) + 1
    short = [m.removeprefix("livetable.") for m in stays]
    return {"path": short, "rooms": len(count), "modules": len(modules),
            "re_entries": {m.removeprefix("livetable."): n - 1
                           for m, n in count.items() if n > 1},
            "re_entries_total": sum(n - 1 for n in count.values())}


async def main(kind: str = "sqlite", wallet: str = "internal") -> dict[str, Any]:
    """The path of one ``place_bet`` on a ``kind`` store, paid by the ``wallet``."""
    # every thread started from here on is profiled (the store's writer thread among
    # them); entries count only while the bet is on its way
    recorder = Recorder()
    threading.setprofile(recorder)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            async with contextlib.AsyncExitStack() as stack:
                await _walk(Path(tmp), stack, recorder, kind, wallet)
    finally:
        threading.setprofile(None)
    return path_of(recorder.entries, recorder.modules)


async def _walk(tmp: Path, stack: contextlib.AsyncExitStack, recorder: Recorder, kind: str,
                wallet: str) -> None:
    settings = Settings(data_dir=tmp, secret=SECRET, heartbeat=0)
    store: Store
    if kind == "postgres":
        from pg_util import start_pg  # the tests' helper: a primary of its own

        cluster = start_pg()
        stack.callback(cluster.stop)
        store = PostgresStore(cluster.primary.url, replication="none")
    else:
        store = SQLiteStore(tmp / "db.sqlite3")
    stack.push_async_callback(store.close)

    async def execute(table: str, command: Any) -> p.Ack | p.Error:
        raise AssertionError("no dealer here")

    seamless: SeamlessWallet | None = None
    if wallet == "seamless":  # the reference operator, served in this loop
        from asgi_server import served  # the tests' helper

        url = await stack.enter_async_context(served(create_operator_app(SECRET)))
        settings = Settings(data_dir=tmp, secret=SECRET, heartbeat=0, wallet="seamless",
                            wallet_url=url + "/wallet", wallet_secret=SECRET)
        log = SQLiteWalletLog(tmp / "wallet.sqlite3")
        stack.push_async_callback(log.close)
        seamless = SeamlessWallet(settings, store, log, WalletClient(
            url + "/wallet", SECRET, timeout=5, connections=2), Metrics())
        stack.push_async_callback(seamless.stop)
    gateway = Gateway(settings, store, execute, Metrics(), SECRET, seamless)
    snapshot = p.encode(p.TableSnapshot(
        id="t1", name="T1", phase="betting", mode="auto", round_id="r1",
        closes_at=now_ms() + 60_000))
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[], snapshot=snapshot))
    await store.ensure_player("p1", "P1", 0 if seamless else 10_000, T0)
    await store.commit_step("t1", b"{}", [], [OpenRound(
        table="t1", round_id="r1", shoe_id="s1", round_no=1, closes_at=2**52,
        limits=p.Limits())], T0)
    token = mint(SECRET, "player", "p1", "P1", 3600)
    ws = Socket({"type": "hello", "v": 1, "table": "t1", "token": token})
    session = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    await ws.answered(1)
    sys.setprofile(recorder)
    recorder.on = True
    ws.push({"type": "place_bet", "bet_id": "b1", "round_id": "r1", "spot": "P1",
             "amount": 10})
    await ws.answered(2)
    recorder.on = False
    sys.setprofile(None)
    assert ws.sent[1]["type"] == "bet_accepted", ws.sent[1]
    await ws.close()
    await session


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite",
                        help="postgres: a primary of its own, started from Debian's binaries")
    parser.add_argument("--wallet", choices=("internal", "seamless"), default="internal",
                        help="seamless: the reference operator's wallet, served in process")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.store, args.wallet)), indent=1))
