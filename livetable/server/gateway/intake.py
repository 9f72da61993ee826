"""Bet intake: a bet or a slip from a player's connection to its answer.

Checked here only for what the gateway knows (a player's token, the bet rate); the store
judges the rest in its batch (by :mod:`livetable.betting.slips`), or, in seamless mode, the
operator's wallet debits within the betting window. Each bet is judged by when its frame
arrived, not by when a busy server got to it.

Performance-tuned: no extra awaits, tasks or allocations per bet. :class:`Intake` holds
what taking a bet needs (the store, the operator's wallet in seamless mode, the bet rate,
the feeds for the seamless window) and nothing of the connection but what it is handed.

The answers are worded here, on the way out (:func:`bet_answer`, :func:`slip_answer`,
:func:`rejected`): the store judges a slip and hands back its ``slip_accepted`` or its
:class:`~livetable.betting.slips.Rejection`, and the gateway, which answers the player,
frames it as the request was sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from livetable import protocol as p
from livetable.betting.slips import (
    MAX_BET_ID,
    REJECTIONS,
    Rejection,
    SlipAnswer,
    SlipRequest,
    precheck,
    within_limits,
)
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.gateway.client import Client
from livetable.server.gateway.feed import TableFeed
from livetable.server.gateway.players import OtherConnections, TermsOf, no_terms
from livetable.server.gateway.sessions import Sessions
from livetable.server.ratelimit import RateLimits
from livetable.store.base import Store

if TYPE_CHECKING:  # the wallet's module is the operator's side, not needed to run without it
    from livetable.operator.seamless import SeamlessWallet

#: Bets and slips of one connection being taken at once (the read-ahead is 32 frames).
MAX_BETS_IN_FLIGHT = 32


class Intake:
    """Bets and slips from players' connections to their answers."""

    def __init__(self, settings: Settings, store: Store, metrics: Metrics, limits: RateLimits,
                 wallet: SeamlessWallet | None, feeds: dict[str, TableFeed],
                 sessions: Sessions, terms_of: TermsOf = no_terms,
                 others: OtherConnections | None = None) -> None:
        self.settings = settings
        #: The player's other connections here, told the balance a bet taken left.
        self.others = others
        #: A launched player's limits, from their operator's entry for the session's
        #: currency: the slip carries them and is judged by them, not by the table's.
        self.terms_of = terms_of
        self.store = store
        self.metrics = metrics
        self.limits = limits
        self.wallet = wallet
        self.feeds = feeds
        self.sessions = sessions

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
        # a slip of one (as ``BetRequest.as_slip`` makes it), judged by when the bet reached
        # us, not by when a busy server got to it (the engine closes betting a grace period
        # after closes_at for exactly these)
        slip = SlipRequest(player_id=client.identity.id, table=client.table, slip_id=None,
                           round_id=bet.round_id,
                           bets=(p.SlipBet(bet_id=bet.bet_id, spot=bet.spot,
                                           amount=bet.amount),))
        answer = bet_answer(bet.bet_id, await self._take(client, slip, arrived_at))
        self.metrics.bet(answer.code if isinstance(answer, p.BetRejected) else "accepted")
        client.send_message(answer)
        if not isinstance(answer, p.BetRejected):
            self._taken(client)

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
        answer = slip_answer(request, await self._take(client, request, arrived_at))
        if isinstance(answer, p.SlipRejected):
            self.metrics.bet(answer.code)
        else:
            for _ in answer.bets:
                self.metrics.bet("accepted")
        client.send_message(answer)
        if not isinstance(answer, p.SlipRejected):
            self._taken(client)

    def _taken(self, client: Client) -> None:
        """A bet of ``client``'s player was taken: their other connections hear the
        balance. A player with one connection on one gateway (nearly all) costs a look-up,
        no call."""
        assert client.identity is not None
        others = self.others
        if others is not None and (others.elsewhere is not None or len(
                others.connections.get(client.identity.id, ())) > 1):
            others.balance_moved(client)

    async def _take(self, client: Client, slip: SlipRequest,
                    arrived_at: int) -> p.SlipAccepted | Rejection:
        """The slip to the store or the operator's wallet, once its session's limits (if
        it has any) let it through: both wallets are held to them."""
        assert client.identity is not None
        identity = client.identity
        if identity.operator is not None:  # a launched player: their operator's terms
            terms = self.terms_of(identity)
            if terms is not None:
                slip = msgspec.structs.replace(slip, limits=terms.limits)
            refused = self.sessions.refused(identity, slip.table)
            if refused is not None:  # the operator's tables, as the registry has them now
                return refused
        if identity.session is not None:
            refused = await self.sessions.judge(identity, slip, arrived_at)
            if refused is not None:
                return refused
        try:
            if self.wallet is not None:
                answer = await self._place_seamless(client, slip, arrived_at)
            else:
                answer = await self.store.place_slip(slip, arrived_at)
        except BaseException:  # an outage answered unavailable: its stake is not held
            if identity.session is not None:
                self.sessions.release(identity, slip)
            raise
        if identity.session is not None:
            await self.sessions.taken(identity, slip, answer)
        return answer

    async def _place_seamless(self, client: Client, slip: SlipRequest,
                              arrived_at: int) -> p.SlipAccepted | Rejection:
        """A slip paid by the operator's wallet: refused at once if it cannot be taken
        (no debit for a bet that cannot be), else debited within the betting window."""
        assert self.wallet is not None and client.identity is not None
        snap = self.feeds[slip.table].view()
        # the slip's own shape, and its own bets against its limits: no debit for what
        # cannot be taken (the store judges again, with what the player has on the round
        # already)
        bad = precheck(slip)
        if bad is not None:
            return bad
        own = within_limits(slip, slip.limits or snap.limits)
        if isinstance(own, Rejection):
            return own
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


def slip_answer(slip: SlipRequest, answer: SlipAnswer) -> p.SlipAccepted | p.SlipRejected:
    """The frame a ``place_bets`` is answered with."""
    if isinstance(answer, p.SlipAccepted):
        return answer
    return p.SlipRejected(slip_id=slip.slip_id or "", code=answer.code, message=answer.message,
                          bet_id=answer.bet_id)


def bet_answer(bet_id: str, answer: SlipAnswer) -> p.BetAccepted | p.BetRejected:
    """The frame a ``place_bet`` (a slip of one) with ``bet_id`` is answered with, as it
    always was."""
    if isinstance(answer, p.SlipAccepted):
        taken = answer.bets[0]
        return p.BetAccepted(bet_id=taken.bet_id, round_id=answer.round_id, spot=taken.spot,
                             amount=taken.amount, deducted=taken.deducted,
                             balance=answer.balance)
    return p.BetRejected(bet_id=answer.bet_id if answer.bet_id is not None
                         else bet_id[:MAX_BET_ID], code=answer.code, message=answer.message)


def rejected(bet_id: str, code: p.RejectionCode, detail: str | None = None) -> p.BetRejected:
    """A ``bet_rejected`` the gateway answers itself (not signed in, rate limited)."""
    message = REJECTIONS[code] if detail is None else f"{REJECTIONS[code]} {detail}"
    return p.BetRejected(bet_id=bet_id, code=code, message=message)
