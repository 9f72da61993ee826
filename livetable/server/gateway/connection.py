"""One connection's life: accept, hello, then the receive loop until it closes.

Every frame counts against the connection's frame budget (:attr:`Session.bucket`) before it
is handled — pings, pongs and a fragmented message's every frame too, charged by the
protocol as they are read (:meth:`Session.spend`), though the app never sees them. Bets and
slips are taken without waiting for the answer to the one before (at most
:data:`~livetable.server.gateway.intake.MAX_BETS_IN_FLIGHT` at once), so a burst joins one
store batch — and, on uvicorn with :mod:`livetable.server.framed_ws`, are taken as their
frame is read, without the receive queue's hand-over (:meth:`Session.take_bet`); other
commands are answered in turn. A store outage is answered
``unavailable`` and the connection goes on; a bug closes it 1011.

:class:`Session` is one connection's reading side, one per connection: its frame budget,
its strikes, its bets in flight. It hands the hello to the
:class:`~livetable.server.gateway.admission.Admission` and every later command to the
:class:`~livetable.server.gateway.commands.Commands`; it writes only through its
:class:`~livetable.server.gateway.client.Client`.
"""

from __future__ import annotations

import asyncio
import logging

import msgspec
from starlette.websockets import WebSocketDisconnect

from livetable import protocol as p
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.framed_ws import ARRIVED_AT
from livetable.server.gateway.admission import Admission
from livetable.server.gateway.client import Client
from livetable.server.gateway.codes import (
    ANSWERED_STRIKES,
    CLOSE_HELLO_TIMEOUT,
    CLOSE_INTERNAL_ERROR,
    CLOSE_RATE_LIMITED,
    CLOSE_TRY_AGAIN_LATER,
)
from livetable.server.gateway.commands import Commands
from livetable.server.gateway.intake import MAX_BETS_IN_FLIGHT
from livetable.server.ratelimit import TokenBucket
from livetable.store.base import StoreUnavailable

log = logging.getLogger("livetable.gateway")


