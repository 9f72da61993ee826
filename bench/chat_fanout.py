"""How long a table chat line takes to reach everyone at the table (embedded server).

A ``livetable serve`` of its own (auto mode: the table deals rounds meanwhile, as a live
table would), ``--viewers`` viewer websockets on table t1 and one dealer console. The
console sends ``--lines`` chat lines (dealers are not rate limited), one every
``--interval`` seconds; every viewer notes when each line reached it. The latency of a
line to a viewer is that moment minus the moment the console sent it (one process, one
monotonic clock). The viewers run in this process, so on a small machine their own work
is part of what is measured: read the numbers as an upper bound.

    .venv/bin/python bench/chat_fanout.py --viewers 500 --lines 40

Prints one JSON object: the settings, the latency summary (ms) and how many deliveries
were missing (should be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import free_port, raise_nofile, stop_process, summary_ms, wait_port

SECRET = "bench-chat-secret-0123456789abcdef"


def livetable() -> list[str]:
    exe = Path(sys.executable).with_name("livetable")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "livetable.cli"]


async def viewer(url: str, seen: dict[str, int], ready: asyncio.Event,
                 joined: list[int], total: int) -> ClientConnection:
    ws = await connect(url, max_queue=None)
    await ws.send(json.dumps({"type": "hello", "v": 1, "table": "t1"}))

    async def read() -> None:
        async for raw in ws:
            if '"type":"chat"' in str(raw):
                seen[json.loads(raw)["text"]] = time.monotonic_ns()
            elif '"type":"welcome"' in str(raw):
                joined[0] += 1
                if joined[0] == total:
                    ready.set()

    asyncio.get_running_loop().create_task(read())
    return ws


async def run(args: argparse.Namespace, port: int, data: Path) -> dict[str, object]:
    url = f"ws://127.0.0.1:{port}/ws"
    token = subprocess.run([*livetable(), "token", "--dealer", "--tables", "t1", "--player",
                            "bench-dealer", "--name", "Bench", "--data-dir", str(data)],
                           env={**os.environ, "LIVETABLE_SECRET": SECRET},
                           capture_output=True, text=True, check=True).stdout.strip()
    seen: list[dict[str, int]] = [{} for _ in range(args.viewers)]
    ready, joined = asyncio.Event(), [0]
    sockets = [await viewer(url, seen[i], ready, joined, args.viewers)
               for i in range(args.viewers)]
    await asyncio.wait_for(ready.wait(), 60)
    console = await connect(f"ws://127.0.0.1:{port}/ws/dealer")
    await console.send(json.dumps({"type": "hello", "v": 1, "table": "t1", "token": token}))
    sent: dict[str, int] = {}
    for i in range(args.lines):
        text = f"line {i}"
        sent[text] = time.monotonic_ns()
        await console.send(json.dumps({"type": "chat_send", "client_msg_id": f"m{i}",
                                       "text": text}))
        await asyncio.sleep(args.interval)
    await asyncio.sleep(2.0)  # the last lines' stragglers
    latencies = [got[text] - at for got in seen for text, at in sent.items() if text in got]
    missing = args.viewers * args.lines - len(latencies)
    for ws in [*sockets, console]:
        await ws.close()
    return {"viewers": args.viewers, "lines": args.lines, "interval_s": args.interval,
            "latency_ms": summary_ms(latencies), "missing": missing}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=500)
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.05)
    args = parser.parse_args()
    raise_nofile()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-chat-") as tmp:
        data = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LIVETABLE_")}
        # every viewer comes from one address: no per-address cap here
        env.update({"LIVETABLE_SECRET": SECRET, "LIVETABLE_CONNECTIONS_PER_ADDRESS": "0"})
        server = subprocess.Popen([*livetable(), "serve", "--port", str(port), "--data-dir",
                                   str(data), "--log-level", "warning"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            result = asyncio.run(run(args, port, data))
        finally:
            stop_process(server)
    print(json.dumps(result))
    return 0 if result["missing"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
