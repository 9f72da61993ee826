"""The event loop's CPU per bet in the gateway, measured in one process, without sockets.

    .venv/bin/python bench/gateway_cpu.py [--players 2000] [--bets 20000] [--rounds 3]

Why: the bet-intake bench (``bench/run.py --only bets``) runs the server, its writer and the
load generator on the same two shared cores, and its CPU per bet moves by a third from run
to run with what else the machine does. This takes the sockets and the load generator out:
``--players`` connections of uvicorn's websocket protocol as ``livetable serve`` runs it
(:class:`~livetable.server.framed_ws.FramedWebSocketProtocol`, the real Starlette
``WebSocket`` and gateway, a SQLite store with its writer in a child process), each on a
transport that only counts what is written; every ``place_bet`` is a masked client frame
handed to ``data_received`` as the kernel would, 200 at a time, and the loop runs until
each is answered. The figure is the CPU time of the event loop's thread per bet
(``time.thread_time``): the writer process and the kernel's socket work are not in it.

It compares, alternately in one process (``--rounds`` times each), the gateway as it is
with the same gateway whose connections offer no frame sink (every bet through the
receive queue and Starlette, as before the sink): the ratio is the robust figure. Prints
JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.websockets import WebSocket
from uvicorn.config import Config
from uvicorn.server import ServerState

from livetable import protocol as p
from livetable.auth import mint
from livetable.bus import TableBatch
from livetable.config import Settings
from livetable.engine.effects import OpenRound
from livetable.metrics import Metrics
from livetable.server.framed_ws import FramedWebSocketProtocol
from livetable.server.gateway import Gateway
from livetable.server.gcpolicy import MIDDLE_THRESHOLD, NO_AUTOMATIC_FULL, YOUNG_THRESHOLD
from livetable.store.sqlite import SQLiteStore

T0 = 1_700_000_000_000
SECRET = b"s" * 32
MASK = b"\x1f\x2e\x3d\x4c"
BATCH = 200  # frames handed to the protocols between two turns of the loop


def masked(text: str) -> bytes:
    """A client's text frame (FIN, masked), as a browser sends it uncompressed."""
    data = text.encode()
    n = len(data)
    head = bytes([0x81, 0x80 | n]) if n < 126 else bytes([0x81, 0xFE]) + n.to_bytes(2, "big")
    body = bytes(b ^ MASK[i % 4] for i, b in enumerate(data))
    return head + MASK + body


#: Every transport's writes together.
WRITES = [0]


