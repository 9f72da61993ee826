"""The modules a bet passes through, in order, and how many times one is entered again.

    .venv/bin/python bench/bet_path.py

One ``place_bet`` from a signed-in player's connection to its ``bet_accepted``, through the
real gateway and a SQLite store (its writer a thread, so that one profiler sees both
sides; under ``livetable serve`` the writer is a child process, where the store's module is
entered once more). Every call into one of livetable's modules is recorded, the modules
in the order they are first entered form the path, and a *re-entry* is a call into a
module that the bet had already left for another one (a coroutine resumed after an await
is not an entry). Helpers every frame uses and that say nothing of the design (the clock,
the metrics, the rate limits, the frame codec, the tokens) are left out. Prints JSON.
"""

from __future__ import annotations

import asyncio
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
from livetable.config import Settings
from livetable.engine.effects import OpenRound
from livetable.server.gateway import Gateway
from livetable.server.metrics import Metrics
from livetable.store.sqlite import SQLiteStore

T0 = 1_700_000_000_000
SECRET = b"s" * 32
HELPERS = {"livetable.clock", "livetable.server.metrics", "livetable.server.ratelimit",
           "livetable.protocol", "livetable.auth", "livetable.server.framed_ws",
           "livetable.tasks"}


class Socket:
    """What the gateway uses of a Starlette WebSocket: frames in, answers recorded."""

    def __init__(self, *frames: dict[str, Any]) -> None:
        self.headers: dict[str, str] = {}
        self.scope: dict[str, Any] = {"type": "websocket", "extensions": {}}
        self.sent: list[dict[str, Any]] = []
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

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": code})


def _module(frame: FrameType | None) -> str:
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def _ours(module: str) -> bool:
    """A module of livetable's that says something of the design: not a helper, nor a
    module of a helper package (the protocol is one: ``livetable.protocol.codec``)."""
    return module.startswith("livetable") and not any(
        module == helper or module.startswith(helper + ".") for helper in HELPERS)


def _starts(code: CodeType) -> int:
    """The offset of ``code``'s first RESUME: a frame at it has just started (a coroutine
    resumed after an await is at a later one)."""
    return next(i.offset for i in dis.get_instructions(code) if i.opname == "RESUME")


class Recorder:
    """Each *entry* into a module of livetable: a call that starts a function (not a
    coroutine resumed) whose nearest caller in livetable is in another module, or outside
    livetable (a task of the event loop, the writer thread)."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self._start: dict[CodeType, int] = {}

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
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
        caller = frame.f_back
        while caller is not None and not _ours(_module(caller)):
            caller = caller.f_back
        if caller is None or _module(caller) != module:
            self.entries.append(module)


def path_of(entries: list[str]) -> dict[str, Any]:
    count: dict[str, int] = {}
    for module in entries:
        count[module] = count.get(module, 0) + 1
    short = [m.removeprefix("livetable.") for m in entries]
    return {"path": short, "modules": len(count),
            "re_entries": {m.removeprefix("livetable."): n - 1
                           for m, n in count.items() if n > 1},
            "re_entries_total": sum(n - 1 for n in count.values())}


async def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), secret=SECRET, heartbeat=0)
        store = SQLiteStore(Path(tmp) / "db.sqlite3")

        async def execute(table: str, command: Any) -> p.Ack | p.Error:
            raise AssertionError("no dealer here")

        gateway = Gateway(settings, store, execute, Metrics(), SECRET)
        snapshot = p.encode(p.TableSnapshot(id="t1", name="T1", phase="betting", mode="auto"))
        gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[], snapshot=snapshot))
        await store.ensure_player("p1", "P1", 10_000, T0)
        now = int(asyncio.get_running_loop().time() * 0) + T0
        await store.commit_step("t1", b"{}", [], [OpenRound(
            table="t1", round_id="r1", shoe_id="s1", round_no=1, closes_at=2**52,
            limits=p.Limits())], now)
        token = mint(SECRET, "player", "p1", "P1", 3600)
        ws = Socket({"type": "hello", "v": 1, "table": "t1", "token": token})
        session = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
        while not ws.sent:
            await asyncio.sleep(0.001)
        recorder = Recorder()
        threading.setprofile(recorder)
        sys.setprofile(recorder)
        ws.push({"type": "place_bet", "bet_id": "b1", "round_id": "r1", "spot": "P1",
                 "amount": 10})
        while len(ws.sent) < 2:
            await asyncio.sleep(0.001)
        sys.setprofile(None)
        threading.setprofile(None)
        assert ws.sent[1]["type"] == "bet_accepted", ws.sent[1]
        await ws.close()
        await session
        await store.close()
        return path_of(recorder.entries)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=1))
