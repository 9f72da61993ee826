"""The store contract: the ledger, the bets, the rounds and each table's event log.

Two implementations keep it: SQLite (the embedded default) and PostgreSQL (scale-out). Both pass
the same contract tests (tests/unit/test_store_contract.py), so what is said here holds for
both:

* Money is double entry. Accounts: players, ``house``, one hold per round
  (``hold:<round_id>``) and ``external``, the other side of every deposit. Every money
  move is a transfer with an id, applied once; so the sum over all accounts is always 0
  and :meth:`Store.audit` can prove it.
* Bets come in slips (:class:`~livetable.betting.slips.SlipRequest`, docs/design.md §6), taken by
  :meth:`Store.place_slip` atomically and all together or not at all: the round must be
  open (``betting``, before ``closes_at`` by the time the slip reached the gateway), the
  limits and the balance must allow every bet of it, and ``(player, slip_id)`` is an
  idempotency key. A ``place_bet`` is a slip of one without a ``slip_id``
  (:meth:`~livetable.betting.slips.BetRequest.as_slip`), idempotent by
  ``(player, bet_id)``. The semantics — check order, codes, messages, mappers — are in
  :mod:`livetable.betting.slips`; slips arriving together share one transaction or script call.
* :meth:`Store.commit_step` stores one engine step — its effects on the ledger, its events
  and the engine's new state — in one transaction, *before* the step is announced.
  Settling or cancelling a round marks it ``settling`` / ``refunding`` and settles its
  first chunk of bets in that same transaction; :meth:`Store.settle_pending` settles the
  rest, one bounded chunk per call, each bet once (a crash between chunks loses nothing:
  the next call, by any process, goes on where the last committed chunk stopped).
  Settling and refunding are idempotent by round id and by bet.
* Tips to the dealer (:class:`~livetable.betting.tips.TipRequest`): :meth:`Store.place_tip`
  moves a tip from the player to the house's tip account once by ``(player, tip_id)``;
  :meth:`Store.tip_record` reads them back for the Bet Record.
* Operators' sessions (:class:`~livetable.betting.sessions.SessionRecord`): a launch whose
  request id is the operator's first (:meth:`Store.first_launch`: kept in the store, so a
  captured launch replayed after a restart is refused too) opens one
  (:meth:`Store.open_session`), every gateway reads it (:meth:`Store.session`), the
  operator or its time limit ends it once, the first reason staying (:meth:`Store.end_session`),
  and the gateways count its figures into it (:meth:`Store.count_session`,
  :meth:`Store.reality_checked`); needed until its token expires, not after. Each store
  keeps a ``sessions`` record (store/sqlite/ledger/schema.py, store/postgres/schema.py): the
  counting adds in place, the end changes only a session not yet ended, rows past
  ``expires_at`` go as new sessions open (tests/unit/test_store_contract.py holds every
  store to it); the announcement to other gateways is the bus's, not the store's.

Errors say what happened (:class:`StoreError`): :class:`StoreUnavailable` when the store
could not be reached or timed out (retry: every write is idempotent), a domain error when
the request itself is refused (:class:`UnknownPlayer`, :class:`InsufficientBalance`,
:class:`StepRefused`, :class:`~livetable.accounts.AccountError` for an id in the ledger's
own namespace). A slip's refusals are answers (:class:`~livetable.betting.slips.Rejection`).
Any other exception out of a store is a bug: callers let it through (logged, the
connection closed, the table halted), never retry it as an outage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from livetable import protocol as p
from livetable.betting.sessions import SessionRecord
from livetable.betting.slips import Rejection, SlipRequest, settled_message
from livetable.betting.tips import TipAnswer, TipRequest
from livetable.engine.effects import Effect
from livetable.rules.fairness import ShoeRecord
from livetable.store.bets import RoundFigures, RoundView, Withdrawal

__all__ = [
    "AuditReport",
    "FenceRefused",
    "InsufficientBalance",
    "OutOfStep",
    "Settled",
    "StepRefused",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "UnknownPlayer",
    "cursor_of",
    "out_of_step",
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
    store (:class:`~livetable.host.runner.TableRunner`), and steps on from there.
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


def events_wanted(head: Sequence[int] | None, epoch: int, seq: int,
                  limit: int) -> int | None:
    """How many events a resume from ``(epoch, seq)`` needs from a log whose head is
    ``head`` (its epoch and seq): None when the log cannot serve it — another epoch, a seq
    past the head, more than ``limit`` behind (:meth:`Store.events_after`)."""
    if head is None or head[0] != epoch or seq > head[1] or head[1] - seq > limit:
        return None
    return int(head[1]) - seq


def events_read(rows: Sequence[Sequence[Any]], seq: int, wanted: int) -> list[bytes] | None:
    """The frames of ``rows`` ((seq, frame) in order) after ``seq``; None if the log no
    longer holds each of the ``wanted`` (trimmed)."""
    if len(rows) != wanted or (rows and rows[0][0] != seq + 1):
        return None
    return [bytes(row[1]) for row in rows]


class FenceRefused(OutOfStep):
    """A newer fencing token has written the table: another engine drives it now. Nothing
    of the step was written; this engine stops driving the table."""


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


class Store(RoundFigures, Protocol):
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

    async def place_tip(self, tip: TipRequest, now: int) -> TipAnswer:
        """Take a tip to the dealer in one transaction, as ``betting.tips.judge_tip``
        judges it: its mirror deposit first (seamless), then ``amount`` moved from the
        player to ``accounts.HOUSE_TIPS`` by the transfer ``tip.transfer_id`` and the tip
        kept; once by ``(player, tip_id)``, a re-send answered as the first send was."""
        ...

    async def tip_record(self, player_id: str, before: str | None,
                         since: int | None) -> list[p.TipRecordEntry]:
        """The player's tips of a Bet Record page, newest first (at most
        ``store.bets.MAX_TIPS_PER_PAGE``): placed at or after ``since`` (the page's oldest
        bet; None: no bound, the last page) and before the bet the cursor ``before`` names
        was placed (None: the first page). Pages of bets so tile the tips, each once."""
        ...

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

    # --- operators' sessions (betting/sessions.py) ---

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

    async def first_launch(self, operator_id: str, request_id: str, now: int, until: int) -> bool:
        """Whether no launch of ``operator_id`` used ``request_id``; kept until ``until``."""
        ...

    async def close(self) -> None: ...
