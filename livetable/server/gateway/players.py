"""A player's account as the gateway shows it: created at the first hello, its balance.

With a seamless wallet the operator holds the money: the account here starts at 0 and the
balance shown is the operator's (asked each time). Otherwise the ledger's. The welcome and
``get_balance`` both show a player through :class:`Players`, so they cannot disagree.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from livetable import protocol as p
from livetable.auth import Identity
from livetable.betting.tips import TIPS_ON, TipPolicy, tip_limits
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.server.gateway.client import Client
from livetable.store.base import Store, StoreUnavailable

if TYPE_CHECKING:  # the wallet's module is the operator's side, not needed to run without it
    from livetable.operator.seamless import SeamlessWallet

log = logging.getLogger("livetable.gateway")


class Terms(Protocol):
    """A launched player's chips and table limits (the session currency's minor units),
    from their operator's registry entry (``operator.registry.Currency``)."""

    @property
    def chips(self) -> tuple[int, ...]: ...
    @property
    def limits(self) -> p.Limits: ...


#: The terms of a player's session, or None (no operator's currency: the table's limits).
TermsOf = Callable[[Identity], Terms | None]


def no_terms(identity: Identity) -> Terms | None:
    return None


#: A player's operator's word on tips to the dealer (the registry in force).
TipsOf = Callable[[Identity], TipPolicy]


def tips_on(identity: Identity) -> TipPolicy:
    """No registry to ask: every player may tip."""
    return TIPS_ON


class Players:
    def __init__(self, settings: Settings, store: Store,
                 wallet: SeamlessWallet | None, terms_of: TermsOf = no_terms,
                 tips_of: TipsOf = tips_on) -> None:
        self.settings = settings
        self.store = store
        self.wallet = wallet
        self.terms_of = terms_of
        self.tips_of = tips_of

    async def ensure(self, identity: Identity) -> p.PlayerView:
        """The player's account, created with the demo or the configured balance."""
        initial = (self.settings.guest_balance if identity.kind == "guest"
                   else self.settings.player_balance)
        if self.wallet is not None:  # the operator holds the money: none here
            initial = 0
        return await self.store.ensure_player(identity.id, identity.name, initial, now_ms())

    async def view(self, identity: Identity, known: p.PlayerView,
                   table_limits: p.Limits | None = None) -> p.PlayerView:
        """The player as the page shows it: with a seamless wallet, the operator's balance
        (0 if it does not answer in time; the page asks again); else the ledger's. With
        ``table_limits`` (the welcome's), what a tip to the dealer may be, if tips are on."""
        player = await self.store.player(identity.id) or known
        if self.wallet is not None:
            balance = await self.wallet.balance(identity)
            player.balance = 0 if balance is None else balance
            player.currency = self.wallet.currency_of(identity)
        else:
            player.currency = identity.currency
        terms = self.terms_of(identity)
        if terms is not None:  # the operator's chips and limits for the session's currency
            player.chips, player.limits = list(terms.chips), terms.limits
        if table_limits is not None:
            player.tips = self.limits_of(identity, table_limits)
        return player

    async def balance(self, identity: Identity) -> p.Balance:
        """The player's balance now, as ``get_balance`` answers it."""
        view = await self.view(identity, p.PlayerView(id=identity.id, name=identity.name,
                                                      balance=0))
        return p.Balance(balance=view.balance, currency=view.currency)

    def limits_of(self, identity: Identity, table_limits: p.Limits) -> p.TipLimits | None:
        """What a tip of ``identity`` may be at a table of ``table_limits`` (its operator's
        range, else its bet limits: the session's or the table's); None: tips are off."""
        terms = self.terms_of(identity)
        return tip_limits(self.tips_of(identity),
                          terms.limits if terms is not None else table_limits)


class OtherConnections:
    """A player's other connections hear their balance as soon as a bet or a tip of theirs
    is taken on one (another phone, another browser: a page's own tabs share it in the
    browser), not only at the round's results — here, and on the other gateways.

    The balance is read again (:meth:`Players.balance`), not copied from the answer: a
    repeated slip's answer repeats the balance of its first acceptance. Nothing is read for a
    player with one connection here, the usual case: a dictionary look-up a bet.

    With other gateways (``elsewhere``: the bus's ``balances_moved``), the players whose
    balance moved in one turn of the loop go to them in one message, whatever their number
    (a close of betting takes thousands of bets a second: one message a turn, not one a
    bet), and each gateway tells its own connections of those players
    (:meth:`moved_elsewhere`)."""

    def __init__(self, players: Players, connections: dict[str, set[Client]],
                 keep: Callable[[asyncio.Task[None]], None],
                 elsewhere: Callable[[list[str]], Awaitable[None]] | None = None) -> None:
        self.players = players
        self.connections = connections  # each player's connections here (feed.Tables')
        self.keep = keep
        self.elsewhere = elsewhere
        #: Players whose balance moved in this turn of the loop, for the other gateways.
        self._moved: set[str] = set()

    def balance_moved(self, client: Client) -> None:
        identity = client.identity
        if identity is None:
            return
        others = [c for c in self.connections.get(identity.id, ()) if c is not client]
        if others:
            self.keep(asyncio.get_running_loop().create_task(self._tell(identity, others)))
        if self.elsewhere is not None:
            if not self._moved:
                asyncio.get_running_loop().call_soon(self._tell_elsewhere)
            self._moved.add(identity.id)

    def moved_elsewhere(self, players: list[str]) -> None:
        """The bus's word that these players' balances moved on another gateway: their
        connections here hear it."""
        for player_id in players:
            here = self.connections.get(player_id)  # none for nearly every player named
            if not here:
                continue
            clients = list(here)
            identity = clients[0].identity
            if identity is not None:
                self.keep(asyncio.get_running_loop().create_task(
                    self._tell(identity, clients)))

    def _tell_elsewhere(self) -> None:
        players, self._moved = sorted(self._moved), set()
        self.keep(asyncio.get_running_loop().create_task(self._publish(players)))

    async def _publish(self, players: list[str]) -> None:
        assert self.elsewhere is not None
        try:
            await self.elsewhere(players)
        except StoreUnavailable as exc:  # they hear it at the results, or when they ask
            log.warning("%d players' connections on other gateways not told their "
                        "balance: %s", len(players), exc)

    async def _tell(self, identity: Identity, others: list[Client]) -> None:
        try:
            frame = await self.players.balance(identity)
        except StoreUnavailable as exc:  # they hear it at the results, or when they ask
            log.warning("player %s: other connections not told the balance: %s",
                        identity.id, exc)
            return
        for other in others:
            other.send_message(frame)
