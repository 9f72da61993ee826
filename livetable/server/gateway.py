"""The gateway: websocket connections, fan-out, resume, and bet intake.

A gateway holds no table state of its own making. It keeps, per table, what the bus told
it last (:class:`TableFeed`: the snapshot, the head ``(epoch, seq)`` and a ring of recent
frames) and fans each table event — encoded once, by the engine — out to the connections
watching that table.

Each connection (:class:`Client`) has a bounded send queue drained by its own writer task,
so a slow client never delays the others; a client whose queue overflows is closed with
:data:`CLOSE_TOO_SLOW` and can resume.

Ordering guarantee for a client: ``welcome`` (snapshot at ``seq`` = head), then, when
resuming, the missed events ``(resume.seq, head]`` and the player's private results of the
rounds among them, then every live event ``> head`` — with no gap and no duplicate. The
client is registered for live frames in the same synchronous block that takes the head, so
no event can fall between the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.websockets import WebSocket, WebSocketDisconnect

from livetable import protocol as p
from livetable.auth import Identity, TokenError, verify
from livetable.bus import TableBatch
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.server.metrics import Metrics
from livetable.server.ratelimit import RateLimits, TokenBucket
from livetable.server.wsproto import ABORT, ARRIVED_AT, EXTENSION, text_frame
from livetable.store.base import Store, StoreUnavailable
from livetable.store.bets import (
    BetRequest,
    Rejection,
    SlipRequest,
    bet_answer,
    precheck,
    rejected,
    settled_from_record,
    slip_answer,
)

if TYPE_CHECKING:
    from livetable.server.wallet import SeamlessWallet

log = logging.getLogger("livetable.gateway")

CLOSE_SERVICE_RESTART = 1012  # graceful stop: reconnect (elsewhere) and resume
#: Bets and slips of one connection being taken at once (the read-ahead is 32 frames).
MAX_BETS_IN_FLIGHT = 32
CLOSE_INTERNAL_ERROR = 1011  # a bug, logged: not an outage to retry into
CLOSE_TRY_AGAIN_LATER = 1013  # the store is unreachable: reconnect with backoff
CLOSE_PROTOCOL = 4000  # hello asked for a protocol version this server does not speak
CLOSE_UNAUTHORIZED = 4001  # a bad, forged or expired token; or the wrong kind of token
CLOSE_FORBIDDEN = 4003  # a valid staff token for another table
CLOSE_HELLO_TIMEOUT = 4002  # no hello within the time allowed
CLOSE_UNKNOWN_TABLE = 4004
CLOSE_TOO_SLOW = 4008  # the send queue overflowed: resume to catch up
CLOSE_RESYNC = 4011  # this gateway lost events of the table: resume to catch up
CLOSE_RATE_LIMITED = 4029  # kept sending past its frame rate: back off, then reconnect
#: Refusals answered with ``rate_limited`` in one streak; past these the frames are dropped
#: unanswered (answering each would cost what the flood costs), then the socket is closed.
ANSWERED_STRIKES = 3

Execute = Callable[[str, p.TableCommand], Awaitable[p.Ack | p.Error]]

_SETTLING = msgspec.json.Decoder(p.RoundSettled | p.RoundCancelled | p.TableEvent)


@dataclass
class TableFeed:
    table: str
    epoch: int
    seq: int
    snapshot: bytes
    ring: deque[tuple[int, str]]
    clients: set[Client] = field(default_factory=set)
    #: When the last table event went out to the clients (monotonic): heartbeats fill quiet.
    last_sent: float = 0.0
    _view: tuple[bytes, p.TableSnapshot] | None = None

    def view(self) -> p.TableSnapshot:
        """The snapshot decoded — once per table step, however many clients join."""
        if self._view is None or self._view[0] is not self.snapshot:
            self._view = (self.snapshot, msgspec.json.decode(self.snapshot,
                                                             type=p.TableSnapshot))
        return self._view[1]

    def frames_after(self, seq: int) -> list[tuple[int, str]] | None:
        """Every frame after ``seq`` up to the head, or None if the ring no longer has them."""
        if seq == self.seq:
            return []
        if seq > self.seq or not self.ring or self.ring[0][0] > seq + 1:
            return None
        return [(s, f) for s, f in self.ring if s > seq]


class Client:
    """One websocket: a bounded send queue and the writer task that drains it.

    The writer task exists only while it has work: a frame that can be written straight to
    an idle connection (see :mod:`livetable.server.wsproto`) needs none, and an idle
    viewer costs no task, event loop wake-ups or their memory.
    """

    def __init__(self, ws: WebSocket, gateway: Gateway, kind: str) -> None:
        self.ws = ws
        self.gateway = gateway
        self.kind = kind
        self.table: str | None = None
        self.identity: Identity | None = None
        self.queue: deque[str] = deque()
        self.limit = gateway.settings.send_queue
        self.ready = asyncio.Event()
        self.in_flight = False  # a queued frame is being sent through ASGI
        self.arrived_at = 0  # when the last frame from this client arrived (epoch ms)
        extensions = ws.scope.get("extensions") or {}
        self.write_frame: Callable[[bytes], bool] | None = extensions.get(EXTENSION)
        self.abort_after: Callable[[float], None] | None = extensions.get(ABORT)
        self.strikes = 0  # frames refused for rate since the last one taken
        self.expiry: asyncio.TimerHandle | None = None  # closes the socket when the token does
        self.closed = False
        self.close_code: int | None = None
        self.close_reason = ""
        self.writer: asyncio.Task[None] | None = None
        self.bets_in_flight: set[asyncio.Task[None]] = set()
        # a dealer's scanner reads cards in quick bursts: consoles get five times the rate
        rate = gateway.settings.frames_per_second * (5 if kind == "dealer" else 1)
        self.bucket = TokenBucket(rate, rate * 2)

    def send(self, frame: str, framed: bytes | None = None) -> None:
        """Queue ``frame``; or, given its websocket framing and an idle connection, write
        it at once (see :mod:`livetable.server.wsproto`)."""
        if self.closed:
            return
        if (framed is not None and self.write_frame is not None and not self.queue
                and not self.in_flight and self.write_frame(framed)):
            self.gateway.metrics.frames_out += 1
            return
        if len(self.queue) >= self.limit:
            self.gateway.metrics.inc("livetable_slow_client_closes_total")
            self.close(CLOSE_TOO_SLOW, "too slow: resume to catch up")
            return
        self.queue.append(frame)
        self._wake_writer()

    def send_all(self, frames: list[bytes], framed: bytes) -> None:
        """Send several frames (UTF-8 JSON) together: one write of their websocket framing
        (``framed``, every frame's in order) to an idle connection — a player's results of a
        settlement chunk cost one system call, not one each — else each queued in turn."""
        if self.closed:
            return
        if (self.write_frame is not None and not self.queue and not self.in_flight
                and self.write_frame(framed)):
            self.gateway.metrics.frames_out += len(frames)
            return
        for frame in frames:
            self.send(frame.decode())

    def _wake_writer(self) -> None:
        if self.writer is None or self.writer.done():
            self.writer = asyncio.get_running_loop().create_task(self._write())
        self.ready.set()

    def send_message(self, message: msgspec.Struct) -> None:
        data = p.encode(message)
        self.send(data.decode(), text_frame(data) if self.write_frame is not None else None)

    async def _write(self) -> None:
        ws = self.ws
        metrics = self.gateway.metrics
        try:
            while True:
                await self.ready.wait()
                self.ready.clear()
                while self.queue:
                    frame = self.queue.popleft()
                    self.in_flight = True
                    await ws.send_text(frame)
                    self.in_flight = False
                    metrics.frames_out += 1
                if self.closed or (self.write_frame is not None and not self.queue):
                    break  # drained: frames go straight out again, no task needed
        except (WebSocketDisconnect, RuntimeError, OSError):
            self.closed = True
        except asyncio.CancelledError:
            pass
        if self.close_code is not None:
            with contextlib.suppress(Exception):
                await ws.close(self.close_code, self.close_reason)

    def close(self, code: int, reason: str = "") -> None:
        """Close after what is queued (or at once if the queue is what overflowed)."""
        if self.closed:
            return
        self.closed = True
        self.close_code = code
        self.close_reason = reason
        if self.abort_after is not None:  # a peer that does not read never takes the close
            self.abort_after(self.gateway.settings.close_timeout)
        if code == CLOSE_TOO_SLOW:
            self.queue.clear()
            if self.writer is not None:
                self.writer.cancel()
            task = asyncio.get_running_loop().create_task(self._close_now(code, reason))
            self.gateway._tasks.add(task)  # keep a reference until it is done
            task.add_done_callback(self.gateway._tasks.discard)
        else:
            self._wake_writer()  # it sends what is queued, then the close

    async def _close_now(self, code: int, reason: str) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close(code, reason)


class Gateway:
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

    def start(self) -> None:
        """Start sending heartbeats (none when ``settings.heartbeat`` is 0)."""
        if self.settings.heartbeat > 0 and self._heartbeat is None:
            self._heartbeat = asyncio.get_running_loop().create_task(self._heartbeats())

    def _heartbeat_message(self) -> p.Heartbeat:
        return p.Heartbeat(interval_ms=round(self.settings.heartbeat * 1000),
                           server_time=now_ms())

    async def _heartbeats(self) -> None:
        """A heartbeat to every connection of a table that sent nothing for an interval.

        Why: a connection that the network drops silently (no FIN, no RST: a phone losing
        its signal) looks open to both ends for minutes. A client that knows a frame comes
        at least every interval can tell within about two intervals that it is gone, and
        show it. Only quiet tables get them — a table dealing a round is heard anyway — and
        one frame, framed once, serves every connection of the table. A new connection gets
        one right after its welcome, so that it knows the interval before the table is quiet.
        """
        interval = self.settings.heartbeat
        check_every = min(0.25, interval / 4)  # a beat is due at most this late
        while True:
            await asyncio.sleep(check_every)
            now = time.monotonic()
            for feed in list(self.feeds.values()):
                if not feed.clients or now - feed.last_sent < interval:
                    continue
                feed.last_sent = now
                data = p.encode(self._heartbeat_message())
                text, wire = data.decode(), text_frame(data)
                for client in list(feed.clients):
                    client.send(text, wire)

    # --- the bus side ------------------------------------------------------------------

    def deliver(self, batch: TableBatch) -> None:
        """A table step from the bus: remember it, then fan it out. Synchronous on purpose.

        If the step does not follow what this gateway delivered last (a new epoch, or a gap
        the bus could not fill), the clients of the table are told to resume
        (:data:`CLOSE_RESYNC`): their resume, served from the store's log or a snapshot,
        brings them back in step. Nothing is skipped silently.
        """
        feed = self.feeds.get(batch.table)
        if feed is None or feed.epoch != batch.epoch:
            if feed is not None:
                self._resync(feed, "the table's event numbering changed")
            feed = TableFeed(batch.table, batch.epoch, 0, batch.snapshot,
                             deque(maxlen=self.settings.event_log_size))
            self.feeds[batch.table] = feed
        new = [(seq, raw) for seq, raw in batch.frames if seq > feed.seq]
        fresh = [(seq, raw.decode()) for seq, raw in new]
        if feed.seq and ((fresh and fresh[0][0] != feed.seq + 1)
                         or (not fresh and batch.seq > feed.seq)):
            self.metrics.inc("livetable_feed_gaps_total")
            feed.ring.clear()  # resumers fall back to the store's log
            self._resync(feed, "events were lost on the way to this gateway")
        if batch.seq >= feed.seq:
            feed.snapshot = batch.snapshot
            feed.seq = batch.seq
        if fresh:
            sent_at = feed.last_sent = time.monotonic()
            feed.ring.extend(fresh)
            # framed once per event: the same bytes go to every connection
            framed = [(text, text_frame(raw)) for (_, text), (_, raw) in zip(fresh, new,
                                                                              strict=True)]
            for client in list(feed.clients):
                for frame, wire in framed:
                    client.send(frame, wire)
            self.metrics.fanout(len(fresh) * len(feed.clients), time.monotonic() - sent_at)
        if batch.private:
            self._deliver_private(batch.table, batch.private)
        if batch.repair and fresh:
            rounds = _settled_rounds(fresh)
            if rounds:
                task = asyncio.get_running_loop().create_task(
                    self._repair_private(batch.table, rounds))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _deliver_private(self, table: str, private: list[tuple[str, bytes]]) -> None:
        """Each player's private results of a step (a settlement chunk holds whole
        players), framed and written together."""
        by_player: dict[str, list[bytes]] = {}
        for player_id, frame in private:
            by_player.setdefault(player_id, []).append(frame)
        for player_id, frames in by_player.items():
            clients = [c for c in self.players.get(player_id, ()) if c.table == table]
            if clients:
                framed = b"".join([text_frame(frame) for frame in frames])
                for client in clients:
                    client.send_all(frames, framed)

    def _resync(self, feed: TableFeed, why: str) -> None:
        for client in list(feed.clients):
            client.close(CLOSE_RESYNC, why)
        feed.clients.clear()

    async def _repair_private(self, table: str, rounds: list[str]) -> None:
        """The private results of rounds whose step reached us by repair, not by the bus.
        With the store unreachable they are left out: the Bet Record holds them."""
        for player_id, clients in list(self.players.items()):
            watching = [c for c in clients if c.table == table]
            if not watching:
                continue
            try:
                messages = await self.store.settlements_for_rounds(player_id, rounds)
            except StoreUnavailable as exc:
                log.warning("table %s: private results not repaired: %s", table, exc)
                return
            for message in messages:
                for client in watching:
                    client.send_message(message)

    def tables_json(self) -> bytes:
        return b'{"tables":[' + b",".join(f.snapshot for f in self.feeds.values()) + b"]}"

    # --- connections -----------------------------------------------------------------

    def _origin_allowed(self, ws: WebSocket) -> bool:
        origin = ws.headers.get("origin")
        if origin is None:
            return True  # not a browser: tokens, not origins, protect those
        allowed = self.settings.allowed_origins
        if allowed:
            return "*" in allowed or origin in allowed
        host = ws.headers.get("host", "")
        return origin.split("://", 1)[-1] == host

    async def serve(self, ws: WebSocket, kind: str) -> None:
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

    def _forget(self, client: Client) -> None:
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

    async def _receive(self, client: Client) -> str | None:
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

    async def _session(self, client: Client) -> None:
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

    async def _answer(self, client: Client, command: object, arrived_at: int) -> None:
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

    def _internal_error(self, client: Client, what: str) -> None:
        """A bug (not an outage): logged with its traceback, and the connection closed
        1011. Answered ``unavailable``, the client would resend the same request into the
        same bug for ever; a reconnect starts it from a clean welcome instead."""
        log.exception("%s failed: a bug, not an outage; closing the connection 1011", what)
        self.metrics.inc("livetable_internal_errors_total")
        client.close(CLOSE_INTERNAL_ERROR, "internal error")

    @staticmethod
    def _undecodable(client: Client, text: str, exc: msgspec.DecodeError) -> p.Error:
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

    async def _hello(self, client: Client, decoder: p.FrameDecoder[Any]) -> p.Hello | None:
        while True:
            text = await self._receive(client)
            if text is None:
                continue
            try:
                hello = decoder.decode(text)
            except msgspec.DecodeError as exc:
                client.send_message(p.Error(code="bad_frame", message=str(exc)))
                continue
            if not isinstance(hello, p.Hello):
                client.send_message(p.Error(code="hello_required",
                                            message="the first frame must be hello"))
                continue
            if hello.v != p.PROTOCOL_VERSION:
                client.send_message(p.Error(code="bad_version",
                                            message=f"this server speaks protocol v1, not "
                                                    f"v{hello.v}"))
                client.close(CLOSE_PROTOCOL)
                return None
            if hello.table not in self.feeds:
                client.send_message(p.Error(code="unknown_table",
                                            message=f"no table {hello.table!r}"))
                client.close(CLOSE_UNKNOWN_TABLE)
                return None
            identity: Identity | None = None
            if hello.token:
                try:
                    identity = verify(self.secret, hello.token)
                except TokenError as exc:
                    client.send_message(p.Error(code="bad_token", message=str(exc)))
                    client.close(CLOSE_UNAUTHORIZED)
                    return None
            if client.kind == "dealer" and (identity is None or not identity.is_staff):
                client.send_message(p.Error(code="not_a_dealer",
                                            message="the dealer console needs a dealer token"))
                client.close(CLOSE_UNAUTHORIZED)
                return None
            if client.kind == "dealer" and identity is not None and not identity.may_drive(
                    hello.table):
                client.send_message(p.Error(code="not_your_table", message=(
                    f"this {identity.kind} token does not name table {hello.table!r}"
                    if identity.tables else f"this {identity.kind} token names no tables: "
                    "mint one with --tables or --all-tables")))
                client.close(CLOSE_FORBIDDEN)
                return None
            if client.kind == "player" and identity is not None and not identity.is_player:
                client.send_message(p.Error(code="bad_token",
                                            message="a dealer token is for /ws/dealer only"))
                client.close(CLOSE_UNAUTHORIZED)
                return None
            if identity is not None and identity.kind == "guest" and not self.settings.guests:
                client.send_message(p.Error(code="bad_token",
                                            message="guest play is off on this server"))
                client.close(CLOSE_UNAUTHORIZED)
                return None
            client.identity = identity
            if identity is not None:
                self._close_at_expiry(client, identity)
            return hello

    def _close_at_expiry(self, client: Client, identity: Identity) -> None:
        """A token is checked at hello; the connection it opened ends when it expires."""
        def expire() -> None:
            client.send_message(p.Error(code="token_expired",
                                        message="your session expired: sign in again"))
            client.close(CLOSE_UNAUTHORIZED, "token expired")

        delay = max(0.0, identity.expires - time.time())
        client.expiry = asyncio.get_running_loop().call_later(delay, expire)

    async def _welcome(self, client: Client, hello: p.Hello) -> None:
        table = hello.table
        identity = client.identity
        player: p.PlayerView | None = None
        if identity is not None and identity.is_player:
            initial = (self.settings.guest_balance if identity.kind == "guest"
                       else self.settings.player_balance)
            if self.wallet is not None:  # the operator holds the money: none here
                initial = 0
            player = await self.store.ensure_player(identity.id, identity.name, initial, now_ms())
        resume = hello.resume
        replay: list[tuple[int, str]] | None = None
        settled: list[p.BetSettled] = []
        feed = self.feeds[table]
        if resume is not None and resume.epoch == feed.epoch:
            replay, settled = await self._plan_replay(feed, resume.seq, player)
        elif resume is not None and player is not None:
            settled = await self._recent_results(player.id, table)
        if player is not None and identity is not None:
            player = await self._player_view(identity, player)
        # Take the head and register in one synchronous block (after the last await), so
        # that no event falls between the replay and the live frames.
        for _ in range(8):
            feed = self.feeds[table]
            if replay is None or resume is None:
                break
            if feed.epoch != resume.epoch:
                replay = None
                break
            more = feed.frames_after(replay[-1][0] if replay else resume.seq)
            if more is None:
                replay = None
                break
            replay.extend(more)
            rounds = _settled_rounds(more)
            if not rounds or player is None:
                break
            settled += await self.store.settlements_for_rounds(player.id, rounds)
        else:  # the head kept moving through every await: give the snapshot instead
            replay = None
        # The welcome burst is queued at once: a replay that fills the send queue would close
        # the client as too slow — again at each retry, so it could never catch up. Past half
        # the queue, a snapshot instead (resumed: false); the Bet Record holds any result left
        # out here.
        budget = max(1, client.limit // 2) - 1
        if replay is not None and len(replay) + len(settled) > budget:
            replay = None
        settled = settled[-budget:] if budget else []
        welcome = p.Welcome(v=p.PROTOCOL_VERSION, player=player, table=feed.view(),
                            epoch=feed.epoch, seq=feed.seq, server_time=now_ms(),
                            resumed=replay is not None)
        client.table = table
        client.send(p.encode(welcome).decode())
        for _, frame in replay or ():
            client.send(frame)
        for message in settled:
            client.send_message(message)
        if self.settings.heartbeat > 0:  # the interval, known from the start
            client.send_message(self._heartbeat_message())
        feed.clients.add(client)
        if identity is not None and identity.is_player:  # private frames are players' only
            self.players.setdefault(identity.id, set()).add(client)
        self.metrics.inc("livetable_resumes_total" if replay is not None else
                         "livetable_welcomes_total")

    async def _player_view(self, identity: Identity, known: p.PlayerView) -> p.PlayerView:
        """The player as the page shows it: with a seamless wallet, the operator's balance
        (0 if it does not answer in time; the page asks again); else the ledger's."""
        player = await self.store.player(identity.id) or known
        if self.wallet is not None:
            balance = await self.wallet.balance(identity)
            player.balance = 0 if balance is None else balance
            player.currency = self.wallet.currency_of(identity)
        else:
            player.currency = identity.currency
        return player

    async def _plan_replay(self, feed: TableFeed, seq: int, player: p.PlayerView | None
                           ) -> tuple[list[tuple[int, str]] | None, list[p.BetSettled]]:
        frames = feed.frames_after(seq)
        if frames is None:
            stored = await self.store.events_after(
                feed.table, feed.epoch, seq,
                min(self.settings.event_log_size * 4, self.settings.send_queue // 2))
            if stored is None:
                return None, ([] if player is None else
                              await self._recent_results(player.id, feed.table))
            frames = [(seq + 1 + i, f.decode()) for i, f in enumerate(stored)]
            if frames:
                more = self.feeds[feed.table].frames_after(frames[-1][0])
                frames.extend(more or [])
        settled: list[p.BetSettled] = []
        if player is not None:
            settled = await self.store.settlements_for_rounds(player.id, _settled_rounds(frames))
        return frames, settled

    async def _recent_results(self, player_id: str, table: str) -> list[p.BetSettled]:
        """When a resume cannot replay: the player's latest results at this table, so the
        client still sees what was paid while it was away (it de-duplicates by bet_id)."""
        entries, _ = await self.store.bet_record(player_id, 20, None)
        return [settled_from_record(e) for e in reversed(entries)
                if e.table == table and e.state != "accepted"]

    # --- commands ----------------------------------------------------------------------

    async def _handle(self, client: Client, command: object, arrived_at: int) -> None:
        if isinstance(command, p.Ping):
            client.send_message(p.Pong(t=command.t, server_time=now_ms()))
        elif isinstance(command, p.Hello):
            client.send_message(p.Error(code="already_hello", message="hello was already sent"))
        elif isinstance(command, p.PlaceBet):
            await self._place_bet(client, command, arrived_at)
        elif isinstance(command, p.PlaceBets):
            await self._place_bets(client, command, arrived_at)
        elif isinstance(command, p.GetBalance):
            identity = client.identity
            if identity is None or not identity.is_player:
                client.send_message(p.Error(code="not_a_player",
                                            message="sign in as a player to see a balance"))
                return
            view = await self._player_view(identity, p.PlayerView(id=identity.id,
                                                                   name=identity.name,
                                                                   balance=0))
            client.send_message(p.Balance(balance=view.balance, currency=view.currency))
        elif isinstance(command, p.GetBets):
            if client.identity is None or not client.identity.is_player:
                client.send_message(p.Error(code="not_a_player",
                                            message="sign in as a player to see your bets"))
                return
            if not self.limits.allow(self.limits.bet_record, "bets", client.identity.id):
                client.send_message(p.Error(code="rate_limited",
                                            message="too many Bet Record reads, slow down"))
                return
            entries, cursor = await self.store.bet_record(client.identity.id,
                                                          command.limit or 20, command.before)
            client.send_message(p.Bets(bets=entries, next=cursor))
        elif client.kind == "dealer":
            assert client.table is not None
            if isinstance(command, p.CorrectCards):
                approved = self._approve(client, command)
                if isinstance(approved, p.Error):
                    client.send_message(approved)
                    return
                answer = await self.execute(client.table, approved)
                if isinstance(answer, p.Ack):
                    answer.cmd = "correct_cards"  # the console's name for what it asked
            else:
                answer = await self.execute(client.table, command)  # type: ignore[arg-type]  # the dealer decoder yields only table commands here
            client.send_message(answer)

    def _approve(self, client: Client, command: p.CorrectCards) -> p.VoidCards | p.Error:
        """A correction with a supervisor's approval, named for the log; or why not.

        A supervisor's own console needs no approval. A dealer's carries a supervisor token
        scoped to this table (scanned at the console, never stored by it)."""
        dealer = client.identity
        assert dealer is not None and client.table is not None
        if dealer.kind == "supervisor":
            supervisor = dealer
        elif not command.approval:
            return p.Error(code="approval_required",
                           message="a card correction needs a supervisor's approval")
        else:
            try:
                supervisor = verify(self.secret, command.approval)
            except TokenError as exc:
                return p.Error(code="bad_approval", message=f"the approval: {exc}")
            if supervisor.kind != "supervisor":
                return p.Error(code="not_a_supervisor",
                               message="the approval must be a supervisor token")
            if not supervisor.may_drive(client.table):
                return p.Error(code="not_your_table", message=(
                    f"this supervisor token does not name table {client.table!r}"))
        return p.VoidCards(count=command.count, dealer=dealer.name, dealer_id=dealer.id,
                           supervisor=supervisor.name, supervisor_id=supervisor.id)

    def _may_bet(self, client: Client) -> p.RejectionCode | None:
        """Why ``client`` may not bet now (a rejection code), or None."""
        identity = client.identity
        if identity is None or not identity.is_player:
            return "not_a_player"
        if not self.limits.bets.take(identity.id):
            return "rate_limited"
        return None

    async def _place_bet(self, client: Client, bet: p.PlaceBet, arrived_at: int) -> None:
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

    async def _place_bets(self, client: Client, slip: p.PlaceBets, arrived_at: int) -> None:
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
        if snap.round_id != slip.round_id:
            return Rejection("unknown_round")
        if snap.phase == "paused":
            return Rejection("paused")
        if snap.phase != "betting" or snap.closes_at is None or arrived_at >= snap.closes_at:
            return Rejection("betting_closed")
        window_end = snap.closes_at + int(self.settings.close_grace * 1000)
        return await self.wallet.place_slip(client.identity, slip, arrived_at, window_end)

    async def shutdown(self, code: int = CLOSE_SERVICE_RESTART) -> None:
        """Graceful stop: close every websocket with 1012 so clients resume elsewhere."""
        self.accepting = False
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        for client in list(self.clients):
            client.close(code, "server restarting")
        await asyncio.sleep(0)


def _settled_rounds(frames: list[tuple[int, str]]) -> list[str]:
    """Round ids of the round_settled / round_cancelled events among ``frames``."""
    rounds = []
    for _, frame in frames:
        if '"round_settled"' in frame or '"round_cancelled"' in frame:
            event = _SETTLING.decode(frame)
            if isinstance(event, p.RoundSettled | p.RoundCancelled):
                rounds.append(event.round_id)
    return rounds
