"""A seamless bet's CPU against an internal bet's, in one process, without the players' sockets.

    .venv/bin/python bench/seamless_cpu.py [--players 1000] [--bets 5000] [--rounds 3]

Why: the wallet bench (``bench/run.py --only wallet --pin``) answers the issue's question —
the server's CPU a seamless bet over an internal bet's, and the ack p99 — but a run takes
two minutes and its figures move with what else the machine does. This one takes the
players' sockets and the load generator out, so that a change to the seamless path is
measured in seconds: ``--players`` connections of the gateway (as bench/gateway_cpu.py:
uvicorn's websocket protocol on transports that only count what is written), each signed
in, at two gateways over one SQLite store whose writer is a child process (as ``livetable
serve`` runs it) — one gateway taking bets on the internal wallet, one paying them with
the seamless wallet, whose log runs in the same writer process and whose calls go over
real keep-alive connections to the reference operator (``livetable operator-demo``, a
process of its own, answering each debit after ``--latency-ms``).

Each burst hands ``--bets`` ``place_bet`` frames to the connections, 200 between two turns
of the loop, and runs until every one is answered. The figure is the CPU of the server's
side: the event loop's thread (``time.thread_time``: its system calls too) plus the writer
process's, per bet; the operator's is not in it. Bursts run alternately, internal then
seamless, ``--rounds`` times after one warm-up each; the ratio of the medians is the
figure. Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from starlette.websockets import WebSocket
from uvicorn.config import Config
from uvicorn.server import ServerState

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import cpu_seconds
from bench.gateway_cpu import burst, connect
from bench.scenarios import start_operator
from livetable import protocol as p
from livetable.bus import TableBatch
from livetable.config import Settings
from livetable.engine.effects import OpenRound
from livetable.metrics import Metrics
from livetable.operator.client import WalletClient
from livetable.operator.log_sqlite import SQLiteWalletLog
from livetable.operator.seamless import SeamlessWallet
from livetable.server.framed_ws import FramedWebSocketProtocol
from livetable.server.gateway import Gateway
from livetable.server.gcpolicy import (
    MIDDLE_THRESHOLD,
    NO_AUTOMATIC_FULL,
    YOUNG_THRESHOLD,
)
from livetable.store.sqlite import SQLiteStore

T0 = 1_700_000_000_000
SECRET = b"s" * 32


@contextlib.contextmanager
def operator(latency_ms: float) -> Iterator[tuple[str, bytes]]:
    """The reference operator in a process of its own, as the wallet bench starts it
    (:func:`bench.scenarios.start_operator`): its wallet's URL and secret."""
    with tempfile.TemporaryDirectory() as work:
        env: dict[str, str] = {}
        proc = start_operator(Path(work), latency_ms, "debit", env)
        try:
            yield env["LIVETABLE_WALLET_URL"], env["LIVETABLE_WALLET_SECRET"].encode()
        finally:
            proc.terminate()
            proc.wait()


async def run(players: int, bets: int, rounds: int, latency_ms: float,
              connections: int, only: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, operator(latency_ms) as (url, wallet_secret):
        settings = Settings(data_dir=Path(tmp), secret=SECRET, heartbeat=0,
                            frames_per_second=10_000, player_frames_per_second=10_000,
                            wallet="seamless", wallet_url=url, wallet_secret=wallet_secret)
        store = SQLiteStore(Path(tmp) / "db.sqlite3", writer="process")
        assert store.process is not None
        wallet_log = SQLiteWalletLog(Path(tmp) / "wallet.sqlite3", writer=store.process)
        client = WalletClient(url, wallet_secret, timeout=3.0, connections=connections)
        wallet = SeamlessWallet(settings, store, wallet_log, client, Metrics())

        async def execute(table: str, command: Any) -> p.Ack | p.Error:
            raise AssertionError("no dealer here")

        internal_gateway = Gateway(settings, store, execute, Metrics(), SECRET)
        seamless_gateway = Gateway(settings, store, execute, Metrics(), SECRET, wallet)
        snapshot = p.encode(p.TableSnapshot(id="t1", name="T1", phase="betting", mode="auto",
                                            round_id="r1", closes_at=2**52,
                                            limits=p.Limits(max=10**9, round_max=10**12)))
        for gateway in (internal_gateway, seamless_gateway):
            gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[],
                                       snapshot=snapshot))
        for i in range(players):
            await store.ensure_player(f"p{i}", f"P{i}", 10**12, T0)
        await store.commit_step("t1", b"{}", [], [OpenRound(
            table="t1", round_id="r1", shoe_id="s1", round_no=1, closes_at=2**52,
            limits=p.Limits(max=10**9, round_max=10**12))], T0)
        wallet.start()  # its sweeper, four times a second, as served
        sides: dict[str, list[FramedWebSocketProtocol]] = {}
        for side, gateway in (("internal", internal_gateway), ("seamless", seamless_gateway)):
            async def app(scope: Any, receive: Any, send: Any, gw: Gateway = gateway) -> None:
                await gw.serve(WebSocket(scope, receive, send), "player")

            config = Config(app=app, log_level="warning", ws_max_size=64 * 1024,
                            ws_per_message_deflate=False, ws_ping_interval=None)
            config.load()
            sides[side] = await connect(FramedWebSocketProtocol, config, ServerState(),
                                        players, [])
        per_bet: dict[str, list[float]] = {"internal": [], "seamless": []}
        gc.collect()
        gc.freeze()
        gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, NO_AUTOMATIC_FULL)
        writer = store.process.pid or 0

        def server_cpu() -> float:
            """The server's side: the loop's thread and the writer process."""
            return time.thread_time() + cpu_seconds(writer)

        for r in range(rounds + 1):  # the first of each warms up, not counted
            for side, conns in sides.items():
                if side not in only:
                    continue
                gc.collect()
                cpu = await burst(conns, bets, f"{side}{r}", server_cpu, timeout=120)
                if r:
                    per_bet[side].append(cpu / bets * 1e6)
        for conns in sides.values():
            for conn in conns:
                conn.connection_lost(None)
        await asyncio.sleep(0.2)
        await wallet.stop()
        await wallet_log.close()
        await store.close()
    if len(only) == 1:
        return {"only": only, "server_cpu_us_per_bet": per_bet}
    internal, seamless = (statistics.median(per_bet[s]) for s in ("internal", "seamless"))
    return {"players": players, "bets": bets, "rounds": rounds, "latency_ms": latency_ms,
            "server_cpu_us_per_bet": {s: [round(v, 1) for v in vs]
                                      for s, vs in per_bet.items()},
            "median_us": {"internal": round(internal, 1), "seamless": round(seamless, 1)},
            "seamless_over_internal": round(seamless / internal, 3),
            "loadavg": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=1000)
    parser.add_argument("--bets", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--connections", type=int, default=1024)
    parser.add_argument("--only", choices=["internal", "seamless"],
                        help="one side only (to profile it)")
    args = parser.parse_args()
    import uvloop  # the loop ``livetable serve`` runs on

    print(json.dumps(uvloop.run(run(args.players, args.bets, args.rounds, args.latency_ms,
                                    args.connections,
                                    [args.only] if args.only else ["internal", "seamless"])),
                     indent=1))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
