"""Bet intake: a bet or a slip from a player's connection to its answer.

Checked here only for what the gateway knows (a player's token, the bet rate); the store
judges the rest in its batch (by :mod:`livetable.engine.bets`), or, in seamless mode, the
operator's wallet debits within the betting window. Each bet is judged by when its frame
arrived, not by when a busy server got to it.

Performance-tuned: no extra awaits, tasks or allocations per bet. :class:`Intake` holds
what taking a bet needs (the store, the operator's wallet in seamless mode, the bet rate,
the feeds for the seamless window) and nothing of the connection but what it is handed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from livetable import protocol as p
from livetable.config import Settings
from livetable.engine.bets import (
    BetRequest,
    Rejection,
    SlipRequest,
    bet_answer,
    precheck,
    rejected,
    slip_answer,
)
from livetable.server.gateway.client import Client
from livetable.server.gateway.feed import TableFeed
from livetable.server.metrics import Metrics
from livetable.server.ratelimit import RateLimits
from livetable.store.base import Store

if TYPE_CHECKING:  # the wallet's module is the operator's side, not needed to run without it
    from livetable.operator.seamless import SeamlessWallet

#: Bets and slips of one connection being taken at once (the read-ahead is 32 frames).
MAX_BETS_IN_FLIGHT = 32


class Intake:
    """Bets and slips from players' connections to their answers."""

    def __init__(self, settings: Settings, store: Store, metrics: Metrics, limits: RateLimits,
                 wallet: SeamlessWallet | None, feeds: dict[str, TableFeed]) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.limits = limits
        self.wallet = wallet
        self.feeds = feeds

    def _may_bet(self, client: Client) -> p.RejectionCode | None:
        """Why ``client`` may not bet now (a rejection code), or None."""
        identity = client.identity
        if identity is None or not identity.is_player:
            return "not_a_player"
        if not self.limits.bets.take(identity.id):
            return "rate_limited"
        return None

    async def place_bet(self, client: Client, bet: p.PlaceBet, arrived_at: int) -> None:
        refused = self._may_bet(client)
        if refused is not None:
            client.send_message(rejected(bet.bet_id, refused))
            self.metrics.bet(refused)
            return
        assert client.table is not None and client.identity is not None
        request = BetRequest(player_id=client.identity.id, table=client.table,
                             bet_id=bet.bet_id, round_id=bet.round_id, spot=bet.spot,
                             amount=bet.amount)
        # judged by when the bet reached us, not by when a busy server got to it (the
        # engine closes betting a grace period after closes_at for exactly these)
        if self.wallet is not None:
            answer = bet_answer(request, await self._place_seamless(
                client, request.as_slip(), arrived_at))
        else:
            answer = await self.store.place_bet(request, arrived_at)
        self.metrics.bet(answer.code if isinstance(answer, p.BetRejected) else "accepted")
        client.send_message(answer)

    async def place_bets(self, client: Client, slip: p.PlaceBets, arrived_at: int) -> None:
        refused = self._may_bet(client)
        if refused is not None:
            client.send_message(slip_answer(
                SlipRequest(player_id="", table="", slip_id=slip.slip_id, round_id="",
                            bets=()), Rejection(refused)))
            self.metrics.bet(refused)
            return
        assert client.table is not None and client.identity is not None
        request = SlipRequest(player_id=client.identity.id, table=client.table,
                              slip_id=slip.slip_id, round_id=slip.round_id,
                              bets=tuple(slip.bets))
        answer = slip_answer(request, await (
            self._place_seamless(client, request, arrived_at) if self.wallet is not None
            else self.store.place_slip(request, arrived_at)))
        if isinstance(answer, p.SlipRejected):
            self.metrics.bet(answer.code)
        else:
            for _ in answer.bets:
                self.metrics.bet("accepted")
        client.send_message(answer)

    async def _place_seamless(self, client: Client, slip: SlipRequest,
                              arrived_at: int) -> p.SlipAccepted | Rejection:
        """A slip paid by the operator's wallet: refused at once if it cannot be taken
        (no debit for a bet that cannot be), else debited within the betting window."""
        assert self.wallet is not None and client.identity is not None
        bad = precheck(slip)
        if bad is not None:
            return bad
        snap = self.feeds[slip.table].view()
        closes_at = snap.closes_at
        if snap.round_id != slip.round_id:
            refusal: Rejection | None = Rejection("unknown_round")
        elif snap.phase == "paused":
            refusal = Rejection("paused")
        elif snap.phase != "betting" or closes_at is None or arrived_at >= closes_at:
            refusal = Rejection("betting_closed")
        else:
            refusal = None
        if refusal is not None or closes_at is None:
            # a re-send of a slip sent before is answered as its first send was (an
            # accepted slip stays accepted after betting closed), not refused by the window
            again = await self.wallet.answer_again(slip, arrived_at)
            return again if again is not None else refusal or Rejection("betting_closed")
        window_end = closes_at + int(self.settings.close_grace * 1000)
        return await self.wallet.place_slip(client.identity, slip, arrived_at, window_end)
