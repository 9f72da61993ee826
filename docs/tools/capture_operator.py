"""Capture the examples of docs/operator.md from a real run.

    .venv/bin/python docs/tools/capture_operator.py      # writes docs/tools/operator.json
    .venv/bin/python docs/tools/check_examples.py docs/operator.md docs/tools/operator.json

It starts the reference operator (``livetable operator-demo``, every debit's ``ok`` lost at
a rate of one in two, so that rollbacks happen) and ``livetable serve --wallet seamless``,
launches a session, bets until one debit is answered ``ok`` and one is lost, lets the round
settle, and records the launch, the frames the player saw, every wallet call livetable
made (from the signed report, which keeps each request and answer) and the report itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "tools" / "operator.json"
sys.path.insert(0, str(ROOT))

from livetable.clock import now_ms  # noqa: E402
from livetable.operator import signatures  # noqa: E402

WALLET_SECRET, OPERATOR_SECRET = "wallet-secret", "operator-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(url: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def signed(url: str, body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    raw = json.dumps(body).encode()
    response = httpx.post(url, content=raw, headers=signatures.headers(
        OPERATOR_SECRET.encode(), raw, now_ms()))
    return body, response.json()


async def play(ws_url: str, token: str) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    async with connect(ws_url, proxy=None) as ws:

        async def until(kind: str, **fields: Any) -> dict[str, Any]:
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if frame["type"] == kind and all(frame.get(k) == v for k, v in fields.items()):
                    frames.append(frame)
                    return frame

        await ws.send(json.dumps({"type": "hello", "v": 1, "table": "t1", "token": token}))
        await until("welcome")
        opened = await until("round_opened")
        outcomes: set[str] = set()
        n = 0
        while outcomes != {"bet_accepted", "bet_rejected"} and n < 12:
            n += 1
            bet = {"type": "place_bet", "bet_id": f"b{n}", "round_id": opened["round_id"],
                   "spot": "P1", "amount": 100}
            await ws.send(json.dumps(bet))
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if frame.get("bet_id") == bet["bet_id"]:
                    if frame["type"] not in outcomes:
                        frames.append(bet)
                        frames.append(frame)
                    outcomes.add(frame["type"])
                    break
        await until("round_settled", round_id=opened["round_id"])
        await asyncio.sleep(1.5)  # the credit goes out
        await ws.send(json.dumps({"type": "get_balance"}))
        frames.append({"type": "get_balance"})
        await until("balance")
    return frames


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        op_port, lt_port = free_port(), free_port()
        exe = str(Path(sys.executable).with_name("livetable"))
        env = {**os.environ, "LIVETABLE_WALLET_SECRET": WALLET_SECRET,
               "LIVETABLE_OPERATOR_SECRET": OPERATOR_SECRET, "LIVETABLE_BETWEEN_ROUNDS": "1",
               "LIVETABLE_DEAL_INTERVAL": "0.02", "LIVETABLE_PUBLIC_URL": "https://live.example"}
        operator = subprocess.Popen([exe, "operator-demo", "--port", str(op_port),
                                     "--fault", "debit:lost=0.5", "--seed", "4"], env=env)
        server = subprocess.Popen(
            [exe, "serve", "--port", str(lt_port), "--data-dir", tmp, "--betting-seconds", "6",
             "--reveal-interval", "0.2", "--log-level", "warning", "--wallet", "seamless",
             "--wallet-url", f"http://127.0.0.1:{op_port}/wallet"], env=env)
        try:
            wait(f"http://127.0.0.1:{op_port}/state")
            wait(f"http://127.0.0.1:{lt_port}/readyz")
            base = f"http://127.0.0.1:{lt_port}"
            launch = signed(base + "/api/operator/sessions",
                            {"request_id": "8c1f0e2a-5b7d-4c1e-9f3a-launch-0001",
                             "player_id": "p-10442", "name": "Somchai", "currency": "THB",
                             "language": "th", "table": "t1"})
            frames = asyncio.run(play(f"ws://127.0.0.1:{lt_port}/ws", launch[1]["token"]))
            round_id = next(f["round_id"] for f in frames if f["type"] == "bet_accepted")
            time.sleep(2)
            report = signed(base + "/api/operator/wallet", {"round_id": round_id})
            calls = [{"method": c["method"], "request": c["request"],
                      "answer": json.loads(c["answer"]) if c["answer"].startswith("{")
                      else c["answer"]} for c in report[1]["calls"]]
        finally:
            server.terminate()
            operator.terminate()
            server.wait(10)
            operator.wait(10)
    # the shape check_examples.py reads: scenarios, each a transcript of JSON values
    capture = {"operator": {"transcript": [
        {"launch": {"request": launch[0], "response": launch[1]}}, *frames, *calls,
        {"report": {"request": report[0], "response": report[1]}}]}}
    OUT.write_text(json.dumps(capture, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}: {len(calls)} wallet calls, {len(frames)} frames")


if __name__ == "__main__":
    main()
