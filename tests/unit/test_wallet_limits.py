"""Wallet calls that cannot hang or flood livetable, against a wallet that misbehaves on
purpose: answers trickled a byte at a time, answers of 40 MB.

The reference operator (tests/unit/test_wallet.py's ``Rig``) is wrapped by a small ASGI
layer that takes over the calls a test picks and hands the rest on.
"""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from starlette.types import Receive, Scope, Send
from test_wallet import R1, T0, TABLE, Rig, credits_of

from livetable import protocol as p
from livetable.auth import Identity
from livetable.betting.slips import SlipRequest
from livetable.engine import OpenRound

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

#: (path, body) -> whether this call is the one to misbehave on
Pick = Callable[[str, dict[str, Any]], bool]
BOB = Identity(kind="player", id="bob", name="Bob", expires=2**40, currency="THB")
R2 = "t1.1.2"


class Misbehaving:
    """The reference operator, but the calls ``pick`` chooses get ``answer`` instead."""

    def __init__(self, operator: Any, pick: Pick,
                 answer: Callable[[Send, Receive], Awaitable[None]]) -> None:
        self.operator = operator
        self.state = operator.state
        self.pick = pick
        self.answer = answer
        self.taken = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.operator(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if not self.pick(scope["path"], msgspec.json.decode(body)):
            sent = False

            async def again() -> dict[str, Any]:
                nonlocal sent
                if sent:
                    return {"type": "http.disconnect"}
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self.operator(scope, again, send)
            return
        self.taken.set()
        await self.answer(send, receive)


def trickle(seconds_per_byte: float, body: bytes = b'{"status":"ok"}' + b" " * 60,
            ) -> Callable[[Send, Receive], Awaitable[None]]:
    """An answer whose headers come at once and whose body comes a byte at a time."""
    async def answer(send: Send, receive: Receive) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        for i in range(len(body)):
            await send({"type": "http.response.body", "body": body[i:i + 1],
                        "more_body": i + 1 < len(body)})
            await asyncio.sleep(seconds_per_byte)
    return answer


class Flood:
    """``{"status":"ok"}`` then 40 MB of spaces, in 64 KiB pieces; counts what was sent
    while the client was still connected (writes after it hung up go nowhere)."""

    SIZE = 40 * 1024 * 1024
    PIECE = b" " * 65536

    def __init__(self, declared: bool) -> None:
        self.declared = declared
        self.sent = 0

    async def __call__(self, send: Send, receive: Receive) -> None:
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        try:
            await self._flood(send, gone)
        finally:
            watcher.cancel()

    async def _flood(self, send: Send, gone: asyncio.Event) -> None:
        head = b'{"status":"ok","balance":1}'
        headers = [(b"content-type", b"application/json")]
        if self.declared:
            headers.append((b"content-length", str(len(head) + self.SIZE).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": head, "more_body": True})
        while self.sent < self.SIZE and not gone.is_set():
            await send({"type": "http.response.body", "body": self.PIECE, "more_body": True})
            self.sent += len(self.PIECE)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def debits(path: str, body: dict[str, Any]) -> bool:
    return path.endswith("/debit")


async def test_a_trickled_debit_ends_at_the_whole_call_deadline(tmp_path: Path) -> None:
    """A byte every 0.25 s never trips a per-read timeout; the call's deadline (2 s) ends
    it, the slip is refused and its debit rolled back."""
    rig = Rig(tmp_path, timeout=2.0)
    rig.operator = Misbehaving(rig.operator, debits, trickle(0.25))  # 75 bytes: ~19 s
    await rig.open_round()
    started = time.monotonic()
    answer = await rig.bet("b1")
    took = time.monotonic() - started
    assert isinstance(answer, p.BetRejected) and answer.code == "wallet_unavailable"
    assert took < 10, f"the debit took {took:.1f} s: the deadline is 2 s for the whole call"
    [debit] = [c for c in await rig.log.calls() if c.method == "debit"]
    assert debit.state == "unknown" and debit.answer == "timeout"
    await rig.wallet.sweep()  # the sweeper rolls back every unknown debit
    [debit] = [c for c in await rig.log.calls() if c.method == "debit"]
    assert debit.closed_by is not None  # its rollback is queued
    await rig.close()


async def _flooded(tmp_path: Path, declared: bool) -> None:
    flood = Flood(declared)
    rig = Rig(tmp_path, timeout=20.0)
    rig.operator = Misbehaving(rig.operator, debits, flood)
    await rig.open_round()
    tracemalloc.start()
    try:
        answer = await rig.bet("b1")
        _, peak = tracemalloc.get_traced_memory()
        sent = flood.sent
    finally:
        tracemalloc.stop()
    # an ok the client could not read whole is an unknown outcome: refused, rolled back
    assert isinstance(answer, p.BetRejected) and answer.code == "wallet_unavailable"
    [debit] = [c for c in await rig.log.calls() if c.method == "debit"]
    assert debit.state == "unknown" and "cap" in (debit.answer or ""), debit.answer
    assert sent < 8 * 1024 * 1024, f"the client took {sent:,} bytes of it"
    assert peak < 8 * 1024 * 1024, f"memory went up by {peak:,} bytes"
    await rig.close()


async def test_a_40_mb_answer_with_its_length_is_refused_unread(tmp_path: Path) -> None:
    await _flooded(tmp_path, declared=True)


async def test_a_40_mb_answer_without_a_length_is_read_no_further_than_the_cap(
        tmp_path: Path) -> None:
    await _flooded(tmp_path, declared=False)


async def test_a_trickling_credit_does_not_delay_another_players_credit(
        tmp_path: Path) -> None:
    """Alice's wallet answers her credit a byte every 0.5 s; Bob's credit of the next
    round is delivered meanwhile, not after hers."""
    rig = Rig(tmp_path, timeout=30.0)  # a deadline far away: only concurrency can help Bob
    misbehaving = Misbehaving(
        rig.operator, lambda path, body: path.endswith("/credit")
        and body["player_id"] == "alice", trickle(0.5))
    rig.operator = misbehaving
    await rig.open_round()
    await rig.store.ensure_player("bob", "Bob", 0, T0)
    assert isinstance(await rig.bet("b1"), p.BetAccepted)
    await rig.settle()
    rig.wallet.start()
    await asyncio.wait_for(misbehaving.taken.wait(), 10)  # Alice's credit is trickling
    await rig.store.commit_step(TABLE, b"{}", [], [OpenRound(
        table=TABLE, round_id=R2, shoe_id="t1.1", round_no=2, closes_at=T0 + 15_000,
        limits=p.Limits())], T0)
    slip = SlipRequest(player_id="bob", table=TABLE, slip_id=None, round_id=R2,
                       bets=(p.SlipBet(bet_id="b2", spot="P1", amount=100),))
    assert isinstance(await rig.wallet.place_slip(BOB, slip, T0, T0 + 16_000),
                      p.SlipAccepted)
    await rig.settle(R2)
    started = time.monotonic()
    while not credits_of(rig.books, "bob", R2):
        assert time.monotonic() - started < 8, "Bob's credit waited for Alice's"
        await asyncio.sleep(0.05)
    assert not credits_of(rig.books, "alice", R1)  # hers is still on its way
    await rig.close()
