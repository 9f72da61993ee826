"""A bench-only server process: one of three websocket fan-out servers, driven over stdin.

    python -m bench.fanout_server --kind livetable|ws|sio|uvicorn|websockets|picows --port P
                                  [--data-dir D] [--redis-url URL]

* ``livetable`` — livetable's own app (``create_app`` with :class:`Services`: SQLite store,
  in-process bus, gateway) on uvicorn, exactly as ``livetable serve`` runs it, with its one
  table in *manual* mode so the game itself emits nothing. Synthetic table events are
  published through ``services.bus`` as :class:`TableBatch` frames, so they take the
  gateway's real path (``Gateway.deliver`` → ``Client.send`` → the writer task per
  connection). This isolates fan-out from the game's timing.
* ``ws`` — a bare ``websockets`` server (its asyncio API) sending with
  ``websockets.broadcast``: about the least work Python can do per frame.
* ``sio`` — python-socketio's ASGI server on uvicorn with ``AsyncRedisManager``: each emit
  goes through Redis pub/sub and back, as in a multi-process socket.io deployment.

Every event is the same JSON object (a ``hand_revealed`` with two extra fields: ``sent_ns``,
the server's wall clock just before it hands the event to its fan-out, and ``pad``); the
clients subtract ``sent_ns`` from their own receive time (one machine, one clock).

Control: one JSON command per stdin line, one JSON reply per command on stdout —
``publish {count, interval, pad}``, ``stop_publish``, ``info``, ``head``, ``profile_start``,
``profile_stop {path}``, ``quit``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec

from bench.common import raise_nofile, rss_bytes

TABLE = "t1"
#: The same small app on three transports (bench/transport_servers.py).
TRANSPORTS = ("uvicorn", "websockets", "picows")


def event(epoch: int, seq: int, pad: int) -> dict[str, Any]:
    """The bench event: a realistic ``hand_revealed`` with ``sent_ns`` stamped now."""
    return {
        "type": "hand_revealed", "table": TABLE, "epoch": epoch, "seq": seq,
        "sent_ns": time.time_ns(), "round_id": "t1.1.1", "hand": "P3", "cards": ["KH", "9D"],
        "value": "9", "points": 9, "label": "9 Points", "flush": False, "pair": False,
        "pad": "x" * pad,
    }


ENCODER = msgspec.json.Encoder()


class Bench:
    """What the three kinds have in common: the control loop and the publisher."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.loop = asyncio.get_running_loop()
        self.epoch = 1
        self.seq = 0
        self.published = 0
        self.publisher: asyncio.Task[None] | None = None
        self.profile: cProfile.Profile | None = None
        self.emit: Callable[[int, int], Awaitable[None]] = self._no_emit
        self.connections: Callable[[], int] = lambda: 0
        self.done = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    async def _no_emit(self, seq: int, pad: int) -> None:
        raise RuntimeError("no server")

    def reply(self, data: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(data) + "\n")
        sys.stdout.flush()

    def read_stdin(self) -> None:
        """A thread: stdin lines are handed to the event loop (which is never blocked)."""
        for line in sys.stdin:
            if line.strip():
                self.loop.call_soon_threadsafe(self.command, json.loads(line))
        self.loop.call_soon_threadsafe(self.done.set)

    def command(self, cmd: dict[str, Any]) -> None:
        task = self.loop.create_task(self._command(cmd))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _command(self, cmd: dict[str, Any]) -> None:
        ident = cmd.get("id")
        try:
            answer = await self._run(cmd)
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        self.reply({"id": ident, **answer})

    async def _run(self, cmd: dict[str, Any]) -> dict[str, Any]:
        name = cmd["cmd"]
        if name == "info":
            gc.collect()
            return {"pid": os.getpid(), "rss": rss_bytes(os.getpid()),
                    "connections": self.connections(), "epoch": self.epoch, "seq": self.seq}
        if name == "head":  # what info says of the table, without its gc.collect()
            return {"epoch": self.epoch, "seq": self.seq}
        if name == "publish":
            if self.publisher is not None and not self.publisher.done():
                raise RuntimeError("already publishing")
            first = self.seq + 1
            self.publisher = asyncio.create_task(
                self._publish(int(cmd["count"]), float(cmd["interval"]), int(cmd["pad"])))
            self.publisher.add_done_callback(self._published)
            if cmd.get("wait", True):
                await asyncio.shield(self.publisher)
            return {"first": first, "head": self.seq, "epoch": self.epoch}
        if name == "stop_publish":
            if self.publisher is not None:
                self.publisher.cancel()
                await asyncio.gather(self.publisher, return_exceptions=True)
            return {"head": self.seq, "epoch": self.epoch}
        if name == "gc":  # an experiment: what the cyclic GC costs during fan-out
            mode = cmd["mode"]
            if mode == "freeze":
                gc.collect()
                gc.freeze()
            elif mode == "disable":
                gc.disable()
            elif mode == "tune":  # freeze what exists, and collect the young far less often
                gc.collect()
                gc.freeze()
                gc.set_threshold(50_000, 20, 100)
            return {"gc": mode, "frozen": gc.get_freeze_count()}
        if name == "profile_start":
            self.profile = cProfile.Profile()
            self.profile.enable()  # the loop's own thread: the server's code runs here
            return {}
        if name == "profile_stop":
            assert self.profile is not None
            self.profile.disable()
            self.profile.dump_stats(cmd["path"])
            self.profile = None
            return {}
        if name == "quit":
            self.done.set()
            return {}
        raise ValueError(f"unknown command {name!r}")

    def _published(self, task: asyncio.Task[None]) -> None:
        """A publisher that failed says why, in the server's log (stderr)."""
        if not task.cancelled() and task.exception() is not None:
            import traceback

            traceback.print_exception(task.exception(), file=sys.stderr)
            sys.stderr.flush()

    async def _publish(self, count: int, interval: float, pad: int) -> None:
        # time.monotonic, not the loop's clock: uvloop's is cached per loop iteration, and a
        # stale reading at the start let the whole schedule go out at once
        start = time.monotonic()
        for i in range(count):
            delay = start + i * interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            self.seq += 1
            await self.emit(self.seq, pad)
            self.published += 1


