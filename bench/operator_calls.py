#!/usr/bin/env python3
"""CPU per wallet call of both ends: livetable's ``WalletClient`` and the reference operator.

    .venv/bin/python bench/operator_calls.py                     # 20,000 credits, 80 at once
    .venv/bin/python bench/operator_calls.py --calls 5000 --inflight 32

Why: a big round's close (``bench/run.py --only wallet-close``) is one ``credit`` per
player, and on this 2-core machine the server, the operator and the load generator share
the cores — the reference operator (``livetable operator-demo``) must cost little enough
that the bench measures livetable (docs/decisions.md#the-seamless-wallet-at-table-speed). This
measures each end's CPU per call on its
own, without the table: ``livetable operator-demo`` in a process of its own, answering at
once, and in this process one ``WalletClient`` (signed calls, the whole-call deadline, the
answer cap: the outbox's client) with ``--inflight`` calls at once over as many keep-alive
connections, ``--calls`` distinct credits after a warm-up of 2,000. Run it from the
checkout to measure: the operator is that checkout's ``python -m livetable.cli``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import cpu_seconds, free_port, stop_process, wait_port
from livetable.operator.client import WalletClient

SECRET = "operator-calls-bench"


def credit(i: int) -> bytes:
    return msgspec.json.encode({
        "tx_id": f"c-{os.getpid()}-{i}", "player_id": f"p{i % 5000}", "currency": "THB",
        "amount": 300, "table_id": "t1", "round_id": "t1.1.1", "debit_tx_ids": [f"d-{i}"],
        "bets": [{"bet_id": f"b{i}", "outcome": "win", "returned": 300}]})


async def measure(calls: int, inflight: int) -> dict[str, float]:
    port = free_port()
    operator = subprocess.Popen(
        [sys.executable, "-m", "livetable.cli", "operator-demo", "--port", str(port),
         "--secret", SECRET, "--initial-balance", str(10**9)],
        cwd=Path.cwd(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, timeout=30)
        client = WalletClient(f"http://127.0.0.1:{port}/wallet", SECRET.encode(),
                              timeout=5.0, connections=inflight)
        places = asyncio.Semaphore(inflight)
        refused = 0

        async def one(i: int) -> None:
            nonlocal refused
            async with places:
                if not (await client.call("credit", credit(i))).ok:
                    refused += 1

        await asyncio.gather(*(one(-1 - i) for i in range(2000)))  # warm-up
        mine, theirs, started = cpu_seconds(os.getpid()), cpu_seconds(operator.pid), \
            time.monotonic()
        await asyncio.gather(*(one(i) for i in range(calls)))
        mine = cpu_seconds(os.getpid()) - mine
        theirs = cpu_seconds(operator.pid) - theirs
        took = time.monotonic() - started
        await client.aclose()
        if refused:
            raise SystemExit(f"{refused} calls not answered ok")
        return {"calls_per_s": calls / took, "client_us": 1e6 * mine / calls,
                "operator_us": 1e6 * theirs / calls}
    finally:
        stop_process(operator)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--inflight", type=int, default=80)
    args = parser.parse_args()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # as livetable serve
        r = runner.run(measure(args.calls, args.inflight))
    print(f"{args.calls} credits, {args.inflight} in flight: {r['calls_per_s']:.0f} calls/s, "
          f"client {r['client_us']:.0f} µs/call, operator {r['operator_us']:.0f} µs/call")


if __name__ == "__main__":
    main()
