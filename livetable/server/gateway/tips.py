"""Tips to the dealer: a ``tip`` from a player's connection to its answer, and the dealer
consoles told.

Judged in the order of livetable/betting/tips.py: here what the gateway knows (a player's
token, the bet rate a tip shares, tips on for the player's operator, the tip's id and
amount against its limits, the operator's standing at the table), then the session's
responsible-gaming limits (:class:`~.sessions.Sessions`), then the store — or the
operator's wallet with a seamless wallet — in one transaction. A fresh tip goes to every
gateway as a note on the table's channel with no public frame: only dealer consoles get
its ``tip_received``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import msgspec

from livetable import protocol as p
from livetable.auth import Identity
from livetable.betting.tips import TipAnswer, TipRefusal, TipRequest, precheck_tip
from livetable.bus import TableNote
from livetable.clock import now_ms
from livetable.metrics import Metrics
from livetable.server.gateway.chat import Chat
from livetable.server.gateway.client import Client
from livetable.server.gateway.feed import TableFeed
from livetable.server.gateway.players import OtherConnections, Players
from livetable.server.gateway.sessions import Sessions
from livetable.server.ratelimit import RateLimits
from livetable.store.base import Store, StoreUnavailable

if TYPE_CHECKING:  # the wallet's module is the operator's side, not needed to run without it
    from livetable.operator.tipping import WalletTips

log = logging.getLogger("livetable.gateway")


class Tips:
    """Players' tips to their table's dealer, to their answers (see the module docstring)."""

    def __init__(self, store: Store, metrics: Metrics, limits: RateLimits,
                 feeds: dict[str, TableFeed], sessions: Sessions, chat: Chat,
                 players: Players, wallet: WalletTips | None = None,
                 others: OtherConnections | None = None) -> None:
        self.store = store
        #: The player's other connections here, told the balance a tip taken left.
        self.others = others
        self.metrics = metrics
        self.limits = limits
        self.feeds = feeds
        self.sessions = sessions
        #: the dealer consoles are told through the chat's channel (its ``publish``)
        self.chat = chat
        #: what a tip may be (the same answer the welcome showed)
        self.players = players
        self.wallet = wallet

    def currency_of(self, identity: Identity) -> str | None:
        return self.wallet.currency_of(identity) if self.wallet is not None \
            else identity.currency

    async def tip(self, client: Client, command: p.Tip) -> None:
        answer = await self._take(client, command)
        if isinstance(answer, TipRefusal):
            self.metrics.tip(answer.code)
            client.send_message(answer.error(command.tip_id))
            return
        identity, table = client.identity, client.table
        assert identity is not None and table is not None
        currency = self.currency_of(identity)
        client.send_message(answer.accepted(currency))
        if answer.fresh:
            if self.others is not None:
                self.others.balance_moved(client)
            self.metrics.tip("accepted", answer.amount)
            frame = p.encode(p.TipReceived(table=table, sender=identity.name,
                                           amount=answer.amount, currency=currency,
                                           at=now_ms()))
            try:
                await self.chat.publish(TableNote(table=table, frame=b"", staff=frame))
            except StoreUnavailable as exc:  # the tip stands: only its news is lost
                log.warning("tip %s: the dealer consoles were not told: %s", answer.tip_id, exc)
                self.metrics.inc("livetable_tip_news_lost_total")

    async def _take(self, client: Client, command: p.Tip) -> TipAnswer:
        identity, table = client.identity, client.table
        if identity is None or table is None or not identity.is_player:
            return TipRefusal("not_a_player")
        if not self.limits.bets.take(identity.id):
            return TipRefusal("rate_limited")
        view = self.feeds[table].view()
        refused = precheck_tip(command.tip_id, command.amount,
                               self.players.limits_of(identity, view.limits))
        if refused is not None:
            return refused
        standing = self.sessions.refused(identity, table)
        if standing is not None:
            return TipRefusal.of(standing)
        tip = TipRequest(player_id=identity.id, table=table, tip_id=command.tip_id,
                         amount=command.amount, round_id=view.round_id)
        allowance = await self.sessions.tip_allowance(identity, tip, now_ms())
        if isinstance(allowance, TipRefusal):
            return allowance
        tip = msgspec.structs.replace(tip, allowance=allowance)
        answer: TipAnswer | None = None
        try:
            if self.wallet is not None:
                answer = await self.wallet.place_tip(identity, tip)
            else:
                answer = await self.store.place_tip(tip, now_ms())
        finally:  # counted when taken; its reservation released whatever happened
            await self.sessions.tipped(identity, tip, answer)
        return answer
