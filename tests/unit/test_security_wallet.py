"""A hostile operator's wallet tries to make livetable fetch a URL of its choosing (SSRF):
a debit or a balance answered ``302``/``307 Location: <an internal URL>``. livetable follows
no redirect (a 3xx is an unknown outcome, rolled back as any other), and what the wallet
answered never reaches a public endpoint (``/readyz`` shows the wallet's health).

The wallet is real HTTP on loopback (tests/asgi_server.py), and so is the internal URL it
points at, which records whether anyone fetched it."""

from __future__ import annotations

from pathlib import Path

import pytest
from asgi_server import served
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from livetable import protocol as p
from livetable.auth import Identity
from livetable.betting.slips import BetRequest
from livetable.config import Settings
from livetable.engine import OpenRound
from livetable.metrics import Metrics
from livetable.operator.client import WalletClient
from livetable.operator.health import FAILING_CALLS
from livetable.operator.log_sqlite import SQLiteWalletLog
from livetable.operator.seamless import SeamlessWallet
from livetable.server.gateway.intake import bet_answer
from livetable.store.sqlite import SQLiteStore

#: the loopback wallet answers after a pause (asyncio.sleep)
pytestmark = pytest.mark.sleeps

SECRET = b"wallet-secret"
T0 = 1_800_000_000_000
ALICE = Identity(kind="player", id="alice", name="Alice", expires=2**40, currency="THB")
#: What the wallet's redirect says in its body: it must not be shown publicly.
LEAK = "INTERNAL-ANSWER-TEXT-7f3a"


def hostile_wallet(status: int, fetched: list[str]) -> Starlette:
    """Every wallet call answered ``status`` to ``/internal`` on the same host, which
    records each request it gets (as an internal service would be reached)."""

    async def call(request: Request) -> Response:
        target = str(request.base_url).rstrip("/") + "/internal"
        return PlainTextResponse(f"moved to {target}: {LEAK}", status_code=status,
                                 headers={"location": target})

    async def internal(request: Request) -> Response:
        fetched.append(request.method)
        return PlainTextResponse(f"secret metrics {LEAK}")

    return Starlette(routes=[Route("/wallet/{method}", call, methods=["POST"]),
                             Route("/internal", internal, methods=["GET", "POST"])])


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_is_not_followed_and_is_an_unknown_outcome(
        tmp_path: Path, status: int) -> None:
    fetched: list[str] = []
    store = SQLiteStore(tmp_path / "lt.db")
    log = SQLiteWalletLog(tmp_path / "lt-wallet.db")
    async with served(hostile_wallet(status, fetched)) as base:
        url = base + "/wallet"
        settings = Settings(wallet="seamless", wallet_url=url, wallet_secret=SECRET,
                            wallet_timeout=2.0)
        client = WalletClient(url, SECRET, timeout=2.0, connections=2)
        wallet = SeamlessWallet(settings, store, log, client, Metrics(), clock=lambda: T0)
        try:
            await store.ensure_player("alice", "Alice", 0, T0)
            await store.commit_step("t1", b"{}", [], [OpenRound(
                table="t1", round_id="t1.1.1", shoe_id="t1.1", round_no=1,
                closes_at=T0 + 15_000, limits=p.Limits())], T0)
            reply = await client.call("balance", b'{"player_id":"alice"}')
            assert reply.status is None and reply.balance is None  # unknown
            for n in range(FAILING_CALLS):
                request = BetRequest(player_id="alice", table="t1", bet_id=f"b{n}",
                                     round_id="t1.1.1", spot="P1", amount=100)
                answer = bet_answer(request.bet_id, await wallet.place_slip(
                    ALICE, request.as_slip(), T0, T0 + 16_000))
                assert isinstance(answer, p.BetRejected), answer
                assert answer.code == "wallet_unavailable"
            assert fetched == []  # the internal URL was never fetched
            # each debit is an unknown outcome: the sweeper rolls it back, as any other
            assert {d.state for d in await log.open_debits(10)} == {"unknown"}
            # the wallet is down, and /readyz says so without the wallet's words
            health = wallet.health()
            assert health is not None and "degraded" in health
            assert LEAK not in health and "moved to" not in health, health
            assert f"http {status}" in health
        finally:
            await wallet.stop()
            await log.close()
            await store.close()
