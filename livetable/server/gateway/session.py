"""One connection's life: accept, hello, then the receive loop until it closes.

Every frame counts against the connection's frame budget (:attr:`Client.bucket`) before it
is decoded. Bets and slips are taken without waiting for the answer to the one before (at
most :data:`~livetable.server.gateway.intake.MAX_BETS_IN_FLIGHT` at once), so a burst
joins one store batch; other commands are answered in turn. A store outage is answered
``unavailable`` and the connection goes on; a bug closes it 1011.

These are methods of :class:`~livetable.server.gateway.Gateway`, bound there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

import msgspec
from starlette.websockets import WebSocket, WebSocketDisconnect

from livetable import protocol as p
from livetable.clock import now_ms
from livetable.server.framed_ws import ARRIVED_AT
from livetable.server.gateway.client import Client, Endpoint
from livetable.server.gateway.codes import (
    ANSWERED_STRIKES,
    CLOSE_HELLO_TIMEOUT,
    CLOSE_INTERNAL_ERROR,
    CLOSE_RATE_LIMITED,
    CLOSE_SERVICE_RESTART,
    CLOSE_TRY_AGAIN_LATER,
)
from livetable.server.gateway.intake import MAX_BETS_IN_FLIGHT
from livetable.store.base import StoreUnavailable

if TYPE_CHECKING:
    from livetable.server.gateway import Gateway

log = logging.getLogger("livetable.gateway")


async def serve(self: Gateway, ws: WebSocket, kind: Endpoint) -> None:
    if not self._origin_allowed(ws) or not self.accepting:
        self.metrics.inc("livetable_rejected_upgrades_total")
        await ws.close(code=1008 if self.accepting else CLOSE_SERVICE_RESTART)
        return
    await ws.accept()
    client = Client(ws, self, kind)
    self.clients.add(client)
    self.metrics.connections += 1
    try:
        await self._session(client)
    except WebSocketDisconnect:
        pass
    finally:
        self._forget(client)
        self.metrics.connections -= 1
        if not client.closed:
            client.closed = True
            client.ready.set()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            if client.writer is not None:
                await asyncio.wait_for(client.writer, 1.0)


def forget(self: Gateway, client: Client) -> None:
    if client.expiry is not None:
        client.expiry.cancel()
    self.clients.discard(client)
    if client.table and client.table in self.feeds:
        self.feeds[client.table].clients.discard(client)
    if client.identity is not None:
        others = self.players.get(client.identity.id)
        if others is not None:
            others.discard(client)
            if not others:
                del self.players[client.identity.id]


async def receive(self: Gateway, client: Client) -> str | None:
    """The next text frame; None (after an error frame) for a frame we refuse."""
    message = await client.ws.receive()
    client.arrived_at = message.get(ARRIVED_AT) or now_ms()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    self.metrics.frames_in += 1
    # Every frame counts against the rate, the bad ones too. A client that keeps
    # sending past it is answered a few times, then not at all, then closed.
    if not client.bucket.take():
        self.metrics.inc("livetable_rate_limited_total")
        client.strikes += 1
        if client.strikes >= self.settings.rate_strikes:
            self.metrics.inc("livetable_rate_limit_closes_total")
            client.close(CLOSE_RATE_LIMITED, "too many frames: slow down, then reconnect")
        elif client.strikes <= ANSWERED_STRIKES:
            client.send_message(p.Error(code="rate_limited", message="too many frames"))
        return None
    client.strikes = 0
    text = message.get("text")
    if text is None:
        client.send_message(p.Error(code="bad_frame", message="frames are JSON text"))
        return None
    limit = self.settings.max_frame  # in bytes, and a character may take up to 4
    if len(text) > limit or (not text.isascii() and len(text.encode()) > limit):
        client.send_message(p.Error(
            code="frame_too_large",
            message=f"frames are at most {self.settings.max_frame} bytes"))
        return None
    return str(text)


async def run(self: Gateway, client: Client) -> None:
    decoder = p.DEALER_DECODER if client.kind == "dealer" else p.PLAYER_DECODER
    try:
        hello = await asyncio.wait_for(self._hello(client, decoder),
                                       self.settings.hello_timeout)
    except TimeoutError:
        client.send_message(p.Error(code="hello_timeout",
                                    message="the first frame must be hello, within "
                                            f"{self.settings.hello_timeout:g} s"))
        client.close(CLOSE_HELLO_TIMEOUT)
        return
    if hello is None:
        return
    try:
        await self._welcome(client, hello)
    except WebSocketDisconnect:
        raise
    except StoreUnavailable as exc:
        log.warning("welcome failed: %s", exc)
        self.metrics.inc("livetable_unavailable_total")
        client.send_message(p.Error(code="unavailable",
                                    message="the service is unavailable; reconnect shortly"))
        client.close(CLOSE_TRY_AGAIN_LATER, "try again later")
        return
    except Exception:
        self._internal_error(client, "welcome")
        return
    if client.closed:
        return
    while not client.closed:
        text = await self._receive(client)
        if text is None:
            continue
        try:
            command = decoder.decode(text)
        except msgspec.DecodeError as exc:
            client.send_message(self._undecodable(client, text, exc))
            continue
        if isinstance(command, p.PlaceBet | p.PlaceBets):
            # Not awaited here: the connection's next frames are read (and stamped) at
            # once and join the same store batch, instead of each bet of a burst waiting
            # for the answer to the one before. Answers name their bet or slip.
            while len(client.bets_in_flight) >= MAX_BETS_IN_FLIGHT:
                await asyncio.wait(client.bets_in_flight,
                                   return_when=asyncio.FIRST_COMPLETED)
            task = asyncio.get_running_loop().create_task(
                self._answer(client, command, client.arrived_at))
            client.bets_in_flight.add(task)
            task.add_done_callback(client.bets_in_flight.discard)
            continue
        await self._answer(client, command, client.arrived_at)


async def answer(self: Gateway, client: Client, command: p.PlayerCommand | p.DealerCommand,
                 arrived_at: int) -> None:
    try:
        await self._handle(client, command, arrived_at)
    except WebSocketDisconnect:
        raise
    except StoreUnavailable as exc:  # the store is down or timed out: say so, keep going
        log.warning("%s failed: %s", type(command).__name__, exc)
        self.metrics.inc("livetable_unavailable_total")
        bet_id = command.bet_id if isinstance(command, p.PlaceBet) else None
        slip_id = command.slip_id if isinstance(command, p.PlaceBets) else None
        client.send_message(p.Error(
            code="unavailable", bet_id=bet_id, slip_id=slip_id,
            message="the service could not complete this request; retry it"
            + (f" (bet {bet_id} is taken at most once: resend the same bet_id)"
               if bet_id else "")
            + (f" (slip {slip_id} is taken at most once: resend the same slip)"
               if slip_id else "")))
    except Exception:
        self._internal_error(client, type(command).__name__)


def internal_error(self: Gateway, client: Client, what: str) -> None:
    """A bug (not an outage): logged with its traceback, and the connection closed
    1011. Answered ``unavailable``, the client would resend the same request into the
    same bug for ever; a reconnect starts it from a clean welcome instead."""
    log.exception("%s failed: a bug, not an outage; closing the connection 1011", what)
    self.metrics.inc("livetable_internal_errors_total")
    client.close(CLOSE_INTERNAL_ERROR, "internal error")


def undecodable(client: Client, text: str, exc: msgspec.DecodeError) -> p.Error:
    """The error for a frame this endpoint cannot take: a dealer command sent on the
    players' endpoint says so, anything else says what msgspec found wrong."""
    if client.kind == "player":
        try:
            command = p.DEALER_DECODER.decode(text)
        except msgspec.DecodeError:
            pass
        else:
            if not isinstance(command, p.Hello | p.Ping):
                return p.Error(code="not_a_dealer", message="dealer commands are taken "
                               "only on /ws/dealer, with a dealer token")
    return p.Error(code="bad_frame", message=str(exc))
