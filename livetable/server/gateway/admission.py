"""Joining a table: the origin check, hello, the welcome, and resume.

Ordering guarantee for a client: ``welcome`` (snapshot at ``seq`` = head), then, when
resuming, the missed events ``(resume.seq, head]`` and the player's private results of the
rounds among them, then every live event ``> head`` — with no gap and no duplicate. The
client is registered for live frames in the same synchronous block that takes the head, so
no event can fall between the two.

:class:`Admission` checks a connection at the door (its origin, then its hello) and
welcomes it; the connection's :class:`~livetable.server.gateway.connection.Session` reads the
frames.
"""

from __future__ import annotations

import asyncio
import time

from starlette.websockets import WebSocket

from livetable import protocol as p
from livetable.auth import Identity, TokenError, verify
from livetable.betting.slips import settled_message
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.framed_ws import text_frame
from livetable.server.gateway.chat import Chat
from livetable.server.gateway.client import Client, framed
from livetable.server.gateway.codes import (
    CLOSE_FORBIDDEN,
    CLOSE_PROTOCOL,
    CLOSE_UNAUTHORIZED,
    CLOSE_UNKNOWN_TABLE,
)
from livetable.server.gateway.delivery import heartbeat_message
from livetable.server.gateway.feed import Sent, TableFeed, Tables, settled_rounds
from livetable.server.gateway.players import Players
from livetable.server.gateway.sessions import Sessions
from livetable.store.base import Store


