"""The wallet log: every call to a seamless wallet, and the outbox of those still owed.

Why it exists (docs/design.md §5, docs/operator.md): with a seamless wallet the operator holds the
money, and a call whose answer is lost leaves money in doubt unless livetable remembers it.
So every call is written here *before* it is sent, and kept with its state and answer:

* a ``debit`` starts ``pending`` (sent, unanswered) and becomes ``ok``, ``refused`` (the
  operator answered a code: nothing moved) or ``unknown`` (timeout, non-200, garbage).
  The move out of ``pending`` is a compare-and-set, so the gateway that waits for the
  answer and the sweeper that gives up on it (past ``deadline``) can never both win.
  ``closed_by`` names the credit or rollback that closes it (``refused`` for a refusal);
* a ``credit`` or ``rollback`` is the outbox: written ``queued`` together with the
  ``closed_by`` of the debits it closes (its ``debits``; one transaction), then delivered until the
  operator answers ``ok`` (state ``ok``), each attempt counted, with its last answer.

Ids are deterministic (:func:`credit_tx_id`, :func:`rollback_tx_id`): whoever writes a
closing call — the gateway that saw a debit fail, the sweeper after a crash, a second
engine after a failover — writes the same one, and writing it twice is a no-op.

Two implementations keep the one contract (tests/unit/test_wallet_log.py): SQLite
(:mod:`livetable.operator.log_sqlite`, table ``wallet_calls`` in the embedded database file)
and PostgreSQL (:mod:`livetable.operator.log_postgres`, beside the scale-out ledger). Both
are :class:`BatchedWalletLog`: a group commit of the calls that arrive together.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
from collections.abc import Sequence
from typing import Any, Protocol, cast

import msgspec

# The records live with the SQL that keeps them in the ledger's writer process (the store
# layer, which imports nothing of the operator's); every log and caller reads them here.
from livetable.store.base import StoreUnavailable
from livetable.store.sqlite.ledger import wallet as w
from livetable.store.sqlite.ledger.wallet import (
    CallRecord,
    CallState,
    CallSummary,
    Method,
    WalletCall,
)

__all__ = ["BatchedWalletLog", "CallRecord", "CallState", "CallSummary", "Method",
           "WalletCall", "WalletLog", "credit_tx_id", "debit_tx_id", "mirror_id", "rollback_tx_id"]

#: Calls in one transaction at most (a batch stays a few milliseconds in the store).
MAX_CALLS_PER_TRANSACTION = 1000


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def credit_tx_id(installation: str, round_id: str, player_id: str, currency: str) -> str:
    """The one credit of ``player_id`` in ``currency`` for ``round_id`` in this
    installation (ids are free text: hashed, so two tuples can never spell the same id).

    ``installation`` is the store's identity (:meth:`~livetable.store.base.Store.identity`,
    written once when the ledger is new): round ids start at ``t1.1.1`` again in a second
    installation or after a store is wiped, and an operator answers a ``tx_id`` it has
    seen with its first answer, so without it the second installation's credit would be
    taken for the first's and the player's win dropped."""
    return "c-" + _digest(installation, round_id, player_id, currency)


#: The debits' ids' own random numbers: seeded from the system's entropy, and again in a
#: forked child (a child must never send its parent's ids), apart from the module
#: ``random`` (a library seeding that one would make ids repeat).
_DEBIT_IDS = random.Random()
os.register_at_fork(after_in_child=_DEBIT_IDS.seed)


def debit_tx_id() -> str:
    """A new debit's ``tx_id``: ``d-`` and 128 random bits in hex, unique for ever as a
    uuid4 is (docs/operator.md), in the same shape — without a ``getrandom`` system call
    and a UUID object a debit: one is made for every seamless bet. Random from the first
    digit, as a uuid4's, not a fixed part and a counter: ids sharing their first 26
    characters would have every comparison of PostgreSQL's index on ``tx_id`` walk them."""
    return f"d-{_DEBIT_IDS.getrandbits(128):032x}"


def rollback_tx_id(debit_tx_id: str) -> str:
    """The one rollback of a debit. A debit's ``tx_id`` is unique for ever
    (:func:`debit_tx_id`), and so is this."""
    return "r-" + _digest(debit_tx_id)


#: What a tip's ``slip_key`` starts with (operator/tipping.py): its debit is no round's.
TIP_KEYS = "tip:"


