"""The store contract: the ledger, the bets, the rounds and each table's event log.

Two implementations keep it: SQLite (the embedded default) and PostgreSQL (scale-out). Both pass
the same contract tests (tests/unit/test_store_contract.py), so what is said here holds for
both:

* Money is double entry. Accounts: players, ``house``, one hold per round
  (``hold:<round_id>``) and ``external``, the other side of every deposit. Every money
  move is a transfer with an id, applied once; so the sum over all accounts is always 0
  and :meth:`Store.audit` can prove it.
* Bets come in slips (:class:`~livetable.engine.bets.SlipRequest`, docs/design.md §6), taken by
  :meth:`Store.place_slip` atomically and all together or not at all: the round must be
  open (``betting``, before ``closes_at`` by the time the slip reached the gateway), the
  limits and the balance must allow every bet of it, and ``(player, slip_id)`` is an
  idempotency key. :meth:`Store.place_bet` is a slip of one, idempotent by
  ``(player, bet_id)``. The semantics — check order, codes, messages, mappers — are in
  :mod:`livetable.engine.bets`; slips arriving together share one transaction or script call.
* :meth:`Store.commit_step` stores one engine step — its effects on the ledger, its events
  and the engine's new state — in one transaction, *before* the step is announced.
  Settling or cancelling a round marks it ``settling`` / ``refunding`` and settles its
  first chunk of bets in that same transaction; :meth:`Store.settle_pending` settles the
  rest, one bounded chunk per call, each bet once (a crash between chunks loses nothing:
  the next call, by any process, goes on where the last committed chunk stopped).
  Settling and refunding are idempotent by round id and by bet.

* Operators' sessions (:class:`~livetable.engine.sessions.SessionRecord`): a launch
  opens one (:meth:`Store.open_session`), every gateway reads it (:meth:`Store.session`),
  the operator or its time limit ends it once, the first reason staying
  (:meth:`Store.end_session`), and the gateways count its figures into it
  (:meth:`Store.count_session`, :meth:`Store.reality_checked`). A session is needed until
  its token expires (``expires_at``), not after. Each store keeps a ``sessions`` record
  (SQLite: store/ledger/schema.py migration 6; PostgreSQL: store/postgres/schema.py
  migration 4): the counting adds in
  place (``staked = staked + …``), the end changes only a session not yet ended, the SQL
  stores delete rows past ``expires_at`` as new sessions open, and every store passes
  ``test_a_session_is_kept_counted_checked_and_ended_once`` in
  tests/unit/test_store_contract.py; the announcement to other gateways is the bus's
  (``Bus.end_session``), not the store's.

Errors say what happened (:class:`StoreError`): :class:`StoreUnavailable` when the store
could not be reached or timed out (retry: every write is idempotent), a domain error when
the request itself is refused (:class:`UnknownPlayer`, :class:`InsufficientBalance`,
:class:`StepRefused`, and :class:`~livetable.accounts.AccountError`
for an id in the ledger's own namespace). A slip's refusals are answers, not errors
(:class:`~livetable.engine.bets.Rejection`). Any other exception out of a store is a bug:
callers let it through (logged, the connection closed, the table halted), never retry it
as an outage.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

import msgspec

from livetable import protocol as p
from livetable.engine.bets import BetRequest, Rejection, SlipRequest, settled_message
from livetable.engine.effects import Effect
from livetable.engine.sessions import SessionRecord
from livetable.rules.fairness import ShoeRecord
from livetable.store.bets import RoundView, Withdrawal

__all__ = [
    "AuditReport",
    "FenceRefused",
    "InsufficientBalance",
    "OutOfStep",
    "Settled",
    "SlipQueue",
    "StepRefused",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "UnknownPlayer",
    "cursor_of",
    "out_of_step",
    "take_in_batches",
]


def cursor_of(before: str | None) -> int | None:
    """A Bet Record cursor (``next`` of the page before) as a bet sequence number; None
    for the first page. Anything else is refused, never passed on to SQL (a number
    past 2^63 overflowed SQLite's integers)."""
    if before is None or before == "":
        return None
    if not (before.isascii() and before.isdigit() and len(before) <= 15):
        raise ValueError(f"not a Bet Record cursor: {before[:32]!r}")
    return int(before)


@dataclass
class AuditReport:
    ok: bool
    total: int
    deposits: int
    house: int
    problems: list[str] = field(default_factory=list)


class StoreError(Exception):
    """What a store raises on purpose. Anything else out of a store is a bug."""


class StoreUnavailable(StoreError):
    """The store could not be reached, or did not answer in time: an outage, not a verdict.

    Raised for the driver's connection errors and timeouts (asyncpg's lost connection, a
    read-only standby …; SQLite's "database is locked", disk I/O …; redis-py's
    ``ConnectionError`` on the bus), the driver's exception chained as the cause. Whether the
    operation took effect is unknown: every write is idempotent by its id, so the caller
    retries it (the gateway answers ``unavailable``: resend the same bet; the runner tries
    the step again). Every other exception out of a store is a bug, never retried as an
    outage.
    """


class UnknownPlayer(StoreError):
    """No player account has that id (a deposit or withdrawal to nobody)."""


class InsufficientBalance(StoreError):
    """A withdrawal larger than the account's balance (nothing was moved)."""


class StepRefused(StoreError):
    """An engine step the ledger cannot apply — a settled round without a result for a
    spot that was bet — so nothing of it was written. A bug upstream of the store."""


class OutOfStep(StepRefused):
    """A step that does not follow on from what the store holds — its first event is not
    the stored head + 1, the head is not where this engine left it, or the round is not
    in the state the step expects — so nothing of it was written.

    Not a bug: the store is behind what the engine wrote (a failover lost the tail) or
    another engine wrote meanwhile. The engine drops its state and reloads it from the
    store (:class:`~livetable.server.runner.TableRunner`), and steps on from there.
    """


#: A table's head in a store: ``(epoch, seq)`` of its last stored event.
Head = tuple[int, int]


def out_of_step(table: str, head: Head | None, events: list[tuple[int, int, bytes]],
                left: Head | None) -> str | None:
    """Why a step of ``table`` does not follow on from the stored ``head`` (None: no step
    stored yet), or None if it does. Every store checks it inside the step's transaction or
    script, and refuses the step with :class:`OutOfStep` if not.

    A step with events follows on if its first is the head + 1 of the same epoch (a table
    with no event yet, or a later epoch, starts at 1). A step without events (a tick that
    only moves a deadline) has no number to check: it follows on if the head is still
    where this store last left it (``left``, the head after the last step it wrote for the
    table; None when it does not know — after a failed call, in a new process). Without
    this the engine ahead of its store would store its state over the store's, and the
    reload would bring it back ahead.
    """
    if head is None:
        return None
    if events:
        epoch, first = events[0][0], events[0][1]
        if ((epoch == head[0] and first == head[1] + 1)
                or (first == 1 and (head[1] == 0 or epoch > head[0]))):
            return None
        return (f"table {table}: a step from {(epoch, first)} does not follow the stored "
                f"head {head}")
    if left is not None and left != head:
        return (f"table {table}: the store's head is {head}, not {left} where this engine "
                f"left it")
    return None


class FenceRefused(OutOfStep):
    """A newer fencing token has written the table: another engine drives it now. Nothing
    of the step was written; this engine stops driving the table."""


C = TypeVar("C", bound=type)
A = TypeVar("A")


#: How long a settling step waits for the slips a store was handed before it (see
#: :class:`Unanswered`): far longer than a batch takes, short enough that a store that
#: stopped answering does not hold the round.
SETTLE_WAITS_FOR_SLIPS = 2.0


class Unanswered:
    """The slips a store has been handed and not answered yet.

    A slip that reached the gateway before ``closes_at`` is taken until the round starts
    settling (:func:`livetable.engine.bets.judge_slip`). A busy store may still have such
    slips in its queue when the engine's settling step comes: the step would be stored
    first and they would be refused. So the settling step waits (at most
    :data:`SETTLE_WAITS_FOR_SLIPS`) for the slips handed to the store before it — the
    slips of this process; another gateway's are covered by the close grace.
    """

    def __init__(self) -> None:
        self.futures: set[asyncio.Future[Any]] = set()

    def add(self, future: asyncio.Future[Any]) -> None:
        self.futures.add(future)
        future.add_done_callback(self.futures.discard)

    async def answered(self, most: float = SETTLE_WAITS_FOR_SLIPS) -> None:
        """Return once every slip handed over so far is answered, or after ``most`` s."""
        if self.futures:
            await asyncio.wait(set(self.futures), timeout=most)


class SlipQueue(Generic[A]):
    """The slips a store is handed, taken ``most`` at a time by its ``take`` (one
    transaction or one writer call a batch: the group commit), and the wait for them that
    a settling step makes (:class:`Unanswered`). One object for every store, so that a
    store only says how it takes a batch.

    :meth:`place` is what a store's ``place_slip`` awaits; a batch starts when the slips
    before it are taken (:func:`take_in_batches`), so slips that come while the store is
    busy share the next one.
    """

    def __init__(self, take: Callable[[list[tuple[SlipRequest, int]]], Awaitable[list[A]]],
                 most: int, in_flight: int = 1) -> None:
        self._take = take
        self._most = most
        self._in_flight = in_flight
        self._pending: list[tuple[SlipRequest, int, asyncio.Future[A]]] = []
        self._unanswered = Unanswered()
        self._draining: asyncio.Task[None] | None = None

    async def place(self, slip: SlipRequest, now: int) -> A:
        """``slip``'s answer, once the batch it joins is taken."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[A] = loop.create_future()
        self._pending.append((slip, now, future))
        self._unanswered.add(future)
        if self._draining is None:
            self._draining = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            await take_in_batches(self._pending, self._take, self._most,
                                  in_flight=self._in_flight)
        finally:
            self._draining = None

    async def answered(self, most: float = SETTLE_WAITS_FOR_SLIPS) -> None:
        """Every slip handed over so far answered (or ``most`` s gone): a settling step
        waits for them (see :class:`Unanswered`)."""
        await self._unanswered.answered(most)

    async def drained(self) -> None:
        """The batches under way taken (a store closing)."""
        if self._draining is not None:
            await self._draining


async def take_in_batches(
        pending: list[tuple[SlipRequest, int, asyncio.Future[A]]],
        take: Callable[[list[tuple[SlipRequest, int]]], Awaitable[list[A]]],
        most: int, in_flight: int = 1) -> None:
    """Take the slips waiting in ``pending`` (each with its ``now`` and the future its
    caller awaits), ``most`` at a time, until none is left — slips that arrive meanwhile
    join a later batch. ``take`` answers a batch in order; its answers resolve the
    batch's futures, and its exception (an outage, a bug) fails each of them, never the
    batches after. (Both stores' group commit: one transaction or script call a batch.)

    When a batch is answered, the next one (the slips that arrived meanwhile) goes to the
    store *before* the answered batch's callers are woken: waking hundreds of them, each
    writing its answer to its connection, takes the event loop tens of milliseconds, and
    the store would sit idle through them while the next slips waited. Measured in
    ``bench/run.py --only bets`` (SQLite writer process): the next batch reached the
    writer 3–25 ms after the last was answered; now it is there before, as a rule.

    ``in_flight`` batches at most are being taken at once, handed to ``take`` in order:
    more than one only for a store that takes them one after another in the order it got
    them (the SQLite writer process, which then starts the next batch as soon as it has
    sent an answer, not once this process has read it).
    """
    taking: set[asyncio.Task[None]] = set()

    def hand_over() -> None:
        """Start batches from ``pending`` while there is room in flight."""
        while pending and len(taking) < in_flight:
            batch = pending[:most]
            del pending[:most]
            taking.add(asyncio.ensure_future(_take_batch(batch, take, answered)))

    def answered() -> None:
        """Called by a batch whose answers came, before it wakes its callers: its place
        is free, and the next batch goes to the store now."""
        taking.discard(cast("asyncio.Task[None]", asyncio.current_task()))
        hand_over()

    try:
        hand_over()
        while taking:
            await asyncio.wait(set(taking), return_when=asyncio.FIRST_COMPLETED)
            # a batch cancelled before its answer never called answered(): its place too
            taking.difference_update([task for task in taking if task.done()])
            hand_over()  # and slips that came while there was room in flight
    finally:
        for task in taking:
            task.cancel()


async def _take_batch(batch: list[tuple[SlipRequest, int, asyncio.Future[A]]],
                      take: Callable[[list[tuple[SlipRequest, int]]], Awaitable[list[A]]],
                      answered: Callable[[], None]) -> None:
    try:
        answers = await take([(slip, now) for slip, now, _ in batch])
    except Exception as exc:
        answered()
        for _, _, future in batch:
            if not future.done():
                future.set_exception(exc)
        return
    answered()
    for (_, _, future), answer in zip(batch, answers, strict=True):
        if not future.done():
            future.set_result(answer)


def surface_outages(is_outage: Callable[[BaseException], bool]) -> Callable[[C], C]:
    """A class decorator: in every public coroutine method of a store, the driver's outage
    errors (``is_outage``) surface as :class:`StoreUnavailable`.

    One wrapping point per store, so that no method forgets it and no call site repeats
    it. (The SQLite store's one point is its writer, ``SQLiteStore._run``.)
    """
    def wrap(cls: C) -> C:
        for name, method in list(vars(cls).items()):
            if not name.startswith("_") and inspect.iscoroutinefunction(method):
                setattr(cls, name, _surfacing(method, is_outage))
        return cls
    return wrap


def _surfacing(method: Callable[..., Awaitable[Any]],
               is_outage: Callable[[BaseException], bool]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except Exception as exc:
            if is_outage(exc):
                raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc
            raise
    return call


class Settled(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A private ``bet_settled`` for one player: the settled bet, flat — one object per
    bet, a plain array in msgpack (a 2,000-bet chunk crosses from the SQLite writer
    process as 2,000 arrays, not 4,000 nested maps).
    :attr:`message` is the frame."""

    player_id: str
    bet_id: str
    round_id: str
    spot: str
    amount: int
    outcome: str
    odds: int
    returned: int
    balance: int  # the player's, after the round's settlement

    @property
    def balance_after(self) -> int:
        """:attr:`balance`, by the name a stored bet gives it (for :func:`settled_message`)."""
        return self.balance

    @property
    def message(self) -> p.BetSettled:
        return settled_message(self)


class Store(Protocol):
    async def ensure_player(
        self, player_id: str, name: str, initial_balance: int, now: int
    ) -> p.PlayerView: ...

    async def player(self, player_id: str) -> p.PlayerView | None: ...

    async def deposit(self, transfer_id: str, player_id: str, amount: int, now: int) -> int:
        """Move ``amount`` from ``external`` to the player, once by ``transfer_id``; the
        player's balance after it. :class:`UnknownPlayer` if there is no such player."""
        ...

    async def withdraw(self, transfer_id: str, player_id: str, amount: int, now: int, *,
                       against: str | None = None) -> int | None:
        """Move ``amount`` from the player to ``external``, once by ``transfer_id``; the
        player's balance after it. With ``against`` (a deposit's id) only if that deposit
        was applied — else nothing moves and the answer is None. A balance short of
        ``amount`` raises :class:`InsufficientBalance`, an unknown player
        :class:`UnknownPlayer`. (A seamless wallet's money leaves
        livetable's books this way: see docs/operator.md, "the ledger".)"""
        ...

    async def withdraw_many(self, moves: list[Withdrawal], now: int) -> list[str | None]:
        """:meth:`withdraw` each of ``moves`` in one transaction (a round's close): for
        each, None if done (or nothing to take back), else why not — one that cannot be
        done does not stop the others."""
        ...

    async def place_slip(self, slip: SlipRequest, now: int) -> p.SlipAccepted | Rejection: ...

    async def place_bet(self, bet: BetRequest, now: int) -> p.BetAccepted | p.BetRejected: ...

    async def commit_step(
        self,
        table: str,
        state: bytes,
        events: list[tuple[int, int, bytes]],
        effects: list[Effect],
        now: int,
        *,
        snapshot: bytes = b"",
    ) -> list[Settled]:
        """Store one engine step: its events, its effects, the new ``state`` (sealed by the
        store), and ``snapshot``, the table's public snapshot after it (encoded): a
        store that gateways read from another process (PostgreSQL) keeps it beside the sealed
        state, so that a gateway catches up without the shoe key; SQLite, whose gateway
        runs beside the engine, has no use for it."""
        ...

    async def settle_pending(self, table: str, now: int) -> tuple[list[Settled], bool]: ...

    async def load_table(self, table: str) -> bytes | None: ...

    async def events_after(
        self, table: str, epoch: int, seq: int, limit: int
    ) -> list[bytes] | None: ...

    async def settlements_for_rounds(
        self, player_id: str, round_ids: list[str]
    ) -> list[p.BetSettled]: ...

    async def round_settlements(self, round_id: str) -> list[tuple[str, p.BetSettled]]:
        """Every settled (or refunded) bet of the round, with its player's id: a round's
        close reads them once for all its players."""
        ...

    async def bet_record(
        self, player_id: str, limit: int, before: str | None
    ) -> tuple[list[p.BetRecordEntry], str | None]: ...

    async def round_view(self, round_id: str) -> RoundView | None: ...

    async def shoe_view(self, shoe_id: str) -> ShoeRecord | None:
        """An ended auto shoe, revealed (docs/design.md §7); None for any other shoe id."""
        ...

    async def audit(self) -> AuditReport: ...

    async def identity(self, create: bool = False) -> str | None:
        """This store's identity: a random id written once, when the ledger is new.

        A process remembers the identity it started on; a store that answers another one,
        or none (a database restored from an old backup or swapped under it), is not the
        ledger it was using, and the process turns not-ready instead of carrying on. With
        ``create`` a missing identity is written (what a process does at start)."""
        ...

    # --- operators' sessions (engine/sessions.py) ---

    async def open_session(self, record: SessionRecord) -> None:
        """Keep a session a launch opened (once by its id), until its token expires."""
        ...

    async def session(self, session_id: str) -> SessionRecord | None:
        """The session as every gateway sees it; None if unknown or past its expiry."""
        ...

    async def end_session(self, session_id: str, reason: str,
                          now: int) -> SessionRecord | None:
        """End it at ``now`` unless it ended before (the first reason stays); the session
        after, None if unknown."""
        ...

    async def count_session(self, session_id: str, round_id: str | None, staked: int,
                            returned: int) -> SessionRecord | None:
        """Add what one slip staked in ``round_id``, or what settlements returned
        (``round_id`` None), to the session's figures."""
        ...

    async def reality_checked(self, session_id: str, now: int) -> SessionRecord | None:
        """The player answered a reality check at ``now``."""
        ...

    async def close(self) -> None: ...