class Session:
    """One connection's life after its accept (see the module docstring)."""

    def __init__(self, client: Client, settings: Settings, metrics: Metrics,
                 admission: Admission, commands: Commands) -> None:
        self.client = client
        self.settings = settings
        self.metrics = metrics
        self.admission = admission
        self.commands = commands
        self.decoder: p.FrameDecoder[p.PlayerCommand] | p.FrameDecoder[p.DealerCommand] = (
            p.DEALER_DECODER if client.kind == "dealer" else p.PLAYER_DECODER)
        # a dealer's scanner reads cards in quick bursts: consoles get five times the rate
        rate = settings.frames_per_second * (5 if client.kind == "dealer" else 1)
        self.bucket = TokenBucket(rate, rate * 2)
        self.strikes = 0  # frames refused for rate since the last one taken
        self.arrived_at = 0  # when the last frame from this client arrived (epoch ms)
        self.bets_in_flight: set[asyncio.Task[None]] = set()
        self.waiting = False  # the command loop waits for the next frame
        if client.charge_frames is not None:  # pings, pongs, fragments: from now on
            client.charge_frames(self.spend)

    async def run(self) -> None:
        """The hello within its timeout, the welcome, then each command to its answer."""
        client = self.client
        try:  # a timeout, not wait_for: on 3.11 that is a task of its own per connection
            async with asyncio.timeout(self.settings.hello_timeout):
                hello = await self.read_hello()
        except TimeoutError:
            client.send_message(p.Error(code="hello_timeout",
                                        message="the first frame must be hello, within "
                                                f"{self.settings.hello_timeout:g} s"))
            client.close(CLOSE_HELLO_TIMEOUT)
            return
        if hello is None:
            return
        try:
            await self.admission.welcome(client, hello)
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
            self.internal_error("welcome")
            return
        if client.closed:
            return
        offer = client.offer_frames
        if offer is not None:
            offer(self.take_bet)
        try:
            await self.commands_until_closed()
        finally:
            if offer is not None:
                offer(None)

    async def commands_until_closed(self) -> None:
        client, decoder = self.client, self.decoder
        while not client.closed:
            self.waiting = True
            try:
                text = await self.receive()
            finally:
                self.waiting = False
            if text is None:
                continue
            try:
                command = decoder.decode(text)
            except msgspec.DecodeError as exc:
                client.send_message(self.undecodable(text, exc))
                continue
            if isinstance(command, p.PlaceBet | p.PlaceBets | p.Tip):
                # a tip too: a seamless wallet's debit may take seconds, and the bets sent
                # after it must not wait for it (its answer names it, as a bet's does)
                while len(self.bets_in_flight) >= MAX_BETS_IN_FLIGHT:
                    await asyncio.wait(self.bets_in_flight,
                                       return_when=asyncio.FIRST_COMPLETED)
                self.start_bet(command, self.arrived_at)
                continue
            await self.answer(command, self.arrived_at)

    def start_bet(self, command: p.PlaceBet | p.PlaceBets | p.Tip, arrived_at: int) -> None:
        """Take a bet or a slip without waiting for its answer: the connection's next
        frames are read (and stamped) at once and join the same store batch, instead of
        each bet of a burst waiting for the answer to the one before. Answers name their
        bet or slip."""
        task = asyncio.get_running_loop().create_task(self.answer(command, arrived_at))
        self.bets_in_flight.add(task)
        task.add_done_callback(self.bets_in_flight.discard)

    def take_bet(self, text: str, arrived_at: int) -> bool:
        """A bet taken as its frame is read (:data:`~livetable.server.framed_ws.SINK`):
        offered only while nothing read before it waits in the queue; taken only while
        this connection's loop is waiting for a frame, so nothing is answered out of
        turn. It passes the same checks as in :meth:`receive` and starts as in
        :meth:`commands_until_closed`, minus the queue's hand-over. Anything else — a
        command the loop must await, a frame that does not decode, one too large — is
        left to the loop (False), which does for it what it does for every frame."""
        if (not self.waiting or self.client.closed or len(text) > self.settings.max_frame
                or len(self.bets_in_flight) >= MAX_BETS_IN_FLIGHT):
            return False
        try:
            command = self.decoder.decode(text)
        except msgspec.DecodeError:
            return False
        if not isinstance(command, p.PlaceBet | p.PlaceBets):
            return False
        if self.admit(text) is not None:
            self.start_bet(command, arrived_at)
        return True

    async def read_hello(self) -> p.Hello | None:
        """The connection's hello, once the door let it in; None if it was closed instead."""
        client = self.client
        while True:
            text = await self.receive()
            if text is None:
                continue
            try:
                hello = self.decoder.decode(text)
            except msgspec.DecodeError as exc:
                client.send_message(p.Error(code="bad_frame", message=str(exc)))
                continue
            if not isinstance(hello, p.Hello):
                client.send_message(p.Error(code="hello_required",
                                            message="the first frame must be hello"))
                continue
            return hello if self.admission.admit(client, hello) else None

    async def receive(self) -> str | None:
        """The next text frame; None (after an error frame) for a frame we refuse."""
        message = await self.client.ws.receive()
        self.arrived_at = message.get(ARRIVED_AT) or now_ms()
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(message.get("code", 1000))
        return self.admit(message.get("text"))

    def within_budget(self) -> bool:
        """Take one frame from the budget: True if it was there. Every frame counts, the
        bad ones too. A client that keeps sending past it is answered a few times, then
        not at all, then closed."""
        self.metrics.frames_in += 1
        if self.bucket.take():
            self.strikes = 0
            return True
        self.metrics.inc("livetable_rate_limited_total")
        self.strikes += 1
        if self.strikes >= self.settings.rate_strikes:
            if not self.client.closed:
                self.metrics.inc("livetable_rate_limit_closes_total")
            self.client.close(CLOSE_RATE_LIMITED, "too many frames: slow down, then reconnect")
        elif self.strikes <= ANSWERED_STRIKES:
            self.client.send_message(p.Error(code="rate_limited", message="too many frames"))
        return False

    def spend(self, frames: int) -> None:
        """``frames`` pings, pongs or fragments read (framed_ws's BUDGET): charged as any
        frame is, and never answered otherwise."""
        for _ in range(frames):
            self.within_budget()

    def admit(self, text: str | None) -> str | None:
        """The frame's text if it is within the connection's budget and limits; else None,
        the client told why (or closed)."""
        if not self.within_budget():
            return None
        if text is None:
            self.client.send_message(p.Error(code="bad_frame", message="frames are JSON text"))
            return None
        limit = self.settings.max_frame  # in bytes, and a character may take up to 4
        if len(text) > limit or (not text.isascii() and len(text.encode()) > limit):
            self.client.send_message(p.Error(
                code="frame_too_large",
                message=f"frames are at most {self.settings.max_frame} bytes"))
            return None
        return str(text)

    async def answer(self, command: p.PlayerCommand | p.DealerCommand,
                     arrived_at: int) -> None:
        try:
            await self.commands.handle(self.client, command, arrived_at)
        except WebSocketDisconnect:
            raise
        except StoreUnavailable as exc:  # the store is down or timed out: say so, keep going
            log.warning("%s failed: %s", type(command).__name__, exc)
            self.metrics.inc("livetable_unavailable_total")
            bet_id = command.bet_id if isinstance(command, p.PlaceBet) else None
            slip_id = command.slip_id if isinstance(command, p.PlaceBets) else None
            tip_id = command.tip_id[:64] if isinstance(command, p.Tip) else None
            self.client.send_message(p.Error(
                code="unavailable", bet_id=bet_id, slip_id=slip_id, tip_id=tip_id,
                message="the service could not complete this request; retry it"
                + (f" (bet {bet_id} is taken at most once: resend the same bet_id)"
                   if bet_id else "")
                + (f" (slip {slip_id} is taken at most once: resend the same slip)"
                   if slip_id else "")
                + (" (a tip is taken at most once: resend the same tip_id)"
                   if tip_id is not None else "")))
        except Exception:
            self.internal_error(type(command).__name__)

    def internal_error(self, what: str) -> None:
        """A bug (not an outage): logged with its traceback, and the connection closed
        1011. Answered ``unavailable``, the client would resend the same request into the
        same bug for ever; a reconnect starts it from a clean welcome instead."""
        log.exception("%s failed: a bug, not an outage; closing the connection 1011", what)
        self.metrics.inc("livetable_internal_errors_total")
        self.client.close(CLOSE_INTERNAL_ERROR, "internal error")

    def undecodable(self, text: str, exc: msgspec.DecodeError) -> p.Error:
        """The error for a frame this endpoint cannot take: a dealer command sent on the
        players' endpoint says so, anything else says what msgspec found wrong."""
        if self.client.kind == "player":
            try:
                command = p.DEALER_DECODER.decode(text)
            except msgspec.DecodeError:
                pass
            else:
                if not isinstance(command, p.Hello | p.Ping):
                    return p.Error(code="not_a_dealer", message="dealer commands are taken "
                                   "only on /ws/dealer, with a dealer token")
        return p.Error(code="bad_frame", message=str(exc))
