"""Operators' sessions at this gateway: an ended one closed, their limits applied, their
figures counted.

A session is the store's (betting/sessions.py says what it is): every gateway reads the
same one, so that an end, the figures and the last reality check answered hold across
reconnects and gateways. This gateway only

- refuses an ended session's hello (``session_ended``, close 4002); the close of its open
  connections comes from the bus, so that every gateway closes them at once
  (:meth:`Sessions.ended`, called by the gateway for each connection);
- judges a slip of a session with limits before it goes to the store or the operator's
  wallet (:meth:`Sessions.judge`), reading the session from the store each time (another
  gateway may have counted stakes or taken the answer to a reality check), plus the
  stakes of its own slips still on their way (:attr:`Sessions.reserved`), so that two
  slips in flight at once cannot pass a limit together;
- counts a slip's stake once it is taken, and its bets' returns when their settlement
  passes this gateway (every gateway hears every settlement of its tables; only the one
  that took the bet counts it: :attr:`Sessions.open_bets`);
- times the reality checks and the time limit of the sessions connected here;
- asks the registry in force (:data:`Standing`) at every hello and every slip of a
  launched player whether its operator still serves the table: a table out of the
  operator's ``tables`` is refused (``not_your_table``), and the sessions of an operator
  removed from the registry end (``operator_removed``; what the wallet is owed for them is
  still delivered: the outbox keeps its wallet).

The limits live with the session, not with a socket: a session's record and clock are
kept from the first of its connections *admitted* here to the last one gone, whatever the
order of joins and leaves. (Kept from the join instead, a connection that left while
another was between its admission and its join took the record with it, and the other
connection's slips went unjudged: 12,000 staked against a 2,000 limit.)

Sessions without limits cost one dictionary look-up per slip and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import msgspec

from livetable import protocol as p
from livetable.auth import Identity
from livetable.betting.sessions import (
    TIME_LIMIT,
    SessionRecord,
    judge_limits,
    reality_check,
    slip_deducted,
)
from livetable.betting.slips import Rejection, SlipRequest
from livetable.betting.tips import (
    Allowance,
    TipAnswer,
    TipRefusal,
    TipRequest,
    TipTaken,
    session_allowance,
)
from livetable.bus import SessionEnd
from livetable.clock import now_ms
from livetable.operator.registry import Refusal
from livetable.server.gateway.client import Client
from livetable.server.gateway.codes import CLOSE_FORBIDDEN, CLOSE_SESSION_ENDED
from livetable.store.base import Store, StoreUnavailable

log = logging.getLogger("livetable.gateway")

#: How a gateway tells every gateway (itself too) that a session ended: the bus's.
Announce = Callable[[SessionEnd], Awaitable[None]]
#: Why the registry in force refuses a launched player (its ``operator`` set) at a table.
Standing = Callable[[Identity, str], Refusal | None]
#: The reason a session ends when its operator is removed from the registry.
OPERATOR_REMOVED = "operator_removed"


def every_table(identity: Identity, table: str) -> Refusal | None:
    """No registry to ask (tools and tests): every table, for every operator."""
    return None

_SETTLED = msgspec.json.Decoder(p.BetSettled)


def close_ended(client: Client, reason: str) -> None:
    """``session_ended``, then close 4002: the session's token is no good any more."""
    client.send_message(p.SessionEnded(reason=reason))
    client.close(CLOSE_SESSION_ENDED, "session ended")