class Transport:
    """What uvicorn's protocol touches of a transport; counts what it writes (its own
    count, and all transports' together in :data:`WRITES`, cheap to poll)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.written = 0
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written += 1
        WRITES[0] += 1

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        return None

    def resume_reading(self) -> None:
        return None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name in ("peername", "sockname"):
            return ("127.0.0.1", self.port)
        return default


class NoSink(FramedWebSocketProtocol):
    """The protocol with no frame sink offered: every message through the queue."""

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope: Any = getattr(self, "scope", None)
        if scope is not None:
            scope["extensions"].pop("livetable.frame_sink", None)


def upgrade(path: str) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET {path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n").encode()


async def connect(kind: type[FramedWebSocketProtocol], config: Config, state: ServerState,
                  players: int, answered: list[int]) -> list[FramedWebSocketProtocol]:
    """``players`` connections signed in to t1, each past its welcome."""
    loop = asyncio.get_running_loop()
    conns = []
    for i in range(players):
        conn = kind(config=config, server_state=state, app_state={}, _loop=loop)
        conn.connection_made(Transport(10_000 + i))  # type: ignore[arg-type]
        conn.data_received(upgrade("/ws"))
        conns.append(conn)
    await asyncio.sleep(0.05)
    for i, conn in enumerate(conns):
        token = mint(SECRET, "player", f"p{i}", f"P{i}", 3600)
        conn.data_received(masked(json.dumps({"type": "hello", "v": 1, "table": "t1",
                                              "token": token})))
    await until(lambda: all(c.transport.written >= 2 for c in conns))  # type: ignore[attr-defined]
    answered.clear()
    return conns


async def until(done: Any, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not done():
            await asyncio.sleep(0.001)


async def burst(conns: list[FramedWebSocketProtocol], bets: int, tag: str,
                cpu: Callable[[], float] = time.thread_time, timeout: float = 60.0) -> float:
    """``bets`` bets over the connections; the CPU seconds (``cpu``: the loop thread's)
    until every one is answered."""
    frames = [masked(json.dumps({"type": "place_bet", "bet_id": f"{tag}-{n}",
                                 "round_id": "r1", "spot": "P1", "amount": 10}))
              for n in range(bets)]
    before = WRITES[0]
    start = cpu()
    for n in range(0, bets, BATCH):
        for k in range(n, min(n + BATCH, bets)):
            conns[k % len(conns)].data_received(frames[k])
        await asyncio.sleep(0)
    try:
        await until(lambda: WRITES[0] - before >= bets, timeout)
    except TimeoutError:
        closed = sum(1 for c in conns if c.transport.is_closing())
        raise SystemExit(f"{tag}: {WRITES[0] - before} of {bets} answered; "
                         f"{closed} connections closed") from None
    return cpu() - start


async def run(players: int, bets: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), secret=SECRET, heartbeat=0,
                            frames_per_second=10_000,
                            player_frames_per_second=10_000)
        store = SQLiteStore(Path(tmp) / "db.sqlite3")

        async def execute(table: str, command: Any) -> p.Ack | p.Error:
            raise AssertionError("no dealer here")

        gateway = Gateway(settings, store, execute, Metrics(), SECRET)

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await gateway.serve(WebSocket(scope, receive, send), "player")

        snapshot = p.encode(p.TableSnapshot(id="t1", name="T1", phase="betting", mode="auto"))
        gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[], snapshot=snapshot))
        for i in range(players):
            await store.ensure_player(f"p{i}", f"P{i}", 10**12, T0)
        await store.commit_step("t1", b"{}", [], [OpenRound(
            table="t1", round_id="r1", shoe_id="s1", round_no=1, closes_at=2**52,
            limits=p.Limits(max=10**9, round_max=10**12))], T0)
        config = Config(app=app, log_level="warning", ws_max_size=64 * 1024,
                        ws_per_message_deflate=False,
                        ws_ping_interval=None)  # no pongs come from these transports
        config.load()
        state = ServerState()
        answered: list[int] = []
        sides = {"sink": await connect(FramedWebSocketProtocol, config, state, players,
                                       answered),
                 "queue": await connect(NoSink, config, state, players, answered)}
        per_bet: dict[str, list[float]] = {"sink": [], "queue": []}
        # the collector as ``livetable serve`` sets it (livetable.server.gcpolicy): young
        # collections only, what exists now out of their sight; a full one between bursts
        gc.collect()
        gc.freeze()
        gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, NO_AUTOMATIC_FULL)
        for r in range(rounds + 1):  # the first round of each warms up, not counted
            for side, conns in sides.items():
                gc.collect()
                cpu = await burst(conns, bets, f"{side}{r}")
                if r:
                    per_bet[side].append(cpu / bets * 1e6)
        for conns in sides.values():
            for conn in conns:
                conn.connection_lost(None)
        await asyncio.sleep(0.2)
        await store.close()
    sink, queue = (statistics.median(per_bet[s]) for s in ("sink", "queue"))
    return {"players": players, "bets": bets, "rounds": rounds,
            "loop_cpu_us_per_bet": {s: [round(v, 1) for v in vs] for s, vs in per_bet.items()},
            "median_us": {"sink": round(sink, 1), "queue": round(queue, 1)},
            "sink_over_queue": round(sink / queue, 3),
            "loadavg": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=2000)
    parser.add_argument("--bets", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import uvloop  # the loop ``livetable serve`` runs on (uvicorn picks it when installed)

    print(json.dumps(uvloop.run(run(args.players, args.bets, args.rounds)), indent=1))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