def mirror_id(tx_id: str) -> str:
    """The ledger transfer id (deposit or withdrawal) that mirrors wallet call ``tx_id``."""
    return f"wallet:{tx_id}"


class WalletLog(Protocol):
    async def begin_debit(self, call: WalletCall) -> WalletCall | None:
        """Write a new ``pending`` debit; or, if the player's ``slip_key`` was debited
        before, return that debit (and write nothing)."""
        ...

    async def answer_debit(self, debit: WalletCall, state: CallState, answer: str, now: int,
                           closed_by: str | None = None) -> bool:
        """``pending`` → ``state`` with ``answer``, if still pending (False if not)."""
        ...

    async def keep_debit(self, debit: WalletCall, closed_by: str, now: int) -> bool:
        """An open ``ok`` debit the operator keeps (a tip) closed by ``closed_by``, once
        its ledger side is written (False: it was closed already)."""
        ...

    async def debit_of(self, player_id: str, table_id: str, slip_key: str
                       ) -> WalletCall | None:
        """The debit of the player's ``slip_key`` at ``table_id``, if there was one (what a
        re-sent slip's first send earned); writes nothing."""
        ...

    async def expire_debits(self, before: int, now: int) -> list[WalletCall]:
        """Every ``pending`` debit whose deadline is before ``before`` → ``unknown``."""
        ...

    async def enqueue(self, calls: list[WalletCall], now: int) -> None:
        """Queue ``calls`` (credits, rollbacks; one already there is left alone) and close
        the debits each names (its ``debits``) by it, together: a round's every credit in
        one write."""
        ...

    async def open_rounds(self, limit: int) -> list[tuple[str, bool]]:
        """The rounds with debits not closed yet, oldest first, each with whether any of
        them is ``unknown``: what the sweeper reads four times a second, so it costs the
        rounds, not their debits (a round in play holds thousands)."""
        ...

    async def open_debits(self, limit: int, rounds: Sequence[str] | None = None,
                          unknown_of: Sequence[str] = ()) -> list[WalletCall]:
        """Debits not closed yet, oldest first: every one, or (``rounds`` given) those of
        ``rounds`` and the ``unknown`` ones of ``unknown_of``."""
        ...

    async def due(self, now: int, limit: int) -> list[WalletCall]:
        """Queued credits and rollbacks due for delivery, soonest first."""
        ...

    async def delivered(self, call: WalletCall, ok: bool, answer: str, next_at: int,
                        now: int) -> None:
        """One delivery attempt of a queued call: its answer; ``ok`` ends it."""
        ...

    async def calls(self, round_id: str | None = None, player_id: str | None = None,
                    limit: int = 10_000) -> list[WalletCall]:
        """The log, oldest first, for one round and/or one player."""
        ...

    async def backlog(self) -> int:
        """Credits and rollbacks not yet answered ``ok``."""
        ...

    async def totals(self, round_id: str | None = None, player_id: str | None = None,
                     operator: str | None = None) -> list[list[Any]]:
        """The report's figures over the whole log, of one round, player, operator if given
        (store/sqlite/ledger/wallet_totals.py): every selected call's first, then each round's."""
        ...

    async def days(self, operator: str | None = None) -> list[list[Any]]:
        """The per-day summary's rows over the whole log (store/sqlite/ledger/wallet_totals.py)."""
        ...

    async def close(self) -> None: ...