class Sessions:
    """The operators' sessions of this gateway's connections (see the module docstring)."""

    def __init__(self, store: Store, announce: Announce,
                 keep: Callable[[asyncio.Task[None]], None],
                 standing: Standing = every_table) -> None:
        self.store = store
        self.announce = announce
        self.keep = keep
        self.standing = standing
        #: Session id -> its connections admitted here, and its record as last read
        #: (sessions with limits only: nothing else needs watching); kept while any of
        #: them is connected. Reality checks go to those welcomed (:attr:`joined`).
        self.clients: dict[str, set[Client]] = {}
        self.joined: set[Client] = set()
        self.records: dict[str, SessionRecord] = {}
        self.timers: dict[str, list[asyncio.TimerHandle]] = {}
        #: Session id -> what its slips on their way to the store will deduct.
        self.reserved: dict[str, int] = {}
        #: Player id -> bet id -> session id: bets this gateway took for a session with
        #: limits, until their settlement passes and their return is counted.
        self.open_bets: dict[str, dict[str, str]] = {}

    # --- hello and goodbye ----------------------------------------------------------------

    async def stands(self, client: Client, identity: Identity, table: str) -> bool:
        """Whether the registry in force lets ``identity`` play at ``table``; if not,
        ``client`` was told and closed (an operator removed: its session ended)."""
        why = self.standing(identity, table) if identity.operator is not None else None
        if why is None:
            return True
        if why == "not_your_table":
            client.send_message(p.Error(code="not_your_table", message=(
                f"your casino does not offer table {table!r}")))
            client.close(CLOSE_FORBIDDEN, "not your table")
            return False
        if identity.session is not None:
            with contextlib.suppress(StoreUnavailable):  # the next hello or slip ends it
                await self._end(identity.session, OPERATOR_REMOVED, now_ms())
        close_ended(client, OPERATOR_REMOVED)
        return False

    async def admit(self, client: Client, identity: Identity) -> bool:
        """Whether ``identity``'s session lets it in; if not, ``client`` was told and
        closed. A token without a session (a guest's, a v1 launch's) always does."""
        sid = identity.session
        if sid is None:
            return True
        record = await self.store.session(sid)
        if record is None:  # not kept (or past its expiry, which the token checks)
            return True
        now = now_ms()
        if record.ended_at is None and record.ends_at is not None and now >= record.ends_at:
            record = await self._end(sid, TIME_LIMIT, now) or record
        if record.ended_at is not None:
            close_ended(client, record.reason or "")
            return False
        if record.has_limits:  # kept, and its clock running, until its last one leaves
            self.records.setdefault(sid, record)
            self.clients.setdefault(sid, set()).add(client)
            if sid not in self.timers:
                self._arm(record)
        return True

    def join(self, client: Client) -> None:
        """After the welcome: show a reality check due (and the later ones)."""
        identity = client.identity
        sid = identity.session if identity is not None else None
        record = self.records.get(sid) if sid is not None else None
        if record is None or client not in self.clients.get(record.session_id, ()):
            return
        self.joined.add(client)
        due = record.reality_check_at()
        if due is not None and now_ms() >= due:
            client.send_message(reality_check(record, now_ms()))

    def leave(self, client: Client) -> None:
        self.joined.discard(client)
        identity = client.identity
        sid = identity.session if identity is not None else None
        clients = self.clients.get(sid) if sid is not None else None
        if sid is None or clients is None:
            return
        clients.discard(client)
        if not clients:  # its bets' returns are still counted when they settle
            del self.clients[sid]
            self._disarm(sid)
            self.records.pop(sid, None)

    def ended(self, sid: str) -> None:
        """The session ended (the bus said so): its clock stops. Its record stays while
        its connections close: a slip on one of them meanwhile is judged (and refused:
        the store says it ended)."""
        self._disarm(sid)

    # --- slips ----------------------------------------------------------------------------

    def refused(self, identity: Identity, table: str) -> Rejection | None:
        """Why the registry in force refuses ``identity``'s slips at ``table`` (an
        operator removed: its session is ended, every connection of it closed)."""
        why = self.standing(identity, table) if identity.operator is not None else None
        if why is None:
            return None
        if why == "operator_removed":
            if identity.session is not None:
                self.keep(asyncio.get_running_loop().create_task(
                    self._end_quietly(identity.session, OPERATOR_REMOVED)))
            return Rejection("session_ended")
        return Rejection("not_your_table")

    async def _fresh(self, identity: Identity) -> tuple[str, SessionRecord] | None:
        """The session of ``identity`` as the store has it now (kept), if it has limits."""
        sid = identity.session
        if sid is None or sid not in self.records:
            return None
        record = await self.store.session(sid)
        if record is None:
            return None
        self.records[sid] = record
        return sid, record

    async def judge(self, identity: Identity, slip: SlipRequest, now: int
                    ) -> Rejection | None:
        """Why the session's limits refuse ``slip``, or None (and its stake is reserved
        until :meth:`taken`)."""
        found = await self._fresh(identity)
        if found is None:
            return None
        sid, record = found
        reserved = self.reserved.get(sid, 0)
        deducted = slip_deducted(slip.bets)
        refused = judge_limits(_with_reserved(record, slip.round_id, reserved),
                               slip.round_id, deducted, now)
        if refused is not None:
            self._ended_by_time(record, refused.code)
            return refused
        self.reserved[sid] = reserved + deducted
        return None

    async def tip_allowance(self, identity: Identity, tip: TipRequest, now: int
                            ) -> TipRefusal | Allowance | None:
        """What the session's limits leave ``tip`` (None: no limit), or why it may not be
        given at all; its amount is reserved until :meth:`tipped` (as a slip's is)."""
        found = await self._fresh(identity)
        if found is None:
            return None
        sid, record = found
        reserved = self.reserved.get(sid, 0)
        allowance = session_allowance(_with_reserved(record, tip.round_id or "", reserved),
                                      tip.round_id, now)
        if isinstance(allowance, TipRefusal):
            self._ended_by_time(record, allowance.code)
            return allowance
        self.reserved[sid] = reserved + tip.amount
        return allowance

    async def tipped(self, identity: Identity, tip: TipRequest, answer: TipAnswer | None
                     ) -> None:
        """A tip :meth:`tip_allowance` let through was answered (None: it failed): a fresh
        one counts as staked, and lost (it comes back in no case)."""
        sid = identity.session
        if sid is None or sid not in self.reserved:
            return
        try:
            if isinstance(answer, TipTaken) and answer.fresh:
                record = await self.store.count_session(sid, tip.round_id, answer.amount, 0)
                if record is not None and sid in self.records:
                    self.records[sid] = record
        finally:
            self._release(sid, tip.amount)

    def _ended_by_time(self, record: SessionRecord, code: str) -> None:
        """A refusal ``session_ended`` of a session the store has not ended: its time
        limit came, and nobody ended it yet."""
        if code == "session_ended" and record.ended_at is None:
            self.keep(asyncio.get_running_loop().create_task(
                self._end_quietly(record.session_id, TIME_LIMIT)))

    async def taken(self, identity: Identity, slip: SlipRequest,
                    answer: p.SlipAccepted | Rejection) -> None:
        """A slip :meth:`judge` let through was answered: count what it staked."""
        sid = identity.session
        if sid is None or sid not in self.reserved:
            return
        try:
            if isinstance(answer, p.SlipAccepted):
                bets = self.open_bets.setdefault(identity.id, {})
                if answer.bets and answer.bets[0].bet_id in bets:
                    return  # a slip sent again, answered as before: counted already
                for bet in answer.bets:
                    bets[bet.bet_id] = sid
                record = await self.store.count_session(sid, slip.round_id,
                                                        answer.deducted, 0)
                if record is not None and sid in self.records:
                    self.records[sid] = record
        finally:
            self.release(identity, slip)

    def release(self, identity: Identity, slip: SlipRequest) -> None:
        """The slip :meth:`judge` reserved for is answered (or failed: an outage, a bug)."""
        sid = identity.session
        if sid is not None and sid in self.reserved:
            self._release(sid, slip_deducted(slip.bets))

    def _release(self, sid: str, amount: int) -> None:
        left = self.reserved[sid] - amount
        if left > 0:
            self.reserved[sid] = left
        else:
            del self.reserved[sid]

    def settled(self, private: list[tuple[str, bytes]]) -> None:
        """A settlement passed this gateway: count the returns of the bets it took."""
        if not self.open_bets:
            return
        returned: dict[str, int] = {}
        for player_id, frame in private:
            bets = self.open_bets.get(player_id)
            if not bets:
                continue
            message = _SETTLED.decode(frame)
            sid = bets.pop(message.bet_id, None)
            if sid is not None:
                returned[sid] = returned.get(sid, 0) + message.returned
            if not bets:
                del self.open_bets[player_id]
        for sid, amount in returned.items():
            self.keep(asyncio.get_running_loop().create_task(self._count_return(sid, amount)))

    async def _count_return(self, sid: str, amount: int) -> None:
        try:
            record = await self.store.count_session(sid, None, 0, amount)
        except StoreUnavailable as exc:  # the session's loss counts high: never in its favour
            log.warning("session %s: a return of %d not counted: %s", sid, amount, exc)
            return
        if record is not None and sid in self.records:
            self.records[sid] = record

    # --- reality checks ---------------------------------------------------------------

    async def acknowledge(self, client: Client) -> None:
        """``reality_check_ack``: the next check is due ``reality_check_minutes`` from now —
        only when one is due (an answer sent ahead of time would put the next off)."""
        identity = client.identity
        sid = identity.session if identity is not None else None
        if sid is None or sid not in self.records:
            return
        now = now_ms()
        record = await self.store.session(sid)
        due = None if record is None else record.reality_check_at()
        if due is None or now < due:
            return
        record = await self.store.reality_checked(sid, now)
        if record is not None and sid in self.records:
            self.records[sid] = record
            self._disarm(sid)
            self._arm(record)

    # --- the session's clock ----------------------------------------------------------

    def _arm(self, record: SessionRecord) -> None:
        loop = asyncio.get_running_loop()
        now = now_ms()
        timers: list[asyncio.TimerHandle] = []
        sid = record.session_id
        if record.ends_at is not None:
            timers.append(loop.call_later(
                max(0, record.ends_at - now) / 1000,
                lambda: self.keep(loop.create_task(self._end_quietly(sid, TIME_LIMIT)))))
        due = record.reality_check_at()
        if due is not None and due > now:
            timers.append(loop.call_later(
                (due - now) / 1000,
                lambda: self.keep(loop.create_task(self._reality_check(sid)))))
        self.timers[sid] = timers

    def _disarm(self, sid: str) -> None:
        for timer in self.timers.pop(sid, ()):
            timer.cancel()

    async def _reality_check(self, sid: str) -> None:
        """A reality check came due: show it, unless it was answered meanwhile (on
        another gateway), then wait for the next."""
        record = await self.store.session(sid)
        if record is None or sid not in self.records:
            return
        self.records[sid] = record
        now = now_ms()
        due = record.reality_check_at()
        if due is not None and now >= due:
            message = reality_check(record, now)
            for client in self.clients.get(sid, ()):
                if client in self.joined:  # one still in its welcome is shown it at join
                    client.send_message(message)
        else:
            self._disarm(sid)
            self._arm(record)

    async def _end(self, sid: str, reason: str, now: int) -> SessionRecord | None:
        record = await self.store.end_session(sid, reason, now)
        if record is not None:
            await self.announce(SessionEnd(session_id=sid, reason=record.reason or reason))
        return record

    async def _end_quietly(self, sid: str, reason: str) -> None:
        """End it from a timer: a store outage is logged, and the next hello or slip of the
        session ends it again."""
        with contextlib.suppress(StoreUnavailable):
            await self._end(sid, reason, now_ms())


def _with_reserved(record: SessionRecord, round_id: str, reserved: int) -> SessionRecord:
    """``record`` as it will be once what this gateway has on its way is counted (staked
    in ``round_id``)."""
    return msgspec.structs.replace(record, staked=record.staked + reserved, round_id=round_id,
                                   round_staked=record.staked_in(round_id) + reserved)
