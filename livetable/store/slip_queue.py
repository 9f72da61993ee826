"""The slips a store is handed, and how it takes them: ``most`` at a time, one transaction
or one writer call a batch (the group commit), the next batch handed over before the last
one's callers are woken; and the wait a settling step makes for the slips handed over
before it. One queue for every store (:class:`SlipQueue`), so that a store only says how
it takes a batch; the contract the stores keep is :mod:`livetable.store.base`.

``take`` is best what lies below the store — the SQLite store's writer
(store/sqlite/ledger_writer.py) — so that a slip goes down through the store, the queue
and the writer, and no batch calls back up into the store that queued it (the path of a
bet: docs/benchmarks/postgres.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, cast

from livetable.betting.slips import SlipRequest

__all__ = ["SETTLE_WAITS_FOR_SLIPS", "SlipQueue", "Unanswered", "take_in_batches"]

A = TypeVar("A")


#: How long a settling step waits for the slips a store was handed before it (see
#: :class:`Unanswered`): far longer than a batch takes, short enough that a store that
#: stopped answering does not hold the round.
SETTLE_WAITS_FOR_SLIPS = 2.0


class Unanswered:
    """The slips a store has been handed and not answered yet.

    A slip that reached the gateway before ``closes_at`` is taken until the round starts
    settling (:func:`livetable.betting.slips.judge_slip`). A busy store may still have such
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
            batch = [entry for entry in pending[:most] if not entry[2].done()]
            del pending[:most]  # a slip whose caller stopped waiting (answered unavailable)
            if batch:  # is not taken after it was
                taking.add(asyncio.ensure_future(_take_batch(batch, take, answered)))

    def answered() -> None:
        """A batch's answers came, before it wakes its callers: the next one goes now."""
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