# --- the three servers ----------------------------------------------------------------


async def run_livetable(bench: Bench, args: argparse.Namespace) -> None:
    import msgspec
    import uvicorn

    from livetable.bus import TableBatch
    from livetable.cli.serve import server_config
    from livetable.config import load_settings
    from livetable.server.app import create_app
    from livetable.services import Services

    # connections_per_address 0: the load generator's thousands come from two addresses
    settings = msgspec.structs.replace(load_settings(), host="127.0.0.1", port=args.port,
                                       data_dir=Path(args.data_dir), mode="manual",
                                       tables=1, redis_url=None, db=None,
                                       connections_per_address=0)
    services = Services(settings)
    app = create_app(settings, services)
    # exactly as `livetable serve` runs it: its garbage collector's timing, its guard, its
    # framed websocket (a bench server without them measured CPython's default GC)
    config = server_config(settings, services, app, "warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    feed = services.gateway.feeds[TABLE]
    bench.epoch, bench.seq = feed.epoch, feed.seq

    async def emit(seq: int, pad: int) -> None:
        feed = services.gateway.feeds[TABLE]
        frame = ENCODER.encode(event(feed.epoch, seq, pad))
        await services.bus.publish(TableBatch(table=TABLE, epoch=feed.epoch, seq=seq,
                                              frames=[(seq, frame)], snapshot=feed.snapshot))

    bench.emit = emit
    bench.connections = lambda: services.metrics.connections
    bench.reply({"ready": True, "pid": os.getpid(), "epoch": bench.epoch, "seq": bench.seq,
                 "secret": services.secret.decode()})
    await bench.done.wait()
    server.should_exit = True
    await serving


async def run_ws(bench: Bench, args: argparse.Namespace) -> None:
    from websockets.asyncio.server import ServerConnection, broadcast, serve

    async def handler(ws: ServerConnection) -> None:
        await ws.wait_closed()

    async with serve(handler, "127.0.0.1", args.port, backlog=2048, compression=None,
                     max_size=64 * 1024) as server:
        async def emit(seq: int, pad: int) -> None:
            broadcast(server.connections, ENCODER.encode(event(bench.epoch, seq, pad)).decode())

        bench.emit = emit
        bench.connections = lambda: len(server.connections)
        bench.reply({"ready": True, "pid": os.getpid(), "epoch": bench.epoch, "seq": bench.seq})
        await bench.done.wait()


async def run_sio(bench: Bench, args: argparse.Namespace) -> None:
    import socketio
    import uvicorn

    manager = socketio.AsyncRedisManager(args.redis_url)
    sio = socketio.AsyncServer(async_mode="asgi", client_manager=manager,
                               cors_allowed_origins="*")
    connected: set[str] = set()

    @sio.event  # type: ignore[untyped-decorator]  # socketio is untyped
    async def connect(sid: str, environ: dict[str, Any]) -> None:
        connected.add(sid)

    @sio.event  # type: ignore[untyped-decorator]  # socketio is untyped
    async def disconnect(sid: str, *args: Any) -> None:
        connected.discard(sid)

    app = socketio.ASGIApp(sio)
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, ws="websockets-sansio",
                            ws_max_size=64 * 1024, log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)

    async def emit(seq: int, pad: int) -> None:
        await sio.emit("hand_revealed", event(bench.epoch, seq, pad))

    bench.emit = emit
    bench.connections = lambda: len(connected)
    # the manager's listener subscribes lazily, on the first emit: do one before measuring
    await sio.emit("warmup", {})
    await asyncio.sleep(0.5)
    bench.reply({"ready": True, "pid": os.getpid(), "epoch": bench.epoch, "seq": bench.seq})
    await bench.done.wait()
    server.should_exit = True
    await serving


async def main(args: argparse.Namespace) -> None:
    bench = Bench(args)
    threading.Thread(target=bench.read_stdin, daemon=True).start()
    if args.kind in TRANSPORTS:
        from bench import transport_servers

        await getattr(transport_servers, f"run_{args.kind}")(bench, args.port)
        return
    run = {"livetable": run_livetable, "ws": run_ws, "sio": run_sio}[args.kind]
    await run(bench, args)


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=["livetable", "ws", "sio", *TRANSPORTS],
                        required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--redis-url", default="")
    args = parser.parse_args()
    raise_nofile()
    import uvloop

    uvloop.run(main(args))


if __name__ == "__main__":
    cli()
