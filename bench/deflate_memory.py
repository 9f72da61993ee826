"""What permessage-deflate costs a connection: ``livetable serve``'s RSS and CPU with N
clients that offer it (``on``, as browsers and the ``websockets`` client do) or do not.

    .venv/bin/python bench/deflate_memory.py 1000 on
    .venv/bin/python bench/deflate_memory.py 1000 off

Prints one JSON line: the server's RSS per connection after every welcome, and its CPU
(every thread) per ``ping`` when every client sends ten. The server declines the
extension now, so both print about the same; run against a checkout before that change
for the browsers' case as it was.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parents[1]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_s(pid: int) -> float:
    tasks = Path(f"/proc/{pid}/task")
    return sum(int((t / "schedstat").read_text().split()[0]) for t in tasks.iterdir()) / 1e9


async def drain(ws: ClientConnection) -> None:
    try:
        async for _ in ws:
            pass
    except Exception:  # the server stopping: nothing to read any more
        return


async def main(n: int, compression: str) -> dict[str, object]:
    port = 18000 + os.getpid() % 1000
    env = dict(os.environ, LIVETABLE_DATA_DIR=tempfile.mkdtemp(prefix="deflate-bench-"),
               LIVETABLE_GUESTS_PER_MINUTE="0", LIVETABLE_CONNECTIONS_PER_ADDRESS="100000")
    server = subprocess.Popen([str(Path(sys.executable).with_name("livetable")), "serve",
                               "--port", str(port), "--betting-seconds", "600",
                               "--log-level", "warning"], env=env,
                              stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1)
                break
            except OSError:
                await asyncio.sleep(0.2)
        await asyncio.sleep(1)
        before = rss_kb(server.pid)
        conns = []
        for _ in range(n):
            ws = await connect(f"ws://127.0.0.1:{port}/ws", max_queue=None,
                               compression="deflate" if compression == "on" else None)
            await ws.send(json.dumps({"type": "hello", "v": 1, "table": "t1"}))
            conns.append(ws)
        for ws in conns:
            while json.loads(await ws.recv())["type"] != "welcome":
                pass
        await asyncio.sleep(1)
        after = rss_kb(server.pid)
        readers = [asyncio.create_task(drain(ws)) for ws in conns]
        start = cpu_s(server.pid)
        for k in range(10):
            for ws in conns:
                await ws.send(json.dumps({"type": "ping", "t": k}))
            await asyncio.sleep(0.2)
        await asyncio.sleep(1)
        cpu = cpu_s(server.pid) - start
        for reader in readers:
            reader.cancel()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)
    return {"compression": compression, "connections": n,
            "rss_kb_per_connection": round((after - before) / n, 1),
            "server_cpu_us_per_ping": round(cpu * 1e6 / (10 * n), 1)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1]), sys.argv[2]))))
