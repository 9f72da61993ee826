#!/usr/bin/env python3
"""Which async HTTP client the seamless wallet uses: CPU per call, measured, not guessed.

    .venv/bin/python bench/http_clients.py                 # every client, twice each
    .venv/bin/python bench/http_clients.py --calls 3000 --inflight 200 --delay-ms 20

Why a bench of its own: a seamless bet costs one wallet call, and at the close of betting
hundreds of them are in flight at once, so the client's CPU per call at that concurrency
is the floor of a seamless bet's cost. What it measures, per client:

* a minimal keep-alive server in a process of its own (HTTP/1.1, and HTTP/2 with prior
  knowledge for the clients that speak it), answering every POST a small JSON body after
  ``--delay-ms`` (so that ``--inflight`` calls really are in flight at once);
* the client in a fresh process of its own: ``--inflight`` tasks share one client whose
  pool holds ``--connections`` keep-alive connections, each task posting a signed-size
  body and reading the whole answer, ``--calls`` in all after a warm-up;
* the client process's CPU (user + system, every thread: the Rust- and libcurl-based
  clients do their work on threads of their own) divided by the calls.

Clients run alternately, ``--rounds`` times each, so a noisy neighbour on the machine hits
every client alike. The result is a markdown table (docs/benchmarks.md keeps one). The
clients other than livetable's own, aiohttp and httpx are the ``bench-http`` extra
(``.venv/bin/pip install -e '.[bench-http]'``); one not installed is reported as such.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BODY = json.dumps({"tx_id": "d-" + "0" * 32, "player_id": "p-0001", "currency": "THB",
                   "amount": 200, "table_id": "t1", "round_id": "t1.1.1",
                   "bets": [{"bet_id": "b1", "spot": "P1", "amount": 100,
                             "deducted": 200}]}).encode()
ANSWER = b'{"status":"ok","balance":99800}'
HEADERS = {"content-type": "application/json",
           "x-livetable-signature": "sha256=" + "0" * 64}

# --- the server -------------------------------------------------------------------------


class _Http1(asyncio.Protocol):
    """Just enough HTTP/1.1: requests with a Content-Length, answered in order, kept
    alive."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            length = 0
            at = head.find(b"content-length:")
            if at >= 0:
                length = int(head[at + 15:].split(b"\r\n", 1)[0])
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            reply = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))
            if self.delay:
                self.loop.call_later(self.delay, self._write, reply)
            else:
                self._write(reply)

    def _write(self, reply: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


class _Http2(asyncio.Protocol):
    """HTTP/2 with prior knowledge (no TLS, no upgrade), through the ``h2`` library."""

    def __init__(self, delay: float) -> None:
        import h2.config
        import h2.connection

        self.delay = delay
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.conn.initiate_connection()
        transport.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        import h2.events

        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.DataReceived):
                self.conn.acknowledge_received_data(event.flow_controlled_length,
                                                    event.stream_id)
            if isinstance(event, h2.events.StreamEnded):
                if self.delay:
                    self.loop.call_later(self.delay, self._answer, event.stream_id)
                else:
                    self._answer(event.stream_id)
        self._flush()

    def _answer(self, stream_id: int) -> None:
        if self.transport is None:
            return
        self.conn.send_headers(stream_id, [(":status", "200"),
                                           ("content-type", "application/json"),
                                           ("content-length", str(len(ANSWER)))])
        self.conn.send_data(stream_id, ANSWER, end_stream=True)
        self._flush()

    def _flush(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(self.conn.data_to_send())

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve(port: int, delay_ms: float, http2: bool) -> None:
    loop = asyncio.get_running_loop()
    delay = delay_ms / 1000
    server = await loop.create_server(
        (lambda: _Http2(delay)) if http2 else (lambda: _Http1(delay)),
        "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


# --- the clients ------------------------------------------------------------------------

#: A client: given the URL and the pool size, an async context giving one call.
Call = Callable[[], Awaitable[bytes]]


async def _aiohttp(url: str, connections: int, run: Callable[[Call], Awaitable[None]]) -> None:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def call() -> bytes:
            async with session.post(url, data=BODY, headers=HEADERS) as response:
                return await response.read()
        await run(call)


async def _httpx(url: str, connections: int, run: Callable[[Call], Awaitable[None]],
                 http2: bool = False) -> None:
    import httpx

    limits = httpx.Limits(max_connections=connections,
                          max_keepalive_connections=connections)
    async with httpx.AsyncClient(limits=limits, http1=not http2, http2=http2,
                                 trust_env=False, timeout=30) as client:
        async def call() -> bytes:
            response = await client.post(url, content=BODY, headers=HEADERS)
            return response.content
        await run(call)


async def _httpx_h2(url: str, connections: int,
                    run: Callable[[Call], Awaitable[None]]) -> None:
    # HTTP/2 multiplexes: a few connections carry every call in flight
    await _httpx(url, max(1, connections // 50), run, http2=True)


async def _niquests(url: str, connections: int,
                    run: Callable[[Call], Awaitable[None]]) -> None:
    import niquests

    async with niquests.AsyncSession(pool_connections=1, pool_maxsize=connections,
                                     disable_http2=True, disable_http3=True) as session:
        async def call() -> bytes:
            response = await session.post(url, data=BODY, headers=HEADERS)
            return response.content or b""
        await run(call)


async def _curl_cffi(url: str, connections: int,
                     run: Callable[[Call], Awaitable[None]]) -> None:
    from curl_cffi.requests import AsyncSession

    async with AsyncSession(max_clients=connections) as session:
        async def call() -> bytes:
            response = await session.post(url, data=BODY, headers=HEADERS)
            return bytes(response.content)
        await run(call)


async def _pyreqwest(url: str, connections: int,
                     run: Callable[[Call], Awaitable[None]]) -> None:
    from pyreqwest.client import ClientBuilder

    async with ClientBuilder().max_connections(connections).build() as client:
        async def call() -> bytes:
            request = client.post(url).headers(HEADERS).body_bytes(BODY).build()
            response = await request.send()
            return bytes(await response.bytes())
        await run(call)


async def _aiosonic(url: str, connections: int,
                    run: Callable[[Call], Awaitable[None]]) -> None:
    import aiosonic
    from aiosonic.pools import PoolConfig

    client = aiosonic.HTTPClient(aiosonic.TCPConnector(
        pool_configs={":default": PoolConfig(size=connections)}))
    try:
        async def call() -> bytes:
            response = await client.post(url, data=BODY, headers=HEADERS)
            return bytes(await response.content())
        await run(call)
    finally:
        await client.connector.cleanup()


async def _livetable(url: str, connections: int,
                     run: Callable[[Call], Awaitable[None]]) -> None:
    from livetable.operator.client import WalletClient

    # the wallet's own client, its whole path but the answer's JSON decoding: the request
    # signed (an HMAC the other clients here do not pay), the pool, the limits, the
    # call's deadline
    client = WalletClient(url.removesuffix("debit"), b"s" * 32, timeout=30,
                          connections=connections)
    loop = asyncio.get_running_loop()

    async def call() -> bytes:
        _, content = await client._post("debit", BODY, loop.time() + 30)
        return content

    try:
        await run(call)
    finally:
        await client.aclose()


CLIENTS: dict[str, tuple[Callable[..., Awaitable[None]], bool]] = {
    # name: (runner, needs an HTTP/2 server)
    "livetable": (_livetable, False),
    "aiohttp": (_aiohttp, False),
    "httpx": (_httpx, False),
    "httpx-http2": (_httpx_h2, True),
    "niquests": (_niquests, False),
    "curl_cffi": (_curl_cffi, False),
    "pyreqwest": (_pyreqwest, False),
    "aiosonic": (_aiosonic, False),
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(name: str, url: str, calls: int, inflight: int,
                  connections: int) -> dict[str, Any]:
    """One client's CPU and wall time for ``calls`` calls, ``inflight`` at a time."""
    runner, _ = CLIENTS[name]
    out: dict[str, Any] = {}

    async def run(call: Call) -> None:
        async def worker(n: int) -> None:
            for _ in range(n):
                answer = await call()
                if answer != ANSWER:
                    raise RuntimeError(f"{name}: unexpected answer {answer[:80]!r}")

        async def burst(total: int) -> None:
            share, extra = divmod(total, inflight)
            await asyncio.gather(*(worker(share + (i < extra)) for i in range(inflight)))

        await burst(max(inflight * 2, calls // 10))  # warm-up: the pool opened, code paths hot
        cpu, wall = _cpu(), time.perf_counter()
        await burst(calls)
        out["cpu_us"] = (_cpu() - cpu) / calls * 1e6
        out["wall_s"] = time.perf_counter() - wall
        out["calls_per_s"] = calls / out["wall_s"]

    await runner(url, connections, run)
    return {"client": name, **out}


# --- the comparison ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the bench server on {port} did not start")


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    package = {"httpx-http2": "httpx", "curl_cffi": "curl-cffi",
               "livetable": "httptools"}.get(name, name)
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/http_clients.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--inflight", type=int, default=200)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--delay-ms", type=float, default=20.0,
                        help="the server's answer delay (keeps the calls in flight)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--serve", choices=["http1", "http2"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve(args.port, args.delay_ms, args.serve == "http2"))
        return 0
    if args.measure:
        url = f"http://127.0.0.1:{args.port}/wallet/debit"
        result = asyncio.run(measure(args.measure, url, args.calls, args.inflight,
                                     args.connections))
        print(json.dumps(result))
        return 0

    names = [n for n in args.clients.split(",") if n]
    unknown = [n for n in names if n not in CLIENTS]
    if unknown:
        parser.error(f"unknown client(s) {', '.join(unknown)}: one of {', '.join(CLIENTS)}")
    servers: dict[bool, tuple[subprocess.Popen[bytes], int]] = {}
    results: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    try:
        for http2 in sorted({CLIENTS[n][1] for n in names}):
            port = _free_port()
            servers[http2] = (subprocess.Popen(
                [sys.executable, __file__, "--serve", "http2" if http2 else "http1",
                 "--port", str(port), "--delay-ms", str(args.delay_ms)]), port)
            _wait_for(port)
        for _ in range(args.rounds):
            for name in names:
                port = servers[CLIENTS[name][1]][1]
                done = subprocess.run(
                    [sys.executable, __file__, "--measure", name, "--port", str(port),
                     "--calls", str(args.calls), "--inflight", str(args.inflight),
                     "--connections", str(args.connections)],
                    capture_output=True, text=True, timeout=600, check=False)
                if done.returncode != 0:
                    results[name].append({"error": done.stderr.strip().splitlines()[-1:]})
                else:
                    results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"{name}: {results[name][-1]}", file=sys.stderr, flush=True)
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(timeout=10)
    print(f"\n{args.calls} calls, {args.inflight} in flight over {args.connections} "
          f"keep-alive connections, server answer delay {args.delay_ms:g} ms; "
          f"CPU of the client's process per call, {args.rounds} runs each:\n")
    print("| client | version | CPU per call (µs), each run | calls/s |")
    print("|---|---|---|---|")
    for name in names:
        runs = results[name]
        cpu = " / ".join(f"{r['cpu_us']:,.0f}" if "cpu_us" in r else f"failed: {r['error']}"
                         for r in runs)
        rate = " / ".join(f"{r['calls_per_s']:,.0f}" for r in runs if "calls_per_s" in r)
        print(f"| {name} | {_version(name)} | {cpu} | {rate} |")
    return 0


if __name__ == "__main__":
    if os.environ.get("VIRTUAL_ENV") is None and (ROOT / ".venv").exists() \
            and Path(sys.prefix) != ROOT / ".venv":
        os.execv(str(ROOT / ".venv" / "bin" / "python"),
                 [str(ROOT / ".venv" / "bin" / "python"), *sys.argv])
    sys.exit(main())
