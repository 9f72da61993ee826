"""The gateway: websocket connections, fan-out, resume, and bet intake.

A gateway holds no table state of its own making: per table, what the bus told it last
(:class:`TableFeed`), fanned out to the connections (:class:`Client`) watching that table.

The :class:`Gateway` composes objects that each keep their own state behind a narrow
interface; none of them knows the gateway (a :class:`Client` knows only its
:class:`~.client.Host`):

- :mod:`.feed` — :class:`TableFeed` per table (the snapshot, the head, the ring of recent
  frames) and :class:`~.feed.Tables`: the feeds, who watches each, each player's
  connections;
- :mod:`.client` — :class:`Client` per connection: its send queue, direct writes, writer
  task;
- :mod:`.session` — :class:`~.session.Session` per connection: the receive loop and its
  frame budget, outages told from bugs;
- :mod:`.hello` — :class:`~.hello.Admission`: the origin check, hello, the welcome and
  resume;
- :mod:`.players` — :class:`~.players.Players`: a player's account and balance as shown;
- :mod:`.commands` — :class:`~.commands.Commands`: every command after the hello, to its
  answer (ping, balance, the Bet Record, the dealer's commands);
- :mod:`.intake` — :class:`~.intake.Intake`: bets and slips, to their answers;
- :mod:`.sessions` — :class:`~.sessions.Sessions`: operators' sessions (an ended one
  closed, their limits applied, their figures counted, their reality checks timed);
- :mod:`.chat` — :class:`~.chat.Chat`: the table chat and the presenter (not table
  events: notes on the table's channel, kept in a :class:`~livetable.server.chatroom.ChatRoom`);
- :mod:`.tips` — :class:`~.tips.Tips`: tips to the dealer, to their answers and to the
  dealer consoles;
- :mod:`.delivery` — :class:`~.delivery.Delivery`: table steps from the bus fanned out,
  private results, resync, repair, heartbeats;
- :mod:`.codes` — the websocket close codes.

A bet: ``Session`` → ``Commands`` → ``Intake`` → the store, and its answer back through the
``Client``; a table step: the bus → ``Delivery`` → each ``Client``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.websockets import WebSocket, WebSocketDisconnect

from livetable.bus import SessionEnd, TableBatch
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.chatroom import ChatRoom, MemoryChatRoom
from livetable.server.gateway.admission import Admission
from livetable.server.gateway.chat import Chat
from livetable.server.gateway.client import Client, Endpoint
from livetable.server.gateway.codes import (
    ANSWERED_STRIKES,
    CLOSE_FORBIDDEN,
    CLOSE_HELLO_TIMEOUT,
    CLOSE_INTERNAL_ERROR,
    CLOSE_PROTOCOL,
    CLOSE_RATE_LIMITED,
    CLOSE_RESYNC,
    CLOSE_SERVICE_RESTART,
    CLOSE_TOO_SLOW,
    CLOSE_TRY_AGAIN_LATER,
    CLOSE_UNAUTHORIZED,
    CLOSE_UNKNOWN_TABLE,
)
from livetable.server.gateway.commands import Commands, Execute
from livetable.server.gateway.connection import Session
from livetable.server.gateway.delivery import Census, Delivery
from livetable.server.gateway.feed import TableFeed, Tables
from livetable.server.gateway.intake import MAX_BETS_IN_FLIGHT, Intake
from livetable.server.gateway.players import (
    OtherConnections,
    Players,
    TermsOf,
    TipsOf,
    no_terms,
    tips_on,
)
from livetable.server.gateway.sessions import (
    Announce,
    Sessions,
    Standing,
    close_ended,
    every_table,
)
from livetable.server.gateway.tips import Tips
from livetable.server.ratelimit import RateLimits
from livetable.store.base import Store

if TYPE_CHECKING:
    from livetable.operator.seamless import SeamlessWallet

__all__ = [
    "ANSWERED_STRIKES", "CLOSE_FORBIDDEN", "CLOSE_HELLO_TIMEOUT", "CLOSE_INTERNAL_ERROR",
    "CLOSE_PROTOCOL", "CLOSE_RATE_LIMITED", "CLOSE_RESYNC", "CLOSE_SERVICE_RESTART",
    "CLOSE_TOO_SLOW", "CLOSE_TRY_AGAIN_LATER", "CLOSE_UNAUTHORIZED", "CLOSE_UNKNOWN_TABLE",
    "MAX_BETS_IN_FLIGHT", "Client", "Endpoint", "Execute", "Gateway", "TableFeed",
]


class Gateway:
    """The websockets of one process and the tables they watch (see the module docstring).

    ``feeds`` and ``players`` are :class:`~.feed.Tables`' own, shared for reading (the HTTP
    API lists the tables from them); :meth:`deliver` is the bus's callback for table
    steps, :meth:`end_session` for ended sessions.
    """

    def __init__(self, settings: Settings, store: Store, execute: Execute, metrics: Metrics,
                 secret: bytes, wallet: SeamlessWallet | None = None,
                 announce: Announce | None = None, *,
                 chat_room: ChatRoom | None = None, census: Census | None = None,
                 terms_of: TermsOf = no_terms, standing: Standing = every_table,
                 tips_of: TipsOf = tips_on,
                 balances: Callable[[list[str]], Awaitable[None]] | None = None) -> None:
        """``announce`` tells every gateway that a session ended (the bus's
        ``end_session``); without it, only this one hears. ``census`` counts the
        players online on the other gateways (the bus's ``watchers_elsewhere``); without
        it, this gateway's connections are all there are. ``terms_of``: a launched
        player's chips and limits (their operator's, for the session's currency);
        ``tips_of``: their operator's word on tips to the dealer. ``balances`` tells the
        other gateways whose balances moved here (the bus's ``balances_moved``; the bus
        calls :attr:`others`' ``moved_elsewhere`` with theirs)."""
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.limits = RateLimits(
            bets_per_second=settings.player_frames_per_second,
            bet_record=settings.bet_record_rate, api=settings.api_rate,
            guests_per_minute=settings.guests_per_minute)
        self.tables = Tables()
        self.feeds = self.tables.feeds
        self.players = self.tables.players
        self.clients: set[Client] = set()
        self.accepting = True
        self._tasks: set[asyncio.Task[None]] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        self._census = census
        self._counting: asyncio.Task[None] | None = None
        players = Players(settings, store, wallet, terms_of, tips_of)
        self.delivery = Delivery(settings, store, metrics, self.tables, self.keep)
        self.sessions = Sessions(store, announce or self._announce_here, self.keep,
                                 standing)
        self.chat = Chat(settings, chat_room or MemoryChatRoom(), self.tables, metrics)
        self.admission = Admission(settings, secret, store, metrics, self.tables, players,
                                   self.sessions, self.chat)
        self.others = others = OtherConnections(players, self.tables.players, self.keep,
                                                balances)
        intake = Intake(settings, store, metrics, self.limits, wallet, self.tables.feeds,
                        self.sessions, terms_of, others)
        tip_wallet = None
        if wallet is not None:  # the operator's side, imported only with its wallet
            from livetable.operator.tipping import WalletTips

            tip_wallet = WalletTips(wallet)
        self.tips = Tips(store, metrics, self.limits, self.tables.feeds, self.sessions,
                         self.chat, players, tip_wallet, others)
        self.commands = Commands(store, self.limits, execute, secret, intake, players,
                                 self.tables.feeds, self.sessions, self.chat, self.tips)

    def deliver(self, batch: TableBatch) -> None:
        """A step from the bus: fanned out, and its settlements counted for the sessions
        with limits whose bets this gateway took."""
        self.delivery.deliver(batch)
        if batch.private:
            self.sessions.settled(batch.private)

    def end_session(self, end: SessionEnd) -> None:
        """A session ended (the bus's callback): every connection of it here gets
        ``session_ended`` and closes 4002, at once."""
        self.sessions.ended(end.session_id)
        for client in list(self.clients):
            identity = client.identity
            if identity is not None and identity.session == end.session_id:
                close_ended(client, end.reason)

    async def recheck_sessions(self) -> None:
        """Close the connections of sessions the store says ended (after the bus lost
        messages: an end announced meanwhile did not reach this gateway)."""
        sids = {c.identity.session for c in self.clients
                if c.identity is not None and c.identity.session is not None}
        for sid in sids:
            record = await self.store.session(sid)
            if record is not None and record.ended_at is not None:
                self.end_session(SessionEnd(session_id=sid, reason=record.reason or ""))

    async def recheck_standing(self) -> None:
        """The registry was reloaded: the connections of an operator removed end their
        sessions, those at a table their operator no longer offers are closed."""
        for client in list(self.clients):
            identity = client.identity
            if identity is not None and client.table is not None and not client.closed:
                await self.sessions.stands(client, identity, client.table)

    async def _announce_here(self, end: SessionEnd) -> None:
        self.end_session(end)

    def keep(self, task: asyncio.Task[None]) -> None:
        """Hold a reference to ``task`` until it is done (asyncio keeps only a weak one)."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def start(self) -> None:
        """Start sending heartbeats (none when ``settings.heartbeat`` is 0) — the
        presence frames go with them — and counting the players online elsewhere."""
        loop = asyncio.get_running_loop()
        if self.settings.heartbeat > 0 and self._heartbeat is None:
            self._heartbeat = loop.create_task(self.delivery.heartbeats())
        if self._census is not None and self._counting is None:
            self._counting = loop.create_task(self.delivery.census(self._census))

    def tables_json(self) -> bytes:
        return b'{"tables":[' + b",".join(f.snapshot for f in self.feeds.values()) + b"]}"

    async def shutdown(self, code: int = CLOSE_SERVICE_RESTART) -> None:
        """Graceful stop: close every websocket with 1012 so clients resume elsewhere."""
        self.accepting = False
        for task in (self._heartbeat, self._counting):
            if task is not None:
                task.cancel()
        self._heartbeat = self._counting = None
        for client in list(self.clients):
            client.close(code, "server restarting")
        await asyncio.sleep(0)

    async def serve(self, ws: WebSocket, kind: Endpoint) -> None:
        """One websocket, from its upgrade to its close."""
        if not self.admission.origin_allowed(ws) or not self.accepting:
            self.metrics.inc("livetable_rejected_upgrades_total")
            await ws.close(code=1008 if self.accepting else CLOSE_SERVICE_RESTART)
            return
        await ws.accept()
        client = Client(ws, self, kind)
        self.clients.add(client)
        self.metrics.connections += 1
        try:
            await Session(client, self.settings, self.metrics, self.admission,
                          self.commands).run()
        except WebSocketDisconnect:
            pass
        finally:
            if client.charge_frames is not None:  # the session's budget goes with it
                client.charge_frames(None)
            self._forget(client)
            self.metrics.connections -= 1
            if not client.closed:
                client.gone()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                if client.writer is not None:
                    await asyncio.wait_for(client.writer, 1.0)

    def _forget(self, client: Client) -> None:
        if client.expiry is not None:
            client.expiry.cancel()
        self.clients.discard(client)
        self.tables.leave(client)
        self.sessions.leave(client)