class BatchedWalletLog:
    """The :class:`WalletLog` as a group commit: every call is a step
    (:mod:`livetable.store.sqlite.ledger.wallet`), and the steps that arrive while a batch is
    being written wait for one another and go in the next transaction together — the
    event loop only queues a step and awaits its answer.

    Why. Every seamless slip writes the log twice (its debit before the call, the answer
    after), at the close of betting hundreds at once, and a round's close delivers
    thousands of credits, each answer written. A transaction per call was a commit per
    call (with PostgreSQL's synchronous standby, a network round trip too): hundreds of
    commits a second queued behind one another while players waited for their bets.

    A store's log says only how a batch is written (:meth:`_run`: one transaction, each
    step's :class:`~livetable.store.sqlite.ledger.wallet.Outcome` in order) and when a driver's
    error is an outage (:meth:`_is_outage`: surfaced as
    :class:`~livetable.store.base.StoreUnavailable`). A batch whose transaction fails
    fails each of its calls, never the batches after.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[w.AnyStep, asyncio.Future[Any]]] = []
        self._draining: asyncio.Task[None] | None = None

    async def _run(self, steps: list[w.AnyStep]) -> list[w.Outcome]:
        raise NotImplementedError

    def _is_outage(self, exc: BaseException) -> bool:
        raise NotImplementedError

    # --- the group commit ----------------------------------------------------------------

    async def _in_batch(self, step: w.AnyStep) -> Any:
        """Run ``step`` inside the next transaction; steps that come while one is running
        go together in the one after."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((step, future))
        if self._draining is None:
            self._draining = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch = self._pending[:MAX_CALLS_PER_TRANSACTION]
                del self._pending[:MAX_CALLS_PER_TRANSACTION]
                try:
                    outcomes = await self._run([step for step, _ in batch])
                except Exception as exc:  # the transaction failed: each call did
                    failure: Exception = exc
                    if self._is_outage(exc):
                        failure = StoreUnavailable(f"{type(exc).__name__}: {exc}")
                        failure.__cause__ = exc
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(failure)
                    continue
                for (_, future), outcome in zip(batch, outcomes, strict=True):
                    if future.done():  # its caller gave up waiting
                        continue
                    if outcome.error is None:
                        future.set_result(outcome.value)
                    else:
                        future.set_exception(StoreUnavailable(outcome.error) if outcome.outage
                                             else RuntimeError(outcome.error))
        finally:
            self._draining = None

    async def _finish(self) -> None:
        """Wait for the batch being written (before closing)."""
        if self._draining is not None:
            await self._draining

    async def _calls(self, step: w.AnyStep) -> list[WalletCall]:
        return cast(list[WalletCall], await self._in_batch(step))

    # --- the calls (the WalletLog contract) -----------------------------------------------

    async def begin_debit(self, call: WalletCall) -> WalletCall | None:
        return cast(WalletCall | None, await self._in_batch(w.BeginDebit(call)))

    async def answer_debit(self, debit: WalletCall, state: CallState, answer: str, now: int,
                           closed_by: str | None = None) -> bool:
        return bool(await self._in_batch(
            w.AnswerDebit(debit.tx_id, state, answer, now, closed_by)))

    async def keep_debit(self, debit: WalletCall, closed_by: str, now: int) -> bool:
        return bool(await self._in_batch(w.KeepDebit(debit.tx_id, closed_by, now)))

    async def debit_of(self, player_id: str, table_id: str, slip_key: str
                       ) -> WalletCall | None:
        return cast(WalletCall | None,
                    await self._in_batch(w.DebitOf(player_id, table_id, slip_key)))

    async def expire_debits(self, before: int, now: int) -> list[WalletCall]:
        return await self._calls(w.ExpireDebits(before, now))

    async def enqueue(self, calls: list[WalletCall], now: int) -> None:
        await self._in_batch(w.Enqueue(calls, now))

    async def open_rounds(self, limit: int) -> list[tuple[str, bool]]:
        rows = msgspec.json.decode(await self._in_batch(w.OpenRounds(limit)))
        return [(str(round_id), bool(unknown)) for round_id, unknown in rows]

    async def open_debits(self, limit: int, rounds: Sequence[str] | None = None,
                          unknown_of: Sequence[str] = ()) -> list[WalletCall]:
        return await self._calls(w.OpenDebits(
            limit, None if rounds is None else list(rounds), list(unknown_of)))

    async def due(self, now: int, limit: int) -> list[WalletCall]:
        return await self._calls(w.Due(now, limit))

    async def delivered(self, call: WalletCall, ok: bool, answer: str, next_at: int,
                        now: int) -> None:
        await self._in_batch(w.Delivered(call.tx_id, ok, answer, next_at, now))

    async def calls(self, round_id: str | None = None, player_id: str | None = None,
                    limit: int = 10_000) -> list[WalletCall]:
        return await self._calls(w.Calls(round_id, player_id, limit))

    async def backlog(self) -> int:
        return int(await self._in_batch(w.Backlog()))

    async def totals(self, round_id: str | None = None, player_id: str | None = None,
                     operator: str | None = None) -> list[list[Any]]:
        rows = await self._in_batch(w.Totals(round_id, player_id, operator))
        return cast(list[list[Any]], msgspec.json.decode(rows))

    async def days(self, operator: str | None = None) -> list[list[Any]]:
        return cast(list[list[Any]], msgspec.json.decode(await self._in_batch(w.Days(operator))))
