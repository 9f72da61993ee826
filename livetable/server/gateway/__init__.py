"""The gateway: websocket connections, fan-out, resume, and bet intake.

A gateway holds no table state of its own making: per table, what the bus told it last
(:class:`TableFeed`), fanned out to the connections (:class:`Client`) watching that table.

The :class:`Gateway` is one object; what it does lives in one module per idea, each a set
of functions taking the gateway as ``self``, bound here as its methods (so a call costs what
a method call costs — the fan-out and bet paths are tuned):

- :mod:`.feed` — :class:`TableFeed`: the snapshot, the head, the ring of recent frames;
- :mod:`.client` — :class:`Client`: one connection's send queue, direct writes, writer task;
- :mod:`.codes` — the websocket close codes;
- :mod:`.delivery` — table steps from the bus fanned out, private results, resync, repair,
  heartbeats;
- :mod:`.hello` — the origin check, hello, the welcome and resume;
- :mod:`.session` — one connection's life: the receive loop and its frame budget;
- :mod:`.commands` — ping, balance, the Bet Record, the dealer's commands;
- :mod:`.intake` — bets and slips, to their answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from livetable import protocol as p
from livetable.config import Settings
from livetable.server.gateway import commands, delivery, hello, intake, session
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
from livetable.server.gateway.delivery import Repair
from livetable.server.gateway.feed import TableFeed
from livetable.server.gateway.intake import MAX_BETS_IN_FLIGHT
from livetable.server.metrics import Metrics
from livetable.server.ratelimit import RateLimits
from livetable.store.base import Store

if TYPE_CHECKING:
    from livetable.server.wallet import SeamlessWallet

__all__ = [
    "ANSWERED_STRIKES", "CLOSE_FORBIDDEN", "CLOSE_HELLO_TIMEOUT", "CLOSE_INTERNAL_ERROR",
    "CLOSE_PROTOCOL", "CLOSE_RATE_LIMITED", "CLOSE_RESYNC", "CLOSE_SERVICE_RESTART",
    "CLOSE_TOO_SLOW", "CLOSE_TRY_AGAIN_LATER", "CLOSE_UNAUTHORIZED", "CLOSE_UNKNOWN_TABLE",
    "MAX_BETS_IN_FLIGHT", "Client", "Endpoint", "Execute", "Gateway", "TableFeed",
]

Execute = Callable[[str, p.TableCommand], Awaitable[p.Ack | p.Error]]


class Gateway:
    """The websockets of one process and the tables they watch: its state is here, its
    behaviour in the modules bound below (see the module docstring)."""

    def __init__(self, settings: Settings, store: Store, execute: Execute, metrics: Metrics,
                 secret: bytes, wallet: SeamlessWallet | None = None) -> None:
        self.settings = settings
        #: The operator's wallet, in seamless mode (players' money is the operator's).
        self.wallet = wallet
        self.store = store
        self.execute = execute
        self.metrics = metrics
        self.secret = secret
        self.feeds: dict[str, TableFeed] = {}
        self.players: dict[str, set[Client]] = {}
        self.limits = RateLimits(
            bets_per_second=settings.player_frames_per_second,
            bet_record=settings.bet_record_rate, api=settings.api_rate,
            guests_per_minute=settings.guests_per_minute)
        self.clients: set[Client] = set()
        self.accepting = True
        self._tasks: set[asyncio.Task[None]] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        #: Per table repaired lately: the results sent since (see delivery.repair_private).
        self.repaired: dict[str, Repair] = {}

    def start(self) -> None:
        """Start sending heartbeats (none when ``settings.heartbeat`` is 0)."""
        if self.settings.heartbeat > 0 and self._heartbeat is None:
            self._heartbeat = asyncio.get_running_loop().create_task(self._heartbeats())

    def tables_json(self) -> bytes:
        return b'{"tables":[' + b",".join(f.snapshot for f in self.feeds.values()) + b"]}"

    async def shutdown(self, code: int = CLOSE_SERVICE_RESTART) -> None:
        """Graceful stop: close every websocket with 1012 so clients resume elsewhere."""
        self.accepting = False
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        for client in list(self.clients):
            client.close(code, "server restarting")
        await asyncio.sleep(0)


    # --- the bus side: delivery.py ---------------------------------------------------
    deliver = delivery.deliver
    _deliver_private = delivery.deliver_private
    _resync = delivery.resync
    _repair_private = delivery.repair_private
    _heartbeat_message = delivery.heartbeat_message
    _heartbeats = delivery.heartbeats

    # --- joining a table: hello.py ---------------------------------------------------
    _origin_allowed = hello.origin_allowed
    _hello = hello.read_hello
    _close_at_expiry = hello.close_at_expiry
    _welcome = hello.welcome
    _player_view = hello.player_view
    _plan_replay = hello.plan_replay
    _recent_results = hello.recent_results

    # --- a connection's life: session.py ---------------------------------------------
    serve = session.serve
    _forget = session.forget
    _receive = session.receive
    _session = session.run
    _answer = session.answer
    _internal_error = session.internal_error
    _undecodable = staticmethod(session.undecodable)

    # --- commands: commands.py -------------------------------------------------------
    _handle = commands.handle
    _approve = commands.approve
    _issue_approval = commands.issue_approval

    # --- bet intake: intake.py -------------------------------------------------------
    _may_bet = intake.may_bet
    _place_bet = intake.place_bet
    _place_bets = intake.place_bets
    _place_seamless = intake.place_seamless