class Admission:
    """The origin check, hello, the welcome and resume (see the module docstring)."""

    def __init__(self, settings: Settings, secret: bytes, store: Store, metrics: Metrics,
                 tables: Tables, players: Players, sessions: Sessions, chat: Chat) -> None:
        self.settings = settings
        self.secret = secret
        self.store = store
        self.metrics = metrics
        self.tables = tables
        self.players = players
        self.sessions = sessions
        self.chat = chat

    def origin_allowed(self, ws: WebSocket) -> bool:
        origin = ws.headers.get("origin")
        if origin is None:
            return True  # not a browser: tokens, not origins, protect those
        allowed = self.settings.allowed_origins
        if allowed:
            return "*" in allowed or origin in allowed
        host = ws.headers.get("host", "")
        return origin.split("://", 1)[-1] == host

    def admit(self, client: Client, hello: p.Hello) -> bool:
        """Whether ``hello`` lets ``client`` in (its identity set, its expiry timed); if not,
        the client has been answered why and closed."""
        if hello.v != p.PROTOCOL_VERSION:
            client.send_message(p.Error(code="bad_version",
                                        message=f"this server speaks protocol v1, not "
                                                f"v{hello.v}"))
            client.close(CLOSE_PROTOCOL)
            return False
        if hello.table not in self.tables.feeds:
            client.send_message(p.Error(code="unknown_table",
                                        message=f"no table {hello.table!r}"))
            client.close(CLOSE_UNKNOWN_TABLE)
            return False
        identity: Identity | None = None
        if hello.token:
            try:
                identity = verify(self.secret, hello.token)
            except TokenError as exc:
                client.send_message(p.Error(code="bad_token", message=str(exc)))
                client.close(CLOSE_UNAUTHORIZED)
                return False
        if client.kind == "dealer" and (identity is None or not identity.is_staff):
            client.send_message(p.Error(code="not_a_dealer",
                                        message="the dealer console needs a dealer token"))
            client.close(CLOSE_UNAUTHORIZED)
            return False
        if client.kind == "dealer" and identity is not None and not identity.may_drive(
                hello.table):
            client.send_message(p.Error(code="not_your_table", message=(
                f"this {identity.kind} token does not name table {hello.table!r}"
                if identity.tables else f"this {identity.kind} token names no tables: "
                "mint one with --tables or --all-tables")))
            client.close(CLOSE_FORBIDDEN)
            return False
        if client.kind == "player" and identity is not None and not identity.is_player:
            client.send_message(p.Error(code="bad_token",
                                        message="a dealer token is for /ws/dealer only"))
            client.close(CLOSE_UNAUTHORIZED)
            return False
        if identity is not None and identity.kind == "guest" and not self.settings.guests:
            client.send_message(p.Error(code="bad_token",
                                        message="guest play is off on this server"))
            client.close(CLOSE_UNAUTHORIZED)
            return False
        client.identity = identity
        if identity is not None:
            self._close_at_expiry(client, identity)
        return True

    def _close_at_expiry(self, client: Client, identity: Identity) -> None:
        """A token is checked at hello; the connection it opened ends when it expires."""
        def expire() -> None:
            client.send_message(p.Error(code="token_expired",
                                        message="your session expired: sign in again"))
            client.close(CLOSE_UNAUTHORIZED, "token expired")

        delay = max(0.0, identity.expires - time.time())
        client.expiry = asyncio.get_running_loop().call_later(delay, expire)

    async def welcome(self, client: Client, hello: p.Hello) -> None:
        table = hello.table
        identity = client.identity
        player: p.PlayerView | None = None
        if identity is not None and not await self.sessions.stands(client, identity, table):
            return  # not a table of its operator, or an operator removed: told, closed
        if identity is not None and not await self.sessions.admit(client, identity):
            return  # an ended session: told so, and closed
        if identity is not None and identity.is_player:
            player = await self.players.ensure(identity)
        resume = hello.resume
        replay: list[Sent] | None = None
        settled: list[p.BetSettled] = []
        feed = self.tables.feeds[table]
        if (resume is not None and resume.epoch == feed.epoch
                and not feed.went_back_from(resume.seq)):
            replay, settled = await self._plan_replay(feed, resume.seq, player)
        elif resume is not None and player is not None:
            settled = await self._recent_results(player.id, table)
        if player is not None and identity is not None:
            player = await self.players.view(identity, player, feed.view().limits)
        chat, dealer = await self.chat.welcome_part(client, table)
        # Take the head and register in one synchronous block (after the last await: a
        # coroutine that returns without suspending does not yield), so that no event falls
        # between the replay and the live frames.
        feed, replay, settled = await self._catch_up(table, resume, replay, settled, player)
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
                            resumed=replay is not None, chat=chat, dealer=dealer)
        client.table = table
        # The burst in one write to an idle connection: the welcome, the missed events (the
        # very frames the fan-out wrote), the player's results, the heartbeat's interval.
        # Each through the queue was a writer task and the ASGI send path, and a system
        # call, per frame: most of the server's time in a reconnect storm, where a client
        # misses a dozen events (docs/benchmarks.md, "The websocket transport for /ws").
        burst = [framed(welcome), *((e.text, e.wire) for e in replay or ()),
                 *(framed(message) for message in settled)]
        if self.settings.heartbeat > 0:  # the interval, known from the start
            burst.append(framed(heartbeat_message(self.settings)))
        client.send_framed(burst)
        self.tables.join(client, feed)
        self.sessions.join(client)
        self.metrics.inc("livetable_resumes_total" if replay is not None else
                         "livetable_welcomes_total")

    async def _catch_up(self, table: str, resume: p.ResumePoint | None,
                        replay: list[Sent] | None, settled: list[p.BetSettled],
                        player: p.PlayerView | None
                        ) -> tuple[TableFeed, list[Sent] | None, list[p.BetSettled]]:
        """The table's feed now, with ``replay`` extended to its head and ``settled`` with the
        player's results of the rounds it settled (None: give the snapshot instead). Returns
        without an await after it took the head, so its caller registers at that head."""
        feed = self.tables.feeds[table]
        for _ in range(8):
            feed = self.tables.feeds[table]
            if replay is None or resume is None:
                return feed, replay, settled
            if feed.epoch != resume.epoch or feed.went_back_from(resume.seq):
                return feed, None, settled
            more = feed.frames_after(replay[-1].seq if replay else resume.seq)
            if more is None:
                return feed, None, settled
            replay.extend(more)
            rounds = settled_rounds(e.text for e in more)
            if not rounds or player is None:
                return feed, replay, settled
            settled += await self.store.settlements_for_rounds(player.id, rounds)
        # the head kept moving through every await: give the snapshot instead
        return feed, None, settled

    async def _plan_replay(self, feed: TableFeed, seq: int, player: p.PlayerView | None
                           ) -> tuple[list[Sent] | None, list[p.BetSettled]]:
        frames = feed.frames_after(seq)
        if frames is None:
            stored = await self.store.events_after(
                feed.table, feed.epoch, seq,
                min(self.settings.event_log_size * 4, self.settings.send_queue // 2))
            if stored is None:
                return None, ([] if player is None else
                              await self._recent_results(player.id, feed.table))
            frames = [Sent(seq + 1 + i, f.decode(), text_frame(f)) for i, f in enumerate(stored)]
            if frames:
                more = self.tables.feeds[feed.table].frames_after(frames[-1].seq)
                frames.extend(more or [])
        # the store is asked only for rounds that settled while the client was away: a
        # resume between two settlements (most of them) costs it nothing
        rounds = settled_rounds(e.text for e in frames)
        if player is None or not rounds:
            return frames, []
        return frames, await self.store.settlements_for_rounds(player.id, rounds)

    async def _recent_results(self, player_id: str, table: str) -> list[p.BetSettled]:
        """When a resume cannot replay: the player's latest results at this table, so the
        client still sees what was paid while it was away (it de-duplicates by bet_id)."""
        entries, _ = await self.store.bet_record(player_id, 20, None)
        return [settled_message(e) for e in reversed(entries)
                if e.table == table and e.state != "accepted"]
